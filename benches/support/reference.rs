//! Reference servers for the stdio bench: the least a stdio MCP server does for a call
//! that adds a todo, measured beside the real one so that its server time can be read
//! against this host's own floor rather than against another machine's.
//!
//! The bench binary runs one of them when started with `REFERENCE_SERVER` set (it starts
//! itself): no second binary to build, and each is the same code on every host.
//!
//! - `rmcp_echo`: rmcp over its non-blocking stdio pipes, on the runtime the server uses
//!   (multi-thread, one worker), with one tool that answers with its arguments. What the
//!   framework costs alone.
//! - `rmcp_commit`: the same, the tool inserting a todo row and an audit row in one SQLite
//!   transaction (WAL, `synchronous = NORMAL`) on a connection behind a mutex: what a
//!   plain rmcp server with a durable store does.
//! - `line_echo`: no framework: a blocking loop that reads a line, parses it and writes a
//!   reply line. What a process on a pipe costs.
//! - `line_commit`: the same loop committing the two rows before it replies. Beside
//!   `line_echo`, what one commit costs.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Mutex;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use rusqlite::Connection;
use serde_json::{Value, json};

/// The variable that makes the bench binary a reference server.
pub const VARIABLE: &str = "REFERENCE_SERVER";
/// The variable that names the folder of its database.
pub const DIR_VARIABLE: &str = "REFERENCE_DIR";
/// Its values, each with the name of its row in the bench's table.
pub const KINDS: [(&str, &str); 4] = [
    ("rmcp_echo", "add_task, reference: rmcp echo"),
    ("rmcp_commit", "add_task, reference: rmcp + commit"),
    ("line_echo", "add_task, reference: line loop"),
    ("line_commit", "add_task, reference: line loop + commit"),
];

/// Serves stdio as the reference `kind`, on a database in `dir`, until stdin ends.
pub fn serve(kind: &str, dir: &Path) {
    match kind {
        "rmcp_echo" => serve_rmcp(Reference { store: None }),
        "rmcp_commit" => serve_rmcp(Reference {
            store: Some(Mutex::new(Store::open(dir))),
        }),
        "line_echo" => serve_lines(None),
        "line_commit" => serve_lines(Some(Store::open(dir))),
        other => panic!("{VARIABLE}={other}: no such reference server"),
    }
}

/// Two tables shaped as the server's `todos` and `audit_log`, on one connection.
struct Store {
    conn: Connection,
}

impl Store {
    fn open(dir: &Path) -> Store {
        let conn = Connection::open(dir.join("reference.db")).expect("open the database");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS todos (
                 id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                 status TEXT NOT NULL DEFAULT 'open', due TEXT,
                 tags TEXT NOT NULL DEFAULT '[]', created_at TEXT NOT NULL,
                 completed_at TEXT);
             CREATE TABLE IF NOT EXISTS audit_log (
                 id INTEGER PRIMARY KEY, at TEXT NOT NULL, tool TEXT NOT NULL,
                 args TEXT NOT NULL, outcome TEXT NOT NULL);",
        )
        .expect("create the tables");
        Store { conn }
    }

    /// Commits a todo titled as `arguments` say and the call's audit row; returns the
    /// todo as the reply's `data`.
    fn add(&mut self, arguments: &Value) -> Value {
        let title = arguments["title"].as_str().unwrap_or("untitled");
        let at = format!("{:?}", std::time::SystemTime::now());
        let tx = self.conn.transaction().expect("begin");
        tx.prepare_cached("INSERT INTO todos (title, created_at) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute((title, &at)))
            .expect("insert the todo");
        let id = tx.last_insert_rowid();
        tx.prepare_cached(
            "INSERT INTO audit_log (at, tool, args, outcome) VALUES (?1, 'add_task', ?2, 'ok')",
        )
        .and_then(|mut s| s.execute((&at, arguments.to_string())))
        .expect("insert the audit row");
        tx.commit().expect("commit");
        json!({"id": id, "title": title, "status": "open", "tags": [], "createdAt": at})
    }
}

struct Reference {
    store: Option<Mutex<Store>>,
}

impl ServerHandler for Reference {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"}}});
        let tool = Tool::new(
            "add_task",
            "Adds a todo.",
            schema.as_object().cloned().unwrap_or_default(),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let data = match &self.store {
            // A `std::sync::Mutex` held across no await: the commit is the whole call.
            Some(store) => store.lock().expect("the store's lock").add(&arguments),
            None => arguments,
        };
        Ok(CallToolResult::structured(json!({"ok": true, "data": data})).into())
    }
}

fn serve_rmcp(reference: Reference) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let service = reference
            .serve(rmcp::transport::io::stdio_pipes())
            .await
            .expect("initialize");
        service.waiting().await.expect("serve until stdin ends");
    });
}

fn serve_lines(mut store: Option<Store>) {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line.expect("read a line");
        let request: Value = serde_json::from_str(&line).expect("a JSON line");
        let Some(id) = request.get("id") else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "line loop", "version": "0"}
            }),
            Some("tools/call") => {
                let arguments = &request["params"]["arguments"];
                let data = match &mut store {
                    Some(store) => store.add(arguments),
                    None => arguments.clone(),
                };
                let structured = json!({"ok": true, "data": data});
                json!({
                    "content": [{"type": "text", "text": structured.to_string()}],
                    "structuredContent": structured
                })
            }
            _ => json!({}),
        };
        // Serialised whole, then written at once: one `write` a reply, as the server does.
        let mut reply = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .expect("a reply serialises");
        reply.push(b'\n');
        stdout.write_all(&reply).expect("write the reply");
        stdout.flush().expect("flush the reply");
    }
}

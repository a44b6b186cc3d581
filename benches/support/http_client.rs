//! The small blocking HTTP/1.1 client of the HTTP benches, so that every server they
//! measure sees the same client costs: it writes a request whole and reads the response
//! to its end (`Content-Length`, or the chunks of an SSE response, which rmcp sends for
//! a session's requests).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};

/// One keep-alive HTTP/1.1 connection.
pub struct Connection {
    read: BufReader<TcpStream>,
    write: TcpStream,
    host: String,
}

impl Connection {
    pub fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        Connection {
            read: BufReader::new(stream.try_clone().unwrap()),
            write: stream,
            host: addr.to_string(),
        }
    }

    /// POSTs `body` with `headers`; returns the response's headers and body.
    pub fn post(&mut self, path: &str, headers: &[String], body: &str) -> (Vec<String>, String) {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for header in headers {
            request.push_str(header);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.write.write_all(request.as_bytes()).unwrap();
        self.response()
    }

    fn response(&mut self) -> (Vec<String>, String) {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            self.read.read_line(&mut line).unwrap();
            let line = line.trim_end().to_owned();
            if line.is_empty() {
                break;
            }
            head.push(line);
        }
        assert!(
            head[0].contains(" 200 ") || head[0].contains(" 202 "),
            "{head:?}"
        );
        let header = |name: &str| {
            head.iter().find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let mut body = Vec::new();
        if let Some(length) = header("content-length") {
            body.resize(length.parse().unwrap(), 0);
            self.read.read_exact(&mut body).unwrap();
        } else {
            loop {
                let mut size = String::new();
                self.read.read_line(&mut size).unwrap();
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.read.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        (head, String::from_utf8(body).unwrap())
    }
}

/// Opens a 2025-11-25 session on `connection`, each request carrying `auth` (none, or an
/// `Authorization` header): the headers of the session's requests.
pub fn open_session(connection: &mut Connection, auth: &[String]) -> Vec<String> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}});
    let (head, _) = connection.post("/mcp", auth, &init.to_string());
    let session = head
        .iter()
        .find_map(|h| h.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .to_owned();
    let mut headers = auth.to_vec();
    headers.push(format!("Mcp-Session-Id: {session}"));
    headers.push("MCP-Protocol-Version: 2025-11-25".to_owned());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    connection.post("/mcp", &headers, &initialized.to_string());
    headers
}

/// The `tools/call` of `add_task` with id `id`.
pub fn add_task(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "add_task", "arguments": {"title": format!("bench {id}")}}})
    .to_string()
}

/// Checks that an SSE body answers call `id` with a todo.
pub fn check_added(id: u64, body: &str) {
    let reply: Value = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .find(|m: &Value| m["id"] == json!(id))
        .unwrap_or_else(|| panic!("no reply to {id} in {body}"));
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
}

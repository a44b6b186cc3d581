//! The small blocking HTTP/1.1 client of the HTTP benches, so that every server they
//! measure sees the same client costs: it writes a request whole and reads the response
//! to its end (`Content-Length`, or the chunks of an SSE response, which rmcp sends for
//! a session's requests); and the address a server it starts listens on.

#![allow(dead_code)] // each bench uses some of it

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::time::Duration;

use serde_json::{Value, json};

/// The address a server started with `--http` listens on, from the first line of its
/// stderr that names it (`child`'s stderr must be piped); the rest is read and dropped,
/// so that the server never blocks on a full pipe.
pub fn listening_address(child: &mut Child) -> SocketAddr {
    let stderr = BufReader::new(child.stderr.take().expect("a piped stderr"));
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in stderr.lines().map_while(Result::ok) {
            if !sent && let Some(at) = line.split("http://").nth(1) {
                sent = sender
                    .send(at.split('/').next().unwrap().to_owned())
                    .is_ok();
            }
        }
    });
    receiver
        .recv_timeout(Duration::from_secs(10))
        .expect("the server says where it listens")
        .parse()
        .unwrap()
}

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

    /// POSTs the JSON `body` with `headers`, expecting 200 or 202; returns the response's
    /// headers and body.
    pub fn post(&mut self, path: &str, headers: &[String], body: &str) -> (Vec<String>, String) {
        const JSON: &str = "Content-Type: application/json\r\n\
                            Accept: application/json, text/event-stream\r\n";
        let (head, body) = self.request("POST", path, JSON, headers, body);
        assert!(
            head[0].contains(" 200 ") || head[0].contains(" 202 "),
            "{head:?}"
        );
        (head, body)
    }

    /// Sends a request with the header lines of `fixed` (each ending in CRLF) and
    /// `headers`; returns the response's status line and headers, and its body.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        fixed: &str,
        headers: &[String],
        body: &str,
    ) -> (Vec<String>, String) {
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{fixed}Content-Length: {}\r\n",
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

    /// The host this connection's requests name.
    pub fn host(&self) -> &str {
        &self.host
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

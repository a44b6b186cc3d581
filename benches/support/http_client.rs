//! The small blocking HTTP/1.1 client of the HTTP benches, so that every server they
//! measure sees the same client costs: it writes a request whole and reads the response
//! to its end (`Content-Length`, or the chunks of an SSE response, which rmcp sends for
//! a session's requests).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

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

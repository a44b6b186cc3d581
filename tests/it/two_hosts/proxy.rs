//! A TCP proxy between one host and PostgreSQL, which a test cuts and restores: a host cut
//! off from the database by the network, alive all along. Cut, it closes every connection
//! it carries and refuses new ones; restored, it listens on the same port again.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Proxy {
    port: u16,
    target: SocketAddr,
    running: Option<Running>,
}

/// A proxy while it forwards: its accepting thread and the connections it carries.
struct Running {
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `target` on a free port of 127.0.0.1, forwarding.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy listens");
        let port = listener.local_addr().unwrap().port();
        Proxy {
            port,
            target,
            running: Some(forward(listener, target)),
        }
    }

    /// `url` (a PostgreSQL URL naming the proxy's target) through the proxy.
    pub fn url(&self, url: &str) -> String {
        let target = self.target.to_string();
        assert!(url.contains(&target), "{url} names {target}");
        url.replacen(&target, &format!("127.0.0.1:{}", self.port), 1)
    }

    /// Closes every connection through the proxy and refuses new ones.
    pub fn cut(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        running.stop.store(true, Ordering::SeqCst);
        running.accepting.join().unwrap();
        for stream in running.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Forwards again, on the same port.
    pub fn restore(&mut self) {
        if self.running.is_none() {
            let listener =
                TcpListener::bind(("127.0.0.1", self.port)).expect("the proxy listens again");
            self.running = Some(forward(listener, self.target));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Accepts connections on `listener` until stopped, each forwarded to `target` by two
/// threads, one a direction.
fn forward(listener: TcpListener, target: SocketAddr) -> Running {
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let streams = Arc::new(Mutex::new(Vec::<TcpStream>::new()));
    let accepting = {
        let (stop, streams) = (Arc::clone(&stop), Arc::clone(&streams));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    Err(error) => panic!("the proxy cannot accept: {error}"),
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let mut carried = streams.lock().unwrap();
                carried.push(client.try_clone().unwrap());
                carried.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
            // The listener goes with this thread: the port refuses connections from now.
        })
    };
    Running {
        stop,
        streams,
        accepting,
    }
}

/// Copies `from` to `to` until either side ends, then ends both.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}

//! A watch on the first bytes of a connection: a server reached without TLS that asks
//! for the password in clear text or as an MD5 hash is refused before it gets either.
//!
//! Why at the byte level: `tokio-postgres` answers both requests by itself, with no hook
//! between the request and the answer, so a man in the middle who declines TLS (which
//! `sslmode=prefer` accepts) and asks for the password in clear would get it. The watch
//! reads what the server sends until it has either chosen TLS (then the rest is encrypted
//! and out of its sight) or authenticated the client, and it fails the read that carries
//! a refused request: nothing is written back.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// PostgreSQL's `SSLRequest`: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// The authentication requests of the protocol this watch acts on.
const AUTH_OK: u32 = 0;
const AUTH_CLEARTEXT: u32 = 3;
const AUTH_MD5: u32 = 5;

/// A stream whose server-side bytes are watched until authentication is over.
pub(crate) struct Guarded<S> {
    inner: S,
    allow_insecure: bool,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing sent yet.
    Start,
    /// TLS was asked for: the server's next byte says whether it agrees.
    SslAsked,
    /// The connection is in plain text: the server's messages are read as they come.
    Plain(Parser),
    /// TLS is on, or authentication is over: nothing more to watch.
    Done,
}

/// Where the watch stands in the server's message stream: the header read so far (type,
/// length and, for `R` messages, the request's code), or the bytes of a body to skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Parser {
    header: [u8; 9],
    have: usize,
    skip: usize,
}

/// What a run of the server's bytes says.
enum Seen {
    More(Parser),
    Authenticated,
    Refused(&'static str),
}

impl Parser {
    fn feed(mut self, mut bytes: &[u8]) -> Seen {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let want = if self.have >= 5 && self.header[0] == b'R' {
                9
            } else {
                5
            };
            let n = (want - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have < want {
                continue;
            }
            let length = u32::from_be_bytes(self.header[1..5].try_into().expect("4 bytes"));
            if self.header[0] == b'R' && self.have == 5 {
                continue; // the request's code follows
            }
            let body_read = self.have - 5;
            self.skip = (length as usize).saturating_sub(4 + body_read);
            self.have = 0;
            if self.header[0] == b'R' {
                match u32::from_be_bytes(self.header[5..9].try_into().expect("4 bytes")) {
                    AUTH_OK => return Seen::Authenticated,
                    AUTH_CLEARTEXT => return Seen::Refused("in clear text"),
                    AUTH_MD5 => return Seen::Refused("as an MD5 hash"),
                    _ => {}
                }
            }
        }
        Seen::More(self)
    }
}

impl<S> Guarded<S> {
    /// `allow_insecure`: answer cleartext and MD5 requests without TLS all the same.
    pub(super) fn new(inner: S, allow_insecure: bool) -> Guarded<S> {
        Guarded {
            inner,
            allow_insecure,
            state: if allow_insecure {
                State::Done
            } else {
                State::Start
            },
        }
    }

    /// Watches `bytes`, just read from the server; `Err` when they ask for a refused answer.
    fn watch(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.state == State::SslAsked
            && let Some((&answer, rest)) = bytes.split_first()
        {
            if answer == b'S' {
                self.state = State::Done;
                return Ok(());
            }
            self.state = State::Plain(Parser::default());
            bytes = rest;
        }
        let State::Plain(parser) = self.state else {
            return Ok(());
        };
        match parser.feed(bytes) {
            Seen::More(parser) => self.state = State::Plain(parser),
            Seen::Authenticated => self.state = State::Done,
            Seen::Refused(how) => {
                self.state = State::Done;
                debug_assert!(!self.allow_insecure);
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the server asked for the password {how} on a connection without \
                         TLS; refused, as anyone on the way could read or replay it (use \
                         TLS: sslmode=verify-full; or allow it with --pg-allow-insecure-auth)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if this.state != State::Done => {
                let read = buf.filled()[before..].to_vec();
                if let Err(error) = this.watch(&read) {
                    buf.set_filled(before);
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.state == State::Start && !buf.is_empty() {
            self.state = if buf.starts_with(&SSL_REQUEST) {
                State::SslAsked
            } else {
                State::Plain(Parser::default())
            };
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_request(code: u32, body: &[u8]) -> Vec<u8> {
        let mut message = vec![b'R'];
        message.extend_from_slice(&(8 + body.len() as u32).to_be_bytes());
        message.extend_from_slice(&code.to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    fn plain() -> Guarded<()> {
        let mut guarded = Guarded::new((), false);
        guarded.state = State::Plain(Parser::default());
        guarded
    }

    #[test]
    fn a_cleartext_or_md5_request_without_tls_is_refused_even_split_across_reads() {
        for (code, body) in [(AUTH_CLEARTEXT, &[][..]), (AUTH_MD5, &[1, 2, 3, 4][..])] {
            let bytes = auth_request(code, body);
            let mut guarded = plain();
            let (head, tail) = bytes.split_at(6);
            guarded.watch(head).unwrap();
            let error = guarded.watch(tail).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        }
    }

    #[test]
    fn a_scram_exchange_ending_in_ok_ends_the_watch() {
        let mut guarded = plain();
        let mut bytes = auth_request(10, b"SCRAM-SHA-256\0\0");
        bytes.extend(auth_request(11, b"r=abc,s=def,i=4096"));
        bytes.extend(auth_request(12, b"v=xyz"));
        bytes.extend(auth_request(AUTH_OK, b""));
        for byte in &bytes {
            guarded.watch(std::slice::from_ref(byte)).unwrap();
        }
        assert_eq!(guarded.state, State::Done);
        // Whatever follows (a query's rows, say) is not read as a request.
        guarded.watch(&auth_request(AUTH_CLEARTEXT, b"")).unwrap();
    }

    #[test]
    fn a_server_that_chose_tls_is_not_watched_and_one_that_declined_is() {
        let mut tls = Guarded::new((), false);
        tls.state = State::SslAsked;
        let mut bytes = vec![b'S'];
        bytes.extend(auth_request(AUTH_CLEARTEXT, b""));
        tls.watch(&bytes).unwrap();

        let mut declined = Guarded::new((), false);
        declined.state = State::SslAsked;
        bytes[0] = b'N';
        assert!(declined.watch(&bytes).is_err());
    }

    #[test]
    fn allowed_insecure_requests_are_answered() {
        let mut guarded = Guarded::new((), true);
        guarded.watch(&auth_request(AUTH_MD5, &[0; 4])).unwrap();
    }
}

//! Opening one connection: the URL read as libpq reads it (`sslmode`, `sslrootcert`, the
//! password from the environment or the password file), the socket, TLS, and the watch
//! on the password requests of a server reached without TLS.

use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};
use std::time::Duration;

use deadpool_postgres::Connect;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;
use tokio_postgres::config::Host;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::guard::Guarded;
use super::tls::{self, Roots, SslMode};
use crate::store::StoreError;

/// How long opening a connection may take, unless the URL says (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything needed to open a connection to one database, shared by the pool and the
/// listener.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) config: Config,
    tls: MakeRustlsConnect,
    allow_insecure_auth: bool,
}

pub(crate) type Stream = Guarded<Socket>;
pub(crate) type Conn = Connection<Stream, <MakeRustlsConnect as MakeTlsConnect<Stream>>::Stream>;

impl Target {
    /// Reads `url`; `allow_insecure_auth`: answer a server that asks for the password in
    /// clear text or as MD5 without TLS.
    pub(crate) fn parse(url: &str, allow_insecure_auth: bool) -> Result<Target, StoreError> {
        let (mut config, mode, roots) = read_url(url)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        super::password::fill(&mut config);
        Ok(Target {
            tls: tls::connector(mode, roots.as_ref())?,
            config,
            allow_insecure_auth,
        })
    }

    /// Opens a connection: each host of the URL in turn, the first that answers.
    pub(crate) async fn open(
        &self,
        config: &Config,
    ) -> Result<(Client, Conn), tokio_postgres::Error> {
        let timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT);
        let ports = config.get_ports();
        let (hosts, addresses) = (config.get_hosts(), config.get_hostaddrs());
        let mut last = None;
        for i in 0..hosts.len().max(addresses.len()) {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            // libpq: `hostaddr` is where to connect, `host` the name the certificate is
            // checked against (the address itself where no name is given).
            let host = match (hosts.get(i), addresses.get(i)) {
                (Some(Host::Tcp(name)), Some(address)) => {
                    Peer::Tcp(address.to_string(), name.clone())
                }
                (_, Some(address)) => Peer::Tcp(address.to_string(), address.to_string()),
                (Some(Host::Tcp(name)), None) => Peer::Tcp(name.clone(), name.clone()),
                #[cfg(unix)]
                (Some(Host::Unix(dir)), None) => Peer::Unix(dir.clone()),
                (None, None) => unreachable!("i counts hosts or addresses"),
            };
            let opened = tokio::time::timeout(timeout, self.open_one(config, &host, port)).await;
            match opened {
                Ok(Ok(connected)) => return Ok(connected),
                Ok(Err(error)) => last = Some(error),
                Err(_) => {
                    let late = io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no connection within {} s", timeout.as_secs_f64()),
                    );
                    last = self.fail(config, late).await.err();
                }
            }
        }
        match last {
            Some(error) => Err(error),
            None => {
                self.fail(config, io::Error::other("the URL names no host"))
                    .await
            }
        }
    }

    async fn open_one(
        &self,
        config: &Config,
        host: &Peer,
        port: u16,
    ) -> Result<(Client, Conn), tokio_postgres::Error> {
        let (socket, name, local) = match host {
            Peer::Tcp(address, name) => match TcpStream::connect((address.as_str(), port)).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    (Socket::Tcp(stream), name.as_str(), false)
                }
                Err(error) => return self.fail(config, error).await,
            },
            #[cfg(unix)]
            Peer::Unix(dir) => {
                match UnixStream::connect(dir.join(format!(".s.PGSQL.{port}"))).await {
                    Ok(stream) => (Socket::Unix(stream), "localhost", true),
                    Err(error) => return self.fail(config, error).await,
                }
            }
        };
        // A Unix socket never leaves the machine: libpq does not use TLS on it, and a
        // password sent there cannot be read on the way.
        let mut config = config.clone();
        if local {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        }
        let stream = Guarded::new(socket, self.allow_insecure_auth || local);
        let mut tls = self.tls.clone();
        let connector =
            <MakeRustlsConnect as MakeTlsConnect<Stream>>::make_tls_connect(&mut tls, name)
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error));
        match connector {
            Ok(connector) => config.connect_raw(stream, connector).await,
            Err(error) => self.fail(&config, error).await,
        }
    }

    /// `error` as `tokio-postgres` reports a socket's failure. Its errors have no public
    /// constructor: the error is handed to it as the stream's first answer.
    async fn fail(
        &self,
        config: &Config,
        error: io::Error,
    ) -> Result<(Client, Conn), tokio_postgres::Error> {
        let mut config = config.clone();
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        let stream = Guarded::new(Socket::Failed(Some(error)), true);
        let mut tls = self.tls.clone();
        let connector =
            <MakeRustlsConnect as MakeTlsConnect<Stream>>::make_tls_connect(&mut tls, "localhost")
                .expect("localhost is a server name");
        config.connect_raw(stream, connector).await
    }
}

/// Where one connection goes: an address (or name) with the name its certificate must
/// bear, or a Unix socket's folder.
enum Peer {
    Tcp(String, String),
    #[cfg(unix)]
    Unix(std::path::PathBuf),
}

/// The pool's way to open a connection, driven on the connections' runtime.
pub(super) struct Connector(pub(super) Target);

impl Connect for Connector {
    fn connect(
        &self,
        config: &Config,
    ) -> BoxFuture<'_, Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> {
        let config = config.clone();
        Box::pin(async move {
            let (client, connection) = self.0.open(&config).await?;
            let driver = tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "PostgreSQL connection ended");
                }
            });
            Ok((client, driver))
        })
    }
}

/// The settings `url` gives, with its TLS parameters read as libpq reads them.
pub(super) fn read_url(url: &str) -> Result<(Config, SslMode, Option<Roots>), StoreError> {
    let (rest, mode, roots) = split_tls_parameters(url)?;
    let mut config = Config::from_str(&rest)
        .map_err(|error| StoreError::BadLocation(format!("not a PostgreSQL URL ({error})")))?;
    config.ssl_mode(mode.wire());
    Ok((config, mode, roots))
}

/// `url` without the parameters `tokio-postgres` does not read, and what they say.
fn split_tls_parameters(url: &str) -> Result<(String, SslMode, Option<Roots>), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), SslMode::default(), None));
    };
    let mut mode = SslMode::default();
    let mut roots = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = SslMode::parse(&percent_decoded(value)?)?,
            "sslrootcert" => roots = Some(Roots::parse(&percent_decoded(value)?)),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, mode, roots))
}

fn percent_decoded(text: &str) -> Result<String, StoreError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| StoreError::BadLocation(format!("bad %-escape in `{text}`")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| StoreError::BadLocation(format!("`{text}` is not UTF-8")))
}

/// A connection's socket.
pub(crate) enum Socket {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    /// A socket that could not be opened: its error, given at the first use.
    Failed(Option<io::Error>),
}

/// What a connected socket reads from and writes to.
trait Io: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

impl Socket {
    /// Polls the connected stream with `poll`; a socket that could not be opened answers
    /// its error instead.
    fn poll_stream<T>(
        &mut self,
        poll: impl FnOnce(Pin<&mut dyn Io>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match self {
            Socket::Tcp(stream) => poll(Pin::new(stream)),
            #[cfg(unix)]
            Socket::Unix(stream) => poll(Pin::new(stream)),
            Socket::Failed(error) => Poll::Ready(Err(error
                .take()
                .unwrap_or_else(|| io::Error::other("not connected")))),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_stream(|stream| stream.poll_read(cx, buf))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_stream(|stream| stream.poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_stream(|stream| stream.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing to shut down on a socket that never opened.
        if let Socket::Failed(_) = *self {
            return Poll::Ready(Ok(()));
        }
        self.poll_stream(|stream| stream.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_out_of_the_url_and_the_rest_kept() {
        let (rest, mode, roots) = split_tls_parameters(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(mode, SslMode::VerifyFull);
        assert_eq!(roots, Some(Roots::File("/tmp/ca.pem".into())));
        let (rest, mode, roots) = split_tls_parameters("postgres://u@h/db").unwrap();
        assert_eq!(
            (rest.as_str(), mode, roots),
            ("postgres://u@h/db", SslMode::Prefer, None)
        );
        assert!(split_tls_parameters("postgres://u@h/db?sslmode=allow").is_err());
    }

    #[test]
    fn a_url_with_tls_parameters_is_redacted_to_its_place_and_its_password_noticed() {
        let url =
            "postgres://u:secret@db.example:5433/tasks?sslmode=verify-full&sslrootcert=/ca.pem";
        assert_eq!(
            super::super::redacted(url),
            "postgres://db.example:5433/tasks"
        );
        assert!(super::super::url_holds_password(url));
        assert!(!super::super::url_holds_password(
            "postgres://u@db.example/tasks?sslmode=require"
        ));
    }
}

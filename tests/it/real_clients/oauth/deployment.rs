//! A deployment as an operator makes one with OAuth: a real authorization server
//! (`tests/clients/issuer.mjs`, oidc-provider as locked in `tests/clients`) with two people
//! and the dashboard's client registered, and the server binary serving HTTP with
//! `--oauth-issuer`; and the TypeScript SDK's OAuth client (`ts_oauth.mjs`) run as either
//! person.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::Value;

use super::super::clients::{Ran, clients_dir, command, installed, node, npm_package, run};
use crate::support::Sandbox;

/// A person with an account at the issuer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Person {
    pub(crate) name: &'static str,
    pub(crate) password: &'static str,
}

pub(crate) const ALICE: Person = Person {
    name: "alice",
    password: "alice-correct-horse-3f9a",
};
pub(crate) const BOB: Person = Person {
    name: "bob",
    password: "bob-battery-staple-7c1e",
};
/// Allows a client to read only, whatever it asks for.
pub(crate) const CAROL: Person = Person {
    name: "carol",
    password: "carol-tr0ub4dor-5b2d",
};

/// The scopes the server asks for by default, one per kind of operation; the issuer
/// grants them on its resource.
pub(crate) const SCOPES: [&str; 4] = ["tasks:read", "tasks:todos", "tasks:run", "tasks:answer"];

/// The dashboard's client id at the issuer.
pub(crate) const DASHBOARD_CLIENT: &str = "mcp-task-server-dashboard";

/// How long the issuer or the server may take to say it listens.
const STARTING: Duration = Duration::from_secs(20);

/// A child's stderr, kept whole for a failure's message and the checks on what was logged.
#[derive(Clone, Default)]
pub(crate) struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Reads `stderr` into the log on a thread of its own, sending the first line that
    /// `wanted` picks out.
    fn follow(
        &self,
        stderr: impl std::io::Read + Send + 'static,
        wanted: fn(&str) -> Option<String>,
    ) -> mpsc::Receiver<String> {
        let (sender, receiver) = mpsc::channel();
        let lines = self.0.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(found) = wanted(&line) {
                    sent = sender.send(found).is_ok();
                }
                lines.lock().unwrap().push(line);
            }
        });
        receiver
    }

    pub(crate) fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }
}

/// The authorization server, killed when dropped.
pub(crate) struct Issuer {
    child: Child,
    /// Its issuer identifier, `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// Its key-rotation endpoint (`POST …/rotate`, `POST …/drop`).
    pub(crate) admin: String,
    /// The id of the key it signs with at start.
    pub(crate) first_kid: String,
    pub(crate) log: Log,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary serving HTTP with `--oauth-issuer`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// `{base}/mcp`: the endpoint, and the resource its tokens must name.
    pub(crate) url: String,
    pub(crate) log: Log,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The issuer, the server and what the clients need to reach them.
pub(crate) struct Deployment {
    pub(crate) sandbox: Sandbox,
    pub(crate) node: PathBuf,
    pub(crate) issuer: Issuer,
    pub(crate) server: Server,
}

/// A Node.js that runs oidc-provider and the TypeScript SDK, both installed as locked.
fn tools() -> Result<PathBuf, String> {
    npm_package("oidc-provider")?;
    npm_package("@modelcontextprotocol/sdk")?;
    // oidc-provider 9 supports the LTS releases from 22 on.
    node((22, 0))
}

impl Deployment {
    /// Starts both, the server with `extra` arguments after the OAuth ones; `None` after a
    /// visible note when the clients are not installed (a failure under
    /// `TASKS_REAL_CLIENTS=required`).
    pub(crate) fn start(extra: &[&str]) -> Option<Deployment> {
        let node = installed(tools())?;
        let sandbox = Sandbox::for_clients();
        // The issuer must know the resource and the dashboard's redirect before the
        // server starts, and the server the issuer: the server's port is picked first.
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let secret = sandbox.file("dashboard-secret", &random_secret());
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&secret, private).unwrap();
        let issuer = Issuer::start(&node, &base, &secret);
        let server = Server::start(&sandbox, port, &issuer, &secret, extra);
        Some(Deployment {
            sandbox,
            node,
            issuer,
            server,
        })
    }

    /// Runs `ts_oauth.mjs <scenario>` as `person`, with `extra` arguments.
    pub(crate) async fn client(&self, scenario: &str, person: Person, extra: &[&str]) -> Ran {
        let mut client = command(&self.node, &self.sandbox);
        client
            .arg(clients_dir().join("ts_oauth.mjs"))
            .arg(scenario)
            .args(["--url", &self.server.url])
            .args(["--user", person.name, "--password", person.password])
            .args(extra);
        run(client).await
    }

    /// Everything both logged, for a failure's message.
    pub(crate) fn logs(&self) -> String {
        format!(
            "--- server ---\n{}\n--- issuer ---\n{}",
            self.server.log.text(),
            self.issuer.log.text()
        )
    }
}

impl Issuer {
    fn start(node: &PathBuf, server: &str, secret: &std::path::Path) -> Issuer {
        let scopes = SCOPES.join(" ");
        let dashboard = format!(
            "{DASHBOARD_CLIENT}:{}:{server}/login/callback",
            secret.display()
        );
        let mut child = Command::new(node)
            .arg(clients_dir().join("issuer.mjs"))
            .args(["--resource", &format!("{server}/mcp")])
            .args(["--scopes", &scopes])
            .args(["--client", &dashboard])
            .args(people_args())
            .current_dir(clients_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the issuer");
        let log = Log::default();
        let _ = log.follow(child.stderr.take().unwrap(), |_| None);
        let (sender, receiver) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = receiver.recv_timeout(STARTING).unwrap_or_else(|_| {
            panic!("the issuer did not start in {STARTING:?}:\n{}", log.text())
        });
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the issuer's first line ({e}): {line}\n{}", log.text()));
        let text = |key: &str| ready[key].as_str().unwrap().to_owned();
        Issuer {
            child,
            url: text("issuer"),
            admin: text("admin"),
            first_kid: text("kid"),
            log,
        }
    }
}

fn people_args() -> Vec<String> {
    let mut args: Vec<String> = [ALICE, BOB, CAROL]
        .iter()
        .flat_map(|p| ["--user".to_owned(), format!("{}:{}", p.name, p.password)])
        .collect();
    args.extend(["--consent".to_owned(), format!("{}=tasks:read", CAROL.name)]);
    args
}

impl Server {
    fn start(
        sandbox: &Sandbox,
        port: u16,
        issuer: &Issuer,
        secret: &std::path::Path,
        extra: &[&str],
    ) -> Server {
        let line = sandbox.server();
        let mut args: Vec<OsString> = line[1..].to_vec();
        args.extend(["--http".into(), format!("127.0.0.1:{port}").into()]);
        args.extend(["--oauth-issuer".into(), issuer.url.clone().into()]);
        args.extend(["--oauth-client-id".into(), DASHBOARD_CLIENT.into()]);
        args.extend(["--oauth-client-secret-file".into(), secret.into()]);
        args.extend(extra.iter().map(OsString::from));
        let mut child = Command::new(&line[0])
            .args(&args)
            .env_remove("TASKS_DB_PATH")
            .env("RUST_LOG", "info")
            .current_dir(sandbox.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let log = Log::default();
        let listening = log.follow(child.stderr.take().unwrap(), |line| {
            line.contains("http://").then(String::new)
        });
        if listening.recv_timeout(STARTING).is_err() {
            let _ = child.kill();
            panic!("the server did not listen in {STARTING:?}:\n{}", log.text());
        }
        let base = format!("http://127.0.0.1:{port}");
        Server {
            child,
            url: format!("{base}/mcp"),
            base,
            log,
        }
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().unwrap().port()
}

/// The dashboard's client secret: random, so no two runs share one.
fn random_secret() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

//! A PostgreSQL cluster of a test's own (never the shared one on 5432): `initdb` in a
//! temporary folder, its own port and socket folder, TLS with a CA and a server
//! certificate made here, stopped on drop.
//!
//! Where PostgreSQL is not installed, [`Cluster::start`] says what is missing: a test
//! skips, saying so, or under CI (`TASKS_REAL_CLIENTS=required` or
//! `TASKS_TEST_POSTGRES=required`, as `.ci/run` sets them, after `tests/postgres/ensure`
//! has installed it) fails (`postgres_tls.rs`). `benches/pg_tls.rs` includes this file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The role the store logs in as, its password and its database.
pub(crate) const USER: &str = "tasks";
pub(crate) const PASSWORD: &str = "pw-never-in-logs-7c1f";
pub(crate) const DATABASE: &str = "tasks";
/// A role the server asks for its password in clear text (`pg_hba` method `password`).
pub(crate) const CLEARTEXT_USER: &str = "cleartext";
/// A role the server asks for an MD5 hash of its password (`pg_hba` method `md5`, the
/// password kept as MD5).
pub(crate) const MD5_USER: &str = "md5user";

pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub(crate) port: u16,
}

impl Cluster {
    /// A running cluster, with TLS on when `tls`; `Err` naming what is missing where
    /// PostgreSQL is not installed.
    pub(crate) fn start(tls: bool) -> Result<Cluster, String> {
        let bin = bin_dir().ok_or(
            "initdb not found under /usr/lib/postgresql/*/bin or on PATH (tests/postgres/ensure \
             installs PostgreSQL)",
        )?;
        let dir = tempfile::tempdir().expect("a temporary folder");
        let cluster = Cluster {
            port: free_port(),
            dir,
            bin,
        };
        cluster.make(tls);
        Ok(cluster)
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA that signed the server's certificate, and another that did not.
    pub(crate) fn ca(&self) -> PathBuf {
        self.path("ca.crt")
    }

    pub(crate) fn other_ca(&self) -> PathBuf {
        self.path("other-ca.crt")
    }

    /// The store's URL, without a password, with `params` (`sslmode=…&…`).
    pub(crate) fn url(&self, params: &str) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{}/{DATABASE}?{params}",
            self.port
        )
    }

    /// The store's URL with its password, `verify-full` against the cluster's CA.
    pub(crate) fn verified_url(&self) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{DATABASE}?sslmode=verify-full&sslrootcert={}",
            self.port,
            self.ca().display()
        )
    }

    /// What the server wrote to its log (its stderr) so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }

    /// Runs `sql` as the superuser over the Unix socket.
    pub(crate) fn sql(&self, sql: &str) -> String {
        let out = self.as_postgres(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
                .arg(self.path("sock"))
                .args([
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-c",
                    sql,
                ]),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `pg_ctl restart`: every connection is closed; the server is back when it returns.
    pub(crate) fn restart(&self) {
        self.pg_ctl(&["-m", "fast", "restart"]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        self.as_postgres(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.path("data"))
                .arg("-l")
                .arg(self.path("server.log"))
                .args(["-w", "-t", "60"])
                .args(args),
        );
    }

    fn make(&self, tls: bool) {
        let data = self.path("data");
        std::fs::create_dir(self.path("sock")).unwrap();
        if tls {
            self.make_certificates();
        }
        chown_to_postgres(self.dir.path());
        self.as_postgres(
            Command::new(self.bin.join("initdb"))
                .args(["-N", "-A", "trust", "-U", "postgres", "-E", "UTF8", "-D"])
                .arg(&data),
        );
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\n\
             max_connections = 200\nfsync = off\nsynchronous_commit = off\n\
             password_encryption = 'scram-sha-256'\nlog_connections = on\n",
            self.port,
            self.path("sock").display()
        );
        if tls {
            conf += &format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                self.path("server.crt").display(),
                self.path("server.key").display()
            );
        }
        append(&data.join("postgresql.conf"), &conf);
        std::fs::write(
            data.join("pg_hba.conf"),
            format!(
                "local all all trust\n\
                 host all {CLEARTEXT_USER} 127.0.0.1/32 password\n\
                 host all {MD5_USER} 127.0.0.1/32 md5\n\
                 host all all 127.0.0.1/32 scram-sha-256\n"
            ),
        )
        .unwrap();
        self.pg_ctl(&["start"]);
        // Made before statements are logged: the passwords are set here, and only here.
        self.sql(&format!(
            "CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'; \
             CREATE ROLE {CLEARTEXT_USER} LOGIN PASSWORD '{PASSWORD}';"
        ));
        self.sql(&format!(
            "SET password_encryption = 'md5'; CREATE ROLE {MD5_USER} LOGIN PASSWORD '{PASSWORD}';"
        ));
        self.sql(&format!("CREATE DATABASE {DATABASE} OWNER {USER}"));
        self.sql(&format!(
            "CREATE DATABASE {CLEARTEXT_USER} OWNER {CLEARTEXT_USER}"
        ));
        self.sql(&format!(
            "ALTER DATABASE {DATABASE} SET log_statement = 'all'"
        ));
    }

    /// A CA, a server certificate it signs for 127.0.0.1 and localhost, and another CA.
    fn make_certificates(&self) {
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .current_dir(self.dir.path())
                .args(args)
                .output()
                .expect("openssl runs");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let mut args = vec!["req", "-x509", "-days", "3"];
            args.extend(ec);
            let (key, crt, subject) = (
                format!("{ca}.key"),
                format!("{ca}.crt"),
                format!("/CN=test {ca}"),
            );
            args.extend(["-keyout", &key, "-out", &crt, "-subj", &subject]);
            openssl(&args);
        }
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        openssl(&args);
        std::fs::write(
            self.path("server.ext"),
            "subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3",
            "-out",
            "server.crt",
            "-extfile",
            "server.ext",
        ]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let private = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(self.path("server.key"), private).unwrap();
        }
    }

    /// Runs `command` as the `postgres` user when this process is root (PostgreSQL refuses
    /// to run as root); fails the test when it fails.
    fn as_postgres(&self, command: &mut Command) -> Output {
        let out = if is_root() {
            let mut wrapped = Command::new("runuser");
            wrapped
                .args(["-u", "postgres", "--"])
                .arg(command.get_program());
            wrapped.args(command.get_args());
            wrapped.output()
        } else {
            command.output()
        }
        .expect("the PostgreSQL tool runs");
        assert!(
            out.status.success(),
            "{command:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(if is_root() { "runuser" } else { "env" })
            .args(if is_root() {
                &["-u", "postgres", "--"][..]
            } else {
                &[][..]
            })
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.path("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The folder of the newest PostgreSQL's programs.
pub(crate) fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn chown_to_postgres(dir: &Path) {
    if is_root() {
        let out = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir)
            .output()
            .expect("chown runs");
        assert!(out.status.success(), "{out:?}");
    }
}

fn append(file: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().unwrap().port()
}

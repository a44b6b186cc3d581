//! The password of a URL that gives none, found where libpq looks: `PGPASSWORD`, then the
//! password file (`PGPASSFILE`, by default `~/.pgpass`), so that it never has to be on the
//! command line, where every user of the machine can read it (`ps`, `/proc/*/cmdline`).

use std::path::{Path, PathBuf};

use tokio_postgres::config::{Config, Host};

/// Gives `config` a password from the environment or the password file, unless it has one.
pub(super) fn fill(config: &mut Config) {
    if config.get_password().is_some() {
        return;
    }
    if let Some(password) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password.as_encoded_bytes());
        return;
    }
    let Some(file) = password_file() else { return };
    if let Some(password) = from_file(&file, &Wanted::of(config)) {
        config.password(password);
    }
}

/// The password file libpq reads: `PGPASSFILE`, else `~/.pgpass`.
pub fn password_file() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE") {
        Some(file) => Some(PathBuf::from(file)),
        None => std::env::var_os("HOME").map(|home| Path::new(&home).join(".pgpass")),
    }
}

/// The connection a password is wanted for, as the file's lines name them.
struct Wanted {
    host: String,
    port: String,
    database: String,
    user: String,
}

impl Wanted {
    fn of(config: &Config) -> Wanted {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => host.clone(),
            // libpq: a socket in the default folder, or any socket, matches `localhost`.
            #[cfg(unix)]
            Some(Host::Unix(_)) | None => "localhost".into(),
            #[cfg(not(unix))]
            None => "localhost".into(),
        };
        let user = config
            .get_user()
            .map(str::to_owned)
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_default();
        Wanted {
            host,
            port: config
                .get_ports()
                .first()
                .copied()
                .unwrap_or(5432)
                .to_string(),
            database: config.get_dbname().unwrap_or(&user).to_owned(),
            user,
        }
    }
}

/// The password of the first line of `file` that matches, if the file is private to its
/// owner (libpq ignores a file others may read, and says so).
fn from_file(file: &Path, wanted: &Wanted) -> Option<String> {
    let metadata = std::fs::metadata(file).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %file.display(),
                "password file ignored: others may read it; make it u=rw (chmod 0600)"
            );
            return None;
        }
    }
    if !metadata.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| matching(line, wanted))
}

/// The password `line` gives for `wanted`: `host:port:database:user:password`, each of the
/// first four a value or `*`, `\` escaping `:` and `\`.
fn matching(line: &str, wanted: &Wanted) -> Option<String> {
    if line.starts_with('#') {
        return None;
    }
    let mut fields = Vec::with_capacity(5);
    let mut field = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    let [host, port, database, user, password] = <[String; 5]>::try_from(fields).ok()?;
    let fits = |pattern: &str, value: &str| pattern == "*" || pattern == value;
    (fits(&host, &wanted.host)
        && fits(&port, &wanted.port)
        && fits(&database, &wanted.database)
        && fits(&user, &wanted.user))
    .then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted() -> Wanted {
        Wanted {
            host: "db.example".into(),
            port: "5433".into(),
            database: "tasks".into(),
            user: "app".into(),
        }
    }

    #[test]
    fn a_line_matches_by_its_fields_or_wildcards_with_escapes() {
        let w = wanted();
        assert_eq!(
            matching("db.example:5433:tasks:app:s3cret", &w).as_deref(),
            Some("s3cret")
        );
        assert_eq!(
            matching("*:*:*:app:a\\:b\\\\c", &w).as_deref(),
            Some("a:b\\c")
        );
        assert_eq!(
            matching("*:*:*:app:with:colons", &w).as_deref(),
            Some("with:colons")
        );
        assert_eq!(matching("db.example:5432:tasks:app:no", &w), None);
        assert_eq!(matching("#*:*:*:*:comment", &w), None);
        assert_eq!(matching("too:few:fields", &w), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_password_file_others_may_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "*:*:*:*:s3cret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(from_file(&file, &wanted()).as_deref(), Some("s3cret"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(from_file(&file, &wanted()), None);
    }
}

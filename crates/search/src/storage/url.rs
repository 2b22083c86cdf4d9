//! Storage URLs, as Optuna writes them: `postgresql://user:password@host:port/db` (or
//! `postgres://`), `sqlite:///relative/study.db` and `sqlite:////absolute/study.db` (SQLAlchemy's
//! convention: the path follows the third slash), or a plain file path.

use crate::storage::{PgEnv, PostgresStorage, SqliteStorage, Storage};
use crate::{Result, SearchError};
use std::path::PathBuf;
use std::time::Duration;

/// A parsed storage URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string (checked when connecting).
    Postgres(String),
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectOptions {
    /// The longest wait for a server to answer (a URL's own `connect_timeout` wins for the
    /// socket; the whole handshake is bounded by this too).
    pub connect_timeout: Duration,
    /// The password and TLS defaults a URL may leave out (`PGPASSWORD`, `~/.pgpass`, ...).
    pub env: PgEnv,
}

/// A five-second timeout and this process's environment.
impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions { connect_timeout: Duration::from_secs(5), env: PgEnv::from_process() }
    }
}

fn bad(url: &str, reason: impl Into<String>) -> SearchError {
    SearchError::Storage { location: redact(url), reason: reason.into() }
}

/// The URL with any password replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (auth, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match auth.rsplit_once('@') {
        Some((cred, host)) => match cred.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

impl StorageUrl {
    /// Parses a `--storage` value.
    pub fn parse(url: &str) -> Result<StorageUrl> {
        let url = url.trim();
        if url.is_empty() {
            return Err(bad(url, "empty storage URL: use postgresql://user@host/db, sqlite:///path/study.db or a file path"));
        }
        let Some((scheme, rest)) = url.split_once("://") else { return Ok(StorageUrl::Sqlite(PathBuf::from(url))) };
        match scheme.to_ascii_lowercase().as_str() {
            "postgresql" | "postgres" => Ok(StorageUrl::Postgres(url.to_string())),
            "sqlite" => match rest.strip_prefix('/') {
                Some(path) if !path.is_empty() => Ok(StorageUrl::Sqlite(PathBuf::from(path))),
                _ => Err(bad(url, "a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db")),
            },
            other => Err(bad(
                url,
                format!("unsupported storage scheme `{other}`: use postgresql://user@host/db, sqlite:///path/study.db or a file path"),
            )),
        }
    }
}

/// Opens the store a URL names (creating a SQLite file or the PostgreSQL schema on first use).
/// A SQLite file's folder must exist: a mistyped path is refused rather than made.
pub fn open_storage(url: &str, opts: &ConnectOptions) -> Result<Box<dyn Storage>> {
    Ok(match StorageUrl::parse(url)? {
        StorageUrl::Sqlite(path) => {
            if let Some(e) = missing_sqlite_folder(url, &path) {
                return Err(e);
            }
            Box::new(SqliteStorage::open(&path)?)
        }
        StorageUrl::Postgres(url) => Box::new(PostgresStorage::connect(&url, opts)?),
    })
}

/// The error of a SQLite path whose folder does not exist (or is not a folder), if it is one.
fn missing_sqlite_folder(url: &str, path: &std::path::Path) -> Option<SearchError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir())?;
    Some(bad(url, format!("the folder {} does not exist; create it first (a storage URL never creates folders)", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_as_optuna_writes_them() {
        let sqlite = |p: &str| -> std::result::Result<StorageUrl, &str> { Ok(StorageUrl::Sqlite(PathBuf::from(p))) };
        let cases: &[(&str, std::result::Result<StorageUrl, &str>)] = &[
            ("sqlite:///study.db", sqlite("study.db")),
            ("sqlite:////tmp/x/study.db", sqlite("/tmp/x/study.db")),
            ("runs/study.db", sqlite("runs/study.db")),
            ("postgresql://me@db.lab/mase", Ok(StorageUrl::Postgres("postgresql://me@db.lab/mase".into()))),
            ("postgres://me:pw@10.0.0.1:5433/mase", Ok(StorageUrl::Postgres("postgres://me:pw@10.0.0.1:5433/mase".into()))),
            ("mysql://me@db/mase", Err("unsupported storage scheme `mysql`")),
            ("sqlite://", Err("sqlite:///relative")),
            ("", Err("empty storage URL")),
        ];
        for (url, want) in cases {
            match (StorageUrl::parse(url), want) {
                (Ok(got), Ok(w)) => assert_eq!(&got, w, "{url}"),
                (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{url}: {e}"),
                (got, w) => panic!("{url}: got {got:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgresql://me:secret@host:5432/db"), "postgresql://me:***@host:5432/db");
        assert_eq!(redact("postgresql://me@host/db"), "postgresql://me@host/db");
        assert_eq!(redact("study.db"), "study.db");
    }
}

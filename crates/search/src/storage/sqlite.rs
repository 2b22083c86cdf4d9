//! The embedded default store: one SQLite file (`search_ckpts/study.db`), in WAL mode with
//! `synchronous = NORMAL`. A committed trial survives the process being killed (`kill -9`); only
//! a power loss could drop the last commits, which is the usual trade for one commit per trial.
//! Every write (opening, claims, heartbeats, imports) runs in a `BEGIN IMMEDIATE` transaction,
//! which takes the file's write lock at once, and a busy connection waits up to 30 s for it
//! (`busy_timeout`): so several processes on one machine can share one file as workers of one
//! study, with the same guarantees as PostgreSQL. Heartbeats use this machine's clock. (A file on
//! a network file system is not safe: SQLite's locks do not hold there; use PostgreSQL.)

use crate::storage::rows::{Cache, RawTrial, COLUMNS};
use crate::storage::{check_spec, metrics_to_json, no_study, stale_error, study_exists, worker_id, Claim, OpenMode, Propose, Storage};
use crate::trial::{now_ms, TrialOutcome, TrialRecord};
use crate::{Result, SearchError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version written into new files. Version 1 files (before heartbeats) are upgraded
/// in place; a file with any other version is refused.
pub const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    state TEXT NOT NULL,
    point TEXT NOT NULL,
    config TEXT NOT NULL,
    vals TEXT,
    software_metrics TEXT NOT NULL DEFAULT '{}',
    hardware_metrics TEXT NOT NULL DEFAULT '{}',
    scaled_metrics TEXT NOT NULL DEFAULT '{}',
    violation REAL NOT NULL DEFAULT 0,
    system_attrs TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    start_ms INTEGER NOT NULL,
    complete_ms INTEGER,
    heartbeat_ms INTEGER,
    worker TEXT,
    PRIMARY KEY (study_id, number)
);
";

/// From version 1: the heartbeat and worker of each trial.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE trials ADD COLUMN heartbeat_ms INTEGER;
ALTER TABLE trials ADD COLUMN worker TEXT;
UPDATE trials SET heartbeat_ms = start_ms;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
";

/// A study store in one SQLite file.
pub struct SqliteStorage {
    path: PathBuf,
    conn: Connection,
    cache: HashMap<i64, Cache>,
    /// Recorded on the trials this connection claims.
    worker: String,
}

/// A storage error whose cause (SQLite's, JSON's, the file system's) stays the source.
fn err(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> SearchError {
    SearchError::StorageCause { location: path.display().to_string(), what: String::new(), source: Box::new(e) }
}

/// A storage error at a step (`what` ends in ": " when not empty) with its cause.
fn err_in(path: &Path, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> SearchError {
    SearchError::StorageCause { location: path.display().to_string(), what: what.to_string(), source: Box::new(e) }
}

/// A storage error with a plain reason (no lower error).
fn err_msg(path: &Path, reason: impl Into<String>) -> SearchError {
    SearchError::Storage { location: path.display().to_string(), reason: reason.into() }
}

/// How long a connection waits for another's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why one attempt at opening failed: a lock held by another connection (worth retrying) or
/// anything else.
enum Opening {
    Busy(rusqlite::Error),
    Failed(SearchError),
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// One attempt at opening `path`: WAL mode, then the schema created or upgraded in one
/// transaction, so that workers opening a new file at once create it exactly once.
fn open_connection(path: &Path) -> std::result::Result<Connection, Opening> {
    let fail = |what: &str, e: rusqlite::Error| if is_busy(&e) { Opening::Busy(e) } else { Opening::Failed(err_in(path, what, e)) };
    let mut conn = Connection::open(path).map_err(|e| fail("", e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| fail("", e))?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| fail("not a study database: ", e))?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| fail("", e))?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(|e| fail("", e))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| fail("not a study database: ", e))?;
    tx.execute_batch(SCHEMA).map_err(|e| fail("not a study database: ", e))?;
    let version: Option<String> =
        tx.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional().map_err(|e| fail("", e))?;
    match version.as_deref() {
        None => {
            tx.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?1)", [SCHEMA_VERSION.to_string()])
                .map_err(|e| fail("", e))?;
        }
        Some("1") => tx.execute_batch(MIGRATE_1_TO_2).map_err(|e| fail("cannot upgrade schema version 1 to 2: ", e))?,
        Some(v) if v == SCHEMA_VERSION.to_string() => {}
        Some(v) => return Err(Opening::Failed(err_msg(path, format!("schema version {v}, this mase-rs reads version {SCHEMA_VERSION}")))),
    }
    tx.commit().map_err(|e| fail("", e))?;
    Ok(conn)
}

impl SqliteStorage {
    /// Opens (creating it and its folder if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStorage> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err_in(path, "cannot create its folder: ", e))?;
        }
        // SQLite answers some lock conflicts while a connection starts up with `SQLITE_BUSY` at
        // once, without consulting the busy handler: switching a file to WAL mode while another
        // connection reads it, or opening while another runs WAL recovery. Workers that open one
        // file together therefore retry the whole opening, with a short growing pause, for as
        // long as the busy timeout would have waited.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_millis(2);
        loop {
            match open_connection(path) {
                Ok(conn) => return Ok(SqliteStorage { path: path.to_path_buf(), conn, cache: HashMap::new(), worker: worker_id() }),
                Err(Opening::Busy(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(Opening::Busy(e)) => {
                    return Err(err_in(path, &format!("still locked by another connection after {BUSY_TIMEOUT:?}: "), e))
                }
                Err(Opening::Failed(e)) => return Err(e),
            }
        }
    }

    fn study_id(conn: &Connection, path: &Path, name: &str) -> Result<i64> {
        conn.prepare_cached("SELECT id FROM studies WHERE name = ?1")
            .and_then(|mut st| st.query_row([name], |r| r.get(0)).optional())
            .map_err(|e| err(path, e))?
            .ok_or_else(|| no_study(name, &path.display().to_string()))
    }

    /// Brings `cache.all` up to date with the trials of study `id`, parsing only the rows after
    /// the cached finished prefix.
    fn read_trials(conn: &Connection, path: &Path, cache: &mut Cache, id: i64) -> Result<()> {
        let mut stmt = conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM trials WHERE study_id = ?1 AND number >= ?2 ORDER BY number"))
            .map_err(|e| err(path, e))?;
        let rows = stmt
            .query_map(params![id, cache.from()], |r| {
                Ok(RawTrial {
                    number: r.get(0)?,
                    state: r.get(1)?,
                    point: r.get(2)?,
                    config: r.get(3)?,
                    vals: r.get(4)?,
                    software_metrics: r.get(5)?,
                    hardware_metrics: r.get(6)?,
                    scaled_metrics: r.get(7)?,
                    violation: r.get(8)?,
                    system_attrs: r.get(9)?,
                    error: r.get(10)?,
                    start_ms: r.get(11)?,
                    complete_ms: r.get(12)?,
                    worker: r.get(13)?,
                })
            })
            .map_err(|e| err(path, e))?;
        let mut fresh = Vec::new();
        for row in rows {
            fresh.push(row.map_err(|e| err(path, e))?.decode().map_err(|e| err_msg(path, e))?);
        }
        cache.absorb(fresh);
        Ok(())
    }

    /// Inserts one trial row.
    fn insert(tx: &Connection, path: &Path, id: i64, t: &RawTrial, heartbeat_ms: i64) -> Result<()> {
        tx.prepare_cached(
            "INSERT INTO trials (study_id, number, state, point, config, vals, software_metrics, hardware_metrics, scaled_metrics, violation, system_attrs, error, start_ms, complete_ms, worker, heartbeat_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
        .and_then(|mut st| {
            st.execute(params![
                id,
                t.number,
                t.state,
                t.point,
                t.config,
                t.vals,
                t.software_metrics,
                t.hardware_metrics,
                t.scaled_metrics,
                t.violation,
                t.system_attrs,
                t.error,
                t.start_ms,
                t.complete_ms,
                t.worker,
                heartbeat_ms
            ])
        })
        .map_err(|e| err(path, e))?;
        Ok(())
    }
}

impl Storage for SqliteStorage {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(&path, e))?;
        let stored: Option<(i64, String)> = tx
            .query_row("SELECT id, spec FROM studies WHERE name = ?1", [name], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| err(&path, e))?;
        match (mode, stored) {
            (OpenMode::Resume | OpenMode::Join, Some((_, s))) => {
                let stored: Value = serde_json::from_str(&s).map_err(|e| err_in(&path, &format!("study `{name}`: bad spec: "), e))?;
                check_spec(name, &stored, spec, mode)?;
            }
            (OpenMode::Resume, None) => return Err(super::nothing_to_resume(&path.display().to_string(), name)),
            (_, old) => {
                if let Some((id, _)) = old {
                    tx.execute("DELETE FROM trials WHERE study_id = ?1", [id]).map_err(|e| err(&path, e))?;
                    tx.execute("DELETE FROM studies WHERE id = ?1", [id]).map_err(|e| err(&path, e))?;
                    self.cache.remove(&id);
                }
                tx.execute("INSERT INTO studies (name, spec, created_ms) VALUES (?1, ?2, ?3)", params![name, spec.to_string(), now_ms()])
                    .map_err(|e| err(&path, e))?;
            }
        }
        tx.commit().map_err(|e| err(&path, e))
    }

    fn study_spec(&mut self, name: &str) -> Result<Option<Value>> {
        let s: Option<String> = self
            .conn
            .query_row("SELECT spec FROM studies WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(|e| err(&self.path, e))?;
        s.map(|s| serde_json::from_str(&s).map_err(|e| err(&self.path, e))).transpose()
    }

    fn study_names(&mut self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT name FROM studies ORDER BY id").map_err(|e| err(&self.path, e))?;
        let names = stmt
            .query_map([], |r| r.get(0))
            .map_err(|e| err(&self.path, e))?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(|e| err(&self.path, e))?;
        Ok(names)
    }

    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>> {
        let id = Self::study_id(&self.conn, &self.path, study)?;
        let cache = self.cache.entry(id).or_default();
        Self::read_trials(&self.conn, &self.path, cache, id)?;
        Ok(cache.all.clone())
    }

    fn claim(&mut self, study: &str, stale_after: Option<Duration>, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>> {
        let SqliteStorage { path, conn, cache, worker } = self;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(path, e))?;
        let id = Self::study_id(&tx, path, study)?;
        let cache = cache.entry(id).or_default();
        if let Some(after) = stale_after {
            // Running trials are never in the cached finished prefix, so the scan starts after it.
            let now = now_ms();
            tx.prepare_cached(
                "UPDATE trials SET state = 'FAIL', error = ?2, complete_ms = ?3
                 WHERE study_id = ?1 AND number >= ?4 AND state = 'RUNNING' AND heartbeat_ms < ?5",
            )
            .and_then(|mut st| st.execute(params![id, stale_error(after), now, cache.from(), now - after.as_millis() as i64]))
            .map_err(|e| err(path, e))?;
        }
        Self::read_trials(&tx, path, cache, id)?;
        let number = cache.next_number();
        let Some(Claim { point, config, system_attrs }) = propose(&cache.all, number)? else {
            tx.commit().map_err(|e| err(path, e))?;
            return Ok(None);
        };
        let mut rec = TrialRecord::running(number, point, config, system_attrs);
        rec.worker = Some(worker.clone());
        Self::insert(&tx, path, id, &RawTrial::encode(&rec), rec.start_ms)?;
        tx.commit().map_err(|e| err(path, e))?;
        Ok(Some(rec))
    }

    fn finish(&mut self, study: &str, number: u64, o: &TrialOutcome) -> Result<()> {
        let id = Self::study_id(&self.conn, &self.path, study)?;
        let n = self
            .conn
            .prepare_cached(
                "UPDATE trials SET state = ?3, vals = ?4, software_metrics = ?5, hardware_metrics = ?6, scaled_metrics = ?7, violation = ?8, error = ?9, complete_ms = ?10
                 WHERE study_id = ?1 AND number = ?2 AND state = 'RUNNING'",
            )
            .and_then(|mut st| {
                st.execute(params![
                    id,
                    number as i64,
                    o.state.as_str(),
                    o.values.as_ref().map(|v| super::floats_to_json(v).to_string()),
                    metrics_to_json(&o.software_metrics).to_string(),
                    metrics_to_json(&o.hardware_metrics).to_string(),
                    metrics_to_json(&o.scaled_metrics).to_string(),
                    o.violation,
                    o.error,
                    o.complete_ms
                ])
            })
            .map_err(|e| err(&self.path, e))?;
        if n == 1 {
            return Ok(());
        }
        let state: Option<String> = self
            .conn
            .query_row("SELECT state FROM trials WHERE study_id = ?1 AND number = ?2", params![id, number as i64], |r| r.get(0))
            .optional()
            .map_err(|e| err(&self.path, e))?;
        Err(match state {
            Some(state) => SearchError::NotRunning { study: study.into(), trial: number, state },
            None => SearchError::Study { study: study.into(), reason: format!("no trial {number} to finish") },
        })
    }

    fn heartbeat(&mut self, study: &str, numbers: &[u64]) -> Result<()> {
        let SqliteStorage { path, conn, .. } = self;
        let id = Self::study_id(conn, path, study)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(path, e))?;
        let now = now_ms();
        for &n in numbers {
            tx.prepare_cached("UPDATE trials SET heartbeat_ms = ?3 WHERE study_id = ?1 AND number = ?2 AND state = 'RUNNING'")
                .and_then(|mut st| st.execute(params![id, n as i64, now]))
                .map_err(|e| err(path, e))?;
        }
        tx.commit().map_err(|e| err(path, e))
    }

    fn fail_running(&mut self, study: &str, reason: &str) -> Result<usize> {
        let id = Self::study_id(&self.conn, &self.path, study)?;
        self.conn
            .execute(
                "UPDATE trials SET state = 'FAIL', error = ?2, complete_ms = ?3 WHERE study_id = ?1 AND state = 'RUNNING'",
                params![id, reason, now_ms()],
            )
            .map_err(|e| err(&self.path, e))
    }

    fn import_study(&mut self, name: &str, spec: &Value, trials: &[TrialRecord]) -> Result<()> {
        let SqliteStorage { path, conn, .. } = self;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(path, e))?;
        let exists =
            tx.query_row("SELECT 1 FROM studies WHERE name = ?1", [name], |_| Ok(())).optional().map_err(|e| err(path, e))?.is_some();
        if exists {
            return Err(study_exists(name, &path.display().to_string()));
        }
        tx.execute("INSERT INTO studies (name, spec, created_ms) VALUES (?1, ?2, ?3)", params![name, spec.to_string(), now_ms()])
            .map_err(|e| err(path, e))?;
        let id = tx.last_insert_rowid();
        // Imported running trials get a fresh heartbeat: they go stale `stale_after` from now
        // unless their worker is still alive and heart-beating.
        let now = now_ms();
        for t in trials {
            Self::insert(&tx, path, id, &RawTrial::encode(t), now)?;
        }
        tx.commit().map_err(|e| err(path, e))
    }

    fn delete_study(&mut self, name: &str) -> Result<usize> {
        let SqliteStorage { path, conn, cache, .. } = self;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(path, e))?;
        let id: Option<i64> =
            tx.query_row("SELECT id FROM studies WHERE name = ?1", [name], |r| r.get(0)).optional().map_err(|e| err(path, e))?;
        let Some(id) = id else { return Err(no_study(name, &path.display().to_string())) };
        let trials = tx.execute("DELETE FROM trials WHERE study_id = ?1", [id]).map_err(|e| err(path, e))?;
        tx.execute("DELETE FROM studies WHERE id = ?1", [id]).map_err(|e| err(path, e))?;
        tx.commit().map_err(|e| err(path, e))?;
        cache.remove(&id);
        Ok(trials)
    }
}

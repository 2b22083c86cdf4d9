//! The embedded default store: one SQLite file (`search_ckpts/study.db`), in WAL mode with
//! `synchronous = NORMAL`. A committed trial survives the process being killed (`kill -9`); only
//! a power loss could drop the last commits, which is the usual trade for one commit per trial.
//! Claims run in `BEGIN IMMEDIATE` transactions, so several processes can share one file.

use crate::storage::{check_spec, floats_from_json, floats_to_json, metrics_from_json, metrics_to_json, Claim, OpenMode, Propose, Storage};
use crate::trial::{now_ms, TrialOutcome, TrialRecord, TrialState};
use crate::{Result, SearchError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version written into new files; a file with another version is refused.
pub const SCHEMA_VERSION: i64 = 1;

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
    PRIMARY KEY (study_id, number)
);
";

/// The trials of a study as last read. The leading `finished` ones never change again, so a
/// read parses only the rows after them.
#[derive(Default)]
struct Cache {
    all: Vec<TrialRecord>,
    finished: usize,
}

/// A study store in one SQLite file.
pub struct SqliteStorage {
    path: PathBuf,
    conn: Connection,
    cache: HashMap<i64, Cache>,
}

fn err(path: &Path, e: impl std::fmt::Display) -> SearchError {
    SearchError::Storage { location: path.display().to_string(), reason: e.to_string() }
}

impl SqliteStorage {
    /// Opens (creating it and its folder if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStorage> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(path, format!("cannot create its folder: {e}")))?;
        }
        let conn = Connection::open(path).map_err(|e| err(path, e))?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(|e| err(path, e))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| err(path, e))?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| err(path, e))?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(|e| err(path, e))?;
        conn.execute_batch(SCHEMA).map_err(|e| err(path, format!("not a study database: {e}")))?;
        let version: Option<String> =
            conn.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional().map_err(|e| err(path, e))?;
        match version {
            None => {
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?1)", [SCHEMA_VERSION.to_string()])
                    .map_err(|e| err(path, e))?;
            }
            Some(v) if v == SCHEMA_VERSION.to_string() => {}
            Some(v) => return Err(err(path, format!("schema version {v}, this mase-rs reads version {SCHEMA_VERSION}"))),
        }
        Ok(SqliteStorage { path: path.to_path_buf(), conn, cache: HashMap::new() })
    }

    fn study_id(conn: &Connection, path: &Path, name: &str) -> Result<i64> {
        conn.query_row("SELECT id FROM studies WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(|e| err(path, e))?
            .ok_or_else(|| SearchError::Study { study: name.into(), reason: format!("not found in {}", path.display()) })
    }

    /// Brings `cache.all` up to date with the trials of study `id`, parsing only the rows after
    /// the cached finished prefix.
    fn read_trials(conn: &Connection, path: &Path, cache: &mut Cache, id: i64) -> Result<()> {
        let from = cache.finished as i64;
        let mut stmt = conn
            .prepare_cached(
                "SELECT number, state, point, config, vals, software_metrics, hardware_metrics, scaled_metrics, violation, system_attrs, error, start_ms, complete_ms
                 FROM trials WHERE study_id = ?1 AND number >= ?2 ORDER BY number",
            )
            .map_err(|e| err(path, e))?;
        let rows = stmt
            .query_map(params![id, from], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, f64>(8)?,
                    r.get::<_, String>(9)?,
                    r.get::<_, Option<String>>(10)?,
                    r.get::<_, i64>(11)?,
                    r.get::<_, Option<i64>>(12)?,
                ))
            })
            .map_err(|e| err(path, e))?;
        let json = |s: &str, what: &str, n: i64| -> Result<Value> {
            serde_json::from_str(s).map_err(|e| err(path, format!("trial {n}: bad {what}: {e}")))
        };
        let mut fresh = Vec::new();
        for row in rows {
            let (number, state, point, config, vals, sw, hw, scaled, violation, attrs, error, start_ms, complete_ms) =
                row.map_err(|e| err(path, e))?;
            let state = TrialState::parse(&state).ok_or_else(|| err(path, format!("trial {number}: unknown state `{state}`")))?;
            fresh.push(TrialRecord {
                number: number as u64,
                state,
                point: floats_from_json(&json(&point, "point", number)?),
                config: json(&config, "config", number)?,
                values: match vals {
                    Some(v) => Some(floats_from_json(&json(&v, "values", number)?)),
                    None => None,
                },
                software_metrics: metrics_from_json(&json(&sw, "metrics", number)?),
                hardware_metrics: metrics_from_json(&json(&hw, "metrics", number)?),
                scaled_metrics: metrics_from_json(&json(&scaled, "metrics", number)?),
                violation,
                system_attrs: json(&attrs, "system attrs", number)?.as_object().cloned().unwrap_or_default(),
                error,
                start_ms,
                complete_ms,
            });
        }
        cache.all.truncate(cache.finished);
        for t in fresh {
            // The prefix grows over finished trials numbered without gaps from 0.
            if cache.finished == cache.all.len() && t.state != TrialState::Running && t.number == cache.all.len() as u64 {
                cache.finished += 1;
            }
            cache.all.push(t);
        }
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
            (OpenMode::Resume, Some((_, s))) => {
                let stored: Value = serde_json::from_str(&s).map_err(|e| err(&path, format!("study `{name}`: bad spec: {e}")))?;
                check_spec(name, &stored, spec)?;
            }
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

    fn claim(&mut self, study: &str, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>> {
        let SqliteStorage { path, conn, cache } = self;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| err(path, e))?;
        let id = Self::study_id(&tx, path, study)?;
        let cache = cache.entry(id).or_default();
        Self::read_trials(&tx, path, cache, id)?;
        let number = cache.all.last().map_or(0, |t| t.number + 1);
        let Some(Claim { point, config, system_attrs }) = propose(&cache.all, number)? else {
            tx.commit().map_err(|e| err(path, e))?;
            return Ok(None);
        };
        let rec = TrialRecord::running(number, point, config, system_attrs);
        tx.execute(
            "INSERT INTO trials (study_id, number, state, point, config, system_attrs, start_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                number as i64,
                rec.state.as_str(),
                floats_to_json(&rec.point).to_string(),
                rec.config.to_string(),
                Value::Object(rec.system_attrs.clone()).to_string(),
                rec.start_ms
            ],
        )
        .map_err(|e| err(path, e))?;
        tx.commit().map_err(|e| err(path, e))?;
        Ok(Some(rec))
    }

    fn finish(&mut self, study: &str, number: u64, o: &TrialOutcome) -> Result<()> {
        let id = Self::study_id(&self.conn, &self.path, study)?;
        let n = self
            .conn
            .execute(
                "UPDATE trials SET state = ?3, vals = ?4, software_metrics = ?5, hardware_metrics = ?6, scaled_metrics = ?7, violation = ?8, error = ?9, complete_ms = ?10
                 WHERE study_id = ?1 AND number = ?2",
                params![
                    id,
                    number as i64,
                    o.state.as_str(),
                    o.values.as_ref().map(|v| floats_to_json(v).to_string()),
                    metrics_to_json(&o.software_metrics).to_string(),
                    metrics_to_json(&o.hardware_metrics).to_string(),
                    metrics_to_json(&o.scaled_metrics).to_string(),
                    o.violation,
                    o.error,
                    o.complete_ms
                ],
            )
            .map_err(|e| err(&self.path, e))?;
        if n != 1 {
            return Err(SearchError::Study { study: study.into(), reason: format!("no trial {number} to finish") });
        }
        Ok(())
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
}

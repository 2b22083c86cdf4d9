//! A study store on a PostgreSQL server, shared by workers on many machines (Optuna's RDB storage
//! does the same): `--storage postgresql://user:password@host:port/db`.
//!
//! Concurrency, by row locks, not SERIALIZABLE retries: a claim runs in a READ COMMITTED
//! transaction that first takes `SELECT ... FOR UPDATE` on the study's row, so the claims of one
//! study run one after another (other studies are not blocked), while `finish` and `heartbeat`
//! update single trial rows without waiting for claims. The schema is created on first use under
//! a transaction-level advisory lock (workers may start at the same moment) and carries a version
//! in `mase_meta`. Heartbeats and staleness use the server's clock (`clock_timestamp()`), so the
//! workers' clocks need not agree. Tables are prefixed `mase_` so that a database can also hold
//! Optuna's tables.
//!
//! Connections use TLS under libpq's `sslmode` (`?sslmode=verify-full&sslrootcert=ca.crt`; see
//! `pg_tls`), and a URL without a password takes it from `PGPASSWORD` or `~/.pgpass` (`pg_env`).

use crate::storage::pg_env::{lookup_password, PassKey, PasswordSource};
use crate::storage::pg_tls::{connector, plan_tls, split_tls_params, TlsPlan};
use crate::storage::rows::{Cache, RawTrial, COLUMNS};
use crate::storage::{
    check_spec, metrics_to_json, no_study, stale_error, study_exists, worker_id, Claim, ConnectOptions, OpenMode, Propose, Storage,
};
use crate::trial::{now_ms, TrialOutcome, TrialRecord};
use crate::{Result, SearchError};
use postgres::config::Host;
use postgres::{Client, Config, GenericClient, Row};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The advisory lock key that serialises schema creation ("maseRS" in ASCII).
const SCHEMA_LOCK: i64 = 0x6d61_7365_5253;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS mase_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mase_studies (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS mase_trials (
    study_id BIGINT NOT NULL REFERENCES mase_studies(id) ON DELETE CASCADE,
    number BIGINT NOT NULL,
    state TEXT NOT NULL,
    point TEXT NOT NULL,
    config TEXT NOT NULL,
    vals TEXT,
    software_metrics TEXT NOT NULL DEFAULT '{}',
    hardware_metrics TEXT NOT NULL DEFAULT '{}',
    scaled_metrics TEXT NOT NULL DEFAULT '{}',
    violation DOUBLE PRECISION NOT NULL DEFAULT 0,
    system_attrs TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    start_ms BIGINT NOT NULL,
    complete_ms BIGINT,
    worker TEXT,
    heartbeat TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (study_id, number)
);
";

const INSERT: &str = "INSERT INTO mase_trials (study_id, number, state, point, config, vals, software_metrics, hardware_metrics, scaled_metrics, violation, system_attrs, error, start_ms, complete_ms, worker, heartbeat)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, clock_timestamp())";

/// A study store on a PostgreSQL server.
pub struct PostgresStorage {
    location: String,
    client: Client,
    cache: HashMap<i64, Cache>,
    /// Recorded on the trials this connection claims.
    worker: String,
}

/// One line from a client error: the server's message for database errors, the cause for
/// connection errors.
fn reason(e: &postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            // The client's message names the step ("error connecting to server"); the cause
            // ("Connection refused") is its source.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let c_text = c.to_string();
                if !text.contains(&c_text) {
                    text = format!("{text}: {c_text}");
                }
                cause = c.source();
            }
            text
        }
    };
    text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

/// `postgresql://user@host:port/db`, never the password.
fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let host = if hosts.is_empty() { "localhost".to_string() } else { hosts.join(",") };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let db = config.get_dbname().or(config.get_user()).unwrap_or("");
    format!("postgresql://{user}{host}:{port}/{db}")
}

/// What to check after a failed connection: the CA file of a certificate that did not verify,
/// and where the password came from when it was refused.
fn connect_hint(e: &postgres::Error, plan: &TlsPlan, source: &PasswordSource) -> String {
    let text = reason(e);
    if text.contains("invalid peer certificate") {
        let ca = plan.root_cert.as_ref().map_or(String::new(), |p| format!(" against the CA file {}", p.display()));
        return format!(" (sslmode={} checks the server's certificate{ca})", plan.mode.name());
    }
    if text.contains("password") {
        return match source {
            PasswordSource::Url => " (the password is the URL's)".into(),
            PasswordSource::Environment => " (the password is PGPASSWORD's)".into(),
            PasswordSource::File(path) => format!(" (the password is from {})", path.display()),
            PasswordSource::None => " (no password in the URL, PGPASSWORD or ~/.pgpass)".into(),
        };
    }
    String::new()
}

impl PostgresStorage {
    /// Connects to the server of `url` and creates the schema on first use.
    pub fn connect(url: &str, opts: &ConnectOptions) -> Result<PostgresStorage> {
        let (client_url, tls_params) = split_tls_params(url);
        let mut config: Config = client_url.parse().map_err(|e: postgres::Error| SearchError::Storage {
            location: super::url::redact(url),
            reason: format!("not a PostgreSQL URL ({}); expected postgresql://user@host:port/db", reason(&e)),
        })?;
        let location = describe(&config);
        let fail = |r: String| SearchError::Storage { location: location.clone(), reason: r };
        if config.get_hosts().is_empty() {
            return Err(fail("the URL names no host (postgresql://user@HOST/db)".into()));
        }
        let plan = plan_tls(&tls_params, &opts.env).map_err(fail)?;
        let (tls, client_mode) = connector(&plan).map_err(fail)?;
        config.ssl_mode(client_mode);
        let source = if config.get_password().is_some() { PasswordSource::Url } else { Self::fill_password(&mut config, opts) };
        let timeout = config.get_connect_timeout().copied().unwrap_or(opts.connect_timeout);
        config.connect_timeout(timeout);
        if config.get_application_name().is_none() {
            config.application_name("mase-rs");
        }
        // A dead peer shows up within about a minute instead of the kernel's two hours.
        config.keepalives_idle(Duration::from_secs(30));
        // The timeout above bounds each TCP connect, not a server that accepts and then never
        // answers; so the handshake runs on a thread and is abandoned after twice the timeout.
        let (send, recv) = std::sync::mpsc::channel();
        let connecting = config.clone();
        std::thread::spawn(move || {
            let _ = send.send(connecting.connect(tls));
        });
        let mut client = match recv.recv_timeout(timeout * 2) {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(fail(format!("cannot connect: {}{}", reason(&e), connect_hint(&e, &plan, &source)))),
            Err(_) => return Err(fail(format!("cannot connect: no answer from the server within {} s", (timeout * 2).as_secs_f64()))),
        };
        Self::setup_schema(&mut client).map_err(fail)?;
        Ok(PostgresStorage { location, client, cache: HashMap::new(), worker: worker_id() })
    }

    /// Sets the password of a URL that has none from `PGPASSWORD` or the password file, printing
    /// why a password file was skipped (as libpq does).
    fn fill_password(config: &mut Config, opts: &ConnectOptions) -> PasswordSource {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(name)) => name.clone(),
            Some(Host::Unix(path)) => path.display().to_string(),
            None => String::new(),
        };
        let user = config.get_user().unwrap_or("").to_string();
        let database = config.get_dbname().unwrap_or(&user).to_string();
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let key = PassKey { host: &host, port, database: &database, user: &user };
        let (password, source, warnings) = lookup_password(&opts.env, &key);
        for w in warnings {
            eprintln!("WARNING  {w}");
        }
        if let Some(p) = password {
            config.password(p);
        }
        source
    }

    /// Whether this connection is encrypted (the server's `pg_stat_ssl` for this session).
    pub fn encrypted(&mut self) -> Result<bool> {
        let row = self.client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).map_err(|e| self.err(e))?;
        Ok(row.get(0))
    }

    fn setup_schema(client: &mut Client) -> std::result::Result<(), String> {
        let mut tx = client.transaction().map_err(|e| reason(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK]).map_err(|e| reason(&e))?;
        tx.batch_execute(SCHEMA).map_err(|e| format!("cannot create the study tables: {}", reason(&e)))?;
        let version: Option<String> =
            tx.query_opt("SELECT value FROM mase_meta WHERE key = 'schema_version'", &[]).map_err(|e| reason(&e))?.map(|r| r.get(0));
        match version {
            None => {
                tx.execute("INSERT INTO mase_meta (key, value) VALUES ('schema_version', $1)", &[&SCHEMA_VERSION.to_string()])
                    .map_err(|e| reason(&e))?;
            }
            Some(v) if v == SCHEMA_VERSION.to_string() => {}
            Some(v) => return Err(format!("schema version {v}, this mase-rs reads version {SCHEMA_VERSION}")),
        }
        tx.commit().map_err(|e| reason(&e))
    }

    fn err(&self, e: postgres::Error) -> SearchError {
        SearchError::Storage { location: self.location.clone(), reason: reason(&e) }
    }

    /// The id of study `name`, locking its row until the transaction ends when `lock` is set.
    fn study_id(c: &mut impl GenericClient, location: &str, name: &str, lock: bool) -> Result<i64> {
        let sql =
            if lock { "SELECT id FROM mase_studies WHERE name = $1 FOR UPDATE" } else { "SELECT id FROM mase_studies WHERE name = $1" };
        c.query_opt(sql, &[&name])
            .map_err(|e| SearchError::Storage { location: location.into(), reason: reason(&e) })?
            .map(|r| r.get(0))
            .ok_or_else(|| no_study(name, location))
    }

    fn decode(location: &str, row: &Row) -> Result<TrialRecord> {
        let bad = |r: String| SearchError::Storage { location: location.into(), reason: r };
        let raw = RawTrial {
            number: row.try_get(0).map_err(|e| bad(reason(&e)))?,
            state: row.try_get(1).map_err(|e| bad(reason(&e)))?,
            point: row.try_get(2).map_err(|e| bad(reason(&e)))?,
            config: row.try_get(3).map_err(|e| bad(reason(&e)))?,
            vals: row.try_get(4).map_err(|e| bad(reason(&e)))?,
            software_metrics: row.try_get(5).map_err(|e| bad(reason(&e)))?,
            hardware_metrics: row.try_get(6).map_err(|e| bad(reason(&e)))?,
            scaled_metrics: row.try_get(7).map_err(|e| bad(reason(&e)))?,
            violation: row.try_get(8).map_err(|e| bad(reason(&e)))?,
            system_attrs: row.try_get(9).map_err(|e| bad(reason(&e)))?,
            error: row.try_get(10).map_err(|e| bad(reason(&e)))?,
            start_ms: row.try_get(11).map_err(|e| bad(reason(&e)))?,
            complete_ms: row.try_get(12).map_err(|e| bad(reason(&e)))?,
            worker: row.try_get(13).map_err(|e| bad(reason(&e)))?,
        };
        raw.decode().map_err(bad)
    }

    /// Brings the cache of study `id` up to date (rows after its finished prefix).
    fn read_trials(c: &mut impl GenericClient, location: &str, cache: &mut Cache, id: i64) -> Result<()> {
        let rows = c
            .query(
                &format!("SELECT {COLUMNS} FROM mase_trials WHERE study_id = $1 AND number >= $2 ORDER BY number"),
                &[&id, &cache.from()],
            )
            .map_err(|e| SearchError::Storage { location: location.into(), reason: reason(&e) })?;
        let fresh = rows.iter().map(|r| Self::decode(location, r)).collect::<Result<Vec<_>>>()?;
        cache.absorb(fresh);
        Ok(())
    }

    fn insert(c: &mut impl GenericClient, location: &str, id: i64, t: &RawTrial) -> Result<()> {
        c.execute(
            INSERT,
            &[
                &id,
                &t.number,
                &t.state,
                &t.point,
                &t.config,
                &t.vals,
                &t.software_metrics,
                &t.hardware_metrics,
                &t.scaled_metrics,
                &t.violation,
                &t.system_attrs,
                &t.error,
                &t.start_ms,
                &t.complete_ms,
                &t.worker,
            ],
        )
        .map_err(|e| SearchError::Storage { location: location.into(), reason: reason(&e) })?;
        Ok(())
    }
}

impl Storage for PostgresStorage {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()> {
        let PostgresStorage { location, client, cache, .. } = self;
        let pg = |e: postgres::Error| SearchError::Storage { location: location.clone(), reason: reason(&e) };
        let mut tx = client.transaction().map_err(pg)?;
        let stored = tx.query_opt("SELECT id, spec FROM mase_studies WHERE name = $1 FOR UPDATE", &[&name]).map_err(pg)?;
        let stored: Option<(i64, String)> = stored.map(|r| (r.get(0), r.get(1)));
        let check = |s: &str| -> Result<()> {
            let stored: Value = serde_json::from_str(s)
                .map_err(|e| SearchError::Storage { location: location.clone(), reason: format!("study `{name}`: bad spec: {e}") })?;
            check_spec(name, &stored, spec, mode)
        };
        match (mode, stored) {
            (OpenMode::Resume | OpenMode::Join, Some((_, s))) => check(&s)?,
            (OpenMode::Resume, None) => return Err(super::nothing_to_resume(location, name)),
            (_, old) => {
                if let Some((id, _)) = old {
                    tx.execute("DELETE FROM mase_studies WHERE id = $1", &[&id]).map_err(pg)?;
                    cache.remove(&id);
                }
                // Another worker may create the study between the look-up and here: then join it.
                let made = tx
                    .query_opt(
                        "INSERT INTO mase_studies (name, spec, created_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING id",
                        &[&name, &spec.to_string(), &now_ms()],
                    )
                    .map_err(pg)?;
                if made.is_none() {
                    let s: String = tx.query_one("SELECT spec FROM mase_studies WHERE name = $1", &[&name]).map_err(pg)?.get(0);
                    check(&s)?;
                }
            }
        }
        tx.commit().map_err(pg)
    }

    fn study_spec(&mut self, name: &str) -> Result<Option<Value>> {
        let row = self.client.query_opt("SELECT spec FROM mase_studies WHERE name = $1", &[&name]).map_err(|e| self.err(e))?;
        row.map(|r| {
            let s: String = r.get(0);
            serde_json::from_str(&s)
                .map_err(|e| SearchError::Storage { location: self.location.clone(), reason: format!("study `{name}`: bad spec: {e}") })
        })
        .transpose()
    }

    fn study_names(&mut self) -> Result<Vec<String>> {
        let rows = self.client.query("SELECT name FROM mase_studies ORDER BY id", &[]).map_err(|e| self.err(e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>> {
        let PostgresStorage { location, client, cache, .. } = self;
        let id = Self::study_id(client, location, study, false)?;
        let cache = cache.entry(id).or_default();
        Self::read_trials(client, location, cache, id)?;
        Ok(cache.all.clone())
    }

    fn claim(&mut self, study: &str, stale_after: Option<Duration>, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>> {
        let PostgresStorage { location, client, cache, worker } = self;
        let pg = |e: postgres::Error| SearchError::Storage { location: location.clone(), reason: reason(&e) };
        let mut tx = client.transaction().map_err(pg)?;
        // The study's row lock makes this transaction the only claimer of the study.
        let id = Self::study_id(&mut tx, location, study, true)?;
        let cache = cache.entry(id).or_default();
        if let Some(after) = stale_after {
            tx.execute(
                "UPDATE mase_trials SET state = 'FAIL', error = $2, complete_ms = $3
                 WHERE study_id = $1 AND number >= $4 AND state = 'RUNNING'
                   AND heartbeat < clock_timestamp() - ($5::float8 * interval '1 millisecond')",
                &[&id, &stale_error(after), &now_ms(), &cache.from(), &(after.as_millis() as f64)],
            )
            .map_err(pg)?;
        }
        Self::read_trials(&mut tx, location, cache, id)?;
        let number = cache.next_number();
        let Some(Claim { point, config, system_attrs }) = propose(&cache.all, number)? else {
            tx.commit().map_err(pg)?;
            return Ok(None);
        };
        let mut rec = TrialRecord::running(number, point, config, system_attrs);
        rec.worker = Some(worker.clone());
        Self::insert(&mut tx, location, id, &RawTrial::encode(&rec))?;
        tx.commit().map_err(pg)?;
        Ok(Some(rec))
    }

    fn finish(&mut self, study: &str, number: u64, o: &TrialOutcome) -> Result<()> {
        let PostgresStorage { location, client, .. } = self;
        let pg = |e: postgres::Error| SearchError::Storage { location: location.clone(), reason: reason(&e) };
        let id = Self::study_id(client, location, study, false)?;
        let n = client
            .execute(
                "UPDATE mase_trials SET state = $3, vals = $4, software_metrics = $5, hardware_metrics = $6, scaled_metrics = $7, violation = $8, error = $9, complete_ms = $10
                 WHERE study_id = $1 AND number = $2 AND state = 'RUNNING'",
                &[
                    &id,
                    &(number as i64),
                    &o.state.as_str(),
                    &o.values.as_ref().map(|v| super::floats_to_json(v).to_string()),
                    &metrics_to_json(&o.software_metrics).to_string(),
                    &metrics_to_json(&o.hardware_metrics).to_string(),
                    &metrics_to_json(&o.scaled_metrics).to_string(),
                    &o.violation,
                    &o.error,
                    &o.complete_ms,
                ],
            )
            .map_err(pg)?;
        if n == 1 {
            return Ok(());
        }
        let state =
            client.query_opt("SELECT state FROM mase_trials WHERE study_id = $1 AND number = $2", &[&id, &(number as i64)]).map_err(pg)?;
        Err(match state {
            Some(r) => SearchError::NotRunning { study: study.into(), trial: number, state: r.get(0) },
            None => SearchError::Study { study: study.into(), reason: format!("no trial {number} to finish") },
        })
    }

    fn heartbeat(&mut self, study: &str, numbers: &[u64]) -> Result<()> {
        let PostgresStorage { location, client, .. } = self;
        let id = Self::study_id(client, location, study, false)?;
        let numbers: Vec<i64> = numbers.iter().map(|&n| n as i64).collect();
        client
            .execute(
                "UPDATE mase_trials SET heartbeat = clock_timestamp() WHERE study_id = $1 AND number = ANY($2) AND state = 'RUNNING'",
                &[&id, &numbers],
            )
            .map_err(|e| SearchError::Storage { location: location.clone(), reason: reason(&e) })?;
        Ok(())
    }

    fn fail_running(&mut self, study: &str, why: &str) -> Result<usize> {
        let PostgresStorage { location, client, .. } = self;
        let id = Self::study_id(client, location, study, false)?;
        let n = client
            .execute(
                "UPDATE mase_trials SET state = 'FAIL', error = $2, complete_ms = $3 WHERE study_id = $1 AND state = 'RUNNING'",
                &[&id, &why, &now_ms()],
            )
            .map_err(|e| SearchError::Storage { location: location.clone(), reason: reason(&e) })?;
        Ok(n as usize)
    }

    fn import_study(&mut self, name: &str, spec: &Value, trials: &[TrialRecord]) -> Result<()> {
        let PostgresStorage { location, client, .. } = self;
        let pg = |e: postgres::Error| SearchError::Storage { location: location.clone(), reason: reason(&e) };
        let mut tx = client.transaction().map_err(pg)?;
        let made = tx
            .query_opt(
                "INSERT INTO mase_studies (name, spec, created_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING id",
                &[&name, &spec.to_string(), &now_ms()],
            )
            .map_err(pg)?;
        let Some(row) = made else { return Err(study_exists(name, location)) };
        let id: i64 = row.get(0);
        // Imported running trials get a fresh heartbeat: they go stale `stale_after` from now
        // unless their worker is still alive and heart-beating.
        for t in trials {
            Self::insert(&mut tx, location, id, &RawTrial::encode(t))?;
        }
        tx.commit().map_err(pg)
    }

    fn delete_study(&mut self, name: &str) -> Result<usize> {
        let PostgresStorage { location, client, cache, .. } = self;
        let pg = |e: postgres::Error| SearchError::Storage { location: location.clone(), reason: reason(&e) };
        let mut tx = client.transaction().map_err(pg)?;
        let Some(row) = tx.query_opt("SELECT id FROM mase_studies WHERE name = $1 FOR UPDATE", &[&name]).map_err(pg)? else {
            return Err(no_study(name, location));
        };
        let id: i64 = row.get(0);
        let trials = tx.execute("DELETE FROM mase_trials WHERE study_id = $1", &[&id]).map_err(pg)?;
        tx.execute("DELETE FROM mase_studies WHERE id = $1", &[&id]).map_err(pg)?;
        tx.commit().map_err(pg)?;
        cache.remove(&id);
        Ok(trials as usize)
    }
}

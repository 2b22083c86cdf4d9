//! The study stores behave alike: every test runs against SQLite and, when the test server is
//! there (`scripts/with-postgres.sh` sets `MASE_TEST_POSTGRES_URL`), against PostgreSQL.
//! Workers are threads with their own connections here; `crates/cli/tests/distributed.rs` runs
//! them as processes.

mod common;
use common::*;
use mase_search::objective::{MetricSpec, Objective};
use mase_search::storage::{Claim, OpenMode, Storage};
use mase_search::study::study_spec;
use mase_search::trial::{Metrics, TrialOutcome};
use mase_search::{
    build_sampler, run_study, ConnectOptions, Direction, Liveness, ParamDef, ParamKind, Runner, SearchError, Silent, StopReason,
    StudySetup, TrialRecord, TrialState,
};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A space of ordered choices with these sizes.
fn grid(radices: &[usize]) -> PointGrid {
    PointGrid(Grid {
        params: radices.iter().enumerate().map(|(i, &n)| ParamDef::new(format!("x{i}"), ParamKind::Index { choices: n })).collect(),
    })
}

fn minimize_f() -> Objective {
    Objective::new(vec![MetricSpec { name: "f".into(), scale: 1.0, direction: Direction::Minimize }], Some(Direction::Minimize), vec![])
}

fn claim_point(st: &mut dyn Storage, study: &str, point: &[f64]) -> TrialRecord {
    st.claim(study, None, &mut |trials, number| {
        assert_eq!(number, trials.last().map_or(0, |t| t.number + 1), "the next free number");
        Ok(Some(Claim { point: point.to_vec(), config: json!({"x": point}), system_attrs: Map::new() }))
    })
    .unwrap()
    .expect("claimed")
}

fn outcome(state: TrialState, f: Option<f64>, error: Option<&str>) -> TrialOutcome {
    let mut m = Metrics::new();
    if let Some(f) = f {
        m.insert("f".into(), f);
    }
    TrialOutcome {
        state,
        values: f.map(|f| vec![f]),
        software_metrics: m.clone(),
        hardware_metrics: Metrics::new(),
        scaled_metrics: m,
        violation: 0.0,
        error: error.map(String::from),
        complete_ms: 1_700_000_000_000,
    }
}

fn spec(dims: usize) -> Value {
    json!({"space": {"name": "test/grid", "params": dims}, "directions": ["minimize"], "objectives": ["value"], "sampler": "brute", "seed": 1})
}

#[test]
fn stores_claim_finish_and_check_specs_alike() {
    for b in Backend::all("conformance") {
        let name = unique_study("conformance");
        let mut st = b.open();
        st.open_study(&name, &spec(2), OpenMode::Fresh).unwrap();
        let t: Vec<TrialRecord> = [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]].iter().map(|p| claim_point(st.as_mut(), &name, p)).collect();
        assert_eq!(t.iter().map(|t| t.number).collect::<Vec<_>>(), [0, 1, 2], "{}", b.name());
        assert_eq!(t[0].worker.as_deref(), Some(mase_search::storage::worker_id().as_str()));
        st.finish(&name, 0, &outcome(TrialState::Complete, Some(1.5), None)).unwrap();
        st.finish(&name, 1, &outcome(TrialState::Fail, None, Some("runner `x`: broke"))).unwrap();

        // A second connection (another worker) joins and sees the same trials.
        let mut other = b.open();
        other.open_study(&name, &spec(2), OpenMode::Join).unwrap();
        let seen = other.trials(&name).unwrap();
        assert_eq!(seen, st.trials(&name).unwrap(), "{}", b.name());
        assert_eq!(seen.iter().map(|t| t.state).collect::<Vec<_>>(), [TrialState::Complete, TrialState::Fail, TrialState::Running]);
        assert_eq!(seen[0].values, Some(vec![1.5]));
        assert_eq!(seen[0].software_metrics["f"], 1.5);
        assert_eq!(seen[1].error.as_deref(), Some("runner `x`: broke"));
        assert_eq!(seen[2].config, json!({"x": [4.0, 5.0]}));
        assert_eq!(other.study_spec(&name).unwrap(), Some(spec(2)));
        assert!(other.study_names().unwrap().contains(&name));

        // Joining with another space is one line naming the study and what differs.
        let e = other.open_study(&name, &spec(3), OpenMode::Join).unwrap_err().to_string();
        assert!(e.contains(&format!("study `{name}`")) && e.contains("another space") && e.contains("--study") && !e.contains('\n'), "{e}");

        // A finished trial cannot be finished again; the running one is freed on resume.
        match other.finish(&name, 0, &outcome(TrialState::Complete, Some(0.0), None)) {
            Err(SearchError::NotRunning { trial: 0, state, .. }) => assert_eq!(state, "COMPLETE"),
            r => panic!("{}: finishing twice gave {r:?}", b.name()),
        }
        assert_eq!(other.fail_running(&name, "interrupted: test").unwrap(), 1);
        assert_eq!(st.trials(&name).unwrap()[2].state, TrialState::Fail);
        assert_eq!(st.trials(&name).unwrap()[0].values, Some(vec![1.5]), "the finished trial kept its values");
    }
}

#[test]
fn a_trial_without_heartbeats_goes_stale_and_its_late_result_is_dropped() {
    for b in Backend::all("stale") {
        let name = unique_study("stale");
        let mut st = b.open();
        st.open_study(&name, &spec(1), OpenMode::Fresh).unwrap();
        claim_point(st.as_mut(), &name, &[0.0]); // its worker dies: no heartbeat, ever
        claim_point(st.as_mut(), &name, &[1.0]); // its worker keeps heart-beating
        let mut observer = b.open();
        let mut look = |stale_after: Duration| -> Vec<TrialRecord> {
            let mut seen = Vec::new();
            observer
                .claim(&name, Some(stale_after), &mut |trials, _| {
                    seen = trials.to_vec();
                    Ok(None)
                })
                .unwrap();
            seen
        };
        assert!(look(Duration::from_secs(60)).iter().all(|t| t.state == TrialState::Running), "fresh heartbeats are not stale");
        // The silent trial's last heartbeat is an hour old; the other one's is fresh.
        b.backdate_heartbeat(&name, 0, Duration::from_secs(3600));
        st.heartbeat(&name, &[1]).unwrap();
        let seen = look(Duration::from_secs(60));
        assert_eq!(seen[0].state, TrialState::Fail, "{}: the silent trial is stale", b.name());
        assert!(seen[0].error.as_deref().is_some_and(|e| e.starts_with("stale:")), "{:?}", seen[0].error);
        assert!(seen[0].is_requeueable());
        assert_eq!(seen[1].state, TrialState::Running, "{}: heartbeats keep a trial alive", b.name());
        // The dead worker's late result is refused; the live one's is recorded.
        assert!(matches!(st.finish(&name, 0, &outcome(TrialState::Complete, Some(1.0), None)), Err(SearchError::NotRunning { .. })));
        st.finish(&name, 1, &outcome(TrialState::Complete, Some(2.0), None)).unwrap();
        assert_eq!(st.trials(&name).unwrap()[1].values, Some(vec![2.0]));
    }
}

#[test]
fn four_worker_threads_share_a_brute_force_study_without_repeats() {
    let space = grid(&[6, 8]);
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![2.0, 5.0] })];
    let objective = minimize_f();
    let sampler = build_sampler("brute", &Value::Null).unwrap();
    for b in Backend::all("threads") {
        let name = unique_study("threads");
        let s = one_thread_setup(&name, &space, sampler.as_ref(), &objective, &runners, 100, 1);
        let stops: Vec<StopReason> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut st = b.open();
                        run_study(&s, st.as_mut(), OpenMode::Join, &Silent).unwrap().stop
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert!(stops.iter().all(|s| *s == StopReason::Exhausted), "{stops:?}");
        let trials = b.open().trials(&name).unwrap();
        assert_eq!(trials.len(), 48, "{}: one trial per point", b.name());
        assert!(trials.iter().all(|t| t.state == TrialState::Complete));
        let points: HashSet<Vec<u64>> = trials.iter().map(|t| t.point.iter().map(|&x| x as u64).collect()).collect();
        assert_eq!(points.len(), 48, "{}: no point twice", b.name());
        assert_eq!(trials.iter().map(|t| t.number).collect::<Vec<_>>(), (0..48).collect::<Vec<_>>());
        assert_eq!(trials.iter().filter(|t| t.values == Some(vec![0.0])).count(), 1, "the optimum (2, 5) once");
    }
}

#[test]
fn the_point_of_a_vanished_worker_is_requeued_and_finished() {
    let space = grid(&[2, 3]);
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![0.0, 0.0] })];
    let objective = minimize_f();
    let sampler = build_sampler("brute", &Value::Null).unwrap();
    let liveness = Liveness { stale_after: Some(Duration::from_millis(300)), heartbeat_interval: Duration::from_millis(50) };
    for b in Backend::all("vanished") {
        let name = unique_study("vanished");
        // A worker claims the first point and dies.
        let mut dead = b.open();
        dead.open_study(&name, &study_spec(&space, &objective, "brute", 1), OpenMode::Fresh).unwrap();
        claim_point(dead.as_mut(), &name, &[0.0, 0.0]);
        let s = StudySetup { liveness, ..one_thread_setup(&name, &space, sampler.as_ref(), &objective, &runners, 100, 1) };
        let out = run_study(&s, b.open().as_mut(), OpenMode::Join, &Silent).unwrap();
        assert_eq!(out.stop, StopReason::Exhausted);
        let t = &out.trials;
        assert_eq!(t.len(), 7, "{}: six points and the dead worker's trial", b.name());
        assert_eq!(t[0].state, TrialState::Fail);
        assert!(t[0].error.as_deref().is_some_and(|e| e.starts_with("stale:")), "{:?}", t[0].error);
        let retry = t.iter().find(|t| t.system_attrs.get("retry_of") == Some(&json!(0))).expect("a retry of trial 0");
        assert_eq!(
            (retry.state, retry.point.as_slice(), retry.values.as_deref()),
            (TrialState::Complete, &[0.0, 0.0][..], Some(&[0.0][..]))
        );
        let done: HashSet<Vec<u64>> =
            t.iter().filter(|t| t.state == TrialState::Complete).map(|t| t.point.iter().map(|&x| x as u64).collect()).collect();
        assert_eq!(done.len(), 6);
        assert_eq!(t.iter().filter(|t| t.state == TrialState::Complete).count(), 6, "no point completed twice");
    }
}

/// Best f of a TPE study of `budget` trials on the quadratic of the search acceptance test, run
/// by `workers` threads, each with its own connection.
fn tpe_best(b: &Backend, seed: u64, workers: usize, budget: usize) -> f64 {
    let space = grid(&[8, 8, 8]);
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![5.0, 2.0, 6.0] })];
    let objective = minimize_f();
    let sampler = build_sampler("tpe", &Value::Null).unwrap();
    let name = unique_study(&format!("tpe{workers}-{seed}"));
    let s = one_thread_setup(&name, &space, sampler.as_ref(), &objective, &runners, budget, seed);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| run_study(&s, b.open().as_mut(), OpenMode::Join, &Silent).unwrap());
        }
    });
    let trials = b.open().trials(&name).unwrap();
    assert_eq!(trials.iter().filter(|t| t.state == TrialState::Complete).count(), budget, "the budget is shared");
    trials.iter().filter_map(|t| t.values.as_ref().map(|v| v[0])).fold(f64::INFINITY, f64::min)
}

/// The acceptance criterion of the distributed-search issue: two workers reach the best value
/// one worker does with the same total budget, within the seed variance. Over seeds 1..=10 with
/// 40 trials of the 512-point quadratic, one worker's best f has mean m1 = 0.7 and standard
/// deviation s1 = 0.48 across seeds; two workers (whose interleaving depends on timing) measured
/// means of 0.5 to 1.0. They must reach a mean best within two seed standard deviations of m1
/// (README, "Distributed search").
#[test]
fn tpe_with_two_workers_matches_one_worker_on_the_same_budget() {
    for b in Backend::all("tpe-workers") {
        let seeds: Vec<u64> = (1..=10).collect();
        let one: Vec<f64> = seeds.iter().map(|&s| tpe_best(&b, s, 1, 40)).collect();
        let two: Vec<f64> = seeds.iter().map(|&s| tpe_best(&b, s, 2, 40)).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (m1, m2) = (mean(&one), mean(&two));
        let s1 = (one.iter().map(|x| (x - m1).powi(2)).sum::<f64>() / (one.len() - 1) as f64).sqrt();
        eprintln!("{}: one worker {one:?} mean {m1} sd {s1}; two workers {two:?} mean {m2}", b.name());
        assert!(m2 <= m1 + 2.0 * s1, "{}: two workers reach mean best {m2}, one worker {m1} (seed sd {s1})", b.name());
    }
}

#[test]
fn studies_copy_between_stores_unchanged() {
    // The source: a finished trial, a failed one and one still running.
    let src_dir = scratch("copy-src");
    let src = Backend::Sqlite(src_dir.join("study.db"));
    let name = unique_study("copy");
    let mut from = src.open();
    from.open_study(&name, &spec(2), OpenMode::Fresh).unwrap();
    for p in [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]] {
        claim_point(from.as_mut(), &name, &p);
    }
    from.finish(&name, 0, &outcome(TrialState::Complete, Some(0.25), None)).unwrap();
    from.finish(&name, 1, &outcome(TrialState::Fail, None, Some("broke"))).unwrap();
    let trials = from.trials(&name).unwrap();
    for b in Backend::all("copy") {
        let mut to = b.open();
        to.import_study(&name, &spec(2), &trials).unwrap();
        assert_eq!(to.trials(&name).unwrap(), trials, "{}: the copy is exact", b.name());
        assert_eq!(to.study_spec(&name).unwrap(), Some(spec(2)));
        let e = to.import_study(&name, &spec(2), &trials).unwrap_err().to_string();
        assert!(e.contains("already exists") && !e.contains('\n'), "{e}");
        // And back into a new SQLite file.
        let back_dir = scratch(&format!("copy-back-{}", b.name()));
        let back = Backend::Sqlite(back_dir.join("study.db"));
        back.open().import_study(&name, &spec(2), &to.trials(&name).unwrap()).unwrap();
        assert_eq!(back.open().trials(&name).unwrap(), trials);
    }
}

#[test]
fn deleting_a_study_removes_it_and_its_trials_only() {
    for b in Backend::all("delete") {
        let (gone, kept) = (unique_study("delete-gone"), unique_study("delete-kept"));
        let mut st = b.open();
        for (name, points) in [(&gone, 3), (&kept, 2)] {
            st.open_study(name, &spec(1), OpenMode::Fresh).unwrap();
            for p in 0..points {
                claim_point(st.as_mut(), name, &[p as f64]);
            }
        }
        st.finish(&gone, 0, &outcome(TrialState::Complete, Some(1.0), None)).unwrap();
        assert_eq!(st.delete_study(&gone).unwrap(), 3, "{}: three trials deleted", b.name());
        let names = b.open().study_names().unwrap();
        assert!(!names.contains(&gone) && names.contains(&kept), "{}: {names:?}", b.name());
        assert_eq!(b.open().trials(&kept).unwrap().len(), 2, "{}: the other study keeps its trials", b.name());
        let e = st.delete_study(&gone).unwrap_err().to_string();
        assert!(e.contains(&gone) && !e.contains('\n'), "{}: {e}", b.name());
        // The name can be used again from scratch, with fresh trial numbers.
        st.open_study(&gone, &spec(1), OpenMode::Fresh).unwrap();
        assert_eq!(claim_point(st.as_mut(), &gone, &[7.0]).number, 0);
    }
}

#[test]
fn a_version_1_sqlite_file_is_upgraded_in_place() {
    let dir = scratch("v1");
    let path = dir.join("study.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema_version', '1');
             CREATE TABLE studies (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, spec TEXT NOT NULL, created_ms INTEGER NOT NULL);
             CREATE TABLE trials (study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE, number INTEGER NOT NULL, state TEXT NOT NULL,
                 point TEXT NOT NULL, config TEXT NOT NULL, vals TEXT, software_metrics TEXT NOT NULL DEFAULT '{}', hardware_metrics TEXT NOT NULL DEFAULT '{}',
                 scaled_metrics TEXT NOT NULL DEFAULT '{}', violation REAL NOT NULL DEFAULT 0, system_attrs TEXT NOT NULL DEFAULT '{}', error TEXT,
                 start_ms INTEGER NOT NULL, complete_ms INTEGER, PRIMARY KEY (study_id, number));
             INSERT INTO studies VALUES (1, 'old', '{\"space\": 1}', 5);
             INSERT INTO trials (study_id, number, state, point, config, vals, start_ms, complete_ms) VALUES (1, 0, 'COMPLETE', '[1.0]', '{}', '[0.5]', 10, 20);
             INSERT INTO trials (study_id, number, state, point, config, start_ms) VALUES (1, 1, 'RUNNING', '[2.0]', '{}', 30);",
        )
        .unwrap();
    }
    let mut st = mase_search::SqliteStorage::open(&path).unwrap();
    let t = st.trials("old").unwrap();
    assert_eq!((t[0].values.clone(), t[0].worker.clone(), t[0].start_ms), (Some(vec![0.5]), None, 10));
    // The old running trial got its start as heartbeat, so it is long stale.
    st.claim("old", Some(Duration::from_secs(60)), &mut |_, _| Ok(None)).unwrap();
    assert_eq!(st.trials("old").unwrap()[1].state, TrialState::Fail);
    let v: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, mase_search::storage::SQLITE_SCHEMA_VERSION.to_string());
}

#[test]
fn damaged_trial_rows_are_one_error_line() {
    // Trials whose point or values do not fit the study (a file changed by hand): resuming the
    // study, where TPE reads every stored point, names the trial. (SQL change, error fragment)
    let cases = [
        ("UPDATE trials SET point = '[1.0]' WHERE number = 3", "trial 3 stores a point of 1 value(s), the space has 3 parameter(s)"),
        ("UPDATE trials SET vals = '[]' WHERE number = 5", "trial 5 stores 0 value(s), the objective has 1"),
    ];
    let dir = scratch("damaged-rows");
    let path = dir.join("study.db");
    let b = Backend::Sqlite(path.clone());
    let space = grid(&[4, 4, 4]);
    let runners: Vec<Box<dyn Runner>> = vec![Box::new(QuadraticRunner { target: vec![1.0, 2.0, 3.0] })];
    let objective = minimize_f();
    let sampler = build_sampler("tpe", &Value::Null).unwrap();
    for (change, want) in cases {
        let name = unique_study("damaged");
        run_study(
            &one_thread_setup(&name, &space, sampler.as_ref(), &objective, &runners, 12, 1),
            b.open().as_mut(),
            OpenMode::Fresh,
            &Silent,
        )
        .unwrap();
        rusqlite::Connection::open(&path).unwrap().execute_batch(change).unwrap();
        let more = one_thread_setup(&name, &space, sampler.as_ref(), &objective, &runners, 14, 1);
        let e = run_study(&more, b.open().as_mut(), OpenMode::Resume, &Silent).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(&format!("study `{name}`")) && e.contains(want) && !e.contains('\n'), "{change}: {e}");
    }
}

/// Runs `open` and checks it fails with one line containing every word.
fn fails_with(url: &str, opts: &ConnectOptions, words: &[&str]) {
    let t0 = Instant::now();
    let e = match mase_search::open_storage(url, opts) {
        Ok(_) => panic!("{url} should not open"),
        Err(e) => e.to_string(),
    };
    assert!(!e.contains('\n'), "one line: {e}");
    for w in words {
        assert!(e.contains(w), "`{e}` should mention `{w}`");
    }
    assert!(!e.contains("secret"), "no password in messages: {e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{url}: gave up after {:?}", t0.elapsed());
}

#[test]
fn bad_urls_and_unreachable_servers_fail_with_one_line() {
    let quick = ConnectOptions { connect_timeout: Duration::from_millis(500), env: mase_search::PgEnv::default() };
    // A port nothing listens on, and a server that accepts connections but never answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let closed_at = format!("127.0.0.1:{closed}");
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("mysql://me@localhost/mase".into(), vec!["unsupported storage scheme `mysql`"]),
        ("postgresql://me:secret@127.0.0.1:notaport/mase".into(), vec!["not a PostgreSQL URL", "me:***@"]),
        (format!("postgresql://me:secret@127.0.0.1:{closed}/mase"), vec!["cannot connect", "refused", &closed_at]),
        (format!("postgresql://me:secret@127.0.0.1:{silent_port}/mase"), vec!["cannot connect", "no answer", "1 s"]),
    ];
    for (url, words) in &cases {
        fails_with(url, &quick, words);
    }
    drop(silent);
    if let Some(url) = postgres_url("wrong-password") {
        // The test server's URL with the password replaced.
        let (head, host) = url.rsplit_once('@').expect("user:password@host");
        let user = head.rsplit_once(':').map_or(head, |(u, _)| u);
        fails_with(&format!("{user}:secret-but-wrong@{host}"), &quick, &["password authentication failed"]);
    }
}

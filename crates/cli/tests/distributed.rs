//! Distributed search: `ch search` worker processes sharing one study (PostgreSQL, and SQLite
//! with file locking), a worker killed mid-trial (an abort at the `MASE_FAILPOINT` test hook,
//! which leaves the store as SIGKILL does), `ch study` on the shared store, and the one-line
//! errors of bad stores, and TLS with the password out of the URL. The PostgreSQL half of each test needs the test server
//! of `scripts/with-postgres.sh` (`MASE_TEST_POSTGRES_URL`); without it that half is skipped with
//! a line on stderr, and under `CI=true` it fails.

mod common;
#[path = "../../search/tests/common/postgres_server.rs"]
mod postgres_server;
use common::*;
use mase_search::{TrialRecord, TrialState};
use postgres_server::{postgres_tls, postgres_url, split_password};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The stores a test runs against: a SQLite file (`sqlite:///` URL), and PostgreSQL if there.
fn stores(test: &str, root: &Path) -> Vec<String> {
    let mut v = vec![sqlite_store(root)];
    v.extend(postgres_url(test));
    v
}

/// A `sqlite:///` URL of a study file in `root/shared`, a folder made here: a storage URL never
/// creates folders.
fn sqlite_store(root: &Path) -> String {
    let dir = root.join("shared");
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite:///{}", dir.join("study.db").display())
}

fn study_name(test: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{test}-{}-{nanos}", std::process::id())
}

/// A brute-force search of 2 x 6 x 4 = 48 points (the formats of tfc's first Linear) whose trials
/// each do a fixed amount of work (accuracy over 4000 MNIST images plus 10 timed batches, about
/// 0.1 to 0.3 s here), like a real search's.
fn config(root: &Path, url: &str, study: &str, weight_widths: &str) -> PathBuf {
    let p = root.join(format!("{study}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"
model = "tfc"
dataset = "mnist"
project = "workers"
seed = 3
batch_size = 500
[search.search_space]
name = "graph/quantize/mixed_precision_ptq"
[search.search_space.setup]
by = "name"
[search.search_space.seed.default.config]
name = ["NA"]
[search.search_space.seed.seq_blocks_1.config]
name = ["integer"]
data_in_width = [4, 8]
data_in_frac_width = ["NA"]
weight_width = {weight_widths}
weight_frac_width = ["NA"]
bias_width = [4, 8, 12, 16]
bias_frac_width = ["NA"]
[search.strategy.sw_runner.basic_evaluation]
data_loader = "val_dataloader"
num_samples = 4000
[search.strategy.hw_runner.latency]
batch_size = 500
repeats = 10
[search.strategy.setup]
n_trials = 100
sampler = "brute"
sum_scaled_metrics = true
direction = "maximize"
[search.strategy.metrics]
accuracy = {{ scale = 1.0 }}
[search.storage]
url = "{url}"
study = "{study}"
stale_after = 3
heartbeat_interval = 0.5
"#
        ),
    )
    .unwrap();
    p
}

/// A `ch search` worker process. A thread blocks in `wait()` on it and sends the exit status, so
/// the test can wait with a bound without polling.
struct Worker {
    pid: u32,
    exited: mpsc::Receiver<std::io::Result<ExitStatus>>,
}

impl Worker {
    /// Waits for the worker to exit, at most until `deadline`; past it the worker is killed
    /// (SIGKILL, by pid: the waiting thread owns the `Child`) and the test fails.
    fn wait(&self, deadline: Instant) -> ExitStatus {
        match self.exited.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(status) => status.expect("wait for ch"),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &self.pid.to_string()]).status();
                panic!("worker {} did not finish in time", self.pid);
            }
        }
    }
}

/// Starts a `ch search` worker in its own folder (its reports go there), output to files;
/// `failpoint` arms the search loop's test hook (`MASE_FAILPOINT`), so the worker dies there.
fn spawn_worker(cfg: &Path, dir: &Path, failpoint: Option<&str>) -> Worker {
    std::fs::create_dir_all(dir).unwrap();
    let data = repo_root().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ch"));
    cmd.args(["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--threads", "1", "--json"])
        .current_dir(dir)
        .env_remove("MASE_DATA_DIR")
        .env_remove("MASE_FAILPOINT")
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
    if let Some(point) = failpoint {
        cmd.env("MASE_FAILPOINT", point);
    }
    let mut child = cmd.spawn().expect("start ch");
    let pid = child.id();
    let (send, exited) = mpsc::channel();
    std::thread::spawn(move || {
        // The test may have stopped listening (it failed); the status is then of no use.
        let _ = send.send(child.wait());
    });
    Worker { pid, exited }
}

/// The study's trials as the store has them now (none before the study exists).
fn trials(url: &str, study: &str) -> Vec<TrialRecord> {
    match mase_search::open_storage(url, &Default::default()) {
        Ok(mut st) => st.trials(study).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Four workers on one study of 48 points; worker 0 dies (an abort at the `after-claim`
/// failpoint, which leaves the store as SIGKILL does) right after claiming its first trial. The
/// other three finish the study: exactly 48 distinct complete points, the killed trial failed as
/// stale and its point completed by a retry.
fn four_workers_with_one_killed(url: &str, root: &Path) {
    let study = study_name("four");
    let cfg = config(root, url, &study, "[2, 3, 4, 5, 6, 8]");
    let workers: Vec<Worker> =
        (0..4).map(|i| spawn_worker(&cfg, &root.join(format!("worker{i}")), (i == 0).then_some("after-claim"))).collect();
    let victim = format!(":{}", workers[0].pid);
    let of_victim = |t: &TrialRecord| t.worker.as_deref().is_some_and(|w| w.ends_with(&victim));
    let status = workers[0].wait(Instant::now() + Duration::from_secs(120));
    assert!(!status.success(), "{url}: worker 0 died at the failpoint ({status})");
    // The dead worker's trial is normally still RUNNING here; on a machine loaded enough that
    // `stale_after` (3 s) passed since the abort, another worker has already failed it as stale.
    let killed: Vec<TrialRecord> = trials(url, &study).into_iter().filter(|t| of_victim(t)).collect();
    assert_eq!(killed.len(), 1, "{url}: worker 0 died in the middle of one trial");
    let stale = |t: &TrialRecord| t.state == TrialState::Fail && t.error.as_deref().is_some_and(|e| e.starts_with("stale:"));
    assert!(killed[0].state == TrialState::Running || stale(&killed[0]), "{url}: {:?}", killed[0]);
    let deadline = Instant::now() + Duration::from_secs(240);
    for (i, w) in workers.iter().enumerate().skip(1) {
        let ok = w.wait(deadline).success();
        let err = std::fs::read_to_string(root.join(format!("worker{i}/stderr"))).unwrap_or_default();
        assert!(ok, "{url}: worker {i} failed: {err}");
    }
    let all = trials(url, &study);
    let complete: Vec<&TrialRecord> = all.iter().filter(|t| t.state == TrialState::Complete).collect();
    assert_eq!(complete.len(), 48, "{url}: every point completed");
    let points: HashSet<Vec<u64>> = complete.iter().map(|t| t.point.iter().map(|&x| x as u64).collect()).collect();
    assert_eq!(points.len(), 48, "{url}: no point completed twice");
    let numbers: HashSet<u64> = all.iter().map(|t| t.number).collect();
    assert_eq!(numbers.len(), all.len(), "unique trial numbers");
    // Every failure is a stale trial (the killed one, and any a loaded machine starved).
    for t in all.iter().filter(|t| t.state != TrialState::Complete) {
        assert!(t.state == TrialState::Fail && t.error.as_deref().is_some_and(|e| e.starts_with("stale:")), "{url}: {t:?}");
    }
    let k = &killed[0];
    assert_eq!(all[k.number as usize].state, TrialState::Fail, "the killed trial was declared stale");
    let retry = complete
        .iter()
        .find(|t| t.system_attrs.get("retry_of").and_then(|v| v.as_u64()) == Some(k.number))
        .unwrap_or_else(|| panic!("{url}: no completed retry of trial {}", k.number));
    assert_eq!(retry.point, k.point, "the retry ran the killed trial's point");
    assert!(!of_victim(retry), "another worker completed it");
    // Each surviving worker wrote the reports of the whole study.
    let out: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(root.join("worker1/stdout")).unwrap().trim()).expect("worker 1 printed its JSON");
    assert_eq!(out["studies"][0]["complete"], 48);
    let csv = std::fs::read_to_string(root.join("worker1/mase_output/workers/software/search_ckpts/trials.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + all.len());
}

#[test]
fn four_worker_processes_finish_48_points_after_one_is_killed() {
    let root = scratch("four-workers");
    for url in stores("four-workers", &root) {
        four_workers_with_one_killed(&url, &root);
    }
}

/// A quick brute-force study of 12 points (data_in_width x weight_width x one bias width).
fn small_search(root: &Path, url: &str, study: &str) {
    let text = std::fs::read_to_string(config(root, url, study, "[2, 8]")).unwrap();
    let text = text
        .replace("[4, 8, 12, 16]", "[8, 12, 16]")
        .replace("num_samples = 4000", "num_samples = 200")
        .replace("repeats = 10", "repeats = 1");
    let cfg = root.join(format!("{study}-small.toml"));
    std::fs::write(&cfg, text).unwrap();
    let data = repo_root().join("data");
    let r = ch_json(&["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--threads", "1"], root);
    assert_eq!(r["studies"][0]["complete"], 12, "{url}");
}

#[test]
fn study_commands_list_show_export_copy_and_delete() {
    let root = scratch("study-commands");
    let sqlite = sqlite_store(&root);
    let study = study_name("ops");
    small_search(&root, &sqlite, &study);
    let want = trials(&sqlite, &study);

    let r = ch_json(&["study", "list", "--storage", &sqlite], &root);
    let s = &r["studies"][0];
    assert_eq!((s["study"].as_str(), s["complete"].as_u64(), s["sampler"].as_str()), (Some(study.as_str()), Some(12), Some("brute")));
    assert_eq!(s["workers"].as_array().map(|w| w.len()), Some(1));

    let r = ch_json(&["study", "show", "--storage", &sqlite, "--study", &study], &root);
    let best = &r["studies"][0]["best"]["0"];
    let top = want.iter().filter_map(|t| t.values.as_ref().map(|v| v[0])).fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(best["value"][0].as_f64(), Some(top), "the best accuracy");

    let out = root.join("export");
    ch_json(&["study", "export", "--storage", &sqlite, "--study", &study, "-o", out.to_str().unwrap()], &root);
    for f in ["trials.csv", "log.json", "best.json", "study.json", "best_so_far.png", "best_so_far.svg"] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert_eq!(std::fs::read_to_string(out.join("trials.csv")).unwrap().lines().count(), 13);
    let dump: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("study.json")).unwrap()).unwrap();
    let dumped: Vec<TrialRecord> = serde_json::from_value(dump["trials"].clone()).unwrap();
    assert_eq!(dumped, want, "study.json holds the trials exactly");
    let csv_only = root.join("csv-only");
    ch_json(&["study", "export", "--storage", &sqlite, "--study", &study, "--format", "csv", "-o", csv_only.to_str().unwrap()], &root);
    assert!(csv_only.join("trials.csv").exists() && !csv_only.join("log.json").exists());

    // Copy to PostgreSQL (or another SQLite file) and back: the trials are unchanged.
    let plain = root.join("copy.db").display().to_string();
    let target = postgres_url("study-copy").unwrap_or(plain);
    let r = ch_json(&["study", "copy", "--from", &sqlite, "--to", &target, "--study", &study], &root);
    assert_eq!(r["studies"][0]["trials"], 12);
    assert_eq!(trials(&target, &study), want);
    let back = format!("sqlite:///{}", root.join("back.db").display());
    ch_json(&["study", "copy", "--from", &target, "--to", &back, "--study", &study], &root);
    assert_eq!(trials(&back, &study), want);
    let line = ch_error(&["study", "copy", "--from", &sqlite, "--to", &target, "--study", &study], &root);
    assert!(line.contains("already exists"), "{line}");
    let missing = root.join("missing.db").display().to_string();
    let line = ch_error(&["study", "list", "--storage", &missing], &root);
    assert!(line.contains("no such file"), "{line}");
    assert!(!Path::new(&missing).exists(), "reading a store never creates one");
    let line = ch_error(&["study", "show", "--storage", &sqlite, "--study", "nope"], &root);
    assert!(line.contains("study `nope` not found") && line.contains(&study), "{line}");

    // Delete the copy in the target store; the source keeps its study.
    let r = ch_json(&["study", "delete", "--storage", &target, "--study", &study], &root);
    assert_eq!(r["trials"], 12);
    assert!(!mase_search::open_storage(&target, &Default::default()).unwrap().study_names().unwrap().contains(&study));
    assert_eq!(trials(&sqlite, &study), want);
    let line = ch_error(&["study", "delete", "--storage", &target, "--study", &study], &root);
    assert!(line.contains(&format!("study `{study}` not found")), "{line}");
}

#[test]
fn bad_stores_and_mismatched_studies_fail_with_one_line() {
    let root = scratch("bad-stores");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cases: Vec<(String, Vec<&str>)> = vec![
        ("mysql://me@localhost/mase".into(), vec!["unsupported storage scheme `mysql`"]),
        ("postgresql://me@127.0.0.1:notaport/mase".into(), vec!["not a PostgreSQL URL"]),
        (format!("postgresql://me:secret@127.0.0.1:{closed}/mase"), vec!["cannot connect", "refused"]),
    ];
    let pg = postgres_url("bad-password");
    if let Some(url) = &pg {
        let (head, host) = url.rsplit_once('@').unwrap();
        let user = head.rsplit_once(':').map_or(head, |(u, _)| u);
        cases.push((format!("{user}:wrong-password@{host}"), vec!["password authentication failed"]));
    }
    let data = repo_root().join("data");
    for (url, words) in &cases {
        let cfg = config(&root, "unused", &study_name("bad"), "[2, 8]");
        for args in [
            vec!["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--storage", url],
            vec!["study", "list", "--storage", url],
        ] {
            let line = ch_error(&args, &root);
            for w in words {
                assert!(line.contains(w), "{args:?}: `{line}` should mention `{w}`");
            }
            assert!(!line.contains("secret") && !line.contains("wrong-password"), "no password in messages: {line}");
        }
    }
    // A study that exists with another space: the second search names it and stops.
    for url in stores("mismatch", &root) {
        let study = study_name("mismatch");
        small_search(&root, &url, &study);
        let cfg = config(&root, &url, &study, "[2, 4, 8]");
        let line = ch_error(&["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &root);
        assert!(line.contains(&format!("study `{study}`")) && line.contains("another space") && line.contains("--study"), "{line}");
        assert_eq!(trials(&url, &study).len(), 12, "the stored study is untouched");
    }
}

/// Runs `ch` with these environment variables (and none of the libpq ones this process has).
fn ch_with_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ch"));
    cmd.args(args).current_dir(cwd).env_remove("MASE_DATA_DIR");
    for k in ["PGPASSWORD", "PGPASSFILE", "PGSSLMODE", "PGSSLROOTCERT"] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied()).output().expect("run ch")
}

#[test]
fn ch_reaches_the_server_over_verified_tls_with_the_password_out_of_the_url() {
    let Some(server) = postgres_tls("ch-tls") else { return };
    let root = scratch("tls");
    let (bare, password) = split_password(&server.url);
    let verified = format!("{bare}?sslmode=verify-full&sslrootcert={}", server.ca.display());
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let pgpass = home.join(".pgpass");
    std::fs::write(&pgpass, format!("# mase-rs test server\n*:*:mase_test:mase:{password}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let home_s = home.to_str().unwrap();
    // (environment, refused with these words; None: `ch study list` succeeds)
    let cases: Vec<(Vec<(&str, &str)>, Option<Vec<&str>>)> = vec![
        (vec![("PGPASSWORD", password.as_str()), ("HOME", "/nonexistent")], None),
        (vec![("HOME", home_s)], None),
        (vec![("HOME", "/nonexistent")], Some(vec!["cannot connect", "no password in the URL, PGPASSWORD or ~/.pgpass"])),
    ];
    for (env, refused) in &cases {
        let out = ch_with_env(&["study", "list", "--storage", &verified, "--json"], &root, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match refused {
            None => assert!(out.status.success(), "{env:?}: {stderr}"),
            Some(words) => {
                assert!(!out.status.success(), "{env:?} should fail");
                let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("WARNING")).collect();
                assert_eq!(lines.len(), 1, "{env:?}: one line, got {stderr}");
                for w in words {
                    assert!(lines[0].contains(w), "{env:?}: `{}` should mention `{w}`", lines[0]);
                }
            }
        }
    }
    // A password file others can read is skipped with a warning naming it.
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = ch_with_env(&["study", "list", "--storage", &verified], &root, &[("HOME", home_s)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("WARNING  password file") && stderr.contains(".pgpass") && stderr.contains("group or world access"),
        "{stderr}"
    );
    // A certificate from another CA: one line, no password.
    let other = format!("{bare}?sslmode=verify-full&sslrootcert={}", server.other_ca.display());
    let out = ch_with_env(&["study", "list", "--storage", &other], &root, &[("PGPASSWORD", password.as_str())]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(!out.status.success() && lines.len() == 1, "{stderr}");
    assert!(
        lines[0].contains("invalid peer certificate") && lines[0].contains("other-ca.crt") && !lines[0].contains(&password),
        "{stderr}"
    );
}

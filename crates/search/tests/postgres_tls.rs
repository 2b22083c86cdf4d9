//! Security of the PostgreSQL store against the test server of `scripts/with-postgres.sh`, which
//! takes TLS with a certificate for 127.0.0.1 signed by a throw-away CA: each `sslmode`
//! encrypts (or not) and checks the certificate (or not) as libpq's does, and a URL without a
//! password takes it from `PGPASSWORD` or a password file. Without the server (or its TLS) the
//! tests are skipped with a line on stderr, and under `CI=true` they fail.

#[path = "common/postgres_server.rs"]
mod postgres_server;
use mase_search::{ConnectOptions, PgEnv, PostgresStorage};
use postgres_server::{postgres_tls, split_password};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options that read nothing from this process's environment but what `env` says.
fn options(env: PgEnv) -> ConnectOptions {
    ConnectOptions { connect_timeout: Duration::from_secs(5), env }
}

/// Connects and tells whether the session is encrypted, or the error's one line.
fn encrypted(url: &str, env: PgEnv) -> Result<bool, String> {
    let mut st = PostgresStorage::connect(url, &options(env)).map_err(|e| e.to_string())?;
    st.encrypted().map_err(|e| e.to_string())
}

/// What a case expects: connected, encrypted or not; or refused with these words.
#[derive(Debug)]
enum Want {
    Encrypted(bool),
    Refused(&'static [&'static str]),
}

fn check(url: &str, env: PgEnv, want: &Want, password: &str) {
    match (encrypted(url, env), want) {
        (Ok(got), Want::Encrypted(w)) => assert_eq!(got, *w, "{url}: encrypted"),
        (Err(e), Want::Refused(words)) => {
            assert!(!e.contains('\n'), "one line: {e}");
            assert!(!e.contains(password), "no password in messages: {e}");
            for w in *words {
                assert!(e.contains(w), "{url}: `{e}` should mention `{w}`");
            }
        }
        (got, w) => panic!("{url}: got {got:?}, want {w:?}"),
    }
}

#[test]
fn each_sslmode_encrypts_and_checks_the_certificate_as_libpq_does() {
    let Some(server) = postgres_tls("sslmodes") else { return };
    let (_, password) = split_password(&server.url);
    let (ca, other) = (server.ca.display().to_string(), server.other_ca.display().to_string());
    // The same server under a name its certificate was not issued for (hostaddr: where to connect).
    let (head, tail) = server.url.split_once("@127.0.0.1:").expect("test server on 127.0.0.1");
    let renamed = format!("{head}@wrong-name.invalid:{tail}");
    let unknown_ca: &[&str] = &["cannot connect", "invalid peer certificate", "UnknownIssuer", "other-ca.crt"];
    let cases: Vec<(String, Want)> = vec![
        (server.url.clone(), Want::Encrypted(true)),
        (format!("{}?sslmode=disable", server.url), Want::Encrypted(false)),
        (format!("{}?sslmode=prefer", server.url), Want::Encrypted(true)),
        (format!("{}?sslmode=require", server.url), Want::Encrypted(true)),
        (format!("{}?sslmode=verify-ca&sslrootcert={ca}", server.url), Want::Encrypted(true)),
        (format!("{}?sslmode=verify-full&sslrootcert={ca}", server.url), Want::Encrypted(true)),
        (format!("{}?sslmode=verify-full&sslrootcert={other}", server.url), Want::Refused(unknown_ca)),
        (format!("{}?sslmode=verify-ca&sslrootcert={other}", server.url), Want::Refused(unknown_ca)),
        // libpq: require with a CA file checks the chain.
        (format!("{}?sslmode=require&sslrootcert={other}", server.url), Want::Refused(unknown_ca)),
        (format!("{renamed}?hostaddr=127.0.0.1&sslmode=verify-ca&sslrootcert={ca}"), Want::Encrypted(true)),
        (
            format!("{renamed}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={ca}"),
            Want::Refused(&["invalid peer certificate", "not valid for name", "wrong-name.invalid", "sslmode=verify-full"]),
        ),
        (format!("{}?sslmode=verify-full", server.url), Want::Refused(&["sslmode=verify-full needs the CA certificate", "sslrootcert="])),
        (format!("{}?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt", server.url), Want::Refused(&["CA file /nonexistent/ca.crt"])),
        (
            format!("{}?sslmode=on", server.url),
            Want::Refused(&["sslmode `on`: expected disable, prefer, require, verify-ca or verify-full"]),
        ),
    ];
    for (url, want) in &cases {
        check(url, PgEnv::default(), want, &password);
    }
    // PGSSLMODE and PGSSLROOTCERT stand in for the URL's keys; the URL's win.
    let env = PgEnv { sslmode: Some("verify-full".into()), sslrootcert: Some(server.ca.clone()), ..PgEnv::default() };
    check(&server.url, env.clone(), &Want::Encrypted(true), &password);
    check(&format!("{}?sslmode=disable", server.url), env.clone(), &Want::Encrypted(false), &password);
    let env = PgEnv { sslrootcert: Some(server.other_ca.clone()), ..env };
    check(&server.url, env, &Want::Refused(unknown_ca), &password);
}

/// Writes a password file with these lines and permissions.
fn passfile(dir: &Path, name: &str, lines: &[String], mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn a_url_without_password_takes_pgpassword_or_the_password_file() {
    let Some(server) = postgres_tls("password-sources") else { return };
    let (url, password) = split_password(&server.url);
    let url = format!("{url}?sslmode=verify-full&sslrootcert={}", server.ca.display());
    let port = url.split("127.0.0.1:").nth(1).and_then(|t| t.split('/').next()).expect("port");
    let dir = std::env::temp_dir().join(format!("mase-pgpass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let line = |host: &str, port: &str, db: &str, user: &str, pw: &str| format!("{host}:{port}:{db}:{user}:{pw}");
    let exact = line("127.0.0.1", port, "mase_test", "mase", &password);
    let good = passfile(&dir, "good", &[line("other.host", "*", "*", "*", "nope"), exact.clone()], 0o600);
    let wildcard = passfile(&dir, "wildcard", &[line("*", "*", "*", "*", &password)], 0o600);
    let other_port = passfile(&dir, "other-port", &[line("127.0.0.1", "1", "*", "*", &password)], 0o600);
    let readable = passfile(&dir, "readable", std::slice::from_ref(&exact), 0o644);
    let wrong = passfile(&dir, "wrong", &[line("*", "*", "*", "*", "wrong-password")], 0o600);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    passfile(&home, ".pgpass", &[exact], 0o600);
    let env_pw = |p: &str| PgEnv { password: Some(p.into()), ..PgEnv::default() };
    let file = |p: &PathBuf| PgEnv { passfile: Some(p.clone()), ..PgEnv::default() };
    let no_password: &[&str] = &["password", "no password in the URL, PGPASSWORD or ~/.pgpass"];
    let cases: Vec<(PgEnv, Want)> = vec![
        (env_pw(&password), Want::Encrypted(true)),
        (file(&good), Want::Encrypted(true)),
        (file(&wildcard), Want::Encrypted(true)),
        (PgEnv { home: Some(home.clone()), ..PgEnv::default() }, Want::Encrypted(true)),
        // PGPASSWORD comes first, even when the file has the right one.
        (
            PgEnv { password: Some("wrong-password".into()), passfile: Some(good.clone()), ..PgEnv::default() },
            Want::Refused(&["password authentication failed", "the password is PGPASSWORD's"]),
        ),
        (file(&wrong), Want::Refused(&["password authentication failed", "the password is from", "/wrong"])),
        (file(&other_port), Want::Refused(no_password)),
        // Readable by others: ignored (with a warning on stderr).
        (file(&readable), Want::Refused(no_password)),
        (PgEnv::default(), Want::Refused(no_password)),
    ];
    for (env, want) in &cases {
        check(&url, env.clone(), want, &password);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

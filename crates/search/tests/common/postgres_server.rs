//! The PostgreSQL server of the storage tests (`MASE_TEST_POSTGRES_URL`, set by
//! `scripts/with-postgres.sh`). The search tests and the `ch` tests of distributed search both
//! use it; the `ch` tests include this file with `#[path]`, since a crate of its own for one
//! function would be more than it is worth.

/// The test server's URL. Without it the PostgreSQL half of a test is skipped with a line on
/// stderr (written past the test harness's capture, so it shows), except under `CI=true`, where
/// a missing server is a failure.
pub fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("MASE_TEST_POSTGRES_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but MASE_TEST_POSTGRES_URL is unset: run the tests through scripts/with-postgres.sh"
            );
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIP {test} on PostgreSQL: MASE_TEST_POSTGRES_URL is unset (scripts/with-postgres.sh sets it); ran on SQLite only"
            );
            None
        }
    }
}

/// The test server with TLS: its URL, the CA file that signed its certificate (issued for
/// 127.0.0.1), and an unrelated CA's file. Skipped, or a failure under `CI=true`, as above.
pub struct TlsServer {
    pub url: String,
    pub ca: std::path::PathBuf,
    pub other_ca: std::path::PathBuf,
}

pub fn postgres_tls(test: &str) -> Option<TlsServer> {
    let url = postgres_url(test)?;
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    match (var("MASE_TEST_POSTGRES_CA"), var("MASE_TEST_POSTGRES_OTHER_CA")) {
        (Some(ca), Some(other_ca)) => Some(TlsServer { url, ca, other_ca }),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but MASE_TEST_POSTGRES_CA is unset: scripts/with-postgres.sh needs openssl for the TLS tests"
            );
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIP {test}: the test server has no TLS (MASE_TEST_POSTGRES_CA is unset)");
            None
        }
    }
}

/// The URL's user, host and database without the password, and the password.
pub fn split_password(url: &str) -> (String, String) {
    let (head, host) = url.rsplit_once('@').expect("user:password@host");
    let (user, password) = head.rsplit_once(':').expect("user:password");
    (format!("{user}@{host}"), password.to_string())
}

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

//! Test hooks that crash the search loop at a chosen point, in the style of TiKV's `fail-rs`
//! failpoints, so that tests can kill a worker at an exact moment instead of polling the store and
//! racing a `kill -9`.
//!
//! The environment variable `MASE_FAILPOINT` names one point, optionally with a count:
//! `MASE_FAILPOINT=after-claim` aborts the process the first time the loop passes `after-claim`,
//! and `MASE_FAILPOINT=after-finish:5` the fifth time it passes `after-finish`. The process ends
//! with [`std::process::abort`]: no destructors run and nothing is cleaned up, so the study store
//! is left exactly as after `kill -9`. Without the variable (or for any other point) [`hit`] does
//! nothing. The points of [`crate::study::run_study`]:
//! - `after-claim`: a claim is committed (the trial is `RUNNING`), before its candidate is evaluated;
//! - `after-finish`: a trial's result is committed.
//!
//! This is a test hook, not a feature: the variable is read once per process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The point to abort at and on which pass (1 = the first).
struct Armed {
    point: String,
    nth: u64,
}

/// The parsed `MASE_FAILPOINT`, read once: the loop passes these points on every trial, and
/// looking the variable up each time would cost a lock on the environment.
fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| parse(&std::env::var("MASE_FAILPOINT").ok()?)).as_ref()
}

/// `point` or `point:n`. A count that is not a positive number disarms the hook rather than
/// aborting at a pass the test did not mean.
fn parse(spec: &str) -> Option<Armed> {
    let spec = spec.trim();
    let (point, nth) = match spec.rsplit_once(':') {
        Some((point, n)) => (point, n.trim().parse::<u64>().ok().filter(|&n| n > 0)?),
        None => (spec, 1),
    };
    (!point.is_empty()).then(|| Armed { point: point.to_string(), nth })
}

/// Marks that the loop passed `point`: aborts the process on the armed pass of the armed point.
pub fn hit(point: &str) {
    // Passes are counted for the armed point only; one process arms at most one point.
    static PASSES: AtomicU64 = AtomicU64::new(0);
    let Some(armed) = armed() else { return };
    if armed.point == point && PASSES.fetch_add(1, Ordering::SeqCst) + 1 == armed.nth {
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_point_and_an_optional_pass() {
        let a = parse("after-claim").unwrap();
        assert_eq!((a.point.as_str(), a.nth), ("after-claim", 1));
        let a = parse("after-finish:5").unwrap();
        assert_eq!((a.point.as_str(), a.nth), ("after-finish", 5));
        assert!(parse("after-finish:0").is_none());
        assert!(parse("after-finish:x").is_none());
        assert!(parse("").is_none());
    }
}

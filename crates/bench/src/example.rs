//! What the measurement examples (`crates/bench/examples`) share: their flags and the
//! best-of-several timing.

use std::time::Instant;

/// The value of the numeric flag `name` (`--batch 64`) on the command line, or `default` when it
/// is absent or not a number.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The value of the flag `name` (`--algo winograd`) on the command line, if given.
pub fn word(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// Seconds of the fastest of `repeat` runs of `f` (one run at least).
pub fn best(repeat: usize, mut f: impl FnMut()) -> f64 {
    (0..repeat.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

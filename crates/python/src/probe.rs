//! A test hook that proves the GIL is released while Rust computes: once armed for `n` callers,
//! every forward call waits inside its GIL-free section until `n` calls are inside at once. Two
//! Python threads calling `forward` both return only if neither holds the GIL while it waits;
//! if one did, the other could never enter, and the waiting call fails after a bounded wait
//! with an error saying so (rather than hanging the test).

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Callers to wait for (0: disarmed) and callers inside now.
static ROOM: Mutex<(usize, usize)> = Mutex::new((0, 0));
static ARRIVED: Condvar = Condvar::new();

/// The longest a caller waits for the others.
static LIMIT: Mutex<Duration> = Mutex::new(Duration::from_secs(20));

/// Arms the hook for `parties` callers (0 disarms it), each waiting at most `limit`.
pub fn arm(parties: usize, limit: Duration) {
    *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) = limit;
    let mut room = ROOM.lock().unwrap_or_else(|p| p.into_inner());
    *room = (parties, 0);
}

/// Called by `forward` inside its GIL-free section: when armed, waits until `parties` callers
/// are inside, then disarms the hook for the next test.
pub fn rendezvous() -> Result<(), String> {
    let mut room = ROOM.lock().unwrap_or_else(|p| p.into_inner());
    if room.0 == 0 {
        return Ok(());
    }
    room.1 += 1;
    ARRIVED.notify_all();
    let limit = *LIMIT.lock().unwrap_or_else(|p| p.into_inner());
    let (mut room, timeout) = ARRIVED.wait_timeout_while(room, limit, |r| r.0 > 0 && r.1 < r.0).unwrap_or_else(|p| p.into_inner());
    if timeout.timed_out() {
        let (want, inside) = *room;
        *room = (0, 0);
        return Err(format!("GIL probe: only {inside} of {want} forward calls were inside Rust at once"));
    }
    // Every caller is in: disarm, so that later calls run freely.
    room.0 = 0;
    ARRIVED.notify_all();
    Ok(())
}

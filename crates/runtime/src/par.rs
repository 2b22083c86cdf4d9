//! Running a closure over chunks of a buffer, on the executor's thread pool when the work is large.
//!
//! Each chunk is processed by exactly one call in a fixed order of operations, so results are the
//! same bits with one thread or many.

use rayon::prelude::*;
use rayon::ThreadPool;

/// Work (in scalar operations) below which a kernel stays on the calling thread.
pub(crate) const PAR_MIN_WORK: usize = 1 << 16;

/// Calls `f(index, chunk)` for each `chunk`-sized piece of `data`, in parallel on `pool` when
/// `work` is at least [`PAR_MIN_WORK`].
pub(crate) fn for_each_chunk<T, F>(pool: Option<&ThreadPool>, work: usize, data: &mut [T], chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync + Send,
{
    if chunk == 0 || data.is_empty() {
        return;
    }
    match pool {
        Some(p) if work >= PAR_MIN_WORK && p.current_num_threads() > 1 && data.len() > chunk => {
            p.install(|| data.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c)));
        }
        _ => data.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c)),
    }
}

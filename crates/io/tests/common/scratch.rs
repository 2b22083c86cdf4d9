//! A test's own folder under the system temp dir, shared by the test helpers of several crates
//! (`#[path]`-included, so that the crate's name in the folder's name is the including crate's).

use std::path::{Path, PathBuf};

/// A fresh, empty folder for one test, removed when the returned guard is dropped, unless the
/// test is failing: then it is kept for a look and its path is printed. Every call gets its own
/// folder (a counter in its name), so that two tests running at once with the same `name` do not
/// remove each other's files.
pub fn scratch(name: &str) -> Scratch {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("{}-{}-{call}-{name}", env!("CARGO_PKG_NAME"), std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
    Scratch(d)
}

/// A folder made by [`scratch`].
pub struct Scratch(PathBuf);

impl Scratch {
    /// The folder's path, the folder left in place after the test: for a small file that a
    /// value outliving the guard names (a SQLite study of a storage back end).
    pub fn persist(self) -> PathBuf {
        let path = self.0.clone();
        std::mem::forget(self);
        path
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept the failing test's folder {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

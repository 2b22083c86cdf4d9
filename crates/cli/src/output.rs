//! Where output goes: human text on stdout (stderr under `--json`), one JSON object on stdout
//! with `--json`, and the project folder layout of MASE (doc/mase-semantics.md#output-layout).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Prints human-readable lines to the right stream.
#[derive(Clone, Copy, Debug)]
pub struct Human {
    pub json: bool,
}

impl Human {
    pub fn line(&self, s: impl AsRef<str>) {
        if self.json {
            eprintln!("{}", s.as_ref());
        } else {
            println!("{}", s.as_ref());
        }
    }

    pub fn info(&self, s: impl AsRef<str>) {
        self.line(format!("INFO     {}", s.as_ref()));
    }

    pub fn warn(&self, s: impl AsRef<str>) {
        eprintln!("WARNING  {}", s.as_ref());
    }

    /// Prints the final JSON result (only under `--json`), with the notes of the ONNX imports
    /// of the run as `import_notes` when there are any; an embedded run that captures results
    /// (`start_capture`) keeps it instead.
    pub fn result(&self, v: &serde_json::Value) {
        let capturing = CAPTURE.with(|c| c.borrow().is_some());
        if !self.json && !capturing {
            return;
        }
        let notes = import_notes();
        let mut v = v.clone();
        if let (false, Some(obj)) = (notes.is_empty(), v.as_object_mut()) {
            obj.insert("import_notes".into(), serde_json::Value::Array(notes));
        }
        if capturing {
            CAPTURE.with(|c| *c.borrow_mut() = Some(Some(v)));
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{v}");
    }
}

/// The notes of the ONNX files this process imported, by file. The session records them as it
/// imports ([`record_import_notes`]); `--json` results list them ([`import_notes`]).
static IMPORT_NOTES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Records the notes of an import of `file`, unless that file's were recorded before; says
/// whether they are new (and so worth printing).
pub fn record_import_notes(file: &str, notes: &[String]) -> bool {
    let mut seen = IMPORT_NOTES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.iter().any(|(f, _)| f == file) {
        return false;
    }
    seen.extend(notes.iter().map(|n| (file.to_string(), n.clone())));
    true
}

/// The notes of every ONNX import of this run, as `--json` results list them.
pub fn import_notes() -> Vec<serde_json::Value> {
    let seen = IMPORT_NOTES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.iter().map(|(file, note)| serde_json::json!({"file": file, "note": note})).collect()
}

thread_local! {
    /// `Some` while an embedded run on this thread takes its result instead of printing it:
    /// `Some(None)` until the action hands its result over.
    static CAPTURE: std::cell::RefCell<Option<Option<serde_json::Value>>> = const { std::cell::RefCell::new(None) };
}

/// What [`start_capture`] replaced, for [`stop_capture`] to put back (an embedded run inside
/// another one, such as a Python pass that calls `transform`, keeps the outer run's capture).
pub struct SavedCapture(Option<Option<serde_json::Value>>);

/// From now on, the results of actions on this thread are kept for [`stop_capture`] instead of
/// printed.
pub fn start_capture() -> SavedCapture {
    SavedCapture(CAPTURE.with(|c| c.borrow_mut().replace(None)))
}

/// Ends [`start_capture`]: the result kept since, if an action handed one over; the capture
/// state before it is restored.
pub fn stop_capture(saved: SavedCapture) -> Option<serde_json::Value> {
    CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), saved.0).flatten())
}

/// Today's date as YYYY-MM-DD (UTC), for MASE's default project names.
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `<project_dir>/<project>/software/...`.
pub struct ProjectDirs {
    pub root: PathBuf,
}

impl ProjectDirs {
    /// MASE's naming: `--project`, else `{model}_{task}_{dataset}_{date}` with `/` in the model name replaced.
    pub fn new(project_dir: &Path, project: Option<&str>, model: &str, task: &str, dataset: &str) -> ProjectDirs {
        let name = match project {
            Some(p) => p.to_string(),
            None => format!("{}_{}_{}_{}", model.replace('/', "-"), task, dataset, today()),
        };
        ProjectDirs { root: project_dir.join(name) }
    }

    pub fn software(&self) -> PathBuf {
        self.root.join("software")
    }

    pub fn training_ckpts(&self) -> PathBuf {
        self.software().join("training_ckpts")
    }

    pub fn checkpoints(&self) -> PathBuf {
        self.software().join("checkpoints")
    }
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn dates() {
        for (days, want) in [(0, (1970, 1, 1)), (19_723, (2024, 1, 1)), (20_783, (2026, 11, 26)), (11_016, (2000, 2, 29))] {
            assert_eq!(civil_from_days(days), want);
        }
    }
}

//! Library errors keep their cause: walking `std::error::Error::source` from the error a user
//! sees reaches the original operating-system, JSON or TOML error, and the one line shown
//! quotes it.

mod common;
use common::*;
use std::error::Error;

/// The error's chain of causes, itself first.
fn chain<'a>(e: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |&c| c.source()).collect()
}

/// Which lower error a chain must reach.
#[derive(Debug)]
enum Cause {
    /// An operating-system error of this kind.
    Io(std::io::ErrorKind),
    Json,
}

fn reaches(e: &(dyn Error + 'static), want: &Cause) -> bool {
    chain(e).into_iter().skip(1).any(|c| match want {
        Cause::Io(kind) => c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == *kind),
        Cause::Json => c.downcast_ref::<serde_json::Error>().is_some(),
    })
}

/// Arguments of a pass, for `parse_args`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Args {
    width: u32,
}

/// The error of a call that must fail.
fn err<T, E: Error + Send + Sync + 'static>(r: Result<T, E>) -> Box<dyn Error + Send + Sync> {
    match r {
        Ok(_) => "the call succeeded".into(),
        Err(e) => Box::new(e),
    }
}

#[test]
fn errors_reach_their_source() {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    let dir = scratch("error_sources");
    let file = dir.join("plain.txt");
    std::fs::write(&file, "not a folder").unwrap_or_default();
    // (what, the error, the cause it must reach, a fragment of its line)
    let cases: Vec<(&str, Box<dyn Error + Send + Sync>, Cause, &str)> = vec![
        ("missing checkpoint", err(mase_io::load_checkpoint(&dir.join("none.ckpt"))), Cause::Io(NotFound), "none.ckpt: cannot read"),
        (
            "missing ONNX file",
            err(mase_interop::import_file(&dir.join("none.onnx"), &Default::default())),
            Cause::Io(NotFound),
            "none.onnx: cannot read",
        ),
        ("missing design folder", err(mase_hw::read_design(&dir.join("no_design"))), Cause::Io(NotFound), "no_design"),
        (
            "study store under a file",
            err(mase_search::SqliteStorage::open(&file.join("db").join("s.sqlite"))),
            Cause::Io(NotADirectory),
            "cannot create its folder",
        ),
        (
            "pass argument of the wrong type",
            err(mase_passes::parse_args::<Args>("p", &serde_json::json!({"width": "wide"}))),
            Cause::Json,
            "pass `p`: bad arguments: invalid type: string \"wide\", expected u32",
        ),
        (
            "unknown pass argument",
            err(mase_passes::parse_args::<Args>("p", &serde_json::json!({"width": 4, "height": 2}))),
            Cause::Json,
            "pass `p`: bad arguments: unknown field `height`",
        ),
    ];
    for (what, e, want, fragment) in cases {
        let e: &(dyn Error + 'static) = e.as_ref();
        assert!(reaches(e, &want), "{what}: `{e}` does not reach {want:?} (chain: {:?})", chain(e));
        assert!(e.to_string().contains(fragment), "{what}: {e}");
    }
}

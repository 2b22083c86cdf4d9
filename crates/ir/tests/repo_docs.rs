//! Checks that keep the repository's documents true to the code:
//!
//! - the crate dependency edges drawn in ARCHITECTURE.md (the `crate-edges` block) are exactly the
//!   workspace-internal normal dependencies that `cargo metadata` reports;
//! - every section of doc/mase-semantics.md cited anywhere in the repository (the file name, `#`
//!   and the heading's anchor) is a heading of that document;
//! - no file cites the design documents that live outside the repository.
//!
//! They live in `mase-ir` because it is the crate every other one depends on, so it builds first and
//! fastest; they read the workspace root two levels above this crate's manifest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

type Edges = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
}

/// The short name of a workspace crate: its folder under `crates/` (`crates/cli` is `cli`).
fn short_name(manifest_path: &str) -> String {
    let dir = Path::new(manifest_path).parent().expect("a manifest has a folder");
    dir.file_name().expect("a crate folder has a name").to_string_lossy().into_owned()
}

/// Normal (not dev, not build) dependencies between workspace crates, from `cargo metadata`.
fn metadata_edges() -> Edges {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("cargo metadata lists packages");
    let short: BTreeMap<&str, String> = packages
        .iter()
        .map(|p| (p["name"].as_str().expect("a package has a name"), short_name(p["manifest_path"].as_str().expect("a manifest path"))))
        .collect();
    let mut edges = Edges::new();
    for p in packages {
        let from = short[p["name"].as_str().expect("a package has a name")].clone();
        let deps = edges.entry(from).or_default();
        for d in p["dependencies"].as_array().expect("a package lists its dependencies") {
            let normal = d["kind"].is_null();
            if let (true, Some(to)) = (normal, d["name"].as_str().and_then(|n| short.get(n))) {
                deps.insert(to.clone());
            }
        }
    }
    edges
}

/// The edges of the fenced `crate-edges` block of ARCHITECTURE.md: lines `from -> to, to, ...`
/// (`from ->` alone for a crate without workspace dependencies).
fn drawn_edges(text: &str) -> Edges {
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "```crate-edges")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(!block.is_empty(), "ARCHITECTURE.md has no ```crate-edges block with lines `from -> to, ...`");
    let mut edges = Edges::new();
    for line in block {
        let (from, to) = line.split_once("->").unwrap_or_else(|| panic!("ARCHITECTURE.md edge line `{line}` has no `->`"));
        let to = to.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
        assert!(edges.insert(from.trim().to_string(), to).is_none(), "ARCHITECTURE.md lists `{}` twice", from.trim());
    }
    edges
}

fn edge_line(from: &str, to: &BTreeSet<String>) -> String {
    format!("{from} -> {}", to.iter().cloned().collect::<Vec<_>>().join(", ")).trim_end().to_string()
}

#[test]
fn architecture_edges_match_cargo_metadata() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let (real, drawn) = (metadata_edges(), drawn_edges(&text));
    let crates: BTreeSet<&String> = real.keys().chain(drawn.keys()).collect();
    let wrong: Vec<String> = crates
        .into_iter()
        .filter(|c| real.get(*c) != drawn.get(*c))
        .map(|c| match (real.get(c), drawn.get(c)) {
            (Some(to), Some(_)) => format!("change the line of `{c}` to `{}`", edge_line(c, to)),
            (Some(to), None) => format!("add the line `{}`", edge_line(c, to)),
            (None, _) => format!("remove the line of `{c}` (no such workspace crate)"),
        })
        .collect();
    assert!(wrong.is_empty(), "ARCHITECTURE.md's crate-edges block differs from `cargo metadata`:\n  {}", wrong.join("\n  "));
}

/// Text files of the repository that may cite documents: sources, docs, configs and scripts,
/// outside build output and hidden folders.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "fixtures" {
            continue;
        }
        if path.is_dir() {
            text_files(&path, out);
        } else if ["rs", "md", "toml", "py", "sh"].iter().any(|e| path.extension().is_some_and(|x| x == *e)) {
            out.push(path);
        }
    }
}

/// GitHub's anchor of a heading: lower case, spaces as `-`, characters other than letters,
/// digits, `_` and `-` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn cited_semantics_anchors_exist() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("doc/mase-semantics.md")).expect("doc/mase-semantics.md exists");
    let anchors: BTreeSet<String> = doc.lines().filter_map(|l| l.strip_prefix('#')).map(|h| anchor(h.trim_start_matches('#'))).collect();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let cite = concat!("mase-semantics.md", "#");
        for (at, _) in text.match_indices(cite) {
            let cited: String = text[at + cite.len()..].chars().take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_')).collect();
            if !cited.is_empty() && !anchors.contains(&cited) {
                missing.push(format!("{}: #{cited}", file.strip_prefix(&root).unwrap_or(&file).display()));
            }
        }
    }
    assert!(missing.is_empty(), "citations of headings doc/mase-semantics.md does not have:\n  {}", missing.join("\n  "));
}

#[test]
fn no_file_cites_documents_outside_the_repository() {
    // Spelled in pieces so that this file does not cite them itself.
    let outside = [concat!("DESIGN", ".md"), concat!("mase-flow", ".md"), concat!("mase-ir-passes", ".md")];
    let root = root();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    let mut hits = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (i, line) in text.lines().enumerate() {
            if let Some(name) = outside.iter().find(|n| line.contains(**n)) {
                hits.push(format!("{}:{}: cites {name}", file.strip_prefix(&root).unwrap_or(&file).display(), i + 1));
            }
        }
    }
    assert!(hits.is_empty(), "cite doc/mase-semantics.md instead:\n  {}", hits.join("\n  "));
}

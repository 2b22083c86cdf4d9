//! Pass arguments keyed by node selectors, as MASE's `quantize` and lab 4's
//! `redefine_linear_transform_pass` take them:
//!
//! ```toml
//! by = "type"              # how the keys select nodes: "type", "name" or "regex_name"
//! [default.config]         # the nodes no key selects
//! [<key>.config]           # the nodes <key> selects
//! ```
//!
//! Each pass reads its own `config` tables and its other keys. This module reads `by` and the
//! shape of an entry, and decides which entry applies to each node, so that the passes agree on
//! precedence and word their errors alike.

use crate::select::{type_key, By, Selector};
use crate::{PassError, Result};
use indexmap::IndexMap;
use mase_ir::{Graph, Node};
use serde_json::{Map, Value};

/// Reads the `by` key of an argument table.
pub(crate) fn parse_by(args: &Map<String, Value>) -> std::result::Result<By, String> {
    match args.get("by") {
        Some(Value::String(s)) => {
            By::from_spelling(s).ok_or_else(|| format!("`by = \"{s}\"`: expected \"type\", \"name\" or \"regex_name\""))
        }
        Some(v) => Err(format!("`by = {v}`: expected \"type\", \"name\" or \"regex_name\"")),
        None => Err("missing key `by` (\"type\", \"name\" or \"regex_name\")".into()),
    }
}

/// The `config` table of the entry `key`, which must be a table holding that table and nothing
/// else.
pub(crate) fn entry_config<'a>(key: &str, v: &'a Value) -> std::result::Result<&'a Map<String, Value>, String> {
    let Value::Object(t) = v else { return Err(format!("`{key}` must be a table with a `config` table, got {v}")) };
    if let Some(extra) = t.keys().find(|x| x.as_str() != "config") {
        return Err(format!("`{key}.{extra}`: unknown key (an entry holds only a `config` table)"));
    }
    match t.get("config") {
        Some(Value::Object(c)) => Ok(c),
        _ => Err(format!("`{key}` has no `config` table")),
    }
}

/// The ops a pass can change, and the words its errors use for them.
pub(crate) struct ChangeableOps {
    /// The `mase_op` names of the ops.
    pub ops: &'static [&'static str],
    /// Ops that only a key naming them changes (by `type` or `name`); `default` and `regex_name`
    /// patterns leave them alone, as MASE does.
    pub by_key_only: &'static [&'static str],
    /// What a type key outside `ops` names (`ops`, `layers`).
    pub key_noun: &'static str,
    /// What the pass does to a node (`quantized`, `widened`).
    pub action_done: &'static str,
    /// The heading of the list of `ops` (`quantizable`, `widenable`).
    pub list_heading: &'static str,
}

impl ChangeableOps {
    fn list(&self) -> String {
        match self.by_key_only {
            [] => format!("{}: {}", self.list_heading, self.ops.join(", ")),
            only => format!("{}: {}; named by a type or name key: {}", self.list_heading, self.ops.join(", "), only.join(", ")),
        }
    }

    fn can_change(&self, op: &str) -> bool {
        self.ops.contains(&op) || self.by_key_only.contains(&op)
    }
}

/// The keys of an argument table compiled for one graph, with the entries they name.
pub(crate) struct Keyed<'a, C> {
    pass: &'static str,
    by: By,
    selector: Selector,
    entries: &'a IndexMap<String, C>,
    default: Option<&'a C>,
    changeable: &'a ChangeableOps,
}

/// The entry that applies to one node.
pub(crate) struct Pick<'a, C> {
    /// The node's `mase_op`.
    pub op: String,
    /// The key that selected the node; `None` where `default` applies.
    pub key: Option<&'a str>,
    pub config: &'a C,
}

impl<'a, C> Keyed<'a, C> {
    /// Compiles the keys of `entries`. A bad key, a type key outside `changeable.ops` and a key
    /// that selects nothing are errors of `pass` (see [`Selector::select`], whose warnings are
    /// returned).
    pub fn new(
        pass: &'static str,
        graph: &Graph,
        by: By,
        entries: &'a IndexMap<String, C>,
        default: Option<&'a C>,
        changeable: &'a ChangeableOps,
    ) -> Result<(Keyed<'a, C>, Vec<String>)> {
        let keys: Vec<String> = entries.keys().cloned().collect();
        let selector = Selector::new(pass, by, &keys)?;
        if by == By::Type {
            if let Some(k) = keys.iter().find(|k| !changeable.can_change(k)) {
                return Err(PassError::Config {
                    pass: pass.into(),
                    key: k.clone(),
                    reason: format!("`{k}` {} cannot be {} ({})", changeable.key_noun, changeable.action_done, changeable.list()),
                });
            }
        }
        let (_, warnings) = selector.select(pass, graph)?;
        Ok((Keyed { pass, by, selector, entries, default, changeable }, warnings))
    }

    /// The entry that applies to `node`: the first key that selects it, else `default`. `None`
    /// for a node the pass cannot change or that no entry applies to; a node the pass cannot
    /// change is an error where a key names it (`by = "name"`), since the config then asks for
    /// the impossible.
    pub fn pick(&self, node: &Node) -> Result<Option<Pick<'a, C>>> {
        let op = type_key(node);
        let key = self.selector.key_for(node);
        if !self.changeable.can_change(&op) {
            if let (By::Name, Some(k)) = (self.by, key) {
                return Err(PassError::Node {
                    pass: self.pass.into(),
                    node: k.to_string(),
                    reason: format!("a `{op}` node cannot be {} ({})", self.changeable.action_done, self.changeable.list()),
                });
            }
            return Ok(None);
        }
        let entry = match key {
            // Ops outside MASE's list change only where a type or a name names them.
            _ if self.changeable.by_key_only.contains(&op.as_str()) && (key.is_none() || self.by == By::RegexName) => None,
            Some(k) => self.entries.get_key_value(k).map(|(k, c)| (Some(k.as_str()), c)),
            None => self.default.map(|c| (None, c)),
        };
        Ok(entry.map(|(key, config)| Pick { op, key, config }))
    }
}

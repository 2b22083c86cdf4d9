//! What a program that embeds `ch` (the Python package) adds to an action: passes and search
//! runners under names the registries do not know, and the action's JSON result handed back
//! instead of printed.

use anyhow::Result;
use mase_ir::Graph;
use mase_passes::{PassContext, PassReport};
use serde_json::Value;

/// Passes supplied by the caller. A `[passes.<name>]` table (or its `pass = "..."` key) naming
/// no registry pass runs the caller's pass of that name.
pub trait ExternalPasses: Sync {
    /// Whether the caller has a pass called `name`.
    fn knows(&self, name: &str) -> bool;

    /// The caller's pass names, for error messages.
    fn names(&self) -> Vec<String>;

    /// Runs the pass `name` on the graph and the pass context with the table's arguments
    /// (the table as JSON, without its `pass` key); the graph and the context are changed in
    /// place.
    fn run(&self, name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport>;
}

/// The caller's additions to a `ch` run; the default adds nothing.
#[derive(Clone, Copy, Default)]
pub struct Plugins<'a> {
    pub passes: Option<&'a dyn ExternalPasses>,
    pub runners: Option<&'a dyn mase_search::ExternalRunners>,
    /// Values set in the config's `[search]` table by `ch search`, after the command line's
    /// overrides, each at a JSON pointer (`/strategy/metrics`; missing tables are created): how
    /// a caller adds a runner table and the metric it reports without writing a TOML file.
    pub search_overrides: &'a [(String, Value)],
}

/// How an embedded `ch` run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    /// The exit status `ch` would have: 0, 1 (the action failed), 2 (bad arguments), 70
    /// (internal error).
    pub status: i32,
    /// The error line `ch` prints (without `error: `) when the status is not 0.
    pub error: Option<String>,
    /// The action's JSON result (what `--json` prints), when it finished.
    pub result: Option<Value>,
}

/// Sets `value` at the JSON pointer `at` (`/strategy/metrics`) of `root`, creating the tables on
/// the way; a value on the way that is not a table is an error naming the pointer.
pub fn set_at(root: &mut Value, at: &str, value: Value) -> Result<()> {
    let keys: Vec<&str> = at.strip_prefix('/').unwrap_or(at).split('/').collect();
    let (last, parents) = keys.split_last().ok_or_else(|| anyhow::anyhow!("search override: an empty path"))?;
    let mut here = root;
    for k in parents {
        let table = here.as_object_mut().ok_or_else(|| anyhow::anyhow!("search override {at}: `{k}` is inside a value, not a table"))?;
        here = table.entry(k.to_string()).or_insert_with(|| Value::Object(Default::default()));
    }
    let table = here.as_object_mut().ok_or_else(|| anyhow::anyhow!("search override {at}: the parent of `{last}` is not a table"))?;
    table.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::set_at;
    use serde_json::json;

    #[test]
    fn set_at_replaces_the_value_and_creates_tables() {
        let cases = [
            (
                json!({"strategy": {"metrics": {"accuracy": 1}}}),
                "/strategy/metrics",
                json!({"o": 2}),
                json!({"strategy": {"metrics": {"o": 2}}}),
            ),
            (json!({}), "/strategy/sw_runner/mine", json!({}), json!({"strategy": {"sw_runner": {"mine": {}}}})),
            (json!({"a": 1, "b": {"c": 2}}), "/b/d", json!(3), json!({"a": 1, "b": {"c": 2, "d": 3}})),
        ];
        for (mut root, at, value, want) in cases {
            set_at(&mut root, at, value).unwrap();
            assert_eq!(root, want, "{at}");
        }
        let err = set_at(&mut json!({"a": 1}), "/a/b", json!(2)).unwrap_err().to_string();
        assert_eq!(err, "search override /a/b: the parent of `b` is not a table");
    }
}

//! Hardware choices of a seed entry, beside its number formats: `seed.<key>.hardware.reuse_factor
//! = [1, 2, 4]` makes each layer's reuse factor (input terms per multiplier, one per cycle; see
//! doc/hardware.md) a parameter of the search, per node (`by = "name"`) or per op type, and one
//! for every layer of a type with `tie = "type"`. A sampled value goes to the candidate node's
//! hardware metadata (`hardware.reuse_factor`, MASE's `node.meta["mase"]["hardware"]`), where
//! `hw_runner.rtl` reads it.

use crate::{Result, SearchError};
use mase_ir::{Graph, Op};
use serde_json::{Map, Value};

pub use mase_hw::REUSE_FACTOR;

/// The keys a `hardware` table of a seed entry may hold.
const KEYS: &[&str] = &[REUSE_FACTOR];

/// Checks the `hardware` table of the seed entry `key` (at `at`): known keys only, and every
/// reuse factor a positive integer dividing the inputs of each linear layer the entry seeds
/// (`nodes`), so an impossible choice is reported before the first trial.
pub fn check_seed_entry(entry: &Map<String, Value>, at: &str, graph: &Graph, nodes: &[&str]) -> Result<()> {
    let Some(hw) = entry.get("hardware") else { return Ok(()) };
    let hw = hw
        .as_object()
        .ok_or_else(|| SearchError::config(format!("{at}.hardware"), "must be a table such as { reuse_factor = [1, 2, 4] }"))?;
    for (k, v) in hw {
        if !KEYS.contains(&k.as_str()) {
            return Err(SearchError::config(format!("{at}.hardware.{k}"), format!("unknown key (expected one of: {})", KEYS.join(", "))));
        }
        let key = format!("{at}.hardware.{k}");
        // An empty or non-list value is reported by the choice lists.
        let Some(choices) = v.as_array() else { continue };
        for c in choices {
            let r = c
                .as_u64()
                .filter(|&r| r > 0)
                .ok_or_else(|| SearchError::config(&key, format!("choices must be positive integers, got {c}")))?;
            for n in graph.nodes().iter().filter(|n| nodes.contains(&n.name.as_str())) {
                if let Op::Linear { in_features, .. } = n.op {
                    if in_features as u64 % r != 0 {
                        return Err(SearchError::config(
                            &key,
                            format!("reuse factor {r} does not divide the {in_features} inputs of node `{}`", n.name),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Writes the `hardware` table of each node's entry of a sampled config into the node's
/// hardware metadata.
pub fn apply(graph: &mut Graph, config: &Value) {
    for node in graph.nodes_mut() {
        let Some(hw) = config.get(&node.name).and_then(|e| e.get("hardware")).and_then(Value::as_object) else { continue };
        for (k, v) in hw {
            node.meta.hardware.insert(k.clone(), v.clone());
        }
    }
}

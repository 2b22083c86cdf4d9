//! Choosing nodes, as every MASE pass that takes node keys does: by type (`mase_op`: `linear`,
//! `relu`, ...), by fx node name (`seq_blocks_2`), or by a regular expression that must match the
//! whole name (`re.fullmatch`). Keys are tried in the order given; the first that matches a
//! node is the one that applies to it.
//!
//! A name that is no node, a regular expression that matches no node, or a type that no op has
//! is an error (MASE silently does nothing); a known type that this graph happens not to contain
//! is only a warning, so one config can serve several models.

use crate::metadata::classify::classify;
use crate::{PassError, Result};
use mase_ir::{Graph, Node, NodeId, Op};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// How keys select nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    #[default]
    Type,
    Name,
    RegexName,
}

impl By {
    /// The spelling of MASE configs.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Type => "type",
            By::Name => "name",
            By::RegexName => "regex_name",
        }
    }

    /// The `By` that MASE spells `s`, if any.
    pub fn from_spelling(s: &str) -> Option<By> {
        match s {
            "type" => Some(By::Type),
            "name" => Some(By::Name),
            "regex_name" => Some(By::RegexName),
            _ => None,
        }
    }

    /// Parses MASE's `by` value.
    pub fn parse(pass: &str, s: &str) -> Result<By> {
        By::from_spelling(s).ok_or_else(|| PassError::args(pass, format!("`by = \"{s}\"`: expected \"type\", \"name\" or \"regex_name\"")))
    }
}

/// Types a config may name besides the `mase_op` of every [`Op`]: the spellings `classify`
/// gives some calls (`bmm`, `reshape`) and MASE's names for ops mase-rs lacks, so that a config
/// written for MASE selects nothing there instead of failing as a misspelling.
pub const OTHER_TYPES: &[&str] = &[
    "bmm",
    "reshape",
    // MASE's names for ops mase-rs lacks.
    "conv3d",
    "batch_norm",
    "hardtanh",
    "attention",
];

/// Whether `k` is a type some node can have: the `mase_op` of an op (every variant, from
/// [`Op::examples`]) or one of [`OTHER_TYPES`]; anything else is taken for a misspelling.
pub fn is_known_type(k: &str) -> bool {
    OTHER_TYPES.contains(&k) || Op::examples().iter().any(|op| op.mase_op() == k)
}

/// The type key of a node: its `mase_op`, from metadata when present, else classified.
pub fn type_key(node: &Node) -> String {
    node.meta.common.mase_op.clone().unwrap_or_else(|| classify(node).1)
}

/// Compiled node keys.
#[derive(Clone, Debug)]
pub struct Selector {
    pub by: By,
    keys: Vec<String>,
    regexes: Vec<Regex>,
}

impl Selector {
    /// Compiles `keys` for `by`; a bad regular expression or unknown type is an error of `pass`.
    pub fn new(pass: &str, by: By, keys: &[String]) -> Result<Selector> {
        let mut regexes = Vec::new();
        for k in keys {
            match by {
                By::RegexName => regexes.push(Regex::new(&format!("^(?:{k})$")).map_err(|source| PassError::Regex {
                    pass: pass.into(),
                    key: k.clone(),
                    source,
                })?),
                By::Type if !is_known_type(k) => {
                    return Err(PassError::Config {
                        pass: pass.into(),
                        key: k.clone(),
                        reason: format!("no op has type `{k}` (types are mase_op names such as linear, relu, conv2d)"),
                    })
                }
                _ => {}
            }
        }
        Ok(Selector { by, keys: keys.to_vec(), regexes })
    }

    /// The keys, in order.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Whether key number `i` selects `node`.
    pub fn key_matches(&self, i: usize, node: &Node) -> bool {
        match self.by {
            By::Type => type_key(node) == self.keys[i],
            By::Name => node.name == self.keys[i],
            By::RegexName => self.regexes[i].is_match(&node.name),
        }
    }

    /// The first key that selects `node`.
    pub fn key_for(&self, node: &Node) -> Option<&str> {
        (0..self.keys.len()).find(|&i| self.key_matches(i, node)).map(|i| self.keys[i].as_str())
    }

    /// The nodes any key selects, in graph order. A name that is no node or a regular expression
    /// that matches nothing is an error; a type absent from the graph gives a warning.
    pub fn select(&self, pass: &str, graph: &Graph) -> Result<(Vec<NodeId>, Vec<String>)> {
        let mut warnings = Vec::new();
        for i in 0..self.keys.len() {
            if graph.nodes().iter().any(|n| self.key_matches(i, n)) {
                continue;
            }
            let k = &self.keys[i];
            match self.by {
                By::Name => return Err(PassError::UnknownNode { pass: pass.into(), node: k.clone() }),
                By::RegexName => return Err(PassError::NoMatch { pass: pass.into(), selector: format!("regex_name `{k}`") }),
                By::Type => warnings.push(format!("{pass}: the graph has no `{k}` node")),
            }
        }
        let ids = graph.ids().filter(|&id| self.key_for(graph.node(id)).is_some()).collect();
        Ok((ids, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mase_ir::NormSpec;

    fn jsc_tiny() -> Graph {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(16)), &[x]);
        let b = g.call_module("seq_blocks.1", Op::Relu, &[a]);
        let c = g.call_module("seq_blocks.2", Op::Linear { in_features: 16, out_features: 5, bias: true }, &[b]);
        let d = g.call_module("seq_blocks.3", Op::Relu, &[c]);
        g.output(d);
        g
    }

    fn names(g: &Graph, by: By, keys: &[&str]) -> Result<Vec<String>> {
        let keys: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
        let s = Selector::new("p", by, &keys)?;
        Ok(s.select("p", g)?.0.into_iter().map(|i| g.node(i).name.clone()).collect())
    }

    /// Element-wise functions imported from ONNX have `mase_op` names of their own, and a
    /// config selects them by those names (they were once refused as misspelt types).
    #[test]
    fn selects_imported_functions_by_type() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_function("torch.sqrt", Op::Sqrt, &[x]);
        let b = g.call_function("torch.div", Op::Div, &[a, x]);
        let c = g.call_function("torch.pow", Op::Pow, &[b, x]);
        let d = g.call_function("torch.clamp", Op::Clip { min: 0.0, max: 1.0 }, &[c]);
        let e = g.call_function("torch.nn.functional.pad", Op::Pad { begin: vec![1], end: vec![1], value: 0.0 }, &[d]);
        let f = g.call_function("torch.cat", Op::Concat { dim: 1 }, &[e, e]);
        g.output(f);
        // torch.fx names a node `pow_1`: `pow` is a Python builtin.
        let cases: &[(&str, &str)] =
            &[("sqrt", "sqrt"), ("div", "div"), ("pow", "pow_1"), ("clamp", "clamp"), ("pad", "pad"), ("cat", "cat")];
        for (key, name) in cases {
            assert_eq!(names(&g, By::Type, &[key]).unwrap(), vec![name.to_string()], "type {key}");
        }
    }

    #[test]
    fn selects_by_type_name_and_regex() {
        let g = jsc_tiny();
        let cases: Vec<(By, Vec<&str>, Vec<&str>)> = vec![
            (By::Type, vec!["relu"], vec!["seq_blocks_1", "seq_blocks_3"]),
            (By::Type, vec!["linear", "batch_norm1d"], vec!["seq_blocks_0", "seq_blocks_2"]),
            (By::Name, vec!["seq_blocks_2"], vec!["seq_blocks_2"]),
            (By::RegexName, vec!["seq_blocks_[13]"], vec!["seq_blocks_1", "seq_blocks_3"]),
            // fullmatch: `seq_blocks_1` alone does not match `seq_blocks_12`-like prefixes.
            (By::RegexName, vec!["seq_blocks"], vec![]),
        ];
        for (by, keys, want) in cases {
            match names(&g, by, &keys) {
                Ok(got) => assert_eq!(got, want, "{by:?} {keys:?}"),
                Err(e) => assert!(want.is_empty(), "{by:?} {keys:?}: {e}"),
            }
        }
    }

    #[test]
    fn bad_keys_are_errors() {
        let g = jsc_tiny();
        let cases: Vec<(By, &str, &str)> = vec![
            (By::Name, "seq_blocks_9", "no node named `seq_blocks_9`"),
            (By::RegexName, "conv.*", "regex_name `conv.*` matches no node"),
            (By::RegexName, "seq_blocks_(", "bad regular expression"),
            (By::Type, "linaer", "no op has type `linaer`"),
        ];
        for (by, key, want) in cases {
            let e = names(&g, by, &[key]).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let s = Selector::new("p", By::Type, &["conv2d".to_string()]).unwrap();
        let (ids, warnings) = s.select("p", &g).unwrap();
        assert!(ids.is_empty() && warnings.len() == 1, "{warnings:?}");
    }

    #[test]
    fn every_op_is_a_known_type_and_other_types_name_no_op() {
        let ops = Op::examples();
        for op in &ops {
            assert!(Selector::new("p", By::Type, &[op.mase_op().to_string()]).is_ok(), "{}", op.mase_op());
        }
        for t in OTHER_TYPES {
            assert!(!ops.iter().any(|op| op.mase_op() == *t), "`{t}` is an op's mase_op; drop it from OTHER_TYPES");
            assert!(is_known_type(t), "{t}");
        }
        for t in ["linaer", "Linear", "mat_mul", "clip", "concat", ""] {
            assert!(!is_known_type(t), "{t}");
        }
    }
}

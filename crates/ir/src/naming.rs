//! Node names exactly as torch.fx makes them (`torch/fx/graph.py: _Namespace.create_name`), so that
//! MASE configs selecting nodes by name (`seq_blocks_2`) work unchanged.

use std::collections::{HashMap, HashSet};

/// Python keywords and builtins: fx refuses them as names and appends a counter (`input` -> `input_1`).
const RESERVED: &[&str] = &[
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
    "torch",
    "inf",
    "nan",
    "NoneType",
];

/// torch.fx's `_snake_case`: `MyOp` -> `my_op`.
pub fn snake_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let mut prev_lower = false;
    for c in s.chars() {
        let lower: String = c.to_lowercase().collect();
        if prev_lower && lower != c.to_string() {
            out.push('_');
        } else {
            prev_lower = true;
        }
        out.push_str(&lower);
    }
    out
}

/// Hands out unique, fx-compatible names.
#[derive(Clone, Debug, Default)]
pub struct Namer {
    used: HashSet<String>,
    base_count: HashMap<String, u64>,
}

impl Namer {
    pub fn new() -> Namer {
        Namer::default()
    }

    /// Marks a name as taken without going through the fx rules (used when loading a graph).
    pub fn reserve(&mut self, name: &str) {
        self.used.insert(name.to_string());
    }

    /// Returns the fx name for a candidate (a module path such as `seq_blocks.0`, a function name
    /// such as `add`, or a placeholder name) and records it as used.
    pub fn create(&mut self, candidate: &str) -> String {
        let mut cand: String = candidate.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        if cand.is_empty() {
            cand = "_unnamed".into();
        }
        if cand.starts_with(|c: char| c.is_ascii_digit()) {
            cand.insert(0, '_');
        }
        // Split a trailing `_<digits>` into base and counter, as fx's `_name_suffix_regex` does.
        let (base, num) = match cand.rfind('_') {
            Some(i) if i + 1 < cand.len() && cand[i + 1..].bytes().all(|b| b.is_ascii_digit()) && i > 0 => {
                match cand[i + 1..].parse::<u64>() {
                    Ok(n) => (cand[..i].to_string(), Some(n)),
                    Err(_) => (cand.clone(), None),
                }
            }
            _ => (cand.clone(), None),
        };
        let mut candidate = match num {
            Some(n) => format!("{base}_{n}"),
            None => base.clone(),
        };
        let mut num = match num {
            Some(n) if n != 0 => n,
            _ => *self.base_count.get(&base).unwrap_or(&0),
        };
        while self.used.contains(&candidate) || RESERVED.contains(&candidate.as_str()) {
            num += 1;
            candidate = format!("{base}_{num}");
        }
        self.used.insert(candidate.clone());
        self.base_count.insert(base, num);
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_torch_fx() {
        let mut n = Namer::new();
        let got: Vec<String> =
            ["x", "seq_blocks.0", "seq_blocks.1", "seq_blocks.2", "add", "add", "add", "input", "max", "0.weight", "conv.1-a", "output"]
                .iter()
                .map(|c| n.create(c))
                .collect();
        assert_eq!(
            got,
            [
                "x",
                "seq_blocks_0",
                "seq_blocks_1",
                "seq_blocks_2",
                "add",
                "add_1",
                "add_2",
                "input_1",
                "max_1",
                "_0_weight",
                "conv_1_a",
                "output"
            ]
        );
    }

    #[test]
    fn snake_case_matches_fx() {
        assert_eq!(snake_case("MyOp"), "my_op");
        assert_eq!(snake_case("relu"), "relu");
        assert_eq!(snake_case("BatchNorm1d"), "batch_norm1d");
    }
}

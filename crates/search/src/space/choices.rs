//! Choice lists of a seed entry, and the parameters they become.
//!
//! A plain list (`weight_width = [2, 4, 8]`) is one parameter over its values. A tuple list sets
//! several fields together: `data_in = [[16, 8], [8, 6]]` with `data_in_fields = ["width",
//! "frac_width"]` is one categorical parameter whose choices are the pairs, and a choice sets
//! `data_in_width` and `data_in_frac_width` (each field is `<key>_<field>`). MASE lab 3 searches
//! such pairs; as independent lists they would also propose the pairs nobody asked for.
//!
//! A parameter may also be tied: one parameter written into the entries of several nodes (every
//! linear layer with `setup.tie = "type"`, every widened layer with one shared channel
//! multiplier). [`SeededParams`] records which parameters write into which node's entry.

use crate::flatten::{flatten, unflatten, SEP};
use crate::space::check_point;
use crate::{ParamDef, ParamKind, Result, SearchError};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The suffix of the key that names the fields of a tuple list.
pub const FIELDS_SUFFIX: &str = "_fields";

/// One searched key of a seed entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ChoiceList {
    /// The key's flattened path inside the entry (`config/weight_width`, `config/data_in`).
    pub path: String,
    /// The paths a choice sets: the key itself for a plain list, `<path>_<field>` for a tuple list.
    pub fields: Vec<String>,
    /// The choices, each with one value per field.
    pub choices: Vec<Vec<Value>>,
    /// Whether the choices are tuples (`<key>_fields` was given).
    pub tuple: bool,
}

impl ChoiceList {
    /// The parameter kind: an ordered index for a plain list (what MASE asks Optuna for), a
    /// categorical index for tuples (pairs have no order a sampler could use).
    pub fn kind(&self) -> ParamKind {
        if self.tuple {
            ParamKind::Categorical { choices: self.choices.len() }
        } else {
            ParamKind::Index { choices: self.choices.len() }
        }
    }

    /// Each choice as one value: the value of a plain list, the tuple as a list.
    pub fn values(&self) -> Vec<Value> {
        self.choices.iter().map(|c| if self.tuple { Value::Array(c.clone()) } else { c[0].clone() }).collect()
    }

    /// The list with `f` applied to every chosen value (MASE's `"NA"` becoming `null`).
    pub fn map_values(mut self, f: impl Fn(&Value) -> Value) -> ChoiceList {
        for c in &mut self.choices {
            for v in c.iter_mut() {
                *v = f(v);
            }
        }
        self
    }
}

/// The choice lists of a seed entry, in document order. `at` is the TOML path of the entry
/// (`search.search_space.seed.linear`), for error messages.
pub fn choice_lists(entry: &Map<String, Value>, at: &str) -> Result<Vec<ChoiceList>> {
    let flat = flatten(entry);
    let paths: HashSet<&str> = flat.iter().map(|(p, _)| p.as_str()).collect();
    let key_of = |path: &str| format!("{at}.{}", path.replace(SEP, "."));
    let mut lists = Vec::new();
    let mut set_by_tuple: Vec<(String, String)> = Vec::new();
    for (path, leaf) in &flat {
        if let Some(base) = path.strip_suffix(FIELDS_SUFFIX) {
            if paths.contains(base) {
                continue;
            }
            let key = base.rsplit(SEP).next().unwrap_or(base);
            return Err(SearchError::config(
                key_of(path),
                format!("names the fields of tuple choices `{key}`, but the entry has no `{key}` list"),
            ));
        }
        let list = match leaf {
            Value::Array(a) if a.is_empty() => {
                return Err(SearchError::config(key_of(path), "empty choice list: give at least one choice"))
            }
            Value::Array(a) => a,
            _ => return Err(SearchError::config(key_of(path), format!("must be a list of choices, got {leaf}"))),
        };
        let fields_path = format!("{path}{FIELDS_SUFFIX}");
        let Some((_, names)) = flat.iter().find(|(p, _)| *p == fields_path) else {
            lists.push(ChoiceList {
                path: path.clone(),
                fields: vec![path.clone()],
                choices: list.iter().map(|v| vec![v.clone()]).collect(),
                tuple: false,
            });
            continue;
        };
        let names = field_names(names).ok_or_else(|| {
            SearchError::config(
                key_of(&fields_path),
                format!("must be a list of distinct field names such as [\"width\", \"frac_width\"], got {names}"),
            )
        })?;
        let key = path.rsplit(SEP).next().unwrap_or(path);
        let mut choices = Vec::with_capacity(list.len());
        for (k, choice) in list.iter().enumerate() {
            match choice {
                Value::Array(values) if values.len() == names.len() => choices.push(values.clone()),
                _ => {
                    return Err(SearchError::config(
                        key_of(path),
                        format!(
                            "choice {k} is {choice}, but `{key}{FIELDS_SUFFIX}` names {} fields ({}): give one value per field",
                            names.len(),
                            names.join(", ")
                        ),
                    ))
                }
            }
        }
        let fields: Vec<String> = names.iter().map(|f| format!("{path}_{f}")).collect();
        for f in &fields {
            if paths.contains(f.as_str()) {
                return Err(SearchError::config(key_of(f), format!("is also set by the tuple choices `{key}`: keep one of the two")));
            }
            if let Some((_, other)) = set_by_tuple.iter().find(|(g, _)| g == f) {
                return Err(SearchError::config(key_of(path), format!("sets `{f}`, which the tuple choices `{other}` set too")));
            }
            set_by_tuple.push((f.clone(), key.to_string()));
        }
        lists.push(ChoiceList { path: path.clone(), fields, choices, tuple: true });
    }
    Ok(lists)
}

/// A non-empty list of distinct, non-empty strings.
fn field_names(v: &Value) -> Option<Vec<String>> {
    let names: Vec<String> =
        v.as_array()?.iter().map(|n| n.as_str().filter(|s| !s.is_empty()).map(str::to_string)).collect::<Option<_>>()?;
    let distinct: HashSet<&String> = names.iter().collect();
    (!names.is_empty() && distinct.len() == names.len()).then_some(names)
}

/// The parameters of a seeded space and the node entries each one writes.
#[derive(Clone, Debug, Default)]
pub struct SeededParams {
    pub params: Vec<ParamDef>,
    /// The choice list of each parameter.
    pub lists: Vec<ChoiceList>,
    /// Each seeded node, in graph order, with the parameters that write its entry (in the entry's
    /// order).
    pub nodes: Vec<(String, Vec<usize>)>,
}

impl SeededParams {
    /// Adds the parameter `name` over `list`; returns its index. `named_by_path` says whether the
    /// trial config holds its value at `name` (a plain list of one node); otherwise the parameter
    /// carries its values for reports.
    pub fn add(&mut self, name: String, list: ChoiceList, named_by_path: bool) -> usize {
        let values = (!named_by_path).then(|| list.values());
        self.params.push(ParamDef { name, kind: list.kind(), values });
        self.lists.push(list);
        self.params.len() - 1
    }

    /// The number of distinct points (the product of the choice counts), saturating.
    pub fn size(&self) -> u128 {
        self.lists.iter().fold(1u128, |acc, l| acc.saturating_mul(l.choices.len() as u128))
    }

    /// Each choice list as its values (a tuple as a list), for a space's signature.
    pub fn choice_values(&self) -> Vec<Vec<Value>> {
        self.lists.iter().map(ChoiceList::values).collect()
    }

    /// [`SeededParams::flat_config`] as nested tables (`seq_blocks_2/config/name` becomes
    /// `{"seq_blocks_2": {"config": {"name": ..}}}`).
    pub fn nested_config(&self, space: &str, point: &[f64]) -> Result<Map<String, Value>> {
        let flat = self.flat_config(space, point)?;
        Ok(unflatten(flat.iter().map(|(k, v)| (k.as_str(), v.clone()))))
    }

    /// The flattened trial config of `point` (one choice index per parameter): for each node in
    /// order, `<node>/<field path> = value` for every field its parameters set.
    pub fn flat_config(&self, space: &str, point: &[f64]) -> Result<Vec<(String, Value)>> {
        check_point(space, point, &self.params)?;
        let mut flat = Vec::new();
        for (node, ids) in &self.nodes {
            for &i in ids {
                let (p, list) = (&self.params[i], &self.lists[i]);
                let x = point[i];
                let choice =
                    (x >= 0.0 && x.fract() == 0.0).then(|| list.choices.get(x as usize)).flatten().ok_or_else(|| SearchError::Space {
                        space: space.into(),
                        reason: format!("index {x} out of range for `{}` ({} choices)", p.name, list.choices.len()),
                    })?;
                for (field, v) in list.fields.iter().zip(choice) {
                    flat.push((format!("{node}{SEP}{field}"), v.clone()));
                }
            }
        }
        Ok(flat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lists(entry: Value) -> Result<Vec<ChoiceList>> {
        choice_lists(entry.as_object().unwrap(), "s.seed.linear")
    }

    #[test]
    fn plain_and_tuple_lists() {
        let l = lists(json!({"config": {"name": ["integer"], "data_in": [[16, 8], [8, 6]], "data_in_fields": ["width", "frac_width"]}}))
            .unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[0],
            ChoiceList {
                path: "config/name".into(),
                fields: vec!["config/name".into()],
                choices: vec![vec![json!("integer")]],
                tuple: false
            }
        );
        assert_eq!(l[1].fields, ["config/data_in_width", "config/data_in_frac_width"]);
        assert_eq!(l[1].choices, [vec![json!(16), json!(8)], vec![json!(8), json!(6)]]);
        assert_eq!(l[1].kind(), ParamKind::Categorical { choices: 2 });
        assert_eq!(l[1].values(), [json!([16, 8]), json!([8, 6])]);
    }

    /// One line per bad entry: the key it names and the words of the reason.
    #[test]
    fn inconsistent_tuples_fail_with_one_line() {
        let cases = [
            (json!({"data_in": [[16, 8], [8]], "data_in_fields": ["width", "frac_width"]}), "s.seed.linear.data_in", "choice 1 is [8]"),
            (json!({"data_in": [[16, 8]], "data_in_fields": ["width"]}), "s.seed.linear.data_in", "names 1 fields"),
            (json!({"data_in": [16, 8], "data_in_fields": ["width", "frac_width"]}), "s.seed.linear.data_in", "choice 0 is 16"),
            (json!({"data_in_fields": ["width", "frac_width"]}), "s.seed.linear.data_in_fields", "has no `data_in` list"),
            (json!({"data_in": [[16, 8]], "data_in_fields": ["width", "width"]}), "s.seed.linear.data_in_fields", "distinct field names"),
            (json!({"data_in": [[16, 8]], "data_in_fields": []}), "s.seed.linear.data_in_fields", "distinct field names"),
            (json!({"data_in": [[16, 8]], "data_in_fields": "width"}), "s.seed.linear.data_in_fields", "distinct field names"),
            (
                json!({"data_in": [[16, 8]], "data_in_fields": ["width", "frac_width"], "data_in_width": [4]}),
                "s.seed.linear.data_in_width",
                "also set by the tuple choices `data_in`",
            ),
            (json!({"data_in": [], "data_in_fields": ["width"]}), "s.seed.linear.data_in", "empty choice list"),
        ];
        for (entry, key, words) in cases {
            match lists(entry.clone()) {
                Err(SearchError::Config { key: k, reason }) => {
                    assert_eq!(k, key, "{entry}");
                    assert!(reason.contains(words), "{entry}: {reason}");
                    assert!(!reason.contains('\n'));
                }
                other => panic!("{entry}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_tied_parameter_writes_every_node_it_is_tied_to() {
        let l = lists(json!({"config": {"w": [[8, 4], [4, 2]], "w_fields": ["width", "frac_width"]}})).unwrap();
        let mut s = SeededParams::default();
        let id = s.add("linear/config/w".into(), l[0].clone(), false);
        s.nodes = vec![("fc1".into(), vec![id]), ("fc2".into(), vec![id])];
        assert_eq!(s.size(), 2);
        assert_eq!(s.params[0].values, Some(vec![json!([8, 4]), json!([4, 2])]));
        let flat = s.flat_config("t", &[1.0]).unwrap();
        let expected =
            [("fc1/config/w_width", 4), ("fc1/config/w_frac_width", 2), ("fc2/config/w_width", 4), ("fc2/config/w_frac_width", 2)];
        assert_eq!(flat, expected.map(|(k, v)| (k.to_string(), json!(v))));
        assert!(s.flat_config("t", &[2.0]).is_err());
        assert!(s.flat_config("t", &[0.5]).is_err());
    }
}

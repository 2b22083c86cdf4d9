//! MASE's `flatten_dict` / `unflatten_dict` (doc/mase-semantics.md#search-flatten): nested tables become one
//! level whose keys are the paths joined with `/`. A leaf is anything that is not a table, so a
//! list of choices is a leaf.

use serde_json::{Map, Value};

/// The separator MASE uses between path components.
pub const SEP: char = '/';

/// Flattens nested objects into `path/to/leaf -> leaf`, in document order.
pub fn flatten(nested: &Map<String, Value>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    walk(nested, None, &mut out);
    out
}

fn walk(m: &Map<String, Value>, parent: Option<&str>, out: &mut Vec<(String, Value)>) {
    for (k, v) in m {
        let key = match parent {
            Some(p) => format!("{p}{SEP}{k}"),
            None => k.clone(),
        };
        match v {
            Value::Object(inner) => walk(inner, Some(&key), out),
            leaf => out.push((key, leaf.clone())),
        }
    }
}

/// The inverse of [`flatten`]: `a/b/c = v` becomes `{"a": {"b": {"c": v}}}`, keeping the order in
/// which paths first appear. A path that runs through a leaf replaces the leaf with an object.
pub fn unflatten<'a>(flat: impl IntoIterator<Item = (&'a str, Value)>) -> Map<String, Value> {
    let mut root = Map::new();
    for (path, value) in flat {
        let parts: Vec<&str> = path.split(SEP).collect();
        let mut cur = &mut root;
        for part in &parts[..parts.len() - 1] {
            let slot = cur.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            cur = match slot {
                Value::Object(m) => m,
                _ => unreachable!("slot was made an object above"),
            };
        }
        cur.insert(parts[parts.len() - 1].to_string(), value);
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flatten_keeps_lists_as_leaves_and_round_trips() {
        let v = json!({"seq_blocks_2": {"config": {"name": ["integer"], "data_in_width": [4, 8]}}, "x": 1});
        let flat = flatten(v.as_object().unwrap());
        let keys: Vec<&str> = flat.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["seq_blocks_2/config/name", "seq_blocks_2/config/data_in_width", "x"]);
        assert_eq!(flat[1].1, json!([4, 8]));
        let back = unflatten(flat.iter().map(|(k, v)| (k.as_str(), v.clone())));
        assert_eq!(Value::Object(back), v);
    }
}

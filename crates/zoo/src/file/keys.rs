//! Reading the keys of one `[[layers]]` table, with errors that name the layer and the key; keys
//! the op does not take are rejected up front.

use crate::ZooError;
use toml::{Table, Value};

/// Keys every layer may carry whatever its op.
pub(crate) const COMMON_KEYS: [&str; 3] = ["op", "name", "inputs"];

/// Where a layer sits in its file, for error messages.
pub(crate) struct LayerAt<'a> {
    pub origin: &'a str,
    pub index: usize,
    pub op: String,
    pub name: Option<String>,
}

impl LayerAt<'_> {
    /// An error about `key` of this layer.
    pub(crate) fn err(&self, key: &str, reason: impl Into<String>) -> ZooError {
        ZooError::Layer {
            origin: self.origin.to_string(),
            index: self.index,
            op: self.op.clone(),
            name: self.name.clone(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

/// A parser of one value: `Ok(parsed)` or the reason the value does not fit.
pub(crate) type Parse<'p, T> = &'p dyn Fn(&Value) -> Result<T, String>;

/// The op-specific keys of one layer, read by type with errors that name the key.
pub(crate) struct Keys<'a> {
    table: &'a Table,
    at: &'a LayerAt<'a>,
    /// The keys the op takes, from [`super::ops::LAYERS`]; reading any other is a bug of this crate.
    allowed: &'static [&'static str],
}

impl<'a> Keys<'a> {
    /// Checks that the table holds only [`COMMON_KEYS`] and the keys the op takes, so that a
    /// misspelt key is reported as such before any required key is found missing.
    pub(crate) fn new(table: &'a Table, at: &'a LayerAt<'a>, allowed: &'static [&'static str]) -> Result<Keys<'a>, ZooError> {
        for key in table.keys() {
            if !COMMON_KEYS.contains(&key.as_str()) && !allowed.contains(&key.as_str()) {
                let expected = if allowed.is_empty() {
                    format!("op `{}` takes no keys besides op, name and inputs", at.op)
                } else {
                    format!("op `{}` takes {} (besides op, name and inputs)", at.op, allowed.join(", "))
                };
                return Err(at.err(key, format!("unknown key; {expected}")));
            }
        }
        Ok(Keys { table, at, allowed })
    }

    pub(crate) fn at(&self) -> &LayerAt<'a> {
        self.at
    }

    fn get(&self, key: &'static str) -> Option<&'a Value> {
        debug_assert!(self.allowed.contains(&key), "op `{}` reads key `{key}`, which its entry in LAYERS does not list", self.at.op);
        self.table.get(key)
    }

    /// A required key.
    pub(crate) fn req<T>(&self, key: &'static str, parse: Parse<T>) -> Result<T, ZooError> {
        let v = self.get(key).ok_or_else(|| self.at.err(key, format!("missing; op `{}` needs it", self.at.op)))?;
        parse(v).map_err(|reason| self.at.err(key, reason))
    }

    /// An optional key with a default.
    pub(crate) fn opt<T>(&self, key: &'static str, default: T, parse: Parse<T>) -> Result<T, ZooError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => parse(v).map_err(|reason| self.at.err(key, reason)),
        }
    }
}

fn describe(v: &Value) -> String {
    format!("{} {v}", v.type_str())
}

/// An integer of at least `min`.
pub(crate) fn uint(min: usize) -> impl Fn(&Value) -> Result<usize, String> {
    move |v| match v.as_integer() {
        Some(i) if i >= min as i64 => Ok(i as usize),
        _ => Err(format!("expected an integer >= {min}, got {}", describe(v))),
    }
}

/// Any integer (a dimension index may be negative).
pub(crate) fn int(v: &Value) -> Result<i64, String> {
    v.as_integer().ok_or_else(|| format!("expected an integer, got {}", describe(v)))
}

/// A list of integers.
pub(crate) fn int_list(v: &Value) -> Result<Vec<i64>, String> {
    let err = || format!("expected a list of integers, got {}", describe(v));
    v.as_array().ok_or_else(err)?.iter().map(|e| e.as_integer().ok_or_else(err)).collect()
}

/// A non-empty list of integers, or one integer (`dim = 1` or `dim = [2, 3]`).
pub(crate) fn int_or_list(v: &Value) -> Result<Vec<i64>, String> {
    let dims = match v.as_integer() {
        Some(d) => vec![d],
        None => int_list(v).map_err(|_| format!("expected an integer or a list of integers, got {}", describe(v)))?,
    };
    if dims.is_empty() {
        return Err("expected at least one dimension, got []".into());
    }
    Ok(dims)
}

/// A number in `[lo, hi]`; TOML integers are accepted (`momentum = 1`).
pub(crate) fn float_in(lo: f64, hi: f64) -> impl Fn(&Value) -> Result<f32, String> {
    move |v| {
        let x = match v {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        };
        match x {
            Some(x) if (lo..=hi).contains(&x) => Ok(x as f32),
            _ => Err(format!("expected a number in [{lo}, {hi}], got {}", describe(v))),
        }
    }
}

/// A boolean.
pub(crate) fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("expected true or false, got {}", describe(v)))
}

/// One of the given strings.
pub(crate) fn choice(options: &'static [&'static str]) -> impl Fn(&Value) -> Result<&'static str, String> {
    move |v| {
        let s = v.as_str().unwrap_or("");
        options.iter().copied().find(|o| *o == s).ok_or_else(|| format!("expected one of {options:?}, got {}", describe(v)))
    }
}

/// A layer width: a positive integer, or `"classes"` for the data set's class count.
pub(crate) fn width(classes: usize) -> impl Fn(&Value) -> Result<usize, String> {
    move |v| match v {
        Value::Integer(i) if *i >= 1 => Ok(*i as usize),
        Value::String(s) if s == "classes" => Ok(classes),
        _ => Err(format!("expected an integer >= 1 or \"classes\", got {}", describe(v))),
    }
}

/// A per-dimension size: one integer `>= min` for all `n` spatial dimensions, or a list of `n`.
pub(crate) fn dims(n: usize, min: usize) -> impl Fn(&Value) -> Result<Vec<usize>, String> {
    move |v| {
        let one = |e: &Value| e.as_integer().filter(|&i| i >= min as i64).map(|i| i as usize);
        let err = || format!("expected an integer >= {min} or a list of {n} such integers, got {}", describe(v));
        match v {
            Value::Array(a) if a.len() == n => a.iter().map(|e| one(e).ok_or_else(err)).collect(),
            Value::Array(_) => Err(err()),
            _ => one(v).map(|i| vec![i; n]).ok_or_else(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Value {
        text.parse::<Table>().map(|t| t["v"].clone()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// What a parser made of a value (printed), and what it should make.
    type Case = (Result<String, String>, Result<&'static str, &'static str>);

    #[test]
    fn parsers_accept_and_reject_values() {
        // (parser result for `v = ...`, expected)
        let cases: Vec<Case> = vec![
            (width(5)(&v("v = 7")).map(|x| x.to_string()), Ok("7")),
            (width(5)(&v("v = \"classes\"")).map(|x| x.to_string()), Ok("5")),
            (width(5)(&v("v = 0")).map(|x| x.to_string()), Err("expected an integer >= 1 or \"classes\", got integer 0")),
            (dims(2, 1)(&v("v = 3")).map(|x| format!("{x:?}")), Ok("[3, 3]")),
            (dims(2, 0)(&v("v = [0, 2]")).map(|x| format!("{x:?}")), Ok("[0, 2]")),
            (
                dims(2, 1)(&v("v = [0, 2]")).map(|x| format!("{x:?}")),
                Err("expected an integer >= 1 or a list of 2 such integers, got array [0, 2]"),
            ),
            (dims(1, 1)(&v("v = [4]")).map(|x| format!("{x:?}")), Ok("[4]")),
            (float_in(0.0, 1.0)(&v("v = 1")).map(|x| x.to_string()), Ok("1")),
            (float_in(0.0, 1.0)(&v("v = 0.25")).map(|x| x.to_string()), Ok("0.25")),
            (float_in(0.0, 1.0)(&v("v = \"a\"")).map(|x| x.to_string()), Err("expected a number in [0, 1], got string \"a\"")),
            (uint(0)(&v("v = -1")).map(|x| x.to_string()), Err("expected an integer >= 0, got integer -1")),
            (int_list(&v("v = [1, -1]")).map(|x| format!("{x:?}")), Ok("[1, -1]")),
            (int_list(&v("v = [1, 2.5]")).map(|x| format!("{x:?}")), Err("expected a list of integers, got array [1, 2.5]")),
            (boolean(&v("v = false")).map(|x| x.to_string()), Ok("false")),
            (choice(&["none", "tanh"])(&v("v = \"tanh\"")).map(|x| x.to_string()), Ok("tanh")),
        ];
        for (got, want) in cases {
            assert_eq!(got.as_deref().map_err(String::as_str), want);
        }
    }
}

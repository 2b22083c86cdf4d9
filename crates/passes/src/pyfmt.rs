//! Python's `repr` and `pprint.pformat` (width 80, sorted keys) for JSON values, so that
//! metadata tables read as MASE prints them: `{'precision': [32], 'shape': [8, 16], ...}`.

use serde_json::Value;

/// A value to print: JSON plus Python objects that print without quotes (`torch.float32`,
/// `<class 'int'>`).
#[derive(Clone, Debug, PartialEq)]
pub enum Py {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// Printed as is.
    Raw(String),
    List(Vec<Py>),
    /// Keys in insertion order; printing sorts them.
    Dict(Vec<(String, Py)>),
}

impl Py {
    /// Converts JSON, printing the values of `torch_dtype` keys bare, `type: "int"` results of
    /// integer-valued nodes as `<class 'int'>` and `is_param: true` as `'from': None`, as MASE's
    /// metadata holds Python objects there.
    pub fn from_json(v: &Value) -> Py {
        from_json_keyed(None, v)
    }
}

fn from_json_keyed(key: Option<&str>, v: &Value) -> Py {
    match v {
        Value::Null => Py::None,
        Value::Bool(b) => Py::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Py::Int(i as i128),
            (None, Some(u)) => Py::Int(u as i128),
            _ => Py::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => match key {
            Some("torch_dtype") => Py::Raw(s.clone()),
            _ => Py::Str(s.clone()),
        },
        Value::Array(a) => Py::List(a.iter().map(|x| from_json_keyed(None, x)).collect()),
        Value::Object(m) => {
            let is_int_result = m.get("type").and_then(Value::as_str) == Some("int") && m.contains_key("value");
            Py::Dict(
                m.iter()
                    .map(|(k, x)| match k.as_str() {
                        "type" if is_int_result => (k.clone(), Py::Raw("<class 'int'>".into())),
                        // mase-rs marks parameters with `is_param`; MASE with `from: None`.
                        "is_param" => ("from".to_string(), Py::None),
                        _ => (k.clone(), from_json_keyed(Some(k), x)),
                    })
                    .collect(),
            )
        }
    }
}

/// Python's `repr` of a string: single quotes unless the text holds a single quote and no
/// double quote.
pub fn py_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Python's `repr` of a float: the shortest round-trip digits, scientific below 1e-4 and from
/// 1e16 up, and a `.0` on integral values.
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let e = format!("{x:e}");
        return match e.split_once('e') {
            Some((m, exp)) => {
                let n: i32 = exp.parse().unwrap_or(0);
                format!("{m}e{}{:02}", if n < 0 { "-" } else { "+" }, n.abs())
            }
            None => e,
        };
    }
    let s = format!("{x}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

fn sorted(d: &[(String, Py)]) -> Vec<&(String, Py)> {
    let mut v: Vec<&(String, Py)> = d.iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// `repr(value)` with dict keys sorted (`pprint.saferepr`).
pub fn repr(v: &Py) -> String {
    match v {
        Py::None => "None".into(),
        Py::Bool(b) => if *b { "True" } else { "False" }.into(),
        Py::Int(i) => i.to_string(),
        Py::Float(f) => py_float(*f),
        Py::Str(s) => py_str(s),
        Py::Raw(s) => s.clone(),
        Py::List(items) => format!("[{}]", items.iter().map(repr).collect::<Vec<_>>().join(", ")),
        Py::Dict(d) => {
            format!("{{{}}}", sorted(d).iter().map(|(k, x)| format!("{}: {}", py_str(k), repr(x))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// `pprint.pformat(value)` with the default width of 80 and indent of 1.
pub fn pformat(v: &Py) -> String {
    let mut out = String::new();
    format_into(v, &mut out, 0, 0);
    out
}

const WIDTH: usize = 80;

fn format_into(v: &Py, out: &mut String, indent: usize, allowance: usize) {
    let rep = repr(v);
    if rep.chars().count() <= WIDTH.saturating_sub(indent + allowance) {
        out.push_str(&rep);
        return;
    }
    match v {
        Py::Dict(d) if !d.is_empty() => {
            out.push('{');
            let items = sorted(d);
            let inner = indent + 1;
            let last_index = items.len() - 1;
            for (i, (k, x)) in items.iter().enumerate() {
                let last = i == last_index;
                let kr = py_str(k);
                out.push_str(&kr);
                out.push_str(": ");
                format_into(x, out, inner + kr.chars().count() + 2, if last { allowance + 1 } else { 1 });
                if !last {
                    out.push_str(",\n");
                    out.push_str(&" ".repeat(inner));
                }
            }
            out.push('}');
        }
        Py::List(items) if !items.is_empty() => {
            out.push('[');
            let inner = indent + 1;
            let last_index = items.len() - 1;
            for (i, x) in items.iter().enumerate() {
                let last = i == last_index;
                if i > 0 {
                    out.push_str(",\n");
                    out.push_str(&" ".repeat(inner));
                }
                format_into(x, out, inner, if last { allowance + 1 } else { 1 });
            }
            out.push(']');
        }
        _ => out.push_str(&rep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reprs_match_python() {
        let cases: Vec<(Value, &str)> = vec![
            (json!(null), "None"),
            (json!(true), "True"),
            (json!(3), "3"),
            (json!(0.1), "0.1"),
            (json!(2.0), "2.0"),
            (json!(1e-5), "1e-05"),
            (json!(1e20), "1e+20"),
            (json!("it's"), "\"it's\""),
            (json!({"b": [1, 2], "a": "x"}), "{'a': 'x', 'b': [1, 2]}"),
            (json!({"torch_dtype": "torch.float32", "type": "float"}), "{'torch_dtype': torch.float32, 'type': 'float'}"),
            (json!({"type": "int", "shape": [1], "value": 8}), "{'shape': [1], 'type': <class 'int'>, 'value': 8}"),
        ];
        for (v, want) in cases {
            assert_eq!(repr(&Py::from_json(&v)), want, "{v}");
        }
    }

    #[test]
    fn pformat_wraps_like_pprint() {
        // Python: pprint.pformat({'data_in_0': {'precision': [32], 'shape': [8, 784],
        // 'torch_dtype': torch.float32, 'type': 'float'}, 'weight': {...}})
        let v = json!({
            "weight": {"type": "float", "precision": [32], "shape": [8, 784]},
            "data_in_0": {"shape": [8, 784], "torch_dtype": "torch.float32", "type": "float", "precision": [32]},
        });
        let want = "{'data_in_0': {'precision': [32],\n               'shape': [8, 784],\n               'torch_dtype': torch.float32,\n               'type': 'float'},\n 'weight': {'precision': [32], 'shape': [8, 784], 'type': 'float'}}";
        assert_eq!(pformat(&Py::from_json(&v)), want);
        let v = json!({
            "args": {"data_in_0": {"stat": {"range_quantile": {"min": -1.2345678, "max": 2.345678901, "range": 3.580246701, "count": 512}}}, "bias": {"stat": {}}},
            "results": {"data_out_0": {"stat": {}}},
        });
        let want = "{'args': {'bias': {'stat': {}},\n          'data_in_0': {'stat': {'range_quantile': {'count': 512,\n                                                    'max': 2.345678901,\n                                                    'min': -1.2345678,\n                                                    'range': 3.580246701}}}},\n 'results': {'data_out_0': {'stat': {}}}}";
        assert_eq!(pformat(&Py::from_json(&v)), want);
    }
}

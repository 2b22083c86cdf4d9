//! A safe unpickler. It reads the pickle opcodes that `torch.save` and Lightning write (protocols 0
//! to 5) into a tree of plain values and executes nothing: a `GLOBAL` becomes a name, a `REDUCE`
//! or `NEWOBJ` becomes a recorded call, a `BUILD` a recorded state. The caller interprets the few
//! calls it knows (`torch._utils._rebuild_tensor_v2`, `collections.OrderedDict`).
//!
//! Compound objects live in an arena and are referred to by index, so that objects filled after
//! being memoised (the usual `EMPTY_DICT, BINPUT, ..., SETITEMS` sequence) are seen filled by every
//! later `BINGET`, and cyclic structures cannot make the reader loop.

use crate::{InteropError, Result};

/// Index of a compound object in [`Pickle::objects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjId(pub usize);

/// A value on the unpickler's stack.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer too large for i64, as little-endian two's complement bytes.
    BigInt(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Obj(ObjId),
}

/// A compound object.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Set(Vec<Value>),
    /// `module.name`, not imported.
    Global {
        module: String,
        name: String,
    },
    /// `func(*args)` recorded by `REDUCE`, `NEWOBJ` or `INST`/`OBJ`, with what `BUILD`, `SETITEM(S)`
    /// and `APPEND(S)` later did to the result.
    Call {
        func: Value,
        args: Value,
        state: Option<Value>,
        items: Vec<(Value, Value)>,
        list: Vec<Value>,
    },
    /// A persistent id (`BINPERSID`): for torch, the storage descriptor tuple.
    PersId(Value),
}

/// The result of unpickling: the root value and the arena of objects it refers to.
#[derive(Clone, Debug, Default)]
pub struct Pickle {
    pub objects: Vec<Object>,
    pub root: Option<Value>,
}

/// Bounds that keep a hostile pickle from exhausting memory.
const MAX_STACK: usize = 1 << 20;
const MAX_MEMO: usize = 1 << 22;
/// Bytes of strings, byte strings and big integers that `DUP`, `PUT` and `GET` may copy in all,
/// beyond [`COPY_PER_INPUT_BYTE`] per byte of the pickle: each of those opcodes is a few bytes
/// long but copies a whole value, so without a budget a small file could ask for terabytes.
const COPY_BUDGET: usize = 64 << 20;
const COPY_PER_INPUT_BYTE: usize = 64;

enum Slot {
    Val(Value),
    Mark,
}

/// The memo key of a PUT/GET opcode: a decimal line (`p`, `g`), one byte (`q`, `h`), four bytes
/// (`r`, `j`), or the memo's next slot (MEMOIZE).
fn memo_key(r: &mut Reader<'_>, op: u8, memo_len: usize) -> Result<u64> {
    match op {
        b'p' | b'g' => {
            let what = if op == b'p' { "bad PUT key" } else { "bad GET key" };
            r.line()?.trim().parse::<u64>().map_err(|_| r.err(what))
        }
        b'q' | b'h' => Ok(r.u8()? as u64),
        b'r' | b'j' => Ok(r.u32()? as u64),
        _ => Ok(memo_len as u64),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, reason: impl Into<String>) -> InteropError {
        InteropError::Pickle { offset: self.pos, reason: reason.into() }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end =
            self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| self.err(format!("needs {n} more bytes: truncated")))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }

    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let s = self.take(8)?;
        Ok(u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
    }

    fn len64(&mut self) -> Result<usize> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| self.err(format!("length {n} is too large")))
    }

    /// A text line without its `\n` (protocol-0 arguments).
    fn line(&mut self) -> Result<&'a str> {
        let rest = &self.b[self.pos..];
        let n = rest.iter().position(|&c| c == b'\n').ok_or_else(|| self.err("unterminated text argument: truncated"))?;
        let s = std::str::from_utf8(&rest[..n]).map_err(|_| self.err("text argument is not UTF-8"))?;
        self.pos += n + 1;
        Ok(s)
    }

    fn utf8(&mut self, n: usize) -> Result<String> {
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }
}

/// Decodes a little-endian two's-complement integer of any length.
fn long_from_bytes(b: &[u8]) -> Value {
    if b.is_empty() {
        return Value::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
        a[..b.len()].copy_from_slice(b);
        return Value::Int(i64::from_le_bytes(a));
    }
    Value::BigInt(b.to_vec())
}

struct Machine {
    stack: Vec<Slot>,
    memo: std::collections::HashMap<u64, Value>,
    objects: Vec<Object>,
    /// Bytes that copying values may still take (see [`COPY_BUDGET`]).
    copy_left: usize,
}

impl Machine {
    /// Takes the size of a value about to be copied from the copy budget.
    fn charge(&mut self, r: &Reader, v: &Value) -> Result<()> {
        let size = match v {
            Value::Str(s) => s.len(),
            Value::Bytes(b) | Value::BigInt(b) => b.len(),
            _ => 0,
        };
        self.copy_left = self
            .copy_left
            .checked_sub(size)
            .ok_or_else(|| r.err("DUP, PUT and GET copy more string data than a pickle of this size can need; it is hostile or damaged"))?;
        Ok(())
    }

    fn alloc(&mut self, o: Object) -> Value {
        self.objects.push(o);
        Value::Obj(ObjId(self.objects.len() - 1))
    }

    fn push(&mut self, r: &Reader, v: Value) -> Result<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(r.err("stack grows past its limit"));
        }
        self.stack.push(Slot::Val(v));
        Ok(())
    }

    fn pop(&mut self, r: &Reader) -> Result<Value> {
        match self.stack.pop() {
            Some(Slot::Val(v)) => Ok(v),
            Some(Slot::Mark) => Err(r.err("found a mark where a value was expected")),
            None => Err(r.err("stack underflow")),
        }
    }

    fn top(&self, r: &Reader) -> Result<Value> {
        match self.stack.last() {
            Some(Slot::Val(v)) => Ok(v.clone()),
            _ => Err(r.err("no value on the stack")),
        }
    }

    /// Pops everything down to the last mark (and the mark).
    fn pop_mark(&mut self, r: &Reader) -> Result<Vec<Value>> {
        let at = self.stack.iter().rposition(|s| matches!(s, Slot::Mark)).ok_or_else(|| r.err("no mark on the stack"))?;
        let items = self.stack.split_off(at + 1);
        self.stack.pop();
        Ok(items.into_iter().filter_map(|s| if let Slot::Val(v) = s { Some(v) } else { None }).collect())
    }

    fn obj_mut(&mut self, r: &Reader, v: &Value) -> Result<&mut Object> {
        match v {
            Value::Obj(ObjId(i)) => self.objects.get_mut(*i).ok_or_else(|| r.err("dangling object reference")),
            _ => Err(r.err("expected a container on the stack")),
        }
    }

    fn set_items(&mut self, r: &Reader, target: &Value, kv: Vec<Value>) -> Result<()> {
        if kv.len() % 2 != 0 {
            return Err(r.err("odd number of items for a dict"));
        }
        let pairs: Vec<(Value, Value)> = kv.chunks_exact(2).map(|c| (c[0].clone(), c[1].clone())).collect();
        match self.obj_mut(r, target)? {
            Object::Dict(d) => d.extend(pairs),
            Object::Call { items, .. } => items.extend(pairs),
            _ => return Err(r.err("SETITEM on something that is not a dict")),
        }
        Ok(())
    }

    fn append(&mut self, r: &Reader, target: &Value, vals: Vec<Value>) -> Result<()> {
        match self.obj_mut(r, target)? {
            Object::List(l) => l.extend(vals),
            Object::Set(l) => l.extend(vals),
            Object::Call { list, .. } => list.extend(vals),
            _ => return Err(r.err("APPEND on something that is not a list")),
        }
        Ok(())
    }

    fn memo_put(&mut self, r: &Reader, key: u64) -> Result<()> {
        let v = self.top(r)?;
        self.charge(r, &v)?;
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&key) {
            return Err(r.err("memo grows past its limit"));
        }
        self.memo.insert(key, v);
        Ok(())
    }

    fn memo_get(&mut self, r: &Reader, key: u64) -> Result<()> {
        let v = self.memo.get(&key).ok_or_else(|| r.err(format!("memo key {key} is not defined")))?.clone();
        self.charge(r, &v)?;
        self.push(r, v)
    }
}

/// Unpickles `bytes` without executing anything.
pub fn unpickle(bytes: &[u8]) -> Result<Pickle> {
    let mut r = Reader { b: bytes, pos: 0 };
    let copy_left = COPY_BUDGET.saturating_add(bytes.len().saturating_mul(COPY_PER_INPUT_BYTE));
    let mut m = Machine { stack: Vec::new(), memo: Default::default(), objects: Vec::new(), copy_left };
    loop {
        let op_at = r.pos;
        let op = r.u8().map_err(|_| InteropError::Pickle { offset: op_at, reason: "ends before STOP: truncated".into() })?;
        if op == b'.' {
            break;
        }
        if let Some(v) = literal(&mut r, op)? {
            m.push(&r, v)?;
        } else if let Some(v) = m.new_object(&mut r, op)? {
            m.push(&r, v)?;
        } else {
            m.apply(&mut r, op, op_at)?;
        }
    }
    let root = m.pop(&r).ok();
    Ok(Pickle { objects: m.objects, root })
}

/// The value of an opcode that reads a constant from the stream (a number, a string, bytes),
/// or `None` for other opcodes.
fn literal(r: &mut Reader, op: u8) -> Result<Option<Value>> {
    Ok(Some(match op {
        b'N' => Value::None,
        0x88 => Value::Bool(true),
        0x89 => Value::Bool(false),
        b'J' => {
            let v = r.u32()? as i32 as i64;
            Value::Int(v)
        }
        b'K' => {
            let v = r.u8()? as i64;
            Value::Int(v)
        }
        b'M' => {
            let v = r.u16()? as i64;
            Value::Int(v)
        }
        0x8a => {
            let n = r.u8()? as usize;
            long_from_bytes(r.take(n)?)
        }
        0x8b => {
            let n = r.u32()? as usize;
            long_from_bytes(r.take(n)?)
        }
        b'I' => {
            let s = r.line()?.trim();
            match s {
                "00" => Value::Bool(false),
                "01" => Value::Bool(true),
                _ => Value::Int(s.parse().map_err(|_| r.err(format!("bad INT `{s}`")))?),
            }
        }
        b'L' => {
            let s = r.line()?.trim().trim_end_matches('L');
            s.parse::<i64>().map(Value::Int).unwrap_or_else(|_| Value::BigInt(s.as_bytes().to_vec()))
        }
        b'F' => {
            let s = r.line()?.trim();
            let v = s.parse::<f64>().map_err(|_| r.err(format!("bad FLOAT `{s}`")))?;
            Value::Float(v)
        }
        b'G' => {
            let s = r.take(8)?;
            let v = f64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
            Value::Float(v)
        }
        b'X' => {
            let n = r.u32()? as usize;
            let s = r.utf8(n)?;
            Value::Str(s)
        }
        0x8c => {
            let n = r.u8()? as usize;
            let s = r.utf8(n)?;
            Value::Str(s)
        }
        0x8d => {
            let n = r.len64()?;
            let s = r.utf8(n)?;
            Value::Str(s)
        }
        b'V' => {
            let s = r.line()?.to_string();
            Value::Str(s)
        }
        b'S' => {
            let s = r.line()?.trim().trim_matches(['\'', '"']).to_string();
            Value::Str(s)
        }
        // BINSTRING and BINBYTES (4-byte length), SHORT_BINSTRING and SHORT_BINBYTES (1 byte).
        b'T' | b'B' | b'U' | b'C' => {
            let n = if matches!(op, b'T' | b'B') { r.u32()? as usize } else { r.u8()? as usize };
            if matches!(op, b'T' | b'U') {
                Value::Str(String::from_utf8_lossy(r.take(n)?).into_owned())
            } else {
                Value::Bytes(r.take(n)?.to_vec())
            }
        }
        0x8e | 0x96 => {
            let n = r.len64()?;
            Value::Bytes(r.take(n)?.to_vec())
        }
        _ => return Ok(None),
    }))
}

impl Machine {
    /// The new object of an opcode that builds a container or an object (popping its items,
    /// class or arguments), or `None` for other opcodes.
    fn new_object(&mut self, r: &mut Reader, op: u8) -> Result<Option<Value>> {
        Ok(Some(match op {
            b'}' => self.alloc(Object::Dict(Vec::new())),
            b']' => self.alloc(Object::List(Vec::new())),
            b')' => self.alloc(Object::Tuple(Vec::new())),
            0x8f => self.alloc(Object::Set(Vec::new())),
            b'd' => {
                let kv = self.pop_mark(r)?;
                let v = self.alloc(Object::Dict(Vec::new()));
                self.set_items(r, &v, kv)?;
                v
            }
            b'l' => {
                let items = self.pop_mark(r)?;
                self.alloc(Object::List(items))
            }
            b't' => {
                let items = self.pop_mark(r)?;
                self.alloc(Object::Tuple(items))
            }
            0x91 => {
                let items = self.pop_mark(r)?;
                self.alloc(Object::Set(items))
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop(r)?);
                }
                items.reverse();
                self.alloc(Object::Tuple(items))
            }
            b'c' => {
                let module = r.line()?.to_string();
                let name = r.line()?.to_string();
                self.alloc(Object::Global { module, name })
            }
            0x93 => {
                let name = self.pop(r)?;
                let module = self.pop(r)?;
                let (Value::Str(module), Value::Str(name)) = (module, name) else {
                    return Err(r.err("STACK_GLOBAL needs two strings"));
                };
                self.alloc(Object::Global { module, name })
            }
            b'R' | 0x81 => {
                let args = self.pop(r)?;
                let func = self.pop(r)?;
                self.alloc(Object::Call { func, args, state: None, items: Vec::new(), list: Vec::new() })
            }
            0x92 => {
                let _kwargs = self.pop(r)?;
                let args = self.pop(r)?;
                let func = self.pop(r)?;
                self.alloc(Object::Call { func, args, state: None, items: Vec::new(), list: Vec::new() })
            }
            b'i' => {
                let module = r.line()?.to_string();
                let name = r.line()?.to_string();
                let args = self.pop_mark(r)?;
                let func = self.alloc(Object::Global { module, name });
                let args = self.alloc(Object::Tuple(args));
                self.alloc(Object::Call { func, args, state: None, items: Vec::new(), list: Vec::new() })
            }
            b'o' => {
                let mut items = self.pop_mark(r)?;
                if items.is_empty() {
                    return Err(r.err("OBJ without a class"));
                }
                let func = items.remove(0);
                let args = self.alloc(Object::Tuple(items));
                self.alloc(Object::Call { func, args, state: None, items: Vec::new(), list: Vec::new() })
            }
            b'Q' => {
                let pid = self.pop(r)?;
                self.alloc(Object::PersId(pid))
            }
            b'P' => {
                let pid = Value::Str(r.line()?.to_string());
                self.alloc(Object::PersId(pid))
            }
            _ => return Ok(None),
        }))
    }

    /// Runs an opcode that changes the stack, the memo or an object in place, or only checks the
    /// stream (protocol, frame); an opcode no step knows is an error.
    fn apply(&mut self, r: &mut Reader, op: u8, op_at: usize) -> Result<()> {
        match op {
            0x80 => {
                let p = r.u8()?;
                if p > 5 {
                    return Err(r.err(format!("unsupported pickle protocol {p}")));
                }
            }
            0x95 => {
                // FRAME: a length hint only.
                r.u64()?;
            }
            b'(' => {
                if self.stack.len() >= MAX_STACK {
                    return Err(r.err("stack grows past its limit"));
                }
                self.stack.push(Slot::Mark)
            }
            b'0' => {
                self.pop(r)?;
            }
            b'1' => {
                self.pop_mark(r)?;
            }
            b'2' => {
                let v = self.top(r)?;
                self.charge(r, &v)?;
                self.push(r, v)?;
            }
            0x97 => {
                // NEXT_BUFFER needs out-of-band buffers, which files never carry.
                return Err(r.err("out-of-band buffers are not supported"));
            }
            0x98 => {}
            b's' => {
                let val = self.pop(r)?;
                let key = self.pop(r)?;
                let d = self.top(r)?;
                self.set_items(r, &d, vec![key, val])?;
            }
            b'u' => {
                let kv = self.pop_mark(r)?;
                let d = self.top(r)?;
                self.set_items(r, &d, kv)?;
            }
            b'a' => {
                let v = self.pop(r)?;
                let l = self.top(r)?;
                self.append(r, &l, vec![v])?;
            }
            b'e' | 0x90 => {
                let vals = self.pop_mark(r)?;
                let l = self.top(r)?;
                self.append(r, &l, vals)?;
            }
            // PUT, BINPUT, LONG_BINPUT, MEMOIZE.
            b'p' | b'q' | b'r' | 0x94 => {
                let key = memo_key(r, op, self.memo.len())?;
                self.memo_put(r, key)?;
            }
            // GET, BINGET, LONG_BINGET.
            b'g' | b'h' | b'j' => {
                let key = memo_key(r, op, self.memo.len())?;
                self.memo_get(r, key)?;
            }
            b'b' => {
                let st = self.pop(r)?;
                let target = self.top(r)?;
                match self.obj_mut(r, &target)? {
                    Object::Call { state, .. } => *state = Some(st),
                    _ => return Err(r.err("BUILD on something that is not an object")),
                }
            }
            0x82..=0x84 => return Err(r.err("extension-registry opcodes (EXT1/2/4) are not supported")),
            other => {
                return Err(InteropError::Pickle { offset: op_at, reason: format!("unknown opcode 0x{other:02x}") });
            }
        }
        Ok(())
    }
}

impl Pickle {
    /// The object a value refers to, if it is a compound one.
    pub fn obj(&self, v: &Value) -> Option<&Object> {
        match v {
            Value::Obj(ObjId(i)) => self.objects.get(*i),
            _ => None,
        }
    }

    /// `module.name` of a global, or of the function of a call.
    pub fn global_name(&self, v: &Value) -> Option<String> {
        match self.obj(v)? {
            Object::Global { module, name } => Some(format!("{module}.{name}")),
            _ => None,
        }
    }

    /// The entries of a dict, or of an `OrderedDict()` call filled by `SETITEMS`.
    pub fn dict_items(&self, v: &Value) -> Option<&[(Value, Value)]> {
        match self.obj(v)? {
            Object::Dict(d) => Some(d),
            Object::Call { items, .. } => Some(items),
            _ => None,
        }
    }

    /// The entry of a dict (or OrderedDict) under a string key.
    pub fn get<'p>(&'p self, v: &Value, key: &str) -> Option<&'p Value> {
        self.dict_items(v)?.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v)
    }

    /// The items of a tuple or list.
    pub fn seq(&self, v: &Value) -> Option<&[Value]> {
        match self.obj(v)? {
            Object::Tuple(t) | Object::List(t) => Some(t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memoised_containers_filled_later() {
        // pickle.dumps({'a': [1, 2], 'b': <the same list>}, protocol=2)
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02eX\x01\x00\x00\x00bq\x03h\x02u.";
        let p = unpickle(bytes).unwrap();
        let root = p.root.clone().unwrap();
        let a = p.get(&root, "a").unwrap();
        let b = p.get(&root, "b").unwrap();
        assert_eq!(a, b, "both keys refer to the one list");
        assert_eq!(p.seq(a).unwrap(), &[Value::Int(1), Value::Int(2)]);
    }

    #[test]
    fn globals_and_calls_are_recorded_not_run() {
        // pickle.dumps(os.system, protocol=2) would name a function; REDUCE only records the call.
        let bytes = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.";
        let p = unpickle(bytes).unwrap();
        let root = p.root.clone().unwrap();
        let Some(Object::Call { func, .. }) = p.obj(&root) else { panic!("expected a call") };
        assert_eq!(p.global_name(func).as_deref(), Some("os.system"));
    }

    #[test]
    fn bad_input_is_an_error_with_an_offset() {
        let cases: [(&[u8], &str); 5] = [
            (b"\x80\x02", "truncated"),
            (b"\x80\x02h\x05.", "memo key 5"),
            (b"\x80\x02s.", "underflow"),
            (b"\x80\x02\xff", "unknown opcode 0xff"),
            (b"\x80\x02X\xff\xff\xff\x7f", "truncated"),
        ];
        for (bytes, want) in cases {
            let e = unpickle(bytes).unwrap_err().to_string();
            assert!(e.contains(want) && e.starts_with("pickle at byte"), "{e}");
        }
    }

    #[test]
    fn longs_decode_in_twos_complement() {
        assert_eq!(long_from_bytes(&[0xff]), Value::Int(-1));
        assert_eq!(long_from_bytes(&[0x00, 0x01]), Value::Int(256));
        assert_eq!(long_from_bytes(&[]), Value::Int(0));
    }
}

//! A reader of TensorBoard event files for the tests, written apart from `ch`'s writer: it
//! checks both masked CRC-32C of every TFRecord (computed bit by bit, not from a table) and
//! decodes the `Event` fields TensorBoard's scalar dashboard reads, skipping any other field.

/// One decoded `Event`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub wall_time: f64,
    pub step: i64,
    pub file_version: Option<String>,
    /// `(tag, simple_value)` of the summary's values.
    pub scalars: Vec<(String, f32)>,
}

fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

fn masked(data: &[u8]) -> u32 {
    let c = crc32c_bitwise(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], String> {
    let end = at.checked_add(n).filter(|&e| e <= bytes.len()).ok_or_else(|| format!("{what} runs past the end at byte {at}"))?;
    let out = &bytes[*at..end];
    *at = end;
    Ok(out)
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

/// The records of a TFRecord file, with their CRCs checked.
pub fn records(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let (mut at, mut out) = (0, Vec::new());
    while at < bytes.len() {
        let len_bytes = take(bytes, &mut at, 8, "record length")?;
        if u32_le(take(bytes, &mut at, 4, "length CRC")?) != masked(len_bytes) {
            return Err(format!("record {}: bad length CRC", out.len()));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes")) as usize;
        let data = take(bytes, &mut at, len, "record data")?;
        if u32_le(take(bytes, &mut at, 4, "data CRC")?) != masked(data) {
            return Err(format!("record {}: bad data CRC", out.len()));
        }
        out.push(data.to_vec());
    }
    Ok(out)
}

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *take(b, at, 1, "varint")?.first().expect("one byte");
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// The fields of one message: `(field number, wire type, payload)`; a varint's payload is its
/// value as 8 little-endian bytes.
fn fields(b: &[u8]) -> Result<Vec<(u64, u64, Vec<u8>)>, String> {
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        let payload = match wire {
            0 => varint(b, &mut at)?.to_le_bytes().to_vec(),
            1 => take(b, &mut at, 8, "fixed64")?.to_vec(),
            2 => {
                let n = varint(b, &mut at)? as usize;
                take(b, &mut at, n, "bytes")?.to_vec()
            }
            5 => take(b, &mut at, 4, "fixed32")?.to_vec(),
            other => return Err(format!("wire type {other} of field {field} is not used by Event")),
        };
        out.push((field, wire, payload));
    }
    Ok(out)
}

pub fn decode_event(b: &[u8]) -> Result<Event, String> {
    let mut e = Event { wall_time: 0.0, step: 0, file_version: None, scalars: Vec::new() };
    for (field, wire, payload) in fields(b)? {
        match (field, wire) {
            (1, 1) => e.wall_time = f64::from_le_bytes(payload.try_into().expect("8 bytes")),
            (2, 0) => e.step = i64::from_le_bytes(payload.try_into().expect("8 bytes")),
            (3, 2) => e.file_version = Some(String::from_utf8(payload).map_err(|x| x.to_string())?),
            (5, 2) => {
                for (vf, vw, value) in fields(&payload)? {
                    if (vf, vw) != (1, 2) {
                        continue;
                    }
                    let (mut tag, mut simple) = (None, None);
                    for (f, w, p) in fields(&value)? {
                        match (f, w) {
                            (1, 2) => tag = Some(String::from_utf8(p).map_err(|x| x.to_string())?),
                            (2, 5) => simple = Some(f32::from_le_bytes(p.try_into().expect("4 bytes"))),
                            _ => {}
                        }
                    }
                    if let (Some(t), Some(v)) = (tag, simple) {
                        e.scalars.push((t, v));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(e)
}

/// Every event of a file, in order.
pub fn read_events(bytes: &[u8]) -> Result<Vec<Event>, String> {
    records(bytes)?.iter().map(|r| decode_event(r)).collect()
}

/// `(step, value)` of every scalar with `tag`, in file order.
pub fn scalars(events: &[Event], tag: &str) -> Vec<(i64, f32)> {
    events.iter().flat_map(|e| e.scalars.iter().filter(|(t, _)| t == tag).map(move |(_, v)| (e.step, *v))).collect()
}

#[test]
fn crc_of_the_check_string() {
    assert_eq!(crc32c_bitwise(b"123456789"), 0xE306_9283);
}

//! NumPy `.npy` arrays and `.npz` archives (a zip of `.npy` files), read into f32 tensors.
//!
//! The header is a Python dict literal (`{'descr': '<f4', 'fortran_order': False, 'shape': (3,
//! 4), }`); it is parsed by hand for exactly those three keys rather than evaluated.

use crate::dtype::{decode, DType};
use crate::state_dict::{StateDict, Weight};
use crate::zip::ZipArchive;
use crate::{InteropError, Result};
use mase_ir::Tensor;

fn err(entry: &str, reason: impl Into<String>) -> InteropError {
    InteropError::Npy { entry: entry.to_string(), reason: reason.into() }
}

fn parse_descr(d: &str) -> Option<(DType, bool)> {
    // `get` rather than `split_at`: the header is any UTF-8 text, and its first character may be
    // more than one byte long.
    let (order, code) = (d.get(..1)?, d.get(1..)?);
    let big = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return None,
    };
    let t = match code {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        _ => return None,
    };
    Some((t, big))
}

/// The text after `'key':` in the header, up to the next top-level comma or the closing brace.
fn header_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}'])? };
    Some(rest[..end].trim())
}

/// Parses one `.npy` file; `entry` names it in errors.
pub fn read_npy(bytes: &[u8], entry: &str) -> Result<Weight> {
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return Err(err(entry, "not an .npy array (bad magic)"));
    }
    let (hlen, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            let b = bytes.get(8..12).ok_or_else(|| err(entry, "truncated header"))?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        v => return Err(err(entry, format!("unsupported .npy version {v}"))),
    };
    let header = start.checked_add(hlen).and_then(|e| bytes.get(start..e)).ok_or_else(|| err(entry, "truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| err(entry, "header is not text"))?;
    let descr = header_value(header, "descr").ok_or_else(|| err(entry, "header has no 'descr'"))?.trim_matches(['\'', '"']);
    let (dtype, big) = parse_descr(descr).ok_or_else(|| err(entry, format!("unsupported dtype '{descr}'")))?;
    let fortran = match header_value(header, "fortran_order") {
        Some("False") => false,
        Some("True") => true,
        _ => return Err(err(entry, "header has no valid 'fortran_order'")),
    };
    let shape_text = header_value(header, "shape").ok_or_else(|| err(entry, "header has no 'shape'"))?;
    let inner = shape_text.strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(|| err(entry, "bad 'shape'"))?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>().map_err(|_| err(entry, format!("bad dimension `{s}` in shape"))))
        .collect::<Result<_>>()?;
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| err(entry, "shape overflows"))?;
    let data = &bytes[start + hlen..];
    let need = count.checked_mul(dtype.size()).ok_or_else(|| err(entry, "shape overflows"))?;
    if data.len() < need {
        return Err(err(entry, format!("holds {} bytes of data, shape {shape:?} needs {need}: truncated", data.len())));
    }
    let mut values = decode(data, dtype, count, big);
    if fortran && shape.len() > 1 {
        values = fortran_to_c(&values, &shape);
    }
    Ok(Weight { dtype, tensor: Tensor { shape, data: values } })
}

/// Reorders column-major values into row-major order.
fn fortran_to_c(v: &[f32], shape: &[usize]) -> Vec<f32> {
    let rank = shape.len();
    let mut f_strides = vec![1usize; rank];
    for d in 1..rank {
        f_strides[d] = f_strides[d - 1] * shape[d - 1];
    }
    let mut out = Vec::with_capacity(v.len());
    let mut idx = vec![0usize; rank];
    for _ in 0..v.len() {
        out.push(v[idx.iter().zip(&f_strides).map(|(i, s)| i * s).sum::<usize>()]);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Reads every array of an `.npz` archive, named by its file name without `.npy`, in archive order.
pub fn read_npz(bytes: &[u8]) -> Result<StateDict> {
    let zip = ZipArchive::new(bytes)?;
    let mut out = Vec::new();
    for e in zip.entries() {
        let Some(name) = e.name.strip_suffix(".npy") else { continue };
        out.push((name.to_string(), read_npy(&zip.read(e)?, &e.name)?));
    }
    Ok(out)
}

/// Writes an `.npz` archive of f32 arrays.
pub fn write_npz(arrays: &[(&str, &Tensor)]) -> Vec<u8> {
    let files: Vec<(String, Vec<u8>)> = arrays.iter().map(|(k, t)| (format!("{k}.npy"), write_npy_f32(t))).collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    crate::zip::write_stored(&refs)
}

/// Writes a little-endian f32 `.npy` file (used for reference bundles and tests).
pub fn write_npy_f32(t: &Tensor) -> Vec<u8> {
    let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts on a 64-byte boundary, ending the header with a newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    for v in &t.data {
        out.extend(v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips_and_reads_fortran_order() {
        let t = Tensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let w = read_npy(&write_npy_f32(&t), "t").unwrap();
        assert_eq!((w.dtype, &w.tensor), (DType::F32, &t));
        // The same values stored column-major, as numpy writes np.asfortranarray(t): the flag is
        // rewritten in place ("True " has the length of "False"), so no offset changes.
        let mut fixed = write_npy_f32(&Tensor::new(vec![2, 3], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap());
        let flag = fixed.windows(5).position(|w| w == b"False").unwrap();
        fixed[flag..flag + 5].copy_from_slice(b"True ");
        assert_eq!(read_npy(&fixed, "f").unwrap().tensor, t);
    }

    #[test]
    fn bad_headers_are_errors() {
        for (bytes, want) in [
            (b"hello".to_vec(), "bad magic"),
            (b"\x93NUMPY\x01\x00\x40\x00{'descr': '<c8'}".to_vec(), "truncated header"),
            (b"\x93NUMPY\x01\x00\x1a\x00{'descr': '<c8', 'x': 1}  ".to_vec(), "unsupported dtype"),
        ] {
            let e = read_npy(&bytes, "a").unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let mut t = write_npy_f32(&Tensor::new(vec![4], vec![1.0; 4]).unwrap());
        t.truncate(t.len() - 3);
        assert!(read_npy(&t, "a").unwrap_err().to_string().contains("truncated"));
    }
}

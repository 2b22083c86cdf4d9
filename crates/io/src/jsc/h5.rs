//! MASE's HDF5 jet table: the compound dataset `t_allpar_new`, one named numeric field per column.

use super::{JscTable, JSC_FEATURES, JSC_LABELS, ROW};
use crate::{IoError, Result};
use hdf5_reader::{Datatype, Hdf5File, OpenOptions};
use std::path::Path;

/// The table MASE reads.
pub(crate) const TABLE: &str = "t_allpar_new";

/// The most bytes one read of the table may allocate. MASE's jet table (about 830,000 rows of a
/// few hundred bytes) stays well below it; a damaged file announcing more is refused before the
/// allocation.
const MAX_TABLE_BYTES: usize = 1 << 30;

fn limits() -> OpenOptions {
    OpenOptions::default().with_max_read_bytes(MAX_TABLE_BYTES)
}

/// How to turn the bytes of one field into a value.
#[derive(Clone, Copy, Debug)]
enum Field {
    F32,
    F64,
    Int { size: usize, signed: bool },
}

impl Field {
    fn of(dt: &Datatype) -> Option<Field> {
        match dt {
            Datatype::FloatingPoint { size: 4, .. } => Some(Field::F32),
            Datatype::FloatingPoint { size: 8, .. } => Some(Field::F64),
            Datatype::FixedPoint { size, signed, .. } if matches!(size, 1 | 2 | 4 | 8) => {
                Some(Field::Int { size: *size as usize, signed: *signed })
            }
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            Field::F32 => 4,
            Field::F64 => 8,
            Field::Int { size, .. } => size,
        }
    }

    /// Reads a native-endian value; f64 and wide integers are rounded to f32, the type MASE's
    /// pipeline works in.
    fn read(self, b: &[u8]) -> f32 {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        match self {
            Field::F32 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            Field::F64 => f64::from_ne_bytes(w) as f32,
            Field::Int { size, signed } => {
                let bits = size * 8;
                // Assemble as little-endian, whatever the host, after native conversion.
                let raw = if cfg!(target_endian = "little") {
                    u64::from_le_bytes(w)
                } else {
                    let mut be = [0u8; 8];
                    be[8 - size..].copy_from_slice(b);
                    u64::from_be_bytes(be)
                };
                if signed && bits < 64 {
                    (((raw << (64 - bits)) as i64) >> (64 - bits)) as f32
                } else if signed {
                    raw as i64 as f32
                } else {
                    raw as f32
                }
            }
        }
    }
}

/// Reads the 16 features and 5 one-hot labels of every row of `t_allpar_new`.
pub(crate) fn read(path: &Path) -> Result<JscTable> {
    let file = Hdf5File::open_with_options(path, limits()).map_err(|source| h5_err(path, "", source))?;
    table(path, &file)
}

/// The table of an HDF5 file's bytes (see [`read`]).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<JscTable> {
    let file = Hdf5File::from_bytes_with_options(bytes, limits()).map_err(|source| h5_err(path, "", source))?;
    table(path, &file)
}

/// An error of the HDF5 reader, kept as the source.
fn h5_err(path: &Path, what: &str, source: impl std::error::Error + Send + Sync + 'static) -> IoError {
    IoError::Hdf5Read { path: path.to_path_buf(), what: what.to_string(), source: Box::new(source) }
}

fn table(path: &Path, file: &Hdf5File) -> Result<JscTable> {
    let err = |reason: String| IoError::Hdf5 { path: path.to_path_buf(), reason };
    let ds = file.dataset(TABLE).map_err(|source| h5_err(path, &format!("no table `{TABLE}`"), source))?;
    let Datatype::Compound { size, fields } = ds.dtype().clone() else {
        return Err(err(format!("`{TABLE}` is not a compound (named-column) table")));
    };
    if ds.ndim() != 1 {
        return Err(err(format!("`{TABLE}` has shape {:?}, expected one dimension of rows", ds.shape())));
    }
    let size = size as usize;
    let mut cols: Vec<(usize, Field)> = Vec::with_capacity(ROW);
    for name in JSC_FEATURES.iter().chain(JSC_LABELS.iter()) {
        let f = fields.iter().find(|f| f.name == *name).ok_or_else(|| {
            let have: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            err(format!("`{TABLE}` has no column `{name}` (columns: {})", have.join(", ")))
        })?;
        let kind = Field::of(&f.datatype).ok_or_else(|| err(format!("column `{name}` has type {:?}, expected a number", f.datatype)))?;
        let off = usize::try_from(f.byte_offset).unwrap_or(usize::MAX);
        if !fits_in_row(off, kind.size(), size) {
            return Err(err(format!("column `{name}` lies outside the {size}-byte row")));
        }
        cols.push((off, kind));
    }
    let bytes = ds.read_native_bytes().map_err(|source| h5_err(path, &format!("reading `{TABLE}`"), source))?;
    if size == 0 || bytes.len() % size != 0 {
        return Err(err(format!("`{TABLE}` holds {} bytes, not a whole number of {size}-byte rows", bytes.len())));
    }
    let mut rows = Vec::with_capacity(bytes.len() / size * ROW);
    for rec in bytes.chunks_exact(size) {
        for &(off, kind) in &cols {
            rows.push(kind.read(&rec[off..off + kind.size()]));
        }
    }
    Ok(JscTable { rows })
}

/// Whether a column of `width` bytes at byte `off` lies inside a row of `row` bytes; a hostile
/// offset near the top of the address space must not wrap around.
fn fits_in_row(off: usize, width: usize, row: usize) -> bool {
    off.checked_add(width).is_some_and(|end| end <= row)
}

#[cfg(test)]
mod tests {
    use super::Field;

    #[test]
    fn columns_must_lie_inside_the_row() {
        use super::fits_in_row;
        let cases =
            [((0, 4, 8), true), ((4, 4, 8), true), ((5, 4, 8), false), ((usize::MAX - 2, 4, 8), false), ((usize::MAX, 8, 8), false)];
        for ((off, width, row), want) in cases {
            assert_eq!(fits_in_row(off, width, row), want, "offset {off}, width {width}, row {row}");
        }
    }

    #[test]
    fn field_decoding() {
        let cases: [(Field, Vec<u8>, f32); 6] = [
            (Field::F32, 1.5f32.to_ne_bytes().to_vec(), 1.5),
            (Field::F64, 0.1f64.to_ne_bytes().to_vec(), 0.1f32),
            (Field::Int { size: 4, signed: true }, (-3i32).to_ne_bytes().to_vec(), -3.0),
            (Field::Int { size: 1, signed: false }, vec![200], 200.0),
            (Field::Int { size: 2, signed: true }, (-2i16).to_ne_bytes().to_vec(), -2.0),
            (Field::Int { size: 8, signed: true }, (-7i64).to_ne_bytes().to_vec(), -7.0),
        ];
        for (f, b, want) in cases {
            assert_eq!(f.read(&b), want, "{f:?}");
        }
    }
}

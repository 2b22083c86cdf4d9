//! Element types of stored tensors and their conversion to the f32 values the IR holds.

/// The element type of a tensor in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Whether values are floating point (model weights) rather than integers (counters, indices).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }
}

/// IEEE half precision to f32, exactly.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // A subnormal half is m * 2^-24; f32 represents it exactly.
            let v = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Decodes `count` elements of `dtype` from `bytes` (little-endian unless `big_endian`) into f32.
/// The caller has checked that `bytes` holds at least `count` elements.
pub fn decode(bytes: &[u8], dtype: DType, count: usize, big_endian: bool) -> Vec<f32> {
    let n = dtype.size();
    let chunks = bytes.chunks_exact(n).take(count);
    let arr = |c: &[u8]| -> [u8; 8] {
        let mut a = [0u8; 8];
        if big_endian {
            for (i, b) in c.iter().rev().enumerate() {
                a[i] = *b;
            }
        } else {
            a[..c.len()].copy_from_slice(c);
        }
        a
    };
    chunks
        .map(|c| {
            let a = arr(c);
            match dtype {
                DType::F16 => f16_to_f32(u16::from_le_bytes([a[0], a[1]])),
                DType::BF16 => f32::from_bits((u16::from_le_bytes([a[0], a[1]]) as u32) << 16),
                DType::F32 => f32::from_le_bytes([a[0], a[1], a[2], a[3]]),
                DType::F64 => f64::from_le_bytes(a) as f32,
                DType::I8 => a[0] as i8 as f32,
                DType::I16 => i16::from_le_bytes([a[0], a[1]]) as f32,
                DType::I32 => i32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f32,
                DType::I64 => i64::from_le_bytes(a) as f32,
                DType::U8 => a[0] as f32,
                DType::Bool => (a[0] != 0) as u8 as f32,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_convert_exactly() {
        let cases: [(u16, f32); 7] = [
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x0001, 5.960_464_5e-8),
            (0x7bff, 65504.0),
            (0x0000, 0.0),
            (0x7c00, f32::INFINITY),
        ];
        for (h, want) in cases {
            assert_eq!(f16_to_f32(h), want, "{h:#06x}");
        }
    }

    #[test]
    fn decodes_each_type() {
        assert_eq!(decode(&[0, 0, 0x80, 0x3f], DType::F32, 1, false), [1.0]);
        assert_eq!(decode(&[0x3f, 0x80, 0, 0], DType::F32, 1, true), [1.0]);
        assert_eq!(decode(&[0x80, 0x3f], DType::BF16, 1, false), [1.0]);
        assert_eq!(decode(&(-3i64).to_le_bytes(), DType::I64, 1, false), [-3.0]);
        assert_eq!(decode(&[0xff, 2], DType::I8, 2, false), [-1.0, 2.0]);
    }
}

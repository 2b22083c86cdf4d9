//! numpy's legacy `np.random.RandomState` (MT19937), bit for bit, for the parts MASE's data pipeline
//! uses: `rand` / `random_sample` (toy_tiny) and `permutation` (sklearn's `train_test_split` for jsc).
//!
//! mase-rs draws its own randomness from [`mase_ir::Rng`]; this generator exists only so that data
//! splits made by MASE's Python code can be reproduced exactly.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// A Mersenne Twister seeded as `np.random.RandomState(seed)` seeds it for an integer seed
/// (`init_genrand`).
#[derive(Clone)]
pub struct RandomState {
    mt: [u32; N],
    pos: usize,
}

impl std::fmt::Debug for RandomState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomState").field("pos", &self.pos).finish_non_exhaustive()
    }
}

impl RandomState {
    /// `np.random.RandomState(seed)`.
    pub fn new(seed: u32) -> RandomState {
        let mut mt = [0u32; N];
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        RandomState { mt, pos: N }
    }

    fn reload(&mut self) {
        let mag = |y: u32| if y & 1 == 1 { MATRIX_A } else { 0 };
        for i in 0..N {
            let y = (self.mt[i] & UPPER_MASK) | (self.mt[(i + 1) % N] & LOWER_MASK);
            self.mt[i] = self.mt[(i + M) % N] ^ (y >> 1) ^ mag(y);
        }
        self.pos = 0;
    }

    /// The next tempered 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.pos == N {
            self.reload();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Two outputs joined high word first, as numpy's `mt19937_next64`.
    pub fn next_u64(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        (hi << 32) | self.next_u32() as u64
    }

    /// `random_sample()`: a double in [0, 1) with 53 random bits.
    pub fn random_sample(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// `rand(n)` flattened: `n` draws of [`RandomState::random_sample`].
    pub fn rand(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.random_sample()).collect()
    }

    /// numpy's legacy `random_interval(max)`: uniform in `[0, max]` by masking to the smallest
    /// covering power of two and rejecting draws above `max`.
    pub fn random_interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mut mask = max;
        for s in [1, 2, 4, 8, 16, 32] {
            mask |= mask >> s;
        }
        if max <= 0xffff_ffff {
            loop {
                let v = (self.next_u32() as u64) & mask;
                if v <= max {
                    return v;
                }
            }
        } else {
            loop {
                let v = self.next_u64() & mask;
                if v <= max {
                    return v;
                }
            }
        }
    }

    /// `permutation(n)`: `arange(n)` shuffled by the legacy Fisher-Yates loop
    /// (`for i in n-1..1: swap(a[i], a[random_interval(i)])`).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut a: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.random_interval(i as u64) as usize;
            a.swap(i, j);
        }
        a
    }
}

/// Parses Python's `float.hex` form (`0x1.8p-1`).
#[cfg(test)]
pub(crate) fn parse_hex_f64(s: &str) -> f64 {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let s = &s[2..];
    let (mant, exp) = s.split_once('p').unwrap_or((s, "0"));
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut v = u64::from_str_radix(int, 16).unwrap_or(0) as f64;
    for (k, c) in frac.chars().enumerate() {
        v += c.to_digit(16).unwrap_or(0) as f64 / 16f64.powi(k as i32 + 1);
    }
    let v = v * 2f64.powi(exp.parse().unwrap_or(0));
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_hex_f64 as hex_f64, RandomState};

    // Reference values printed by numpy 2.4.6 (`np.random.RandomState`).
    #[test]
    fn permutation_matches_numpy() {
        let p = RandomState::new(42).permutation(1000);
        assert_eq!(&p[..12], [521, 737, 740, 660, 411, 678, 626, 513, 859, 136, 811, 76]);
        assert_eq!(RandomState::new(42).permutation(10), [8, 1, 5, 0, 7, 2, 9, 4, 3, 6]);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_eq!(RandomState::new(7).permutation(1), [0]);
        assert!(RandomState::new(7).permutation(0).is_empty());
    }

    #[test]
    fn rand_matches_numpy_bits() {
        // np.random.RandomState(0).rand(3), as float.hex.
        let want = ["0x1.18fe1565f12a8p-1", "0x1.6e2d4cf608733p-1", "0x1.349d66b6e894bp-1"];
        let got = RandomState::new(0).rand(3);
        for (g, w) in got.iter().zip(want) {
            assert_eq!(*g, hex_f64(w), "{g}");
        }
        assert_eq!(got[0], 0.5488135039273248);
    }

    #[test]
    fn raw_outputs_match_reference_mt19937() {
        // The MT19937 reference (init_genrand(5489)) first output is 3499211612; numpy's
        // RandomState(0).randint(2**32) style raw draws start 2357136044, 2546248239.
        assert_eq!(RandomState::new(5489).next_u32(), 3_499_211_612);
        let mut r = RandomState::new(0);
        assert_eq!([r.next_u32(), r.next_u32()], [2_357_136_044, 2_546_248_239]);
    }

    #[test]
    fn hex_parser_reads_python_forms() {
        assert_eq!(hex_f64("0x1.8p-1"), 0.75);
        assert_eq!(hex_f64("-0x1.0p+2"), -4.0);
    }
}

//! Quasi-Monte-Carlo sampling (Optuna's `QMCSampler`): trial `k` takes the `k`-th point of a
//! low-discrepancy sequence in `[0, 1)^d`, mapped onto the parameters. Sobol points use the
//! Joe–Kuo direction numbers for the first 21 dimensions and primitive polynomials found here,
//! with fixed odd initial numbers, beyond; Halton points use the first primes as bases. With
//! `scramble = true` (the default here; Optuna's default is false, which ignores the seed) the
//! sequence is randomised by the seed: a digital shift for Sobol, a random shift for Halton.
//! Both keep the sequence's stratification (every `2^m` consecutive Sobol points put one point
//! in each of `2^m` equal intervals of each axis).

use crate::sampler::{options, Proposal, SampleContext, Sampler};
use crate::{Result, SearchError};
use mase_ir::Rng;
use serde_json::Value;

/// Which sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QmcKind {
    Sobol,
    Halton,
}

/// QMC settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Qmc {
    pub kind: QmcKind,
    pub scramble: bool,
}

/// The keys of `[search.strategy.sampler_options]` this sampler reads.
pub(crate) const OPTIONS: &[&str] = &["qmc_type", "scramble"];

pub(crate) fn build(opts: &Value) -> Result<Box<dyn Sampler>> {
    let m = options(opts, "qmc", OPTIONS)?;
    let kind = match m.and_then(|m| m.get("qmc_type")).map(|v| v.as_str()) {
        None | Some(Some("sobol")) => QmcKind::Sobol,
        Some(Some("halton")) => QmcKind::Halton,
        Some(_) => return Err(SearchError::config("search.strategy.sampler_options.qmc_type", "must be \"sobol\" or \"halton\"")),
    };
    let scramble = match m.and_then(|m| m.get("scramble")) {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| SearchError::config("search.strategy.sampler_options.scramble", "must be true or false"))?,
    };
    Ok(Box::new(Qmc { kind, scramble }))
}

/// Joe and Kuo's `new-joe-kuo-6.21201` entries for dimensions 2..=21: degree `s`, coefficient
/// bits `a`, initial direction numbers `m`.
const JOE_KUO: &[(u32, u32, &[u32])] = &[
    (1, 0, &[1]),
    (2, 1, &[1, 3]),
    (3, 1, &[1, 3, 1]),
    (3, 2, &[1, 1, 1]),
    (4, 1, &[1, 1, 3, 3]),
    (4, 4, &[1, 3, 5, 13]),
    (5, 2, &[1, 1, 5, 5, 17]),
    (5, 4, &[1, 1, 5, 5, 5]),
    (5, 7, &[1, 1, 7, 11, 19]),
    (5, 11, &[1, 1, 5, 1, 1]),
    (5, 13, &[1, 1, 1, 3, 11]),
    (5, 14, &[1, 3, 5, 5, 31]),
    (6, 1, &[1, 3, 3, 9, 7, 49]),
    (6, 13, &[1, 1, 1, 15, 21, 21]),
    (6, 16, &[1, 3, 1, 13, 27, 49]),
    (6, 19, &[1, 1, 1, 15, 7, 5]),
    (6, 22, &[1, 3, 1, 15, 13, 25]),
    (6, 25, &[1, 1, 5, 5, 19, 61]),
    (7, 1, &[1, 3, 7, 11, 23, 15, 103]),
    (7, 4, &[1, 3, 7, 13, 13, 15, 69]),
];

const BITS: usize = 32;

/// Whether `x^s + (a bits) + 1` is primitive over GF(2): `x` has order `2^s - 1` modulo it.
fn is_primitive(s: u32, a: u32) -> bool {
    let poly = (1u64 << s) | ((a as u64) << 1) | 1;
    let order = (1u64 << s) - 1;
    // Multiplying by x repeatedly; x^k == 1 must first happen at k = order.
    let mut r = 1u64;
    for k in 1..=order {
        r <<= 1;
        if r & (1 << s) != 0 {
            r ^= poly;
        }
        if r == 1 {
            return k == order;
        }
    }
    false
}

/// Direction numbers (scaled to 32 bits) of dimension `d` (0-based).
fn directions(d: usize) -> [u32; BITS] {
    let mut v = [0u32; BITS];
    if d == 0 {
        for (k, slot) in v.iter_mut().enumerate() {
            *slot = 1 << (31 - k);
        }
        return v;
    }
    let (s, a, m): (u32, u32, Vec<u32>) = match JOE_KUO.get(d - 1) {
        Some(&(s, a, m)) => (s, a, m.to_vec()),
        None => {
            // Primitive polynomials after the table's last (degree 7, a = 4), in order, with odd
            // initial numbers below 2^k drawn from a fixed stream.
            let mut found = JOE_KUO.len();
            let mut rng = Rng::new(0x5EED_0B01);
            let mut s = 7;
            let mut a = 5;
            loop {
                if a >= (1 << (s - 1)) {
                    s += 1;
                    a = 0;
                }
                if is_primitive(s, a) {
                    found += 1;
                    if found == d {
                        break;
                    }
                }
                a += 1;
            }
            let m = (1..=s).map(|k| (rng.below(1 << (k - 1)) as u32) * 2 + 1).collect();
            (s, a, m)
        }
    };
    let s = s as usize;
    for k in 0..s.min(BITS) {
        v[k] = m[k] << (31 - k);
    }
    for k in s..BITS {
        let mut x = v[k - s] ^ (v[k - s] >> s);
        for j in 1..s {
            if (a >> (s - 1 - j)) & 1 == 1 {
                x ^= v[k - j];
            }
        }
        v[k] = x;
    }
    v
}

/// The `index`-th Sobol point in `dims` dimensions (Gray-code order, as Antonov–Saleev and
/// scipy generate them), unscrambled.
pub fn sobol_point(index: u64, dims: usize) -> Vec<u32> {
    let gray = index ^ (index >> 1);
    (0..dims)
        .map(|d| {
            let v = directions(d);
            let mut x = 0u32;
            for (k, vk) in v.iter().enumerate() {
                if (gray >> k) & 1 == 1 {
                    x ^= vk;
                }
            }
            x
        })
        .collect()
}

/// The radical inverse of `index` in base `b` (the Halton coordinate).
pub fn radical_inverse(mut index: u64, b: u64) -> f64 {
    let (mut x, mut f) = (0.0, 1.0 / b as f64);
    while index > 0 {
        x += (index % b) as f64 * f;
        index /= b;
        f /= b as f64;
    }
    x
}

fn primes(n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    let mut c = 2u64;
    while out.len() < n {
        if out.iter().take_while(|&&p| p * p <= c).all(|&p| c % p != 0) {
            out.push(c);
        }
        c += 1;
    }
    out
}

impl Qmc {
    /// The unit-cube point of trial `number`.
    pub fn unit_point(&self, number: u64, dims: usize, seed: u64) -> Vec<f64> {
        // The shift is drawn from the seed alone, so it is the same for every trial.
        let mut rng = Rng::new(seed).fork(0x0051_4D43);
        match self.kind {
            QmcKind::Sobol => sobol_point(number, dims)
                .into_iter()
                .map(|x| {
                    let shift = if self.scramble { rng.next_u64() as u32 } else { 0 };
                    (x ^ shift) as f64 / 4_294_967_296.0
                })
                .collect(),
            QmcKind::Halton => primes(dims)
                .into_iter()
                .map(|b| {
                    let shift = if self.scramble { rng.uniform_f64() } else { 0.0 };
                    (radical_inverse(number, b) + shift).fract()
                })
                .collect(),
        }
    }
}

impl Sampler for Qmc {
    fn name(&self) -> &'static str {
        "qmc"
    }

    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>> {
        let u = self.unit_point(cx.number, cx.params.len(), cx.seed);
        Ok(Some(Proposal::new(cx.params.iter().zip(u).map(|(p, x)| p.kind.from_unit(x)).collect())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sobol_known_points_and_stratification() {
        // The first points of the 2-D Sobol sequence.
        let want = [[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75], [0.375, 0.375], [0.875, 0.875]];
        for (i, w) in want.iter().enumerate() {
            let p: Vec<f64> = sobol_point(i as u64, 2).iter().map(|&x| x as f64 / 4_294_967_296.0).collect();
            assert_eq!(p, w, "point {i}");
        }
        // Every dimension (table and generated ones) puts one of the first 64 points in each 1/64.
        let dims = 40;
        let pts: Vec<Vec<u32>> = (0..64).map(|i| sobol_point(i, dims)).collect();
        for d in 0..dims {
            let mut cells: Vec<u32> = pts.iter().map(|p| p[d] >> 26).collect();
            cells.sort_unstable();
            assert_eq!(cells, (0..64).collect::<Vec<u32>>(), "dimension {d}");
        }
        // A digital shift keeps that property.
        let q = Qmc { kind: QmcKind::Sobol, scramble: true };
        let mut cells: Vec<u64> = (0..16).map(|i| (q.unit_point(i, 3, 7)[2] * 16.0) as u64).collect();
        cells.sort_unstable();
        assert_eq!(cells, (0..16).collect::<Vec<u64>>());
    }

    #[test]
    fn halton_and_primitive_polynomials() {
        assert_eq!(radical_inverse(1, 2), 0.5);
        assert!((radical_inverse(5, 3) - (2.0 / 3.0 + 1.0 / 9.0)).abs() < 1e-15, "5 = 12 in base 3");
        assert_eq!(primes(5), [2, 3, 5, 7, 11]);
        // x^2 + x + 1 and x^3 + x + 1 are primitive; x^4 + x^2 + 1 (a = 0b10) is not.
        assert!(is_primitive(2, 1) && is_primitive(3, 1) && !is_primitive(4, 2));
        for &(s, a, _) in JOE_KUO {
            assert!(is_primitive(s, a), "Joe-Kuo entry s={s} a={a}");
        }
    }
}

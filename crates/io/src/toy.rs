//! MASE's `toy_tiny`: 10,240 points uniform in [-1, 1)^4 per split, labelled by the sign of their
//! sum, generated with numpy's `RandomState` so the numbers equal MASE's bit for bit.

use crate::dataset::{Dataset, DatasetInfo, Splits};
use crate::numpy_random::RandomState;

/// Samples per split (MASE's `num_samples`).
pub const TOY_TINY_SAMPLES: usize = 10_240;

/// One split: `data = (RandomState(seed).rand(n, 4) - 0.5) * 2` in f64,
/// `label = data.sum(axis=1) > 0`, samples stored as f32 `[1, 2, 2]`.
pub fn toy_tiny_split(seed: u32, n: usize) -> Dataset {
    let mut rs = RandomState::new(seed);
    let mut d = Dataset::with_capacity(vec![1, 2, 2], n);
    for _ in 0..n {
        let mut v = [0f64; 4];
        for x in &mut v {
            *x = (rs.random_sample() - 0.5) * 2.0;
        }
        // numpy's add.reduce over a row of 4 keeps the first element as the accumulator and adds the
        // pairwise sum of the rest (which for fewer than 8 values is a left-to-right sum).
        let sum = v[0] + ((v[1] + v[2]) + v[3]);
        d.push(&v.map(|x| x as f32), (sum > 0.0) as u32);
    }
    d
}

/// The three splits: seeds 0 (train), 1 (validation) and 2 (test), as MASE.
pub(crate) fn load() -> Splits {
    let n = TOY_TINY_SAMPLES;
    Splits {
        info: DatasetInfo {
            name: "toy_tiny".into(),
            num_classes: 2,
            sample_shape: vec![1, 2, 2],
            class_names: vec!["sum <= 0".into(), "sum > 0".into()],
            splits_note: format!("generated as MASE: numpy RandomState(0 | 1 | 2).rand({n}, 4) * 2 - 1 for train | validation | test"),
            source: "generator (numpy RandomState MT19937)".into(),
            dropped_nonfinite: 0,
        },
        train: toy_tiny_split(0, n),
        val: toy_tiny_split(1, n),
        test: toy_tiny_split(2, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numpy_random::parse_hex_f64;

    /// Values printed by numpy 2.4.6: `d = (RandomState(s).rand(10240, 4) - 0.5) * 2`,
    /// `l = d.sum(1) > 0`: (seed, l.sum(), l[:10], d[0] as float.hex).
    const CASES: [(u32, usize, [u32; 10], [&str; 4]); 3] = [
        (
            0,
            4986,
            [1, 1, 1, 0, 1, 1, 0, 0, 0, 1],
            ["0x1.8fe1565f12a80p-4", "0x1.b8b533d821cccp-2", "0x1.a4eb35b744a58p-3", "0x1.6faedb6395f50p-4"],
        ),
        (
            1,
            5138,
            [0, 0, 1, 0, 0, 1, 0, 0, 1, 1],
            ["-0x1.53e0bc0170fe8p-3", "0x1.c3397ceebc144p-2", "-0x1.ffe2046f999e4p-1", "-0x1.94d2a9003ee18p-2"],
        ),
        (
            2,
            5149,
            [0, 0, 0, 0, 1, 0, 0, 0, 1, 1],
            ["-0x1.062a35a13cec0p-3", "-0x1.e5739808c344ep-1", "0x1.96d5c3ca79e40p-4", "-0x1.08eb6307cef78p-3"],
        ),
    ];

    #[test]
    fn toy_tiny_matches_numpy() {
        for (seed, positives, first, row0) in CASES {
            let d = toy_tiny_split(seed, TOY_TINY_SAMPLES);
            assert_eq!(d.len(), TOY_TINY_SAMPLES);
            assert_eq!(d.y.iter().filter(|&&l| l == 1).count(), positives, "seed {seed}");
            assert_eq!(&d.y[..10], &first, "seed {seed}");
            let want: Vec<f32> = row0.iter().map(|h| parse_hex_f64(h) as f32).collect();
            assert_eq!(&d.x[..4], &want[..], "seed {seed}");
        }
        let s = load();
        assert_eq!((s.train.len(), s.val.len(), s.test.len()), (10_240, 10_240, 10_240));
        assert_eq!(s.train.sample_shape, [1, 2, 2]);
    }
}

//! Fitting a design to a part (`ch emit --part`): the reuse factor of every layer the user left
//! free, chosen so that the design's DSPs and LUTs fit the part at the smallest initiation
//! interval (doc/hardware.md, "Fitting a part").
//!
//! For a target initiation interval `t`, each free layer is folded as far as `t` allows (its
//! largest reuse factor that divides its inputs and is at most `t`): folding further would not
//! lower the interval, and every fold takes multipliers away. The targets are tried in
//! increasing order, and the first design whose estimate fits is the answer, so no design of a
//! smaller interval fits by the cost model. The DSPs are the cost model's (exact for
//! instantiated multipliers); the LUTs are its LUT6 figure times [`LUT4_PER_ESTIMATED_LUT`].

use crate::cost::estimate;
use crate::design::{Design, Layer};
use crate::ecp5::{Ecp5Part, Resources};
use crate::error::{HwError, Result};

/// ECP5 LUT4s (Yosys `synth_ecp5`, carry cells counted as two) per LUT6 of the cost model:
/// the least-squares ratio over the ten designs placed and routed for the README's ECP5 tables
/// (jsc-tiny and jsc-toy at 6 and 8 bits, unrolled and folded, pipelined for 200 MHz). The
/// ratio of those designs runs from 2.2 to 5.7 (the model undercounts small folded layers), so
/// a design that fits by less than that margin is worth a `ch synth --target ecp5`.
pub const LUT4_PER_ESTIMATED_LUT: f64 = 2.67;

/// What a design needs of a part by the cost model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Need {
    pub dsps: u64,
    pub luts: u64,
}

impl Need {
    /// The design's DSPs and LUT4s by the cost model.
    pub fn of(design: &Design) -> Need {
        let e = estimate(design);
        Need { dsps: e.dsps.round() as u64, luts: (e.luts * LUT4_PER_ESTIMATED_LUT).round() as u64 }
    }

    /// Whether it fits what the part has.
    pub fn fits(&self, available: Resources) -> bool {
        self.dsps <= available.dsps && self.luts <= available.luts
    }

    /// What is over the part, as `1,054 DSPs of 156 (898 over)`, one item per resource.
    pub fn overuse(&self, available: Resources) -> Vec<String> {
        let mut over = Vec::new();
        if self.dsps > available.dsps {
            over.push(format!("{} DSPs of {} ({} over)", self.dsps, available.dsps, self.dsps - available.dsps));
        }
        if self.luts > available.luts {
            over.push(format!("about {} LUT4s of {} ({} over)", self.luts, available.luts, self.luts - available.luts));
        }
        over
    }
}

/// A design fitted to a part: the design, the reuse factor chosen for each free layer, and
/// what it needs of the part.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub design: Design,
    pub reuse: Vec<(String, usize)>,
    pub need: Need,
}

/// What to fit: the part, and the layers whose reuse factor is given (`--reuse-layer`, a node's
/// `hardware.reuse_factor`), which the fit leaves as they are.
#[derive(Clone, Debug)]
pub struct FitRequest<'a> {
    pub part: Ecp5Part,
    pub fixed: &'a [String],
}

/// The matrix-vector layers of a design: its linear layers and its convolutions' units.
pub fn product_layers(d: &Design) -> Vec<&Layer> {
    let convs = d.stages.iter().filter_map(|s| match s {
        crate::conv::Stage::Conv(c) => Some(&c.mvu),
        crate::conv::Stage::MaxPool(_) => None,
    });
    convs.chain(&d.layers).collect()
}

/// The largest divisor of `n` that is at most `t` (at least 1).
fn fold_within(n: usize, t: usize) -> usize {
    (1..=t.min(n).max(1)).rev().find(|r| n % r == 0).unwrap_or(1)
}

/// Fits the design that `build` lowers: `build` takes the reuse factors of the free layers
/// (node and factor) and returns the whole design with them (the fixed layers as given, the
/// clock and multipliers applied). `build(&[])` is the design with every free layer unrolled.
/// A design that does not fit even with every free layer folded as far as it goes is an error
/// saying by how much.
pub fn fit(request: &FitRequest, build: impl Fn(&[(String, usize)]) -> Result<Design>) -> Result<Fitted> {
    let unrolled = build(&[])?;
    let free: Vec<(String, usize)> = product_layers(&unrolled)
        .into_iter()
        .filter(|l| !request.fixed.contains(&l.node))
        .map(|l| (l.node.clone(), l.in_features.max(1)))
        .collect();
    let mut targets: Vec<usize> = free.iter().flat_map(|(_, n)| (1..=*n).filter(move |r| n % r == 0)).collect();
    targets.push(1);
    targets.sort_unstable();
    targets.dedup();
    let mut last = None;
    for t in targets {
        let reuse: Vec<(String, usize)> = free.iter().map(|(node, n)| (node.clone(), fold_within(*n, t))).collect();
        let design = if t == 1 { unrolled.clone() } else { build(&reuse)? };
        let need = Need::of(&design);
        if need.fits(request.part.available) {
            return Ok(Fitted { design, reuse, need });
        }
        last = Some(need);
    }
    let need = last.unwrap_or_else(|| Need::of(&unrolled));
    let folded = if free.is_empty() { "with the reuse factors given" } else { "with every free layer folded as far as it goes" };
    Err(HwError::DoesNotFit {
        part: request.part.name.to_string(),
        detail: format!("{folded}, it needs {}", need.overuse(request.part.available).join(" and ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_go_to_the_largest_divisor_within_the_target() {
        let cases = [(16, 1, 1), (16, 3, 2), (16, 5, 4), (16, 100, 16), (784, 20, 16), (784, 49, 49), (10, 7, 5), (7, 6, 1)];
        for (n, t, want) in cases {
            assert_eq!(fold_within(n, t), want, "{n} inputs within {t}");
        }
    }

    #[test]
    fn overuse_names_each_resource_and_by_how_much() {
        let part = crate::ecp5::part("85f").unwrap();
        let need = Need { dsps: 1054, luts: 90_000 };
        assert!(!need.fits(part.available));
        assert_eq!(need.overuse(part.available), ["1054 DSPs of 156 (898 over)", "about 90000 LUT4s of 83640 (6360 over)"]);
        assert!(Need { dsps: 156, luts: 83_640 }.fits(part.available));
    }
}

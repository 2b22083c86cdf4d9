//! Fitting a design to a part (`ch emit --part`): the reuse factor of every layer the user left
//! free, and whether its products are multipliers or shift-adds in LUTs, chosen so that the
//! design's DSPs and LUTs fit the part at the smallest initiation interval (doc/hardware.md,
//! "Fitting a part"). "Fit" means within a share of the part's DSPs and of its LUTs, the
//! [`Fill`] (three quarters unless told another): fuller designs route slower or not at all.
//!
//! For a target initiation interval `t`, each free layer is folded as far as `t` allows (its
//! largest reuse factor that divides its inputs and is at most `t`): folding further would not
//! lower the interval, and every fold takes multipliers away. When the design is pipelined,
//! free linear layers may get shift-add products instead of multipliers, at the same reuse
//! factor ([`crate::shift_add`]: LUTs and no DSP): among the sets of such layers (none
//! included), the one that fits using the least of the part (the larger of the DSPs' and the
//! LUTs' share), as a part full of either routes slower. The targets are tried in
//! increasing order, and the first design whose estimate fits is the answer, so no design of a
//! smaller interval fits by the cost model. The DSPs are the cost model's (exact for
//! instantiated multipliers); the LUTs are its placed LUT4 figure ([`placed_lut4`]).

use crate::cost::{estimate, estimate_pipelined_layer, DesignCost};
use crate::design::{Design, Layer};
use crate::ecp5::{Ecp5Part, Resources};
use crate::error::{HwError, Result};
use std::fmt::Write;

/// ECP5 LUT4s (nextpnr's `TRELLIS_COMB` after Yosys `synth_ecp5`) per LUT6 of the cost model,
/// for a design or layer without the model's LUT4 figure (not pipelined with instantiated
/// multipliers): the largest ratio measured on the designs of more than 2,000 LUT4s that
/// `--part`, `--shift-add` and `--multipliers ecp5-dsp` made before the LUT4 model, so that
/// the estimate is at or above each of them (jsc-three-layer at 8 bits fitted to the 45F 2.01
/// and 1.97, at 6 bits fitted to the 85F 1.21; jsc-toy at 6 bits 1.57 and 1.82).
pub const LUT4_PER_ESTIMATED_LUT: f64 = 2.01;

/// Placed LUT4s (nextpnr-ecp5's `TRELLIS_COMB`) per LUT4 of Yosys's netlist (a `LUT4`, or
/// two per carry cell `CCU2C`): placement adds cells to start and split carry chains. The
/// largest ratio measured on the designs of the README's ECP5 tables, so that a placed
/// estimate is at or above each: jsc-toy with shift-add products 1.35, jsc-tiny unrolled
/// 1.33, folded by 4 1.20, jsc-three-layer at 6 bits fitted to the 85F 1.24, at 8 bits to
/// the 45F 1.13.
pub const PLACED_PER_SYNTHESIZED_LUT4: f64 = 1.35;

/// The LUT4s an estimate says placement uses: the LUT4 model's figure times
/// [`PLACED_PER_SYNTHESIZED_LUT4`] when it has one, else its LUT6 figure times
/// [`LUT4_PER_ESTIMATED_LUT`].
pub fn placed_lut4(lut4: Option<f64>, luts: f64) -> f64 {
    lut4.map_or(luts * LUT4_PER_ESTIMATED_LUT, |n| n * PLACED_PER_SYNTHESIZED_LUT4)
}

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
        Need::from_estimate(e.dsps, placed_lut4(e.lut4, e.luts))
    }

    /// The need of an estimate of `dsps` DSPs and `luts` placed LUT4s.
    pub fn from_estimate(dsps: f64, luts: f64) -> Need {
        Need { dsps: dsps.round().max(0.0) as u64, luts: luts.round().max(0.0) as u64 }
    }

    /// The larger of the shares of the part's DSPs and LUTs it needs, in thousandths (rounded
    /// up).
    pub fn utilization(&self, available: Resources) -> u64 {
        let share = |n: u64, of: u64| if of == 0 { u64::MAX } else { (n * 1000).div_ceil(of) };
        share(self.dsps, available.dsps).max(share(self.luts, available.luts))
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

/// A design fitted to a part: the design, the reuse factor chosen for each free layer, the
/// layers given shift-add products, what it needs of the part, and the fill it was fitted in.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub design: Design,
    pub reuse: Vec<(String, usize)>,
    pub shift_add: Vec<String>,
    pub need: Need,
    /// The share of the part the design was fitted within.
    pub fill: Fill,
}

/// Free layers among which [`shift_add_choice`] chooses: at most this many (those saving the
/// most DSPs), so that every set of them can be tried.
pub const MAX_SHIFT_ADD_CANDIDATES: usize = 16;

/// A free linear layer that could take shift-add products: its index in the design's layers,
/// and the DSPs and placed LUT4s ([`placed_lut4`]) the cost model says it saves with them
/// (negative LUTs: it costs LUTs).
#[derive(Clone, Debug)]
struct Candidate {
    index: usize,
    dsps_saved: f64,
    luts_saved: f64,
}

/// What the design of estimate `e` needs with the layers of `chosen` given shift-add products.
fn need_with(e: &DesignCost, chosen: &[&Candidate]) -> Need {
    let dsps = e.dsps - chosen.iter().map(|c| c.dsps_saved).sum::<f64>();
    let luts = placed_lut4(e.lut4, e.luts) - chosen.iter().map(|c| c.luts_saved).sum::<f64>();
    Need::from_estimate(dsps, luts)
}

/// The set of `candidates` (those that save DSPs, at most [`MAX_SHIFT_ADD_CANDIDATES`] saving
/// the most; the empty set included) whose layers, given shift-add products, make the design of
/// estimate `e` fit `available` using the least of the part (the larger of the DSPs' and the
/// LUTs' share, [`Need::utilization`]), then the fewest DSPs, the fewest LUTs and the fewest
/// layers, as indices into the design's layers; `None` when no set does. Placed and routed on
/// an ECP5, a design full of DSPs spreads its products over the part's few DSP rows and the
/// routes to and from them bound the clock (jsc-toy fitted to the 85F: 207.1 MHz with every
/// product in LUTs, 139.3 MHz with 93 of them in DSPs), and one full of LUTs is congested:
/// neither resource is filled while the other has room (doc/hardware.md, "Fitting a part").
fn shift_add_choice(e: &DesignCost, candidates: &[Candidate], available: Resources) -> Option<Vec<usize>> {
    let mut saving: Vec<&Candidate> = candidates.iter().filter(|c| c.dsps_saved > 0.0).collect();
    saving.sort_by(|a, b| b.dsps_saved.total_cmp(&a.dsps_saved).then(a.index.cmp(&b.index)));
    saving.truncate(MAX_SHIFT_ADD_CANDIDATES);
    let mut best: Option<((u64, u64, u64, usize), Vec<usize>)> = None;
    for set in 0u32..(1u32 << saving.len()) {
        let chosen: Vec<&Candidate> = saving.iter().enumerate().filter(|(b, _)| set >> b & 1 == 1).map(|(_, c)| *c).collect();
        let need = need_with(e, &chosen);
        let key = (need.utilization(available), need.dsps, need.luts, chosen.len());
        if need.fits(available) && best.as_ref().is_none_or(|(k, _)| key < *k) {
            let mut ids: Vec<usize> = chosen.iter().map(|c| c.index).collect();
            ids.sort_unstable();
            best = Some((key, ids));
        }
    }
    best.map(|(_, ids)| ids)
}

/// What to fit: the part, the share of its DSPs and of its LUTs the design may use
/// (`ch emit --fill`), and the layers whose reuse factor is given (`--reuse-layer`, a node's
/// `hardware.reuse_factor`), which the fit leaves as they are.
#[derive(Clone, Debug)]
pub struct FitRequest<'a> {
    pub part: Ecp5Part,
    pub fill: Fill,
    pub fixed: &'a [String],
}

/// The largest share of a part's DSPs and of its LUTs a fitted design may use, in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill(u32);

/// The fill a design is fitted to unless told another: three quarters of the part. Placed and
/// routed on the 85F and the 45F (nextpnr-ecp5 0.11), designs using more routed slower or not
/// at all: jsc-three-layer at 6 bits with 128 of 156 DSPs (82 %) did not finish routing in 80
/// minutes, the 8-bit 45F fits with 69 of 72 DSPs (96 %) routed at 90.6 and 112.1 MHz, and
/// jsc-toy with 109 of 156 DSPs (70 %) at 139.3 MHz against 207.1 with 16 (doc/hardware.md,
/// "Fitting a part").
pub const DEFAULT_FILL: Fill = Fill(75);

impl Default for Fill {
    fn default() -> Fill {
        DEFAULT_FILL
    }
}

impl Fill {
    /// A fill of `percent` percent: 1 to 100.
    pub fn percent(percent: u32) -> std::result::Result<Fill, String> {
        if (1..=100).contains(&percent) {
            Ok(Fill(percent))
        } else {
            Err(format!("expected a share of the part in percent, 1 to 100, not {percent}"))
        }
    }

    pub fn as_percent(self) -> u32 {
        self.0
    }

    /// What a design may use of `available`: this share of its DSPs and of its LUTs (rounded
    /// down).
    pub fn of(self, available: Resources) -> Resources {
        let share = |n: u64| n * self.0 as u64 / 100;
        Resources { dsps: share(available.dsps), luts: share(available.luts), ..available }
    }
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
/// A design that does not fit even with every free layer folded as far as it goes (or given
/// shift-add products) is an error saying by how much.
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
    let limit = request.fill.of(request.part.available);
    let (mut last, mut all_shift_add) = (None, None);
    for t in targets {
        let reuse: Vec<(String, usize)> = free.iter().map(|(node, n)| (node.clone(), fold_within(*n, t))).collect();
        let design = if t == 1 { unrolled.clone() } else { build(&reuse)? };
        let e = estimate(&design);
        let need = Need::from_estimate(e.dsps, placed_lut4(e.lut4, e.luts));
        let candidates = shift_add_candidates(&design, &e, request.fixed);
        if need.dsps > limit.dsps {
            all_shift_add = (!candidates.is_empty()).then(|| need_with(&e, &candidates.iter().collect::<Vec<_>>()));
        }
        match shift_add_choice(&e, &candidates, limit) {
            Some(chosen) if chosen.is_empty() => return Ok(Fitted { design, reuse, shift_add: Vec::new(), need, fill: request.fill }),
            Some(chosen) => {
                let nodes: Vec<String> = chosen.iter().map(|&i| design.layers[i].node.clone()).collect();
                let shifted = design.clone().with_shift_add(&nodes)?;
                let shifted_need = Need::of(&shifted);
                if shifted_need.fits(limit) {
                    return Ok(Fitted { design: shifted, reuse, shift_add: nodes, need: shifted_need, fill: request.fill });
                }
                // The layers' estimates said it fits and the whole design's does not: the
                // design without shift-adds, when that fits.
                if need.fits(limit) {
                    return Ok(Fitted { design, reuse, shift_add: Vec::new(), need, fill: request.fill });
                }
            }
            None => {}
        }
        last = Some(need);
    }
    let need = last.unwrap_or_else(|| Need::of(&unrolled));
    let folded = if free.is_empty() { "with the reuse factors given" } else { "with every free layer folded as far as it goes" };
    let mut detail = format!("{folded}, it needs {}", need.overuse(limit).join(" and "));
    if let Some(n) = all_shift_add.filter(|n: &Need| !n.fits(limit)) {
        let _ = write!(detail, "; with shift-add products in every free layer, {}", n.overuse(limit).join(" and "));
    }
    let all = request.part.available;
    if request.fill.as_percent() < 100 {
        let _ = write!(
            detail,
            " (the limits are {} % of the part's {} DSPs and {} LUT4s, `--fill`)",
            request.fill.as_percent(),
            all.dsps,
            all.luts
        );
    }
    Err(HwError::DoesNotFit { part: request.part.name.to_string(), detail })
}

/// The free linear layers of `design` (pipelined; none otherwise) with what shift-add
/// products at their reuse factor save against `e`, the design's estimate.
fn shift_add_candidates(design: &Design, e: &DesignCost, fixed: &[String]) -> Vec<Candidate> {
    design
        .layers
        .iter()
        .enumerate()
        .filter(|(_, l)| !fixed.contains(&l.node) && !l.is_popcount())
        .filter_map(|(index, l)| design.layer_pipelining(index).map(|pipe| (index, l, pipe)))
        .map(|(index, l, pipe)| {
            let mut l = l.clone();
            l.products = crate::Products::ShiftAdd;
            let c = estimate_pipelined_layer(&l, &pipe);
            // On the design's basis: the LUT4 model where the whole design has it.
            let placed = |c: &crate::cost::LayerCost| placed_lut4(e.lut4.and(c.lut4), c.luts);
            Candidate { index, dsps_saved: e.layers[index].dsps - c.dsps, luts_saved: placed(&e.layers[index]) - placed(&c) }
        })
        .collect()
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
    fn a_fill_is_a_percentage_of_each_resource_rounded_down() {
        let part = crate::ecp5::part("45f").unwrap();
        let cases = [(100, Some((72, 43_848))), (75, Some((54, 32_886))), (1, Some((0, 438))), (0, None), (101, None)];
        for (percent, want) in cases {
            let got = Fill::percent(percent).map(|f| f.of(part.available)).map(|r| (r.dsps, r.luts));
            assert_eq!(got.ok(), want, "{percent} %");
        }
        assert_eq!(Fill::percent(0).unwrap_err(), "expected a share of the part in percent, 1 to 100, not 0");
        assert_eq!(Fill::default(), DEFAULT_FILL);
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

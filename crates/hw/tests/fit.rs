//! Fitting a design to an ECP5 part (`ch emit --part`): the smallest initiation interval whose
//! estimate fits, with multipliers or shift-add products per layer, and a one-line refusal
//! saying by how much when nothing does.

mod common;

use common::quantized;
use mase_hw::ecp5::{part, Ecp5Part};
use mase_hw::fit::{fit, product_layers, Fill, FitRequest, Need};
use mase_hw::{lower, Design, LowerOptions, Multipliers, Products};

/// jsc-three-layer (16 -> 64 -> 32 -> 32 -> 5) with seeded 6-bit weights, pipelined for 200 MHz
/// with every product in a MULT18X18D, the layers of `fixed` and `free` at their reuse factors.
fn jsc_three_layer(fixed: &[(String, usize)], free: &[(String, usize)]) -> mase_hw::Result<Design> {
    let (g, p) = quantized("jsc-three-layer", 6, Some(6));
    let opts = LowerOptions { reuse: fixed.iter().chain(free).cloned().collect(), default_reuse: 1, input_shape: None };
    lower(&g, &p, "jsc-three-layer", &opts)?.pipelined(200.0)?.with_multipliers(Multipliers::Ecp5Dsp)
}

fn nodes() -> Vec<(String, usize)> {
    let d = jsc_three_layer(&[], &[]).unwrap();
    product_layers(&d).iter().map(|l| (l.node.clone(), l.in_features)).collect()
}

/// The reuse factors of the free layers for a target interval `t`, computed here from the
/// layers' inputs, all powers of two: the largest divisor within `t` is the largest power of
/// two within `min(t, inputs)`.
fn folded_within(t: usize, free: &[(String, usize)]) -> Vec<(String, usize)> {
    let pow2_within = |n: usize| 1 << (usize::BITS - 1 - n.leading_zeros());
    free.iter().map(|(n, k)| (n.clone(), pow2_within(t.min(*k)))).collect()
}

fn ecp5(name: &str) -> Ecp5Part {
    part(name).unwrap()
}

/// Every set of the layers `free`, as lists of their nodes.
fn subsets(free: &[(String, usize)]) -> Vec<Vec<String>> {
    (0u32..1 << free.len())
        .map(|set| free.iter().enumerate().filter(|(b, _)| set >> b & 1 == 1).map(|(_, (n, _))| n.clone()).collect())
        .collect()
}

#[test]
fn each_part_gets_the_smallest_interval_whose_estimate_fits() {
    let layers = nodes();
    assert_eq!(layers.iter().map(|(_, k)| *k).collect::<Vec<_>>(), [16, 64, 32, 32]);
    // The oracle: every interval from 1 to 64 (the designs change at powers of two: every
    // layer's inputs are one) tried in turn, each layer folded within it, with every set of
    // layers given shift-add products; the first interval at which some set fits, and of the
    // sets that fit there the one using the least of the part (the larger of its DSP and LUT
    // shares), then the fewest DSPs and LUTs.
    let smallest_fitting = |p: Ecp5Part, fill: Fill| {
        let limit = fill.of(p.available);
        [1, 2, 4, 8, 16, 32, 64].into_iter().find_map(|t| {
            let d = jsc_three_layer(&[], &folded_within(t, &layers)).unwrap();
            let fitting: Vec<Need> =
                subsets(&layers).iter().map(|set| Need::of(&d.clone().with_shift_add(set).unwrap())).filter(|n| n.fits(limit)).collect();
            fitting.iter().map(|n| (n.utilization(limit), n.dsps, n.luts)).min().map(|k| (t, k))
        })
    };
    // Folded to one multiplier per output (64 + 32 + 32 + 5 = 133) the products fit the 85F's
    // 156 DSPs but not the 45F's 72 or the 25F's 28; shift-add products in some layers lower
    // the interval and make the others fit (with the LUT4 model, the whole design unrolled in
    // shift-adds fits the 85F and all of the 45F). One line per part and fill (percent): the
    // interval.
    for (name, fill, want) in [("85f", 100, 1), ("85f", 75, 1), ("45f", 100, 1), ("45f", 75, 4), ("25f", 100, 8), ("25f", 75, 16)] {
        let (p, fill) = (ecp5(name), Fill::percent(fill).unwrap());
        let limit = fill.of(p.available);
        let label = format!("{name} at {} %", fill.as_percent());
        let got = fit(&FitRequest { part: p, fill, fixed: &[] }, |free| jsc_three_layer(&[], free)).unwrap();
        let ii = got.design.initiation_interval();
        assert_eq!(ii, want, "{label}");
        let key = (got.need.utilization(limit), got.need.dsps, got.need.luts);
        assert_eq!(Some((ii, key)), smallest_fitting(p, fill), "{label}");
        assert!(got.need.fits(limit), "{label}: {:?}", got.need);
        assert_eq!(got.need, Need::of(&got.design), "{label}");
        assert_eq!(got.reuse, folded_within(ii, &layers), "{label}: every layer folded as far as the interval allows");
        let shift_add: Vec<&str> = got.design.layers.iter().filter(|l| l.products == Products::ShiftAdd).map(|l| l.node.as_str()).collect();
        assert_eq!(shift_add, got.shift_add, "{label}");
    }
    // Without shift-add products, the 85F's interval is the one where the multipliers fit.
    let multipliers_only =
        (1..=64).find(|&t| Need::of(&jsc_three_layer(&[], &folded_within(t, &layers)).unwrap()).fits(ecp5("85f").available));
    let got =
        fit(&FitRequest { part: ecp5("85f"), fill: Fill::percent(100).unwrap(), fixed: &[] }, |free| jsc_three_layer(&[], free)).unwrap();
    assert!(Some(got.design.initiation_interval()) < multipliers_only, "{multipliers_only:?}");
}

#[test]
fn fixed_layers_keep_their_reuse_factor_and_a_design_too_large_is_refused_by_how_much() {
    let layers = nodes();
    // The 64 -> 32 layer fixed at 8: its 256-odd products are more than the 85F's 156 DSPs.
    let fixed = vec![(layers[1].0.clone(), 8)];
    let names: Vec<String> = fixed.iter().map(|(n, _)| n.clone()).collect();
    let p = ecp5("85f");
    let err = fit(&FitRequest { part: p, fill: Fill::percent(100).unwrap(), fixed: &names }, |free| jsc_three_layer(&fixed, free))
        .unwrap_err()
        .to_string();
    let free: Vec<(String, usize)> = layers.iter().filter(|(n, _)| *n != layers[1].0).map(|(n, k)| (n.clone(), *k)).collect();
    let need = Need::of(&jsc_three_layer(&fixed, &free).unwrap());
    let free_nodes: Vec<String> = free.iter().map(|(n, _)| n.clone()).collect();
    let shift_add = Need::of(&jsc_three_layer(&fixed, &free).unwrap().with_shift_add(&free_nodes).unwrap());
    assert_eq!(
        err,
        format!(
            "the design does not fit the LFE5U-85F: with every free layer folded as far as it goes, it needs {} DSPs of 156 ({} over); with shift-add products in every free layer, {}",
            need.dsps,
            need.dsps - 156,
            shift_add.overuse(p.available).join(" and ")
        )
    );
    // Within three quarters of the part (the default fill), the limits are 117 DSPs and 62,730
    // LUT4s, and the message says so.
    let fill = Fill::percent(75).unwrap();
    let limit = fill.of(p.available);
    assert_eq!((limit.dsps, limit.luts), (117, 62_730));
    let err = fit(&FitRequest { part: p, fill, fixed: &names }, |free| jsc_three_layer(&fixed, free)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "the design does not fit the LFE5U-85F: with every free layer folded as far as it goes, it needs {} DSPs of 117 ({} over); with shift-add products in every free layer, {} (the limits are 75 % of the part's 156 DSPs and 83640 LUT4s, `--fill`)",
            need.dsps,
            need.dsps - 117,
            shift_add.overuse(limit).join(" and ")
        )
    );
    // Fixed at 64 (one multiplier per output), it fits: the fixed layer as given, the others
    // chosen.
    let fixed = vec![(layers[1].0.clone(), 64)];
    let got = fit(&FitRequest { part: p, fill: Fill::percent(100).unwrap(), fixed: &names }, |free| jsc_three_layer(&fixed, free)).unwrap();
    let fixed_layer = got.design.layers.iter().find(|l| l.node == layers[1].0).unwrap();
    assert_eq!(fixed_layer.reuse, 64);
    assert!(got.reuse.iter().all(|(n, _)| *n != layers[1].0));
}

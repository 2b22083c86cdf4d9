//! Checks of a design read back from `design.json`: every size, width and constant within what
//! the lowering produces, so that a damaged or hand-edited file is refused with one line naming
//! the layer and field instead of making [`Design::eval`] index out of bounds or overflow.

use crate::conv::Stage;
use crate::design::{Design, Layer, Range, Step};

/// The widest fixed-point format the lowering writes (`mase-quant` allows 32 bits).
const MAX_WIDTH: u32 = 32;
/// Fraction bits of a format (`mase-quant` allows -64 to 64).
const MAX_FORMAT_FRAC: i32 = 64;
/// Fraction bits of an accumulator or affine (the sum of two formats').
const MAX_SUM_FRAC: i32 = 2 * MAX_FORMAT_FRAC;
/// Weights per layer: far above the zoo's largest layer (vgg7's 8192 x 1024 would not be
/// lowered anyway), low enough that a corrupt size cannot ask for the memory of the machine.
const MAX_WEIGHTS: usize = 1 << 26;
/// Codes of an image or of a window of a streaming stage: far above a 224x224x3 image or a
/// 3x3x512 window, low enough that a corrupt size cannot make evaluating or scheduling one
/// sample take hours.
const MAX_PIXEL_CODES: usize = 1 << 20;

/// Why the design cannot be what `ch emit` wrote, or `Ok`.
pub fn check_design(d: &Design) -> Result<(), String> {
    let (width, frac, _) = d.input_format;
    check_format("input_format", width, frac)?;
    if d.layers.is_empty() {
        return Err("it has no layer".into());
    }
    if let Some(f) = d.clock_mhz {
        crate::pipeline::check_clock(f)?;
    }
    if let Some(p) = &d.part {
        if crate::ecp5::part(p).is_none() {
            return Err(format!("part `{p}`: expected LFE5U-25F, LFE5U-45F or LFE5U-85F"));
        }
    }
    // The stream arriving at each stage and layer: the input format's codes, then the output of
    // the one before.
    let mut arriving = (d.input_range(), None);
    let mut image: Option<[usize; 3]> = None;
    for (i, s) in d.stages.iter().enumerate() {
        let at = format!("stage {i} (`{}`)", s.node());
        check_stage(s, arriving.0, image).map_err(|reason| format!("{at}: {reason}"))?;
        let [oh, ow] = s.window().out_hw();
        image = Some([s.out_channels(), oh, ow]);
        arriving = (s.output(), Some(s.out_len()));
    }
    for (i, l) in d.layers.iter().enumerate() {
        let at = format!("layer {i} (`{}`)", l.node);
        if let (_, Some(prev)) = arriving {
            if prev != l.in_features {
                return Err(format!("{at}: in_features {} differs from the {prev} outputs of the layer before", l.in_features));
            }
        }
        if l.input != arriving.0 {
            let r = arriving.0;
            return Err(format!("{at}: its input range differs from the stream's [{}, {}] with {} fraction bits", r.lo, r.hi, r.frac));
        }
        check_layer(l).map_err(|reason| format!("{at}: {reason}"))?;
        crate::shift_add::check_products(l, d.clock_mhz).map_err(|reason| format!("{at}: {reason}"))?;
        arriving = (l.output(), Some(l.out_features));
    }
    Ok(())
}

/// A stage reads the stream before it (its range and image) through a window that fits it.
fn check_stage(s: &Stage, arriving: Range, image: Option<[usize; 3]>) -> Result<(), String> {
    let w = s.window();
    let fits = |n: usize, k: usize, p: usize| k >= 1 && p <= k / 2 && k <= n.saturating_add(2 * p);
    let size = w.channels.checked_mul(w.height).and_then(|n| n.checked_mul(w.width));
    let window = w.kernel[0].checked_mul(w.kernel[1]).and_then(|n| n.checked_mul(w.channels));
    if !size.is_some_and(|n| (1..=MAX_PIXEL_CODES).contains(&n))
        || window.is_none_or(|n| n > MAX_PIXEL_CODES)
        || !fits(w.height, w.kernel[0], w.padding[0])
        || !fits(w.width, w.kernel[1], w.padding[1])
        || w.stride.contains(&0)
    {
        return Err(format!("window {w:?} is not one the lowering writes"));
    }
    if let Some(img) = image {
        if img != [w.channels, w.height, w.width] {
            return Err(format!("its image {:?} differs from the {img:?} of the stage before", [w.channels, w.height, w.width]));
        }
    }
    if s.input() != arriving {
        return Err(format!(
            "its input range differs from the stream's [{}, {}] with {} fraction bits",
            arriving.lo, arriving.hi, arriving.frac
        ));
    }
    check_range("input", s.input(), MAX_SUM_FRAC)?;
    match s {
        Stage::Conv(c) => {
            for (k, st) in c.pre.iter().enumerate() {
                check_step(st).map_err(|reason| format!("pre step {k} ({}): {reason}", st.name()))?;
            }
            if c.mvu.in_features != w.window_len()
                || c.mvu.input != s.buffered()
                || !c.mvu.pre.is_empty()
                || !c.mvu.products.is_multipliers()
            {
                return Err("its matrix-vector unit does not read its windows".into());
            }
            check_layer(&c.mvu)
        }
        Stage::MaxPool(p) => p
            .post
            .iter()
            .enumerate()
            .try_for_each(|(k, st)| check_step(st).map_err(|reason| format!("post step {k} ({}): {reason}", st.name()))),
    }
}

fn check_layer(l: &Layer) -> Result<(), String> {
    if l.in_features == 0 || l.out_features == 0 {
        return Err(format!("in_features {} and out_features {} must be at least 1", l.in_features, l.out_features));
    }
    let n = l.in_features.checked_mul(l.out_features).filter(|&n| n <= MAX_WEIGHTS);
    if n != Some(l.weight.len()) {
        return Err(format!("{} weights for {} x {} features", l.weight.len(), l.out_features, l.in_features));
    }
    if l.bias.len() != l.out_features {
        return Err(format!("{} biases for {} outputs", l.bias.len(), l.out_features));
    }
    // `%` rather than `is_multiple_of`, which needs a newer compiler than the workspace's minimum.
    #[allow(clippy::manual_is_multiple_of)]
    let divides = l.reuse != 0 && l.in_features % l.reuse == 0;
    if !divides {
        return Err(format!("reuse factor {}: expected a positive divisor of its {} inputs", l.reuse, l.in_features));
    }
    check_range("input", l.input, MAX_SUM_FRAC)?;
    check_range("acc", l.acc, MAX_SUM_FRAC)?;
    for (part, steps) in [("pre", &l.pre), ("post", &l.post)] {
        for (k, s) in steps.iter().enumerate() {
            check_step(s).map_err(|reason| format!("{part} step {k} ({}): {reason}", s.name()))?;
        }
    }
    // Every sum of the product, over the whole range of its inputs, must fit the 64 bits that
    // `Design::eval` (and the RTL's widest accumulator) computes in.
    let x = l.product_input();
    let biggest = (x.lo as i128).abs().max((x.hi as i128).abs());
    for (j, row) in l.weight.chunks(l.in_features).enumerate() {
        let sum = row.iter().fold(l.bias[j].unsigned_abs() as i128, |s, &w| s.saturating_add(w.unsigned_abs() as i128 * biggest));
        if sum > i64::MAX as i128 {
            return Err(format!("the sums of output {j} need more than 64 bits"));
        }
    }
    Ok(())
}

fn check_format(what: &str, width: u32, frac: i32) -> Result<(), String> {
    if !(1..=MAX_WIDTH).contains(&width) || frac.abs() > MAX_FORMAT_FRAC {
        return Err(format!(
            "{what}: width {width} and frac_width {frac} must lie in 1..={MAX_WIDTH} and -{MAX_FORMAT_FRAC}..={MAX_FORMAT_FRAC}"
        ));
    }
    Ok(())
}

fn check_range(what: &str, r: Range, max_frac: i32) -> Result<(), String> {
    if r.lo > r.hi || r.frac.abs() > max_frac {
        return Err(format!("{what} range [{}, {}] with {} fraction bits is not a range the lowering writes", r.lo, r.hi, r.frac));
    }
    Ok(())
}

fn check_step(s: &Step) -> Result<(), String> {
    match s {
        Step::Requant { width, frac_width, .. } => check_format("format", *width, *frac_width),
        Step::Relu => Ok(()),
        Step::Affine { mul, add, frac } => {
            if mul.is_empty() || mul.len() != add.len() {
                return Err(format!("{} multipliers and {} addends (one of each per channel)", mul.len(), add.len()));
            }
            if frac.abs() > MAX_SUM_FRAC {
                return Err(format!("{frac} fraction bits (at most {MAX_SUM_FRAC})"));
            }
            Ok(())
        }
        Step::Threshold { at, descending } => {
            if at.is_empty() || at.len() != descending.len() {
                return Err(format!("{} thresholds and {} directions (one of each per channel)", at.len(), descending.len()));
            }
            Ok(())
        }
    }
}

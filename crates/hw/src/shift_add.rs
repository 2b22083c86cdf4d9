//! Products in the fabric, with no multiplier (`Products::ShiftAdd`; doc/hardware.md,
//! "Fitting a part").
//!
//! Unrolled, a weight is a constant. It is written in canonical signed digits (the
//! non-adjacent form: digits `-1, 0, 1`, no two adjacent digits nonzero),
//! `w = sum_i d_i 2^(s_i)`, which has the fewest nonzero digits of any signed-digit form: at
//! most one more than half the bits of `|w|`. The product `x w` is then `sum_i d_i (x << s_i)`.
//!
//! Folded, the weight of a lane changes every cycle, so the product is an array multiplier:
//! one term per bit of the weight's register, `x << i` when bit `i` is set (negated for the
//! sign bit, two's complement).
//!
//! Either way each term is registered in the product stage (a shift is wiring; a negation or
//! the bit's select is one level of logic) and enters the output's adder tree in place of the
//! product, and that tree is pipelined to the clock as it is for multipliers: a shift-add
//! layer meets the same clock with no DSP.

use serde::{Deserialize, Serialize};

/// How a layer builds the products of its inputs by its weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Products {
    /// Multipliers, built as the design's `multipliers` say (`ch emit --multipliers`).
    #[default]
    Multipliers,
    /// Shifts and adds in LUTs, no DSP: the signed digits of every constant weight ([`digits`])
    /// unrolled, an array multiplier per lane folded. Only in a pipelined design.
    ShiftAdd,
}

impl Products {
    /// The value as `manifest.json` and the fit's report name it.
    pub fn name(self) -> &'static str {
        match self {
            Products::Multipliers => "multipliers",
            Products::ShiftAdd => "shift-add",
        }
    }

    /// Whether these are the default, which `design.json` leaves out.
    pub fn is_multipliers(&self) -> bool {
        *self == Products::Multipliers
    }
}

/// Why `layer` cannot have its products (in a design pipelined for `clock_mhz`, if any), or
/// `Ok`: shift-add products are built by the pipelined RTL only.
pub fn check_products(layer: &crate::Layer, clock_mhz: Option<f64>) -> Result<(), String> {
    match layer.products {
        Products::Multipliers => Ok(()),
        Products::ShiftAdd if clock_mhz.is_none() => Err("shift-add products need a pipelined design (a clock_mhz)".into()),
        Products::ShiftAdd if layer.is_popcount() => Err("a binarized layer has no products to build as shift-adds".into()),
        Products::ShiftAdd => Ok(()),
    }
}

/// One signed digit of a weight: `x w` has the term `x << shift`, negated when `negative`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Digit {
    pub shift: u32,
    pub negative: bool,
}

impl Digit {
    /// The digit's value, `±2^shift`.
    pub fn value(self) -> i128 {
        let v = 1i128 << self.shift;
        if self.negative {
            -v
        } else {
            v
        }
    }
}

/// The nonzero canonical signed digits of `w`, lowest first (none for 0).
pub fn digits(w: i64) -> Vec<Digit> {
    let mut v = (w as i128).abs();
    let mut out = Vec::new();
    let mut shift = 0;
    while v != 0 {
        if v & 1 == 1 {
            // 1 when v is 1 mod 4, -1 when 3 mod 4: the digit above is then 0.
            let d = 2 - (v & 3);
            out.push(Digit { shift, negative: (d < 0) != (w < 0) });
            v -= d;
        }
        v >>= 1;
        shift += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled(w: i64) -> String {
        digits(w).iter().rev().map(|d| format!("{}{}", if d.negative { "-" } else { "+" }, d.shift)).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn digits_are_the_non_adjacent_form() {
        let cases = [
            (0, ""),
            (1, "+0"),
            (-1, "-0"),
            (3, "+2 -0"),
            (7, "+3 -0"),
            (-7, "-3 +0"),
            (5, "+2 +0"),
            (6, "+3 -1"),
            (11, "+4 -2 -0"),
            (-128, "-7"),
            (127, "+7 -0"),
            (85, "+6 +4 +2 +0"),
        ];
        for (w, want) in cases {
            assert_eq!(spelled(w), want, "{w}");
        }
    }

    #[test]
    fn digits_sum_to_the_weight_and_are_never_adjacent() {
        for w in -4096i64..=4096 {
            let d = digits(w);
            assert_eq!(d.iter().map(|d| d.value()).sum::<i128>(), w as i128, "{w}");
            assert!(d.windows(2).all(|p| p[1].shift > p[0].shift + 1), "{w}: {d:?}");
            // At most one more than half the bits of |w|.
            let bits = 64 - w.unsigned_abs().leading_zeros();
            assert!(d.len() as u32 <= bits / 2 + 1, "{w}: {} digits", d.len());
        }
    }
}

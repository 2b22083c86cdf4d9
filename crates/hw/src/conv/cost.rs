//! The cost model of the streaming stages: a convolution's matrix-vector unit is a layer of the
//! layer model ([`crate::cost::estimate_layer`]); the window generator, the max pool's
//! comparators and the collector are counted from the RTL's registers and multiplexers, by the
//! rules below, not fitted (doc/hardware.md, "Cost model").

use super::{Stage, Window};
use crate::cost::{estimate_layer, estimate_pipelined_layer, LayerCost};
use crate::design::{Design, Range};
use serde::Serialize;

/// The estimate of one stage (and, for the collector, `node` = `flatten`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageCost {
    pub node: String,
    pub luts: f64,
    pub ffs: f64,
    pub dsps: f64,
    /// The line buffer's, window register's and counters' bits (the collector's shift registers).
    pub register_bits: usize,
    /// A convolution's matrix-vector unit, by the layer model.
    pub mvu: Option<LayerCost>,
}

/// Bits of an unsigned counter holding `0..=n`.
fn ubits(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()).max(1) as usize
}

/// LUT6s of an `n`-to-1 multiplexer of one bit: a LUT6 selects among 4 inputs, so a tree of
/// them takes `(n - 1) / 3` (rounded up).
fn mux_luts(n: usize) -> usize {
    n.saturating_sub(1).div_ceil(3)
}

/// The window generator: its line buffer (`(KH + 1) W C` codes) and window register as flip-flops,
/// its counters; each code of a window read through a multiplexer over the buffer's `KH W`
/// pixels and the padding, each buffered code written through an enable (one LUT per pixel
/// for the write address's decode).
fn window_cost(w: &Window, buffered: Range) -> (usize, usize) {
    let bw = buffered.width() as usize;
    let [oh, ow] = w.out_hw();
    let pixels = w.buffer_rows() * w.width;
    let counters = ubits(w.height) + ubits(w.width) + ubits(pixels) + ubits(oh) + ubits(ow) + 2;
    let ffs = pixels * w.channels * bw + w.window_len() * bw + counters;
    let luts = w.window_len() * bw * mux_luts(pixels + 1) + pixels + counters;
    (luts, ffs)
}

/// The estimates of a design's stages and of its collector, in stream order.
pub fn estimate_stages(d: &Design) -> Vec<StageCost> {
    let mut out: Vec<StageCost> = d
        .stages
        .iter()
        .map(|s| {
            let (wl, wf) = window_cost(s.window(), s.buffered());
            match s {
                Stage::Conv(c) => {
                    let mvu = match d.pipelining() {
                        Some(p) => estimate_pipelined_layer(&c.mvu, &p),
                        None => estimate_layer(&c.mvu),
                    };
                    StageCost {
                        node: c.mvu.node.clone(),
                        luts: wl as f64 + mvu.luts,
                        ffs: wf as f64 + mvu.ffs,
                        dsps: mvu.dsps,
                        register_bits: wf,
                        mvu: Some(mvu),
                    }
                }
                Stage::MaxPool(p) => {
                    // Per channel, `n - 1` signed comparisons and selections of `bw` bits (a
                    // carry chain and a multiplexer each), and the output register.
                    let bw = p.input.width() as usize;
                    let n = p.window.kernel[0] * p.window.kernel[1];
                    let out_bits = p.window.channels * s.output().width() as usize + 1;
                    let luts = wl + p.window.channels * n.saturating_sub(1) * 2 * bw;
                    StageCost {
                        node: p.node.clone(),
                        luts: luts as f64,
                        ffs: (wf + out_bits) as f64,
                        dsps: 0.0,
                        register_bits: wf + out_bits,
                        mvu: None,
                    }
                }
            }
        })
        .collect();
    if let Some(last) = d.stages.last() {
        // The collector: one shift register per channel (flip-flops with an enable) and its
        // counter.
        let [h, w] = last.window().out_hw();
        let bits = last.out_len() * last.output().width() as usize + ubits(h * w) + 1;
        out.push(StageCost {
            node: "flatten".into(),
            luts: (ubits(h * w) + 2) as f64,
            ffs: bits as f64,
            dsps: 0.0,
            register_bits: bits,
            mvu: None,
        });
    }
    out
}

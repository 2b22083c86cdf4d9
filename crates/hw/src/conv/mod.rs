//! The streaming front end of a convolutional network: `conv2d` and `max_pool2d` nodes as stages
//! on a stream of pixels (doc/hardware.md, "Convolutions").
//!
//! The image arrives one pixel per beat in raster order, the channels of a pixel side by side.
//! Every stage first keeps the rows its windows need in a line buffer and presents one window at
//! a time ([`Window`], the sliding-window generator of hls4ml's `io_stream` and FINN's
//! `ConvolutionInputGenerator`); a convolution then feeds the window to a matrix-vector unit,
//! which is the linear layer of the MLPs ([`Layer`]) with the kernel as its weight matrix, and a
//! max pool takes the largest code of each channel. A collector gathers the last stage's pixels
//! into the flattened vector (PyTorch's `flatten` order, channel-major) that the linear layers
//! after it read.

pub mod cost;
pub mod lower;
pub mod timing;
pub mod verilog;

use crate::design::{apply_steps, Layer, Range, Step};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A stage in the manifest: its node, kind, image geometry, widths and, for a convolution, its
/// matrix-vector unit's inputs, outputs, accumulator and reuse factor.
pub fn stage_json(s: &Stage) -> Value {
    let w = s.window();
    let [oh, ow] = w.out_hw();
    let mut v = json!({
        "node": s.node(),
        "stage": match s { Stage::Conv(_) => "conv2d", Stage::MaxPool(_) => "max_pool2d" },
        "input": [w.channels, w.height, w.width],
        "output": [s.out_channels(), oh, ow],
        "kernel": w.kernel,
        "stride": w.stride,
        "padding": w.padding,
        "input_width": s.input().width(),
        "window_width": s.buffered().width(),
        "line_buffer_bits": w.buffer_rows() * w.width * w.channels * s.buffered().width() as usize,
        "output_width": s.output().width(),
    });
    if let Stage::Conv(c) = s {
        v["window_inputs"] = json!(c.mvu.in_features);
        v["accumulator_width"] = json!(c.mvu.acc.width());
        v["reuse_factor"] = json!(c.mvu.reuse);
        v["multipliers"] = json!(c.mvu.multipliers());
    }
    v
}

/// The geometry of a sliding window over an image of `channels x height x width` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    /// Kernel rows and columns.
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Rows and columns of padding on each side.
    pub padding: [usize; 2],
}

impl Window {
    /// Output rows and columns (PyTorch's floor rule, dilation 1).
    pub fn out_hw(&self) -> [usize; 2] {
        let o = |n: usize, k: usize, s: usize, p: usize| (n + 2 * p).saturating_sub(k) / s.max(1) + 1;
        [o(self.height, self.kernel[0], self.stride[0], self.padding[0]), o(self.width, self.kernel[1], self.stride[1], self.padding[1])]
    }

    /// Codes of one window: element `(ky KW + kx) C + c`.
    pub fn window_len(&self) -> usize {
        self.kernel[0] * self.kernel[1] * self.channels
    }

    /// Beats (pixels) of one image arriving.
    pub fn pixels(&self) -> usize {
        self.height * self.width
    }

    /// The input row of kernel row `ky` for output row `oy`, `None` in the padding.
    pub fn row(&self, oy: usize, ky: usize) -> Option<usize> {
        (oy * self.stride[0] + ky).checked_sub(self.padding[0]).filter(|&r| r < self.height)
    }

    /// The input column of kernel column `kx` for output column `ox`, `None` in the padding.
    pub fn col(&self, ox: usize, kx: usize) -> Option<usize> {
        (ox * self.stride[1] + kx).checked_sub(self.padding[1]).filter(|&c| c < self.width)
    }

    /// Rows the line buffer holds (row `r` in slot `r mod buffer_rows`): the kernel's, and one
    /// more so that the next row arrives while this row's windows go out; every row when the
    /// image has fewer.
    pub fn buffer_rows(&self) -> usize {
        (self.kernel[0] + 1).min(self.height)
    }

    /// The first input row output row `oy` reads (row 0 when it starts in the top padding).
    pub fn first_row(&self, oy: usize) -> usize {
        (oy * self.stride[0]).saturating_sub(self.padding[0]).min(self.height - 1)
    }

    /// While output row `oy` is current, the rows before this one may arrive: row `r` goes to
    /// the slot of row `r - buffer_rows`, which no window of row `oy` or after reads once it is
    /// before [`Window::first_row`]. At most the image's height.
    pub fn row_limit(&self, oy: usize) -> usize {
        (self.first_row(oy) + self.buffer_rows()).min(self.height)
    }

    /// The last input row that output row `oy` reads: the generator presents that row's windows
    /// once the row has arrived.
    pub fn last_row(&self, oy: usize) -> usize {
        (oy * self.stride[0] + self.kernel[0] - 1).saturating_sub(self.padding[0]).min(self.height - 1)
    }

    /// The windows of a `C x H x W` image (channel-major codes), padding filled with `pad`:
    /// `out_h * out_w` rows of [`Window::window_len`] codes, in raster order.
    pub fn windows(&self, x: &[i64], pad: i64) -> Vec<Vec<i64>> {
        let [oh, ow] = self.out_hw();
        let (h, w, c) = (self.height, self.width, self.channels);
        let mut out = Vec::with_capacity(oh * ow);
        for oy in 0..oh {
            for ox in 0..ow {
                let mut win = Vec::with_capacity(self.window_len());
                for ky in 0..self.kernel[0] {
                    for kx in 0..self.kernel[1] {
                        for ch in 0..c {
                            win.push(match (self.row(oy, ky), self.col(ox, kx)) {
                                (Some(r), Some(col)) => x[ch * h * w + r * w + col],
                                _ => pad,
                            });
                        }
                    }
                }
                out.push(win);
            }
        }
        out
    }
}

/// A `conv2d` node: steps on each arriving pixel (the rescale to the convolution's `data_in`, a
/// batch norm before it), the window generator, and the matrix-vector unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvStage {
    pub window: Window,
    /// The range of the arriving pixels' codes.
    pub input: Range,
    /// Steps on each arriving code (element `c`: its channel), before the line buffer, so that
    /// padding holds the code 0 of the convolution's `data_in` format, as in the executor.
    pub pre: Vec<Step>,
    /// The matrix-vector unit: `window_len` inputs, one output per output channel, weights
    /// `[o][(ky KW + kx) C + c]`; its `node` is the convolution's, its `post` the steps after
    /// the sums (element `o`: the output channel). Its reuse factor folds the window's inputs.
    pub mvu: Layer,
}

/// A `max_pool2d` node: the window generator and the largest code of each channel, then steps
/// on each result (element `c`: its channel).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolStage {
    pub node: String,
    pub window: Window,
    pub input: Range,
    pub post: Vec<Step>,
}

/// One stage of the front end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    Conv(ConvStage),
    MaxPool(PoolStage),
}

impl Stage {
    /// The graph node of the stage.
    pub fn node(&self) -> &str {
        match self {
            Stage::Conv(s) => &s.mvu.node,
            Stage::MaxPool(s) => &s.node,
        }
    }

    pub fn window(&self) -> &Window {
        match self {
            Stage::Conv(s) => &s.window,
            Stage::MaxPool(s) => &s.window,
        }
    }

    /// The range of the arriving pixels' codes.
    pub fn input(&self) -> Range {
        match self {
            Stage::Conv(s) => s.input,
            Stage::MaxPool(s) => s.input,
        }
    }

    /// The range of the codes in the line buffer: after the steps on arriving pixels.
    pub fn buffered(&self) -> Range {
        match self {
            Stage::Conv(s) => s.pre.iter().fold(s.input, |r, st| st.range(r)),
            Stage::MaxPool(s) => s.input,
        }
    }

    /// The code that fills the padding: 0 for a convolution (PyTorch's zero padding, in the
    /// `data_in` format), the smallest code for a max pool (PyTorch pads with -inf, and every
    /// window holds at least one pixel of the image).
    pub fn pad_code(&self) -> i64 {
        match self {
            Stage::Conv(_) => 0,
            Stage::MaxPool(s) => s.input.lo,
        }
    }

    /// The range of the leaving pixels' codes.
    pub fn output(&self) -> Range {
        match self {
            Stage::Conv(s) => s.mvu.output(),
            Stage::MaxPool(s) => s.post.iter().fold(s.input, |r, st| st.range(r)),
        }
    }

    /// Channels of a leaving pixel.
    pub fn out_channels(&self) -> usize {
        match self {
            Stage::Conv(s) => s.mvu.out_features,
            Stage::MaxPool(s) => s.window.channels,
        }
    }

    /// Codes of one leaving image: channels times output rows times output columns.
    pub fn out_len(&self) -> usize {
        let [h, w] = self.window().out_hw();
        self.out_channels() * h * w
    }

    /// The stage on one image (channel-major codes); returns the output image, channel-major.
    pub fn eval(&self, x: &[i64]) -> Vec<i64> {
        let win = self.window();
        let c = win.channels;
        let buffered: Vec<i64> = match self {
            Stage::Conv(s) => x.iter().enumerate().map(|(i, &v)| apply_steps(&s.pre, v, i / win.pixels(), s.input)).collect(),
            Stage::MaxPool(_) => x.to_vec(),
        };
        let pixels: Vec<Vec<i64>> = match self {
            Stage::Conv(s) => win.windows(&buffered, 0).iter().map(|w| s.mvu.eval(w)).collect(),
            Stage::MaxPool(s) => win
                .windows(&buffered, self.pad_code())
                .iter()
                .map(|w| {
                    (0..c)
                        .map(|ch| {
                            let m = w.iter().skip(ch).step_by(c).copied().max().unwrap_or(0);
                            apply_steps(&s.post, m, ch, s.input)
                        })
                        .collect()
                })
                .collect(),
        };
        // Raster order of pixels to channel-major order.
        let (n, oc) = (pixels.len(), self.out_channels());
        (0..oc * n).map(|i| pixels[i % n][i / n]).collect()
    }
}

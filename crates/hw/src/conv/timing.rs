//! The schedule of a design with streaming stages, cycle for cycle: a model of every module's
//! handshake (the registers that decide `valid` and `ready`, none of the data), stepped as the
//! RTL steps. A stage's rate depends on the stages around it (a window generator stops taking
//! pixels of rows whose slots the windows still to come read, which holds the unit before it), so the latency
//! and the initiation interval are measured on this model rather than summed per layer.

use super::{Stage, Window};
use crate::design::{Design, Layer};

/// The handshake state of one module.
enum Unit {
    /// The sliding-window generator ([`super::verilog`]).
    Window { win: Window, rin: usize, cin: usize, oy: usize, ox: usize, done: bool, out_valid: bool },
    /// A one-entry register stage: an unrolled layer, or a max pool's comparators.
    Reg { out_valid: bool },
    /// A folded layer, one register stage.
    Folded { reuse: usize, busy: bool, cnt: usize, out_valid: bool },
    /// A pipelined layer, unrolled (`reuse` 1) or folded ([`crate::pipeline`]).
    Pipe(Box<Pipe>),
    /// The collector of the flattened image.
    Collector { pixels: usize, full: bool, cnt: usize },
    /// The register slice before a layer ([`crate::slice`]): its valid bit.
    Slice { valid: bool },
}

/// A pipelined layer's valid bits (with the first- and last-beat flags of a folded one).
struct Pipe {
    reuse: usize,
    /// Valid bits of the registered pre stages.
    pre: Vec<bool>,
    busy: bool,
    cnt: usize,
    /// Unrolled: the valid bits from the products to the last registered post stage. Folded:
    /// `(valid, first, last)` of the select, multiply and tree stages.
    body: Vec<(bool, bool, bool)>,
    /// Folded: the accumulator's valid bit, then the registered post stages.
    tail: Vec<bool>,
    /// Folded: whether the layer takes a sample, and the enabled cycles until it does.
    open: bool,
    gap: usize,
    /// The output FIFO's count.
    count: usize,
    /// The stage enable, and (decided two cycles ahead) the decision on its way to it.
    en: bool,
    en_ahead: Option<bool>,
}

impl Unit {
    fn of_layer(layer: &Layer, pipe: Option<crate::pipeline::Pipelining>) -> Unit {
        let r = layer.reuse.max(1);
        match pipe {
            None if r <= 1 => Unit::Reg { out_valid: false },
            None => Unit::Folded { reuse: r, busy: false, cnt: 0, out_valid: false },
            Some(p) => {
                let s = crate::pipeline::schedule(layer, &p);
                let (pre, body, tail) = if r <= 1 {
                    (0, s.pre_stages + 1 + s.tree_stages + s.post_stages - 1, 0)
                } else {
                    (s.pre_stages, 2 + s.tree_stages, 1 + s.post_stages - 1)
                };
                Unit::Pipe(Box::new(Pipe {
                    reuse: r,
                    pre: vec![false; pre],
                    busy: false,
                    cnt: 0,
                    body: vec![(false, false, false); body],
                    tail: vec![false; tail],
                    open: true,
                    gap: 0,
                    count: 0,
                    en: true,
                    en_ahead: (crate::pipeline::enable_lead(&p) == 2).then_some(true),
                }))
            }
        }
    }

    fn out_valid(&self) -> bool {
        match self {
            Unit::Window { out_valid, .. } | Unit::Reg { out_valid } | Unit::Folded { out_valid, .. } => *out_valid,
            Unit::Pipe(p) => p.count > 0,
            Unit::Collector { full, .. } => *full,
            Unit::Slice { valid } => *valid,
        }
    }

    /// The `in_ready` of a pipelined layer in the next cycle, with `in_valid` this cycle (its
    /// `in_ready_ahead`); a register slice's producer is ready on it.
    fn in_ready_ahead(&self, in_valid: bool) -> bool {
        match self {
            Unit::Pipe(p) => p.ready_ahead(in_valid),
            Unit::Window { .. } | Unit::Reg { .. } | Unit::Folded { .. } | Unit::Collector { .. } | Unit::Slice { .. } => {
                unreachable!("a register slice feeds a pipelined layer only")
            }
        }
    }

    fn in_ready(&self, out_ready: bool) -> bool {
        match self {
            Unit::Window { win, rin, oy, done, .. } => *rin != win.height && (*done || *rin < win.row_limit(*oy)),
            Unit::Reg { out_valid } => !out_valid || out_ready,
            Unit::Folded { reuse, busy, cnt, out_valid } => {
                let last = *busy && *cnt == reuse - 1;
                !busy || (last && (!out_valid || out_ready))
            }
            Unit::Pipe(p) => p.en && (p.reuse <= 1 || p.open),
            Unit::Collector { full, .. } => !full,
            // A slice's producer is ready on the consumer's `in_ready_ahead`, which the
            // schedule gives a slice as its `out_ready`.
            Unit::Slice { .. } => out_ready,
        }
    }

    /// One rising edge with these inputs (the RTL's nonblocking assignments, in its order).
    fn step(&mut self, in_valid: bool, out_ready: bool) {
        let in_ready = self.in_ready(out_ready);
        let take = in_valid && in_ready;
        match self {
            Unit::Window { win, rin, cin, oy, ox, done, out_valid } => {
                let emit = window_emits(win, *rin, *oy, *done);
                let [oh, ow] = win.out_hw();
                let (old_rin, old_done) = (*rin, *done);
                if !*out_valid || out_ready {
                    *out_valid = emit;
                    if emit {
                        if *ox == ow - 1 {
                            *ox = 0;
                            if *oy == oh - 1 {
                                *done = true;
                            } else {
                                *oy += 1;
                            }
                        } else {
                            *ox += 1;
                        }
                    }
                }
                if take {
                    if *cin == win.width - 1 {
                        *cin = 0;
                        *rin += 1;
                    } else {
                        *cin += 1;
                    }
                }
                if old_done && old_rin == win.height {
                    *rin = 0;
                    *oy = 0;
                    *done = false;
                }
            }
            Unit::Reg { out_valid } => {
                if in_ready {
                    *out_valid = in_valid;
                }
            }
            Unit::Folded { reuse, busy, cnt, out_valid } => {
                let last = *busy && *cnt == *reuse - 1;
                let fin = last && (!*out_valid || out_ready);
                if *out_valid && out_ready {
                    *out_valid = false;
                }
                if *busy && (fin || !last) {
                    *cnt += 1;
                }
                if fin {
                    *busy = false;
                    *out_valid = true;
                }
                if take {
                    *busy = true;
                    *cnt = 0;
                }
            }
            Unit::Pipe(p) => p.step(in_valid, out_ready),
            // `out_ready` is the consumer's `in_ready_ahead`: the word taken now is taken by
            // the consumer in the next cycle.
            Unit::Slice { valid } => *valid = in_valid && out_ready,
            Unit::Collector { pixels, full, cnt } => {
                let was_full = *full;
                if was_full && out_ready {
                    *full = false;
                }
                if in_valid && !was_full {
                    if *cnt == *pixels - 1 {
                        *cnt = 0;
                        *full = true;
                    } else {
                        *cnt += 1;
                    }
                }
            }
        }
    }
}

impl Pipe {
    /// The valid bit of the result the layer writes into its FIFO in a cycle whose enable is
    /// high.
    fn y_valid(&self) -> bool {
        if self.reuse <= 1 {
            self.body.last().is_some_and(|b| b.0)
        } else {
            self.tail.last().copied().unwrap_or(false)
        }
    }

    /// The enable decided this cycle from the FIFO's count and this cycle's write, `lead`
    /// cycles ahead of the cycle it holds.
    fn decision(&self) -> bool {
        let write = self.y_valid() && self.en;
        let lead = if self.en_ahead.is_some() { 2 } else { 1 };
        self.count + usize::from(write) + lead <= crate::pipeline::output_entries(lead)
    }

    /// `in_ready` in the next cycle (`en && open` then), with `in_valid` this cycle.
    fn ready_ahead(&self, in_valid: bool) -> bool {
        let en_next = self.en_ahead.unwrap_or_else(|| self.decision());
        let open_next = if self.reuse <= 1 {
            true
        } else if self.en {
            !(in_valid && self.open) && (self.open || self.gap == 1)
        } else {
            self.open
        };
        en_next && open_next
    }

    fn step(&mut self, in_valid: bool, out_ready: bool) {
        let en = self.en;
        // The output FIFO and the enable decided `lead` cycles ahead ([`crate::pipeline`]).
        let decision = self.decision();
        let yv = self.y_valid();
        if self.reuse <= 1 {
            if en {
                shift(&mut self.body, (in_valid, false, false));
            }
        } else {
            let last = self.busy && self.cnt == self.reuse - 1;
            let accept = in_valid && self.open;
            let xv = self.pre.last().copied().unwrap_or(accept);
            let take = en && xv;
            if en {
                shift(&mut self.pre, accept);
                if accept {
                    self.open = false;
                    self.gap = self.reuse - 1;
                } else if !self.open {
                    self.open = self.gap == 1;
                    self.gap -= 1;
                }
            }
            if en {
                // The accumulator takes the tree's last stage; the post stages follow it.
                let (tv, _, tl) = *self.body.last().unwrap_or(&(false, false, false));
                shift(&mut self.tail, tv && tl);
                shift(&mut self.body, (self.busy, self.cnt == 0, last));
            }
            if take {
                self.busy = true;
                self.cnt = 0;
            } else if en && self.busy {
                self.busy = !last;
                self.cnt += 1;
            }
        }
        let (write, read) = (yv && en, self.count > 0 && out_ready);
        self.en = match &mut self.en_ahead {
            Some(ahead) => std::mem::replace(ahead, decision),
            None => decision,
        };
        self.count = self.count + usize::from(write) - usize::from(read);
    }
}

/// Shifts `v` in at the front of `regs`, dropping the last.
fn shift<T: Copy>(regs: &mut [T], v: T) {
    if regs.is_empty() {
        return;
    }
    regs.rotate_right(1);
    regs[0] = v;
}

/// Whether the generator presents a window this cycle: every row of output row `oy` is in.
fn window_emits(win: &Window, rin: usize, oy: usize, done: bool) -> bool {
    !done && rin > win.last_row(oy)
}

/// The modules of a design with stages, in stream order.
fn units(d: &Design) -> Vec<Unit> {
    let window = |w: &Window| Unit::Window { win: *w, rin: 0, cin: 0, oy: 0, ox: 0, done: false, out_valid: false };
    let mut u = Vec::new();
    for s in &d.stages {
        u.push(window(s.window()));
        match s {
            Stage::Conv(c) => u.push(Unit::of_layer(&c.mvu, d.pipelining())),
            Stage::MaxPool(_) => u.push(Unit::Reg { out_valid: false }),
        }
    }
    if let Some(last) = d.stages.last() {
        let [h, w] = last.window().out_hw();
        u.push(Unit::Collector { pixels: h * w, full: false, cnt: 0 });
    }
    for (i, l) in d.layers.iter().enumerate() {
        if crate::slice::has_slice(d, i) {
            u.push(Unit::Slice { valid: false });
        }
        u.push(Unit::of_layer(l, d.pipelining()));
    }
    u
}

/// Cycle counts of streaming samples through a design, as the testbench counts them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Cycles from the first sample's first input handshake to its output handshake.
    pub latency: u64,
    /// Mean cycles between output handshakes.
    pub initiation_interval: f64,
    /// Cycles until the last output handshake, plus one.
    pub cycles: u64,
}

/// The schedule of `samples` samples streamed back to back into `d` (every beat offered as soon
/// as the design takes it) with a consumer that is always ready: what the testbench measures
/// without a stall seed.
pub fn timing(d: &Design, samples: usize) -> Timing {
    let mut u = units(d);
    let beats = samples * d.input_beats();
    // The modules leave their reset a cycle late where they read copies of it: nothing moves
    // in the cycles before.
    let start = if crate::reset::has_reset_copies(d) { crate::reset::RESET_LATENCY } else { 0 };
    let (mut sent, mut got, mut cycle) = (0usize, 0usize, start);
    let (mut first_in, mut first_out, mut last_out) = (None, 0u64, 0u64);
    let limit = 1000 + samples as u64 * (1000 + 64 * d.input_beats() as u64);
    while got < samples && cycle < limit {
        let valid: Vec<bool> = u.iter().map(Unit::out_valid).collect();
        let mut ready = vec![true; u.len() + 1];
        for i in (0..u.len()).rev() {
            ready[i] = match &u[i] {
                Unit::Slice { valid } => u[i + 1].in_ready_ahead(*valid),
                unit => unit.in_ready(ready[i + 1]),
            };
        }
        let source = sent < beats;
        if valid.last().copied().unwrap_or(false) {
            if got == 0 {
                first_out = cycle;
            }
            last_out = cycle;
            got += 1;
        }
        if source && ready[0] {
            first_in.get_or_insert(cycle);
            sent += 1;
        }
        for i in 0..u.len() {
            let in_valid = if i == 0 { source } else { valid[i - 1] };
            // A slice steps on its own ready, the consumer's `in_ready_ahead`.
            let out_ready = if matches!(u[i], Unit::Slice { .. }) { ready[i] } else { ready[i + 1] };
            u[i].step(in_valid, out_ready);
        }
        cycle += 1;
    }
    let ii = if samples > 1 { (last_out - first_out) as f64 / (samples - 1) as f64 } else { 0.0 };
    Timing { latency: first_out - first_in.unwrap_or(0), initiation_interval: ii, cycles: cycle }
}

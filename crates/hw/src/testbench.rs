//! The Verilator testbench and its build script.
//!
//! The testbench reads `N LEN` and then N lines of LEN input codes, streams them through the top
//! module (one per cycle while `in_ready` allows), and writes one line of output codes per sample.
//! With a stall seed other than 0 it lowers `out_ready` on pseudo-random cycles, so the tests
//! see the handshake hold data under back-pressure. It prints one JSON line with the cycle
//! counts: `latency` (cycles from the first sample's input handshake to its output handshake,
//! without stalls), `ii` (mean cycles between output handshakes, which a pipeline without
//! stalls spaces by its initiation interval once full) and `cycles` in all.

use crate::design::Design;
use crate::verilog::TOP;

/// The C++ testbench for `d`.
pub fn testbench_cpp(d: &Design) -> String {
    let (iw, ow) = (d.input_range().width(), d.output_range().width());
    let (n_in, n_out, beats) = (d.beat_len(), d.output_len(), d.input_beats());
    format!(
        r#"// Testbench of `{model}` for Verilator, written by `ch emit`.
#include "V{TOP}.h"
#include "verilated.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// A sample is BEATS beats of IN_LEN codes (a convolutional network's pixels, each its channels);
// its row holds the codes channel-major (code k of beat b at k * BEATS + b), as the executor
// takes them.
static const int IN_LEN = {n_in}, IN_W = {iw}, OUT_LEN = {n_out}, OUT_W = {ow}, BEATS = {beats};
static const int SAMPLE_LEN = IN_LEN * BEATS;

// Bit fields of a port: plain integers up to 64 bits, Verilator's word arrays above.
template <typename T> static void put_bits(T& s, int lo, int w, int64_t v) {{
  for (int i = 0; i < w; i++) {{
    T bit = (T)(((uint64_t)v >> i) & 1u);
    s = (T)((s & ~((T)1 << (lo + i))) | (bit << (lo + i)));
  }}
}}
template <std::size_t N> static void put_bits(VlWide<N>& s, int lo, int w, int64_t v) {{
  for (int i = 0; i < w; i++) {{
    int b = lo + i;
    uint32_t bit = (uint32_t)(((uint64_t)v >> i) & 1u);
    s[b / 32] = (s[b / 32] & ~(1u << (b % 32))) | (bit << (b % 32));
  }}
}}
template <typename T> static int64_t get_bits(const T& s, int lo, int w) {{
  uint64_t v = 0;
  for (int i = 0; i < w; i++) v |= (uint64_t)((s >> (lo + i)) & 1u) << i;
  if (w < 64 && (v >> (w - 1)) & 1u) v |= ~0ull << w;
  return (int64_t)v;
}}
template <std::size_t N> static int64_t get_bits(const VlWide<N>& s, int lo, int w) {{
  uint64_t v = 0;
  for (int i = 0; i < w; i++) {{
    int b = lo + i;
    v |= (uint64_t)((s[b / 32] >> (b % 32)) & 1u) << i;
  }}
  if (w < 64 && (v >> (w - 1)) & 1u) v |= ~0ull << w;
  return (int64_t)v;
}}

int main(int argc, char** argv) {{
  if (argc < 3) {{ std::fprintf(stderr, "usage: sim INPUTS OUTPUTS [STALL_SEED]\n"); return 2; }}
  std::FILE* fi = std::fopen(argv[1], "r");
  if (!fi) {{ std::fprintf(stderr, "cannot open %s\n", argv[1]); return 2; }}
  long n = 0, len = 0;
  if (std::fscanf(fi, "%ld %ld", &n, &len) != 2 || len != SAMPLE_LEN) {{ std::fprintf(stderr, "%s: bad header\n", argv[1]); return 2; }}
  std::vector<int64_t> x((size_t)n * SAMPLE_LEN);
  for (auto& v : x) if (std::fscanf(fi, "%lld", (long long*)&v) != 1) {{ std::fprintf(stderr, "%s: too few codes\n", argv[1]); return 2; }}
  std::fclose(fi);
  uint64_t stall = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  VerilatedContext ctx;
  V{TOP} top(&ctx);
  std::vector<int64_t> y((size_t)n * OUT_LEN);
  long sent = 0, got = 0, cycle = 0, first_in = -1, first_out = -1, last_out = -1;
  top.clk = 0; top.rst = 1; top.in_valid = 0; top.out_ready = 0;
  for (int i = 0; i < 2; i++) {{ top.clk = 0; top.eval(); top.clk = 1; top.eval(); }}
  top.rst = 0;
  long limit = 1000 + (long)n * (1000 + 64L * BEATS);
  long beats = (long)n * BEATS;
  while (got < n && cycle < limit) {{
    top.clk = 0;
    top.in_valid = sent < beats;
    if (sent < beats)
      for (int k = 0; k < IN_LEN; k++)
        put_bits(top.in_data, k * IN_W, IN_W, x[(size_t)(sent / BEATS) * SAMPLE_LEN + (size_t)k * BEATS + (size_t)(sent % BEATS)]);
    if (stall) {{ stall ^= stall << 13; stall ^= stall >> 7; stall ^= stall << 17; top.out_ready = (stall & 3) != 0; }}
    else top.out_ready = 1;
    top.eval();
    if (top.out_valid && top.out_ready) {{
      for (int j = 0; j < OUT_LEN; j++) y[(size_t)got * OUT_LEN + j] = get_bits(top.out_data, j * OUT_W, OUT_W);
      if (got == 0) first_out = cycle;
      last_out = cycle;
      got++;
    }}
    if (top.in_valid && top.in_ready) {{
      if (sent == 0) first_in = cycle;
      sent++;
    }}
    top.clk = 1; top.eval();
    cycle++;
  }}
  if (got < n) {{ std::fprintf(stderr, "timeout: %ld of %ld samples out after %ld cycles\n", got, n, cycle); return 1; }}
  std::FILE* fo = std::fopen(argv[2], "w");
  if (!fo) {{ std::fprintf(stderr, "cannot write %s\n", argv[2]); return 2; }}
  for (long s = 0; s < n; s++) {{
    for (int j = 0; j < OUT_LEN; j++) std::fprintf(fo, j ? " %lld" : "%lld", (long long)y[(size_t)s * OUT_LEN + j]);
    std::fprintf(fo, "\n");
  }}
  std::fclose(fo);
  double ii = n > 1 ? (double)(last_out - first_out) / (double)(n - 1) : 0.0;
  std::printf("{{\"samples\": %ld, \"cycles\": %ld, \"latency\": %ld, \"ii\": %.4f}}\n", n, cycle, first_out - first_in, ii);
  return 0;
}}
"#,
        model = d.model
    )
}

/// The build script: Verilator compiles the RTL and the testbench into `obj_dir/sim`; `files`
/// are the Verilog files besides the top, relative to the design's folder.
pub fn build_script(files: &[String]) -> String {
    format!(
        "#!/bin/sh\n# Builds the Verilator simulation of this design into obj_dir/sim (written by `ch emit`).\nset -e\ncd \"$(dirname \"$0\")\"\nverilator --cc --exe --build -O2 -j 2 --top-module {TOP} -Mdir obj_dir -o sim \\\n  {} rtl/{TOP}.v tb/tb.cpp >obj_dir.log 2>&1 || {{ tail -n 20 obj_dir.log >&2; exit 1; }}\n",
        files.join(" ")
    )
}

//! FINN's TFC_1W1A (Brevitas QONNX: 1-bit weights and activations) as XNOR-popcount layers with
//! threshold comparators, checked against the integer executor on the MNIST images shipped in
//! `data/mnist` (all 10,000 of t10k in Rust; in Verilator a subset, or all of them with
//! `MASE_LONG_TESTS=1`).

mod common;

use common::have;
use mase_hw::dsp::Multipliers;
use mase_hw::simulate::{self, golden, mismatches};
use mase_hw::{emit, lower, Design, LowerOptions, Step};
use mase_interop::{import_file, ImportOptions};
use mase_ir::{Graph, ParamStore};
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tfc() -> (Graph, ParamStore) {
    let path = repo_root().join("crates/interop/tests/fixtures/models/TFC_1W1A.onnx");
    let m = import_file(&path, &ImportOptions::default()).unwrap();
    (m.graph, m.params)
}

/// The first `n` of the 10,000 shipped MNIST images (every split of the data set, in order:
/// train, val, test), as `[n, 784]` pixels / 255, with their labels.
fn mnist(n: usize) -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    let s =
        mase_io::load_dataset("mnist", &mase_io::DataOptions { data_dir: Some(repo_root().join("data")), ..Default::default() }).unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for split in [s.train, s.val, s.test] {
        x.extend_from_slice(&split.x);
        y.extend_from_slice(&split.y);
    }
    let n = n.min(y.len());
    (x[..n * 784].to_vec(), vec![n, 784], y[..n].to_vec())
}

fn options(reuse: usize) -> LowerOptions {
    LowerOptions { default_reuse: reuse, ..Default::default() }
}

fn codes(d: &Design, x: &[f32]) -> Vec<Vec<i64>> {
    x.chunks(d.input_len()).map(|r| d.input_codes(r)).collect()
}

fn argmax_accuracy(rows: &[Vec<f32>], labels: &[u32]) -> usize {
    let argmax = |r: &[f32]| r.iter().enumerate().fold(0, |b, (i, v)| if *v > r[b] { i } else { b });
    rows.iter().zip(labels).filter(|(r, &l)| argmax(r) == l as usize).count()
}

#[test]
fn the_integer_executor_runs_tfc_1w1a_layers_as_popcounts_and_scores_92_96_percent() {
    let (g, p) = tfc();
    let (x, shape, labels) = mnist(10_000);
    assert_eq!(labels.len(), 10_000);
    let run = mase_runtime::run_integer(&g, &p, &x, &shape).unwrap();
    assert_eq!(run.report.integer_nodes(), ["MatMul_16", "MatMul_24", "MatMul_32", "MatMul_40"]);
    let rows: Vec<Vec<f32>> = run.output.chunks(10).map(<[f32]>::to_vec).collect();
    assert_eq!(argmax_accuracy(&rows, &labels), 9296);
    // The float path (fake quantization) gives the same outputs, bit for bit.
    let mut exec = mase_runtime::Executor::new(&g, &p, mase_runtime::ExecOptions { threads: 1, seed: 0 }).unwrap();
    let float = exec.infer(&x, &shape).unwrap().to_vec();
    assert_eq!(float.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), run.output.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}

#[test]
fn tfc_1w1a_lowers_to_popcounts_and_thresholds_bit_exact_on_all_10000_images() {
    let (g, p) = tfc();
    let d = lower(&g, &p, "TFC_1W1A", &options(1)).unwrap();
    let shape: Vec<_> = d.layers.iter().map(|l| (l.node.as_str(), l.in_features, l.out_features, l.acc.hi, l.post.len())).collect();
    assert_eq!(
        shape,
        [("MatMul_16", 784, 64, 784, 1), ("MatMul_24", 64, 64, 64, 1), ("MatMul_32", 64, 64, 64, 1), ("MatMul_40", 64, 10, 64, 0)]
    );
    for l in &d.layers[..3] {
        assert!(matches!(&l.post[0], Step::Threshold { at, .. } if at.len() == 64), "{}", l.node);
    }
    let (x, shape, labels) = mnist(10_000);
    let want = golden(&g, &p, &d, &x, &shape).unwrap();
    let got: Vec<Vec<i64>> = codes(&d, &x).iter().map(|c| d.eval(c)).collect();
    assert_eq!(mismatches(&want, &got).len(), 0);
    assert_eq!((simulate::accuracy(&got, &labels) * 10_000.0).round(), 9296.0);
}

/// One line per design simulated: reuse factor, clock (none: one register stage per layer),
/// how products are built. The first two run in every test run; the unpipelined one joins them
/// with `MASE_LONG_TESTS=1` (each Verilator build of the 784-input layer takes minutes on two
/// cores). Every one is XNOR-popcount: no multiplier, instantiated or inferred.
const DESIGNS: &[(usize, Option<f64>, Multipliers)] =
    &[(16, Some(100.0), Multipliers::Inferred), (16, Some(200.0), Multipliers::Ecp5Dsp), (16, None, Multipliers::Inferred)];

#[test]
fn tfc_1w1a_simulates_bit_exactly_in_verilator_at_two_clocks_and_under_back_pressure() {
    if !have("verilator") {
        return;
    }
    // All 10,000 images with MASE_LONG_TESTS=1 (a few minutes), else the first 100.
    let long = std::env::var("MASE_LONG_TESTS").is_ok_and(|v| v == "1");
    let (x, shape, labels) = mnist(if long { 10_000 } else { 100 });
    let (g, p) = tfc();
    for &(reuse, clock, multipliers) in &DESIGNS[..if long { DESIGNS.len() } else { 2 }] {
        let plain = lower(&g, &p, "TFC_1W1A", &options(reuse)).unwrap();
        let want = golden(&g, &p, &plain, &x, &shape).unwrap();
        let d = match clock {
            Some(f) => plain.pipelined(f).unwrap().with_multipliers(multipliers).unwrap(),
            None => plain,
        };
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_tfc_1w1a_r{reuse}_{}", clock.unwrap_or(0.0)));
        let _ = std::fs::remove_dir_all(&dir);
        let m = emit(&d, &dir).unwrap();
        assert_eq!((m["latency_cycles"].as_u64(), m["initiation_interval"].as_u64()), (Some(d.latency() as u64), Some(reuse as u64)));
        let layers = m["layers"].as_array().unwrap();
        let products: Vec<(&str, u64)> =
            layers.iter().map(|l| (l["products"].as_str().unwrap(), l["multipliers"].as_u64().unwrap())).collect();
        assert_eq!(products, vec![("xnor-popcount", 0); 4], "{clock:?} MHz, {}", multipliers.name());
        assert_eq!(m["estimate"]["dsps"].as_f64(), Some(0.0), "{clock:?} MHz, {}", multipliers.name());
        for stall in [0, 4242] {
            let r = simulate::run(&dir, &d, &codes(&d, &x), stall).unwrap();
            assert_eq!(mismatches(&want, &r.outputs).len(), 0, "reuse {reuse}, {clock:?} MHz, stall seed {stall}");
            if long {
                assert_eq!((simulate::accuracy(&r.outputs, &labels) * 10_000.0).round(), 9296.0);
            }
            if stall == 0 {
                assert_eq!(r.latency, d.latency() as u64, "reuse {reuse}, {clock:?} MHz");
            }
        }
    }
}

#[test]
fn binarized_graphs_that_cannot_be_built_are_one_line_errors() {
    use mase_ir::Tensor;
    // (parameter replaced, its new value, the error's text)
    let cases = [
        ("features.15.weight", Tensor::scalar(-0.73), "not strictly increasing"),
        ("features.15.bias", Tensor::new(vec![2], vec![0.0, 1.0]).unwrap(), "`features_15_bias` is not a constant with one value"),
        (
            "features.3.running_var",
            Tensor::new(vec![3], vec![1.0; 3]).unwrap(),
            "parameter `features.3.running_var`: expected 64 values, found 3",
        ),
    ];
    for (name, value, want) in cases {
        let (g, mut p) = tfc();
        p.insert(name, value, false);
        let err = lower(&g, &p, "TFC_1W1A", &options(1)).unwrap_err().to_string();
        assert!(err.contains(want) && !err.contains('\n'), "{name}: {err}");
    }
}

//! Hostile and damaged files: thousands of mutated copies of real ONNX models, Lightning and
//! torch.save checkpoints, npz archives and pickles go through the readers. Each must give a
//! result or one error line, never a panic. This is the normal-suite companion of the cargo-fuzz
//! targets in `fuzz/` (see the README there), which run the same readers for as long as asked.

mod common;
use common::*;
use mase_interop::{export_bytes, import_bytes, ExportFormat, ExportOptions, ImportOptions};
use mase_ir::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One random damage: bit flips, byte overwrites with boundary values, truncation, a deleted or
/// repeated range.
fn mutate(src: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = src.to_vec();
    let n = b.len().max(1) as u64;
    match rng.below(6) {
        0 => {
            for _ in 0..=rng.below(8) {
                let i = rng.below(n) as usize % b.len().max(1);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(8);
                }
            }
        }
        1 => {
            const SPECIAL: [u8; 8] = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe, b'{', b'.'];
            for _ in 0..=rng.below(4) {
                let i = rng.below(n) as usize % b.len().max(1);
                if let Some(x) = b.get_mut(i) {
                    *x = SPECIAL[rng.below(8) as usize];
                }
            }
        }
        2 => b.truncate(rng.below(n) as usize),
        3 => {
            let i = rng.below(n) as usize;
            let len = (rng.below(64) as usize).min(b.len().saturating_sub(i));
            b.drain(i..i + len);
        }
        4 => {
            let i = rng.below(n) as usize % b.len().max(1);
            let len = (rng.below(32) as usize).min(b.len().saturating_sub(i));
            let chunk = b[i..i + len].to_vec();
            b.splice(i..i, chunk);
        }
        _ => {
            // Large varint-like values where protobuf lengths and pickle sizes live.
            let i = rng.below(n) as usize % b.len().max(1);
            for (k, v) in [0xffu8, 0xff, 0xff, 0xff, 0x0f].iter().enumerate() {
                if let Some(x) = b.get_mut(i + k) {
                    *x = *v;
                }
            }
        }
    }
    b
}

/// Runs `f` on `count` mutations of each source; fails on a panic or a multi-line error.
fn survive(sources: &[(&str, Vec<u8>)], count: usize, seed: u64, f: &dyn Fn(&[u8]) -> Option<String>) {
    let mut rng = Rng::new(seed);
    for (name, src) in sources {
        for k in 0..count {
            let m = mutate(src, &mut rng);
            match catch_unwind(AssertUnwindSafe(|| f(&m))) {
                Err(_) => panic!("{name}: mutation {k} (seed {seed}) panicked"),
                Ok(Some(e)) => assert!(!e.contains('\n') && !e.is_empty(), "{name}: mutation {k}: error is not one line: {e:?}"),
                Ok(None) => {}
            }
        }
    }
}

fn read(rel: &str) -> (&str, Vec<u8>) {
    (Box::leak(rel.to_string().into_boxed_str()), std::fs::read(fixture(rel)).unwrap())
}

#[test]
fn mutated_onnx_models_never_panic() {
    let sources = [
        read("models/jsc-tiny_lab_model_dynbatch.onnx"),
        read("models/conv1d_small_keras.onnx"),
        read("models/bnn_model_fc_1layer.onnx"),
        read("models/qkeras_jettagging.onnx"),
        read("models/two_layer_pytorch.onnx"),
    ];
    survive(&sources, 400, 1, &|b| match import_bytes(b, &ImportOptions::default()) {
        Ok(m) => export_bytes(&m.graph, &m.params, &ExportOptions::new(ExportFormat::Qonnx)).err().map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    });
}

#[test]
fn mutated_checkpoints_never_panic() {
    let sources = [
        read("models/jsc-tiny_best.ckpt"),
        read("torch/mixed_state_dict.pt"),
        read("torch/module.pt"),
        read("torch/compressed.npz"),
        read("models/jsc-tiny_best.state_dict.npz"),
    ];
    survive(&sources, 500, 2, &|b| mase_interop::read_weight_bytes(b).err().map(|e| e.to_string()));
}

#[test]
fn mutated_pickles_never_panic() {
    let ck = std::fs::read(fixture("models/jsc-tiny_best.ckpt")).unwrap();
    let zip = mase_interop::zip::ZipArchive::new(&ck).unwrap();
    let pkl = zip.read_named("archive/data.pkl").unwrap();
    survive(&[("jsc-tiny data.pkl", pkl)], 3000, 3, &|b| mase_interop::torch::pickle::unpickle(b).err().map(|e| e.to_string()));
}

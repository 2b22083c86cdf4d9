//! The weight-gradient product of a convolution's direct path, `dW [cout, kkg] += dY [cout,
//! ohw] x col^T [ohw, kkg]` summed over the images of a batch, with the column matrix `col`
//! (`[kkg, ohw]`, read transposed) in rows exactly `ohw` values apart and in rows 16 values
//! wider, as `kernels/conv.rs` lays them out where `ohw` is a multiple of 128
//! (`transposed_stride`). Rows a multiple of 512 bytes apart fall on few sets of the L1 cache
//! while the GEMM packs the transposed operand column by column; the table shows what that
//! costs for each width, one thread, best of `--repeat` rounds, in GFLOP/s.
//!
//! usage: cargo run --release -p mase-bench --example dw_shapes -- [--images N] [--repeat R]
//!        [--shapes COUT:KKG:OHW,...] (resnet18's and vgg7's layers on 32x32 images by default)

use mase_bench::example::{arg, best, word};
use mase_ir::Rng;
use mase_runtime::{gemm, Mat, MatMut};

/// `(cout, kkg, ohw)`: resnet18's 3x3 layers of 64, 128, 256 and 512 channels on 32x32, 16x16,
/// 8x8 (four images side by side) and 4x4 (sixteen side by side) images, vgg7's 128-channel
/// 32x32 layer, and widths of 512 and 768 values.
const SHAPES: [(usize, usize, usize); 8] = [
    (64, 576, 1024),
    (128, 1152, 256),
    (256, 2304, 256),
    (512, 4608, 256),
    (128, 1152, 1024),
    (64, 576, 512),
    (64, 576, 768),
    (64, 576, 784),
];

/// The shapes of `--shapes COUT:KKG:OHW,...`, [`SHAPES`] by default.
fn shapes() -> Vec<(usize, usize, usize)> {
    let Some(list) = word("--shapes") else { return SHAPES.to_vec() };
    list.split(',')
        .map(|l| match l.split(':').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
            Ok([cout, kkg, ohw]) => (*cout, *kkg, *ohw),
            _ => panic!("--shapes: expected COUT:KKG:OHW, got {l}"),
        })
        .collect()
}

fn main() {
    let (images, repeat) = (arg("--images", 32), arg("--repeat", 3));
    let mut rng = Rng::new(1);
    println!("one thread, {images} products per round, GFLOP/s of dY x col^T");
    println!("{:>20} {:>12} {:>14} {:>7}", "cout x kkg x ohw", "rows ohw", "rows ohw + 16", "ratio");
    for (cout, kkg, ohw) in shapes() {
        let dy: Vec<f32> = (0..cout * ohw).map(|_| rng.uniform() - 0.5).collect();
        let mut dw = vec![0.0f32; cout * kkg];
        let flops = 2.0 * (images * cout * kkg * ohw) as f64;
        let rate = |ld: usize, dw: &mut [f32], rng: &mut Rng| {
            let col: Vec<f32> = (0..kkg * ld).map(|_| rng.uniform() - 0.5).collect();
            let secs = best(repeat, || {
                for i in 0..images {
                    let beta = if i == 0 { 0.0 } else { 1.0 };
                    gemm(1.0, Mat::new(&dy, cout, ohw), Mat::strided(&col, kkg, ohw, ld, 1).t(), beta, MatMut::new(dw, cout, kkg), None);
                }
            });
            flops / secs / 1e9
        };
        let (tight, wide) = (rate(ohw, &mut dw, &mut rng), rate(ohw + 16, &mut dw, &mut rng));
        println!("{:>20} {:>12.1} {:>14.1} {:>6.2}x", format!("{cout}x{kkg}x{ohw}"), tight, wide, wide / tight);
    }
}

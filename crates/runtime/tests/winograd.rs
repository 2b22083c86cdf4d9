//! The Winograd convolution path against a float64 direct convolution, on random shapes.
//!
//! For every output element of the forward pass and of both gradients, the float32 result must
//! lie within `gamma_n * S` of the float64 reference, where `S` is the sum of the absolute values
//! of the `n` products the element sums (`n = C_in * 9` plus the bias for the forward pass,
//! `C_out * 9` for the input gradient, `N * H_out * W_out` for the weight gradient) and
//! `gamma_n = n u / (1 - n u)`, `u = 2^-24`: the error bound of a direct float32 sum of the same
//! length. The Winograd results must also differ from the direct path's somewhere (so that
//! Winograd did run), and be the same bits on any thread count and for an image alone as in
//! its batch.

use mase_ir::{ConvSpec, Graph, Op, ParamStore, Rng, Tensor};
use mase_runtime::{ConvAlgo, ExecOptions, Executor, Mode};

/// One convolution layer's case.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    pad: usize,
    bias: bool,
}

/// Forward output, weight gradient and input gradient of one run.
#[derive(Debug, PartialEq)]
struct Run {
    y: Vec<f32>,
    dw: Vec<f32>,
    dx: Vec<f32>,
}

struct Data {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    dy: Vec<f32>,
}

fn out_side(c: &Case) -> (usize, usize) {
    (c.h + 2 * c.pad - 2, c.w + 2 * c.pad - 2)
}

fn data(c: &Case, seed: u64) -> Data {
    let mut rng = Rng::new(seed);
    let (oh, ow) = out_side(c);
    let mut normal = |len: usize| (0..len).map(|_| rng.normal() as f32).collect::<Vec<f32>>();
    Data { x: normal(c.n * c.cin * c.h * c.w), w: normal(c.cout * c.cin * 9), b: normal(c.cout), dy: normal(c.n * c.cout * oh * ow) }
}

fn run(c: &Case, d: &Data, algo: ConvAlgo, threads: usize) -> Run {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let mut spec = ConvSpec::new(2, c.cin, c.cout, 3, 1, c.pad);
    spec.bias = c.bias;
    let y = g.call_module("conv", Op::Conv2d(spec), &[x]);
    g.output(y);
    let mut params = ParamStore::new();
    params.insert("conv.weight", Tensor::new(vec![c.cout, c.cin, 3, 3], d.w.clone()).unwrap(), true);
    if c.bias {
        params.insert("conv.bias", Tensor::new(vec![c.cout], d.b.clone()).unwrap(), true);
    }
    let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).unwrap();
    exec.set_conv_algo(algo);
    exec.set_keep_input_grad(true);
    let y = exec.forward(&d.x, &[c.n, c.cin, c.h, c.w], Mode::Train).unwrap().to_vec();
    exec.backward(&d.dy).unwrap();
    let dw = exec.grads().into_iter().find(|(name, _)| name == "conv.weight").unwrap().1;
    Run { y, dw, dx: exec.input_grad().unwrap().to_vec() }
}

/// The float64 direct convolution: per element, the exact value and the sum of the absolute
/// values of its products, for the forward pass and both gradients.
struct Reference {
    y: Vec<(f64, f64)>,
    dw: Vec<(f64, f64)>,
    dx: Vec<(f64, f64)>,
}

fn reference(c: &Case, d: &Data) -> Reference {
    let (oh, ow) = out_side(c);
    let mut y = vec![(0.0, 0.0); c.n * c.cout * oh * ow];
    let mut dw = vec![(0.0, 0.0); c.cout * c.cin * 9];
    let mut dx = vec![(0.0, 0.0); c.n * c.cin * c.h * c.w];
    let add = |acc: &mut (f64, f64), a: f32, b: f32| {
        let p = a as f64 * b as f64;
        acc.0 += p;
        acc.1 += p.abs();
    };
    for i in 0..c.n {
        for k in 0..c.cout {
            for oy in 0..oh {
                for ox in 0..ow {
                    let yi = ((i * c.cout + k) * oh + oy) * ow + ox;
                    if c.bias {
                        add(&mut y[yi], d.b[k], 1.0);
                    }
                    for ch in 0..c.cin {
                        for t in 0..9 {
                            let (iy, ix) = ((oy + t / 3) as isize - c.pad as isize, (ox + t % 3) as isize - c.pad as isize);
                            if iy < 0 || ix < 0 || iy >= c.h as isize || ix >= c.w as isize {
                                continue;
                            }
                            let xi = ((i * c.cin + ch) * c.h + iy as usize) * c.w + ix as usize;
                            let wi = (k * c.cin + ch) * 9 + t;
                            add(&mut y[yi], d.w[wi], d.x[xi]);
                            add(&mut dw[wi], d.dy[yi], d.x[xi]);
                            add(&mut dx[xi], d.dy[yi], d.w[wi]);
                        }
                    }
                }
            }
        }
    }
    Reference { y, dw, dx }
}

/// The worst ratio of error to the bound `gamma_n * S` over the elements; above 1 fails.
fn worst(got: &[f32], want: &[(f64, f64)], terms: usize) -> f64 {
    let nu = terms as f64 * f64::from(f32::EPSILON) / 2.0;
    let gamma = nu / (1.0 - nu);
    got.iter().zip(want).map(|(&g, &(v, s))| (g as f64 - v).abs() / (gamma * s).max(f64::MIN_POSITIVE)).fold(0.0, f64::max)
}

/// The passes a case expects Winograd to run.
#[derive(Clone, Copy, Debug)]
struct Passes {
    weight_grad: bool,
}

impl Passes {
    const ALL: Passes = Passes { weight_grad: true };
    /// The forward pass and the input gradient; the weight gradient by the direct path.
    const DATA: Passes = Passes { weight_grad: false };
}

/// Checks one case: Winograd within the bound of a direct sum, different from the direct path
/// somewhere, and the same bits on one, two and three threads.
fn check(c: Case) {
    check_passes(c, Passes::ALL)
}

/// [`check`], with the weight gradient by Winograd (different from the direct path's) or by
/// the direct path (its bits) as `passes` says.
fn check_passes(c: Case, passes: Passes) {
    let d = data(&c, (c.cin * 1000 + c.cout) as u64);
    let fast = run(&c, &d, ConvAlgo::Winograd, 1);
    let exact = run(&c, &d, ConvAlgo::Exact, 1);
    let r = reference(&c, &d);
    let (oh, ow) = out_side(&c);
    let bounds = [
        ("forward", worst(&fast.y, &r.y, c.cin * 9 + usize::from(c.bias))),
        ("weight gradient", worst(&fast.dw, &r.dw, c.n * oh * ow)),
        ("input gradient", worst(&fast.dx, &r.dx, c.cout * 9)),
    ];
    for (what, ratio) in bounds {
        assert!(ratio <= 1.0, "{c:?} {what}: error {ratio:.3} x the bound of a direct sum");
    }
    assert_ne!(fast.y, exact.y, "{c:?}: the forward pass did not take the Winograd path");
    assert_ne!(fast.dx, exact.dx, "{c:?}: the input gradient did not take the Winograd path");
    if passes.weight_grad {
        assert_ne!(fast.dw, exact.dw, "{c:?}: the weight gradient did not take the Winograd path");
    } else {
        assert_eq!(bits(&fast.dw), bits(&exact.dw), "{c:?}: the weight gradient did not take the direct path");
    }
    for threads in [2, 3] {
        assert!(fast == run(&c, &d, ConvAlgo::Winograd, threads), "{c:?}: {threads} threads must give the bits of one");
    }
    // The last image alone (a group of one) gives the bits it has in the batch, as it must in
    // an evaluation slice of any size.
    let one = Case { n: 1, ..c };
    let (x_img, y_img) = (c.cin * c.h * c.w, c.cout * oh * ow);
    let last = Data { x: d.x[(c.n - 1) * x_img..].to_vec(), w: d.w.clone(), b: d.b.clone(), dy: d.dy[(c.n - 1) * y_img..].to_vec() };
    let alone = run(&one, &last, ConvAlgo::Winograd, 1);
    assert!(bits(&alone.y) == bits(&fast.y[(c.n - 1) * y_img..]), "{c:?}: the last image's forward pass alone");
    assert!(bits(&alone.dx) == bits(&fast.dx[(c.n - 1) * x_img..]), "{c:?}: the last image's input gradient alone");
}

#[test]
fn winograd_is_within_the_error_of_a_direct_sum() {
    // Odd sides (partial tiles), paddings 0, 1 and 2, several groups of images, with and
    // without bias; every case keeps both products on the GEMM's general path.
    check(Case { n: 3, cin: 24, cout: 80, h: 19, w: 17, pad: 1, bias: true });
    check(Case { n: 2, cin: 24, cout: 70, h: 18, w: 17, pad: 1, bias: false });
    check(Case { n: 5, cin: 70, cout: 66, h: 6, w: 5, pad: 0, bias: true });
    check(Case { n: 2, cin: 17, cout: 65, h: 20, w: 20, pad: 2, bias: true });
    check(Case { n: 9, cin: 96, cout: 128, h: 8, w: 8, pad: 1, bias: false });
    // Rows of 8 tiles and more, computed eight at a time, with tiles left over, at paddings 0 and 2.
    check(Case { n: 2, cin: 40, cout: 70, h: 19, w: 21, pad: 0, bias: true });
    check(Case { n: 1, cin: 33, cout: 66, h: 15, w: 33, pad: 2, bias: false });
    // Several groups of images (144 tiles an image, two images a group), shared over threads,
    // and weight-gradient partials of three images, that is of two groups.
    check(Case { n: 11, cin: 24, cout: 66, h: 24, w: 24, pad: 1, bias: true });
}

#[test]
fn winograd_f4_is_within_the_error_of_a_direct_sum() {
    // At least 64 channels into each pass: F(4x4, 3x3) in every pass; rows of 9 tiles (8 at a
    // time and one left over), odd sides, paddings 0-2, several groups of images.
    check(Case { n: 3, cin: 72, cout: 80, h: 9, w: 7, pad: 1, bias: true });
    check(Case { n: 2, cin: 64, cout: 72, h: 35, w: 34, pad: 1, bias: false });
    check(Case { n: 2, cin: 66, cout: 70, h: 13, w: 11, pad: 0, bias: true });
    check(Case { n: 2, cin: 72, cout: 68, h: 10, w: 14, pad: 2, bias: true });
    check(Case { n: 7, cin: 72, cout: 72, h: 8, w: 8, pad: 1, bias: false });
    // One tile an image (resnet18's 4x4 layers; a 3x3 output): a zero column beside the
    // tile of an image alone keeps its products on the GEMM's general path. Their weight
    // gradients take the direct path.
    check_passes(Case { n: 5, cin: 136, cout: 144, h: 4, w: 4, pad: 1, bias: true }, Passes::DATA);
    check_passes(Case { n: 3, cin: 130, cout: 140, h: 3, w: 3, pad: 1, bias: false }, Passes::DATA);
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn non_finite_inputs_take_the_direct_path() {
    // An infinity through the Winograd transforms would meet its own negative (`inf - inf`);
    // the direct path gives PyTorch's values, so Winograd mode must give its bits.
    let c = Case { n: 2, cin: 24, cout: 20, h: 18, w: 17, pad: 1, bias: true };
    for special in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30] {
        let mut d = data(&c, 5);
        d.x[100] = special;
        d.dy[7] = special;
        let (fast, exact) = (run(&c, &d, ConvAlgo::Winograd, 1), run(&c, &d, ConvAlgo::Exact, 1));
        for (what, a, b) in
            [("forward", &fast.y, &exact.y), ("weight gradient", &fast.dw, &exact.dw), ("input gradient", &fast.dx, &exact.dx)]
        {
            assert!(a.iter().any(|v| !v.is_finite()) || special == 1e30, "{special} {what}: no special value came through");
            assert!(bits(a) == bits(b), "{special} {what}: the fast mode must give the direct path's bits");
        }
    }
}

#[test]
fn exact_mode_and_changing_it_rebuild_the_plans() {
    // At least 128 channels each way: Winograd under `Fast` with the AVX-512 GEMM kernels too.
    let c = Case { n: 2, cin: 136, cout: 128, h: 18, w: 17, pad: 1, bias: true };
    let d = data(&c, 8);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_module("conv", Op::Conv2d(ConvSpec::new(2, c.cin, c.cout, 3, 1, 1)), &[x]);
    g.output(y);
    let mut params = ParamStore::new();
    params.insert("conv.weight", Tensor::new(vec![c.cout, c.cin, 3, 3], d.w.clone()).unwrap(), true);
    params.insert("conv.bias", Tensor::new(vec![c.cout], d.b.clone()).unwrap(), true);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    assert_eq!(exec.conv_algo(), ConvAlgo::Fast);
    let shape = [c.n, c.cin, c.h, c.w];
    let fast = exec.forward(&d.x, &shape, Mode::Eval).unwrap().to_vec();
    exec.set_conv_algo(ConvAlgo::Exact);
    let exact = exec.forward(&d.x, &shape, Mode::Eval).unwrap().to_vec();
    assert_eq!(fast, run(&c, &d, ConvAlgo::Fast, 1).y);
    assert_eq!(exact, run(&c, &d, ConvAlgo::Exact, 1).y);
    assert_ne!(fast, exact);
}

#[test]
fn transformed_weights_follow_every_change_of_the_parameters() {
    // The forward pass keeps its transformed weights while the parameters stay the same; after
    // `set_param`, `load_params` or an optimizer step it must transform the new ones: each
    // evaluation must give the bits of a fresh executor holding the same parameters.
    let c = Case { n: 2, cin: 16, cout: 72, h: 9, w: 8, pad: 1, bias: true };
    let (d, other) = (data(&c, 11), data(&c, 12));
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_module("conv", Op::Conv2d(ConvSpec::new(2, c.cin, c.cout, 3, 1, 1)), &[x]);
    let pooled = g.call_function("mean", Op::Mean(mase_ir::ReduceSpec::new(&[2, 3], false)), &[y]);
    g.output(pooled);
    let mut params = ParamStore::new();
    params.insert("conv.weight", Tensor::new(vec![c.cout, c.cin, 3, 3], d.w.clone()).unwrap(), true);
    params.insert("conv.bias", Tensor::new(vec![c.cout], d.b.clone()).unwrap(), true);
    let shape = [c.n, c.cin, c.h, c.w];
    let fresh = |p: &ParamStore| {
        let mut e = Executor::new(&g, p, ExecOptions { threads: 1, seed: 0 }).unwrap();
        e.set_conv_algo(ConvAlgo::Winograd);
        bits(e.forward(&d.x, &shape, Mode::Eval).unwrap())
    };
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.set_conv_algo(ConvAlgo::Winograd);
    let eval = |exec: &mut Executor| bits(exec.forward(&d.x, &shape, Mode::Eval).unwrap());
    let first = eval(&mut exec);
    assert_eq!(first, fresh(&params));
    assert_eq!(eval(&mut exec), first, "the same parameters, the same bits");

    exec.set_param("conv.weight", &other.w).unwrap();
    let after_set = eval(&mut exec);
    assert_ne!(after_set, first);
    assert_eq!(after_set, fresh(&exec.params()), "after set_param");

    exec.load_params(&params).unwrap();
    assert_eq!(eval(&mut exec), first, "after load_params");

    let mut opt = mase_runtime::Optimizer::new(
        mase_runtime::OptimizerKind::Sgd { momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false },
        0.1,
    );
    exec.train_step(&d.x, &shape, &[3, 5], &mut opt).unwrap();
    let after_step = eval(&mut exec);
    assert_ne!(after_step, first);
    assert_eq!(after_step, fresh(&exec.params()), "after an optimizer step");
}

//! Calibrates the cost model (`mase_hw::cost`) against Yosys. Target `xilinx`: synthesizes
//! every single-layer design of `mase_hw::calibration::MATRIX` with `synth_xilinx`, writes the
//! features and the measured LUTs, flip-flops and DSPs to a CSV, fits the LUT and flip-flop
//! coefficients by least relative squares and prints them with the model's errors. Target
//! `ecp5`: the same layers pipelined for 200 MHz with instantiated multipliers, once with DSPs
//! and once with shift-add products (`mase_hw::calibration::ecp5_cases`), synthesized with
//! `synth_ecp5` in the place-and-route wrapper; fits the LUT4 coefficients.
//!
//! ```sh
//! cargo run -p mase-hw --example calibrate_cost -- synth xilinx crates/hw/calibration/xilinx.csv
//! cargo run -p mase-hw --example calibrate_cost -- fit xilinx crates/hw/calibration/xilinx.csv
//! cargo run -p mase-hw --example calibrate_cost -- synth-missing xilinx crates/hw/calibration/xilinx.csv
//! cargo run -p mase-hw --release --example calibrate_cost -- synth ecp5 crates/hw/calibration/ecp5.csv
//! cargo run -p mase-hw --example calibrate_cost -- check ecp5 DIR...
//! ```
//!
//! `check ecp5` compares the LUT4 estimate of designs `ch emit` wrote with Yosys's count
//! (`DIR/ecp5/stat.json` of `ch synth --target ecp5`, else a fresh `synth_ecp5`).
//!
//! `synth` takes minutes (Yosys on 30 designs, 62 for `ecp5`); `fit` rewrites the feature
//! columns of an existing CSV from the current model (the measured columns stay) and fits
//! again. The test `crates/hw/tests/cost.rs` checks the committed CSVs without Yosys.

use mase_hw::calibration::{design, ecp5_cases, ecp5_design, MATRIX};
use mase_hw::cost::{estimate, estimate_layer, layer_features, lut4_regressors, lut_regressors, LUT4_TERMS, LUT_TERMS};
use mase_hw::synth::{synth, SynthTarget};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Measured LUTs, flip-flops and DSPs of each case.
type Measured = Vec<(u64, u64, u64)>;

fn fail(msg: String) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(target), Some(csv)) = (args.first(), args.get(1), args.get(2).map(PathBuf::from)) else {
        eprintln!("usage: calibrate_cost synth|synth-missing|fit xilinx|ecp5 FILE.csv [WORK_DIR]");
        std::process::exit(2);
    };
    let work = args.get(3).map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join(format!("mase_hw_calibration_{target}")));
    match target.as_str() {
        "ecp5" if mode == "check" => check_ecp5(&args[2..]),
        "xilinx" => xilinx(mode, &csv, &work),
        "ecp5" => ecp5(mode, &csv, &work),
        other => fail(format!("unknown target `{other}`: xilinx or ecp5")),
    }
}

fn xilinx(mode: &str, csv: &Path, work: &Path) {
    let csv = csv.to_path_buf();
    let measured = match mode {
        "synth" | "synth-missing" => {
            // `synth-missing` keeps the measured lines of an existing file and synthesizes the
            // cases it lacks (a grown matrix).
            let known = if mode == "synth-missing" { read_some(&csv) } else { vec![None; MATRIX.len()] };
            synthesize(work, known)
        }
        "fit" => read_measured(&csv),
        other => fail(format!("unknown mode `{other}`: synth or fit")),
    };
    write_csv(&csv, &measured);
    fit(&measured);
}

/// The LUT4 estimate of each emitted design in `dirs` against Yosys's LUT4s, with the errors.
fn check_ecp5(dirs: &[String]) {
    let mut pairs = Vec::new();
    for dir in dirs.iter().map(Path::new) {
        let d = mase_hw::read_design(dir).unwrap_or_else(|e| fail(e.to_string()));
        let stat = dir.join("ecp5").join("stat.json");
        let cells = if stat.is_file() { mase_hw::ecp5::read_cells(&stat) } else { mase_hw::ecp5::synthesize(dir, &d, 3600) }
            .unwrap_or_else(|e| fail(e.to_string()));
        let measured = mase_hw::ecp5::yosys_resources(&cells);
        let e = estimate(&d);
        let lut4 =
            e.lut4.unwrap_or_else(|| fail(format!("{}: no LUT4 estimate (not pipelined with instantiated multipliers)", dir.display())));
        println!(
            "{}: LUT4s {lut4} / {} ({:+.1} %), DSPs {} / {}",
            dir.display(),
            measured.luts,
            100.0 * (lut4 - measured.luts as f64) / measured.luts as f64,
            e.dsps,
            measured.dsps
        );
        pairs.push((lut4, measured.luts as f64));
    }
    report("LUT4s", pairs.into_iter());
}

/// The ECP5 calibration: `mode` as for `xilinx`, on [`ecp5_cases`].
fn ecp5(mode: &str, csv: &Path, work: &Path) {
    let cases = ecp5_cases();
    let known = match mode {
        "synth" => vec![None; cases.len()],
        "synth-missing" | "fit" => read_some_n(csv, cases.len()),
        other => fail(format!("unknown mode `{other}`: synth, synth-missing or fit")),
    };
    let mut measured = Vec::new();
    for (i, (&(m, products), k)) in cases.iter().zip(known).enumerate() {
        if let Some(k) = k {
            measured.push(k);
            continue;
        }
        if mode == "fit" {
            fail(format!("{}: no line for case {i}", csv.display()));
        }
        let d = ecp5_design(m, products);
        let dir = work.join(format!("case{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        mase_hw::emit(&d, &dir).unwrap_or_else(|e| fail(format!("case {i}: {e}")));
        let t = std::time::Instant::now();
        let cells = mase_hw::ecp5::synthesize(&dir, &d, 3600).unwrap_or_else(|e| fail(format!("case {i}: {e}")));
        let r = mase_hw::ecp5::yosys_resources(&cells);
        eprintln!(
            "case {i} {:?} {}: {} LUT4s, {} FFs, {} DSPs in {:.1} s",
            MATRIX[m],
            products.name(),
            r.luts,
            r.flip_flops,
            r.dsps,
            t.elapsed().as_secs_f64()
        );
        measured.push((r.luts, r.flip_flops, r.dsps));
    }
    let regressors: Vec<[f64; LUT4_TERMS]> = cases
        .iter()
        .map(|&(m, products)| {
            let d = ecp5_design(m, products);
            let pipe = d.layer_pipelining(0).unwrap_or_else(|| fail(format!("case {m}: not pipelined")));
            lut4_regressors(&d.layers[0], &mase_hw::pipeline::pipelined_layer(&d.layers[0], &pipe))
        })
        .collect();
    let mut text = String::from("case,matrix_case,products,in_features,out_features,bits,reuse,position,adder_bits,step_bits,rom_bits,select_bits,fifo_bits,luts,ffs,dsps\n");
    for (i, ((&(m, products), x), &(luts, ffs, dsps))) in cases.iter().zip(&regressors).zip(&measured).enumerate() {
        let c = MATRIX[m];
        let _ = writeln!(
            text,
            "{i},{m},{},{},{},{},{},{},{},{},{},{},{},{luts},{ffs},{dsps}",
            products.name(),
            c.in_features,
            c.out_features,
            c.bits,
            c.reuse,
            c.position.name(),
            x[0],
            x[1],
            x[2],
            x[3],
            x[4]
        );
    }
    std::fs::write(csv, text).unwrap_or_else(|e| fail(format!("{}: {e}", csv.display())));
    let rows: Vec<(Vec<f64>, f64)> = regressors.iter().zip(&measured).map(|(x, m)| (x.to_vec(), m.0 as f64)).collect();
    let coef = least_relative_squares(&rows, LUT4_TERMS);
    println!("LUT4_COEFFICIENTS = {coef:?}");
    report("fitted LUT4s", rows.iter().map(|(x, y)| (x.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>().round(), *y)));
    let est: Vec<_> = cases.iter().map(|&(m, p)| estimate(&ecp5_design(m, p))).collect();
    report("cost.rs LUT4s", est.iter().zip(&measured).map(|(e, m)| (e.lut4.unwrap_or(0.0), m.0 as f64)));
    report("cost.rs DSPs", est.iter().zip(&measured).map(|(e, m)| (e.dsps, m.2 as f64)));
    for (i, (e, m)) in est.iter().zip(&measured).enumerate() {
        let fitted: f64 = regressors[i].iter().zip(&coef).map(|(a, b)| a * b).sum();
        println!(
            "case {i:>2} {:?} {}: LUT4s {:.0} (fit {fitted:.0}) / {}, FFs {} / {}, DSPs {} / {}",
            MATRIX[cases[i].0],
            cases[i].1.name(),
            e.lut4.unwrap_or(0.0),
            m.0,
            e.ffs,
            m.1,
            e.dsps,
            m.2
        );
    }
}

fn synthesize(work: &Path, known: Vec<Option<(u64, u64, u64)>>) -> Measured {
    let mut out = Vec::new();
    for (i, c) in MATRIX.iter().enumerate() {
        if let Some(m) = known.get(i).copied().flatten() {
            out.push(m);
            continue;
        }
        let d = design(i);
        let dir = work.join(format!("case{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        mase_hw::emit(&d, &dir).unwrap_or_else(|e| fail(format!("case {i}: {e}")));
        let t = std::time::Instant::now();
        let r = synth(&dir, SynthTarget::Xilinx).unwrap_or_else(|e| fail(format!("case {i}: {e}")));
        eprintln!("case {i} {c:?}: {} LUTs, {} FFs, {} DSPs in {:.1} s", r.luts, r.flip_flops, r.dsps, t.elapsed().as_secs_f64());
        out.push((r.luts, r.flip_flops, r.dsps));
    }
    out
}

/// The measured columns of a CSV this program wrote, by case; every case must have a line.
fn read_measured(csv: &Path) -> Measured {
    read_some(csv)
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.unwrap_or_else(|| fail(format!("{}: no line for case {i}", csv.display()))))
        .collect()
}

/// The measured columns of a CSV this program wrote, for the cases it has.
fn read_some(csv: &Path) -> Vec<Option<(u64, u64, u64)>> {
    read_some_n(csv, MATRIX.len())
}

/// The measured columns of a CSV of `n` cases, for the cases it has (none when it is missing).
fn read_some_n(csv: &Path, n: usize) -> Vec<Option<(u64, u64, u64)>> {
    if !csv.is_file() {
        return vec![None; n];
    }
    let text = std::fs::read_to_string(csv).unwrap_or_else(|e| fail(format!("{}: {e}", csv.display())));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| fail(format!("{}: no column `{name}`", csv.display())));
    let (ci, cl, cf, cd) = (col("case"), col("luts"), col("ffs"), col("dsps"));
    let mut out = vec![None; n];
    for line in lines {
        let v: Vec<&str> = line.split(',').collect();
        let num = |i: usize| {
            v.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or_else(|| fail(format!("{}: bad line `{line}`", csv.display())))
        };
        let case = num(ci) as usize;
        if case < out.len() {
            out[case] = Some((num(cl), num(cf), num(cd)));
        }
    }
    out
}

fn write_csv(csv: &Path, measured: &Measured) {
    let mut text = String::from(
        "case,in_features,out_features,bits,reuse,position,input_width,product_input_width,accumulator_width,output_width,weight_width,nonzero_weights,dsp_products,lut_product_rows,lut_multiplier_bits,addends,output_register_bits,state_register_bits,luts,ffs,dsps\n",
    );
    for (i, (c, &(luts, ffs, dsps))) in MATRIX.iter().zip(measured).enumerate() {
        let f = layer_features(&design(i).layers[0]);
        let _ = writeln!(
            text,
            "{i},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{luts},{ffs},{dsps}",
            c.in_features,
            c.out_features,
            c.bits,
            c.reuse,
            c.position.name(),
            f.input_width,
            f.product_input_width,
            f.accumulator_width,
            f.output_width,
            f.weight_width,
            f.nonzero_weights,
            f.dsp_products,
            f.lut_product_rows,
            f.lut_multiplier_bits,
            f.addends,
            f.output_register_bits,
            f.state_register_bits,
        );
    }
    std::fs::write(csv, text).unwrap_or_else(|e| fail(format!("{}: {e}", csv.display())));
}

fn fit(measured: &Measured) {
    let designs: Vec<_> = (0..MATRIX.len()).map(|i| design(i).layers.remove(0)).collect();
    let feats: Vec<_> = designs.iter().map(layer_features).collect();
    let luts: Vec<(Vec<f64>, f64)> = feats.iter().zip(measured).map(|(f, m)| (lut_regressors(f).to_vec(), m.0 as f64)).collect();
    let coef = least_relative_squares(&luts, LUT_TERMS);
    println!("LUT_COEFFICIENTS = {coef:?}");
    report("fitted LUTs", luts.iter().map(|(x, y)| (x.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>().round(), *y)));
    let ffs: Vec<(Vec<f64>, f64)> =
        feats.iter().zip(measured).map(|(f, m)| (vec![f.output_register_bits as f64, f.state_register_bits as f64], m.1 as f64)).collect();
    let fcoef = least_relative_squares(&ffs, 2);
    println!("FF_COEFFICIENTS = {fcoef:?}");
    report("fitted FFs", ffs.iter().map(|(x, y)| ((x[0] * fcoef[0] + x[1] * fcoef[1]).round(), *y)));
    let est: Vec<_> = designs.iter().map(estimate_layer).collect();
    report("cost.rs LUTs", est.iter().zip(measured).map(|(e, m)| (e.luts, m.0 as f64)));
    report("cost.rs FFs", est.iter().zip(measured).map(|(e, m)| (e.ffs, m.1 as f64)));
    report("cost.rs DSPs", est.iter().zip(measured).map(|(e, m)| (e.dsps, m.2 as f64)));
    for (i, (e, m)) in est.iter().zip(measured).enumerate() {
        println!("case {i:>2} {:?}: LUTs {} / {}, FFs {} / {}, DSPs {} / {}", MATRIX[i], e.luts, m.0, e.ffs, m.1, e.dsps, m.2);
    }
}

/// Mean and largest relative error of (estimate, measured) pairs (absolute where measured is 0).
fn report(what: &str, pairs: impl Iterator<Item = (f64, f64)>) {
    let errs: Vec<f64> = pairs.map(|(e, m)| if m == 0.0 { e.abs() } else { (e - m).abs() / m }).collect();
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    println!("{what}: mean relative error {mean:.3}, max {:.3}", errs.iter().cloned().fold(0.0, f64::max));
}

/// The coefficients minimizing the sum of squared relative errors `(x . c - y) / y`.
fn least_relative_squares(rows: &[(Vec<f64>, f64)], n: usize) -> Vec<f64> {
    let mut a = vec![vec![0.0f64; n]; n];
    let mut b = vec![0.0f64; n];
    for (x, y) in rows {
        let w = 1.0 / (y.max(1.0) * y.max(1.0));
        for i in 0..n {
            b[i] += w * x[i] * y;
            for j in 0..n {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    // Gaussian elimination with partial pivoting; a regressor that is zero everywhere gets 0.
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, piv);
        b.swap(col, piv);
        if a[col][col].abs() < 1e-12 {
            continue;
        }
        let pivot = a[col].clone();
        for row in 0..n {
            if row != col {
                let f = a[row][col] / pivot[col];
                for (x, p) in a[row].iter_mut().zip(&pivot) {
                    *x -= f * p;
                }
                b[row] -= f * b[col];
            }
        }
    }
    (0..n).map(|i| if a[i][i].abs() < 1e-12 { 0.0 } else { b[i] / a[i][i] }).collect()
}

//! `ch emit`, `ch simulate` and `ch synth` end to end: a jsc-three-layer trained on the jsc
//! fixture, quantized to 8-bit integers, emitted unrolled and folded, simulated bit-exactly.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A fresh scratch folder `name` with the jsc fixture under its `data` folder: the folder and
/// the data folder's path.
fn jsc_scratch(name: &str) -> (Scratch, String) {
    let root = scratch(name);
    let d = root.join("data");
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    (root, d.to_str().unwrap().to_string())
}

/// The `[passes.quantize]` tables of a transform config: unquantized by default, and `integer`
/// of `bits` bits, half fractional, for the `params` of each op of `ops`.
fn quantize_tables(bits: u32, ops: &[(&str, &[&str])]) -> String {
    let f = bits / 2;
    let mut text = String::from("[passes.quantize]\nby = \"type\"\n[passes.quantize.default.config]\nname = \"NA\"\n");
    for (op, params) in ops {
        text += &format!("[passes.quantize.{op}.config]\nname = \"integer\"\n");
        for p in *params {
            text += &format!("{p}_width = {bits}\n{p}_frac_width = {f}\n");
        }
    }
    text
}

/// A transform config for `model` on jsc, saved under project `project`, with `passes`.
fn write_config(dir: &Path, model: &str, project: &str, passes: &str) -> PathBuf {
    let p = dir.join(format!("{project}_{model}.toml"));
    std::fs::write(&p, format!("model = \"{model}\"\ndataset = \"jsc\"\nproject = \"{project}\"\n{passes}")).unwrap();
    p
}

const LINEAR_PARAMS: &[&str] = &["data_in", "weight", "bias"];

/// A jsc-three-layer trained `epochs` epochs on the jsc fixture in `data`; its best checkpoint.
fn train_jsc_three_layer(root: &Path, data: &str, epochs: &str) -> String {
    let args = ["--data-dir", data, "--max-epochs", epochs, "--batch-size", "64", "--learning-rate", "1e-2", "--project", "hw"];
    let t = ch_json(&[&["train", "jsc-three-layer", "jsc"][..], &args].concat(), root);
    t["best_checkpoint"].as_str().unwrap().to_string()
}

/// `ch transform` of checkpoint `best` of `model` with config `cfg`, then `ch test` of the result
/// on the jsc fixture in `data`: the transformed checkpoint and its test accuracy.
fn transform_and_test(root: &Path, model: &str, cfg: &Path, best: &str, data: &str) -> (String, f64) {
    let tr = ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--load", best, "--data-dir", data], root);
    let q = tr["checkpoint"].as_str().unwrap().to_string();
    let acc = ch_json(&["test", model, "jsc", "--load", &q, "--data-dir", data], root)["test_acc"].as_f64().unwrap();
    (q, acc)
}

/// The commands of the README's first code block in its section Hardware, each as its words
/// (a comment after two spaces and `#` left out).
fn readme_hardware_example() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = &text[text.find("\n## Hardware\n").expect("README has a section Hardware")..];
    let block = section.split("```\n").nth(1).expect("a code block in the section Hardware");
    let words = |l: &str| l.split("  #").next().unwrap_or("").split_whitespace().map(String::from).collect::<Vec<_>>();
    block.lines().map(words).filter(|w| !w.is_empty()).collect()
}

#[test]
fn emit_then_simulate_is_bit_exact_unrolled_and_folded() {
    if !have("verilator") {
        return;
    }
    // The README's first hardware example, as written, from a folder that holds the
    // repository's `configs` and `crates` as a fresh clone does.
    let root = scratch("hw-emit");
    for dir in ["configs", "crates"] {
        std::os::unix::fs::symlink(repo_root().join(dir), root.join(dir)).unwrap();
    }
    let d = "crates/io/tests/fixtures";
    for words in readme_hardware_example() {
        assert_eq!(words[0], "ch", "{words:?}");
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let r = ch_json(&args, &root);
        if args[0] == "simulate" {
            assert_eq!((r["mismatches"].as_u64(), r["samples"].as_u64()), (Some(0), Some(392)), "{args:?}: {r}");
        }
    }
    let best = "mase_output/demo/software/training_ckpts/best.ckpt";
    let q = "mase_output/demo/software/transform/transformed_ckpt/model.ckpt".to_string();
    let quant_acc = ch_json(&["test", "jsc-three-layer", "jsc", "--load", &q, "--data-dir", d], &root)["test_acc"].as_f64().unwrap();
    let mut accuracies = Vec::new();
    // One line per design: its folder, the emit flags that write it (none: the README's
    // example wrote it), latency and initiation interval in cycles (folded by 4: 4 + 1 cycles
    // per layer; by 2: 2 + 1 each for the other three layers).
    type Case<'a> = (&'a str, Option<&'a [&'a str]>, u64, f64);
    let designs: &[Case] = &[
        ("rtl_r1", None, 4, 1.0),
        ("rtl_r4", None, 20, 4.0),
        ("rtl_mixed", Some(&["--reuse", "2", "--reuse-layer", "seq_blocks_0=4"]), 14, 4.0),
    ];
    for &(folder, flags, latency, ii) in designs {
        let out = root.join(folder);
        let manifest: serde_json::Value = match flags {
            Some(flags) => ch_json(&[&["emit", "--load", &q, "-o", out.to_str().unwrap()][..], flags].concat(), &root)["manifest"].clone(),
            None => serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap(),
        };
        assert_eq!(manifest["latency_cycles"], latency, "{folder}");
        assert_eq!(manifest["input"]["element_width"], 8);
        // The cost model's estimate is the sum of its per-layer estimates.
        let layers = manifest["layers"].as_array().unwrap();
        let luts: f64 = layers.iter().map(|l| l["estimate"]["luts"].as_f64().unwrap()).sum();
        assert_eq!(manifest["estimate"]["luts"].as_f64(), Some(luts), "{folder}");
        assert!(luts > 0.0);
        let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d], &root);
        assert_eq!(s["mismatches"], 0, "{folder}: {s}");
        assert_eq!(s["samples"], 392, "{s}");
        assert_eq!((s["latency_cycles"].as_u64().unwrap(), s["initiation_interval"].as_f64().unwrap()), (latency, ii), "{folder}");
        accuracies.push(s["accuracy"].as_f64().unwrap());
    }
    // Folded and unrolled designs compute the same outputs, so the same accuracy; the trained
    // network scores well above chance (20 %) on the fixture.
    assert!(accuracies.iter().all(|&a| a == accuracies[0]), "{accuracies:?}");
    assert!(accuracies[0] > 0.4, "{accuracies:?}, fake-quant test accuracy {quant_acc}");
    // Random samples and back-pressure: still bit-exact.
    let mixed = root.join("rtl_mixed");
    let mixed = mixed.to_str().unwrap();
    let s = ch_json(&["simulate", mixed, "--random", "64", "--stall-seed", "9"], &root);
    assert_eq!(s["mismatches"], 0, "{s}");
    // The first samples of a split only.
    let s = ch_json(&["simulate", mixed, "--data-dir", d, "--samples", "10"], &root);
    assert_eq!((s["mismatches"].as_u64(), s["samples"].as_u64()), (Some(0), Some(10)), "{s}");
    for (args, want) in [
        (&["--samples", "0"][..], "error: --samples: expected at least 1 sample"),
        (&["--random", "4", "--samples", "2"][..], "error: --samples picks samples of a data split; --random N already says how many"),
    ] {
        assert_eq!(ch_error(&[&["simulate", mixed, "--data-dir", d][..], args].concat(), &root), want);
    }
    // Pipelined for two clocks: more cycles of latency, the same initiation interval and
    // outputs, on the data split and under back-pressure.
    for (clock, reuse, ii) in [("200", "1", 1.0), ("100", "2", 2.0)] {
        let out = root.join(format!("rtl_{clock}"));
        let e = ch_json(&["emit", "--load", &q, "-o", out.to_str().unwrap(), "--clock-mhz", clock, "--reuse", reuse], &root);
        let latency = e["manifest"]["latency_cycles"].as_u64().unwrap();
        assert!(latency > 4, "{clock} MHz: {latency} cycles");
        assert_eq!(e["manifest"]["clock_mhz"].as_f64(), Some(clock.parse().unwrap()));
        let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d], &root);
        assert_eq!((s["mismatches"].as_u64(), s["accuracy"].as_f64()), (Some(0), Some(accuracies[0])), "{clock} MHz: {s}");
        assert_eq!((s["latency_cycles"].as_u64(), s["initiation_interval"].as_f64()), (Some(latency), Some(ii)), "{clock} MHz");
        let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d, "--stall-seed", "3"], &root);
        assert_eq!(s["mismatches"], 0, "{clock} MHz under back-pressure: {s}");
    }
    // Fitted to the LFE5U-85F with multipliers in MULT18X18Ds: with multipliers only, every
    // layer would be folded to one multiplier per output (64 + 32 + 32 + 5 = 133 DSPs,
    // interval 64); with shift-adds in LUTs every layer folded by 8 fits (interval 8): the
    // first three layers' (20 of 156 DSPs, the last layer's; about 52,000 of the 62,730 LUT4s
    // three quarters of the part allow, by the LUT4 model), bit-exact under back-pressure.
    let fit = ["--clock-mhz", "200", "--multipliers", "ecp5-dsp"];
    let out = root.join("rtl_fit");
    let e = ch_json(&[&["emit", "--load", &q, "-o", out.to_str().unwrap(), "--part", "ecp5-85f"][..], &fit].concat(), &root);
    assert_eq!(
        (e["fit"]["part"].as_str(), e["fit"]["dsps"].as_u64(), e["fit"]["available"]["dsps"].as_u64()),
        (Some("LFE5U-85F"), Some(20), Some(156)),
        "{e}"
    );
    assert_eq!(e["fit"]["shift_add"], serde_json::json!(["seq_blocks_0", "seq_blocks_2", "seq_blocks_4"]), "{e}");
    assert_eq!(e["manifest"]["estimate"]["dsps"].as_f64(), Some(20.0));
    // The fit's LUT4s are the LUT4 model's (Yosys's count before placement) times the
    // placement's 1.35.
    let lut4 = e["manifest"]["estimate"]["lut4"].as_f64().unwrap();
    assert_eq!(e["fit"]["luts"].as_f64(), Some((lut4 * mase_hw::fit::PLACED_PER_SYNTHESIZED_LUT4).round()), "{e}");
    // The part is recorded, for `ch synth --target ecp5` to place the design on.
    assert_eq!(e["manifest"]["part"], "LFE5U-85F");
    let layers = e["manifest"]["layers"].as_array().unwrap();
    let reuse: Vec<u64> = layers.iter().map(|l| l["reuse_factor"].as_u64().unwrap()).collect();
    assert_eq!((reuse, e["manifest"]["initiation_interval"].as_u64()), (vec![8, 8, 8, 8], Some(8)));
    let products: Vec<&str> = layers.iter().map(|l| l["products"].as_str().unwrap()).collect();
    assert_eq!(products, ["shift-add", "shift-add", "shift-add", "multipliers"]);
    let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d, "--samples", "100", "--stall-seed", "5"], &root);
    assert_eq!((s["mismatches"].as_u64(), s["samples"].as_u64()), (Some(0), Some(100)), "{s}");
    // Within three quarters of the 45F (54 of its 72 DSPs, the default fill): the first two
    // layers as shift-adds, all but the first folded by 32; within all of it, interval 16 with
    // the first three as shift-adds.
    let e =
        ch_json(&[&["emit", "--load", &q, "-o", root.join("rtl_fit45").to_str().unwrap(), "--part", "ecp5-45f"][..], &fit].concat(), &root);
    let reuse: Vec<u64> = e["manifest"]["layers"].as_array().unwrap().iter().map(|l| l["reuse_factor"].as_u64().unwrap()).collect();
    assert_eq!((e["fit"]["dsps"].as_u64(), reuse, e["fit"]["fill_percent"].as_u64()), (Some(37), vec![16, 32, 32, 32], Some(75)), "{e}");
    assert_eq!(e["fit"]["shift_add"], serde_json::json!(["seq_blocks_0", "seq_blocks_2"]), "{e}");
    assert_eq!(e["manifest"]["part"], "LFE5U-45F");
    let full = ["--part", "ecp5-45f", "--fill", "100"];
    let e = ch_json(&[&["emit", "--load", &q, "-o", root.join("rtl_fit45_full").to_str().unwrap()][..], &full, &fit].concat(), &root);
    let reuse: Vec<u64> = e["manifest"]["layers"].as_array().unwrap().iter().map(|l| l["reuse_factor"].as_u64().unwrap()).collect();
    assert_eq!((e["fit"]["dsps"].as_u64(), reuse, e["fit"]["fill_percent"].as_u64()), (Some(10), vec![16, 16, 16, 16], Some(100)), "{e}");
    assert_eq!(e["fit"]["shift_add"], serde_json::json!(["seq_blocks_0", "seq_blocks_2", "seq_blocks_4"]), "{e}");
    for (args, want) in [
        (
            &["--part", "ecp5-25f"][..],
            "error: the design does not fit the LFE5U-25F: with every free layer folded as far as it goes, it needs 133 DSPs of 21 (112 over) and about 23925 LUT4s of 18216 (5709 over); with shift-add products in every free layer, about 30042 LUT4s of 18216 (11826 over) (the limits are 75 % of the part's 28 DSPs and 24288 LUT4s, `--fill`)",
        ),
        (&["--part", "ecp5-45f", "--fill", "0"][..], "error: --fill `0`: expected a share of the part in percent, 1 to 100, not 0"),
        (&["--fill", "80"][..], "error: --fill `80`: a fill is a share of the part that --part names; give --part too"),
        (&["--part", "xc7a35t"][..], "error: --part `xc7a35t`: expected ecp5-25f, ecp5-45f or ecp5-85f (an ECP5 LFE5U part)"),
        (&["--part", "ecp5-85f", "--reuse", "2"][..], "error: --reuse and --part both set every layer's reuse factor: give one (--reuse-layer fixes single layers under --part)"),
        (&["--shift-add", "seq_blocks_9"][..], "error: node `seq_blocks_9`: shift-add products: not a linear layer of the design"),
    ] {
        let line = ch_error(&[&["emit", "--load", &q, "-o", root.join("bad").to_str().unwrap()][..], &fit, args].concat(), &root);
        assert_eq!(line, want, "{args:?}");
    }
    let line = ch_error(&["emit", "--load", &q, "-o", root.join("bad").to_str().unwrap(), "--shift-add", "seq_blocks_0"], &root);
    assert_eq!(line, "error: node `seq_blocks_0`: shift-add products need a pipelined design (a clock_mhz)");
    let line = ch_error(&["emit", "--load", &q, "-o", root.join("bad").to_str().unwrap(), "--clock-mhz", "5000"], &root);
    assert_eq!(line, "error: clock_mhz 5000: expected a frequency from 1 to 1000 MHz");
    let line =
        ch_error(&["emit", "--load", &q, "-o", root.join("bad").to_str().unwrap(), "--clock-mhz", "200", "--multipliers", "lut"], &root);
    assert_eq!(line, "error: --multipliers `lut`: expected one of inferred, ecp5-dsp");
    // Errors are one line.
    let line = ch_error(&["emit", "--load", &q, "-o", root.join("bad").to_str().unwrap(), "--reuse", "3"], &root);
    assert_eq!(line, "error: node `seq_blocks_0`: reuse factor 3 does not divide its 16 inputs per output");
    let line = ch_error(&["emit", "--load", best, "-o", root.join("bad").to_str().unwrap()], &root);
    assert!(line.starts_with("error: the graph is not integer end to end: seq_blocks_0 (linear): not quantized;"), "{line}");
    // A truncated manifest: `ch simulate` and `ch synth` refuse the folder.
    let dir = root.join("rtl_mixed");
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    std::fs::write(dir.join("manifest.json"), &text[..text.len() / 2]).unwrap();
    let want = format!(
        "error: {}: differs from its checksum in SHA256SUMS (the folder was edited or damaged; emit the design again)",
        dir.join("manifest.json").display()
    );
    for cmd in ["simulate", "synth"] {
        assert_eq!(ch_error(&[cmd, dir.to_str().unwrap(), "--data-dir", d][..if cmd == "synth" { 2 } else { 4 }], &root), want, "{cmd}");
    }
    assert_eq!(ch_error(&["synth", dir.to_str().unwrap(), "--target", "ecp5"], &root), want, "synth --target ecp5");
    // The options of `--target ecp5`, one line each, before any tool runs.
    let cases: &[(&[&str], &str)] = &[
        (&["--target", "ecp5", "--part", "12f"], "error: --part `12f`: expected 25f, 45f or 85f (an ECP5 LFE5U part)"),
        (&["--part", "85f"], "error: --part, --seed and --timeout-minutes are options of --target ecp5, not of --target xilinx"),
        (
            &["--target", "generic", "--timeout-minutes", "5"],
            "error: --part, --seed and --timeout-minutes are options of --target ecp5, not of --target generic",
        ),
        (&["--target", "ecp5", "--timeout-minutes", "0"], "error: --timeout-minutes: expected at least 1 minute"),
        (&["--target", "vivado"], "error: --target `vivado`: expected xilinx, generic, all or ecp5"),
    ];
    let pipelined = root.join("rtl_200");
    for (flags, want) in cases {
        let args: Vec<&str> = ["synth", pipelined.to_str().unwrap()].into_iter().chain(flags.iter().copied()).collect();
        assert_eq!(ch_error(&args, &root), *want, "{flags:?}");
    }
}

#[test]
fn search_with_the_rtl_runner_draws_accuracy_against_luts() {
    let (root, data) = jsc_scratch("hw-search");
    let d = data.as_str();
    let best = train_jsc_three_layer(&root, d, "4");
    let cfg = repo_root().join("configs/jsc_three_layer_hw_search.toml");
    let r = ch_json(&["search", "--config", cfg.to_str().unwrap(), "--data-dir", d, "--load", &best], &root);
    // Formats (3 x 3) times reuse factors (5), each tried once.
    assert_eq!((r["studies"][0]["complete"].as_u64(), r["studies"][0]["stop"].as_str()), (Some(45), Some("completed")), "{r}");
    let dir = root.join("mase_output/jsc_three_layer_hw_search/software/search_ckpts");
    for f in ["pareto.png", "pareto.svg", "trials.csv", "best.json"] {
        assert!(dir.join(f).exists(), "{f} is written");
    }
    let svg = std::fs::read_to_string(dir.join("pareto.svg")).unwrap();
    assert!(svg.contains("accuracy") && svg.contains("luts"), "the axes name the two objectives");
    // Every trial on the front carries the five hardware metrics; the front trades accuracy for
    // LUTs, so its trials differ in LUTs.
    let best: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("best.json")).unwrap()).unwrap();
    let front: Vec<&serde_json::Value> = best.as_object().unwrap().values().collect();
    assert!(!front.is_empty());
    let mut luts = Vec::new();
    for t in &front {
        let hw = &t["hardware_metrics"];
        for m in ["luts", "ffs", "dsps", "latency_cycles", "ii"] {
            assert!(hw[m].is_number(), "{m} in {t}");
        }
        luts.push(hw["luts"].as_f64().unwrap());
    }
    luts.sort_by(f64::total_cmp);
    luts.dedup();
    assert_eq!(luts.len(), front.len(), "{luts:?}");
}

/// A transform config folding the batch norms of `model`, then quantizing its linears and the
/// batch norms left to `integer` of `bits` bits, half fractional (the batch norms' weight and
/// bias formats derived from their values).
fn fold_config(dir: &Path, model: &str, bits: u32) -> PathBuf {
    let quantize = quantize_tables(bits, &[("batch_norm1d", &["data_in"]), ("linear", LINEAR_PARAMS)]);
    write_config(dir, model, &format!("fold{bits}"), &format!("[passes.fold_batch_norm]\n{quantize}"))
}

#[test]
fn models_with_batch_norms_are_folded_emitted_and_simulated_with_the_accuracy_of_ch_test() {
    if !have("verilator") {
        return;
    }
    let (root, data) = jsc_scratch("hw-fold");
    let d = data.as_str();
    // One line per model: the emit flags of its folded design, the latency of the unrolled and
    // the folded design (jsc-tiny: one layer, 4 + 1 cycles folded; jsc-toy: three layers of
    // 2 + 1 cycles).
    let cases: &[(&str, &[&str], u64, u64)] = &[("jsc-tiny", &["--reuse", "4"], 1, 5), ("jsc-toy", &["--reuse", "2"], 3, 9)];
    for &(model, flags, unrolled, folded) in cases {
        let t = ch_json(&["train", model, "jsc", "--data-dir", d, "--max-epochs", "2", "--project", model], &root);
        let best = t["best_checkpoint"].as_str().unwrap().to_string();
        let (q, test_acc) = transform_and_test(&root, model, &fold_config(&root, model, 8), &best, d);
        for (i, (flags, latency)) in [(&[][..], unrolled), (flags, folded)].into_iter().enumerate() {
            let out = root.join(format!("rtl_{model}_{i}"));
            let e = ch_json(&[&["emit", "--load", &q, "-o", out.to_str().unwrap()][..], flags].concat(), &root);
            assert_eq!(e["manifest"]["latency_cycles"], latency, "{model} {flags:?}");
            let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d], &root);
            assert_eq!((s["mismatches"].as_u64(), s["samples"].as_u64()), (Some(0), Some(392)), "{model} {flags:?}: {s}");
            // The simulated outputs score what `ch test` measures on the same checkpoint.
            assert_eq!(s["accuracy"].as_f64(), Some(test_acc), "{model} {flags:?}");
        }
    }
    // The float checkpoint (batch norms with running statistics) is refused in one line.
    let best = root.join("mase_output/jsc-toy/software/training_ckpts/best.ckpt");
    let line = ch_error(&["emit", "--load", best.to_str().unwrap(), "-o", root.join("bad").to_str().unwrap()], &root);
    assert!(line.starts_with("error: the graph is not integer end to end: seq_blocks_0 (batch_norm1d): not quantized;"), "{line}");
}

/// `emit_verilog` in a transform pipeline writes the folder `ch emit` writes from the saved
/// checkpoint, byte for byte; its report has the keys `ch transform --list-passes --json` lists;
/// bad keys are one-line errors.
#[test]
fn the_emit_verilog_pass_writes_what_ch_emit_writes() {
    let (root, data) = jsc_scratch("hw-emit-pass");
    let d = data.as_str();
    let t = ch_json(&["train", "jsc-toy", "jsc", "--data-dir", d, "--max-epochs", "1", "--project", "toy"], &root);
    let best = t["best_checkpoint"].as_str().unwrap().to_string();
    let base = std::fs::read_to_string(fold_config(&root, "jsc-toy", 8)).unwrap();
    let write = |name: &str, emit: &str| {
        let p = root.join(name);
        std::fs::write(&p, format!("{base}[passes.emit_verilog]\n{emit}\n")).unwrap();
        p.to_str().unwrap().to_string()
    };
    // One line per table: its keys, the folder it writes (relative to the project's output
    // folder when no `output_dir`), and the `ch emit` flags that write the same design.
    let cases: &[(&str, &str, &[&str])] = &[
        ("", "mase_output/fold8/hardware", &[]),
        (
            "output_dir = \"rtl_pass\"\nreuse = 2\nreuse_layer = { seq_blocks_2 = 16 }",
            "rtl_pass",
            &["--reuse", "2", "--reuse-layer", "seq_blocks_2=16"],
        ),
        ("output_dir = \"rtl_clock\"\nreuse = 2\nclock_mhz = 150", "rtl_clock", &["--reuse", "2", "--clock-mhz", "150"]),
        (
            "output_dir = \"rtl_dsp\"\nclock_mhz = 200\nmultipliers = \"ecp5-dsp\"",
            "rtl_dsp",
            &["--clock-mhz", "200", "--multipliers", "ecp5-dsp"],
        ),
        (
            "output_dir = \"rtl_part\"\nclock_mhz = 200\nmultipliers = \"ecp5-dsp\"\npart = \"ecp5-45f\"\nfill = 90",
            "rtl_part",
            &["--clock-mhz", "200", "--multipliers", "ecp5-dsp", "--part", "ecp5-45f", "--fill", "90"],
        ),
        (
            "output_dir = \"rtl_shift_add\"\nreuse = 4\nclock_mhz = 200\nshift_add = [\"seq_blocks_2\"]",
            "rtl_shift_add",
            &["--reuse", "4", "--clock-mhz", "200", "--shift-add", "seq_blocks_2"],
        ),
    ];
    for (i, &(keys, dir, flags)) in cases.iter().enumerate() {
        let cfg = write(&format!("emit{i}.toml"), keys);
        let tr = ch_json(&["transform", "--config", &cfg, "--load", &best, "--data-dir", d], &root);
        let step = tr["passes"].as_array().unwrap().iter().find(|p| p["name"] == "emit_verilog").unwrap().clone();
        let report = &step["report"];
        let q = tr["checkpoint"].as_str().unwrap().to_string();
        let out = root.join(format!("by_ch_emit{i}"));
        let e = ch_json(&[&["emit", "--load", &q, "-o", out.to_str().unwrap()][..], flags].concat(), &root);
        assert_eq!(report["latency_cycles"], e["manifest"]["latency_cycles"], "{keys}");
        assert_eq!(report["estimate"], e["manifest"]["estimate"], "{keys}");
        assert_eq!(report["fit"], e["fit"], "{keys}");
        for f in ["rtl/mase_top.v", "rtl/mase_seq_blocks_2.v", "manifest.json", "design.json", "tb/tb.cpp"] {
            let a = std::fs::read(root.join(dir).join(f)).unwrap_or_else(|e| panic!("{dir}/{f}: {e}"));
            assert!(a == std::fs::read(out.join(f)).unwrap(), "{keys}: {f} differs from ch emit's");
        }
    }
    // The folded design: its first layer, seq_blocks_2 (16 inputs), by 16; the others by 2.
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join("rtl_pass/manifest.json")).unwrap()).unwrap();
    let reuse: Vec<u64> = m["layers"].as_array().unwrap().iter().map(|l| l["reuse_factor"].as_u64().unwrap()).collect();
    assert_eq!(reuse, [16, 2, 2]);
    // The report's keys are those listed for the pass.
    let list = ch_json(&["transform", "--list-passes"], &root);
    let info = list["passes"].as_array().unwrap().iter().find(|p| p["name"] == "emit_verilog").unwrap().clone();
    let listed: Vec<&str> = info["report"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    let cfg = write("emit_json.toml", "");
    let tr = ch_json(&["transform", "--config", &cfg, "--load", &best, "--data-dir", d], &root);
    let report = tr["passes"].as_array().unwrap().iter().find(|p| p["name"] == "emit_verilog").unwrap()["report"].clone();
    let mut have: Vec<String> = Vec::new();
    for (k, v) in report.as_object().unwrap() {
        have.push(k.clone());
        if let Some(o) = v.as_object() {
            have.extend(o.keys().map(|s| format!("{k}.{s}")));
        }
        if let Some(first) = v.as_array().and_then(|a| a.first()).and_then(|x| x.as_object()) {
            have.extend(first.keys().map(|s| format!("{k}[].{s}")));
        }
    }
    have.sort();
    let mut listed: Vec<String> = listed.into_iter().map(String::from).collect();
    listed.sort();
    assert_eq!(have, listed);
    // Errors are one line naming the pass and the key.
    let errors: &[(&str, &str)] = &[
        (
            "reuse_factor = 2",
            "error: pass `emit_verilog`: bad arguments: unknown field `reuse_factor`, expected one of `output_dir`, `reuse`, `reuse_layer`, `clock_mhz`, `multipliers`, `part`, `shift_add`, `fill`",
        ),
        ("part = \"ecp5-85f\"\nfill = 120", "error: pass `emit_verilog`: fill `120`: expected a share of the part in percent, 1 to 100, not 120"),
        ("fill = 50", "error: pass `emit_verilog`: fill `50`: a fill is a share of the part that part names; give part too"),
        ("multipliers = \"dsp\"", "error: pass `emit_verilog`: multipliers `dsp`: expected one of inferred, ecp5-dsp"),
        ("multipliers = \"ecp5-dsp\"", "error: pass `emit_verilog`: multipliers ecp5-dsp: needs a pipelined design (a clock_mhz)"),
        ("clock_mhz = 0", "error: pass `emit_verilog`: clock_mhz 0: expected a frequency from 1 to 1000 MHz"),
        ("part = \"85k\"", "error: pass `emit_verilog`: part `85k`: expected ecp5-25f, ecp5-45f or ecp5-85f (an ECP5 LFE5U part)"),
        (
            "reuse = 2\npart = \"ecp5-85f\"",
            "error: pass `emit_verilog`: reuse and part both set every layer's reuse factor: give one (reuse_layer fixes single layers under part)",
        ),
        ("reuse = 0", "error: pass `emit_verilog`: reuse: expected a positive integer, got 0"),
        ("reuse_layer = { nope = 2 }", "error: pass `emit_verilog`: reuse_layer `nope=2`: the model has no node `nope`"),
        ("reuse = 3", "error: pass `emit_verilog`: node `seq_blocks_2`: reuse factor 3 does not divide its 16 inputs per output"),
    ];
    for (i, &(keys, want)) in errors.iter().enumerate() {
        let cfg = write(&format!("bad{i}.toml"), keys);
        assert_eq!(ch_error(&["transform", "--config", &cfg, "--load", &best, "--data-dir", d], &root), want, "{keys}");
    }
}

/// A hardware search's `best.json` to RTL: its `sampled_config` under `[passes.quantize]` (by
/// name, `null` formats as "NA") sets each layer's formats and, from the `hardware` tables, its
/// reuse factor in the node's metadata, which `emit_verilog` (and `ch emit`) build.
#[test]
fn the_reuse_factors_a_search_samples_are_emitted() {
    let (root, data) = jsc_scratch("hw-search-emit");
    let d = data.as_str();
    let t = ch_json(&["train", "jsc-three-layer", "jsc", "--data-dir", d, "--max-epochs", "2", "--project", "hw"], &root);
    let best = t["best_checkpoint"].as_str().unwrap().to_string();
    let cfg = repo_root().join("configs/jsc_three_layer_hw_search.toml");
    ch_json(&["search", "--config", cfg.to_str().unwrap(), "--data-dir", d, "--load", &best], &root);
    let dir = root.join("mase_output/jsc_three_layer_hw_search/software/search_ckpts");
    let front: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("best.json")).unwrap()).unwrap();
    for (i, trial) in front.as_object().unwrap().values().enumerate() {
        let mut sampled = trial["sampled_config"].clone();
        // TOML has no null: MASE's `None` format is "NA".
        for entry in sampled.as_object_mut().unwrap().values_mut() {
            if entry["config"]["name"].is_null() {
                entry["config"]["name"] = "NA".into();
            }
        }
        sampled["by"] = "name".into();
        let table = serde_json::json!({"passes": {"quantize": sampled, "emit_verilog": {"output_dir": format!("rtl{i}")}}});
        let text: toml::Value = serde_json::from_value(table).unwrap();
        let path = root.join(format!("best{i}.toml"));
        std::fs::write(&path, toml::to_string(&text).unwrap()).unwrap();
        let tr = ch_json(&["transform", "jsc-three-layer", "--config", path.to_str().unwrap(), "--load", &best, "--data-dir", d], &root);
        let report = &tr["passes"].as_array().unwrap().iter().find(|p| p["name"] == "emit_verilog").unwrap()["report"];
        // The schedule and the estimate are the ones the search's `hw_runner.rtl` measured.
        let hw = &trial["hardware_metrics"];
        assert_eq!(report["initiation_interval"].as_f64(), hw["ii"].as_f64(), "{trial}");
        assert_eq!(report["latency_cycles"].as_f64(), hw["latency_cycles"].as_f64(), "{trial}");
        assert_eq!(report["estimate"]["luts"].as_f64(), hw["luts"].as_f64(), "{trial}");
        for layer in report["layers"].as_array().unwrap() {
            let node = layer["node"].as_str().unwrap();
            assert_eq!(layer["reuse_factor"], trial["sampled_config"][node]["hardware"]["reuse_factor"], "{node}");
        }
        // `ch emit` of the transformed checkpoint reads the same reuse factors from the nodes.
        let q = tr["checkpoint"].as_str().unwrap().to_string();
        let e = ch_json(&["emit", "--load", &q, "-o", root.join(format!("emit{i}")).to_str().unwrap()], &root);
        assert_eq!(e["manifest"]["initiation_interval"].as_f64(), hw["ii"].as_f64(), "{trial}");
    }
    // A bad hardware key in a quantize entry is one line.
    let bad = root.join("bad.toml");
    std::fs::write(
        &bad,
        "[passes.quantize]\nby = \"name\"\n[passes.quantize.seq_blocks_0.config]\nname = \"integer\"\n[passes.quantize.seq_blocks_0.hardware]\nreuse = 4\n",
    )
    .unwrap();
    let line = ch_error(&["transform", "jsc-three-layer", "--config", bad.to_str().unwrap(), "--load", &best, "--data-dir", d], &root);
    assert_eq!(line, "error: pass `quantize`: bad arguments: `seq_blocks_0.hardware.reuse`: unknown key (expected one of: reuse_factor)");
}

/// `configs/tfc_int4_emit_verilog.toml` runs as its comment says: tfc's batch norms folded, its
/// linears at 4 bits and the design written under the project's output folder, every layer
/// folded by 16 (latency 4 x (16 + 1) cycles, one sample every 16).
#[test]
fn the_tfc_emit_config_writes_the_folded_design() {
    let root = scratch("hw-tfc-config");
    let cfg = repo_root().join("configs/tfc_int4_emit_verilog.toml");
    let data = repo_root().join("data");
    let tr = ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &root);
    let report = &tr["passes"].as_array().unwrap().iter().find(|p| p["name"] == "emit_verilog").unwrap()["report"];
    assert_eq!((report["latency_cycles"].as_u64(), report["initiation_interval"].as_u64()), (Some(68), Some(16)), "{report}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("mase_output/tfc/hardware/manifest.json")).unwrap()).unwrap();
    assert_eq!((m["input"]["elements"].as_u64(), m["input"]["element_width"].as_u64()), (Some(784), Some(4)));
    assert_eq!(m["layers"].as_array().unwrap().len(), 4, "three batch norms folded, four linear layers");
}

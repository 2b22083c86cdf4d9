"""Writes small jet-substructure (JSC) fixtures in the three formats mase-io reads, into
crates/io/tests/fixtures/jsc/:

- jsc_fixture.h5: MASE's HDF5 layout, a gzip-chunked compound table `t_allpar_new` with the 16 named
  float32 features and the 5 one-hot int32 label fields (j_g, j_q, j_w, j_z, j_t);
- jsc_missing_column.h5: the same layout without the j_t column (for the error message test);
- hls4ml_lhc_jets_hlf.csv and hls4ml_lhc_jets_hlf.arff: the same rows in OpenML's form (data set
  42468), the class as a letter g, q, t, w or z.

The rows are synthetic (no real JSC data is public in small files) but class-dependent, so that a
model can learn them: each class has its own mean per feature, plus Gaussian noise. Some rows are
exact duplicates of earlier rows (MASE drops them), one only differs by -0.0 vs 0.0 (also a duplicate
for pandas), and one repeats a row's features with another label (not a duplicate).

When pandas and scikit-learn can be imported, the script also runs MASE's own preprocessing
(doc/mase-semantics.md#data-jsc: DataFrame, drop_duplicates, train_test_split(test_size=0.2,
random_state=42), StandardScaler fitted on the training part) on the HDF5 file and writes the result
as mase_reference.f32 (little-endian float32: X_test rows, then X_train_val rows) and
mase_reference.json (sizes, labels, library versions), which the Rust tests compare bit for bit.

Run: /work/pyenv/bin/python scripts/make_jsc_fixtures.py
(with PYTHONPATH pointing at a folder holding pandas and scikit-learn for the reference files).
"""
import json
import pathlib

import h5py
import numpy as np

FEATURES = ["j_zlogz", "j_c1_b0_mmdt", "j_c1_b1_mmdt", "j_c1_b2_mmdt", "j_c2_b1_mmdt", "j_c2_b2_mmdt",
            "j_d2_b1_mmdt", "j_d2_b2_mmdt", "j_d2_a1_b1_mmdt", "j_d2_a1_b2_mmdt", "j_m2_b1_mmdt",
            "j_m2_b2_mmdt", "j_n2_b1_mmdt", "j_n2_b2_mmdt", "j_mass_mmdt", "j_multiplicity"]
LABELS = ["j_g", "j_q", "j_w", "j_z", "j_t"]
LETTERS = ["g", "q", "w", "z", "t"]  # OpenML letter of each MASE class index
N_UNIQUE = 1958
OUT = pathlib.Path(__file__).resolve().parent.parent / "crates" / "io" / "tests" / "fixtures" / "jsc"


def make_rows():
    r = np.random.default_rng(2024)
    cls = r.integers(0, 5, N_UNIQUE)
    means = r.normal(0.0, 1.0, (5, 16))
    x = means[cls] + r.normal(0.0, 0.8, (N_UNIQUE, 16))
    # A multiplicity-like count that grows with the class index.
    x[:, 15] = r.poisson(12 + 6 * cls)
    x = np.round(x, 3).astype(np.float32)
    x[5, 3] = 0.0
    rows = [(x[i], int(cls[i])) for i in range(N_UNIQUE)]
    # Exact duplicates of earlier rows, inserted after them.
    dup_src = r.choice(np.arange(1, N_UNIQUE // 2), size=40, replace=False)
    for k, s in enumerate(sorted(dup_src)):
        rows.insert(int(s) + 1 + k * 20, (x[s].copy(), int(cls[s])))
    # -0.0 equals 0.0 for pandas, so this row is a duplicate of row 5 as well.
    neg = x[5].copy()
    neg[3] = np.float32(-0.0)
    rows.insert(900, (neg, int(cls[5])))
    # Same features as row 7 with another label: not a duplicate.
    rows.insert(1000, (x[7].copy(), (int(cls[7]) + 1) % 5))
    return rows


def write_h5(rows, path):
    dt = np.dtype([(f, "<f4") for f in FEATURES] + [(l, "<i4") for l in LABELS])
    a = np.zeros(len(rows), dtype=dt)
    for i, (x, c) in enumerate(rows):
        for j, f in enumerate(FEATURES):
            a[i][f] = x[j]
        a[i][LABELS[c]] = 1
    with h5py.File(path, "w") as h:
        h.create_dataset("t_allpar_new", data=a, chunks=(256,), compression="gzip")


def write_h5_missing_column(path):
    """A table in MASE's layout that lacks the label column j_t, for the error test."""
    dt = np.dtype([(f, "<f4") for f in FEATURES] + [(l, "<i4") for l in LABELS[:4]])
    with h5py.File(path, "w") as h:
        h.create_dataset("t_allpar_new", data=np.zeros(3, dtype=dt))


def fmt(v):
    # numpy prints the shortest decimal that reads back as the same float32.
    return str(np.float32(v))


def write_csv(rows, path):
    with open(path, "w") as f:
        f.write(",".join(FEATURES + ["class"]) + "\n")
        for x, c in rows:
            f.write(",".join(fmt(v) for v in x) + "," + LETTERS[c] + "\n")


def write_arff(rows, path):
    with open(path, "w") as f:
        f.write("% Synthetic rows in the layout of OpenML data set 42468 (hls4ml_lhc_jets_hlf)\n")
        f.write("@relation hls4ml_lhc_jets_hlf\n\n")
        for n in FEATURES:
            f.write(f"@attribute {n} numeric\n")
        f.write("@attribute class {g,q,t,w,z}\n\n@data\n")
        for x, c in rows:
            f.write(",".join(fmt(v) for v in x) + ",'" + LETTERS[c] + "'\n")


def write_mase_reference(h5_path):
    try:
        import pandas as pd
        import sklearn
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler
    except ImportError:
        print("pandas/scikit-learn not importable: mase_reference.* not rewritten")
        return
    with h5py.File(h5_path, "r") as h:
        tree = h["t_allpar_new"][()]
    df = pd.DataFrame(tree, columns=list(set(FEATURES + LABELS)))
    n_raw = len(df)
    df = df.drop_duplicates()
    x, y = df[FEATURES].values, df[LABELS].values
    x_tv, x_te, y_tv, y_te = train_test_split(x, y, test_size=0.2, random_state=42)
    scaler = StandardScaler().fit(x_tv)
    x_tv, x_te = scaler.transform(x_tv), scaler.transform(x_te)
    assert x_tv.dtype == np.float32, x_tv.dtype
    np.concatenate([x_te, x_tv]).astype("<f4").tofile(OUT / "mase_reference.f32")
    meta = {
        "n_raw": n_raw,
        "n_unique": len(df),
        "n_test": len(x_te),
        "n_train_val": len(x_tv),
        "y_test": np.argmax(y_te, 1).tolist(),
        "y_train_val": np.argmax(y_tv, 1).tolist(),
        "scaler_mean": scaler.mean_.tolist(),
        "scaler_scale": scaler.scale_.tolist(),
        "versions": {"numpy": np.__version__, "pandas": pd.__version__, "sklearn": sklearn.__version__},
    }
    (OUT / "mase_reference.json").write_text(json.dumps(meta) + "\n")
    print("reference:", {k: meta[k] for k in ("n_raw", "n_unique", "n_test", "n_train_val", "versions")})


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rows = make_rows()
    write_h5(rows, OUT / "jsc_fixture.h5")
    write_h5_missing_column(OUT / "jsc_missing_column.h5")
    write_csv(rows, OUT / "hls4ml_lhc_jets_hlf.csv")
    write_arff(rows, OUT / "hls4ml_lhc_jets_hlf.arff")
    write_mase_reference(OUT / "jsc_fixture.h5")
    print(len(rows), "rows; class counts", np.bincount([c for _, c in rows], minlength=5).tolist())


if __name__ == "__main__":
    main()

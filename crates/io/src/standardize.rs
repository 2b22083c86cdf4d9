//! scikit-learn's `StandardScaler`: per-feature mean and population standard deviation of a fitting
//! set, with sklearn's float64 accumulation and its rule that (near-)constant features keep scale 1.

/// Fitted per-feature statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Standardizer {
    pub mean: Vec<f64>,
    /// Standard deviation, or 1 for features sklearn deems constant.
    pub scale: Vec<f64>,
}

impl Standardizer {
    /// Fits on rows of f32 values, accumulating in f64 as sklearn does for float32 input
    /// (`_incremental_mean_and_var`: the corrected two-pass algorithm of Chan, Golub and LeVeque).
    pub fn fit_f32(rows: &[&[f32]], features: usize) -> Standardizer {
        fit(rows.len(), features, |i, j| rows[i][j] as f64)
    }

    /// Fits on rows of f64 values.
    pub fn fit_f64(rows: &[&[f64]], features: usize) -> Standardizer {
        fit(rows.len(), features, |i, j| rows[i][j])
    }

    /// Standardises one f32 row the way sklearn's `transform` does on a float32 array: the fitted
    /// mean and scale are cast to f32 and both steps run in f32 (`X -= mean_.astype(X.dtype)`;
    /// `X /= scale_.astype(X.dtype)`). Checked bit for bit against scikit-learn 1.9 in the jsc tests.
    /// Older scikit-learn releases subtracted the float64 statistics before rounding, which can
    /// differ in the last bit.
    pub fn transform_f32(&self, row: &[f32], out: &mut [f32]) {
        for (j, (o, &v)) in out.iter_mut().zip(row).enumerate() {
            *o = (v - self.mean[j] as f32) / self.scale[j] as f32;
        }
    }

    /// Standardises one f64 row, rounding to f32 once at the end.
    pub fn transform_f64(&self, row: &[f64], out: &mut [f32]) {
        for (j, (o, &v)) in out.iter_mut().zip(row).enumerate() {
            *o = ((v - self.mean[j]) / self.scale[j]) as f32;
        }
    }
}

fn fit(n: usize, features: usize, at: impl Fn(usize, usize) -> f64) -> Standardizer {
    let nf = n as f64;
    let mut mean = vec![0f64; features];
    let mut scale = vec![1f64; features];
    if n == 0 {
        return Standardizer { mean, scale };
    }
    for j in 0..features {
        let sum: f64 = (0..n).map(|i| at(i, j)).sum();
        let m = sum / nf;
        let (mut correction, mut sq) = (0f64, 0f64);
        for i in 0..n {
            let t = at(i, j) - m;
            correction += t;
            sq += t * t;
        }
        let var = (sq - correction * correction / nf) / nf;
        // sklearn's `_is_constant_feature`: a variance within the rounding error of the two-pass
        // algorithm counts as zero, and such features are divided by 1.
        let eps = f64::EPSILON;
        let bound = nf * eps * var + (nf * m * eps).powi(2);
        mean[j] = m;
        scale[j] = if var <= bound { 1.0 } else { var.sqrt() };
    }
    Standardizer { mean, scale }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_statistics() {
        // Feature 0: 1, 2, 3, 4 -> mean 2.5, population var 1.25. Feature 1 is constant.
        let rows: Vec<[f64; 2]> = vec![[1.0, 7.0], [2.0, 7.0], [3.0, 7.0], [4.0, 7.0]];
        let refs: Vec<&[f64]> = rows.iter().map(|r| &r[..]).collect();
        let s = Standardizer::fit_f64(&refs, 2);
        assert_eq!(s.mean, [2.5, 7.0]);
        assert_eq!(s.scale, [1.25f64.sqrt(), 1.0]);
        let mut out = [0f32; 2];
        s.transform_f64(&[4.0, 7.0], &mut out);
        assert_eq!(out, [(1.5 / 1.25f64.sqrt()) as f32, 0.0]);
    }

    #[test]
    fn float32_rows_use_f32_arithmetic() {
        let rows: Vec<[f32; 1]> = vec![[0.1], [0.2], [0.7]];
        let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
        let s = Standardizer::fit_f32(&refs, 1);
        let m = (0.1f32 as f64 + 0.2f32 as f64 + 0.7f32 as f64) / 3.0;
        assert_eq!(s.mean[0], m);
        let mut out = [0f32];
        s.transform_f32(&[0.7], &mut out);
        assert_eq!(out[0], (0.7f32 - m as f32) / s.scale[0] as f32);
        // A near-constant feature (variance at rounding level) keeps scale 1.
        let rows: Vec<[f64; 1]> = vec![[1e8], [1e8 + 1e-8], [1e8]];
        let refs: Vec<&[f64]> = rows.iter().map(|r| &r[..]).collect();
        assert_eq!(Standardizer::fit_f64(&refs, 1).scale, [1.0]);
        assert_eq!(Standardizer::fit_f64(&[], 3).scale, [1.0; 3]);
    }
}

//! Mean cross-entropy over a batch of logits, with the softmax backward fused in.

/// Loss and accuracy of one batch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Mean cross-entropy over the batch.
    pub loss: f32,
    /// Samples whose arg-max logit is the label.
    pub correct: usize,
    /// Samples in the batch.
    pub count: usize,
}

/// Mean cross-entropy of `logits` (`[labels.len(), classes]`, row-major) against class indices
/// that the caller has checked to be in range. When `grad` is given it receives
/// `(softmax(logits) - onehot(label)) / N`, the gradient of the mean loss.
pub(crate) fn cross_entropy(logits: &[f32], classes: usize, labels: &[u32], mut grad: Option<&mut [f32]>) -> StepStats {
    let n = labels.len();
    let inv_n = 1.0 / n as f32;
    let mut total = 0.0f64;
    let mut correct = 0;
    for (i, &label) in labels.iter().enumerate() {
        let row = &logits[i * classes..][..classes];
        let label = label as usize;
        // log-sum-exp with the maximum taken out, so large logits cannot overflow. The arg-max
        // is torch.argmax's: the first NaN if there is one (the loss is then NaN too).
        let (mut arg, mut max) = (0, f32::NEG_INFINITY);
        for (c, &v) in row.iter().enumerate() {
            if v.is_nan() {
                (arg, max) = (c, v);
                break;
            }
            if v > max {
                max = v;
                arg = c;
            }
        }
        correct += usize::from(arg == label);
        let lse = match grad.as_deref_mut() {
            Some(g) => {
                // The exponentials are computed once, into the gradient row, and rescaled.
                let g = &mut g[i * classes..][..classes];
                let mut sum = 0.0f32;
                for (gv, &v) in g.iter_mut().zip(row) {
                    *gv = (v - max).exp();
                    sum += *gv;
                }
                let scale = inv_n / sum;
                g.iter_mut().for_each(|gv| *gv *= scale);
                g[label] -= inv_n;
                sum.ln()
            }
            None => row.iter().map(|&v| (v - max).exp()).sum::<f32>().ln(),
        };
        total += f64::from(lse - (row[label] - max));
    }
    StepStats { loss: if n == 0 { 0.0 } else { (total / n as f64) as f32 }, correct, count: n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_two_rows() {
        // Row 0: logits [0, ln 3] -> p = [1/4, 3/4]; label 1 -> loss ln(4/3).
        // Row 1: logits [2, 2] -> p = [1/2, 1/2]; label 0 -> loss ln 2; arg-max picks the first.
        let logits = [0.0, 3f32.ln(), 2.0, 2.0];
        let mut g = [0.0f32; 4];
        let s = cross_entropy(&logits, 2, &[1, 0], Some(&mut g));
        let want = ((4.0f64 / 3.0).ln() + 2f64.ln()) / 2.0;
        assert!((f64::from(s.loss) - want).abs() < 1e-6, "{} vs {want}", s.loss);
        assert_eq!((s.correct, s.count), (2, 2));
        let want_g = [0.125, -0.125, -0.25, 0.25];
        for (a, b) in g.iter().zip(want_g) {
            assert!((a - b).abs() < 1e-6, "{g:?}");
        }
    }

    #[test]
    fn non_finite_logits_give_pytorchs_nan_loss() {
        // torch.nn.functional.cross_entropy gives NaN for a row with a NaN or a +inf logit
        // (inf - inf in its log-softmax), and torch.argmax picks the first NaN.
        for (logits, label, correct) in [([1.0, f32::NAN, 3.0], 1, 1), ([f32::INFINITY, 0.0, 1.0], 0, 1), ([f32::NAN, f32::NAN, 0.0], 2, 0)]
        {
            let mut g = [0.0f32; 3];
            let s = cross_entropy(&logits, 3, &[label], Some(&mut g));
            assert!(s.loss.is_nan(), "{logits:?}: loss {}", s.loss);
            assert_eq!(s.correct, correct, "{logits:?}");
            assert!(cross_entropy(&logits, 3, &[label], None).loss.is_nan());
        }
        // -inf logits are fine while another is finite: log-softmax gives -inf there, 0 to the rest.
        let s = cross_entropy(&[f32::NEG_INFINITY, 0.0], 2, &[1], None);
        assert_eq!((s.loss, s.correct), (0.0, 1));
    }

    #[test]
    fn huge_logits_stay_finite() {
        let s = cross_entropy(&[1e30, 0.0, -1e30], 3, &[0], None);
        assert_eq!(s.loss, 0.0);
    }
}

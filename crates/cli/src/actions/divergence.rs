//! The divergence watch of `ch train`: a loss that is not a finite number stops the run (as
//! Lightning's NaN checks and `detect_anomaly` do) before the weights it would produce are
//! saved; a finite loss far above where the run started is reported once as a warning.

use super::epoch::EpochRecord;

/// A step's loss above this many times the reference loss counts as exploding.
const EXPLODING_FACTOR: f64 = 1e3;

/// Watches the loss of every training step.
#[derive(Clone, Debug)]
pub struct LossWatch {
    /// The cross-entropy of a uniform guess, ln(classes): the smallest reference, so that a
    /// run resumed or loaded from a well-trained checkpoint (a loss near 0) is not warned about
    /// every ordinary bump.
    floor: f64,
    /// The run's first training loss (the first epoch's mean when resuming), once known.
    reference: Option<f64>,
    warned: bool,
}

/// What the watch says about one loss.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Fine,
    /// A finite loss past the threshold, said once per run: the warning line.
    Exploding(String),
    /// The loss is NaN or infinite: the run must stop. The text says what and where.
    Diverged(String),
}

impl LossWatch {
    /// A watch for a classifier of `classes` classes; `history` holds the epochs of a resumed run.
    pub fn new(classes: usize, history: &[EpochRecord]) -> LossWatch {
        LossWatch {
            floor: (classes.max(2) as f64).ln(),
            reference: history.first().map(|r| r.train_loss).filter(|l| l.is_finite()),
            warned: false,
        }
    }

    /// The loss above which a step's loss is exploding, once the reference is known.
    pub fn threshold(&self) -> Option<f64> {
        self.reference.map(|r| EXPLODING_FACTOR * r.max(self.floor))
    }

    /// Checks the mean loss of one training batch of `epoch` at optimizer step `step`.
    pub fn check(&mut self, loss: f32, epoch: usize, step: u64) -> Verdict {
        if !loss.is_finite() {
            return Verdict::Diverged(format!("loss is {} at epoch {epoch}, step {step}", number(loss)));
        }
        let loss = f64::from(loss);
        let Some(threshold) = self.threshold() else {
            self.reference = Some(loss);
            return Verdict::Fine;
        };
        if loss > threshold && !self.warned {
            self.warned = true;
            let reference = self.reference.unwrap_or(loss);
            return Verdict::Exploding(format!(
                "the training loss is exploding: {loss:.4e} at epoch {epoch}, step {step}, more than {EXPLODING_FACTOR:.0e} x the first loss {reference:.4} (or ln(classes)); lower the learning rate"
            ));
        }
        Verdict::Fine
    }
}

/// `NaN`, `inf` or `-inf`, as a user reads them.
pub fn number(v: f32) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

/// The first parameter with a value that is not finite, by name.
pub fn first_non_finite(params: &mase_ir::ParamStore) -> Option<String> {
    params.iter().find(|(_, e)| e.tensor.data.iter().any(|v| !v.is_finite())).map(|(name, _)| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(train_loss: f64) -> EpochRecord {
        EpochRecord { epoch: 0, train_loss, train_acc: 0.0, val_loss: 0.0, val_acc: 0.0, lr: 0.0, seconds: 0.0 }
    }

    /// One line per case: classes, resumed history's first loss, the losses of successive
    /// steps, and what the watch says about each (F fine, E exploding, D diverged).
    #[test]
    fn verdicts() {
        let cases: [(usize, Option<f64>, &[f32], &str); 8] = [
            // 10 classes: the threshold is 1e3 x max(first loss, ln 10 = 2.303).
            (10, None, &[2.5, 2400.0, 2600.0, 1e30], "FFEF"),
            (10, None, &[2.5, 2499.0, 2501.0], "FFE"),
            // A small first loss is raised to ln(10): 2302 is fine, 2303 is not.
            (10, None, &[0.01, 2302.0, 2303.0], "FFE"),
            (10, None, &[2.5, f32::NAN], "FD"),
            (10, None, &[f32::INFINITY], "D"),
            (10, None, &[2.5, 3e3, f32::NEG_INFINITY], "FED"),
            // Resumed: the reference is the first epoch's mean loss.
            (5, Some(3.0), &[2999.0, 3001.0], "FE"),
            // Two classes: ln 2 = 0.693.
            (2, None, &[0.1, 693.0, 694.0], "FFE"),
        ];
        for (i, (classes, resumed, losses, want)) in cases.into_iter().enumerate() {
            let history: Vec<EpochRecord> = resumed.map(record).into_iter().collect();
            let mut watch = LossWatch::new(classes, &history);
            let got: String = losses
                .iter()
                .enumerate()
                .map(|(s, &l)| match watch.check(l, 1, s as u64) {
                    Verdict::Fine => 'F',
                    Verdict::Exploding(_) => 'E',
                    Verdict::Diverged(_) => 'D',
                })
                .collect();
            assert_eq!(got, want, "case {i}: {losses:?}");
        }
    }

    #[test]
    fn messages_name_the_loss_epoch_and_step() {
        let mut watch = LossWatch::new(10, &[]);
        assert_eq!(watch.check(f32::NAN, 3, 57), Verdict::Diverged("loss is NaN at epoch 3, step 57".into()));
        assert_eq!(watch.check(f32::INFINITY, 0, 0), Verdict::Diverged("loss is inf at epoch 0, step 0".into()));
        assert_eq!(watch.check(2.0, 0, 1), Verdict::Fine);
        match watch.check(1e30, 0, 2) {
            Verdict::Exploding(w) => assert!(w.starts_with("the training loss is exploding: 1.0000e30 at epoch 0, step 2"), "{w}"),
            other => panic!("{other:?}"),
        }
    }
}

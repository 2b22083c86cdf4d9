//! Learning-rate schedules.

/// `CosineAnnealingLR` in closed form (doc/mase-semantics.md#training-optimizers), the learning rate of epoch
/// `epoch` (0-based): `eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2`.
/// With `t_max == 0` there is no schedule and `base_lr` is returned.
pub fn cosine_lr(base_lr: f32, eta_min: f32, epoch: usize, t_max: usize) -> f32 {
    if t_max == 0 {
        return base_lr;
    }
    let (base, min) = (f64::from(base_lr), f64::from(eta_min));
    let phase = std::f64::consts::PI * epoch as f64 / t_max as f64;
    (min + (base - min) * (1.0 + phase.cos()) / 2.0) as f32
}

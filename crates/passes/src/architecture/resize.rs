//! Copying the values of a tensor into the leading slice of a larger one, for `keep_weights`.
//!
//! A widened layer's old weights are the block `[0..old_0, 0..old_1, ...]` of its new weight:
//! output channel `o` and input channel `i` of the old layer are output channel `o` and input
//! channel `i` of the new one. After a channel-major flatten this also holds for the classifier
//! (old feature `c * S + s` is new feature `c * S + s` when the spatial size `S` is unchanged),
//! so the same block copy serves every widened tensor.

use mase_ir::Tensor;

/// Writes `old` into the leading block of `new`. Returns `false`, leaving `new` as it was, when
/// the ranks differ or some dimension of `old` is larger than the same dimension of `new`.
pub(crate) fn copy_into_leading_block(old: &Tensor, new: &mut Tensor) -> bool {
    let (o, n) = (&old.shape, &new.shape);
    if o.len() != n.len() || o.iter().zip(n).any(|(a, b)| a > b) {
        return false;
    }
    if o.is_empty() {
        new.data[0] = old.data[0];
        return true;
    }
    let rank = o.len();
    let row = o[rank - 1];
    if row == 0 {
        return true;
    }
    // Row-major strides of the new tensor.
    let mut strides = vec![1usize; rank];
    for d in (0..rank - 1).rev() {
        strides[d] = strides[d + 1] * n[d + 1];
    }
    for (r, src) in old.data.chunks_exact(row).enumerate() {
        // The coordinates of old row `r` over the leading dimensions, in the new layout.
        let (mut rest, mut offset) = (r, 0);
        for d in (0..rank - 1).rev() {
            offset += (rest % o[d]) * strides[d];
            rest /= o[d];
        }
        new.data[offset..offset + row].copy_from_slice(src);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_values_land_in_the_leading_block() {
        // [2, 3] into [3, 5]: rows 0..2, columns 0..3.
        let old = Tensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let mut new = Tensor::full(vec![3, 5], 0.0);
        assert!(copy_into_leading_block(&old, &mut new));
        #[rustfmt::skip]
        let want = vec![
            1.0, 2.0, 3.0, 0.0, 0.0,
            4.0, 5.0, 6.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        assert_eq!(new.data, want);
        // A conv weight [1, 2, 1, 2] into [2, 3, 1, 2]: element (o, i, 0, k) keeps its place.
        let old = Tensor::new(vec![1, 2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let mut new = Tensor::full(vec![2, 3, 1, 2], 9.0);
        assert!(copy_into_leading_block(&old, &mut new));
        assert_eq!(&new.data[..6], &[1.0, 2.0, 3.0, 4.0, 9.0, 9.0]);
        assert!(new.data[6..].iter().all(|&v| v == 9.0));
        // A vector into a longer one; a shrinking or rank-changing copy is refused.
        let mut v = Tensor::full(vec![4], 0.0);
        assert!(copy_into_leading_block(&Tensor::new(vec![2], vec![7.0, 8.0]).unwrap(), &mut v));
        assert_eq!(v.data, [7.0, 8.0, 0.0, 0.0]);
        assert!(!copy_into_leading_block(&Tensor::full(vec![5], 1.0), &mut v));
        assert!(!copy_into_leading_block(&Tensor::full(vec![2, 2], 1.0), &mut v));
    }
}

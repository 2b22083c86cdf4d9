//! Attention and embedding ops: the contraction behind `torch.einsum`, the mask kinds of
//! `F.scaled_dot_product_attention`, and the shape rules of `einsum`, attention and `embedding`.

use serde::{Deserialize, Serialize};

/// How `F.scaled_dot_product_attention` reads its `attn_mask` (input 3, when present).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttnMask {
    /// A boolean mask held as 0.0 / 1.0: a position takes part in attention where the mask is
    /// true (non-zero), and its score is `-inf` where it is false.
    Bool,
    /// A float mask added to the scaled scores.
    Additive,
}

/// An `einsum` of two operands as one batched matrix product: every letter is a batch letter
/// (in both operands and the output), a row letter (the first operand and the output), a column
/// letter (the second operand and the output) or a contracted letter (both operands, not the
/// output). Each operand is read as `[batch, rows, contracted]` / `[batch, contracted, columns]`
/// and the product `[batch, rows, columns]` is written in the output's letter order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contraction {
    /// The letters of each operand and of the output, in their order in the equation.
    pub operands: [Vec<char>; 2],
    pub output: Vec<char>,
    pub batch: Vec<char>,
    pub rows: Vec<char>,
    pub cols: Vec<char>,
    pub contracted: Vec<char>,
}

impl Contraction {
    /// Parses an equation such as `bhqd,bhkd->bhqk`. Without `->` the output holds the letters
    /// that appear once, in alphabetical order, as in `torch.einsum`. Refuses, naming what it
    /// expected, any equation that is not a product of two operands (one or three operands,
    /// `...`, a letter repeated within an operand or the output, a letter summed within one
    /// operand, an output letter no operand has).
    pub fn parse(equation: &str) -> Result<Contraction, String> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let fail = |why: &str| Err(format!("einsum equation \"{equation}\": {why}"));
        if eq.contains("...") || eq.contains('.') {
            return fail("`...` (broadcast dimensions) is not supported; name every dimension");
        }
        let (lhs, out) = match eq.split_once("->") {
            Some((l, o)) => (l, Some(o)),
            None => (eq.as_str(), None),
        };
        let ops: Vec<&str> = lhs.split(',').collect();
        if ops.len() != 2 {
            return fail(&format!("expected two operands (a matrix product), got {}", ops.len()));
        }
        let letters = |s: &str| -> Result<Vec<char>, String> {
            let v: Vec<char> = s.chars().collect();
            if let Some(c) = v.iter().find(|c| !c.is_ascii_alphabetic()) {
                return Err(format!("einsum equation \"{equation}\": '{c}' is not a letter"));
            }
            for (i, c) in v.iter().enumerate() {
                if v[..i].contains(c) {
                    return Err(format!(
                        "einsum equation \"{equation}\": letter '{c}' is repeated in \"{s}\" (diagonals are not supported)"
                    ));
                }
            }
            Ok(v)
        };
        let a = letters(ops[0])?;
        let b = letters(ops[1])?;
        let output = match out {
            Some(o) => letters(o)?,
            None => {
                let mut once: Vec<char> = a.iter().chain(&b).copied().filter(|c| !(a.contains(c) && b.contains(c))).collect();
                once.sort_unstable();
                once
            }
        };
        if let Some(c) = output.iter().find(|c| !a.contains(c) && !b.contains(c)) {
            return fail(&format!("output letter '{c}' is in neither operand"));
        }
        let (mut batch, mut rows, mut cols, mut contracted) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for &c in a.iter().chain(b.iter().filter(|c| !a.contains(c))) {
            match (a.contains(&c), b.contains(&c), output.contains(&c)) {
                (true, true, true) => batch.push(c),
                (true, false, true) => rows.push(c),
                (false, true, true) => cols.push(c),
                (true, true, false) => contracted.push(c),
                (true, false, false) | (false, true, false) => {
                    return fail(&format!("letter '{c}' is summed within one operand; only sums over both operands are supported"))
                }
                (false, false, _) => unreachable!("every letter comes from an operand"),
            }
        }
        Ok(Contraction { operands: [a, b], output, batch, rows, cols, contracted })
    }

    /// The size of each letter given the operands' shapes, or why they do not fit the equation.
    pub fn sizes(&self, shapes: [&[usize]; 2]) -> Result<Vec<(char, usize)>, String> {
        let mut sizes: Vec<(char, usize)> = Vec::new();
        for (k, (letters, shape)) in self.operands.iter().zip(shapes).enumerate() {
            if letters.len() != shape.len() {
                return Err(format!("operand {k} has rank {} but the equation gives it {} letters", shape.len(), letters.len()));
            }
            for (&c, &d) in letters.iter().zip(shape) {
                match sizes.iter().find(|(l, _)| *l == c) {
                    Some(&(_, s)) if s != d => return Err(format!("letter '{c}' has size {s} in operand 0 and {d} in operand 1")),
                    Some(_) => {}
                    None => sizes.push((c, d)),
                }
            }
        }
        Ok(sizes)
    }

    /// The output shape for operands of the given shapes.
    pub fn output_shape(&self, shapes: [&[usize]; 2]) -> Result<Vec<usize>, String> {
        let sizes = self.sizes(shapes)?;
        Ok(self.output.iter().map(|c| size_of(&sizes, *c)).collect())
    }

    /// The number of multiply-adds: the product of every letter's size.
    pub fn macs(&self, shapes: [&[usize]; 2]) -> Option<usize> {
        let sizes = self.sizes(shapes).ok()?;
        Some(sizes.iter().map(|(_, s)| *s).product())
    }
}

/// The size of letter `c` in a list from [`Contraction::sizes`] (1 for a letter it lacks).
pub fn size_of(sizes: &[(char, usize)], c: char) -> usize {
    sizes.iter().find(|(l, _)| *l == c).map_or(1, |(_, s)| *s)
}

/// The output of `F.scaled_dot_product_attention(q, k, v, attn_mask)`: `q [..., L, E]`,
/// `k [..., S, E]`, `v [..., S, Ev]` with the same leading dimensions, and a mask that
/// broadcasts to `[..., L, S]`; the output is `[..., L, Ev]`.
pub(crate) fn attention(shapes: &[&[usize]], mask: Option<AttnMask>, is_causal: bool) -> Result<Vec<usize>, String> {
    let want = 3 + usize::from(mask.is_some());
    if shapes.len() != want {
        let what = if mask.is_some() { "query, key, value and attn_mask" } else { "query, key and value" };
        return Err(format!("expected {want} inputs ({what}), got {}", shapes.len()));
    }
    if mask.is_some() && is_causal {
        return Err("attn_mask and is_causal = True cannot both be given (PyTorch refuses it too)".into());
    }
    let (q, k, v) = (shapes[0], shapes[1], shapes[2]);
    if q.len() < 2 || k.len() != q.len() || v.len() != q.len() {
        return Err("query, key and value must have the same rank, at least 2 ([..., L, E], [..., S, E], [..., S, Ev])".into());
    }
    let r = q.len();
    if q[..r - 2] != k[..r - 2] || q[..r - 2] != v[..r - 2] {
        return Err("query, key and value must have the same leading (batch and head) dimensions".into());
    }
    if q[r - 1] != k[r - 1] {
        return Err(format!("query and key must have the same last dimension (E); got {} and {}", q[r - 1], k[r - 1]));
    }
    if k[r - 2] != v[r - 2] {
        return Err(format!("key and value must have the same sequence length (S); got {} and {}", k[r - 2], v[r - 2]));
    }
    let mut scores = q[..r - 1].to_vec();
    scores.push(k[r - 2]);
    if let Some(m) = shapes.get(3) {
        if crate::broadcast_shapes(m, &scores).as_deref() != Some(&scores[..]) {
            return Err(format!("attn_mask {m:?} does not broadcast to the scores' shape {scores:?}"));
        }
    }
    let mut out = q[..r - 1].to_vec();
    out.push(v[r - 1]);
    Ok(out)
}

/// The output of an embedding lookup: the ids' shape with `embedding_dim` appended; a function
/// call (`F.embedding`) reads its `[num_embeddings, embedding_dim]` weight as input 1.
pub(crate) fn embedding(shapes: &[&[usize]], num_embeddings: usize, embedding_dim: usize, functional: bool) -> Result<Vec<usize>, String> {
    let want = 1 + usize::from(functional);
    if shapes.len() != want {
        let what = if functional { "the ids and the weight" } else { "the ids" };
        return Err(format!("expected {want} inputs ({what}), got {}", shapes.len()));
    }
    if let Some(w) = shapes.get(1) {
        if *w != [num_embeddings, embedding_dim] {
            return Err(format!("the weight must have shape [{num_embeddings}, {embedding_dim}]"));
        }
    }
    let mut out = shapes[0].to_vec();
    out.push(embedding_dim);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One line per equation: the parsed groups (batch, rows, columns, contracted) and output.
    #[test]
    fn equations_parse_into_batched_products() {
        let table = [
            ("bhqd,bhkd->bhqk", "bh q k d bhqk"),
            ("bhqk,bhkd->bhqd", "bh q d k bhqd"),
            ("bij,bjk->bik", "b i k j bik"),
            ("ij,jk", " i k j ik"),
            ("ij,kj->ik", " i k j ik"),
            ("i,j->ij", " i j  ij"),
            ("bqd, bkd -> bkq", "b q k d bkq"),
            ("ij,ij->ij", "ij    ij"),
        ];
        for (eq, want) in table {
            let c = Contraction::parse(eq).unwrap_or_else(|e| panic!("{e}"));
            let s = |v: &[char]| v.iter().collect::<String>();
            let got = format!("{} {} {} {} {}", s(&c.batch), s(&c.rows), s(&c.cols), s(&c.contracted), s(&c.output));
            assert_eq!(got, want, "{eq}");
        }
    }

    #[test]
    fn other_equations_are_refused_naming_them() {
        let table = [
            ("ii->i", "expected two operands (a matrix product), got 1"),
            ("ij,jk,kl->il", "expected two operands (a matrix product), got 3"),
            ("...ij,...jk->...ik", "`...` (broadcast dimensions) is not supported; name every dimension"),
            ("iij,jk->ik", "letter 'i' is repeated in \"iij\" (diagonals are not supported)"),
            ("ij,jk->i", "letter 'k' is summed within one operand; only sums over both operands are supported"),
            ("ij,jk->iz", "output letter 'z' is in neither operand"),
            ("i1,jk->ik", "'1' is not a letter"),
        ];
        for (eq, want) in table {
            assert_eq!(Contraction::parse(eq), Err(format!("einsum equation \"{eq}\": {want}")), "{eq}");
        }
    }

    #[test]
    fn shapes_follow_the_letters() {
        let c = Contraction::parse("bhqd,bhkd->bhqk").unwrap();
        assert_eq!(c.output_shape([&[2, 4, 5, 8], &[2, 4, 6, 8]]), Ok(vec![2, 4, 5, 6]));
        assert_eq!(c.macs([&[2, 4, 5, 8], &[2, 4, 6, 8]]), Some(2 * 4 * 5 * 8 * 6));
        assert_eq!(c.output_shape([&[2, 4, 5, 8], &[2, 4, 6, 7]]), Err("letter 'd' has size 8 in operand 0 and 7 in operand 1".into()));
        assert_eq!(c.output_shape([&[2, 4, 5], &[2, 4, 6, 8]]), Err("operand 0 has rank 3 but the equation gives it 4 letters".into()));
    }

    #[test]
    fn attention_and_embedding_shapes() {
        assert_eq!(attention(&[&[2, 3, 5, 4], &[2, 3, 6, 4], &[2, 3, 6, 7]], None, true), Ok(vec![2, 3, 5, 7]));
        assert_eq!(attention(&[&[2, 5, 4], &[2, 6, 4], &[2, 6, 7], &[5, 6]], Some(AttnMask::Bool), false), Ok(vec![2, 5, 7]));
        let refused = [
            (attention(&[&[2, 5, 4], &[2, 6, 4], &[2, 6, 7], &[5, 6]], Some(AttnMask::Bool), true), "attn_mask and is_causal"),
            (attention(&[&[2, 5, 4], &[2, 6, 3], &[2, 6, 7]], None, false), "same last dimension (E); got 4 and 3"),
            (attention(&[&[2, 5, 4], &[2, 6, 4], &[2, 5, 7]], None, false), "same sequence length (S); got 6 and 5"),
            (attention(&[&[2, 5, 4], &[2, 6, 4], &[2, 6, 7], &[3, 6]], Some(AttnMask::Additive), false), "does not broadcast"),
            (attention(&[&[2, 5, 4], &[1, 6, 4], &[2, 6, 7]], None, false), "same leading"),
        ];
        for (got, want) in refused {
            assert!(got.as_ref().is_err_and(|e| e.contains(want)), "{got:?} lacks {want}");
        }
        assert_eq!(embedding(&[&[2, 7]], 10, 4, false), Ok(vec![2, 7, 4]));
        assert_eq!(embedding(&[&[2, 7], &[10, 4]], 10, 4, true), Ok(vec![2, 7, 4]));
        assert_eq!(embedding(&[&[2, 7], &[10, 5]], 10, 4, true), Err("the weight must have shape [10, 4]".into()));
    }
}

//! Multi-objective helpers on losses (every objective turned into "smaller is better"):
//! domination, non-dominated sorting, crowding distance, hypervolume and hypervolume subset
//! selection, as NSGA-II and Optuna's multi-objective TPE use them.

/// `a` dominates `b`: no worse in every objective and better in one.
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    let mut better = false;
    for (x, y) in a.iter().zip(b) {
        if x > y {
            return false;
        }
        if x < y {
            better = true;
        }
    }
    better
}

/// Indices of the points no other point dominates (equal points are all kept).
pub fn pareto_front(points: &[Vec<f64>]) -> Vec<usize> {
    (0..points.len()).filter(|&i| !points.iter().any(|q| dominates(q, &points[i]))).collect()
}

/// The non-domination rank of every point (0 = Pareto front), by repeated peeling. Identical
/// points share a rank and are compared once.
pub fn non_domination_ranks(points: &[Vec<f64>]) -> Vec<usize> {
    let (unique, of) = dedup(points);
    let n = unique.len();
    let mut rank = vec![usize::MAX; n];
    let mut dominated_by = vec![0usize; n];
    let mut dominating: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        for j in 0..n {
            if i != j && dominates(unique[i], unique[j]) {
                dominating[i].push(j);
                dominated_by[j] += 1;
            }
        }
    }
    let mut front: Vec<usize> = (0..n).filter(|&i| dominated_by[i] == 0).collect();
    let mut r = 0;
    while !front.is_empty() {
        let mut next = Vec::new();
        for &i in &front {
            rank[i] = r;
            for &j in &dominating[i] {
                dominated_by[j] -= 1;
                if dominated_by[j] == 0 {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        front = next;
        r += 1;
    }
    of.iter().map(|&u| rank[u]).collect()
}

/// The distinct points (bitwise equal values) in first-seen order, and for each input point the
/// index of its distinct point.
fn dedup(points: &[Vec<f64>]) -> (Vec<&Vec<f64>>, Vec<usize>) {
    let mut seen: std::collections::HashMap<Vec<u64>, usize> = std::collections::HashMap::new();
    let mut unique = Vec::new();
    let of = points
        .iter()
        .map(|p| {
            let key: Vec<u64> = p.iter().map(|x| x.to_bits()).collect();
            *seen.entry(key).or_insert_with(|| {
                unique.push(p);
                unique.len() - 1
            })
        })
        .collect();
    (unique, of)
}

/// NSGA-II's crowding distance of the points of one front (infinite at the extremes).
// `k` is an objective, a column of every point: an index, not an iteration over `points`.
#[allow(clippy::needless_range_loop)]
pub fn crowding_distance(points: &[Vec<f64>]) -> Vec<f64> {
    let n = points.len();
    let mut d = vec![0.0; n];
    if n <= 2 {
        return vec![f64::INFINITY; n];
    }
    let m = points[0].len();
    for k in 0..m {
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by(|&a, &b| points[a][k].total_cmp(&points[b][k]));
        let (lo, hi) = (points[idx[0]][k], points[idx[n - 1]][k]);
        d[idx[0]] = f64::INFINITY;
        d[idx[n - 1]] = f64::INFINITY;
        if hi > lo {
            for w in 1..n - 1 {
                d[idx[w]] += (points[idx[w + 1]][k] - points[idx[w - 1]][k]) / (hi - lo);
            }
        }
    }
    d
}

/// The hypervolume dominated by `points` and bounded by `reference` (points beyond the
/// reference in any objective add nothing).
pub fn hypervolume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let pts: Vec<Vec<f64>> = points.iter().filter(|p| p.iter().zip(reference).all(|(x, r)| x < r)).cloned().collect();
    hv_rec(pts, reference)
}

/// Slices along the last objective: the volume is the sum over slabs of (slab height) × (the
/// hypervolume of the points below the slab in the remaining objectives).
fn hv_rec(mut pts: Vec<Vec<f64>>, reference: &[f64]) -> f64 {
    if pts.is_empty() {
        return 0.0;
    }
    let m = reference.len();
    if m == 1 {
        return reference[0] - pts.iter().map(|p| p[0]).fold(f64::INFINITY, f64::min);
    }
    if m == 2 {
        pts.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
        let (mut vol, mut best_y) = (0.0, reference[1]);
        for p in &pts {
            if p[1] < best_y {
                vol += (reference[0] - p[0]) * (best_y - p[1]);
                best_y = p[1];
            }
        }
        return vol;
    }
    pts.sort_by(|a, b| a[m - 1].total_cmp(&b[m - 1]));
    let mut vol = 0.0;
    for i in 0..pts.len() {
        let top = if i + 1 < pts.len() { pts[i + 1][m - 1] } else { reference[m - 1] };
        let h = top - pts[i][m - 1];
        if h > 0.0 {
            let below: Vec<Vec<f64>> = pts[..=i].iter().map(|p| p[..m - 1].to_vec()).collect();
            vol += h * hv_rec(below, &reference[..m - 1]);
        }
    }
    vol
}

/// Optuna's reference point for a set of losses: 1.1 × the worst value of each objective (0.9 ×
/// when it is negative), and a tiny positive number where that is 0.
pub fn reference_point(points: &[Vec<f64>]) -> Vec<f64> {
    let m = points.first().map_or(0, Vec::len);
    (0..m)
        .map(|k| {
            let w = points.iter().map(|p| p[k]).fold(f64::NEG_INFINITY, f64::max);
            let r = (1.1 * w).max(0.9 * w);
            if r == 0.0 {
                1e-12
            } else {
                r
            }
        })
        .collect()
}

/// Greedy hypervolume subset selection: `k` indices of `points` chosen one at a time, each
/// adding the most hypervolume to those already chosen (ties to the lower index). Gains only
/// shrink as the chosen set grows, so stale gains are upper bounds and only the best candidate's
/// gain is recomputed (lazy greedy); a duplicate of a chosen point adds nothing.
pub fn hssp_greedy(points: &[Vec<f64>], k: usize, reference: &[f64]) -> Vec<usize> {
    let k = k.min(points.len());
    let mut chosen: Vec<usize> = Vec::with_capacity(k);
    let mut chosen_pts: Vec<Vec<f64>> = Vec::new();
    let mut current = 0.0;
    let mut bound: Vec<f64> = points.iter().map(|p| hypervolume(std::slice::from_ref(p), reference)).collect();
    let mut fresh = vec![true; points.len()];
    let mut taken = vec![false; points.len()];
    while chosen.len() < k {
        // The candidate with the largest bound (lowest index on ties).
        let mut best = None;
        for i in 0..points.len() {
            if !taken[i] && best.is_none_or(|b: usize| bound[i] > bound[b]) {
                best = Some(i);
            }
        }
        let Some(i) = best else { break };
        if !fresh[i] {
            let dup = chosen_pts.iter().any(|c| c == &points[i]);
            bound[i] = if dup {
                0.0
            } else {
                chosen_pts.push(points[i].clone());
                let g = hypervolume(&chosen_pts, reference) - current;
                chosen_pts.pop();
                g
            };
            fresh[i] = true;
            continue;
        }
        taken[i] = true;
        chosen.push(i);
        chosen_pts.push(points[i].clone());
        current = hypervolume(&chosen_pts, reference);
        fresh.iter_mut().for_each(|f| *f = false);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(p: &[[f64; 2]]) -> Vec<Vec<f64>> {
        p.iter().map(|x| x.to_vec()).collect()
    }

    #[test]
    fn fronts_and_ranks() {
        let p = v(&[[1.0, 4.0], [2.0, 2.0], [4.0, 1.0], [3.0, 3.0], [4.0, 4.0], [2.0, 2.0]]);
        assert_eq!(pareto_front(&p), [0, 1, 2, 5]);
        assert_eq!(non_domination_ranks(&p), [0, 0, 0, 1, 2, 0]);
        assert!(dominates(&[1.0, 1.0], &[1.0, 2.0]) && !dominates(&[1.0, 1.0], &[1.0, 1.0]));
    }

    #[test]
    fn hypervolume_by_hand() {
        // Staircase (1,3), (2,2), (3,1) under reference (4,4): 3 + 2 + 1 = 6.
        let p = v(&[[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.5, 3.5]]);
        assert_eq!(hypervolume(&p, &[4.0, 4.0]), 6.0);
        let q = vec![vec![0.0, 0.0, 0.0], vec![-1.0, 1.0, 1.0]];
        // A = [0,2]^3 (8), B = [-1,2]x[1,2]x[1,2] (3x1x1 = 3), overlap [0,2]x[1,2]x[1,2] = 2 → 9.
        assert_eq!(hypervolume(&q, &[2.0, 2.0, 2.0]), 9.0);
        assert_eq!(crowding_distance(&v(&[[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]))[1], 2.0);
        // The greedy subset of size 1 is the point with the largest box: (2,2) has 4.
        assert_eq!(hssp_greedy(&p[..3], 1, &[4.0, 4.0]), [1]);
        assert_eq!(reference_point(&v(&[[-2.0, 0.0], [1.0, -1.0]])), [1.1, 1e-12]);
    }
}

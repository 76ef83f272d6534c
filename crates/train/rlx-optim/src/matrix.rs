//! The two preconditioners that see a param as a matrix: Muon's Newton–Schulz
//! orthogonalization and Adafactor's factored second moment (both as optax computes them).

/// Orthogonalize the row-major `r × c` matrix `x` in place (optax
/// `orthogonalize_via_newton_schulz`): work on the wide orientation (`rows ≤ cols`), divide by
/// `‖X‖_F + eps`, then `steps` times `A = XXᵀ`, `X ← aX + (bA + cA²)X`.
pub(crate) fn newton_schulz(x: &mut [f64], r: usize, c: usize, k: [f64; 3], steps: usize, eps: f64, w: &mut Vec<f64>) {
    let transposed = r > c;
    let (m, n) = if transposed { (c, r) } else { (r, c) };
    // w = [X (m×n) | A (m×m) | B (m×m) | Y (m×n)]
    w.clear();
    w.resize(2 * m * n + 2 * m * m, 0.0);
    let (xs, rest) = w.split_at_mut(m * n);
    let (a, rest) = rest.split_at_mut(m * m);
    let (b, y) = rest.split_at_mut(m * m);
    for i in 0..r {
        for j in 0..c {
            let at = if transposed { j * n + i } else { i * n + j };
            xs[at] = x[i * c + j];
        }
    }
    let fro = xs.iter().map(|v| v * v).sum::<f64>().sqrt() + eps;
    xs.iter_mut().for_each(|v| *v /= fro);
    for _ in 0..steps {
        for i in 0..m {
            for j in 0..m {
                a[i * m + j] = (0..n).map(|l| xs[i * n + l] * xs[j * n + l]).sum();
            }
        }
        for i in 0..m {
            for j in 0..m {
                let aa: f64 = (0..m).map(|l| a[i * m + l] * a[l * m + j]).sum();
                b[i * m + j] = k[1] * a[i * m + j] + k[2] * aa;
            }
        }
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = k[0] * xs[i * n + j] + (0..m).map(|l| b[i * m + l] * xs[l * n + j]).sum::<f64>();
            }
        }
        xs.copy_from_slice(y);
    }
    for i in 0..r {
        for j in 0..c {
            let at = if transposed { j * n + i } else { i * n + j };
            x[i * c + j] = xs[at];
        }
    }
}

/// Adafactor's second-moment step on `g` (in place, becomes the update). `rc`: the matrix dims
/// when factored (then `v_row` / `v_col` are the state), else `v` is.
#[allow(clippy::too_many_arguments)] // the three state slots are optional by shape
pub(crate) fn factored_rms(
    g: &mut [f64],
    rc: Option<(usize, usize)>,
    decay: f64,
    eps: f64,
    v: Option<&mut [f32]>,
    v_row: Option<&mut [f32]>,
    v_col: Option<&mut [f32]>,
    w: &mut Vec<f64>,
) {
    let Some((r, c)) = rc else {
        let v = v.expect("v slot");
        for (gi, vi) in g.iter_mut().zip(v.iter_mut()) {
            *vi = (decay * *vi as f64 + (1.0 - decay) * (*gi * *gi + eps)) as f32;
            *gi /= (*vi as f64).sqrt();
        }
        return;
    };
    let (vr, vc) = (v_row.expect("v_row slot"), v_col.expect("v_col slot"));
    // optax reduces the larger axis into v_row (indexed by the shorter one); rows win a tie.
    let short_is_rows = r <= c;
    let (ns, nl) = if short_is_rows { (r, c) } else { (c, r) };
    let idx = |s: usize, l: usize| if short_is_rows { s * c + l } else { l * c + s };
    w.clear();
    w.resize(ns + nl, 0.0);
    let (ss, ls) = w.split_at_mut(ns);
    for s in 0..ns {
        for l in 0..nl {
            let q = g[idx(s, l)] * g[idx(s, l)] + eps;
            ss[s] += q;
            ls[l] += q;
        }
    }
    for s in 0..ns {
        vr[s] = (decay * vr[s] as f64 + (1.0 - decay) * ss[s] / nl as f64) as f32;
    }
    for l in 0..nl {
        vc[l] = (decay * vc[l] as f64 + (1.0 - decay) * ls[l] / ns as f64) as f32;
    }
    let mean = vr.iter().map(|&x| x as f64).sum::<f64>() / ns as f64;
    for s in 0..ns {
        let rf = (vr[s] as f64 / mean).powf(-0.5);
        for l in 0..nl {
            g[idx(s, l)] *= rf * (vc[l] as f64).powf(-0.5);
        }
    }
}

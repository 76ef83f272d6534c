//! Resize (opsets 10-19) and Upsample (7-9): every mode (`nearest` with its four rounding
//! rules, `linear`, `cubic`), every `coordinate_transformation_mode`, `antialias`,
//! `exclude_outside`, `extrapolation_value`, `axes` and `keep_aspect_ratio_policy`.
//!
//! Resize is separable: along each resized axis the output is an affine map of the input,
//! `y[o] = Σ_i W[o, i] · x[i] + b[o]` (`b` is the extrapolation value on the rows that
//! `tf_crop_and_resize` puts outside the input, where `W` is zero). The importer computes `W`
//! and `b` on the host in f64, exactly as the ONNX reference (`onnx/reference/ops/op_resize.py`,
//! `_interpolate_1d_along_axis`) picks neighbours and coefficients, and emits one
//! `dot_general` per resized axis. Shapes must be static and scales/sizes/roi known at import.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, NodeId, Tensor};

/// The resize attributes that shape the per-axis matrices.
struct Mode {
    mode: String,
    coord: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
    antialias: bool,
    extrapolation: f64,
}

fn cubic(a: f64, r: f64) -> Vec<f64> {
    let s = 1.0 - r;
    vec![
        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
    ]
}

fn normalized(v: Vec<f64>) -> Vec<f64> {
    let sum: f64 = v.iter().sum();
    v.into_iter().map(|x| x / sum).collect()
}

impl Mode {
    /// Interpolation coefficients for the fractional position `ratio` ∈ (0, 1].
    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        match (self.mode.as_str(), self.antialias) {
            ("nearest", _) => {
                let up = if ratio.fract() == 0.0 {
                    true
                } else {
                    match self.nearest.as_str() {
                        "round_prefer_ceil" => ratio >= 0.5,
                        "floor" => false,
                        "ceil" => true,
                        _ => ratio > 0.5,
                    }
                };
                vec![if up { 0.0 } else { 1.0 }, if up { 1.0 } else { 0.0 }]
            }
            ("linear", false) => vec![1.0 - ratio, ratio],
            ("linear", true) => {
                let scale = scale.min(1.0);
                let start = (-1.0 / scale).floor() as i64 + 1;
                let n = 2 - 2 * start;
                normalized(
                    (start..start + n).map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0)).collect(),
                )
            }
            (_, false) => cubic(self.cubic_a, ratio),
            (_, true) => {
                let (a, scale) = (self.cubic_a, scale.min(1.0));
                let f = |x: f64| {
                    let x = x.abs();
                    if x <= 1.0 {
                        (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
                    } else if x < 2.0 {
                        a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let start = (-2.0 / scale).floor() as i64 + 1;
                normalized((start..2 - start).map(|i| f(scale * (i as f64 - ratio))).collect())
            }
        }
    }

    /// The `[out, inp]` matrix (row-major) and per-row bias of one axis.
    fn matrix(&self, inp: usize, out: usize, scale: f64, roi: (f64, f64)) -> (Vec<f64>, Vec<f64>, bool) {
        let (mut w, mut b) = (vec![0.0; out * inp], vec![0.0; out]);
        let mut extrapolated = false;
        let (fin, fout) = (inp as f64, scale * inp as f64);
        for o in 0..out {
            let y = o as f64;
            let x = match self.coord.as_str() {
                "align_corners" if fout == 1.0 => 0.0,
                "align_corners" => y * (fin - 1.0) / (fout - 1.0),
                "asymmetric" => y / scale,
                "tf_crop_and_resize" => {
                    let x = if fout == 1.0 {
                        (roi.1 - roi.0) * (fin - 1.0) / 2.0
                    } else {
                        y * (roi.1 - roi.0) * (fin - 1.0) / (fout - 1.0)
                    };
                    x + roi.0 * (fin - 1.0)
                }
                "pytorch_half_pixel" if fout == 1.0 => -0.5,
                "half_pixel_symmetric" => {
                    let offset = fin / 2.0 * (1.0 - out as f64 / fout);
                    offset + (y + 0.5) / scale - 0.5
                }
                _ => (y + 0.5) / scale - 0.5,
            };
            if self.coord == "tf_crop_and_resize" && (x < 0.0 || x > fin - 1.0) {
                b[o] = self.extrapolation;
                extrapolated = true;
                continue;
            }
            let xi = x.floor();
            let ratio = if x == xi { 1.0 } else { x - xi };
            let mut c = self.coeffs(ratio, scale);
            let n = c.len() as i64;
            let pad = (n + 1) / 2;
            let xp = x + pad as f64;
            let (p, frac) = (xp.floor(), xp - xp.floor());
            let offset = if n % 2 == 0 {
                if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
            } else if frac <= 0.5 {
                -((n - 1) / 2)
            } else {
                -((n - 1) / 2) + 1
            };
            let start = p as i64 + offset - pad;
            if self.exclude_outside {
                for (k, ck) in c.iter_mut().enumerate() {
                    let idx = start + k as i64;
                    if idx < 0 || idx >= inp as i64 {
                        *ck = 0.0;
                    }
                }
                let sum: f64 = c.iter().sum();
                if sum != 0.0 {
                    c.iter_mut().for_each(|v| *v /= sum);
                }
            }
            for (k, ck) in c.iter().enumerate() {
                let idx = (start + k as i64).clamp(0, inp as i64 - 1) as usize;
                w[o * inp + idx] += ck;
            }
        }
        (w, b, extrapolated)
    }
}

/// Apply the per-axis matrices to `x` (static dims `dims`): one `dot_general` per axis whose
/// output size, scale or roi is not the identity.
fn apply(c: &mut Ctx, x: NodeId, m: &Mode, out: &[usize], scales: &[f64], roi: &[(f64, f64)]) -> Result<NodeId> {
    let dt = c.dtype(x);
    let work = if matches!(dt, DType::F32 | DType::F64) { dt } else { DType::F32 };
    let mut y = if work == dt { x } else { c.g.convert(x, work) };
    let dims = c.dims(x)?;
    let r = dims.len();
    let mut cur = dims.clone();
    for a in 0..r {
        // As the reference: an axis kept at its size, scale 1 and the full roi is untouched.
        if out[a] == dims[a] && (scales[a] - 1.0).abs() < 1e-9 && roi[a] == (0.0, 1.0) {
            continue;
        }
        if out[a] == 0 || dims[a] == 0 {
            return Err(c.err(format!("cannot resize axis {a} from {} to {}", dims[a], out[a])));
        }
        let (w, b, extrapolated) = m.matrix(dims[a], out[a], scales[a], roi[a]);
        let wt = Tensor::from_f64s(&[out[a], dims[a]], work, &w).map_err(|e| c.err(e.to_string()))?;
        let wn = c.g.constant(wt);
        let dg = DotGeneral {
            lhs_contracting: vec![a],
            rhs_contracting: vec![1],
            lhs_batch: vec![],
            rhs_batch: vec![],
            preferred_element_type: None,
        };
        let z = c.g.dot_general(y, wn, dg);
        let mut perm: Vec<usize> = (0..r - 1).collect();
        perm.insert(a, r - 1);
        y = c.g.transpose(z, &perm);
        cur[a] = out[a];
        if extrapolated {
            let bt = Tensor::from_f64s(&[out[a]], work, &b).map_err(|e| c.err(e.to_string()))?;
            let bn = c.g.constant(bt);
            let bb = c.g.broadcast_in_dim(bn, cur.clone(), &[a]);
            y = c.g.add(y, bb);
        }
    }
    if work == dt {
        return Ok(y);
    }
    if dt.is_int() {
        let y = c.g.unary(rlx_ir::ops::UnaryOp::RoundNearestEven, y);
        let (lo, hi) = dt.finite_range().unwrap_or((0.0, 1.0));
        let lo = c.scalar(lo, work);
        let hi = c.scalar(hi, work);
        let y = c.g.max(y, lo);
        let y = c.g.min(y, hi);
        return Ok(c.g.convert(y, dt));
    }
    Ok(c.g.convert(y, dt))
}

/// ONNX `Resize`.
pub(super) fn resize(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    // Opset 10: (X, scales); 11+: (X, roi, scales, sizes).
    let (roi_in, scales_in, sizes_in) = if c.opset < 11 { (None, Some(1), None) } else { (Some(1), Some(2), Some(3)) };
    let nonempty = |c: &Ctx, i: Option<usize>| -> Result<Option<Vec<f64>>> {
        match i {
            Some(i) if c.opt(i).is_some() => {
                let v = c.floats_in(i)?;
                Ok(if v.is_empty() { None } else { Some(v) })
            }
            _ => Ok(None),
        }
    };
    let roi_v = nonempty(c, roi_in)?;
    let scales_v = nonempty(c, scales_in)?;
    let sizes_v = nonempty(c, sizes_in)?.map(|v| v.into_iter().map(|s| s as usize).collect::<Vec<_>>());
    let axes: Vec<usize> = match c.aints("axes") {
        Some(a) => a.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let n = axes.len();
    let mut roi = vec![(0.0, 1.0); r];
    if let Some(v) = &roi_v {
        if v.len() != 2 * n {
            return Err(c.err(format!("roi has {} values, {} axes need {}", v.len(), n, 2 * n)));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (v[i], v[n + i]);
        }
    }
    let mut scales = vec![1.0; r];
    let mut out = dims.clone();
    match (&scales_v, &sizes_v) {
        (_, Some(sz)) => {
            if sz.len() != n {
                return Err(c.err(format!("sizes has {} values for {n} axes", sz.len())));
            }
            for (i, &a) in axes.iter().enumerate() {
                out[a] = sz[i];
                scales[a] = sz[i] as f64 / dims[a] as f64;
            }
            let policy = c.astr("keep_aspect_ratio_policy", "stretch");
            if policy != "stretch" {
                let it = axes.iter().map(|&a| scales[a]);
                let s = match policy.as_str() {
                    "not_larger" => it.fold(f64::INFINITY, f64::min),
                    "not_smaller" => it.fold(f64::NEG_INFINITY, f64::max),
                    p => return Err(c.err(format!("unknown keep_aspect_ratio_policy {p:?}"))),
                };
                for &a in &axes {
                    scales[a] = s;
                    out[a] = (s * dims[a] as f64 + 0.5) as usize;
                }
            }
        }
        (Some(sc), None) => {
            if sc.len() != n {
                return Err(c.err(format!("scales has {} values for {n} axes", sc.len())));
            }
            for (i, &a) in axes.iter().enumerate() {
                scales[a] = sc[i];
                out[a] = (sc[i] * dims[a] as f64) as usize;
            }
        }
        (None, None) => return Err(c.err("needs scales or sizes")),
    }
    let default_coord = if c.opset < 11 { "asymmetric" } else { "half_pixel" };
    let m = Mode {
        mode: c.astr("mode", "nearest"),
        coord: c.astr("coordinate_transformation_mode", default_coord),
        nearest: c.astr("nearest_mode", if c.opset < 11 { "floor" } else { "round_prefer_floor" }),
        cubic_a: c.af("cubic_coeff_a", -0.75) as f64,
        exclude_outside: c.ai("exclude_outside", 0) != 0,
        antialias: c.ai("antialias", 0) != 0,
        extrapolation: c.af("extrapolation_value", 0.0) as f64,
    };
    if !matches!(m.mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(c.err(format!("unknown mode {:?}", m.mode)));
    }
    Ok(vec![apply(c, x, &m, &out, &scales, &roi)?])
}

/// ONNX `Upsample` (opsets 7-9, deprecated): `nearest` or `linear` with the asymmetric
/// transform; scales from the attribute (7) or input 1 (9).
pub(super) fn upsample(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let scales: Vec<f64> = match c.afloats("scales") {
        Some(s) => s.iter().map(|&v| v as f64).collect(),
        None => c.floats_in(1)?,
    };
    if scales.len() != dims.len() {
        return Err(c.err(format!("scales has {} values for rank {}", scales.len(), dims.len())));
    }
    let out: Vec<usize> = dims.iter().zip(&scales).map(|(&d, &s)| (d as f64 * s) as usize).collect();
    let mode = c.astr("mode", "nearest");
    let m = Mode {
        mode: if mode == "bilinear" { "linear".into() } else { mode },
        coord: "asymmetric".into(),
        nearest: "floor".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        antialias: false,
        extrapolation: 0.0,
    };
    Ok(vec![apply(c, x, &m, &out, &scales, &vec![(0.0, 1.0); dims.len()])?])
}

//! Shape and data-movement ops: Reshape (0 / -1 / allowzero), Slice (negative steps, clamping),
//! Pad (constant / reflect / edge / wrap), Gather family, Split, Tile, Expand, ...

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::sort::{take_along_axis, take_along_axis_with_mode};
use rlx_ir::ops::{CompareOp as C, GatherDims, GatherMode};
use rlx_ir::{DType, Dim, NodeId, Tensor};

/// Constant int64 1-D result.
fn i64_out(c: &mut Ctx, v: Vec<i64>) -> NodeId {
    c.i64s(&v)
}

pub(super) fn reshape(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let target = if c.opset < 5 { c.aints("shape").unwrap_or_default() } else { c.ints_in(1)? };
    let allowzero = c.ai("allowzero", 0) != 0;
    let inp = c.sdims(x);
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    for (i, &t) in target.iter().enumerate() {
        out.push(match t {
            0 if !allowzero => Some(
                inp.get(i)
                    .cloned()
                    .ok_or_else(|| c.err(format!("shape[{i}] = 0 copies a dim past the input's rank")))?,
            ),
            -1 => None,
            t if t < 0 => return Err(c.err(format!("invalid target dim {t}"))),
            t => Some(Dim::Static(t as usize)),
        });
    }
    let holes = out.iter().filter(|d| d.is_none()).count();
    if holes > 1 {
        return Err(c.err("more than one -1 in the target shape"));
    }
    if holes == 1 {
        // Divide the input's dims by the known output dims, symbol by symbol.
        let (mut num, mut syms_in) = (1usize, vec![]);
        for d in &inp {
            match d {
                Dim::Static(n) => num *= n,
                Dim::Sym(s) => syms_in.push(s.clone()),
            }
        }
        let mut den = 1usize;
        for d in out.iter().flatten() {
            match d {
                Dim::Static(n) => den *= n,
                Dim::Sym(s) => match syms_in.iter().position(|x| x == s) {
                    Some(p) => {
                        syms_in.remove(p);
                    }
                    None => return Err(c.err(format!("cannot infer -1: symbol {s} is not in the input"))),
                },
            }
        }
        let fill = match (syms_in.len(), den) {
            (_, 0) => Dim::Static(0),
            (0, den) if num % den == 0 => Dim::Static(num / den),
            (1, 1) if num == 1 => Dim::Sym(syms_in[0].clone()),
            _ => return Err(c.err(format!("cannot infer -1 for {target:?} from {}", c.ty(x)))),
        };
        for d in out.iter_mut().filter(|d| d.is_none()) {
            *d = Some(fill.clone());
        }
    }
    let dims: Vec<Dim> = out.into_iter().flatten().collect();
    Ok(vec![c.g.reshape(x, dims)])
}

pub(super) fn flatten(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let (a, r) = (c.ai("axis", 1), dims.len() as i64);
    let a = if a < 0 { a + r } else { a };
    if !(0..=r).contains(&a) {
        return Err(c.err(format!("axis {} is out of range for rank {r}", c.ai("axis", 1))));
    }
    let ax = a as usize;
    let (a, b): (usize, usize) = (dims[..ax].iter().product(), dims[ax..].iter().product());
    Ok(vec![c.g.reshape(x, [a, b])])
}

fn axes_attr_or_input(c: &Ctx, idx: usize) -> Result<Option<Vec<i64>>> {
    match c.aints("axes") {
        Some(a) => Ok(Some(a)),
        None => c.opt_ints_in(idx),
    }
}

pub(super) fn squeeze(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let axes = axes_attr_or_input(c, 1)?.unwrap_or_default();
    Ok(vec![c.g.squeeze(x, &axes)])
}

pub(super) fn unsqueeze(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let axes = axes_attr_or_input(c, 1)?.ok_or_else(|| c.err("axes are required"))?;
    let out_rank = c.rank(x) + axes.len();
    let mut pos: Vec<usize> = axes.iter().map(|&a| c.axis(a, out_rank)).collect::<Result<_>>()?;
    pos.sort_unstable();
    let mut src = c.sdims(x).into_iter();
    let dims: Vec<Dim> = (0..out_rank)
        .map(|i| if pos.contains(&i) { Dim::Static(1) } else { src.next().unwrap_or(Dim::Static(1)) })
        .collect();
    Ok(vec![c.g.reshape(x, dims)])
}

pub(super) fn transpose(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    let perm: Vec<usize> = match c.aints("perm") {
        Some(p) => p.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).rev().collect(),
    };
    Ok(vec![c.g.transpose(x, &perm)])
}

pub(super) fn concat(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let xs = c.all();
    let axis = c.ai("axis", 0);
    Ok(vec![c.g.concatenate(&xs, axis)])
}

pub(super) fn split(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let ax = c.axis(c.ai("axis", 0), dims.len())?;
    let n_out = c.node.output.len();
    let d = dims[ax];
    let sizes: Vec<usize> = match c.aints("split") {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None if c.opt(1).is_some() => c.ints_in(1)?.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let n = if c.has("num_outputs") { c.ai("num_outputs", 1) as usize } else { n_out };
            let chunk = d.div_ceil(n.max(1));
            (0..n).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
        }
    };
    if sizes.iter().sum::<usize>() != d {
        return Err(c.err(format!("split sizes {sizes:?} do not add up to dim {d}")));
    }
    let mut outs = vec![];
    let mut at = 0;
    for s in sizes {
        outs.push(c.g.slice_in_dim(x, at, at + s, ax as i64));
        at += s;
    }
    Ok(outs)
}

/// `Slice`: ONNX clamping, negative starts/ends, negative steps (reverse, then a forward slice).
pub(super) fn slice(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    let (starts, ends, axes, steps) = if c.opset < 10 {
        let s = c.aints("starts").ok_or_else(|| c.err("starts are required"))?;
        let e = c.aints("ends").ok_or_else(|| c.err("ends are required"))?;
        (s, e, c.aints("axes"), None)
    } else {
        (c.ints_in(1)?, c.ints_in(2)?, c.opt_ints_in(3)?, c.opt_ints_in(4)?)
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(c.err("starts, ends, axes and steps differ in length"));
    }
    let (mut lo, mut hi, mut st) = (vec![0usize; r], dims.clone(), vec![1usize; r]);
    let mut rev = vec![];
    for k in 0..starts.len() {
        let ax = c.axis(axes[k], r)?;
        let d = dims[ax] as i64;
        let step = steps[k];
        if step == 0 {
            return Err(c.err("step 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (norm(starts[k]), norm(ends[k]));
        if step > 0 {
            let s = s.clamp(0, d);
            let e = e.clamp(0, d).max(s);
            (lo[ax], hi[ax], st[ax]) = (s as usize, e as usize, step as usize);
        } else {
            let s = s.clamp(0, d - 1);
            let e = e.clamp(-1, d - 1);
            // On the reversed axis, index i is d-1-i.
            let (rs, re) = (d - 1 - s, d - 1 - e);
            let re = re.max(rs);
            rev.push(ax);
            (lo[ax], hi[ax], st[ax]) = (rs.max(0) as usize, re.max(0) as usize, step.unsigned_abs() as usize);
        }
    }
    let src = if rev.is_empty() { x } else { c.g.rev(x, &rev) };
    Ok(vec![c.g.slice(src, &lo, &hi, &st)])
}

/// NumPy broadcast of two static dim lists.
fn broadcast(c: &Ctx, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let r = a.len().max(b.len());
    let get = |v: &[usize], i: usize| if i + v.len() >= r { v[i + v.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(c.err(format!("dims {x} and {y} do not broadcast ({a:?} vs {b:?})"))),
        })
        .collect()
}

pub(super) fn expand(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let shape: Vec<usize> = c.ints_in(1)?.iter().map(|&v| v.max(0) as usize).collect();
    let out = broadcast(c, &c.dims(x)?, &shape)?;
    Ok(vec![c.g.broadcast_to(x, out)])
}

pub(super) fn tile(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let reps = c.ints_in(1)?;
    if reps.len() != dims.len() {
        return Err(c.err(format!("repeats {reps:?} do not match rank {}", dims.len())));
    }
    let mut big = vec![];
    let mut map = vec![];
    for (i, &d) in dims.iter().enumerate() {
        big.push(reps[i].max(0) as usize);
        map.push(big.len());
        big.push(d);
    }
    let b = c.g.broadcast_in_dim(x, big, &map);
    let out: Vec<usize> = dims.iter().zip(&reps).map(|(&d, &r)| d * r.max(0) as usize).collect();
    Ok(vec![c.g.reshape(b, out)])
}

pub(super) fn shape(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len() as i64;
    let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (s, e) = (clampi(c.ai("start", 0)), clampi(c.ai("end", r)));
    let v: Vec<i64> = dims[s..e.max(s)].iter().map(|&d| d as i64).collect();
    Ok(vec![i64_out(c, v)])
}

pub(super) fn size(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let n: usize = c.dims(x)?.iter().product();
    Ok(vec![c.scalar(n as f64, DType::I64)])
}

pub(super) fn constant_of_shape(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let dims: Vec<usize> = c.ints_in(0)?.iter().map(|&v| v.max(0) as usize).collect();
    let v = c.atensor("value")?.unwrap_or_else(|| Tensor::scalar(0.0f32));
    if v.numel() != 1 {
        return Err(c.err("value must hold one element"));
    }
    let s = c.g.constant(v.reshape(&[]).map_err(|e| c.err(e.to_string()))?);
    Ok(vec![c.g.broadcast_to(s, dims)])
}

pub(super) fn constant(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let t = if let Some(t) = c.atensor("value")? {
        t
    } else if c.has("value_float") {
        Tensor::scalar(c.af("value_float", 0.0))
    } else if let Some(v) = c.afloats("value_floats") {
        Tensor::from_vec(v.clone(), &[v.len()]).map_err(|e| c.err(e.to_string()))?
    } else if c.has("value_int") {
        Tensor::scalar(c.ai("value_int", 0))
    } else if let Some(v) = c.aints("value_ints") {
        Tensor::from_vec(v.clone(), &[v.len()]).map_err(|e| c.err(e.to_string()))?
    } else {
        return Err(c.err("only tensor / float(s) / int(s) values are supported (not strings or sparse)"));
    };
    Ok(vec![c.g.constant(t)])
}

pub(super) fn range(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (s, l, d) = (c.floats_in(0)?, c.floats_in(1)?, c.floats_in(2)?);
    let (Some(&s), Some(&l), Some(&d)) = (s.first(), l.first(), d.first()) else {
        return Err(c.err("start, limit and delta must be scalars"));
    };
    let dt = c.dtype(c.x(0)?);
    let n = ((l - s) / d).ceil().max(0.0);
    if !n.is_finite() || n > (1u64 << 31) as f64 {
        return Err(c.err(format!("range of {n} elements")));
    }
    let n = n as usize;
    let v: Vec<f64> = (0..n).map(|i| s + i as f64 * d).collect();
    let t = Tensor::from_f64s(&[n], dt, &v).map_err(|e| c.err(e.to_string()))?;
    Ok(vec![c.g.constant(t)])
}

pub(super) fn pad(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    let mode = c.astr("mode", "constant");
    let (pads, value, axes) = if c.opset < 11 {
        let p = c.aints("pads").or_else(|| c.aints("paddings")).ok_or_else(|| c.err("pads are required"))?;
        let v = c.af("value", 0.0) as f64;
        (p, c.scalar_like(v, x), None)
    } else {
        let p = c.ints_in(1)?;
        let v = match c.opt(2) {
            Some(v) => {
                let d = c.dtype(x);
                let v = c.g.convert(v, d);
                c.g.reshape(v, Vec::<usize>::new())
            }
            None => c.scalar_like(0.0, x),
        };
        (p, v, c.opt_ints_in(3)?)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&v| c.axis(v, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(c.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let (mut lo, mut hi) = (vec![0i64; r], vec![0i64; r]);
    for (k, &ax) in axes.iter().enumerate() {
        lo[ax] = pads[k];
        hi[ax] = pads[k + axes.len()];
    }
    if mode == "constant" {
        return Ok(vec![c.g.pad(x, value, &lo, &hi, &[])]);
    }
    // Crop negative pads first, then extend axis by axis.
    let zero = c.scalar_like(0.0, x);
    let crop_lo: Vec<i64> = lo.iter().map(|&v| v.min(0)).collect();
    let crop_hi: Vec<i64> = hi.iter().map(|&v| v.min(0)).collect();
    let mut y = c.g.pad(x, zero, &crop_lo, &crop_hi, &[]);
    for ax in 0..r {
        let (l, h) = (lo[ax].max(0) as usize, hi[ax].max(0) as usize);
        if l == 0 && h == 0 {
            continue;
        }
        let d = c.dims(y)?[ax];
        let ai = ax as i64;
        let mut parts = vec![];
        match mode.as_str() {
            "edge" => {
                let mut shape = c.dims(y)?;
                if l > 0 {
                    let e = c.g.slice_in_dim(y, 0, 1, ai);
                    shape[ax] = l;
                    parts.push(c.g.broadcast_to(e, shape.clone()));
                }
                parts.push(y);
                if h > 0 {
                    let e = c.g.slice_in_dim(y, d - 1, d, ai);
                    shape[ax] = h;
                    parts.push(c.g.broadcast_to(e, shape.clone()));
                }
            }
            "reflect" => {
                if l >= d || h >= d {
                    return Err(c.err(format!("reflect pad {l}/{h} needs a dim larger than the pad (dim {d})")));
                }
                if l > 0 {
                    let s = c.g.slice_in_dim(y, 1, l + 1, ai);
                    parts.push(c.g.rev(s, &[ax]));
                }
                parts.push(y);
                if h > 0 {
                    let s = c.g.slice_in_dim(y, d - 1 - h, d - 1, ai);
                    parts.push(c.g.rev(s, &[ax]));
                }
            }
            "wrap" => {
                if l > d || h > d {
                    return Err(c.err(format!("wrap pad {l}/{h} is larger than dim {d}")));
                }
                if l > 0 {
                    parts.push(c.g.slice_in_dim(y, d - l, d, ai));
                }
                parts.push(y);
                if h > 0 {
                    parts.push(c.g.slice_in_dim(y, 0, h, ai));
                }
            }
            m => return Err(c.err(format!("pad mode {m:?}"))),
        }
        y = c.g.concatenate(&parts, ai);
    }
    Ok(vec![y])
}

/// Indices with negative entries wrapped: `idx < 0 ? idx + n : idx` (`n` broadcasts).
pub(super) fn wrap_negative(c: &mut Ctx, idx: NodeId, n: NodeId) -> NodeId {
    let zero = c.scalar_like(0.0, idx);
    let neg = c.g.compare(C::Lt, idx, zero);
    let n = c.g.convert(n, c.dtype(idx));
    let plus = c.g.add(idx, n);
    c.g.select(neg, plus, idx)
}

pub(super) fn gather(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, idx) = (c.x(0)?, c.x(1)?);
    let dims = c.dims(x)?;
    let ax = c.axis(c.ai("axis", 0), dims.len())?;
    // CheckedWrap counts negative indices from the end and names the index as given.
    Ok(vec![c.g.take_with_mode(x, idx, ax as i64, GatherMode::CheckedWrap)])
}

pub(super) fn gather_elements(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, idx) = (c.x(0)?, c.x(1)?);
    let dims = c.dims(x)?;
    let ax = c.axis(c.ai("axis", 0), dims.len())?;
    Ok(vec![take_along_axis_with_mode(c.g, x, idx, ax, GatherMode::CheckedWrap)])
}

pub(super) fn gather_nd(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (mut x, mut idx) = (c.x(0)?, c.x(1)?);
    let mut dims = c.dims(x)?;
    let mut idims = c.dims(idx)?;
    let mut k = *idims.last().ok_or_else(|| c.err("indices must have rank >= 1"))?;
    let b = usize::try_from(c.ai("batch_dims", 0)).unwrap_or(usize::MAX);
    if b.checked_add(k).is_none_or(|n| n > dims.len()) || b >= idims.len() || idims[..b] != dims[..b] {
        return Err(c.err(format!("batch_dims {b} and index depth {k} do not fit data {dims:?} / indices {idims:?}")));
    }
    let out_dims: Vec<usize> = idims[..idims.len() - 1].iter().chain(&dims[b + k..]).copied().collect();
    if b > 0 {
        // Fold the batch dims into one and make it the first index coordinate (an iota).
        let nb: usize = dims[..b].iter().product();
        let mut xd = vec![nb];
        xd.extend(&dims[b..]);
        x = c.g.reshape(x, xd.clone());
        let mut id = vec![nb];
        id.extend(&idims[b..]);
        let ix = c.g.reshape(idx, id.clone());
        let ix = c.g.convert(ix, DType::I64);
        let mut bd = id.clone();
        bd[id.len() - 1] = 1;
        let bi = c.g.iota(rlx_ir::Shape::new(&bd, DType::I64), 0);
        idx = c.g.concatenate(&[bi, ix], (id.len() - 1) as i64);
        (dims, k) = (xd, k + 1);
        let last = id.len() - 1;
        idims = id;
        idims[last] = k;
    }
    let q = idims.len() - 1;
    let offset_dims = (q..q + dims.len() - k).collect();
    let gd = GatherDims { offset_dims, collapsed_slice_dims: (0..k).collect(), start_index_map: (0..k).collect() };
    let mut sizes = vec![1; k];
    sizes.extend_from_slice(&dims[k..]);
    let y = c.g.gather(x, idx, gd, &sizes, GatherMode::CheckedWrap);
    Ok(vec![if b > 0 { c.g.reshape(y, out_dims) } else { y }])
}

pub(super) fn depth_to_space(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let d = c.dims(x)?;
    let b = c.ai("blocksize", 1) as usize;
    if d.len() != 4 || b == 0 || d[1] % (b * b) != 0 {
        return Err(c.err(format!("needs [N, C, H, W] with C divisible by blocksize² (dims {d:?}, blocksize {b})")));
    }
    let (n, ch, h, w) = (d[0], d[1] / (b * b), d[2], d[3]);
    let (r, p) = if c.astr("mode", "DCR") == "CRD" {
        (c.g.reshape(x, [n, ch, b, b, h, w]), [0, 1, 4, 2, 5, 3])
    } else {
        (c.g.reshape(x, [n, b, b, ch, h, w]), [0, 3, 4, 1, 5, 2])
    };
    let t = c.g.transpose(r, &p);
    Ok(vec![c.g.reshape(t, [n, ch, h * b, w * b])])
}

pub(super) fn space_to_depth(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let d = c.dims(x)?;
    let b = c.ai("blocksize", 1) as usize;
    if d.len() != 4 || b == 0 || d[2] % b != 0 || d[3] % b != 0 {
        return Err(c.err(format!("needs [N, C, H, W] with H, W divisible by blocksize (dims {d:?})")));
    }
    let r = c.g.reshape(x, [d[0], d[1], d[2] / b, b, d[3] / b, b]);
    let t = c.g.transpose(r, &[0, 3, 5, 1, 2, 4]);
    Ok(vec![c.g.reshape(t, [d[0], d[1] * b * b, d[2] / b, d[3] / b])])
}

/// `CenterCropPad` (opset 18): each listed axis (`axes`, default all) is cropped or zero-padded
/// to `shape[i]` around its center; an odd difference puts the extra element at the end (as
/// the ONNX reference: start `⌊(dim − size) / 2⌋` when cropping, `⌊(size − dim) / 2⌋` zeros
/// before when padding).
pub(super) fn center_crop_pad(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    let sizes = c.ints_in(1)?;
    let axes: Vec<usize> = match c.aints("axes") {
        Some(a) => a.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if sizes.len() != axes.len() || sizes.iter().any(|&s| s < 0) {
        return Err(c.err(format!("shape {sizes:?} needs one non-negative size per axis {axes:?}")));
    }
    let (mut start, mut limit) = (vec![0; r], dims.clone());
    let (mut low, mut high) = (vec![0i64; r], vec![0i64; r]);
    for (&a, &s) in axes.iter().zip(&sizes) {
        let (s, d) = (s as usize, dims[a]);
        if s < d {
            start[a] = (d - s) / 2;
            limit[a] = start[a] + s;
        } else {
            low[a] = ((s - d) / 2) as i64;
            high[a] = (s - d) as i64 - low[a];
        }
    }
    let y = c.g.slice(x, &start, &limit, &[]);
    if low.iter().chain(&high).all(|&p| p == 0) {
        return Ok(vec![y]);
    }
    let zero = c.scalar_like(0.0, x);
    Ok(vec![c.g.pad(y, zero, &low, &high, &vec![0; r])])
}

/// `Compress` (opset 11): the slices of `input` along `axis` (flattened when absent) whose
/// `condition` entry is true (entries past its end count as false). The condition must be
/// known at import time, since it fixes the result's shape.
pub(super) fn compress(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let mut x = c.x(0)?;
    let keep = c.ints_in(1)?;
    let ax = match c.has("axis") {
        true => c.axis(c.ai("axis", 0), c.rank(x))?,
        false => {
            let n = c.ty(x).numel().ok_or_else(|| c.err("needs static dims to flatten"))?;
            x = c.g.reshape(x, [n]);
            0
        }
    };
    let n = c.dims(x)?[ax];
    let idx: Vec<i64> = (0..n.min(keep.len())).filter(|&i| keep[i] != 0).map(|i| i as i64).collect();
    let idx = c.i64s(&idx);
    Ok(vec![c.g.take(x, idx, ax as i64)])
}

/// `ReverseSequence` (opset 10): for each batch entry `b` (along `batch_axis`), the first
/// `sequence_lens[b]` elements along `time_axis` are reversed and the rest kept. The lengths
/// must be known at import time (they become a constant gather index).
pub(super) fn reverse_sequence(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let lens = c.ints_in(1)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    let (ta, ba) = (c.axis(c.ai("time_axis", 0), r)?, c.axis(c.ai("batch_axis", 1), r)?);
    if ta == ba || lens.len() != dims[ba] || lens.iter().any(|&l| l < 0 || l as usize > dims[ta]) {
        return Err(c.err(format!("sequence_lens {lens:?} do not fit {dims:?} (time axis {ta}, batch axis {ba})")));
    }
    // src[i] for every element: the time index it reads.
    let n: usize = dims.iter().product();
    let mut src = Vec::with_capacity(n);
    for flat in 0..n {
        let (mut rem, mut t, mut b) = (flat, 0, 0);
        for d in (0..r).rev() {
            let i = rem % dims[d];
            rem /= dims[d];
            if d == ta {
                t = i as i64;
            }
            if d == ba {
                b = i;
            }
        }
        src.push(if t < lens[b] { lens[b] - 1 - t } else { t });
    }
    let idx = c.g.constant(Tensor::from_vec(src, &dims).map_err(|e| c.err(e.to_string()))?);
    Ok(vec![take_along_axis(c.g, x, idx, ta)])
}

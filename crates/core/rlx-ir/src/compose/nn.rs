//! Layer composites: `linear`, `embedding`, `conv2d`, `max_pool2d`, `avg_pool2d`,
//! `cross_entropy`, each following the PyTorch function of the same name.
//!
//! Semantics and deviations:
//! - `linear` is `F.linear`: `w` is `[out, in]`, `y = x wᵀ + b`;
//! - `embedding` is `F.embedding(ids, table)` (note the argument order here: table first, as
//!   `jnp.take(table, ids, axis=0)`); out-of-range ids are *clamped* (XLA gather semantics)
//!   where PyTorch raises;
//! - `conv2d` is `F.conv2d` in NCHW / OIHW with symmetric zero padding;
//! - `max_pool2d` / `avg_pool2d` are `F.max_pool2d` / `F.avg_pool2d` with `ceil_mode=False`
//!   (and `dilation=1`); max padding reads `-inf` (the dtype's lowest value for ints), average
//!   padding reads 0 and counts toward the divisor (`count_include_pad=True`, PyTorch's
//!   default), so the divisor is always `kh·kw`; as PyTorch, padding may be at most half the
//!   kernel;
//! - `cross_entropy` is `F.cross_entropy(logits, targets)` with integer class targets,
//!   `reduction="mean"` and `ignore_index=-100`: targets equal to -100 are left out of the sum
//!   and of the count (all ignored gives NaN, as PyTorch); any other out-of-range target
//!   contributes a loss of 0 where PyTorch raises.

use super::{attrs, need_float};
use crate::ops::{CompareOp, ConvGeneralDilated, DotGeneral, ReduceOp};
use crate::{Attr, Attrs, DType, Dim, Graph, NodeId, Shape};

fn ints(v: &[usize]) -> Attr {
    Attr::Ints(v.iter().map(|&x| x as i64).collect())
}

impl Graph {
    /// PyTorch `F.linear(x, w, bias)`: `x` `[.., in]`, `w` `[out, in]`, `bias` `[out]`, all of
    /// one dtype; result `[.., out]` = `x · wᵀ + bias` (a `dot_general` contracting `x`'s last
    /// dim with `w`'s dim 1). Composite `"linear"`, no attrs; operands `[x, w]` or
    /// `[x, w, bias]`. Errors: rank-0 `x`, `w` not rank 2, mismatched `in`, dtypes that
    /// differ, a bias not of type `[out]`.
    pub fn linear(&mut self, x: NodeId, w: NodeId, bias: Option<NodeId>) -> NodeId {
        const NAME: &str = "linear";
        let ops: Vec<NodeId> = [Some(x), Some(w), bias].into_iter().flatten().collect();
        let Some(t) = self.compose_types(NAME, &ops) else { return self.placeholder() };
        let (xs, ws) = (&t[0], &t[1]);
        if xs.rank() == 0 || ws.rank() != 2 {
            return self.compose_fail(NAME, format!("needs x [.., in] and w [out, in], got {xs} and {ws}"));
        }
        let k = &xs.dims[xs.rank() - 1];
        let compatible = |a: &Dim, b: &Dim| a == b || matches!(a, Dim::Sym(_)) || matches!(b, Dim::Sym(_));
        if xs.dtype != ws.dtype || !compatible(k, &ws.dims[1]) {
            return self.compose_fail(NAME, format!("x {xs} does not match w {ws} (w is [out, in])"));
        }
        if let Some(bs) = t.get(2) {
            let want = Shape::from_dims(&ws.dims[..1], ws.dtype);
            if *bs != want {
                return self.compose_fail(NAME, format!("bias is {bs} but w {ws} needs {want}"));
            }
        }
        let r = xs.rank();
        self.composite_with(NAME, Attrs::new(), &ops, |g, a| {
            let dims = DotGeneral {
                lhs_contracting: vec![r - 1],
                rhs_contracting: vec![1],
                lhs_batch: vec![],
                rhs_batch: vec![],
                preferred_element_type: None,
            };
            let y = g.dot_general(a[0], a[1], dims);
            vec![if a.len() > 2 { g.add(y, a[2]) } else { y }]
        })[0]
    }

    /// PyTorch `F.embedding(ids, table)` = `jnp.take(table, ids, axis=0)`: `table` `[V, D]`,
    /// `ids` any integer shape; result `ids.shape + [D]` with `table`'s dtype. Out-of-range
    /// ids are clamped into `[0, V-1]` (see the module docs). Composite `"embedding"`, no
    /// attrs, operands `[table, ids]`. Errors: `table` not rank 2, non-integer ids, symbolic
    /// `D`.
    pub fn embedding(&mut self, table: NodeId, ids: NodeId) -> NodeId {
        const NAME: &str = "embedding";
        let Some(t) = self.compose_types(NAME, &[table, ids]) else { return self.placeholder() };
        if t[0].rank() != 2 || !t[1].dtype.is_int() {
            return self.compose_fail(NAME, format!("needs a table [V, D] and integer ids, got {} and {}", t[0], t[1]));
        }
        self.composite_with(NAME, Attrs::new(), &[table, ids], |g, a| vec![g.take(a[0], a[1], 0)])[0]
    }

    /// PyTorch `F.conv2d(x, w, bias, stride, padding, dilation, groups)`: `x` `[N, C, H, W]`,
    /// `w` `[O, C/groups, kh, kw]`, `bias` `[O]`; result `[N, O, H', W']` with `H' =
    /// (H + 2·pad - dil·(kh-1) - 1) / stride + 1` (floor). Composite `"conv2d"`, attrs
    /// `{"stride": Ints[2], "padding": Ints[2], "dilation": Ints[2], "groups": Int}`, operands
    /// `[x, w]` or `[x, w, bias]`. Errors: ranks other than 4, zero stride/dilation/groups,
    /// dtypes that differ, a bias not of type `[O]`, and whatever `conv_general_dilated`
    /// rejects (channel / group mismatches).
    #[allow(clippy::too_many_arguments)] // PyTorch's F.conv2d argument list, one to one.
    pub fn conv2d(
        &mut self,
        x: NodeId,
        w: NodeId,
        bias: Option<NodeId>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> NodeId {
        const NAME: &str = "conv2d";
        let ops: Vec<NodeId> = [Some(x), Some(w), bias].into_iter().flatten().collect();
        let Some(t) = self.compose_types(NAME, &ops) else { return self.placeholder() };
        if t[0].rank() != 4 || t[1].rank() != 4 || t[0].dtype != t[1].dtype {
            return self.compose_fail(
                NAME,
                format!("needs x [N,C,H,W] and w [O,C/g,kh,kw] of one dtype, got {} and {}", t[0], t[1]),
            );
        }
        if stride.contains(&0) || dilation.contains(&0) || groups == 0 {
            return self.compose_fail(
                NAME,
                format!("stride {stride:?}, dilation {dilation:?} and groups {groups} must be positive"),
            );
        }
        if let Some(bs) = t.get(2) {
            let want = Shape::from_dims(&t[1].dims[..1], t[1].dtype);
            if *bs != want {
                return self.compose_fail(NAME, format!("bias is {bs} but w {} needs {want}", t[1]));
            }
        }
        let o = t[1].dims[0].clone();
        let a = attrs([
            ("stride", ints(&stride)),
            ("padding", ints(&padding)),
            ("dilation", ints(&dilation)),
            ("groups", Attr::Int(groups as i64)),
        ]);
        self.composite_with(NAME, a, &ops, |g, a| {
            let p = ConvGeneralDilated {
                window_strides: stride.to_vec(),
                padding: padding.iter().map(|&p| (p as i64, p as i64)).collect(),
                lhs_dilation: vec![1, 1],
                rhs_dilation: dilation.to_vec(),
                feature_group_count: groups,
            };
            let y = g.conv_general_dilated(a[0], a[1], p);
            if a.len() > 2 {
                let b = g.reshape(a[2], vec![o.clone(), Dim::Static(1), Dim::Static(1)]);
                vec![g.add(y, b)]
            } else {
                vec![y]
            }
        })[0]
    }

    /// Argument checks shared by the 2-d pools.
    fn pool_args(
        &mut self,
        name: &str,
        x: NodeId,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> bool {
        let Some(t) = self.compose_types(name, &[x]) else { return false };
        let msg = if t[0].rank() != 4 {
            Some(format!("needs x [N, C, H, W], got {}", t[0]))
        } else if kernel.contains(&0) || stride.contains(&0) {
            Some(format!("kernel {kernel:?} and stride {stride:?} must be positive"))
        } else if padding.iter().zip(&kernel).any(|(&p, &k)| p > k / 2) {
            Some(format!("padding {padding:?} must be at most half the kernel {kernel:?}"))
        } else if name == "avg_pool2d" {
            need_float(name, "operand", &t[0]).err()
        } else if !(t[0].dtype.is_float() || t[0].dtype.is_int()) {
            Some(format!("needs a numeric operand, got {}", t[0]))
        } else {
            None
        };
        match msg {
            Some(m) => {
                self.compose_error(name, m);
                false
            }
            None => true,
        }
    }

    /// PyTorch `F.max_pool2d(x, kernel, stride, padding)` on NCHW `x` (float or int):
    /// `reduce_window` max over `[1, 1, kh, kw]` windows, padding reads `-inf`. Output
    /// `H' = (H + 2·pad - kh) / stride + 1` (floor). Composite `"max_pool2d"`, attrs
    /// `{"kernel_size": Ints[2], "stride": Ints[2], "padding": Ints[2]}`. Errors: rank ≠ 4,
    /// zero kernel/stride, padding over half the kernel, a window larger than the padded
    /// input.
    pub fn max_pool2d(&mut self, x: NodeId, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> NodeId {
        self.pool2d("max_pool2d", x, kernel, stride, padding)
    }

    /// PyTorch `F.avg_pool2d(x, kernel, stride, padding)` (`count_include_pad=True`) on NCHW
    /// float `x`: window sums (zero padding) divided by `kh·kw`. Shapes, attrs and errors as
    /// [`Graph::max_pool2d`]; composite `"avg_pool2d"`.
    pub fn avg_pool2d(&mut self, x: NodeId, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> NodeId {
        self.pool2d("avg_pool2d", x, kernel, stride, padding)
    }

    fn pool2d(&mut self, name: &str, x: NodeId, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> NodeId {
        if !self.pool_args(name, x, kernel, stride, padding) {
            return self.placeholder();
        }
        let a = attrs([("kernel_size", ints(&kernel)), ("stride", ints(&stride)), ("padding", ints(&padding))]);
        let is_max = name == "max_pool2d";
        self.composite_with(name, a, &[x], |g, a| {
            let window = [1, 1, kernel[0], kernel[1]];
            let strides = [1, 1, stride[0], stride[1]];
            let pad = [(0, 0), (0, 0), (padding[0] as i64, padding[0] as i64), (padding[1] as i64, padding[1] as i64)];
            let op = if is_max { ReduceOp::Max } else { ReduceOp::Sum };
            let y = g.reduce_window(a[0], op, &window, &strides, &pad);
            if is_max {
                vec![y]
            } else {
                let n = g.scalar_like((kernel[0] * kernel[1]) as f64, a[0]);
                vec![g.div(y, n)]
            }
        })[0]
    }

    /// PyTorch `F.cross_entropy(logits, targets)` (`reduction="mean"`, `ignore_index=-100`):
    /// `logits` `[N, C]` float, `targets` `[N]` integer class indices; result is a scalar of
    /// `logits`' dtype, `-mean_i log_softmax(logits)[i, targets[i]]` over the targets that are
    /// not -100 (see the module docs). Built on the `log_softmax` composite, so it is stable
    /// for large logits. Composite `"cross_entropy"`, attrs `{"ignore_index": Int(-100),
    /// "reduction": Str("mean")}`, operands `[logits, targets]`. Errors: ranks other than
    /// `[N, C]` / `[N]`, non-float logits, non-integer targets, mismatched N.
    pub fn cross_entropy(&mut self, logits: NodeId, targets: NodeId) -> NodeId {
        const NAME: &str = "cross_entropy";
        let Some(t) = self.compose_types(NAME, &[logits, targets]) else { return self.placeholder() };
        let (ls, ts) = (&t[0], &t[1]);
        if ls.rank() != 2 || ts.rank() != 1 || !ts.dtype.is_int() || !ls.dtype.is_float() {
            return self
                .compose_fail(NAME, format!("needs float logits [N, C] and integer targets [N], got {ls} and {ts}"));
        }
        if ls.dims[0] != ts.dims[0] && ls.dims[0].as_static().is_some() && ts.dims[0].as_static().is_some() {
            return self.compose_fail(NAME, format!("logits {ls} and targets {ts} disagree on N"));
        }
        let (dims, signed) = (ls.dims.clone(), ts.dtype.is_signed_int());
        let a = attrs([("ignore_index", Attr::Int(-100)), ("reduction", Attr::Str("mean".into()))]);
        self.composite_with(NAME, a, &[logits, targets], |g, a| {
            let lsm = g.log_softmax(a[0], 1);
            let cls = g.iota(Shape::from_dims(&dims, DType::I64), 1);
            let tc = g.convert(a[1], DType::I64);
            let tcol = g.expand_dims(tc, 1);
            let hit = g.compare(CompareOp::Eq, cls, tcol);
            let zero = g.scalar_like(0.0, a[0]);
            let picked = g.select(hit, lsm, zero);
            let row = g.sum(picked, &[1], false);
            let (total, count) = if signed {
                let ign = g.scalar(-100.0, DType::I64);
                let valid = g.compare(CompareOp::Ne, tc, ign);
                let kept = g.select(valid, row, zero);
                let vf = g.convert(valid, g.shape(a[0]).dtype);
                (g.sum(kept, &[0], false), g.sum(vf, &[0], false))
            } else {
                let one = g.scalar_like(1.0, a[0]);
                let ones = g.broadcast_to(one, vec![dims[0].clone()]);
                (g.sum(row, &[0], false), g.sum(ones, &[0], false))
            };
            let m = g.div(total, count);
            vec![g.neg(m)]
        })[0]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::{DType, Graph, Shape, Tensor};

    fn t64(v: &[f64], d: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), d).unwrap()
    }

    #[test]
    fn linear_with_and_without_bias() {
        let (xv, wv, bv) = (wavy(6, 0.0), wavy(12, 1.0), [0.5, -0.5, 1.0, 2.0]);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3], DType::F64));
        let w = g.input("w", Shape::new(&[4, 3], DType::F64));
        let b = g.input("b", Shape::new(&[4], DType::F64));
        let y = g.linear(x, w, Some(b));
        let y0 = g.linear(x, w, None);
        assert_eq!(g.shape(y), &Shape::new(&[2, 4], DType::F64));
        g.set_outputs(vec![y, y0]);
        let out = run_both(&g, &feeds(&[("x", t64(&xv, &[2, 3])), ("w", t64(&wv, &[4, 3])), ("b", t64(&bv, &[4]))]));
        let mut want = vec![];
        for i in 0..2 {
            for o in 0..4 {
                want.push((0..3).map(|k| xv[i * 3 + k] * wv[o * 3 + k]).sum::<f64>());
            }
        }
        close(&out[1], &want, 1e-14);
        let wb: Vec<f64> = want.iter().enumerate().map(|(i, v)| v + bv[i % 4]).collect();
        close(&out[0], &wb, 1e-14);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3], DType::F64));
        let w = g.input("w", Shape::new(&[3, 4], DType::F64));
        g.linear(x, w, None);
        assert!(g.error().unwrap().to_string().contains("x f64[2,3] does not match w f64[3,4]"));
    }

    #[test]
    fn embedding_gathers_rows() {
        let tv: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let mut g = Graph::new("t");
        let tab = g.input("t", Shape::new(&[4, 2], DType::F32));
        let ids = g.input("i", Shape::new(&[2, 2], DType::I64));
        let y = g.embedding(tab, ids);
        assert_eq!(g.shape(y), &Shape::new(&[2, 2, 2], DType::F32));
        g.set_outputs(vec![y]);
        let iv = Tensor::from_vec(vec![3i64, 0, 1, 1], &[2, 2]).unwrap();
        let out = run_both(&g, &feeds(&[("t", f32t(&tv, &[4, 2])), ("i", iv)]));
        close(&out[0], &[6.0, 7.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0], 0.0);
        let mut g = Graph::new("t");
        let tab = g.input("t", Shape::new(&[4, 2], DType::F32));
        let ids = g.input("i", Shape::new(&[2], DType::F32));
        g.embedding(tab, ids);
        assert!(g.error().unwrap().to_string().contains("integer ids"));
    }

    /// Direct NCHW convolution loop (PyTorch semantics).
    #[allow(clippy::too_many_arguments)]
    fn conv_ref(
        x: &[f64],
        [n, c, h, w]: [usize; 4],
        k: &[f64],
        [o, cg, kh, kw]: [usize; 4],
        s: usize,
        p: usize,
        d: usize,
        groups: usize,
    ) -> (Vec<f64>, [usize; 4]) {
        let ho = (h + 2 * p - d * (kh - 1) - 1) / s + 1;
        let wo = (w + 2 * p - d * (kw - 1) - 1) / s + 1;
        let og = o / groups;
        let mut out = vec![0.0; n * o * ho * wo];
        for b in 0..n {
            for oc in 0..o {
                let gi = oc / og;
                for i in 0..ho {
                    for j in 0..wo {
                        let mut acc = 0.0;
                        for ci in 0..cg {
                            let ch = gi * cg + ci;
                            for u in 0..kh {
                                for v in 0..kw {
                                    let (y, xx) =
                                        ((i * s + u * d) as i64 - p as i64, (j * s + v * d) as i64 - p as i64);
                                    if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                                        continue;
                                    }
                                    acc += x[((b * c + ch) * h + y as usize) * w + xx as usize]
                                        * k[((oc * cg + ci) * kh + u) * kw + v];
                                }
                            }
                        }
                        out[((b * o + oc) * ho + i) * wo + j] = acc;
                    }
                }
            }
        }
        (out, [n, o, ho, wo])
    }

    #[test]
    fn conv2d_stride_pad_dilation_groups() {
        let (xd, wd) = ([1, 4, 5, 5], [6, 2, 3, 3]);
        let xv = wavy(100, 0.5);
        let wv = wavy(108, 2.5);
        let bv = wavy(6, 4.0);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&xd, DType::F64));
        let w = g.input("w", Shape::new(&wd, DType::F64));
        let b = g.input("b", Shape::new(&[6], DType::F64));
        let y = g.conv2d(x, w, Some(b), [2, 2], [1, 1], [1, 1], 2);
        let y2 = g.conv2d(x, w, None, [1, 1], [2, 2], [2, 2], 2);
        g.set_outputs(vec![y, y2]);
        let out = run_both(&g, &feeds(&[("x", t64(&xv, &xd)), ("w", t64(&wv, &wd)), ("b", t64(&bv, &[6]))]));
        let (want, dims) = conv_ref(&xv, xd, &wv, wd, 2, 1, 1, 2);
        assert_eq!(out[0].shape(), &dims);
        let hw = dims[2] * dims[3];
        let wb: Vec<f64> = want.iter().enumerate().map(|(i, v)| v + bv[(i / hw) % 6]).collect();
        close(&out[0], &wb, 1e-12);
        let (want, dims) = conv_ref(&xv, xd, &wv, wd, 1, 2, 2, 2);
        assert_eq!(out[1].shape(), &dims);
        close(&out[1], &want, 1e-12);
    }

    #[test]
    fn pools_with_padding() {
        // x[0,0] = 0..16 as a 4x4 image.
        let xv: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[1, 1, 4, 4], DType::F32));
        let m = g.max_pool2d(x, [2, 2], [2, 2], [0, 0]);
        let mp = g.max_pool2d(x, [3, 3], [2, 2], [1, 1]);
        let a = g.avg_pool2d(x, [2, 2], [2, 2], [0, 0]);
        let ap = g.avg_pool2d(x, [3, 3], [2, 2], [1, 1]);
        g.set_outputs(vec![m, mp, a, ap]);
        let out = run_both(&g, &feeds(&[("x", f32t(&xv, &[1, 1, 4, 4]))]));
        close(&out[0], &[5.0, 7.0, 13.0, 15.0], 0.0);
        // Windows rows/cols {-1,0,1} and {1,2,3}.
        close(&out[1], &[5.0, 7.0, 13.0, 15.0], 0.0);
        close(&out[2], &[2.5, 4.5, 10.5, 12.5], 1e-6);
        // torch.nn.functional.avg_pool2d(torch.arange(16.).reshape(1,1,4,4), 3, 2, 1)
        close(&out[3], &[10.0 / 9.0, 24.0 / 9.0, 51.0 / 9.0, 90.0 / 9.0], 1e-6);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[1, 1, 4, 4], DType::F32));
        g.max_pool2d(x, [2, 2], [2, 2], [2, 0]);
        assert!(g.error().unwrap().to_string().contains("at most half the kernel"));
    }

    #[test]
    fn cross_entropy_mean_with_ignore() {
        let lv = [1.0, 2.0, 3.0, 1000.0, 0.0, -1000.0, 0.5, 0.5, 0.5];
        let mut g = Graph::new("t");
        let l = g.input("l", Shape::new(&[3, 3], DType::F64));
        let tg = g.input("t", Shape::new(&[3], DType::I32));
        let y = g.cross_entropy(l, tg);
        assert_eq!(g.shape(y), &Shape::scalar(DType::F64));
        g.set_outputs(vec![y]);
        let lse = |r: &[f64]| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        };
        let nll = |i: usize, t: usize| lse(&lv[i * 3..i * 3 + 3]) - lv[i * 3 + t];
        let run = |tv: Vec<i32>| {
            let f = feeds(&[("l", t64(&lv, &[3, 3])), ("t", Tensor::from_vec(tv, &[3]).unwrap())]);
            run_both(&g, &f).remove(0)
        };
        close(&run(vec![2, 0, 1]), &[(nll(0, 2) + nll(1, 0) + nll(2, 1)) / 3.0], 1e-12);
        // A large wrong logit stays finite (stable log_softmax): 2000 for row 1 target 2.
        close(&run(vec![0, 2, -100]), &[(nll(0, 0) + 2000.0) / 2.0], 1e-12);
        close(&run(vec![-100, -100, -100]), &[f64::NAN], 0.0);
    }
}

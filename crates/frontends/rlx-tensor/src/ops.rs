//! Tensor methods named as in NumPy / PyTorch; each is one call of the `rlx_ir::Graph`
//! builder that defines the op, so shape rules, dtype promotion and errors are the IR's.

use crate::Tensor;
use rlx_ir::op::MaskKind;
use rlx_ir::ops::CompareOp;
use rlx_ir::{DType, IntoDims};

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident => $builder:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    Tensor::apply(&[self], |g, x| g.$builder(x[0]))
                }
            )*
        }
    };
}

unary! {
    /// Elementwise `exp`.
    exp => exp;
    /// Elementwise natural `log`.
    log => log;
    /// Elementwise `sqrt`.
    sqrt => sqrt;
    /// Elementwise `1 / sqrt(x)` (`lax.rsqrt`).
    rsqrt => rsqrt;
    /// Elementwise `abs`.
    abs => abs;
    /// Elementwise `tanh`.
    tanh => tanh;
    /// Elementwise `sin`.
    sin => sin;
    /// Elementwise `cos`.
    cos => cos;
    /// Elementwise `x * x`.
    square => square;
    /// Elementwise `1 / x`.
    reciprocal => reciprocal;
    /// Elementwise `floor`.
    floor => floor;
    /// Elementwise `ceil`.
    ceil => ceil;
    /// Elementwise `erf`.
    erf => erf;
    /// `torch.sigmoid` / `jax.nn.sigmoid` (`lax.logistic`).
    sigmoid => logistic;
    /// `max(x, 0)`, gradient 0 at 0 (as `jax.nn.relu`); shape and dtype of `x`.
    relu => relu;
    /// `F.silu(x) = x * sigmoid(x)`; composite `silu`.
    silu => silu;
}

macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident => $builder:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    Tensor::apply(&[self, other], |g, x| g.$builder(x[0], x[1]))
                }
            )*
        }
    };
}

binary! {
    /// `numpy.maximum` (NumPy broadcasting, dtype promotion).
    maximum => max;
    /// `numpy.minimum`.
    minimum => min;
    /// `numpy.power`.
    pow => pow;
    /// `numpy.matmul` (`a @ b`): `[.., m, k] @ [.., k, n] -> [.., m, n]`, 1-D operands as
    /// row / column, batch dims broadcast. Errors: rank 0, mismatched `k`.
    matmul => mm;
}

macro_rules! compare {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    Tensor::apply(&[self, other], |g, x| g.compare(CompareOp::$op, x[0], x[1]))
                }
            )*
        }
    };
}

compare! {
    /// `a == b` elementwise (bool result, broadcasting).
    eq => Eq;
    /// `a != b` elementwise.
    ne => Ne;
    /// `a < b` elementwise.
    lt => Lt;
    /// `a <= b` elementwise.
    le => Le;
    /// `a > b` elementwise.
    gt => Gt;
    /// `a >= b` elementwise.
    ge => Ge;
}

impl Tensor {
    /// `numpy.where(cond, a, b)`: `cond` bool, all three broadcast.
    #[track_caller]
    pub fn select(cond: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
        Tensor::apply(&[cond, a, b], |g, x| g.select(x[0], x[1], x[2]))
    }

    /// `x.astype(dtype)` (`lax.convert_element_type`, XLA conversion rules).
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        Tensor::apply(&[self], |g, x| g.convert(x[0], dtype))
    }

    /// `F.gelu(x)` (exact, erf form; `approximate="none"`); composite `gelu`.
    #[track_caller]
    pub fn gelu(&self) -> Tensor {
        Tensor::apply(&[self], |g, x| g.gelu(x[0], false))
    }

    /// `F.gelu(x, approximate="tanh")`.
    #[track_caller]
    pub fn gelu_tanh(&self) -> Tensor {
        Tensor::apply(&[self], |g, x| g.gelu(x[0], true))
    }

    /// `F.softmax(x, dim=axis)` (negative counts from the end); composite `softmax`.
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.softmax(x[0], axis))
    }

    /// `F.log_softmax(x, dim=axis)`; composite `log_softmax`.
    #[track_caller]
    pub fn log_softmax(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.log_softmax(x[0], axis))
    }

    /// `F.layer_norm(x, x.shape[-1:], gamma, beta, eps)`: normalize the last dim (biased
    /// variance); `gamma` / `beta` of type `[x.shape[-1]]`. Composite `layer_norm`.
    #[track_caller]
    pub fn layer_norm(&self, gamma: Option<&Tensor>, beta: Option<&Tensor>, eps: f64) -> Tensor {
        let ops: Vec<&Tensor> = [Some(self), gamma, beta].into_iter().flatten().collect();
        let (hg, hb) = (gamma.is_some(), beta.is_some());
        Tensor::apply(&ops, |g, x| {
            let gi = hg.then(|| x[1]);
            let bi = hb.then(|| x[if hg { 2 } else { 1 }]);
            g.layer_norm(x[0], gi, bi, -1, eps)
        })
    }

    /// `F.rms_norm(x, x.shape[-1:], gamma, eps)` over the last dim; composite `rms_norm`.
    #[track_caller]
    pub fn rms_norm(&self, gamma: Option<&Tensor>, eps: f64) -> Tensor {
        let ops: Vec<&Tensor> = [Some(self), gamma].into_iter().flatten().collect();
        Tensor::apply(&ops, |g, x| g.rms_norm(x[0], x.get(1).copied(), -1, eps))
    }

    /// `numpy.sum(x, axis=axes, keepdims=keepdims)` (negative axes count from the end; an
    /// empty list reduces nothing; see [`Tensor::sum_all`]).
    #[track_caller]
    pub fn sum(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| g.sum(x[0], axes, keepdims))
    }

    /// `numpy.sum(x)`: the sum of every element, rank 0.
    #[track_caller]
    pub fn sum_all(&self) -> Tensor {
        let axes: Vec<i64> = (0..self.ndim() as i64).collect();
        self.sum(&axes, false)
    }

    /// `numpy.mean(x, axis=axes, keepdims=keepdims)` (float; reduced dims static).
    #[track_caller]
    pub fn mean(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| g.mean(x[0], axes, keepdims))
    }

    /// `numpy.mean(x)` over every element.
    #[track_caller]
    pub fn mean_all(&self) -> Tensor {
        let axes: Vec<i64> = (0..self.ndim() as i64).collect();
        self.mean(&axes, false)
    }

    /// `numpy.var(x, axis=axes, keepdims=keepdims)` (biased, `ddof=0`): `mean((x -
    /// mean(x))²)`.
    #[track_caller]
    pub fn var(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| {
            let m = g.mean(x[0], axes, true);
            let d = g.sub(x[0], m);
            let d2 = g.mul(d, d);
            g.mean(d2, axes, keepdims)
        })
    }

    /// `numpy.max(x, axis=axes, keepdims=keepdims)` (NaN-propagating).
    #[track_caller]
    pub fn max(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| g.reduce_max(x[0], axes, keepdims))
    }

    /// `numpy.min(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn min(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| g.reduce_min(x[0], axes, keepdims))
    }

    /// `numpy.prod(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn prod(&self, axes: &[i64], keepdims: bool) -> Tensor {
        Tensor::apply(&[self], |g, x| g.prod(x[0], axes, keepdims))
    }

    /// `numpy.argmax(x, axis)`: i64 index of the first maximum (axis removed).
    #[track_caller]
    pub fn argmax(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.argmax(x[0], axis, DType::I64))
    }

    /// `numpy.argmin(x, axis)`: i64 index of the first minimum.
    #[track_caller]
    pub fn argmin(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.argmin(x[0], axis, DType::I64))
    }

    /// `numpy.cumsum(x, axis)`.
    #[track_caller]
    pub fn cumsum(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.cumsum(x[0], axis, false))
    }

    /// `numpy.reshape(x, dims)` (row-major; no `-1`).
    #[track_caller]
    pub fn reshape(&self, dims: impl IntoDims) -> Tensor {
        let dims = dims.into_dims();
        Tensor::apply(&[self], |g, x| g.reshape(x[0], dims))
    }

    /// `torch.transpose(x, dim0, dim1)`: swap two dims (negative count from the end).
    #[track_caller]
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Tensor {
        let r = self.ndim();
        let (a, b) = (rlx_ir::normalize_axis(dim0, r), rlx_ir::normalize_axis(dim1, r));
        let mut perm: Vec<usize> = (0..r).collect();
        match (a, b) {
            (Some(a), Some(b)) => perm.swap(a, b),
            // An out-of-range dim: let the builder report it with the shapes.
            _ => perm = vec![r; r.max(1)],
        }
        self.permute(&perm)
    }

    /// NumPy `x.T`: reverse the dims.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let perm: Vec<usize> = (0..self.ndim()).rev().collect();
        self.permute(&perm)
    }

    /// `torch.permute(x, perm)` / `numpy.transpose(x, perm)`: output dim `i` is dim `perm[i]`.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> Tensor {
        Tensor::apply(&[self], |g, x| g.transpose(x[0], perm))
    }

    /// `numpy.expand_dims(x, axis)` / `torch.unsqueeze`.
    #[track_caller]
    pub fn unsqueeze(&self, axis: i64) -> Tensor {
        Tensor::apply(&[self], |g, x| g.expand_dims(x[0], axis))
    }

    /// `numpy.squeeze(x, axes)` (empty: every size-1 dim).
    #[track_caller]
    pub fn squeeze(&self, axes: &[i64]) -> Tensor {
        Tensor::apply(&[self], |g, x| g.squeeze(x[0], axes))
    }

    /// `numpy.broadcast_to(x, dims)`.
    #[track_caller]
    pub fn broadcast_to(&self, dims: impl IntoDims) -> Tensor {
        let dims = dims.into_dims();
        Tensor::apply(&[self], |g, x| g.broadcast_to(x[0], dims))
    }

    /// `x[start[0]:limit[0], start[1]:limit[1], ...]` (`lax.slice` with unit strides).
    #[track_caller]
    pub fn slice(&self, start: &[usize], limit: &[usize]) -> Tensor {
        Tensor::apply(&[self], |g, x| g.slice(x[0], start, limit, &[]))
    }

    /// `torch.narrow`: `x[.., start..end, ..]` along `axis`.
    #[track_caller]
    pub fn slice_axis(&self, axis: i64, start: usize, end: usize) -> Tensor {
        Tensor::apply(&[self], |g, x| g.slice_in_dim(x[0], start, end, axis))
    }

    /// `numpy.concatenate(xs, axis)`.
    #[track_caller]
    pub fn concat(xs: &[&Tensor], axis: i64) -> Tensor {
        Tensor::apply(xs, |g, x| g.concatenate(x, axis))
    }

    /// `numpy.take(x, indices, axis)` (indices clamped, as `jnp.take(mode="clip")`).
    #[track_caller]
    pub fn take(&self, indices: &Tensor, axis: i64) -> Tensor {
        Tensor::apply(&[self, indices], |g, x| g.take(x[0], x[1], axis))
    }

    /// `F.conv2d(x, w, bias, stride, padding)` with dilation 1 and one group: `x` `[N, C, H,
    /// W]`, `w` `[O, C, kh, kw]`, `bias` `[O]`. Composite `conv2d`.
    #[track_caller]
    pub fn conv2d(&self, w: &Tensor, bias: Option<&Tensor>, stride: [usize; 2], padding: [usize; 2]) -> Tensor {
        let ops: Vec<&Tensor> = [Some(self), Some(w), bias].into_iter().flatten().collect();
        Tensor::apply(&ops, |g, x| g.conv2d(x[0], x[1], x.get(2).copied(), stride, padding, [1, 1], 1))
    }

    /// `F.max_pool2d(x, kernel, stride, padding)` on `[N, C, H, W]`.
    #[track_caller]
    pub fn max_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Tensor {
        Tensor::apply(&[self], |g, x| g.max_pool2d(x[0], kernel, stride, padding))
    }

    /// `F.scaled_dot_product_attention(q, k, v, is_causal=causal)`: `q` `[B, H, Sq, D]`,
    /// `k` `[B, Hk, Sk, D]`, `v` `[B, Hk, Sk, Dv]`, scale `1/√D`. Composite
    /// `scaled_dot_product_attention`.
    #[track_caller]
    pub fn attention(&self, k: &Tensor, v: &Tensor, causal: bool) -> Tensor {
        let mask = if causal { MaskKind::Causal } else { MaskKind::None };
        Tensor::apply(&[self, k, v], |g, x| g.scaled_dot_product_attention(x[0], x[1], x[2], mask, None))
    }

    /// `F.cross_entropy(logits, targets)` (mean over the batch): `logits` `[N, C]` float,
    /// `targets` `[N]` integer; a scalar. Composite `cross_entropy`.
    #[track_caller]
    pub fn cross_entropy(&self, targets: &Tensor) -> Tensor {
        Tensor::apply(&[self, targets], |g, x| g.cross_entropy(x[0], x[1]))
    }

    /// `lax.stop_gradient`.
    #[track_caller]
    pub fn detach(&self) -> Tensor {
        Tensor::apply(&[self], |g, x| g.stop_gradient(x[0]))
    }
}

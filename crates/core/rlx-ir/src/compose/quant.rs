//! Quantized-weight composites: `dequant_matmul`.
//!
//! `dequant_matmul(x, w_packed, scheme, n, k)` is `x @ Wᵀ` where `W` (logical `[N, K]` f32,
//! row-major) is stored packed as GGUF / llama.cpp blocks of the ggml type `scheme`: each of
//! the `N` rows is `K / block_size` consecutive blocks, so `w_packed` is a U8 tensor of
//! `N · K / block_size · type_size` bytes (any shape with that many elements, usually 1-D).
//! This is llama.cpp's `ggml_mul_mat(W, x)` / PyTorch `F.linear(x, dequant(W))`.
//! `dequant_matmul_rows` reads `N` consecutive rows of a larger `[R, bytes_per_row]` matrix
//! (attribute `"row_start"`), as `ggml_mul_mat` of a `ggml_view_2d` of the weight.
//!
//! Decomposition: rlx-ir does not know the block formats (they live in `rlx-gguf`, which
//! depends on rlx-ir), so the body is the registered custom op [`GGUF_DEQUANTIZE`]
//! (`w_packed -> f32[N, K]`, attrs `{scheme, n, k}`) followed by a plain `dot_general`
//! contracting the last axis of `x` with axis 1 of `W`. The op is registered by
//! `rlx_gguf::register_ops()` (the CPU backend calls it too); building a `dequant_matmul`
//! before it is registered records an error naming `"gguf_dequantize"`. The body is the
//! oracle: it dequantizes the whole matrix (bit-exact with the `gguf` package) and multiplies
//! in f32; backends with a native kernel keep the weights packed (see `rlx-cpu`'s
//! `kernels::qmatmul`, which, like llama.cpp, quantizes the activations too).

use super::attrs;
use crate::ops::DotGeneral;
use crate::{Attr, DType, Graph, NodeId};

/// Name of the registered custom op that dequantizes GGUF blocks (`rlx_gguf::register_ops`).
pub const GGUF_DEQUANTIZE: &str = "gguf_dequantize";
/// Attribute of `dequant_matmul` / `gguf_dequantize` naming the weights' block type, as ggml
/// spells it (`"Q4_0"`, `"Q6_K"`, …).
pub const SCHEME_ATTR: &str = "scheme";
/// Attribute of `dequant_matmul` / `gguf_dequantize` naming the weights' byte layout
/// (`rlx_gguf::Layout`); absent means [`BLOCKS_LAYOUT`].
pub const LAYOUT_ATTR: &str = "layout";
/// The GGUF block layout's name (`rlx_gguf::Layout::Blocks`).
pub const BLOCKS_LAYOUT: &str = "blocks";
/// Attribute of `dequant_matmul` ([`Graph::dequant_matmul_rows`]): the first of the `n` weight
/// rows read from a `[R, bytes_per_row]` operand; absent means the operand holds exactly the
/// `n` rows.
pub const ROW_START_ATTR: &str = "row_start";

impl Graph {
    /// `x @ Wᵀ` with `W: [n, k]` stored as packed GGUF blocks of type `scheme` (the ggml name,
    /// e.g. `"Q4_0"`, `"Q8_0"`, `"Q4_K"`; case as ggml spells it) in the U8 tensor `w_packed`.
    /// `x: f32[.., k]` (rank >= 1) gives `f32[.., n]`. Composite `"dequant_matmul"`, attrs
    /// `{"scheme": Str, "n": Int, "k": Int}`; the body is
    /// `dot_general(x, gguf_dequantize(w_packed), contract x's last axis with W's axis 1)`.
    ///
    /// Errors (recorded, placeholder returned): a non-f32 or rank-0 `x`, `x`'s last dim not
    /// `k`, a non-U8 `w_packed`; the registered `gguf_dequantize` op checks the scheme name,
    /// that `k` is a multiple of its block size and the byte count (an unregistered op is an
    /// error naming it).
    pub fn dequant_matmul(&mut self, x: NodeId, w_packed: NodeId, scheme: &str, n: usize, k: usize) -> NodeId {
        self.dequant_matmul_layout(x, w_packed, scheme, BLOCKS_LAYOUT, n, k)
    }

    /// [`Graph::dequant_matmul`] with the weight bytes in the byte layout `layout`
    /// (`rlx_gguf::Layout`: `"blocks"`, the GGUF layout, adds no attribute; `"split_rows"`, each
    /// row's Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 quants then its scales, sets `"layout"`). The registered
    /// `gguf_dequantize` op checks the name and that the layout holds `scheme`.
    pub fn dequant_matmul_layout(
        &mut self,
        x: NodeId,
        w_packed: NodeId,
        scheme: &str,
        layout: &str,
        n: usize,
        k: usize,
    ) -> NodeId {
        self.dequant_matmul_impl(x, w_packed, scheme, layout, None, n, k)
    }

    /// [`Graph::dequant_matmul_layout`] on the weight rows `row_start .. row_start + n` of a
    /// larger packed matrix: `w_packed` is U8 `[R, bytes_per_row]` (R ≥ `row_start + n`, each
    /// row whole blocks of `k` columns in `layout`), and the result is `x @ W[row_start ..
    /// row_start + n]ᵀ`, `f32[.., n]` — llama.cpp's `ggml_mul_mat` of a `ggml_view_2d` of
    /// the weight. Sets the attribute `"row_start": Int`; the body slices the rows, then
    /// dequantizes and multiplies as [`Graph::dequant_matmul`]'s. A backend kernel reads the
    /// rows in place (no copy of the weights), so one joined weight (e.g. Q, K and V stacked)
    /// can feed one product per part.
    ///
    /// Errors (recorded, placeholder returned): those of [`Graph::dequant_matmul_layout`], a
    /// `w_packed` that is not static rank 2, or fewer than `row_start + n` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn dequant_matmul_rows(
        &mut self,
        x: NodeId,
        w_packed: NodeId,
        scheme: &str,
        layout: &str,
        row_start: usize,
        n: usize,
        k: usize,
    ) -> NodeId {
        self.dequant_matmul_impl(x, w_packed, scheme, layout, Some(row_start), n, k)
    }

    #[allow(clippy::too_many_arguments)]
    fn dequant_matmul_impl(
        &mut self,
        x: NodeId,
        w_packed: NodeId,
        scheme: &str,
        layout: &str,
        row_start: Option<usize>,
        n: usize,
        k: usize,
    ) -> NodeId {
        const NAME: &str = "dequant_matmul";
        let Some(t) = self.compose_types(NAME, &[x, w_packed]) else { return self.placeholder() };
        let (xt, wt) = (&t[0], &t[1]);
        if xt.dtype != DType::F32 || xt.rank() == 0 {
            return self.compose_fail(NAME, format!("needs an f32 operand of rank >= 1, got {xt}"));
        }
        if xt.dims[xt.rank() - 1].as_static().is_some_and(|d| d != k) {
            return self.compose_fail(NAME, format!("operand {xt} has last dim != k = {k}"));
        }
        if wt.dtype != DType::U8 {
            return self.compose_fail(NAME, format!("needs U8 packed weights, got {wt}"));
        }
        let mut a =
            attrs([(SCHEME_ATTR, Attr::Str(scheme.into())), ("n", Attr::Int(n as i64)), ("k", Attr::Int(k as i64))]);
        if layout != BLOCKS_LAYOUT {
            a.insert(LAYOUT_ATTR.into(), Attr::Str(layout.into()));
        }
        // The rows `row_start .. row_start + n` of a `[R, bytes_per_row]` weight.
        let rows = match row_start {
            None => None,
            Some(r0) => match wt.static_dims().as_deref() {
                Some(&[r, bpr]) if r0.checked_add(n).is_some_and(|end| end <= r) => Some((r0, r, bpr)),
                _ => {
                    return self.compose_fail(
                        NAME,
                        format!("rows {r0} .. {r0} + {n} need static [R, bytes_per_row] weights with R >= {r0} + {n}, got {wt}"),
                    );
                }
            },
        };
        let body_attrs = a.clone();
        if let Some((r0, ..)) = rows {
            a.insert(ROW_START_ATTR.into(), Attr::Int(r0 as i64));
        }
        let last = xt.rank() - 1;
        self.composite_with(NAME, a, &[x, w_packed], |g, args| {
            let wp = match rows {
                Some((r0, r, bpr)) if r0 > 0 || n < r => g.slice(args[1], &[r0, 0], &[r0 + n, bpr], &[]),
                _ => args[1],
            };
            let w = g.custom(GGUF_DEQUANTIZE, body_attrs, &[wp])[0];
            vec![g.dot_general(args[0], w, DotGeneral::contract(&[last], &[1]))]
        })[0]
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Graph, Shape};

    #[test]
    fn argument_errors_name_the_problem() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[2, 64], DType::F32));
        let w = g.input("w", Shape::new(&[36], DType::U8));
        g.dequant_matmul(x, w, "Q8_0", 1, 32);
        assert!(g.error().unwrap().to_string().contains("last dim != k = 32"));
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[2, 32], DType::I32));
        let w = g.input("w", Shape::new(&[34], DType::U8));
        g.dequant_matmul(x, w, "Q8_0", 1, 32);
        assert!(g.error().unwrap().to_string().contains("f32 operand"));
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[32], DType::F32));
        let w = g.input("w", Shape::new(&[34], DType::F32));
        g.dequant_matmul(x, w, "Q8_0", 1, 32);
        assert!(g.error().unwrap().to_string().contains("U8 packed"));
    }

    #[test]
    fn row_ranges_must_lie_inside_static_2d_weights() {
        for (shape, r0, n) in [(vec![3, 34], 2, 2), (vec![102], 0, 1), (vec![3, 34], usize::MAX, 2)] {
            let mut g = Graph::new("g");
            let x = g.input("x", Shape::new(&[2, 32], DType::F32));
            let w = g.input("w", Shape::new(&shape, DType::U8));
            g.dequant_matmul_rows(x, w, "Q8_0", "blocks", r0, n, 32);
            assert!(g.error().unwrap().to_string().contains("need static [R, bytes_per_row]"), "{shape:?} {r0} {n}");
        }
    }
}

//! The `gguf_dequantize` custom op of rlx-ir, the body of its `dequant_matmul` composite.
//!
//! `gguf_dequantize(w_packed) -> f32[n, k]` with attrs `{"scheme": Str, "n": Int, "k": Int}`
//! and optionally `"layout": Str` ([`Layout`], `"blocks"` when absent): `w_packed` (U8, any
//! shape, `n · k / block_size · type_size` elements) holds a row-major `[n, k]` matrix of the
//! ggml type named `scheme` in that layout; the result is `dequantize` of its blocks
//! (bit-exact with the `gguf` Python package). Call [`register_ops`] once per process before
//! building graphs that use it.

use crate::GgmlType;
use crate::layout::{Layout, dequantize_rows};
use rlx_ir::ops::custom::{CustomOp, register_op};
use rlx_ir::ops::{Attr, Attrs};
use rlx_ir::{DType, IrError, Shape, Tensor};
use std::sync::{Arc, Once};

pub use rlx_ir::compose::quant::GGUF_DEQUANTIZE;

/// Register `gguf_dequantize` with rlx-ir (idempotent; cheap after the first call).
pub fn register_ops() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| register_op(GGUF_DEQUANTIZE, Arc::new(GgufDequantize)));
}

/// The scheme, `n` and `k` of a `gguf_dequantize` / `dequant_matmul` attribute map, checked:
/// a known ggml type whose block size divides `k`. Also the packed byte count.
pub fn parse_attrs(attrs: &Attrs) -> Result<(GgmlType, usize, usize, usize), String> {
    let Some(Attr::Str(name)) = attrs.get(rlx_ir::compose::quant::SCHEME_ATTR) else {
        return Err("needs a string attribute scheme".into());
    };
    let ty = GgmlType::from_name(name).ok_or_else(|| format!("unknown ggml type {name:?}"))?;
    let int = |key: &str| match attrs.get(key) {
        Some(Attr::Int(v)) if *v >= 0 => Ok(*v as usize),
        _ => Err(format!("needs a non-negative int attribute {key}")),
    };
    let (n, k) = (int("n")?, int("k")?);
    if !k.is_multiple_of(ty.block_size()) {
        return Err(format!("k = {k} is not a multiple of the {} block size {}", ty.name(), ty.block_size()));
    }
    let bytes = (k / ty.block_size())
        .checked_mul(ty.type_size())
        .and_then(|r| r.checked_mul(n))
        .ok_or_else(|| format!("{n} x {k} {} overflows", ty.name()))?;
    Ok((ty, n, k, bytes))
}

/// The layout named by the `"layout"` attribute ([`Layout::Blocks`] when absent), checked
/// against the scheme `ty`.
pub fn parse_layout(attrs: &Attrs, ty: GgmlType) -> Result<Layout, String> {
    let layout = match attrs.get(Layout::ATTR) {
        None => Layout::Blocks,
        Some(Attr::Str(name)) => {
            Layout::from_name(name).ok_or_else(|| format!("unknown layout {name:?} (blocks, split_rows)"))?
        }
        Some(_) => return Err("the layout attribute must be a string".into()),
    };
    if !layout.supports(ty) {
        return Err(format!("the {} layout does not hold {} (only Q4_0, Q4_1 and Q8_0)", layout.name(), ty.name()));
    }
    Ok(layout)
}

struct GgufDequantize;

impl CustomOp for GgufDequantize {
    fn infer(&self, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        let (ty, n, k, bytes) = parse_attrs(attrs)?;
        parse_layout(attrs, ty)?;
        if ins.len() != 1 || ins[0].dtype != DType::U8 {
            return Err(format!("{GGUF_DEQUANTIZE} takes one U8 operand, got {} operands", ins.len()));
        }
        if let Some(len) = ins[0].numel()
            && len != bytes
        {
            return Err(format!("{n} x {k} {} needs {bytes} bytes, operand {} has {len}", ty.name(), ins[0]));
        }
        Ok(vec![Shape::new(&[n, k], DType::F32)])
    }

    fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let err = |msg: String| IrError::Eval { op: format!("custom.{GGUF_DEQUANTIZE}"), msg };
        let (ty, _, k, _) = parse_attrs(attrs).map_err(err)?;
        let layout = parse_layout(attrs, ty).map_err(err)?;
        let data = ins[0].as_slice::<u8>().ok_or_else(|| err("operand is not U8".into()))?;
        let out = outs[0].as_mut_slice::<f32>().ok_or_else(|| err("result is not f32".into()))?;
        dequantize_rows(ty, layout, data, k, out).map_err(|e| err(e.to_string()))
    }
}

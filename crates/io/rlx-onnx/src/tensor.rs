//! `TensorProto` ↔ RLX [`Tensor`]: data-type codes, raw / typed / external storage.

use crate::error::{OnnxError, Result};
use crate::proto::{TensorProto, tensor_proto::DataType};
use rlx_ir::narrow::{pack_bits, unpack_bits};
use rlx_ir::{DType, Data, Tensor};
use std::path::Path;

/// RLX dtype of an ONNX `TensorProto.DataType` code, or a typed error naming the type.
///
/// Supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8/16/32/64, UINT8/16/32/64, BOOL, the four
/// FLOAT8 types, FLOAT4E2M1, INT4/UINT4, INT2/UINT2. The rest (STRING, COMPLEX*, FLOAT8E8M0)
/// have no RLX dtype.
pub fn dtype_of(code: i32, what: &str) -> Result<DType> {
    let dt = DataType::try_from(code).ok();
    Ok(match dt {
        Some(DataType::Float) => DType::F32,
        Some(DataType::Double) => DType::F64,
        Some(DataType::Float16) => DType::F16,
        Some(DataType::Bfloat16) => DType::BF16,
        Some(DataType::Int8) => DType::I8,
        Some(DataType::Int16) => DType::I16,
        Some(DataType::Int32) => DType::I32,
        Some(DataType::Int64) => DType::I64,
        Some(DataType::Uint8) => DType::U8,
        Some(DataType::Uint32) => DType::U32,
        Some(DataType::Bool) => DType::Bool,
        Some(DataType::Uint16) => DType::U16,
        Some(DataType::Uint64) => DType::U64,
        Some(DataType::Float8e4m3fn) => DType::F8E4M3FN,
        Some(DataType::Float8e4m3fnuz) => DType::F8E4M3FNUZ,
        Some(DataType::Float8e5m2) => DType::F8E5M2,
        Some(DataType::Float8e5m2fnuz) => DType::F8E5M2FNUZ,
        Some(DataType::Float4e2m1) => DType::F4E2M1FN,
        Some(DataType::Int4) => DType::I4,
        Some(DataType::Uint4) => DType::U4,
        Some(DataType::Int2) => DType::I2,
        Some(DataType::Uint2) => DType::U2,
        _ => {
            let name = dt.map(|d| d.as_str_name().to_string()).unwrap_or_else(|| "UNKNOWN".into());
            return Err(OnnxError::UnsupportedDtype { name, code, what: what.to_string() });
        }
    })
}

/// ONNX `TensorProto.DataType` code of an RLX dtype.
pub fn code_of(d: DType) -> i32 {
    (match d {
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
        DType::U32 => DataType::Uint32,
        DType::Bool => DataType::Bool,
        DType::U16 => DataType::Uint16,
        DType::U64 => DataType::Uint64,
        DType::F8E4M3FN => DataType::Float8e4m3fn,
        DType::F8E4M3FNUZ => DataType::Float8e4m3fnuz,
        DType::F8E5M2 => DataType::Float8e5m2,
        DType::F8E5M2FNUZ => DataType::Float8e5m2fnuz,
        DType::F4E2M1FN => DataType::Float4e2m1,
        DType::I4 => DataType::Int4,
        DType::U4 => DataType::Uint4,
        DType::I2 => DataType::Int2,
        DType::U2 => DataType::Uint2,
    }) as i32
}

/// Static dims of a `TensorProto`; negative dims and element counts that overflow are errors.
pub fn dims_of(t: &TensorProto) -> Result<Vec<usize>> {
    let mut n: usize = 1;
    let mut out = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        let d = usize::try_from(d).map_err(|_| invalid(t, format!("negative dim {d}")))?;
        n = n.checked_mul(d).ok_or_else(|| invalid(t, "element count overflows".into()))?;
        out.push(d);
    }
    Ok(out)
}

fn invalid(t: &TensorProto, msg: String) -> OnnxError {
    OnnxError::Invalid(format!("tensor {:?}: {msg}", t.name()))
}

/// Decode a `TensorProto` into a host tensor. `base_dir` resolves external data
/// (`data_location = EXTERNAL`, keys `location`, `offset`, `length`); `None` rejects it.
///
/// Errors: an unsupported data type, a payload whose length does not match the dims, an
/// external file that is missing or too short, or a location that escapes `base_dir`.
pub fn to_tensor(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let what = format!("tensor {:?}", t.name());
    let dtype = dtype_of(t.data_type(), &what)?;
    let dims = dims_of(t)?;
    let n: usize = dims.iter().product();
    let bad_len = |got: usize| invalid(t, format!("{got} values for dims {dims:?} ({n} expected)"));
    let from_bytes = |bytes: &[u8]| {
        // 4- and 2-bit types are packed, the first element in the lowest bits.
        let bytes = if dtype.bits() < 8 {
            unpack_bits(dtype, bytes, n).ok_or_else(|| bad_len(bytes.len() * 8 / dtype.bits() as usize))?
        } else {
            bytes.to_vec()
        };
        Tensor::from_le_bytes(&dims, dtype, &bytes).map_err(|e| invalid(t, e.to_string()))
    };
    if t.data_location() == crate::proto::tensor_proto::DataLocation::External {
        return from_bytes(&read_external(t, base_dir)?);
    }
    if let Some(raw) = &t.raw_data {
        return from_bytes(raw);
    }
    // Types of 8 bits or fewer travel in int32_data as their encodings (packed below 8 bits).
    let codes = || t.int32_data.iter().map(|&v| v as u8).collect::<Vec<u8>>();
    let data = match dtype {
        DType::F32 => Data::F32(t.float_data.clone()),
        DType::F64 => Data::F64(t.double_data.clone()),
        DType::I64 => Data::I64(t.int64_data.clone()),
        DType::U32 => Data::U32(t.uint64_data.iter().map(|&v| v as u32).collect()),
        DType::I32 => Data::I32(t.int32_data.clone()),
        DType::I16 => Data::I16(t.int32_data.iter().map(|&v| v as i16).collect()),
        DType::I8 => Data::I8(t.int32_data.iter().map(|&v| v as i8).collect()),
        DType::U8 => Data::U8(t.int32_data.iter().map(|&v| v as u8).collect()),
        DType::Bool => Data::Bool(t.int32_data.iter().map(|&v| v != 0).collect()),
        // 16-bit floats travel as their bit patterns in int32_data.
        DType::F16 => Data::F16(t.int32_data.iter().map(|&v| half::f16::from_bits(v as u16)).collect()),
        DType::BF16 => Data::BF16(t.int32_data.iter().map(|&v| half::bf16::from_bits(v as u16)).collect()),
        DType::U16 => Data::U16(t.int32_data.iter().map(|&v| v as u16).collect()),
        DType::U64 => Data::U64(t.uint64_data.clone()),
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => return from_bytes(&codes()),
        DType::F4E2M1FN | DType::I4 | DType::U4 | DType::I2 | DType::U2 => return from_bytes(&codes()),
    };
    if data.len() != n {
        return Err(bad_len(data.len()));
    }
    Tensor::new(&dims, data).map_err(|e| invalid(t, e.to_string()))
}

fn read_external(t: &TensorProto, base_dir: Option<&Path>) -> Result<Vec<u8>> {
    let base = base_dir.ok_or_else(|| invalid(t, "external data needs the model's directory".into()))?;
    let (mut loc, mut offset, mut length) = (None, 0u64, None);
    for kv in &t.external_data {
        match kv.key() {
            "location" => loc = Some(kv.value().to_string()),
            "offset" => offset = kv.value().parse().map_err(|_| invalid(t, format!("bad offset {:?}", kv.value())))?,
            "length" => {
                length =
                    Some(kv.value().parse::<u64>().map_err(|_| invalid(t, format!("bad length {:?}", kv.value())))?)
            }
            _ => {}
        }
    }
    let loc = loc.ok_or_else(|| invalid(t, "external data without a location".into()))?;
    let rel = Path::new(&loc);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(invalid(t, format!("external location {loc:?} leaves the model directory")));
    }
    let path = base.join(rel);
    let bytes = std::fs::read(&path).map_err(|source| OnnxError::Io { path: path.display().to_string(), source })?;
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = match length {
        Some(l) => start.saturating_add(usize::try_from(l).unwrap_or(usize::MAX)),
        None => bytes.len(),
    };
    bytes.get(start..end).map(<[u8]>::to_vec).ok_or_else(|| {
        invalid(t, format!("external range {start}..{end} is past the end of {loc:?} ({} bytes)", bytes.len()))
    })
}

/// Encode a host tensor as a `TensorProto` (raw little-endian data, 4- and 2-bit types
/// packed), e.g. for test data.
pub fn from_tensor(name: &str, t: &Tensor) -> TensorProto {
    TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(code_of(t.dtype())),
        name: Some(name.to_string()),
        raw_data: Some(pack_bits(t.dtype(), &t.to_le_bytes())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_int4_round_trips_and_short_payloads_are_errors() {
        let t = Tensor::from_f64s(&[3], DType::I4, &[7.0, -8.0, -1.0]).unwrap();
        let p = from_tensor("x", &t);
        assert_eq!(p.raw_data.as_deref(), Some(&[0x87u8, 0x0f][..]));
        assert_eq!(to_tensor(&p, None).unwrap(), t);
        let typed = TensorProto { raw_data: None, int32_data: vec![0x87, 0x0f], ..p.clone() };
        assert_eq!(to_tensor(&typed, None).unwrap(), t);
        let short = TensorProto { raw_data: Some(vec![0x87]), ..p };
        assert!(matches!(to_tensor(&short, None), Err(OnnxError::Invalid(_))));
    }
}

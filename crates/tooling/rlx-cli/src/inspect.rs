//! `rlx inspect FILE`: metadata, tensors and totals of a GGUF, safetensors or ONNX file.
//!
//! The format is detected by [`crate::error::detect`]: magic first (`GGUF`), then by name
//! (`.gguf`, `*.index.json` for a sharded safetensors checkpoint, `.onnx`, `.safetensors`),
//! then by shape (an 8-byte length followed by `{`). The readers are panic-free on any input;
//! every failure is a [`CliError`] with one line of text.

use std::collections::BTreeMap;
use std::path::Path;

use rlx_gguf::{GgufFile, MetadataArray, MetadataValue};
use rlx_safetensors::{SafetensorsFile, ShardedSafetensors, dtype_name};
use serde_json::{Value, json};

use crate::error::{CliError, Format, detect};

/// Array elements shown (human output and JSON `values`) before the rest is summarized.
pub const ARRAY_HEAD: usize = 8;
/// Characters of a string shown in human output before it is cut.
const STRING_HEAD: usize = 72;

/// One metadata entry: its type name, a one-line human rendering and its JSON form.
pub struct MetaEntry {
    key: String,
    ty: String,
    human: String,
    json: Value,
}

/// One tensor row.
pub struct TensorRow {
    name: String,
    dtype: String,
    /// Row-major shape.
    shape: Vec<u64>,
    elements: u64,
    bytes: u64,
    /// Absolute file offset of the first byte; `None` for ONNX initializers (protobuf fields
    /// have no fixed position a reader could seek to; printed `-`, JSON `null`).
    offset: Option<u64>,
    /// Extra per-format fields for JSON (`ggml_dims`, `shard`).
    extra: Vec<(&'static str, Value)>,
}

/// Everything `inspect` prints, format-independent.
pub struct Report {
    format: &'static str,
    file: String,
    file_size: u64,
    /// Header facts (version, alignment, ...), in display order.
    facts: Vec<(&'static str, Value)>,
    metadata: Vec<MetaEntry>,
    tensors: Vec<TensorRow>,
}

/// Inspect the file at `path`.
pub fn inspect(path: &Path) -> Result<Report, CliError> {
    let file = path.display().to_string();
    let file_size = std::fs::metadata(path)?.len();
    let mut r = Report { format: "", file, file_size, facts: vec![], metadata: vec![], tensors: vec![] };
    match detect(path)? {
        Format::Gguf => gguf(path, &mut r)?,
        Format::Safetensors => safetensors(path, &mut r)?,
        Format::ShardIndex => sharded(path, &mut r)?,
        Format::Onnx => onnx(path, &mut r)?,
    }
    Ok(r)
}

fn gguf(path: &Path, r: &mut Report) -> Result<(), CliError> {
    let f = GgufFile::open(path)?;
    let c = f.content();
    r.format = "gguf";
    r.facts = vec![
        ("version", json!(c.version)),
        ("alignment", json!(c.alignment)),
        ("data_offset", json!(c.data_offset)),
        ("architecture", c.architecture().map_or(Value::Null, |a| json!(a))),
    ];
    for (k, v) in &c.metadata {
        r.metadata.push(MetaEntry { key: k.clone(), ty: type_name(v), human: human_value(v), json: json_value(v) });
    }
    for t in &c.tensors {
        r.tensors.push(TensorRow {
            name: t.name.clone(),
            dtype: t.ty.name().to_string(),
            shape: t.shape(),
            elements: t.n_elements,
            bytes: t.n_bytes,
            offset: Some(c.data_offset.saturating_add(t.offset)),
            extra: vec![("ggml_dims", json!(t.dims))],
        });
    }
    Ok(())
}

/// ONNX: model metadata (IR version, opsets, producer), graph inputs / outputs with their
/// types, op counts, and the initializers as tensors (no offset: protobuf has no fixed layout).
/// A file without a graph (e.g. an empty file, which decodes as an all-default `ModelProto`) is
/// an error, as for `rlx run`.
fn onnx(path: &Path, r: &mut Report) -> Result<(), CliError> {
    let m = rlx_onnx::load(path)?;
    r.format = "onnx";
    let opsets: Vec<String> = m
        .opset_import
        .iter()
        .map(|o| format!("{}:{}", if o.domain().is_empty() { "ai.onnx" } else { o.domain() }, o.version()))
        .collect();
    let g = m.graph.clone().ok_or_else(|| rlx_onnx::OnnxError::Invalid("model has no graph".into()))?;
    r.facts = vec![
        ("ir_version", json!(m.ir_version())),
        ("opsets", json!(opsets)),
        ("producer", json!(format!("{} {}", m.producer_name(), m.producer_version()).trim())),
        ("graph", json!(g.name())),
        ("nodes", json!(g.node.len())),
    ];
    let inits: Vec<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let io = |v: &rlx_onnx::proto::ValueInfoProto| -> String {
        use rlx_onnx::proto::{tensor_shape_proto::dimension::Value as D, type_proto::Value as T};
        match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(T::TensorType(t)) => {
                let ty = rlx_onnx::dtype_of(t.elem_type(), "")
                    .map(|d| d.numpy_name().to_string())
                    .unwrap_or_else(|_| format!("type#{}", t.elem_type()));
                let dims: Vec<String> = t
                    .shape
                    .as_ref()
                    .map(|s| {
                        s.dim
                            .iter()
                            .map(|d| match &d.value {
                                Some(D::DimValue(n)) => n.to_string(),
                                Some(D::DimParam(p)) => p.clone(),
                                None => "?".into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!("{ty}[{}]", dims.join(", "))
            }
            Some(_) => "non-tensor".into(),
            None => "untyped".into(),
        }
    };
    for v in g.input.iter().filter(|v| !inits.contains(&v.name())) {
        let t = io(v);
        r.metadata.push(MetaEntry {
            key: format!("input.{}", v.name()),
            ty: "value".into(),
            human: t.clone(),
            json: json!(t),
        });
    }
    for v in &g.output {
        let t = io(v);
        r.metadata.push(MetaEntry {
            key: format!("output.{}", v.name()),
            ty: "value".into(),
            human: t.clone(),
            json: json!(t),
        });
    }
    for (op, (n, ok)) in rlx_onnx::report(&m).ops {
        let human = format!("{n}{}", if ok { "" } else { " (unsupported)" });
        r.metadata.push(MetaEntry {
            key: format!("op.{op}"),
            ty: "count".into(),
            human,
            json: json!({"count": n, "supported": ok}),
        });
    }
    for p in &m.metadata_props {
        r.metadata.push(MetaEntry {
            key: p.key().to_string(),
            ty: "string".into(),
            human: human_str(p.value()),
            json: json!(p.value()),
        });
    }
    for t in &g.initializer {
        let shape: Vec<u64> = t.dims.iter().map(|&d| d.max(0) as u64).collect();
        let elements: u64 = shape.iter().product();
        let (dtype, size) = match rlx_onnx::dtype_of(t.data_type(), "") {
            Ok(d) => (d.numpy_name().to_string(), d.size_bytes() as u64),
            Err(_) => (format!("onnx_type_{}", t.data_type()), 0),
        };
        let external = t.data_location() == rlx_onnx::proto::tensor_proto::DataLocation::External;
        r.tensors.push(TensorRow {
            name: t.name().to_string(),
            dtype,
            shape,
            elements,
            bytes: elements.saturating_mul(size),
            offset: None,
            extra: if external { vec![("external", json!(true))] } else { vec![] },
        });
    }
    Ok(())
}

fn st_rows(f: &SafetensorsFile<'_>, shard: Option<&str>, out: &mut Vec<TensorRow>) {
    let base = f.header().data_offset;
    for t in f.tensors() {
        out.push(TensorRow {
            name: t.name.clone(),
            dtype: dtype_name(t.dtype),
            shape: t.shape.iter().map(|&d| d as u64).collect(),
            elements: t.n_elements() as u64,
            bytes: t.n_bytes() as u64,
            offset: Some(base + t.data_offsets.0 as u64),
            extra: shard.map(|s| vec![("shard", json!(s))]).unwrap_or_default(),
        });
    }
}

fn string_meta(m: &BTreeMap<String, String>, out: &mut Vec<MetaEntry>) {
    for (k, v) in m {
        out.push(MetaEntry { key: k.clone(), ty: "string".into(), human: human_str(v), json: json!(v) });
    }
}

fn safetensors(path: &Path, r: &mut Report) -> Result<(), CliError> {
    let f = SafetensorsFile::open(path)?;
    r.format = "safetensors";
    r.facts = vec![("header_bytes", json!(f.header().data_offset - 8)), ("data_offset", json!(f.header().data_offset))];
    string_meta(f.metadata(), &mut r.metadata);
    st_rows(&f, None, &mut r.tensors);
    Ok(())
}

fn sharded(path: &Path, r: &mut Report) -> Result<(), CliError> {
    let s = ShardedSafetensors::open(path)?;
    s.open_all()?;
    r.format = "safetensors";
    r.facts = vec![("shards", json!(s.shard_files().collect::<Vec<_>>()))];
    for (k, v) in s.index_metadata() {
        let human = match v {
            Value::String(s) => human_str(s),
            v => v.to_string(),
        };
        r.metadata.push(MetaEntry { key: k.clone(), ty: json_type(v).into(), human, json: v.clone() });
    }
    let mut shard_meta = BTreeMap::new();
    for shard in s.shard_files() {
        let name = s.names().find(|n| s.shard_of(n) == Some(shard)).unwrap_or_default();
        let f = s.file_of(name)?;
        for (k, v) in f.metadata() {
            shard_meta.entry(k.clone()).or_insert_with(|| v.clone());
        }
        st_rows(f, Some(shard), &mut r.tensors);
    }
    string_meta(&shard_meta, &mut r.metadata);
    // Only the tensors the index maps (a shard may hold extra ones).
    r.tensors.retain(|t| s.shard_of(&t.name).is_some());
    Ok(())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn elem_name(a: &MetadataArray) -> String {
    match a {
        MetadataArray::U8(_) => "u8".into(),
        MetadataArray::I8(_) => "i8".into(),
        MetadataArray::U16(_) => "u16".into(),
        MetadataArray::I16(_) => "i16".into(),
        MetadataArray::U32(_) => "u32".into(),
        MetadataArray::I32(_) => "i32".into(),
        MetadataArray::F32(_) => "f32".into(),
        MetadataArray::Bool(_) => "bool".into(),
        MetadataArray::String(_) => "string".into(),
        MetadataArray::U64(_) => "u64".into(),
        MetadataArray::I64(_) => "i64".into(),
        MetadataArray::F64(_) => "f64".into(),
        MetadataArray::Array(v) => match v.first() {
            Some(inner) => format!("array[{}]", elem_name(inner)),
            None => "array".into(),
        },
    }
}

/// `u32`, `string`, `array[string]`, ...
fn type_name(v: &MetadataValue) -> String {
    match v {
        MetadataValue::Array(a) => format!("array[{}]", elem_name(a)),
        MetadataValue::U8(_) => "u8".into(),
        MetadataValue::I8(_) => "i8".into(),
        MetadataValue::U16(_) => "u16".into(),
        MetadataValue::I16(_) => "i16".into(),
        MetadataValue::U32(_) => "u32".into(),
        MetadataValue::I32(_) => "i32".into(),
        MetadataValue::F32(_) => "f32".into(),
        MetadataValue::Bool(_) => "bool".into(),
        MetadataValue::String(_) => "string".into(),
        MetadataValue::U64(_) => "u64".into(),
        MetadataValue::I64(_) => "i64".into(),
        MetadataValue::F64(_) => "f64".into(),
    }
}

/// A string quoted and escaped on one line, cut after [`STRING_HEAD`] characters.
fn human_str(s: &str) -> String {
    let n = s.chars().count();
    if n <= STRING_HEAD {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(STRING_HEAD).collect();
        format!("{head:?}... ({n} chars)")
    }
}

fn human_value(v: &MetadataValue) -> String {
    match v {
        MetadataValue::String(s) => human_str(s),
        MetadataValue::Array(a) => {
            let shown: Vec<String> =
                (0..a.len().min(ARRAY_HEAD)).filter_map(|i| a.get(i)).map(|e| human_value(&e)).collect();
            let more = if a.len() > ARRAY_HEAD { ", ..." } else { "" };
            format!("[{}; {}] [{}{more}]", elem_name(a), a.len(), shown.join(", "))
        }
        v => v.to_string(),
    }
}

fn float_json(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or_else(|| json!(x.to_string()), Value::Number)
}

/// Scalars as JSON values (non-finite floats as strings `"NaN"`, `"inf"`, `"-inf"`), arrays as
/// `{"type": "array", "elem_type", "len", "values": first ARRAY_HEAD, "truncated"}`.
fn json_value(v: &MetadataValue) -> Value {
    match v {
        MetadataValue::U8(x) => json!(x),
        MetadataValue::I8(x) => json!(x),
        MetadataValue::U16(x) => json!(x),
        MetadataValue::I16(x) => json!(x),
        MetadataValue::U32(x) => json!(x),
        MetadataValue::I32(x) => json!(x),
        MetadataValue::U64(x) => json!(x),
        MetadataValue::I64(x) => json!(x),
        MetadataValue::F32(x) => float_json(*x as f64),
        MetadataValue::F64(x) => float_json(*x),
        MetadataValue::Bool(x) => json!(x),
        MetadataValue::String(s) => json!(s),
        MetadataValue::Array(a) => {
            let values: Vec<Value> =
                (0..a.len().min(ARRAY_HEAD)).filter_map(|i| a.get(i)).map(|e| json_value(&e)).collect();
            json!({
                "type": "array",
                "elem_type": elem_name(a),
                "len": a.len(),
                "values": values,
                "truncated": a.len() > ARRAY_HEAD,
            })
        }
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn human_bytes(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u < U.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{x:.1} {}", U[u]) }
}

fn shape_str(s: &[u64]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

fn table(rows: &[Vec<String>], right: &[bool]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            line.push(' ');
            if right[c] {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c + 1 < cols {
                    line.push_str(&" ".repeat(pad));
                }
            }
            line.push(' ');
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Per-dtype tensor count, elements and bytes, sorted by dtype name.
fn by_dtype(r: &Report) -> BTreeMap<&str, (u64, u64, u64)> {
    let mut m: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for t in &r.tensors {
        let e = m.entry(t.dtype.as_str()).or_default();
        e.0 += 1;
        e.1 += t.elements;
        e.2 += t.bytes;
    }
    m
}

impl Report {
    fn total_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    fn total_elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// The human-readable report (several lines, ends with a newline).
    pub fn human(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "file:     {} ({} bytes, {})\n",
            self.file,
            thousands(self.file_size),
            human_bytes(self.file_size)
        ));
        let facts: Vec<String> = self
            .facts
            .iter()
            .map(|(k, v)| match v {
                Value::String(x) => format!("{k} {x}"),
                // A GGUF without `general.architecture` (e.g. from `rlx convert`): JSON keeps null.
                Value::Null => format!("{k} (none)"),
                v => format!("{k} {v}"),
            })
            .collect();
        s.push_str(&format!("format:   {} ({})\n", self.format, facts.join(", ")));
        s.push_str(&format!(
            "metadata: {} {}\n",
            self.metadata.len(),
            if self.metadata.len() == 1 { "entry" } else { "entries" }
        ));
        if !self.metadata.is_empty() {
            let mut rows = vec![vec!["KEY".to_string(), "TYPE".into(), "VALUE".into()]];
            rows.extend(self.metadata.iter().map(|m| vec![m.key.clone(), m.ty.clone(), m.human.clone()]));
            s.push_str(&table(&rows, &[false, false, false]));
        }
        s.push_str(&format!("tensors:  {}\n", self.tensors.len()));
        if !self.tensors.is_empty() {
            let mut rows =
                vec![vec!["NAME".to_string(), "DTYPE".into(), "SHAPE".into(), "BYTES".into(), "OFFSET".into()]];
            rows.extend(self.tensors.iter().map(|t| {
                vec![
                    t.name.clone(),
                    t.dtype.clone(),
                    shape_str(&t.shape),
                    thousands(t.bytes),
                    t.offset.map_or("-".into(), thousands),
                ]
            }));
            s.push_str(&table(&rows, &[false, false, false, true, true]));
        }
        s.push_str(&format!(
            "totals:   {} tensors, {} elements, {} bytes ({})\n",
            self.tensors.len(),
            thousands(self.total_elements()),
            thousands(self.total_bytes()),
            human_bytes(self.total_bytes())
        ));
        let groups = by_dtype(self);
        if !groups.is_empty() {
            let mut rows = vec![vec!["DTYPE".to_string(), "TENSORS".into(), "ELEMENTS".into(), "BYTES".into()]];
            rows.extend(
                groups.iter().map(|(d, (n, e, b))| vec![d.to_string(), thousands(*n), thousands(*e), thousands(*b)]),
            );
            s.push_str(&table(&rows, &[false, true, true, true]));
        }
        s
    }

    /// The JSON report: keys `format`, `file`, `file_size`, the format's header facts,
    /// `metadata` (key → value), `tensors` (file order), `tensor_count`, `total_bytes`,
    /// `total_elements`, `dtypes` (dtype → {tensors, elements, bytes}).
    pub fn json(&self) -> Value {
        let mut o = serde_json::Map::new();
        o.insert("format".into(), json!(self.format));
        o.insert("file".into(), json!(self.file));
        o.insert("file_size".into(), json!(self.file_size));
        for (k, v) in &self.facts {
            o.insert((*k).into(), v.clone());
        }
        let meta: serde_json::Map<String, Value> =
            self.metadata.iter().map(|m| (m.key.clone(), m.json.clone())).collect();
        o.insert("metadata".into(), Value::Object(meta));
        let tensors: Vec<Value> = self
            .tensors
            .iter()
            .map(|t| {
                let mut e = serde_json::Map::new();
                e.insert("name".into(), json!(t.name));
                e.insert("dtype".into(), json!(t.dtype));
                e.insert("shape".into(), json!(t.shape));
                e.insert("elements".into(), json!(t.elements));
                e.insert("bytes".into(), json!(t.bytes));
                e.insert("offset".into(), json!(t.offset));
                for (k, v) in &t.extra {
                    e.insert((*k).into(), v.clone());
                }
                Value::Object(e)
            })
            .collect();
        o.insert("tensors".into(), Value::Array(tensors));
        o.insert("tensor_count".into(), json!(self.tensors.len()));
        o.insert("total_bytes".into(), json!(self.total_bytes()));
        o.insert("total_elements".into(), json!(self.total_elements()));
        let groups: serde_json::Map<String, Value> = by_dtype(self)
            .into_iter()
            .map(|(d, (n, e, b))| (d.to_string(), json!({"tensors": n, "elements": e, "bytes": b})))
            .collect();
        o.insert("dtypes".into(), Value::Object(groups));
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(100), "100");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(98_362_432), "93.8 MiB");
        assert_eq!(human_str("ab\"c"), "\"ab\\\"c\"");
        assert!(human_str(&"x".repeat(100)).ends_with("... (100 chars)"));
        let a = MetadataValue::from((0..20u32).collect::<Vec<_>>());
        assert_eq!(human_value(&a), "[u32; 20] [0, 1, 2, 3, 4, 5, 6, 7, ...]");
        let j = json_value(&a);
        assert_eq!(j["len"], 20);
        assert_eq!(j["values"].as_array().unwrap().len(), ARRAY_HEAD);
        assert_eq!(j["truncated"], true);
        assert_eq!(json_value(&MetadataValue::F32(f32::NAN)), json!("NaN"));
        assert_eq!(type_name(&MetadataValue::from(vec!["a"])), "array[string]");
    }
}

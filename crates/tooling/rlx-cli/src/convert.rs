//! `rlx convert IN.safetensors OUT.gguf --quant TYPE`: the spec's `convert_to_gguf`.
//!
//! Every tensor of the safetensors file (or sharded checkpoint, via its `.index.json`) is
//! written to a GGUF v3 file under the same name and row-major shape:
//!
//! - floating tensors (F32, F16, BF16, F64) with 2 or more dims are converted to f32 and
//!   quantized to TYPE with `rlx_gguf::quants::quantize` (llama.cpp's reference quantizers, no
//!   importance matrix);
//! - 0-D and 1-D tensors (norm weights, biases) stay F32, as llama.cpp's converter keeps them;
//! - a tensor whose rows (last dim) are not a multiple of TYPE's block size (32 or 256) falls
//!   back as llama.cpp's quantizer does (`tensor_type_fallback`): a k-quant to the 32-block type
//!   llama.cpp names (Q2_K, Q3_K → Q4_0; Q4_K → Q5_0; Q5_K → Q5_1; Q6_K → Q8_0), and to F16
//!   where that block does not fit either; the report lists the type each tensor got and counts
//!   the fallbacks (`fallbacks` in `--json`);
//! - integer tensors (I8, I16, I32, I64) are copied unchanged into the GGUF integer type of the
//!   same width; U8, U32 and BOOL tensors have no GGUF type and are an error.
//!
//! TYPE is one of [`QUANT_TYPES`]. Metadata: `general.quantization_version = 2`,
//! `general.file_type` (u32, llama.cpp's `llama_ftype` for TYPE, see [`llama_ftype`]), and each
//! safetensors `__metadata__` entry as `safetensors.<key>` (a string).

use std::path::Path;

use rlx_gguf::quants::quantize;
use rlx_gguf::{GgmlType, GgufWriter};
use rlx_safetensors::{Dtype, SafetensorsFile, ShardedSafetensors};

use serde_json::{Value, json};

use crate::error::{CliError, Format, check_output, err, require_format, write_error};

/// The `--quant` values accepted.
pub const QUANT_TYPES: &[&str] =
    &["F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"];

/// llama.cpp's `llama_ftype` (`include/llama.h`) of a file converted to `qt`, the value it
/// reads from `general.file_type`: `ALL_F32` 0, `MOSTLY_F16` 1, `Q4_0` 2, `Q4_1` 3, `Q8_0` 7,
/// `Q5_0` 8, `Q5_1` 9, `Q2_K` 10, `Q6_K` 18; a k-quant without llama.cpp's S/M/L mix maps as
/// llama.cpp's loader guesses a file whose tensors are mostly that type (`Q3_K` → `Q3_K_M` 12,
/// `Q4_K` → `Q4_K_M` 15, `Q5_K` → `Q5_K_M` 17). `qt` is one of [`QUANT_TYPES`].
pub fn llama_ftype(qt: GgmlType) -> u32 {
    match qt {
        GgmlType::F16 => 1,
        GgmlType::Q4_0 => 2,
        GgmlType::Q4_1 => 3,
        GgmlType::Q8_0 => 7,
        GgmlType::Q5_0 => 8,
        GgmlType::Q5_1 => 9,
        GgmlType::Q2_K => 10,
        GgmlType::Q3_K => 12,
        GgmlType::Q4_K => 15,
        GgmlType::Q5_K => 17,
        GgmlType::Q6_K => 18,
        _ => 0,
    }
}

/// One converted tensor.
pub struct Converted {
    name: String,
    shape: Vec<u64>,
    source: String,
    ty: GgmlType,
    bytes: usize,
    /// Stored in another type than the one asked for (its rows do not fit that block; see
    /// [`fallback`]).
    fell_back: bool,
}

/// What `convert` did.
pub struct ConvertReport {
    input: String,
    output: String,
    quant: GgmlType,
    tensors: Vec<Converted>,
    bytes_in: u64,
    bytes_out: u64,
}

/// One source tensor: dtype, row-major shape, raw little-endian bytes, and its values as f32
/// for floating dtypes.
struct SourceTensor {
    dtype: Dtype,
    shape: Vec<usize>,
    raw: Vec<u8>,
    values: Option<Vec<f32>>,
}

/// The tensors of a single or sharded safetensors checkpoint.
enum Source {
    Single(SafetensorsFile<'static>),
    Sharded(ShardedSafetensors),
}

impl Source {
    fn open(path: &Path) -> Result<Source, CliError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".index.json") {
            Ok(Source::Sharded(ShardedSafetensors::open(path)?))
        } else {
            Ok(Source::Single(SafetensorsFile::open(path)?))
        }
    }
    fn names(&self) -> Vec<String> {
        match self {
            Source::Single(f) => f.names().map(String::from).collect(),
            Source::Sharded(s) => s.names().map(String::from).collect(),
        }
    }
    fn tensor(&self, name: &str) -> Result<SourceTensor, CliError> {
        let (file, name) = match self {
            Source::Single(f) => (f, name),
            Source::Sharded(s) => (s.file_of(name)?, name),
        };
        let info = file.info(name)?;
        let float = matches!(info.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::F64);
        let values = if float { Some(file.to_f32(name)?) } else { None };
        Ok(SourceTensor {
            dtype: info.dtype,
            shape: info.shape.clone(),
            raw: file.tensor_bytes(name)?.to_vec(),
            values,
        })
    }
    fn metadata(&self) -> Vec<(String, String)> {
        match self {
            Source::Single(f) => f.metadata().iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Source::Sharded(_) => vec![],
        }
    }
}

/// Parse a `--quant` value (case-insensitive): clap's value parser, so that an unknown scheme
/// is a usage error (status 2) before any file is read, as other bad flag values are.
pub fn parse_quant(s: &str) -> Result<GgmlType, String> {
    let up = s.to_ascii_uppercase();
    match GgmlType::from_name(&up) {
        Some(t) if QUANT_TYPES.contains(&up.as_str()) => Ok(t),
        _ => Err(format!("unknown quant type (one of {})", QUANT_TYPES.join(", "))),
    }
}

/// Convert `input` (safetensors, or a sharded checkpoint's `.index.json`) to the GGUF file
/// `output` with 2-D+ float tensors quantized to `qt` (see the module docs).
pub fn convert(input: &Path, output: &Path, qt: GgmlType) -> Result<ConvertReport, CliError> {
    let needs = "rlx convert reads a safetensors checkpoint (or a sharded one's .index.json)";
    let expected = "a .safetensors checkpoint or a sharded one's .safetensors.index.json";
    require_format(input, &[Format::Safetensors, Format::ShardIndex], needs, expected)?;
    check_output("OUT", output)?;
    if same_file(input, output) {
        return Err(err(format!("OUT {} is the input file; give another name", output.display())));
    }
    let src = Source::open(input)?;
    let mut w = GgufWriter::new();
    w.add_metadata("general.quantization_version", 2u32)?;
    w.add_metadata("general.file_type", llama_ftype(qt))?;
    for (k, v) in src.metadata() {
        w.add_metadata(format!("safetensors.{k}"), v)?;
    }
    let mut tensors = vec![];
    let mut bytes_in = 0u64;
    for name in src.names() {
        let SourceTensor { dtype, shape, raw, values } = src.tensor(&name)?;
        bytes_in += raw.len() as u64;
        let shape64: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let row = shape.last().copied().unwrap_or(1);
        let mut fell_back = false;
        let (ty, data) = match values {
            Some(v) => {
                let ty = if shape.len() <= 1 { GgmlType::F32 } else { fallback(qt, row) };
                fell_back = shape.len() >= 2 && ty != qt;
                (ty, quantize(ty, &v).map_err(|e| err(format!("tensor {name:?}: {e}")))?)
            }
            None => {
                let ty = match dtype {
                    Dtype::I8 => GgmlType::I8,
                    Dtype::I16 => GgmlType::I16,
                    Dtype::I32 => GgmlType::I32,
                    Dtype::I64 => GgmlType::I64,
                    d => return Err(err(format!("tensor {name:?}: dtype {d:?} has no GGUF type"))),
                };
                (ty, raw)
            }
        };
        let bytes = data.len();
        w.add_tensor(name.clone(), &shape64, ty, data)?;
        tensors.push(Converted { name, shape: shape64, source: format!("{dtype:?}"), ty, bytes, fell_back });
    }
    w.write_file(output).map_err(|e| write_error(output, e))?;
    let bytes_out = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    Ok(ConvertReport {
        input: input.display().to_string(),
        output: output.display().to_string(),
        quant: qt,
        tensors,
        bytes_in,
        bytes_out,
    })
}

/// `a` and `b` name one existing file (the same path, a symlink or a hard link to it): on Unix
/// the same device and inode, elsewhere the same canonical path.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The type a tensor with rows of `row` values gets when `qt` is asked for: `qt` if its block
/// divides the row, else llama.cpp's fallback (`tensor_type_fallback` in `llama-quant.cpp`):
/// Q2_K / Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, and F16 when that block does not
/// divide the row either (or `qt` has a 32-block already).
fn fallback(qt: GgmlType, row: usize) -> GgmlType {
    if row.is_multiple_of(qt.block_size()) {
        return qt;
    }
    let next = match qt {
        GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        _ => GgmlType::F16,
    };
    if row.is_multiple_of(next.block_size()) { next } else { GgmlType::F16 }
}

impl ConvertReport {
    /// Tensors stored in another type than the one asked for (see [`fallback`]).
    fn fallbacks(&self) -> usize {
        self.tensors.iter().filter(|t| t.fell_back).count()
    }

    /// Human-readable report.
    pub fn human(&self) -> String {
        let mut s = format!("{} -> {} ({})\n", self.input, self.output, self.quant.name());
        // The name column is as wide as the longest name, so the dtype columns line up (a
        // fixed width of 48 shifted every longer name's row).
        let w = self.tensors.iter().map(|t| t.name.chars().count()).max().unwrap_or(0);
        for t in &self.tensors {
            s += &format!("  {:<w$} {:>5} -> {:<5} {:?} {} bytes\n", t.name, t.source, t.ty.name(), t.shape, t.bytes);
        }
        // A small or already-quantized input can come out larger (GGUF's header and
        // alignment, F16 copies of I8 rows...): "0.41x smaller" read as a shrink.
        let ratio = if self.bytes_in == 0 {
            // Nothing converted: the file is GGUF's header alone.
            "no tensor data".to_string()
        } else if self.bytes_out <= self.bytes_in {
            format!("{:.2}x smaller", self.bytes_in as f64 / self.bytes_out.max(1) as f64)
        } else {
            format!("{:.2}x larger", self.bytes_out as f64 / self.bytes_in.max(1) as f64)
        };
        s += &format!(
            "{} tensors, {} bytes of tensor data in, a {}-byte file out ({ratio})\n",
            self.tensors.len(),
            self.bytes_in,
            self.bytes_out
        );
        let n = self.fallbacks();
        if n > 0 {
            s += &format!(
                "{n} tensor(s) not in {}: their rows are not a multiple of its block of {} (llama.cpp's fallback)\n",
                self.quant.name(),
                self.quant.block_size()
            );
        }
        s
    }

    /// The JSON object (one line).
    pub fn json(&self) -> String {
        let tensors: Vec<Value> = self
            .tensors
            .iter()
            .map(|t| {
                json!({"name": t.name, "shape": t.shape, "source_dtype": t.source, "ggml_type": t.ty.name(),
                       "bytes": t.bytes})
            })
            .collect();
        json!({"input": self.input, "output": self.output, "quant": self.quant.name(), "tensors": tensors,
               "bytes_in": self.bytes_in, "bytes_out": self.bytes_out, "fallbacks": self.fallbacks()})
        .to_string()
    }
}

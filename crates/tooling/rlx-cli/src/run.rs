//! `rlx run MODEL.onnx --input name=FILE.npy ... [--output out.npz]`: import an ONNX model,
//! compile it for the CPU, feed `.npy` inputs and print (or save) the outputs.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use rlx_ir::{DType, Tensor};
use rlx_onnx::ImportOptions;
use rlx_runtime::{CompileOptions, Device, Session};
use serde_json::{Value, json};

use crate::error::{CliError, Format, check_output, err, write_error};

/// Values printed per output in human output.
const HEAD: usize = 8;

/// Read a C-order `.npy` file into a tensor (f32/f64/f16, i8/i16/i32/i64, u8/u32, bool).
pub fn read_npy(path: &Path) -> Result<Tensor, CliError> {
    let bytes = std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    // A short read anywhere (header or data) is a truncated file; name the .npy, not just
    // the model, and say so instead of io's "failed to fill whole buffer".
    let bad = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            err(format!("{}: truncated .npy file ({} bytes)", path.display(), bytes.len()))
        } else {
            err(format!("{}: {e}", path.display()))
        }
    };
    // npyz says "magic not found for NPY file" for these too.
    if bytes.is_empty() {
        return Err(err(format!("{}: empty file (an .npy file starts with \\x93NUMPY)", path.display())));
    }
    if bytes.len() < 6 && b"\x93NUMPY".starts_with(&bytes) {
        return Err(err(format!("{}: truncated .npy file ({} bytes)", path.display(), bytes.len())));
    }
    if !bytes.starts_with(b"\x93NUMPY") {
        return Err(err(format!("{}: not an .npy file (it does not start with \\x93NUMPY)", path.display())));
    }
    if let Some(dims) = overflowing_shape(&bytes) {
        return Err(err(format!(
            "{}: corrupt .npy header: shape {dims:?} has more elements than 64 bits can count",
            path.display()
        )));
    }
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(bad)?;
    if npy.order() != npyz::Order::C {
        return Err(err(format!("{}: Fortran-order arrays are not supported", path.display())));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let ty = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(err(format!("{}: unsupported npy dtype {other:?}", path.display()))),
    };
    let t = match ty.as_str() {
        "<f4" => Tensor::from_vec(npy.into_vec::<f32>().map_err(bad)?, &shape),
        "<f8" => Tensor::from_vec(npy.into_vec::<f64>().map_err(bad)?, &shape),
        "|i1" => Tensor::from_vec(npy.into_vec::<i8>().map_err(bad)?, &shape),
        "<i2" => Tensor::from_vec(npy.into_vec::<i16>().map_err(bad)?, &shape),
        "<i4" => Tensor::from_vec(npy.into_vec::<i32>().map_err(bad)?, &shape),
        "<i8" => Tensor::from_vec(npy.into_vec::<i64>().map_err(bad)?, &shape),
        "|u1" => Tensor::from_vec(npy.into_vec::<u8>().map_err(bad)?, &shape),
        "<u2" => Tensor::from_vec(npy.into_vec::<u16>().map_err(bad)?, &shape),
        "<u4" => Tensor::from_vec(npy.into_vec::<u32>().map_err(bad)?, &shape),
        "<u8" => Tensor::from_vec(npy.into_vec::<u64>().map_err(bad)?, &shape),
        "|b1" => Tensor::from_vec(npy.into_vec::<bool>().map_err(bad)?, &shape),
        t => return Err(err(format!("{}: unsupported npy dtype {t}", path.display()))),
    };
    Ok(t?)
}

/// The dims of an `.npy` header's `shape` when their product (taken left to right, as npyz
/// takes it) overflows u64; `None` for any other header, which npyz then judges. Read before
/// npyz parses the header: it multiplies the dims unchecked, a panic (status 101) in a debug
/// build and a wrapped element count in a release one, where every other bad file is status 1.
fn overflowing_shape(bytes: &[u8]) -> Option<Vec<u64>> {
    // Magic, version (major, minor), header length (u16 in version 1, u32 after), header.
    let rest = bytes.strip_prefix(b"\x93NUMPY")?;
    let (len, start) = match rest.first()? {
        1 => (u16::from_le_bytes(rest.get(2..4)?.try_into().ok()?) as usize, 4),
        _ => (u32::from_le_bytes(rest.get(2..6)?.try_into().ok()?) as usize, 6),
    };
    let header = std::str::from_utf8(rest.get(start..)?.get(..len)?).ok()?;
    let shape = &header[header.find("shape")?..];
    let dims = shape.get(shape.find('(')? + 1..shape.find(')')?)?;
    let dims: Vec<u64> =
        dims.split(',').map(str::trim).filter(|d| !d.is_empty()).map(|d| d.parse().ok()).collect::<Option<_>>()?;
    dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).is_none().then_some(dims)
}

fn npy_bytes(t: &Tensor) -> Result<Vec<u8>, CliError> {
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    let mut buf = vec![];
    macro_rules! put {
        ($ty:ty, $v:expr) => {{
            let mut w = npyz::WriteOptions::<$ty>::new().default_dtype().shape(&shape).writer(&mut buf).begin_nd()?;
            w.extend($v.iter().copied())?;
            w.finish()?;
        }};
    }
    match t.dtype() {
        DType::F32 => put!(f32, t.as_slice::<f32>().expect("dtype")),
        DType::F64 => put!(f64, t.as_slice::<f64>().expect("dtype")),
        DType::I8 => put!(i8, t.as_slice::<i8>().expect("dtype")),
        DType::I16 => put!(i16, t.as_slice::<i16>().expect("dtype")),
        DType::I32 => put!(i32, t.as_slice::<i32>().expect("dtype")),
        DType::I64 => put!(i64, t.as_slice::<i64>().expect("dtype")),
        DType::U8 => put!(u8, t.as_slice::<u8>().expect("dtype")),
        DType::U32 => put!(u32, t.as_slice::<u32>().expect("dtype")),
        DType::Bool => put!(bool, t.as_slice::<bool>().expect("dtype")),
        DType::U16 => put!(u16, t.as_slice::<u16>().expect("dtype")),
        DType::U64 => put!(u64, t.as_slice::<u64>().expect("dtype")),
        // npy has no 16/8/4-bit float or 4/2-bit int descriptors: widen to f32 / i8 / u8.
        DType::F16 | DType::BF16 => put!(f32, t.cast(DType::F32).as_slice::<f32>().expect("dtype")),
        d if d.is_narrow_float() => put!(f32, t.cast(DType::F32).as_slice::<f32>().expect("dtype")),
        DType::I4 | DType::I2 => put!(i8, t.cast(DType::I8).as_slice::<i8>().expect("dtype")),
        DType::U4 | DType::U2 => put!(u8, t.cast(DType::U8).as_slice::<u8>().expect("dtype")),
        d => return Err(err(format!("cannot write {d} as npy"))),
    }
    Ok(buf)
}

/// The `.npz` member names (without `.npy`) for output names: characters other than ASCII
/// letters, digits and `_-.` become `_`, and a name already taken gets `_2`, `_3`, … so that
/// two outputs such as `a:b` and `a/b` are not both written as `a_b` (numpy would then load
/// the second under both).
fn npz_member_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    let mut out = vec![];
    for name in names {
        let safe: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect();
        let mut member = safe.clone();
        let mut k = 2;
        while !taken.insert(member.clone()) {
            member = format!("{safe}_{k}");
            k += 1;
        }
        out.push(member);
    }
    out
}

/// Write tensors as an `.npz` (a zip of `.npy` members named after the outputs, see
/// [`npz_member_names`]).
fn write_npz(path: &Path, named: &[(String, Tensor)]) -> Result<(), CliError> {
    // Built in memory, then written in one go: a failed write (a full disk) is one error
    // naming `path`, not a `ZipWriter` that complains on stderr as it drops.
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let members = npz_member_names(named.iter().map(|(n, _)| n.as_str()));
    for ((_, t), safe) in named.iter().zip(members) {
        z.start_file(format!("{safe}.npy"), opts)?;
        z.write_all(&npy_bytes(t)?)?;
    }
    let bytes = z.finish()?.into_inner();
    std::fs::write(path, bytes).map_err(|e| write_error(path, e))
}

/// ONNX names a dynamic dim (`dim_param`, e.g. `sequence_length`) to say that inputs share it:
/// a name bound to two sizes by the `.npy` files is an error naming both inputs, here rather
/// than as a broadcast failure at some node deep inside the model.
fn check_named_dims(declared: &[rlx_onnx::proto::ValueInfoProto], feeds: &[(String, Tensor)]) -> Result<(), CliError> {
    use rlx_onnx::proto::tensor_shape_proto::dimension::Value as D;
    use rlx_onnx::proto::type_proto::Value as T;
    let mut bound: HashMap<&str, (usize, &str)> = HashMap::new();
    for vi in declared {
        let Some((name, t)) = feeds.iter().find(|(n, _)| Some(n.as_str()) == vi.name.as_deref()) else { continue };
        let Some(T::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else { continue };
        let Some(shape) = &tt.shape else { continue };
        // A wrong rank is the importer's to name (given shape vs declared shape): binding the
        // dims of a rank-1 [4] to [batch, seq] would blame another input's batch instead.
        if shape.dim.len() != t.shape().len() {
            continue;
        }
        for (d, &size) in shape.dim.iter().zip(t.shape()) {
            let Some(D::DimParam(p)) = &d.value else { continue };
            match bound.get(p.as_str()) {
                Some(&(s, first)) if s != size => {
                    return Err(err(format!(
                        "input {name:?} has {p} = {size}, but input {first:?} has {p} = {s} (the model names both dims {p})"
                    )));
                }
                Some(_) => {}
                None => {
                    bound.insert(p, (size, name));
                }
            }
        }
    }
    Ok(())
}

/// The first [`HEAD`] values of `t` as text: integers and booleans (`true`) as such, floats with 6
/// decimals.
fn head_values(t: &Tensor) -> Vec<String> {
    let v = t.to_f64_vec();
    let (exact, is_bool) = (!t.dtype().is_float(), t.dtype() == DType::Bool);
    let text = |x: f64| match x {
        x if is_bool => (x != 0.0).to_string(),
        x if exact => format!("{x}"),
        x => format!("{x:.6}"),
    };
    v.iter().take(HEAD).copied().map(text).collect()
}

/// The first [`HEAD`] values of `t` as JSON: integers and booleans as JSON integers / booleans, floats as
/// numbers (non-finite ones as the strings `"NaN"`, `"inf"`, `"-inf"`).
fn head_json(t: &Tensor) -> Vec<Value> {
    let (exact, is_bool) = (!t.dtype().is_float(), t.dtype() == DType::Bool);
    let num = |x: f64| match x {
        x if is_bool => json!(x != 0.0),
        x if exact => json!(x as i64),
        x if x.is_finite() => json!(x),
        x => json!(x.to_string()),
    };
    t.to_f64_vec().into_iter().take(HEAD).map(num).collect()
}

/// `rlx run --input`: `NAME=FILE.npy`, both parts non-empty. A value of another form is a
/// usage error (status 2, before any file is read), as a bad `--output` name is; it was status
/// 1, as if a file were at fault.
pub fn parse_input(spec: &str) -> Result<(String, PathBuf), String> {
    match spec.split_once('=') {
        None => Err("not NAME=FILE.npy (name the model input the file feeds)".into()),
        Some(("", _)) => Err("names no input before '=' (NAME=FILE.npy)".into()),
        Some((_, "")) => Err("names no file after '=' (NAME=FILE.npy)".into()),
        Some((name, file)) => Ok((name.to_string(), PathBuf::from(file))),
    }
}

/// The first name given twice among `names` (`--input` names, `--output-name`s), for `main`
/// to report as a usage error.
pub fn repeated<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().find(|n| !seen.insert(*n))
}

/// Run `model` on `inputs` (name and `.npy` file) on `threads` worker threads (`None`: all
/// cores), keeping the outputs named in `select` (in that order; empty: every output; only
/// what they need is computed); returns the text to print.
pub fn run(
    model: &Path,
    inputs: &[(String, PathBuf)],
    output: Option<&PathBuf>,
    select: &[String],
    threads: Option<std::num::NonZeroUsize>,
    json_out: bool,
) -> Result<String, CliError> {
    // The model first: a file of another format, or of none, is named as such, not through a
    // bad `--output` or input.
    let needs = match crate::error::known_format(model)? {
        // Weights without a graph: nothing to run, whatever the model.
        Some(Format::Safetensors | Format::ShardIndex) => {
            "rlx run needs an ONNX model (.onnx: a graph with its weights); safetensors holds weights only, \
             no graph to run (rlx inspect lists its tensors)"
        }
        _ => "rlx run needs an ONNX model (rlx generate runs GGUF LLMs)",
    };
    let proto = crate::error::load_onnx(model, needs, "an ONNX model, .onnx")?;
    // Its name ends in .npz (clap's `parse_npz`); its directory must exist.
    if let Some(p) = output {
        check_output("--output", p)?;
    }
    // Each is NAME=FILE.npy (clap's `parse_input`), each name once (`repeated`).
    let mut feeds: Vec<(String, Tensor)> = vec![];
    for (name, file) in inputs {
        feeds.push((name.clone(), read_npy(file)?));
    }
    // Name a missing input before importing: shape inference of a dynamic model needs every
    // input's value, and would otherwise fail on some Shape node far from the cause.
    if let Some(g) = &proto.graph {
        let inits: Vec<&str> = g.initializer.iter().map(|t| t.name.as_deref().unwrap_or_default()).collect();
        let declared: Vec<&str> =
            g.input.iter().map(|i| i.name.as_deref().unwrap_or_default()).filter(|n| !inits.contains(n)).collect();
        // An input that also has an initializer (older exports list those) may still be fed.
        let named = |f: &str| g.input.iter().any(|i| i.name.as_deref() == Some(f));
        if let Some((unknown, _)) = feeds.iter().find(|(f, _)| !named(f)) {
            return Err(err(format!(
                "--input {unknown:?}: the model has no such input (inputs: {})",
                declared.join(", ")
            )));
        }
        if let Some(missing) = declared.iter().find(|n| !feeds.iter().any(|(f, _)| f == *n)) {
            return Err(err(format!("no --input for model input {missing:?} (inputs: {})", declared.join(", "))));
        }
        check_named_dims(&g.input, &feeds)?;
    }
    let values: HashMap<String, Tensor> = feeds.iter().cloned().collect();
    let base_dir = model.parent().map(Path::to_path_buf);
    let im = rlx_onnx::import(&proto, &ImportOptions { input_values: values, base_dir, ..Default::default() })?;
    for name in &im.inputs {
        if !feeds.iter().any(|(n, _)| n == name) {
            return Err(err(format!("no --input for model input {name:?} (inputs: {})", im.inputs.join(", "))));
        }
    }
    let (mut graph, mut out_names) = (im.graph, im.outputs);
    if !select.is_empty() {
        let mut ids = Vec::with_capacity(select.len());
        for name in select {
            let Some(k) = out_names.iter().position(|n| n == name) else {
                return Err(err(format!(
                    "--output-name {name:?}: the model has no such output (outputs: {})",
                    out_names.join(", ")
                )));
            };
            ids.push(graph.outputs()[k]);
        }
        // Outputs no longer asked for are dead code to the compiler (DCE).
        graph.set_outputs(ids);
        out_names = select.to_vec();
    }
    let opts = match crate::threads_in_use(threads) {
        Some(t) => CompileOptions::default().with_threads(t),
        None => CompileOptions::default(),
    };
    let mut compiled = Session::try_new(Device::Cpu)?.try_compile_with(graph, &opts)?;
    let refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    // The runtime checks each feed against its declaration; its dtype error is named here as
    // numpy names dtypes, as the outputs are printed (it reads `declared dtype f32, got i64`).
    let outs = compiled.run_tensors(&refs).map_err(|e| match e {
        rlx_runtime::Error::DTypeMismatch { name, expected, got } => err(format!(
            "--input {name:?}: the model declares {}, the .npy file holds {}",
            expected.numpy_name(),
            got.numpy_name()
        )),
        e => e.into(),
    })?;
    let named: Vec<(String, Tensor)> = out_names.into_iter().zip(outs).collect();
    if let Some(p) = output {
        write_npz(p, &named)?;
    }
    if json_out {
        let rows: Vec<Value> = named
            .iter()
            .map(|(n, t)| {
                json!({"name": n, "dtype": t.dtype().numpy_name(), "shape": t.shape(), "values": head_json(t)})
            })
            .collect();
        // `saved` is always there (null without `--output`), as `generate` keeps its keys.
        let saved = output.map(|p| p.display().to_string());
        let obj = json!({"model": model.display().to_string(), "outputs": rows, "saved": saved});
        return Ok(format!("{obj}\n"));
    }
    let mut s = String::new();
    for (n, t) in &named {
        let head = head_values(t);
        let more = if t.numel() > HEAD { ", ..." } else { "" };
        // numpy's dtype names, as in the JSON and `rlx inspect` of an ONNX file.
        s += &format!("{n}: {} {:?} [{}{more}]\n", t.dtype().numpy_name(), t.shape(), head.join(", "));
    }
    if let Some(p) = output {
        let plural = if named.len() == 1 { "" } else { "s" };
        s += &format!("saved {} output{plural} to {}\n", named.len(), p.display());
    }
    Ok(s)
}

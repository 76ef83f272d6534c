//! The CLI's one error type and the checks of the files a subcommand is given.
//!
//! Every failure ends as one stderr line, `rlx: error: <subject>: <reason>` (the subject is the
//! file the subcommand was given, or the subcommand's name), with exit status 1. [`CliError`]
//! is the reason; [`line()`] adds the prefix. The readers' own I/O errors name the path too
//! (`I/O error on <path>: …`); [`line()`] drops that so the path is printed once.

use std::path::Path;

/// Why a subcommand failed: the text after `rlx: error: <subject>: ` (one line; newlines are
/// folded by `main`).
#[derive(Debug)]
pub struct CliError {
    msg: String,
    /// Writing stdout failed: no file is at fault, so `main` prints no subject
    /// (`rlx: error: writing output: …`, as for a report that cannot be printed).
    stdout: bool,
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> Self {
        err(e.to_string())
    }
}

/// A [`CliError`] from text.
pub fn err(msg: impl Into<String>) -> CliError {
    CliError { msg: msg.into(), stdout: false }
}

/// Writing stdout failed with `e` (`rlx generate` streams its tokens there itself).
pub fn stdout_error(e: std::io::Error) -> CliError {
    CliError { msg: format!("writing output: {e}"), stdout: true }
}

/// The one stderr line for `e`: `rlx: error: <subject>: <reason>`, newlines folded, a reader's
/// leading `I/O error on <subject>: ` dropped (the subject is already printed); a failed write
/// to stdout is `rlx: error: writing output: <why>`, without the subject, which is not at fault.
pub fn line(e: &CliError, subject: &Path) -> String {
    if e.stdout {
        return format!("rlx: error: {}", e.msg.replace('\n', " "));
    }
    format!("rlx: error: {}: {}", subject.display(), without_path(&e.msg, subject).replace('\n', " "))
}

/// `msg` without a reader's leading `I/O error on <path>: `, for a message that names `path`
/// itself.
pub fn without_path<'m>(msg: &'m str, path: &Path) -> &'m str {
    msg.strip_prefix(&format!("I/O error on {}: ", path.display())).unwrap_or(msg)
}

/// Writing `path` failed with `e` (whose text may name `path` again).
pub fn write_error(path: &Path, e: impl std::fmt::Display) -> CliError {
    err(format!("writing {}: {}", path.display(), without_path(&e.to_string(), path)))
}

/// Check an output path before the work that fills it (training, quantizing, running) rather
/// than after: its directory exists (and is a directory: `/dev/full/o.npz` is not "missing")
/// and it is not itself a directory. `what` names it in the message (`--out`, `OUT`,
/// `--output`).
pub fn check_output(what: &str, out: &Path) -> Result<(), CliError> {
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if out.is_dir() {
        Err(err(format!("{what} {} is a directory; give a file name", out.display())))
    } else if dir.exists() && !dir.is_dir() {
        Err(err(format!("{what} {}: {} is not a directory", out.display(), dir.display())))
    } else if !dir.is_dir() {
        Err(err(format!("{what} {}: the directory {} does not exist", out.display(), dir.display())))
    } else {
        Ok(())
    }
}

/// A model file's format, by content first (GGUF magic, protobuf is not self-describing so
/// ONNX goes by name), then by name. A `.gguf` name without the magic counts as GGUF only for
/// the subcommands that read GGUF (see [`sniff`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// GGUF (magic `GGUF`, or a `.gguf` name).
    Gguf,
    /// A single safetensors file (`.safetensors`, or an 8-byte length followed by `{`).
    Safetensors,
    /// A sharded safetensors checkpoint's `*.index.json`.
    ShardIndex,
    /// ONNX (`.onnx`).
    Onnx,
}

impl Format {
    /// What to call it in a message ("is a GGUF file, but …").
    pub fn describe(self) -> &'static str {
        match self {
            Format::Gguf => "a GGUF file",
            Format::Safetensors => "a safetensors file",
            Format::ShardIndex => "a sharded safetensors index",
            Format::Onnx => "an ONNX model",
        }
    }
}

/// Detect the format of the model file at `path` (see [`Format`]). Errors: missing file, a
/// directory, unreadable, empty, or none of the formats.
pub fn detect(path: &Path) -> Result<Format, CliError> {
    match sniff(path, true)? {
        (Some(f), _) => Ok(f),
        (None, _) if is_graph_json(path) => Err(graph_json("rlx inspect reads model files")),
        (None, head) => Err(unknown_format(
            "a .gguf, .safetensors, .safetensors.index.json or .onnx file",
            &[Format::Gguf, Format::Onnx, Format::Safetensors],
            &head,
        )),
    }
}

/// The error for an RLX graph's JSON given to a subcommand that reads model files (`needs`
/// completes "is an RLX graph's JSON (…), but …"), saying which subcommands read it.
fn graph_json(needs: &str) -> CliError {
    err(format!("is an RLX graph's JSON (rlx_ir::hir_to_json), but {needs}; rlx check and rlx compile read it"))
}

/// The one error, in every subcommand, for a file of none of the formats that [`sniff`] knows:
/// `unknown model format (expected <expected>): <why>`, `why` saying what was looked for: the
/// GGUF magic (with the bytes found instead, which show what the file is), then the other
/// formats the subcommand reads (`rlx generate` reads only GGUF, so names only the magic).
fn unknown_format(expected: &str, read: &[Format], head: &[u8]) -> CliError {
    let mut why = vec![format!("no GGUF magic (first bytes {})", rlx_gguf::magic_text(head))];
    if read.contains(&Format::Onnx) {
        why.push("not named .onnx".to_string());
    }
    if read.contains(&Format::Safetensors) || read.contains(&Format::ShardIndex) {
        why.push("not a safetensors file (.safetensors, or an 8-byte header length followed by '{')".to_string());
    }
    let last = why.pop().expect("the GGUF probe");
    let why = if why.is_empty() { last } else { format!("{}, and {last}", why.join(", ")) };
    err(format!("unknown model format (expected {expected}): {why}"))
}

/// The error for a model file of a known format `f` that the subcommand does not read, so that
/// a GGUF given to `rlx run` is called a GGUF file rather than malformed ONNX; `needs`
/// completes "is a GGUF file, but …".
fn wrong_format(f: Format, needs: &str) -> CliError {
    err(format!("is {}, but {needs}", f.describe()))
}

/// Check the model file a subcommand was given before its reader sees it: `Ok` with its format
/// when it is one of `want`; a file of another known format is [`wrong_format`], and one of
/// no known format an unknown model format (`expected` says what the subcommand reads),
/// instead of going to a reader that would call it a corrupt file of its own format ("bad
/// magic", "declared header length …"). For readers whose format shows in the file (GGUF's
/// magic, safetensors' `{` at byte 8) or its name; ONNX shows in neither, see [`load_onnx`].
pub fn require_format(path: &Path, want: &[Format], needs: &str, expected: &str) -> Result<Format, CliError> {
    match sniff(path, want.contains(&Format::Gguf))? {
        (Some(f), _) if want.contains(&f) => Ok(f),
        (Some(f), _) => Err(wrong_format(f, needs)),
        (None, head) => Err(unknown_format(expected, want, &head)),
    }
}

/// Decode the ONNX model at `path` for a subcommand that reads ONNX (`needs` and `expected` as
/// in [`require_format`]). A file of another known format is [`wrong_format`]. ONNX has no
/// magic number, so a file not named `.onnx` (and of no other known format) is tried as ONNX;
/// when it does not decode, or decodes to no graph (protobuf decodes much text to unknown
/// fields), it is an unknown model format rather than "malformed ONNX protobuf". A file named
/// `.onnx` keeps the reader's own error.
pub fn load_onnx(path: &Path, needs: &str, expected: &str) -> Result<rlx_onnx::proto::ModelProto, CliError> {
    let named = match known_format(path)? {
        Some(Format::Onnx) => true,
        Some(f) => return Err(wrong_format(f, needs)),
        None => false,
    };
    let unknown = |why: String| {
        err(format!(
            "unknown model format (expected {expected}): not named .onnx, no GGUF magic, not a safetensors file, \
             and not an ONNX model either ({why})"
        ))
    };
    match rlx_onnx::load(path) {
        Ok(m) if named || m.graph.is_some() => Ok(m),
        _ if !named && is_graph_json(path) => Err(graph_json(needs)),
        Ok(_) => Err(unknown("it decodes as protobuf, but holds no graph".into())),
        Err(e) if !named => Err(unknown(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// True when `path` (at most 64 MiB) holds an RLX graph's JSON, as `rlx check` reads it: named
/// as such when given to a subcommand that reads models.
fn is_graph_json(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() <= 64 << 20)
        && std::fs::read(path).is_ok_and(|b| serde_json::from_slice::<rlx_ir::Graph>(&b).is_ok())
}

/// The format of `path`, `None` when of no known format, for a subcommand that does not read
/// GGUF: a GGUF file is one with the magic (a safetensors file renamed `x.gguf` is a
/// safetensors file). Errors: missing file, a directory, unreadable, empty.
pub fn known_format(path: &Path) -> Result<Option<Format>, CliError> {
    Ok(sniff(path, false)?.0)
}

/// The one error for a directory given where a file is wanted (io's own is "Is a directory
/// (os error 21)", or a later read error).
pub fn not_a_directory(path: &Path) -> Result<(), CliError> {
    if std::fs::metadata(path)?.is_dir() {
        return Err(err("is a directory, not a file"));
    }
    Ok(())
}

/// The format of `path` if known, and its first (up to 4) bytes. With `gguf_by_name` (for the
/// subcommands that read GGUF) a `.gguf` name is GGUF without the magic, so that their reader
/// says `bad magic`; without it only the magic makes a GGUF, so that a message calling the file
/// "a GGUF file" is true of its content. Errors: missing file, a directory, unreadable, empty.
fn sniff(path: &Path, gguf_by_name: bool) -> Result<(Option<Format>, Vec<u8>), CliError> {
    use std::io::Read;
    not_a_directory(path)?;
    let mut head = [0u8; 9];
    let mut f = std::fs::File::open(path)?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    if n == 0 {
        // One message for every subcommand and format (an empty `.onnx` was "an ONNX model" to
        // `generate`, an empty `.gguf` a "truncated file: magic at offset 0 …").
        return Err(err("the file is empty (0 bytes)"));
    }
    let head = &head[..n];
    let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_ascii_lowercase();
    // Safetensors by content: an 8-byte little-endian header length that fits in the file,
    // then the header's `{` (a text file whose 9th byte is `{` is not one).
    let safetensors_head = head.len() == 9 && head[8] == b'{' && {
        let declared = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        declared <= f.metadata()?.len().saturating_sub(8)
    };
    let format = if head.starts_with(b"GGUF") || (gguf_by_name && name.ends_with(".gguf")) {
        Some(Format::Gguf)
    } else if name.ends_with(".index.json") {
        Some(Format::ShardIndex)
    } else if name.ends_with(".onnx") {
        Some(Format::Onnx)
    } else if name.ends_with(".safetensors") || safetensors_head {
        Some(Format::Safetensors)
    } else {
        None
    };
    Ok((format, head[..n.min(4)].to_vec()))
}

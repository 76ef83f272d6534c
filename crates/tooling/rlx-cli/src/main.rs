//! `rlx`: the RLX command-line tool.
//!
//! ```text
//! rlx inspect FILE [--json]     metadata, tensors and totals of a .gguf / .safetensors / .onnx file
//! rlx convert IN OUT --quant T  safetensors -> GGUF with 2-D tensors quantized to T
//! rlx train [--dataset digits|mnist5k] [--model mlp|cnn] [--optimizer adam|…] [--out F] [--eval F]
//! rlx run MODEL.onnx --input NAME=FILE.npy ... [--output OUT.npz] [--json]
//! rlx check GRAPH.json [--json] static checks: shapes, dispatch, provable NaN
//! rlx compile GRAPH.json [--dump] [--json]  pass summary (IR after each pass) and memory plan
//! rlx embed --model DIR|F.onnx [--tokenizer T] SENTENCE...  sentence embeddings (mean pool + L2)
//! rlx generate [--model F] --prompt T [--chat] [--max-tokens N] ...   stream generated text
//! ```
//!
//! `--json` is global (every subcommand takes it): the last line on stdout is then one JSON
//! object. Errors go to stderr as one line, `rlx: error: <file>: <reason>` (`<file>` is the
//! subcommand's name where there is no file), with exit status 1; usage errors are clap's
//! (status 2). A panic hook turns any panic into one line and status 101 as a last resort (no
//! known input reaches it; see `panic_hook.rs`). A closed stdout (`rlx inspect f | head`) ends
//! the program quietly with status 0.

mod check;
mod compile;
mod convert;
mod embed;
mod error;
mod generate;
mod inspect;
mod panic_hook;
mod run;
mod train;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "rlx", version, about = "RLX: ML compiler and runtime", propagate_version = true)]
struct Cli {
    /// Machine-readable output: the last stdout line is one JSON object
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text with a Llama-family GGUF model, streaming tokens to stdout, then print
    /// prompt-processing and generation tokens/s (stderr; with --json a final JSON line).
    #[command(allow_negative_numbers = true)]
    Generate(generate::GenerateArgs),
    /// Sentence embeddings from a BERT-style encoder (a Hugging Face directory with
    /// config.json + model.safetensors, or an .onnx file): tokenize, encode, mean-pool over
    /// the attention mask, L2-normalize. One line of values per sentence.
    Embed {
        /// BERT directory (config.json + model.safetensors) or .onnx encoder
        #[arg(long)]
        model: PathBuf,
        /// tokenizer.json (default: the one next to the model)
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Worker threads, at least 1, at most the cores (default: all cores)
        #[arg(long, value_parser = parse_threads)]
        threads: Option<std::num::NonZeroUsize>,
        /// The sentences
        #[arg(required = true)]
        sentences: Vec<String>,
    },
    /// Show a model file's format, metadata, tensors (name, dtype, shape, bytes) and totals.
    ///
    /// Reads GGUF (v1-v3), ONNX and safetensors files, and sharded safetensors checkpoints given by
    /// their `model.safetensors.index.json`. Long metadata arrays (a tokenizer's vocabulary)
    /// are summarized as element type, length and the first few elements.
    Inspect {
        /// The .gguf, .onnx, .safetensors or .safetensors.index.json file
        file: PathBuf,
    },
    /// Convert a safetensors checkpoint to GGUF, quantizing 2-D+ float tensors.
    ///
    /// 1-D tensors (norms, biases) stay F32; tensors whose rows are not a multiple of the
    /// block size become F16. TYPE: F32 F16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K.
    Convert {
        /// The .safetensors file (or a sharded checkpoint's .index.json)
        input: PathBuf,
        /// The .gguf file to write (the name must end in .gguf)
        #[arg(value_name = "OUT.gguf", value_parser = parse_gguf)]
        output: PathBuf,
        /// Quantization type of the 2-D+ float tensors (any case)
        #[arg(long, value_name = "TYPE", value_parser = convert::parse_quant)]
        quant: rlx_gguf::GgmlType,
    },
    /// Train an MLP or small CNN on UCI digits / MNIST-5k (embedded), report test accuracy,
    /// save the weights (`--out`) or evaluate saved ones (`--eval`).
    #[command(allow_negative_numbers = true)]
    Train(train::TrainArgs),
    /// Run an ONNX model on `.npy` inputs and print (or save as `.npz`) its outputs.
    Run {
        /// The .onnx file
        model: PathBuf,
        /// An input as NAME=FILE.npy (repeat for each model input)
        #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = run::parse_input)]
        inputs: Vec<(String, PathBuf)>,
        /// Save every output into this .npz (members named after the outputs; the name must
        /// end in .npz)
        #[arg(long, value_name = "OUT.npz", value_parser = parse_npz)]
        output: Option<PathBuf>,
        /// Worker threads, at least 1, at most the cores (default: all cores)
        #[arg(long, value_parser = parse_threads)]
        threads: Option<std::num::NonZeroUsize>,
        /// Compute and print only this model output (repeat for several, in that order;
        /// default: every output), as onnxruntime's `output_names`
        #[arg(long = "output-name", value_name = "NAME")]
        output_names: Vec<String>,
    },
    /// Check a graph (JSON of `rlx_ir::hir_to_json`, or an ONNX model with its dynamic dims
    /// taken as 1): shapes and dtypes, CPU dispatch, provable NaN/Inf (errors), ops the
    /// fusion rules keep out of a neighbour's loop (hints). Exit status 1 when any error is found.
    Check {
        /// The graph JSON file or .onnx model
        file: PathBuf,
    },
    /// Compile a graph for the CPU (JSON, static shapes, or an ONNX model with its dynamic
    /// dims taken as 1): pass summary and memory plan. Exit status 1 on an error `rlx check` finds
    /// (not on its hints).
    Compile {
        /// The graph JSON file or .onnx model
        file: PathBuf,
        /// Print the IR after every pass
        #[arg(long)]
        dump: bool,
    },
}

/// `--threads`: a whole number of at least 1 (clap's own parser said "number would be zero for
/// non-zero type" for 0).
fn parse_threads(s: &str) -> Result<std::num::NonZeroUsize, String> {
    parse_count::<usize>(s).map(|n| std::num::NonZeroUsize::new(n).expect("n > 0"))
}

/// A count that must be at least 1 (`--threads`, `--ctx-size`, `--epochs`): 0 is a usage error
/// (status 2, as a negative count is), not a run-time one.
fn parse_count<T: std::str::FromStr + PartialEq + From<u8>>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n == T::from(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

/// `rlx run --output`: the file is an `.npz` archive whatever its name, so a name not ending in
/// `.npz` is a usage error (status 2, before any file is read): `o.txt` or `o.npy` would hold a
/// zip, and `model.onnx` would overwrite the model. (numpy's `savez` appends `.npz` instead; a
/// file under another name than the one typed would be a surprise here.)
fn parse_npz(s: &str) -> Result<PathBuf, String> {
    if s.to_ascii_lowercase().ends_with(".npz") {
        Ok(PathBuf::from(s))
    } else {
        Err("rlx run writes an .npz archive; name it .npz".into())
    }
}

/// `rlx convert OUT`: the file is GGUF whatever its name, so a name not ending in `.gguf` is a
/// usage error (status 2, before any file is read), as `rlx run --output` must be `.npz`:
/// `out.txt` held a GGUF file that nothing would look for under that name.
fn parse_gguf(s: &str) -> Result<PathBuf, String> {
    if s.to_ascii_lowercase().ends_with(".gguf") {
        Ok(PathBuf::from(s))
    } else {
        Err("rlx convert writes a GGUF file; name it .gguf".into())
    }
}

/// The worker threads to use for `--threads T`: `T`, or the available cores where `T` is more
/// (as `rlx-cpu` clamps it: its worker team spins, so extra threads only take turns). A clamp
/// is said in one `rlx: note:` line on stderr (stdout holds the output and `--json`'s line);
/// each subcommand calls this once, where it builds its compile options, after its inputs are
/// checked. `None` (all cores) stays `None`. An environment override set to a value the
/// runtime ignores (`RLX_NUM_THREADS=abc`; docs/env.md) gets a note too, and so does one that
/// asks for more threads than cores (`RLX_NUM_THREADS=999`, clamped the same way).
fn threads_in_use(requested: Option<std::num::NonZeroUsize>) -> Option<usize> {
    for note in rlx_runtime::CompileOptions::ignored_env_overrides() {
        eprintln!("rlx: note: {note}");
    }
    let cores = std::thread::available_parallelism().map_or(usize::MAX, std::num::NonZeroUsize::get);
    let many = |what: String, t: usize| {
        if t > cores {
            let s = if cores == 1 { "" } else { "s" };
            eprintln!("rlx: note: {what} is more than the {cores} available core{s}; using {cores}");
        }
    };
    // The override as the runtime reads it (its rule is written once, in `CompileOptions`).
    let env = rlx_runtime::CompileOptions::new().with_env_overrides().threads;
    if let Some(n) = env {
        many(format!("RLX_NUM_THREADS={n}"), n);
    }
    let t = requested?.get();
    // The override wins over --threads (docs/env.md): its note, not this one.
    if env.is_none() {
        many(format!("--threads {t}"), t);
    }
    Some(t.min(cores))
}

fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Print a subcommand's report: `SUCCESS`, or `FAILURE` with one stderr line when stdout
/// cannot be written (a closed pipe is not an error: `rlx … | head`).
fn emit(text: &str) -> ExitCode {
    match write_stdout(text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(Path::new(""), &error::stdout_error(e)),
    }
}

/// Print `e` as its one stderr line (see [`error::line`]); status 1.
fn fail(subject: &Path, e: &error::CliError) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "{}", error::line(e, subject));
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    panic_hook::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` / `--version` go to stdout through `emit`, so a failed write is an error
        // (`rlx --help > /dev/full` exited 0); usage errors stay clap's (stderr, status 2).
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return emit(&e.render().to_string());
        }
        Err(e) => e.exit(),
    };
    let json = cli.json;
    let render = |text: String| if json { format!("{text}\n") } else { text };
    let (subject, result): (PathBuf, Result<String, error::CliError>) = match &cli.command {
        Command::Train(args) => (train::subject(args), train::train(args, json)),
        Command::Inspect { file } => {
            (file.clone(), inspect::inspect(file).map(|r| if json { render(r.json().to_string()) } else { r.human() }))
        }
        // Flags first: a bad --top-p is named with `generate`, not with a model it never read.
        Command::Generate(args) => match generate::sampler_config(args).and_then(|_| generate::model_path(args)) {
            Ok(p) => {
                let r = generate::generate(args, &p, json);
                (p, r)
            }
            Err(e) => (PathBuf::from("generate"), Err(e)),
        },
        Command::Convert { input, output, quant } => (
            input.clone(),
            convert::convert(input, output, *quant).map(|r| if json { render(r.json()) } else { r.human() }),
        ),
        Command::Run { model, inputs, output, threads, output_names } => {
            // A name given twice is a usage error in clap's form, with `rlx run`'s usage line.
            let twice = run::repeated(inputs.iter().map(|(n, _)| n.as_str()))
                .map(|n| format!("--input {n:?} is given twice (one file per model input)"))
                .or_else(|| {
                    run::repeated(output_names.iter().map(String::as_str))
                        .map(|n| format!("--output-name {n:?} is given twice"))
                });
            if let Some(msg) = twice {
                let mut cli = Cli::command();
                cli.build();
                let run = cli.find_subcommand_mut("run").expect("the run subcommand");
                run.error(clap::error::ErrorKind::ArgumentConflict, msg).exit();
            }
            (model.clone(), run::run(model, inputs, output.as_ref(), output_names, *threads, json))
        }
        Command::Embed { model, tokenizer, threads, sentences } => {
            let a = embed::EmbedArgs {
                model: model.clone(),
                tokenizer: tokenizer.clone(),
                sentences: sentences.clone(),
                threads: *threads,
            };
            (model.clone(), embed::embed(&a, json))
        }
        Command::Check { file } => match check::check(file) {
            Ok(r) => {
                let written = emit(&if json { render(r.json()) } else { r.human() });
                return if r.errors() > 0 { ExitCode::FAILURE } else { written };
            }
            Err(e) => (file.clone(), Err(e)),
        },
        Command::Compile { file, dump } => {
            (file.clone(), compile::compile(file).map(|r| if json { render(r.json(*dump)) } else { r.human(*dump) }))
        }
    };
    match result {
        Ok(text) => emit(&text),
        Err(e) => fail(&subject, &e),
    }
}

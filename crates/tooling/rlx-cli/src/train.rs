//! `rlx train`: train an MLP or a small CNN on an embedded data set (UCI digits, MNIST-5k)
//! with `rlx_optim::Trainer`, report test accuracy each epoch, save / evaluate safetensors.

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rlx_ir::{DType, Graph, NodeId, Shape};
use rlx_optim::data::{self, Dataset, SplitMix64, epoch_order};
use rlx_optim::{Optim, Schedule, Trainer, TrainerOptions, rule_by_name};
use rlx_runtime::{CompileOptions, Device, Session, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{CliError, Format, check_output, err, require_format, write_error};

/// The two model families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// input → linear(128) → relu → linear(classes)
    Mlp,
    /// conv3×3(8) → relu → maxpool2 → conv3×3(16) → relu → maxpool2 → linear(classes)
    Cnn,
}

impl ModelKind {
    fn name(self) -> &'static str {
        match self {
            ModelKind::Mlp => "mlp",
            ModelKind::Cnn => "cnn",
        }
    }
}

/// `--dataset`: a known data set name (an unknown one is a usage error, status 2).
fn parse_dataset(s: &str) -> Result<String, String> {
    data::canonical_name(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

/// `--optimizer`: one of [`rlx_optim::RULE_NAMES`] (any case; else a usage error, status 2).
fn parse_optimizer(s: &str) -> Result<String, String> {
    match rule_by_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!("unknown optimizer (one of {})", rlx_optim::RULE_NAMES.join(", "))),
    }
}

/// `--out`: the file is safetensors whatever its name; a `.gguf` / `.onnx` / `.json` / `.npz` /
/// `.npy` name would make `rlx train --eval` and `rlx inspect` read it as that format and fail,
/// so it is a usage error (status 2) before any training.
fn parse_out(s: &str) -> Result<PathBuf, String> {
    let name = Path::new(s).file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    if [".gguf", ".onnx", ".json", ".npz", ".npy"].iter().any(|e| name.ends_with(e)) {
        return Err("rlx train writes safetensors; name it .safetensors".into());
    }
    Ok(PathBuf::from(s))
}

/// `rlx train` options.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Data set: digits (UCI 8×8, the default) or mnist5k (28×28). With --eval: the file's
    /// (its `rlx.dataset` metadata), and a different one is an error
    #[arg(long, value_parser = parse_dataset)]
    dataset: Option<String>,
    /// Model (default: mlp). With --eval: the file's (its `rlx.model` metadata), and a
    /// different one is an error
    #[arg(long, value_enum)]
    model: Option<ModelKind>,
    /// Passes over the training split
    #[arg(long, default_value_t = 40, value_parser = crate::parse_count::<u64>)]
    epochs: u64,
    /// Mini-batch size (the last partial batch of each shuffled epoch is dropped)
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Learning rate (default: 0.1 for the SGD family, 0.01 otherwise), cosine-decayed to 0
    #[arg(long, allow_negative_numbers = true)]
    lr: Option<f32>,
    /// Optimizer: sgd, momentum, nesterov, adam, adamw, nadam, radam, adagrad, rmsprop, lion, lamb, adafactor, muon
    #[arg(long, default_value = "adam", value_parser = parse_optimizer)]
    optimizer: String,
    /// Clip gradients to this global norm
    #[arg(long, allow_negative_numbers = true)]
    clip: Option<f32>,
    /// Seed of the initial weights and the shuffles
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Save the trained weights here (safetensors, with the model and data set in the metadata)
    #[arg(long, value_parser = parse_out)]
    out: Option<PathBuf>,
    /// Do not train: evaluate the weights in this file (written by `--out`) on the test split
    /// of the data set it was trained on, with the model it was trained as
    #[arg(long, conflicts_with = "out")]
    eval: Option<PathBuf>,
    /// Worker threads, at least 1, at most the cores (default: all cores)
    #[arg(long, value_parser = crate::parse_threads)]
    threads: Option<std::num::NonZeroUsize>,
}

impl TrainArgs {
    /// Compile options of every graph this command runs: `--threads` (the environment
    /// overrides of docs/env.md still apply on top, as for every compile). Called once per
    /// command: a clamped `--threads` gets its note once.
    fn compile_options(&self) -> CompileOptions {
        let o = CompileOptions::default();
        match crate::threads_in_use(self.threads) {
            Some(t) => o.with_threads(t),
            None => o,
        }
    }
}

/// The model graph for batch `b`: inputs `x` (`[b, h·w]` or `[b, 1, h, w]`) and, with a
/// loss, `y` (`[b]` i32); outputs `[loss]` or `[logits]`.
fn model(kind: ModelKind, ds: &Dataset, b: usize, with_loss: bool) -> Graph {
    let [h, w] = ds.hw;
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let mut g = Graph::new(kind.name());
    let logits = match kind {
        ModelKind::Mlp => {
            let x = g.input("x", f32s(&[b, h * w]));
            let (w1, b1) = (g.param("fc1.weight", f32s(&[128, h * w])), g.param("fc1.bias", f32s(&[128])));
            let (w2, b2) = (g.param("fc2.weight", f32s(&[ds.classes, 128])), g.param("fc2.bias", f32s(&[ds.classes])));
            let a = g.linear(x, w1, Some(b1));
            let a = g.relu(a);
            g.linear(a, w2, Some(b2))
        }
        ModelKind::Cnn => {
            let x = g.input("x", f32s(&[b, 1, h, w]));
            let conv = |g: &mut Graph, x: NodeId, name: &str, cin: usize, cout: usize| {
                let cw = g.param(&format!("{name}.weight"), f32s(&[cout, cin, 3, 3]));
                let cb = g.param(&format!("{name}.bias"), f32s(&[cout]));
                let y = g.conv2d(x, cw, Some(cb), [1, 1], [1, 1], [1, 1], 1);
                let y = g.relu(y);
                g.max_pool2d(y, [2, 2], [2, 2], [0, 0])
            };
            let a = conv(&mut g, x, "conv1", 1, 8);
            let a = conv(&mut g, a, "conv2", 8, 16);
            let flat = 16 * (h / 4) * (w / 4);
            let a = g.reshape(a, vec![b, flat]);
            let (fw, fb) = (g.param("fc.weight", f32s(&[ds.classes, flat])), g.param("fc.bias", f32s(&[ds.classes])));
            g.linear(a, fw, Some(fb))
        }
    };
    if with_loss {
        let y = g.input("y", Shape::new(&[b], DType::I32));
        let loss = g.cross_entropy(logits, y);
        g.set_outputs(vec![loss]);
    } else {
        g.set_outputs(vec![logits]);
    }
    g
}

/// PyTorch's default init for linear and conv layers: `U(±1/√fan_in)` for weights and biases.
fn init(params: &[(String, Vec<usize>)], seed: u64) -> Vec<Vec<f32>> {
    let mut rng = SplitMix64(seed);
    let mut out = vec![];
    for (k, (_, dims)) in params.iter().enumerate() {
        // A bias's fan-in is its weight's (the param before it).
        let wdims = if dims.len() == 1 && k > 0 { &params[k - 1].1 } else { dims };
        let bound = 1.0 / (wdims[1..].iter().product::<usize>() as f32).sqrt();
        out.push((0..dims.iter().product()).map(|_| rng.uniform(-bound, bound)).collect());
    }
    out
}

/// Test-set accuracy of `params` (one forward run over the whole test split).
fn accuracy(
    kind: ModelKind,
    ds: &Dataset,
    params: &[(String, Tensor)],
    opts: &CompileOptions,
) -> Result<f64, CliError> {
    let n = ds.test.len();
    let g = model(kind, ds, n, false);
    let mut c = Session::try_new(Device::Cpu).and_then(|s| s.try_compile_with(g, opts))?;
    for (name, t) in params {
        c.set_param_tensor(name, t.clone()).map_err(|e| err(format!("{name}: {e}")))?;
    }
    let x =
        Tensor::from_vec(ds.test.x.clone(), &c.graph().shape(c.graph().inputs()[0]).static_dims().expect("static"))?;
    let logits = c.run_tensors(&[("x", x)])?[0].to_f32_vec();
    let hits = logits
        .chunks(ds.classes)
        .zip(&ds.test.y)
        .filter(|(row, y)| {
            let best = row.iter().enumerate().fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
            best as i32 == **y
        })
        .count();
    Ok(hits as f64 / n as f64)
}

struct Epoch {
    loss: f64,
    accuracy: f64,
    seconds: f64,
    /// The step loop alone (no test evaluation).
    train_seconds: f64,
}

/// What a failure names before its reason: the `--eval` file, else `train`.
pub fn subject(a: &TrainArgs) -> PathBuf {
    a.eval.clone().unwrap_or_else(|| PathBuf::from("train"))
}

/// Run `rlx train`; returns the text to print (the per-epoch lines go to stderr or above the
/// progress bar as they come).
pub fn train(a: &TrainArgs, json: bool) -> Result<String, CliError> {
    let start = Instant::now();
    if let Some(path) = &a.eval {
        return evaluate(path, a, json);
    }
    let ds = data::by_name(a.dataset.as_deref().unwrap_or("digits"))?;
    let kind = a.model.unwrap_or(ModelKind::Mlp);
    let rule = rule_by_name(&a.optimizer).ok_or_else(|| {
        err(format!("unknown optimizer {:?} (one of {})", a.optimizer, rlx_optim::RULE_NAMES.join(", ")))
    })?;
    let lr = a.lr.unwrap_or(if matches!(a.optimizer.as_str(), "sgd" | "momentum" | "nesterov") { 0.1 } else { 1e-2 });
    let b = a.batch_size;
    let n = ds.train.len();
    if b == 0 || b > n {
        return Err(err(format!("--batch-size must be in 1..={n}")));
    }
    if !(lr > 0.0 && lr.is_finite()) {
        return Err(err(format!("--lr must be a positive number, not {lr}")));
    }
    if let Some(c) = a.clip.filter(|c| !(*c > 0.0 && c.is_finite())) {
        return Err(err(format!("--clip must be a positive number, not {c}")));
    }
    if let Some(out) = &a.out {
        check_output("--out", out)?;
    }
    let per_epoch = (n / b) as u64;
    let sched = Schedule::Cosine { lr, decay_steps: per_epoch * a.epochs, alpha: 0.0 };
    let compile = a.compile_options();
    let opts = TrainerOptions { clip_grad_norm: a.clip, compile: compile.clone(), ..Default::default() };
    let mut tr = Trainer::new(&model(kind, &ds, b, true), Optim::new(rule, sched), opts)?;
    let params = tr.params().to_vec();
    for ((name, _), v) in params.iter().zip(init(&params, a.seed)) {
        tr.set_param(name, &v)?;
    }
    let f = ds.features();
    let pb = ProgressBar::new(per_epoch * b as u64 * a.epochs);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} samples  {msg}  [{elapsed_precise}<{eta_precise}]")
            .expect("valid template"),
    );
    let mut log = vec![];
    for epoch in 0..a.epochs {
        let t0 = Instant::now();
        let order = epoch_order(n, a.seed, epoch);
        let mut loss_sum = 0.0;
        for batch in order.chunks_exact(b) {
            let x = tr.input_mut::<f32>("x")?;
            for (k, &i) in batch.iter().enumerate() {
                x[k * f..(k + 1) * f].copy_from_slice(&ds.train.x[i * f..(i + 1) * f]);
            }
            let y = tr.input_mut::<i32>("y")?;
            for (k, &i) in batch.iter().enumerate() {
                y[k] = ds.train.y[i];
            }
            let loss = tr.step()?;
            if !loss.is_finite() {
                return Err(err(format!("loss became {loss} in epoch {} (lower --lr or set --clip)", epoch + 1)));
            }
            loss_sum += loss as f64;
            pb.inc(b as u64);
            let rate = pb.position() as f64 / start.elapsed().as_secs_f64().max(1e-9);
            pb.set_message(format!("epoch {}/{}  loss {loss:.4}  {rate:.0} samples/s", epoch + 1, a.epochs));
        }
        let train_seconds = t0.elapsed().as_secs_f64();
        let acc = accuracy(kind, &ds, &weights(&tr), &compile)?;
        let e = Epoch {
            loss: loss_sum / per_epoch as f64,
            accuracy: acc,
            seconds: t0.elapsed().as_secs_f64(),
            train_seconds,
        };
        let line = format!(
            "epoch {}/{}: train loss {:.4}  test accuracy {:.2}%  ({:.2} s)",
            epoch + 1,
            a.epochs,
            e.loss,
            100.0 * e.accuracy,
            e.seconds
        );
        // Above the bar on a terminal; `pb.println` would print nothing when stderr is not one
        // (a pipe, a log file), losing every epoch's line.
        pb.suspend(|| eprintln!("{line}"));
        log.push(e);
    }
    pb.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let last = log.last().map(|e| (e.loss, e.accuracy)).unwrap_or((f64::NAN, f64::NAN));
    if let Some(out) = &a.out {
        let meta = BTreeMap::from([
            ("rlx.model".to_string(), kind.name().to_string()),
            ("rlx.dataset".to_string(), ds.name.to_string()),
        ]);
        let w = weights(&tr);
        rlx_safetensors::save(out, w.iter().map(|(n, t)| (n.as_str(), t)), Some(&meta))
            .map_err(|e| write_error(out, e))?;
    }
    let samples = (per_epoch * b as u64 * a.epochs) as f64;
    if json {
        let v = serde_json::json!({
            "dataset": ds.name, "model": kind.name(), "optimizer": a.optimizer, "lr": lr,
            "epochs": a.epochs, "batch_size": b, "seed": a.seed,
            "train_loss": last.0, "test_accuracy": last.1, "seconds": seconds,
            "samples_per_second": samples / seconds,
            "epoch_test_accuracy": log.iter().map(|e| e.accuracy).collect::<Vec<_>>(),
            "epoch_train_loss": log.iter().map(|e| e.loss).collect::<Vec<_>>(),
            "epoch_train_seconds": log.iter().map(|e| e.train_seconds).collect::<Vec<_>>(),
            "out": a.out.as_ref().map(|p| p.display().to_string()),
        });
        Ok(format!("{v}\n"))
    } else {
        let saved = a.out.as_ref().map(|p| format!("\nsaved {}", p.display())).unwrap_or_default();
        Ok(format!(
            "{} {} ({}): test accuracy {:.2}% after {} epoch{} in {:.1} s ({:.0} samples/s){saved}\n",
            ds.name,
            kind.name(),
            a.optimizer,
            100.0 * last.1,
            a.epochs,
            if a.epochs == 1 { "" } else { "s" },
            seconds,
            samples / seconds
        ))
    }
}

fn weights(tr: &Trainer<Optim>) -> Vec<(String, Tensor)> {
    tr.params()
        .iter()
        .map(|(n, d)| (n.clone(), Tensor::from_vec(tr.param(n).expect("set").to_vec(), d).expect("dims match")))
        .collect()
}

/// `--eval FILE`: rebuild the model the file was trained as, on the data set it was trained
/// on (both from its metadata; `--model` / `--dataset`, when given, must agree), and report
/// test accuracy. The file's metadata decides because the weights' shapes follow from it; a
/// flag that silently overrode it would fail later on a shape, or evaluate on the wrong data.
fn evaluate(path: &Path, a: &TrainArgs, json: bool) -> Result<String, CliError> {
    let start = Instant::now();
    let needs = "--eval reads the safetensors file of `rlx train --out`";
    require_format(path, &[Format::Safetensors], needs, "the .safetensors file of `rlx train --out`")?;
    let f = rlx_safetensors::SafetensorsFile::open(path)?;
    let not_ours = |key: &str, v: Option<&String>| {
        err(match v {
            Some(v) => format!("metadata {key} is {v:?}, not a file written by `rlx train --out`"),
            None => format!("no {key} metadata: not a file written by `rlx train --out`"),
        })
    };
    let kind = match f.metadata().get("rlx.model").map(String::as_str) {
        Some("mlp") => ModelKind::Mlp,
        Some("cnn") => ModelKind::Cnn,
        _ => return Err(not_ours("rlx.model", f.metadata().get("rlx.model"))),
    };
    if let Some(m) = a.model.filter(|&m| m != kind) {
        return Err(err(format!("trained as {}, but --model is {} (drop --model)", kind.name(), m.name())));
    }
    let trained_on = f.metadata().get("rlx.dataset").ok_or_else(|| not_ours("rlx.dataset", None))?;
    let ds = data::by_name(trained_on)?;
    if let Some(d) = &a.dataset {
        let given = data::by_name(d)?;
        if given.name != ds.name {
            return Err(err(format!("trained on {}, but --dataset is {} (drop --dataset)", ds.name, given.name)));
        }
    }
    let ds = &ds;
    let g = model(kind, ds, 1, false);
    let mut params = vec![];
    for &p in g.params() {
        let name = g.source_name(p).unwrap_or("?");
        let t = f.tensor_as(name, DType::F32)?;
        params.push((name.to_string(), t));
    }
    let acc = accuracy(kind, ds, &params, &a.compile_options())?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(if json {
        let v = serde_json::json!({"dataset": ds.name, "model": kind.name(), "file": path.display().to_string(),
            "test_accuracy": acc, "seconds": seconds});
        format!("{v}\n")
    } else {
        format!(
            "{} {}: test accuracy {:.2}% ({} test samples, {:.2} s)\n",
            ds.name,
            kind.name(),
            100.0 * acc,
            ds.test.len(),
            seconds
        )
    })
}

//! `onnx-conformance DIR [--doc FILE] [--jobs N] [--filter SUBSTR] [--baseline FILE]`: run the
//! ONNX backend node suite under DIR (e.g. `~/.cache/rlx/onnx-node/node`), optionally write the
//! markdown report, and print `ONNX-NODE passed=N total=M` as the last line. With
//! `--baseline FILE` the exit status is 1 when fewer cases pass than the count in FILE.

use rlx_onnx::conformance::{Outcome, cases, markdown, run_all, summary};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut doc, mut jobs, mut filter, mut baseline, mut verbose) = (None, None, 2usize, None, None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--doc" => doc = args.next().map(PathBuf::from),
            "--jobs" => jobs = args.next().and_then(|s| s.parse().ok()).unwrap_or(2),
            "--filter" => filter = args.next(),
            "--baseline" => baseline = args.next().map(PathBuf::from),
            "-v" | "--verbose" => verbose = true,
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => {
                eprintln!("onnx-conformance: unexpected argument {a:?}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: onnx-conformance DIR [--doc FILE] [--jobs N] [--filter SUBSTR] [--baseline FILE] [-v]");
        return ExitCode::from(2);
    };
    let mut all = match cases(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("onnx-conformance: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(f) = &filter {
        all.retain(|p| p.file_name().is_some_and(|n| n.to_string_lossy().contains(f.as_str())));
    }
    let results = run_all(&all, jobs);
    if verbose {
        for r in &results {
            if let Outcome::Fail(c, d) = &r.outcome {
                println!("FAIL {} [{c}] {d}", r.name);
            }
        }
    }
    let mut cats: Vec<(String, usize)> = summary(&results).into_iter().collect();
    cats.sort();
    for (c, n) in &cats {
        println!("{c}: {n}");
    }
    if let Some(doc) = doc {
        let suite = format!("`{}`", dir.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
        if let Err(e) = std::fs::write(&doc, markdown(&results, &suite)) {
            eprintln!("onnx-conformance: writing {}: {e}", doc.display());
            return ExitCode::from(1);
        }
    }
    let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
    println!("ONNX-NODE passed={passed} total={}", results.len());
    if let Some(b) = baseline {
        let want: usize = std::fs::read_to_string(&b).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        if passed < want {
            eprintln!("onnx-conformance: {passed} passed, below the recorded baseline {want} ({})", b.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

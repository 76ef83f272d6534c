//! Regenerate `crates/io/rlx-onnx/src/proto/onnx.rs` from the vendored `onnx.proto`.
//!
//! Run from the repository root: `cargo run --manifest-path tools/onnx-proto-gen/Cargo.toml`.
//! `protox` parses the .proto in pure Rust, so no system `protoc` is needed; the output is
//! committed so that building `rlx-onnx` needs neither.
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new("crates/io/rlx-onnx");
    let fds = protox::compile([root.join("proto/onnx.proto")], [root.join("proto")])?;
    let out = root.join("src/proto");
    std::fs::create_dir_all(&out)?;
    prost_build::Config::new().out_dir(&out).compile_fds(fds)?;
    // prost-build names the file after the package (`onnx.rs`).
    eprintln!("wrote {}", out.join("onnx.rs").display());
    Ok(())
}

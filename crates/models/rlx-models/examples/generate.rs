//! Greedy generation with the library API: `cargo run --release -p rlx-models --example
//! generate -- [MODEL.gguf] [PROMPT]` (default model: `tools/fetch.sh smollm2`).

use rlx_gguf::GgufFile;
use rlx_models::{GenerateOptions, Generator, LlamaModel, argmax};
use rlx_runtime::CompileOptions;
use rlx_text::{StreamDecoder, Tokenizer};
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map_or_else(|| rlx_fetched::SMOLLM2_GGUF.path(), std::path::PathBuf::from);
    let prompt = args.next().unwrap_or_else(|| "The capital of France is".into());
    let file = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(&file)?;
    let mut model = LlamaModel::from_gguf(&file, CompileOptions::default())?;
    let ids = tok.encode(&prompt, true)?;
    let opts = GenerateOptions { max_tokens: 32, stop_tokens: tok.stop_tokens() };
    let mut stream = StreamDecoder::new(&tok);
    print!("{prompt}");
    let stats = Generator::new(&mut model).generate(
        &ids,
        &opts,
        |logits, _| argmax(logits),
        |id| {
            if let Ok(Some(piece)) = stream.push(id) {
                print!("{piece}");
                let _ = std::io::stdout().flush();
            }
            true
        },
    )?;
    println!("\n{} tokens, {:.1} tok/s", stats.tokens.len(), stats.gen_tokens_per_s());
    Ok(())
}

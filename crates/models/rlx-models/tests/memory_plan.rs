//! The memory plan of SmolLM2's step graphs (SKIP on stderr when `tools/fetch.sh smollm2` has
//! not run): the arena stays close to the bytes live at once. Each layer's K/V outputs live to
//! the end of the step; planned best fit in order of birth, they pinned large buffers that the
//! next layer's FFN values then outgrew (arena 4–7× the live peak; `rlx generate` with a
//! 400-token prompt peaked at 395 MB instead of 271).

use rlx_models::{KvCacheDtype, LlamaConfig, graph, weights::Weights};
use rlx_runtime::{CompileOptions, Device, Session};

#[test]
fn step_graph_arenas_stay_near_their_live_peak() {
    let Some(path) = rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "smollm2 memory plan") else { return };
    let file = rlx_gguf::GgufFile::open(&path).unwrap();
    let cfg = LlamaConfig::from_gguf(&file).unwrap();
    let mut w = Weights::from_gguf(&file, &cfg).unwrap();
    w.to_split_rows().unwrap();
    let session = Session::try_new(Device::Cpu).unwrap();
    // A prefill chunk into an empty cache and over a full one (f32 and f16 caches), and a
    // decode step; exact and fast graphs.
    for kv in [KvCacheDtype::F32, KvCacheDtype::F16] {
        for key in [(1, 256, 16, kv), (1, 256, 256, kv), (1, 1, 512, kv)] {
            for ggml in [false, true] {
                let g = graph::step_graph(&cfg, &w, key, ggml).unwrap();
                let c = session.try_compile_with(g, &CompileOptions::default()).unwrap();
                let l = c.lir().unwrap();
                let (arena, peak) = (l.arena_bytes as f64, l.peak_live_bytes as f64);
                // 70.8 / 17.7 MB (f32, 256 over 16) and 163 / 22.5 MB (f16, 256 over 256) before.
                assert!(arena <= 1.25 * peak + 65536.0, "{key:?} ggml {ggml}: arena {arena} B, live peak {peak} B");
            }
        }
    }
}

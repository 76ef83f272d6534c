//! The compile cache: a second compile of the same graph in one session hits (the report
//! says so); a changed constant or option misses; a 24-layer encoder compiles and recompiles
//! (timings printed, not asserted: performance lives in benches).

// The encoder builder alone (including `memory.rs` here ran its tests a second time).
#[path = "common/encoder.rs"]
mod encoder;

use rlx_ir::{DType, Graph, Tensor};
use rlx_runtime::{CompileOptions, Device, Session};

fn graph(c: f32) -> Graph {
    let mut g = Graph::new("g");
    let x = g.input("x", rlx_ir::Shape::new(&[4], DType::F32));
    let k = g.constant(Tensor::from_vec(vec![c; 4], &[4]).unwrap());
    let y = g.mul(x, k);
    let y = g.exp(y);
    g.set_outputs(vec![y]);
    g
}

#[test]
fn second_compile_hits_and_changes_miss() {
    let s = Session::new(Device::Cpu);
    let opts = CompileOptions::new();
    let a = s.compile_with(graph(2.0), &opts);
    assert!(!a.compile_report().unwrap().cache_hit);
    let mut b = s.compile_with(graph(2.0), &opts);
    assert!(b.compile_report().unwrap().cache_hit, "same graph, same options: hit");
    assert_eq!(b.run(&[("x", &[0.0, 1.0, 0.5, -1.0])])[0][1], 2f32.exp());
    let c = s.compile_with(graph(3.0), &opts);
    assert!(!c.compile_report().unwrap().cache_hit, "a changed constant misses");
    let d = s.compile_with(graph(2.0), &opts.clone().with_optimize(false));
    assert!(!d.compile_report().unwrap().cache_hit, "a changed option misses");
    let other = Session::new(Device::Cpu).compile_with(graph(2.0), &opts);
    assert!(!other.compile_report().unwrap().cache_hit, "the cache is per session");
}

#[test]
fn dispatch_report_names_native_and_decomposed_composites() {
    let mut g = Graph::new("d");
    let x = g.input("x", rlx_ir::Shape::new(&[2, 8], DType::F32));
    let s = g.softmax(x, -1);
    let y = g.gelu(s, false);
    g.set_outputs(vec![y]);
    let opts = CompileOptions { dispatch_report: true, ..CompileOptions::new() };
    let c = Session::new(Device::Cpu).compile_with(g, &opts);
    let r = c.dispatch_report().expect("requested");
    let row = |k: &str| r.entries.iter().find(|e| e.kind == k).map(|e| e.dispatch.to_string());
    assert_eq!(row("composite:softmax").as_deref(), Some("native"), "{r}");
    assert_eq!(row("composite:gelu").as_deref(), Some("decomposed"), "{r}");
    assert!(r.to_json().starts_with('['));
}

#[test]
fn encoder_24_layers_compile_time() {
    let s = Session::new(Device::Cpu);
    // Graphs built before the clock starts: the figures are the compiles alone.
    let (g1, g2) = (encoder::stack(24), encoder::stack(24));
    let t = std::time::Instant::now();
    let a = s.compile_with(g1, &CompileOptions::new());
    let first = t.elapsed();
    let t = std::time::Instant::now();
    let b = s.compile_with(g2, &CompileOptions::new());
    let second = t.elapsed();
    assert!(!a.compile_report().unwrap().cache_hit && b.compile_report().unwrap().cache_hit);
    eprintln!("24-layer encoder: first compile {first:?}, second (cache hit) {second:?}");
}

/// `x · W + b` then a transpose: one weight constant of `n` f32 and one attribute to vary.
fn weighted(w: &[f32], perm: &[usize]) -> Graph {
    let mut g = Graph::new("fp");
    let x = g.input("x", rlx_ir::Shape::new(&[2, 3], DType::F32));
    let w = g.constant(Tensor::from_vec(w.to_vec(), &[3, 2]).unwrap());
    let y = g.matmul(x, w, rlx_ir::Shape::new(&[2, 2], DType::F32));
    let y = g.transpose(y, perm);
    g.set_outputs(vec![y]);
    g
}

#[test]
fn fingerprint_tells_graphs_apart_and_is_stable() {
    use rlx_runtime::fingerprint;
    let opts = rlx_compile::PassOptions::default();
    let w = [0.5f32, -1.0, 2.0, 0.25, 3.0, -0.0];
    let fp = |g: &Graph| fingerprint(g, &opts, "cpu").unwrap();
    let a = fp(&weighted(&w, &[1, 0]));
    assert_eq!(a, fp(&weighted(&w, &[1, 0])), "equal graphs hash equal");
    // A graph read back from JSON (another process's view of it) hashes the same.
    let back = rlx_ir::hir_from_json(&rlx_ir::hir_to_json(&weighted(&w, &[1, 0])).unwrap()).unwrap();
    assert_eq!(a, fp(&back), "stable across a save / load");
    let mut ulp = w;
    ulp[3] = f32::from_bits(ulp[3].to_bits() + 1);
    assert_ne!(a, fp(&weighted(&ulp, &[1, 0])), "a one-ulp weight change");
    let mut zero = w;
    zero[5] = 0.0;
    assert_ne!(a, fp(&weighted(&zero, &[1, 0])), "-0.0 and 0.0 differ");
    assert_ne!(a, fp(&weighted(&w, &[0, 1])), "a different op attribute");
    assert_ne!(a, fingerprint(&weighted(&w, &[1, 0]), &opts, "other").unwrap(), "another backend");
    let no_fuse = rlx_compile::PassOptions { fuse: false, ..opts.clone() };
    assert_ne!(a, fingerprint(&weighted(&w, &[1, 0]), &no_fuse, "cpu").unwrap(), "other pass options");
    let mut bad = weighted(&w, &[1, 0]);
    let x = bad.inputs()[0];
    bad.transpose(x, &[0, 0]);
    assert!(fingerprint(&bad, &opts, "cpu").is_err(), "a graph with a recorded error is refused");
}

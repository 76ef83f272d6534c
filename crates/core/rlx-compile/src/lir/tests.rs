//! Planner tests: a simulated memory checks that no step reads a value its buffer no longer
//! holds (no clobbering), on hand-made and random graphs.

use super::*;
use proptest::prelude::*;
use rlx_ir::{Shape, Tensor};

/// Run the plan on a "memory" of buffer → value tokens; panic on a clobbered read.
fn simulate(g: &Graph, m: &LirModule) {
    let mut holds: Vec<Option<NodeId>> = vec![None; m.buffers.len()];
    let read = |holds: &[Option<NodeId>], id: NodeId, at: NodeId| {
        let p = schedule::producer(g, id);
        if let Storage::Buffer(b) = m.values[p.index()].storage {
            assert_eq!(holds[b], Some(p), "step {at} reads {p} from buf{b}, which holds {:?}", holds[b]);
        }
    };
    for s in &m.steps {
        for &i in &g.node(s.node).inputs {
            read(&holds, i, s.node);
        }
        if let Some(b) = s.buffer {
            holds[b] = Some(s.node);
        }
    }
    for &o in g.outputs() {
        read(&holds, o, NodeId(u32::MAX));
    }
    // Buffers are disjoint, aligned ranges of one arena.
    let mut end = 0;
    for b in &m.buffers {
        assert_eq!(b.offset % ALIGN, 0);
        assert!(b.offset >= end && b.bytes >= b.elems * b.dtype.size_bytes());
        end = b.offset + b.bytes;
    }
    assert_eq!(end, m.arena_bytes);
    assert!(m.peak_live_bytes <= m.arena_bytes, "{m}");
}

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

#[test]
fn chain_reuses_two_buffers_and_runs_in_place() {
    let mut g = Graph::new("chain");
    let x = g.input("x", f32s(&[256]));
    let mut h = g.exp(x);
    for _ in 0..6 {
        h = g.tanh(h);
        let c = g.exp(h);
        h = g.add(h, c);
    }
    g.set_outputs(vec![h]);
    let m = plan(&g, &LirOptions::default()).unwrap();
    simulate(&g, &m);
    assert!(m.buffers.len() <= 2, "{m}");
    assert!(m.steps.iter().any(|s| matches!(s.reuse, Reuse::InPlace { .. })), "{m}");
    let off = plan(&g, &LirOptions { reuse: false, in_place: false, views: false, schedule: false }).unwrap();
    assert_eq!(off.arena_bytes, off.unplanned_bytes, "one buffer per value when reuse is off");
}

#[test]
fn in_place_never_clobbers_a_value_read_later() {
    let mut g = Graph::new("keep");
    let x = g.input("x", f32s(&[64]));
    let a = g.exp(x);
    let b = g.neg(a); // a is still read by c: b must not overwrite it
    let c = g.mul(a, b);
    g.set_outputs(vec![c]);
    let m = plan(&g, &LirOptions::default()).unwrap();
    simulate(&g, &m);
    assert_eq!(m.step_of(b).unwrap().reuse, Reuse::Fresh, "{m}");
    assert!(matches!(m.step_of(c).unwrap().reuse, Reuse::InPlace { .. }), "{m}");
}

#[test]
fn reshape_and_prefix_slice_alias_their_source() {
    let mut g = Graph::new("views");
    let x = g.input("x", f32s(&[4, 16]));
    let a = g.exp(x);
    let r = g.reshape(a, [64]);
    let r2 = g.reshape(r, [8, 8]);
    let s = g.slice(r2, &[0, 0], &[2, 8], &[]);
    let mid = g.slice(r2, &[1, 0], &[3, 8], &[]); // not a prefix: copied
    let y = g.tanh(s);
    g.set_outputs(vec![y, mid]);
    let m = plan(&g, &LirOptions::default()).unwrap();
    simulate(&g, &m);
    assert_eq!(m.step_of(r).unwrap().reuse, Reuse::View);
    assert_eq!(m.step_of(r).unwrap().buffer, m.step_of(a).unwrap().buffer);
    assert_eq!(m.step_of(r2).unwrap().reuse, Reuse::View);
    // r2 is read by both slices; the one scheduled last may alias it, the other copies.
    let views = [s, mid].iter().filter(|&&v| m.step_of(v).unwrap().reuse == Reuse::View).count();
    assert!(views <= 1, "{m}");
    assert_eq!(m.step_of(mid).unwrap().reuse, Reuse::Fresh, "a middle slice is not a prefix");
}

#[test]
fn outputs_and_inputs_are_never_reused() {
    let mut g = Graph::new("out");
    let x = g.input("x", f32s(&[32]));
    let a = g.exp(x); // an output in the middle
    let b = g.neg(a);
    let c = g.tanh(b);
    g.set_outputs(vec![a, c]);
    let m = plan(&g, &LirOptions::default()).unwrap();
    simulate(&g, &m);
    assert_eq!(m.values[x.index()].storage, Storage::External);
    assert_eq!(m.step_of(b).unwrap().reuse, Reuse::Fresh, "a is an output: never overwritten");
}

#[test]
fn schedule_lowers_peak_on_independent_branches() {
    // Two branches, each a big temporary reduced to a small one; built branch-interleaved, so
    // the graph's order keeps both big temporaries alive at once.
    let mut g = Graph::new("branches");
    let x = g.input("x", f32s(&[1024]));
    let big1 = g.exp(x);
    let big2 = g.tanh(x);
    let s1 = g.sum(big1, &[0], false);
    let s2 = g.sum(big2, &[0], false);
    let y = g.add(s1, s2);
    g.set_outputs(vec![y]);
    let on = plan(&g, &LirOptions::default()).unwrap();
    let off = plan(&g, &LirOptions { schedule: false, ..Default::default() }).unwrap();
    simulate(&g, &on);
    simulate(&g, &off);
    assert!(on.peak_live_bytes < off.peak_live_bytes, "{on}\n{off}");
}

#[test]
fn long_lived_small_values_do_not_pin_large_buffers() {
    // Per layer a large temporary, reduced to a small one, squared into a graph output (a
    // model step's K/V rows): the output is born just after the large temporary dies. Best fit
    // in order of birth put each output in that free large buffer (the only one free), so every
    // layer's temporary took a new one: 8 × 64 KiB for 64 KiB + 8 small values live at once.
    let mut g = Graph::new("layers");
    let x = g.input("x", f32s(&[256, 64]));
    let mut outs = vec![];
    let mut h = x;
    for _ in 0..8 {
        let big = g.exp(h);
        let r = g.sum(big, &[1], false);
        outs.push(g.mul(r, r));
        h = g.tanh(x);
    }
    g.set_outputs(outs);
    let m = plan(&g, &LirOptions::default()).unwrap();
    simulate(&g, &m);
    let big_buffers = m.buffers.iter().filter(|b| b.elems == 256 * 64).count();
    assert!(big_buffers <= 2, "{m}");
    assert!(m.arena_bytes <= m.peak_live_bytes + 64 * 1024 + 4096, "{m}");
}

#[test]
fn symbolic_shapes_are_an_error() {
    let mut g = Graph::new("sym");
    let x = g.input("x", Shape::from_dims(&[rlx_ir::Dim::Sym("n".into())], DType::F32));
    let y = g.exp(x);
    g.set_outputs(vec![y]);
    let e = plan(&g, &LirOptions::default()).unwrap_err();
    assert!(e.to_string().contains("symbolic"), "{e}");
}

/// A random graph: elementwise ops, reshapes, prefix and middle slices, reductions, a tuple
/// op (`top_k`), several consumers, outputs in the middle.
fn random_graph(steps: &[(u8, usize, usize)], outs: &[usize]) -> Graph {
    let mut g = Graph::new("random");
    let mut pool = vec![g.input("x", f32s(&[4, 8])), g.constant(Tensor::from_vec(vec![1f32; 32], &[4, 8]).unwrap())];
    for &(kind, a, b) in steps {
        let (a, b) = (pool[a % pool.len()], pool[b % pool.len()]);
        let same = g.shape(a) == g.shape(b);
        let id = match kind {
            0 => g.exp(a),
            1 => g.neg(a),
            2 if same => g.add(a, b),
            3 if same => g.mul(a, b),
            4 => {
                let r = g.reshape(a, [32]);
                g.reshape(r, [4, 8])
            }
            5 => {
                let s = g.slice(a, &[0, 0], &[1, 8], &[]);
                g.add(a, s)
            }
            6 => {
                let s = g.slice(a, &[1, 0], &[2, 8], &[]);
                g.mul(s, a)
            }
            7 => {
                let s = g.sum(a, &[1], true);
                g.sub(a, s)
            }
            8 => {
                let t = g.top_k(a, 2);
                let v = t.0;
                let z = g.sum(v, &[1], true);
                g.add(a, z)
            }
            _ => g.tanh(a),
        };
        pool.push(id);
    }
    let mut o: Vec<NodeId> = outs.iter().map(|&i| pool[i % pool.len()]).collect();
    o.push(*pool.last().unwrap());
    g.set_outputs(o);
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_plans_never_clobber(
        steps in prop::collection::vec((0u8..10, 0usize..64, 0usize..64), 1..40),
        outs in prop::collection::vec(0usize..64, 0..4),
        schedule in any::<bool>(), in_place in any::<bool>(), views in any::<bool>(),
    ) {
        let g = random_graph(&steps, &outs);
        prop_assert!(g.error().is_none(), "{:?}", g.error());
        let m = plan(&g, &LirOptions { schedule, reuse: true, views, in_place }).unwrap();
        simulate(&g, &m);
        // Every step is scheduled once, after its operands.
        let mut done = vec![false; g.nodes().len()];
        for s in &m.steps {
            for &i in &g.node(s.node).inputs {
                let p = schedule::producer(&g, i);
                prop_assert!(!is_step(&g.node(p).op) || done[p.index()], "{} before its operand {}", s.node, p);
            }
            prop_assert!(is_step(&g.node(s.node).op), "{} is not a step", s.node);
            prop_assert!(!done[s.node.index()]);
            done[s.node.index()] = true;
        }
        prop_assert!(m.arena_bytes + m.fixed_bytes <= m.unplanned_bytes, "{m}");
    }
}

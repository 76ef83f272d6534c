//! Differential test: random graphs (elementwise unary/binary with broadcasting, reduce, mm,
//! reshape/transpose chains, several consumers, outputs in the middle, repeated
//! subexpressions, constant subgraphs, compare/select, trailing reductions, broadcast_in_dim:
//! material for elementwise fusion, which the pipeline runs by default) compiled with every pass agree with the reference
//! interpreter on the original graph within [`common::TOL`], and never have more nodes that
//! compute (a multi-output region's `get_tuple_element` results are names, not computation).

mod common;

use proptest::prelude::*;
use rlx_compile::PassOptions;
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};

/// One random step: `kind` picks the op, `a`/`b` pick operands from the pool (modulo its size).
#[derive(Clone, Debug)]
struct Step {
    kind: u8,
    a: usize,
    b: usize,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec((0u8..20, 0usize..64, 0usize..64).prop_map(|(kind, a, b)| Step { kind, a, b }), 1..24)
}

/// NumPy broadcast compatibility of two dim lists.
fn broadcastable(x: &[usize], y: &[usize]) -> bool {
    x.iter().rev().zip(y.iter().rev()).all(|(&p, &q)| p == q || p == 1 || q == 1)
}

fn build(steps: &[Step], outs: &[usize]) -> Graph {
    let mut g = Graph::new("random");
    let mut pool: Vec<NodeId> = vec![
        g.input("x", Shape::new(&[2, 3], DType::F32)),
        g.input("y", Shape::new(&[3], DType::F32)),
        g.param("w", Shape::new(&[2, 1], DType::F32)),
        g.constant(Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap()),
    ];
    let dims = |g: &Graph, id: NodeId| g.shape(id).static_dims().unwrap();
    for (k, s) in steps.iter().enumerate() {
        let a = pool[s.a % pool.len()];
        let b = pool[s.b % pool.len()];
        let (da, db) = (dims(&g, a), dims(&g, b));
        let id = match s.kind {
            0 => g.tanh(a),
            1 => g.neg(a),
            2 => g.sin(a),
            3..=5 if broadcastable(&da, &db) => match s.kind {
                3 => g.add(a, b),
                4 => g.sub(a, b),
                _ => g.mul(a, b),
            },
            3..=5 => g.mul(a, a),
            6 if !da.is_empty() => g.sum(a, &[0], false),
            7 if da.len() == 2 => {
                let t = g.transpose(a, &[1, 0]);
                g.mm(a, t)
            }
            8 if da.len() == 2 => g.transpose(a, &[1, 0]),
            9 => {
                let n: usize = da.iter().product();
                g.reshape(a, [n])
            }
            10 => {
                let one = g.scalar(1.0, DType::F32);
                g.mul(a, one)
            }
            11 => {
                let zero = g.scalar(0.0, DType::F32);
                g.add(zero, a)
            }
            12 => {
                // A constant subgraph.
                let c = g.constant(Tensor::from_vec(vec![0.25f32, 1.5, -0.75], &[3]).unwrap());
                let h = g.scalar(2.0, DType::F32);
                let m = g.mul(c, h);
                g.tanh(m)
            }
            13 if k > 0 => {
                // Repeat an earlier step's op on the same operands (a CSE candidate).
                let prev = &steps[s.a % k];
                let r = Step { kind: prev.kind, a: prev.a, b: prev.b };
                return_step(&mut g, &pool, &r)
            }
            // Fusion material: more unary ops, compare + select, trailing reductions,
            // broadcast_in_dim, scalar constants.
            14 => g.logistic(a),
            15 if broadcastable(&da, &db) => {
                let p = g.compare(rlx_ir::ops::CompareOp::Gt, a, b);
                g.select(p, a, b)
            }
            16 if !da.is_empty() => g.sum(a, &[-1], false),
            17 if !da.is_empty() => g.reduce_max(a, &[-1], false),
            18 if da.len() <= 2 => {
                let mut shape = vec![2];
                shape.extend(&da);
                let bd: Vec<usize> = (1..=da.len()).collect();
                g.broadcast_in_dim(a, shape, &bd)
            }
            19 => {
                let c = g.scalar(0.75, DType::F32);
                let m = g.mul(a, c);
                g.sub(m, a)
            }
            _ => g.neg(a),
        };
        pool.push(id);
    }
    let mut o: Vec<NodeId> = outs.iter().map(|&i| pool[i % pool.len()]).collect();
    o.push(*pool.last().unwrap());
    g.set_outputs(o);
    g
}

/// The simple elementwise subset of `build`'s steps, for repeats.
fn return_step(g: &mut Graph, pool: &[NodeId], s: &Step) -> NodeId {
    let a = pool[s.a % pool.len()];
    match s.kind {
        0 => g.tanh(a),
        2 => g.sin(a),
        _ => g.neg(a),
    }
}

/// Nodes that compute something: a multi-output fused region adds one `get_tuple_element`
/// per result, which only names a part of the region's tuple.
fn compute_nodes(g: &Graph) -> usize {
    g.nodes().iter().filter(|n| !matches!(n.op, rlx_ir::Op::GetTupleElement { .. })).count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pipeline_matches_reference(steps in steps(), outs in prop::collection::vec(0usize..64, 0..4)) {
        let g = build(&steps, &outs);
        prop_assert!(g.error().is_none(), "generator built an invalid graph: {:?}", g.error());
        let mut h = g.clone();
        let opts = PassOptions { verify_each: true, ..Default::default() };
        rlx_compile::compile(&mut h, &opts).unwrap();
        prop_assert!(
            compute_nodes(&h) <= compute_nodes(&g),
            "optimized graph grew: {} -> {}",
            compute_nodes(&g),
            compute_nodes(&h)
        );
        prop_assert_eq!(h.inputs().len(), g.inputs().len());
        prop_assert_eq!(h.params().len(), g.params().len());
        common::assert_same_numerics(&g, &h);
    }

    /// Every `rlx check` fusion hint names two adjacent nodes that the fusion plan really
    /// keeps in different loops, and prints without panicking.
    #[test]
    fn fusion_hints_name_adjacent_ops_the_plan_keeps_apart(
        steps in steps(),
        outs in prop::collection::vec(0usize..64, 0..4),
    ) {
        let g = build(&steps, &outs);
        let region = rlx_compile::passes::fuse::plan(&g, &mut vec![]);
        for m in rlx_compile::missed_fusions(&g) {
            let reads = |a: NodeId, b: NodeId| g.node(a).inputs.contains(&b);
            prop_assert!(reads(m.node, m.next_to) || reads(m.next_to, m.node), "{:?}", m);
            let (a, b) = (region[m.node.index()], region[m.next_to.index()]);
            prop_assert!(a.is_none() || a != b, "{:?} in one region", m);
            prop_assert!(!m.message(&g).is_empty());
        }
    }
}

//! A custom op that splits its evaluation with `rlx_ir::ops::custom::parallel_for` inside a
//! multi-threaded CPU run: every task runs exactly once and the result is whole, run after run
//! (the tasks go to the executable's thread team).

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::ops::custom::{CustomOp, parallel_for, register_op};
use rlx_ir::{Attrs, DType, Graph, IrError, Shape, Tensor};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// `y = x²`, one task per chunk of 7 elements, counting the tasks it runs.
struct ChunkedSquare {
    tasks: AtomicUsize,
}

impl CustomOp for ChunkedSquare {
    fn infer(&self, _: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        Ok(vec![ins[0].clone()])
    }

    fn eval(&self, _: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let x = ins[0].as_slice::<f32>().unwrap();
        // Results as bits in atomics: tasks write disjoint elements from several threads.
        let y: Vec<AtomicU32> = (0..x.len()).map(|_| AtomicU32::new(u32::MAX)).collect();
        let chunks = x.len().div_ceil(7);
        parallel_for(chunks, &|c| {
            self.tasks.fetch_add(1, Relaxed);
            for i in c * 7..(c * 7 + 7).min(x.len()) {
                let old = y[i].swap((x[i] * x[i]).to_bits(), Relaxed);
                assert_eq!(old, u32::MAX, "element {i} written twice");
            }
        });
        for (o, v) in outs[0].as_mut_slice::<f32>().unwrap().iter_mut().zip(&y) {
            *o = f32::from_bits(v.load(Relaxed));
        }
        Ok(())
    }
}

#[test]
fn parallel_for_runs_each_task_once_in_a_threaded_run() {
    let op = Arc::new(ChunkedSquare { tasks: AtomicUsize::new(0) });
    register_op("test_chunked_square", op.clone());
    let n = 1000;
    let mut g = Graph::new("custom_parallel");
    let x = g.input("x", Shape::new(&[n], DType::F32));
    let y = g.custom("test_chunked_square", Attrs::new(), &[x])[0];
    g.set_outputs(vec![y]);
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(2), ..Default::default() }).unwrap();
    // Reports name the op's own evaluation, not rlx-ir's reference.
    let kernels: Vec<_> = exe.steps().iter().map(|s| s.kernel).collect();
    assert_eq!(kernels, ["custom_op"]);
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
    let xt = Tensor::from_vec(xs.clone(), &[n]).unwrap();
    let runs = 50;
    for _ in 0..runs {
        let out = exe.run(&[&xt], &[]).unwrap();
        let got = out[0].as_slice::<f32>().unwrap();
        assert!(got.iter().zip(&xs).all(|(y, x)| *y == x * x), "x² expected");
    }
    assert_eq!(op.tasks.load(Relaxed), runs * n.div_ceil(7));
}

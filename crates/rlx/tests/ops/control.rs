//! Records of control flow (`scan`, `while`, `cond`/`switch`) and of a custom op registered
//! here. The sub-graphs built below are the ones `tools/refgen/opcases/control.py` loops over.

use crate::Rec;
use crate::common::Tol;
use rlx_ir::ops::custom::{CustomOp, register_op};
use rlx_ir::{Attr, Attrs, DType, Elem, Graph, IrError, NodeId, Shape, Tensor, with_dtype};
use std::sync::Arc;

/// A sub-graph with inputs of the given types.
fn sub(name: &str, tys: &[Shape], f: impl FnOnce(&mut Graph, &[NodeId]) -> Vec<NodeId>) -> Graph {
    let mut g = Graph::new(name);
    let ins: Vec<NodeId> = tys.iter().enumerate().map(|(k, t)| g.input(&format!("a{k}"), t.clone())).collect();
    let outs = f(&mut g, &ins);
    g.set_outputs(outs);
    g
}

/// `optests.axpy_mul(x, y; alpha) = (x + alpha * y, x * y)`: two results of `x`'s type.
struct AxpyMul;

impl CustomOp for AxpyMul {
    fn infer(&self, _attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        if ins.len() != 2 || ins[0] != ins[1] || !ins[0].dtype.is_float() {
            return Err("axpy_mul takes two floats of one type".into());
        }
        Ok(vec![ins[0].clone(), ins[0].clone()])
    }
    fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let Some(Attr::Float(alpha)) = attrs.get("alpha") else {
            return Err(IrError::Eval { op: "custom.optests.axpy_mul".into(), msg: "needs a Float alpha".into() });
        };
        let (x, y) = (ins[0].to_f64_vec(), ins[1].to_f64_vec());
        let d = ins[0].dtype();
        let (o0, o1) = outs.split_at_mut(1);
        with_dtype!(d, T, {
            let a = o0[0].as_mut_slice::<T>().unwrap();
            let b = o1[0].as_mut_slice::<T>().unwrap();
            for i in 0..x.len() {
                a[i] = T::of_f64(x[i] + alpha * y[i]);
                b[i] = T::of_f64(x[i] * y[i]);
            }
        });
        Ok(())
    }
}

pub fn records() -> Vec<Rec> {
    vec![
        Rec::new("scan", Tol::Close, |g, x, a| {
            let c = g.shape(x[0]).clone();
            let xs = g.shape(x[1]);
            let slice = Shape::new(&xs.static_dims().unwrap()[1..], xs.dtype);
            let len = xs.static_dims().unwrap()[0];
            let body = sub("body", &[c, slice], |b, i| {
                let n = b.add(i[0], i[1]);
                let two = b.scalar_like(2.0, n);
                let y = b.mul(n, two);
                vec![n, y]
            });
            g.scan(body, &[], &[x[0]], &[x[1]], len, a.bool("reverse"))
        }),
        Rec::new("scan_with_const", Tol::Close, |g, x, a| {
            let w = g.shape(x[0]).clone();
            let c = g.shape(x[1]).clone();
            let xs = g.shape(x[2]);
            let slice = Shape::new(&xs.static_dims().unwrap()[1..], xs.dtype);
            let len = xs.static_dims().unwrap()[0];
            let body = sub("body", &[w, c, slice], |b, i| {
                let cw = b.mul(i[1], i[0]);
                vec![b.add(cw, i[2]), i[1]]
            });
            g.scan(body, &[x[0]], &[x[1]], &[x[2]], len, a.bool("reverse"))
        }),
        Rec::new("while", Tol::Close, |g, x, _| {
            let tys = [g.shape(x[0]).clone(), g.shape(x[1]).clone()];
            let cond = sub("cond", &tys, |b, i| {
                let five = b.scalar(5.0, DType::I32);
                vec![b.compare(rlx_ir::ops::CompareOp::Lt, i[0], five)]
            });
            let body = sub("body", &tys, |b, i| {
                let one = b.scalar(1.0, DType::I32);
                let two = b.scalar(2.0, DType::F32);
                let onef = b.scalar(1.0, DType::F32);
                let x2 = b.mul(i[1], two);
                vec![b.add(i[0], one), b.add(x2, onef)]
            });
            g.while_loop(cond, body, x)
        }),
        Rec::new("switch", Tol::Exact, |g, x, _| {
            let ty = [g.shape(x[1]).clone()];
            let branches = vec![
                sub("plus1", &ty, |b, i| {
                    let one = b.scalar_like(1.0, i[0]);
                    vec![b.add(i[0], one)]
                }),
                sub("times2", &ty, |b, i| {
                    let two = b.scalar_like(2.0, i[0]);
                    vec![b.mul(i[0], two)]
                }),
                sub("neg", &ty, |b, i| vec![b.neg(i[0])]),
            ];
            g.switch(x[0], branches, &x[1..])
        }),
        Rec::new("cond", Tol::Exact, |g, x, _| {
            let ty = [g.shape(x[1]).clone()];
            let on_false = sub("minus1", &ty, |b, i| {
                let one = b.scalar_like(1.0, i[0]);
                vec![b.sub(i[0], one)]
            });
            let on_true = sub("times3", &ty, |b, i| {
                let three = b.scalar_like(3.0, i[0]);
                vec![b.mul(i[0], three)]
            });
            g.switch(x[0], vec![on_false, on_true], &x[1..])
        }),
        Rec::new("custom", Tol::Exact, |g, x, a| {
            register_op("optests.axpy_mul", Arc::new(AxpyMul));
            let attrs: Attrs = [("alpha".to_string(), Attr::Float(a.f64("alpha")))].into_iter().collect();
            g.custom("optests.axpy_mul", attrs, x)
        }),
    ]
}

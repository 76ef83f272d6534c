//! Freezing: params become constants, for inference graphs whose weights are fixed (as
//! `torch.jit.freeze`, or ONNX initializers). Backends then see the weights at compile time
//! and can pre-pack them (the CPU backend packs constant matmul operands once, at compile
//! time, instead of on every run).

use crate::{Graph, IrError, NodeId, Op, Result, Tensor};

impl Graph {
    /// Turn the params named in `values` into constants holding those tensors. Node ids,
    /// inputs and outputs are unchanged; the frozen params leave [`Graph::params`] (the others
    /// stay, in their order). Freezing every param gives a graph whose `run` takes inputs only.
    ///
    /// Errors (nothing is changed then): a name that is not a param of the graph (naming the
    /// params there are), a name given twice, or a tensor whose dims or dtype differ from the
    /// param's declared shape (a symbolic param dim cannot be frozen).
    pub fn freeze_params<S: AsRef<str>>(&mut self, values: impl IntoIterator<Item = (S, Tensor)>) -> Result<()> {
        let mut frozen: Vec<(NodeId, Tensor)> = vec![];
        for (name, t) in values {
            let name = name.as_ref();
            let Some(id) = self.param_by_name(name) else {
                let known: Vec<&str> = self.params.iter().filter_map(|&p| self.source_name(p)).collect();
                return Err(IrError::Invalid(format!("freeze_params: no param named {name:?} (params: {known:?})")));
            };
            if frozen.iter().any(|(f, _)| *f == id) {
                return Err(IrError::Invalid(format!("freeze_params: param {name:?} given twice")));
            }
            let want = self.shape(id);
            if want.static_dims().as_deref() != Some(t.shape()) || want.dtype != t.dtype() {
                let got = crate::Shape::new(t.shape(), t.dtype());
                return Err(IrError::Invalid(format!("freeze_params: param {name:?} is {want}, the value is {got}")));
            }
            frozen.push((id, t));
        }
        for (id, t) in frozen {
            self.nodes[id.index()].op = Op::Constant(t.into());
            self.params.retain(|&p| p != id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Graph, Shape, Tensor, interp};
    use std::collections::HashMap;

    fn feeds(v: &[(&str, &Tensor)]) -> HashMap<String, Tensor> {
        v.iter().map(|(n, t)| (n.to_string(), (*t).clone())).collect()
    }

    fn affine() -> Graph {
        let mut g = Graph::new("affine");
        let x = g.input("x", Shape::new(&[2, 3], DType::F32));
        let w = g.param("w", Shape::new(&[3], DType::F32));
        let b = g.param("b", Shape::new(&[3], DType::F32));
        let y = g.mul(x, w);
        let y = g.add(y, b);
        g.set_outputs(vec![y]);
        g
    }

    /// A frozen graph computes what the unfrozen one computes with the same param values.
    #[test]
    fn frozen_params_give_the_same_values() {
        let g = affine();
        let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[2, 3]).unwrap();
        let (w, b) = (
            Tensor::from_vec(vec![0.5f32, -1., 2.], &[3]).unwrap(),
            Tensor::from_vec(vec![1f32, 0., -3.], &[3]).unwrap(),
        );
        let want = interp::evaluate(&g, &feeds(&[("x", &x), ("w", &w), ("b", &b)])).unwrap();
        let mut f = g.clone();
        f.freeze_params([("w", w.clone())]).unwrap();
        assert_eq!(f.params().len(), 1);
        assert_eq!(interp::evaluate(&f, &feeds(&[("x", &x), ("b", &b)])).unwrap(), want);
        f.freeze_params([("b", b)]).unwrap();
        assert!(f.params().is_empty());
        assert_eq!(interp::evaluate(&f, &feeds(&[("x", &x)])).unwrap(), want);
    }

    /// Unknown names, repeated names, wrong dims or dtype: an error naming the problem, and the
    /// graph unchanged.
    #[test]
    fn bad_values_are_refused_without_changes() {
        let g = affine();
        let w = Tensor::from_vec(vec![0.5f32, -1., 2.], &[3]).unwrap();
        let cases = [
            (vec![("nope", w.clone())], "no param named \"nope\""),
            (vec![("w", w.clone()), ("w", w.clone())], "given twice"),
            (vec![("w", Tensor::from_vec(vec![0f32; 4], &[4]).unwrap())], "param \"w\" is f32[3], the value is f32[4]"),
            (vec![("b", w.clone()), ("w", Tensor::from_vec(vec![0i32; 3], &[3]).unwrap())], "param \"w\" is"),
        ];
        for (values, want) in cases {
            let mut f = g.clone();
            let e = f.freeze_params(values).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert_eq!(f, g);
        }
    }
}

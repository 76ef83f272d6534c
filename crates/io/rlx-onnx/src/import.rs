//! The importer: walks an ONNX graph in order, keeps an ONNX-name → RLX-node map, folds nodes
//! whose operands are all constants (so `Shape → Gather → Concat → Reshape` chains become
//! literals), and hands every node to the op table in [`crate::ops`].

use crate::error::{OnnxError, Result};
use crate::ops::{self, Ctx, Val};
use crate::proto::{GraphProto, ModelProto, ValueInfoProto, type_proto};
use crate::tensor::{dtype_of, to_tensor};
use rlx_ir::{Dim, Graph, Shape, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

/// Options for [`import`].
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Values of graph inputs known at import time. Their dims replace the declared ones, and
    /// an op that needs an operand's value while importing (a `Reshape` target, `Slice`
    /// bounds, `TopK`'s `k`, ... fed as a graph input) reads it here. The input stays an input:
    /// the same value must be fed at run time.
    pub input_values: HashMap<String, Tensor>,
    /// Dims for graph inputs (replace declared and symbolic dims).
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Directory that external tensor data is relative to (the model file's directory).
    pub base_dir: Option<PathBuf>,
    /// Largest element count folded at import time when all operands are constants.
    pub fold_limit: Option<usize>,
}

/// Per-op-type counts of an import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// `op_type` (domain-qualified when not the default domain) → (node count, supported).
    pub ops: BTreeMap<String, (usize, bool)>,
    /// Opset version of the default domain.
    pub opset: i64,
}

impl ImportReport {
    /// Number of nodes whose op type has an importer.
    pub fn supported_nodes(&self) -> usize {
        self.ops.values().filter(|(_, s)| *s).map(|(n, _)| n).sum()
    }
    /// Number of nodes whose op type has no importer.
    pub fn unsupported_nodes(&self) -> usize {
        self.ops.values().filter(|(_, s)| !*s).map(|(n, _)| n).sum()
    }
    /// Op types without an importer.
    pub fn unsupported_ops(&self) -> Vec<&str> {
        self.ops.iter().filter(|(_, (_, s))| !*s).map(|(k, _)| k.as_str()).collect()
    }
}

/// An imported model: the RLX graph (inputs named as in ONNX, initializers as constants),
/// the ONNX output names in order, and the report.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The graph; its outputs are the ONNX graph outputs in order.
    pub graph: Graph,
    /// ONNX names of the graph inputs (initializers excluded), in order.
    pub inputs: Vec<String>,
    /// ONNX names of the graph outputs, in order.
    pub outputs: Vec<String>,
    /// Op counts.
    pub report: ImportReport,
}

/// Opset version of the default ONNX domain (`""` or `"ai.onnx"`); 1 if none is listed.
pub fn default_opset(m: &ModelProto) -> i64 {
    m.opset_import.iter().find(|o| matches!(o.domain(), "" | "ai.onnx")).map(|o| o.version()).unwrap_or(1)
}

/// Count op types and whether each has an importer, without building anything.
pub fn report(m: &ModelProto) -> ImportReport {
    let mut r = ImportReport { opset: default_opset(m), ..Default::default() };
    if let Some(g) = &m.graph {
        count_ops(g, &mut r);
    }
    r
}

fn count_ops(g: &GraphProto, r: &mut ImportReport) {
    for n in &g.node {
        let key = ops::qualified(n.domain(), n.op_type());
        let supported = ops::lookup(n.domain(), n.op_type()).is_some();
        r.ops.entry(key).or_insert((0, supported)).0 += 1;
        for a in &n.attribute {
            for sg in a.g.iter().chain(a.graphs.iter()) {
                count_ops(sg, r);
            }
        }
    }
}

/// Import an ONNX model into an RLX graph.
///
/// Graph inputs become `Graph::input`s (dims from the `ValueInfoProto`: `dim_value` static,
/// `dim_param` → `Dim::Sym(name)`, missing → a fresh symbol), initializers become constants.
/// Errors: no graph, an unsupported op or dtype (naming the node), a value used before it is
/// defined, and any shape error the RLX builders record.
pub fn import(m: &ModelProto, opts: &ImportOptions) -> Result<Imported> {
    let g = m.graph.as_ref().ok_or_else(|| OnnxError::Invalid("model has no graph".into()))?;
    let report = report(m);
    let mut im = Importer::new(opts, report.opset, String::new());
    let mut rg = Graph::new(if g.name().is_empty() { "onnx" } else { g.name() });
    let mut scope: HashMap<String, Val> = HashMap::new();
    for init in &g.initializer {
        let t = std::sync::Arc::new(to_tensor(init, opts.base_dir.as_deref())?);
        let id = rg.constant(t.clone());
        scope.insert(init.name().to_string(), Val { id, konst: Some(t), demand: None });
    }
    let mut inputs = vec![];
    for vi in &g.input {
        if scope.contains_key(vi.name()) {
            continue; // IR < 4 lists initializers among the inputs.
        }
        let shape = im.input_shape(vi)?;
        let id = rg.input(vi.name(), shape);
        let demand = opts.input_values.get(vi.name()).cloned();
        scope.insert(vi.name().to_string(), Val { id, konst: None, demand });
        inputs.push(vi.name().to_string());
    }
    im.body(g, &mut rg, &mut scope)?;
    let mut outs = vec![];
    let mut names = vec![];
    for o in &g.output {
        let v = scope
            .get(o.name())
            .ok_or_else(|| OnnxError::Invalid(format!("graph output {:?} is never produced", o.name())))?;
        outs.push(v.id);
        names.push(o.name().to_string());
    }
    rg.set_outputs(outs);
    if let Some(e) = rg.error() {
        return Err(OnnxError::Ir(e.clone()));
    }
    Ok(Imported { graph: rg, inputs, outputs: names, report })
}

pub(crate) struct Importer<'o> {
    opts: &'o ImportOptions,
    pub(crate) opset: i64,
    fold_limit: usize,
    /// Prefix of unnamed nodes' `#index` names (`loop/body` inside a sub-graph).
    prefix: String,
}

/// A value's constant or import-time value.
fn known(v: &Val) -> Option<&Tensor> {
    v.konst.as_deref().or(v.demand.as_ref())
}

/// RLX shape of a `ValueInfoProto` tensor type.
pub(crate) fn value_shape(vi: &ValueInfoProto, fresh: &str) -> Result<Shape> {
    let what = format!("value {:?}", vi.name());
    let tt = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(tt)) => tt,
        Some(other) => {
            let kind = match other {
                type_proto::Value::SequenceType(_) => "sequence",
                type_proto::Value::MapType(_) => "map",
                type_proto::Value::OptionalType(_) => "optional",
                _ => "non-tensor",
            };
            return Err(OnnxError::UnsupportedDtype { name: kind.into(), code: 0, what });
        }
        None => return Err(OnnxError::Invalid(format!("{what} has no type"))),
    };
    let dtype = dtype_of(tt.elem_type(), &what)?;
    let mut dims = vec![];
    if let Some(s) = &tt.shape {
        for (i, d) in s.dim.iter().enumerate() {
            use crate::proto::tensor_shape_proto::dimension::Value as D;
            dims.push(match &d.value {
                Some(D::DimValue(v)) if *v >= 0 => Dim::Static(*v as usize),
                Some(D::DimParam(p)) if !p.is_empty() => Dim::Sym(p.clone()),
                _ => Dim::Sym(format!("{fresh}{i}")),
            });
        }
    }
    Ok(Shape::from_dims(&dims, dtype))
}

/// Errors with [`OnnxError::InputShape`] when `given` contradicts the declared dims of `vi`
/// (only when the model declares a shape: a rank mismatch, or a static dim that differs).
fn check_declared(vi: &ValueInfoProto, declared: &[Dim], given: &[usize]) -> Result<()> {
    let has_shape = matches!(
        vi.r#type.as_ref().and_then(|t| t.value.as_ref()),
        Some(type_proto::Value::TensorType(tt)) if tt.shape.is_some()
    );
    if !has_shape {
        return Ok(());
    }
    let fits = declared.len() == given.len()
        && declared.iter().zip(given).all(|(d, g)| !matches!(d, Dim::Static(v) if v != g));
    if fits {
        return Ok(());
    }
    let declared = declared
        .iter()
        .map(|d| match d {
            Dim::Static(v) => v.to_string(),
            Dim::Sym(s) => s.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(OnnxError::InputShape { name: vi.name().to_string(), declared, given: given.to_vec() })
}

impl<'o> Importer<'o> {
    /// An importer for a graph at `opset`; unnamed nodes are called `{prefix}#index`.
    pub(crate) fn new(opts: &'o ImportOptions, opset: i64, prefix: String) -> Self {
        Importer { opts, opset, fold_limit: opts.fold_limit.unwrap_or(1 << 22), prefix }
    }

    fn input_shape(&self, vi: &ValueInfoProto) -> Result<Shape> {
        let mut s = value_shape(vi, &format!("{}_d", vi.name()))?;
        let known = self
            .opts
            .input_values
            .get(vi.name())
            .map(|t| t.shape().to_vec())
            .or_else(|| self.opts.input_shapes.get(vi.name()).cloned());
        if let Some(d) = known {
            check_declared(vi, &s.dims, &d)?;
            s.dims = d.into_iter().map(Dim::Static).collect();
        }
        Ok(s)
    }

    /// Import the nodes of `g` into `rg`, resolving names through `scope`.
    pub(crate) fn body(&mut self, g: &GraphProto, rg: &mut Graph, scope: &mut HashMap<String, Val>) -> Result<()> {
        for (k, n) in g.node.iter().enumerate() {
            let node_name = if n.name().is_empty() { format!("{}#{k}", self.prefix) } else { n.name().to_string() };
            let handler = ops::lookup(n.domain(), n.op_type()).ok_or_else(|| OnnxError::UnsupportedOp {
                op_type: n.op_type().to_string(),
                domain: if matches!(n.domain(), "" | "ai.onnx") { String::new() } else { format!("{}::", n.domain()) },
                node: node_name.clone(),
            })?;
            let mut ins = Vec::with_capacity(n.input.len());
            for name in &n.input {
                if name.is_empty() {
                    ins.push(None);
                } else {
                    let v = scope.get(name).ok_or_else(|| {
                        OnnxError::Invalid(format!(
                            "node {node_name} ({}) uses {name:?} before it is defined",
                            n.op_type()
                        ))
                    })?;
                    ins.push(Some(v.clone()));
                }
            }
            // Values a node's sub-graphs read from this scope count as its operands here.
            let caps: Vec<(String, Val)> =
                ops::control::free_vars(n).into_iter().filter_map(|c| scope.get(&c).map(|v| (c, v.clone()))).collect();
            let limit = self.fold_limit;
            let small = |t: &Tensor| t.numel() <= limit;
            let foldable = !ins.is_empty()
                && ins
                    .iter()
                    .flatten()
                    .chain(caps.iter().map(|(_, v)| v))
                    .all(|v| v.konst.as_deref().is_some_and(small))
                && !ops::is_random(n.op_type());
            let mut outs = None;
            if foldable {
                outs = self.fold(handler, n, &node_name, &ins, &caps, rg);
            }
            let outs = match outs {
                Some(o) => o,
                None => {
                    let mut cx =
                        Ctx { g: rg, node: n, name: &node_name, ins: &ins, opset: self.opset, opts: self.opts, scope };
                    let ids = handler(&mut cx)?;
                    if let Some(e) = rg.error() {
                        return Err(OnnxError::Node {
                            op_type: n.op_type().into(),
                            node: node_name,
                            msg: e.to_string(),
                        });
                    }
                    let mut vals: Vec<Val> = ids.into_iter().map(|id| Val::of(rg, id)).collect();
                    // Values known only through ImportOptions::input_values flow on, so an op
                    // further down (Range, Pad, Reshape) can still read them at import time.
                    if !ins.is_empty()
                        && ins.iter().flatten().chain(caps.iter().map(|(_, v)| v)).all(|v| known(v).is_some_and(small))
                        && !ops::is_random(n.op_type())
                    {
                        // Small by the check above: copies are cheap.
                        let tins: Vec<Option<Arc<Tensor>>> =
                            ins.iter().map(|v| v.as_ref().and_then(known).map(|t| Arc::new(t.clone()))).collect();
                        let tcaps: Vec<(String, Arc<Tensor>)> = caps
                            .iter()
                            .filter_map(|(c, v)| known(v).map(|t| (c.clone(), Arc::new(t.clone()))))
                            .collect();
                        if let Some(ts) = self.eval(handler, n, &node_name, &tins, &tcaps) {
                            for (v, t) in vals.iter_mut().zip(ts) {
                                if v.konst.is_none() {
                                    v.demand = Some(t);
                                }
                            }
                        }
                    }
                    vals
                }
            };
            for (name, v) in n.output.iter().zip(outs) {
                if !name.is_empty() {
                    scope.insert(name.clone(), v);
                }
            }
        }
        Ok(())
    }

    /// Evaluate a node with all-constant operands at import time; `None` when the op cannot
    /// be evaluated that way (the caller then builds it normally).
    fn fold(
        &mut self,
        handler: ops::Handler,
        n: &crate::proto::NodeProto,
        node_name: &str,
        ins: &[Option<Val>],
        caps: &[(String, Val)],
        rg: &mut Graph,
    ) -> Option<Vec<Val>> {
        let tins: Vec<Option<Arc<Tensor>>> = ins.iter().map(|v| v.as_ref().and_then(|v| v.konst.clone())).collect();
        let tcaps: Vec<(String, Arc<Tensor>)> =
            caps.iter().filter_map(|(c, v)| v.konst.as_ref().map(|t| (c.clone(), t.clone()))).collect();
        let ts = self.eval(handler, n, node_name, &tins, &tcaps)?;
        Some(
            ts.into_iter()
                .map(|t| {
                    let t = Arc::new(t);
                    Val { id: rg.constant(t.clone()), konst: Some(t), demand: None }
                })
                .collect(),
        )
    }

    /// Run one node's importer on literal operands (and literal values of the names its
    /// sub-graphs capture) and evaluate it with the reference interpreter; `None` when that
    /// fails or a result would be large.
    fn eval(
        &mut self,
        handler: ops::Handler,
        n: &crate::proto::NodeProto,
        node_name: &str,
        ins: &[Option<Arc<Tensor>>],
        caps: &[(String, Arc<Tensor>)],
    ) -> Option<Vec<Tensor>> {
        let mut tg = Graph::new("fold");
        let mut lit = |t: &Arc<Tensor>| Val { id: tg.constant(t.clone()), konst: Some(t.clone()), demand: None };
        let tins: Vec<Option<Val>> = ins.iter().map(|t| t.as_ref().map(&mut lit)).collect();
        let tscope: HashMap<String, Val> = caps.iter().map(|(c, t)| (c.clone(), lit(t))).collect();
        let ids = {
            let mut cx = Ctx {
                g: &mut tg,
                node: n,
                name: node_name,
                ins: &tins,
                opset: self.opset,
                opts: self.opts,
                scope: &tscope,
            };
            handler(&mut cx).ok()?
        };
        if tg.error().is_some() {
            return None;
        }
        // Never materialize a large (or symbolic) result at import time.
        if ids.iter().any(|&i| tg.shape(i).numel().is_none_or(|n| n > self.fold_limit)) {
            return None;
        }
        tg.set_outputs(ids);
        rlx_ir::interp::evaluate(&tg, &HashMap::new()).ok()
    }
}

//! Human-readable IR: one line per node, `%id = op[params](operands) : type`.

use crate::{Attr, Graph, Op};
use std::fmt;

fn params(op: &Op) -> String {
    match op {
        Op::Input { name } | Op::Param { name } => format!("\"{name}\""),
        Op::Constant(t) => {
            if t.numel() <= 8 {
                let v: Vec<String> = t.to_f64_vec().iter().map(|x| format!("{x}")).collect();
                if t.shape().is_empty() { v.join("") } else { format!("[{}]", v.join(", ")) }
            } else {
                format!("<{} elements>", t.numel())
            }
        }
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::StopGradient => String::new(),
        Op::ConvertElementType(d) => format!("new_dtype={d}"),
        Op::Reduce { axes, .. } => format!("axes={axes:?}"),
        Op::Composite(c) => {
            let a: Vec<String> = c.attrs.iter().map(|(k, v)| format!("{k}={}", attr(v))).collect();
            a.join(", ")
        }
        Op::Scan(s) => {
            format!(
                "length={}, num_consts={}, num_carry={}, reverse={}",
                s.length, s.num_consts, s.num_carry, s.reverse
            )
        }
        Op::While(_) | Op::Cond(_) => String::new(),
        Op::GetTupleElement { index } => format!("index={index}"),
        // Every other op prints its parameters from the serde form, so a new op is printable
        // without a hand-written case.
        other => match serde_json::to_value(other).unwrap_or_default() {
            serde_json::Value::Object(m) => m
                .values()
                .next()
                .map(|v| match v {
                    serde_json::Value::Object(f) => fields(f),
                    v => value(v),
                })
                .unwrap_or_default(),
            _ => String::new(),
        },
    }
}

fn attr(a: &Attr) -> String {
    match a {
        Attr::Int(i) => i.to_string(),
        Attr::Float(f) => format!("{f:e}"),
        Attr::Bool(b) => b.to_string(),
        Attr::Str(s) => format!("{s:?}"),
        Attr::Ints(v) => format!("{v:?}"),
        Attr::Floats(v) => format!("{v:?}"),
    }
}

fn fields(m: &serde_json::Map<String, serde_json::Value>) -> String {
    m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| format!("{k}={}", value(v))).collect::<Vec<_>>().join(", ")
}

/// Compact rendering of a serde value: dims as `4` / `?`, arrays as `[a,b]`, enum variants as
/// `Name{..}` or `Name`.
fn value(v: &serde_json::Value) -> String {
    use serde_json::Value as V;
    match v {
        V::Array(a) => format!("[{}]", a.iter().map(value).collect::<Vec<_>>().join(",")),
        V::String(s) => s.clone(),
        V::Object(m) if m.len() == 1 => {
            let (k, inner) = m.iter().next().expect("one entry");
            match (k.as_str(), inner) {
                ("Static", x) => x.to_string(),
                ("Sym", V::String(s)) => s.clone(),
                (k, V::Object(f)) => format!("{k}{{{}}}", fields(f)),
                (k, x) => format!("{k}({})", value(x)),
            }
        }
        V::Object(m) => format!("{{{}}}", fields(m)),
        other => other.to_string(),
    }
}

impl Graph {
    fn fmt_indented(&self, f: &mut fmt::Formatter<'_>, indent: usize) -> fmt::Result {
        let pad = " ".repeat(indent);
        let sig = |ids: &[crate::NodeId]| {
            ids.iter()
                .map(|&i| format!("{}: {}", self.source_name(i).unwrap_or("?"), self.shape(i)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(f, "{pad}graph {}({}) params({}) {{", self.name, sig(self.inputs()), sig(self.params()))?;
        for (i, n) in self.nodes().iter().enumerate() {
            if matches!(n.op, Op::Input { .. } | Op::Param { .. }) {
                continue;
            }
            let args: Vec<String> = n.inputs.iter().map(|x| x.to_string()).collect();
            let ty: Vec<String> = n.outputs.iter().map(|s| s.to_string()).collect();
            let p = params(&n.op);
            let p = if p.is_empty() { String::new() } else { format!("[{p}]") };
            writeln!(f, "{pad}  %{i} = {}{p}({}) : {}", n.op.name(), args.join(", "), ty.join(", "))?;
            for sub in n.op.subgraphs() {
                sub.fmt_indented(f, indent + 4)?;
            }
        }
        let outs: Vec<String> = self.outputs().iter().map(|x| x.to_string()).collect();
        writeln!(f, "{pad}  return {}", outs.join(", "))?;
        writeln!(f, "{pad}}}")
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_indented(f, 0)
    }
}

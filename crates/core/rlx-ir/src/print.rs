//! Human-readable IR: one line per node, `%id = op[params](operands) : type`.

use crate::{Graph, Op};
use std::fmt;

fn params(op: &Op) -> String {
    match op {
        Op::Input { name } | Op::Param { name } => format!("\"{name}\""),
        Op::Constant(t) => {
            if t.numel() <= 8 {
                format!("{:?}", t.to_f64_vec())
            } else {
                format!("<{} elements>", t.numel())
            }
        }
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::StopGradient => String::new(),
        Op::ConvertElementType(d) => format!("new_dtype={d}"),
        Op::Composite(c) => {
            let a: Vec<String> = c.attrs.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            a.join(", ")
        }
        Op::Scan(s) => format!(
            "length={}, num_consts={}, num_carry={}, reverse={}",
            s.length, s.num_consts, s.num_carry, s.reverse
        ),
        Op::While(_) | Op::Cond(_) => String::new(),
        other => {
            // Parameters straight from the serde form keep every op printable without a
            // hand-written case per op.
            let v = serde_json::to_value(other).unwrap_or_default();
            match v {
                serde_json::Value::Object(m) => m
                    .values()
                    .next()
                    .map(|inner| {
                        inner.to_string().trim_matches(|c| c == '{' || c == '}').replace('"', "").replace(':', "=")
                    })
                    .unwrap_or_default(),
                _ => String::new(),
            }
        }
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
            let idx = match n.op {
                Op::GetTupleElement { index } => format!("[{index}]"),
                _ => String::new(),
            };
            writeln!(f, "{pad}  %{i} = {}{p}{idx}({}) : {}", n.op.name(), args.join(", "), ty.join(", "))?;
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

//! The dispatch report: per op kind and composite name, whether a backend runs it natively,
//! decomposes it into primitives, or cannot run it.

use rlx_ir::{Graph, Op};
use std::collections::BTreeMap;
use std::fmt;

/// How a backend handles one op kind or composite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dispatch {
    /// A kernel of the backend runs it.
    Native,
    /// A composite whose body (primitives) runs instead.
    Decomposed,
    /// Nothing can run it (an unregistered custom op).
    Missing,
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dispatch::Native => "native",
            Dispatch::Decomposed => "decomposed",
            Dispatch::Missing => "missing",
        })
    }
}

/// One row of a [`DispatchReport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchEntry {
    /// Op name (`add`, `dot_general`, …) or `composite:NAME`.
    pub kind: String,
    /// Nodes of this kind in the graph (sub-graphs included).
    pub count: usize,
    /// How the backend runs it.
    pub dispatch: Dispatch,
}

/// Per op kind and composite name: native, decomposed or missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Rows sorted by kind.
    pub entries: Vec<DispatchEntry>,
}

impl DispatchReport {
    /// Build the report for `g` as given to the compiler (composites not yet inlined):
    /// `native_composite(name)` says whether the backend has a kernel for a composite; the
    /// primitives inside a decomposed composite are counted too. Every primitive is native
    /// (every backend runs every primitive, by kernel or reference evaluation) except custom
    /// ops with no registered implementation, which are missing.
    pub fn new(g: &Graph, native_composite: &dyn Fn(&str) -> bool) -> DispatchReport {
        let mut rows: BTreeMap<String, (usize, Dispatch)> = BTreeMap::new();
        walk(g, native_composite, &mut rows);
        DispatchReport {
            entries: rows
                .into_iter()
                .map(|(kind, (count, dispatch))| DispatchEntry { kind, count, dispatch })
                .collect(),
        }
    }

    /// True when some kind is missing.
    pub fn has_missing(&self) -> bool {
        self.entries.iter().any(|e| e.dispatch == Dispatch::Missing)
    }

    /// The report as one JSON array of `{"kind","count","dispatch"}` objects.
    pub fn to_json(&self) -> String {
        let rows: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{{\"kind\":{:?},\"count\":{},\"dispatch\":\"{}\"}}", e.kind, e.count, e.dispatch))
            .collect();
        format!("[{}]", rows.join(","))
    }
}

fn walk(g: &Graph, native: &dyn Fn(&str) -> bool, rows: &mut BTreeMap<String, (usize, Dispatch)>) {
    for n in g.nodes() {
        let (kind, d) = match &n.op {
            Op::Input { .. } | Op::Param { .. } | Op::GetTupleElement { .. } => continue,
            Op::Composite(c) if native(&c.name) => (format!("composite:{}", c.name), Dispatch::Native),
            Op::Composite(c) => {
                walk(&c.body, native, rows);
                (format!("composite:{}", c.name), Dispatch::Decomposed)
            }
            Op::Custom { name, .. } if rlx_ir::ops::custom::lookup_op(name).is_none() => {
                (format!("custom:{name}"), Dispatch::Missing)
            }
            op => {
                for b in op.subgraphs() {
                    walk(b, native, rows);
                }
                (op.name(), Dispatch::Native)
            }
        };
        let row = rows.entry(kind).or_insert((0, d));
        row.0 += 1;
    }
}

impl fmt::Display for DispatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.entries {
            writeln!(f, "{:<32} {:>5}  {}", e.kind, e.count, e.dispatch)?;
        }
        Ok(())
    }
}

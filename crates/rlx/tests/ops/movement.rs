//! Records of the movement family and the builders layered on it (`broadcast_to`,
//! `slice_in_dim`, `take`, `expand_dims`, `squeeze`). Values only move, so all are `Exact`,
//! except `scatter_add`, which adds (duplicates accumulate in any order).

use crate::Rec;
use crate::common::{Args, Tol};
use rlx_ir::Shape;
use rlx_ir::ops::{GatherDims, GatherMode, ScatterDims};

fn mode(a: &Args) -> GatherMode {
    match a.str("mode") {
        "clip" => GatherMode::Clip,
        _ => GatherMode::FillOrDrop,
    }
}

pub fn records() -> Vec<Rec> {
    vec![
        Rec::new("iota", Tol::Exact, |g, _, a| {
            vec![g.iota(Shape::new(&a.usizes("shape"), a.dtype("dtype")), a.usize("dimension"))]
        }),
        Rec::new("broadcast_in_dim", Tol::Exact, |g, x, a| {
            vec![g.broadcast_in_dim(x[0], a.usizes("shape"), &a.usizes("dims"))]
        }),
        Rec::new("broadcast_to", Tol::Exact, |g, x, a| vec![g.broadcast_to(x[0], a.usizes("shape"))]),
        Rec::new("reshape", Tol::Exact, |g, x, a| vec![g.reshape(x[0], a.usizes("new_sizes"))]),
        Rec::new("expand_dims", Tol::Exact, |g, x, a| vec![g.expand_dims(x[0], a.i64("axis"))]),
        Rec::new("squeeze", Tol::Exact, |g, x, a| vec![g.squeeze(x[0], &a.i64s("axes"))]),
        Rec::new("transpose", Tol::Exact, |g, x, a| vec![g.transpose(x[0], &a.usizes("permutation"))]),
        Rec::new("rev", Tol::Exact, |g, x, a| vec![g.rev(x[0], &a.usizes("dimensions"))]),
        Rec::new("slice", Tol::Exact, |g, x, a| {
            vec![g.slice(x[0], &a.usizes("start"), &a.usizes("limit"), &a.usizes("strides"))]
        }),
        Rec::new("slice_in_dim", Tol::Exact, |g, x, a| {
            vec![g.slice_in_dim(x[0], a.usize("start"), a.usize("limit"), a.i64("axis"))]
        }),
        Rec::new("dynamic_slice", Tol::Exact, |g, x, a| vec![g.dynamic_slice(x[0], &x[1..], &a.usizes("sizes"))]),
        Rec::new("dynamic_update_slice", Tol::Exact, |g, x, _| vec![g.dynamic_update_slice(x[0], x[1], &x[2..])]),
        Rec::new("concatenate", Tol::Exact, |g, x, a| vec![g.concatenate(x, a.i64("axis"))]),
        Rec::new("pad", Tol::Exact, |g, x, a| {
            vec![g.pad(x[0], x[1], &a.i64s("low"), &a.i64s("high"), &a.usizes("interior"))]
        }),
        Rec::new("gather", Tol::Exact, |g, x, a| {
            let dims = GatherDims {
                offset_dims: a.usizes("offset_dims"),
                collapsed_slice_dims: a.usizes("collapsed_slice_dims"),
                start_index_map: a.usizes("start_index_map"),
            };
            vec![g.gather(x[0], x[1], dims, &a.usizes("slice_sizes"), mode(a))]
        }),
        Rec::new("take", Tol::Exact, |g, x, a| vec![g.take(x[0], x[1], a.i64("axis"))]),
        Rec::new("scatter_add", Tol::Close, |g, x, a| {
            let dims = ScatterDims {
                update_window_dims: a.usizes("update_window_dims"),
                inserted_window_dims: a.usizes("inserted_window_dims"),
                scatter_dims_to_operand_dims: a.usizes("scatter_dims_to_operand_dims"),
            };
            vec![g.scatter_add(x[0], x[1], x[2], dims, mode(a))]
        }),
    ]
}

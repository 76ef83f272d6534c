"""Movement family (iota, broadcast_in_dim, reshape, transpose, rev, slice, dynamic_slice,
dynamic_update_slice, concatenate, pad, gather, scatter_add) and the builders layered on it
(broadcast_to, slice_in_dim, take, expand_dims, squeeze).

References: `jax.lax` for everything with clamping or out-of-bounds rules (dynamic_slice,
dynamic_update_slice, pad, gather, scatter_add); numpy indexing for the rest. Values pass
through unchanged, so every case is exact.
"""

import numpy as np
import jax.numpy as jnp
from jax import lax

from .common import ALL, FLOATS, INF, NAN, arr, f64, random, rnd, rng_for, transposed


def _lax(fn, *xs, **kw):
    return np.asarray(fn(*[jnp.asarray(x) for x in xs], **kw))


def iota(reg):
    for dt, shape, dim in (("i32", [3, 4], 1), ("f32", [2, 3], 0), ("i64", [0, 3], 1), ("u8", [5], 0),
                           ("bf16", [4, 2], 1), ("f64", [2, 1, 3], 2)):
        y = np.broadcast_to(np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))]),
                            shape)
        y = arr(y.astype(np.float64), dt) if dt in FLOATS else y.astype(np.int64).astype(arr([0], dt).dtype)
        reg.add(f"iota_{dt}_dim{dim}", "iota", [], [np.ascontiguousarray(y)],
                args={"shape": shape, "dtype": dt, "dimension": dim}, ref="numpy.arange (lax.broadcasted_iota)")


def broadcast(reg):
    cases = [("f32", [3], [2, 3], [1]), ("i8", [], [2, 2], []), ("bool", [2, 1], [2, 0], [0, 1]),
             ("bf16", [2, 1, 3], [4, 2, 5, 3], [1, 2, 3]), ("f64", [3, 1], [3, 4], [0, 1]),
             ("u32", [1], [3], [0])]
    for dt, src, shape, dims in cases:
        x = random(rng_for(f"bid_{dt}"), dt, src)
        expand = [1] * len(shape)
        for i, d in enumerate(dims):
            expand[d] = src[i]
        y = np.ascontiguousarray(np.broadcast_to(x.reshape(expand), shape))
        reg.add(f"broadcast_in_dim_{dt}", "broadcast_in_dim", [x], [y], args={"shape": shape, "dims": dims})
    x = random(rng_for("broadcast_to_f32"), "f32", (3, 1))
    reg.add("broadcast_to_f32", "broadcast_to", [x], [np.ascontiguousarray(np.broadcast_to(x, (2, 3, 4)))],
            args={"shape": [2, 3, 4]}, ref="numpy.broadcast_to")


def reshape(reg):
    for dt, src, new in (("f32", [2, 3, 4], [6, 4]), ("i64", [6], [1, 2, 3, 1]), ("f16", [0, 3], [3, 0]),
                         ("bool", [], [1, 1]), ("bf16", [4, 1], [2, 2])):
        x = random(rng_for(f"reshape_{dt}"), dt, src)
        reg.add(f"reshape_{dt}", "reshape", [x], [x.reshape(new)], args={"new_sizes": new})
    x = random(rng_for("reshape_f32_transposed"), "f32", (3, 4))
    s, pre = transposed(x, [1, 0])
    reg.add("reshape_f32_transposed", "reshape", [s], [x.reshape(2, 6)], args={"new_sizes": [2, 6]}, pre=[pre])
    x = random(rng_for("expand_dims"), "i32", (2, 3))
    reg.add("expand_dims_i32", "expand_dims", [x], [x[:, :, None]], args={"axis": -1}, ref="numpy.expand_dims")
    x = random(rng_for("squeeze"), "f32", (1, 3, 1))
    reg.add("squeeze_f32_neg_axis", "squeeze", [x], [x[:, :, 0]], args={"axes": [-1]}, ref="numpy.squeeze")
    reg.add("squeeze_f32_all", "squeeze", [x], [x.reshape(3)], args={"axes": []}, ref="numpy.squeeze")


def transpose(reg):
    for dt, src, perm in (("f32", [2, 3, 4], [2, 0, 1]), ("bool", [2, 3], [1, 0]), ("i16", [1, 2, 3], [1, 0, 2]),
                          ("f64", [0, 2], [1, 0]), ("bf16", [2, 3], [0, 1])):
        x = random(rng_for(f"transpose_{dt}"), dt, src)
        reg.add(f"transpose_{dt}", "transpose", [x], [np.ascontiguousarray(np.transpose(x, perm))],
                args={"permutation": perm})


def rev(reg):
    for dt, src, dims in (("f32", [2, 3], [1]), ("i32", [2, 3, 4], [0, 2]), ("u8", [4], []), ("f16", [0, 3], [0])):
        x = random(rng_for(f"rev_{dt}"), dt, src)
        reg.add(f"rev_{dt}", "rev", [x], [np.ascontiguousarray(np.flip(x, dims) if dims else x)],
                args={"dimensions": dims}, ref="numpy.flip")


def slicing(reg):
    for dt, src, st, lim, strd in (("f32", [5, 6], [1, 0], [4, 6], [2, 3]), ("i32", [4], [2], [2], [1]),
                                   ("bf16", [3, 4], [0, 0], [3, 4], [1, 1]), ("f64", [7], [1], [7], [4])):
        x = random(rng_for(f"slice_{dt}"), dt, src)
        y = x[tuple(slice(a, b, c) for a, b, c in zip(st, lim, strd))]
        reg.add(f"slice_{dt}", "slice", [x], [np.ascontiguousarray(y)],
                args={"start": st, "limit": lim, "strides": strd}, ref="numpy basic indexing")
    x = random(rng_for("slice_in_dim"), "f32", (3, 5))
    reg.add("slice_in_dim_f32_neg_axis", "slice_in_dim", [x], [np.ascontiguousarray(x[:, 1:4])],
            args={"start": 1, "limit": 4, "axis": -1}, ref="numpy basic indexing")
    x = random(rng_for("slice_f32_transposed"), "f32", (4, 5))
    s, pre = transposed(x, [1, 0])
    reg.add("slice_f32_transposed", "slice", [s], [np.ascontiguousarray(x[1:3, ::2])],
            args={"start": [1, 0], "limit": [3, 5], "strides": [1, 2]}, pre=[pre])


def dynamic(reg):
    # Starts are graph inputs (integer scalars); out-of-range starts are clamped by lax.
    for name, dt, sdt, src, starts, sizes in (
            ("dynamic_slice_f32", "f32", "i32", [5, 6], [1, 4], [2, 3]),
            ("dynamic_slice_i64_negative_start", "i64", "i64", [4, 3], [-2, 1], [2, 2]),
            ("dynamic_slice_bool_size0", "bool", "u8", [3, 2], [1, 0], [0, 2])):
        x = random(rng_for(name), dt, src)
        s = [arr(v, sdt) for v in starts]
        y = _lax(lambda x, *st: lax.dynamic_slice(x, st, sizes), x, *s)
        reg.add(name, "dynamic_slice", [x] + s, [y], args={"sizes": sizes}, ref="jax.lax.dynamic_slice")
    for name, dt, src, usrc, starts in (("dynamic_update_slice_f32", "f32", [4, 5], [2, 2], [1, 4]),
                                        ("dynamic_update_slice_i8", "i8", [3], [2], [-1]),
                                        ("dynamic_update_slice_bf16", "bf16", [2, 3], [2, 3], [5, 5])):
        x = random(rng_for(name), dt, src)
        u = random(rng_for(name + "u"), dt, usrc)
        s = [arr(v, "i32") for v in starts]
        y = _lax(lambda x, u, *st: lax.dynamic_update_slice(x, u, st), x, u, *s)
        reg.add(name, "dynamic_update_slice", [x, u] + s, [y], ref="jax.lax.dynamic_update_slice")


def concatenate(reg):
    for dt, shapes, axis in (("f32", [[2, 3], [2, 1], [2, 2]], -1), ("i8", [[0, 2], [3, 2]], 0),
                             ("bool", [[2, 1], [2, 2]], 1), ("f16", [[1], [2]], 0)):
        xs = [random(rng_for(f"concat_{dt}{k}"), dt, s) for k, s in enumerate(shapes)]
        reg.add(f"concatenate_{dt}", "concatenate", xs, [np.concatenate(xs, axis=axis)], args={"axis": axis},
                ref="numpy.concatenate")


def pad(reg):
    for dt, src, low, high, interior, val in (("f32", [3, 4], [1, -1], [2, 0], [1, 0], NAN),
                                              ("i32", [3], [0], [1], [2], -7), ("f64", [0, 2], [1, 0], [1, 1], [0, 3], INF),
                                              ("bf16", [2, 2], [-1, 1], [-1, 0], [1, 1], 0.5), ("bool", [2], [1], [1], [1], 1)):
        x = random(rng_for(f"pad_{dt}"), dt, src)
        v = arr(val, dt)
        cfg = list(zip(low, high, interior))
        y = _lax(lambda x, v: lax.pad(x, v, cfg), x, v)
        reg.add(f"pad_{dt}", "pad", [x, v], [y], args={"low": low, "high": high, "interior": interior},
                ref="jax.lax.pad")


def _gather(x, idx, a):
    dn = lax.GatherDimensionNumbers(offset_dims=tuple(a["offset_dims"]),
                                    collapsed_slice_dims=tuple(a["collapsed_slice_dims"]),
                                    start_index_map=tuple(a["start_index_map"]))
    mode = lax.GatherScatterMode.CLIP if a["mode"] == "clip" else lax.GatherScatterMode.FILL_OR_DROP
    return _lax(lambda x, i: lax.gather(x, i, dn, tuple(a["slice_sizes"]), mode=mode, fill_value=0), x, idx)


def gather(reg):
    rows = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "slice_sizes": [1, 3]}
    for mode in ("clip", "fill"):
        for dt in ("f32", "i32", "bf16"):
            name = f"gather_rows_{dt}_{mode}"
            x = random(rng_for(name), dt, (5, 3))
            idx = arr([[0], [4], [2], [7], [-1]], "i32")
            a = dict(rows, mode=mode)
            reg.add(name, "gather", [x, idx], [_gather(x, idx, a)], args=a, ref="jax.lax.gather (fill_value=0)")
    a = {"offset_dims": [1, 2], "collapsed_slice_dims": [], "start_index_map": [0, 1], "slice_sizes": [2, 2],
         "mode": "clip"}
    x = random(rng_for("gather_2d"), "f64", (4, 5))
    idx = arr([[0, 0], [3, 4], [1, 2]], "i64")
    reg.add("gather_window_2d_f64", "gather", [x, idx], [_gather(x, idx, a)], args=a, ref="jax.lax.gather")
    a = {"offset_dims": [2], "collapsed_slice_dims": [1], "start_index_map": [1], "slice_sizes": [3, 1],
         "mode": "fill"}
    x = random(rng_for("gather_cols"), "u8", (3, 4))
    idx = arr([[[0], [3]], [[5], [1]]], "i32")
    reg.add("gather_cols_u8_fill", "gather", [x, idx], [_gather(x, idx, a)], args=a, ref="jax.lax.gather")
    a = dict(rows, mode="clip")
    x = random(rng_for("gather_size0"), "f32", (5, 3))
    idx = np.zeros((0, 1), np.int32)
    reg.add("gather_rows_f32_size0", "gather", [x, idx], [_gather(x, idx, a)], args=a, ref="jax.lax.gather")
    x = random(rng_for("take"), "f32", (4, 3))
    idx = arr([[0, 3], [5, -1]], "i32")
    reg.add("take_f32_axis0_clamped", "take", [x, idx], [np.take(x, idx, axis=0, mode="clip")], args={"axis": 0},
            ref="numpy.take(mode='clip')")
    reg.add("take_f32_neg_axis", "take", [x, arr([2, 0], "i64")], [np.take(x, [2, 0], axis=-1)], args={"axis": -1},
            ref="numpy.take")


def _scatter(x, idx, u, a):
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(a["update_window_dims"]),
                                     inserted_window_dims=tuple(a["inserted_window_dims"]),
                                     scatter_dims_to_operand_dims=tuple(a["scatter_dims_to_operand_dims"]))
    mode = lax.GatherScatterMode.CLIP if a["mode"] == "clip" else lax.GatherScatterMode.FILL_OR_DROP
    return _lax(lambda x, i, u: lax.scatter_add(x, i, u, dn, mode=mode), x, idx, u)


def scatter_add(reg):
    rows = {"update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0]}
    for mode in ("clip", "fill"):
        for dt in ("f32", "i32", "f64"):
            name = f"scatter_add_rows_{dt}_{mode}"
            x = random(rng_for(name), dt, (5, 3))
            idx = arr([[1], [3], [1], [0], [7], [-1]], "i32")
            u = random(rng_for(name + "u"), dt, (6, 3))
            a = dict(rows, mode=mode)
            ref = "jax.lax.scatter_add (float64, rounded once)"
            if dt in FLOATS:
                y = rnd(_scatter(f64(x), idx, f64(u), a), dt)
            else:
                y = _scatter(x, idx, u, a)
            reg.add(name, "scatter_add", [x, idx, u], [y], args=a, ref=ref)
    a = {"update_window_dims": [1, 2], "inserted_window_dims": [], "scatter_dims_to_operand_dims": [0, 1],
         "mode": "clip"}
    x = random(rng_for("scatter_2d"), "i64", (4, 4))
    idx = arr([[0, 0], [3, 3], [1, 1]], "i32")
    u = random(rng_for("scatter_2du"), "i64", (3, 2, 2))
    reg.add("scatter_add_window_2d_i64", "scatter_add", [x, idx, u], [_scatter(x, idx, u, a)], args=a,
            ref="jax.lax.scatter_add")
    x = random(rng_for("scatter_bf16"), "bf16", (4, 2))
    idx = arr([[2], [2]], "i32")
    u = random(rng_for("scatter_bf16u"), "bf16", (2, 2))
    a = dict(rows, mode="clip")
    reg.add("scatter_add_rows_bf16_dup", "scatter_add", [x, idx, u], [rnd(_scatter(f64(x), idx, f64(u), a), "bf16")],
            args=a, ref="jax.lax.scatter_add (float64, rounded once)")


def build_cases(reg):
    iota(reg)
    broadcast(reg)
    reshape(reg)
    transpose(reg)
    rev(reg)
    slicing(reg)
    dynamic(reg)
    concatenate(reg)
    pad(reg)
    gather(reg)
    scatter_add(reg)


def sweep(reg):
    """One small case per dtype for every movement op (values only move, so every dtype the op
    accepts is worth one case)."""
    for dt in ALL:
        rng = rng_for(f"movement_sweep_{dt}")
        x = random(rng, dt, (2, 3))
        if dt in FLOATS:
            x = x.copy()
            x[0, 1] = NAN
        n = f"_dtype_{dt}"
        reg.add("transpose" + n, "transpose", [x], [np.ascontiguousarray(x.T)], args={"permutation": [1, 0]})
        reg.add("reshape" + n, "reshape", [x], [x.reshape(3, 2)], args={"new_sizes": [3, 2]})
        reg.add("broadcast_in_dim" + n, "broadcast_in_dim", [x], [np.ascontiguousarray(np.broadcast_to(x, (2, 2, 3)))],
                args={"shape": [2, 2, 3], "dims": [1, 2]})
        reg.add("rev" + n, "rev", [x], [np.ascontiguousarray(x[::-1, ::-1])], args={"dimensions": [0, 1]})
        reg.add("slice" + n, "slice", [x], [np.ascontiguousarray(x[0:2, 1:3:2])],
                args={"start": [0, 1], "limit": [2, 3], "strides": [1, 2]})
        reg.add("concatenate" + n, "concatenate", [x, x[:1]], [np.concatenate([x, x[:1]], 0)], args={"axis": 0})
        v = random(rng, dt, ())
        cfg = [(1, 0, 0), (0, 1, 1)]
        reg.add("pad" + n, "pad", [x, v], [_lax(lambda x, v: lax.pad(x, v, cfg), x, v)],
                args={"low": [1, 0], "high": [0, 1], "interior": [0, 1]}, ref="jax.lax.pad")
        a = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "slice_sizes": [1, 3],
             "mode": "clip"}
        idx = arr([[1], [0], [1]], "i32")
        reg.add("gather" + n, "gather", [x, idx], [_gather(x, idx, a)], args=a, ref="jax.lax.gather")
        s = [arr(1, "i32"), arr(1, "i32")]
        reg.add("dynamic_slice" + n, "dynamic_slice", [x] + s, [np.ascontiguousarray(x[1:2, 1:3])],
                args={"sizes": [1, 2]}, ref="jax.lax.dynamic_slice")
        u = random(rng, dt, (1, 2))
        y = x.copy()
        y[1:2, 1:3] = u
        reg.add("dynamic_update_slice" + n, "dynamic_update_slice", [x, u] + s, [y], ref="jax.lax.dynamic_update_slice")
        if dt != "bool":
            a = {"update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
                 "mode": "clip"}
            idx = arr([[1], [1]], "i32")
            u = random(rng, dt, (2, 3))
            if dt in FLOATS:
                y = rnd(_scatter(f64(x), idx, f64(u), a), dt)
            else:
                y = _scatter(x.astype(np.int64), idx, u.astype(np.int64), a).astype(x.dtype)
            reg.add("scatter_add" + n, "scatter_add", [x, idx, u], [y], args=a, ref="jax.lax.scatter_add")
            y = np.broadcast_to(np.arange(3), (2, 3))
            y = rnd(y.astype(np.float64), dt) if dt in FLOATS else y.astype(x.dtype)
            reg.add("iota" + n, "iota", [], [np.ascontiguousarray(y)],
                    args={"shape": [2, 3], "dtype": dt, "dimension": 1})


def build(reg):
    build_cases(reg)
    sweep(reg)

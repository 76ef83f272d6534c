"""Reduction family (reduce_*, mean, argmax/argmin, cumulative, reduce_window) and contraction
family (dot_general, mm, matmul, conv_general_dilated).

Floats are computed in float64 (numpy, or `jax.lax` with x64 for reduce_window, dot_general and
conv_general_dilated) and rounded once; integers in int64 and wrapped to the case dtype, which
equals wrapping arithmetic in that dtype.
"""

import numpy as np
import jax.numpy as jnp
from jax import lax

from .common import ALL, DT, FLOATS, INF, INTS, NAN, arr, f64, random, rnd, rng_for, transposed

ACCEPTS = {
    "sum": FLOATS + INTS, "prod": FLOATS + INTS, "max": FLOATS + INTS + ["bool"], "min": FLOATS + INTS + ["bool"],
    "and": INTS + ["bool"], "or": INTS + ["bool"],
}


def _identity(op, dt):
    if dt == "bool":
        return {"max": False, "min": True, "and": True, "or": False}[op]
    if dt in FLOATS:
        return {"sum": 0.0, "prod": 1.0, "max": -INF, "min": INF}[op]
    info = np.iinfo(DT[dt])
    return {"sum": 0, "prod": 1, "max": int(info.min), "min": int(info.max), "and": -1, "or": 0}[op]


def reduce_ref(op, x, axes, keepdims):
    dt = next(k for k, v in DT.items() if v == x.dtype)
    ax = tuple(a % x.ndim for a in axes)
    if dt == "bool":
        f = {"max": np.logical_or, "min": np.logical_and, "and": np.logical_and, "or": np.logical_or}[op]
        return f.reduce(x, axis=ax, keepdims=keepdims, initial=_identity(op, dt))
    if dt in FLOATS:
        f = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
        return rnd(f.reduce(f64(x), axis=ax, keepdims=keepdims, initial=_identity(op, dt)), dt)
    f = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
         "or": np.bitwise_or}[op]
    init = _identity(op, dt)
    if op in ("max", "min"):
        return f.reduce(x, axis=ax, keepdims=keepdims, initial=init)
    # sum / prod / and / or in int64, then wrapped (equal to wrapping in the dtype).
    return f.reduce(x.astype(np.int64), axis=ax, keepdims=keepdims, initial=np.int64(init)).astype(DT[dt])


def reduce(reg):
    for op, dts in ACCEPTS.items():
        for dt in dts:
            name = f"reduce_{op}_{dt}"
            rng = rng_for(name)
            x = random(rng, dt, (2, 3, 4), scale=2.0)
            if dt in FLOATS:
                x = x.copy()
                x[1, 0, 1], x[1, 1, 2], x[1, 2, 0] = arr([NAN, INF, -INF], dt)
                x[0, 2, :] = arr([1e30, -1e30, 1e-30, 3.0], dt)
            reg.add(name, f"reduce_{op}", [x], [reduce_ref(op, x, [-1], False)],
                    args={"axes": [-1], "keepdims": False}, ref=f"numpy.{op} reduce (float64, rounded once)")
    for op, dt, shape, axes, keep in (("sum", "f32", (2, 3, 4), [0, 2], False), ("sum", "f32", (2, 3, 4), [], False),
                                      ("sum", "i32", (2, 3, 4), [2, 0, 1], False),
                                      ("max", "f32", (2, 0, 3), [1], False), ("min", "i8", (2, 0, 3), [-2], True),
                                      ("prod", "f64", (0, 2), [0], False), ("sum", "f16", (3, 1, 2), [1], True),
                                      ("and", "u32", (0,), [0], False), ("or", "bool", (2, 0), [1], False),
                                      ("max", "bf16", (1, 5), [0, 1], True)):
        name = f"reduce_{op}_{dt}_axes{'_'.join(str(a) for a in axes) or 'none'}{'_keep' if keep else ''}"
        name += "_size0" if 0 in shape else ""
        x = random(rng_for(name), dt, shape)
        reg.add(name, f"reduce_{op}", [x], [reduce_ref(op, x, axes, keep)], args={"axes": axes, "keepdims": keep},
                ref=f"numpy.{op} reduce (float64, rounded once)")
    x = random(rng_for("reduce_sum_transposed"), "f32", (3, 4))
    s, pre = transposed(x, [1, 0])
    reg.add("reduce_sum_f32_transposed", "reduce_sum", [s], [reduce_ref("sum", x, [1], False)],
            args={"axes": [1], "keepdims": False}, pre=[pre])
    for dt, shape, axes in (("f32", (2, 3), [-1]), ("f64", (2, 3, 2), [0, 2]), ("bf16", (4,), [0]),
                            ("f32", (2, 0), [1])):
        x = random(rng_for(f"mean_{dt}{shape}"), dt, shape)
        with np.errstate(all="ignore"):
            y = rnd(np.mean(f64(x), axis=tuple(axes)), dt)
        reg.add(f"mean_{dt}_{'x'.join(map(str, shape))}", "mean", [x], [y], args={"axes": axes, "keepdims": False},
                ref="numpy.mean (float64, rounded once; size 0 gives NaN)")


def arg_reduce(reg):
    for fn in ("argmax", "argmin"):
        for dt, vals, shape, axis, idt in (
                ("f32", [1.0, 3.0, 3.0, -INF, NAN, 2.0, NAN, 9.0, -0.0, 0.0, -1.0, -1.0], (3, 4), -1, "i32"),
                ("i8", [5, -128, 127, 127, 0, -128], (3, 2), 0, "i64"), ("bool", [0, 1, 1, 0, 0, 0], (2, 3), 1, "u8"),
                ("bf16", [0.5, 0.25, 0.5, INF], (4,), 0, "i32"), ("f64", [1.0, 2.0], (2, 1), 1, "i16"),
                ("u32", [4294967295, 0, 7], (3,), 0, "u32")):
            x = arr(vals, dt, shape)
            y = getattr(np, fn)(x, axis=axis).astype(DT[idt])
            reg.add(f"{fn}_{dt}", fn, [x], [y], args={"axis": axis, "index_dtype": idt},
                    ref=f"numpy.{fn} (first extreme; NaN wins)")


def cumulative(reg):
    fns = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum, "cummin": np.minimum}
    for op, f in fns.items():
        dts = ["f32", "f64", "bf16", "i32", "u8"] + (["bool"] if op in ("cummax", "cummin") else [])
        for dt in dts:
            for axis, rev in ((-1, False), (0, True)):
                name = f"{op}_{dt}_axis{axis}{'_reverse' if rev else ''}"
                x = random(rng_for(name), dt, (3, 4))
                if dt in FLOATS and not rev:
                    x = x.copy()
                    x[1, 1], x[2, 2] = arr([NAN, INF], dt)
                ax = axis % 2
                v = np.flip(x, ax) if rev else x
                if dt in FLOATS:
                    y = rnd(f.accumulate(f64(v), axis=ax), dt)
                elif dt == "bool":
                    y = f.accumulate(v, axis=ax)
                else:
                    y = f.accumulate(v.astype(np.int64), axis=ax).astype(DT[dt])
                y = np.ascontiguousarray(np.flip(y, ax) if rev else y)
                reg.add(name, op, [x], [y], args={"axis": axis, "reverse": rev},
                        ref=f"numpy.{f.__name__}.accumulate (float64, rounded per element)")


def _reduce_window(op, x, a):
    dt = next(k for k, v in DT.items() if v == x.dtype)
    comp = {"sum": lax.add, "max": lax.max, "min": lax.min}[op]
    if dt in FLOATS:
        xv, init = jnp.asarray(f64(x)), _identity(op, dt)
    else:
        xv, init = jnp.asarray(x.astype(np.int64)), np.int64(_identity(op, dt) if op == "sum" else
                                                                ({"max": np.iinfo(np.int64).min,
                                                                  "min": np.iinfo(np.int64).max}[op]))
    y = np.asarray(lax.reduce_window(xv, init, comp, tuple(a["window"]), tuple(a["strides"]),
                                     [tuple(p) for p in a["padding"]], tuple(a["base_dilation"]),
                                     tuple(a["window_dilation"])))
    if dt in FLOATS:
        return rnd(y, dt)
    # Padding reads the op's identity in the case dtype, not int64's.
    info = np.iinfo(DT[dt])
    y = np.where(y == np.iinfo(np.int64).min, info.min, np.where(y == np.iinfo(np.int64).max, info.max, y))
    return y.astype(DT[dt])


def reduce_window(reg):
    cases = [
        ("sum", "f32", (1, 1, 5, 5), [1, 1, 3, 3], [1, 1, 2, 2], [[0, 0], [0, 0], [1, 1], [1, 1]], None, None),
        ("max", "f32", (2, 6), [1, 3], [1, 1], [[0, 0], [1, 0]], None, None),
        ("min", "i32", (7,), [2], [3], [[-1, 2]], None, None),
        ("sum", "f64", (5,), [2], [1], [[0, 0]], [2], [2]),
        ("max", "bf16", (0, 4), [1, 2], [1, 1], [[0, 0], [0, 0]], None, None),
        ("max", "u8", (4, 4), [2, 2], [2, 2], [[0, 0], [0, 0]], None, None),
        ("min", "f16", (3, 3), [2, 2], [1, 1], [[1, 1], [0, 1]], [1, 2], None),
        ("sum", "i8", (2, 5), [1, 2], [1, 2], [[0, 0], [1, 1]], None, None),
    ]
    for op, dt, shape, win, strd, padding, bd, wd in cases:
        name = f"reduce_window_{op}_{dt}_{'x'.join(map(str, shape))}"
        x = random(rng_for(name), dt, shape, scale=3.0)
        if dt == "f32" and op == "max":
            x = x.copy()
            x[0, 2] = NAN
        a = {"window": win, "strides": strd, "padding": padding, "base_dilation": bd or [1] * len(shape),
             "window_dilation": wd or [1] * len(shape)}
        reg.add(name, f"reduce_window_{op}", [x], [_reduce_window(op, x, a)], args=a,
                ref="jax.lax.reduce_window (float64 / int64, identity init)")


def _dot(x, y, a):
    dn = ((tuple(a["lhs_contracting"]), tuple(a["rhs_contracting"])), (tuple(a["lhs_batch"]), tuple(a["rhs_batch"])))
    dt = next(k for k, v in DT.items() if v == x.dtype)
    out = a.get("preferred") or dt
    if dt in FLOATS:
        r = np.asarray(lax.dot_general(jnp.asarray(f64(x)), jnp.asarray(f64(y)), dn, precision=lax.Precision.HIGHEST))
        return rnd(r, out)
    r = np.asarray(lax.dot_general(jnp.asarray(x.astype(np.int64)), jnp.asarray(y.astype(np.int64)), dn))
    return rnd(r.astype(np.float64), out) if out in FLOATS else r.astype(DT[out])


def dot_general(reg):
    mat = {"lhs_contracting": [1], "rhs_contracting": [0], "lhs_batch": [], "rhs_batch": []}
    cases = [
        ("matmul_f32", "f32", (3, 4), (4, 5), mat),
        ("batch_f32", "f32", (2, 3, 4), (2, 4, 5),
         {"lhs_contracting": [2], "rhs_contracting": [1], "lhs_batch": [0], "rhs_batch": [0]}),
        ("lhs_dim0_f64", "f64", (4, 3), (4, 5), {"lhs_contracting": [0], "rhs_contracting": [0], "lhs_batch": [],
                                                 "rhs_batch": []}),
        ("two_contracting_f16", "f16", (2, 3, 4), (3, 4, 2),
         {"lhs_contracting": [1, 2], "rhs_contracting": [0, 1], "lhs_batch": [], "rhs_batch": []}),
        ("bf16_to_f32", "bf16", (3, 8), (8, 2), dict(mat, preferred="f32")),
        ("i8_to_i32", "i8", (2, 16), (16, 3), dict(mat, preferred="i32")),
        ("i32_wraps", "i32", (2, 3), (3, 2), mat),
        ("u8_wraps", "u8", (2, 5), (5, 2), mat),
        ("i64", "i64", (2, 3), (3, 2), mat),
        ("k0_f32", "f32", (2, 0), (0, 3), mat),
        ("outer_f32", "f32", (3,), (2,), {"lhs_contracting": [], "rhs_contracting": [], "lhs_batch": [],
                                         "rhs_batch": []}),
        ("batch_not_leading_f32", "f32", (2, 3, 4), (4, 2, 5),
         {"lhs_contracting": [2], "rhs_contracting": [0], "lhs_batch": [0], "rhs_batch": [1]}),
        ("nan_inf_f32", "f32", (2, 3), (3, 2), mat),
    ]
    for name, dt, sa, sb, a in cases:
        name = f"dot_general_{name}"
        rng = rng_for(name)
        if dt in INTS:
            info = np.iinfo(DT[dt])
            x = rng.integers(info.min, info.max, size=sa, endpoint=True).astype(DT[dt])
            y = rng.integers(info.min, info.max, size=sb, endpoint=True).astype(DT[dt])
        else:
            x, y = random(rng, dt, sa), random(rng, dt, sb)
        if name.endswith("nan_inf_f32"):
            x[0, 0], x[1, 1], y[2, 0] = NAN, INF, 0.0
        reg.add(name, "dot_general", [x, y], [_dot(x, y, a)], args=a,
                ref="jax.lax.dot_general (float64 / int64, HIGHEST precision, rounded once)")
    x, y = random(rng_for("dot_t"), "f32", (3, 4)), random(rng_for("dot_t2"), "f32", (4, 2))
    s, pre = transposed(x, [1, 0])
    reg.add("dot_general_f32_transposed", "dot_general", [s, y], [_dot(x, y, mat)], args=mat, pre=[pre])
    for name, dt, sa, sb in (("mat_vec", "f32", (3, 4), (4,)), ("vec_mat", "f64", (4,), (4, 2)),
                             ("vec_vec", "f32", (5,), (5,)), ("batch_broadcast", "f32", (2, 1, 3, 4), (5, 4, 2)),
                             ("batch_rhs_2d", "bf16", (2, 3, 4), (4, 2)), ("i32", "i32", (2, 3), (3, 3))):
        rng = rng_for(f"mm_{name}")
        x, y = random(rng, dt, sa), random(rng, dt, sb)
        r = np.matmul(f64(x), f64(y)) if dt in FLOATS else np.matmul(x.astype(np.int64), y.astype(np.int64))
        reg.add(f"mm_{name}_{dt}", "mm", [x, y], [rnd(r, dt) if dt in FLOATS else r.astype(DT[dt])],
                ref="numpy.matmul (float64, rounded once)")
    x, w = random(rng_for("matmul_q"), "f32", (1, 3)), random(rng_for("matmul_w"), "f32", (3, 2))
    reg.add("matmul_f32_declared", "matmul", [x, w], [rnd(f64(x) @ f64(w), "f32")], args={"shape": [1, 2]},
            ref="numpy.matmul (float64, rounded once)")


def _conv(x, w, a):
    dt = next(k for k, v in DT.items() if v == x.dtype)
    nsp = x.ndim - 2
    spec = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}[nsp]
    xv, wv = (f64(x), f64(w)) if dt in FLOATS else (x.astype(np.int64), w.astype(np.int64))
    y = np.asarray(lax.conv_general_dilated(jnp.asarray(xv), jnp.asarray(wv), tuple(a["window_strides"]),
                                            [tuple(p) for p in a["padding"]], tuple(a["lhs_dilation"]),
                                            tuple(a["rhs_dilation"]), spec, a["feature_group_count"],
                                            precision=lax.Precision.HIGHEST))
    return rnd(y, dt) if dt in FLOATS else y.astype(DT[dt])


def conv(reg):
    def p(strides, padding, lhs=None, rhs=None, groups=1):
        n = len(strides)
        return {"window_strides": strides, "padding": padding, "lhs_dilation": lhs or [1] * n,
                "rhs_dilation": rhs or [1] * n, "feature_group_count": groups}

    cases = [
        ("1d_stride_pad_f32", "f32", (2, 3, 7), (4, 3, 3), p([2], [[1, 1]])),
        ("2d_rhs_dilation_f32", "f32", (1, 2, 5, 5), (3, 2, 3, 3), p([1, 1], [[1, 1], [0, 0]], rhs=[1, 2])),
        ("2d_groups_f64", "f64", (1, 4, 4, 4), (6, 2, 2, 2), p([1, 1], [[0, 0], [0, 0]], groups=2)),
        ("2d_depthwise_f32", "f32", (2, 3, 5, 5), (3, 1, 3, 3), p([2, 1], [[1, 1], [1, 1]], groups=3)),
        ("2d_lhs_dilation_f32", "f32", (1, 1, 3, 3), (1, 1, 2, 2), p([1, 1], [[1, 1], [1, 1]], lhs=[2, 2])),
        ("1d_negative_pad_f32", "f32", (1, 1, 6), (2, 1, 2), p([1], [[-1, -2]])),
        ("2d_f16", "f16", (1, 2, 4, 4), (2, 2, 3, 3), p([1, 1], [[1, 1], [1, 1]])),
        ("2d_bf16", "bf16", (1, 1, 4, 4), (1, 1, 2, 2), p([2, 2], [[0, 0], [0, 0]])),
        ("1d_i32", "i32", (1, 2, 5), (2, 2, 2), p([1], [[0, 1]])),
        ("1d_window_too_big_f32", "f32", (1, 1, 2), (1, 1, 3), p([1], [[0, 0]])),
        ("3d_f32", "f32", (1, 1, 3, 3, 3), (2, 1, 2, 2, 2), p([1, 1, 1], [[0, 0], [1, 0], [0, 0]])),
    ]
    for name, dt, sx, sw, a in cases:
        rng = rng_for(f"conv_{name}")
        x, w = random(rng, dt, sx), random(rng, dt, sw)
        reg.add(f"conv_general_dilated_{name}", "conv_general_dilated", [x, w], [_conv(x, w, a)], args=a,
                ref="jax.lax.conv_general_dilated (float64 / int64, HIGHEST precision, rounded once)")


def build(reg):
    reduce(reg)
    arg_reduce(reg)
    cumulative(reg)
    reduce_window(reg)
    dot_general(reg)
    conv(reg)
    sweep(reg)


def sweep(reg):
    """One small case per dtype the op accepts, for ops whose main cases cover a subset."""
    for dt in ALL:
        rng = rng_for(f"reduce_dot_sweep_{dt}")
        n = f"_dtype_{dt}"
        x = random(rng, dt, (3, 4), scale=2.0)
        reg.add("argmax" + n, "argmax", [x], [np.argmax(x, axis=0).astype(np.int32)],
                args={"axis": 0, "index_dtype": "i32"}, ref="numpy.argmax")
        for op, f in (("cumsum", np.add), ("cumprod", np.multiply), ("cummax", np.maximum), ("cummin", np.minimum)):
            if dt == "bool" and op in ("cumsum", "cumprod"):
                continue
            if dt in FLOATS:
                y = rnd(f.accumulate(f64(x), axis=1), dt)
            elif dt == "bool":
                y = f.accumulate(x, axis=1)
            else:
                y = f.accumulate(x.astype(np.int64), axis=1).astype(DT[dt])
            reg.add(op + n, op, [x], [y], args={"axis": 1, "reverse": False}, ref=f"numpy.{f.__name__}.accumulate")
        if dt == "bool":
            continue
        for op in ("sum", "max", "min"):
            a = {"window": [2, 2], "strides": [1, 2], "padding": [[0, 1], [1, 0]], "base_dilation": [1, 1],
                 "window_dilation": [1, 1]}
            reg.add(f"reduce_window_{op}" + n, f"reduce_window_{op}", [x], [_reduce_window(op, x, a)], args=a,
                    ref="jax.lax.reduce_window")
        y = random(rng, dt, (4, 2), scale=2.0)
        a = {"lhs_contracting": [1], "rhs_contracting": [0], "lhs_batch": [], "rhs_batch": []}
        reg.add("dot_general" + n, "dot_general", [x, y], [_dot(x, y, a)], args=a, ref="jax.lax.dot_general")
        xc, wc = random(rng, dt, (1, 2, 5), scale=2.0), random(rng, dt, (2, 2, 2), scale=2.0)
        a = {"window_strides": [1], "padding": [[1, 0]], "lhs_dilation": [1], "rhs_dilation": [1],
             "feature_group_count": 1}
        reg.add("conv_general_dilated" + n, "conv_general_dilated", [xc, wc], [_conv(xc, wc, a)], args=a,
                ref="jax.lax.conv_general_dilated")

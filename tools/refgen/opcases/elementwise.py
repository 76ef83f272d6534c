"""Elementwise family: unary, binary, compare, select, convert_element_type, stop_gradient.

Float results are computed in float64 from the (exactly representable) inputs and rounded once
to the case dtype, which is the rlx-ir reference rule. Integer division, remainder and shifts
come from `jax.lax` (XLA's defined results); integer pow, int<->float conversion and select are
formulas written out here.
"""

import numpy as np
import scipy.special as sp
from jax import lax
import jax.numpy as jnp

from .common import (ALL, DT, FLOATS, FLOAT_SPECIALS, INTS, INF, NAN, SIGNED, arr, broadcast_pre, f64,
                     int_specials, random, rnd, rng_for, transposed)


def _round_half_away(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# name -> (f64 function, extra domain sampler(rng) -> values)
UNARY_FLOAT = {
    "neg": (np.negative, None),
    "abs": (np.abs, None),
    "sign": (np.sign, None),
    "floor": (np.floor, lambda r: r.uniform(-5, 5, 6)),
    "ceil": (np.ceil, lambda r: r.uniform(-5, 5, 6)),
    "round": (_round_half_away, lambda r: [0.5, -0.5, 1.5, 2.5, -3.5, 0.49999999999999994]),
    "round_nearest_even": (np.rint, lambda r: [0.5, -0.5, 1.5, 2.5, -3.5, 0.49999999999999994]),
    "exp": (np.exp, lambda r: [88.7, 88.8, -103.0, -745.2, 709.8, 11.0]),
    "exp2": (np.exp2, lambda r: [127.9, 128.0, -149.0, -1075.0, 15.9, 16.0]),
    "expm1": (np.expm1, lambda r: [1e-10, -1e-10, 1e-5, -40.0, 88.0, 0.3]),
    "log": (np.log, lambda r: [2.718281828459045, 1e-45, 1e-300, 0.999999, 1.000001, 6e4]),
    "log1p": (np.log1p, lambda r: [1e-10, -1e-10, -0.999999, -1.0, -1.5, 6e4]),
    "sqrt": (np.sqrt, lambda r: [2.0, 4.0, 1e-45, 1e300, 6e4, 0.25]),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda r: [2.0, 4.0, 1e-45, 1e300, 6e4, 0.25]),
    "cbrt": (np.cbrt, lambda r: [27.0, -8.0, 1e-45, -1e300, 6e4, 0.001]),
    "square": (lambda x: x * x, lambda r: [1.5e19, 2e154, 255.9, 1e-23, -3.0, 300.0]),
    "reciprocal": (lambda x: 1.0 / x, lambda r: [3.0, -7.0, 3e-39, 1e-5, 6e4, 1e-310]),
    "sin": (np.sin, lambda r: [np.pi, -np.pi / 2, 1e6, 1e22, 100.0, 1e-30]),
    "cos": (np.cos, lambda r: [np.pi, -np.pi / 2, 1e6, 1e22, 100.0, 1e-30]),
    "tan": (np.tan, lambda r: [np.pi / 4, 1.5707963, 1e6, -100.0, 0.1, 1e-30]),
    "asin": (np.arcsin, lambda r: [0.999999, -0.999999, 1.000001, 0.3, -0.7, 1e-30]),
    "acos": (np.arccos, lambda r: [0.999999, -0.999999, 1.000001, 0.3, -0.7, 1e-30]),
    "atan": (np.arctan, lambda r: [1e10, -1e10, 0.3, -0.7, 1e-30, 2.0]),
    "sinh": (np.sinh, lambda r: [89.0, -89.0, 711.0, 1e-10, 0.3, 11.0]),
    "cosh": (np.cosh, lambda r: [89.0, -89.0, 711.0, 1e-10, 0.3, 11.0]),
    "tanh": (np.tanh, lambda r: [9.0, -9.0, 20.0, 1e-10, 0.3, -0.7]),
    "asinh": (np.arcsinh, lambda r: [1e10, -1e10, 1e200, 1e-10, 0.3, -0.7]),
    "acosh": (np.arccosh, lambda r: [1.000001, 1e10, 1e200, 0.999, 2.0, 11.0]),
    "atanh": (np.arctanh, lambda r: [0.999999, -0.999999, 1.000001, 1e-10, 0.3, -0.7]),
    "logistic": (sp.expit, lambda r: [20.0, -20.0, 88.0, -88.0, 800.0, -800.0]),
    "erf": (sp.erf, lambda r: [0.3, -0.7, 2.0, 4.0, 6.0, -1e-10]),
    "erfc": (sp.erfc, lambda r: [0.3, -0.7, 2.0, 9.0, 27.0, -6.0]),
    "erf_inv": (sp.erfinv, lambda r: [0.999999, -0.999999, 0.3, -0.7, 1.000001, 0.9999999999]),
    "is_finite": (np.isfinite, None),
}
UNARY_INT = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sign": np.sign,
    "square": lambda x: x * x,
    "not": np.invert,
}


def unary(reg):
    for op, (fn, dom) in UNARY_FLOAT.items():
        for dt in FLOATS:
            name = f"{op}_{dt}"
            rng = rng_for(name)
            vals = list(FLOAT_SPECIALS) + list(dom(rng) if dom else []) + list(rng.standard_normal(6) * 3)
            while len(vals) % 6:
                vals.append(float(rng.standard_normal()))
            x = arr(vals, dt, (len(vals) // 6, 6))
            with np.errstate(all="ignore"):
                y = fn(f64(x))
            y = y if op == "is_finite" else rnd(y, dt)
            reg.add(name, op, [x], [y], ref=_ref(op))
    for op, fn in UNARY_INT.items():
        for dt in INTS + (["bool"] if op == "not" else []):
            name = f"{op}_{dt}"
            if dt == "bool":
                x = np.array([True, False, False, True])
                y = ~x
            else:
                x = np.concatenate([int_specials(dt), random(rng_for(name), dt, 4)])
                with np.errstate(all="ignore"):
                    y = fn(x).astype(x.dtype)  # numpy integer arithmetic wraps like XLA
            reg.add(name, op, [x], [y])
    # Shape edge cases: rank 0, size-0 and size-1 dims, and non-contiguous operands.
    x = arr([0.7], "f32", ())
    reg.add("exp_f32_rank0", "exp", [x], [rnd(np.exp(f64(x)), "f32")])
    x = np.zeros((0, 3), np.float32)
    reg.add("exp_f32_size0", "exp", [x], [x])
    x = random(rng_for("neg_i32_size1"), "i32", (1, 1, 3))
    reg.add("neg_i32_size1", "neg", [x], [-x])
    x = random(rng_for("tanh_f32_transposed"), "f32", (3, 4, 2))
    s, pre = transposed(x, [2, 0, 1])
    xl = np.transpose(s, [2, 0, 1])
    reg.add("tanh_f32_transposed", "tanh", [s], [rnd(np.tanh(f64(xl)), "f32")], pre=[pre], ref="numpy.tanh")
    s = random(rng_for("exp_f64_broadcast"), "f64", (3,))
    xl, pre = broadcast_pre(s, (2, 3), [1])
    reg.add("exp_f64_broadcast", "exp", [s], [np.exp(xl)], pre=[pre], ref="numpy.exp")


def _ref(op):
    if op in ("logistic", "erf", "erfc", "erf_inv"):
        return {"logistic": "scipy.special.expit", "erf": "scipy.special.erf", "erfc": "scipy.special.erfc",
                "erf_inv": "scipy.special.erfinv"}[op]
    if op == "round":
        return "formula (round half away from zero, lax.round default)"
    return "numpy (float64, rounded once)"


BINARY_DTYPES = {
    "add": FLOATS + INTS, "sub": FLOATS + INTS, "mul": FLOATS + INTS, "div": FLOATS + INTS,
    "rem": FLOATS + INTS, "pow": FLOATS + INTS, "max": FLOATS + INTS, "min": FLOATS + INTS,
    "atan2": FLOATS, "and": INTS + ["bool"], "or": INTS + ["bool"], "xor": INTS + ["bool"],
    "shift_left": INTS, "shift_right_arithmetic": INTS, "shift_right_logical": INTS,
}
BINARY_FLOAT = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
    "pow": np.power, "max": np.maximum, "min": np.minimum, "atan2": np.arctan2,
}
BIN_FLOAT_VALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, NAN, INF, -INF, 1e-40, 3e38, -7e4, 2.0]


def _int_pow(a, b, dt):
    a, b = np.broadcast_arrays(a, b)
    out = []
    for x, e in zip(a.ravel().tolist(), b.ravel().tolist()):
        if e < 0:
            out.append(1 if x == 1 else ((-1 if e % 2 else 1) if x == -1 else 0))
        else:
            out.append(pow(int(x), int(e), 1 << 64))
    return arr(out, dt, a.shape)


def _binary_int(op, a, b, dt):
    if op in ("div", "rem", "shift_left", "shift_right_arithmetic", "shift_right_logical"):
        f = getattr(lax, op)
        a2, b2 = np.broadcast_arrays(a, b)
        return np.asarray(f(jnp.asarray(a2), jnp.asarray(b2))), f"jax.lax.{op}"
    if op == "pow":
        return _int_pow(a, b, dt), "formula (wrapping integer pow; negative exponent: 0 unless |base| = 1)"
    with np.errstate(all="ignore"):
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
             "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return f(a, b).astype(a.dtype), f"numpy.{f.__name__} (wrapping)"


def _int_operands(op, dt, name):
    a = np.concatenate([int_specials(dt), random(rng_for(name), dt, 3)])
    if op.startswith("shift"):
        bits = DT[dt].itemsize * 8
        b = arr([0, 1, 3, bits - 1, bits, bits + 1, -1, 2, 100], dt)
    elif op == "pow":
        b = arr([0, 1, 2, 3, 7, -1, -2, 31, 64], dt)
    else:
        b = np.concatenate([int_specials(dt)[:10], random(rng_for(name + "b"), dt, 2)])
    return a.reshape(-1, 1), b


def binary(reg):
    for op, dts in BINARY_DTYPES.items():
        for dt in dts:
            name = f"{op}_{dt}"
            if dt in FLOATS:
                # A [n,1] x [n] grid: every special against every special, and broadcasting.
                a = arr(BIN_FLOAT_VALS, dt, (-1, 1))
                b = arr(BIN_FLOAT_VALS[::-1], dt)
                with np.errstate(all="ignore"):
                    y = rnd(BINARY_FLOAT[op](f64(a), f64(b)), dt)
                ref = f"numpy.{BINARY_FLOAT[op].__name__} (float64, rounded once)"
            elif dt == "bool":
                a = np.array([[False], [True]])
                b = np.array([False, True])
                y = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op](a, b)
                ref = "numpy.logical_" + op
            else:
                a, b = _int_operands(op, dt, name)
                y, ref = _binary_int(op, a, b, dt)
            reg.add(name, op, [a, b], [y], ref=ref)
    # Shape edge cases.
    rng = rng_for("binary_shapes")
    a, b = random(rng, "f32", (0, 3)), random(rng, "f32", (3,))
    reg.add("add_f32_size0", "add", [a, b], [a + b])
    a, b = random(rng, "f32", ()), random(rng, "f32", (2, 3))
    reg.add("mul_f32_rank0_bcast", "mul", [a, b], [rnd(f64(a) * f64(b), "f32")])
    a, b = random(rng, "f64", (1, 3)), random(rng, "f64", (2, 1))
    reg.add("sub_f64_size1_bcast", "sub", [a, b], [a - b])
    a, b = random(rng, "i32", (2, 1, 4)), random(rng, "i32", (3, 1))
    reg.add("add_i32_bcast3d", "add", [a, b], [a + b])
    x, y0 = random(rng, "f32", (3, 4)), random(rng, "f32", (3, 4))
    s, pre = transposed(x, [1, 0])
    reg.add("add_f32_transposed", "add", [s, y0], [rnd(f64(x) + f64(y0), "f32")], pre=[pre])
    s = random(rng, "f32", (4,))
    xb, pre = broadcast_pre(s, (3, 4), [1])
    y0 = random(rng, "f32", (3, 4))
    reg.add("max_f32_broadcast_in_dim", "max", [s, y0], [np.maximum(xb, y0)], pre=[pre])


def compare(reg):
    fns = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
    for op, fn in fns.items():
        for dt in ALL:
            name = f"{op}_{dt}"
            if dt in FLOATS:
                vals = [0.0, -0.0, 1.0, -1.0, NAN, INF, -INF, 1e-40, 2.5]
                a, b = arr(vals, dt, (-1, 1)), arr(vals[::-1], dt)
            elif dt == "bool":
                a, b = np.array([[False], [True]]), np.array([False, True])
            else:
                a, b = int_specials(dt)[:9].reshape(-1, 1), int_specials(dt)[::-1][:9]
            reg.add(name, op, [a, b], [fn(a, b)], ref=f"numpy.{fn.__name__}")
    x = random(rng_for("lt_f32_transposed"), "f32", (3, 5))
    s, pre = transposed(x, [1, 0])
    y0 = random(rng_for("lt_f32_transposed_b"), "f32", (3, 5))
    reg.add("lt_f32_transposed", "lt", [s, y0], [x < y0], pre=[pre])


def select(reg):
    for dt in ALL:
        name = f"select_{dt}"
        rng = rng_for(name)
        p = rng.random((3, 1, 4)) < 0.5
        t = np.concatenate([random(rng, dt, (1, 2, 2)), random(rng, dt, (1, 2, 2))], axis=2)
        if dt in FLOATS:
            t = t.copy()
            t.reshape(-1)[:3] = arr([NAN, INF, -0.0], dt)
        f = random(rng, dt, (4,))
        reg.add(name, "select", [p, t, f], [np.where(p, t, f)], ref="numpy.where (NumPy broadcasting)")
    p = np.zeros((0, 2), bool)
    reg.add("select_f32_size0", "select", [p, np.zeros((0, 2), np.float32), np.zeros((2,), np.float32)],
            [np.zeros((0, 2), np.float32)], ref="numpy.where")


def _round_int_sig(n, p):
    """Round a Python int to p significant bits, ties to even."""
    m = abs(n)
    if m.bit_length() <= p:
        return n
    shift = m.bit_length() - p
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return (q << shift) * (1 if n >= 0 else -1)


_SIG_BITS = {"f64": 53, "f32": 24, "f16": 11, "bf16": 8}


def convert_values(src, dst):
    """XLA convert_element_type: float->int truncates and saturates (NaN -> 0), int->int wraps,
    ->bool is != 0, int->float rounds the exact integer once, float->float rounds once."""
    if src in FLOATS:
        # Includes ties past the 32nd fraction bit, where rounding through truncated bits fails.
        vals = FLOAT_SPECIALS + [1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -24 + 2.0 ** -60,
                                 -3.7, 255.9, 256.0, -129.5, 65520.0, 2.0 ** 31, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 1e20]
        x = arr(vals, src)
    elif src == "bool":
        x = np.array([True, False])
    else:
        extra = {"i64": [2 ** 62 + 2 ** 38 + 1, 2 ** 53 + 1, -(2 ** 53) - 3, 65520, 65519, 2 ** 24 + 1],
                 "i32": [2 ** 24 + 1, -(2 ** 24) - 3, 65520, 300], "u32": [2 ** 32 - 1, 2 ** 24 + 1, 65520, 300]}
        x = np.concatenate([int_specials(src), arr(extra.get(src, [3]), src)])
    if dst in FLOATS:
        if src in FLOATS or src == "bool":
            y = rnd(f64(x), dst)
        else:
            r = [_round_int_sig(int(v), _SIG_BITS[dst]) for v in x.tolist()]
            y = rnd(np.array([float(v) for v in r]), dst)  # exact in f64; only overflow left
    elif dst == "bool":
        y = x != 0
    elif src in FLOATS:
        info = np.iinfo(DT[dst])
        t = np.trunc(f64(x))
        t = np.where(np.isnan(t), 0.0, t)
        out = [int(info.min) if v <= info.min else int(info.max) if v >= info.max else int(v) for v in t.tolist()]
        y = np.array(out, dtype=DT[dst])
    else:
        y = x.astype(np.int64).astype(DT[dst]) if src != "u32" else x.astype(DT[dst])
    return x, y


def convert(reg):
    for src in ALL:
        for dst in ALL:
            x, y = convert_values(src, dst)
            reg.add(f"convert_{src}_to_{dst}", "convert_element_type", [x], [y], args={"dtype": dst},
                    ref="formula (XLA convert_element_type: saturating float->int, NaN -> 0; exact rounding)")
    s = random(rng_for("convert_f32_transposed"), "f32", (2, 3))
    st, pre = transposed(s, [1, 0])
    reg.add("convert_f32_to_f16_transposed", "convert_element_type", [st], [rnd(f64(s), "f16")],
            args={"dtype": "f16"}, pre=[pre])


def stop_gradient(reg):
    for dt in ["f32", "bf16", "i32"]:
        x = random(rng_for(f"stop_gradient_{dt}"), dt, (2, 3))
        reg.add(f"stop_gradient_{dt}", "stop_gradient", [x], [x], ref="identity")


def constant(reg):
    """A literal node alone (the graph has no inputs); values must survive JSON, so no NaN."""
    for dt, vals in (("f32", [1.5, -0.0, 3e38, 1e-40, -7.25, 2.0]), ("bf16", [1.0, -2.5, 3.0e38, 0.0078125, 5.0, 6.0]),
                     ("i32", [1, -2, 2147483647, -2147483648, 0, 7]), ("bool", [1, 0, 0, 1, 1, 0])):
        y = arr(vals, dt, (2, 3))
        reg.add(f"constant_{dt}", "constant", [], [y], args={"dtype": dt, "shape": [2, 3], "values": vals},
                ref="identity")


def build(reg):
    constant(reg)
    unary(reg)
    binary(reg)
    compare(reg)
    select(reg)
    convert(reg)
    stop_gradient(reg)

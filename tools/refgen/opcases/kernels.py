"""Kernel-sized cases: the other families use tiny shapes that only reach a SIMD kernel's
remainder loop. These run the hot f32 / f64 ops on inner dims past several vector widths and
not a multiple of any (37, 67, 100), plus GEMM / GEMV shapes with ragged edges. References as
in the op's own family module.
"""

import numpy as np
import scipy.special as sp

from .common import arr, f64, random, rnd, rng_for, transposed
from .composites import gelu64, log_softmax64, softmax64
from .reduce_dot import _dot, reduce_ref

UNARY = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "logistic": sp.expit, "erf": sp.erf, "sqrt": np.sqrt,
         "rsqrt": lambda x: 1 / np.sqrt(x), "neg": np.negative, "abs": np.abs, "sin": np.sin, "expm1": np.expm1,
         "log1p": np.log1p, "reciprocal": lambda x: 1 / x, "square": lambda x: x * x}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum, "pow": np.power}


def build(reg):
    for dt in ("f32", "f64"):
        rng = rng_for(f"kernel_unary_{dt}")
        x = random(rng, dt, (3, 67), scale=3.0)
        pos = rnd(np.abs(f64(x)) + 1e-3, dt)
        x.reshape(-1)[[5, 70, 140]] = arr([np.nan, np.inf, -np.inf], dt)
        for op, f in UNARY.items():
            xi = pos if op in ("log", "sqrt", "rsqrt", "log1p", "pow") else x
            with np.errstate(all="ignore"):
                reg.add(f"{op}_{dt}_3x67", op, [xi], [rnd(f(f64(xi)), dt)], ref="numpy (float64, rounded once)")
        a, b = random(rng, dt, (5, 37), scale=2.0), random(rng, dt, (37,), scale=2.0)
        a.reshape(-1)[[3, 50]] = arr([np.nan, np.inf], dt)
        for op, f in BINARY.items():
            aa = rnd(np.abs(f64(a)), dt) if op == "pow" else a
            with np.errstate(all="ignore"):
                reg.add(f"{op}_{dt}_5x37_bcast", op, [aa, b], [rnd(f(f64(aa), f64(b)), dt)],
                        ref="numpy (float64, rounded once)")
        for op in ("sum", "max", "min", "prod"):
            x = random(rng, dt, (4, 100), scale=1.0 if op != "prod" else 0.1)
            x = rnd(f64(x) + (1.0 if op == "prod" else 0.0), dt)
            reg.add(f"reduce_{op}_{dt}_4x100_last", f"reduce_{op}", [x], [reduce_ref(op, x, [-1], False)],
                    args={"axes": [-1], "keepdims": False}, ref="numpy reduce (float64)")
            reg.add(f"reduce_{op}_{dt}_100x4_first", f"reduce_{op}", [x.reshape(100, 4)],
                    [reduce_ref(op, x.reshape(100, 4), [0], False)], args={"axes": [0], "keepdims": False},
                    ref="numpy reduce (float64)")
        x = random(rng, dt, (5, 67), scale=4.0)
        x[1, 3:] = -np.inf
        reg.add(f"softmax_{dt}_5x67", "softmax", [x], [rnd(softmax64(f64(x), -1), dt)], args={"axis": -1},
                ref="formula: PyTorch softmax")
        reg.add(f"log_softmax_{dt}_5x67", "log_softmax", [x], [rnd(log_softmax64(f64(x), -1), dt)], args={"axis": -1},
                ref="formula: PyTorch log_softmax")
        x = random(rng, dt, (3, 67), scale=4.0)
        reg.add(f"gelu_erf_{dt}_3x67", "gelu", [x], [rnd(gelu64(f64(x), False), dt)], args={"approximate": False},
                ref="formula: PyTorch gelu")
        g, bb = random(rng, dt, (67,)), random(rng, dt, (67,))
        m = f64(x).mean(-1, keepdims=True)
        v = ((f64(x) - m) ** 2).mean(-1, keepdims=True)
        reg.add(f"layer_norm_{dt}_3x67", "layer_norm", [x, g, bb],
                [rnd((f64(x) - m) / np.sqrt(v + 1e-5) * f64(g) + f64(bb), dt)],
                args={"axis": -1, "epsilon": 1e-5, "gamma": True, "beta": True}, ref="formula: PyTorch layer_norm")
        r = f64(x) / np.sqrt((f64(x) ** 2).mean(-1, keepdims=True) + 1e-6) * f64(g)
        reg.add(f"rms_norm_{dt}_3x67", "rms_norm", [x, g], [rnd(r, dt)],
                args={"axis": -1, "epsilon": 1e-6, "gamma": True}, ref="formula: PyTorch rms_norm")
        mat = {"lhs_contracting": [1], "rhs_contracting": [0], "lhs_batch": [], "rhs_batch": []}
        for name, sa, sb in (("gemm_33x47x29", (33, 47), (47, 29)), ("gemv_1x64x37", (1, 64), (64, 37)),
                             ("gemv_t_37x64x1", (37, 64), (64, 1))):
            a, b = random(rng, dt, sa), random(rng, dt, sb)
            reg.add(f"dot_general_{name}_{dt}", "dot_general", [a, b], [_dot(a, b, mat)], args=mat,
                    ref="jax.lax.dot_general (float64)")
        bat = {"lhs_contracting": [2], "rhs_contracting": [1], "lhs_batch": [0], "rhs_batch": [0]}
        a, b = random(rng, dt, (3, 17, 40)), random(rng, dt, (3, 40, 19))
        reg.add(f"dot_general_batched_3x17x40x19_{dt}", "dot_general", [a, b], [_dot(a, b, bat)], args=bat,
                ref="jax.lax.dot_general (float64)")
        a = random(rng, dt, (40, 33))
        s, pre = transposed(a, [1, 0])
        b = random(rng, dt, (33, 21))
        reg.add(f"dot_general_transposed_lhs_40x33x21_{dt}", "dot_general", [s, b], [_dot(a, b, mat)], args=mat,
                pre=[pre], ref="jax.lax.dot_general (float64)")
        x = random(rng, dt, (17, 33))
        reg.add(f"transpose_{dt}_17x33", "transpose", [x], [np.ascontiguousarray(x.T)], args={"permutation": [1, 0]})

#!/usr/bin/env python3
"""Golden values for the rlx-tensor DSL, computed with NumPy (float64 from float32 inputs).

Writes crates/frontends/rlx-tensor/tests/fixtures/tensor_ops.json: one case per Tensor method
family (broadcasting arithmetic, matmul, reductions with keepdims, var, argmax, softmax,
layer_norm, gelu, permute, concat, slice, eye, arange, randn). Each case has its inputs
(`data`, `shape`) and the expected output; tests/golden.rs builds the same expression with the
Tensor API and compares. `randn` follows rlx_ir's documented Philox-4x64-10 + Box-Muller stream
(NumPy's `Philox(key=seed)` raw words).

    python3 tools/refgen/gen_tensor.py      # numpy only (tools/refgen/requirements.txt)
"""
import json
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "frontends", "rlx-tensor", "tests", "fixtures")
rng = np.random.default_rng(20260801)


def rand(*shape):
    return rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def t(a):
    a = np.asarray(a)
    return {"shape": list(a.shape), "data": [float(v) for v in a.astype(np.float64).ravel()]}


cases = {}


def case(name, inputs, out):
    cases[name] = {"inputs": [t(x) for x in inputs], "expect": t(out)}


def f64(*xs):
    return [x.astype(np.float64) for x in xs]


a, b = rand(2, 3), rand(3)
case("add_broadcast", [a, b], f64(a)[0] + f64(b)[0])
case("scalar_arith", [a], (f64(a)[0] * 2.0 - 1.0) / 4.0)
a, b = rand(2, 3, 4), rand(4, 5)
case("matmul_batched", [a, b], f64(a)[0] @ f64(b)[0])
a = rand(2, 3, 4)
case("mean_keepdims", [a], f64(a)[0].mean(axis=(0, 2), keepdims=True))
case("permute", [a], f64(a)[0].transpose(2, 0, 1))
a = rand(3, 5)
case("var_axis1", [a], f64(a)[0].var(axis=1))
case("max_axis0", [a], f64(a)[0].max(axis=0))
case("argmax_axis1", [a], np.argmax(a, axis=1))
case("softmax_last", [a], np.exp(f64(a)[0] - f64(a)[0].max(-1, keepdims=True)) / np.exp(f64(a)[0] - f64(a)[0].max(-1, keepdims=True)).sum(-1, keepdims=True))
x, g, be = rand(2, 6), rand(6), rand(6)
xd = x.astype(np.float64)
mu, var = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
case("layer_norm", [x, g, be], (xd - mu) / np.sqrt(var + 1e-5) * g + be)
x = rand(7)
case("gelu", [x], np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)]))
a, b = rand(2, 3), rand(2, 2)
case("concat_axis1", [a, b], np.concatenate([a, b], axis=1))
a = rand(4, 5)
case("slice", [a], a[1:3, 0:4])
case("eye3", [], np.eye(3))
case("arange5", [], np.arange(5))

# randn(shape=[5], seed=7): Box-Muller on the f64 uniforms of Philox(key=7)'s raw u64 words.
raw = np.random.Philox(key=7).random_raw(6)
u = (raw >> np.uint64(11)).astype(np.float64) * 2.0**-53
z = []
for p in range(3):
    r = math.sqrt(-2.0 * math.log(1.0 - u[2 * p]))
    z += [r * math.cos(2 * math.pi * u[2 * p + 1]), r * math.sin(2 * math.pi * u[2 * p + 1])]
case("randn_seed7", [], np.array(z[:5], dtype=np.float32))

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "tensor_ops.json"), "w") as f:
    json.dump({"generator": "tools/refgen/gen_tensor.py", "numpy": np.__version__, "cases": cases}, f, indent=None)
    f.write("\n")
print(f"wrote {len(cases)} cases")

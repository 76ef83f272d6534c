#!/usr/bin/env python3
"""RLX fused / native kernels vs numpy and onnxruntime, in one run on one machine.

Builds the `fusion_bench` example of rlx-cpu (release), then per workload runs RLX and the peer
as separate processes, interleaved, `--rounds` times; each process does one warm-up, then at
least 5 reps and 1 s, and reports its median; the table shows the median over rounds.
All at 1 thread, pinned with `taskset -c 0` (CpuOptions threads 1; ORT intra/inter-op 1;
numpy is single-threaded for elementwise math).

Workloads:
- chain: `gelu_tanh(x*1.25+0.5)*sigmoid(x)-0.25` over 16M f32 (8 ops), RLX (one fused step) vs
  numpy (the same expression, one temporary per op). GB/s counts 64 MiB in + 64 MiB out.
- softmax, layer_norm: last axis of [4096, 4096] f32, RLX native kernels vs onnxruntime
  (graphs built with onnx.helper, opset 17, ORT_ENABLE_ALL).
- encoder: one pre-norm transformer encoder layer (hidden 384, 12 heads, seq 128, batch 1,
  FFN 1536, exact gelu), RLX (builder graph, all passes) vs the same layer in onnxruntime
  (onnx.helper graph: LayerNormalization, MatMul + Add, Reshape / Transpose, Softmax, Erf gelu;
  ORT_ENABLE_ALL fuses it into its own attention / gelu / layer-norm kernels).

Roofline (with `chain`, when a C compiler is there): the chain at 1 thread and at 2 (the
issue's "within 80% of this machine's memory-bandwidth roofline"), interleaved round by round
with `bench/stream.c copy`, a non-temporal copy of the same 64 MiB in + 64 MiB out at the same
thread count; printed as `ROOFLINE chain-t<T> <copy ms / RLX ms>` (1 = at the copy's speed).

Ends with one line per workload: `RATIO <workload> <peer ms / RLX ms>` (> 1: RLX faster).

Usage: python3 bench/compare_fusion.py [--rounds N] [--only chain,softmax,layer_norm,encoder]
Needs: cargo, numpy, `pip install onnxruntime==1.32.0 onnx==1.22.0` (the ORT rows are skipped
with a message when onnxruntime is missing), cc for the roofline rows.
"""

import argparse
import os
import re
import statistics
import sys

from _common import build, build_c, load, median_ms, peer_cmd, pin, print_ratios, run

BYTES = {"chain": 2 * 64 * 2**20, "softmax": 2 * 64 * 2**20, "layer_norm": 2 * 64 * 2**20}
# Matmul FLOPs of one encoder layer: 4 projections, QK^T and PV, the two FFN matmuls.
FLOPS = {"encoder": 2 * 128 * (4 * 384 * 384 + 2 * 128 * 384 + 2 * 384 * 1536)}

NUMPY = r"""
import sys, numpy as np
n = 1 << 24
r = np.random.default_rng(0)
x = r.uniform(-3, 3, n).astype(np.float32)
c0 = np.float32(np.sqrt(2 / np.pi)); k = np.float32(0.044715)
h, one = np.float32(0.5), np.float32(1.0)
def f(x):
    z = x * np.float32(1.25) + np.float32(0.5)
    g = h * z * (one + np.tanh(c0 * (z + k * z * z * z)))
    return g * (one / (one + np.exp(-x))) - np.float32(0.25)
ms, reps = timed_ms(lambda: f(x))
print(f"numpy chain median {ms:.4f} ms reps={reps}")
"""

ORT = r"""
import sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto
w = sys.argv[1]
x = np.random.default_rng(0).uniform(-3, 3, (4096, 4096)).astype(np.float32)
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096, 4096])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096, 4096])
inits = []
if w == "softmax":
    node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
else:
    inits = [helper.make_tensor("g", TensorProto.FLOAT, [4096], np.ones(4096, np.float32)),
             helper.make_tensor("b", TensorProto.FLOAT, [4096], np.zeros(4096, np.float32))]
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
m = helper.make_model(helper.make_graph([node], w, [X], [Y], inits), opset_imports=[helper.make_opsetid("", 17)])
o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])
ms, reps = timed_ms(lambda: s.run(None, {"x": x}))
print(f"ort {w} median {ms:.4f} ms reps={reps} ort={ort.__version__}")
"""

ORT_ENCODER = r"""
import sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
S, H, NH, F = 128, 384, 12, 1536
r = np.random.default_rng(0)
inits, nodes = [], []
def init(name, a):
    inits.append(numpy_helper.from_array(np.asarray(a), name))
def w(name, *d):
    init(name, (r.standard_normal(d) * 0.05).astype(np.float32))
def node(op, ins, out, **kw):
    nodes.append(helper.make_node(op, ins, [out], **kw))
    return out
for n in ["ln1", "ln2"]:
    init(n + ".g", np.ones(H, np.float32)); init(n + ".b", np.zeros(H, np.float32))
for n in "qkvo":
    w(n + ".w", H, H); w(n + ".b", H)
w("ff1.w", H, F); w("ff1.b", F); w("ff2.w", F, H); w("ff2.b", H)
init("s4", np.array([1, S, NH, H // NH], np.int64)); init("s2", np.array([S, H], np.int64))
init("scale", np.float32(1 / np.sqrt(H // NH))); init("sqrt2", np.float32(np.sqrt(2)))
init("one", np.float32(1)); init("half", np.float32(0.5))
def linear(x, n):
    return node("Add", [node("MatMul", [x, n + ".w"], n + ".mm"), n + ".b"], n + ".y")
h = node("LayerNormalization", ["x", "ln1.g", "ln1.b"], "h", axis=-1, epsilon=1e-5)
t = {n: node("Transpose", [node("Reshape", [linear(h, n), "s4"], n + ".r")], n + ".t",
             perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]) for n in "qkv"}
p = node("Softmax", [node("Mul", [node("MatMul", [t["q"], t["k"]], "s"), "scale"], "ss")], "p", axis=-1)
a = node("Reshape", [node("Transpose", [node("MatMul", [p, t["v"]], "pv")], "pvt", perm=[0, 2, 1, 3]), "s2"], "a")
x1 = node("Add", ["x", linear(a, "o")], "x1")
h2 = node("LayerNormalization", [x1, "ln2.g", "ln2.b"], "h2", axis=-1, epsilon=1e-5)
f = linear(h2, "ff1")
e = node("Add", [node("Erf", [node("Div", [f, "sqrt2"], "fd")], "fe"), "one"], "fa")
g = node("Mul", [node("Mul", [f, e], "fm"), "half"], "fg")
node("Add", [x1, linear(g, "ff2")], "y")
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, H])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [S, H])
m = helper.make_model(helper.make_graph(nodes, "encoder", [X], [Y], inits), opset_imports=[helper.make_opsetid("", 17)])
o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])
x = r.standard_normal((S, H)).astype(np.float32)
ms, reps = timed_ms(lambda: s.run(None, {"x": x}))
print(f"ort encoder median {ms:.4f} ms reps={reps} ort={ort.__version__}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="chain,softmax,layer_norm,encoder")
    a = ap.parse_args()
    exe = build("rlx-cpu", "fusion_bench")
    try:
        import onnxruntime  # noqa: F401

        have_ort = True
    except ImportError:
        have_ort = False
        print("SKIP onnxruntime rows: pip install onnxruntime==1.32.0 onnx==1.22.0", file=sys.stderr)
    one = {"RAYON_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    print("load:", load())
    ratios = []
    for w in a.only.split(","):
        if w != "chain" and not have_ort:
            continue
        rl, pe, info = [], [], ""
        for _ in range(a.rounds):
            out = run(pin() + [exe, w, "1"], one)
            info = out.strip()
            rl.append(median_ms(out))
            if w == "chain":
                peer = peer_cmd(NUMPY)
            elif w == "encoder":
                peer = peer_cmd(ORT_ENCODER)
            else:
                peer = peer_cmd(ORT, w)
            pe.append(median_ms(run(pin() + peer, one)))
        r, p = statistics.median(rl), statistics.median(pe)
        peer = "numpy" if w == "chain" else "onnxruntime"
        if w in BYTES:
            rate = lambda ms: f"{BYTES[w] / (ms * 1e-3) / 1e9:5.1f} GB/s"  # noqa: E731
        else:
            rate = lambda ms: f"{FLOPS[w] / (ms * 1e-3) / 1e9:5.1f} GFLOP/s"  # noqa: E731
        print(f"{w:11s} RLX {r:9.3f} ms ({rate(r)})  {peer} {p:9.3f} ms ({rate(p)})  [{info}]")
        ratios.append((w, p / r))
    if "chain" in a.only.split(","):
        roofline(exe, a.rounds)
    print("load:", load())
    print_ratios(ratios)


def roofline(exe, rounds):
    """The chain at 1 and 2 threads against a non-temporal copy of the same bytes."""
    copy = build_c("stream", "roofline rows")
    if not copy:
        return
    for t in [1, 2] if (os.cpu_count() or 1) >= 2 else [1]:
        env = {"RAYON_NUM_THREADS": str(t), "OMP_NUM_THREADS": str(t)}
        rl, gb = [], []
        for _ in range(rounds):
            rl.append(median_ms(run(pin(t) + [exe, "chain", str(t)], env)))
            out = run(pin(t) + [copy, "copy", str(t)])
            gb.append(float(re.search(r"median ([0-9.]+) GB/s", out).group(1)))
        r, g = statistics.median(rl), statistics.median(gb)
        copy_ms = BYTES["chain"] / (g * 1e9) * 1e3
        print(f"roofline t{t}: chain RLX {r:.3f} ms ({BYTES['chain'] / (r * 1e-3) / 1e9:5.1f} GB/s), "
              f"non-temporal copy {g:5.1f} GB/s ({copy_ms:.3f} ms): {copy_ms / r:.0%} of the roofline")
        print(f"ROOFLINE chain-t{t} {copy_ms / r:.2f}")


if __name__ == "__main__":
    main()

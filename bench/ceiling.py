#!/usr/bin/env python3
"""How close RLX and its peers come to this core's f32 FMA ceiling, in the same minutes.

The compiler issue's encoder goal (>= 1.2x ONNX Runtime) and the autodiff issue's MLP
forward + backward goal (>= 1.3x JAX) are ratios against peers that already run these
product-bound workloads near the hardware's limit. This script interleaves, round by round
(1 thread, `taskset -c 0`): the register-resident FMA loop `bench/fma_peak.c` (before and after
each round; their mean is the round's peak), the encoder layer of `compare_fusion.py` in RLX
and ONNX Runtime, and the MLP step of `compare_grad.py` in RLX and JAX. Each is printed as
GFLOP/s of its products (encoder 478 MFLOP: projections, QK^T, PV, FFN; MLP step 821.6 MFLOP:
3 forward and 5 backward products) and as a share of the round's peak, with the share a
1.2x / 1.3x result would need.

Usage: python3 bench/ceiling.py [--rounds N]
Needs: cc (AVX-512 or AVX2 + FMA), cargo, onnxruntime + onnx (requirements-fusion.txt), jax (requirements-autodiff.txt).
"""

import argparse
import statistics
import sys

import compare_fusion as cf
import compare_grad as cg
from _common import build, build_c, load, machine, median_ms, peer_cmd, pin, run

ENC = cf.FLOPS["encoder"]
GRAD = 2 * 256 * (2 * (784 * 512 + 512 * 512 + 512 * 10) + 512 * 512 + 512 * 10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    fma = build_c("fma_peak", "bench/ceiling.py") or sys.exit("bench/ceiling.py needs a C compiler (cc)")
    fusion, grad = build("rlx-cpu", "fusion_bench"), build("rlx", "grad_bench")
    env = {"OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "RLX_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    print(machine())
    print(f"# {load()}")
    peak = lambda: float(run(pin() + [fma]).split()[2])
    gf = lambda flops, ms: flops / ms / 1e6
    rows = []
    for r in range(args.rounds):
        p0 = peak()
        t = dict(
            rlx_enc=median_ms(run(pin() + [fusion, "encoder", "1"], env)),
            ort_enc=median_ms(run(pin() + peer_cmd(cf.ORT_ENCODER), env)),
            rlx_grad=median_ms(run(pin() + [grad], env), "rlx"),
            jax_grad=median_ms(run(pin() + peer_cmd(cg.JAX), env), "jax"),
        )
        pk = (p0 + peak()) / 2
        s = {k: gf(ENC if "enc" in k else GRAD, v) / pk for k, v in t.items()}
        rows.append(s)
        print(
            f"round {r}: peak {pk:.0f} GFLOP/s | encoder RLX {t['rlx_enc']:.2f} ms {s['rlx_enc']:.0%}, "
            f"ORT {t['ort_enc']:.2f} ms {s['ort_enc']:.0%}, 1.2x ORT needs {1.2 * s['ort_enc']:.0%} | "
            f"MLP step RLX {t['rlx_grad']:.2f} ms {s['rlx_grad']:.0%}, JAX {t['jax_grad']:.2f} ms "
            f"{s['jax_grad']:.0%}, 1.3x JAX needs {1.3 * s['jax_grad']:.0%}",
            flush=True,
        )
    print(f"# {load()}")
    for k, need in (("ort_enc", 1.2), ("jax_grad", 1.3)):
        best = max(x[k] for x in rows)
        med = statistics.median(x[k] for x in rows)
        print(f"SHARE {k} median {med:.2f} best {best:.2f}; {need}x of it needs {need * med:.2f} / {need * best:.2f} of peak")
    for k in ("rlx_enc", "rlx_grad"):
        print(f"SHARE {k} median {statistics.median(x[k] for x in rows):.2f} best {max(x[k] for x in rows):.2f}")


if __name__ == "__main__":
    main()

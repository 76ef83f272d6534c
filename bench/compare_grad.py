#!/usr/bin/env python3
"""RLX vs JAX on forward + backward of an MLP 784-512-512-10 (relu, softmax cross-entropy) at
batch 256, f32, 1 thread, in one run on one machine.

RLX: the `grad_bench` example of the rlx crate (release): `rlx_autodiff::value_and_grad` of the
forward graph, compiled for the CPU and run repeatedly into a reused output vector
(`CompiledGraph::run_into`; RLX_NUM_THREADS=1, pinned with `taskset -c 0` when available). JAX: `jax.jit(jax.value_and_grad(loss, argnums=params))` on the
CPU with XLA limited to one thread. Each side does a warm-up, then at least 5 reps and 2 s, and
reports its median; rounds alternate the two.

Ends with `RATIO mlp_grad <jax ms / rlx ms>` (> 1: RLX faster).

Usage: python3 bench/compare_grad.py [--rounds N]
Needs: cargo, python3 with jax[cpu] 0.10.2 (`pip install -r tools/refgen/requirements-autodiff.txt`).
"""

import argparse
import os
import statistics

from _common import build, median_ms, peer_cmd, pin, print_ratios, run

JAX = r"""
import os
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
import jax, jax.numpy as jnp, numpy as np
b, sizes = 256, [784, 512, 512, 10]
r = np.random.default_rng(0)
params = []
for l in range(3):
    params += [jnp.asarray(r.standard_normal((sizes[l], sizes[l + 1]), np.float32) * np.sqrt(2 / sizes[l])),
               jnp.zeros(sizes[l + 1], jnp.float32)]
x = jnp.asarray(r.uniform(-1, 1, (b, sizes[0])).astype(np.float32))
t = jnp.asarray(np.arange(b, dtype=np.int32) % 10)
def loss(*p):
    h = x
    for l in range(3):
        h = h @ p[2 * l] + p[2 * l + 1]
        if l < 2: h = jax.nn.relu(h)
    lsm = jax.nn.log_softmax(h, axis=1)
    return -jnp.mean(jnp.take_along_axis(lsm, t[:, None], axis=1))
f = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(6))))
ms, reps = timed_ms(lambda: jax.block_until_ready(f(*params)), secs=2.0)
print(f"jax median {ms:.3f} ms reps={reps} version={jax.__version__}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prebuilt", help="run this release build of the grad_bench example instead of building one")
    args = ap.parse_args()
    exe = os.path.abspath(args.prebuilt) if args.prebuilt else build("rlx", "grad_bench")
    one = {"RAYON_NUM_THREADS": "1", "RLX_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    rlx, jax = [], []
    for k in range(args.rounds):
        r = run(pin() + [exe], one)
        j = run(pin() + peer_cmd(JAX), one)
        rlx.append(median_ms(r, "rlx"))
        jax.append(median_ms(j, "jax"))
        print(f"round {k}: rlx {rlx[-1]:.3f} ms, jax {jax[-1]:.3f} ms", flush=True)
    r, j = statistics.median(rlx), statistics.median(jax)
    print(f"mlp 784-512-512-10, batch 256, f32, 1 thread: rlx {r:.3f} ms, jax {j:.3f} ms")
    print_ratios([("mlp_grad", j / r)], digits=3)


if __name__ == "__main__":
    main()

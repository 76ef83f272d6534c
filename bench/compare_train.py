#!/usr/bin/env python3
"""RLX vs JAX: one training epoch of the digits MLP (64-128-10, relu, softmax cross-entropy,
Adam lr 1e-2 cosine-decayed, batch 32, 1,438 training samples = 44 steps), f32, 1 thread, in
one run on one machine.

RLX: `rlx train --dataset digits --model mlp --epochs E --json` (release build), which reports
`epoch_train_seconds` (the step loop of each epoch: batch copy, forward, backward, optimizer
update; test evaluation excluded). JAX: the same model, PyTorch-style U(±1/√fan_in) init,
the same data and split (crates/train/rlx-optim/data/digits.csv.gz, sample i is test when
i % 5 == 4), a `jax.jit` train step (value_and_grad + `optax.adam` with the same cosine
schedule + `optax.apply_updates`) on the CPU with XLA limited to one thread; the compile
is excluded (one warm-up step). Both run E epochs per process and report the median epoch;
rounds alternate the two, pinned with `taskset -c 0` when available.

Ends with `RATIO mlp_digits_epoch <jax s / rlx s>` (> 1: RLX faster).

Usage: python3 bench/compare_train.py [--rounds N] [--epochs E]
Needs: cargo, python3 with jax + optax (`pip install -r tools/refgen/requirements-optim.txt`).
"""

import argparse
import os
import json
import statistics
import sys

from _common import ROOT, build, pin, print_ratios, run

JAX = r"""
import gzip, os, sys, time
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
import jax, jax.numpy as jnp, numpy as np, optax
epochs, root = int(sys.argv[1]), sys.argv[2]
d = np.loadtxt(gzip.open(os.path.join(root, "crates/train/rlx-optim/data/digits.csv.gz")), delimiter=",")
test = np.arange(len(d)) % 5 == 4
x_all, y_all = (d[~test, :64] / 16.0).astype(np.float32), d[~test, 64].astype(np.int32)
n, b = len(y_all), 32
per_epoch = n // b
r = np.random.default_rng(0)
def u(shape, fan_in):
    k = 1.0 / np.sqrt(fan_in)
    return jnp.asarray(r.uniform(-k, k, shape).astype(np.float32))
params = {"w1": u((128, 64), 64), "b1": u((128,), 64), "w2": u((10, 128), 128), "b2": u((10,), 128)}
def loss(p, x, y):
    h = jax.nn.relu(x @ p["w1"].T + p["b1"])
    lsm = jax.nn.log_softmax(h @ p["w2"].T + p["b2"], axis=1)
    return -jnp.mean(jnp.take_along_axis(lsm, y[:, None], axis=1))
opt = optax.adam(optax.cosine_decay_schedule(1e-2, per_epoch * epochs))
state = opt.init(params)
@jax.jit
def step(p, s, x, y):
    l, g = jax.value_and_grad(loss)(p, x, y)
    upd, s = opt.update(g, s, p)
    return optax.apply_updates(p, upd), s, l
jax.block_until_ready(step(params, state, x_all[:b], y_all[:b]))
ts = []
for e in range(epochs):
    order = np.random.default_rng(e).permutation(n)
    t0 = time.perf_counter()
    for k in range(per_epoch):
        i = order[k * b:(k + 1) * b]
        params, state, l = step(params, state, x_all[i], y_all[i])
    jax.block_until_ready(l)
    ts.append(time.perf_counter() - t0)
print(f"jax median {sorted(ts)[len(ts) // 2]:.6f} s final_loss {float(l):.4f} "
      f"jax={jax.__version__} optax={optax.__version__}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--prebuilt", help="run this release build of the rlx binary instead of building one")
    args = ap.parse_args()
    exe = os.path.abspath(args.prebuilt) if args.prebuilt else build("rlx-cli")
    one = {"RAYON_NUM_THREADS": "1", "RLX_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rlx, jax = [], []
    cmd = [exe, "train", "--dataset", "digits", "--model", "mlp", "--epochs", str(args.epochs), "--json"]
    for k in range(args.rounds):
        r = json.loads(run(pin() + cmd, one).strip().splitlines()[-1])
        j = run(pin() + [sys.executable, "-c", JAX, str(args.epochs), ROOT], one)
        rlx.append(statistics.median(r["epoch_train_seconds"]))
        jax.append(float(j.split("jax median ")[1].split()[0]))
        print(
            f"round {k}: rlx {rlx[-1] * 1e3:.2f} ms/epoch (acc {r['test_accuracy']:.4f})  "
            f"jax {jax[-1] * 1e3:.2f} ms/epoch ({j.strip().split(' ', 4)[4]})"
        )
    r_med, j_med = statistics.median(rlx), statistics.median(jax)
    print(f"median over {args.rounds} rounds: rlx {r_med * 1e3:.2f} ms  jax {j_med * 1e3:.2f} ms")
    print_ratios([("mlp_digits_epoch", j_med / r_med)], digits=3)


if __name__ == "__main__":
    main()

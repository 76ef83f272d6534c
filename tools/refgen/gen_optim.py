"""Golden optimizer trajectories for rlx-optim: the first 10 updates of each optimizer on fixed
param / gradient sequences, from optax 0.2.5 (float64, `jax_enable_x64`) or, where optax has no
such convention, PyTorch's documented formula written out in numpy. Also the LR schedules.

    pip install -r tools/refgen/requirements-optim.txt
    python tools/refgen/gen_optim.py     # writes crates/train/rlx-optim/tests/fixtures/optim_golden.json

Deterministic: numpy's PCG64 seeded with 0; params and grads are rounded to float32 (what RLX
holds), everything after that is float64.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from optax import contrib  # noqa: E402

STEPS = 10
SHAPES = {"w": (3, 4), "u": (4, 2), "b": (3,)}  # a wide, a tall matrix and a vector
OUT = os.path.join(os.path.dirname(__file__), "../../crates/train/rlx-optim/tests/fixtures/optim_golden.json")

rng = np.random.default_rng(0)
params0 = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64) for k, s in SHAPES.items()}
grads = [
    {k: (0.5 * rng.standard_normal(s)).astype(np.float32).astype(np.float64) for k, s in SHAPES.items()}
    for _ in range(STEPS)
]


def run_optax(tx):
    p = {k: jnp.asarray(v) for k, v in params0.items()}
    state = tx.init(p)
    traj = []
    for g in grads:
        g = {k: jnp.asarray(v) for k, v in g.items()}
        upd, state = tx.update(g, state, p)
        p = optax.apply_updates(p, upd)
        traj.append({k: np.asarray(v, np.float64) for k, v in p.items()})
    return traj


def run_numpy(update, lr):
    """`update(name, p, g, state, t)` -> new p; PyTorch's formulas."""
    p = {k: v.copy() for k, v in params0.items()}
    state = {k: {} for k in p}
    traj = []
    for t, g in enumerate(grads, start=1):
        p = {k: update(p[k], g[k], state[k], t, lr) for k in p}
        traj.append({k: v.copy() for k, v in p.items()})
    return traj


def torch_adagrad(p, g, s, t, lr, eps=1e-10):
    # torch.optim.Adagrad: state_sum += g², p -= lr·g/(√state_sum + eps)   (initial sum 0)
    s["sum"] = s.get("sum", 0.0) + g * g
    return p - lr * g / (np.sqrt(s["sum"]) + eps)


def torch_rmsprop(p, g, s, t, lr, alpha=0.99, eps=1e-8):
    # torch.optim.RMSprop: v = αv + (1−α)g², p -= lr·g/(√v + eps)
    s["v"] = alpha * s.get("v", 0.0) + (1 - alpha) * g * g
    return p - lr * g / (np.sqrt(s["v"]) + eps)


warmup_cosine = optax.join_schedules(
    [optax.linear_schedule(0.0, 0.1, 4), optax.cosine_decay_schedule(0.1, 8, alpha=0.1)], [4]
)

# name -> (reference, convention, trajectory)
CASES = {
    "sgd": ("optax.sgd(0.1)", run_optax(optax.sgd(0.1))),
    "sgd_momentum": ("optax.sgd(0.1, momentum=0.9)", run_optax(optax.sgd(0.1, momentum=0.9))),
    "sgd_nesterov_l2": (
        "chain(add_decayed_weights(0.01), sgd(0.1, momentum=0.9, nesterov=True))  (PyTorch SGD weight_decay)",
        run_optax(optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1, momentum=0.9, nesterov=True))),
    ),
    "adam": ("optax.adam(0.05)", run_optax(optax.adam(0.05))),
    "adam_l2": (
        "chain(add_decayed_weights(0.1), adam(0.05))  (PyTorch Adam weight_decay)",
        run_optax(optax.chain(optax.add_decayed_weights(0.1), optax.adam(0.05))),
    ),
    "adamw": ("optax.adamw(0.05, weight_decay=0.1)", run_optax(optax.adamw(0.05, weight_decay=0.1))),
    "nadam": ("optax.nadam(0.05)", run_optax(optax.nadam(0.05))),
    "radam": ("optax.radam(0.05)", run_optax(optax.radam(0.05))),
    "adagrad": ("optax.adagrad(0.1)", run_optax(optax.adagrad(0.1))),
    "adagrad_torch": ("numpy: torch.optim.Adagrad(lr=0.1) formula", run_numpy(torch_adagrad, 0.1)),
    "rmsprop": ("optax.rmsprop(0.01)", run_optax(optax.rmsprop(0.01))),
    "rmsprop_torch": ("numpy: torch.optim.RMSprop(lr=0.01) formula", run_numpy(torch_rmsprop, 0.01)),
    "lion": ("optax.lion(0.01, weight_decay=0.01)", run_optax(optax.lion(0.01, weight_decay=0.01))),
    "lamb": ("optax.lamb(0.05, weight_decay=0.01)", run_optax(optax.lamb(0.05, weight_decay=0.01))),
    "adafactor": (
        "optax.adafactor(0.1, min_dim_size_to_factor=2)",
        run_optax(optax.adafactor(0.1, min_dim_size_to_factor=2)),
    ),
    "muon": ("optax.contrib.muon(0.05, weight_decay=0.01)", run_optax(contrib.muon(0.05, weight_decay=0.01))),
    "adam_clip_warmup_cosine": (
        "chain(clip_by_global_norm(1.0), adam(join_schedules([linear_schedule(0, 0.1, 4), "
        "cosine_decay_schedule(0.1, 8, alpha=0.1)], [4])))",
        run_optax(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(warmup_cosine))),
    ),
}

SCHEDULES = {
    "constant": optax.constant_schedule(0.1),
    "step": optax.exponential_decay(0.1, transition_steps=3, decay_rate=0.5, staircase=True),
    "cosine": optax.cosine_decay_schedule(0.1, 10, alpha=0.1),
    "warmup_cosine": warmup_cosine,
}


def flat(d):
    return {k: [float(x) for x in np.ravel(v)] for k, v in d.items()}


doc = {
    "generator": "tools/refgen/gen_optim.py (optax %s, jax %s, float64)" % (optax.__version__, jax.__version__),
    "shapes": {k: list(s) for k, s in SHAPES.items()},
    "params0": flat(params0),
    "grads": [flat(g) for g in grads],
    "cases": {k: {"reference": ref, "trajectory": [flat(p) for p in traj]} for k, (ref, traj) in CASES.items()},
    "schedules": {k: [float(s(t)) for t in range(20)] for k, s in SCHEDULES.items()},
}
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump(doc, f, indent=0)
print("wrote", os.path.normpath(OUT), os.path.getsize(OUT), "bytes")

"""Ordering (sort, top_k) from `jax.lax`, and rng from NumPy's Philox bit stream.

rng: `np.random.Philox(key=seed).random_raw()` gives the raw Philox-4x64-10 words; the
uniform and normal transforms documented in rlx-ir's ops/rng.rs are written out here on top
of them, and the (0, 1) uniforms are checked against `Generator(Philox(key=seed)).random`.
"""

import numpy as np
import jax.numpy as jnp
from jax import lax

from .common import ALL, BF16, DT, FLOATS, INF, NAN, arr, random, rnd, rng_for


def sort(reg):
    vals = [3.0, NAN, -INF, 0.0, 1.5, INF, -2.0, 1.5, -1e-40, 7.0, NAN, -0.5, 2.0, -3.0, 4.0]
    for dt in FLOATS:
        x = arr(vals, dt, (3, 5))
        y = np.asarray(lax.sort(jnp.asarray(x), dimension=1))
        reg.add(f"sort_{dt}_last", "sort", [x], [y], args={"dimension": -1, "is_stable": True, "num_keys": 1},
                ref="jax.lax.sort")
    for dt in ("i8", "u32", "i64", "bool"):
        x = random(rng_for(f"sort_{dt}"), dt, (4, 3))
        y = np.asarray(lax.sort(jnp.asarray(x), dimension=0))
        reg.add(f"sort_{dt}_dim0", "sort", [x], [y], args={"dimension": 0, "is_stable": True, "num_keys": 1},
                ref="jax.lax.sort")
    # Keyed: equal keys keep their order (stable); the payload follows the keys.
    k = arr([[2, 1, 2, 0, 1, 2]], "i32")
    p = arr([[0.5, 1.5, 2.5, 3.5, 4.5, 5.5]], "f32")
    ys = [np.asarray(v) for v in lax.sort((jnp.asarray(k), jnp.asarray(p)), dimension=1, is_stable=True, num_keys=1)]
    reg.add("sort_keyed_i32_f32_stable", "sort", [k, p], ys, args={"dimension": 1, "is_stable": True, "num_keys": 1},
            ref="jax.lax.sort")
    k2 = arr([[1, 0, 1, 0, 1, 0]], "u8")
    ys = [np.asarray(v) for v in
          lax.sort((jnp.asarray(k), jnp.asarray(k2), jnp.asarray(p)), dimension=1, is_stable=True, num_keys=2)]
    reg.add("sort_two_keys", "sort", [k, k2, p], ys, args={"dimension": -1, "is_stable": True, "num_keys": 2},
            ref="jax.lax.sort")
    x = arr([[3.0, -1.0, 2.0, 0.5]], "f64")
    reg.add("sort_f64_unstable_unique", "sort", [x], [np.sort(x, axis=1)],
            args={"dimension": 1, "is_stable": False, "num_keys": 1}, ref="numpy.sort (unique keys)")
    x = np.zeros((0, 3), np.float32)
    reg.add("sort_f32_size0", "sort", [x], [x], args={"dimension": 1, "is_stable": True, "num_keys": 1},
            ref="jax.lax.sort")


def top_k(reg):
    for dt, vals, shape, k in (("f32", [1.0, 3.0, NAN, 3.0, -INF, 2.0, 0.0, -0.0, 5.0, 5.0, 5.0, 1.0], (2, 6), 3),
                               ("i32", [5, -2, 7, 7, 0, 1], (6,), 1), ("bf16", [0.5, 0.25, 1.0, -1.0], (1, 4), 4),
                               ("f64", [2.0, 1.0, 3.0], (3,), 0), ("u8", [200, 3, 255, 0, 255, 1], (2, 3), 2)):
        x = arr(vals, dt, shape)
        v, i = lax.top_k(jnp.asarray(x), k)
        reg.add(f"top_k_{dt}_k{k}", "top_k", [x], [np.asarray(v), np.asarray(i).astype(np.int32)], args={"k": k},
                ref="jax.lax.top_k")


def _below(high, dt):
    """Largest value of dt strictly below `high` > 0 (as float64)."""
    h = rnd(np.array([high]), dt)
    if dt == "bf16":
        return float((h.view(np.uint16) - np.uint16(1)).view(BF16)[0])
    return float(np.nextafter(h, np.array([-np.inf], h.dtype))[0])


def rng(reg):
    for seed, dt, shape, lo, hi in ((0, "f64", [7], 0.0, 1.0), (42, "f32", [3, 5], 0.0, 1.0),
                                    (7, "f32", [2, 3], -2.0, 3.0), (123456789, "f16", [9], 10.0, 11.0),
                                    (2 ** 63 + 5, "bf16", [4, 2], 0.0, 1.0), (3, "f64", [0, 4], 0.0, 1.0)):
        n = int(np.prod(shape))
        raw = np.random.Philox(key=seed).random_raw(max((n + 1) // 2, 1) * 2)
        if dt == "f64":
            u = (raw[:n] >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        else:
            w32 = np.stack([raw & np.uint64(0xFFFFFFFF), raw >> np.uint64(32)], axis=1).reshape(-1)[:n]
            u = (w32 >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
        v = lo + (hi - lo) * u
        y = rnd(v, dt)
        y = np.where(y.astype(np.float64) >= hi, rnd(np.array([_below(hi, dt)]), dt), y).astype(DT[dt])
        if (lo, hi) == (0.0, 1.0) and dt in ("f64", "f32"):
            ref = np.random.Generator(np.random.Philox(key=seed)).random(n, dtype=DT[dt])
            assert np.array_equal(ref, y), f"uniform transform disagrees with numpy for seed {seed}"
        reg.add(f"rng_uniform_{dt}_seed{seed}", "rng_uniform", [], [y.reshape(shape)],
                args={"shape": shape, "dtype": dt, "seed": seed, "low": lo, "high": hi},
                ref="numpy Philox(key=seed).random_raw + the documented uniform transform")
    for seed, dt, shape, mean, std in ((1, "f64", [6], 0.0, 1.0), (99, "f32", [7], 2.0, 0.5),
                                       (5, "bf16", [2, 2], -1.0, 3.0)):
        n = int(np.prod(shape))
        npair = (n + 1) // 2
        raw = np.random.Philox(key=seed).random_raw(2 * npair)
        u = (raw >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        u1, u2 = u[0::2], u[1::2]
        r = np.sqrt(-2.0 * np.log(1.0 - u1))
        z = np.stack([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)], axis=1).reshape(-1)[:n]
        y = rnd(mean + std * z, dt)
        reg.add(f"rng_normal_{dt}_seed{seed}", "rng_normal", [], [y.reshape(shape)],
                args={"shape": shape, "dtype": dt, "seed": seed, "mean": mean, "std": std},
                ref="numpy Philox(key=seed).random_raw + Box-Muller as documented")


def sweep(reg):
    """sort and top_k in every dtype they accept."""
    for dt in ALL:
        x = random(rng_for(f"sort_sweep_{dt}"), dt, (2, 5))
        reg.add(f"sort_dtype_{dt}", "sort", [x], [np.asarray(lax.sort(jnp.asarray(x), dimension=1))],
                args={"dimension": 1, "is_stable": True, "num_keys": 1}, ref="jax.lax.sort")
        if dt != "bool":
            v, i = lax.top_k(jnp.asarray(x), 2)
            reg.add(f"top_k_dtype_{dt}", "top_k", [x], [np.asarray(v), np.asarray(i).astype(np.int32)],
                    args={"k": 2}, ref="jax.lax.top_k")


def build(reg):
    sweep(reg)
    sort(reg)
    top_k(reg)
    rng(reg)

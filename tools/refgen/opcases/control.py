"""Control flow (scan, while, cond/switch) and a registered custom op, as plain Python loops over
numpy: the bodies here are the ones the Rust records build (see crates/rlx/tests/ops/control.rs).
"""

import numpy as np

from .common import arr, f64, random, rnd, rng_for


def scan(reg):
    # body(c, x) = (c + x, (c + x) * 2)
    for name, length in (("scan_cumsum_f32", 5), ("scan_cumsum_f32_length0", 0)):
        c0 = random(rng_for(name), "f32", (3,))
        xs = random(rng_for(name + "x"), "f32", (length, 3))
        c, ys = f64(c0), []
        for i in range(length):
            c = f64(rnd(c + f64(xs[i]), "f32"))
            ys.append(f64(rnd(c * 2, "f32")))
        ys = np.array(ys).reshape(length, 3)
        reg.add(name, "scan", [c0, xs], [rnd(c, "f32"), rnd(ys, "f32")], args={"reverse": False},
                ref="python loop (lax.scan semantics)")
    # body(w; c, x) = (c * w + x, c), reverse: ys[i] comes from slice i.
    name = "scan_const_reverse_f64"
    w, c0 = random(rng_for(name + "w"), "f64", (2,)), random(rng_for(name + "c"), "f64", (2,))
    xs = random(rng_for(name + "x"), "f64", (4, 2))
    c, ys = c0.copy(), [None] * 4
    for i in reversed(range(4)):
        ys[i] = c.copy()
        c = c * w + xs[i]
    reg.add(name, "scan_with_const", [w, c0, xs], [c, np.array(ys)], args={"reverse": True},
            ref="python loop (lax.scan semantics, reverse)")


def while_loop(reg):
    # cond(i, x) = i < 5; body(i, x) = (i + 1, x * 2 + 1)
    for name, i0 in (("while_i32_f32", 1), ("while_false_at_start", 7)):
        x0 = random(rng_for(name), "f32", (3,))
        i, x = i0, f64(x0)
        while i < 5:
            i, x = i + 1, f64(rnd(f64(rnd(x * 2, "f32")) + 1, "f32"))
        reg.add(name, "while", [arr(i0, "i32"), x0], [arr(i, "i32"), rnd(x, "f32")],
                ref="python loop (lax.while_loop semantics)")


def switch(reg):
    # branches: [x + 1, x * 2, -x]; the index is clamped into range.
    branches = [lambda x: x + 1, lambda x: x * 2, lambda x: -x]
    for idx in (1, 5, -3):
        x = random(rng_for(f"switch_{idx}"), "f32", (3,))
        k = min(max(idx, 0), 2)
        reg.add(f"switch_index_{idx}".replace("-", "neg"), "switch", [arr(idx, "i32"), x],
                [rnd(branches[k](f64(x)), "f32")], ref="python (lax.switch clamps the index)")
    for p in (False, True):
        x = random(rng_for(f"cond_{p}"), "i32", (2, 2))
        y = x * 3 if p else x - 1
        reg.add(f"cond_bool_{str(p).lower()}", "cond", [np.array(p), x], [y.astype(np.int32)],
                ref="python (lax.cond(p, t, f) = switch(p, [f, t]))")


def custom(reg):
    # optests.axpy_mul (registered in the Rust test): (x + alpha * y, x * y)
    for dt in ("f32", "f64", "bf16"):
        x, y = random(rng_for(f"custom_{dt}"), dt, (2, 3)), random(rng_for(f"custom_{dt}y"), dt, (2, 3))
        reg.add(f"custom_axpy_mul_{dt}", "custom", [x, y],
                [rnd(f64(x) + 0.5 * f64(y), dt), rnd(f64(x) * f64(y), dt)], args={"alpha": 0.5},
                ref="formula (the test's registered op)")


def build(reg):
    scan(reg)
    while_loop(reg)
    switch(reg)
    custom(reg)

#!/usr/bin/env python3
"""Golden gradients for rlx-autodiff, computed with JAX (float64).

Writes crates/core/rlx-autodiff/tests/fixtures/<case>/{in_<name>,grad_<name>,loss}.npy for:
mlp_ce (MLP + softmax cross-entropy), layer_norm, rms_norm, attention_causal,
conv_maxpool (conv2d + max-pool), embedding (gather with repeated ids) and rnn_scan (an RNN
cell over 16 steps with lax.scan). Inputs are drawn from a fixed seed; each loss is a scalar
so `jax.grad` gives the gradients the Rust test compares against.

    pip install -r tools/refgen/requirements-autodiff.txt
    python3 tools/refgen/gen_grads.py
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "core", "rlx-autodiff", "tests", "fixtures")
rng = np.random.default_rng(20261130)


def rand(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float64)


def write(case, inputs, wrt, loss_fn):
    """Save inputs, the loss and d loss / d wrt."""
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    names = list(inputs)
    args = [jnp.asarray(inputs[n]) for n in names]
    argnums = tuple(names.index(w) for w in wrt)
    loss, grads = jax.value_and_grad(lambda *a: loss_fn(**dict(zip(names, a))), argnums=argnums)(*args)
    for n, v in inputs.items():
        np.save(os.path.join(d, f"in_{n}.npy"), np.asarray(v))
    np.save(os.path.join(d, "loss.npy"), np.asarray(loss, dtype=np.float64))
    for w, gr in zip(wrt, grads):
        np.save(os.path.join(d, f"grad_{w}.npy"), np.asarray(gr, dtype=np.float64))
    print(case, float(loss))


def cross_entropy(logits, t):
    lsm = jax.nn.log_softmax(logits, axis=1)
    return -jnp.mean(jnp.take_along_axis(lsm, t[:, None], axis=1))


def mlp_ce(x, w1, b1, w2, b2, t):
    h = jax.nn.relu(x @ w1 + b1)
    return cross_entropy(h @ w2 + b2, t)


write(
    "mlp_ce",
    dict(x=rand(4, 6), w1=rand(6, 8), b1=rand(8), w2=rand(8, 3), b2=rand(3), t=np.array([0, 2, 1, 2], np.int32)),
    ["x", "w1", "b1", "w2", "b2"],
    mlp_ce,
)


def layer_norm(x, gamma, beta, w):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return jnp.sum(((x - m) / jnp.sqrt(v + 1e-5) * gamma + beta) * w)


write("layer_norm", dict(x=rand(3, 5), gamma=rand(5, lo=0.5, hi=1.5), beta=rand(5), w=rand(3, 5)),
      ["x", "gamma", "beta"], layer_norm)


def rms_norm(x, gamma, w):
    return jnp.sum(x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * gamma * w)


write("rms_norm", dict(x=rand(3, 5), gamma=rand(5, lo=0.5, hi=1.5), w=rand(3, 5)), ["x", "gamma"], rms_norm)


def attention(q, k, v, w):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    sq, sk = s.shape[-2:]
    s = jnp.where(jnp.tril(jnp.ones((sq, sk), bool)), s, -jnp.inf)
    return jnp.sum(jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v) * w)


write("attention_causal", dict(q=rand(1, 2, 4, 3), k=rand(1, 2, 4, 3), v=rand(1, 2, 4, 3), w=rand(1, 2, 4, 3)),
      ["q", "k", "v"], attention)


def conv_maxpool(x, w, b, wgt):
    y = lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = y + b[None, :, None, None]
    p = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return jnp.sum(p * wgt)


write("conv_maxpool", dict(x=rand(2, 3, 6, 6), w=rand(4, 3, 3, 3), b=rand(4), wgt=rand(2, 4, 3, 3)),
      ["x", "w", "b"], conv_maxpool)


def embedding(table, ids, wgt):
    return jnp.sum(jnp.tanh(table[ids]) * wgt)


write("embedding", dict(table=rand(6, 4), ids=np.array([[0, 3, 3], [5, 0, 1]], np.int32), wgt=rand(2, 3, 4)),
      ["table"], embedding)


def rnn(w, u, b, h0, xs, wgt):
    def cell(h, x):
        h = jnp.tanh(h @ w + x @ u + b)
        return h, h

    _, hs = lax.scan(cell, h0, xs)
    return jnp.sum(hs * wgt)


write("rnn_scan", dict(w=rand(4, 4, lo=-0.6, hi=0.6), u=rand(3, 4), b=rand(4), h0=rand(4), xs=rand(16, 3), wgt=rand(16, 4)),
      ["w", "u", "b", "h0", "xs"], rnn)

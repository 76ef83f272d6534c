#!/usr/bin/env python3
"""Golden conversions for RLX's narrow dtypes, computed with ml_dtypes (what ONNX's reference
Cast and JAX use).

Writes crates/core/rlx-ir/tests/fixtures/narrow_dtypes.json: for each of float8_e4m3fn,
float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float4_e2m1fn, int4, uint4, int2, uint2:
- `decode`: every encoding's value as float32 bits (floats only);
- `inputs` / `codes`: float32 inputs (as bits: NaN and -0 survive JSON) and the encoding that
  `np.float32(x).astype(t)` stores: every representable value, every midpoint between
  neighbours (ties to even), values just off the midpoints, out-of-range values, ±inf, NaN
  and random log-uniform magnitudes.
src/narrow.rs's tests read it with include_str!.

    python3 tools/refgen/gen_narrow_dtypes.py      # tools/refgen/requirements.txt
"""
import json
import os

import ml_dtypes as md
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "core", "rlx-ir", "tests", "fixtures")
rng = np.random.default_rng(20261130)

FLOATS = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn"]
INTS = ["int4", "uint4", "int2", "uint2"]


def bits(a):
    return [int(v) for v in np.asarray(a, np.float32).view(np.uint32)]


def codes(a, t):
    y = np.asarray(a, np.float32).astype(t)
    mask = (1 << (4 if t in (md.float4_e2m1fn, md.int4, md.uint4) else 2 if t in (md.int2, md.uint2) else 8)) - 1
    if np.dtype(t).kind in "iu" or t in (md.int4, md.uint4, md.int2, md.uint2):
        return [int(v) & mask for v in y.astype(np.int64)]
    return [int(v) & mask for v in y.view(np.uint8)]


def main():
    out = {}
    for name in FLOATS:
        t = getattr(md, name)
        n = 16 if name.startswith("float4") else 256
        enc = np.arange(n, dtype=np.uint8)
        vals = enc.view(t).astype(np.float32)
        finite = np.unique(vals[np.isfinite(vals)])
        mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
        near = np.concatenate([np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                               np.nextafter(mids.astype(np.float32), np.float32(-np.inf))])
        top = float(finite.max())
        extra = [top * 1.03, top * 1.1, top * 4, -top * 1.07, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30]
        rand = np.exp(rng.uniform(np.log(1e-6), np.log(top * 2), 200)) * rng.choice([-1, 1], 200)
        xs = np.concatenate([finite, mids, near, extra, rand]).astype(np.float32)
        out[name] = {"decode": bits(vals), "inputs": bits(xs), "codes": codes(xs, t)}
    for name in INTS:
        t = getattr(md, name)
        xs = np.concatenate([np.arange(-20, 21), rng.uniform(-40, 40, 100), [0.5, -0.5, 1.5, -1.5, 7.9, -8.9]])
        xs = xs.astype(np.float32)
        out[name] = {"inputs": bits(xs), "codes": codes(xs, t)}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "narrow_dtypes.json"), "w") as f:
        json.dump({"ml_dtypes": md.__version__, "types": out}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()

"""Shared helpers: dtypes, exact rounding, value generators, the case registry and the writer.

Conventions (read by crates/rlx/tests/ops.rs):
- one `<case>.npz` per case in crates/rlx/tests/fixtures/ops/, arrays `in0, in1, ...` (graph
  inputs, in order) and `out0, out1, ...` (expected outputs);
- bf16 has no numpy dtype: such arrays are stored as uint16 bit patterns under the name
  `inK__bf16` / `outK__bf16`;
- `manifest.json` maps each case to its op record name (`op`), builder arguments (`args`, axes
  exactly as passed to the builder, so possibly negative), per-input pre-ops (`pre`: a transpose
  or broadcast_in_dim applied inside the graph to make the operand non-contiguous) and the
  reference that produced it (`ref`).
"""

import io
import json
import os
import zipfile
import zlib

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16

# RLX dtype names -> numpy storage dtypes.
DT = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(BF16),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u32": np.dtype(np.uint32),
    "bool": np.dtype(np.bool_),
}
FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i8", "i16", "i32", "i64", "u8", "u32"]
SIGNED = ["i8", "i16", "i32", "i64"]
ALL = FLOATS + INTS + ["bool"]

# (significand bits without the hidden one, exponent of the smallest normal, largest finite)
_FMT = {
    "f32": (23, -126, float(np.finfo(np.float32).max)),
    "f16": (10, -14, 65504.0),
    "bf16": (7, -126, float(ml_dtypes.finfo(BF16).max)),
}


def dt_name(a):
    """RLX dtype name of a numpy array."""
    for k, v in DT.items():
        if a.dtype == v:
            return k
    raise ValueError(f"unsupported dtype {a.dtype}")


def rnd(x, dt):
    """Correctly rounded (round-to-nearest-even) conversion of float64 values to `dt`.

    numpy's float64 -> float16/float32 casts are correctly rounded; ml_dtypes' float64 ->
    bfloat16 goes through float32 (double rounding), so bf16 is rounded here by hand."""
    x = np.asarray(x, dtype=np.float64)
    if dt in ("f64", "f32", "f16"):
        with np.errstate(all="ignore"):
            return x.astype(DT[dt])
    mant, min_exp, fmax = _FMT[dt]
    out = x.copy()
    fin = np.isfinite(x) & (x != 0)
    v = x[fin]
    _, e = np.frexp(v)  # v = m * 2^e, 0.5 <= |m| < 1: the leading bit has weight 2^(e-1)
    q = np.ldexp(1.0, np.maximum(e - 1, min_exp) - mant)
    r = np.rint(v / q) * q
    r = np.where(np.abs(r) > fmax, np.copysign(np.inf, v), r)
    out[fin] = r
    return out.astype(DT[dt])


def cast_int(x, dt):
    """Wrap int64 values (or Python ints) to an integer dtype (two's complement)."""
    return np.asarray(x, dtype=np.int64).astype(DT[dt])


def arr(values, dt, shape=None):
    """Values (Python numbers) as an array of `dt`: floats rounded, ints wrapped, bool != 0."""
    if dt in FLOATS:
        a = rnd(np.asarray(values, dtype=np.float64), dt)
    elif dt == "bool":
        a = np.asarray(values).astype(np.bool_)
    else:
        flat = np.asarray(values, dtype=object).ravel()  # keep Python ints exact (no float64 detour)
        a = np.array([int(v) % (1 << 64) for v in flat], dtype=np.uint64)
        a = a.astype(np.int64).astype(DT[dt]).reshape(np.shape(values))
    return a.reshape(shape) if shape is not None else a


def f64(a):
    """Exact float64 view of a float (or int/bool) array."""
    return np.asarray(a).astype(np.float64)


def rng_for(name):
    """A generator seeded from the case name, so each case is reproducible on its own."""
    return np.random.default_rng(zlib.crc32(name.encode()))


NAN, INF = float("nan"), float("inf")
# Inputs every float case sees: signed zeros, NaN, infinities, f32 and f64 subnormals, values
# beyond the f16 range, and magnitudes near the f32 limits.
FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, NAN, INF, -INF, 1e-40, 1e-8, -3e-5, 1e4, -7e4,
                  3e38, -1e300, 1e-310]


def int_specials(dt):
    """Edge values of an integer dtype (wrapped into range for unsigned types)."""
    info = np.iinfo(DT[dt])
    vals = [0, 1, -1, 2, -2, 7, -7, 100, info.min, info.max, info.min + 1, info.max - 1]
    return arr(vals, dt)


def random(rng, dt, shape, scale=1.0):
    """Ordinary random values of a dtype (normal floats, full-range ints, fair bools)."""
    if dt in FLOATS:
        return rnd(rng.standard_normal(shape) * scale, dt)
    if dt == "bool":
        return rng.random(shape) < 0.5
    info = np.iinfo(DT[dt])
    lo, hi = max(int(info.min), -100), min(int(info.max), 100)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(DT[dt])


class Registry:
    """Collects cases; `write` stores them deterministically."""

    def __init__(self):
        self.cases = {}

    def add(self, name, op, ins, outs, args=None, ref="numpy", pre=None):
        """Register case `name` of op record `op` with input and output arrays.

        `pre[k]` is None or a pre-op applied to graph input k inside the graph before the op:
        {"transpose": perm} or {"broadcast_in_dim": {"shape": [...], "dims": [...]}}."""
        if name in self.cases:
            raise ValueError(f"duplicate case {name}")
        ins = [np.asarray(a) for a in ins]
        outs = [np.asarray(a) for a in outs]
        for a in ins + outs:
            dt_name(a)
        meta = {"op": op, "ref": ref}
        if args:
            meta["args"] = args
        if pre and any(p is not None for p in pre):
            meta["pre"] = list(pre) + [None] * (len(ins) - len(pre))
        meta["inputs"] = [f"{dt_name(a)}{list(a.shape)}" for a in ins]
        meta["outputs"] = [f"{dt_name(a)}{list(a.shape)}" for a in outs]
        self.cases[name] = (meta, ins, outs)

    def write(self, out_dir):
        os.makedirs(out_dir, exist_ok=True)
        wanted = set()
        for name, (_, ins, outs) in sorted(self.cases.items()):
            arrays = {}
            for prefix, lst in (("in", ins), ("out", outs)):
                for k, a in enumerate(lst):
                    if a.dtype == DT["bf16"]:
                        arrays[f"{prefix}{k}__bf16"] = a.view(np.uint16)
                    else:
                        arrays[f"{prefix}{k}"] = a
            fname = f"{name}.npz"
            wanted.add(fname)
            _write_if_changed(os.path.join(out_dir, fname), _npz_bytes(arrays))
        manifest = {name: meta for name, (meta, _, _) in sorted(self.cases.items())}
        text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
        _write_if_changed(os.path.join(out_dir, "manifest.json"), text.encode())
        wanted.add("manifest.json")
        for f in os.listdir(out_dir):
            if f not in wanted:
                os.remove(os.path.join(out_dir, f))


def _npz_bytes(arrays):
    """An .npz (zip of .npy) with fixed timestamps, so regenerating changes no bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, a in arrays.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, np.array(a, order="C"), version=(1, 0), allow_pickle=False)
            zi = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, b.getvalue())
    return buf.getvalue()


def _write_if_changed(path, data):
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    with open(path, "wb") as f:
        f.write(data)


def transposed(x, perm):
    """(stored, pre): store x permuted so that transpose(stored, perm) == x inside the graph."""
    inv = list(np.argsort(perm))
    return np.ascontiguousarray(np.transpose(x, inv)), {"transpose": [int(p) for p in perm]}


def broadcast_pre(s, shape, dims):
    """(logical, pre): the operand broadcast_in_dim(s, shape, dims) and its pre-op."""
    expand = [1] * len(shape)
    for i, d in enumerate(dims):
        expand[d] = s.shape[i]
    x = np.broadcast_to(s.reshape(expand), shape)
    return np.ascontiguousarray(x), {"broadcast_in_dim": {"shape": list(shape), "dims": list(dims)}}

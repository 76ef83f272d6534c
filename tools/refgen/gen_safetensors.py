#!/usr/bin/env python3
"""Generate the safetensors fixtures of crates/io/rlx-safetensors/tests/fixtures/.

Every file is written by the `safetensors` Python package (its Rust core, `safetensors.serialize`,
which `safetensors.numpy.save` also calls) from numpy buffers, and the expected values in the
`.json` sidecars are read back with `safetensors.deserialize` (the package's reader), so the Rust
tests compare against the reference implementation on both sides.

    pip install -r tools/refgen/requirements-safetensors.txt
    python tools/refgen/gen_safetensors.py            # rewrite the fixtures
    python tools/refgen/gen_safetensors.py --check    # regenerate in memory, compare, exit 1 if stale

Fixtures (all small, deterministic):

- all_dtypes.safetensors (+ .json): one tensor of every dtype the format knows (BOOL, U8, I8,
  I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E8M0,
  F8_E4M3FNUZ, F8_E5M2FNUZ, F4), with special values (NaN, +-inf, -0, subnormals, extremes), a
  scalar, a size-0 tensor, a 3-D tensor, and `__metadata__`.
- rlx_dtypes.safetensors (+ .json): only the dtypes with an rlx twin; our writer must reproduce
  this file byte for byte from the same tensors and metadata.
- sharded/: model.safetensors.index.json + model-0000{1,2}-of-00002.safetensors (F32, F16,
  BF16), the Hugging Face layout.

Sidecar JSON per tensor: dtype, shape, data_offsets, `hex` (raw little-endian bytes) and, for
dtypes with an rlx twin, `f32_hex`: the little-endian bits of numpy's `astype(float32)` of the
values (BF16 widened by a 16-bit shift, which is exact).
"""

import argparse
import json
import os
import sys

import ml_dtypes
import numpy as np
import safetensors
from safetensors import TensorSpec, deserialize, serialize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "crates", "io", "rlx-safetensors", "tests", "fixtures")

# safetensors header dtype -> (TensorSpec dtype name, numpy dtype of the raw storage)
SPEC = {
    "BOOL": ("bool", np.bool_),
    "U8": ("uint8", np.uint8),
    "I8": ("int8", np.int8),
    "I16": ("int16", np.int16),
    "U16": ("uint16", np.uint16),
    "I32": ("int32", np.int32),
    "U32": ("uint32", np.uint32),
    "I64": ("int64", np.int64),
    "U64": ("uint64", np.uint64),
    "F16": ("float16", np.float16),
    "BF16": ("bfloat16", np.uint16),  # raw bits
    "F32": ("float32", np.float32),
    "F64": ("float64", np.float64),
    "C64": ("complex64", np.complex64),
    "F8_E4M3": ("float8_e4m3fn", np.uint8),
    "F8_E5M2": ("float8_e5m2", np.uint8),
    "F8_E8M0": ("float8_e8m0fnu", np.uint8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", np.uint8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", np.uint8),
    "F4": ("float4_e2m1fn_x2", np.uint8),  # two values per byte; shape given in bytes here
}
RLX = {
    "BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "BF16", "F32", "F64",
    "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
}
# FLOAT8 storage types: values through ml_dtypes (the reference for their semantics).
F8 = {
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
}


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN kept quiet)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    r[nan] = 0x7FC0
    return r


def all_dtype_tensors(rng):
    f32_special = np.array(
        [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3.4028235e38, 1.1754944e-38, 0.1],
        dtype=np.float32,
    )
    t = {}
    t["f32.special"] = ("F32", f32_special.reshape(3, 4))
    t["f32.rand"] = ("F32", rng.standard_normal((2, 3, 5)).astype(np.float32))
    t["f32.scalar"] = ("F32", np.array(-2.75, dtype=np.float32))
    t["f32.empty"] = ("F32", np.zeros((0, 3), dtype=np.float32))
    t["f64.vals"] = ("F64", np.array([np.pi, -np.e, 1e300, -1e-310, np.nan, -0.0], dtype=np.float64))
    t["f16.special"] = (
        "F16",
        np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 6e-8, 65504.0, 0.1], dtype=np.float16).reshape(2, 5),
    )
    t["f16.rand"] = ("F16", rng.standard_normal((4, 6)).astype(np.float16))
    bf = np.concatenate([bf16_bits(f32_special), bf16_bits(rng.standard_normal(12).astype(np.float32))])
    t["bf16.vals"] = ("BF16", bf.reshape(4, 6))
    t["bool.mask"] = ("BOOL", np.array([True, False, False, True, True], dtype=np.bool_))
    t["u8.vals"] = ("U8", np.array([0, 1, 127, 128, 255], dtype=np.uint8))
    t["i8.vals"] = ("I8", np.array([-128, -1, 0, 1, 127], dtype=np.int8))
    t["i16.vals"] = ("I16", np.array([-32768, -1, 0, 32767], dtype=np.int16))
    t["u16.vals"] = ("U16", np.array([0, 1, 65535], dtype=np.uint16))
    t["i32.vals"] = ("I32", np.array([-(2**31), -7, 0, 2**31 - 1], dtype=np.int32).reshape(2, 2))
    t["u32.vals"] = ("U32", np.array([0, 1, 2**32 - 1], dtype=np.uint32))
    t["i64.vals"] = ("I64", np.array([-(2**63), -1, 0, 2**53 + 1, 2**63 - 1], dtype=np.int64))
    t["u64.vals"] = ("U64", np.array([0, 2**64 - 1], dtype=np.uint64))
    t["c64.vals"] = ("C64", np.array([1 + 2j, -0.5j], dtype=np.complex64))
    for name in ["F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"]:
        t[name.lower() + ".raw"] = (name, np.arange(0, 256, 37, dtype=np.uint8))
    t["f4.raw"] = ("F4", np.array([0x10, 0x32, 0xF7], dtype=np.uint8))
    return t


def write(tensors, metadata):
    keep = []
    specs = {}
    for name, (dt, arr) in tensors.items():
        arr = np.array(arr, order="C", copy=True)  # (ascontiguousarray would make a 0-d array 1-d)
        keep.append(arr)
        spec_dtype, _ = SPEC[dt]
        specs[name] = TensorSpec(dtype=spec_dtype, shape=list(arr.shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    return bytes(serialize(specs, metadata=metadata))


def f32_of(dt, raw, shape):
    if dt == "BF16":
        v = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    elif dt in F8:
        v = np.frombuffer(raw, dtype=np.uint8).view(F8[dt]).astype(np.float32)
    else:
        with np.errstate(over="ignore"):  # F64 1e300 -> inf, as numpy's astype
            v = np.frombuffer(raw, dtype=SPEC[dt][1]).astype(np.float32)
    return v.astype("<f4").tobytes().hex()


def sidecar(data):
    """Expected values, read back by the package's own reader."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    out = {"metadata": header.get("__metadata__", {}), "tensors": {}}
    for name, v in deserialize(data):
        raw = bytes(v["data"])
        e = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": header[name]["data_offsets"], "hex": raw.hex()}
        if v["dtype"] in RLX:
            e["f32_hex"] = f32_of(v["dtype"], raw, v["shape"])
        out["tensors"][name] = e
    return json.dumps(out, indent=1, sort_keys=True) + "\n"


def build():
    rng = np.random.default_rng(20261130)
    files = {}
    allt = all_dtype_tensors(rng)
    # One metadata key per file: the serializer emits `__metadata__` from a Rust HashMap, whose
    # order is randomized per process, so several keys would make the bytes non-deterministic.
    meta = {"rlx.fixture": "all dtypes; generated by tools/refgen/gen_safetensors.py"}
    data = write(allt, meta)
    files["all_dtypes.safetensors"] = data
    files["all_dtypes.json"] = sidecar(data).encode()

    rlxt = {k: v for k, v in allt.items() if v[0] in RLX}
    data = write(rlxt, {"producer": "safetensors " + safetensors.__version__})
    files["rlx_dtypes.safetensors"] = data
    files["rlx_dtypes.json"] = sidecar(data).encode()

    shard1 = {
        "model.embed.weight": ("F32", rng.standard_normal((8, 4)).astype(np.float32)),
        "model.layers.0.w": ("F16", rng.standard_normal((4, 4)).astype(np.float16)),
    }
    shard2 = {
        "model.layers.1.w": ("BF16", bf16_bits(rng.standard_normal(16).astype(np.float32)).reshape(4, 4)),
        "model.norm.weight": ("F32", np.linspace(0.5, 2.0, 4, dtype=np.float32)),
    }
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    total = 0
    for fname, shard in zip(names, [shard1, shard2]):
        d = write(shard, {"format": "pt"})
        files["sharded/" + fname] = d
        files["sharded/" + fname.replace(".safetensors", ".json")] = sidecar(d).encode()
        for k, (_, arr) in shard.items():
            weight_map[k] = fname
            total += arr.nbytes
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    files["sharded/model.safetensors.index.json"] = (json.dumps(index, indent=2) + "\n").encode()
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures instead of writing")
    args = ap.parse_args()
    files = build()
    stale = []
    for rel, data in files.items():
        path = os.path.join(OUT, rel)
        if args.check:
            if not os.path.exists(path) or open(path, "rb").read() != data:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {rel} ({len(data)} bytes)")
    if args.check:
        if stale:
            print("stale fixtures:", ", ".join(stale))
            sys.exit(1)
        print(f"all {len(files)} fixtures are current (safetensors {safetensors.__version__}, numpy {np.__version__})")


if __name__ == "__main__":
    main()

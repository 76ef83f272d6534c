#!/usr/bin/env python3
"""Check `rlx inspect --json FILE` against the reference Python readers.

GGUF files are compared with `gguf.GGUFReader` (gguf 0.19.0, the reader behind `gguf-dump`):
version, every metadata key with its type, scalar values, array element type, length and first
elements, and every tensor's name, ggml type, shape, byte size and absolute data offset.
safetensors files are compared with the `safetensors` package (`safe_open` + the raw header):
`__metadata__`, and every tensor's dtype, shape, byte size and offset.

    pip install -r tools/refgen/requirements-gguf.txt -r tools/refgen/requirements-safetensors.txt
    cargo build --release -p rlx-cli
    python tools/refgen/check_inspect.py FILE [FILE ...] [--rlx target/release/rlx]

Prints one summary line per file and exits 1 on any difference.
"""

import argparse
import json
import math
import subprocess
import sys

HEAD = 8  # elements of an array rlx shows


def rlx_json(rlx, path):
    out = subprocess.run([rlx, "inspect", "--json", path], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def same_scalar(a, b):
    if isinstance(b, float):
        if isinstance(a, str):  # non-finite floats are strings in rlx's JSON
            return math.isnan(b) if a == "NaN" else float(a) == b
        return float(a) == b or math.isclose(float(a), b, rel_tol=1e-6)  # f32 printed shortest
    return a == b


def check_gguf(path, r, errors):
    import gguf
    from gguf import GGUFValueType as VT

    try:
        rd = gguf.GGUFReader(path)
    except ValueError as e:  # GGUFReader reads v2 and v3 only
        return f"SKIPPED by the reference ({e})"
    names = {
        VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32", VT.INT32: "i32",
        VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64",
    }
    kv = {k: f for k, f in rd.fields.items() if not k.startswith("GGUF.")}
    version = int(rd.fields["GGUF.version"].parts[-1][0])
    if r["version"] != version:
        errors.append(f"version {r['version']} != {version}")
    if set(kv) != set(r["metadata"]):
        errors.append(f"metadata keys differ: {set(kv) ^ set(r['metadata'])}")
    for k, f in kv.items():
        ours = r["metadata"].get(k)
        t = f.types[0]
        if t == VT.ARRAY:
            sub = f.types[-1]
            vals = f.contents()
            if not isinstance(ours, dict):
                errors.append(f"{k}: {ours!r} is not an array")
                continue
            if len(f.types) > 2:
                # gguf-py flattens nested arrays (contents() and data); compare the flattening.
                flat = [x for inner in ours["values"] for x in inner["values"]]
                if ours["truncated"] or any(i["truncated"] for i in ours["values"]):
                    flat = flat[: len(vals)]
                if flat != vals[: len(flat)] or (not ours["truncated"] and sum(i["len"] for i in ours["values"]) != len(vals)):
                    errors.append(f"{k}: nested {ours} does not flatten to {vals[:HEAD]}")
                continue
            if ours["len"] != len(vals):
                errors.append(f"{k}: array length {ours['len']} != {len(vals)}")
            if ours["elem_type"] != names[sub]:
                errors.append(f"{k}: elem type {ours['elem_type']} != {names[sub]}")
            for a, b in zip(ours["values"], vals[:HEAD]):
                if not same_scalar(a, b):
                    errors.append(f"{k}: element {a!r} != {b!r}")
        else:
            if not same_scalar(ours, f.contents()):
                errors.append(f"{k}: {ours!r} != {f.contents()!r}")
    if r["tensor_count"] != len(rd.tensors):
        errors.append(f"tensor count {r['tensor_count']} != {len(rd.tensors)}")
    for ours, t in zip(r["tensors"], rd.tensors):
        want = {
            "name": t.name,
            "dtype": t.tensor_type.name,
            "shape": [int(d) for d in reversed(t.shape)],
            "bytes": int(t.n_bytes),
            "offset": int(t.data_offset),
        }
        got = {k: ours[k] for k in want}
        if got != want:
            errors.append(f"tensor {t.name}: {got} != {want}")
    return f"{len(kv)} KVs, {len(rd.tensors)} tensors, {sum(int(t.n_bytes) for t in rd.tensors)} tensor bytes"


def check_safetensors(path, r, errors):
    from safetensors import safe_open

    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    meta = header.pop("__metadata__", {}) or {}
    if r["metadata"] != meta:
        errors.append(f"metadata {r['metadata']} != {meta}")
    with safe_open(path, framework="numpy") as f:
        keys = set(f.keys())
    if keys != {t["name"] for t in r["tensors"]}:
        errors.append("tensor names differ")
    for t in r["tensors"]:
        h = header[t["name"]]
        s, e = h["data_offsets"]
        want = {"dtype": h["dtype"], "shape": h["shape"], "bytes": e - s, "offset": 8 + n + s}
        got = {k: t[k] for k in want}
        if got != want:
            errors.append(f"tensor {t['name']}: {got} != {want}")
    return f"{len(meta)} metadata entries, {len(keys)} tensors, {sum(t['bytes'] for t in r['tensors'])} tensor bytes"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rlx", default="target/release/rlx")
    args = ap.parse_args()
    bad = 0
    for path in args.files:
        r = rlx_json(args.rlx, path)
        errors = []
        summary = check_gguf(path, r, errors) if r["format"] == "gguf" else check_safetensors(path, r, errors)
        if r["total_bytes"] != sum(t["bytes"] for t in r["tensors"]):
            errors.append("total_bytes is not the sum")
        status = "OK" if not errors else f"{len(errors)} DIFFERENCES"
        print(f"{path}: {r['format']}: {summary}: {status}")
        for e in errors[:20]:
            print("   ", e)
        bad += bool(errors)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

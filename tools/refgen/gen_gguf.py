#!/usr/bin/env python3
"""Golden fixtures for crates/io/rlx-gguf (see tools/refgen/README-gguf.md).

    python tools/refgen/gen_gguf.py                 # (re)write crates/io/rlx-gguf/tests/fixtures
    python tools/refgen/gen_gguf.py --check-rust    # read back the file our Rust writer produced

Needs the pinned packages of tools/refgen/requirements-gguf.txt (gguf==0.19.0, numpy).

What it writes under crates/io/rlx-gguf/tests/fixtures/:
  quants/<TYPE>.ref.{input.f32,bin,expected.f32}
        deterministic f32 data, quantized by gguf.quants.quantize (the reference quantizer,
        which mirrors llama.cpp's quantize_row_*_ref), and gguf.quants.dequantize of those bytes.
        Only for types the package can quantize.
  quants/<TYPE>.rand.{bin,expected.f32}
        random block bytes with sane f16/f32 scales (every bit pattern of the quant fields), and
        the reference dequantization: gguf.quants.dequantize where the package has it, else the
        numpy formula of llama.cpp's dequantize_row_* (Q8_1, Q8_K) or numpy astype(float32)
        (F64, I8..I64).
  quants/manifest.json   one entry per file set: type, ggml id, block/type size, blocks, source.
  python_writer.gguf / python_writer.json
        a small GGUF written by gguf.GGUFWriter (every scalar metadata type, typed / string /
        nested arrays, custom alignment 64, tensors F32, F16, Q8_0, I32) and the expected values.
  v1_handmade.gguf
        a GGUF v1 file (u32 counts, lengths and dims) packed by hand with struct, since no
        maintained writer emits v1 any more.
All .f32 files are little-endian float32; .bin files are raw ggml blocks.
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "crates/io/rlx-gguf/tests/fixtures"
QDIR = FIX / "quants"

# ggml sizes; Q8_1 is 36 bytes in ggml (gguf 0.19.0's GGML_QUANT_SIZES has a stale 40)
SIZES = {t: gguf.GGML_QUANT_SIZES[t] for t in T}
SIZES[T.Q8_1] = (32, 36)

# types the brief covers (NVFP4 and Q1_0 exist in gguf 0.19.0 but not in rlx-gguf yet)
TYPES = [
    T.F32, T.F16, T.BF16, T.F64, T.I8, T.I16, T.I32, T.I64,
    T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q8_1,
    T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K,
    T.IQ1_S, T.IQ1_M, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S, T.IQ4_NL, T.IQ4_XS,
    T.TQ1_0, T.TQ2_0, T.MXFP4,
]

# types gguf.quants.quantize supports (F32/F16 are astype casts)
REF_QUANT = {T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0, T.MXFP4}

# byte offsets of the f16 scale fields in each block (sanitized in the random-bytes fixtures)
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q8_1: [0, 2],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0],
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.TQ1_0: [52], T.TQ2_0: [64],
}


def n_blocks_for(t):
    bs = SIZES[t][0]
    return 4 if bs == 256 else (8 if bs == 32 else 64)


def sane_f16(rng, n):
    mag = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float16)


def ref_input(t, seed):
    """Deterministic f32 test data: special blocks first, then normal and uniform ones."""
    rng = np.random.default_rng(seed)
    bs = SIZES[t][0]
    nb = n_blocks_for(t)
    if bs == 1:
        x = rng.standard_normal(nb) * 3.0
        x[:4] = [0.0, 1.0, -2.5, 65504.0 if t == T.F16 else 1e30]
        return x.astype(np.float32)
    blocks = []
    blocks.append(np.zeros(bs))                                   # all zero
    blocks.append(np.full(bs, 0.3125))                            # constant
    b = rng.standard_normal(bs) * 0.02
    b[bs // 3] = -1.7                                             # one outlier
    blocks.append(b)
    while len(blocks) < nb:
        k = len(blocks)
        if k % 2:
            blocks.append(rng.standard_normal(bs) * (0.1 * k))
        else:
            blocks.append(rng.uniform(-1.0, 1.0, bs) + 0.25)
    return np.concatenate(blocks).astype(np.float32)


def random_blocks(t, seed):
    rng = np.random.default_rng(seed)
    bs, ts = SIZES[t]
    nb = n_blocks_for(t)
    if bs == 1:
        if t == T.F32:
            return rng.standard_normal(nb).astype(np.float32).view(np.uint8).reshape(nb, ts)
        if t == T.F16:
            return sane_f16(rng, nb).view(np.uint8).reshape(nb, ts)
        if t == T.BF16:
            v = (rng.standard_normal(nb).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            return v.view(np.uint8).reshape(nb, ts)
        if t == T.F64:
            v = rng.standard_normal(nb) * 1e3
            v[0] = 0.1  # not representable in f32: exercises rounding
            return v.astype(np.float64).view(np.uint8).reshape(nb, ts)
        dt = {T.I8: np.int8, T.I16: np.int16, T.I32: np.int32, T.I64: np.int64}[t]
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, nb, dtype=dt, endpoint=True)
        v[0], v[1] = info.min, info.max
        return v.view(np.uint8).reshape(nb, ts)
    raw = rng.integers(0, 256, (nb, ts), dtype=np.uint8)
    for off in F16_FIELDS.get(t, []):
        raw[:, off:off + 2] = sane_f16(rng, nb).view(np.uint8).reshape(nb, 2)
    if t == T.Q8_K:
        raw[:, 0:4] = rng.uniform(1e-3, 0.1, nb).astype(np.float32).view(np.uint8).reshape(nb, 4)
    if t == T.IQ1_M:
        d = sane_f16(rng, nb).view(np.uint16)
        sc = raw[:, 48:56].copy().view(np.uint16)  # (nb, 4)
        for k in range(4):
            sc[:, k] = (sc[:, k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12)
        raw[:, 48:56] = sc.view(np.uint8)
    if t == T.MXFP4:
        raw[:, 0] = rng.integers(100, 150, nb, dtype=np.uint8)
    return raw


def reference_dequant(t, blocks):
    """The reference f32 values of raw blocks (shape (n, type_size), uint8)."""
    blocks = np.ascontiguousarray(blocks)
    if t == T.Q8_1:  # llama.cpp: y = x.qs[j] * d (the sum field s is unused)
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (blocks[:, 4:36].copy().view(np.int8).astype(np.float32) * d).reshape(-1)
    if t == T.Q8_K:  # llama.cpp dequantize_row_q8_K: y = d * qs
        d = blocks[:, 0:4].copy().view(np.float32)
        return (d * blocks[:, 4:260].copy().view(np.int8).astype(np.float32)).reshape(-1)
    if t in (T.F64, T.I8, T.I16, T.I32, T.I64):
        dt = {T.F64: np.float64, T.I8: np.int8, T.I16: np.int16, T.I32: np.int32, T.I64: np.int64}[t]
        return blocks.reshape(-1).view(dt).astype(np.float32)
    return np.asarray(quants.dequantize(blocks, t), dtype=np.float32).reshape(-1)


def write_f32(path, arr):
    path.write_bytes(np.ascontiguousarray(arr, dtype="<f4").tobytes())


def gen_quant_fixtures():
    QDIR.mkdir(parents=True, exist_ok=True)
    manifest = []
    for i, t in enumerate(TYPES):
        bs, ts = SIZES[t]
        entry_base = {"type": t.name, "id": int(t), "block_size": bs, "type_size": ts}
        if t in REF_QUANT:
            x = ref_input(t, 1000 + i)
            q = np.asarray(quants.quantize(x.reshape(1, -1) if bs > 1 else x, t))
            qb = q.view(np.uint8).reshape(-1, ts)
            y = reference_dequant(t, qb)
            write_f32(QDIR / f"{t.name}.ref.input.f32", x)
            (QDIR / f"{t.name}.ref.bin").write_bytes(qb.tobytes())
            write_f32(QDIR / f"{t.name}.ref.expected.f32", y)
            manifest.append({**entry_base, "set": "ref", "blocks": qb.shape[0],
                             "source": "gguf.quants.quantize + gguf.quants.dequantize"})
        raw = random_blocks(t, 2000 + i)
        y = reference_dequant(t, raw)
        assert np.all(np.isfinite(y)), t.name
        (QDIR / f"{t.name}.rand.bin").write_bytes(raw.tobytes())
        write_f32(QDIR / f"{t.name}.rand.expected.f32", y)
        src = ("numpy (llama.cpp formula)" if t in (T.Q8_1, T.Q8_K)
               else "numpy astype(float32)" if t in (T.F64, T.I8, T.I16, T.I32, T.I64)
               else "gguf.quants.dequantize")
        manifest.append({**entry_base, "set": "rand", "blocks": raw.shape[0], "source": src})
    (QDIR / "manifest.json").write_text(json.dumps(
        {"generator": "tools/refgen/gen_gguf.py", "gguf": "0.19.0", "numpy": np.__version__, "sets": manifest},
        indent=1) + "\n")


def python_writer_content():
    """The metadata and tensors of python_writer.gguf (mirrored by the Rust byte-identity test)."""
    f32 = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7.0) / 4.0
    f16 = (np.linspace(-2.0, 2.0, 16, dtype=np.float32).reshape(2, 8)).astype(np.float16)
    x = np.sin(np.arange(128, dtype=np.float32) * 0.37).astype(np.float32).reshape(2, 64)
    q8 = quants.quantize(x, T.Q8_0)
    i32 = np.array([[-3, 0, 7], [2147483647, -2147483648, 1]], dtype=np.int32)
    return f32, f16, x, q8, i32


def gen_python_writer():
    path = FIX / "python_writer.gguf"
    w = gguf.GGUFWriter(str(path), arch="rlxtest")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo, GGUF ✓")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -0.25])
    w.add_array("t.arr_str", ["a", "", "ccc"])
    w.add_array("t.arr_bool", [True, False, True])
    w.add_key_value("t.arr_u16", [1, 65535], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT16)
    w.add_array("t.nested", [[1, 2], [3, 4, 5]])
    f32, f16, x, q8, i32 = python_writer_content()
    w.add_tensor("t.f32", f32)
    w.add_tensor("t.f16", f16)
    w.add_tensor("t.q8_0", q8, raw_dtype=T.Q8_0)
    w.add_tensor("t.i32", i32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    expected = {
        "version": 3,
        "alignment": 64,
        "metadata_keys": ["general.architecture", "general.alignment", "t.u8", "t.i8", "t.u16", "t.i16",
                          "t.u32", "t.i32", "t.f32", "t.u64", "t.i64", "t.f64", "t.bool", "t.str",
                          "t.arr_i32", "t.arr_f32", "t.arr_str", "t.arr_bool", "t.arr_u16", "t.nested"],
        "tensors": {
            "t.f32": {"type": "F32", "shape": list(f32.shape), "values": f32.reshape(-1).tolist()},
            "t.f16": {"type": "F16", "shape": list(f16.shape),
                      "values": f16.astype(np.float32).reshape(-1).tolist()},
            "t.q8_0": {"type": "Q8_0", "shape": list(x.shape),
                       "values": quants.dequantize(q8, T.Q8_0).reshape(-1).tolist(),
                       "input": x.reshape(-1).tolist()},
            "t.i32": {"type": "I32", "shape": list(i32.shape),
                      "values": i32.astype(np.float32).reshape(-1).tolist()},
        },
    }
    # sanity: the package's own reader agrees
    r = gguf.GGUFReader(str(path))
    assert [f for f in r.fields if not f.startswith("GGUF.")] == expected["metadata_keys"], list(r.fields)
    assert r.fields["t.str"].contents() == "héllo, GGUF ✓"
    (FIX / "python_writer.json").write_text(json.dumps(expected, indent=1) + "\n")


def gen_v1():
    """A GGUF v1 file: u32 tensor/kv counts, u32 string and array lengths, u32 dims."""
    def s(x):
        b = x.encode()
        return struct.pack("<I", len(b)) + b

    out = b"GGUF" + struct.pack("<III", 1, 2, 3)  # version 1, 2 tensors, 3 KVs
    out += s("general.architecture") + struct.pack("<I", 8) + s("llama")
    out += s("v1.arr") + struct.pack("<II", 9, 5) + struct.pack("<I", 3) + struct.pack("<iii", 7, -8, 9)  # ARRAY of INT32
    out += s("v1.f32") + struct.pack("<I", 6) + struct.pack("<f", 2.5)
    # tensor infos: name, n_dims u32, dims u32..., type u32, offset u64
    out += s("a") + struct.pack("<III", 2, 4, 2) + struct.pack("<IQ", 0, 0)      # F32, ne = [4, 2]
    out += s("b") + struct.pack("<II", 1, 32) + struct.pack("<IQ", 8, 32)       # Q8_0, ne = [32]
    out += b"\0" * (-len(out) % 32)
    a = np.arange(8, dtype=np.float32) - 3.0
    out += a.tobytes()
    blk = quants.quantize(np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32), T.Q8_0)
    out += blk.tobytes() + b"\0" * (-len(blk.tobytes()) % 32)
    (FIX / "v1_handmade.gguf").write_bytes(out)


def check_rust():
    """Read crates/io/rlx-gguf/tests/fixtures/rust_writer.gguf (made by our GgufWriter) with
    gguf.GGUFReader and check that every quantized tensor dequantizes, with the reference
    dequantizer, bit-identically to its F32 twin `<name>.dequant` (our Rust dequantization)."""
    path = FIX / "rust_writer.gguf"
    r = gguf.GGUFReader(str(path))
    f = r.fields
    assert f["general.architecture"].contents() == "rlxwriter"
    assert f["w.u16"].contents() == 65535 and f["w.i64"].contents() == -5
    assert f["w.f64"].contents() == 0.1 and f["w.bool"].contents() is False
    assert f["w.str"].contents() == "rust ✓"
    assert f["w.arr_str"].contents() == ["x", "yy"]
    assert f["w.arr_u64"].contents() == [1, 2**63]
    assert r.alignment == 128
    tensors = {t.name: t for t in r.tensors}
    n_checked = 0
    for name, t in tensors.items():
        if name.endswith(".dequant"):
            continue
        twin = tensors[name + ".dequant"]
        ref = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        ours = np.asarray(twin.data, dtype=np.float32).reshape(-1)
        assert list(t.shape) == list(twin.shape), name
        assert np.array_equal(ref.view(np.uint32), ours.view(np.uint32)), name
        n_checked += 1
    print(f"rust_writer.gguf: metadata OK, {n_checked} quantized tensors bit-identical "
          f"({', '.join(sorted(t.tensor_type.name for n, t in tensors.items() if not n.endswith('.dequant')))})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-rust", action="store_true", help="only check rust_writer.gguf")
    args = ap.parse_args()
    if args.check_rust:
        check_rust()
        return
    gen_quant_fixtures()
    gen_python_writer()
    gen_v1()
    total = sum(p.stat().st_size for p in FIX.rglob("*") if p.is_file())
    print(f"wrote fixtures under {FIX.relative_to(ROOT)}: {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

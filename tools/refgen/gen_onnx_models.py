#!/usr/bin/env python3
"""Reference sentence embeddings for the real ONNX models (issue #9), from ONNX Runtime.

Tokenizes 16 fixed sentences with the all-MiniLM tokenizer.json (`tools/fetch.sh minilm`),
runs paraphrase-MiniLM-L3-v2 (fp32) and the int8 MiniLM (`tools/fetch.sh minilm-onnx`) in
onnxruntime (1 thread, all graph optimizations off so the reference is the plain graph), takes
the last hidden state [batch, seq, 384], mean-pools it over the attention mask and
L2-normalizes it. Writes crates/io/rlx-onnx/tests/fixtures/minilm_onnx_embeddings.json with the
token ids and masks (so the Rust test needs no tokenizer) and the embeddings (7 significant
digits).

    pip install -r tools/refgen/requirements-onnx.txt
    python3 tools/refgen/gen_onnx_models.py
"""
import json
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

CACHE = Path(os.environ.get("RLX_CACHE", Path.home() / ".cache" / "rlx"))
OUT = Path(__file__).resolve().parents[2] / "crates/io/rlx-onnx/tests/fixtures/minilm_onnx_embeddings.json"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A fast auburn fox leaped above a sleepy hound.",
    "Compilers translate programs into machine code.",
    "I love eating pizza on Friday nights.",
    "The stock market fell sharply this morning.",
    "Rust guarantees memory safety without a garbage collector.",
    "What is the capital city of France?",
    "Paris is the capital of France.",
    "She plays the violin beautifully.",
    "Neural networks learn representations from data.",
    "It is raining heavily outside.",
    "The weather today is wet and stormy.",
    "He forgot his umbrella at the office.",
    "Matrix multiplication dominates transformer inference time.",
    "Hello!",
    "Sentence embeddings map text to vectors so that similar meanings lie close together in space.",
]

# (model file, name of the last-hidden-state output, whether it takes token_type_ids)
MODELS = {
    "paraphrase-MiniLM-L3-v2": ("paraphrase-MiniLM-L3-v2.onnx", "onnx::Shape_422", False),
    "minilm-int8": ("minilm-int8.onnx", "last_hidden_state", True),
}


def main():
    tok = Tokenizer.from_file(str(CACHE / "minilm" / "tokenizer.json"))
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(SENTENCES)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    out = {
        "sentences": SENTENCES,
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "models": {},
    }
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for name, (file, hidden, with_types) in MODELS.items():
        sess = ort.InferenceSession(str(CACHE / "minilm-onnx" / file), opts, providers=["CPUExecutionProvider"])
        feeds = {"input_ids": ids, "attention_mask": mask}
        if with_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (h,) = sess.run([hidden], feeds)
        m = mask[..., None].astype(np.float64)
        pooled = (h.astype(np.float64) * m).sum(1) / m.sum(1)
        emb = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        out["models"][name] = {
            "file": file,
            "hidden_output": hidden,
            "token_type_ids": with_types,
            "embeddings": [[float(f"{v:.7g}") for v in row] for row in emb],
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({len(SENTENCES)} sentences, seq {ids.shape[1]})")


if __name__ == "__main__":
    main()

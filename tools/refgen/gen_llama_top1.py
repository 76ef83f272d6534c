#!/usr/bin/env python3
"""Teacher-forced llama.cpp reference for rlx-models' fast-mode test
(crates/models/rlx-models/tests/fast_mode.rs): for 4 fixed texts of about 128 tokens, the
token ids llama.cpp produces and, at every position, its argmax and top-5 logits after the
tokens up to there.

Compiles tools/refgen/llama_top1.c against a llama.cpp build (libllama from the
llama-cpp-python 0.3.36 sdist, `tools/fetch.sh llama-cpp-src`; built as described in
/work/llama-build/README.txt: GGML_NATIVE=OFF with AVX2/AVX-512/VNNI on) and runs it on the
SmolLM2-135M-Instruct Q4_1 GGUF with 1 thread, one batch per text with logits for every
position, extra buffer types off (the AMX path dies with an illegal instruction on these VMs),
four times:

- `argmax`, `top5_ids`, `top5_logits`: f32 KV cache and flash attention off (`--kv-f32`), so
  llama.cpp's attention is f32 like RLX's default cache and the only arithmetic difference
  left is in the quantized matmuls;
- `argmax_step`, `top5_logits_step`: the same f32 cache, but one token per `llama_decode`
  call, as llama.cpp runs generation (and as the RLX test feeds the texts). llama.cpp's
  attention and f32 products sum in another order in a batch than in a single-token step;
  its own batch and step argmax differ at ~2% of these positions (near-ties);
- `argmax_default`: llama.cpp's default context (f16 KV cache, flash attention auto, which
  turns it on for the CPU). The cache type alone moves llama.cpp's own top-1 at ~3% of these
  positions (near-ties);
- `argmax_default_step`, `top5_logits_default_step`: the default context, one token per
  `llama_decode` call: the reference for fast mode with an f16 cache.

llama.cpp quantizes activations to Q8 inside its quantized dot products, so this is the
reference for RLX's fast mode (`CompileOptions::quantized_activations`), not its exact mode.

    tools/fetch.sh smollm2 && tools/fetch.sh llama-cpp-src
    python3 tools/refgen/gen_llama_top1.py [--model GGUF] [--llama-src DIR] [--llama-lib DIR] [--out JSON]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))

TEXTS = [
    # Prose.
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "combined a screw press with movable metal type. Before his invention, books were copied by "
    "hand, which made them rare and expensive. Within a few decades, printing shops had opened in "
    "more than two hundred cities across Europe, and millions of books were in circulation. The "
    "spread of printed material changed how people learned, argued and worshipped, and it helped "
    "to standardize spelling and grammar in many languages. Historians still debate how quickly "
    "these effects were felt outside the cities.",
    # Code.
    "def merge_sort(items):\n"
    "    \"\"\"Return a sorted copy of items using merge sort.\"\"\"\n"
    "    if len(items) <= 1:\n"
    "        return list(items)\n"
    "    mid = len(items) // 2\n"
    "    left = merge_sort(items[:mid])\n"
    "    right = merge_sort(items[mid:])\n"
    "    out = []\n"
    "    i = j = 0\n"
    "    while i < len(left) and j < len(right):\n"
    "        if left[i] <= right[j]:\n"
    "            out.append(left[i])\n"
    "            i += 1\n"
    "        else:\n"
    "            out.append(right[j])\n"
    "            j += 1\n"
    "    out.extend(left[i:])\n"
    "    out.extend(right[j:])\n"
    "    return out\n",
    # Instructions / list.
    "How to make a simple loaf of bread:\n"
    "1. Mix 500 grams of flour, 10 grams of salt and 7 grams of dried yeast in a large bowl.\n"
    "2. Add 320 millilitres of warm water and stir until a rough dough forms.\n"
    "3. Knead the dough on a floured surface for about ten minutes, until it is smooth.\n"
    "4. Leave it in a covered bowl in a warm place for an hour, until it has doubled in size.\n"
    "5. Shape the dough into a loaf, place it in a tin and let it rise for another thirty minutes.\n"
    "6. Bake at 220 degrees Celsius for thirty minutes, then cool it on a rack.",
    # Dialogue / facts.
    "Teacher: Can anyone tell me why the sky is blue?\n"
    "Student: Is it because the ocean reflects onto the sky?\n"
    "Teacher: That is a common idea, but not quite. Sunlight contains all colors of light. When it "
    "passes through the atmosphere, it hits tiny molecules of nitrogen and oxygen. Blue light has a "
    "shorter wavelength, so it is scattered much more than red light. This is called Rayleigh "
    "scattering.\n"
    "Student: So why are sunsets red and orange?\n"
    "Teacher: At sunset, the light travels through much more air, so most of the blue is scattered "
    "away before it reaches us.",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--llama-src", default=os.path.join(CACHE, "llama-cpp-src", "vendor", "llama.cpp"))
    ap.add_argument("--llama-lib", default="/work/llama-build/bin")
    ap.add_argument("--out", default=os.path.join(
        ROOT, "crates", "models", "rlx-models", "tests", "fixtures", "smollm2_llama_top1.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "llama_top1")
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-std=c11", "-Wall", f"-I{a.llama_src}/include", f"-I{a.llama_src}/ggml/include",
                        os.path.join(HERE, "llama_top1.c"), f"-L{a.llama_lib}", "-lllama", "-lggml", "-lggml-base",
                        f"-Wl,-rpath,{a.llama_lib}", "-o", exe], check=True)
        files = []
        for k, t in enumerate(TEXTS):
            p = os.path.join(tmp, f"text{k}.txt")
            with open(p, "w") as f:
                f.write(t)
            files.append(p)
        runs = []
        for flags in (["--kv-f32"], ["--kv-f32", "--step"], [], ["--step"]):
            out = subprocess.run([exe, *flags, a.model, *files], check=True, capture_output=True, text=True).stdout
            runs.append([json.loads(line) for line in out.strip().splitlines()])
    rows, step, default, default_step = runs
    if any(len(r) != len(TEXTS) for r in runs):
        sys.exit(f"expected {len(TEXTS)} result lines per run, got {[len(r) for r in runs]}")
    for r, s, d, ds in zip(rows, step, default, default_step):
        if not r["ids"] == s["ids"] == d["ids"] == ds["ids"]:
            sys.exit("the runs tokenized differently")
        r["argmax_step"] = s["argmax"]
        r["top5_logits_step"] = s["top5_logits"]
        r["argmax_default"] = d["argmax"]
        r["argmax_default_step"] = ds["argmax"]
        r["top5_logits_default_step"] = ds["top5_logits"]
    fixture = {
        "generator": "tools/refgen/gen_llama_top1.py (llama.cpp from llama-cpp-python 0.3.36, 1 thread, "
                     "use_extra_bufts = false; argmax/top5: f32 KV cache, no flash attention, one batch per text; "
                     "argmax_step/top5_logits_step: the same, one token per llama_decode call; "
                     "argmax_default: default context (f16 KV cache, flash attention auto: on); "
                     "argmax_default_step/top5_logits_default_step: the same, one token per llama_decode call)",
        "model": os.path.basename(a.model),
        "texts": [dict(text=t, **r) for t, r in zip(TEXTS, rows)],
    }
    with open(a.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    n = sum(len(r["ids"]) for r in rows)
    print(f"wrote {a.out}: {len(rows)} texts, {n} positions ({', '.join(str(len(r['ids'])) for r in rows)})")


if __name__ == "__main__":
    main()

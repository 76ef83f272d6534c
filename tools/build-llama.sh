#!/usr/bin/env bash
# Builds llama.cpp's CPU backend and `llama-bench` (the speed peer of bench/compare_llm.py,
# bench/compare_qmatmul.py and tools/refgen/gen_llama_top1.py) into /work/llama-build, or $1.
# Never run in CI (about 15 minutes on 2 cores).
#
# Source: llama-cpp-python 0.3.36's vendored llama.cpp (`tools/fetch.sh llama-cpp-src`).
# GGML_NATIVE=OFF with AVX2 / AVX-512 / VNNI switched on: the native build enables AMX, whose
# tiles llama.cpp uses without asking the kernel for permission (arch_prctl), which dies with an
# illegal instruction on these VMs. cmake and ninja come from PyPI when the system lacks them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${RLX_CACHE:-$HOME/.cache/rlx}"
OUT="${1:-/work/llama-build}"
SRC="$CACHE/llama-cpp-src/vendor/llama.cpp"
[ -d "$SRC" ] || "$ROOT/tools/fetch.sh" llama-cpp-src
command -v cmake >/dev/null && command -v ninja >/dev/null || pip install -q cmake ninja
cmake -S "$SRC" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
cmake --build "$OUT" --target llama-bench llama ggml -j "${JOBS:-$(nproc)}"
echo "built: $OUT/bin/llama-bench"

#!/usr/bin/env bash
# Builds llama.cpp's CPU backend and `llama-bench` (the speed peer of bench/compare_llm.py,
# bench/compare_qmatmul.py and tools/refgen/gen_llama_top1.py) into /work/llama-build, or $1.
# Never run in CI (about 15 minutes on 2 cores).
#
# Source: llama-cpp-python 0.3.36's vendored llama.cpp (`tools/fetch.sh llama-cpp-src`).
# GGML_NATIVE=OFF with AVX2 (and AVX-512 / VNNI where the CPU has them) switched on: the native build enables AMX, whose
# tiles llama.cpp uses without asking the kernel for permission (arch_prctl), which dies with an
# illegal instruction on these VMs. cmake and ninja come from PyPI when the system lacks them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${RLX_CACHE:-$HOME/.cache/rlx}"
OUT="${1:-/work/llama-build}"
SRC="$CACHE/llama-cpp-src/vendor/llama.cpp"
[ -d "$SRC" ] || "$ROOT/tools/fetch.sh" llama-cpp-src
command -v cmake >/dev/null && command -v ninja >/dev/null || pip install -q cmake ninja
# AVX-512 flags only where this CPU has them: an AVX2-only host (e.g. AMD Zen 3) would die
# with an illegal instruction in an AVX-512 build.
has() { grep -m1 '^flags' /proc/cpuinfo | grep -qw "$1"; }
AVX512=OFF; VNNI=OFF; VBMI=OFF; BF16=OFF
if has avx512f && has avx512bw && has avx512vl; then
  AVX512=ON
  has avx512_vnni && VNNI=ON
  has avx512vbmi && VBMI=ON
  has avx512_bf16 && BF16=ON
fi
cmake -S "$SRC" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=$AVX512 -DGGML_AVX512_VNNI=$VNNI -DGGML_AVX512_VBMI=$VBMI -DGGML_AVX512_BF16=$BF16 \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
cmake --build "$OUT" --target llama-bench llama ggml -j "${JOBS:-$(nproc)}"
echo "built: $OUT/bin/llama-bench"

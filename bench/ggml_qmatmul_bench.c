// llama.cpp's CPU quantized matmul, timed on the shapes of crates/backends/rlx-cpu/examples/qmatmul_bench.rs.
// Built and run by bench/compare_qmatmul.py against a local llama.cpp build (never in CI):
//   cc -O2 ggml_qmatmul_bench.c -I$SRC/ggml/include -L$BUILD/bin -lggml -lggml-base -lggml-cpu -lm
// ggml_mul_mat(W[N=4096, K=4096] of TYPE, x[M, K] f32) through ggml_graph_compute_with_ctx on
// 1 thread: the plain (not repacked) ggml CPU path, i.e. ggml_vec_dot_<type>_q8_<0|K> against
// activations quantized by ggml, plus its f32 result write. Weights are the same LCG values
// as the Rust bench, quantized by ggml_quantize_chunk (no importance matrix).
// Usage: ggml_qmatmul_bench TYPE M MIN_REPS  -> "RESULT TYPE M llama <median ms>"
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static void fill(float *v, size_t n, unsigned long long s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = ((float)(s >> 40) / (float)(1ULL << 24)) * 2.0f - 1.0f;
    }
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s TYPE M MIN_REPS\n", argv[0]); return 2; }
    enum ggml_type ty = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *name = ggml_type_name((enum ggml_type)t);
        if (name && strcasecmp(name, argv[1]) == 0) ty = (enum ggml_type)t;
    }
    if (ty == GGML_TYPE_COUNT) { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    const int K = 4096, N = 4096, M = atoi(argv[2]), reps = atoi(argv[3]);
    ggml_cpu_init();
    struct ggml_init_params ip = { .mem_size = (size_t)1 << 30, .mem_buffer = NULL, .no_alloc = false };
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, ty, K, N);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    float *wf = malloc(sizeof(float) * (size_t)K * N);
    fill(wf, (size_t)K * N, 7);
    ggml_quantize_chunk(ty, wf, w->data, 0, N, K, NULL);
    fill((float *)x->data, (size_t)K * M, 3);
    struct ggml_tensor *y = ggml_mul_mat(ctx, w, x);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, 1);  // warm-up
    double *times = malloc(sizeof(double) * 100000);
    int n = 0;
    double start = now();
    while ((n < reps || now() - start < 1.0) && n < 100000) {
        double t = now();
        ggml_graph_compute_with_ctx(ctx, gf, 1);
        times[n++] = now() - t;
    }
    qsort(times, n, sizeof(double), cmp);
    printf("RESULT %s %d llama %.4f %zu\n", ggml_type_name(ty), M, times[n / 2] * 1e3, ggml_nbytes(w));
    return 0;
}

// llama.cpp's CPU quantized matmul, timed on the shapes of crates/backends/rlx-cpu/examples/qmatmul_bench.rs.
// Built and run by bench/compare_qmatmul.py against a local llama.cpp build (never in CI):
//   cc -O2 ggml_qmatmul_bench.c -I$SRC/ggml/include -L$BUILD/bin -lggml -lggml-base -lggml-cpu -lm
// ggml_mul_mat(W[N=4096, K=4096] of TYPE, x[M, K] f32) through ggml_graph_compute_with_ctx on
// 1 thread: the plain (not repacked) ggml CPU path, i.e. ggml_vec_dot_<type>_q8_<0|K> against
// activations quantized by ggml, plus its f32 result write. Weights are the same LCG values
// as the Rust bench, quantized by ggml_quantize_chunk (no importance matrix).
// Usage: ggml_qmatmul_bench TYPE M MIN_REPS [COPIES]  -> "RESULT TYPE M llama <median ms> <bytes>"
// COPIES (default 1): the weights in that many copies, each run on the next (as the Rust bench:
// enough copies put every run's weights in DRAM).
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
    if (argc < 4) { fprintf(stderr, "usage: %s TYPE M MIN_REPS [COPIES]\n", argv[0]); return 2; }
    enum ggml_type ty = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *name = ggml_type_name((enum ggml_type)t);
        if (name && strcasecmp(name, argv[1]) == 0) ty = (enum ggml_type)t;
    }
    if (ty == GGML_TYPE_COUNT) { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    const int K = 4096, N = 4096, M = atoi(argv[2]), reps = atoi(argv[3]);
    const int copies = argc > 4 && atoi(argv[4]) > 1 ? atoi(argv[4]) : 1;
    ggml_cpu_init();
    size_t wbytes = ggml_row_size(ty, K) * N;
    size_t mem = (size_t)copies * (wbytes + 2 * sizeof(float) * (size_t)K * M + ggml_graph_overhead() + 4096) + ((size_t)1 << 20);
    struct ggml_init_params ip = { .mem_size = mem, .mem_buffer = NULL, .no_alloc = false };
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    float *wf = malloc(sizeof(float) * (size_t)K * N);
    fill(wf, (size_t)K * N, 7);
    fill((float *)x->data, (size_t)K * M, 3);
    struct ggml_cgraph **gf = malloc(sizeof(*gf) * copies);
    struct ggml_tensor *w = NULL, *w0 = NULL;
    for (int c = 0; c < copies; c++) {
        w = ggml_new_tensor_2d(ctx, ty, K, N);
        if (c == 0) ggml_quantize_chunk(ty, wf, w->data, 0, N, K, NULL), w0 = w;
        else memcpy(w->data, w0->data, wbytes);
        gf[c] = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf[c], ggml_mul_mat(ctx, w, x));
    }
    // One plan and one work buffer for every call (ggml_graph_compute_with_ctx would take a
    // new work buffer from ctx per call, inside the timed region, until ctx runs out).
    struct ggml_cplan plan = ggml_graph_plan(gf[0], 1, NULL);
    for (int c = 1; c < copies; c++) {
        size_t ws = ggml_graph_plan(gf[c], 1, NULL).work_size;
        if (ws > plan.work_size) plan.work_size = ws;
    }
    plan.work_data = malloc(plan.work_size ? plan.work_size : 1);
    ggml_graph_compute(gf[0], &plan);  // warm-up
    double *times = malloc(sizeof(double) * 100000);
    int n = 0;
    double start = now();
    while ((n < reps || now() - start < 1.0) && n < 100000) {
        struct ggml_cgraph *g = gf[(n + 1) % copies];
        double t = now();
        ggml_graph_compute(g, &plan);
        times[n++] = now() - t;
    }
    qsort(times, n, sizeof(double), cmp);
    printf("RESULT %s %d llama %.4f %zu\n", ggml_type_name(ty), M, times[n / 2] * 1e3, ggml_nbytes(w));
    return 0;
}

// This machine's memory roofline for a workload that reads N bytes and writes N bytes: a copy
// of 64 MiB of f32 into another 64 MiB (both far larger than the caches' share a core gets),
// 16 lanes at a time, written with non-temporal stores (no read for ownership, as RLX's fused
// kernels write large results). THREADS threads each copy a contiguous share; 9 runs, the
// median in GB/s counting 128 MiB (in + out) per run, the same bytes compare_fusion.py counts
// for its chain / softmax / layer_norm. Built and run by bench/compare_fusion.py in the same
// minutes as the workloads (this VM's speed changes within minutes).
//
//   cc -O3 -mavx512f -pthread bench/stream_copy.c -o stream_copy && ./stream_copy 2
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { N = 16 << 20, RUNS = 9, MAX_THREADS = 64 };

static float *src, *dst;

struct share {
    size_t lo, hi;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *copy(void *arg) {
    const struct share *s = arg;
    for (size_t i = s->lo; i < s->hi; i += 16) _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
    _mm_sfence();
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "usage: stream_copy [THREADS 1..%d]\n", MAX_THREADS);
        return 2;
    }
    src = aligned_alloc(64, (size_t)N * sizeof(float));
    dst = aligned_alloc(64, (size_t)N * sizeof(float));
    if (!src || !dst) return 1;
    for (size_t i = 0; i < N; i++) src[i] = (float)(i & 1023), dst[i] = 0;
    struct share shares[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    size_t per = (N / 16 + threads - 1) / threads * 16;
    for (int t = 0; t < threads; t++) {
        shares[t].lo = (size_t)t * per < N ? (size_t)t * per : N;
        shares[t].hi = shares[t].lo + per < N ? shares[t].lo + per : N;
    }
    double gbs[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int t = 1; t < threads; t++) pthread_create(&tid[t], NULL, copy, &shares[t]);
        copy(&shares[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        gbs[r] = 2.0 * N * sizeof(float) / (now() - t0) / 1e9;
    }
    for (int i = 0; i < RUNS; i++)
        for (int j = i + 1; j < RUNS; j++)
            if (gbs[j] < gbs[i]) { double x = gbs[i]; gbs[i] = gbs[j]; gbs[j] = x; }
    // Read the copy back so it cannot be dropped.
    double check = 0;
    for (size_t i = 0; i < N; i += 4096) check += dst[i];
    printf("stream copy threads=%d median %.2f GB/s (in + out)%s\n", threads, gbs[RUNS / 2], check < 0 ? " " : "");
    return 0;
}

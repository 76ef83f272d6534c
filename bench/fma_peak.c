// This core's f32 FMA ceiling: 12 independent chains of FMAs on registers (no memory), 512-bit
// where the compiler targets AVX-512, else 256-bit (AVX2 + FMA), 7 runs of 50M iterations, the
// median in GFLOP/s (2 flops per lane per FMA). Built and run by bench/ceiling.py next to the
// workloads it compares, so every share of peak it prints is of the same minutes' peak (this
// VM's speed changes by up to 2x within minutes).
//
//   cc -O3 -march=native bench/fma_peak.c -o fma_peak && taskset -c 0 ./fma_peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#ifdef __AVX512F__
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#define REDUCE _mm512_reduce_add_ps
#else
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
static float REDUCE(__m256 v) {
    float l[8];
    _mm256_storeu_ps(l, v);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    enum { RUNS = 7, CHAINS = 12 };
    const long iters = 50000000;
    double gflops[RUNS];
    float keep = 0;
    for (int r = 0; r < RUNS; r++) {
        vec a[CHAINS];
        const vec b = SET1(0.999999f), c = SET1(1e-7f);
        for (int i = 0; i < CHAINS; i++) a[i] = SET1((float)i);
        double t0 = now();
        for (long it = 0; it < iters; it++) {
            _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) a[i] = FMADD(a[i], b, c);
            // Keep every chain in a register across iterations.
            __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]),
                             "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11]));
        }
        double t = now() - t0;
        for (int i = 0; i < CHAINS; i++) keep += REDUCE(a[i]);
        gflops[r] = iters * (double)CHAINS * 2 * LANES / t / 1e9;
    }
    for (int i = 0; i < RUNS; i++)
        for (int j = i + 1; j < RUNS; j++)
            if (gflops[j] < gflops[i]) { double x = gflops[i]; gflops[i] = gflops[j]; gflops[j] = x; }
    printf("fma median %.1f GFLOP/s%s\n", gflops[RUNS / 2], keep == 12345.f ? " " : "");
    return 0;
}

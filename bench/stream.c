// This machine's memory rooflines, measured in the same minutes as the workloads they bound
// (this VM's speed changes within minutes):
// - `copy`: for a workload that reads N bytes and writes N bytes, a copy of MIB MiB of f32
//   (default 64) into another buffer as large, 16 lanes at a time, written with non-temporal
//   stores (no read for ownership, as RLX's fused kernels write large results); GB/s counts
//   in + out, the bytes bench/compare_fusion.py counts for its chain / softmax / layer_norm.
// - `read`: for a workload that reads N bytes once per step (an LLM's weights per generated
//   token), a sum over a buffer of MIB MiB, read again every run (bench/compare_llm.py passes
//   the model's weight bytes, so the buffer sits in the cache level the weights do).
// THREADS threads each take a contiguous share; 9 runs, the median in GB/s.
//
// Both buffers sit on 2 MiB transparent huge pages where Linux offers them (`madvise
// (MADV_HUGEPAGE)` before the first write, as RLX does for its weights, arena buffers and large
// tensors, and numpy for its arrays): on 4 KiB pages the hardware prefetchers stop at every page
// boundary, and on an AMD Zen 4 VM with THP in `madvise` mode one core then read 17.5 instead
// of 30 GB/s and copied 30 instead of 49. The line reports how many MiB the kernel gave as huge
// pages (`AnonHugePages` in /proc/self/smaps_rollup, the buffers rounded up to whole 2 MiB
// pages; "huge pages n/a" elsewhere).
//
// AVX-512 where the compiler targets it (bench/_common.py's `build_c` passes `-march=native`),
// else AVX (an AVX2-only CPU such as AMD Zen 3 reads at the same rate 8 lanes at a time).
//
//   cc -O3 -march=native -pthread bench/stream.c -o stream && ./stream copy 2 && ./stream read 1 97
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

enum { RUNS = 9, MAX_THREADS = 64 };

static float *src, *dst;

struct share {
    size_t lo, hi;
    float sum;
};

// `bytes` rounded up to whole 2 MiB pages, 2 MiB aligned, advised onto huge pages before its
// first write (the caller writes it next).
static float *alloc_huge(size_t bytes) {
    size_t huge = (size_t)2 << 20, len = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, len)) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}

// MiB of this process's memory on transparent huge pages, or -1 where unknown.
static long huge_mib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#ifdef __AVX512F__
static void *copy(void *arg) {
    const struct share *s = arg;
    for (size_t i = s->lo; i < s->hi; i += 16) _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
    _mm_sfence();
    return NULL;
}

static void *read_sum(void *arg) {
    struct share *s = arg;
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t i = s->lo;
    for (; i + 64 <= s->hi; i += 64)
        for (int k = 0; k < 4; k++) a[k] = _mm512_add_ps(a[k], _mm512_load_ps(src + i + 16 * k));
    for (; i < s->hi; i += 16) a[0] = _mm512_add_ps(a[0], _mm512_load_ps(src + i));
    s->sum += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
    return NULL;
}
#else
// Shares are multiples of 16 floats (64-byte aligned), so two 8-lane steps cover each.
static void *copy(void *arg) {
    const struct share *s = arg;
    for (size_t i = s->lo; i < s->hi; i += 8) _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
    _mm_sfence();
    return NULL;
}

static void *read_sum(void *arg) {
    struct share *s = arg;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    size_t i = s->lo;
    for (; i + 32 <= s->hi; i += 32)
        for (int k = 0; k < 4; k++) a[k] = _mm256_add_ps(a[k], _mm256_load_ps(src + i + 8 * k));
    for (; i < s->hi; i += 8) a[0] = _mm256_add_ps(a[0], _mm256_load_ps(src + i));
    __m256 t = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
    float l[8];
    _mm256_storeu_ps(l, t);
    s->sum += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    return NULL;
}
#endif

// `s` as a whole number in `lo ..= hi`, or -1.
static long parse(const char *s, long lo, long hi) {
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv) {
    int is_copy = argc > 1 && !strcmp(argv[1], "copy"), is_read = argc > 1 && !strcmp(argv[1], "read");
    long threads = argc > 2 ? parse(argv[2], 1, MAX_THREADS) : 1;
    long mib = argc > 3 ? parse(argv[3], 1, 65536) : 64;
    const char *bad = argc < 2 || argc > 4    ? "expected 1 to 3 arguments"
                      : !is_copy && !is_read ? "the mode must be copy or read"
                      : threads < 0          ? "THREADS out of range or not a whole number"
                      : mib < 0              ? "MIB out of range or not a whole number"
                                             : NULL;
    if (bad) {
        fprintf(stderr, "stream: %s\nusage: stream copy|read [THREADS 1..%d] [MIB 1..65536]\n", bad, MAX_THREADS);
        return 2;
    }
    // f32 elements, a whole number of 64-float steps.
    size_t n = (size_t)mib << 18;
    src = alloc_huge(n * sizeof(float));
    dst = is_copy ? alloc_huge(n * sizeof(float)) : NULL;
    if (!src || (is_copy && !dst)) return 1;
    for (size_t i = 0; i < n; i++) src[i] = (float)(i & 1023);
    if (is_copy) memset(dst, 0, n * sizeof(float));
    struct share shares[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    size_t per = (n / 16 + threads - 1) / threads * 16;
    for (int t = 0; t < threads; t++) {
        shares[t].lo = (size_t)t * per < n ? (size_t)t * per : n;
        shares[t].hi = shares[t].lo + per < n ? shares[t].lo + per : n;
        shares[t].sum = 0;
    }
    void *(*work)(void *) = is_copy ? copy : read_sum;
    double bytes = (is_copy ? 2.0 : 1.0) * n * sizeof(float), gbs[RUNS];
    for (int r = 0; r < RUNS + 1; r++) {
        double t0 = now();
        for (int t = 1; t < threads; t++) pthread_create(&tid[t], NULL, work, &shares[t]);
        work(&shares[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        // The first run (pages first touched by this thread's caches) is a warm-up.
        if (r > 0) gbs[r - 1] = bytes / (now() - t0) / 1e9;
    }
    for (int i = 0; i < RUNS; i++)
        for (int j = i + 1; j < RUNS; j++)
            if (gbs[j] < gbs[i]) { double x = gbs[i]; gbs[i] = gbs[j]; gbs[j] = x; }
    // Use what was computed so it cannot be dropped.
    double check = 0;
    for (int t = 0; t < threads; t++) check += shares[t].sum;
    if (is_copy)
        for (size_t i = 0; i < n; i += 4096) check += dst[i];
    long hp = huge_mib();
    char pages[64];
    if (hp < 0) snprintf(pages, sizeof pages, "huge pages n/a");
    else snprintf(pages, sizeof pages, "huge pages %ld MiB", hp);
    printf("stream %s threads=%ld mib=%ld median %.2f GB/s%s (%s)%s\n", argv[1], threads, mib, gbs[RUNS / 2],
           is_copy ? " (in + out)" : "", pages, check == -1 ? " " : "");
    return 0;
}

// Teacher-forced top-1 reference from llama.cpp (libllama), for rlx-models' fast-mode test.
// Driven by tools/refgen/gen_llama_top1.py, which compiles and runs it.
//
//   llama_top1 [--kv-f32] [--step] MODEL.gguf TEXT_FILE...
//
// For each text file: tokenize as llama.cpp's common_tokenize(add_special = true,
// parse_special = false), evaluate all tokens in one batch with logits at every position
// (with --step: one token per llama_decode call, as generation runs, logits after each),
// 1 thread, default context params otherwise (f16 KV cache, flash attention auto, as
// llama.cpp runs by default; with --kv-f32: f32 KV cache and flash attention off, so attention
// is f32 and only the quantized matmuls differ from an f32 forward), extra buffer types
// (AMX/repacking) off. Prints one JSON line per text on stdout:
// {"ids": [...], "argmax": [...], "top5_ids": [[...]...], "top5_logits": [[...]...]}
// where row p is the prediction after tokens 0..=p.

#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(s); return NULL; }
    fclose(f);
    s[n] = 0;
    return s;
}

int main(int argc, char **argv) {
    int kv_f32 = 0, step = 0;
    for (; argc > 1 && strncmp(argv[1], "--", 2) == 0; argv++, argc--) {
        if (strcmp(argv[1], "--kv-f32") == 0) kv_f32 = 1;
        else if (strcmp(argv[1], "--step") == 0) step = 1;
        else { fprintf(stderr, "unknown flag %s\n", argv[1]); return 2; }
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s [--kv-f32] [--step] MODEL.gguf TEXT_FILE...\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;  // the AMX path dies with an illegal instruction on these VMs
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    for (int a = 2; a < argc; a++) {
        char *text = read_file(argv[a]);
        if (!text) { fprintf(stderr, "cannot read %s\n", argv[a]); return 1; }
        int cap = (int)strlen(text) + 8;
        llama_token *ids = malloc(sizeof(llama_token) * (size_t)cap);
        int n = llama_tokenize(vocab, text, (int)strlen(text), ids, cap, true, false);
        if (n <= 0) { fprintf(stderr, "tokenize failed for %s\n", argv[a]); return 1; }

        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_batch = 512;
        cp.n_ubatch = 512;
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        if (kv_f32) {
            cp.type_k = GGML_TYPE_F32;
            cp.type_v = GGML_TYPE_F32;
            cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        }
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
        // Logits of every position, copied out (a step's logits are overwritten by the next).
        float *logits = malloc(sizeof(float) * (size_t)n * (size_t)n_vocab);
        const int per_call = step ? 1 : n;
        struct llama_batch b = llama_batch_init(per_call, 0, 1);
        for (int start = 0; start < n; start += per_call) {
            for (int i = 0; i < per_call; i++) {
                b.token[i] = ids[start + i];
                b.pos[i] = start + i;
                b.n_seq_id[i] = 1;
                b.seq_id[i][0] = 0;
                b.logits[i] = 1;
            }
            b.n_tokens = per_call;
            if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
            for (int i = 0; i < per_call; i++) {
                memcpy(logits + (size_t)(start + i) * n_vocab, llama_get_logits_ith(ctx, i), sizeof(float) * n_vocab);
            }
        }

        printf("{\"ids\": [");
        for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("], \"argmax\": [");
        int (*top)[5] = malloc(sizeof(int[5]) * (size_t)n);
        float (*topv)[5] = malloc(sizeof(float[5]) * (size_t)n);
        for (int i = 0; i < n; i++) {
            const float *l = logits + (size_t)i * n_vocab;
            for (int k = 0; k < 5; k++) { top[i][k] = -1; topv[i][k] = -1e30f; }
            for (int t = 0; t < n_vocab; t++) {  // insertion into a sorted top 5 (first on ties)
                if (l[t] <= topv[i][4]) continue;
                int k = 4;
                while (k > 0 && l[t] > topv[i][k - 1]) { top[i][k] = top[i][k - 1]; topv[i][k] = topv[i][k - 1]; k--; }
                top[i][k] = t;
                topv[i][k] = l[t];
            }
            printf("%s%d", i ? ", " : "", top[i][0]);
        }
        printf("], \"top5_ids\": [");
        for (int i = 0; i < n; i++) {
            printf("%s[%d, %d, %d, %d, %d]", i ? ", " : "", top[i][0], top[i][1], top[i][2], top[i][3], top[i][4]);
        }
        printf("], \"top5_logits\": [");
        for (int i = 0; i < n; i++) {
            printf("%s[%.4f, %.4f, %.4f, %.4f, %.4f]", i ? ", " : "", topv[i][0], topv[i][1], topv[i][2],
                   topv[i][3], topv[i][4]);
        }
        printf("]}\n");
        fflush(stdout);
        free(top);
        free(topv);
        free(logits);
        llama_batch_free(b);
        llama_free(ctx);
        free(ids);
        free(text);
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

// Every named intermediate tensor of llama.cpp (libllama) at one single-token step, for finding
// where RLX's fast mode first parts from llama.cpp bit for bit (a diagnostic, not a fixture).
//
//   llama_dump_layers MODEL.gguf OUT.txt STEP TOKEN_ID...
//
// Feeds the token ids one per llama_decode call (positions 0, 1, ...), as llama_top1 --step
// does, with an f32 KV cache, flash attention off, 1 thread and extra buffer types off. At the
// call that feeds token STEP (0-based), libllama's eval callback writes each f32 tensor whose
// name has a layer suffix ("Qcur-5", "kq_soft_max-5", "ffn_out-5", ...) to OUT.txt: a header
// line "T NAME OP ne NE0 NE1 NE2 NE3", then its values row by row as C hex floats ("%a", exact).
// After each step it writes "LOGITS step S:" and the first three logits.
//
// Build against the libllama of tools/build-llama.sh (S = the llama.cpp source):
//   gcc -O1 tools/refgen/llama_dump_layers.c -I$S/include -I$S/ggml/include -L/work/llama-build/bin
//   -lllama -lggml -lggml-base -Wl,-rpath,/work/llama-build/bin -o /tmp/llama_dump_layers
//
// Session 16 used it to show that, at the second step of SmolLM2-135M Q4_1, RoPE, scores,
// softmax and the attention output computed in llama.cpp's order match bit for bit through
// layer 4 and that layer 5's inputs differ (bench/RESULTS.md, "Session 16").

#include "ggml.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cur_step = 0, dump_step = 0;
static FILE *out;

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static bool on_tensor(struct ggml_tensor *t, bool ask, void *user) {
    (void)user;
    const int layered = strchr(t->name, '-') != NULL;
    if (ask) return layered;  // only these are handed over after compute
    if (!layered || cur_step != dump_step) return true;
    if (t->type != GGML_TYPE_F32) {
        fprintf(out, "S %s %s type %d (not f32, skipped)\n", t->name, ggml_op_desc(t), (int)t->type);
        return true;
    }
    fprintf(out, "T %s %s ne %lld %lld %lld %lld\n", t->name, ggml_op_desc(t), (long long)t->ne[0],
            (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                const char *row = (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    float v;
                    memcpy(&v, row + i0 * t->nb[0], sizeof v);
                    fprintf(out, "%a ", v);
                }
                fputc('\n', out);
            }
    return true;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.txt STEP TOKEN_ID...\n", argv[0]);
        return 2;
    }
    dump_step = atoi(argv[3]);
    const int n = argc - 4;
    if (dump_step < 0 || dump_step >= n) {
        fprintf(stderr, "STEP %d is not one of the %d steps\n", dump_step, n);
        return 2;
    }
    out = fopen(argv[2], "w");
    if (!out) { fprintf(stderr, "cannot write %s\n", argv[2]); return 1; }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;  // the AMX path dies with an illegal instruction on these VMs
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = on_tensor;
    cp.cb_eval_user_data = NULL;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    struct llama_batch b = llama_batch_init(1, 0, 1);
    for (int s = 0; s < n; s++) {
        cur_step = s;
        b.token[0] = atoi(argv[4 + s]);
        b.pos[0] = s;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 0;
        b.logits[0] = 1;
        b.n_tokens = 1;
        if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
        const float *l = llama_get_logits_ith(ctx, 0);
        fprintf(out, "LOGITS step %d: %a %a %a\n", s, l[0], l[1], l[2]);
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    fclose(out);
    return 0;
}

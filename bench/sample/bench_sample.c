// bench_sample: per-token cost of the sampler chain and of JSON-schema masking on a
// Qwen2-sized vocabulary (151936 tokens), compared with the decode time of a 0.5B model
// (~20 ms/token at 2 threads).
//
// The vocabulary comes from tiny-qwen2-f32.gguf's tokenizer.ggml.tokens (byte-level BPE
// pieces decoded to bytes) when the gguf module is built and the fixture exists, else a
// synthetic one; either way it is padded to 151936 tokens.
//
// usage: bench_sample [path/to/model.gguf] [steps]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sample.h"
#ifdef BENCH_HAVE_GGUF
#include "gguf/gguf.h"
#endif

#define N_VOCAB   151936
#define DECODE_MS 20.0

static uint64_t rng_state = 0x1234567;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

// CPU time of this thread: the build machine is shared, wall time would measure the others.
static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

struct vocab_src {
    char **pieces;
    uint32_t *lens;
    bool *eog;
    int32_t n_real;
    const char *origin;
};

// GPT-2 byte-level BPE: printable bytes stand for themselves, the others were shifted to
// U+0100 and up in byte order.
static int byte_of_codepoint(uint32_t cp)
{
    static int table[512];
    static bool init;
    if (!init) {
        for (int i = 0; i < 512; i++)
            table[i] = -1;
        int n = 0;
        for (int b = 0; b < 256; b++) {
            bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            table[printable ? b : 256 + n++] = b;
        }
        init = true;
    }
    return cp < 512 ? table[cp] : -1;
}

#ifdef BENCH_HAVE_GGUF
static bool load_gguf(struct vocab_src *v, const char *path)
{
    struct gguf *g = NULL;
    struct err e = {0};
    if (gguf_open(&g, path, &e) != 0)
        return false;
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.tokens");
    enum gguf_value_type t;
    uint64_t n = 0;
    if (!kv || !gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n) || n == 0 || n > N_VOCAB) {
        gguf_close(g);
        return false;
    }
    uint32_t eos = UINT32_MAX;
    gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos);
    for (uint64_t i = 0; i < n; i++) {
        struct str s;
        if (!gguf_arr_str(kv, i, &s))
            continue;
        char *out = malloc(s.len + 1);
        size_t k = 0;
        bool special = s.len > 2 && s.ptr[0] == '<' && s.ptr[s.len - 1] == '>';
        for (size_t j = 0; j < s.len;) {
            uint8_t c = (uint8_t)s.ptr[j];
            uint32_t cp = c;
            size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (j + l > s.len)
                break;
            if (l == 2)
                cp = ((c & 0x1Fu) << 6) | (s.ptr[j + 1] & 0x3Fu);
            else if (l == 3)
                cp = ((c & 0x0Fu) << 12) | ((s.ptr[j + 1] & 0x3Fu) << 6) | (s.ptr[j + 2] & 0x3Fu);
            int b = special ? -1 : byte_of_codepoint(cp);
            if (b >= 0) {
                out[k++] = (char)b;
            } else {  // specials are rendered as their literal text
                memcpy(out + k, s.ptr + j, l);
                k += l;
            }
            j += l;
        }
        v->pieces[i] = out;
        v->lens[i] = (uint32_t)k;
        v->eog[i] = i == eos || (s.len == 10 && memcmp(s.ptr, "<|im_end|>", 10) == 0) ||
                    (s.len == 13 && memcmp(s.ptr, "<|endoftext|>", 13) == 0);
    }
    v->n_real = (int32_t)n;
    gguf_close(g);
    return true;
}
#endif

// Synthetic tokens: the 256 bytes, then random 2-8 character pieces of letters, digits,
// spaces and JSON punctuation (prefixes of each other, as real vocabularies have).
static void fill_synthetic(struct vocab_src *v, int32_t from)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz ABCDEFG0123456789\"{}[],:._-";
    for (int32_t i = from; i < N_VOCAB; i++) {
        if (i < 256) {
            v->pieces[i] = malloc(1);
            v->pieces[i][0] = (char)i;
            v->lens[i] = 1;
            continue;
        }
        uint32_t len = 2 + (uint32_t)(urand() * 7);
        v->pieces[i] = malloc(len);
        v->pieces[i][0] = urand() < 0.4 ? ' ' : alphabet[(int)(urand() * 26)];
        for (uint32_t j = 1; j < len; j++)
            v->pieces[i][j] =
                alphabet[(int)(urand() * (urand() < 0.8 ? 26 : sizeof(alphabet) - 1))];
        v->lens[i] = len;
    }
}

static void fill_logits(float *l, int32_t n)
{
    // roughly model-like: a normal background (sd 2.5) and a handful of plausible tokens
    // standing out by 14-20
    for (int32_t i = 0; i < n; i += 2) {
        double u1 = urand() + 1e-12, u2 = urand();
        double r = sqrt(-2 * log(u1)) * 2.5;
        l[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n)
            l[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    for (int j = 0; j < 8; j++)
        l[(int32_t)(urand() * n)] += (float)(14 + urand() * 6);
}

// Greedy longest-match tokenization of text with the vocabulary (for "model-like" runs that
// follow a target document).
static int32_t *tokenize(const struct vocab_src *v, const char *text, int *n_out)
{
    size_t n = strlen(text);
    int32_t *ids = malloc((n + 1) * sizeof(int32_t));
    int k = 0;
    for (size_t pos = 0; pos < n;) {
        int32_t best = -1;
        uint32_t best_len = 0;
        for (int32_t i = 0; i < N_VOCAB; i++) {
            uint32_t l = v->lens[i];
            if (l > best_len && l <= n - pos && !v->eog[i] &&
                memcmp(v->pieces[i], text + pos, l) == 0) {
                best = i;
                best_len = l;
            }
        }
        if (best < 0) {
            free(ids);
            *n_out = 0;
            return NULL;
        }
        ids[k++] = best;
        pos += best_len;
    }
    *n_out = k;
    return ids;
}

static int32_t hostile = -1;  // when >= 0, a token the grammar never allows is boosted

static void run(const char *name, const struct sample_vocab *vocab, const struct sample_options *o,
                const struct sample_grammar *g, int steps, const int32_t *follow, int n_follow,
                int32_t eog)
{
    struct sampler *s = NULL;
    struct err e = {0};
    if (sample_new(&s, vocab, o, g, &e) != 0) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return;
    }
    for (int i = 0; i < 64; i++)
        sample_feed_prompt(s, (int32_t)(urand() * 5000));
    float *l = malloc(N_VOCAB * sizeof(float));
    double total = 0;
    int done = 0, k = 0;
    for (int step = 0; step < steps; step++) {
        fill_logits(l, N_VOCAB);
        if (follow)  // the "model" strongly prefers the next token of a valid document
            l[k < n_follow ? follow[k] : eog] += 40.0f;
        if (hostile >= 0)
            l[hostile] += 80.0f;
        int32_t tok;
        double t0 = now_us();
        int rc = sample_next(s, l, &tok, &e);
        total += now_us() - t0;
        done++;
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", name, e.msg);
            break;
        }
        if (follow) {
            if (k < n_follow && tok == follow[k])
                k++;
            else if (k >= n_follow)
                break;  // EOG
            else {
                fprintf(stderr, "%s: the sampler left the document at token %d\n", name, k);
                break;
            }
        } else if (g && sample_grammar_complete(s) && tok == eog) {
            sample_free(s);  // restart the document
            sample_new(&s, vocab, o, g, &e);
        }
    }
    double us = total / done;
    printf("%-44s %9.1f us/token  %6.2f %% of %.0f ms decode  (%d tokens, %llu full masks)\n", name,
           us, us / (DECODE_MS * 10.0), DECODE_MS, done,
           (unsigned long long)sample_full_mask_count(s));
    free(l);
    sample_free(s);
}

int main(int argc, char **argv)
{
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    if (steps <= 0)
        steps = 200;
    struct vocab_src v = {0};
    v.pieces = calloc(N_VOCAB, sizeof(char *));
    v.lens = calloc(N_VOCAB, sizeof(uint32_t));
    v.eog = calloc(N_VOCAB, sizeof(bool));
    v.origin = "synthetic";
#ifdef BENCH_HAVE_GGUF
    char path[4096];
    if (argc > 1)
        snprintf(path, sizeof(path), "%s", argv[1]);
    else if (getenv("OLLAMA_SHARED_DIR"))
        snprintf(path, sizeof(path), "%s/fixtures/tiny-qwen2-f32.gguf",
                 getenv("OLLAMA_SHARED_DIR"));
    else
        snprintf(path, sizeof(path), "%s/../shared/fixtures/tiny-qwen2-f32.gguf",
                 OLLAMA_SOURCE_DIR);
    if (load_gguf(&v, path))
        v.origin = path;
#endif
    fill_synthetic(&v, v.n_real);
    int32_t eog = N_VOCAB - 1;
    if (v.n_real == 0) {
        v.lens[eog] = 0;
        v.eog[eog] = true;
    } else {
        for (int32_t i = 0; i < v.n_real; i++)
            if (v.eog[i]) {
                eog = i;
                break;
            }
    }
    struct sample_vocab *vocab = NULL;
    struct err e = {0};
    double t0 = now_us();
    if (sample_vocab_new(&vocab, N_VOCAB, (const char *const *)v.pieces, v.lens, v.eog, &e)) {
        fprintf(stderr, "vocab: %s\n", e.msg);
        return 1;
    }
    printf("vocabulary: %d tokens (%d from %s), built in %.1f ms\n", N_VOCAB, v.n_real, v.origin,
           (now_us() - t0) / 1e3);

    struct sample_options o;
    sample_options_default(&o);
    o.seed = 1;
    run("default chain (top_k 40, top_p .9, T .8)", vocab, &o, NULL, steps, NULL, 0, eog);
    o.repeat_penalty = 1.1f;
    o.presence_penalty = 0.5f;
    run("default + penalties (last 64)", vocab, &o, NULL, steps, NULL, 0, eog);
    sample_options_default(&o);
    o.seed = 1;
    o.temperature = 0;
    run("greedy (temperature 0)", vocab, &o, NULL, steps, NULL, 0, eog);
    sample_options_default(&o);
    o.seed = 1;
    o.top_k = 0;
    run("top_k off, top_p .9", vocab, &o, NULL, steps, NULL, 0, eog);
    o.top_p = 1;
    o.min_p = 0.05f;
    run("min_p .05 only", vocab, &o, NULL, steps, NULL, 0, eog);
    sample_options_default(&o);
    o.seed = 1;
    o.top_k = 0;
    o.typical_p = 0.9f;
    run("top_k off, typical_p .9", vocab, &o, NULL, steps / 4, NULL, 0, eog);
    sample_options_default(&o);
    o.seed = 1;
    o.mirostat = 2;
    run("mirostat 2", vocab, &o, NULL, steps, NULL, 0, eog);
    o.mirostat = 1;
    run("mirostat 1", vocab, &o, NULL, steps, NULL, 0, eog);

    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"string\"}},\"ok\":{\"type\":\"boolean\"}},"
                         "\"required\":[\"name\",\"age\",\"tags\",\"ok\"]}";
    const char *doc = "{\"name\": \"Jane Smith lives in a small town\", \"age\": 42, \"tags\": "
                      "[\"alpha\", \"beta\", \"gamma delta\"], \"ok\": true}";
    struct sample_grammar *gs = NULL, *gj = NULL;
    t0 = now_us();
    if (sample_format_compile_text(&gs, schema, strlen(schema), &e) ||
        sample_format_compile_text(&gj, "\"json\"", 6, &e)) {
        fprintf(stderr, "schema: %s\n", e.msg);
        return 1;
    }
    printf("schema compiled in %.1f ms\n", (now_us() - t0) / 1e3 / 2);
    int n_follow = 0;
    int32_t *follow = tokenize(&v, doc, &n_follow);
    sample_options_default(&o);
    o.seed = 1;
    if (follow) {
        run("schema, model follows the format", vocab, &o, gs, steps, follow, n_follow, eog);
        run("format json, model follows the format", vocab, &o, gj, steps, follow, n_follow, eog);
    }
    run("schema, random logits", vocab, &o, gs, steps / 2, NULL, 0, eog);
    run("format json, random logits", vocab, &o, gj, steps / 2, NULL, 0, eog);
    for (int32_t i = 0; i < N_VOCAB && hostile < 0; i++)
        if (v.lens[i] == 1 && v.pieces[i][0] == 0x01)
            hostile = i;  // byte 0x01 is never valid JSON text: every step needs the full mask
    if (follow && hostile >= 0)
        run("schema, full mask every token (worst case)", vocab, &o, gs, steps, follow, n_follow,
            eog);
    free(follow);
    sample_grammar_free(gs);
    sample_grammar_free(gj);
    sample_vocab_free(vocab);
    for (int32_t i = 0; i < N_VOCAB; i++)
        free(v.pieces[i]);
    free(v.pieces);
    free(v.lens);
    free(v.eog);
    return 0;
}

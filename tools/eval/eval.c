// eval: evaluates a prompt with the engine and prints one JSON object with
// the prompt ids, the top logits at the last prompt position and a greedy
// continuation, for tests and for comparing against another engine:
//
//   eval MODEL.gguf (--prompt TEXT | --ids "1 2 3") [--top 10] [--greedy N] [-t THREADS]
//                   [--kv f16|f32|q8_0|q4_0] [--ctx N]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static void usage(void)
{
    fprintf(stderr, "usage: eval MODEL.gguf (--prompt TEXT | --ids \"1 2 3\") [--top 10] "
                    "[--greedy N] [-t THREADS] [--kv f16|f32|q8_0|q4_0] [--ctx N]\n");
    exit(2);
}

static int64_t int_arg(const char *s, int64_t min, int64_t max)
{
    int64_t v;
    struct err e = {0};
    if (str_to_i64(s, min, max, &v, &e) < 0) {
        fprintf(stderr, "eval: %s: %s\n", s, e.msg);
        exit(2);
    }
    return v;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;  // strict: ties go to the lower id
    return best;
}

// A JSON string; bytes that are not valid UTF-8 (a piece cut inside a
// character) become U+FFFD so the output always parses.
static void json_string(struct buf *b, const char *s, size_t n)
{
    buf_append_char(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
            if (len > 1 && i + len <= n && utf8_valid(s + i, len)) {
                buf_append(b, s + i, len);
                i += len;
            } else {
                buf_append_str(b, "\\ufffd");
                i++;
            }
            continue;
        }
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c == '\n')
            buf_append_str(b, "\\n");
        else if (c == '\t')
            buf_append_str(b, "\\t");
        else if (c == '\r')
            buf_append_str(b, "\\r");
        else if (c < 0x20)
            buf_printf(b, "\\u%04x", c);
        else
            buf_append_char(b, (char)c);
        i++;
    }
    buf_append_char(b, '"');
}

int main(int argc, char **argv)
{
    const char *path = NULL, *prompt = NULL, *ids_arg = NULL;
    int top = 10, greedy = 0;
    struct model_options o = {0};
    o.n_ctx = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has)
            prompt = argv[++i];
        else if (!strcmp(a, "--ids") && has)
            ids_arg = argv[++i];
        else if (!strcmp(a, "--top") && has)
            top = (int)int_arg(argv[++i], 0, 1 << 20);
        else if (!strcmp(a, "--greedy") && has)
            greedy = (int)int_arg(argv[++i], 0, 1 << 20);
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has)
            o.n_threads = (int)int_arg(argv[++i], 1, 1024);
        else if (!strcmp(a, "--ctx") && has)
            o.n_ctx = (int)int_arg(argv[++i], 1, 1 << 24);
        else if (!strcmp(a, "--kv") && has) {
            int k = model_kv_type_parse(argv[++i]);
            if (k < 0)
                usage();
            o.kv_type = (enum model_kv_type)k;
        } else if (a[0] != '-' && !path)
            path = a;
        else
            usage();
    }
    if (!path || (!prompt == !ids_arg))
        usage();

    struct err e = {0};
    struct model *m;
    if (model_load(&m, path, &o, &e) < 0) {
        fprintf(stderr, "eval: %s\n", e.msg);
        return 1;
    }
    int cap = model_n_ctx(m);
    int32_t *ids = xcalloc((size_t)cap + 1, sizeof(int32_t));
    int n = 0;
    if (ids_arg) {
        const char *p = ids_arg;
        for (;;) {
            while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
                p++;
            if (!*p)
                break;
            size_t len = strcspn(p, " ,\t\n");
            char num[32];
            if (len >= sizeof num || n >= cap) {
                fprintf(stderr, "eval: bad or too many ids\n");
                return 1;
            }
            memcpy(num, p, len);
            num[len] = 0;
            ids[n++] = (int32_t)int_arg(num, 0, INT32_MAX);
            p += len;
        }
    } else {
        int rc = model_tokenize(m, prompt, strlen(prompt), true, false, ids, cap, &e);
        if (rc < 0) {
            fprintf(stderr, "eval: %s\n", e.msg);
            return 1;
        }
        n = rc;
    }
    if (n == 0) {
        fprintf(stderr, "eval: empty prompt\n");
        return 1;
    }
    if (n + greedy > cap) {
        fprintf(stderr, "eval: prompt + greedy tokens exceed the context of %d\n", cap);
        return 1;
    }

    int32_t *pos = xcalloc((size_t)cap, sizeof(int32_t)),
            *slot = xcalloc((size_t)cap, sizeof(int32_t));
    for (int i = 0; i < n; i++)
        pos[i] = i;
    struct model_batch b = {n, ids, pos, slot, NULL};
    if (model_decode(m, &b, &e) < 0) {
        fprintf(stderr, "eval: %s\n", e.msg);
        return 1;
    }
    int n_vocab = model_n_vocab(m);
    const float *logits = model_logits(m, n - 1);

    struct buf out;
    buf_init(&out, 0);
    buf_append_str(&out, "{\"prompt_ids\": [");
    for (int i = 0; i < n; i++)
        buf_printf(&out, "%s%d", i ? ", " : "", ids[i]);
    buf_append_str(&out, "], \"top\": [");
    if (top > n_vocab)
        top = n_vocab;
    int *order = xcalloc((size_t)top + 1, sizeof(int));
    for (int k = 0; k < top; k++) {
        int best = -1;
        for (int i = 0; i < n_vocab; i++) {
            bool used = false;
            for (int j = 0; j < k && !used; j++)
                used = order[j] == i;
            if (!used && (best < 0 || logits[i] > logits[best]))
                best = i;
        }
        order[k] = best;
        buf_printf(&out, "%s[%d, %.6f]", k ? ", " : "", best, (double)logits[best]);
    }
    buf_append_str(&out, "], \"greedy\": [");
    struct buf text;
    buf_init(&text, 0);
    int32_t tok = argmax(logits, n_vocab);
    for (int g = 0; g < greedy; g++) {
        buf_printf(&out, "%s%d", g ? ", " : "", tok);
        char piece[256];
        int pn = model_token_to_piece(m, tok, piece, sizeof piece);
        if (pn > 0)
            buf_append(&text, piece, (size_t)pn);
        if (g + 1 == greedy)
            break;
        int32_t p = n + g;
        struct model_batch one = {1, &tok, &p, slot, NULL};
        if (model_decode(m, &one, &e) < 0) {
            fprintf(stderr, "eval: %s\n", e.msg);
            return 1;
        }
        tok = argmax(model_logits(m, 0), n_vocab);
    }
    buf_append_str(&out, "], \"greedy_text\": ");
    json_string(&out, text.data ? text.data : "", text.len);
    buf_append_str(&out, "}\n");
    fputs(buf_cstr(&out), stdout);
    buf_deinit(&out);
    buf_deinit(&text);
    free(order);
    free(ids);
    free(pos);
    free(slot);
    model_free(m);
    return 0;
}

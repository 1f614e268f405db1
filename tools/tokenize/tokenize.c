// tokenize: print the token ids of stdin for a GGUF vocabulary, or decode ids
// back to text. Like llama.cpp's llama-tokenize, for tests and for anyone
// checking a vocabulary.
//
//   tokenize MODEL.gguf [--no-bos] [--no-special] < text     ids, one line
//   tokenize MODEL.gguf --decode [--no-special] < ids         text
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"

#define MAX_INPUT_BYTES ((size_t)1 << 30)

static int usage(void)
{
    fprintf(stderr,
            "usage: tokenize MODEL.gguf [--no-bos] [--no-special] < text\n"
            "       tokenize MODEL.gguf --decode [--no-special] < ids\n"
            "  --no-bos      leave out the tokens the model adds around a text (BOS; CLS/SEP)\n"
            "  --no-special  special-token text stays text (decode: do not render them)\n"
            "  --decode      read token ids, print the text\n");
    return 2;
}

static int read_stdin(struct buf *b, struct err *e)
{
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), stdin)) > 0)
        if (buf_append(b, tmp, n) < 0)
            return err_set(e, ERR_TOO_LARGE, "input larger than %zu bytes", MAX_INPUT_BYTES);
    if (ferror(stdin))
        return err_set(e, ERR_IO, "read stdin: %s", strerror(errno));
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    bool no_bos = false, no_special = false, decode = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-bos") == 0)
            no_bos = true;
        else if (strcmp(argv[i], "--no-special") == 0)
            no_special = true;
        else if (strcmp(argv[i], "--decode") == 0)
            decode = true;
        else if (argv[i][0] == '-' || path)
            return usage();
        else
            path = argv[i];
    }
    if (!path)
        return usage();

    struct err e = {0};
    struct gguf *g = NULL;
    struct tokenizer *t = NULL;
    struct buf in, out;
    buf_init(&in, MAX_INPUT_BYTES);
    buf_init(&out, 0);
    struct tokenizer_ids ids = {0};
    int rc = gguf_open(&g, path, &e);
    if (rc == 0)
        rc = tokenizer_load(&t, g, &e);
    if (rc == 0)
        rc = read_stdin(&in, &e);
    if (rc < 0)
        goto out;

    if (!decode) {
        rc = tokenizer_encode(t, in.data ? in.data : "", in.len, !no_bos, !no_special, &ids, &e);
        if (rc < 0)
            goto out;
        if (buf_reserve(&out, ids.len * 12 + 2) < 0) {
            rc = err_set(&e, ERR_NOMEM, NULL);
            goto out;
        }
        for (size_t i = 0; i < ids.len; i++) {
            char tmp[16];
            int n = 0;
            uint32_t v = (uint32_t)ids.data[i];
            do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            if (i)
                out.data[out.len++] = ' ';
            while (n)
                out.data[out.len++] = tmp[--n];
        }
        out.data[out.len++] = '\n';
        out.data[out.len] = 0;
    } else {
        const char *p = buf_cstr(&in);
        for (;;) {
            while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',')
                p++;
            if (!*p)
                break;
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v > INT32_MAX) {
                rc = err_set(&e, ERR_INVALID, "not a token id: %.20s", p);
                goto out;
            }
            tokenizer_ids_push(&ids, (int32_t)v);
            p = end;
        }
        rc = tokenizer_decode(t, ids.data, ids.len, false, !no_special, &out, &e);
        if (rc < 0)
            goto out;
    }
    fwrite(out.data ? out.data : "", 1, out.len, stdout);
out:
    if (rc < 0)
        fprintf(stderr, "tokenize: %s\n", e.msg[0] ? e.msg : err_str(rc));
    tokenizer_ids_deinit(&ids);
    buf_deinit(&in);
    buf_deinit(&out);
    tokenizer_free(t);
    gguf_close(g);
    return rc < 0 ? 1 : 0;
}

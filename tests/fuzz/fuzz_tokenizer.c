// libFuzzer target for the tokenizer. First byte < 0x80: arbitrary text
// through the committed llama-spm (SPM), gpt-2 (BPE) and bert-bge (WordPiece)
// vocabularies, with special parsing on and off, then decoded whole and
// streamed (GPT-2 must round-trip byte for byte; streaming must equal the
// whole decode). First byte >= 0x80: the rest is a GGUF image whose
// tokenizer metadata is loaded and, when accepted, used.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tokenizer *models[3];

static struct tokenizer *load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/fixtures/vocab/ggml-vocab-%s.gguf", OLLAMA_SOURCE_DIR,
             name);
    struct err e = {0};
    struct gguf *g = NULL;
    struct tokenizer *t = NULL;
    if (gguf_open(&g, path, &e) < 0 || tokenizer_load(&t, g, &e) < 0) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, e.msg);
        abort();
    }
    gguf_close(g);
    return t;
}

static int fuzz_load(const uint8_t *data, size_t size)
{
    struct gguf *g = NULL;
    struct tokenizer *t = NULL;
    struct err e = {0};
    if (gguf_open_memory(&g, data, size, &e) == 0 && tokenizer_load(&t, g, &e) == 0) {
        gguf_close(g);
        g = NULL;
        static const char text[] = "Hello <s> world <|im_end|> ab\n\xff\xc3 \xe2\x96\x81 123";
        struct tokenizer_ids ids = {0};
        if (tokenizer_encode(t, text, sizeof(text) - 1, true, true, &ids, &e) < 0)
            abort();
        struct buf out;
        buf_init(&out, 0);
        if (tokenizer_decode(t, ids.data, ids.len, false, true, &out, &e) < 0)
            abort();
        for (int32_t i = 0; i < tokenizer_n_vocab(t) && i < 4096; i++) {
            struct str p = tokenizer_piece(t, i, true);
            buf_append(&out, p.ptr, p.len);
            (void)tokenizer_is_eog(t, i);
        }
        buf_deinit(&out);
        tokenizer_ids_deinit(&ids);
        tokenizer_free(t);
    }
    gguf_close(g);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!models[0]) {
        models[0] = load("llama-spm");
        models[1] = load("gpt-2");
        models[2] = load("bert-bge");
    }
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (ctl & 0x80)
        return fuzz_load(data + 1, size - 1);
    const struct tokenizer *t = models[(ctl & 3) % 3];
    bool add_special = ctl & 4, parse_special = ctl & 8;

    struct tokenizer_ids ids = {0};
    struct err e = {0};
    if (tokenizer_encode(t, text, len, add_special, parse_special, &ids, &e) < 0)
        abort();  // any bytes are valid input
    struct buf full, streamed;
    buf_init(&full, 0);
    buf_init(&streamed, 0);
    if (tokenizer_decode(t, ids.data, ids.len, false, false, &full, &e) < 0)
        abort();
    struct tokenizer_stream s;
    tokenizer_stream_init(&s, t, false, tokenizer_add_space_prefix(t));
    for (size_t i = 0; i < ids.len; i++)
        if (tokenizer_stream_push(&s, ids.data[i], &streamed, &e) < 0)
            abort();
    tokenizer_stream_flush(&s, &streamed, &e);
    if (streamed.len != full.len || memcmp(buf_cstr(&streamed), buf_cstr(&full), full.len) != 0)
        abort();
    if (t == models[1] && !add_special && !parse_special &&
        (full.len != len || memcmp(buf_cstr(&full), text, len) != 0))
        abort();
    buf_deinit(&full);
    buf_deinit(&streamed);
    tokenizer_ids_deinit(&ids);
    return 0;
}

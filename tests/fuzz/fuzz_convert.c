// libFuzzer target for convert/'s readers of untrusted files: the first byte
// picks the reader, the rest is its input. 0: a safetensors image (header
// length, JSON header, offsets and dtypes against the data); 2: a
// SentencePiece tokenizer.model (protobuf lengths and wire types); 3: a
// WordPiece vocab.txt with tokenizer_config.json and config.json (NUL
// separated); 4: sentence-transformers' modules.json and the Pooling
// config.json (NUL separated); otherwise the vocabulary reader over
// tokenizer.json, tokenizer_config.json and config.json texts separated by
// NUL bytes. Accepted tensors are touched at both ends so a view past the
// image is caught.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void fuzz_safetensors(const uint8_t *p, size_t n)
{
    struct st_set set = {0};
    struct err e = {0};
    if (st_parse(&set, p, n, "fuzz.safetensors", &e) == 0)
        for (size_t i = 0; i < set.n; i++)
            if (set.v[i].n_bytes)
                sink ^= set.v[i].data[0] ^ set.v[i].data[set.v[i].n_bytes - 1];
    st_set_free(&set);
}

// Splits at the first two NULs into up to three texts (NULL when absent).
static void split3(const uint8_t *p, size_t n, const char *part[3], size_t len[3])
{
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n && k < 3; i++) {
        if (i == n || (p[i] == 0 && k < 2)) {
            part[k] = (const char *)p + start;
            len[k] = i - start;
            k++;
            start = i + 1;
        }
    }
}

static void fuzz_vocab(const uint8_t *p, size_t n)
{
    const char *part[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    split3(p, n, part, len);
    struct convert_vocab v;
    struct err e = {0};
    if (convert_vocab_parse(&v, part[0], len[0], part[1], len[1], part[2], len[2], &e) == 0) {
        for (size_t i = 0; i < v.n; i++)
            sink ^= (uint8_t)v.tokens[i][0];
        convert_vocab_free(&v);
    }
}

static void fuzz_spm(const uint8_t *p, size_t n)
{
    struct convert_vocab v;
    struct err e = {0};
    const char *cfg = "{\"vocab_size\": 40, \"bos_token_id\": 1}";
    if (convert_vocab_parse_spm(&v, p, n, NULL, 0, cfg, strlen(cfg), &e) == 0) {
        for (size_t i = 0; i < v.n; i++)
            sink ^= (uint8_t)(v.tokens[i][0] ^ (v.scores[i] < 0.0f));
        convert_vocab_free(&v);
    }
}

static void fuzz_wordpiece(const uint8_t *p, size_t n)
{
    const char *part[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    split3(p, n, part, len);
    struct convert_vocab v;
    struct err e = {0};
    if (convert_vocab_parse_wordpiece(&v, part[0], len[0], part[1], len[1], part[2], len[2], &e) ==
        0) {
        for (size_t i = 0; i < v.n; i++)
            sink ^= (uint8_t)(v.tokens[i][0] ^ v.types[i]);
        convert_vocab_free(&v);
    }
}

static void fuzz_pooling(const uint8_t *p, size_t n)
{
    const char *part[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    split3(p, n, part, len);
    char *dir = NULL;
    int32_t pooling;
    struct err e = {0};
    if (convert_pooling_parse(part[0], len[0], &dir, &e) == 0 && dir)
        sink ^= (uint8_t)dir[0];
    free(dir);
    if (convert_pooling_mode(part[1], len[1], &pooling, &e) == 0)
        sink ^= (uint8_t)pooling;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 0)
        fuzz_safetensors(data + 1, size - 1);
    else if (data[0] == 2)
        fuzz_spm(data + 1, size - 1);
    else if (data[0] == 3)
        fuzz_wordpiece(data + 1, size - 1);
    else if (data[0] == 4)
        fuzz_pooling(data + 1, size - 1);
    else
        fuzz_vocab(data + 1, size - 1);
    return 0;
}

// SentencePiece tokenizer.model (a protobuf ModelProto) as GGUF "llama"
// vocabulary keys: every piece (field 1) with its score (piece field 2,
// float) and type (piece field 3: 1 normal, 2 unknown, 3 control, 4
// user-defined, 5 unused, 6 byte, the numbering GGUF uses too). Other fields
// (trainer and normalizer specs) are skipped. Every length is checked
// against the input: a hostile file gives ERR_FORMAT.
#include "convert/internal.h"

#include <stdlib.h>
#include <string.h>

struct pb {
    const uint8_t *p, *end;
};

static bool pb_varint(struct pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

// Reads one field header and, for length-delimited fields, its payload.
static bool pb_field(struct pb *b, uint32_t *field, uint32_t *wire, struct pb *payload,
                     uint64_t *value)
{
    uint64_t tag;
    if (!pb_varint(b, &tag))
        return false;
    *field = (uint32_t)(tag >> 3);
    *wire = (uint32_t)(tag & 7);
    size_t need = *wire == 1 ? 8 : *wire == 5 ? 4 : 0;
    if (*wire == 0)
        return pb_varint(b, value);
    if (*wire == 2) {
        if (!pb_varint(b, value) || *value > (uint64_t)(b->end - b->p))
            return false;
        *payload = (struct pb){b->p, b->p + *value};
        b->p += *value;
        return true;
    }
    if (need == 0 || (size_t)(b->end - b->p) < need)
        return false;
    *payload = (struct pb){b->p, b->p + need};
    b->p += need;
    return true;
}

static int add_piece(struct convert_vocab *v, struct pb m, size_t *cap)
{
    char *text = NULL;
    float score = 0;
    int32_t type = 1;
    while (m.p < m.end) {
        uint32_t field, wire;
        struct pb pl = {0};
        uint64_t val = 0;
        if (!pb_field(&m, &field, &wire, &pl, &val)) {
            free(text);
            return -1;
        }
        if (field == 1 && wire == 2) {
            free(text);
            text = xstrndup((const char *)pl.p, (size_t)(pl.end - pl.p));
        } else if (field == 2 && wire == 5) {
            memcpy(&score, pl.p, 4);
        } else if (field == 3 && wire == 0) {
            type = val >= 1 && val <= 6 ? (int32_t)val : 1;
        }
    }
    if (v->n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        v->tokens = xrealloc(v->tokens, *cap * sizeof(char *));
        v->types = xrealloc(v->types, *cap * sizeof(int32_t));
        v->scores = xrealloc(v->scores, *cap * sizeof(float));
    }
    v->tokens[v->n] = text ? text : xstrdup("");
    v->types[v->n] = type;
    v->scores[v->n] = score;
    v->n++;
    return 0;
}

int convert_spm_parse(struct convert_vocab *v, const void *data, size_t n, struct err *e)
{
    struct pb b = {data, (const uint8_t *)data + n};
    size_t cap = 0;
    while (b.p < b.end) {
        uint32_t field, wire;
        struct pb pl = {0};
        uint64_t val = 0;
        if (!pb_field(&b, &field, &wire, &pl, &val))
            return err_set(e, ERR_FORMAT, "tokenizer.model: truncated or invalid protobuf");
        if (field != 1 || wire != 2)
            continue;
        if (v->n >= (1u << 21))
            return err_set(e, ERR_FORMAT, "tokenizer.model: too many pieces");
        if (add_piece(v, pl, &cap) < 0)
            return err_set(e, ERR_FORMAT, "tokenizer.model: piece %zu is invalid", v->n);
    }
    if (v->n == 0)
        return err_set(e, ERR_FORMAT, "tokenizer.model: no pieces");
    v->spm = true;
    snprintf(v->pre, sizeof v->pre, "default");
    return 0;
}

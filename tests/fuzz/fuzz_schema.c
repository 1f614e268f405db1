// libFuzzer target: the `format` compiler (JSON text → grammar) and the grammar matcher.
// Input: format text (schemas with patterns reach the regex translation), a NUL byte, then bytes
// walked through the compiled grammar (and through the token mask of a small byte-level
// vocabulary).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sample/internal.h"
#include "sample/sample.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t flen = nul ? (size_t)(nul - data) : size;
    const char *walk = nul ? (const char *)nul + 1 : "";
    size_t wlen = nul ? size - flen - 1 : 0;
    struct sample_grammar *g = NULL;
    struct err e = {0};
    if (sample_format_compile_text(&g, (const char *)data, flen, &e) != 0 || !g)
        return 0;
    bool complete = false;
    (void)sample_grammar_check(g, walk, wlen, &complete, &e);

    // a vocabulary of the 256 bytes, a few pairs and an EOG token; sample greedily with
    // logits taken from the walk bytes
    static struct sample_vocab *v;
    if (!v) {
        static char bytes[256 + 8][2];
        const char *pieces[256 + 8];
        uint32_t lens[256 + 8];
        bool eog[256 + 8] = {0};
        static const char *const pairs[7] = {"{\"", "\":", "\"}", "12", "true", "\xc3\xa9", "]"};
        for (int i = 0; i < 256; i++) {
            bytes[i][0] = (char)i;
            pieces[i] = bytes[i];
            lens[i] = 1;
        }
        for (int i = 0; i < 7; i++) {
            pieces[256 + i] = pairs[i];
            lens[256 + i] = (uint32_t)strlen(pairs[i]);
        }
        pieces[263] = "";
        lens[263] = 0;
        eog[263] = true;
        if (sample_vocab_new(&v, 264, pieces, lens, eog, NULL) != 0)
            return 0;
    }
    struct sample_options o;
    sample_options_default(&o);
    o.seed = 1;
    struct sampler *s = NULL;
    if (sample_new(&s, v, &o, g, NULL) == 0) {
        float logits[264];
        for (size_t step = 0; step < 32; step++) {
            for (int i = 0; i < 264; i++)
                logits[i] = (float)(wlen ? (uint8_t)walk[(step * 7 + (size_t)i) % wlen] : i % 13);
            int32_t tok;
            if (sample_next(s, logits, &tok, NULL) != 0 || tok == 263)
                break;
        }
        sample_free(s);
    }
    sample_grammar_free(g);
    return 0;
}

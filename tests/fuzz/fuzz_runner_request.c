// Fuzzes the runner's request parsing (/completion and /embedding bodies:
// options, stop strings, format, truncation) against the stories260K
// fixture's tokenizer and vocabulary. Nothing is decoded.
#include <stdint.h>
#include <stdlib.h>

#include "runner/internal.h"

static struct runner rn;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    struct model *m = NULL;
    struct model_options mo = {.n_ctx = 64, .n_slots = 1, .n_threads = 1};
    struct err e = {0};
    if (model_load(&m, OLLAMA_SOURCE_DIR "/tests/fixtures/stories260K.gguf", &mo, &e) < 0 ||
        runner_attach_model(&rn, m, &e) < 0) {
        fprintf(stderr, "fuzz_runner_request: %s\n", e.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = NULL;
    if (jsonx_parse_object((const char *)data, size, &body, NULL) < 0)
        return 0;
    int status;
    struct err e = {0};
    rreq_unref(runner_completion_parse(&rn, body, &status, &e));
    err_clear(&e);
    rreq_unref(runner_embedding_parse(&rn, body, &status, &e));
    json_decref(body);
    return 0;
}

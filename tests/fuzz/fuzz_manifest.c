// libFuzzer target: manifest and config blob parsing (store.md §4, §5).
// Invariants: every accepted digest is a valid "sha256:<64 hex>", and
// encoding is stable (encode(parse(encode(m))) == encode(m)).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_manifest m;
    if (store_manifest_parse(data, size, &m, NULL) == 0) {
        for (size_t i = 0; i < m.n_layers; i++)
            if (!store_digest_valid(m.layers[i].digest))
                abort();
        if (m.config.digest[0] && !store_digest_valid(m.config.digest))
            abort();
        struct buf a, b;
        buf_init(&a, 0);
        buf_init(&b, 0);
        if (store_manifest_encode(&m, &a) == 0) {
            struct store_manifest m2;
            if (store_manifest_parse(a.data, a.len, &m2, NULL) != 0)
                abort();
            store_manifest_encode(&m2, &b);
            if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
                abort();
            store_manifest_deinit(&m2);
        }
        buf_deinit(&a);
        buf_deinit(&b);
        store_manifest_deinit(&m);
    }
    struct store_config c;
    if (store_config_parse(data, size, &c, NULL) == 0) {
        // What we write parses back to what we wrote (the draft object too).
        struct buf a, b;
        buf_init(&a, 0);
        buf_init(&b, 0);
        store_config_encode(&c, NULL, 0, &a);
        struct store_config c2;
        if (store_config_parse(a.data, a.len, &c2, NULL) != 0)
            abort();
        store_config_encode(&c2, NULL, 0, &b);
        if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
            abort();
        store_config_deinit(&c2);
        buf_deinit(&a);
        buf_deinit(&b);
        store_config_deinit(&c);
    }
    return 0;
}

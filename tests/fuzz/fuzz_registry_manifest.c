// Fuzzes what the registry client parses from untrusted peers besides the
// manifest JSON itself (the store's fuzz_manifest covers that): the
// WWW-Authenticate challenge, the token URL built from it, and OpenSSH key
// files.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    struct registry_challenge c;
    if (registry_challenge_parse(s, &c, NULL) == 0) {
        struct buf url;
        buf_init(&url, 0);
        uint8_t nonce[16] = {0};
        registry_token_url(&c, 1700000000, nonce, &url, NULL);
        buf_deinit(&url);
    }
    uint8_t seed[32], pub[32];
    registry_key_parse(s, size, seed, pub, NULL);
    free(s);
    return 0;
}

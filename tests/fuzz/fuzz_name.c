// libFuzzer target: model name and digest parsing. Invariants: a valid name
// displays to a string that parses back to the same four parts, and its
// parts never contain '/', '\\' or start with '.'.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    struct store_name n;
    if (store_name_parse(s, &n, NULL) == 0) {
        const char *parts[] = {n.host, n.ns, n.model, n.tag};
        for (int i = 0; i < 4; i++)
            if (strchr(parts[i], '/') || strchr(parts[i], '\\') || parts[i][0] == '.')
                abort();
        char d[STORE_NAME_MAX];
        store_name_display(&n, d, sizeof(d));
        struct store_name back;
        if (store_name_parse(d, &back, NULL) != 0 || !store_name_eq(&n, &back))
            abort();
        store_name_full(&n, d, sizeof(d));
        if (store_name_parse(d, &back, NULL) != 0 || !store_name_eq(&n, &back))
            abort();
    }
    char hex[DIGEST_HEX_LEN + 1];
    if (store_digest_parse(s, hex, NULL) == 0 && (strchr(hex, '/') || strchr(hex, '.')))
        abort();
    free(s);
    return 0;
}

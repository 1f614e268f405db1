// libFuzzer target for util's parsers: durations, RFC 3339 times, OLLAMA_HOST
// values, digests, store-relative paths, numbers and UTF-8.
// Round trips are checked where the format allows one.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = xstrndup((const char *)data, size);  // stops at the first NUL
    struct err e = {0};

    int64_t ns;
    if (duration_parse(s, &ns, &e) == 0) {
        char out[64];
        int64_t back;
        duration_format(ns, out, sizeof(out));
        if (duration_parse(out, &back, NULL) != 0 || back != ns)
            abort();
    } else if (!e.msg[0]) {
        abort();
    }
    err_clear(&e);

    if (time_parse_rfc3339(s, &ns, &e) == 0 && ns != INT64_MAX && ns != INT64_MIN + 1) {
        char out[64];
        int64_t back;
        time_format_rfc3339_utc(ns, out, sizeof(out));
        if (time_parse_rfc3339(out, &back, NULL) != 0 || back != ns)
            abort();
        time_format_relative(ns, time_now_ns(), out, sizeof(out));
    }

    struct host_addr h;
    if (host_parse(s, &h, NULL) == 0) {
        char url[600];
        host_format_url(&h, url, sizeof(url));
        host_format_connect_url(&h, url, sizeof(url));
    }

    char hex[DIGEST_HEX_LEN + 1];
    if (digest_parse(s, hex, NULL) == 0 && !digest_hex_valid(hex))
        abort();
    digest_parse_filename(s, hex, NULL);

    char path[512];
    if (path_join_under("/root", s, path, sizeof(path), NULL) == 0 &&
        (strstr(path, "/../") || cstr_ends_with(path, "/..") || s[0] == '/'))
        abort();

    char tmp[256];
    const char *clean = env_clean(s, tmp, sizeof(tmp));
    if (clean)
        env_parse_debug_level(clean);

    int64_t i64;
    uint64_t u64;
    double d;
    str_to_i64(s, INT64_MIN, INT64_MAX, &i64, NULL);
    str_to_u64(s, UINT64_MAX, &u64, NULL);
    str_to_double(s, &d, NULL);

    size_t p = utf8_complete_prefix((const char *)data, size);
    if (p > size)
        abort();
    if (utf8_valid((const char *)data, size) && p != size)
        abort();

    struct buf b;
    buf_init(&b, 64);
    log_kv_append(&b, "k", s);
    buf_deinit(&b);
    free(s);
    return 0;
}

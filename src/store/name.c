// Model names (store.md §1): right-to-left parsing as upstream's
// ParseNameBare, defaults, per-part validation, display forms, and the
// digest pattern (§3.2). A valid name always maps to exactly four path
// components, none of them "." or "..".
#include "store/internal.h"

#include <string.h>

enum part_kind { PART_HOST, PART_NS, PART_MODEL, PART_TAG };

// Copies [p, p+n) into dst (cap bytes). An over-long part is truncated but
// flagged so validation fails.
static void set_part(char *dst, size_t cap, const char *p, size_t n, bool *too_long)
{
    if (n >= cap) {
        n = cap - 1;
        *too_long = true;
    }
    memcpy(dst, p, n);
    dst[n] = '\0';
}

static bool part_valid(enum part_kind kind, const char *s)
{
    size_t len = strlen(s);
    size_t max = kind == PART_HOST ? STORE_HOST_MAX : STORE_PART_MAX;
    if (len < 1 || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (store_is_alnum_(c) || c == '_')
            continue;
        if (i == 0)
            return false;
        if (c == '-')
            continue;
        if (c == '.' && kind != PART_NS)
            continue;
        if (c == ':' && kind == PART_HOST)
            continue;
        return false;
    }
    return true;
}

// Finds the last occurrence of c in [s, s+n); -1 if none.
static long last_index(const char *s, size_t n, char c)
{
    for (size_t i = n; i > 0; i--)
        if (s[i - 1] == c)
            return (long)(i - 1);
    return -1;
}

// Sets dst to what follows the last '/' of s[0..*n) (all of it when there is
// none) and cuts *n to before that '/'. Returns whether there was one; an
// empty part, or a '/' at the start, sets *missing.
static bool take_last_part(const char *s, size_t *n, char *dst, size_t cap, bool *missing,
                           bool *too_long)
{
    long slash = last_index(s, *n, '/');
    if (slash < 0) {
        set_part(dst, cap, s, *n, too_long);
        return false;
    }
    size_t len = *n - (size_t)slash - 1;
    if (len == 0 || slash == 0)
        *missing = true;
    set_part(dst, cap, s + slash + 1, len, too_long);
    *n = (size_t)slash;
    return true;
}

int store_name_parse(const char *s, struct store_name *out, struct err *e)
{
    memset(out, 0, sizeof(*out));
    bool missing = false, too_long = false;
    bool has_host = false, has_ns = false, has_tag = false;
    size_t n = strlen(s);

    long colon = last_index(s, n, ':');
    long slash = last_index(s, n, '/');
    if (colon > slash) {
        // "model:tag": the tag is what follows the last ':'.
        size_t tag_len = n - (size_t)colon - 1;
        if (tag_len == 0)
            missing = true;
        set_part(out->tag, sizeof(out->tag), s + colon + 1, tag_len, &too_long);
        has_tag = true;
        n = (size_t)colon;
        if (n == 0)
            missing = true;
    }

    has_ns = take_last_part(s, &n, out->model, sizeof(out->model), &missing, &too_long);
    if (has_ns) {
        has_host = take_last_part(s, &n, out->ns, sizeof(out->ns), &missing, &too_long);
        if (has_host) {
            // Whatever remains is the host, with an optional "scheme://".
            const char *h = s;
            size_t hn = n;
            for (size_t i = 0; i + 3 <= n; i++) {
                if (memcmp(s + i, "://", 3) == 0) {
                    set_part(out->scheme, sizeof(out->scheme), s, i, &too_long);
                    h = s + i + 3;
                    hn = n - i - 3;
                    break;
                }
            }
            if (hn == 0)
                missing = true;
            set_part(out->host, sizeof(out->host), h, hn, &too_long);
        }
    }

    if (!has_host)
        snprintf(out->host, sizeof(out->host), "%s", STORE_DEFAULT_HOST);
    if (!has_ns)
        snprintf(out->ns, sizeof(out->ns), "%s", STORE_DEFAULT_NAMESPACE);
    if (!has_tag)
        snprintf(out->tag, sizeof(out->tag), "%s", STORE_DEFAULT_TAG);

    if (missing || too_long || !part_valid(PART_HOST, out->host) || !part_valid(PART_NS, out->ns) ||
        !part_valid(PART_MODEL, out->model) || !part_valid(PART_TAG, out->tag))
        return err_set(e, ERR_INVALID, "invalid model name");
    return 0;
}

bool store_name_valid(const char *s)
{
    struct store_name n;
    return store_name_parse(s, &n, NULL) == 0;
}

void store_name_display(const struct store_name *n, char *out, size_t n_out)
{
    if (!ascii_ieq(n->host, STORE_DEFAULT_HOST))
        snprintf(out, n_out, "%s/%s/%s:%s", n->host, n->ns, n->model, n->tag);
    else if (!ascii_ieq(n->ns, STORE_DEFAULT_NAMESPACE))
        snprintf(out, n_out, "%s/%s:%s", n->ns, n->model, n->tag);
    else
        snprintf(out, n_out, "%s:%s", n->model, n->tag);
}

void store_name_full(const struct store_name *n, char *out, size_t n_out)
{
    snprintf(out, n_out, "%s/%s/%s:%s", n->host, n->ns, n->model, n->tag);
}

bool store_name_eq(const struct store_name *a, const struct store_name *b)
{
    return ascii_ieq(a->host, b->host) && ascii_ieq(a->ns, b->ns) &&
           ascii_ieq(a->model, b->model) && ascii_ieq(a->tag, b->tag);
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int store_digest_parse(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e)
{
    if (!s || strncmp(s, "sha256", 6) != 0 || (s[6] != ':' && s[6] != '-'))
        return err_set(e, ERR_INVALID, "invalid digest format");
    const char *h = s + 7;
    for (int i = 0; i < DIGEST_HEX_LEN; i++)
        if (!is_hex(h[i]))
            return err_set(e, ERR_INVALID, "invalid digest format");
    if (h[DIGEST_HEX_LEN] != '\0')
        return err_set(e, ERR_INVALID, "invalid digest format");
    memcpy(hex, h, DIGEST_HEX_LEN);
    hex[DIGEST_HEX_LEN] = '\0';
    return 0;
}

bool store_digest_valid(const char *s)
{
    char hex[DIGEST_HEX_LEN + 1];
    return store_digest_parse(s, hex, NULL) == 0;
}

int store_name_from_parts(const char *host, const char *ns, const char *model, const char *tag,
                          struct store_name *out)
{
    memset(out, 0, sizeof(*out));
    bool too_long = false;
    set_part(out->host, sizeof(out->host), host, strlen(host), &too_long);
    set_part(out->ns, sizeof(out->ns), ns, strlen(ns), &too_long);
    set_part(out->model, sizeof(out->model), model, strlen(model), &too_long);
    set_part(out->tag, sizeof(out->tag), tag, strlen(tag), &too_long);
    if (too_long || !part_valid(PART_HOST, out->host) || !part_valid(PART_NS, out->ns) ||
        !part_valid(PART_MODEL, out->model) || !part_valid(PART_TAG, out->tag))
        return ERR_INVALID;
    return 0;
}

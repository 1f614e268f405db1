// Registry authentication (registry.md §4): the ed25519 key pair in
// ~/.ollama (OpenSSH format), WWW-Authenticate challenges, Ollama's signed
// token request, a token cache reused until expiry, and HTTP basic auth for
// standard registries. Tokens and signatures go only to a realm on the
// registry's own host (or an explicitly allowed one).
#include "registry/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct reg_token {
    struct reg_token *next;
    char *key;           // "host scope"
    char *value;         // "Bearer <token>"
    int64_t expires_ns;  // monotonic
};

// ---------------------------------------------------------------------------
// Base64

static void b64_append(struct buf *out, const uint8_t *p, size_t n)
{
    size_t enc = 4 * ((n + 2) / 3);
    char *tmp = xmalloc(enc + 1);
    EVP_EncodeBlock((unsigned char *)tmp, p, (int)n);
    buf_append(out, tmp, enc);
    free(tmp);
}

static int b64_decode(const char *s, size_t n, struct buf *out)
{
    struct buf clean;
    buf_init(&clean, 1u << 20);
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n' && s[i] != '\r' && s[i] != ' ' && s[i] != '\t')
            if (buf_append_char(&clean, s[i]) < 0)
                break;
    int rc = -1;
    if (clean.len % 4 == 0 && clean.len > 0) {
        size_t pad = 0;
        if (clean.data[clean.len - 1] == '=')
            pad++;
        if (clean.len > 1 && clean.data[clean.len - 2] == '=')
            pad++;
        uint8_t *tmp = xmalloc(clean.len);
        int got = EVP_DecodeBlock(tmp, (const unsigned char *)clean.data, (int)clean.len);
        if (got >= (int)pad) {
            buf_append(out, tmp, (size_t)got - pad);
            rc = 0;
        }
        free(tmp);
    }
    buf_deinit(&clean);
    return rc;
}

// ---------------------------------------------------------------------------
// OpenSSH key files (§4.1)

static void put_u32(struct buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    buf_append(b, x, 4);
}

static void put_str(struct buf *b, const void *p, size_t n)
{
    put_u32(b, (uint32_t)n);
    buf_append(b, p, n);
}

static void pub_wire(const uint8_t pub[32], struct buf *b)
{
    put_str(b, "ssh-ed25519", 11);
    put_str(b, pub, 32);
}

void registry_key_pub_line(const uint8_t pub[32], struct buf *out)
{
    struct buf w;
    buf_init(&w, 0);
    pub_wire(pub, &w);
    buf_append_str(out, "ssh-ed25519 ");
    b64_append(out, (const uint8_t *)w.data, w.len);
    buf_deinit(&w);
}

static int pub_from_seed(const uint8_t seed[32], uint8_t pub[32], struct err *e)
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
    size_t n = 32;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &n) == 1 && n == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : err_set(e, ERR_INTERNAL, "ed25519 key derivation failed");
}

int registry_key_format(const uint8_t seed[32], uint32_t check, struct buf *out, struct err *e)
{
    uint8_t pub[32];
    int rc = pub_from_seed(seed, pub, e);
    if (rc < 0)
        return rc;
    struct buf bin, priv, w;
    buf_init(&bin, 0);
    buf_init(&priv, 0);
    buf_init(&w, 0);
    pub_wire(pub, &w);
    put_u32(&priv, check);
    put_u32(&priv, check);
    put_str(&priv, "ssh-ed25519", 11);
    put_str(&priv, pub, 32);
    uint8_t both[64];
    memcpy(both, seed, 32);
    memcpy(both + 32, pub, 32);
    put_str(&priv, both, 64);
    put_str(&priv, "", 0);
    for (uint8_t pad = 1; priv.len % 8; pad++)
        buf_append(&priv, &pad, 1);
    buf_append(&bin, "openssh-key-v1", 15);  // with its NUL
    put_str(&bin, "none", 4);
    put_str(&bin, "none", 4);
    put_str(&bin, "", 0);
    put_u32(&bin, 1);
    put_str(&bin, w.data, w.len);
    put_str(&bin, priv.data, priv.len);
    struct buf b64;
    buf_init(&b64, 0);
    b64_append(&b64, (const uint8_t *)bin.data, bin.len);
    buf_append_str(out, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for (size_t i = 0; i < b64.len; i += 70) {
        size_t take = b64.len - i < 70 ? b64.len - i : 70;
        buf_append(out, b64.data + i, take);
        buf_append_char(out, '\n');
    }
    buf_append_str(out, "-----END OPENSSH PRIVATE KEY-----\n");
    buf_deinit(&b64);
    buf_deinit(&bin);
    buf_deinit(&priv);
    buf_deinit(&w);
    OPENSSL_cleanse(both, sizeof(both));
    return 0;
}

struct rd {
    const uint8_t *p;
    size_t left;
};

static bool get_u32(struct rd *r, uint32_t *v)
{
    if (r->left < 4)
        return false;
    *v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    r->left -= 4;
    return true;
}

static bool get_str(struct rd *r, const uint8_t **p, uint32_t *n)
{
    if (!get_u32(r, n) || *n > r->left)
        return false;
    *p = r->p;
    r->p += *n;
    r->left -= *n;
    return true;
}

static bool str_is(const uint8_t *p, uint32_t n, const char *s)
{
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

int registry_key_parse(const char *text, size_t n, uint8_t seed[32], uint8_t pub[32], struct err *e)
{
    static const char begin[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
    static const char end[] = "-----END OPENSSH PRIVATE KEY-----";
    const char *b = memmem(text, n, begin, sizeof(begin) - 1);
    if (b)
        b += sizeof(begin) - 1;
    // The end marker is searched only after the whole begin marker.
    const char *en = b ? memmem(b, n - (size_t)(b - text), end, sizeof(end) - 1) : NULL;
    if (!b || !en)
        return err_set(e, ERR_FORMAT, "ssh: no key found");
    struct buf bin;
    buf_init(&bin, 1u << 20);
    int rc = ERR_FORMAT;
    if (b64_decode(b, (size_t)(en - b), &bin) < 0) {
        err_set(e, ERR_FORMAT, "ssh: invalid base64 in private key");
        goto out;
    }
    struct rd r = {(const uint8_t *)bin.data, bin.len};
    const uint8_t *s;
    uint32_t sn, nkeys, c1, c2;
    if (r.left < 15 || memcmp(r.p, "openssh-key-v1", 15) != 0) {
        err_set(e, ERR_FORMAT, "ssh: invalid openssh private key format");
        goto out;
    }
    r.p += 15;
    r.left -= 15;
    if (!get_str(&r, &s, &sn) || !str_is(s, sn, "none") || !get_str(&r, &s, &sn) ||
        !str_is(s, sn, "none")) {
        err_set(e, ERR_UNSUPPORTED, "ssh: this private key is passphrase protected");
        goto out;
    }
    if (!get_str(&r, &s, &sn) || !get_u32(&r, &nkeys) || nkeys != 1 || !get_str(&r, &s, &sn)) {
        err_set(e, ERR_FORMAT, "ssh: malformed private key");
        goto out;
    }
    const uint8_t *sec;
    uint32_t secn;
    if (!get_str(&r, &sec, &secn)) {
        err_set(e, ERR_FORMAT, "ssh: malformed private key");
        goto out;
    }
    struct rd q = {sec, secn};
    const uint8_t *kt, *pk, *sk;
    uint32_t ktn, pkn, skn;
    if (!get_u32(&q, &c1) || !get_u32(&q, &c2) || c1 != c2) {
        err_set(e, ERR_FORMAT, "ssh: malformed private key (check ints differ)");
        goto out;
    }
    if (!get_str(&q, &kt, &ktn) || !str_is(kt, ktn, "ssh-ed25519")) {
        err_set(e, ERR_UNSUPPORTED, "ssh: unsupported key type (want ssh-ed25519)");
        goto out;
    }
    if (!get_str(&q, &pk, &pkn) || pkn != 32 || !get_str(&q, &sk, &skn) || skn != 64 ||
        memcmp(sk + 32, pk, 32) != 0) {
        err_set(e, ERR_FORMAT, "ssh: malformed ed25519 private key");
        goto out;
    }
    uint8_t derived[32];
    if (pub_from_seed(sk, derived, e) < 0 || memcmp(derived, pk, 32) != 0) {
        err_set(e, ERR_FORMAT, "ssh: ed25519 public key does not match private key");
        goto out;
    }
    memcpy(seed, sk, 32);
    memcpy(pub, pk, 32);
    rc = 0;
out:
    OPENSSL_cleanse(bin.data ? bin.data : (char *)"", bin.len);
    buf_deinit(&bin);
    return rc;
}

static int write_mode(const char *path, const char *data, size_t n, mode_t mode, struct err *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0)
        return err_set(e, ERR_IO, "open %s: %s", path, strerror(errno));
    bool ok = write(fd, data, n) == (ssize_t)n && fsync(fd) == 0;
    fchmod(fd, mode);
    close(fd);
    return ok ? 0 : err_set(e, ERR_IO, "write %s: %s", path, strerror(errno));
}

int registry_key_load(const char *path, bool create, uint8_t seed[32], uint8_t pub[32],
                      struct err *e)
{
    struct buf text;
    buf_init(&text, 64 * 1024);
    int rc = fs_read_all(path, 64 * 1024, &text, NULL);
    if (rc == 0) {
        rc = registry_key_parse(text.data, text.len, seed, pub, e);
        OPENSSL_cleanse(text.data ? text.data : (char *)"", text.len);
        buf_deinit(&text);
        return rc;
    }
    buf_deinit(&text);
    if (!create || fs_exists(path))
        return err_set(e, ERR_IO, "open %s: %s", path, strerror(errno ? errno : ENOENT));
    // First use: a new pair, as `ollama serve` makes at start-up.
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if ((rc = fs_mkdir_p(dir, e)) < 0)
            return rc;
    }
    uint32_t check;
    if (RAND_bytes(seed, 32) != 1 || RAND_bytes((uint8_t *)&check, 4) != 1)
        return err_set(e, ERR_INTERNAL, "no random bytes for a new key");
    log_info("Couldn't find '%s'. Generating new private key.", path);
    struct buf out, line;
    buf_init(&out, 0);
    buf_init(&line, 0);
    rc = registry_key_format(seed, check, &out, e);
    if (rc == 0)
        rc = write_mode(path, out.data, out.len, 0600, e);
    if (rc == 0)
        rc = pub_from_seed(seed, pub, e);
    if (rc == 0) {
        registry_key_pub_line(pub, &line);
        log_info("Your new public key is: \n\n%s", line.data);
        buf_append_char(&line, '\n');
        char *pub_path = xasprintf("%s.pub", path);
        unlink(pub_path);
        rc = write_mode(pub_path, line.data, line.len, 0644, e);
        free(pub_path);
    }
    OPENSSL_cleanse(out.data ? out.data : (char *)"", out.len);
    buf_deinit(&out);
    buf_deinit(&line);
    return rc;
}

// ---------------------------------------------------------------------------
// Challenges (§4.2)

static void take_value(const char **pp, char *out, size_t n)
{
    const char *p = *pp;
    size_t len = 0;
    if (*p == '"') {
        p++;
        const char *start = p;
        // Up to the '"' followed by ',' or the end (spaces allowed between).
        const char *close = NULL;
        for (const char *q = p; *q; q++) {
            if (*q != '"')
                continue;
            const char *r = q + 1;
            while (*r == ' ')
                r++;
            if (*r == ',' || *r == '\0') {
                close = q;
                break;
            }
        }
        if (!close)
            close = p + strlen(p);
        len = (size_t)(close - start);
        p = *close ? close + 1 : close;
        if (len >= n)
            len = n - 1;
        memcpy(out, start, len);
    } else {
        const char *start = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
        len = (size_t)(p - start);
        while (len && start[len - 1] == ' ')
            len--;
        if (len >= n)
            len = n - 1;
        memcpy(out, start, len);
    }
    out[len] = '\0';
    *pp = p;
}

int registry_challenge_parse(const char *header, struct registry_challenge *c, struct err *e)
{
    memset(c, 0, sizeof(*c));
    if (!header)
        return err_set(e, ERR_UNAUTHORIZED, "unauthorized: no WWW-Authenticate challenge");
    const char *p = header;
    while (*p == ' ')
        p++;
    size_t sl = strcspn(p, " ");
    if (sl == 0 || sl >= sizeof(c->scheme))
        return err_set(e, ERR_UNAUTHORIZED, "unauthorized: malformed WWW-Authenticate challenge");
    memcpy(c->scheme, p, sl);
    p += sl;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        size_t kl = strcspn(p, "=,");
        char key[32] = "";
        if (kl < sizeof(key))
            memcpy(key, p, kl);
        key[kl < sizeof(key) ? kl : 0] = '\0';
        p += kl;
        if (*p != '=')
            continue;
        p++;
        char tmp[1024];
        take_value(&p, tmp, sizeof(tmp));
        if (ascii_ieq(key, "realm"))
            snprintf(c->realm, sizeof(c->realm), "%s", tmp);
        else if (ascii_ieq(key, "service"))
            snprintf(c->service, sizeof(c->service), "%s", tmp);
        else if (ascii_ieq(key, "scope"))
            snprintf(c->scope, sizeof(c->scope), "%s", tmp);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Token URL (§4.3)

struct qparam {
    char *key, *value;
};

static void form_escape(struct buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~')
            buf_append_char(b, (char)*p);
        else if (*p == ' ')
            buf_append_char(b, '+');
        else
            buf_printf(b, "%%%02X", *p);
    }
}

static char *form_unescape(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[j++] = ' ';
        } else if (s[i] == '%' && i + 2 < n + 0 && hex_digit(s[i + 1]) >= 0 &&
                   hex_digit(s[i + 2]) >= 0) {
            out[j++] = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x < y ? -1 : x > y;  // stable: values of one key keep their order
}

// Re-encodes a query the way Go's url.Values.Encode does (keys sorted).
static void query_encode(struct qparam *q, size_t n, struct buf *out)
{
    qsort(q, n, sizeof(*q), qparam_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_append_char(out, '&');
        form_escape(out, q[i].key);
        buf_append_char(out, '=');
        form_escape(out, q[i].value);
    }
}

static size_t query_parse(const char *qs, struct qparam **out)
{
    size_t n = 0, cap = 0;
    struct qparam *q = NULL;
    while (qs && *qs) {
        size_t len = strcspn(qs, "&");
        if (len) {
            const char *eq = memchr(qs, '=', len);
            size_t kl = eq ? (size_t)(eq - qs) : len;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                q = xrealloc(q, cap * sizeof(*q));
            }
            q[n].key = form_unescape(qs, kl);
            q[n].value = eq ? form_unescape(eq + 1, len - kl - 1) : xstrdup("");
            n++;
        }
        qs += len;
        if (*qs == '&')
            qs++;
    }
    *out = q;
    return n;
}

static void qparams_free(struct qparam *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(q[i].key);
        free(q[i].value);
    }
    free(q);
}

int registry_token_url(const struct registry_challenge *c, int64_t ts, const uint8_t nonce[16],
                       struct buf *out, struct err *e)
{
    if (!cstr_starts_with(c->realm, "https://") && !cstr_starts_with(c->realm, "http://"))
        return err_set(e, ERR_UNAUTHORIZED, "unauthorized: token realm \"%s\" is not a URL",
                       c->realm);
    const char *qm = strchr(c->realm, '?');
    size_t base_len = qm ? (size_t)(qm - c->realm) : strlen(c->realm);
    struct qparam *q = NULL;
    size_t n = query_parse(qm ? qm + 1 : NULL, &q);
    size_t extra = 3 + 1;
    for (const char *p = c->scope; *p; p++)
        extra += *p == ' ';
    q = xrealloc(q, (n + extra) * sizeof(*q));
    q[n].key = xstrdup("service");
    q[n++].value = xstrdup(c->service);
    const char *sp = c->scope;
    for (;;) {
        size_t len = strcspn(sp, " ");
        q[n].key = xstrdup("scope");
        q[n++].value = xstrndup(sp, len);
        if (!sp[len])
            break;
        sp += len + 1;
    }
    q[n].key = xstrdup("ts");
    q[n++].value = xasprintf("%lld", (long long)ts);
    // base64url without padding of the 16 nonce bytes (22 chars).
    struct buf nb;
    buf_init(&nb, 0);
    b64_append(&nb, nonce, 16);
    while (nb.len && nb.data[nb.len - 1] == '=')
        nb.data[--nb.len] = '\0';
    for (char *p = nb.data; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    q[n].key = xstrdup("nonce");
    q[n++].value = buf_take(&nb);
    buf_append(out, c->realm, base_len);
    buf_append_char(out, '?');
    query_encode(q, n, out);
    qparams_free(q, n);
    return 0;
}

int registry_token_auth(const uint8_t seed[32], const uint8_t pub[32], const char *url,
                        struct buf *out, struct err *e)
{
    // base64 of the hex SHA-256 of the empty body (a constant, §4.4).
    static const char h[] =
        "ZTNiMGM0NDI5OGZjMWMxNDlhZmJmNGM4OTk2ZmI5MjQyN2FlNDFlNDY0OWI5MzRjYTQ5NTk5MWI3ODUyYjg1NQ==";
    char *msg = xasprintf("GET,%s,%s", url, h);
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    uint8_t sig[64];
    size_t sig_len = sizeof(sig);
    int ok = k && ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) == 1 &&
             EVP_DigestSign(ctx, sig, &sig_len, (const uint8_t *)msg, strlen(msg)) == 1 &&
             sig_len == 64;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(k);
    free(msg);
    if (!ok)
        return err_set(e, ERR_INTERNAL, "ed25519 signing failed");
    struct buf w;
    buf_init(&w, 0);
    pub_wire(pub, &w);
    b64_append(out, (const uint8_t *)w.data, w.len);
    buf_append_char(out, ':');
    b64_append(out, sig, 64);
    buf_deinit(&w);
    return 0;
}

// ---------------------------------------------------------------------------
// The exchange (§4.4) and the token cache

static bool realm_host_ok(const struct registry *reg, const char *realm_host, const char *host)
{
    if (strcmp(realm_host, host) == 0)
        return true;
    for (char **a = reg->realm_allow; a && *a; a++)
        if (ascii_ieq(*a, realm_host))
            return true;
    return false;
}

static char *token_cached(struct registry *reg, const char *key, const char *not_this)
{
    char *out = NULL;
    int64_t now = time_monotonic_ns();
    pthread_mutex_lock(&reg->mu);
    for (struct reg_token *t = reg->tokens; t; t = t->next)
        if (strcmp(t->key, key) == 0 && t->expires_ns > now &&
            !(not_this && strcmp(t->value, not_this) == 0))
            out = xstrdup(t->value);
    pthread_mutex_unlock(&reg->mu);
    return out;
}

static void token_store(struct registry *reg, const char *key, const char *value, int64_t ttl_s)
{
    pthread_mutex_lock(&reg->mu);
    struct reg_token *t = NULL;
    for (t = reg->tokens; t; t = t->next)
        if (strcmp(t->key, key) == 0)
            break;
    if (!t) {
        t = xcalloc(1, sizeof(*t));
        t->key = xstrdup(key);
        t->next = reg->tokens;
        reg->tokens = t;
    }
    free(t->value);
    t->value = xstrdup(value);
    // Renew a little early so a token never expires in flight.
    t->expires_ns = time_monotonic_ns() + (ttl_s > 10 ? ttl_s - 5 : ttl_s) * 1000000000LL;
    pthread_mutex_unlock(&reg->mu);
}

void reg_tokens_free(struct registry *reg);
void reg_tokens_free(struct registry *reg)
{
    for (struct reg_token *t = reg->tokens, *next; t; t = next) {
        next = t->next;
        free(t->key);
        free(t->value);
        free(t);
    }
    reg->tokens = NULL;
}

// Builds the token request: its URL (with a fresh nonce) and its Authorization value, basic
// credentials for a standard token server or our key's signature for ollama.com.
static int token_request(struct reg_session *s, const struct registry_challenge *c, struct buf *url,
                         struct buf *auth, struct err *e)
{
    uint8_t nonce[16], seed[32], pub[32];
    int rc =
        RAND_bytes(nonce, sizeof(nonce)) == 1 ? 0 : err_set(e, ERR_INTERNAL, "no random bytes");
    if (rc == 0)
        rc = registry_token_url(c, time_now_ns() / 1000000000, nonce, url, e);
    if (rc == 0 && s->reg->basic_auth && !ascii_ieq(s->host, STORE_DEFAULT_HOST)) {
        // A standard token server (Docker Distribution's token auth) takes basic credentials.
        buf_append_str(auth, "Basic ");
        b64_append(auth, (const uint8_t *)s->reg->basic_auth, strlen(s->reg->basic_auth));
    } else if (rc == 0) {
        rc = registry_key_load(s->reg->key_path, true, seed, pub, e);
        if (rc == 0)
            rc = registry_token_auth(seed, pub, url->data, auth, e);
        OPENSSL_cleanse(seed, sizeof(seed));
    }
    return rc;
}

// A refused token request: the status and the first 200 bytes of the reply, if any.
static int token_refused(const struct reg_rsp *rsp, struct err *e)
{
    size_t len = rsp->body.len;
    while (len && (rsp->body.data[len - 1] == '\n' || rsp->body.data[len - 1] == '\r'))
        len--;
    if (len)
        return err_set(e, ERR_UNAUTHORIZED, "%ld: %.*s", rsp->status, (int)(len > 200 ? 200 : len),
                       rsp->body.data);
    return err_set(e, ERR_UNAUTHORIZED, "%ld", rsp->status);
}

// Reads "token" (or "access_token") and "expires_in" from the reply, caches the bearer value
// under key and makes it the session's token.
static int token_take(struct reg_session *s, const char *key, const struct reg_rsp *rsp,
                      struct err *e)
{
    json_t *doc = NULL;
    int rc = jsonx_parse_object(rsp->body.data ? rsp->body.data : "", rsp->body.len, &doc, e);
    if (rc < 0) {
        err_prefix(e, "token response");
        json_decref(doc);
        return rc;
    }
    const char *tok = NULL;
    int64_t ttl = 60;
    jsonx_get_str(doc, "token", &tok, false, NULL);
    if (!tok || !*tok)
        jsonx_get_str(doc, "access_token", &tok, false, NULL);
    jsonx_get_int(doc, "expires_in", &ttl, 1, 365LL * 24 * 3600, false, NULL);
    if (!tok || !*tok) {
        rc = err_set(e, ERR_UNAUTHORIZED, "unauthorized: token response without a token");
    } else {
        char *value = xasprintf("Bearer %s", tok);
        token_store(s->reg, key, value, ttl);
        free(s->token);
        s->token = value;
    }
    json_decref(doc);
    return rc;
}

static int fetch_token(struct reg_session *s, const struct registry_challenge *c, struct err *e)
{
    char realm_host[STORE_HOST_MAX + 1];
    if (!reg_url_host(c->realm, realm_host, sizeof(realm_host)))
        return err_set(e, ERR_UNAUTHORIZED, "unauthorized: token realm \"%s\" is not a URL",
                       c->realm);
    if (!realm_host_ok(s->reg, realm_host, s->host))
        return err_set(e, ERR_UNAUTHORIZED, "realm host \"%s\" does not match original host \"%s\"",
                       realm_host, s->host);
    char *key = xasprintf("%s %s", s->host, c->scope);
    char *cached = token_cached(s->reg, key, s->token);
    if (cached) {
        free(s->token);
        s->token = cached;
        free(key);
        return 0;
    }
    struct buf url, auth;
    buf_init(&url, 0);
    buf_init(&auth, 0);
    struct reg_rsp rsp;
    reg_rsp_init(&rsp);
    int rc = token_request(s, c, &url, &auth, e);
    if (rc == 0) {
        struct reg_rq rq = {
            .method = "GET", .url = url.data, .max_body = REG_MAX_SMALL_BODY, .timeout_s = 60};
        rc = reg_http(&rq, auth.data, s->cancel, &rsp, e);
    }
    if (rc == 0 && rsp.status >= 400)
        rc = token_refused(&rsp, e);
    if (rc == 0)
        rc = token_take(s, key, &rsp, e);
    reg_rsp_deinit(&rsp);
    buf_deinit(&url);
    buf_deinit(&auth);
    free(key);
    return rc;
}

int reg_auth_challenge(struct reg_session *s, const char *www_auth, const char *req_url,
                       struct err *e)
{
    (void)req_url;
    struct registry_challenge c;
    if (!www_auth || registry_challenge_parse(www_auth, &c, NULL) < 0)
        return err_set(e, ERR_UNAUTHORIZED,
                       "unauthorized: registry answered 401 without a usable challenge");
    if (ascii_ieq(c.scheme, "Bearer")) {
        if (!c.realm[0])
            return err_set(e, ERR_UNAUTHORIZED,
                           "unauthorized: registry answered 401 without a usable challenge");
        return fetch_token(s, &c, e);
    }
    if (ascii_ieq(c.scheme, "Basic")) {
        if (!s->reg->basic_auth)
            return err_set(e, ERR_UNAUTHORIZED,
                           "unauthorized: registry requires basic auth and no credentials are set");
        struct buf b;
        buf_init(&b, 0);
        buf_append_str(&b, "Basic ");
        b64_append(&b, (const uint8_t *)s->reg->basic_auth, strlen(s->reg->basic_auth));
        free(s->basic);
        s->basic = buf_take(&b);
        return 0;
    }
    return err_set(e, ERR_UNAUTHORIZED, "unauthorized: unsupported auth scheme \"%s\"", c.scheme);
}

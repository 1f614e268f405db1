// SHA-256 over OpenSSL's EVP interface (SHA-NI where the CPU has it), and the
// digest forms the Ollama store uses: "sha256:<hex>" in manifests and API
// requests, "sha256-<hex>" as blob file names. Anything that is not exactly
// 64 lowercase hex digits is rejected before it can reach the file system.
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

int sha256_init(struct sha256 *h)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) {
        h->ctx = NULL;
        return ERR_NOMEM;
    }
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        h->ctx = NULL;
        return ERR_INTERNAL;
    }
    h->ctx = ctx;
    return 0;
}

void sha256_update(struct sha256 *h, const void *p, size_t n)
{
    ASSERT(h->ctx);
    if (n)
        ASSERT(EVP_DigestUpdate(h->ctx, p, n) == 1);
}

static void to_hex(const unsigned char *md, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

void sha256_final(struct sha256 *h, char hex[DIGEST_HEX_LEN + 1])
{
    ASSERT(h->ctx);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ASSERT(EVP_DigestFinal_ex(h->ctx, md, &len) == 1 && len == 32);
    to_hex(md, 32, hex);
    sha256_abort(h);
}

void sha256_abort(struct sha256 *h)
{
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

void sha256_hex(const void *p, size_t n, char hex[DIGEST_HEX_LEN + 1])
{
    struct sha256 h;
    ASSERT(sha256_init(&h) == 0);
    sha256_update(&h, p, n);
    sha256_final(&h, hex);
}

int sha256_file(const char *path, char hex[DIGEST_HEX_LEN + 1], uint64_t *size_out, struct err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "open %s: %s", path,
                       strerror(errno));
    struct sha256 h;
    int rc = sha256_init(&h);
    if (rc < 0) {
        close(fd);
        return err_set(e, rc, "sha256: cannot create context");
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *chunk = xmalloc(CHUNK);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, CHUNK);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = err_set(e, ERR_IO, "read %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        sha256_update(&h, chunk, (size_t)r);
        total += (uint64_t)r;
    }
    free(chunk);
    close(fd);
    if (rc < 0) {
        sha256_abort(&h);
        return rc;
    }
    sha256_final(&h, hex);
    if (size_out)
        *size_out = total;
    return 0;
}

bool digest_hex_valid(const char *hex)
{
    if (!hex)
        return false;
    for (int i = 0; i < DIGEST_HEX_LEN; i++) {
        char c = hex[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return hex[DIGEST_HEX_LEN] == '\0';
}

static int parse_with_prefix(const char *s, const char *prefix, char hex[DIGEST_HEX_LEN + 1],
                             struct err *e)
{
    size_t n = strlen(prefix);
    if (!s || strncmp(s, prefix, n) != 0 || !digest_hex_valid(s + n))
        return err_set(e, ERR_INVALID, "invalid digest format \"%.80s\"", s ? s : "");
    memcpy(hex, s + n, DIGEST_HEX_LEN + 1);
    return 0;
}

int digest_parse(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e)
{
    return parse_with_prefix(s, "sha256:", hex, e);
}

int digest_parse_filename(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e)
{
    return parse_with_prefix(s, "sha256-", hex, e);
}

void digest_format(const char *hex, char out[DIGEST_HEX_LEN + 8])
{
    snprintf(out, DIGEST_HEX_LEN + 8, "sha256:%.64s", hex);
}

// HTTP policy of `ollama serve`: which browser origins may call the API
// (CORS, env.md §6) and which Host headers a loopback server answers, so a
// web page cannot reach it through DNS rebinding (env.md §7).
#include "server/internal.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool srv_same_origin(const char *origin, const char *host)
{
    if (!host)
        return false;
    const char *rest = cstr_starts_with(origin, "http://")    ? origin + 7
                       : cstr_starts_with(origin, "https://") ? origin + 8
                                                              : NULL;
    return rest && strcmp(rest, host) == 0;
}

// ---------------------------------------------------------------------------
// CORS origins (§6)

static bool origin_matches(const char *pattern, const char *origin)
{
    if (strcmp(pattern, "*") == 0 || strcmp(pattern, origin) == 0)
        return true;
    const char *star = strchr(pattern, '*');
    if (!star || strchr(star + 1, '*'))
        return false;
    size_t pre = (size_t)(star - pattern), suf = strlen(star + 1), n = strlen(origin);
    return n >= pre + suf && memcmp(origin, pattern, pre) == 0 &&
           memcmp(origin + n - suf, star + 1, suf) == 0;
}

bool srv_origin_allowed(char *const *origins, const char *origin)
{
    if (!origins || !origin)
        return false;
    for (char *const *o = origins; *o; o++)
        if (origin_matches(*o, origin))
            return true;
    return false;
}

// ---------------------------------------------------------------------------
// Allowed hosts (§7)

// Parses an IP literal (brackets optional) into a 16-byte IPv6 form
// (IPv4 as ::ffff:a.b.c.d).
static bool parse_ip16(const char *s, unsigned char a[16])
{
    char tmp[64];
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        if (n - 2 >= sizeof(tmp))
            return false;
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(n - 2), s + 1);
        s = tmp;
    }
    unsigned char v4[4];
    if (inet_pton(AF_INET, s, v4) == 1) {
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, v4, 4);
        return true;
    }
    return inet_pton(AF_INET6, s, a) == 1;
}

static bool ip16_is_v4(const unsigned char a[16])
{
    static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, prefix, 12) == 0;
}

static bool ip16_is_loopback(const unsigned char a[16])
{
    static const unsigned char lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return ip16_is_v4(a) ? a[12] == 127 : memcmp(a, lo6, 16) == 0;
}

static bool ip16_is_private(const unsigned char a[16])
{
    if (ip16_is_v4(a))
        return a[12] == 10 || (a[12] == 172 && (a[13] & 0xf0) == 16) ||
               (a[12] == 192 && a[13] == 168);
    return (a[0] & 0xfe) == 0xfc;
}

static bool ip16_is_unspecified(const unsigned char a[16])
{
    static const unsigned char zero[16];
    if (ip16_is_v4(a))
        return memcmp(a + 12, zero, 4) == 0;
    return memcmp(a, zero, 16) == 0;
}

static bool ip16_is_local_interface(const unsigned char a[16])
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        unsigned char b[16];
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
            memset(b, 0, 10);
            b[10] = b[11] = 0xff;
            memcpy(b + 12, &sin->sin_addr, 4);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *sin6 =
                (const struct sockaddr_in6 *)(const void *)i->ifa_addr;
            memcpy(b, &sin6->sin6_addr, 16);
        } else {
            continue;
        }
        found = memcmp(a, b, 16) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

bool srv_addr_is_loopback(const char *host)
{
    if (!host)
        return false;
    if (ascii_ieq(host, "localhost"))
        return true;
    unsigned char a[16];
    return parse_ip16(host, a) && ip16_is_loopback(a);
}

static bool ends_with_ci(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && ascii_ieq(s + n - m, suffix);
}

bool srv_host_allowed(const char *host_header)
{
    if (!host_header)
        return true;  // no Host header: the empty host
    char host[512];
    struct str h, port;
    if (!host_split_port(str_from(host_header), &h, &port))
        h = str_from(host_header);
    if (h.len >= sizeof(host))
        return false;
    snprintf(host, sizeof(host), "%.*s", (int)h.len, h.ptr);

    unsigned char a[16];
    if (parse_ip16(host, a))
        return ip16_is_loopback(a) || ip16_is_private(a) || ip16_is_unspecified(a) ||
               ip16_is_local_interface(a);

    if (!*host || ascii_ieq(host, "localhost"))
        return true;
    char hostname[256];
    if (gethostname(hostname, sizeof(hostname)) == 0) {
        hostname[sizeof(hostname) - 1] = '\0';
        if (*hostname && ascii_ieq(host, hostname))
            return true;
    }
    return ends_with_ci(host, ".localhost") || ends_with_ci(host, ".local") ||
           ends_with_ci(host, ".internal");
}

// Environment configuration (docs/spec/env.md): the parsing rules every OLLAMA_*
// variable follows, OLLAMA_HOST (docs/spec/cli.md §1.1) and the CORS origin list
// (the checks that use it are the server's: server/policy.c).
#include "util/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENV_VALUE_MAX 4096
#define DEFAULT_PORT  11434

// ---------------------------------------------------------------------------
// Parsing rules (§1)

const char *env_clean(const char *raw, char *tmp, size_t n)
{
    if (!raw)
        return NULL;
    struct str s = str_trim(str_from(raw));
    while (s.len && (s.ptr[0] == '"' || s.ptr[0] == '\'')) {
        s.ptr++;
        s.len--;
    }
    while (s.len && (s.ptr[s.len - 1] == '"' || s.ptr[s.len - 1] == '\''))
        s.len--;
    if (!s.len || s.len >= n)
        return NULL;
    memcpy(tmp, s.ptr, s.len);
    tmp[s.len] = '\0';
    return tmp;
}

// Go strconv.ParseBool; returns false when v is not one of its words.
static bool parse_bool_word(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(v, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcmp(v, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

bool env_parse_bool(const char *v, bool dflt)
{
    if (!v || !*v)
        return dflt;
    bool b;
    return parse_bool_word(v, &b) ? b : true;
}

int env_parse_debug_level(const char *v)
{
    if (!v || !*v)
        return LOG_INFO;
    bool b;
    if (parse_bool_word(v, &b) && b)
        return LOG_DEBUG;
    int64_t n;
    if (str_to_i64(v, INT64_MIN / 4, INT64_MAX / 4, &n, NULL) == 0 && n != 0) {
        int64_t level = -4 * n;
        if (level < -1000000)
            level = -1000000;
        if (level > 1000000)
            level = 1000000;
        return (int)level;
    }
    return LOG_INFO;
}

static const char *env_get(const char *key, char *tmp, size_t n)
{
    return env_clean(getenv(key), tmp, n);
}

static bool env_bool(const char *key, bool dflt)
{
    char tmp[ENV_VALUE_MAX];
    return env_parse_bool(env_get(key, tmp, sizeof(tmp)), dflt);
}

static uint64_t env_uint(const char *key, uint64_t dflt)
{
    char tmp[ENV_VALUE_MAX];
    const char *v = env_get(key, tmp, sizeof(tmp));
    if (!v)
        return dflt;
    uint64_t n;
    if (str_to_u64(v, UINT64_MAX, &n, NULL) < 0) {
        char kv[ENV_VALUE_MAX + 128];
        snprintf(kv, sizeof(kv), "key=%s value=\"%s\" default=%llu", key, v,
                 (unsigned long long)dflt);
        log_kv(LOG_WARN, kv, "invalid environment variable, using default");
        return dflt;
    }
    return n;
}

static int64_t env_duration(const char *key, int64_t dflt)
{
    char tmp[ENV_VALUE_MAX];
    const char *v = env_get(key, tmp, sizeof(tmp));
    if (!v)
        return dflt;
    int64_t ns;
    struct err e = {0};
    if (duration_parse(v, &ns, &e) < 0) {
        char d[64], kv[ENV_VALUE_MAX + 128];
        duration_format(dflt, d, sizeof(d));
        snprintf(kv, sizeof(kv), "key=%s value=\"%s\" default=%s", key, v, d);
        log_kv(LOG_WARN, kv, "invalid environment variable, using default");
        return dflt;
    }
    return ns;
}

// ---------------------------------------------------------------------------
// OLLAMA_HOST

static bool copy_str(char *dst, size_t n, const char *p, size_t len)
{
    if (len >= n)
        return false;
    memcpy(dst, p, len);
    dst[len] = '\0';
    return true;
}

// Go net.SplitHostPort: "host:port" or "[v6]:port"; false when there is no
// port or the host is ambiguous (an unbracketed IPv6 address).
bool host_split_port(struct str hp, struct str *host, struct str *port)
{
    if (hp.len && hp.ptr[0] == '[') {
        const char *close = memchr(hp.ptr, ']', hp.len);
        if (!close)
            return false;
        size_t end = (size_t)(close - hp.ptr);
        if (end + 1 >= hp.len || hp.ptr[end + 1] != ':')
            return false;
        *host = (struct str){hp.ptr + 1, end - 1};
        *port = (struct str){hp.ptr + end + 2, hp.len - end - 2};
        if (memchr(host->ptr, '[', host->len) || memchr(port->ptr, ']', port->len) ||
            memchr(port->ptr, '[', port->len))
            return false;
        return true;
    }
    const char *colon = NULL;
    for (size_t i = 0; i < hp.len; i++)
        if (hp.ptr[i] == ':')
            colon = hp.ptr + i;
    if (!colon)
        return false;
    *host = (struct str){hp.ptr, (size_t)(colon - hp.ptr)};
    *port = (struct str){colon + 1, hp.len - host->len - 1};
    if (memchr(host->ptr, ':', host->len) || memchr(host->ptr, '[', host->len) ||
        memchr(host->ptr, ']', host->len))
        return false;
    return true;
}

// Normalises an IP literal as Go's ip.String() would; false if not an IP.
static bool normalize_ip(const char *s, char *out, size_t n)
{
    unsigned char addr[16];
    if (inet_pton(AF_INET, s, addr) == 1)
        return inet_ntop(AF_INET, addr, out, (socklen_t)n) != NULL;
    if (inet_pton(AF_INET6, s, addr) == 1)
        return inet_ntop(AF_INET6, addr, out, (socklen_t)n) != NULL;
    return false;
}

int host_parse(const char *s, struct host_addr *out, struct err *e)
{
    char tmp[ENV_VALUE_MAX];
    const char *v = env_clean(s, tmp, sizeof(tmp));
    if (s && !v && str_trim(str_from(s)).len >= sizeof(tmp))
        return err_set(e, ERR_INVALID, "OLLAMA_HOST is too long");
    if (!v)
        v = "";

    struct host_addr h = {.scheme = "http", .port = DEFAULT_PORT};
    unsigned default_port = DEFAULT_PORT;
    struct str hp;
    const char *sep = strstr(v, "://");
    if (!sep) {
        hp = str_from(v);
        if (strcmp(v, "ollama.com") == 0) {
            snprintf(h.scheme, sizeof(h.scheme), "https");
            hp = STR_LIT("ollama.com:443");
        }
    } else {
        if (!copy_str(h.scheme, sizeof(h.scheme), v, (size_t)(sep - v)))
            return err_set(e, ERR_INVALID, "OLLAMA_HOST scheme is too long");
        if (strcmp(h.scheme, "http") == 0)
            default_port = 80;
        else if (strcmp(h.scheme, "https") == 0)
            default_port = 443;
        hp = str_from(sep + 3);
    }

    // A path prefix follows the first '/'.
    const char *slash = memchr(hp.ptr, '/', hp.len);
    if (slash) {
        size_t plen = hp.len - (size_t)(slash - hp.ptr);
        if (plen > 1 && !copy_str(h.path, sizeof(h.path), slash, plen))
            return err_set(e, ERR_INVALID, "OLLAMA_HOST path is too long");
        hp.len = (size_t)(slash - hp.ptr);
    }

    struct str host, port;
    char hostbuf[256];
    unsigned port_val = default_port;
    if (host_split_port(hp, &host, &port)) {
        if (!copy_str(hostbuf, sizeof(hostbuf), host.ptr, host.len))
            return err_set(e, ERR_INVALID, "OLLAMA_HOST host is too long");
        char pbuf[32];
        int64_t pn;
        if (copy_str(pbuf, sizeof(pbuf), port.ptr, port.len) &&
            str_to_i64(pbuf, 0, 65535, &pn, NULL) == 0) {
            port_val = (unsigned)pn;
        } else {
            char kv[128];
            snprintf(kv, sizeof(kv), "port=\"%.*s\" default=%u",
                     (int)(port.len > 32 ? 32 : port.len), port.ptr, default_port);
            log_kv(LOG_WARN, kv, "invalid port, using default");
        }
    } else {
        // No port: the whole value is the host (brackets stripped for IPv6).
        struct str t = hp;
        while (t.len && t.ptr[0] == '[') {
            t.ptr++;
            t.len--;
        }
        while (t.len && t.ptr[t.len - 1] == ']')
            t.len--;
        char ipbuf[256];
        if (!hp.len) {
            snprintf(hostbuf, sizeof(hostbuf), "127.0.0.1");
        } else if (copy_str(ipbuf, sizeof(ipbuf), t.ptr, t.len) &&
                   normalize_ip(ipbuf, hostbuf, sizeof(hostbuf))) {
            // an IP literal
        } else if (!copy_str(hostbuf, sizeof(hostbuf), hp.ptr, hp.len)) {
            return err_set(e, ERR_INVALID, "OLLAMA_HOST host is too long");
        }
    }
    snprintf(h.host, sizeof(h.host), "%s", hostbuf);
    h.port = (uint16_t)port_val;
    *out = h;
    return 0;
}

static void format_url(const struct host_addr *h, const char *host, char *out, size_t n)
{
    bool v6 = strchr(host, ':') != NULL;
    snprintf(out, n, "%s://%s%s%s:%u%s", h->scheme, v6 ? "[" : "", host, v6 ? "]" : "",
             (unsigned)h->port, h->path);
}

void host_format_url(const struct host_addr *h, char *out, size_t n)
{
    format_url(h, h->host, out, n);
}

void host_format_connect_url(const struct host_addr *h, char *out, size_t n)
{
    const char *host = h->host;
    unsigned char addr[16];
    static const unsigned char zero16[16];
    if (!*host || strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (inet_pton(AF_INET6, host, addr) == 1 && memcmp(addr, zero16, 16) == 0)
        host = "::1";
    format_url(h, host, out, n);
}

// ---------------------------------------------------------------------------
// Home directory

static char home_dir[4096];
static pthread_once_t home_once = PTHREAD_ONCE_INIT;

static void home_init(void)
{
    const char *h = getenv("HOME");
    if (h && *h) {
        snprintf(home_dir, sizeof(home_dir), "%s", h);
        return;
    }
    struct passwd pw, *res = NULL;
    char buf[16384];
    if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_dir &&
        *res->pw_dir) {
        snprintf(home_dir, sizeof(home_dir), "%s", res->pw_dir);
        return;
    }
    snprintf(home_dir, sizeof(home_dir), "/");
}

const char *env_home_dir(void)
{
    pthread_once(&home_once, home_init);
    return home_dir;
}

// ---------------------------------------------------------------------------
// Configuration

static const char *const default_origin_hosts[] = {"localhost", "127.0.0.1", "0.0.0.0"};
static const char *const default_origin_schemes[] = {"app://*", "file://*", "tauri://*",
                                                     "vscode-webview://*", "vscode-file://*"};

static char **origins_build(const char *list)
{
    size_t n_user = 0;
    if (list) {
        n_user = 1;
        for (const char *p = list; *p; p++)
            n_user += *p == ',';
    }
    size_t n = n_user + 4 * 3 + 5;
    char **o = xcalloc(n + 1, sizeof(char *));
    size_t k = 0;
    if (list) {
        const char *p = list;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char *item = xstrndup(p, len);
            // The CORS middleware compares against lower-cased entries.
            for (char *c = item; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            o[k++] = item;
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    for (size_t i = 0; i < 3; i++) {
        const char *hn = default_origin_hosts[i];
        o[k++] = xasprintf("http://%s", hn);
        o[k++] = xasprintf("https://%s", hn);
        o[k++] = xasprintf("http://%s:*", hn);
        o[k++] = xasprintf("https://%s:*", hn);
    }
    for (size_t i = 0; i < 5; i++)
        o[k++] = xstrdup(default_origin_schemes[i]);
    o[k] = NULL;
    return o;
}

void env_config_load(struct env_config *c)
{
    char tmp[ENV_VALUE_MAX];
    memset(c, 0, sizeof(*c));

    struct err e = {0};
    if (host_parse(getenv("OLLAMA_HOST"), &c->host, &e) < 0) {
        log_warn("OLLAMA_HOST: %s, using default", e.msg);
        host_parse(NULL, &c->host, NULL);
    }

    const char *v = env_get("OLLAMA_MODELS", tmp, sizeof(tmp));
    c->models_dir = v ? xstrdup(v) : xasprintf("%s/.ollama/models", env_home_dir());

    c->keep_alive_ns = env_duration("OLLAMA_KEEP_ALIVE", 5 * 60 * 1000000000LL);
    c->load_timeout_ns = env_duration("OLLAMA_LOAD_TIMEOUT", 5 * 60 * 1000000000LL);
    c->context_length = env_uint("OLLAMA_CONTEXT_LENGTH", 0);
    c->num_parallel = env_uint("OLLAMA_NUM_PARALLEL", 1);
    c->max_loaded_models = env_uint("OLLAMA_MAX_LOADED_MODELS", 0);
    c->max_queue = env_uint("OLLAMA_MAX_QUEUE", 512);
    c->max_transfer_streams = env_uint("OLLAMA_MAX_TRANSFER_STREAMS", 4);
    c->gpu_overhead = env_uint("OLLAMA_GPU_OVERHEAD", 0);

    c->origins = origins_build(env_get("OLLAMA_ORIGINS", tmp, sizeof(tmp)));
    c->debug_level = env_parse_debug_level(env_get("OLLAMA_DEBUG", tmp, sizeof(tmp)));

    c->noprune = env_bool("OLLAMA_NOPRUNE", false);
    c->sched_spread = env_bool("OLLAMA_SCHED_SPREAD", false);
    c->nohistory = env_bool("OLLAMA_NOHISTORY", false);
    c->auth = env_bool("OLLAMA_AUTH", false);
    c->no_cloud = env_bool("OLLAMA_NO_CLOUD", false);

    v = env_get("OLLAMA_FLASH_ATTENTION", tmp, sizeof(tmp));
    c->flash_attention = v ? env_parse_bool(v, false) : -1;

    snprintf(c->kv_cache_type, sizeof(c->kv_cache_type), "f16");
    v = env_get("OLLAMA_KV_CACHE_TYPE", tmp, sizeof(tmp));
    if (v) {
        if (ascii_ieq(v, "f16") || ascii_ieq(v, "q8_0") || ascii_ieq(v, "q4_0")) {
            for (size_t i = 0; v[i] && i < sizeof(c->kv_cache_type) - 1; i++)
                c->kv_cache_type[i] = (char)tolower((unsigned char)v[i]);
        } else {
            log_warn("unsupported OLLAMA_KV_CACHE_TYPE \"%s\", using f16", v);
        }
    }

    v = env_get("OLLAMA_REGISTRY_MIRROR", tmp, sizeof(tmp));
    c->registry_mirror = v ? xstrdup(v) : NULL;
    v = env_get("OLLAMA_PULL_MIRROR", tmp, sizeof(tmp));
    c->pull_mirror = v ? xstrdup(v) : NULL;
    c->drain_timeout_ns = env_duration("OLLAMA_DRAIN_TIMEOUT", 5 * 1000000000LL);
    v = env_get("OLLAMA_LLM_LIBRARY", tmp, sizeof(tmp));
    c->llm_library = v ? xstrdup(v) : NULL;
    v = env_get("OLLAMA_EDITOR", tmp, sizeof(tmp));
    c->editor = v ? xstrdup(v) : NULL;
    c->go_template = env_bool("OLLAMA_GO_TEMPLATE", true);
    c->debug_log_requests = env_bool("OLLAMA_DEBUG_LOG_REQUESTS", false);
}

// slog.Level's String(): INFO, DEBUG, DEBUG-4, WARN+2 ...
static void level_string(int level, char *out, size_t n)
{
    static const struct {
        int base;
        const char *name;
    } names[] = {
        {LOG_ERROR, "ERROR"}, {LOG_WARN, "WARN"}, {LOG_INFO, "INFO"}, {LOG_DEBUG, "DEBUG"}};
    for (size_t i = 0; i < 4; i++) {
        if (level >= names[i].base || i == 3) {
            int d = level - names[i].base;
            if (d)
                snprintf(out, n, "%s%+d", names[i].name, d);
            else
                snprintf(out, n, "%s", names[i].name);
            return;
        }
    }
}

static int describe_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int env_config_describe(const struct env_config *c, struct buf *out)
{
    // Durations print as Go's: keep-alive < 0 and load timeout <= 0 mean
    // forever, shown as the largest duration.
    char ka[64], lt[64], dt[64], lvl[32], url[600], fa[8];
    duration_format(c->drain_timeout_ns < 0 ? 0 : c->drain_timeout_ns, dt, sizeof(dt));
    duration_format(c->keep_alive_ns < 0 ? INT64_MAX : c->keep_alive_ns, ka, sizeof(ka));
    duration_format(c->load_timeout_ns <= 0 ? INT64_MAX : c->load_timeout_ns, lt, sizeof(lt));
    level_string(c->debug_level, lvl, sizeof(lvl));
    host_format_url(&c->host, url, sizeof(url));
    snprintf(fa, sizeof(fa), "%s", c->flash_attention == 1 ? "true" : "false");
    struct buf origins;
    buf_init(&origins, 0);
    buf_append_char(&origins, '[');
    for (char **o = c->origins; o && *o; o++)
        buf_printf(&origins, "%s%s", o == c->origins ? "" : " ", *o);
    buf_append_char(&origins, ']');

    char *items[32];
    size_t n = 0;
    const char *kv_cache = strcmp(c->kv_cache_type, "f16") == 0 ? "" : c->kv_cache_type;
    items[n++] = xasprintf("OLLAMA_CONTEXT_LENGTH:%llu", (unsigned long long)c->context_length);
    items[n++] = xasprintf("OLLAMA_DEBUG:%s", lvl);
    items[n++] =
        xasprintf("OLLAMA_DEBUG_LOG_REQUESTS:%s", c->debug_log_requests ? "true" : "false");
    items[n++] = xasprintf("OLLAMA_EDITOR:%s", c->editor ? c->editor : "");
    items[n++] = xasprintf("OLLAMA_DRAIN_TIMEOUT:%s", dt);
    items[n++] = xasprintf("OLLAMA_FLASH_ATTENTION:%s", fa);
    items[n++] = xasprintf("OLLAMA_GO_TEMPLATE:%s", c->go_template ? "true" : "false");
    items[n++] = xasprintf("OLLAMA_GPU_OVERHEAD:%llu", (unsigned long long)c->gpu_overhead);
    items[n++] = xasprintf("OLLAMA_HOST:%s", url);
    items[n++] = xasprintf("OLLAMA_KEEP_ALIVE:%s", ka);
    items[n++] = xasprintf("OLLAMA_KV_CACHE_TYPE:%s", kv_cache);
    items[n++] = xasprintf("OLLAMA_LLM_LIBRARY:%s", c->llm_library ? c->llm_library : "");
    items[n++] = xasprintf("OLLAMA_LOAD_TIMEOUT:%s", lt);
    items[n++] =
        xasprintf("OLLAMA_MAX_LOADED_MODELS:%llu", (unsigned long long)c->max_loaded_models);
    items[n++] = xasprintf("OLLAMA_MAX_QUEUE:%llu", (unsigned long long)c->max_queue);
    items[n++] =
        xasprintf("OLLAMA_MAX_TRANSFER_STREAMS:%llu", (unsigned long long)c->max_transfer_streams);
    items[n++] = xasprintf("OLLAMA_MODELS:%s", c->models_dir ? c->models_dir : "");
    items[n++] = xasprintf("OLLAMA_NOHISTORY:%s", c->nohistory ? "true" : "false");
    items[n++] = xasprintf("OLLAMA_NOPRUNE:%s", c->noprune ? "true" : "false");
    items[n++] = xasprintf("OLLAMA_NO_CLOUD:%s", c->no_cloud ? "true" : "false");
    items[n++] = xasprintf("OLLAMA_NUM_PARALLEL:%llu", (unsigned long long)c->num_parallel);
    items[n++] = xasprintf("OLLAMA_ORIGINS:%s", buf_cstr(&origins));
    items[n++] = xasprintf("OLLAMA_PULL_MIRROR:%s", c->pull_mirror ? c->pull_mirror : "");
    items[n++] =
        xasprintf("OLLAMA_REGISTRY_MIRROR:%s", c->registry_mirror ? c->registry_mirror : "");
    items[n++] = xasprintf("OLLAMA_SCHED_SPREAD:%s", c->sched_spread ? "true" : "false");
    buf_deinit(&origins);
    qsort(items, n, sizeof(items[0]), describe_cmp);

    int rc = buf_append_str(out, "map[");
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = buf_printf(out, "%s%s", i ? " " : "", items[i]);
        free(items[i]);
    }
    return rc < 0 ? rc : buf_append_char(out, ']');
}

void env_config_deinit(struct env_config *c)
{
    if (!c)
        return;
    free(c->models_dir);
    free(c->registry_mirror);
    free(c->pull_mirror);
    free(c->llm_library);
    free(c->editor);
    if (c->origins) {
        for (char **o = c->origins; *o; o++)
            free(*o);
        free(c->origins);
    }
    memset(c, 0, sizeof(*c));
}

// Observability of `ollama serve`: the access log and GET /metrics.
//
// http.c calls server_observe_request once for every request, when it ends:
// that writes Ollama's access-log line (gin's format) and counts the request
// by route, method and status. GET /metrics answers in the Prometheus text
// exposition format (version 0.0.4) from counters kept in C11 atomics, so
// observing a request costs a few relaxed atomic adds and no lock; the
// loaded models and the scheduler's queue are read when /metrics is asked.
#include "server/internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/sched.h"

// Statuses counted by their own series; anything else is counted as "other"
// (keeps the series bounded whatever clients send).
static const int counted_statuses[] = {200, 201, 204, 301, 307, 400, 401, 403,
                                       404, 405, 408, 413, 429, 499, 500, 503};
#define N_STATUS (sizeof(counted_statuses) / sizeof(counted_statuses[0]) + 1)
// Routes: every row of every table (and one slot for unrouted paths).
#define MAX_ROUTES 96

static atomic_uint_fast64_t requests[MAX_ROUTES + 1][N_STATUS];
static atomic_uint_fast64_t request_ns_sum[MAX_ROUTES + 1];
static atomic_uint_fast64_t prompt_tokens, generated_tokens, generation_ns, pulled_bytes;

static const struct srv_route *route_at(size_t idx)
{
    size_t k = 0;
    for (const struct srv_route *const *t = server_route_tables; *t; t++)
        for (const struct srv_route *rt = *t; rt->pattern; rt++, k++)
            if (k == idx)
                return rt;
    return NULL;
}

// The index of the route row that served method + path (HEAD counts as
// GET), or MAX_ROUTES when none did.
static size_t route_index(const char *method, const char *path)
{
    size_t k = 0;
    for (const struct srv_route *const *t = server_route_tables; *t; t++) {
        for (const struct srv_route *rt = *t; rt->pattern && k < MAX_ROUTES; rt++, k++) {
            size_t n = strlen(rt->pattern);
            bool star = n && rt->pattern[n - 1] == '*';
            bool match =
                star ? strncmp(rt->pattern, path, n - 1) == 0 : strcmp(rt->pattern, path) == 0;
            bool meth = strcmp(rt->method, method) == 0 ||
                        (strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0);
            if (match && meth)
                return k;
        }
    }
    return MAX_ROUTES;
}

static size_t status_index(int status)
{
    for (size_t i = 0; i + 1 < N_STATUS; i++)
        if (counted_statuses[i] == status)
            return i;
    return N_STATUS - 1;
}

// Go's time.Duration String for the latency column: "812ns", "12.5µs",
// "3.021ms", "1.5s" (at most 9 significant decimals, trailing zeros dropped).
static void format_duration(int64_t ns, char *out, size_t n)
{
    const char *unit = "ns";
    double v = (double)ns;
    if (ns >= 1000000000) {
        unit = "s";
        v /= 1e9;
    } else if (ns >= 1000000) {
        unit = "ms";
        v /= 1e6;
    } else if (ns >= 1000) {
        unit = "µs";
        v /= 1e3;
    }
    int k = snprintf(out, n, "%.6f", v);
    while (k > 0 && (size_t)k < n && strchr(out, '.') && (out[k - 1] == '0' || out[k - 1] == '.'))
        out[--k] = '\0';
    snprintf(out + k, n - (size_t)k, "%s", unit);
}

// "127.0.0.1:54321" or "[::1]:54321" -> the address alone, as gin prints it.
static void client_ip(const char *client, char *out, size_t n)
{
    const char *p = client ? client : "";
    size_t len = strlen(p);
    const char *colon = strrchr(p, ':');
    if (*p == '[') {
        const char *close = strchr(p, ']');
        p++;
        len = close ? (size_t)(close - p) : strlen(p);
    } else if (colon && strchr(p, ':') == colon) {
        len = (size_t)(colon - p);
    }
    snprintf(out, n, "%.*s", (int)len, p);
}

void server_observe_request(const char *method, const char *path, int status, int64_t ns,
                            const char *client)
{
    size_t ri = route_index(method, path);
    atomic_fetch_add_explicit(&requests[ri][status_index(status)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&request_ns_sum[ri], (uint_fast64_t)(ns > 0 ? ns : 0),
                              memory_order_relaxed);
    if (!log_enabled(LOG_INFO))
        return;
    // [GIN] 2006/01/02 - 15:04:05 | 200 |   1.234567ms |       127.0.0.1 | POST     "/api/chat"
    char when[32], lat[32], ip[INET6_ADDRSTRLEN];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof(when), "%Y/%m/%d - %H:%M:%S", &tm);
    format_duration(ns, lat, sizeof(lat));
    client_ip(client, ip, sizeof(ip));
    struct buf line;
    buf_init(&line, 0);
    // "µ" is two bytes but one column: pad as gin does, by characters.
    int pad = 13 + (strstr(lat, "µ") ? 1 : 0);
    buf_printf(&line, "[GIN] %s | %3d | %*s | %15s | %-7s ", when, status, pad, lat, ip, method);
    jsonx_dump_string(path, strlen(path), 0, &line);
    buf_append_str(&line, "\n");
    fwrite(line.data, 1, line.len, stderr);
    buf_deinit(&line);
}

void server_metrics_tokens(int64_t prompt, int64_t generated, int64_t generation_ns_)
{
    if (prompt > 0)
        atomic_fetch_add_explicit(&prompt_tokens, (uint_fast64_t)prompt, memory_order_relaxed);
    if (generated > 0)
        atomic_fetch_add_explicit(&generated_tokens, (uint_fast64_t)generated,
                                  memory_order_relaxed);
    if (generation_ns_ > 0)
        atomic_fetch_add_explicit(&generation_ns, (uint_fast64_t)generation_ns_,
                                  memory_order_relaxed);
}

void server_metrics_pulled(uint64_t bytes)
{
    atomic_fetch_add_explicit(&pulled_bytes, bytes, memory_order_relaxed);
}

// Writes a label value with Prometheus escaping (\\, \", \n).
static void label_value(struct buf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            buf_printf(out, "\\%c", *s);
        else if (*s == '\n')
            buf_append_str(out, "\\n");
        else
            buf_append(out, s, 1);
    }
}

static void help(struct buf *out, const char *name, const char *type, const char *text)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static uint64_t load(atomic_uint_fast64_t *v)
{
    return (uint64_t)atomic_load_explicit(v, memory_order_relaxed);
}

// The per-route HTTP counters.
static void route_metrics(struct buf *out)
{
    help(out, "ollama_http_requests_total", "counter",
         "HTTP requests answered, by route, method and status.");
    for (size_t ri = 0; ri <= MAX_ROUTES; ri++) {
        const struct srv_route *rt = ri < MAX_ROUTES ? route_at(ri) : NULL;
        if (ri < MAX_ROUTES && !rt)
            continue;
        for (size_t si = 0; si < N_STATUS; si++) {
            uint64_t n = load(&requests[ri][si]);
            if (!n)
                continue;
            buf_append_str(out, "ollama_http_requests_total{route=\"");
            label_value(out, rt ? rt->pattern : "other");
            buf_printf(out, "\",method=\"%s\",status=\"", rt ? rt->method : "other");
            if (si + 1 < N_STATUS)
                buf_printf(out, "%d", counted_statuses[si]);
            else
                buf_append_str(out, "other");
            buf_printf(out, "\"} %llu\n", (unsigned long long)n);
        }
    }
    help(out, "ollama_http_request_seconds_total", "counter",
         "Time spent answering HTTP requests (to the last byte), by route.");
    for (size_t ri = 0; ri <= MAX_ROUTES; ri++) {
        const struct srv_route *rt = ri < MAX_ROUTES ? route_at(ri) : NULL;
        uint64_t ns = load(&request_ns_sum[ri]);
        if (!ns || (ri < MAX_ROUTES && !rt))
            continue;
        buf_append_str(out, "ollama_http_request_seconds_total{route=\"");
        label_value(out, rt ? rt->pattern : "other");
        buf_printf(out, "\",method=\"%s\"} %.9f\n", rt ? rt->method : "other", (double)ns / 1e9);
    }
}

// The loaded models and their memory (the scheduler's ps list).
static void model_metrics(struct server *srv, struct buf *out)
{
    json_t *ps = srv->sched ? sched_ps_json(srv->sched) : NULL;
    json_t *models = json_object_get(ps, "models");
    help(out, "ollama_loaded_models", "gauge", "Models loaded in a runner now.");
    buf_printf(out, "ollama_loaded_models %zu\n", json_array_size(models));
    help(out, "ollama_loaded_model_bytes", "gauge", "Memory of each loaded model, in bytes.");
    size_t i;
    json_t *m;
    json_array_foreach(models, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        buf_append_str(out, "ollama_loaded_model_bytes{model=\"");
        label_value(out, name ? name : "");
        buf_printf(out, "\"} %lld\n", (long long)json_integer_value(json_object_get(m, "size")));
    }
    json_decref(ps);
}

void srv_metrics_text(struct server *srv, struct buf *out)
{
    route_metrics(out);
    uint64_t active = 0, queued = 0;
    if (srv->sched)
        sched_counts(srv->sched, &active, &queued);
    help(out, "ollama_requests_in_flight", "gauge",
         "Inference requests holding a model runner now.");
    buf_printf(out, "ollama_requests_in_flight %llu\n", (unsigned long long)active);
    help(out, "ollama_requests_queued", "gauge",
         "Inference requests waiting for a model to load or a runner to free up.");
    buf_printf(out, "ollama_requests_queued %llu\n", (unsigned long long)queued);
    help(out, "ollama_queue_capacity", "gauge",
         "Most requests that may wait for a model load (OLLAMA_MAX_QUEUE); past it, 503.");
    buf_printf(out, "ollama_queue_capacity %llu\n",
               (unsigned long long)(srv->cfg ? srv->cfg->max_queue : 0));
    help(out, "ollama_http_requests_active", "gauge",
         "HTTP requests in progress (streams included), this one too.");
    buf_printf(out, "ollama_http_requests_active %d\n", atomic_load(&srv->requests));
    help(out, "ollama_draining", "gauge",
         "1 while the server drains after SIGTERM (new requests get 503), else 0.");
    buf_printf(out, "ollama_draining %d\n", atomic_load(&srv->draining) ? 1 : 0);
    uint64_t gen = load(&generated_tokens), gen_ns = load(&generation_ns);
    help(out, "ollama_prompt_tokens_total", "counter", "Prompt tokens evaluated.");
    buf_printf(out, "ollama_prompt_tokens_total %llu\n", (unsigned long long)load(&prompt_tokens));
    help(out, "ollama_generated_tokens_total", "counter", "Tokens generated.");
    buf_printf(out, "ollama_generated_tokens_total %llu\n", (unsigned long long)gen);
    help(out, "ollama_generation_seconds_total", "counter", "Time spent generating tokens.");
    buf_printf(out, "ollama_generation_seconds_total %.9f\n", (double)gen_ns / 1e9);
    help(out, "ollama_generation_tokens_per_second", "gauge",
         "Generated tokens per second of generation time, since the server started.");
    buf_printf(out, "ollama_generation_tokens_per_second %.3f\n",
               gen_ns ? (double)gen / ((double)gen_ns / 1e9) : 0.0);
    help(out, "ollama_pulled_bytes_total", "counter", "Bytes of model layers pulled.");
    buf_printf(out, "ollama_pulled_bytes_total %llu\n", (unsigned long long)load(&pulled_bytes));
    model_metrics(srv, out);
}

static void handle_metrics(struct srv_req *r)
{
    struct buf out;
    buf_init(&out, 0);
    srv_metrics_text(r->srv, &out);
    srv_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "",
              out.len);
    buf_deinit(&out);
}

const struct srv_route server_metrics_routes[] = {
    {"GET", "/metrics", handle_metrics, NULL},
    {NULL, NULL, NULL, NULL},
};

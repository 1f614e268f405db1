// Structured logging to stderr in Ollama's slog text format:
//   time=2024-05-01T12:00:00.000Z level=INFO source=server.c:42 msg="listening" addr=...
#include "util/util.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int log_level = LOG_INFO;

void log_set_level(int level)
{
    atomic_store(&log_level, level);
}

int log_get_level(void)
{
    return atomic_load(&log_level);
}

bool log_enabled(int level)
{
    return level >= atomic_load(&log_level);
}

// slog's text handler quotes a value when it is empty or holds a space, '=',
// '"', a control character or invalid UTF-8; quoting follows Go's strconv.Quote.
static bool needs_quoting(const char *s)
{
    if (!*s)
        return true;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '=' || *p == '"' || *p == 0x7f)
            return true;
    return !utf8_valid(s, strlen(s));
}

static int log_append_value(struct buf *b, const char *s)
{
    if (!needs_quoting(s))
        return buf_append_str(b, s);
    buf_append_char(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            // Valid sequences are kept; each invalid byte is shown as \xNN.
            size_t len = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc0 ? 2 : 0;
            if (len && strnlen((const char *)p, len) == len && utf8_valid((const char *)p, len)) {
                buf_append(b, p, len);
                p += len - 1;
            } else {
                buf_printf(b, "\\x%02x", *p);
            }
            continue;
        }
        switch (*p) {
        case '"':
            buf_append_str(b, "\\\"");
            break;
        case '\\':
            buf_append_str(b, "\\\\");
            break;
        case '\n':
            buf_append_str(b, "\\n");
            break;
        case '\r':
            buf_append_str(b, "\\r");
            break;
        case '\t':
            buf_append_str(b, "\\t");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                buf_printf(b, "\\x%02x", *p);
            else
                buf_append_char(b, (char)*p);
        }
    }
    return buf_append_char(b, '"');
}

int log_kv_append(struct buf *b, const char *key, const char *value)
{
    int rc = buf_printf(b, " %s=", key);
    return rc < 0 ? rc : log_append_value(b, value ? value : "");
}

static const char *level_name(int level)
{
    if (level >= LOG_ERROR)
        return "ERROR";
    if (level >= LOG_WARN)
        return "WARN";
    if (level >= LOG_INFO)
        return "INFO";
    if (level >= LOG_DEBUG)
        return "DEBUG";
    return "TRACE";
}

void log_write(int level, const char *file, int line, const char *kv, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    // The whole message, however long (a debug log of a prompt is the
    // only way to see what the model got).
    char small[2048], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(small)) {
        msg = xmalloc((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[64];
    size_t w = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    char zone[8];
    strftime(zone, sizeof(zone), "%z", &tm);  // +hhmm → +hh:mm as Go prints it, Z for UTC
    if (tm.tm_gmtoff == 0)
        snprintf(when + w, sizeof(when) - w, ".%03ldZ", ts.tv_nsec / 1000000);
    else
        snprintf(when + w, sizeof(when) - w, ".%03ld%.3s:%s", ts.tv_nsec / 1000000, zone, zone + 3);

    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;

    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b, "time=%s level=%s source=%s:%d msg=", when, level_name(level), base, line);
    log_append_value(&b, msg);
    if (msg != small)
        free(msg);
    if (kv && *kv) {
        if (kv[0] != ' ')
            buf_append_char(&b, ' ');
        buf_append_str(&b, kv);
    }
    buf_append_char(&b, '\n');
    fwrite(buf_cstr(&b), 1, b.len, stderr);
    buf_deinit(&b);
}

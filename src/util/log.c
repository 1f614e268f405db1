// Structured logging to stderr in Ollama's slog text format:
//   time=2024-05-01T12:00:00.000Z level=INFO source=server.c:42 msg="listening" addr=...
#include "util/util.h"

#include <stdatomic.h>
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
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[64];
    size_t w = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    char zone[8];
    strftime(zone, sizeof(zone), "%z", &tm);  // +hhmm → +hh:mm as Go prints it
    snprintf(when + w, sizeof(when) - w, ".%03ld%.3s:%s", ts.tv_nsec / 1000000, zone, zone + 3);

    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;

    // Quote the message, escaping quotes and control characters.
    struct buf b;
    buf_init(&b, 1 << 16);
    buf_printf(&b, "time=%s level=%s source=%s:%d msg=\"", when, level_name(level), base, line);
    for (const char *p = msg; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            buf_printf(&b, "\\%c", c);
        else if (c == '\n')
            buf_append_str(&b, "\\n");
        else if (c < 0x20)
            buf_printf(&b, "\\x%02x", c);
        else
            buf_append_char(&b, (char)c);
    }
    buf_append_char(&b, '"');
    if (kv && *kv) {
        if (kv[0] != ' ')
            buf_append_char(&b, ' ');
        buf_append_str(&b, kv);
    }
    buf_append_char(&b, '\n');
    fwrite(buf_cstr(&b), 1, b.len, stderr);
    buf_deinit(&b);
}

// Error codes, their default messages (one table, ERR_MAP in util.h), and the
// first-error-wins message convention of STYLE.md.
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
    const char *msg;
} err_table[] = {
#define ERR_ROW_(name, msg) {ERR_##name, #name, msg},
    ERR_MAP(ERR_ROW_)
#undef ERR_ROW_
};

const char *err_str(int code)
{
    if (code == ERR_OK)
        return "ok";
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].code == code)
            return err_table[i].msg;
    return "unknown error";
}

const char *err_name(int code)
{
    if (code == ERR_OK)
        return "OK";
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].code == code)
            return err_table[i].name;
    return "UNKNOWN";
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
    if (!e || e->code != ERR_OK)
        return code;
    e->code = code;
    if (!fmt) {
        snprintf(e->msg, sizeof(e->msg), "%s", err_str(code));
        return code;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return code;
}

void err_prefix(struct err *e, const char *fmt, ...)
{
    if (!e || e->code == ERR_OK)
        return;
    char prefix[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    char joined[ERR_MSG_MAX];
    snprintf(joined, sizeof(joined), "%s: %s", prefix, e->msg);
    memcpy(e->msg, joined, sizeof(e->msg));
}

void err_clear(struct err *e)
{
    if (!e)
        return;
    e->code = ERR_OK;
    e->msg[0] = '\0';
}

void util_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "assertion failed: %s (%s:%d)\n", cond, file, line);
    abort();
}

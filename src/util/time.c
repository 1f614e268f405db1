// Clocks, Go-compatible durations (time.ParseDuration / Duration.String),
// RFC 3339 timestamps as Go writes them in JSON, and the human-readable
// relative times and sizes that Ollama's CLI prints (its format package).
#include "util/util.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <time.h>

#define NS_PER_S 1000000000LL

int64_t time_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

int64_t time_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// Durations

static const struct {
    const char *name;
    uint64_t ns;
} duration_units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000},  // U+00B5 micro sign
    {"\xce\xbcs", 1000},  // U+03BC Greek small letter mu
    {"ms", 1000000},
    {"s", 1000000000ULL},
    {"m", 60ULL * 1000000000ULL},
    {"h", 3600ULL * 1000000000ULL},
};

// A bare (optionally signed) decimal integer: seconds, as OLLAMA_KEEP_ALIVE
// and keep_alive accept ("300", "-1").
static bool is_bare_integer(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static int parse_seconds(const char *s, int64_t *out_ns, struct err *e)
{
    int64_t secs, ns;
    int rc = str_to_i64(s, INT64_MIN, INT64_MAX, &secs, NULL);
    if (rc == ERR_RANGE || (rc == 0 && !i64_mul(&ns, secs, NS_PER_S)))
        return err_set(e, ERR_RANGE, "time: invalid duration \"%s\": out of range", s);
    if (rc < 0)
        return err_set(e, ERR_INVALID, "time: invalid duration \"%s\"", s);
    *out_ns = ns;
    return 0;
}

// The largest magnitude a duration may have; only a negative one (INT64_MIN)
// reaches it.
#define DURATION_MAX (UINT64_C(1) << 63)

static int duration_range_error(struct err *e, const char *orig)
{
    return err_set(e, ERR_RANGE, "time: invalid duration \"%s\": out of range", orig);
}

// The integer digits at *s into *v; all of them are consumed. Returns false
// when the value passes 2^63.
static bool scan_int_part(const char **s, uint64_t *v, bool *pre)
{
    bool overflow = false;
    while (isdigit((unsigned char)**s)) {
        *pre = true;
        unsigned d = (unsigned)(**s - '0');
        if (*v > DURATION_MAX / 10 || *v * 10 + d > DURATION_MAX)
            overflow = true;
        else
            *v = *v * 10 + d;
        (*s)++;
    }
    return !overflow;
}

// The digits after a '.' at *s into *f, with *scale = 10^(digits kept):
// digits past what a uint64 holds are ignored, as Go does.
static void scan_fraction(const char **s, uint64_t *f, double *scale, bool *post)
{
    if (**s != '.')
        return;
    (*s)++;
    bool fover = false;
    while (isdigit((unsigned char)**s)) {
        *post = true;
        uint64_t y = *f * 10 + (uint64_t)(**s - '0');
        if (fover || *f > (uint64_t)INT64_MAX / 10 || y > DURATION_MAX) {
            fover = true;
        } else {
            *f = y;
            *scale *= 10;
        }
        (*s)++;
    }
}

// Nanoseconds per unit for a unit name of ulen bytes, or 0 for none.
static uint64_t duration_unit_ns(const char *u, size_t ulen)
{
    for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++)
        if (strlen(duration_units[i].name) == ulen && memcmp(duration_units[i].name, u, ulen) == 0)
            return duration_units[i].ns;
    return 0;
}

// One number and its unit ("1.5h") at *sp, added to *total; orig is the
// whole string, for messages.
static int parse_component(const char **sp, const char *orig, uint64_t *total, struct err *e)
{
    const char *s = *sp;
    uint64_t v = 0, f = 0;
    double scale = 1;
    bool pre = false, post = false;
    if (!scan_int_part(&s, &v, &pre))
        return duration_range_error(e, orig);
    scan_fraction(&s, &f, &scale, &post);
    if (!pre && !post)
        return err_set(e, ERR_INVALID, "time: invalid duration \"%s\"", orig);
    const char *u = s;
    while (*s && *s != '.' && !isdigit((unsigned char)*s))
        s++;
    size_t ulen = (size_t)(s - u);
    if (ulen == 0)
        return err_set(e, ERR_INVALID, "time: missing unit in duration \"%s\"", orig);
    uint64_t unit = duration_unit_ns(u, ulen);
    if (!unit)
        return err_set(e, ERR_INVALID, "time: unknown unit \"%.*s\" in duration \"%s\"", (int)ulen,
                       u, orig);
    if (v > DURATION_MAX / unit)
        return duration_range_error(e, orig);
    v *= unit;
    if (f > 0) {
        v += (uint64_t)((double)f * ((double)unit / scale));
        if (v > DURATION_MAX)
            return duration_range_error(e, orig);
    }
    *total += v;
    if (*total > DURATION_MAX)
        return duration_range_error(e, orig);
    *sp = s;
    return 0;
}

int duration_parse(const char *s, int64_t *out_ns, struct err *e)
{
    if (!s)
        return err_set(e, ERR_INVALID, "time: invalid duration \"\"");
    const char *orig = s;
    if (is_bare_integer(s))
        return parse_seconds(s, out_ns, e);

    bool neg = false;
    if (*s == '-' || *s == '+') {
        neg = *s == '-';
        s++;
    }
    if (strcmp(s, "0") == 0) {
        *out_ns = 0;
        return 0;
    }
    if (!*s)
        return err_set(e, ERR_INVALID, "time: invalid duration \"%s\"", orig);

    uint64_t total = 0;
    while (*s) {
        int rc = parse_component(&s, orig, &total, e);
        if (rc)
            return rc;
    }
    if (neg) {
        *out_ns = total == DURATION_MAX ? INT64_MIN : -(int64_t)total;
        return 0;
    }
    if (total > (uint64_t)INT64_MAX)
        return duration_range_error(e, orig);
    *out_ns = (int64_t)total;
    return 0;
}

// Appends the fraction of v / 10^prec with trailing zeros trimmed.
static int format_frac(char *p, uint64_t v, int prec)
{
    char digits[16];
    int n = 0;
    bool print = false;
    for (int i = 0; i < prec; i++) {
        unsigned d = (unsigned)(v % 10);
        print = print || d != 0;
        if (print)
            digits[n++] = (char)('0' + d);
        v /= 10;
    }
    if (!n)
        return 0;
    int k = 0;
    p[k++] = '.';
    while (n)
        p[k++] = digits[--n];
    return k;
}

void duration_format(int64_t ns, char *out, size_t n)
{
    if (!n)
        return;
    if (ns == 0) {
        snprintf(out, n, "0s");
        return;
    }
    bool neg = ns < 0;
    uint64_t u = neg ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char tmp[64];
    int k = 0;
    if (neg)
        tmp[k++] = '-';
    if (u < (uint64_t)NS_PER_S) {
        int prec;
        const char *unit;
        uint64_t div;
        if (u < 1000) {
            prec = 0, unit = "ns", div = 1;
        } else if (u < 1000000) {
            prec = 3, unit = "\xc2\xb5s", div = 1000;
        } else {
            prec = 6, unit = "ms", div = 1000000;
        }
        k += snprintf(tmp + k, sizeof(tmp) - (size_t)k, "%llu", (unsigned long long)(u / div));
        k += format_frac(tmp + k, u % div, prec);
        snprintf(tmp + k, sizeof(tmp) - (size_t)k, "%s", unit);
    } else {
        uint64_t frac = u % (uint64_t)NS_PER_S;
        u /= (uint64_t)NS_PER_S;
        uint64_t secs = u % 60, mins = (u / 60) % 60, hours = u / 3600;
        if (hours)
            k += snprintf(tmp + k, sizeof(tmp) - (size_t)k, "%lluh", (unsigned long long)hours);
        if (hours || mins)
            k += snprintf(tmp + k, sizeof(tmp) - (size_t)k, "%llum", (unsigned long long)mins);
        k += snprintf(tmp + k, sizeof(tmp) - (size_t)k, "%llu", (unsigned long long)secs);
        k += format_frac(tmp + k, frac, 9);
        snprintf(tmp + k, sizeof(tmp) - (size_t)k, "s");
    }
    snprintf(out, n, "%s", tmp);
}

// ---------------------------------------------------------------------------
// Relative time (Ollama format.HumanTime)

static void human_duration(int64_t d, char *out, size_t n)
{
    int64_t seconds = d / NS_PER_S;
    if (seconds < 1) {
        snprintf(out, n, "Less than a second");
        return;
    }
    if (seconds == 1) {
        snprintf(out, n, "1 second");
        return;
    }
    if (seconds < 60) {
        snprintf(out, n, "%lld seconds", (long long)seconds);
        return;
    }
    int64_t minutes = d / (60 * NS_PER_S);
    if (minutes == 1) {
        snprintf(out, n, "About a minute");
        return;
    }
    if (minutes < 60) {
        snprintf(out, n, "%lld minutes", (long long)minutes);
        return;
    }
    // Go: math.Round(d.Hours()), where Hours() = whole hours + remainder/1h.
    const int64_t ns_per_h = 3600 * NS_PER_S;
    double hours_f = (double)(d / ns_per_h) + (double)(d % ns_per_h) / (double)ns_per_h;
    int64_t hours = (int64_t)round(hours_f);
    if (hours == 1)
        snprintf(out, n, "About an hour");
    else if (hours < 48)
        snprintf(out, n, "%lld hours", (long long)hours);
    else if (hours < 24 * 7 * 2)
        snprintf(out, n, "%lld days", (long long)(hours / 24));
    else if (hours < 24 * 30 * 2)
        snprintf(out, n, "%lld weeks", (long long)(hours / 24 / 7));
    else if (hours < 24 * 365 * 2)
        snprintf(out, n, "%lld months", (long long)(hours / 24 / 30));
    else
        snprintf(out, n, "%lld years", (long long)(d / ns_per_h / 24 / 365));
}

void time_format_relative(int64_t t_ns, int64_t now_ns, char *out, size_t n)
{
    if (!n)
        return;
    if (t_ns == TIME_ZERO) {
        snprintf(out, n, "Never");
        return;
    }
    int64_t delta;
    if (__builtin_sub_overflow(now_ns, t_ns, &delta))
        delta = now_ns > t_ns ? INT64_MAX : INT64_MIN;
    // Go: int(delta.Hours())/24/365 < -20, each step truncating toward zero.
    if (delta / (3600 * NS_PER_S) / 24 / 365 < -20) {
        snprintf(out, n, "Forever");
        return;
    }
    char d[64];
    if (delta < 0) {
        human_duration(delta == INT64_MIN ? INT64_MAX : -delta, d, sizeof(d));
        snprintf(out, n, "%s from now", d);
    } else {
        human_duration(delta, d, sizeof(d));
        snprintf(out, n, "%s ago", d);
    }
}

// ---------------------------------------------------------------------------
// RFC 3339

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil, restated).
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

// Unix seconds of Go's zero time, 0001-01-01T00:00:00Z.
#define GO_ZERO_UNIX (-62135596800LL)

static void format_rfc3339(int64_t t_ns, bool utc, char *out, size_t n)
{
    if (!n)
        return;
    if (t_ns == TIME_ZERO) {
        snprintf(out, n, "0001-01-01T00:00:00Z");
        return;
    }
    int64_t secs = t_ns / NS_PER_S, frac = t_ns % NS_PER_S;
    if (frac < 0) {
        frac += NS_PER_S;
        secs--;
    }
    // Local offset (as Go's time.Now() carries time.Local).
    long offset = 0;
    if (!utc) {
        time_t tt = (time_t)secs;
        struct tm tm;
        if (localtime_r(&tt, &tm))
            offset = tm.tm_gmtoff;
    }
    int64_t local = secs + offset;
    int64_t days = local / 86400, rem = local % 86400;
    if (rem < 0) {
        rem += 86400;
        days--;
    }
    int64_t y;
    unsigned mo, d;
    civil_from_days(days, &y, &mo, &d);
    char fbuf[16];
    int fl = format_frac(fbuf, (uint64_t)frac, 9);
    fbuf[fl] = '\0';
    char zone[8];
    if (offset == 0) {
        snprintf(zone, sizeof(zone), "Z");
    } else {
        long a = offset < 0 ? -offset : offset;
        snprintf(zone, sizeof(zone), "%c%02ld:%02ld", offset < 0 ? '-' : '+', a / 3600,
                 (a / 60) % 60);
    }
    snprintf(out, n, "%04lld-%02u-%02uT%02d:%02d:%02d%s%s", (long long)y, mo, d, (int)(rem / 3600),
             (int)(rem / 60 % 60), (int)(rem % 60), fbuf, zone);
}

void time_format_rfc3339(int64_t t_ns, char *out, size_t n)
{
    format_rfc3339(t_ns, false, out, n);
}

void time_format_rfc3339_utc(int64_t t_ns, char *out, size_t n)
{
    format_rfc3339(t_ns, true, out, n);
}

static bool read_digits(const char **p, int count, int *out)
{
    int v = 0;
    for (int i = 0; i < count; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += count;
    *out = v;
    return true;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int time_parse_rfc3339(const char *s, int64_t *out_ns, struct err *e)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const char *p = s ? s : "";
    int year, mon, day, hour, min, sec;
    if (!read_digits(&p, 4, &year) || *p++ != '-' || !read_digits(&p, 2, &mon) || *p++ != '-' ||
        !read_digits(&p, 2, &day) || *p++ != 'T' || !read_digits(&p, 2, &hour) || *p++ != ':' ||
        !read_digits(&p, 2, &min) || *p++ != ':' || !read_digits(&p, 2, &sec))
        return err_set(e, ERR_INVALID, "invalid RFC 3339 time \"%s\"", s ? s : "");
    if (mon < 1 || mon > 12 || day < 1 || day > mdays[mon - 1] + (mon == 2 && is_leap(year)) ||
        hour > 23 || min > 59 || sec > 59)
        return err_set(e, ERR_RANGE, "RFC 3339 time \"%s\": field out of range", s);
    int64_t frac = 0;
    if (*p == '.' || *p == ',') {
        p++;
        int nd = 0;
        while (isdigit((unsigned char)*p)) {
            if (nd < 9) {
                frac = frac * 10 + (*p - '0');
                nd++;
            }
            p++;
        }
        if (nd == 0)
            return err_set(e, ERR_INVALID, "invalid RFC 3339 time \"%s\"", s);
        for (; nd < 9; nd++)
            frac *= 10;
    }
    int64_t offset = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        int oh, om;
        if (!read_digits(&p, 2, &oh) || *p++ != ':' || !read_digits(&p, 2, &om))
            return err_set(e, ERR_INVALID, "invalid RFC 3339 time \"%s\"", s);
        if (oh > 23 || om > 59)
            return err_set(e, ERR_RANGE, "RFC 3339 time \"%s\": offset out of range", s);
        offset = sign * (oh * 3600 + om * 60);
    } else {
        return err_set(e, ERR_INVALID, "invalid RFC 3339 time \"%s\"", s);
    }
    if (*p)
        return err_set(e, ERR_INVALID, "invalid RFC 3339 time \"%s\": extra text", s);
    int64_t secs = days_from_civil(year, (unsigned)mon, (unsigned)day) * 86400 + hour * 3600 +
                   min * 60 + sec - offset;
    if (secs == GO_ZERO_UNIX && frac == 0) {
        *out_ns = TIME_ZERO;
        return 0;
    }
    int64_t ns;
    if (!i64_mul(&ns, secs, NS_PER_S) || __builtin_add_overflow(ns, frac, &ns))
        ns = secs < 0 ? INT64_MIN + 1 : INT64_MAX;  // saturate: far past / far future
    *out_ns = ns;
    return 0;
}

// ---------------------------------------------------------------------------
// Sizes (Ollama format.HumanBytes)

void size_format_human(uint64_t bytes, char *out, size_t n)
{
    static const struct {
        uint64_t size;
        const char *unit;
    } units[] = {
        {1000ULL * 1000 * 1000 * 1000, "TB"},
        {1000ULL * 1000 * 1000, "GB"},
        {1000ULL * 1000, "MB"},
        {1000ULL, "KB"},
    };
    if (!n)
        return;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (bytes < units[i].size)
            continue;
        double v = (double)bytes / (double)units[i].size;
        if (v >= 10 || v == trunc(v))
            snprintf(out, n, "%lld %s", (long long)v, units[i].unit);
        else
            snprintf(out, n, "%.1f %s", v, units[i].unit);
        return;
    }
    snprintf(out, n, "%llu B", (unsigned long long)bytes);
}

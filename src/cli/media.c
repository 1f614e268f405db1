// Images and audio named in a prompt (docs/spec/cli.md §5.5): for models with
// the vision or audio capability, file paths in the text ending in .jpg,
// .jpeg, .png, .webp or .wav are read, checked by their content, sent as
// base64, and removed from the text.
#include "cli/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MEDIA_MAX_BYTES (100u * 1024 * 1024)

static const char *const image_exts[] = {".jpg", ".jpeg", ".png", ".webp"};

const char *cli_media_type(const unsigned char *p, size_t n)
{
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return "image/jpeg";
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "image/png";
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return "image/webp";
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WAVE", 4) == 0)
        return "audio/wave";
    size_t k = n < 512 ? n : 512;
    for (size_t i = 0; i < k; i++)
        if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t')
            return "application/octet-stream";
    return "text/plain; charset=utf-8";
}

// Length of an extension this path may end with at s (0 when none).
static size_t ext_at(const char *s, bool images, bool audio)
{
    for (size_t i = 0; images && i < sizeof(image_exts) / sizeof(image_exts[0]); i++) {
        size_t n = strlen(image_exts[i]);
        if (strncasecmp(s, image_exts[i], n) == 0 && !isalnum((unsigned char)s[n]))
            return n;
    }
    if (audio && strncasecmp(s, ".wav", 4) == 0 && !isalnum((unsigned char)s[4]))
        return 4;
    return 0;
}

static bool path_start(const char *s, size_t i)
{
    if (i > 0 && !isspace((unsigned char)s[i - 1]) && s[i - 1] != '"' && s[i - 1] != '\'')
        return false;
    const char *p = s + i;
    return p[0] == '/' || (p[0] == '.' && p[1] == '/') || (p[0] == '~' && p[1] == '/') ||
           (isalpha((unsigned char)p[0]) && p[1] == ':' && p[2] == '\\');
}

// End of the path that starts at text[i]: the shortest run up to an allowed extension, spaces
// allowed only when escaped with a backslash. 0 when there is none.
static size_t path_end(const char *text, size_t n, size_t i, bool images, bool audio)
{
    for (size_t j = i; j < n; j++) {
        if (isspace((unsigned char)text[j]) && !(j > i && text[j - 1] == '\\'))
            break;
        size_t e = text[j] == '.' ? ext_at(text + j, images, audio) : 0;
        if (e)
            return j + e;
    }
    return 0;
}

// The file name text[start, end) stands for: "~" expanded, escaped spaces unescaped.
static void path_unescape(const char *text, size_t start, size_t end, struct buf *path)
{
    size_t p0 = start;
    if (text[start] == '~') {
        const char *home = env_home_dir();
        buf_append_str(path, home ? home : "");
        p0++;
    }
    for (size_t j = p0; j < end; j++)
        if (!(text[j] == '\\' && j + 1 < end && text[j + 1] == ' '))
            buf_append_char(path, text[j]);
}

// Reads a regular file and, when its content is a wanted kind of media, appends it to media
// as base64. Returns whether it was taken; says why not on log.
static bool take_file(const char *path, bool images, bool audio, json_t *media, FILE *log)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    bool taken = false;
    struct buf data;
    buf_init(&data, MEDIA_MAX_BYTES);
    struct err e = {0};
    if (fs_read_all(path, MEDIA_MAX_BYTES, &data, &e) < 0) {
        fprintf(log, "Couldn't process file: \"%s\"\n", e.msg);
    } else {
        const char *type = cli_media_type((const unsigned char *)data.data, data.len);
        bool is_image = strncmp(type, "image/", 6) == 0;
        bool is_audio = strcmp(type, "audio/wave") == 0;
        if ((is_image && images) || (is_audio && audio)) {
            struct buf b64;
            buf_init(&b64, 0);
            base64_encode((const unsigned char *)data.data, data.len, &b64);
            json_array_append_new(media, json_stringn(b64.data ? b64.data : "", b64.len));
            buf_deinit(&b64);
            fprintf(log, "Added %s '%s'\n", is_image ? "image" : "audio", path);
            taken = true;
        } else {
            fprintf(log, "Couldn't process file: \"invalid file type: %s\"\n", type);
        }
    }
    buf_deinit(&data);
    return taken;
}

int cli_media_extract(const char *text, bool images, bool audio, char **out_text, json_t *media,
                      FILE *log)
{
    struct buf out;
    buf_init(&out, 0);
    int added = 0;
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        if (!(images || audio) || !path_start(text, i)) {
            buf_append_char(&out, text[i++]);
            continue;
        }
        size_t end = path_end(text, n, i, images, audio);
        if (!end) {
            buf_append_char(&out, text[i++]);
            continue;
        }
        struct buf path;
        buf_init(&path, 0);
        path_unescape(text, i, end, &path);
        bool taken = take_file(buf_cstr(&path), images, audio, media, log);
        buf_deinit(&path);
        if (taken)
            added++;
        else
            buf_append(&out, text + i, end - i);
        i = end;
    }
    // Removing paths can leave spaces at the ends: trim them then.
    if (added) {
        struct str s = str_trim((struct str){out.data ? out.data : "", out.len});
        *out_text = str_dup(s);
    } else {
        *out_text = xstrdup(text);
    }
    buf_deinit(&out);
    return added;
}

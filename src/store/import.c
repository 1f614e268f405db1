// Import of a Hugging Face safetensors folder uploaded as blobs (`FROM
// <folder>`, /api/create with "files" holding *.safetensors and the JSON
// files; `ADAPTER <PEFT folder>`, "adapters"): convert/ reads the blobs in place under the names
// the client gave them and writes the GGUF into a temporary file inside blobs/, which is verified,
// hashed and renamed to its digest like a quantized model. The temporary name is not a digest, so
// the start-up prune removes it if the server dies mid-way; on any error it is removed at once.
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/convert.h"

struct import_progress {
    const struct store_create_opts *o;
    const char *status;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct import_progress *p = ctx;
    if (!p->o || !p->o->progress)
        return;
    struct store_progress sp = {.status = p->status, .total = total, .completed = done};
    p->o->progress(p->o->progress_ctx, &sp);
}

// The (name, blob path) pairs convert reads; every blob must exist.
static int resolve(struct store *s, const struct store_file_ref *files, size_t n,
                   struct convert_file *cf, char **paths, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        int rc = store_blob_path(s, files[i].digest, path, sizeof path, e);
        if (rc < 0)
            return rc;
        if (!store_blob_exists(s, files[i].digest))
            return err_set(e, ERR_INVALID, "file \"%s\": blob %s not found (upload it first)",
                           files[i].name, files[i].digest);
        paths[i] = xstrdup(path);
        cf[i] = (struct convert_file){.name = files[i].name, .path = paths[i]};
    }
    return 0;
}

int store_convert_files(struct store *s, const struct store_file_ref *files, size_t n,
                        const char *base_path, const struct store_create_opts *o,
                        char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                        struct err *e)
{
    struct convert_file *cf = xcalloc(n ? n : 1, sizeof(*cf));
    char **paths = xcalloc(n ? n : 1, sizeof(char *));
    int rc = resolve(s, files, n, cf, paths, e);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/sha256-convert-XXXXXX", s->blobs_dir);
    int fd = rc == 0 ? mkstemp(tmp) : -1;
    if (rc == 0 && fd < 0)
        rc = err_set(e, ERR_IO, "create temporary file: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc == 0) {
        struct import_progress p = {
            .o = o, .status = base_path ? "converting adapter" : "converting model"};
        on_progress(&p, 0, 0);
        struct convert_info info;
        rc = base_path ? convert_adapter(cf, n, base_path, tmp, &info, e)
                       : convert_folder(cf, n, tmp, on_progress, &p, &info, e);
        if (rc == 0 && o && o->cancel && *o->cancel)
            rc = err_set(e, ERR_CANCELLED, "create cancelled");
        if (rc < 0)
            unlink(tmp);
        else
            rc = store_blob_adopt(s, tmp, base_path ? "converted adapter" : "converted model",
                                  digest_out, size_out, existed, e);
    }
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(cf);
    return rc;
}

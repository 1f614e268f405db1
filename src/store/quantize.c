// Quantization of a GGUF model layer into a new blob (modelfile.md §4.4).
// quantize's quantize_model does the work (the llama.cpp mix per
// tensor, reference quantizers, llama-quantize's file layout, streamed
// through the GGUF writer); here it writes into a temporary file inside
// blobs/, which is re-opened and validated ("verifying conversion"),
// hashed, and renamed to its digest.
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantize/quantize.h"
#include "gguf/gguf.h"

struct quant_progress_ctx {
    const struct store_create_opts *o;
    const char *status;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct quant_progress_ctx *c = ctx;
    if (!c->o || !c->o->progress)
        return;
    struct store_progress p = {
        .status = c->status, .digest = "0000000000000000000", .total = total, .completed = done};
    c->o->progress(c->o->progress_ctx, &p);
}

int store_quantize_blob(struct store *s, const char *src_path, const char *target_label,
                        const char *status, const struct store_create_opts *o,
                        char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                        struct err *e)
{
    int32_t ftype = gguf_file_type_from_name(target_label);
    if (ftype < 0 || quantize_mix_default_type(ftype) < 0)
        return err_set(e, ERR_UNSUPPORTED, "cannot produce %s", target_label);
    char tmp_path[4096];
    // Not a valid digest name: the start-up prune removes it if we die.
    snprintf(tmp_path, sizeof(tmp_path), "%s/sha256-quantize-XXXXXX", s->blobs_dir);
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return err_set(e, ERR_IO, "create temporary file: %s", strerror(errno));
    close(fd);
    struct quant_progress_ctx pc = {.o = o, .status = status};
    struct stat st;
    on_progress(&pc, 0, stat(src_path, &st) == 0 ? (uint64_t)st.st_size : 0);
    int rc = quantize_model(src_path, tmp_path, ftype, on_progress, &pc, e);
    if (rc < 0) {
        unlink(tmp_path);
        return rc;
    }
    if (o && o->cancel && *o->cancel) {
        unlink(tmp_path);
        return err_set(e, ERR_CANCELLED, "create cancelled");
    }
    if (o && o->progress) {
        struct store_progress p = {.status = "verifying conversion"};
        o->progress(o->progress_ctx, &p);
    }
    return store_blob_adopt(s, tmp_path, "quantized model", digest_out, size_out, existed, e);
}

int store_blob_adopt(struct store *s, const char *tmp_path, const char *what,
                     char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                     struct err *e)
{
    struct gguf *check;
    struct err ce = {0};
    if (gguf_open(&check, tmp_path, &ce) < 0) {
        unlink(tmp_path);
        return err_set(e, ERR_INTERNAL, "%s does not verify: %s", what, ce.msg);
    }
    gguf_close(check);
    char hex[DIGEST_HEX_LEN + 1], final_path[4096];
    uint64_t size;
    int rc = sha256_file(tmp_path, hex, &size, e);
    if (rc < 0) {
        unlink(tmp_path);
        return rc;
    }
    snprintf(final_path, sizeof(final_path), "%s/sha256-%s", s->blobs_dir, hex);
    *existed = fs_exists(final_path);
    if (*existed) {
        unlink(tmp_path);
    } else {
        if (chmod(tmp_path, 0644) < 0 || rename(tmp_path, final_path) < 0) {
            rc = err_set(e, ERR_IO, "rename %s blob: %s", what, strerror(errno));
            unlink(tmp_path);
            return rc;
        }
        fs_fsync_dir(s->blobs_dir, NULL);
    }
    digest_format(hex, digest_out);
    *size_out = (int64_t)size;
    return 0;
}

// Quantization of a GGUF model layer into a new blob (modelfile.md §4.4).
// TODO(quant): waits for the quantizers and per-tensor mixes of engine/quant.
#include "store/internal.h"

int store_quantize_blob(struct store *s, const char *src_path, const char *target_label,
                        const struct store_create_opts *o, char digest_out[STORE_DIGEST_LEN + 1],
                        int64_t *size_out, bool *existed, struct err *e)
{
    (void)s, (void)src_path, (void)o, (void)digest_out, (void)size_out, (void)existed;
    return err_set(e, ERR_NOT_IMPLEMENTED, "quantizing to %s is not available yet", target_label);
}

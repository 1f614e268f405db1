// Attention of a ViT block through the engine's flash attention (threads,
// SIMD tiles, no n × n score matrix): every row sees every row of its
// segment (the whole picture, or one window of Qwen2.5-VL), no mask. The
// tower's K and V rows serve as an F32 "cache" of one slot per segment.
//
// Precision as the reference's CPU flash attention with F16 K / V: K and V
// are rounded to f16 values first (in place); Q too where the reference
// converts it (round_q); scores, softmax and the V sum in F32.
#include <math.h>
#include <stdlib.h>

#include "vision/internal.h"

// Rounds n floats to f16 values in place.
static void round_rows(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = vision_round_f16_fast(x[i]);
}

int vision_attend(struct engine_backend *be, float *out, float *q, float *k, float *v, int n,
                  int n_head, int head_dim, const int *seg, int n_seg, bool round_q, struct err *e)
{
    const size_t d = (size_t)n_head * head_dim;
    int32_t *cell0 = malloc(sizeof(int32_t) * 2 * (size_t)n);
    if (!cell0)
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    int32_t *n_visible = cell0 + n;
    for (int s = 0; s < (seg ? n_seg : 1); s++) {
        int r0 = seg ? seg[s] : 0, r1 = seg ? seg[s + 1] : n;
        for (int r = r0; r < r1; r++) {
            cell0[r] = r0;
            n_visible[r] = r1 - r0;
        }
    }
    if (round_q)
        round_rows(q, (size_t)n * d);
    round_rows(k, (size_t)n * d);
    round_rows(v, (size_t)n * d);
    struct engine_kv_layer kv = {.k = k, .v = v, .row_bytes = sizeof(float) * d};
    struct engine_attn a = {.n_head = n_head,
                            .n_head_kv = n_head,
                            .head_dim = head_dim,
                            .scale = 1.0f / sqrtf((float)head_dim),
                            .kv_type = GGUF_TYPE_F32};
    engine_attention(be, out, q, n, &kv, cell0, n_visible, &a);
    free(cell0);
    return 0;
}

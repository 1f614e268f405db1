// K-quants (docs/spec/gguf.md §5.3): 256-element super-blocks with small integer
// sub-block scales. Dequantizers follow the spec's evaluation order
// (dl = d*sc, ml = dmin*m, y = dl*q - ml, each rounded to float32). The
// quantizers implement ggml's reference algorithms without an importance
// matrix (the scale searches of make_qx_quants / make_qkx2_quants /
// make_q3_quants), keeping every float operation in the same order so the
// bytes match llama-quantize. Compiled with -ffp-contract=off.
#include "engine/quant/quant.h"

#include <math.h>
#include <string.h>

#include "engine/quant/internal.h"

#define GROUP_MAX_EPS 1e-15f

static uint16_t f16(float f)
{
    return quant_f32_to_f16(f);
}

static float f32(uint16_t h)
{
    return quant_f16_to_f32(h);
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

// Round to nearest (ties to even) via the 1.5*2^23 trick, as the reference
// does; valid for |v| <= 2^22.
static int round_nearest(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

// The 6-bit scale/min pair of sub-block j in the 12-byte Q4_K/Q5_K array.
static void scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// ---------------------------------------------------------------------------
// Dequantizers

void quant_q2_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q2_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        float d = f32(x[b].d), dmin = f32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            int half = e / 128, j = (e % 128) / 32, l = e % 32;
            int q = (x[b].qs[32 * half + l] >> (2 * j)) & 3;
            uint8_t s = x[b].scales[e / 16];
            float dl = d * (float)(s & 0x0F);
            float ml = dmin * (float)(s >> 4);
            y[e] = dl * (float)q - ml;
        }
    }
}

void quant_q3_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q3_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        float d = f32(x[b].d);
        const uint8_t *s = x[b].scales;
        int sc[16];
        for (int i = 0; i < 16; i++) {
            int lo4 = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
            int hi2 = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
            sc[i] = (lo4 | (hi2 << 4)) - 32;
        }
        for (int e = 0; e < QK_K; e++) {
            int half = e / 128, j = (e % 128) / 32, l = e % 32;
            int q2 = (x[b].qs[32 * half + l] >> (2 * j)) & 3;
            int hbit = (x[b].hmask[l] >> (4 * half + j)) & 1;
            int q = q2 - (hbit ? 0 : 4);
            float dl = d * (float)sc[e / 16];
            y[e] = dl * (float)q;
        }
    }
}

// Q4_K and Q5_K blocks: 8 sub-blocks of 32 with 6-bit scales and mins, 4-bit
// quants; Q5_K adds a fifth bit from qh (NULL for Q4_K).
static void dequant_k_sub8(float d, float dmin, const uint8_t *scales, const uint8_t *qs,
                           const uint8_t *qh, float *y)
{
    for (int sub = 0; sub < 8; sub++) {
        uint8_t sc, m;
        scale_min_k4(sub, scales, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + 32 * (sub / 2);
        int shift = (sub % 2) * 4;
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0x0F;
            if (qh)
                v += 16 * ((qh[l] >> sub) & 1);
            y[32 * sub + l] = dl * (float)v - ml;
        }
    }
}

void quant_q4_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q4_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K)
        dequant_k_sub8(f32(x[b].d), f32(x[b].dmin), x[b].scales, x[b].qs, NULL, y);
}

void quant_q5_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q5_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K)
        dequant_k_sub8(f32(x[b].d), f32(x[b].dmin), x[b].scales, x[b].qs, x[b].qh, y);
}

void quant_q6_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q6_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        float d = f32(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            int half = e / 128, j = (e % 128) / 32, l = e % 32;
            uint8_t lb = x[b].ql[64 * half + l + ((j == 1 || j == 3) ? 32 : 0)];
            int low4 = j < 2 ? (lb & 0x0F) : (lb >> 4);
            int high2 = (x[b].qh[32 * half + l] >> (2 * j)) & 3;
            int q = (low4 | (high2 << 4)) - 32;
            y[e] = d * (float)x[b].scales[e / 16] * (float)q;
        }
    }
}

void quant_q8_K_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q8_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K)
        for (int e = 0; e < QK_K; e++)
            y[e] = x[b].d * (float)x[b].qs[e];
}

void quant_iq4_xs_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_iq4_xs *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        float d = f32(x[b].d);
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) |
                     (((x[b].scales_h >> (2 * ib)) & 3) << 4);
            float dl = d * (float)(ls - 32);
            const uint8_t *qs = x[b].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[32 * ib + j] = dl * (float)quant_iq4_nl_values[qs[j] & 0x0F];
                y[32 * ib + j + 16] = dl * (float)quant_iq4_nl_values[qs[j] >> 4];
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Scale searches

// The start both symmetric searches share: the signed value of largest
// magnitude, and the first rounding of x at scale -nmax/max into L (stored
// + bias) with its sums weighted by x^2. Returns 0 with L zeroed when the
// group is all but zero (then *sumlx and *suml2 are not set).
static float symmetric_first_pass(int n, int nmax, const float *x, int8_t *L, int bias,
                                  float *sumlx_out, float *suml2_out)
{
    float max = quant_signed_absmax(x, n);
    if (fabsf(max) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + bias);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
    return max;
}

// Symmetric quantization of n values to [-nmax, nmax-1] (stored + nmax in
// L), weighted by x^2, trying 18 scales around nmax/max (rmse_type 1 of
// the reference; the only mode used by the reference quantizers here).
static float search_symmetric(int n, int nmax, const float *x, int8_t *L)
{
    float sumlx = 0, suml2 = 0;
    float max = symmetric_first_pass(n, nmax, x, L, nmax, &sumlx, &suml2);
    if (max == 0.f)
        return 0.f;
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        float iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_nearest(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(round_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's symmetric search: start at nmax/max, then up to 5 rounds of
// coordinate descent on each quant (weights x^2).
static float search_q3(int n, int nmax, const float *x, int8_t *L)
{
    float sumlx = 0, suml2 = 0;
    if (symmetric_first_pass(n, nmax, x, L, 0, &sumlx, &suml2) == 0.f)
        return 0.f;
    for (int round = 0; round < 5; round++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int nl = clampi(round_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quantization x ≈ scale*L - min, L in [0, nmax], weighted
// least squares over nstep+1 candidate scales (error |.| if use_mad).
// Returns the scale; *min_out gets the (non-negative) min.
static float search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *min_out, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = round_nearest(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_nearest(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

// ---------------------------------------------------------------------------
// Reference quantizers

void quant_q2_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16];
    float w[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = search_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f,
                                      15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++)
                y[b].scales[j] = (uint8_t)round_nearest(iscale * scales[j]);
            y[b].d = f16(max_scale / q4scale);
        } else {
            memset(y[b].scales, 0, sizeof(y[b].scales));
            y[b].d = f16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++)
                y[b].scales[j] |= (uint8_t)(round_nearest(iscale * mins[j]) << 4);
            y[b].dmin = f16(max_min / q4scale);
        } else {
            y[b].dmin = f16(0.f);
        }
        // Re-quantize each sub-block with the rounded scales.
        for (int j = 0; j < QK_K / 16; j++) {
            float d = f32(y[b].d) * (float)(y[b].scales[j] & 0x0F);
            if (!d)
                continue;
            float dm = f32(y[b].dmin) * (float)(y[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (uint8_t)clampi(round_nearest((x[16 * j + i] + dm) / d), 0, 3);
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[b].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

void quant_q3_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        for (int j = 0; j < QK_K / 16; j++)
            scales[j] = search_q3(16, 4, x + 16 * j, L + 16 * j);
        float max_scale = quant_signed_absmax(scales, QK_K / 16);
        memset(y[b].scales, 0, sizeof(y[b].scales));
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                // The reference stores the rounded value in an int8 first.
                int8_t l8 = (int8_t)round_nearest(iscale * scales[j]);
                int l = clampi(l8, -32, 31) + 32;
                if (j < 8)
                    y[b].scales[j] = (uint8_t)(l & 0x0F);
                else
                    y[b].scales[j - 8] |= (uint8_t)((l & 0x0F) << 4);
                y[b].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = f16(1 / iscale);
        } else {
            y[b].d = f16(0.f);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int lo4 = j < 8 ? (y[b].scales[j] & 0x0F) : (y[b].scales[j - 8] >> 4);
            int sc = (lo4 | (((y[b].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            float d = f32(y[b].d) * (float)sc;
            if (!d)
                continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clampi(round_nearest(x[16 * j + i] / d), -4, 3) + 4);
        }
        // High bit of quant e goes to hmask[e % 32], bit e / 32.
        memset(y[b].hmask, 0, sizeof(y[b].hmask));
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) {
                y[b].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
                L[e] = (int8_t)(L[e] - 4);
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[b].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

// Shared by Q4_K and Q5_K: per-sub-block affine search with weights
// av_x + |x|, 6-bit scale/min packing, then re-quantization to [0, nmax].
static void kx_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *d_out, uint16_t *d,
                      uint16_t *dmin, uint8_t L[QK_K])
{
    uint8_t Laux[32];
    float w[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = search_affine(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                  nstep, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *s = d_out;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)round_nearest(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)round_nearest(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0x0F) | ((lm & 0x0F) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = f16(max_scale / 63.f);
    *dmin = f16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        scale_min_k4(j, s, &sc, &m);
        float dd = f32(*d) * (float)sc;
        if (!dd)
            continue;
        float dm = f32(*dmin) * (float)m;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clampi(round_nearest((x[32 * j + i] + dm) / dd), 0, nmax);
    }
}

void quant_q4_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, sizeof(y[b].scales));
        kx_scales(x, 15, -1.f, 20, y[b].scales, &y[b].d, &y[b].dmin, L);
        uint8_t *q = y[b].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void quant_q5_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, sizeof(y[b].scales));
        kx_scales(x, 31, -0.5f, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, sizeof(y[b].qh));
        uint8_t *ql = y[b].qs;
        uint8_t m1 = 1, m2 = 2;
        for (int c = 0; c < QK_K; c += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[c + j], l2 = L[c + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[b].qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[b].qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

void quant_q6_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q6_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        for (int ib = 0; ib < QK_K / 16; ib++)
            scales[ib] = search_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
        float max_scale = quant_signed_absmax(scales, QK_K / 16);
        if (fabsf(max_scale) < GROUP_MAX_EPS) {
            memset(&y[b], 0, sizeof(y[b]));
            continue;
        }
        float iscale = -128.f / max_scale;
        y[b].d = f16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int v = round_nearest(iscale * scales[ib]);
            y[b].scales[ib] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            float d = f32(y[b].d) * (float)y[b].scales[j];
            if (!d)
                continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clampi(round_nearest(x[16 * j + i] / d), -32, 31) + 32);
        }
        uint8_t *ql = y[b].ql, *qh = y[b].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0x0F) | ((q3 & 0x0F) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0x0F) | ((q4 & 0x0F) << 4));
                qh[l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

void quant_q8_K_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max = quant_signed_absmax(x, QK_K);
        if (!max) {
            y[b].d = 0;
            memset(y[b].qs, 0, sizeof(y[b].qs));
            // The reference leaves bsums untouched here; zero them (sum of zeros).
            memset(y[b].bsums, 0, sizeof(y[b].bsums));
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = round_nearest(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++)
                sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

// LoRA terms on the fly: after a product y = x · Wᵀ with a weight that
// carries adapters, each adapter adds B (A x) as two small products and an
// add, through the backend's own ops (so another backend gets it for free).
// With rank r ≪ n_in, n_out this reads r (n_in + n_out) extra floats per
// weight instead of rewriting W (docs/internals/lora.md has the measurements
// that chose this over merging into the weights).
#include "engine/internal.h"

void engine_lora_embed(struct engine_backend *be, float *y, const struct engine_tensor *w,
                       const int32_t *tokens, int64_t n)
{
    for (const struct engine_lora *l = w->lora; l; l = l->next) {
        struct engine_matmul_job up = {&l->b, l->u, NULL};
        engine_get_rows(be, l->t, &l->a, tokens, n);  // t (n, rank): the tokens' rows of A
        be->ops->matmul(be, &up, 1, l->t, n);         // u (n, n_embd) = t · (s B)ᵀ
        be->ops->add(be, y, y, l->u, n * l->b.ne[1]);
    }
}

void engine_lora_apply(struct engine_backend *be, const struct engine_matmul_job *job,
                       const float *x, int64_t n_rows)
{
    int64_t n_out = job->w->ne[1];
    for (const struct engine_lora *l = job->w->lora; l; l = l->next) {
        struct engine_matmul_job down = {&l->a, l->t, NULL}, up = {&l->b, l->u, NULL};
        be->ops->matmul(be, &down, 1, x, n_rows);   // t (n_rows, rank) = x · Aᵀ
        be->ops->matmul(be, &up, 1, l->t, n_rows);  // u (n_rows, n_out) = t · (s B)ᵀ
        be->ops->add(be, job->y, job->y, l->u, n_rows * n_out);
    }
}

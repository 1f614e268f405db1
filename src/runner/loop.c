// The batching loop: one thread owns the model. Each iteration builds ONE
// batch holding the next token of every generating slot plus prompt chunks
// of slots still reading their prompt (within n_batch), decodes it in one
// forward pass, then samples one token per generating slot. A request that
// arrives joins at the next iteration (continuous batching); requests beyond
// the slot count wait FIFO. A client that hangs up is noticed at the top of
// every iteration (socket polled for POLLRDHUP) and its slot is freed.
// Prompts that open like a prompt another slot holds or is evaluating take
// those rows from it instead of evaluating them again (share_prefix).
//
// Speculative decoding: a generating slot whose request asks for it puts
// its next token AND up to draft_max drafted tokens (spec.c: prompt lookup
// or a draft model) in the batch, all with logits, so one forward pass of
// the target scores every draft. verify_slot then samples position by
// position with the request's own sampler (grammar, penalties, seed and
// all) and accepts while the sample equals the draft; the first sample that
// differs is kept as the step's last token, and the cache is cut back past
// the rejected drafts. Every token is thus drawn from the target's
// distribution given exactly the tokens before it, by the same sampler
// calls in the same order as without drafts: greedy output is identical,
// and sampled output is identically distributed (for a deterministic
// drafter this is the standard rejection-sampling acceptance: accept the
// draft x with probability p(x), else draw from p without x). Drafts never
// cross the window's end (no context shift mid-step) or num_predict.
//
// Lock order: loop->mu, then a request's mu.
#include "runner/internal.h"
#include "vision/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EMBED_CHUNK 64  // most embedding rows per iteration (see build_batch)

enum slot_state { SLOT_IDLE, SLOT_PROMPT, SLOT_GEN };

struct slot {
    int id;
    enum slot_state state;
    struct rreq *req;
    int n_done;          // prompt tokens in the cache (next one to feed)
    int32_t next_token;  // sampled, not yet in the cache (SLOT_GEN)
    int64_t n_generated;
    int n_evaluated;  // prompt tokens evaluated (cached prefix excluded)
    int64_t t_start, t_first;
    int64_t n_drafted, n_accepted;  // speculative decoding statistics
    int32_t *hist;                  // n_ctx + 1: the history the drafters continue
    int32_t draft[RUNNER_MAX_DRAFT_NUM_PREDICT];
    int n_draft;
    // Draft length control (see adapt_draft): the current most drafts per
    // step, steps in a row with nothing accepted, steps left without drafts.
    int draft_k, miss_streak, draft_pause;
    uint64_t last_used;
    struct tokenizer_stream ts;
    struct buf piece, text;
    // Batch bookkeeping of the current iteration: entries [b0, b0 + bn).
    int b0, bn;
    json_t *logprobs;  // entries not yet sent (attached to the next line), or NULL
    // Embedding accumulator (n_embd floats).
    double *pool;
    int n_pooled;
};

struct runner_loop {
    struct runner *rn;
    struct model *m;
    pthread_t thread;
    bool running;        // thread started
    pthread_mutex_t mu;  // guards head, tail, stop
    pthread_cond_t cv;
    struct rreq *head, *tail;
    bool stop;
    // Loop-thread state.
    struct slot *slots;
    int n_slots, n_ctx, n_batch, n_embd;
    int n_embd_inp;  // width of an image row in b_embd (model_n_embd_inp)
    bool encoder;    // embedding-only model: whole inputs per batch, no logits
    // Recurrent layers (model_is_recurrent): each prompt's chunks stop
    // RUNNER_CKPT_TAIL tokens before its end for a state checkpoint there
    // (llama-server's: the next turn of a chat shares the prompt up to
    // about there, and resumes from it instead of from position 0).
    bool recurrent;
    uint64_t tick;
    int32_t *b_tokens, *b_pos, *b_slot;
    bool *b_logits;
    float *b_embd;  // n_batch × n_embd_inp input rows of image entries (a tower is loaded), or NULL
    bool has_embd;  // the batch being built holds image rows
    int32_t *b_rc;  // n_batch × 2: image rows' (row, col) for M-RoPE models, or NULL
    struct runner_draft_job *jobs;  // one per slot
};

// ---------------------------------------------------------------------------
// Output

static void emit_content(struct slot *s)
{
    if (s->text.len == 0)
        return;
    json_t *o = json_object();
    jsonx_set_strn(o, "content", s->text.data, s->text.len);
    if (s->logprobs) {
        jsonx_set(o, "logprobs", s->logprobs);
        s->logprobs = NULL;
    }
    rreq_emit(s->req, o);
    buf_reset(&s->text);
}

// {"token":..., "logprob":..., "bytes":[...]} for one token.
static json_t *logprob_entry(const struct runner_loop *l, int32_t id, float lp)
{
    struct str piece = tokenizer_piece(l->rn->tok, id, true);
    json_t *o = json_object();
    jsonx_set_strn(o, "token", piece.ptr, piece.len);
    jsonx_set_f32(o, "logprob", lp);
    json_t *bytes = json_array();
    for (size_t i = 0; i < piece.len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)piece.ptr[i]));
    jsonx_set(o, "bytes", bytes);
    return o;
}

// Log-probabilities from the model's raw logits (log-softmax), as Ollama
// reports them: the sampled token and the top_logprobs most likely ones.
static void add_logprobs(struct runner_loop *l, struct slot *s, const float *logits, int32_t tok)
{
    int n = model_n_vocab(l->m);
    float mx = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    float lse = mx + (float)log(sum);
    json_t *e = logprob_entry(l, tok, logits[tok] - lse);
    int k = s->req->top_logprobs < n ? s->req->top_logprobs : n;
    if (k > 0) {
        // Partial selection of the k largest logits (k <= 20).
        int32_t best[20];
        int nb = 0;
        for (int i = 0; i < n; i++) {
            if (nb == k && logits[i] <= logits[best[nb - 1]])
                continue;
            int j = nb < k ? nb++ : k - 1;
            while (j > 0 && logits[best[j - 1]] < logits[i]) {
                best[j] = best[j - 1];
                j--;
            }
            best[j] = i;
        }
        json_t *top = json_array();
        for (int i = 0; i < nb; i++)
            json_array_append_new(top, logprob_entry(l, best[i], logits[best[i]] - lse));
        jsonx_set(e, "top_logprobs", top);
    }
    if (!s->logprobs)
        s->logprobs = json_array();
    json_array_append_new(s->logprobs, e);
}

static void slot_release(struct runner_loop *l, struct slot *s)
{
    json_decref(s->logprobs);
    s->logprobs = NULL;
    rreq_finish(s->req);
    rreq_unref(s->req);
    s->req = NULL;
    s->state = SLOT_IDLE;
    s->last_used = ++l->tick;
}

static void finish_error(struct runner_loop *l, struct slot *s, const char *msg)
{
    struct rreq *r = s->req;
    if (r->kind == RREQ_EMBEDDING) {
        r->error = xstrdup(msg);
    } else {
        json_t *o = json_object();
        jsonx_set_str(o, "error", msg);
        rreq_emit(r, o);
    }
    slot_release(l, s);
}

static void finish_done(struct runner_loop *l, struct slot *s, enum sample_done why)
{
    struct rreq *r = s->req;
    // Whatever was held back (an unfinished character, a partial stop string)
    // goes out now, unless a stop string matched.
    buf_reset(&s->piece);
    tokenizer_stream_flush(&s->ts, &s->piece, NULL);
    if (s->piece.len)
        sample_stop_feed(r->stop, s->piece.data, s->piece.len, &s->text);
    sample_stop_flush(r->stop, &s->text);
    emit_content(s);

    int64_t now = time_monotonic_ns();
    if (s->t_first == 0)
        s->t_first = now;
    json_t *o = json_object();
    jsonx_set_bool(o, "done", true);
    jsonx_set_str(o, "done_reason", sample_done_reason(why));
    jsonx_set_int(o, "prompt_eval_count", s->n_evaluated);
    jsonx_set_int(o, "prompt_eval_duration", s->t_first - s->t_start);
    jsonx_set_int(o, "eval_count", s->n_generated);
    jsonx_set_int(o, "eval_duration", now - s->t_first);
    if (s->n_drafted > 0) {
        jsonx_set_int(o, "draft_count", s->n_drafted);
        jsonx_set_int(o, "draft_accepted_count", s->n_accepted);
    }
    if (s->logprobs) {
        jsonx_set(o, "logprobs", s->logprobs);
        s->logprobs = NULL;
    }
    if (r->return_context) {
        json_t *ctx = json_array();
        for (size_t i = 0; i < r->context.len; i++)
            json_array_append_new(ctx, json_integer(r->context.data[i]));
        jsonx_set(o, "context", ctx);
    }
    rreq_emit(r, o);
    slot_release(l, s);
}

// ---------------------------------------------------------------------------
// Slots

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int k = 0;
    while (k < na && k < nb && a[k] == b[k])
        k++;
    return k;
}

// Picks an idle slot for r: the longest cached prefix when the prompt cache
// is used, else (and on ties) the least recently used one.
static struct slot *pick_slot(struct runner_loop *l, struct rreq *r)
{
    struct slot *best = NULL;
    int best_k = -1;
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        if (s->state != SLOT_IDLE)
            continue;
        int k = 0;
        if (r->cache_prompt && r->kind == RREQ_COMPLETION)
            k = model_slot_common_prefix(l->m, i, r->tokens.data, (int)r->tokens.len);
        if (k > best_k || (k == best_k && s->last_used < best->last_used)) {
            best = s;
            best_k = k;
        }
    }
    return best;
}

static void slot_start(struct runner_loop *l, struct slot *s, struct rreq *r)
{
    s->req = r;
    s->state = SLOT_PROMPT;
    s->n_generated = 0;
    s->n_drafted = s->n_accepted = 0;
    s->draft_k = r->draft_max;
    s->miss_streak = s->draft_pause = 0;
    s->t_start = time_monotonic_ns();
    s->t_first = 0;
    buf_reset(&s->piece);
    buf_reset(&s->text);
    tokenizer_stream_init(&s->ts, l->rn->tok, true, false);
    if (r->kind == RREQ_COMPLETION && r->cache_prompt) {
        s->n_done = model_slot_reuse_prefix(l->m, s->id, r->tokens.data, (int)r->tokens.len);
    } else {
        model_slot_clear(l->m, s->id);
        s->n_done = 0;
    }
    s->n_evaluated = (int)r->tokens.len - s->n_done;
    if (r->kind == RREQ_EMBEDDING) {
        memset(s->pool, 0, (size_t)l->n_embd * sizeof(double));
        s->n_pooled = 0;
    }
}

// Moves waiting requests into idle slots (FIFO) and drops waiting requests
// whose client has gone.
static void admit(struct runner_loop *l)
{
    pthread_mutex_lock(&l->mu);
    struct rreq **pp = &l->head, *prev = NULL;
    while (*pp) {
        struct rreq *r = *pp;
        struct slot *s = NULL;
        bool gone = rreq_cancelled(r);
        if (!gone)
            s = pick_slot(l, r);
        if (!gone && !s)
            break;  // FIFO: nobody overtakes the head
        *pp = r->next;
        if (l->tail == r)
            l->tail = prev;
        r->next = NULL;
        if (gone) {
            rreq_finish(r);
            rreq_unref(r);
        } else {
            slot_start(l, s, r);
        }
    }
    pthread_mutex_unlock(&l->mu);
}

// ---------------------------------------------------------------------------
// One token of a generating slot.

static void accept_token(struct runner_loop *l, struct slot *s, int32_t tok)
{
    struct rreq *r = s->req;
    s->n_generated++;
    if (model_token_is_eog(l->m, tok)) {
        finish_done(l, s, SAMPLE_DONE_STOP);
        return;
    }
    if (r->return_context)
        tokenizer_ids_push(&r->context, tok);
    buf_reset(&s->piece);
    struct err e = {0};
    if (tokenizer_stream_push(&s->ts, tok, &s->piece, &e) < 0) {
        finish_error(l, s, e.msg);
        return;
    }
    int matched = 0;
    if (s->piece.len)
        matched = sample_stop_feed(r->stop, s->piece.data, s->piece.len, &s->text);
    if (matched < 0) {
        finish_error(l, s, "response too large");
        return;
    }
    emit_content(s);
    if (matched == 1 || sample_grammar_complete(r->sampler)) {
        finish_done(l, s, SAMPLE_DONE_STOP);
        return;
    }
    if (s->n_generated >= r->limit) {
        finish_done(l, s, SAMPLE_DONE_LENGTH);
        return;
    }
    s->next_token = tok;
    s->state = SLOT_GEN;
}

// Samples the token that follows batch entry `entry` (and records its
// log probabilities). False when the slot was finished with an error.
static bool sample_at(struct runner_loop *l, struct slot *s, int entry, int32_t *tok)
{
    const float *logits = model_logits(l->m, entry);
    if (!logits) {
        finish_error(l, s, "no logits for the last token");
        return false;
    }
    if (s->t_first == 0)
        s->t_first = time_monotonic_ns();
    struct err e = {0};
    if (sample_next(s->req->sampler, logits, tok, &e) < 0) {
        finish_error(l, s, e.msg);
        return false;
    }
    if (s->req->logprobs)
        add_logprobs(l, s, logits, *tok);
    return true;
}

static void sample_slot(struct runner_loop *l, struct slot *s, int entry)
{
    int32_t tok;
    if (sample_at(l, s, entry, &tok))
        accept_token(l, s, tok);
}

// The target's verdict on a generating slot's entries [b0, b0 + bn): its
// next token and bn - 1 drafts. Accepts drafts while the sampler agrees;
// the first disagreeing sample ends the step. The cache keeps the next
// token and the accepted drafts (the draft model's cache catches up at its
// next drafting step).
// The draft length follows the acceptance (it never changes the output):
// a step that accepted every draft lets the next draft 2 more (up to
// draft_num_predict), any rejection 1 fewer (down to 1); after 3 steps in a
// row with nothing accepted the slot drafts nothing for 1, 2, 4 ... 64
// steps, so a draft that never agrees costs little.
static void adapt_draft(struct slot *s, int drafted, int accepted)
{
    if (accepted == drafted)
        s->draft_k = s->draft_k + 2 < s->req->draft_max ? s->draft_k + 2 : s->req->draft_max;
    else if (s->draft_k > 1)
        s->draft_k--;
    s->miss_streak = accepted > 0 ? 0 : s->miss_streak + 1;
    if (s->miss_streak >= 3)
        s->draft_pause = s->miss_streak - 3 < 6 ? 1 << (s->miss_streak - 3) : 64;
}

static void verify_slot(struct runner_loop *l, struct slot *s)
{
    int p0 = l->b_pos[s->b0], k = s->bn - 1, j = 0, accepted = 0;
    s->n_drafted += k;
    for (;; j++) {
        int32_t tok;
        if (!sample_at(l, s, s->b0 + j, &tok))
            break;
        bool agree = j < k && tok == l->b_tokens[s->b0 + 1 + j];
        accepted += agree;
        s->n_accepted += agree;  // before accept_token: it may write the final line
        accept_token(l, s, tok);
        if (!agree || s->state != SLOT_GEN)
            break;
    }
    if (k > 0)
        log_debug("speculative: slot %d at %d drafted %d, accepted %d", s->id, p0, k, accepted);
    if (k > 0 && s->state == SLOT_GEN)
        adapt_draft(s, k, accepted);
    struct err e = {0};
    if (k > 0 && model_slot_truncate(l->m, s->id, p0 + 1 + j, &e) < 0) {
        log_error("speculative rollback: %s", e.msg);
        model_slot_clear(l->m, s->id);
        if (s->state != SLOT_IDLE)
            finish_error(l, s, e.msg);
    }
}

static void pool_rows(struct runner_loop *l, struct slot *s)
{
    enum runner_pooling p = l->rn->pooling;
    int n_total = (int)s->req->tokens.len;
    for (int i = s->b0; i < s->b0 + s->bn; i++) {
        int pos = l->b_pos[i];
        bool want = p == RUNNER_POOL_MEAN || (p == RUNNER_POOL_CLS && pos == 0) ||
                    (p == RUNNER_POOL_LAST && pos == n_total - 1);
        if (!want)
            continue;
        const float *h = model_embeddings(l->m, i);
        if (!h)
            continue;
        for (int j = 0; j < l->n_embd; j++)
            s->pool[j] += h[j];
        s->n_pooled++;
    }
}

static void finish_embedding(struct runner_loop *l, struct slot *s)
{
    struct rreq *r = s->req;
    if (s->n_pooled == 0) {
        finish_error(l, s, "no hidden states to pool");
        return;
    }
    r->embd = xmalloc((size_t)l->n_embd * sizeof(float));
    for (int j = 0; j < l->n_embd; j++)
        r->embd[j] = (float)(s->pool[j] / s->n_pooled);
    model_pool_project(l->m, r->embd);
    r->n_embd = l->n_embd;
    r->n_evaluated = (int)r->tokens.len;
    slot_release(l, s);
}

// ---------------------------------------------------------------------------
// The iteration

// Room for the next token of a generating slot: shift the window when it is
// full, or end the request. Returns false when the slot was finished.
static bool make_room(struct runner_loop *l, struct slot *s)
{
    if (model_slot_n_past(l->m, s->id) < l->n_ctx)
        return true;
    if (!s->req->shift) {
        finish_done(l, s, SAMPLE_DONE_LENGTH);
        return false;
    }
    struct err e = {0};
    int rc = model_context_shift(l->m, s->id, s->req->n_keep, &e);
    if (rc < 0) {
        finish_error(l, s, e.msg);
        return false;
    }
    if (rc == 0) {
        finish_done(l, s, SAMPLE_DONE_LENGTH);
        return false;
    }
    return true;
}

// How many tokens slot s may draft this step: its current draft length, within
// the batch room left (`room`), the window (no context shift mid-step) and
// num_predict.
static int draft_room(const struct runner_loop *l, const struct slot *s, int room)
{
    const struct rreq *r = s->req;
    if (r->draft_max <= 0 || (r->draft_ngram == 0 && !l->rn->draft))
        return 0;
    int n_past = model_slot_n_past(l->m, s->id);
    int64_t max = s->draft_k < room ? s->draft_k : room;
    if (max > l->n_ctx - n_past - 1)
        max = l->n_ctx - n_past - 1;
    if (max > r->limit - s->n_generated - 1)
        max = r->limit - s->n_generated - 1;
    return max > 0 ? (int)max : 0;
}

// Fills every generating slot's drafts (s->draft[0..n_draft)): prompt
// lookup slot by slot, the draft model for all its slots in one go.
static void draft_all(struct runner_loop *l, int room)
{
    int n_jobs = 0;
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        s->n_draft = 0;
        if (s->state != SLOT_GEN)
            continue;
        if (s->draft_pause > 0) {
            s->draft_pause--;
            continue;
        }
        int max = draft_room(l, s, room);
        if (max == 0)
            continue;
        room -= max;
        int n_past = model_slot_n_past(l->m, s->id);
        memcpy(s->hist, model_slot_tokens(l->m, s->id), (size_t)n_past * sizeof(int32_t));
        s->hist[n_past] = s->next_token;
        if (s->req->draft_ngram > 0)
            s->n_draft =
                runner_spec_lookup(s->hist, n_past + 1, s->req->draft_ngram, s->draft, max);
        else
            l->jobs[n_jobs++] = (struct runner_draft_job){
                .slot = s->id, .hist = s->hist, .n = n_past + 1, .out = s->draft, .max = max};
    }
    struct err e = {0};
    if (n_jobs > 0 && runner_spec_draft(l->rn->draft, l->jobs, n_jobs, &e) < 0) {
        // Generation goes on without these drafts.
        log_warn("draft model: %s", e.msg);
        for (int i = 0; i < n_jobs; i++) {
            model_slot_clear(l->rn->draft->m, l->jobs[i].slot);
            l->jobs[i].k = 0;
        }
    }
    for (int i = 0; i < n_jobs; i++)
        l->slots[l->jobs[i].slot].n_draft = l->jobs[i].k;
    // Only tokens the target knows (a draft vocabulary may be padded).
    int n_vocab = model_n_vocab(l->m);
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        for (int k = 0; k < s->n_draft; k++)
            if (s->draft[k] < 0 || s->draft[k] >= n_vocab)
                s->n_draft = k;
    }
}

// Cross-slot prompt sharing, for completion requests that allow the prompt
// cache: concurrent requests often open with the same system prompt or
// template. When another slot's cache holds more of s's prompt than s has,
// s takes those rows (model_slot_copy_prefix: the same keys and values its
// own evaluation would write) instead of evaluating them again. When a slot
// placed earlier in this batch is evaluating at least SHARE_MIN tokens of
// s's prompt beyond that, s waits one iteration and takes them afterwards,
// so requests that arrive together evaluate their common prefix once. The
// first slot placed never waits, so the batch always moves on. Returns true
// when s waits this iteration.
#define SHARE_MIN        16
#define RUNNER_CKPT_TAIL 4

static bool share_prefix(struct runner_loop *l, struct slot *s)
{
    const struct rreq *r = s->req;
    if (r->kind != RREQ_COMPLETION || !r->cache_prompt || l->encoder)
        return false;
    const int32_t *tok = r->tokens.data;
    const int n = (int)r->tokens.len - 1;  // the last token is evaluated for its logits
    int from, coming = 0;
    int got = model_slot_share_prefix(l->m, s->id, tok, n, &from);
    if (from >= 0 && got <= s->n_done)
        return false;  // a ring that no longer holds the window: evaluate
    if (got > s->n_done) {
        log_debug("prompt sharing: slot %d takes %d tokens from slot %d", s->id, got - s->n_done,
                  from);
        s->n_evaluated -= got - s->n_done;
        s->n_done = got;
    }
    for (int i = 0; i < l->n_slots; i++) {
        const struct slot *t = &l->slots[i];
        if (t != s && t->state == SLOT_PROMPT && t->bn > 0 && t->req->kind == RREQ_COMPLETION) {
            int c = common_prefix(t->req->tokens.data, t->n_done + t->bn, tok, n);
            coming = c > coming ? c : coming;
        }
    }
    return coming >= s->n_done + SHARE_MIN;
}

// A prompt chunk [p0, p0 + take) does not end inside an image when the
// tower wants an image's rows to see each other: it ends before the image
// instead (0: the image waits for the next batch), unless the batch is
// empty and the image is longer than a batch (the decode then fails).
static int keep_image_whole(const struct runner_loop *l, const struct rreq *r, int p0, int take,
                            int n_in_batch)
{
    if (!l->rn->vision || !vision_model_non_causal(l->rn->vision))
        return take;
    const int32_t *t = r->tokens.data;
    int end = p0 + take;
    if (end >= (int)r->tokens.len || t[end - 1] >= 0 || t[end] != t[end - 1])
        return take;
    int start = end - 1;
    while (start > p0 && t[start - 1] == t[end - 1])
        start--;
    if (start == p0 && n_in_batch == 0)
        return take;
    return start - p0;
}

// The generating slots' next tokens and drafts into the batch from row n;
// returns the next free row.
static int batch_generated(struct runner_loop *l, int n)
{
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        if (s->state != SLOT_GEN)
            continue;
        s->b0 = n;
        s->bn = 1 + s->n_draft;
        l->b_tokens[n] = s->next_token;
        memcpy(l->b_tokens + n + 1, s->draft, (size_t)s->n_draft * sizeof(int32_t));
        int p0 = model_slot_n_past(l->m, s->id);
        for (int j = 0; j < s->bn; j++) {
            l->b_pos[n + j] = p0 + j;
            l->b_slot[n + j] = s->id;
            l->b_logits[n + j] = true;
        }
        n += s->bn;
    }
    return n;
}

// How many of s's prompt tokens go into a batch with n rows taken (0: the
// slot waits for the next one).
static int prompt_take(const struct runner_loop *l, const struct slot *s, int n)
{
    const struct rreq *r = s->req;
    int left = (int)r->tokens.len - s->n_done;
    int take = left < l->n_batch - n ? left : l->n_batch - n;
    if (l->encoder) {
        // An encoder reads each input whole, in one pass (it fits an
        // empty batch: n_batch >= n_ctx); else it waits for the next one.
        if (take < left)
            return 0;
    } else if (r->kind == RREQ_EMBEDDING && l->rn->pooling == RUNNER_POOL_MEAN &&
               take > EMBED_CHUNK) {
        // Every row of an embedding wants outputs, and the model computes
        // logits for each output row: keep those chunks small.
        take = EMBED_CHUNK;
    }
    // Recurrent models: the chunk before the prompt's last
    // RUNNER_CKPT_TAIL tokens ends there, for a checkpoint (iterate).
    int tail_at = (int)r->tokens.len - RUNNER_CKPT_TAIL;
    if (l->recurrent && r->kind == RREQ_COMPLETION && s->n_done < tail_at &&
        s->n_done + take > tail_at)
        take = tail_at - s->n_done;
    if (r->n_places > 0)  // an image starting here may wait for an emptier batch
        take = keep_image_whole(l, r, s->n_done, take, n);
    return take;
}

// s's prompt tokens [n_done, n_done + take) into the batch from row n (image
// rows with their embeddings); returns the next free row.
static int batch_prompt(struct runner_loop *l, struct slot *s, int take, int n)
{
    const struct rreq *r = s->req;
    s->b0 = n;
    s->bn = take;
    for (int j = 0; j < take; j++) {
        int p = s->n_done + j;
        l->b_tokens[n] = r->tokens.data[p];
        const float *row = r->tokens.data[p] < 0 ? rreq_image_row(r, p) : NULL;
        if (row && l->b_embd) {
            memcpy(l->b_embd + (size_t)n * l->n_embd_inp, row, sizeof(float) * l->n_embd_inp);
            l->has_embd = true;
            rreq_image_cell(r, p, &l->b_rc[2 * n], &l->b_rc[2 * n + 1]);
        }
        l->b_pos[n] = p;
        l->b_slot[n] = s->id;
        bool last = p == (int)r->tokens.len - 1;
        if (r->kind == RREQ_EMBEDDING)
            l->b_logits[n] = l->rn->pooling == RUNNER_POOL_MEAN ||
                             (l->rn->pooling == RUNNER_POOL_CLS && p == 0) ||
                             (l->rn->pooling == RUNNER_POOL_LAST && last);
        else
            l->b_logits[n] = last;
        n++;
    }
    return n;
}

static int build_batch(struct runner_loop *l)
{
    int n_gen = 0;
    l->has_embd = false;
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        s->bn = 0;
        n_gen += s->state == SLOT_GEN && make_room(l, s);
    }
    // Every generating slot contributes its next token first, and its
    // drafts from the room the others' next tokens leave.
    draft_all(l, l->n_batch - n_gen);
    int n = batch_generated(l, 0);
    // Prompt chunks fill the rest, starting from a rotating slot for fairness.
    for (int k = 0; k < l->n_slots && n < l->n_batch; k++) {
        struct slot *s = &l->slots[(k + (int)(l->tick % (uint64_t)l->n_slots)) % l->n_slots];
        if (s->state != SLOT_PROMPT || share_prefix(l, s))
            continue;
        int take = prompt_take(l, s, n);
        if (take > 0)
            n = batch_prompt(l, s, take, n);
    }
    return n;
}

static void iterate(struct runner_loop *l)
{
    admit(l);
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        if (s->state != SLOT_IDLE && rreq_cancelled(s->req))
            slot_release(l, s);
    }
    int n = build_batch(l);
    if (n == 0)
        return;
    struct model_batch b = {.n_tokens = n,
                            .tokens = l->b_tokens,
                            .pos = l->b_pos,
                            .slot = l->b_slot,
                            .logits = l->b_logits,
                            .embd = l->has_embd ? l->b_embd : NULL,
                            .embd_non_causal =
                                l->rn->vision && vision_model_non_causal(l->rn->vision),
                            .rope_rc = l->has_embd ? l->b_rc : NULL};
    struct err e = {0};
    int64_t t0 = time_monotonic_ns();
    int rc = model_decode(l->m, &b, &e);
    if (log_enabled(LOG_DEBUG)) {
        int n_gen = 0;
        for (int i = 0; i < l->n_slots; i++)
            n_gen += l->slots[i].state == SLOT_GEN && l->slots[i].bn > 0;
        log_debug("decode: %d tokens (%d generating slots) in %.2f ms", n, n_gen,
                  (double)(time_monotonic_ns() - t0) / 1e6);
    }
    if (rc < 0) {
        log_error("decode failed: %s", e.msg);
        for (int i = 0; i < l->n_slots; i++) {
            struct slot *s = &l->slots[i];
            if (s->state != SLOT_IDLE && s->bn > 0) {
                model_slot_clear(l->m, s->id);
                finish_error(l, s, e.msg);
            }
        }
        return;
    }
    l->tick++;
    for (int i = 0; i < l->n_slots; i++) {
        struct slot *s = &l->slots[i];
        if (s->state == SLOT_IDLE || s->bn == 0)
            continue;
        if (s->state == SLOT_GEN) {
            verify_slot(l, s);
            continue;
        }
        // SLOT_PROMPT
        s->n_done += s->bn;
        if (l->recurrent && s->req->kind == RREQ_COMPLETION &&
            s->n_done == (int)s->req->tokens.len - RUNNER_CKPT_TAIL)
            model_slot_checkpoint(l->m, s->id);
        if (s->req->kind == RREQ_EMBEDDING) {
            pool_rows(l, s);
            if (s->n_done == (int)s->req->tokens.len)
                finish_embedding(l, s);
        } else if (s->n_done == (int)s->req->tokens.len) {
            sample_slot(l, s, s->b0 + s->bn - 1);
        }
    }
}

static bool any_active(const struct runner_loop *l)
{
    for (int i = 0; i < l->n_slots; i++)
        if (l->slots[i].state != SLOT_IDLE)
            return true;
    return false;
}

static void *loop_main(void *p)
{
    struct runner_loop *l = p;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && !l->head && !any_active(l))
            pthread_cond_wait(&l->cv, &l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        iterate(l);
    }
    for (int i = 0; i < l->n_slots; i++)
        if (l->slots[i].state != SLOT_IDLE)
            finish_error(l, &l->slots[i], "runner is shutting down");
    return NULL;
}

// ---------------------------------------------------------------------------
// Public

int runner_loop_start(struct runner_loop **out, struct runner *rn, struct err *e)
{
    struct runner_loop *l = xcalloc(1, sizeof(*l));
    l->rn = rn;
    l->m = rn->model;
    l->n_slots = model_n_slots(l->m);
    l->n_ctx = model_n_ctx(l->m);
    l->n_batch = model_n_batch(l->m);
    l->n_embd = model_n_embd(l->m);
    l->n_embd_inp = model_n_embd_inp(l->m);
    l->encoder = model_is_encoder(l->m);
    l->recurrent = model_is_recurrent(l->m);
    if (l->n_batch < l->n_slots)
        l->n_batch = l->n_slots;  // room for one token of every slot
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->slots = xcalloc((size_t)l->n_slots, sizeof(*l->slots));
    for (int i = 0; i < l->n_slots; i++) {
        l->slots[i].id = i;
        buf_init(&l->slots[i].piece, 0);
        buf_init(&l->slots[i].text, RUNNER_MAX_PENDING_BYTES);
        l->slots[i].pool = xcalloc((size_t)l->n_embd, sizeof(double));
        l->slots[i].hist = xcalloc((size_t)l->n_ctx + 1, sizeof(int32_t));
    }
    size_t nb = (size_t)l->n_batch;
    l->b_tokens = xcalloc(nb, sizeof(int32_t));
    l->b_pos = xcalloc(nb, sizeof(int32_t));
    l->b_slot = xcalloc(nb, sizeof(int32_t));
    l->b_logits = xcalloc(nb, sizeof(bool));
    if (rn->vision) {
        l->b_embd = xcalloc(nb * (size_t)l->n_embd_inp, sizeof(float));
        l->b_rc = xcalloc(nb * 2, sizeof(int32_t));
    }
    l->jobs = xcalloc((size_t)l->n_slots, sizeof(*l->jobs));
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        runner_loop_free(l);
        return err_set(e, ERR_INTERNAL, "cannot start the batching thread");
    }
    l->running = true;
    *out = l;
    return 0;
}

// Ends a request that will never run (takes the loop's reference).
static void fail_request(struct rreq *r)
{
    if (r->kind == RREQ_EMBEDDING) {
        pthread_mutex_lock(&r->mu);
        if (!r->error)
            r->error = xstrdup("runner is shutting down");
        pthread_mutex_unlock(&r->mu);
    } else {
        json_t *o = json_object();
        jsonx_set_str(o, "error", "runner is shutting down");
        rreq_emit(r, o);
    }
    rreq_finish(r);
    rreq_unref(r);
}

void runner_loop_submit(struct runner_loop *l, struct rreq *r)
{
    rreq_ref(r);
    pthread_mutex_lock(&l->mu);
    if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        fail_request(r);
        return;
    }
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void runner_loop_stop(struct runner_loop *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->running)
        pthread_join(l->thread, NULL);
    l->running = false;
    pthread_mutex_lock(&l->mu);
    struct rreq *q = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    while (q) {
        struct rreq *r = q;
        q = r->next;
        fail_request(r);
    }
}

void runner_loop_free(struct runner_loop *l)
{
    if (!l)
        return;
    runner_loop_stop(l);
    for (int i = 0; i < l->n_slots; i++) {
        buf_deinit(&l->slots[i].piece);
        buf_deinit(&l->slots[i].text);
        free(l->slots[i].pool);
        free(l->slots[i].hist);
    }
    free(l->slots);
    free(l->b_tokens);
    free(l->b_embd);
    free(l->b_rc);
    free(l->b_pos);
    free(l->b_slot);
    free(l->b_logits);
    free(l->jobs);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

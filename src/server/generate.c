// /api/generate and /api/chat (api.md §6, §7): request validation with
// Ollama's wording, option merging, prompt rendering through the model's
// template, a runner from the scheduler, and the response stream built from
// the runner's pieces (thinking and tool calls split out by the template
// module's output parser). Errors found before the first byte is sent get
// their status code; later ones end the stream with an {"error"} line.
#include "server/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/runner_client.h"
#include "server/sched.h"

#define RUNNER_STOPPED_MSG                                                                         \
    "model runner has unexpectedly stopped, this may be due to resource limitations or an "        \
    "internal error, check ollama server logs for details"

struct gen_job {
    struct server *srv;
    bool chat;
    char *model_name;  // as sent
    struct store_model *m;
    json_t *body;  // the request (owned)
    int64_t t_start;

    // Derived from the request.
    bool stream, raw;
    json_t *options;  // merged (owned)
    bool keep_alive_set;
    int64_t keep_alive_ns;
    struct prompt_think think;
    bool think_on;
    json_t *format;     // borrowed from body (NULL: none)
    json_t *tools;      // borrowed from body
    struct prompt *pr;  // the prompt's source, engine and output parser (prompt module)
    int n_ctx;
    bool want_context;
    bool logprobs;  // api.md §6.7
    int top_logprobs;
    bool debug_render_only;  // _debug_render_only: answer the rendered prompt, run nothing

    // Runner.
    struct sched_runner *runner;
    int64_t load_ns;
    struct buf prompt;

    // Output.
    struct srv_req *req;           // non-streaming: the request to reply to
    struct srv_stream *st;         // streaming
    struct prompt_parser *parser;  // owned by pr
    struct buf acc_content, acc_thinking;
    json_t *acc_calls;
    json_t *lp_pending;    // runner logprob entries not yet emitted (owned, may be NULL)
    json_t *acc_logprobs;  // non-streaming: every entry emitted so far (owned, may be NULL)
    json_t *final;         // the runner's final line (owned)
    struct err run_err;
    int run_rc;
};

static void job_free(struct gen_job *j)
{
    if (!j)
        return;
    free(j->model_name);
    store_model_free(j->m);
    json_decref(j->body);
    json_decref(j->options);
    prompt_free(j->pr);
    buf_deinit(&j->prompt);
    buf_deinit(&j->acc_content);
    buf_deinit(&j->acc_thinking);
    json_decref(j->acc_calls);
    json_decref(j->lp_pending);
    json_decref(j->acc_logprobs);
    json_decref(j->final);
    free(j);
}

static bool has_capability(const struct store_model *m, const char *cap)
{
    const char *caps[16];
    size_t n = store_model_capabilities(m, caps, 16);
    for (size_t i = 0; i < n; i++)
        if (strcmp(caps[i], cap) == 0)
            return true;
    return false;
}

// The trained context length of a GGUF (<arch>.context_length), or 0.
static int trained_context(const char *path)
{
    struct prompt_facts f;
    if (!prompt_facts_get(path, &f))
        return 0;
    int64_t n = f.context_length;
    prompt_facts_deinit(&f);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

// num_ctx: request/model option, else OLLAMA_CONTEXT_LENGTH, else 4096
// (CPU); capped at the trained context; at least 4.
static int effective_n_ctx(const struct server *srv, const json_t *options, const char *path)
{
    int64_t n = srv_option_int(options, "num_ctx", 0);
    bool requested = n > 0;
    if (n <= 0)
        n = srv->cfg->context_length ? (int64_t)srv->cfg->context_length : 4096;
    int trained = trained_context(path);
    if (trained > 0 && n > trained) {
        if (requested)  // the automatic default is capped silently
            log_warn("requested context size too large for model num_ctx=%lld n_ctx_train=%d",
                     (long long)n, trained);
        n = trained;
    }
    if (n < 4)
        n = 4;
    return (int)(n > INT32_MAX ? INT32_MAX : n);
}

// "think": bool or level. Returns < 0 after setting e.
static int parse_think(const json_t *body, struct prompt_think *t, struct err *e)
{
    json_t *v = json_object_get(body, "think");
    memset(t, 0, sizeof(*t));
    if (!v || json_is_null(v))
        return 0;
    t->set = true;
    if (json_is_boolean(v)) {
        t->on = json_is_true(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "high") == 0 || strcmp(s, "medium") == 0 || strcmp(s, "low") == 0 ||
            strcmp(s, "max") == 0) {
            t->on = true;
            t->level = s;
            return 0;
        }
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            t->on = strcmp(s, "true") == 0;
            return 0;
        }
        return err_set(e, ERR_INVALID,
                       "invalid think value: \"%s\" (must be \"high\", \"medium\", \"low\", "
                       "\"max\", true, or false)",
                       s);
    }
    return err_set(e, ERR_INVALID,
                   "invalid think value: must be \"high\", \"medium\", \"low\", \"max\", true, or "
                   "false");
}

// format: "json", a schema object, "" or null.
static int parse_format(const json_t *body, json_t **out, struct err *e)
{
    json_t *v = json_object_get(body, "format");
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!*s)
            return 0;
        if (strcmp(s, "json") == 0) {
            *out = v;
            return 0;
        }
        return err_set(e, ERR_INVALID,
                       "invalid format: \"%s\"; expected \"json\" or a valid JSON Schema object",
                       s);
    }
    if (json_is_object(v)) {
        *out = v;
        return 0;
    }
    return err_set(e, ERR_INVALID,
                   "invalid format: expected \"json\" or a valid JSON Schema object");
}

// ---------------------------------------------------------------------------
// Response objects

static json_t *base_object(const struct gen_job *j)
{
    json_t *o = json_object();
    jsonx_set_str(o, "model", j->model_name);
    char when[64];
    time_format_rfc3339_utc(time_now_ns(), when, sizeof(when));
    jsonx_set_str(o, "created_at", when);
    return o;
}

// One streamed chunk (or, with final, the last object).
static json_t *chunk_object(const struct gen_job *j, const char *content, size_t content_len,
                            const char *thinking, size_t thinking_len, json_t *calls, bool done)
{
    json_t *o = base_object(j);
    if (j->chat) {
        json_t *msg = json_object();
        jsonx_set_str(msg, "role", "assistant");
        jsonx_set_strn(msg, "content", content ? content : "", content_len);
        if (thinking_len)
            jsonx_set_strn(msg, "thinking", thinking, thinking_len);
        if (calls && json_array_size(calls))
            json_object_set(msg, "tool_calls", calls);
        jsonx_set(o, "message", msg);
    } else {
        jsonx_set_strn(o, "response", content ? content : "", content_len);
        if (thinking_len)
            jsonx_set_strn(o, "thinking", thinking, thinking_len);
    }
    jsonx_set_bool(o, "done", done);
    if (!j->chat && calls && json_array_size(calls) && done)
        json_object_set(o, "tool_calls", calls);
    return o;
}

static void set_metric(json_t *o, const char *key, int64_t v)
{
    if (v)  // zero metrics are omitted
        jsonx_set_int(o, key, v);
}

static void add_final_fields(const struct gen_job *j, json_t *o)
{
    const json_t *f = j->final;
    const char *reason = json_string_value(json_object_get(f, "done_reason"));
    jsonx_set_str(o, "done_reason", reason ? reason : "stop");
    json_t *ctx = json_object_get(f, "context");
    if (!j->chat && j->want_context && json_is_array(ctx))
        json_object_set(o, "context", ctx);
    set_metric(o, "total_duration", time_monotonic_ns() - j->t_start);
    set_metric(o, "load_duration", j->load_ns);
    set_metric(o, "prompt_eval_count", json_integer_value(json_object_get(f, "prompt_eval_count")));
    set_metric(o, "prompt_eval_duration",
               json_integer_value(json_object_get(f, "prompt_eval_duration")));
    set_metric(o, "eval_count", json_integer_value(json_object_get(f, "eval_count")));
    set_metric(o, "eval_duration", json_integer_value(json_object_get(f, "eval_duration")));
    server_metrics_tokens(json_integer_value(json_object_get(f, "prompt_eval_count")),
                          json_integer_value(json_object_get(f, "eval_count")),
                          json_integer_value(json_object_get(f, "eval_duration")));
}

// Appends the entries of from (an array, may be NULL) to *to.
static void logprobs_extend(json_t **to, const json_t *from)
{
    if (!json_array_size(from))
        return;
    if (!*to)
        *to = json_array();
    json_array_extend(*to, (json_t *)from);
}

// Moves the pending logprob entries onto o (the last field, api.md §6.3).
static void attach_logprobs(struct gen_job *j, json_t *o)
{
    if (json_array_size(j->lp_pending))
        jsonx_set(o, "logprobs", j->lp_pending);
    else
        json_decref(j->lp_pending);
    j->lp_pending = NULL;
}

// Emits what the parser yielded: streamed as a chunk, or accumulated. A
// chunk also goes out when only log probabilities are pending (the tokens'
// text was held back by the output parser), as Ollama does.
static int emit(struct gen_job *j, struct buf *content, struct buf *thinking, json_t *calls)
{
    bool any = content->len || thinking->len || json_array_size(calls);
    int rc = 0;
    if (j->st && (any || json_array_size(j->lp_pending))) {
        json_t *o = chunk_object(j, content->data, content->len, thinking->data, thinking->len,
                                 calls, false);
        attach_logprobs(j, o);
        // Tool calls arrive in their own chunk with empty content (api.md §7.3).
        rc = srv_stream_json_line(j->st, o);
    } else if (!j->st) {
        logprobs_extend(&j->acc_logprobs, j->lp_pending);
        json_decref(j->lp_pending);
        j->lp_pending = NULL;
    }
    if (!j->st && any) {
        buf_append(&j->acc_content, content->data ? content->data : "", content->len);
        buf_append(&j->acc_thinking, thinking->data ? thinking->data : "", thinking->len);
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c) jsonx_arr_append(j->acc_calls, json_incref(c));
    }
    buf_reset(content);
    buf_reset(thinking);
    json_array_clear(calls);
    return rc;
}

static int on_runner_line(void *ctx, const json_t *line)
{
    struct gen_job *j = ctx;
    json_t *err = json_object_get(line, "error");
    if (err) {
        j->run_rc = err_set(&j->run_err, ERR_INTERNAL, "%s",
                            json_is_string(err) ? json_string_value(err) : "runner error");
        return ERR_INTERNAL;
    }
    // Entries of tokens whose text comes on this line (or never: an end token).
    logprobs_extend(&j->lp_pending, json_object_get(line, "logprobs"));
    if (json_is_true(json_object_get(line, "done"))) {
        json_decref(j->final);
        j->final = json_incref((json_t *)line);
        return 0;
    }
    const char *piece = json_string_value(json_object_get(line, "content"));
    if (!piece || !*piece)
        return 0;
    struct buf content, thinking;
    buf_init(&content, 0);
    buf_init(&thinking, 0);
    json_t *calls = json_array();
    struct err pe = {0};
    int rc = prompt_parser_add(j->parser, piece, strlen(piece), &content, &thinking, calls, &pe);
    if (rc < 0)
        rc = err_set(&j->run_err, ERR_INTERNAL, "%s", pe.msg);
    if (rc == 0)
        rc = emit(j, &content, &thinking, calls);
    buf_deinit(&content);
    buf_deinit(&thinking);
    json_decref(calls);
    return rc;
}

static bool stream_cancelled(void *ctx)
{
    struct gen_job *j = ctx;
    return j->st ? srv_stream_cancelled(j->st) : srv_client_gone(j->req);
}

// Ollama 0.33 turns context shift off by default for deepseek2 models
// (server/sched.go supportsContextShift): a prompt past the context is then
// refused instead of truncated, and generation stops at the context's end.
static bool shift_by_default(const struct store_model *m)
{
    const struct store_config *c = &m->config;
    if (c->model_family && !strcmp(c->model_family, "deepseek2"))
        return false;
    for (size_t i = 0; i < c->n_families; i++)
        if (!strcmp(c->model_families[i], "deepseek2"))
            return false;
    return true;
}

// The runner request (src/runner/PROTOCOL.md).
static json_t *completion_body(const struct gen_job *j)
{
    json_t *b = json_object();
    jsonx_set_strn(b, "prompt", j->prompt.data ? j->prompt.data : "", j->prompt.len);
    jsonx_set(b, "options", json_deep_copy(j->options));
    if (j->format)
        jsonx_set(b, "format", json_deep_copy(j->format));
    json_t *shift = json_object_get(j->body, "shift");
    json_t *truncate = json_object_get(j->body, "truncate");
    jsonx_set_bool(b, "shift",
                   json_is_boolean(shift) ? json_is_true(shift) : shift_by_default(j->m));
    jsonx_set_bool(b, "truncate", !json_is_false(truncate));
    jsonx_set_bool(b, "cache_prompt", true);
    jsonx_set_bool(b, "return_context", j->want_context);
    srv_images_attach(b, j->body, j->chat, j->prompt.data, j->prompt.len);
    if (j->logprobs) {
        jsonx_set_bool(b, "logprobs", true);
        if (j->top_logprobs > 0)
            jsonx_set_int(b, "top_logprobs", j->top_logprobs);
    }
    return b;
}

// Runs the completion against the acquired runner and produces the final
// object (streamed, or returned via j->final for the non-streaming reply).
static int run_completion(struct gen_job *j)
{
    json_t *body = completion_body(j);
    int rc = runner_http_stream(sched_runner_port(j->runner), "/completion", body, on_runner_line,
                                j, stream_cancelled, j, &j->run_err);
    json_decref(body);
    bool runner_failed = false;
    if (rc == ERR_NETWORK || (rc < 0 && !sched_runner_alive(j->runner))) {
        char last[512];
        sched_runner_last_error(j->runner, last, sizeof(last));
        err_clear(&j->run_err);
        rc = err_set(&j->run_err, ERR_INTERNAL, "%s%s%s", RUNNER_STOPPED_MSG, last[0] ? ": " : "",
                     last);
        runner_failed = true;
    }
    if (rc == 0) {
        // Flush what the output parser held back.
        struct buf content, thinking;
        buf_init(&content, 0);
        buf_init(&thinking, 0);
        json_t *calls = json_array();
        rc = prompt_parser_finish(j->parser, &content, &thinking, calls, &j->run_err);
        if (rc == 0)
            rc = emit(j, &content, &thinking, calls);
        else
            rc = ERR_INTERNAL;
        buf_deinit(&content);
        buf_deinit(&thinking);
        json_decref(calls);
        if (!j->final)
            j->final = json_pack("{s:b,s:s}", "done", 1, "done_reason", "stop");
    }
    sched_release(j->srv->sched, j->runner, runner_failed);
    j->runner = NULL;
    return rc;
}

static void gen_producer(struct srv_stream *st, void *arg)
{
    struct gen_job *j = arg;
    j->st = st;  // set here: the handler must not touch j once the thread runs
    int rc = run_completion(j);
    if (rc == 0) {
        json_t *o = chunk_object(j, "", 0, NULL, 0, NULL, true);
        add_final_fields(j, o);
        attach_logprobs(j, o);
        srv_stream_json_line(st, o);
    } else if (rc != ERR_CANCELLED) {
        srv_stream_error(st, j->run_err.msg);
    }
    srv_stream_end(st);
    job_free(j);
}

// ---------------------------------------------------------------------------
// Prompt

// Token count for truncation (the template module only compares it with
// num_ctx). A text of N bytes has at most N + 2 tokens (every token covers at
// least one byte; BOS/EOS are added), so a short text needs no round trip to
// the runner's tokenizer.
static int64_t count_tokens(void *ctx, const char *text, size_t len, struct err *e)
{
    struct gen_job *j = ctx;
    if ((int64_t)len + 2 <= (int64_t)j->n_ctx)
        return (int64_t)len + 2;
    json_t *body = json_object();
    jsonx_set_strn(body, "content", text, len);
    json_t *out = NULL;
    int rc =
        runner_http_json(sched_runner_port(j->runner), "/tokenize", body, 30000, NULL, &out, e);
    json_decref(body);
    if (rc < 0)
        return rc;
    int64_t n = (int64_t)json_array_size(json_object_get(out, "tokens"));
    json_decref(out);
    return n;
}

// The prompt (prompt module), after the deprecated `context` tokens of a
// generate, detokenized by the runner and put first.
static int render_prompt(struct gen_job *j, struct err *e)
{
    const json_t *b = j->body;
    json_t *ctx = json_object_get(b, "context");
    bool has_context = !j->chat && json_is_array(ctx) && json_array_size(ctx);
    if (has_context && !j->raw) {
        json_t *req = json_pack("{s:O}", "tokens", ctx);
        json_t *out = NULL;
        int rc = runner_http_json(sched_runner_port(j->runner), "/detokenize", req, 30000, NULL,
                                  &out, e);
        json_decref(req);
        if (rc < 0)
            return rc;
        const char *text = json_string_value(json_object_get(out, "content"));
        buf_append_str(&j->prompt, text ? text : "");
        json_decref(out);
    }
    struct prompt_input in = {
        .chat = j->chat,
        .raw = j->raw,
        .model_name = j->model_name,
        .history = j->m->messages,
        .model_system = j->m->system,
        .messages = json_object_get(b, "messages"),
        .system = json_string_value(json_object_get(b, "system")),
        .prompt = json_string_value(json_object_get(b, "prompt")),
        .suffix = json_string_value(json_object_get(b, "suffix")),
        .images = json_object_get(b, "images"),
        .has_context = has_context,
        .tools = j->tools,
        .think = j->think,
        .truncate = !json_is_false(json_object_get(b, "truncate")),
        .n_ctx = j->n_ctx,
        .count = count_tokens,
        .count_ctx = j,
    };
    int rc = prompt_render(j->pr, &in, &j->prompt, e);
    if (rc < 0)
        return rc;
    if (log_enabled(LOG_DEBUG) && !j->raw) {
        char *kv = xasprintf("prompt=%zu bytes", j->prompt.len);
        log_kv(LOG_DEBUG, kv, "%s request: %s", j->chat ? "chat" : "generate",
               buf_cstr(&j->prompt));
        free(kv);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Handler

// Images anywhere in the request (generate images or chat message images).
static bool has_images(const json_t *body, bool chat)
{
    if (!chat)
        return json_array_size(json_object_get(body, "images")) > 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(body, "messages"), i, m)
    {
        if (json_array_size(json_object_get(m, "images")) > 0)
            return true;
    }
    return false;
}

static void reply_load_unload(struct gen_job *j, struct srv_req *r, const char *reason)
{
    json_t *o = base_object(j);
    if (j->chat) {
        json_t *msg = json_pack("{s:s,s:s}", "role", "assistant", "content", "");
        jsonx_set(o, "message", msg);
    } else {
        jsonx_set_str(o, "response", "");
    }
    jsonx_set_bool(o, "done", true);
    jsonx_set_str(o, "done_reason", reason);
    srv_reply_json(r, 200, o);
}

static struct sched_request sched_req_for(struct gen_job *j, struct srv_req *r, json_t *details)
{
    return (struct sched_request){
        .model_path = j->m->model_path,
        .draft_path = j->m->draft_path,
        .adapter_paths = j->m->adapter_paths,
        .n_adapters = j->m->n_adapters,
        .projector_path = j->m->n_projectors ? j->m->projector_paths[0] : NULL,
        .name = j->m->display,
        .digest = j->m->info.digest,
        .details = details,
        .n_ctx = j->n_ctx,
        .n_batch = (int)srv_option_int(j->options, "num_batch", 0),
        .n_threads = (int)srv_option_int(j->options, "num_thread", 0),
        .embedding = !has_capability(j->m, "completion"),
        .keep_alive_set = j->keep_alive_set,
        .keep_alive_ns = j->keep_alive_ns,
        .cancelled = (bool (*)(void *))srv_client_gone,
        .cancel_ctx = r,
    };
}

static json_t *model_details(const struct store_model *m)
{
    json_t *d = json_object();
    jsonx_set_str(d, "parent_model", m->parent_model ? m->parent_model : "");
    jsonx_set_str(d, "format", m->config.model_format ? m->config.model_format : "gguf");
    jsonx_set_str(d, "family", m->config.model_family ? m->config.model_family : "");
    json_t *fams = json_array();
    for (size_t i = 0; i < m->config.n_families; i++)
        jsonx_arr_append(fams, jsonx_str(m->config.model_families[i]));
    jsonx_set(d, "families", m->config.n_families ? fams : (json_decref(fams), json_null()));
    jsonx_set_str(d, "parameter_size", m->config.model_type ? m->config.model_type : "");
    jsonx_set_str(d, "quantization_level", m->config.file_type ? m->config.file_type : "");
    return d;
}

// r->count_prompt_tokens (set by /v1/messages/count_tokens, anthropic.c):
// the rendered prompt's length in the runner's tokens, as the runner counts
// it before generating, and no generation. Releases the runner.
static void reply_prompt_tokens(struct gen_job *j, struct srv_req *r)
{
    struct err e = {0};
    json_t *body = json_object();
    jsonx_set_strn(body, "content", j->prompt.data ? j->prompt.data : "", j->prompt.len);
    jsonx_set_bool(body, "add_special", true);
    json_t *out = NULL;
    int rc =
        runner_http_json(sched_runner_port(j->runner), "/tokenize", body, 30000, NULL, &out, &e);
    json_decref(body);
    sched_release(r->srv->sched, j->runner, rc < 0 && !sched_runner_alive(j->runner));
    j->runner = NULL;
    if (rc < 0) {
        srv_reply_err(r, rc, &e);
        return;
    }
    json_t *o = base_object(j);
    jsonx_set_int(o, "prompt_eval_count", (int64_t)json_array_size(json_object_get(out, "tokens")));
    json_decref(out);
    srv_reply_json(r, 200, o);
}

// _debug_render_only (Ollama's server/routes.go): the prompt the model would
// get, whichever engine rendered it, and the number of images, in the
// response shape of the route; the model does not run.
static void reply_debug_render(struct gen_job *j, struct srv_req *r)
{
    sched_release(r->srv->sched, j->runner, false);
    j->runner = NULL;
    size_t n_images = 0;
    if (j->chat) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(j->body, "messages"), i, m)
        {
            n_images += json_array_size(json_object_get(m, "images"));
        }
    } else {
        n_images = json_array_size(json_object_get(j->body, "images"));
    }
    json_t *o = base_object(j);
    if (j->chat)
        jsonx_set(o, "message", json_pack("{s:s,s:s}", "role", "", "content", ""));
    else
        jsonx_set_str(o, "response", "");
    jsonx_set_bool(o, "done", false);
    json_t *info = json_object();
    jsonx_set_strn(info, "rendered_template", j->prompt.data ? j->prompt.data : "", j->prompt.len);
    if (n_images > 0)
        jsonx_set_int(info, "image_count", (int64_t)n_images);
    jsonx_set(o, "_debug_info", info);
    srv_reply_json(r, 200, o);
}

// handle_completion runs these steps in order. Each returns false once it has replied (an
// error, or the answer to a load or unload), and the handler then frees the job. One
// struct err is carried through all of them, so the first message set still wins.

static struct gen_job *job_new(struct srv_req *r, bool chat)
{
    struct gen_job *j = xcalloc(1, sizeof(*j));
    j->srv = r->srv;
    j->chat = chat;
    j->t_start = time_monotonic_ns();
    j->req = r;
    buf_init(&j->prompt, 0);
    buf_init(&j->acc_content, 0);
    buf_init(&j->acc_thinking, 0);
    j->acc_calls = json_array();
    return j;
}

// Parse: the body, the model name and the type of every field we read.
static bool completion_parse(struct gen_job *j, struct srv_req *r, struct err *e)
{
    j->body = srv_body_json(r);
    if (!j->body)
        return false;
    json_t *b = j->body;

    const char *name = srv_model_field(r, b, j->chat ? 400 : 404);
    if (!name)
        return false;
    j->model_name = xstrdup(name);
    j->stream = !json_is_false(json_object_get(b, "stream"));
    j->raw = json_is_true(json_object_get(b, "raw"));

    const char *s;
    bool bv;
    json_t *arr;
    if (jsonx_get_str(b, "prompt", &s, false, e) < 0 ||
        jsonx_get_str(b, "system", &s, false, e) < 0 ||
        jsonx_get_str(b, "suffix", &s, false, e) < 0 ||
        jsonx_get_str(b, "template", &s, false, e) < 0 ||
        jsonx_get_bool(b, "stream", &bv, false, e) < 0 ||
        jsonx_get_bool(b, "raw", &bv, false, e) < 0 ||
        jsonx_get_arr(b, "messages", &arr, false, e) < 0 ||
        jsonx_get_arr(b, "images", &arr, false, e) < 0 ||
        jsonx_get_arr(b, "tools", &arr, false, e) < 0 ||
        jsonx_get_arr(b, "context", &arr, false, e) < 0) {
        srv_reply_error(r, 400, e->msg);
        return false;
    }
    int64_t top_logprobs = 0;
    if (jsonx_get_int(b, "top_logprobs", &top_logprobs, INT32_MIN, INT32_MAX, false, e) < 0 ||
        top_logprobs < 0 || top_logprobs > 20) {
        srv_reply_error(r, 400, "top_logprobs must be between 0 and 20");
        return false;
    }
    if (jsonx_get_bool(b, "logprobs", &j->logprobs, false, e) < 0 ||
        jsonx_get_bool(b, "_debug_render_only", &j->debug_render_only, false, e) < 0) {
        srv_reply_error(r, 400, e->msg);
        return false;
    }
    j->top_logprobs = j->logprobs ? (int)top_logprobs : 0;
    if (parse_think(b, &j->think, e) < 0 || parse_format(b, &j->format, e) < 0 ||
        srv_keep_alive(b, &j->keep_alive_set, &j->keep_alive_ns, e) < 0) {
        srv_reply_error(r, 400, e->msg);
        return false;
    }
    return true;
}

// Validate: the model exists, is a GGUF, and raw mode asks for nothing it ignores.
static bool completion_load_model(struct gen_job *j, struct srv_req *r, struct err *e)
{
    int rc = store_model_load(r->srv->store, j->model_name, &j->m, e);
    if (rc < 0) {
        if (rc == ERR_NOT_FOUND) {
            char msg[700];
            snprintf(msg, sizeof(msg), "model '%s' not found", j->model_name);
            srv_reply_error(r, 404, msg);
        } else {
            srv_reply_err(r, rc, e);
        }
        return false;
    }
    if (!j->m->model_path || j->m->unsupported_format) {
        srv_reply_error(r, 400, "model format is not supported by ollama-c (GGUF models only)");
        return false;
    }
    json_t *b = j->body;
    if (j->raw && (json_object_get(b, "template") || json_object_get(b, "system") ||
                   json_object_get(b, "context"))) {
        srv_reply_error(r, 400, "raw mode does not support template, system, or context");
        return false;
    }
    return true;
}

// Validate: the model can do what the request asks (completion, insert, tools, vision,
// thinking). A model that can think thinks unless the request says otherwise.
static bool completion_check_capabilities(struct gen_job *j, struct srv_req *r)
{
    const char *name = j->model_name;
    json_t *b = j->body;
    char full[STORE_NAME_MAX];
    store_name_full(&j->m->name, full, sizeof(full));
    char msg[800];
    if (!has_capability(j->m, "completion")) {
        snprintf(msg, sizeof(msg), "\"%s\" does not support %s", name,
                 j->chat ? "chat" : "generate");
        srv_reply_error(r, 400, msg);
        return false;
    }
    const char *suffix = json_string_value(json_object_get(b, "suffix"));
    if (!j->chat && suffix && *suffix && !has_capability(j->m, "insert")) {
        snprintf(msg, sizeof(msg), "%s does not support insert", full);
        srv_reply_error(r, 400, msg);
        return false;
    }
    j->tools = json_object_get(b, "tools");
    if (j->chat && json_array_size(j->tools) && !has_capability(j->m, "tools")) {
        snprintf(msg, sizeof(msg), "%s does not support tools", full);
        srv_reply_error(r, 400, msg);
        return false;
    }
    if (has_images(b, j->chat) && !has_capability(j->m, "vision")) {
        snprintf(msg, sizeof(msg), "\"%s\" does not support vision", name);
        srv_reply_error(r, 400, msg);
        return false;
    }
    bool can_think = has_capability(j->m, "thinking");
    if (j->think.set && j->think.on && !can_think) {
        snprintf(msg, sizeof(msg), "\"%s\" does not support thinking", name);
        srv_reply_error(r, 400, msg);
        return false;
    }
    if (!j->think.set && can_think) {
        j->think.set = true;
        j->think.on = true;
    }
    j->think_on = j->think.on;
    return true;
}

// The model's parameters overlaid with the request's options, and the context they give.
static bool completion_options(struct gen_job *j, struct srv_req *r, struct err *e)
{
    int rc = srv_options_merge(j->m->params, json_object_get(j->body, "options"), &j->options, e);
    if (rc < 0) {
        srv_reply_err(r, rc, e);
        return false;
    }
    j->n_ctx = effective_n_ctx(r->srv, j->options, j->m->model_path);
    j->want_context = !j->chat && !j->raw;
    return true;
}

// The prompt's source in Ollama 0.33's order, the Go template (the request's, the model's
// or the plain default) and the built-in renderer and parser, if the model names them
// (prompt_open). A template that does not parse is a 400, an unknown renderer a 500.
static bool completion_template(struct gen_job *j, struct srv_req *r, struct err *e)
{
    const char *ttext = json_string_value(json_object_get(j->body, "template"));
    struct prompt_model pm;
    store_prompt_model(j->m, &pm);
    int rc = prompt_open(&j->pr, &pm, ttext, &j->think, e);
    if (rc == ERR_INVALID) {
        srv_reply_err(r, ERR_INVALID, e);
        return false;
    }
    if (rc < 0) {
        srv_reply_error(r, 500, e->msg);
        return false;
    }
    return true;
}

// Schedule: a runner for the model. An empty prompt or message list only loads the model,
// or unloads it when keep_alive is 0 (api.md §6.4, §7.4).
static bool completion_schedule(struct gen_job *j, struct srv_req *r, struct err *e)
{
    json_t *b = j->body;
    const char *prompt = json_string_value(json_object_get(b, "prompt"));
    bool empty =
        j->chat ? json_array_size(json_object_get(b, "messages")) == 0 : (!prompt || !*prompt);
    if (empty && j->keep_alive_set && j->keep_alive_ns == 0) {
        sched_expire(r->srv->sched, j->m->model_path);
        reply_load_unload(j, r, "unload");
        return false;
    }

    json_t *details = model_details(j->m);
    struct sched_request sr = sched_req_for(j, r, details);
    int rc = sched_acquire(r->srv->sched, &sr, &j->runner, &j->load_ns, e);
    json_decref(details);
    if (rc < 0) {
        if (rc != ERR_CANCELLED)
            srv_reply_err(r, rc == ERR_NOMEM ? ERR_INTERNAL : rc, e);
        else
            srv_reply_error(r, 499, e->msg);
        return false;
    }
    if (empty) {
        sched_release(r->srv->sched, j->runner, false);
        j->runner = NULL;
        reply_load_unload(j, r, "load");
        return false;
    }
    return true;
}

// Render: the prompt, then the parser that reads the output. A token-count request is
// answered here.
static bool completion_render(struct gen_job *j, struct srv_req *r, struct err *e)
{
    int rc = render_prompt(j, e);
    if (rc < 0) {
        sched_release(r->srv->sched, j->runner, !sched_runner_alive(j->runner));
        j->runner = NULL;
        srv_reply_err(r, rc == ERR_FORMAT ? ERR_INVALID : rc, e);
        return false;
    }
    if (r->count_prompt_tokens) {
        reply_prompt_tokens(j, r);
        return false;
    }
    if (j->debug_render_only) {
        reply_debug_render(j, r);
        return false;
    }
    j->parser = prompt_parser(j->pr, j->think_on, j->tools, buf_cstr(&j->prompt));
    return true;
}

// Run without streaming: one reply holding the whole output.
static void completion_reply_whole(struct gen_job *j, struct srv_req *r)
{
    int rc = run_completion(j);
    if (rc < 0) {
        srv_reply_err(r, rc, &j->run_err);
        return;
    }
    json_t *o = chunk_object(j, j->acc_content.data, j->acc_content.len, j->acc_thinking.data,
                             j->acc_thinking.len, j->acc_calls, true);
    add_final_fields(j, o);
    logprobs_extend(&j->acc_logprobs, j->lp_pending);
    if (json_array_size(j->acc_logprobs))
        jsonx_set(o, "logprobs", json_incref(j->acc_logprobs));
    srv_reply_json(r, 200, o);
}

// /api/generate and /api/chat: parse -> validate -> schedule -> render -> run or stream.
static void handle_completion(struct srv_req *r, bool chat)
{
    struct gen_job *j = job_new(r, chat);
    struct err e = {0};
    if (!completion_parse(j, r, &e) || !completion_load_model(j, r, &e) ||
        !completion_check_capabilities(j, r) || !completion_options(j, r, &e) ||
        !completion_template(j, r, &e) || !completion_schedule(j, r, &e) ||
        !completion_render(j, r, &e))
        goto out;

    if (j->stream) {
        // From here the producer thread owns the job.
        if (srv_stream_start(r, 200, "application/x-ndjson", gen_producer, j) == 0)
            return;
        sched_release(r->srv->sched, j->runner, false);
        j->runner = NULL;
        goto out;
    }
    completion_reply_whole(j, r);
out:
    job_free(j);
}

static void handle_generate(struct srv_req *r)
{
    handle_completion(r, false);
}

static void handle_chat(struct srv_req *r)
{
    handle_completion(r, true);
}

// ---------------------------------------------------------------------------
// Embeddings (api.md §10, §11)

// L2-normalises v in place (a zero vector stays zero).
static void l2_normalise(float *v, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i] * v[i];
    if (sum <= 0)
        return;
    double inv = 1.0 / sqrt(sum);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(v[i] * inv);
}

// One /api/embed or /api/embeddings request, carried through handle_embed_common's steps.
struct embed_job {
    bool legacy;       // /api/embeddings: one "prompt", vectors not normalised
    int64_t t0;        // when the request arrived
    const char *name;  // the model, as sent (borrowed from the body)
    json_t *inputs;    // array of strings (owned)
    bool truncate;
    int64_t dims;  // 0: the model's full width
    bool ka_set;
    int64_t ka_ns;
    struct store_model *m;
    json_t *options;  // merged (owned)
    json_t *details;  // model_details (owned)
    struct sched_runner *runner;
    int64_t load_ns;
    int64_t n_tokens;  // prompt tokens over every input
};

// The texts to embed: /api/embed "input" (a string or an array of strings), or the legacy
// "prompt". An empty string embeds nothing.
static bool embed_parse_inputs(struct embed_job *ej, struct srv_req *r, json_t *b, struct err *e)
{
    if (ej->legacy) {
        const char *p = NULL;
        if (jsonx_get_str(b, "prompt", &p, false, e) < 0) {
            srv_reply_error(r, 400, e->msg);
            return false;
        }
        if (p && *p)
            jsonx_arr_append(ej->inputs, jsonx_str(p));
        return true;
    }
    json_t *in = json_object_get(b, "input");
    if (json_is_string(in)) {
        if (*json_string_value(in))
            jsonx_arr_append(ej->inputs, json_incref(in));
    } else if (json_is_array(in)) {
        size_t i;
        json_t *it;
        json_array_foreach(in, i, it)
        {
            if (!json_is_string(it)) {
                srv_reply_error(r, 400, "invalid input type");
                return false;
            }
            jsonx_arr_append(ej->inputs, json_incref(it));
        }
    } else if (in && !json_is_null(in)) {
        srv_reply_error(r, 400, "invalid input type");
        return false;
    }
    return true;
}

// Parse: model name, inputs, truncate, dimensions and keep_alive. False once replied.
static bool embed_parse(struct embed_job *ej, struct srv_req *r, json_t *b, struct err *e)
{
    ej->name = srv_model_field(r, b, ej->legacy ? 400 : 404);
    if (!ej->name)
        return false;
    ej->inputs = json_array();
    if (!embed_parse_inputs(ej, r, b, e))
        return false;
    ej->truncate = true;
    if (jsonx_get_bool(b, "truncate", &ej->truncate, false, e) < 0 ||
        jsonx_get_int(b, "dimensions", &ej->dims, 0, INT32_MAX, false, e) < 0 ||
        srv_keep_alive(b, &ej->ka_set, &ej->ka_ns, e) < 0) {
        srv_reply_error(r, 400, e->msg);
        return false;
    }
    return true;
}

// Validate and schedule: load the model, merge its options and acquire a runner.
static bool embed_schedule(struct embed_job *ej, struct srv_req *r, json_t *b, struct err *e)
{
    int rc = store_model_load(r->srv->store, ej->name, &ej->m, e);
    if (rc < 0) {
        char msg[700];
        if (rc == ERR_NOT_FOUND && ej->legacy)
            snprintf(msg, sizeof(msg), "model \"%s\" not found, try pulling it first", ej->name);
        else if (rc == ERR_NOT_FOUND)
            snprintf(msg, sizeof(msg), "model '%s' not found", ej->name);
        if (rc == ERR_NOT_FOUND)
            srv_reply_error(r, 404, msg);
        else
            srv_reply_err(r, rc, e);
        return false;
    }
    struct store_model *m = ej->m;
    if (!m->model_path) {
        srv_reply_error(r, 400, "model format is not supported by ollama-c (GGUF models only)");
        return false;
    }
    rc = srv_options_merge(m->params, json_object_get(b, "options"), &ej->options, e);
    if (rc < 0) {
        srv_reply_err(r, rc, e);
        return false;
    }
    ej->details = model_details(m);
    bool completion = has_capability(m, "completion");
    struct sched_request sr = {
        .model_path = m->model_path,
        .adapter_paths = m->adapter_paths,
        .n_adapters = m->n_adapters,
        .name = m->display,
        .digest = m->info.digest,
        .details = ej->details,
        .n_ctx = effective_n_ctx(r->srv, ej->options, m->model_path),
        .n_batch = (int)srv_option_int(ej->options, "num_batch", 0),
        .n_threads = (int)srv_option_int(ej->options, "num_thread", 0),
        .embedding = !completion,
        .keep_alive_set = ej->ka_set,
        .keep_alive_ns = ej->ka_ns,
        .cancelled = (bool (*)(void *))srv_client_gone,
        .cancel_ctx = r,
    };
    rc = sched_acquire(r->srv->sched, &sr, &ej->runner, &ej->load_ns, e);
    if (rc < 0) {
        srv_reply_err(r, rc == ERR_NOMEM ? ERR_INTERNAL : rc, e);
        return false;
    }
    return true;
}

// One input through the runner's /embedding: *row_out gets the vector as a JSON array.
// /api/embed normalises it, and again after cutting it to the requested dimensions.
static int embed_one(struct embed_job *ej, json_t *in, json_t **row_out, struct err *e)
{
    json_t *req = json_pack("{s:O,s:b}", "content", in, "truncate", ej->truncate);
    json_t *out = NULL;
    long status = 0;
    int rc = runner_http_json(sched_runner_port(ej->runner), "/embedding", req, 600000, &status,
                              &out, e);
    json_decref(req);
    if (rc < 0)
        return rc;
    json_t *vec = json_object_get(out, "embedding");
    ej->n_tokens += json_integer_value(json_object_get(out, "prompt_eval_count"));
    size_t n = json_array_size(vec);
    float *v = xmalloc((n ? n : 1) * sizeof(float));
    bool finite = true;
    for (size_t k = 0; k < n; k++) {
        v[k] = (float)json_number_value(json_array_get(vec, k));
        finite &= isfinite(v[k]);
    }
    json_decref(out);
    if (!finite) {
        free(v);
        return err_set(e, ERR_INVALID, "embedding contains NaN or Inf values");
    }
    if (!ej->legacy) {
        l2_normalise(v, n);
        if (ej->dims > 0 && (size_t)ej->dims < n) {
            n = (size_t)ej->dims;
            l2_normalise(v, n);
        }
    }
    json_t *row = json_array();
    for (size_t k = 0; k < n; k++)
        jsonx_arr_append(row, ej->legacy ? json_real(v[k]) : jsonx_real_f32(v[k]));
    free(v);
    *row_out = row;
    return rc;
}

// Run: embed each input in turn, stopping at the first failure, then give the runner back
// (dropping it if it died). Returns the rows, or NULL once the error is replied.
static json_t *embed_run(struct embed_job *ej, struct srv_req *r, struct err *e)
{
    json_t *vectors = json_array();
    bool failed = false;
    int rc = 0;
    size_t i;
    json_t *in;
    json_array_foreach(ej->inputs, i, in)
    {
        json_t *row = NULL;
        rc = embed_one(ej, in, &row, e);
        if (rc < 0) {
            failed = rc == ERR_NETWORK;
            break;
        }
        jsonx_arr_append(vectors, row);
    }
    sched_release(r->srv->sched, ej->runner, failed || !sched_runner_alive(ej->runner));
    if (rc < 0) {
        json_decref(vectors);
        if (failed)
            srv_reply_error(r, 500, RUNNER_STOPPED_MSG);
        else
            srv_reply_err(r, rc == ERR_INTERNAL && !ej->legacy ? ERR_INVALID : rc, e);
        return NULL;
    }
    return vectors;
}

// The reply: /api/embeddings holds the first vector only; /api/embed all of them, with
// timings once anything was embedded.
static void embed_reply(struct embed_job *ej, struct srv_req *r, json_t *vectors)
{
    json_t *o = json_object();
    if (ej->legacy) {
        jsonx_set(o, "embedding",
                  json_array_size(vectors) ? json_incref(json_array_get(vectors, 0))
                                           : json_array());
        json_decref(vectors);
    } else {
        jsonx_set_str(o, "model", ej->name);
        jsonx_set(o, "embeddings", vectors);
        if (json_array_size(ej->inputs)) {
            set_metric(o, "total_duration", time_monotonic_ns() - ej->t0);
            set_metric(o, "load_duration", ej->load_ns);
            set_metric(o, "prompt_eval_count", ej->n_tokens);
        }
    }
    srv_reply_json(r, 200, o);
}

// /api/embed and the legacy /api/embeddings: parse -> validate and schedule -> run -> reply.
static void handle_embed_common(struct srv_req *r, bool legacy)
{
    struct embed_job ej = {.legacy = legacy, .t0 = time_monotonic_ns()};
    struct err e = {0};
    json_t *b = srv_body_json(r);
    if (!b)
        return;
    if (embed_parse(&ej, r, b, &e) && embed_schedule(&ej, r, b, &e)) {
        json_t *vectors = embed_run(&ej, r, &e);
        if (vectors)
            embed_reply(&ej, r, vectors);
    }
    json_decref(ej.inputs);
    json_decref(ej.options);
    json_decref(ej.details);
    store_model_free(ej.m);
    json_decref(b);
}

static void handle_embed(struct srv_req *r)
{
    handle_embed_common(r, false);
}

static void handle_embeddings(struct srv_req *r)
{
    handle_embed_common(r, true);
}

static void handle_ps(struct srv_req *r)
{
    srv_reply_json(r, 200, sched_ps_json(r->srv->sched));
}

const struct srv_route server_generate_routes[] = {
    {"POST", "/api/generate", handle_generate, NULL},
    {"POST", "/api/chat", handle_chat, NULL},
    {"POST", "/api/embed", handle_embed, NULL},
    {"POST", "/api/embeddings", handle_embeddings, NULL},
    {"GET", "/api/ps", handle_ps, NULL},
    {NULL, NULL, NULL, NULL},
};

// Prompt building (templates.md §5–8): assembling the conversation, image
// tags, collation, the three render modes (suffix, messages, legacy
// turn-by-turn) and one candidate of truncation (the messages from a start;
// the loop that picks it is the prompt module's).
#include "template/template.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

static const char *mstr(json_t *m, const char *key)
{
    const char *s = json_string_value(json_object_get(m, key));
    return s ? s : "";
}

static void set_think(json_t *root, const struct template_think *th)
{
    json_object_set_new(root, "Think", json_boolean(th->think));
    const char *level = th->level && *th->level ? th->level : (th->think ? "medium" : "");
    json_object_set_new(root, "ThinkLevel", json_string(level));
    json_object_set_new(root, "IsThinkSet", json_boolean(th->think_set));
}

// §7.3: a copy of msgs[start..] with [img-N] tags (numbered from 0 at
// msgs[start]); images collected in order.
static json_t *tag_images(json_t *msgs, size_t start, json_t *images_out)
{
    json_t *out = json_array();
    size_t n_img = 0;
    for (size_t i = start; i < json_array_size(msgs); i++) {
        json_t *m = json_copy(json_array_get(msgs, i));
        json_t *imgs = json_object_get(m, "images");
        if (json_is_array(imgs) && json_array_size(imgs) > 0) {
            struct buf c, prefix;
            buf_init(&c, 0);
            buf_init(&prefix, 0);
            buf_append_str(&c, mstr(m, "content"));
            for (size_t k = 0; k < json_array_size(imgs); k++) {
                char tag[32];
                snprintf(tag, sizeof(tag), "[img-%zu]", n_img++);
                if (images_out)
                    json_array_append(images_out, json_array_get(imgs, k));
                const char *p = strstr(buf_cstr(&c), "[img]");
                if (!p) {
                    buf_append_str(&prefix, tag);
                    continue;
                }
                struct buf nb;
                buf_init(&nb, 0);
                size_t off = (size_t)(p - buf_cstr(&c));
                buf_append(&nb, buf_cstr(&c), off);
                buf_append_str(&nb, tag);
                buf_append_str(&nb, buf_cstr(&c) + off + 5);
                buf_deinit(&c);
                c = nb;
            }
            buf_append_str(&prefix, buf_cstr(&c));
            json_object_set_new(m, "content", json_string(buf_cstr(&prefix)));
            buf_deinit(&c);
            buf_deinit(&prefix);
        }
        json_array_append_new(out, m);
    }
    return out;
}

// §7.2: merge consecutive same-role messages (not tool); System = all system
// contents joined with "\n\n".
static json_t *collate(json_t *msgs, char **system_out)
{
    json_t *out = json_array();
    struct buf sys;
    buf_init(&sys, 0);
    bool any_sys = false;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = mstr(m, "role");
        if (!strcmp(role, "system")) {
            if (any_sys)
                buf_append_str(&sys, "\n\n");
            buf_append_str(&sys, mstr(m, "content"));
            any_sys = true;
        }
        size_t n = json_array_size(out);
        json_t *last = n ? json_array_get(out, n - 1) : NULL;
        if (last && !strcmp(mstr(last, "role"), role) && strcmp(role, "tool")) {
            char *c = xasprintf("%s\n\n%s", mstr(last, "content"), mstr(m, "content"));
            json_object_set_new(last, "content", json_string(c));
            free(c);
        } else {
            json_array_append_new(out, json_copy(m));
        }
    }
    *system_out = buf_take(&sys);
    if (!*system_out)
        *system_out = xstrdup("");
    return out;
}

static int exec_legacy(const struct template *t, json_t *msgs, const struct template_think *th,
                       struct buf *out, struct err *e)
{
    const char *sys = "", *prompt = "", *resp = "";
    int rc = 0;
    json_t *root = json_object();
    set_think(root, th);
#define EMIT(node)                                                                                 \
    do {                                                                                           \
        json_object_set_new(root, "System", json_string(sys));                                     \
        json_object_set_new(root, "Prompt", json_string(prompt));                                  \
        json_object_set_new(root, "Response", json_string(resp));                                  \
        rc = tmpl_exec_node(t, (node), root, out, e);                                              \
        sys = prompt = resp = "";                                                                  \
    } while (0)
    for (size_t i = 0; i < json_array_size(msgs) && !rc; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = mstr(m, "role");
        if (!strcmp(role, "system")) {
            if (*prompt || *resp)
                EMIT(t->root);
            sys = mstr(m, "content");
        } else if (!strcmp(role, "user")) {
            if (*resp)
                EMIT(t->root);
            prompt = mstr(m, "content");
        } else if (!strcmp(role, "assistant")) {
            resp = mstr(m, "content");
        }
    }
    if (!rc)
        EMIT(t->cut_root);
#undef EMIT
    json_decref(root);
    return rc;
}

// Renders the system messages before start followed by msgs[start..].
// images != NULL: the final rendering, with [img-N] tags numbered from
// msgs[start] (the truncation probes render untagged text, as upstream).
static int render(const struct template *t, const struct template_prompt_req *req, json_t *msgs,
                  size_t start, struct buf *out, json_t *images, struct err *e)
{
    json_t *sel = json_array();
    for (size_t i = 0; i < start; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!strcmp(mstr(m, "role"), "system"))
            json_array_append(sel, m);
    }
    if (images) {
        json_t *tagged = tag_images(msgs, start, images);
        json_array_extend(sel, tagged);
        json_decref(tagged);
    } else {
        for (size_t i = start; i < json_array_size(msgs); i++)
            json_array_append(sel, json_array_get(msgs, i));
    }
    char *system;
    json_t *col = collate(sel, &system);
    json_decref(sel);
    int rc;
    if (template_has_ident(t, "messages")) {
        json_t *root = json_object();
        json_object_set_new(root, "System", json_string(system));
        json_object_set(root, "Messages", col);
        json_object_set(root, "Tools",
                        json_is_array(req->tools) && json_array_size(req->tools) ? req->tools
                                                                                 : json_null());
        json_object_set_new(root, "Response", json_string(""));
        set_think(root, &req->think);
        rc = template_execute(t, root, out, e);
        json_decref(root);
    } else {
        rc = exec_legacy(t, col, &req->think, out, e);
    }
    free(system);
    json_decref(col);
    return rc;
}

int template_render_prompt(const struct template *t, const struct template_prompt_req *req,
                           struct buf *out, struct template_prompt_info *info, struct err *e)
{
    if (info)
        *info = (struct template_prompt_info){0};
    // suffix mode
    if (req->prompt && *req->prompt && req->suffix && *req->suffix) {
        json_t *root = json_object();
        json_object_set_new(root, "Prompt", json_string(req->prompt));
        json_object_set_new(root, "Suffix", json_string(req->suffix));
        json_object_set_new(root, "Response", json_string(""));
        set_think(root, &req->think);
        int rc = template_execute(t, root, out, e);
        json_decref(root);
        if (info)
            info->images = json_array();
        return rc;
    }
    json_t *msgs = json_is_array(req->messages) ? req->messages : NULL;
    json_t *empty = NULL;
    if (!msgs)
        msgs = empty = json_array();
    for (size_t i = 0; i < json_array_size(msgs); i++)
        if (!json_is_object(json_array_get(msgs, i))) {
            json_decref(empty);
            return err_set(e, ERR_INVALID, "message %zu is not an object", i);
        }
    size_t start = req->start < json_array_size(msgs) ? req->start : 0;
    json_t *images = req->probe ? NULL : json_array();
    int rc = render(t, req, msgs, start, out, images, e);
    if (info && !rc) {
        info->images = images;
        size_t dropped = 0;
        for (size_t i = 0; i < start; i++)
            if (strcmp(mstr(json_array_get(msgs, i), "role"), "system"))
                dropped++;
        info->n_dropped = dropped;
    } else {
        json_decref(images);
    }
    json_decref(empty);
    return rc;
}

void template_prompt_info_deinit(struct template_prompt_info *info)
{
    if (!info)
        return;
    json_decref(info->images);
    info->images = NULL;
}

// ---------------------------------------------------------------------------
// §7.1 assembly

static json_t *norm_message(json_t *m, struct err *e, size_t idx)
{
    if (!json_is_object(m)) {
        err_set(e, ERR_INVALID, "message %zu is not an object", idx);
        return NULL;
    }
    json_t *role = json_object_get(m, "role");
    if (role && !json_is_string(role)) {
        err_set(e, ERR_INVALID, "message %zu: role must be a string", idx);
        return NULL;
    }
    json_t *c = json_object_get(m, "content");
    if (c && !json_is_string(c) && !json_is_null(c)) {
        err_set(e, ERR_INVALID, "message %zu: content must be a string", idx);
        return NULL;
    }
    json_t *out = json_copy(m);
    char *r = xstrdup(role ? json_string_value(role) : "");
    for (char *p = r; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_object_set_new(out, "role", json_string(r));
    free(r);
    if (!c || json_is_null(c))
        json_object_set_new(out, "content", json_string(""));
    return out;
}

json_t *template_chat_messages(json_t *history, json_t *request_msgs, const char *model_system,
                               bool strip_thinking, struct err *e)
{
    json_t *out = json_array();
    json_t *first = json_array_get(request_msgs, 0);
    bool req_sys = first && json_is_object(first) &&
                   json_is_string(json_object_get(first, "role")) &&
                   ascii_ieq(json_string_value(json_object_get(first, "role")), "system");
    if (!req_sys && model_system && *model_system) {
        json_t *s = json_object();
        json_object_set_new(s, "role", json_string("system"));
        json_object_set_new(s, "content", json_string(model_system));
        json_array_append_new(out, s);
    }
    json_t *lists[2] = {history, request_msgs};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < json_array_size(lists[l]); i++) {
            json_t *m = norm_message(json_array_get(lists[l], i), e, i);
            if (!m) {
                json_decref(out);
                return NULL;
            }
            json_array_append_new(out, m);
        }
    if (strip_thinking) {
        size_t last_user = 0;
        bool found = false;
        for (size_t i = 0; i < json_array_size(out); i++)
            if (!strcmp(mstr(json_array_get(out, i), "role"), "user"))
                last_user = i, found = true;
        for (size_t i = 0; found && i < last_user; i++) {
            json_t *m = json_array_get(out, i);
            if (strcmp(mstr(m, "role"), "assistant"))
                continue;
            char *c = template_strip_thinking(mstr(m, "content"), "<think>", "</think>");
            json_object_set_new(m, "content", json_string(c));
            free(c);
        }
    }
    return out;
}

json_t *template_generate_messages(const char *system, json_t *history, const char *prompt,
                                   json_t *images)
{
    json_t *out = json_array();
    if (system && *system) {
        json_t *s = json_object();
        json_object_set_new(s, "role", json_string("system"));
        json_object_set_new(s, "content", json_string(system));
        json_array_append_new(out, s);
    }
    for (size_t i = 0; i < json_array_size(history); i++)
        if (json_is_object(json_array_get(history, i)))
            json_array_append_new(out, json_copy(json_array_get(history, i)));
    json_t *u = json_object();
    json_object_set_new(u, "role", json_string("user"));
    json_object_set_new(u, "content", json_string(prompt ? prompt : ""));
    if (json_is_array(images) && json_array_size(images))
        json_object_set(u, "images", images);
    json_array_append_new(out, u);
    return out;
}

// The route tables of `ollama serve` (api.md, openai.md). A new endpoint is
// a handler in its area's file plus a row in that file's table; a new area
// adds its table to server_route_tables.
#include "server/internal.h"

static void handle_root(struct srv_req *r)
{
    srv_reply_text(r, 200, "Ollama is running");
}

static void handle_version(struct srv_req *r)
{
    srv_reply_json(r, 200, json_pack("{s:s}", "version", OLLAMA_VERSION));
}

// GET /api/status: what Ollama answers when its cloud features are off. This
// build has none (no ollama.com sign-in, web search, or remote models), so
// "disabled" is always true; "source" says why ("build", where Ollama would
// say "env" or "config").
static void handle_status(struct srv_req *r)
{
    srv_reply_json(r, 200, json_pack("{s:{s:b,s:s}}", "cloud", "disabled", 1, "source", "build"));
}

// Cloud-only routes (/api/me, /api/signout, /api/experimental/*): Ollama's
// answer with cloud disabled (403, "ollama cloud is disabled: ..."), never a
// bare 404 a client cannot explain.
static void handle_cloud_only(struct srv_req *r)
{
    srv_reply_error(r, 403, SERVER_NO_CLOUD_MSG);
}

const struct srv_route server_core_routes[] = {
    {"GET", "/", handle_root, NULL},
    {"GET", "/api/version", handle_version, NULL},
    {"GET", "/api/status", handle_status, NULL},
    {"POST", "/api/me", handle_cloud_only, NULL},
    {"POST", "/api/signout", handle_cloud_only, NULL},
    {"DELETE", "/api/user/keys/*", handle_cloud_only, NULL},
    {"GET", "/api/experimental/*", handle_cloud_only, NULL},
    {"POST", "/api/experimental/*", handle_cloud_only, NULL},
    {NULL, NULL, NULL, NULL},
};

const struct srv_route *const server_route_tables[] = {
    server_core_routes,      server_model_routes,    server_generate_routes,
    server_openai_routes,    server_registry_routes, server_anthropic_routes,
    server_responses_routes, server_metrics_routes,  NULL,
};

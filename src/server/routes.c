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

const struct srv_route server_core_routes[] = {
    {"GET", "/", handle_root, NULL},
    {"GET", "/api/version", handle_version, NULL},
    {NULL, NULL, NULL, NULL},
};

const struct srv_route *const server_route_tables[] = {
    server_core_routes,   server_model_routes,    server_generate_routes,
    server_openai_routes, server_registry_routes, NULL,
};

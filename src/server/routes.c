// The route table of `ollama serve` (api.md, openai.md): one row per
// endpoint. A new endpoint is a handler in its own file plus a row here.
#include "server/internal.h"

static void handle_root(struct srv_req *r)
{
    srv_reply_text(r, 200, "Ollama is running");
}

static void handle_version(struct srv_req *r)
{
    srv_reply_json(r, 200, json_pack("{s:s}", "version", OLLAMA_VERSION));
}

const struct srv_route server_routes[] = {
    {"GET", "/", handle_root, NULL},
    {"GET", "/api/version", handle_version, NULL},
    {NULL, NULL, NULL, NULL},
};

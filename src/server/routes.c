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

// GET /api/experimental/model-recommendations: Ollama 0.33's built-in list
// (server/model_recommendations.go), which it serves until a refresh from
// ollama.com replaces it; this build never refreshes. Zero fields are left
// out, as Go's omitempty does.
static const struct {
    const char *model, *description;
    int64_t context_length, max_output_tokens, vram_bytes;
} recommendations[] = {
    {"kimi-k2.6:cloud",
     "State-of-the-art coding, long-horizon execution, and multimodal agent swarm capability",
     262144, 262144, 0},
    {"glm-5.1:cloud", "Reasoning and code generation", 202752, 131072, 0},
    {"qwen3.5:cloud", "Reasoning, coding, and agentic tool use with vision", 262144, 32768, 0},
    {"minimax-m2.7:cloud", "Fast, efficient coding and real-world productivity", 204800, 128000, 0},
    {"gemma4", "Reasoning and code generation locally", 0, 0, 12000000000},
    {"qwen3.5", "Reasoning, coding, and visual understanding locally", 0, 0, 14000000000},
};

static void handle_model_recommendations(struct srv_req *r)
{
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof recommendations / sizeof recommendations[0]; i++) {
        json_t *o = json_object();
        jsonx_set_str(o, "model", recommendations[i].model);
        jsonx_set_str(o, "description", recommendations[i].description);
        if (recommendations[i].context_length)
            jsonx_set_int(o, "context_length", recommendations[i].context_length);
        if (recommendations[i].max_output_tokens)
            jsonx_set_int(o, "max_output_tokens", recommendations[i].max_output_tokens);
        if (recommendations[i].vram_bytes)
            jsonx_set_int(o, "vram_bytes", recommendations[i].vram_bytes);
        json_array_append_new(list, o);
    }
    srv_reply_json(r, 200, json_pack("{s:o}", "recommendations", list));
}

const struct srv_route server_core_routes[] = {
    {"GET", "/", handle_root, NULL},
    {"GET", "/api/version", handle_version, NULL},
    {"GET", "/api/status", handle_status, NULL},
    {"POST", "/api/me", handle_cloud_only, NULL},
    {"POST", "/api/signout", handle_cloud_only, NULL},
    {"DELETE", "/api/user/keys/*", handle_cloud_only, NULL},
    {"GET", "/api/experimental/model-recommendations", handle_model_recommendations, NULL},
    {"GET", "/api/experimental/*", handle_cloud_only, NULL},
    {"POST", "/api/experimental/*", handle_cloud_only, NULL},
    {NULL, NULL, NULL, NULL},
};

const struct srv_route *const server_route_tables[] = {
    server_core_routes,      server_model_routes,    server_generate_routes,
    server_openai_routes,    server_registry_routes, server_anthropic_routes,
    server_responses_routes, server_metrics_routes,  NULL,
};

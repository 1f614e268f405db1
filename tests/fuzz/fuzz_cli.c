// Fuzz target for what the CLI renders from server answers: any bytes as an
// /api/show or final-response object (show report, stats block), and as
// streamed text through the word wrapper (UTF-8 decoding, wide characters)
// and the agent chat's markdown renderer.
#include <stddef.h>
#include <stdint.h>

#include "cli/agent.h"
#include "cli/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf out;
    buf_init(&out, 0);
    json_t *v = NULL;
    if (jsonx_parse((const char *)data, size, &v, NULL) == 0) {
        cli_show_report(v, true, &out);
        cli_stats_render(v, &out);
        json_decref(v);
    }
    buf_reset(&out);
    int width = size ? 10 + data[0] % 100 : 80;
    struct cli_wrap w;
    cli_wrap_init(&w, true, width);
    // Feed in two chunks so the state carries across a split.
    size_t half = size / 2;
    cli_wrap_feed(&w, (const char *)data, half, &out);
    cli_wrap_feed(&w, (const char *)data + half, size - half, &out);
    cli_wrap_deinit(&w);
    // The agent chat's streaming markdown, split the same way.
    buf_reset(&out);
    static const struct agent_md_styles st = {"<b>", "<c>", "<d>", "</>"};
    struct agent_md md;
    agent_md_init(&md, &out, &st);
    agent_md_feed(&md, (const char *)data, half);
    agent_md_feed(&md, (const char *)data + half, size - half);
    agent_md_finish(&md);
    buf_deinit(&out);
    return 0;
}

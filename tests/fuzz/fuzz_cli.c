// Fuzz target for what the CLI renders from server answers: any bytes as an
// /api/show or final-response object (show report, stats block), and as
// streamed text through the word wrapper (UTF-8 decoding, wide characters)
// and the agent chat's markdown renderer; and as a YAML file `ollama launch`
// edits: what reads must write back as YAML that reads the same.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cli/agent.h"
#include "cli/internal.h"
#include "cli/launch.h"

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
    // YAML: parse, write back, parse again: the same tree.
    struct buf in = {0};
    buf_init(&in, 0);
    buf_append(&in, (const char *)data, size);
    if (launch_yaml_parse(&in, &v, NULL) == 0) {
        buf_reset(&out);
        launch_yaml_dump(v, &out);
        json_t *back = NULL;
        if (launch_yaml_parse(&out, &back, NULL) != 0 || !json_equal(v, back))
            abort();
        json_decref(back);
        json_decref(v);
    }
    buf_deinit(&in);
    buf_deinit(&out);
    return 0;
}

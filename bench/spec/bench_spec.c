// bench_spec: speculative decoding in the real `ollama runner`.
//
//   bench_spec --target T.gguf [--draft D.gguf] [--bin PATH/ollama] [--threads N]
//              [--tokens N] [--draft-n N] [--ngram N] [--ctx N]
//
// One greedy completion per configuration (single stream, no prompt cache);
// every figure comes from the runner's own final line (eval_count,
// eval_duration, draft_count, draft_accepted_count):
//   plain      draft_num_predict 0
//   draft      the --draft model, draft_num_predict N (if --draft)
//   never      a copy of the draft whose greedy choice is the target's least
//              likely token (output_norm negated): every draft is rejected,
//              so (its time - plain time) / tokens drafted is the cost of
//              one rejected drafted token (the runner drafts less and less
//              for it: this run also shows what such a draft costs overall)
//   lookup     prompt lookup (draft_ngram) on a repetitive prompt, against
//              plain on the same prompt
// Effective tokens/s = eval_count / eval_duration (and the runner's CPU time
// per generated token from /proc, steadier on a shared machine; it includes
// the prompt's evaluation, so compare it only between runs of one prompt);
// acceptance = accepted /
// drafted; the outputs of every configuration are checked equal to plain.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/runner/runner_harness.h"

struct run {
    char *text;
    int64_t n, ns, drafted, accepted;
    double cpu_s;  // the runner's CPU time for the whole request
};

static const char *story_prompt = "Once upon a time, in a small village by the sea,";

// A repetitive prompt: a list whose continuation copies earlier lines.
static char *repetitive_prompt(void)
{
    struct buf b;
    buf_init(&b, 0);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 6; i++)
            buf_printf(&b, "item %d: the red box is on the shelf. ", i);
    buf_append_str(&b, "item 0:");
    char *s = xstrdup(buf_cstr(&b));
    buf_deinit(&b);
    return s;
}

static int complete(const struct rharness *h, const char *prompt, const char *opts, int n_tokens,
                    struct run *out)
{
    char *body =
        xasprintf("{\"prompt\":\"%s\",\"cache_prompt\":false,\"options\":{\"temperature\":0,"
                  "\"num_predict\":%d%s%s}}",
                  prompt, n_tokens, *opts ? "," : "", opts);
    char *resp = NULL;
    double cpu0 = proc_cpu_seconds(h->pid);
    long st = rh_request(h, "/completion", body, &resp, 0, 3600);
    out->cpu_s = proc_cpu_seconds(h->pid) - cpu0;
    struct rh_stream s;
    rh_stream_parse(resp, &s);
    free(body);
    free(resp);
    if (st != 200 || !s.final || rh_final_int(&s, "eval_count") < 0) {
        fprintf(stderr, "bench_spec: completion failed (status %ld)\n", st);
        rh_stream_free(&s);
        return -1;
    }
    out->text = xstrdup(s.text);
    out->n = rh_final_int(&s, "eval_count");
    out->ns = rh_final_int(&s, "eval_duration");
    out->drafted = rh_final_int(&s, "draft_count");
    out->accepted = rh_final_int(&s, "draft_accepted_count");
    if (out->drafted < 0)
        out->drafted = out->accepted = 0;
    rh_stream_free(&s);
    return 0;
}

static double tps(const struct run *r)
{
    return r->ns > 0 ? (double)r->n / ((double)r->ns / 1e9) : 0;
}

static double ms_per_token(const struct run *r)
{
    return r->n > 0 ? (double)r->ns / 1e6 / (double)r->n : 0;
}

static double cpu_ms_per_token(const struct run *r)
{
    return r->n > 0 ? r->cpu_s * 1e3 / (double)r->n : 0;
}

static void report(const char *name, const struct run *r, const struct run *base)
{
    printf("%-8s %6lld tok  %8.2f tok/s  %7.1f ms/tok  x%.2f  cpu %7.1f ms/tok  x%.2f", name,
           (long long)r->n, tps(r), ms_per_token(r),
           base && tps(base) > 0 ? tps(r) / tps(base) : 1.0, cpu_ms_per_token(r),
           base && cpu_ms_per_token(r) > 0 ? cpu_ms_per_token(base) / cpu_ms_per_token(r) : 1.0);
    if (r->drafted > 0)
        printf("  drafted %lld  accepted %lld (%.1f%%)", (long long)r->drafted,
               (long long)r->accepted, 100.0 * (double)r->accepted / (double)r->drafted);
    printf("%s\n", base && strcmp(r->text, base->text) != 0 ? "  OUTPUT DIFFERS" : "");
}

static int start(struct rharness *h, const char *target, const char *draft, const char *threads,
                 const char *ctx)
{
    const char *args[16] = {"--model", target, "--threads", threads, "--ctx-size", ctx};
    int n = 6;
    if (draft) {
        args[n++] = "--draft";
        args[n++] = draft;
    }
    args[n] = NULL;
    if (rh_spawn(h, args) < 0)
        return -1;
    for (int i = 0; i < 40; i++)  // large models: up to 20 minutes to load
        if (rh_wait_ready(h))
            return 0;
        else if (h->pid == 0)
            break;
    rh_dump_log(h);
    return -1;
}

int main(int argc, char **argv)
{
    const char *target = NULL, *draft = NULL, *threads = "0", *ctx = "1024";
    int n_tokens = 32, draft_n = 4, ngram = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_spec: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--target"))
            target = v;
        else if (!strcmp(a, "--draft"))
            draft = v;
        else if (!strcmp(a, "--bin"))
            setenv("OLLAMA_BIN", v, 1);
        else if (!strcmp(a, "--threads"))
            threads = v;
        else if (!strcmp(a, "--ctx"))
            ctx = v;
        else if (!strcmp(a, "--tokens"))
            n_tokens = atoi(v);
        else if (!strcmp(a, "--draft-n"))
            draft_n = atoi(v);
        else if (!strcmp(a, "--ngram"))
            ngram = atoi(v);
        else {
            fprintf(stderr, "bench_spec: unknown flag %s\n", a);
            return 2;
        }
        i++;
    }
    if (!target) {
        fprintf(stderr, "usage: bench_spec --target T.gguf [--draft D.gguf] [--bin ollama] "
                        "[--threads N] [--tokens N] [--draft-n N] [--ngram N] [--ctx N]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct rharness h;
    if (start(&h, target, draft, threads, ctx) < 0) {
        fprintf(stderr, "bench_spec: the runner did not start\n");
        return 1;
    }
    char opts[128];
    struct run warm, plain, spec = {0}, lplain, lookup, never = {0};
    char *rep = repetitive_prompt();
    // The warm-up touches both models (their first pass faults the weights in).
    snprintf(opts, sizeof(opts), "\"draft_num_predict\":%d", draft_n);
    int rc = complete(&h, "Hello", opts, 4, &warm);
    if (rc == 0)
        free(warm.text);
    rc = rc ? rc : complete(&h, story_prompt, "\"draft_num_predict\":0", n_tokens, &plain);
    if (!rc && draft)
        rc = complete(&h, story_prompt, opts, n_tokens, &spec);
    rc = rc ? rc : complete(&h, rep, "\"draft_num_predict\":0", n_tokens, &lplain);
    snprintf(opts, sizeof(opts), "\"draft_ngram\":%d,\"draft_num_predict\":%d", ngram, draft_n * 2);
    rc = rc ? rc : complete(&h, rep, opts, n_tokens, &lookup);
    rh_stop(&h);
    char never_path[64] = "";
    if (!rc && draft) {
        snprintf(never_path, sizeof(never_path), "/tmp/bench-spec-never-%d.gguf", (int)getpid());
        if (rh_write_negated(draft, never_path) < 0 ||
            start(&h, target, never_path, threads, ctx) < 0) {
            fprintf(stderr, "bench_spec: the never-agreeing draft did not start\n");
            rc = -1;
        } else {
            snprintf(opts, sizeof(opts), "\"draft_num_predict\":%d", draft_n);
            rc = complete(&h, "Hello", opts, 4, &warm);
            if (rc == 0)
                free(warm.text);
            rc = rc ? rc : complete(&h, story_prompt, opts, n_tokens, &never);
            rh_stop(&h);
        }
        unlink(never_path);
    }
    if (rc) {
        free(rep);
        return 1;
    }
    printf(
        "target %s\ndraft  %s\n%d tokens, draft_num_predict %d, lookup n-gram %d (drafts %d)\n\n",
        target, draft ? draft : "-", n_tokens, draft_n, ngram, draft_n * 2);
    report("plain", &plain, NULL);
    if (draft) {
        report("draft", &spec, &plain);
        report("never", &never, &plain);
        double extra = (ms_per_token(&never) - ms_per_token(&plain)) * (double)never.n;
        double cost = never.drafted > 0 ? extra / (double)never.drafted : 0;
        double cpu_cost =
            never.drafted > 0 ? (never.cpu_s - plain.cpu_s) * 1e3 / (double)never.drafted : 0;
        printf("rejected draft: %.2f ms (cpu %.2f ms) per drafted token (%.0f%% of a plain "
               "step); never-agreeing draft: %.1f%% slower overall (cpu %.1f%%)\n",
               cost, cpu_cost, 100.0 * cost / ms_per_token(&plain),
               100.0 * (ms_per_token(&never) / ms_per_token(&plain) - 1),
               100.0 * (cpu_ms_per_token(&never) / cpu_ms_per_token(&plain) - 1));
    }
    printf("\nrepetitive prompt:\n");
    report("plain", &lplain, NULL);
    report("lookup", &lookup, &lplain);
    free(rep);
    curl_global_cleanup();
    return 0;
}

// bench_tokenize: tokenizer throughput in MB/s on 1 MB of mixed text (prose,
// code, numbers, several scripts, emoji) for each fixture vocabulary: one
// SPM, BPE models with different pre-tokenizers, and WordPiece.
//
//   bench_tokenize                      all fixture vocabularies
//   bench_tokenize MODEL.gguf ...       the given models
//   bench_tokenize --write-text FILE    write the 1 MB text (to feed llama-tokenize)
//   --text FILE                         use FILE instead of the generated text
//   --iters N                           timed runs per model (best is reported; default 3)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

static const char *const samples[] = {
    "The quick brown fox jumps over the lazy dog while the committee, after a long and rather "
    "tedious debate, decided that it wasn't going to approve the budget for 2025. ",
    "def fibonacci(n: int) -> int:\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
    "fibonacci(n - 2)\n\nfor i in range(10):\n    print(f\"{i}: {fibonacci(i)}\")\n",
    "int main(int argc, char **argv) { for (int i = 0; i < argc; i++) printf(\"%s\\n\", argv[i]); "
    "return 0; }\n",
    "Der schnelle braune Fuchs springt über den faulen Hund. Größere Änderungen folgen später. ",
    "Быстрая коричневая лиса перепрыгивает через ленивую собаку. Привет, мир! ",
    "日本語のテキストと中文文本が混在しています。东京和北京都是大城市。 ",
    "Les élèves ont réussi l'examen à 95 % — félicitations ! Ça va très bien. ",
    "🦙🚀 emoji 👩‍👩‍👧 family 🇩🇪 flag ✨ sparkles ",
    "Prices: $1,234.56, €99.99, 3.14159, 1e-9, 0xDEADBEEF, 192.168.0.1, 2024-05-01T12:00:00Z. ",
    "   indented text\twith\ttabs   and    runs of spaces\r\n\n\n",
    "<html><body><p class=\"x\">Hello &amp; welcome!</p></body></html>\n",
    "مرحبا بالعالم، هذا نص عربي للاختبار. שלום עולם. नमस्ते दुनिया। ",
};

// Letters for made-up words, so that the text is not just the samples
// repeated (a real text keeps meeting new words).
static const char *const alphabets[] = {"abcdefghijklmnopqrstuvwxyz", "aeiouybcdfghklmnprstvz",
                                        "абвгдеёжзийклмнопрстуфхцчшщыэюя",
                                        "αβγδεζηθικλμνξοπρστυφχψω"};

static uint32_t next_rand(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return *rng >> 8;
}

static size_t made_up_word(char *out, uint32_t *rng)
{
    const char *a = alphabets[next_rand(rng) % 4];
    size_t n_chars = 0;
    for (const char *p = a; *p; p++)
        n_chars += ((unsigned char)*p & 0xC0) != 0x80;
    size_t len = 0, k = 2 + next_rand(rng) % 9;
    out[len++] = ' ';
    for (size_t i = 0; i < k; i++) {
        size_t want = next_rand(rng) % n_chars, c = 0;
        for (const char *p = a; *p; p++) {
            if (((unsigned char)*p & 0xC0) == 0x80)
                continue;
            if (c++ == want) {
                size_t l = (unsigned char)*p < 0x80 ? 1 : 2;
                memcpy(out + len, p, l);
                len += l;
                break;
            }
        }
    }
    return len;
}

static char *make_text(size_t n)
{
    char *s = malloc(n + 64);
    size_t len = 0;
    uint32_t rng = 12345;
    while (len < n) {
        const char *p = samples[next_rand(&rng) % (sizeof(samples) / sizeof(samples[0]))];
        size_t k = strlen(p);
        if (len + k > n)
            break;
        memcpy(s + len, p, k);
        len += k;
        if (next_rand(&rng) % 4 == 0)
            len += (size_t)snprintf(s + len, 32, "%u ", next_rand(&rng) % 100000);
        for (uint32_t w = next_rand(&rng) % 6; w > 0 && len + 40 < n; w--)
            len += made_up_word(s + len, &rng);
    }
    s[len] = 0;
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// CPU time of this process: the figure that stays meaningful on a busy machine.
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(const char *path, const char *label, const char *text, size_t len, int iters)
{
    struct err e = {0};
    struct gguf *g = NULL;
    struct tokenizer *t = NULL;
    double t0 = now_s();
    if (gguf_open(&g, path, &e) < 0 || tokenizer_load(&t, g, &e) < 0) {
        printf("%-14s %s\n", label, e.msg);
        gguf_close(g);
        return;
    }
    double load_ms = (now_s() - t0) * 1e3;
    gguf_close(g);
    struct tokenizer_ids ids = {0};
    double best = 1e9, best_cpu = 1e9;
    for (int i = 0; i < iters; i++) {
        tokenizer_ids_reset(&ids);
        double a = now_s(), c = cpu_s();
        if (tokenizer_encode(t, text, len, true, true, &ids, &e) < 0) {
            printf("%-14s encode: %s\n", label, e.msg);
            break;
        }
        double dt = now_s() - a, dc = cpu_s() - c;
        if (dt < best)
            best = dt;
        if (dc < best_cpu)
            best_cpu = dc;
    }
    // Decode throughput (whole sequence) for completeness.
    struct buf out;
    buf_init(&out, 0);
    double a = now_s();
    tokenizer_decode(t, ids.data, ids.len, false, false, &out, &e);
    double dec = now_s() - a;
    printf("%-14s %-4s %-13s %7zu tokens  encode %6.2f MB/s wall, %6.2f MB/s cpu  decode %7.1f "
           "MB/s  load %6.1f ms\n",
           label,
           tokenizer_kind(t) == TOKENIZER_SPM   ? "SPM"
           : tokenizer_kind(t) == TOKENIZER_BPE ? "BPE"
                                                : "WPM",
           tokenizer_kind(t) == TOKENIZER_BPE ? tokenizer_pre_name(t) : "-", ids.len,
           len / best / 1e6, len / (best_cpu > 0 ? best_cpu : 1e-9) / 1e6,
           out.len / (dec > 0 ? dec : 1e-9) / 1e6, load_ms);
    buf_deinit(&out);
    tokenizer_ids_deinit(&ids);
    tokenizer_free(t);
}

int main(int argc, char **argv)
{
    const char *text_file = NULL, *write_file = NULL;
    int iters = 3;
    const char *models[32];
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--text") == 0 && i + 1 < argc)
            text_file = argv[++i];
        else if (strcmp(argv[i], "--write-text") == 0 && i + 1 < argc)
            write_file = argv[++i];
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (n_models < 32)
            models[n_models++] = argv[i];
    }
    char *text;
    size_t len;
    if (text_file) {
        FILE *f = fopen(text_file, "rb");
        if (!f) {
            perror(text_file);
            return 1;
        }
        struct buf b;
        buf_init(&b, 0);
        char tmp[65536];
        size_t k;
        while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
            buf_append(&b, tmp, k);
        fclose(f);
        len = b.len;
        text = buf_take(&b);
    } else {
        text = make_text(1 << 20);
        len = strlen(text);
    }
    if (write_file) {
        FILE *f = fopen(write_file, "wb");
        if (!f || fwrite(text, 1, len, f) != len) {
            perror(write_file);
            return 1;
        }
        fclose(f);
        printf("wrote %zu bytes to %s\n", len, write_file);
        free(text);
        return 0;
    }
    printf("text: %zu bytes, best of %d, add_special + parse_special (wall and process CPU time)\n",
           len, iters);
    if (n_models > 0) {
        for (int i = 0; i < n_models; i++)
            bench(models[i], strrchr(models[i], '/') ? strrchr(models[i], '/') + 1 : models[i],
                  text, len, iters);
    } else {
        static const char *const vocabs[] = {"llama-spm", "phi-3", "gpt-2", "deepseek-llm",
                                             "bert-bge"};
        char path[1024], rel[128];
        for (size_t i = 0; i < sizeof(vocabs) / sizeof(vocabs[0]); i++) {
            snprintf(rel, sizeof(rel), "vocab/ggml-vocab-%s.gguf", vocabs[i]);
            bench(test_fixture(path, sizeof(path), rel), vocabs[i], text, len, iters);
        }
        static const char *const shared[][2] = {{"tiny-llama-f32.gguf", "llama3"},
                                                {"tiny-qwen2-f32.gguf", "qwen2"}};
        for (size_t i = 0; i < 2; i++)
            if (test_shared_fixture(path, sizeof(path), shared[i][0]))
                bench(path, shared[i][1], text, len, iters);
    }
    free(text);
    return 0;
}

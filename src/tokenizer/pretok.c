// BPE pre-tokenizers (spec §5.3): each tokenizer.ggml.pre name maps to a
// list of regexes applied in sequence with PCRE2 (JIT when available). Every
// match and every stretch between matches becomes a word; words never cross
// the boundaries of the previous pass.
//
// \s is spelled out as the Unicode White_Space set (PCRE2's \s lacks U+0085),
// and \p{Lu}-style case classes are emulated as llama.cpp does ("a letter
// that is not a-z"), so that splits agree with the reference.
#include "tokenizer/internal.h"

#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define WS                                                                                         \
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}" \
    "\\x{3000}"
#define S        "[" WS "]"
#define NS       "[^" WS "]"
#define CONTR_I  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define CONTR    "'s|'t|'re|'ve|'m|'ll|'d"
#define UPPERISH "(?:(?=\\p{L})[^a-z])"
#define LOWERISH "(?:(?=\\p{L})[^A-Z])"

static const char *const re_llama3[] = {CONTR_I "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
                                                "\\p{L}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S
                                                "+(?!" NS ")|" S "+",
                                        NULL};
static const char *const re_qwen2[] = {CONTR_I "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS
                                               "\\p{L}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S
                                               "+(?!" NS ")|" S "+",
                                       NULL};
static const char *const re_qwen35[] = {
    CONTR_I "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS
            "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+",
    NULL};
static const char *const re_gpt2[] = {
    CONTR "| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S "+(?!" NS ")|" S "+", NULL};
static const char *const re_starcoder[] = {
    "\\p{N}", CONTR "| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S "+(?!" NS ")", NULL};
#define DS_LLM_LETTERS                                                                             \
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"                 \
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"         \
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"         \
    "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"             \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"                 \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"                 \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"         \
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-"                 \
    "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-"                 \
    "\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"         \
    "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-"         \
    "\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"          \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"                  \
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"                 \
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"                 \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"             \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"         \
    "\\x{1E900}-\\x{1E943}"
static const char *const re_deepseek_llm[] = {
    "[\\r\\n]",
    S "?[" DS_LLM_LETTERS "]+",
    S "?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    S "+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
    NULL};
static const char *const re_deepseek_coder[] = {
    "[\\r\\n]",   S "?\\p{L}+",
    S "?\\p{P}+", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}",     NULL};
static const char *const re_deepseek_v3[] = {
    "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+",
    NULL};
// SentencePiece-style BPE (Gemma 4): no word splits but at newlines.
static const char *const re_lines[] = {"[^\\n]+|[\\n]+", NULL};
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH
    "*|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+",
    NULL};
static const char *const re_gpt4o[] = {"[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+" CONTR_I
                                       "?|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*" CONTR_I
                                       "?|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" S
                                       "*[\\r\\n]+|" S "+(?!" NS ")|" S "+",
                                       NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+",
                                        CONTR "| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S
                                              "+(?!" NS ")",
                                        "[0-9][0-9][0-9]", NULL};
static const char *const re_bloom[] = {
    " ?[^(" WS "|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", NULL};
static const char *const re_viking[] = {
    " ?[^(" WS "|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", "\\p{N}",
    NULL};
static const char *const re_chameleon[] = {"<sentinel:[0-9]+>",
                                           "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                                           "([\\t\\n]|    |  )",
                                           "\\p{N}",
                                           "[\\p{P}!-/:-@\\[-`{-~]",
                                           CONTR "| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S
                                                 "+(?!" NS ")",
                                           NULL};
static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+",
                                         CONTR "| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" S
                                               "+(?!" NS ")",
                                         "\\p{N}+", "[0-9][0-9][0-9]", NULL};

// One row per group of names: regexes and flags.
struct pretok_row {
    const char *names;  // space-separated
    const char *const *re;
    bool ignore_merges;
    int add_bos;  // -1 = keep the model default
    bool clean_spaces;
};

static const struct pretok_row pretok_rows[] = {
    {"llama-bpe llama3 llama-v3 falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", re_llama3,
     true, 1, true},
    {"dbrx smaug-bpe glm4 chatglm-bpe", re_llama3, false, -1, true},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open", re_qwen2, false,
     -1, false},
    {"qwen35", re_qwen35, false, -1, false},
    {"gpt-2 phi-2 mpt olmo jais jina-es jina-de jina-v2-es jina-v2-de gigachat a.x-4.0 mellum "
     "modern-bert exaone4 trillion granite-docling jina-v1-en jina-v2-code roberta-bpe",
     re_gpt2, false, -1, true},
    {"starcoder refact codeshell exaone minerva-7b mellum2", re_starcoder, false, -1, true},
    {"command-r smollm", re_starcoder, false, -1, false},
    {"deepseek-llm", re_deepseek_llm, false, -1, false},
    {"deepseek-coder", re_deepseek_coder, false, -1, false},
    {"deepseek-v3 hunyuan-dense joyai-llm", re_deepseek_v3, false, -1, false},
    {"tekken", re_tekken, true, 1, false},
    {"gemma4 granite-embed-multi-311m", re_lines, false, 1, true},
    {"gpt-4o llama4 kanana2 talkie", re_gpt4o, false, -1, false},
    {"falcon", re_falcon, false, -1, true},
    {"bloom gpt3-finnish", re_bloom, false, -1, true},
    {"poro-chat", re_bloom, false, -1, false},
    {"viking", re_viking, false, -1, false},
    {"chameleon", re_chameleon, false, 1, false},
    {"default", re_default, false, -1, true},
};

static bool name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        if (!sp)
            break;
        p = sp + 1;
    }
    return false;
}

int tok_pretok_init(struct tok_pretok *p, const char *name, bool *ignore_merges, int *add_bos,
                    bool *clean_spaces, struct err *e)
{
    const struct pretok_row *row = NULL;
    for (size_t i = 0; i < sizeof(pretok_rows) / sizeof(pretok_rows[0]); i++)
        if (name_in(pretok_rows[i].names, name)) {
            row = &pretok_rows[i];
            break;
        }
    if (!row)
        return err_set(e, ERR_UNSUPPORTED, "unknown pre-tokenizer type: '%s'", name);
    memset(p, 0, sizeof(*p));
    p->name = name;
    *ignore_merges = row->ignore_merges;
    *add_bos = row->add_bos;
    *clean_spaces = row->clean_spaces;
    for (int i = 0; row->re[i]; i++) {
        int errcode;
        PCRE2_SIZE erroff;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)row->re[i], PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                          &errcode, &erroff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(errcode, msg, sizeof(msg));
            tok_pretok_deinit(p);
            return err_set(e, ERR_INTERNAL, "pre-tokenizer %s regex %d at %zu: %s", name, i,
                           (size_t)erroff, (const char *)msg);
        }
        p->jit[i] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
        p->re[i] = re;
        p->n_re = i + 1;
    }
    return 0;
}

void tok_pretok_deinit(struct tok_pretok *p)
{
    for (int i = 0; i < p->n_re; i++)
        pcre2_code_free(p->re[i]);
    p->n_re = 0;
}

static void spans_push(struct tok_spans *s, size_t off, size_t len)
{
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = xrealloc(s->v, s->cap * sizeof(uint32_t));
    }
    s->v[s->n++] = (uint32_t)off;
    s->v[s->n++] = (uint32_t)len;
}

void tok_spans_deinit(struct tok_spans *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

// Splits text[off, off+len) with one regex, appending words to out.
static int split_one(const struct tok_pretok *p, int k, pcre2_match_data *md,
                     pcre2_match_context *mc, const char *text, size_t off, size_t len,
                     struct tok_spans *out, struct err *e)
{
    const pcre2_code *re = p->re[k];
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + off);
    size_t last = 0, pos = 0;
    while (pos < len) {
        int rc = p->jit[k] ? pcre2_jit_match(re, subj, len, pos, 0, md, mc)
                           : pcre2_match(re, subj, len, pos, 0, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            return err_set(e, ERR_TOO_LARGE, "pre-tokenizer %s: %s", p->name, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {  // empty match: move on one character
            pos = ms + tok_utf8_len((unsigned char)text[off + ms]);
            continue;
        }
        if (ms > last)
            spans_push(out, off + last, ms - last);
        spans_push(out, off + ms, me - ms);
        last = pos = me;
    }
    if (last < len)
        spans_push(out, off + last, len - last);
    return 0;
}

int tok_pretok_split(const struct tok_pretok *p, const char *text, size_t len,
                     struct tok_spans *out, struct err *e)
{
    if (len == 0)
        return 0;
    if (len >= UINT32_MAX)
        return err_set(e, ERR_TOO_LARGE, "text too large to tokenize");
    pcre2_match_data *md = pcre2_match_data_create(8, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
    if (!md || !mc || !js) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        pcre2_jit_stack_free(js);
        return err_set(e, ERR_NOMEM, NULL);
    }
    pcre2_jit_stack_assign(mc, NULL, js);
    struct tok_spans a = {0}, b = {0};
    int rc = 0;
    spans_push(&a, 0, len);
    for (int k = 0; k < p->n_re && rc == 0; k++) {
        struct tok_spans *dst = k == p->n_re - 1 ? out : &b;
        b.n = 0;
        for (size_t i = 0; i < a.n && rc == 0; i += 2)
            rc = split_one(p, k, md, mc, text, a.v[i], a.v[i + 1], dst, e);
        if (dst == &b) {
            struct tok_spans t = a;
            a = b;
            b = t;
        }
    }
    if (p->n_re == 0)
        spans_push(out, 0, len);
    tok_spans_deinit(&a);
    tok_spans_deinit(&b);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(js);
    return rc;
}

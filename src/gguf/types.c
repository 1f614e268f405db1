// ggml tensor type ids: names and block geometry (spec/gguf.md §5), and the
// llama_ftype → quantization label table (§6.1). The reader needs only the
// geometry; dequantization lives in engine/quant.
#include "gguf/gguf.h"

#include <stddef.h>

struct type_row {
    const char *name;
    uint32_t block_size;
    uint32_t type_size;
};

// Indexed by type id. Removed ids (4, 5, 31-33, 36-38) have no row.
static const struct type_row type_rows[] = {
    [GGUF_TYPE_F32] = {"F32", 1, 4},
    [GGUF_TYPE_F16] = {"F16", 1, 2},
    [GGUF_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [GGUF_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [GGUF_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [GGUF_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [GGUF_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [GGUF_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [GGUF_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [GGUF_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [GGUF_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [GGUF_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [GGUF_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [GGUF_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [GGUF_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [GGUF_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [GGUF_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [GGUF_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [GGUF_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [GGUF_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [GGUF_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [GGUF_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [GGUF_TYPE_I8] = {"I8", 1, 1},
    [GGUF_TYPE_I16] = {"I16", 1, 2},
    [GGUF_TYPE_I32] = {"I32", 1, 4},
    [GGUF_TYPE_I64] = {"I64", 1, 8},
    [GGUF_TYPE_F64] = {"F64", 1, 8},
    [GGUF_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [GGUF_TYPE_BF16] = {"BF16", 1, 2},
    [GGUF_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [GGUF_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [GGUF_TYPE_MXFP4] = {"MXFP4", 32, 17},
    [GGUF_TYPE_NVFP4] = {"NVFP4", 64, 36},
    [GGUF_TYPE_Q1_0] = {"Q1_0", 128, 18},
    [GGUF_TYPE_Q2_0] = {"Q2_0", 64, 18},
};

#define N_TYPE_ROWS (sizeof(type_rows) / sizeof(type_rows[0]))

const char *gguf_type_name(uint32_t type)
{
    return type < N_TYPE_ROWS ? type_rows[type].name : NULL;
}

bool gguf_type_geometry(uint32_t type, uint32_t *block_size, uint32_t *type_size)
{
    if (type >= N_TYPE_ROWS || !type_rows[type].name)
        return false;
    if (block_size)
        *block_size = type_rows[type].block_size;
    if (type_size)
        *type_size = type_rows[type].type_size;
    return true;
}

int gguf_type_from_name(const char *name)
{
    if (!name)
        return -1;
    for (uint32_t i = 0; i < N_TYPE_ROWS; i++)
        if (type_rows[i].name && ascii_ieq(type_rows[i].name, name))
            return (int)i;
    return -1;
}

// llama_ftype values (NOT ggml_ftype), labels as Ollama prints them.
static const char *const file_type_names[] = {
    [0] = "F32",      [1] = "F16",      [2] = "Q4_0",       [3] = "Q4_1",    [7] = "Q8_0",
    [8] = "Q5_0",     [9] = "Q5_1",     [10] = "Q2_K",      [11] = "Q3_K_S", [12] = "Q3_K_M",
    [13] = "Q3_K_L",  [14] = "Q4_K_S",  [15] = "Q4_K_M",    [16] = "Q5_K_S", [17] = "Q5_K_M",
    [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",    [21] = "Q2_K_S", [22] = "IQ3_XS",
    [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",    [26] = "IQ3_S",  [27] = "IQ3_M",
    [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",    [31] = "IQ1_M",  [32] = "BF16",
    [36] = "TQ1_0",   [37] = "TQ2_0",   [38] = "MXFP4_MOE", [39] = "NVFP4",  [40] = "Q1_0",
};

const char *gguf_file_type_name(uint32_t file_type)
{
    if (file_type >= sizeof(file_type_names) / sizeof(file_type_names[0]))
        return NULL;
    return file_type_names[file_type];
}

int gguf_file_type_from_name(const char *name)
{
    if (!name)
        return -1;
    for (uint32_t i = 0; i < sizeof(file_type_names) / sizeof(file_type_names[0]); i++)
        if (file_type_names[i] && ascii_ieq(file_type_names[i], name))
            return (int)i;
    return -1;
}

static const char *const value_type_names[GGUF_VAL_COUNT_] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};

const char *gguf_value_type_name(uint32_t t)
{
    return t < GGUF_VAL_COUNT_ ? value_type_names[t] : NULL;
}

size_t gguf_value_type_size(uint32_t t)
{
    static const uint8_t sizes[GGUF_VAL_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GGUF_VAL_COUNT_ ? sizes[t] : 0;
}

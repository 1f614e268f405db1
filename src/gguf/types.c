// ggml tensor types: names and block geometry (from the type table,
// types.def), and the llama_ftype → quantization label table. The reader
// needs only the geometry; dequantization lives in engine/quant.
#include "gguf/gguf.h"

#include <stddef.h>

struct type_row {
    const char *name;
    uint32_t block_size;
    uint32_t type_size;
};

// Indexed by type id; ids without a row in types.def have no name.
static const struct type_row type_rows[] = {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) [id] = {#nm, bs, ts},
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
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

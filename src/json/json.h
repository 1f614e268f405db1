// json: helpers over jansson, the only module that includes it directly.
// Other modules get jansson's types (json_t, json_object_get, ...) through
// this header and use the jsonx_ helpers for what Ollama's Go server does
// differently from jansson's defaults:
//   - parsing: one value, Go-style syntax errors with line and column, invalid
//     UTF-8 replaced by U+FFFD, duplicate keys allowed (the last one wins);
//   - typed field getters with clear errors ("json: cannot unmarshal number
//     into field model of type string");
//   - writing: Go's encoding/json output byte for byte (compact, insertion or
//     sorted key order, <, >, & escaped as \u003c..., float64 numbers in
//     shortest form: 0.5, 3, 1e-7, 1e+21).
// All functions are thread-safe on distinct values.
#pragma once

#include <jansson.h>

#include "util/util.h"

// ---------------------------------------------------------------------------
// Parsing

#define JSONX_MAX_BYTES ((size_t)1 << 30)  // larger inputs → ERR_TOO_LARGE
#define JSONX_MAX_DEPTH 1000               // deeper nesting → ERR_INVALID

// Parses exactly one JSON value (any type) from s[0..n), surrounded by
// optional whitespace. On success *out is a new reference (json_decref it).
// Integers outside int64 become reals (as Go reads them into float64).
// Errors (ERR_INVALID; ERR_RANGE for reals beyond double (1e400), as Go;
// ERR_TOO_LARGE past JSONX_MAX_BYTES)
// carry Go's wording plus the position, e.g.
//   "invalid character 'x' looking for beginning of value at line 1 column 5"
//   "unexpected end of JSON input".
// Empty input (only whitespace) is "unexpected end of JSON input".
int jsonx_parse(const char *s, size_t n, json_t **out, struct err *e);
// Same, but only an object is accepted ("json: cannot unmarshal array into
// value of type object" otherwise): request bodies.
int jsonx_parse_object(const char *s, size_t n, json_t **out, struct err *e);

// ---------------------------------------------------------------------------
// Typed getters. obj must be an object (else ERR_INVALID). Each returns 1 when
// the field was present and *out was set, 0 when the field is absent or null
// and not required (*out keeps the caller's default), and ERR_INVALID when it
// has the wrong type or is missing but required ("missing required field
// model"). Pointers returned are borrowed from obj.

// "string", "number", "bool", "array", "object", "null" (Go's names).
const char *jsonx_type_name(const json_t *v);

int jsonx_get_str(const json_t *obj, const char *key, const char **out, bool required,
                  struct err *e);
// As jsonx_get_str, also giving the length (strings may hold "\u0000").
int jsonx_get_strn(const json_t *obj, const char *key, const char **out, size_t *len, bool required,
                   struct err *e);
int jsonx_get_bool(const json_t *obj, const char *key, bool *out, bool required, struct err *e);
// Integers in [min, max]. Integral reals (5.0, 1e3) are accepted; 5.5 is
// "json: cannot unmarshal number 5.5 into field num_ctx of type int"; values
// outside the range are ERR_RANGE.
int jsonx_get_int(const json_t *obj, const char *key, int64_t *out, int64_t min, int64_t max,
                  bool required, struct err *e);
// Any number.
int jsonx_get_double(const json_t *obj, const char *key, double *out, bool required, struct err *e);
int jsonx_get_obj(const json_t *obj, const char *key, json_t **out, bool required, struct err *e);
int jsonx_get_arr(const json_t *obj, const char *key, json_t **out, bool required, struct err *e);

// The same checks on a value already in hand (array elements); what names
// it in messages ("stop[2]"). v == NULL or null is ERR_INVALID here.
int jsonx_as_str(const json_t *v, const char *what, const char **out, struct err *e);
int jsonx_as_strn(const json_t *v, const char *what, const char **out, size_t *len, struct err *e);
int jsonx_as_bool(const json_t *v, const char *what, bool *out, struct err *e);
int jsonx_as_int(const json_t *v, const char *what, int64_t *out, int64_t min, int64_t max,
                 struct err *e);
int jsonx_as_double(const json_t *v, const char *what, double *out, struct err *e);

// A JSON number as an int64, truncated toward zero and saturated at the
// int64 range (NaN and non-numbers give 0): no undefined conversion for
// absurd client values such as 1e300.
int64_t jsonx_number_i64(const json_t *v);

// ---------------------------------------------------------------------------
// Building. Strings are stored as given (not validated: invalid UTF-8 is
// written as \ufffd by jsonx_dump, as Go does). The setters return 0 or
// ERR_NOMEM; obj must be an object.

json_t *jsonx_str(const char *s);  // NULL s → JSON null
json_t *jsonx_strn(const char *s, size_t n);
// A real that jsonx_dump prints as Go prints a float32 (0.8 stays "0.8").
json_t *jsonx_real_f32(float f);
int jsonx_set(json_t *obj, const char *key, json_t *v);  // steals v (NULL → ERR_NOMEM)
int jsonx_set_str(json_t *obj, const char *key, const char *s);
int jsonx_set_strn(json_t *obj, const char *key, const char *s, size_t n);
int jsonx_set_int(json_t *obj, const char *key, int64_t v);
int jsonx_set_bool(json_t *obj, const char *key, bool v);
int jsonx_set_double(json_t *obj, const char *key, double v);  // NaN/Inf → ERR_INVALID
int jsonx_set_f32(json_t *obj, const char *key, float v);
int jsonx_arr_append(json_t *arr, json_t *v);  // steals v
// A tool call as Ollama's api.ToolCall writes it: {"id": "call_" and 8 random
// [a-z0-9], "function": {"index", "name", "arguments"}}, the one form every
// output parser (templates, renderers) emits. Takes the reference to args.
json_t *jsonx_tool_call(int64_t index, const char *name, json_t *args);

// ---------------------------------------------------------------------------
// Writing (Go encoding/json)

enum {
    JSONX_SORT_KEYS = 1 << 0,       // keys by byte value, as Go writes a map
    JSONX_NO_HTML_ESCAPE = 1 << 1,  // keep <, >, & (Encoder.SetEscapeHTML(false))
    JSONX_INDENT = 1 << 2,          // MarshalIndent(v, "", "  ")
};

// Appends the encoding of v to out (no trailing newline). ERR_INVALID for
// NaN/Inf or nesting past JSONX_MAX_DEPTH, ERR_TOO_LARGE from out's cap; out
// may hold a partial value on error.
int jsonx_dump(const json_t *v, int flags, struct buf *out, struct err *e);
// Heap string (caller frees) or NULL on error.
char *jsonx_dumps(const json_t *v, int flags);
// One NDJSON line of a streamed reply (the server's and the runner's): obj
// encoded, then '\n', appended to line. Takes the reference to obj.
int jsonx_ndjson_line(json_t *obj, struct buf *line);
// Appends s[0..n) as a JSON string literal with Go's escaping.
int jsonx_dump_string(const char *s, size_t n, int flags, struct buf *out);

// Go's float64 / float32 JSON number text: shortest round-trip digits,
// plain notation unless |x| < 1e-6 or |x| >= 1e21 ("1e-7", "1.5e+21").
// Returns false (out = "") for NaN or infinities. n >= 32 always suffices.
bool jsonx_format_double(double v, char *out, size_t n);
bool jsonx_format_float32(float v, char *out, size_t n);

// The machinery convert.c (models) and adapter.c (LoRA adapters) share:
// the folder's files (small ones read, safetensors mapped and parsed),
// substring renames, and writing a plan of tensors through the GGUF writer a
// block of elements at a time, converting dtypes and reordering Q/K rows.
#include "convert/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/quant/quant.h"

#define SMALL_FILE_MAX (256u << 20)  // tokenizer.json of large vocabularies is ~30 MB
#define CHUNK_ELEMS    CONV_CHUNK_ELEMS
#define RELEASE_ELEMS  (1u << 24)  // pages given back every 16M elements

static const struct convert_file *find_file(const struct convert_file *files, size_t n,
                                            const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    return NULL;
}

// A small file of the folder (NULL data when absent).
int conv_read_small(const struct convert_file *files, size_t n, const char *name, struct buf *out,
                    struct err *e)
{
    buf_init(out, SMALL_FILE_MAX);
    const struct convert_file *f = find_file(files, n, name);
    if (!f)
        return 0;
    int rc = fs_read_all(f->path, SMALL_FILE_MAX, out, e);
    if (rc == 0 && !out->data)
        rc = buf_append(out, "", 0);
    if (rc < 0)
        err_prefix(e, "%s", name);
    return rc;
}

static int map_file(const struct convert_file *f, struct conv_mapped *m, struct err *e)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int rc = err_set(e, ERR_IO, "%s: %s", f->name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    m->n = (size_t)st.st_size;
    m->p = m->n ? mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (m->n && m->p == MAP_FAILED) {
        m->p = NULL;
        return err_set(e, ERR_IO, "%s: mmap: %s", f->name, strerror(errno));
    }
    if (m->p)
        madvise(m->p, m->n, MADV_SEQUENTIAL);
    return 0;
}

// Maps and parses every .safetensors file, in name order.
int conv_load_tensors(struct conv_job *j, const struct convert_file *files, size_t n, struct err *e)
{
    j->maps = xcalloc(n ? n : 1, sizeof(*j->maps));
    for (size_t i = 0; i < n; i++) {
        if (!cstr_ends_with(files[i].name, ".safetensors"))
            continue;
        struct conv_mapped *m = &j->maps[j->n_maps++];
        int rc = map_file(&files[i], m, e);
        if (rc == 0)
            rc = st_parse(&j->set, m->p, m->n, files[i].name, e);
        if (rc < 0)
            return rc;
    }
    if (j->set.n == 0)
        return err_set(e, ERR_INVALID, "no safetensors files with tensors found");
    return 0;
}

// HF name → GGUF name by the architecture's substring renames.
void conv_rename(const struct conv_rename *renames, const char *in, char *out, size_t n)
{
    size_t k = 0;
    while (*in && k + 1 < n) {
        const struct conv_rename *r = renames;
        for (; r->from; r++)
            if (strncmp(in, r->from, strlen(r->from)) == 0)
                break;
        if (r->from) {
            k += (size_t)snprintf(out + k, n - k, "%s", r->to);
            in += strlen(r->from);
        } else {
            out[k++] = *in++;
        }
    }
    out[k < n ? k : n - 1] = '\0';
}

// Sort key: the block number (-1 outside blocks, output last), then the name.
static long block_of(const char *name)
{
    if (cstr_starts_with(name, "blk."))
        return strtol(name + 4, NULL, 10);
    return cstr_starts_with(name, "output") ? 1L << 30 : -1;
}

static int cmp_plan(const void *a, const void *b)
{
    const struct conv_plan *x = a, *y = b;
    long bx = block_of(x->name), by = block_of(y->name);
    return bx != by ? (bx < by ? -1 : 1) : strcmp(x->name, y->name);
}

int conv_sort_plan(struct conv_job *j, size_t first, struct err *e)
{
    qsort(j->plan + first, j->n_plan - first, sizeof(*j->plan), cmp_plan);
    for (size_t i = 1; i < j->n_plan; i++)
        if (strcmp(j->plan[i].name, j->plan[i - 1].name) == 0)
            return err_set(e, ERR_FORMAT, "two tensors map to %s", j->plan[i].name);
    return 0;
}

// ---------------------------------------------------------------------------
// Writing.

const struct st_tensor *conv_find_tensor(const struct conv_job *j, const char *name)
{
    for (size_t i = 0; i < j->set.n; i++)
        if (strcmp(j->set.v[i].name, name) == 0)
            return &j->set.v[i];
    return NULL;
}

void conv_load_floats(const struct st_tensor *t, uint64_t first, float *out, size_t n)
{
    const uint8_t *p = t->data + first * st_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&out[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == ST_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
        }
    }
}

size_t conv_store_floats(const float *in, size_t n, uint32_t type, void *out)
{
    if (type == GGUF_TYPE_F32) {
        memcpy(out, in, n * 4);
        return n * 4;
    }
    uint16_t *h = out;
    for (size_t i = 0; i < n; i++)
        h[i] = type == GGUF_TYPE_F16 ? quant_f32_to_f16(in[i]) : quant_f32_to_bf16(in[i]);
    return n * 2;
}

// The source row that lands at GGUF row r of a permuted Q/K matrix: HF
// keeps each head's rotary halves apart (row h*D + s*D/2 + i), the GGUF
// interleaves them (row h*D + 2i + s).
static int64_t permuted_src_row(int64_t r, int64_t rows, uint32_t heads)
{
    int64_t d = rows / heads, h = r / d, k = r % d;
    return h * d + (k % 2) * (d / 2) + k / 2;
}

// Writes n elements of src starting at element first.
static int write_span(struct gguf_writer *w, const struct conv_plan *p, const struct st_tensor *src,
                      uint64_t first, size_t n, float *f, void *o, struct err *e)
{
    bool as_is = p->add == 0 && ((src->dtype == ST_F32 && p->type == GGUF_TYPE_F32) ||
                                 (src->dtype == ST_F16 && p->type == GGUF_TYPE_F16) ||
                                 (src->dtype == ST_BF16 && p->type == GGUF_TYPE_BF16));
    size_t es = st_dtype_size(src->dtype);
    if (as_is)
        return gguf_writer_write_data(w, src->data + first * es, n * es, e);
    conv_load_floats(src, first, f, n);
    for (size_t i = 0; p->add != 0 && i < n; i++)
        f[i] += p->add;
    return gguf_writer_write_data(w, o, conv_store_floats(f, n, p->type, o), e);
}

// Drops the mapped pages of [p, p + n) just read, so the resident set stays
// at one block rather than growing with the model (the file is read once).
static void release_range(const uint8_t *p, uint64_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

// One source tensor, in GGUF row order.
static int write_source(struct gguf_writer *w, const struct conv_plan *p,
                        const struct st_tensor *src, float *f, void *o, struct err *e)
{
    int rc = 0;
    uint64_t count = src->n_bytes / st_dtype_size(src->dtype);
    if (p->permute_heads) {
        int64_t rows = p->ne[1], cols = p->ne[0];
        for (int64_t r = 0; rc == 0 && r < rows; r++) {
            int64_t s = permuted_src_row(r, rows, p->permute_heads);
            for (int64_t c0 = 0; rc == 0 && c0 < cols; c0 += CHUNK_ELEMS) {
                size_t n = (size_t)(cols - c0 < CHUNK_ELEMS ? cols - c0 : CHUNK_ELEMS);
                rc = write_span(w, p, src, (uint64_t)(s * cols + c0), n, f, o, e);
            }
        }
        return rc;
    }
    size_t es = st_dtype_size(src->dtype);
    uint64_t released = 0;
    for (uint64_t at = 0; rc == 0 && at < count; at += CHUNK_ELEMS) {
        size_t n = (size_t)(count - at < CHUNK_ELEMS ? count - at : CHUNK_ELEMS);
        rc = write_span(w, p, src, at, n, f, o, e);
        if (at + n - released >= RELEASE_ELEMS || at + n == count) {
            release_range(src->data + released * es, (at + n - released) * es);
            released = at + n;
        }
    }
    return rc;
}

static int write_tensor(struct conv_job *j, struct gguf_writer *w, const struct conv_plan *p,
                        float *f, void *o, struct err *e)
{
    if (p->extra) {
        size_t bytes = conv_store_floats(p->extra->data, (size_t)p->extra->n, GGUF_TYPE_F32, o);
        return gguf_writer_write_data(w, o, bytes, e);
    }
    int rc = 0;
    if (p->write) {  // a share of the sources per output (gpt-oss: gate and up of one)
        rc = p->write(w, p, f, o, e);
        j->done += (p->srcs[0]->n_bytes + (p->scales ? p->scales->n_bytes : 0)) /
                   (uint64_t)(p->stride > 1 ? p->stride : 1);
        if (j->fn)
            j->fn(j->fn_ctx, j->done, j->total);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < p->n_srcs; i++) {
        rc = write_source(w, p, p->srcs[i], f, o, e);
        release_range(p->srcs[i]->data, p->srcs[i]->n_bytes);
        j->done += p->srcs[i]->n_bytes;
    }
    if (j->fn)
        j->fn(j->fn_ctx, j->done, j->total);
    return rc;
}

int conv_write_body(struct conv_job *j, struct gguf_writer *w, struct convert_info *info,
                    struct err *e)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < j->n_plan; i++)
        rc = gguf_writer_add_tensor(w, j->plan[i].name, j->plan[i].type, j->plan[i].n_dims,
                                    j->plan[i].ne);
    if (rc == 0)
        rc = gguf_writer_write_header(w, e);
    float *f = xmalloc(CHUNK_ELEMS * sizeof(float));
    void *o = xmalloc(CHUNK_ELEMS * sizeof(float));
    for (size_t i = 0; rc == 0 && i < j->n_plan; i++) {
        rc = write_tensor(j, w, &j->plan[i], f, o, e);
        const int64_t *ne = j->plan[i].ne;
        if (rc == 0 && info)
            info->n_bytes +=
                quant_row_size(j->plan[i].type, ne[0]) * (uint64_t)(ne[1] * ne[2] * ne[3]);
    }
    free(f);
    free(o);
    if (rc < 0) {
        gguf_writer_abort(w);
        return rc;
    }
    if (info)
        info->n_tensors = j->n_plan;
    return gguf_writer_close(w, e);
}

void conv_job_free(struct conv_job *j)
{
    for (size_t i = 0; i < j->n_maps; i++)
        if (j->maps[i].p)
            munmap(j->maps[i].p, j->maps[i].n);
    free(j->maps);
    st_set_free(&j->set);
    for (size_t i = 0; i < j->n_plan; i++)
        free(j->plan[i].srcs);
    free(j->plan);
    convert_vocab_free(&j->vocab);
    for (size_t i = 0; i < j->c.n_extra; i++)
        free(j->c.extra[i].data);
    json_decref(j->c.config);
}

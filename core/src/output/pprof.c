/*
 * The pprof writer (rbpeek_profile_write_pprof): the profile as pprof's
 * gzip'd protocol buffer (perftools.profiles.Profile), which `go tool
 * pprof`, Pyroscope, Parca and Cloud Profiler read. The message is
 * filled in and packed by protobuf-c's code generated from pprof.proto
 * (the subset of the format rbpeek writes), then gzip'd with zlib.
 *
 * Shape: two sample types, [samples, count] and [cpu or wall, nanoseconds]
 * (a sample counts for one sampling period of that clock); the period and
 * its type; one sample per distinct stack, its locations leaf first; one
 * location per distinct frame name, with one line, in one mapping (the
 * Ruby program: meta "program", else "ruby", marked symbolized so pprof
 * looks for no binary), or for a machine frame (--native) in the mapping
 * of its module (one per module, marked symbolized too), at its
 * function's address; one function per distinct (label, file, start
 * line), named by the label. A frame with a place in a Ruby file (the
 * frame table's label, path and line) is a function of its label in that
 * file, at that line; any other (a thread's root frame, a frame without a
 * line, a name read from a folded file) is a function of its display name
 * with no file. A function's start_line is where its method or block
 * starts (the iseq's first line, which the sampler gives with each frame);
 * for C methods, the smallest line the profile saw it at.
 */
#include "output/writer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/pprof.pb-c.h"
#include "profile/profile.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;
typedef Perftools__Profiles__ValueType PbValueType;

#define GZ_CHUNK 65536

typedef struct pp_build {
    const rbpeek_profile *p;
    rbpeek_profile *strings;    /* a scratch profile: its interner is the string table */
    rbpeek_profile *fkeys;      /* another scratch interner: "name file start" -> function index */
    PbFunction *functions;
    size_t nfunctions;
    PbLocation *locations;      /* one per frame name: id = frame id + 1 */
    PbLine *lines;
    PbLine **line_ptrs;
    PbSample *samples;
    size_t nsamples, samples_cap;
    uint64_t *loc_pool;         /* every sample's location ids, one after another */
    size_t *loc_off;            /* sample i's ids start at loc_pool + loc_off[i] */
    size_t pool_len, pool_cap;
    int64_t *values;            /* 2 per sample */
    uint32_t *path;             /* frame ids of the walk, root first */
    int64_t period;
    bool failed;
    rbpeek_profile *modules;    /* a scratch interner: a machine frame's module -> mapping index - 2 */
    Perftools__Profiles__Mapping *mappings;   /* [0] the Ruby program, then one per module */
    size_t nmappings;
} pp_build;

/* The string table index of s[0..len). -1 when out of memory. */
static int64_t pp_str(pp_build *b, const char *s, size_t len)
{
    char small[256];
    char *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    uint32_t id = rbp_intern(b->strings, buf);
    if (buf != small) free(buf);
    return id == UINT32_MAX ? -1 : (int64_t)id;
}

/* The mapping of a machine frame's module (2, 3, ...: one per module, in
 * order of first use), or 1, the Ruby program's. */
static uint64_t pp_mapping(pp_build *b, const rbp_pframe *fr)
{
    if ((fr->d.kind != RBPEEK_FRAME_NATIVE && fr->d.kind != RBPEEK_FRAME_CFUNC) || !*fr->d.module) return 1;
    uint32_t k = rbp_intern(b->modules, fr->d.module);
    if (k == UINT32_MAX) return 0;
    if (k == b->nmappings - 1) {
        int64_t file = pp_str(b, fr->d.module, strlen(fr->d.module));
        if (file < 0) return 0;
        Perftools__Profiles__Mapping *m = &b->mappings[b->nmappings++];
        perftools__profiles__mapping__init(m);
        m->id = (uint64_t)k + 2;
        m->filename = file;
        m->has_functions = 1;   /* named by rbpeek: nothing for pprof to symbolize */
    }
    return (uint64_t)k + 2;
}

/* Function and location of frame i. A machine frame is a function of its
 * symbol (or module+offset) with its source file and line where DWARF gave
 * them, at its function's address, in its module's mapping; a C method that
 * stands at its C function is in that function's module. */
static bool pp_frame(pp_build *b, uint32_t i)
{
    const rbp_pframe *fr = rbp_profile_pframe(b->p, i);
    bool placed = rbp_pframe_has_place(fr);
    bool native = fr->d.kind == RBPEEK_FRAME_NATIVE;
    const char *name = placed ? rbp_pframe_label(fr) : native && *fr->d.symbol ? fr->d.symbol : b->p->names[i];
    size_t label_len = placed || (native && *fr->d.symbol) ? strlen(name) : b->p->name_lens[i];
    long line = placed ? fr->d.line : native ? fr->d.native_line : 0;
    int64_t fn_name = pp_str(b, name, label_len);
    int64_t fn_file = placed ? pp_str(b, fr->d.path, fr->path_len)
                      : native && *fr->d.native_file ? pp_str(b, fr->d.native_file, strlen(fr->d.native_file)) : 0;
    if (fn_name < 0 || fn_file < 0) return false;
    /* A function is a (label, file, start line): two blocks of one method
     * share a label but not a start. The key's id in fkeys is dense, in
     * order of first use, so it is the function's index. */
    int32_t start = rbp_profile_start_line(b->p, i);
    char key[64];
    snprintf(key, sizeof key, "%lld\x1f%lld\x1f%d", (long long)fn_name, (long long)fn_file, (int)start);
    uint32_t k = rbp_intern(b->fkeys, key);
    if (k == UINT32_MAX) return false;
    if (k == b->nfunctions) {
        PbFunction *f = &b->functions[b->nfunctions++];
        perftools__profiles__function__init(f);
        f->id = (uint64_t)k + 1;
        f->name = f->system_name = fn_name;
        f->filename = fn_file;
        f->start_line = start;
    }
    /* Without a noted start (stacks that came as names alone: a folded
     * file, a C method), the smallest line the function was seen at. */
    PbFunction *f = &b->functions[k];
    if (start <= 0 && line > 0 && (f->start_line == 0 || line < f->start_line)) f->start_line = line;
    uint64_t fid = f->id;
    PbLine *ln = &b->lines[i];
    perftools__profiles__line__init(ln);
    ln->function_id = fid;
    ln->line = line;
    b->line_ptrs[i] = ln;
    PbLocation *loc = &b->locations[i];
    perftools__profiles__location__init(loc);
    loc->id = (uint64_t)i + 1;
    loc->mapping_id = pp_mapping(b, fr);
    if (!loc->mapping_id) return false;
    if (loc->mapping_id > 1) loc->address = fr->d.pc;
    loc->n_line = 1;
    loc->line = &b->line_ptrs[i];
    return true;
}

/* pprof's values are int64: a count past INT64_MAX, and a count times the
 * period past it, are written as INT64_MAX rather than wrap (the product
 * would be undefined behaviour in C, and a negative time to pprof). The
 * profile's counts are uint64 sums whose root total never wraps
 * (rbp_profile_add_stack_ids checks), so only this conversion can. */
static int64_t pp_count(uint64_t count)
{
    return count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)count;
}

static int64_t pp_count_times(uint64_t count, int64_t period)
{
    int64_t v;
    if (period <= 0) return 0;
    if (__builtin_mul_overflow(pp_count(count), period, &v)) return INT64_MAX;
    return v;
}

/* One sample per node whose stack ends there, its locations leaf first. */
static int pp_visit(void *ctx, uint32_t node, bool entering)
{
    pp_build *b = ctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &b->p->nodes[node];
    b->path[n->depth - 1] = n->frame;
    if (n->self == 0) return 0;
    if (b->nsamples == b->samples_cap) {
        size_t cap = b->samples_cap ? b->samples_cap * 2 : 256;
        size_t *no = realloc(b->loc_off, cap * sizeof *no);
        if (!no) goto oom;
        b->loc_off = no;
        int64_t *nv = realloc(b->values, 2 * cap * sizeof *nv);
        if (!nv) goto oom;
        b->values = nv;
        b->samples_cap = cap;
    }
    if (b->pool_len + n->depth > b->pool_cap) {
        size_t cap = b->pool_cap ? b->pool_cap : 4096;
        while (cap < b->pool_len + n->depth) cap *= 2;
        uint64_t *np = realloc(b->loc_pool, cap * sizeof *np);
        if (!np) goto oom;
        b->loc_pool = np;
        b->pool_cap = cap;
    }
    b->loc_off[b->nsamples] = b->pool_len;
    for (uint32_t d = n->depth; d > 0; d--) b->loc_pool[b->pool_len++] = (uint64_t)b->path[d - 1] + 1;
    b->values[2 * b->nsamples] = pp_count(n->self);
    b->values[2 * b->nsamples + 1] = pp_count_times(n->self, b->period);
    b->nsamples++;
    return 0;
oom:
    rbp_profile_fail(b->p, RBPEEK_ERR_NOMEM, "out of memory writing the pprof profile");
    return -1;
}

/* gzip's framing around a raw deflate of data, to f. */
static rbpeek_status pp_gzip(const rbpeek_profile *p, FILE *f, const uint8_t *data, size_t len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "zlib: cannot start compressing");
    unsigned char out[GZ_CHUNK];
    rbpeek_status st = RBPEEK_OK;
    size_t done = 0;
    int rc;
    do {
        /* Feed at most 1 GiB at a time: avail_in is an unsigned int. */
        if (z.avail_in == 0 && done < len) {
            size_t n = len - done < (1u << 30) ? len - done : (1u << 30);
            z.next_in = (Bytef *)(data + done);
            z.avail_in = (uInt)n;
            done += n;
        }
        z.next_out = out;
        z.avail_out = sizeof out;
        rc = deflate(&z, done == len ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_ERROR) {
            st = rbp_profile_fail(p, RBPEEK_ERR_IO, "zlib: compression failed");
            break;
        }
        size_t have = sizeof out - z.avail_out;
        if (have && fwrite(out, 1, have, f) != have) {
            st = rbp_profile_fail(p, RBPEEK_ERR_IO, "error writing the pprof profile: %s", strerror(errno));
            break;
        }
    } while (rc != Z_STREAM_END);
    deflateEnd(&z);
    return st;
}

static void pp_free(pp_build *b)
{
    rbpeek_profile_free(b->strings);
    rbpeek_profile_free(b->fkeys);
    rbpeek_profile_free(b->modules);
    free(b->mappings);
    free(b->functions);
    free(b->locations);
    free(b->lines);
    free(b->line_ptrs);
    free(b->samples);
    free(b->loc_pool);
    free(b->loc_off);
    free(b->values);
    free(b->path);
}

rbpeek_status rbpeek_profile_write_pprof(const rbpeek_profile *p, const char *path, const rbpeek_pprof_options *opt)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    rbpeek_pprof_options o = {0};
    if (opt) o = *opt;
    if (o.period_ns == 0) o.period_ns = 10000000;   /* ruby sample's default: 100 Hz */
    if (o.period_ns > INT64_MAX / 2) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "pprof: period out of range");

    pp_build b = {.p = p, .period = (int64_t)o.period_ns};
    b.fkeys = rbpeek_profile_new();
    b.strings = rbpeek_profile_new();
    b.modules = rbpeek_profile_new();
    size_t nn = p->nnames ? p->nnames : 1;
    b.mappings = calloc(nn + 1, sizeof *b.mappings);
    b.nmappings = 1;   /* [0], the Ruby program's, is filled in below */
    b.functions = calloc(nn, sizeof *b.functions);
    b.locations = calloc(nn, sizeof *b.locations);
    b.lines = calloc(nn, sizeof *b.lines);
    b.line_ptrs = calloc(nn, sizeof *b.line_ptrs);
    b.path = malloc(((size_t)p->max_depth + 1) * sizeof *b.path);
    rbpeek_status st = RBPEEK_OK;
    uint8_t *packed = NULL;
    PbSample **sample_ptrs = NULL;
    PbLocation **loc_ptrs = NULL;
    PbFunction **fn_ptrs = NULL;
    Perftools__Profiles__Mapping **map_ptrs = NULL;
    rbp_children ch = {0};
    bool have_children = false;
    if (!b.strings || !b.fkeys || !b.modules || !b.mappings || !b.functions || !b.locations || !b.lines ||
        !b.line_ptrs || !b.path)
        goto oom;

    /* The strings every profile has, so they are at fixed places: "" must be 0. */
    const char *fixed[] = {"", "samples", "count", o.on_cpu ? "cpu" : "wall", "nanoseconds"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (rbp_intern(b.strings, fixed[i]) != i) goto oom;
    for (uint32_t i = 0; i < p->nnames; i++)
        if (!pp_frame(&b, i)) goto oom;

    st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) goto out;
    have_children = true;
    st = rbp_profile_walk(p, &ch, pp_visit, &b);
    if (st != RBPEEK_OK) goto out;

    /* Pointers into the pools, now that they no longer move. */
    b.samples = calloc(b.nsamples ? b.nsamples : 1, sizeof *b.samples);
    sample_ptrs = calloc(b.nsamples ? b.nsamples : 1, sizeof *sample_ptrs);
    loc_ptrs = calloc(nn, sizeof *loc_ptrs);
    fn_ptrs = calloc(nn, sizeof *fn_ptrs);
    if (!b.samples || !sample_ptrs || !loc_ptrs || !fn_ptrs) goto oom;
    for (size_t i = 0; i < b.nsamples; i++) {
        PbSample *s = &b.samples[i];
        perftools__profiles__sample__init(s);
        size_t end = i + 1 < b.nsamples ? b.loc_off[i + 1] : b.pool_len;
        s->n_location_id = end - b.loc_off[i];
        s->location_id = b.loc_pool + b.loc_off[i];
        s->n_value = 2;
        s->value = b.values + 2 * i;
        sample_ptrs[i] = s;
    }
    for (uint32_t i = 0; i < p->nnames; i++) loc_ptrs[i] = &b.locations[i];
    for (size_t i = 0; i < b.nfunctions; i++) fn_ptrs[i] = &b.functions[i];

    const char *title = rbpeek_profile_meta(p, "title");
    int64_t title_idx = title ? pp_str(&b, title, strlen(title)) : 0;
    if (title_idx < 0) goto oom;

    PbValueType types[2], period_type;
    PbValueType *type_ptrs[2] = {&types[0], &types[1]};
    for (int i = 0; i < 2; i++) perftools__profiles__value_type__init(&types[i]);
    perftools__profiles__value_type__init(&period_type);
    types[0].type = 1;      /* samples */
    types[0].unit = 2;      /* count */
    types[1].type = 3;      /* cpu or wall */
    types[1].unit = 4;      /* nanoseconds */
    period_type = types[1];

    /* One mapping, the Ruby program, marked as already symbolized, so that
     * pprof names a main binary and never tries to symbolize addresses. */
    const char *program = rbpeek_profile_meta(p, "program");
    int64_t program_idx = pp_str(&b, program ? program : "ruby", strlen(program ? program : "ruby"));
    if (program_idx < 0) goto oom;
    Perftools__Profiles__Mapping *mapping = &b.mappings[0];
    perftools__profiles__mapping__init(mapping);
    mapping->id = 1;
    mapping->filename = program_idx;
    mapping->has_functions = mapping->has_filenames = mapping->has_line_numbers = 1;
    map_ptrs = calloc(b.nmappings, sizeof *map_ptrs);
    if (!map_ptrs) goto oom;
    for (size_t i = 0; i < b.nmappings; i++) map_ptrs[i] = &b.mappings[i];

    PbProfile prof;
    perftools__profiles__profile__init(&prof);
    prof.n_mapping = b.nmappings;
    prof.mapping = map_ptrs;
    prof.n_sample_type = 2;
    prof.sample_type = type_ptrs;
    prof.n_sample = b.nsamples;
    prof.sample = sample_ptrs;
    prof.n_location = p->nnames;
    prof.location = loc_ptrs;
    prof.n_function = b.nfunctions;
    prof.function = fn_ptrs;
    prof.n_string_table = b.strings->nnames;
    prof.string_table = b.strings->names;
    prof.time_nanos = o.time_nanos;
    prof.duration_nanos = o.duration_nanos;
    prof.period_type = &period_type;
    prof.period = b.period;
    prof.default_sample_type = 3;
    int64_t comment = title_idx;
    if (title) {
        prof.n_comment = 1;
        prof.comment = &comment;
    }

    size_t len = perftools__profiles__profile__get_packed_size(&prof);
    packed = malloc(len ? len : 1);
    if (!packed) goto oom;
    if (perftools__profiles__profile__pack(&prof, packed) != len) {
        st = rbp_profile_fail(p, RBPEEK_ERR_IO, "pprof: the profile packed to an unexpected size");
        goto out;
    }
    FILE *f = rbp_profile_open_out(p, path, &st);
    if (!f) goto out;
    st = pp_gzip(p, f, packed, len);
    st = rbp_profile_close_out(p, f, path, st);
    goto out;
oom:
    st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing the pprof profile");
out:
    if (have_children) rbp_children_free(&ch);
    free(packed);
    free(sample_ptrs);
    free(loc_ptrs);
    free(fn_ptrs);
    free(map_ptrs);
    pp_free(&b);
    return st;
}

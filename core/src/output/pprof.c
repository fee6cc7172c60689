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
#include "output/strtab.h"
#include "profile/profile.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__ValueType PbValueType;

#define GZ_CHUNK 65536

/* The strings every profile has, first in its string table at these
 * indices (pp_fixed_strings): pprof wants "" at 0. */
enum { PP_S_EMPTY, PP_S_SAMPLES, PP_S_COUNT, PP_S_CLOCK, PP_S_NANOSECONDS, PP_S_FIXED };

/* The sample types, in the order of each sample's values: [samples, count]
 * and [cpu or wall, nanoseconds]; the second is also the period's type and
 * the default. */
enum { PP_V_COUNT, PP_V_TIME, PP_NVALUES };

typedef struct pp_build {
    const rbpeek_profile *p;
    int64_t period;
    rbp_strtab strings;         /* the profile's string table */
    rbp_strtab fkeys;           /* "name file start" -> function index */
    rbp_strtab modules;         /* a machine frame's module -> mapping index - 1 */
    PbFunction *functions;
    size_t nfunctions;
    PbLocation *locations;      /* one per frame name: id = frame id + 1 */
    PbLine *lines;
    PbLine **line_ptrs;
    PbMapping *mappings;        /* [0] the Ruby program, then one per module */
    size_t nmappings;
    /* the samples, as the walk finds them */
    size_t nsamples, samples_cap;
    uint64_t *loc_pool;         /* every sample's location ids, one after another */
    size_t *loc_off;            /* sample i's ids start at loc_pool + loc_off[i] */
    size_t pool_len, pool_cap;
    int64_t *values;            /* PP_NVALUES per sample */
    uint32_t *path;             /* frame ids of the walk, root first */
    /* the message's arrays of pointers, made once the pools stop moving */
    PbSample *samples;
    PbSample **sample_ptrs;
    PbLocation **loc_ptrs;
    PbFunction **fn_ptrs;
    PbMapping **map_ptrs;
    PbValueType types[PP_NVALUES];
    PbValueType *type_ptrs[PP_NVALUES];
    bool titled;                /* the profile has a title: the comment */
    int64_t comment;            /* the title's string */
    uint8_t *packed;
} pp_build;

/* The string table index of s[0..len), up to a NUL in it. -1 when out of memory. */
static int64_t pp_str(pp_build *b, const char *s, size_t len)
{
    return rbp_strtab_add(&b->strings, s, strnlen(s, len));
}

/* The mapping of a machine frame's module (2, 3, ...: one per module, in
 * order of first use), or 1, the Ruby program's; 0 when out of memory. */
static uint64_t pp_mapping(pp_build *b, const rbp_pframe *fr)
{
    if ((fr->d.kind != RBPEEK_FRAME_NATIVE && fr->d.kind != RBPEEK_FRAME_CFUNC) || !*fr->d.module) return 1;
    int64_t k = rbp_strtab_add(&b->modules, fr->d.module, strlen(fr->d.module));
    if (k < 0) return 0;
    if ((size_t)k == b->nmappings - 1) {
        int64_t file = pp_str(b, fr->d.module, strlen(fr->d.module));
        if (file < 0) return 0;
        PbMapping *m = &b->mappings[b->nmappings++];
        perftools__profiles__mapping__init(m);
        m->id = (uint64_t)k + 2;
        m->filename = file;
        m->has_functions = 1;   /* named by rbpeek: nothing for pprof to symbolize */
    }
    return (uint64_t)k + 2;
}

/* The function of a (name, file, start line), added at its first use: two
 * blocks of one method share a label but not a start. Its system name is
 * its name for a machine frame's symbol (pprof demangles those as it
 * does any binary's), and "" for a Ruby label: pprof takes a name that
 * differs from its system name as demangled already and shows it whole,
 * where it would otherwise read a label with "<", ">" or "::" as a C++
 * name and cut out its "<...>" and "(...)" ("block (2 levels) in <main>"
 * shown as "block  in "). NULL when out of memory. */
static PbFunction *pp_function(pp_build *b, int64_t name, int64_t file, int32_t start, bool symbol)
{
    char key[64];
    int len = snprintf(key, sizeof key, "%lld\x1f%lld\x1f%d", (long long)name, (long long)file, (int)start);
    int64_t k = rbp_strtab_add(&b->fkeys, key, (size_t)len);
    if (k < 0) return NULL;
    if ((size_t)k == b->nfunctions) {
        PbFunction *f = &b->functions[b->nfunctions++];
        perftools__profiles__function__init(f);
        f->id = (uint64_t)k + 1;
        f->name = name;
        f->system_name = symbol ? name : 0;
        f->filename = file;
        f->start_line = start;
    }
    return &b->functions[k];
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
    bool symbol = !placed && native && *fr->d.symbol;
    const char *name = placed ? rbp_pframe_label(fr) : symbol ? fr->d.symbol : b->p->names[i];
    size_t label_len = placed || symbol ? strlen(name) : b->p->name_lens[i];
    long line = placed ? fr->d.line : native ? fr->d.native_line : 0;
    int64_t fn_name = pp_str(b, name, label_len);
    int64_t fn_file = placed ? pp_str(b, fr->d.path, fr->path_len)
                      : native && *fr->d.native_file ? pp_str(b, fr->d.native_file, strlen(fr->d.native_file)) : 0;
    if (fn_name < 0 || fn_file < 0) return false;
    int32_t start = rbp_profile_start_line(b->p, i);
    PbFunction *f = pp_function(b, fn_name, fn_file, start, symbol);
    if (!f) return false;
    /* Without a noted start (stacks that came as names alone: a folded
     * file, a C method), the smallest line the function was seen at. */
    if (start <= 0 && line > 0 && (f->start_line == 0 || line < f->start_line)) f->start_line = line;
    PbLine *ln = &b->lines[i];
    perftools__profiles__line__init(ln);
    ln->function_id = f->id;
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

/* Room for one more sample of depth more location ids. */
static bool pp_sample_room(pp_build *b, uint32_t depth)
{
    if (b->nsamples == b->samples_cap) {
        size_t cap = b->samples_cap ? b->samples_cap * 2 : 256;
        size_t *no = realloc(b->loc_off, cap * sizeof *no);
        if (!no) return false;
        b->loc_off = no;
        int64_t *nv = realloc(b->values, PP_NVALUES * cap * sizeof *nv);
        if (!nv) return false;
        b->values = nv;
        b->samples_cap = cap;
    }
    if (b->pool_len + depth > b->pool_cap) {
        size_t cap = b->pool_cap ? b->pool_cap : 4096;
        while (cap < b->pool_len + depth) cap *= 2;
        uint64_t *np = realloc(b->loc_pool, cap * sizeof *np);
        if (!np) return false;
        b->loc_pool = np;
        b->pool_cap = cap;
    }
    return true;
}

/* One sample per node whose stack ends there, its locations leaf first. */
static int pp_visit(void *ctx, uint32_t node, bool entering)
{
    pp_build *b = ctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &b->p->nodes[node];
    b->path[n->depth - 1] = n->frame;
    if (n->self == 0) return 0;
    if (!pp_sample_room(b, n->depth)) {
        rbp_profile_fail(b->p, RBPEEK_ERR_NOMEM, "out of memory writing the pprof profile");
        return -1;
    }
    b->loc_off[b->nsamples] = b->pool_len;
    for (uint32_t d = n->depth; d > 0; d--) b->loc_pool[b->pool_len++] = (uint64_t)b->path[d - 1] + 1;
    int64_t *v = &b->values[PP_NVALUES * b->nsamples];
    v[PP_V_COUNT] = pp_count(n->self);
    v[PP_V_TIME] = pp_count_times(n->self, b->period);
    b->nsamples++;
    return 0;
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
    rbp_strtab_free(&b->strings);
    rbp_strtab_free(&b->fkeys);
    rbp_strtab_free(&b->modules);
    free(b->functions);
    free(b->locations);
    free(b->lines);
    free(b->line_ptrs);
    free(b->mappings);
    free(b->loc_pool);
    free(b->loc_off);
    free(b->values);
    free(b->path);
    free(b->samples);
    free(b->sample_ptrs);
    free(b->loc_ptrs);
    free(b->fn_ptrs);
    free(b->map_ptrs);
    free(b->packed);
}

static rbpeek_status pp_nomem(const pp_build *b)
{
    return rbp_profile_fail(b->p, RBPEEK_ERR_NOMEM, "out of memory writing the pprof profile");
}

/* The arrays sized by the frame table: a function, a location and a line
 * per frame at the most, a mapping per module and the program's. */
static rbpeek_status pp_alloc(pp_build *b)
{
    const rbpeek_profile *p = b->p;
    size_t nn = p->nnames ? p->nnames : 1;
    b->mappings = calloc(nn + 1, sizeof *b->mappings);
    b->nmappings = 1;   /* [0], the Ruby program's: pp_program */
    b->functions = calloc(nn, sizeof *b->functions);
    b->locations = calloc(nn, sizeof *b->locations);
    b->lines = calloc(nn, sizeof *b->lines);
    b->line_ptrs = calloc(nn, sizeof *b->line_ptrs);
    b->path = malloc(((size_t)p->max_depth + 1) * sizeof *b->path);
    b->loc_ptrs = calloc(nn, sizeof *b->loc_ptrs);
    b->fn_ptrs = calloc(nn, sizeof *b->fn_ptrs);
    bool ok = b->mappings && b->functions && b->locations && b->lines && b->line_ptrs && b->path && b->loc_ptrs &&
              b->fn_ptrs;
    return ok ? RBPEEK_OK : pp_nomem(b);
}

/* The fixed strings at their indices, then every frame's function and location. */
static rbpeek_status pp_frames(pp_build *b, bool on_cpu)
{
    static const char *const fixed[PP_S_FIXED] = {
        [PP_S_EMPTY] = "", [PP_S_SAMPLES] = "samples", [PP_S_COUNT] = "count", [PP_S_NANOSECONDS] = "nanoseconds",
    };
    for (int i = 0; i < PP_S_FIXED; i++) {
        const char *s = i == PP_S_CLOCK ? (on_cpu ? "cpu" : "wall") : fixed[i];
        if (pp_str(b, s, strlen(s)) != i) return pp_nomem(b);
    }
    for (uint32_t i = 0; i < b->p->nnames; i++)
        if (!pp_frame(b, i)) return pp_nomem(b);
    for (uint32_t i = 0; i < b->p->nnames; i++) b->loc_ptrs[i] = &b->locations[i];
    return RBPEEK_OK;
}

/* Every sample (a walk of the prefix tree), then the message's samples
 * pointing into the pools, which no longer move. */
static rbpeek_status pp_samples(pp_build *b)
{
    rbp_children ch = {0};
    rbpeek_status st = rbp_children_build(b->p, &ch);
    if (st != RBPEEK_OK) return st;
    st = rbp_profile_walk(b->p, &ch, pp_visit, b);
    rbp_children_free(&ch);
    if (st != RBPEEK_OK) return st;
    size_t n = b->nsamples ? b->nsamples : 1;
    b->samples = calloc(n, sizeof *b->samples);
    b->sample_ptrs = calloc(n, sizeof *b->sample_ptrs);
    if (!b->samples || !b->sample_ptrs) return pp_nomem(b);
    for (size_t i = 0; i < b->nsamples; i++) {
        PbSample *s = &b->samples[i];
        perftools__profiles__sample__init(s);
        size_t end = i + 1 < b->nsamples ? b->loc_off[i + 1] : b->pool_len;
        s->n_location_id = end - b->loc_off[i];
        s->location_id = b->loc_pool + b->loc_off[i];
        s->n_value = PP_NVALUES;
        s->value = b->values + PP_NVALUES * i;
        b->sample_ptrs[i] = s;
    }
    for (size_t i = 0; i < b->nfunctions; i++) b->fn_ptrs[i] = &b->functions[i];
    return RBPEEK_OK;
}

/* The title as the comment, and the mapping of the Ruby program, marked as
 * already symbolized, so that pprof names a main binary and never tries
 * to symbolize addresses. */
static rbpeek_status pp_program(pp_build *b)
{
    const char *title = rbpeek_profile_meta(b->p, "title");
    b->titled = title != NULL;
    b->comment = title ? pp_str(b, title, strlen(title)) : 0;
    const char *program = rbpeek_profile_meta(b->p, "program");
    if (!program) program = "ruby";
    int64_t program_idx = pp_str(b, program, strlen(program));
    if (b->comment < 0 || program_idx < 0) return pp_nomem(b);
    PbMapping *mapping = &b->mappings[0];
    perftools__profiles__mapping__init(mapping);
    mapping->id = 1;
    mapping->filename = program_idx;
    mapping->has_functions = mapping->has_filenames = mapping->has_line_numbers = 1;
    b->map_ptrs = calloc(b->nmappings, sizeof *b->map_ptrs);
    if (!b->map_ptrs) return pp_nomem(b);
    for (size_t i = 0; i < b->nmappings; i++) b->map_ptrs[i] = &b->mappings[i];
    return RBPEEK_OK;
}

/* The message: b's parts, the sample types by their indices, the times. */
static void pp_message(pp_build *b, const rbpeek_pprof_options *o, PbProfile *prof)
{
    static const int64_t type_name[PP_NVALUES] = {[PP_V_COUNT] = PP_S_SAMPLES, [PP_V_TIME] = PP_S_CLOCK};
    static const int64_t type_unit[PP_NVALUES] = {[PP_V_COUNT] = PP_S_COUNT, [PP_V_TIME] = PP_S_NANOSECONDS};
    for (int i = 0; i < PP_NVALUES; i++) {
        perftools__profiles__value_type__init(&b->types[i]);
        b->types[i].type = type_name[i];
        b->types[i].unit = type_unit[i];
        b->type_ptrs[i] = &b->types[i];
    }
    perftools__profiles__profile__init(prof);
    prof->n_mapping = b->nmappings;
    prof->mapping = b->map_ptrs;
    prof->n_sample_type = PP_NVALUES;
    prof->sample_type = b->type_ptrs;
    prof->n_sample = b->nsamples;
    prof->sample = b->sample_ptrs;
    prof->n_location = b->p->nnames;
    prof->location = b->loc_ptrs;
    prof->n_function = b->nfunctions;
    prof->function = b->fn_ptrs;
    prof->n_string_table = b->strings.n;
    prof->string_table = b->strings.strs;
    prof->time_nanos = o->time_nanos;
    prof->duration_nanos = o->duration_nanos;
    prof->period_type = &b->types[PP_V_TIME];
    prof->period = b->period;
    prof->default_sample_type = PP_S_CLOCK;
    if (b->titled) {
        prof->n_comment = 1;
        prof->comment = &b->comment;
    }
}

/* The message packed, gzip'd, to path. */
static rbpeek_status pp_write(pp_build *b, const PbProfile *prof, const char *path)
{
    size_t len = perftools__profiles__profile__get_packed_size(prof);
    if (!(b->packed = malloc(len ? len : 1))) return pp_nomem(b);
    if (perftools__profiles__profile__pack(prof, b->packed) != len)
        return rbp_profile_fail(b->p, RBPEEK_ERR_IO, "pprof: the profile packed to an unexpected size");
    rbpeek_status st;
    FILE *f = rbp_profile_open_out(b->p, path, &st);
    if (!f) return st;
    st = pp_gzip(b->p, f, b->packed, len);
    return rbp_profile_close_out(b->p, f, path, st);
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
    rbpeek_status st = pp_alloc(&b);
    if (st == RBPEEK_OK) st = pp_frames(&b, o.on_cpu);
    if (st == RBPEEK_OK) st = pp_samples(&b);
    if (st == RBPEEK_OK) st = pp_program(&b);
    if (st == RBPEEK_OK) {
        PbProfile prof;
        pp_message(&b, &o, &prof);
        st = pp_write(&b, &prof, path);
    }
    pp_free(&b);
    return st;
}

/*
 * Heap dump: the JSON-lines writer (heap_dump.h) and rbpeek_heap_dump,
 * which walks the heap (heap.h) and writes one line per live object in the
 * format of the target version's ObjectSpace.dump_all. Lines are built in a
 * reusable buffer and handed to stdio in large writes; a string's value is
 * read and escaped in chunks, so neither the heap nor a huge string is ever
 * held in memory whole.
 *
 * What the dump leaves out, and why, is in docs/heap.md: ROOT records (the
 * roots are the VM's and the machine stacks', not the heap's), allocation
 * file/line (only recorded with ObjectSpace.trace_object_allocations), the
 * GC "flags", and references that only a T_DATA's or an imemo's own mark
 * function knows.
 */
#include "heap/heap_dump.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "context/context.h"
#include "heap/heap.h"
#include "heap/obj.h"
#include "vm/robject.h"

enum {
    FLUSH_AT = 1 << 20,         /* pending bytes that trigger a write */
    VALUE_CHUNK = 1 << 16,      /* string bytes read per call */
    IO_BUFFER = 1 << 20,
};

void rbp_dump_writer_init(rbp_dump_writer *w, FILE *f)
{
    *w = (rbp_dump_writer){.f = f};
    rbp_sb_init(&w->line);
}

bool rbp_dump_writer_flush(rbp_dump_writer *w)
{
    if (w->line.oom) w->error = true;
    if (w->line.len && !w->error) {
        if (fwrite(w->line.buf, 1, w->line.len, w->f) != w->line.len) w->error = true;
        else w->bytes += w->line.len;
    }
    w->line.len = 0;
    if (w->line.buf) w->line.buf[0] = '\0';
    return !w->error;
}

void rbp_dump_writer_free(rbp_dump_writer *w) { rbp_sb_free(&w->line); }

static void maybe_flush(rbp_dump_writer *w)
{
    if (w->line.len >= FLUSH_AT) rbp_dump_writer_flush(w);
}

const char *rbp_dump_type_name(int type)
{
    switch (type) {
    case RBP_T_NONE: return "NONE";
    case RBP_T_NIL: return "NIL";
    case RBP_T_OBJECT: return "OBJECT";
    case RBP_T_CLASS: return "CLASS";
    case RBP_T_ICLASS: return "ICLASS";
    case RBP_T_MODULE: return "MODULE";
    case RBP_T_FLOAT: return "FLOAT";
    case RBP_T_STRING: return "STRING";
    case RBP_T_REGEXP: return "REGEXP";
    case RBP_T_ARRAY: return "ARRAY";
    case RBP_T_HASH: return "HASH";
    case RBP_T_STRUCT: return "STRUCT";
    case RBP_T_BIGNUM: return "BIGNUM";
    case RBP_T_FILE: return "FILE";
    case RBP_T_FIXNUM: return "FIXNUM";
    case RBP_T_TRUE: return "TRUE";
    case RBP_T_FALSE: return "FALSE";
    case RBP_T_DATA: return "DATA";
    case RBP_T_MATCH: return "MATCH";
    case RBP_T_SYMBOL: return "SYMBOL";
    case RBP_T_RATIONAL: return "RATIONAL";
    case RBP_T_COMPLEX: return "COMPLEX";
    case RBP_T_IMEMO: return "IMEMO";
    case RBP_T_UNDEF: return "UNDEF";
    case RBP_T_NODE: return "NODE";
    case RBP_T_ZOMBIE: return "ZOMBIE";
    default: return "UNKNOWN";
    }
}

const char *rbp_dump_imemo_name(int imemo_type, const rbp_release *rel)
{
    static const char *const names[] = {"env",  "cref", "svar", "throw_data", "ifunc",          "memo",     "ment",
                                        "iseq", "tmpbuf", "ast", "parser_strterm", "callinfo", "callcache",
                                        "constcache"};
    if (imemo_type < 0 || imemo_type > (int)rel->obj.imemo_max) return "unknown";
    return names[imemo_type];
}

/* dump_append_string_content: bytesize, capacity, value. The value is read
 * and escaped in chunks; a UTF-8 character cut by a chunk's end is carried
 * into the next, so the chunking never shows in the output. */
static void string_content(rbp_dump_writer *w, rbp_json *j, const rbp_dump_rec *r)
{
    rbp_json_ku64(j, "bytesize", r->bytesize);
    if (r->has_capacity) rbp_json_ku64(j, "capacity", r->capacity);
    if (!r->has_value) return;
    rbp_json_key(j, "value");
    rbp_json_str_open(j);
    enum { CARRY = 4 };
    char *chunk = r->bytesize ? malloc(CARRY + (r->bytesize < VALUE_CHUNK ? r->bytesize : VALUE_CHUNK)) : NULL;
    size_t carried = 0;
    for (uint64_t off = 0; chunk && off < r->bytesize; off += VALUE_CHUNK) {
        size_t n = r->bytesize - off < VALUE_CHUNK ? (size_t)(r->bytesize - off) : VALUE_CHUNK;
        if (!r->read_value || !r->read_value(r->value_ctx, off, chunk + carried, n)) break; /* keep what we have */
        size_t have = carried + n, used = rbp_json_escape_part(&w->line, chunk, have, off + n >= r->bytesize);
        carried = have - used;
        memmove(chunk, chunk + used, carried);
        maybe_flush(w);
    }
    if (carried) rbp_json_escape(&w->line, chunk, carried);   /* a read failed after a cut character */
    free(chunk);
    rbp_json_str_close(j);
}

/* Each type's fields, in dump_all's order; the release's rules decide which
 * of them its dump_all writes (R). */

/* dump_object's T_STRING: before 3.3 a broken string says so alone, from
 * 3.3 its coderange is named (and "broken" follows a broken one). */
static void write_string(rbp_dump_writer *w, rbp_json *j, const rbp_dump_rec *r, const rbp_dump_rules *R)
{
    if (r->embedded) rbp_json_kbool(j, "embedded", true);
    if (!R->coderange && r->broken) rbp_json_kbool(j, "broken", true);
    if (r->fstring) rbp_json_kbool(j, "fstring", true);
    if (R->chilled && r->chilled) rbp_json_kbool(j, "chilled", true);
    if (r->shared) rbp_json_kbool(j, "shared", true);
    else string_content(w, j, r);
    if (r->encoding) rbp_json_kstr(j, "encoding", r->encoding);
    if (R->coderange) {
        static const char *const cr[] = {"unknown", "7bit", "valid", "broken"};
        rbp_json_kstr(j, "coderange", cr[r->coderange & 3]);
        if (r->coderange == 3) rbp_json_kbool(j, "broken", true);
    }
}

/* T_ARRAY: an empty embedded Array says "embedded" from 3.3 only. */
static void write_array(rbp_json *j, const rbp_dump_rec *r, const rbp_dump_rules *R)
{
    rbp_json_ku64(j, "length", r->length);
    if (r->length > 0 && r->shared) rbp_json_kbool(j, "shared", true);
    if (r->embedded && (R->coderange || r->length > 0)) rbp_json_kbool(j, "embedded", true);
}

/* T_CLASS, T_MODULE, T_ICLASS: 3.3's variation_count, 3.0's superclass,
 * real_class_name and singleton. */
static void write_class(rbp_json *j, const rbp_dump_rec *r, const rbp_dump_rules *R)
{
    if (R->coderange && r->type == RBP_T_CLASS && r->has_variation_count)
        rbp_json_ki64(j, "variation_count", r->variation_count);
    if (R->class_fields && r->superclass) rbp_json_khex(j, "superclass", r->superclass);
    if (r->type == RBP_T_ICLASS || !r->klass) return;
    if (r->name) rbp_json_kstr(j, "name", r->name);
    else if (R->class_fields && r->real_class_name) rbp_json_kstr(j, "real_class_name", r->real_class_name);
    if (R->class_fields && r->singleton) rbp_json_kbool(j, "singleton", true);
}

/* T_FLOAT: "%g" before 3.0, dump_append_g's "%#g" after, whose printf
 * spells NaN and Inf as Ruby's own does. */
static void write_float(rbp_json *j, const rbp_dump_rec *r, const rbp_dump_rules *R)
{
    if (!r->has_float) return;
    char num[64];
    if (R->float_alt && isnan(r->float_value))
        snprintf(num, sizeof num, "NaN");
    else if (R->float_alt && isinf(r->float_value))
        snprintf(num, sizeof num, r->float_value > 0 ? "Inf" : "-Inf");
    else
        snprintf(num, sizeof num, R->float_alt ? "%#g" : "%g", r->float_value);
    rbp_json_kstr(j, "value", num);
}

/* T_OBJECT: 3.3's "embedded" and "too_complex_shape" around the ivar count. */
static void write_object(rbp_json *j, const rbp_dump_rec *r, const rbp_dump_rules *R)
{
    if (R->coderange && r->embedded) rbp_json_kbool(j, "embedded", true);
    rbp_json_ku64(j, "ivars", r->ivars);
    if (R->coderange && r->too_complex) rbp_json_kbool(j, "too_complex_shape", true);
}

static void end_line(rbp_dump_writer *w, rbp_json *j)
{
    rbp_json_object_end(j);
    rbp_sb_putn(&w->line, "\n", 1);
    maybe_flush(w);
}

void rbp_dump_write(rbp_dump_writer *w, const rbp_dump_rec *r)
{
    const rbp_dump_rules *R = &r->rel->dump;
    rbp_json jw, *j = &jw;
    rbp_json_init(j, &w->line, RBP_JSON_DUMP);
    rbp_json_object(j);
    rbp_json_khex(j, "address", r->address);
    rbp_json_kstr(j, "type", rbp_dump_type_name(r->type));
    if (R->shape_id) {
        rbp_json_ku64(j, "shape_id", r->shape_id);
        rbp_json_ku64(j, "slot_size", r->slot_size);
    }
    if (r->klass) rbp_json_khex(j, "class", r->klass);
    if (r->frozen) rbp_json_kbool(j, "frozen", true);
    switch (r->type) {
    case RBP_T_NONE:
    case RBP_T_ZOMBIE: end_line(w, j); return;   /* no references, no memsize */
    case RBP_T_IMEMO: rbp_json_kstr(j, "imemo_type", rbp_dump_imemo_name(r->imemo_type, r->rel)); break;
    case RBP_T_SYMBOL: string_content(w, j, r); break;
    case RBP_T_STRING: write_string(w, j, r, R); break;
    case RBP_T_HASH:
        rbp_json_ku64(j, "size", r->size);
        if (r->has_default) rbp_json_khex(j, "default", r->default_value);
        break;
    case RBP_T_ARRAY: write_array(j, r, R); break;
    case RBP_T_ICLASS:
    case RBP_T_CLASS:
    case RBP_T_MODULE: write_class(j, r, R); break;
    case RBP_T_DATA:
        if (r->struct_name) rbp_json_kstr(j, "struct", r->struct_name);
        break;
    case RBP_T_FLOAT: write_float(j, r, R); break;
    case RBP_T_FILE:
        if (r->has_fd) rbp_json_ki64(j, "fd", r->fd);
        break;
    case RBP_T_OBJECT: write_object(j, r, R); break;
    default: break;
    }
    if (r->nrefs) {
        rbp_json_key(j, "references");
        rbp_json_array(j);
        for (size_t i = 0; i < r->nrefs; i++) rbp_json_hex(j, r->refs[i]);
        rbp_json_array_end(j);
    }
    if (r->memsize) rbp_json_ku64(j, "memsize", r->memsize);
    end_line(w, j);
}

/* --- the dump of a live heap ----------------------------------------------- */

typedef struct dump_walk {
    rbp_heap *h;
    rbp_dump_writer w;
    uint64_t *refs;
    size_t nrefs, refs_cap;
    bool refs_oom;
    uint64_t skip_ref;      /* dump_all leaves the object's class out of its references */
    rbpeek_heap_dump_stats st;
} dump_walk;

static void collect_ref(void *ctx, uint64_t v)
{
    dump_walk *d = ctx;
    if (v == d->skip_ref) return;
    if (d->nrefs == d->refs_cap) {
        size_t cap = d->refs_cap ? d->refs_cap * 2 : 256;
        uint64_t *n = realloc(d->refs, cap * sizeof *n);
        if (!n) {
            d->refs_oom = true;
            return;
        }
        d->refs = n;
        d->refs_cap = cap;
    }
    d->refs[d->nrefs++] = v;
}

typedef struct value_src {
    rbpeek_session *s;
    uint64_t ptr;
} value_src;

static bool read_value(void *ctx, uint64_t off, void *buf, size_t n)
{
    value_src *v = ctx;
    return rbp_mem_read(v->s->mem, v->ptr + off, buf, n);
}

/* dump_all's rule for writing a string's value: an ASCII-compatible
 * encoding and 7-bit contents (from 3.3 also: not empty). The coderange
 * bits are trusted when set, else the bytes are scanned, as dump_all does. */
static bool value_written(rbp_heap *h, const rbp_str_info *si, bool *broken)
{
    *broken = si->coderange == 3;
    if (h->s->rel.dump.no_empty_value && si->len == 0) return false;
    if (!rbp_encoding_ascii_compat(h, si->encindex)) return false;
    if (si->coderange == 1) return true;
    if (si->coderange != 0) return false;
    uint8_t buf[4096];
    for (uint64_t off = 0; off < si->len; off += sizeof buf) {
        size_t n = si->len - off < sizeof buf ? (size_t)(si->len - off) : sizeof buf;
        if (!rbp_mem_read(h->s->mem, si->ptr + off, buf, n)) return false;
        for (size_t i = 0; i < n; i++)
            if (buf[i] & 0x80) return false;
    }
    return true;
}

static void string_fields(rbp_heap *h, const rbp_str_info *si, rbp_dump_rec *r, value_src *vs)
{
    bool broken = false; /* value_written is not asked for a shared string */
    r->embedded = si->embedded;
    r->fstring = si->fstring;
    r->chilled = si->chilled;
    r->shared = si->shared;
    r->bytesize = si->len;
    r->has_capacity = si->has_capa;
    r->capacity = si->capa;
    r->has_value = !si->shared && value_written(h, si, &broken);
    r->broken = broken;
    vs->s = h->s;
    vs->ptr = si->ptr;
    r->read_value = read_value;
    r->value_ctx = vs;
    r->coderange = si->coderange;
    r->encoding = NULL;
    if (si->encindex != 0) { /* ASCII-8BIT is not written */
        const char *e = rbp_encoding_name(h, si->encindex);
        r->encoding = e ? e : "(unknown encoding)";
    }
}

/* A class's or module's record: its superclass, singleton flag, 3.3's
 * variation count, and its name as the release's dump_all finds it. */
static void class_rec(rbp_heap *h, const rbp_obj *o, rbp_dump_rec *r)
{
    r->superclass = rbp_class_super(h, o);
    r->singleton = o->type == RBP_T_CLASS && (o->flags & h->c->fl_singleton);
    if (o->type == RBP_T_CLASS) {
        uint64_t vc;
        r->has_variation_count = rbp_class_variation_count(h, o, &vc);
        r->variation_count = (int)vc;
    }
    if (o->type == RBP_T_ICLASS) return;
    if (!r->rel->dump.class_fields) {
        /* 2.7: rb_class2name, the real class's path or inspect */
        uint64_t real = rbp_class_real(h, o->addr);
        r->name = real ? rbp_heap_class_name(h, real) : NULL;
        return;
    }
    /* rb_mod_name: the stored path, permanent or temporary */
    r->name = rbp_heap_class_stored_path(h, o->addr);
    if (!r->name) {
        uint64_t real = rbp_class_real(h, o->addr);
        r->real_class_name = real ? rbp_heap_class_path(h, real) : NULL;
    }
}

static bool dump_obj(void *ctx, const rbp_obj *o)
{
    dump_walk *d = ctx;
    rbp_heap *h = d->h;
    rbpeek_session *s = h->s;
    value_src vs = {0};
    rbp_str_info si;
    uint8_t sym_buf[64];
    rbp_dump_rec r = {.rel = &s->rel, .address = o->addr, .type = o->type,
                      .slot_size = o->slot_size, .frozen = (o->flags & (UINT64_C(1) << 11)) != 0,
                      .shape_id = o->flags >> 32};
    bool klass_word = o->type != RBP_T_NODE && (s->rel.dump.imemo_class_word || o->type != RBP_T_IMEMO);
    r.klass = klass_word ? o->klass : 0;
    if (!s->rel.dump.shape_id) r.shape_id = 0;
    switch (o->type) {
    case RBP_T_IMEMO:
        r.imemo_type = (int)((o->flags >> RBP_FL_USHIFT) & 0x0f);
        break;
    case RBP_T_STRING:
        if (rbp_str_info_of(h, o, &si)) string_fields(h, &si, &r, &vs);
        break;
    case RBP_T_SYMBOL: {
        uint64_t fstr = 0;
        rbp_obj so;
        if (rbp_read_field(s, o->addr, RBP_L_rsymbol_fstr, &fstr) &&
            rbp_obj_at(h, fstr, sym_buf, sizeof sym_buf, &so) && rbp_str_info_of(h, &so, &si))
            string_fields(h, &si, &r, &vs);
        break;
    }
    case RBP_T_ARRAY:
        rbp_ary_len(h, o, &r.length);
        r.shared = (o->flags & h->c->elts_shared) != 0;
        r.embedded = (o->flags & RBP_FL_USER(1)) != 0;
        break;
    case RBP_T_HASH:
        rbp_hash_size(h, o, &r.size);
        if (o->flags & RBP_FL_USER(2)) { /* RHASH_PROC_DEFAULT: the default proc in ifnone */
            r.has_default = rbp_read_field(s, o->addr, RBP_L_rhash_ifnone, &r.default_value);
        }
        break;
    case RBP_T_OBJECT:
        rbp_obj_ivar_count(h, o, &r.ivars);
        r.embedded = (o->flags & RBP_FL_USER(1)) != 0;
        r.too_complex = rbp_obj_too_complex(h, o);
        break;
    case RBP_T_DATA:
        r.struct_name = rbp_data_struct_name(h, o);
        break;
    case RBP_T_FILE:
        r.has_fd = rbp_file_fd(h, o, &r.fd);
        break;
    case RBP_T_FLOAT:
        r.has_float = rbp_float_value(h, o, &r.float_value);
        break;
    case RBP_T_CLASS:
    case RBP_T_MODULE:
    case RBP_T_ICLASS:
        class_rec(h, o, &r);
        break;
    default:
        break;
    }
    d->nrefs = 0;
    d->skip_ref = r.klass;
    if (!rbp_obj_refs(h, o, collect_ref, d)) d->st.incomplete++;
    if (d->refs_oom) return false;
    r.refs = d->refs;
    r.nrefs = d->nrefs;
    r.memsize = o->slot_size + rbp_obj_extra_bytes(h, o);
    rbp_dump_write(&d->w, &r);
    d->st.objects++;
    return !d->w.error;
}

static void dump_page(void *ctx, const rbp_heap_page *pg, const rbp_walk_page_stats *st)
{
    dump_walk *d = ctx;
    d->st.pages++;
    d->st.unreadable += st->unreadable;
}

rbpeek_status rbpeek_heap_dump(rbpeek_session *s, const char *path, rbpeek_heap_dump_stats *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!s || !path || !*path) return rbp_fail(s, RBPEEK_ERR_ARG, "heap dump: no output file given");
    rbp_heap h;
    rbpeek_status st = rbp_heap_open_checked(s, &h);
    if (st != RBPEEK_OK) return st;
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        rbp_heap_close(&h);
        return rbp_fail(s, RBPEEK_ERR_IO, "heap dump: cannot write %s: %s", path, strerror(e));
    }
    setvbuf(f, NULL, _IOFBF, IO_BUFFER);
    dump_walk d = {.h = &h};
    rbp_dump_writer_init(&d.w, f);
    d.st.unreadable = 0;
    st = rbp_heap_walk(&h, dump_obj, dump_page, &d);
    bool wrote = rbp_dump_writer_flush(&d.w);
    int close_err = fclose(f) != 0 ? errno : 0;
    if (st == RBPEEK_OK && d.refs_oom) st = rbp_fail(s, RBPEEK_ERR_NOMEM, "heap dump: out of memory");
    if (st == RBPEEK_OK && (!wrote || close_err))
        st = rbp_fail(s, RBPEEK_ERR_IO, "heap dump: writing %s failed: %s", path,
                      strerror(close_err ? close_err : EIO));
    d.st.bytes_written = d.w.bytes;
    if (out) *out = d.st;
    rbp_dump_writer_free(&d.w);
    free(d.refs);
    rbp_heap_close(&h);
    return st;
}

/*
 * Heap census: the aggregator (census.h), its text and JSON writers, and the
 * public rbpeek_heap_census, which drives the heap walker (heap.h) into the
 * aggregator. During the walk rows are keyed by the raw class pointer (one
 * hash lookup per object); names are only resolved at the end, once per
 * distinct class, which is what keeps a million-object census fast.
 */
#include "heap/census.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/arena.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "context/context.h"
#include "heap/heap.h"
#include "heap/obj.h"
#include "vm/robject.h"

enum { NTYPES = 32, MAX_SLOT_SIZES = 16 };

typedef struct klass_row {
    uint64_t klass, count, bytes, visible_bytes;
} klass_row;

typedef struct page_row {
    uint64_t header, start;
    uint32_t slot_size, slots, live, free_slots, unreadable;
} page_row;

typedef struct size_row {
    uint32_t slot_size;
    uint64_t pages, slots, live, free_slots;
} size_row;

struct rbpeek_census {
    char ruby_version[32];
    char chain_note[224];   /* "" or which chain walks were cut (rbp_heap_chain_note) */
    rbpeek_census_summary sum;
    uint64_t type_count[NTYPES], type_bytes[NTYPES];
    /* internal-type and hidden objects, grouped by type instead of class */
    uint64_t group_count[NTYPES], group_bytes[NTYPES];
    rbp_addrmap by_klass;           /* klass -> row index + 1 */
    klass_row *krows;
    size_t nkrows, krows_cap;
    page_row *pages;
    size_t npages, pages_cap;
    size_row sizes[MAX_SLOT_SIZES];
    size_t nsizes;
    /* after finish */
    rbpeek_census_class *classes;
    size_t nclasses;
    rbp_arena arena;
    bool finished;
};

static const char *const TYPE_NAMES[NTYPES] = {
    "T_NONE", "T_OBJECT", "T_CLASS", "T_MODULE", "T_FLOAT", "T_STRING", "T_REGEXP", "T_ARRAY",
    "T_HASH", "T_STRUCT", "T_BIGNUM", "T_FILE", "T_DATA", "T_MATCH", "T_COMPLEX", "T_RATIONAL",
    NULL, "T_NIL", "T_TRUE", "T_FALSE", "T_SYMBOL", "T_FIXNUM", "T_UNDEF", NULL,
    NULL, NULL, "T_IMEMO", "T_NODE", "T_ICLASS", "T_ZOMBIE", "T_MOVED", NULL,
};

const char *rbp_type_name(int type)
{
    if (type < 0 || type >= NTYPES || !TYPE_NAMES[type]) return "T_UNKNOWN";
    return TYPE_NAMES[type];
}

rbpeek_census *rbp_census_new(const char *ruby_version)
{
    rbpeek_census *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->ruby_version, sizeof c->ruby_version, "%s", ruby_version ? ruby_version : "");
    rbp_addrmap_init(&c->by_klass, (size_t)1 << 26, NULL);
    return c;
}

void rbpeek_census_free(rbpeek_census *c)
{
    if (!c) return;
    rbp_addrmap_destroy(&c->by_klass);
    free(c->krows);
    free(c->pages);
    free(c->classes);
    rbp_arena_free(&c->arena);
    free(c);
}

/* Types whose objects are not counted by class: their klass word is not a
 * class (imemo, node, zombie, moved) or they stand for another (iclass). */
static bool grouped_type(int type)
{
    return type == RBP_T_IMEMO || type == RBP_T_NODE || type == RBP_T_ZOMBIE || type == RBP_T_MOVED ||
           type == RBP_T_ICLASS || type == RBP_T_NONE;
}

bool rbp_census_add(rbpeek_census *c, int type, uint64_t klass, uint64_t bytes, bool internal)
{
    if (type < 0 || type >= NTYPES) return true;
    c->sum.live++;
    c->sum.bytes += bytes;
    if (!internal) c->sum.bytes_visible += bytes;
    c->type_count[type]++;
    c->type_bytes[type] += bytes;
    if (grouped_type(type) || klass == 0) {
        c->group_count[type]++;
        c->group_bytes[type] += bytes;
        return true;
    }
    size_t idx = (size_t)(uintptr_t)rbp_addrmap_get(&c->by_klass, klass);
    if (!idx) {
        if (c->nkrows == c->krows_cap) {
            size_t cap = c->krows_cap ? c->krows_cap * 2 : 1024;
            klass_row *r = realloc(c->krows, cap * sizeof *r);
            if (!r) return false;
            c->krows = r;
            c->krows_cap = cap;
        }
        c->krows[c->nkrows] = (klass_row){.klass = klass};
        idx = ++c->nkrows;
        if (!rbp_addrmap_put(&c->by_klass, klass, (void *)(uintptr_t)idx)) return false;
    }
    klass_row *r = &c->krows[idx - 1];
    r->count++;
    r->bytes += bytes;
    return true;
}

bool rbp_census_add_page(rbpeek_census *c, uint64_t header, uint64_t start, uint32_t slot_size, uint32_t slots,
                         uint32_t live, uint32_t free_slots, uint32_t unreadable)
{
    if (c->npages == c->pages_cap) {
        size_t cap = c->pages_cap ? c->pages_cap * 2 : 256;
        page_row *p = realloc(c->pages, cap * sizeof *p);
        if (!p) return false;
        c->pages = p;
        c->pages_cap = cap;
    }
    c->pages[c->npages++] = (page_row){header, start, slot_size, slots, live, free_slots, unreadable};
    c->sum.pages++;
    c->sum.slots += slots;
    c->sum.free_slots += free_slots;
    c->sum.unreadable += unreadable;
    size_t i = 0;
    while (i < c->nsizes && c->sizes[i].slot_size != slot_size) i++;
    if (i == c->nsizes) {
        if (c->nsizes == MAX_SLOT_SIZES) return true; /* validated sizes: can't happen */
        c->sizes[c->nsizes++] = (size_row){.slot_size = slot_size};
    }
    c->sizes[i].pages++;
    c->sizes[i].slots += slots;
    c->sizes[i].live += live;
    c->sizes[i].free_slots += free_slots;
    return true;
}

void rbp_census_set_rejected_pages(rbpeek_census *c, uint64_t n) { c->sum.rejected_pages = n; }

static int cmp_count(const void *a, const void *b)
{
    const rbpeek_census_class *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int cmp_bytes(const void *a, const void *b)
{
    const rbpeek_census_class *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return cmp_count(a, b);
}

static int cmp_size(const void *a, const void *b)
{
    const size_row *x = a, *y = b;
    return (x->slot_size > y->slot_size) - (x->slot_size < y->slot_size);
}

static const char *group_name(int type, char *buf, size_t n)
{
    switch (type) {
    case RBP_T_IMEMO: return "(internal: imemo)";
    case RBP_T_ICLASS: return "(internal: iclass)";
    case RBP_T_NODE: return "(internal: node)";
    case RBP_T_ZOMBIE: return "(zombie: awaiting finalizer)";
    case RBP_T_MOVED: return "(moved by compaction)";
    default:
        snprintf(buf, n, "(hidden %s)", rbp_type_name(type));
        return buf;
    }
}

bool rbp_census_finish(rbpeek_census *c, rbp_census_real_fn real, rbp_census_name_fn name, void *ctx)
{
    size_t cap = c->nkrows + NTYPES + 1;
    c->classes = calloc(cap, sizeof *c->classes);
    if (!c->classes) return false;
    rbp_addrmap by_real;
    rbp_addrmap_init(&by_real, (size_t)1 << 26, NULL);
    bool ok = true;
    for (size_t i = 0; i < c->nkrows && ok; i++) {
        const klass_row *r = &c->krows[i];
        uint64_t cls = real ? real(ctx, r->klass) : r->klass;
        uint64_t key = cls ? cls : 1; /* 1: the "(unknown class)" row */
        size_t idx = (size_t)(uintptr_t)rbp_addrmap_get(&by_real, key);
        if (!idx) {
            const char *nm = cls ? name(ctx, cls) : "(unknown class)";
            char *copy = rbp_arena_strdup(&c->arena, nm ? nm : "(unknown class)");
            if (!copy) {
                ok = false;
                break;
            }
            c->classes[c->nclasses] = (rbpeek_census_class){.name = copy, .address = cls};
            idx = ++c->nclasses;
            ok = rbp_addrmap_put(&by_real, key, (void *)(uintptr_t)idx);
        }
        c->classes[idx - 1].count += r->count;
        c->classes[idx - 1].bytes += r->bytes;
    }
    rbp_addrmap_destroy(&by_real);
    for (int t = 0; t < NTYPES && ok; t++) {
        if (!c->group_count[t]) continue;
        char buf[48];
        char *copy = rbp_arena_strdup(&c->arena, group_name(t, buf, sizeof buf));
        if (!copy) {
            ok = false;
            break;
        }
        c->classes[c->nclasses++] = (rbpeek_census_class){.name = copy, .count = c->group_count[t],
                                                          .bytes = c->group_bytes[t], .internal = 1};
    }
    if (!ok) return false;
    qsort(c->classes, c->nclasses, sizeof *c->classes, cmp_count);
    qsort(c->sizes, c->nsizes, sizeof *c->sizes, cmp_size);
    c->sum.nclasses = c->nclasses;
    c->finished = true;
    return true;
}

/* --- public accessors ----------------------------------------------------- */

void rbpeek_census_get_summary(const rbpeek_census *c, rbpeek_census_summary *out)
{
    if (!out) return;
    if (!c) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = c->sum;
}

uint64_t rbpeek_census_type(const rbpeek_census *c, int type, uint64_t *bytes)
{
    if (!c || type < 0 || type >= NTYPES) {
        if (bytes) *bytes = 0;
        return 0;
    }
    if (bytes) *bytes = c->type_bytes[type];
    return c->type_count[type];
}

const rbpeek_census_class *rbpeek_census_class_at(const rbpeek_census *c, size_t index)
{
    return c && index < c->nclasses ? &c->classes[index] : NULL;
}

/* --- writers -------------------------------------------------------------- */

static int cmp_ptr_count(const void *a, const void *b)
{
    return cmp_count(*(const rbpeek_census_class *const *)a, *(const rbpeek_census_class *const *)b);
}

static int cmp_ptr_bytes(const void *a, const void *b)
{
    return cmp_bytes(*(const rbpeek_census_class *const *)a, *(const rbpeek_census_class *const *)b);
}

/* Classes in the requested order, as a malloc'd array of pointers. */
static const rbpeek_census_class **ordered(const rbpeek_census *c, int by_bytes)
{
    const rbpeek_census_class **out = malloc((c->nclasses ? c->nclasses : 1) * sizeof *out);
    if (!out) return NULL;
    for (size_t i = 0; i < c->nclasses; i++) out[i] = &c->classes[i];
    qsort(out, c->nclasses, sizeof *out, by_bytes ? cmp_ptr_bytes : cmp_ptr_count);
    return out;
}

/* The census document; its line breaks are the format's (docs/heap.md). */
static void render_json(const rbpeek_census *c, const rbpeek_census_class **cls, size_t n, int by_bytes,
                        rbp_strbuf *b)
{
    const rbpeek_census_summary *s = &c->sum;
    rbp_json j;
    rbp_json_init(&j, b, RBP_JSON_SPACED);
    rbp_json_object(&j);
    rbp_json_kstr(&j, "ruby_version", c->ruby_version);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "heap");
    rbp_json_object(&j);
    rbp_json_ku64(&j, "pages", s->pages);
    rbp_json_ku64(&j, "rejected_pages", s->rejected_pages);
    rbp_json_ku64(&j, "slots", s->slots);
    rbp_json_ku64(&j, "live", s->live);
    rbp_json_ku64(&j, "free", s->free_slots);
    rbp_json_ku64(&j, "unreadable", s->unreadable);
    if (c->chain_note[0]) rbp_json_kstr(&j, "cut", c->chain_note);
    rbp_json_ws(&j, "\n  ");
    rbp_json_key(&j, "slot_sizes");
    rbp_json_array(&j);
    for (size_t i = 0; i < c->nsizes; i++) {
        const size_row *z = &c->sizes[i];
        rbp_json_object(&j);
        rbp_json_ku64(&j, "slot_size", z->slot_size);
        rbp_json_ku64(&j, "pages", z->pages);
        rbp_json_ku64(&j, "slots", z->slots);
        rbp_json_ku64(&j, "live", z->live);
        rbp_json_ku64(&j, "free", z->free_slots);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_ws(&j, "\n  ");
    rbp_json_key(&j, "page_list");
    rbp_json_array(&j);
    for (size_t i = 0; i < c->npages; i++) {
        const page_row *p = &c->pages[i];
        rbp_json_ws(&j, "\n    ");
        rbp_json_object(&j);
        rbp_json_khex(&j, "header", p->header);
        rbp_json_khex(&j, "start", p->start);
        rbp_json_ku64(&j, "slot_size", p->slot_size);
        rbp_json_ku64(&j, "slots", p->slots);
        rbp_json_ku64(&j, "live", p->live);
        rbp_json_ku64(&j, "free", p->free_slots);
        rbp_json_ku64(&j, "unreadable", p->unreadable);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "count_objects");
    rbp_json_object(&j);
    rbp_json_ku64(&j, "TOTAL", s->slots);
    rbp_json_ku64(&j, "FREE", s->free_slots);
    for (int t = 0; t < NTYPES; t++)
        if (c->type_count[t]) rbp_json_ku64(&j, rbp_type_name(t), c->type_count[t]);
    rbp_json_object_end(&j);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "types");
    rbp_json_array(&j);
    for (int t = 0; t < NTYPES; t++) {
        if (!c->type_count[t]) continue;
        rbp_json_object(&j);
        rbp_json_kstr(&j, "type", rbp_type_name(t));
        rbp_json_ku64(&j, "count", c->type_count[t]);
        rbp_json_ku64(&j, "bytes", c->type_bytes[t]);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "bytes");
    rbp_json_object(&j);
    rbp_json_ku64(&j, "total", s->bytes);
    rbp_json_ku64(&j, "memsize_of_all_comparable", s->bytes_visible);
    rbp_json_object_end(&j);
    rbp_json_ws(&j, "\n ");
    rbp_json_kstr(&j, "classes_by", by_bytes ? "bytes" : "count");
    rbp_json_ku64(&j, "classes_total", c->nclasses);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "classes");
    rbp_json_array(&j);
    for (size_t i = 0; i < n; i++) {
        const rbpeek_census_class *k = cls[i];
        rbp_json_ws(&j, "\n  ");
        rbp_json_object(&j);
        rbp_json_kstr(&j, "name", k->name);
        rbp_json_khex(&j, "address", k->address);
        rbp_json_ku64(&j, "count", k->count);
        rbp_json_ku64(&j, "bytes", k->bytes);
        rbp_json_kbool(&j, "internal", k->internal);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    rbp_sb_putn(b, "\n", 1);
}

static void human(char *buf, size_t n, uint64_t bytes)
{
    if (bytes >= (UINT64_C(1) << 30)) snprintf(buf, n, "%.1f GiB", (double)bytes / (1 << 30));
    else if (bytes >= (1 << 20)) snprintf(buf, n, "%.1f MiB", (double)bytes / (1 << 20));
    else if (bytes >= (1 << 10)) snprintf(buf, n, "%.1f KiB", (double)bytes / (1 << 10));
    else snprintf(buf, n, "%llu B", (unsigned long long)bytes);
}

static void render_text(const rbpeek_census *c, const rbpeek_census_class **cls, size_t n, int by_bytes,
                        rbp_strbuf *b)
{
    const rbpeek_census_summary *s = &c->sum;
    char h1[32], h2[32];
    rbp_sb_printf(b, "Heap: %llu pages, %llu slots: %llu live, %llu free, %llu unreadable",
                  (unsigned long long)s->pages, (unsigned long long)s->slots, (unsigned long long)s->live,
                  (unsigned long long)s->free_slots, (unsigned long long)s->unreadable);
    if (s->rejected_pages) rbp_sb_printf(b, " (%llu pages skipped: bad header)", (unsigned long long)s->rejected_pages);
    if (c->chain_note[0]) rbp_sb_printf(b, "\nCut: %s", c->chain_note);
    rbp_sb_puts(b, "\nSlot sizes:");
    for (size_t i = 0; i < c->nsizes; i++)
        rbp_sb_printf(b, "%s %u B (%llu pages, %llu live)", i ? "," : "", c->sizes[i].slot_size,
                      (unsigned long long)c->sizes[i].pages, (unsigned long long)c->sizes[i].live);
    human(h1, sizeof h1, s->bytes);
    human(h2, sizeof h2, s->bytes_visible);
    rbp_sb_printf(b, "\nBytes: %s (slots + memory objects own); %s of it in objects memsize_of_all counts\n\n", h1,
                  h2);
    rbp_sb_printf(b, "%-12s %12s %14s\n", "Type", "Count", "Bytes");
    rbp_sb_printf(b, "%-12s %12llu\n%-12s %12llu\n", "TOTAL", (unsigned long long)s->slots, "FREE",
                  (unsigned long long)s->free_slots);
    for (int t = 0; t < NTYPES; t++)
        if (c->type_count[t])
            rbp_sb_printf(b, "%-12s %12llu %14llu\n", rbp_type_name(t), (unsigned long long)c->type_count[t],
                          (unsigned long long)c->type_bytes[t]);
    rbp_sb_printf(b, "\nTop %zu classes by %s (of %zu):\n", n, by_bytes ? "bytes" : "count", c->nclasses);
    rbp_sb_printf(b, "%12s %14s  %s\n", "Count", "Bytes", "Class");
    for (size_t i = 0; i < n; i++)
        rbp_sb_printf(b, "%12llu %14llu  %s\n", (unsigned long long)cls[i]->count, (unsigned long long)cls[i]->bytes,
                      cls[i]->name);
}

rbpeek_status rbpeek_census_render(const rbpeek_census *c, rbpeek_format format, size_t top, int by_bytes,
                                   char **out)
{
    if (!c || !out || !c->finished) return RBPEEK_ERR_ARG;
    const rbpeek_census_class **cls = ordered(c, by_bytes);
    if (!cls) return RBPEEK_ERR_NOMEM;
    size_t n = top && top < c->nclasses ? top : c->nclasses;
    rbp_strbuf b;
    rbp_sb_init(&b);
    if (format == RBPEEK_FORMAT_JSON)
        render_json(c, cls, n, by_bytes, &b);
    else
        render_text(c, cls, n, by_bytes, &b);
    free(cls);
    if (b.oom) {
        rbp_sb_free(&b);
        return RBPEEK_ERR_NOMEM;
    }
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : RBPEEK_ERR_NOMEM;
}

/* --- the census of a live heap ------------------------------------------- */

typedef struct census_walk {
    rbp_heap *h;
    rbpeek_census *c;
    bool oom;
} census_walk;

static bool census_obj(void *ctx, const rbp_obj *o)
{
    census_walk *w = ctx;
    uint64_t bytes = o->slot_size + rbp_obj_extra_bytes(w->h, o);
    if (!rbp_census_add(w->c, o->type, o->klass, bytes, rbp_obj_internal(w->h, o))) {
        w->oom = true;
        return false;
    }
    return true;
}

static void census_page(void *ctx, const rbp_heap_page *pg, const rbp_walk_page_stats *st)
{
    census_walk *w = ctx;
    if (!rbp_census_add_page(w->c, pg->header, pg->start, pg->slot_size, pg->total_slots, st->live, st->free,
                             st->unreadable))
        w->oom = true;
}

static uint64_t real_cb(void *ctx, uint64_t klass) { return rbp_class_real(ctx, klass); }
static const char *name_cb(void *ctx, uint64_t cls) { return rbp_heap_class_name(ctx, cls); }

rbpeek_status rbpeek_heap_census(rbpeek_session *s, rbpeek_census **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "heap census: no session or no output");
    *out = NULL;
    rbp_heap h;
    rbpeek_status st = rbp_heap_open_checked(s, &h);
    if (st != RBPEEK_OK) return st;
    rbpeek_census *c = rbp_census_new(s->ruby_version);
    if (!c) {
        rbp_heap_close(&h);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "heap census: out of memory");
    }
    rbp_census_set_rejected_pages(c, h.rejected);
    census_walk w = {&h, c, false};
    st = rbp_heap_walk(&h, census_obj, census_page, &w);
    if (st == RBPEEK_OK && (w.oom || !rbp_census_finish(c, real_cb, name_cb, &h)))
        st = rbp_fail(s, RBPEEK_ERR_NOMEM, "heap census: out of memory");
    if (h.chain_cuts) /* a class chain that loops: its classes' names are partial */
        snprintf(c->chain_note, sizeof c->chain_note, "%llu chain walk%s stopped, first %s; those classes' names "
                 "are partial", (unsigned long long)h.chain_cuts, h.chain_cuts == 1 ? "" : "s", rbp_heap_chain_note(&h));
    rbp_heap_close(&h);
    if (st != RBPEEK_OK) {
        rbpeek_census_free(c);
        return st;
    }
    *out = c;
    return RBPEEK_OK;
}

/*
 * Before a census or a dump: do the object members the layout gives decode
 * on this heap? The page walk checks the GC's own members (heap.c); the
 * decoders also read members of classes and hashes that come, for the
 * lines no build of ours covers, from worked-out supplements
 * (layouts/lines/3.2.layout). Those are checked here on the first classes
 * and Hashes of the heap, against what every Ruby keeps: a class's method
 * table is an id table of method entries, a Hash's st_table or ar_table
 * reads as one. When most of the sample does not decode, the members are
 * misplaced, and the layout is refused in the one line attach uses, rather
 * than the census counting from garbage.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/validate.h"

enum {
    SAMPLE = 64,              /* classes, and Hashes, looked at */
    SAMPLE_PAGES = 256,       /* pages looked through for them, at most */
    IMEMO_MENT = 6,           /* imemo_type of rb_method_entry_t, 2.7-4.0 */
    MAX_METHODS = 1 << 16,    /* entries of one method table looked at */
};

typedef struct sample {
    rbp_heap *h;
    int classes, classes_bad, hashes, hashes_bad, pages;
} sample;

typedef struct ment_count {
    rbpeek_session *s;
    uint64_t seen, bad;
} ment_count;

static void ment_cb(void *ctx, uint64_t v)
{
    ment_count *m = ctx;
    if (++m->seen > MAX_METHODS) return;
    if (rbp_imemo_type(m->s, v) != IMEMO_MENT) m->bad++;
}

/* A class's method table: absent, or an id table whose every value is a
 * method entry. */
static bool class_decodes(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext = 0;
    if (!rbp_classext(h, o, &ext)) return false;
    uint64_t tbl = rbp_class_m_tbl(h, o, ext);
    if (!tbl) return true;
    ment_count m = {h->s, 0, 0};
    return rbp_id_table_each(h, tbl, ment_cb, &m) && m.bad == 0;
}

static void pair_cb(void *ctx, uint64_t key, uint64_t val) { (void)ctx, (void)key, (void)val; }

static bool hash_decodes(rbp_heap *h, const rbp_obj *o)
{
    uint64_t tab = 0, size = 0;
    bool st = false;
    if (!rbp_hash_table(h, o, &tab, &st)) return false;
    if (st) {
        rbp_st_hdr t;
        return rbp_st_read(h, o, tab, &t) && t.num_entries <= t.bound - t.start;
    }
    /* an ar table: size <= bound <= 8 in the flags, and its pairs readable */
    uint64_t bound = (o->flags >> (RBP_FL_USHIFT + 8)) & 0xf;
    if (!rbp_hash_size(h, o, &size) || size > bound || bound > 8) return false;
    return (size == 0 && !tab) || rbp_ar_each(h, o, tab, pair_cb, NULL);
}

static bool sample_obj(void *ctx, const rbp_obj *o)
{
    sample *sm = ctx;
    if ((o->type == RBP_T_CLASS || o->type == RBP_T_MODULE) && sm->classes < SAMPLE) {
        sm->classes++;
        sm->classes_bad += !class_decodes(sm->h, o);
    } else if (o->type == RBP_T_HASH && sm->hashes < SAMPLE) {
        sm->hashes++;
        sm->hashes_bad += !hash_decodes(sm->h, o);
    }
    return (sm->classes < SAMPLE || sm->hashes < SAMPLE) && sm->pages < SAMPLE_PAGES;
}

static void sample_page(void *ctx, const rbp_heap_page *pg, const rbp_walk_page_stats *st)
{
    (void)pg, (void)st;
    ((sample *)ctx)->pages++;
}

rbpeek_status rbp_heap_check_decoders(rbp_heap *h)
{
    sample sm = {.h = h};
    rbpeek_status st = rbp_heap_walk(h, sample_obj, sample_page, &sm);
    if (st != RBPEEK_OK) return st;
    char why[160];
    if (sm.classes_bad * 2 > sm.classes) {
        snprintf(why, sizeof why, "heap: the method tables of %d of the first %d classes do not decode",
                 sm.classes_bad, sm.classes);
        return rbp_layout_misfit(h->s, why);
    }
    if (sm.hashes_bad * 2 > sm.hashes) {
        snprintf(why, sizeof why, "heap: the tables of %d of the first %d Hashes do not decode", sm.hashes_bad,
                 sm.hashes);
        return rbp_layout_misfit(h->s, why);
    }
    return RBPEEK_OK;
}

rbpeek_status rbp_heap_open_checked(rbpeek_session *s, rbp_heap *h)
{
    rbpeek_status st = rbp_heap_open(s, h);
    if (st != RBPEEK_OK) return st;
    if ((st = rbp_heap_check_decoders(h)) != RBPEEK_OK) rbp_heap_close(h);
    return st;
}

/*
 * The heap walker (see heap.h): finds the objspace, lists its heap pages
 * from the table the GC keeps sorted by address (heap_pages.sorted; an
 * rb_darray from 3.4; found by its pages when the layout's place for it
 * holds none), and walks them. Each page is read in one call of its
 * whole aligned body (16 KiB before 3.2, 64 KiB after), which a memory
 * source serves in one read; slots are then decoded from that local copy.
 *
 * Using the sorted table rather than the per-size-pool page lists means no
 * linked list is followed, so a damaged list can't make the walk loop; the
 * table itself is bounded, each header is checked against the page geometry
 * and against its body, which points back to it, and pages that overlap an
 * earlier one are dropped.
 */
#include "heap/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/robject.h"
#include "vm/validate.h"

enum {
    MAX_PAGES = 1 << 22,        /* 256 GiB of 64 KiB pages: far beyond real heaps */
    MIN_SLOT = 16,
    MAX_SLOT = 4096,
    HEADER_BYTES = 64,          /* enough for every heap_page field we read */
    PROBE_PAGES = 16,           /* pages a candidate page table must show to be believed */
    OBJSPACE_SCAN = 4096,       /* bytes of rb_objspace searched for the page table */
};

static int cmp_page(const void *a, const void *b)
{
    const rbp_heap_page *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The release's object rules, with what the layout says of shapes. */
static void set_consts(rbp_heap *h)
{
    h->c = &h->s->rel.obj;
    h->shapes = h->c->shapes && rbp_has(&h->s->layout, RBP_L_shape_next_iv_index);
}

/* The shape table, when this Ruby has one: in the VM in 3.2
 * (vm->shape_list), behind the rb_shape_tree_ptr symbol from 3.3. */
static void find_shapes(rbp_heap *h)
{
    rbpeek_session *s = h->s;
    const rbp_layout *L = &s->layout;
    uint64_t sym = 0, tree = 0, list = 0;
    if (!h->shapes) return;
    if (rbp_has(L, RBP_L_vm_shape_list)) {
        if (rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(L, RBP_L_vm_shape_list), &list) && list) h->shape_list = list;
        return;
    }
    if (!rbp_has(L, RBP_L_shape_tree_list)) return;
    if (!rbp_symbol_lookup(s, "rb_shape_tree_ptr", &sym, NULL)) return;
    if (rbp_mem_u64(s->mem, sym, &tree) && tree &&
        rbp_mem_u64(s->mem, tree + (uint64_t)rbp_off(L, RBP_L_shape_tree_list), &list))
        h->shape_list = list;
}

static bool read_u(rbpeek_session *s, const uint8_t *hdr, rbp_field_id id, uint64_t *out)
{
    if (!rbp_has(&s->layout, id)) return false;
    const rbp_field *f = &s->layout.f[id];
    if (f->offset < 0 || f->offset + (f->size > 0 ? f->size : 8) > HEADER_BYTES) return false;
    *out = rbp_field_extract(&s->layout, id, hdr);
    if (f->size > 0 && f->size < 8) *out &= (UINT64_C(1) << (8 * f->size)) - 1;
    return true;
}

/* 3.4+ (the modular GC's default): a page names its rb_heap_t, which is
 * one of the objspace's heaps[] and has the page's slot size. True when
 * the layout can't tell (earlier versions, or members it lacks). */
static bool page_in_its_heap(rbp_heap *h, const uint8_t *hdr, uint64_t slot)
{
    rbpeek_session *s = h->s;
    const rbp_layout *L = &s->layout;
    uint64_t heap = 0, heap_slot = 0;
    if (!rbp_has(L, RBP_L_page_heap) || !rbp_has(L, RBP_L_objspace_heaps) || !rbp_has(L, RBP_L_gc_heap_slot_size))
        return true;
    uint64_t first = h->objspace + (uint64_t)rbp_off(L, RBP_L_objspace_heaps);
    uint64_t end = first + (uint64_t)(L->f[RBP_L_objspace_heaps].size > 0 ? L->f[RBP_L_objspace_heaps].size : 0);
    if (!read_u(s, hdr, RBP_L_page_heap, &heap) || heap < first || heap >= end) return false;
    return rbp_read_field(s, heap, RBP_L_gc_heap_slot_size, &heap_slot) && heap_slot == slot;
}

/* Reads and checks one page header; false if it doesn't describe a page:
 * its slots must fit its aligned body, and the body must begin with the
 * heap_page_header that points back to this header (GET_HEAP_PAGE, the
 * same in every version). A body that can't be read is kept (its slots
 * count unreadable); a body that reads otherwise says the header's members
 * are not where the layout puts them. */
static bool read_page(rbp_heap *h, uint64_t header, uint32_t default_slot, rbp_heap_page *out)
{
    rbpeek_session *s = h->s;
    uint8_t hdr[HEADER_BYTES];
    uint64_t start = 0, total = 0, slot = default_slot;
    if (!header || (header & 7) || !rbp_mem_read(s->mem, header, hdr, sizeof hdr)) return false;
    if (!read_u(s, hdr, RBP_L_page_start, &start) || !read_u(s, hdr, RBP_L_page_total_slots, &total)) return false;
    if (rbp_has(&s->layout, RBP_L_page_slot_size) && !read_u(s, hdr, RBP_L_page_slot_size, &slot)) return false;
    if (slot < MIN_SLOT || slot > MAX_SLOT || (slot & 7) || total == 0 || !start || (start & 7)) return false;
    uint64_t body = start & ~(uint64_t)(h->page_align - 1), back = 0;
    if (start + total * slot > body + h->page_align) return false;
    if (rbp_mem_u64(s->mem, body, &back) && back != header) return false;
    if (!page_in_its_heap(h, hdr, slot)) return false;
    *out = (rbp_heap_page){header, start, (uint32_t)slot, (uint32_t)total};
    return true;
}

/* A page table that holds pages: its count is plausible and a sample of
 * its entries, spread over it, are headers of pages keeping the GC's
 * invariants (read_page). A pair of words that passes this by chance is
 * not plausible. */
static bool table_holds_pages(rbp_heap *h, uint64_t table, uint64_t count, uint32_t default_slot)
{
    if (!table || (table & 7) || count == 0 || count > MAX_PAGES) return false;
    uint64_t step = count > PROBE_PAGES ? count / PROBE_PAGES : 1;
    for (uint64_t i = 0; i < count; i += step) {
        uint64_t header = 0;
        rbp_heap_page pg;
        if (!rbp_mem_u64(h->s->mem, table + i * 8, &header) || !read_page(h, header, default_slot, &pg)) return false;
    }
    return true;
}

/* The heap page table of the objspace (before 3.4, where it is a
 * {sorted, allocated_pages} pair of heap_pages): where the layout puts it,
 * or, when what is there holds no pages, the one pair of words in the
 * objspace's first bytes that does. rb_objspace is gc.c's private struct,
 * so a patch release can move it, and for a line no build of ours covers
 * (3.2) its place is worked out, not measured; the pages themselves settle
 * it. Records in s->layout_checks where the table was found. */
static bool find_page_table(rbp_heap *h, uint32_t default_slot, uint64_t *table, uint64_t *count)
{
    rbpeek_session *s = h->s;
    const rbp_layout *L = &s->layout;
    int32_t want = rbp_off(L, RBP_L_objspace_pages_sorted);
    int32_t gap = rbp_has(L, RBP_L_objspace_pages_allocated) ? rbp_off(L, RBP_L_objspace_pages_allocated) - want : 8;
    if (gap != 8) return false; /* every version keeps allocated_pages right after sorted */
    uint8_t os[OBJSPACE_SCAN + 8];
    size_t got = rbp_mem_read_partial(s->mem, h->objspace, os, sizeof os);
    for (size_t off = 0; off + 16 <= got; off += 8) {
        uint64_t t, n;
        memcpy(&t, os + off, 8);
        memcpy(&n, os + off + 8, 8);
        if ((int32_t)off == want || !table_holds_pages(h, t, n, default_slot)) continue;
        *table = t;
        *count = n;
        char note[96];
        snprintf(note, sizeof note, "; the GC's heap page table found at objspace+%zu (the layout said +%d)", off,
                 want);
        size_t len = strlen(s->layout_checks);
        if (!strstr(s->layout_checks, note)) /* once per session, not once per command */
            snprintf(s->layout_checks + len, sizeof s->layout_checks - len, "%s", note);
        return true;
    }
    return false;
}

bool rbp_heap_page_table_read(rbpeek_session *s, uint64_t objspace, uint64_t *table, uint64_t *count)
{
    const rbp_layout *L = &s->layout;
    *table = *count = 0;
    if (!rbp_has(L, RBP_L_objspace_pages_sorted) ||
        !rbp_mem_u64(s->mem, objspace + (uint64_t)rbp_off(L, RBP_L_objspace_pages_sorted), table))
        return false;
    if (s->rel.gc.pages_darray) {
        /* rb_darray: {size_t size; size_t capa;} then the elements */
        if (!*table || !rbp_mem_u64(s->mem, *table, count)) return false;
        *table += 16;
        return true;
    }
    return rbp_has(L, RBP_L_objspace_pages_allocated) &&
           rbp_mem_u64(s->mem, objspace + (uint64_t)rbp_off(L, RBP_L_objspace_pages_allocated), count);
}

/* The objspace and its heap page table (*table, *count pages), checked
 * for plausibility: an error (a misfit of the layout) when there is none. */
static rbpeek_status heap_page_table(rbp_heap *h, rbp_field_id osf, uint32_t default_slot, uint64_t *table,
                                     uint64_t *count)
{
    rbpeek_session *s = h->s;
    char why[160];
    if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(&s->layout, osf), &h->objspace) ||
        !rbp_is_heap_ptr(s, h->objspace))
        return rbp_fail(s, RBPEEK_ERR_READ, "heap: cannot read the objspace pointer of the VM at 0x%llx",
                        (unsigned long long)s->vm);
    if (!rbp_heap_page_table_read(s, h->objspace, table, count))
        return rbp_fail(s, RBPEEK_ERR_READ, "heap: cannot read the heap page table of the objspace at 0x%llx",
                        (unsigned long long)h->objspace);
    if (!s->rel.gc.pages_darray) {
        if (!table_holds_pages(h, *table, *count, default_slot))
            find_page_table(h, default_slot, table, count); /* else the checks below refuse the layout */
        if (!*table) {
            snprintf(why, sizeof why, "heap: no heap page table in the objspace at 0x%llx",
                     (unsigned long long)h->objspace);
            return rbp_layout_misfit(s, why);
        }
    }
    if (*count == 0 || *count > MAX_PAGES) {
        /* The page table and its count are read from members no stack walk
         * touched: a count like this says the GC's members are misplaced. */
        snprintf(why, sizeof why, "heap: implausible heap page count %llu (objspace at 0x%llx)",
                 (unsigned long long)*count, (unsigned long long)h->objspace);
        return rbp_layout_misfit(s, why);
    }
    return RBPEEK_OK;
}

/* The pages the table lists, into h->pages; *broken counts those whose
 * header breaks an invariant, as opposed to NULL or listed twice. */
static rbpeek_status heap_read_pages(rbp_heap *h, uint64_t table, uint64_t count, uint32_t default_slot,
                                     size_t *broken)
{
    rbpeek_session *s = h->s;
    uint64_t *ptrs = malloc(count * sizeof *ptrs);
    h->pages = malloc(count * sizeof *h->pages);
    if (!ptrs || !h->pages) {
        free(ptrs);
        rbp_heap_close(h);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "heap: out of memory for %llu pages", (unsigned long long)count);
    }
    if (!rbp_mem_read(s->mem, table, ptrs, count * sizeof *ptrs)) {
        free(ptrs);
        rbp_heap_close(h);
        return rbp_fail(s, RBPEEK_ERR_READ, "heap: cannot read the table of %llu heap pages at 0x%llx",
                        (unsigned long long)count, (unsigned long long)table);
    }
    h->listed = count;
    for (size_t i = 0; i < count; i++) {
        if (read_page(h, ptrs[i], default_slot, &h->pages[h->npages])) {
            h->npages++;
        } else {
            h->rejected++;
            *broken += ptrs[i] != 0;
        }
    }
    free(ptrs);
    return RBPEEK_OK;
}

/* Sorts the pages and drops a page that overlaps its predecessor: two
 * headers can't own the same slots, so one of them is garbage (or listed
 * twice). */
static void heap_drop_overlaps(rbp_heap *h, size_t *broken)
{
    qsort(h->pages, h->npages, sizeof *h->pages, cmp_page);
    size_t keep = 0;
    for (size_t i = 0; i < h->npages; i++) {
        const rbp_heap_page *p = &h->pages[i];
        if (keep) {
            const rbp_heap_page *q = &h->pages[keep - 1];
            if (p->start < q->start + (uint64_t)q->total_slots * q->slot_size) {
                h->rejected++;
                *broken += p->header != q->header;
                continue;
            }
        }
        h->pages[keep++] = *p;
    }
    h->npages = keep;
}

rbpeek_status rbp_heap_open(rbpeek_session *s, rbp_heap *h)
{
    memset(h, 0, sizeof *h);
    h->ref_budget = RBP_HEAP_REF_BUDGET;
    h->chain_budget = RBP_HEAP_CHAIN_BUDGET;
    rbp_recguard_init(&h->naming, RBP_HEAP_NAMING_DEPTH, &h->chain_budget);
    h->s = s;
    if (!s || !s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "heap: attach to a Ruby first");
    const rbp_layout *L = &s->layout;
    rbp_field_id osf = rbp_has(L, RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
    if (!rbp_has(L, osf) || !rbp_has(L, RBP_L_objspace_pages_sorted) || !rbp_has(L, RBP_L_page_start) ||
        !rbp_has(L, RBP_L_page_total_slots))
        return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                        "heap: the struct layout (%s) lacks the GC's heap page fields; use a layout made "
                        "from this Ruby's DWARF (rbpeek-layoutgen) or one from a newer rbpeek",
                        s->layout_source);
    set_consts(h);
    h->page_align = h->c->page_align;
    uint32_t default_slot = rbp_has(L, RBP_L_rvalue_size) && L->f[RBP_L_rvalue_size].size > 0
                                ? (uint32_t)L->f[RBP_L_rvalue_size].size
                                : 40;
    uint64_t table = 0, count = 0;
    size_t broken = 0;
    rbpeek_status st = heap_page_table(h, osf, default_slot, &table, &count);
    if (st == RBPEEK_OK) st = heap_read_pages(h, table, count, default_slot, &broken);
    if (st != RBPEEK_OK) return st;
    heap_drop_overlaps(h, &broken);
    /* Every page Ruby lists keeps the invariants read_page checks; a
     * corrupt heap may break a few, but a majority broken means the page
     * members are not where the layout says. */
    if (h->npages == 0 || broken > h->npages) {
        char why[160];
        snprintf(why, sizeof why, "heap: %llu of the %llu listed heap pages break the GC's page invariants",
                 (unsigned long long)(h->npages ? broken : h->rejected), (unsigned long long)count);
        rbp_heap_close(h);
        return rbp_layout_misfit(s, why);
    }
    rbp_addrmap_init(&h->klass_ok, (size_t)1 << 24, NULL);
    rbp_addrmap_init(&h->names, (size_t)1 << 24, free);
    rbp_addrmap_init(&h->real, (size_t)1 << 24, NULL);
    find_shapes(h);
    return RBPEEK_OK;
}

rbp_walkguard rbp_heap_chain_guard(rbp_heap *h, size_t limit)
{
    return rbp_walkguard_start(limit, &h->chain_budget);
}

static bool chain_cut(rbp_heap *h, rbp_walk_verdict v, const char *what, uint64_t from, const char *why)
{
    if (v == RBP_WALK_OK) return true;
    h->chain_last = v;
    if (!h->chain_cuts++)
        snprintf(h->chain_cut, sizeof h->chain_cut, "%s of 0x%llx: %s", what, (unsigned long long)from, why);
    return false;
}

bool rbp_heap_chain_step(rbp_heap *h, rbp_walkguard *g, uint64_t node, const char *what, uint64_t from)
{
    rbp_walk_verdict v = rbp_walkguard_step(g, node);
    return chain_cut(h, v, what, from, rbp_walk_verdict_str(v));
}

bool rbp_heap_rec_enter(rbp_heap *h, rbp_recguard *g, uint64_t node, const char *what, uint64_t from)
{
    rbp_walk_verdict v = rbp_rec_enter(g, node);
    return chain_cut(h, v, what, from, v == RBP_WALK_BUDGET ? rbp_walk_verdict_str(v) : rbp_rec_verdict_str(v));
}

const char *rbp_heap_chain_note(rbp_heap *h) { return h->chain_cuts ? h->chain_cut : ""; }

void rbp_heap_close(rbp_heap *h)
{
    if (!h) return;
    /* A walk cut inside a decoder leaves names or fields out: say so once
     * on the session's warning line, whatever command it was. */
    if (h->chain_cuts && h->s)
        rbp_warn(h->s, "cut: %llu chain walk%s stopped, first %s (the result is partial)",
                 (unsigned long long)h->chain_cuts, h->chain_cuts == 1 ? "" : "s", h->chain_cut);
    h->chain_cuts = 0;
    free(h->pages);
    h->pages = NULL;
    h->npages = 0;
    rbp_addrmap_destroy(&h->klass_ok);
    rbp_addrmap_destroy(&h->names);
    rbp_addrmap_destroy(&h->real);
    free(h->encs); /* the encoding table (obj_string.c): one plain array */
    h->encs = NULL;
}

const rbp_heap_page *rbp_heap_page_of(const rbp_heap *h, uint64_t addr)
{
    size_t lo = 0, hi = h->npages;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rbp_heap_page *p = &h->pages[mid];
        if (addr < p->start)
            hi = mid;
        else if (addr >= p->start + (uint64_t)p->total_slots * p->slot_size)
            lo = mid + 1;
        else
            return p;
    }
    return NULL;
}

bool rbp_heap_is_slot(const rbp_heap *h, uint64_t v)
{
    const rbp_heap_page *p = rbp_heap_page_of(h, v);
    return p && (v - p->start) % p->slot_size == 0;
}

bool rbp_obj_at(rbp_heap *h, uint64_t addr, uint8_t *buf, size_t bufsize, rbp_obj *o)
{
    const rbp_heap_page *pg = rbp_heap_page_of(h, addr);
    if (!pg || (addr - pg->start) % pg->slot_size) return false;
    size_t n = pg->slot_size < bufsize ? pg->slot_size : bufsize;
    if (!rbp_mem_read(h->s->mem, addr, buf, n)) return false;
    *o = (rbp_obj){.addr = addr, .slot = buf, .slot_size = (uint32_t)n};
    memcpy(&o->flags, buf, 8);
    memcpy(&o->klass, buf + 8, 8);
    o->type = (int)(o->flags & RBP_T_MASK);
    return o->flags != 0;
}

/* A class pointer is believable when it is a slot of this heap holding a
 * class (or, for an iclass, the module it stands for). */
static bool klass_valid(rbp_heap *h, uint64_t klass, int type)
{
    void *hit = rbp_addrmap_get(&h->klass_ok, klass);
    int kt;
    if (hit) {
        kt = (int)(uintptr_t)hit - 1;
    } else {
        uint64_t flags = 0;
        kt = rbp_heap_is_slot(h, klass) && rbp_mem_u64(h->s->mem, klass, &flags) ? (int)(flags & RBP_T_MASK) : 0x1f;
        rbp_addrmap_put(&h->klass_ok, klass, (void *)(uintptr_t)(kt + 1));
    }
    return kt == RBP_T_CLASS || (type == RBP_T_ICLASS && kt == RBP_T_MODULE);
}

int rbp_heap_classify(rbp_heap *h, const uint8_t *slot, uint32_t slot_size)
{
    uint64_t flags, klass;
    memcpy(&flags, slot, 8);
    if (flags == 0) return -1;
    int t = (int)(flags & RBP_T_MASK);
    switch (t) {
    case RBP_T_IMEMO:
        /* no class pointer to check; the imemo type must exist */
        return ((flags >> RBP_FL_USHIFT) & 0x0f) <= h->c->imemo_max ? t : -2;
    case RBP_T_ZOMBIE:
    case RBP_T_MOVED:
        /* make_zombie and gc_move leave only the type and a few GC bits */
        return (flags & ~UINT64_C(0xfff)) == 0 ? t : -2;
    case RBP_T_NODE:
        return -2; /* AST nodes have not lived in the object heap since 2.5 */
    case RBP_T_OBJECT: case RBP_T_CLASS: case RBP_T_MODULE: case RBP_T_FLOAT: case RBP_T_STRING:
    case RBP_T_REGEXP: case RBP_T_ARRAY: case RBP_T_HASH: case RBP_T_STRUCT: case RBP_T_BIGNUM:
    case RBP_T_FILE: case RBP_T_DATA: case RBP_T_MATCH: case RBP_T_COMPLEX: case RBP_T_RATIONAL:
    case RBP_T_SYMBOL: case RBP_T_ICLASS:
        break;
    default:
        return -2; /* T_NONE with flags, immediates' types, unused numbers */
    }
    if (slot_size < 16) return -2;
    memcpy(&klass, slot + 8, 8);
    if (klass == 0) return t; /* hidden object */
    return klass_valid(h, klass, t) ? t : -2;
}

rbpeek_status rbp_heap_walk(rbp_heap *h, rbp_obj_fn fn, rbp_page_fn page_fn, void *ctx)
{
    uint8_t *buf = malloc(h->page_align);
    if (!buf) return rbp_fail(h->s, RBPEEK_ERR_NOMEM, "heap: out of memory");
    for (size_t i = 0; i < h->npages; i++) {
        const rbp_heap_page *pg = &h->pages[i];
        uint64_t body = pg->start & ~(uint64_t)(h->page_align - 1);
        /* One read of the whole page body: the memory source gets it in one call. */
        size_t got = rbp_mem_read_partial(h->s->mem, body, buf, h->page_align);
        rbp_walk_page_stats st = {0};
        bool go = true;
        for (uint32_t k = 0; k < pg->total_slots && go; k++) {
            size_t off = (size_t)(pg->start - body) + (size_t)k * pg->slot_size;
            if (off + pg->slot_size > got) { /* this slot and every one after it: read no further */
                st.unreadable += pg->total_slots - k;
                break;
            }
            const uint8_t *slot = buf + off;
            int t = rbp_heap_classify(h, slot, pg->slot_size);
            if (t == -1) {
                st.free++;
                continue;
            }
            if (t == -2) {
                st.unreadable++;
                continue;
            }
            st.live++;
            rbp_obj o = {.addr = pg->start + (uint64_t)k * pg->slot_size, .slot = slot,
                         .slot_size = pg->slot_size, .type = t};
            memcpy(&o.flags, slot, 8);
            memcpy(&o.klass, slot + 8, 8);
            if (fn) go = fn(ctx, &o);
        }
        if (page_fn) page_fn(ctx, pg, &st);
        if (!go) break;
    }
    free(buf);
    return RBPEEK_OK;
}

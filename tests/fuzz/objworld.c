/*
 * The object builder's world (objbuild.h): the heap pages of its own and
 * the arena the image gets once, registered in the GC's page table so
 * rbpeek takes them for heap pages, and the pools an input's objects take
 * their classes, real objects, Symbols, iseqs, method entries, shapes and
 * rb_data_type_t's from, all found on the pristine image.
 */
#include "objbuild_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "heap/obj_internal.h"
#include "ops.h"
#include "vm/robject.h"

static const char *const ROLE[C_NROLES] = {
    "String", "Symbol", "Float", "Integer", "Rational", "Complex", "Array", "Hash", "Struct", "Range", "Object",
    "Proc", "Method", "UnboundMethod", "Time", "Regexp", "Point", "Holder", "RuntimeError", "Exception", "Data",
    "Encoding", "BasicObject", "Kernel", "Comparable",
};

/* Room for the pages, their headers, the page table and the arena: below
 * the image's lowest page, where nothing of it lies. */
static uint64_t find_room(const image *img, uint64_t span, uint32_t align)
{
    uint64_t low = img->pages[0].addr;
    for (uint64_t base = ((low - span) & ~(uint64_t)(align - 1)) - ((uint64_t)16 << 20); base > ((uint64_t)1 << 32);
         base -= (uint64_t)16 << 20) {
        bool clear = true;
        for (size_t i = 0; i < img->npages && clear; i++)
            clear = img->pages[i].addr + IMG_PAGE <= base || img->pages[i].addr >= base + span;
        if (clear) return base;
    }
    return 0;
}

/* The bytes of a heap_page header rbpeek reads: past its last member. */
static size_t header_len(const ob_world *w)
{
    static const rbp_field_id F[] = {
        RBP_L_page_start, RBP_L_page_total_slots, RBP_L_page_slot_size, RBP_L_page_free_slots,
        RBP_L_page_heap, RBP_L_page_freelist, RBP_L_page_final_slots, RBP_L_page_pinned_slots,
        RBP_L_page_wb_unprotected_bits, RBP_L_page_mark_bits, RBP_L_page_uncollectible_bits,
        RBP_L_page_marking_bits, RBP_L_page_remembered_bits, RBP_L_page_pinned_bits, RBP_L_page_age_bits,
    };
    size_t len = 64;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        const rbp_field *f = &LY(w)->f[F[i]];
        if (f->offset >= 0 && (size_t)f->offset + (size_t)(f->size > 0 ? f->size : 8) > len)
            len = (size_t)f->offset + (size_t)(f->size > 0 ? f->size : 8);
    }
    return len < HEADER_MAX ? len : HEADER_MAX;
}

typedef struct pool_walk {
    ob_world *w;
    rbp_heap *h;
    size_t seen[32], kept[32], classes_seen;
} pool_walk;

static bool pool_obj(void *ctx, const rbp_obj *o)
{
    pool_walk *pw = ctx;
    ob_world *w = pw->w;
    rbp_heap *h = pw->h;
    if (o->type == RBP_T_CLASS || o->type == RBP_T_MODULE) {
        const char *path = rbp_heap_class_path(h, o->addr);
        bool role = false;
        for (int i = 0; path && i < C_NROLES; i++)
            if (!w->cls[i] && strcmp(path, ROLE[i]) == 0) w->cls[i] = o->addr, role = true;
        if (!role && o->klass && pw->classes_seen++ % 37 == 0) add_u64(w->classes, &w->nclasses, OB_POOL, o->addr);
        return true;
    }
    if (!o->klass) return true; /* hidden */
    if (o->type == RBP_T_DATA) {
        uint64_t type = 0, data = 0;
        const char *name = rbp_data_struct_name(h, o);
        if (name && rbp_obj_typed_data(h, o, &type, &data)) {
            if (!strcmp(name, "proc")) w->type_proc = w->type_proc ? w->type_proc : type;
            else if (!strcmp(name, "method")) {
                w->type_method = w->type_method ? w->type_method : type;
                uint64_t me = 0;
                if (data && rbp_read_field(w->t->s, data, RBP_L_method_me, &me) && me)
                    add_u64(w->mes, &w->nmes, 16, me);
            } else if (!strcmp(name, "time")) w->type_time = w->type_time ? w->type_time : type;
            else if (!w->type_other) w->type_other = type;
        }
    }
    if (o->type == RBP_T_OBJECT && w->shapes && (o->flags >> 32)) add_u64(w->shape_ids, &w->nshapes, 32, o->flags >> 32);
    /* a few real objects of every type (the later ones of a type: the
     * target program's own, rather than the interpreter's first) */
    if (o->type < 32 && o->type != RBP_T_IMEMO && o->type != RBP_T_ICLASS && pw->kept[o->type] < 4 &&
        pw->seen[o->type]++ % 61 == 0) {
        pw->kept[o->type]++;
        add_u64(w->values, &w->nvalues, OB_POOL, o->addr);
    }
    return true;
}

/* 3.2+: a too-complex shape, and ivar IDs from the pool's shapes' edges;
 * before: Holder's iv_index_tbl. */
static void find_shapes_and_tables(ob_world *w, rbp_heap *h)
{
    if (!w->shapes) {
        uint8_t buf[64];
        rbp_obj c;
        uint64_t ext = 0;
        if (w->cls[C_HOLDER] && rbp_obj_at(h, w->cls[C_HOLDER], buf, sizeof buf, &c) && rbp_classext(h, &c, &ext))
            w->holder_ivtbl = rbp_classext_ptr(h, &c, ext, RBP_L_classext_iv_index_tbl);
        return;
    }
    for (uint64_t id = 0; id < 4096 && w->c.shape_too_complex != UINT64_MAX; id++) {
        uint64_t next, capa, type;
        if (!shape_info(w, id, &next, &capa, &type)) break;
        if (type == w->c.shape_too_complex) {
            w->too_complex = id;
            break;
        }
    }
    int32_t sz = LY(w)->f[RBP_L_shape_size].size;
    for (size_t i = 0; i < w->nshapes && sz > 0; i++) {
        uint64_t id = w->shape_ids[i];
        for (int k = 0; k < 16 && id < (UINT64_C(1) << 24); k++) {
            uint64_t base = w->shape_list + id * (uint64_t)sz, edge = 0, type = 0, parent = 0;
            if (!rdf(w, base, RBP_L_shape_edge_name, &edge) || !rdf(w, base, RBP_L_shape_type, &type) ||
                !rdf(w, base, RBP_L_shape_parent_id, &parent))
                break;
            if (type == 1 && edge) add_u64(w->iv_ids, &w->niv_ids, 16, edge);
            if (parent == id) break;
            id = parent;
        }
    }
}

static bool register_pages(ob_world *w, uint64_t table_at)
{
    rbpeek_session *s = w->t->s;
    const rbp_layout *L = LY(w);
    image *img = &w->t->img;
    ob_build wb = {.w = w};
    rbp_field_id osf = rbp_has(L, RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
    uint64_t objspace = peek64(img, s->vm + ofs(w, osf));
    uint64_t where = objspace + ofs(w, RBP_L_objspace_pages_sorted), table = peek64(img, where), count = 0;
    bool darray = s->rel.gc.pages_darray; /* 3.4+ */
    if (darray) {
        count = peek64(img, table);
        table += 16;
    } else {
        count = peek64(img, objspace + ofs(w, RBP_L_objspace_pages_allocated));
    }
    if (!objspace || !table || !count || (count + w->npages) * 8 + 16 > TABLE_PAGES * IMG_PAGE) return false;
    uint64_t *t = calloc(count + w->npages + 2, 8);
    if (!t) return false;
    size_t k = darray ? 2 : 0;
    bool ok = peek(img, table, t + k, count * 8);
    for (size_t i = 0; i < w->npages; i++) t[k + count + i] = w->pages[i].header;
    if (darray) t[0] = t[1] = count + w->npages;
    if (ok) {
        wr(&wb, table_at, t, (k + count + w->npages) * 8);
        wr64(&wb, where, table_at);
        if (!darray) wr64(&wb, objspace + ofs(w, RBP_L_objspace_pages_allocated), count + w->npages);
    }
    free(t);
    img_focus_free(&wb.written);
    return ok;
}

static bool make_pages(ob_world *w, rbp_heap *h)
{
    rbpeek_session *s = w->t->s;
    const rbp_layout *L = LY(w);
    image *img = &w->t->img;
    /* the slot sizes: the rb_heap_t's of 3.4, else the one slot size */
    uint32_t sizes[OB_MAX_PAGES];
    uint64_t heaps[OB_MAX_PAGES] = {0};
    size_t n = 0;
    if (rbp_has(L, RBP_L_objspace_heaps) && rbp_has(L, RBP_L_gc_heap_slot_size) && L->f[RBP_L_gc_heap_size].size > 0) {
        size_t count = (size_t)L->f[RBP_L_objspace_heaps].size / (size_t)L->f[RBP_L_gc_heap_size].size;
        for (size_t i = 0; i < count && n < OB_MAX_PAGES; i++) {
            uint64_t hp = h->objspace + ofs(w, RBP_L_objspace_heaps) + i * (uint64_t)L->f[RBP_L_gc_heap_size].size, sz = 0;
            if (!rbp_read_field(s, hp, RBP_L_gc_heap_slot_size, &sz) || sz < 16 || sz > 4096) continue;
            heaps[n] = hp;
            sizes[n++] = (uint32_t)sz;
        }
    }
    if (!n) sizes[n++] = h->pages[0].slot_size;
    size_t hlen = header_len(w);
    uint64_t span = (uint64_t)n * w->page_align + (uint64_t)(n + TABLE_PAGES + ARENA_PAGES) * IMG_PAGE;
    uint64_t base = find_room(img, span, w->page_align);
    if (!base) return false;
    uint64_t headers = base + (uint64_t)n * w->page_align, table_at = headers + n * IMG_PAGE;
    w->arena = table_at + TABLE_PAGES * IMG_PAGE;
    w->arena_len = (uint64_t)ARENA_PAGES * IMG_PAGE;
    if (!img_add_zero_pages(img, table_at, TABLE_PAGES) || !img_add_zero_pages(img, w->arena, ARENA_PAGES)) return false;
    static const rbp_field_id BITS[] = {
        RBP_L_page_wb_unprotected_bits, RBP_L_page_mark_bits, RBP_L_page_uncollectible_bits, RBP_L_page_marking_bits,
        RBP_L_page_remembered_bits, RBP_L_page_pinned_bits, RBP_L_page_age_bits,
    };
    for (size_t i = 0; i < n; i++) {
        /* a real page of the same slot size (else the first) lends its
         * header and where its first slot lies in its body */
        const rbp_heap_page *real = &h->pages[0];
        for (size_t k = 0; k < h->npages; k++)
            if (h->pages[k].slot_size == sizes[i]) {
                real = &h->pages[k];
                break;
            }
        uint64_t real_body = real->start & ~(uint64_t)(w->page_align - 1);
        ob_page *p = &w->pages[i];
        p->body = base + i * w->page_align;
        p->start = p->body + (real->start - real_body);
        p->slot_size = sizes[i];
        p->total = PAGE_SLOTS;
        if ((p->start - p->body) + (uint64_t)p->total * p->slot_size > w->page_align)
            p->total = (uint32_t)((w->page_align - (p->start - p->body)) / p->slot_size);
        p->header = headers + i * IMG_PAGE;
        p->heap = heaps[i];
        uint64_t end = p->start + (uint64_t)p->total * p->slot_size;
        if (!img_add_zero_pages(img, p->body, (size_t)((end - p->body + IMG_PAGE - 1) / IMG_PAGE)) ||
            !img_add_zero_pages(img, p->header, 1))
            return false;
        w->npages = i + 1;
        p->tmpl = real->header;
    }
    img_finish(img);
    ob_build wb = {.w = w};
    for (size_t i = 0; i < n; i++) {
        ob_page *p = &w->pages[i];
        /* the template's words where the image has them: its members,
         * then this page's own, and no bits */
        uint8_t tmpl[HEADER_MAX] = {0};
        for (size_t k = 0; k + 8 <= hlen; k += 8) peek(img, p->tmpl + k, tmpl + k, 8);
        wr(&wb, p->header, tmpl, hlen);
        for (size_t k = 0; k < sizeof BITS / sizeof BITS[0]; k++) {
            const rbp_field *f = &L->f[BITS[k]];
            if (f->offset < 0 || f->size <= 0 || (size_t)f->offset + (size_t)f->size > hlen) continue;
            uint8_t zero[HEADER_MAX] = {0};
            wr(&wb, p->header + (uint64_t)f->offset, zero, (size_t)f->size);
        }
        wrf(&wb, p->header, RBP_L_page_start, p->start);
        wrf(&wb, p->header, RBP_L_page_total_slots, p->total);
        wrf(&wb, p->header, RBP_L_page_slot_size, p->slot_size);
        wrf(&wb, p->header, RBP_L_page_free_slots, p->total);
        wrf(&wb, p->header, RBP_L_page_final_slots, 0);
        wrf(&wb, p->header, RBP_L_page_pinned_slots, 0);
        wrf(&wb, p->header, RBP_L_page_freelist, 0);
        if (p->heap) wrf(&wb, p->header, RBP_L_page_heap, p->heap);
        wr64(&wb, p->body, p->header); /* the body's heap_page_header points back */
    }
    img_focus_free(&wb.written);
    return register_pages(w, table_at);
}

bool ob_world_init(ob_world *w, fuzz_target *t)
{
    memset(w, 0, sizeof *w);
    w->t = t;
    rbpeek_session *s = t->s;
    rbp_heap h;
    rbpeek_session_invalidate(s);
    if (rbp_heap_open(s, &h) != RBPEEK_OK) {
        fprintf(stderr, "objbuild: %s: no heap: %s\n", t->name, rbpeek_session_error(s));
        return false;
    }
    w->c = *h.c;
    w->page_align = h.page_align;
    w->shapes = h.shapes;
    w->shape_list = h.shape_list;
    w->too_complex = UINT64_MAX;
    /* the pools, from the pristine heap */
    pool_walk pw = {.w = w, .h = &h};
    rbp_heap_walk(&h, pool_obj, NULL, &pw);
    find_shapes_and_tables(w, &h);
    bool ok = make_pages(w, &h);
    rbp_heap_close(&h);
    if (!ok) {
        fprintf(stderr, "objbuild: %s: no room for the built pages\n", t->name);
        return false;
    }
    img_commit(&t->img); /* the pages and their registration stay: the base every input starts from */
    rbpeek_session_invalidate(s);
    /* the pages must be heap pages now */
    if (rbp_heap_open(s, &h) != RBPEEK_OK) {
        fprintf(stderr, "objbuild: %s: the built pages broke the heap: %s\n", t->name, rbpeek_session_error(s));
        return false;
    }
    for (size_t i = 0; i < w->npages; i++) {
        if (!rbp_heap_page_of(&h, w->pages[i].start)) {
            fprintf(stderr, "objbuild: %s: built page %zu (slot size %u) is not taken for a heap page\n", t->name, i,
                    w->pages[i].slot_size);
            rbp_heap_close(&h);
            return false;
        }
    }
    rbp_heap_close(&h);
    /* static Symbols: tagged words of the image whose ID has a name */
    size_t tried = 0;
    for (size_t i = 0; i < img_nwords(&t->img) && w->nsyms < OB_POOL && tried < 20000; i++) {
        uint64_t v = img_get_word(&t->img, i);
        if ((v & 0xff) != 0x0c || !(v >> 8) || (v >> 40)) continue;
        tried++;
        const char *name = rbp_id_name(s, v >> 8);
        if (name && name[0]) add_u64(w->syms, &w->nsyms, OB_POOL, v);
    }
    /* iseqs, and the frame with the most locals, from the pristine stacks */
    uint64_t best = 0;
    for (size_t i = 0; i < rbpeek_snapshot_thread_count(t->snap); i++) {
        const rbpeek_thread *th = rbpeek_snapshot_thread(t->snap, i);
        for (size_t k = 0; k < th->nframes; k++) {
            const rbpeek_frame *f = &th->frames[k];
            if (!f->iseq || !f->ep) continue;
            add_u64(w->iseqs, &w->niseqs, 32, f->iseq);
            uint64_t body = 0, size = 0;
            if (!rbp_read_field(s, f->iseq, RBP_L_iseq_body, &body) ||
                !rbp_read_field(s, body, RBP_L_body_local_table_size, &size))
                continue;
            size &= 0xffffffffu;
            uint64_t me = peek64(&t->img, f->ep - 16);
            if (rbp_imemo_type(s, me) == RBP_IMEMO_MENT) add_u64(w->mes, &w->nmes, 16, me);
            if (size > best && size < 64) {
                best = size;
                w->frame_iseq = f->iseq;
                w->frame_self = f->self;
                w->frame_me = me;
                w->frame_env_flags = peek64(&t->img, f->ep);
                w->frame_nlocals = (uint32_t)size;
            }
        }
    }
    /* the recorded Holder's shape first: OB_OBJECT's default */
    for (size_t i = 0; w->shapes && w->frame_self && (w->frame_self & 7) == 0 && i < w->nshapes; i++) {
        uint64_t id = peek64(&t->img, w->frame_self) >> 32;
        if (w->shape_ids[i] != id) continue;
        w->shape_ids[i] = w->shape_ids[0];
        w->shape_ids[0] = id;
    }
    fuzz_end_run(s);
    rbpeek_session_invalidate(s);
    if (fuzz_verbose()) {
        size_t roles = 0;
    for (int i = 0; i < C_NROLES; i++) roles += w->cls[i] != 0;
    fprintf(stderr, "fuzz: objects  %s: %zu pages (slot sizes", t->name, w->npages);
        for (size_t i = 0; i < w->npages; i++) fprintf(stderr, " %u", w->pages[i].slot_size);
        fprintf(stderr, "), %zu classes by role of %d, %zu more, %zu values, %zu symbols, %zu iseqs, %zu shapes, "
                "%zu method entries, %zu ivar IDs, too-complex shape %lld; types proc %s, method %s, time %s; "
                "a frame with %u locals\n",
                roles, C_NROLES, w->nclasses, w->nvalues, w->nsyms, w->niseqs, w->nshapes, w->nmes, w->niv_ids,
                w->too_complex == UINT64_MAX ? -1LL : (long long)w->too_complex,
                w->type_proc ? "yes" : "no", w->type_method ? "yes" : "no", w->type_time ? "yes" : "no",
                w->frame_nlocals);
        for (int i = 0; i < C_NROLES; i++)
            if (!w->cls[i]) fprintf(stderr, "fuzz: objects  %s: no class %s\n", t->name, ROLE[i]);
    }
    return true;
}

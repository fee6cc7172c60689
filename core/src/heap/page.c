/*
 * `ruby page ADDR`: the heap page holding ADDR, as gc.c's dump_page (and
 * misc/lldb_cruby.py's) shows it, read from raw memory: the page header's
 * counts, every slot's type, class and GC bits (mark, uncollectible,
 * marking, write-barrier unprotected, pinned, remembered from 3.3, age),
 * and the page's free list. A slot's bit is gc.c's NUM_IN_PAGE: its offset
 * in the aligned page body divided by BASE_SLOT_SIZE (40 bytes, the RVALUE,
 * in every version), whatever the page's own slot size. Age is two bits of
 * the page's age_bits from 3.3, FL_PROMOTED0/1 (flags bits 5-6) before.
 *
 * The bitmaps come from members no other command reads, so they are checked
 * before anything prints: a slot whose mark or uncollectible bit is set must
 * hold an object, bits between slots of a wide page must be clear, and the
 * free list must start at a free slot of this page. A page that breaks
 * these is refused as a layout that does not fit, never printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "heap/census.h"
#include "heap/obj.h"
#include "vm/robject.h"
#include "vm/validate.h"

enum {
    BASE_SLOT = 40,         /* BASE_SLOT_SIZE / sizeof(RVALUE): one bit per 40 bytes of body */
    MAX_HEADER = 4096,      /* heap_page with its bitmaps: 1736 bytes on 4.0 */
    MAX_LIST = 1 << 16,     /* free list entries followed: more than a page's slots */
    NBITS = 7,
};

typedef enum { B_MARK, B_UNCOLL, B_MARKING, B_WBUNP, B_PINNED, B_REMEMBERED, B_AGE } bit_kind;

static const rbp_field_id BIT_FIELD[NBITS] = {
    RBP_L_page_mark_bits,   RBP_L_page_uncollectible_bits, RBP_L_page_marking_bits, RBP_L_page_wb_unprotected_bits,
    RBP_L_page_pinned_bits, RBP_L_page_remembered_bits,    RBP_L_page_age_bits,
};
static const char *const BIT_NAME[NBITS] = {"marked", "uncollectible", "marking", "wb_unprotected",
                                            "pinned", "remembered",    "age"};

typedef struct page_view {
    rbp_heap h;
    const rbp_heap_page *pg;
    uint64_t addr, body;
    uint8_t hdr[MAX_HEADER];
    uint8_t *mem;           /* the aligned body */
    size_t got;             /* bytes of it read */
    uint64_t free_slots, final_slots, pinned_slots, freelist;
    bool has[NBITS];
    uint8_t *on_list;       /* per slot: 1 when on the free list */
    uint64_t listed;        /* free list entries */
    char list_note[160];    /* why the free list walk stopped early, or "" */
} page_view;

#define LAYOUT(v) (&(v)->h.s->layout)

/* Bit n of the bitmap member id, from the header copy. */
static bool bit(const page_view *v, bit_kind k, uint64_t n)
{
    if (!v->has[k]) return false;
    const rbp_field *f = &LAYOUT(v)->f[BIT_FIELD[k]];
    uint64_t word;
    if ((n / 64) * 8 + 8 > (uint64_t)f->size) return false; /* sizes checked by read_view */
    memcpy(&word, v->hdr + f->offset + (n / 64) * 8, 8);
    return (word >> (n % 64)) & 1;
}

static unsigned age_of(const page_view *v, uint64_t n, uint64_t flags)
{
    if (!v->has[B_AGE]) return (unsigned)(flags >> 5) & 3; /* FL_PROMOTED0, FL_PROMOTED1 */
    const rbp_field *f = &LAYOUT(v)->f[RBP_L_page_age_bits];
    uint64_t word;
    if ((n / 32) * 8 + 8 > (uint64_t)f->size) return 0;
    memcpy(&word, v->hdr + f->offset + (n / 32) * 8, 8);
    return (unsigned)(word >> ((n % 32) * 2)) & 3;
}

static uint64_t hdr_u(const page_view *v, rbp_field_id id)
{
    return rbp_has(LAYOUT(v), id) ? rbp_field_extract(LAYOUT(v), id, v->hdr) : 0;
}

/* The slot's copy in the body, or NULL when it was not read. */
static const uint8_t *slot_bytes(const page_view *v, uint32_t k)
{
    size_t off = (size_t)(v->pg->start - v->body) + (size_t)k * v->pg->slot_size;
    return off + 16 <= v->got ? v->mem + off : NULL;
}

static uint64_t num_in_page(const page_view *v, uint32_t k)
{
    return (v->pg->start + (uint64_t)k * v->pg->slot_size - v->body) / BASE_SLOT;
}

/* The page whose aligned body holds addr: a slot, the header before the
 * first slot, or the tail after the last. */
static const rbp_heap_page *page_holding(const rbp_heap *h, uint64_t addr)
{
    const rbp_heap_page *p = rbp_heap_page_of(h, addr);
    if (p) return p;
    uint64_t body = addr & ~(uint64_t)(h->page_align - 1);
    for (size_t i = 0; i < h->npages; i++)
        if ((h->pages[i].start & ~(uint64_t)(h->page_align - 1)) == body) return &h->pages[i];
    return NULL;
}

/* Reads the header with its bitmaps and the body; checks each bitmap fits
 * the header and covers the page's slots. */
static rbpeek_status read_view(page_view *v)
{
    rbpeek_session *s = v->h.s;
    const rbp_layout *L = LAYOUT(v);
    static const rbp_field_id need[] = {RBP_L_page_freelist, RBP_L_page_mark_bits, RBP_L_page_uncollectible_bits,
                                        RBP_L_page_marking_bits, RBP_L_page_wb_unprotected_bits};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!rbp_has(L, need[i]))
            return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                            "page: the struct layout (%s) lacks heap_page's bitmaps and free list; use this "
                            "Ruby's DWARF (install its debug info) or a layout from a newer rbpeek",
                            s->layout_source);
    uint64_t last_bit = num_in_page(v, v->pg->total_slots - 1);
    size_t hdr_len = 64;
    for (int k = 0; k < NBITS; k++) {
        v->has[k] = rbp_has(L, BIT_FIELD[k]);
        if (!v->has[k]) continue;
        const rbp_field *f = &L->f[BIT_FIELD[k]];
        uint64_t per_word = k == B_AGE ? 32 : 64;
        if (f->offset < 0 || f->size <= 0 || (size_t)f->offset + (size_t)f->size > MAX_HEADER ||
            (uint64_t)f->size / 8 <= last_bit / per_word) {
            char why[200];
            snprintf(why, sizeof why, "page: heap_page.%s (%d bytes at +%d) does not cover the page's %u slots",
                     BIT_NAME[k] , f->size, f->offset, v->pg->total_slots);
            return rbp_layout_misfit(s, why);
        }
        if ((size_t)f->offset + (size_t)f->size > hdr_len) hdr_len = (size_t)f->offset + (size_t)f->size;
    }
    if (!rbp_mem_read(s->mem, v->pg->header, v->hdr, hdr_len))
        return rbp_fail(s, RBPEEK_ERR_READ, "page: cannot read the page header at 0x%" PRIx64, v->pg->header);
    v->free_slots = hdr_u(v, RBP_L_page_free_slots);
    v->final_slots = hdr_u(v, RBP_L_page_final_slots);
    v->pinned_slots = hdr_u(v, RBP_L_page_pinned_slots);
    v->freelist = hdr_u(v, RBP_L_page_freelist);
    v->mem = malloc(v->h.page_align);
    v->on_list = calloc(v->pg->total_slots, 1);
    if (!v->mem || !v->on_list) return rbp_fail(s, RBPEEK_ERR_NOMEM, "page: out of memory");
    v->got = rbp_mem_read_partial(s->mem, v->body, v->mem, v->h.page_align);
    return RBPEEK_OK;
}

/* Follows the free list: each entry a free slot of this page (flags 0),
 * its next pointer in the second word (RVALUE.as.free.next, struct
 * free_slot.next). Bounded by the page's slot count. */
static void walk_freelist(page_view *v)
{
    uint64_t p = v->freelist;
    while (p) {
        uint64_t k = p >= v->pg->start ? (p - v->pg->start) / v->pg->slot_size : UINT64_MAX;
        const uint8_t *b = k < v->pg->total_slots && (p - v->pg->start) % v->pg->slot_size == 0
                               ? slot_bytes(v, (uint32_t)k) : NULL;
        uint64_t flags = 1, next = 0;
        if (b) memcpy(&flags, b, 8), memcpy(&next, b + 8, 8);
        if (!b || flags != 0) {
            snprintf(v->list_note, sizeof v->list_note, "entry %" PRIu64 " (0x%" PRIx64 ") is not a free slot "
                     "of this page", v->listed, p);
            return;
        }
        if (v->on_list[k]) {
            snprintf(v->list_note, sizeof v->list_note, "entry %" PRIu64 " (0x%" PRIx64 ") is listed twice",
                     v->listed, p);
            return;
        }
        v->on_list[k] = 1;
        if (++v->listed > MAX_LIST) break;
        p = next;
    }
}

/* The checks of the file's opening comment; a one-line refusal on failure. */
static rbpeek_status check_bits(page_view *v)
{
    uint32_t bad_live = 0, bad_gap = 0, total = v->pg->total_slots;
    for (uint32_t k = 0; k < total; k++) {
        const uint8_t *b = slot_bytes(v, k);
        uint64_t flags = 1;
        if (b) memcpy(&flags, b, 8);
        uint64_t n = num_in_page(v, k);
        if (flags == 0 && (bit(v, B_MARK, n) || bit(v, B_UNCOLL, n))) bad_live++;
        /* a wide slot spans several 40-byte units: only its first has bits */
        uint64_t next = k + 1 < total ? num_in_page(v, k + 1) : n + v->pg->slot_size / BASE_SLOT;
        for (uint64_t m = n + 1; m < next; m++)
            if (bit(v, B_MARK, m) || bit(v, B_UNCOLL, m)) bad_gap++;
    }
    char why[240];
    if (bad_live > 2 || bad_gap > 0) {
        snprintf(why, sizeof why, "page: heap_page's bitmaps at 0x%" PRIx64 " mark %u free slots and %u places "
                 "between slots", v->pg->header, bad_live, bad_gap);
        return rbp_layout_misfit(v->h.s, why);
    }
    if (v->freelist && v->listed == 0) {
        snprintf(why, sizeof why, "page: heap_page.freelist at 0x%" PRIx64 " is 0x%" PRIx64 ", not a free slot of "
                 "its page", v->pg->header, v->freelist);
        return rbp_layout_misfit(v->h.s, why);
    }
    return RBPEEK_OK;
}

static const char *slot_class(page_view *v, int type, uint64_t klass)
{
    if (type == RBP_T_CLASS) return "Class";
    if (type == RBP_T_MODULE) return "Module";
    if (type == RBP_T_IMEMO || type == RBP_T_ZOMBIE || type == RBP_T_MOVED || klass == 0) return NULL;
    uint64_t real = rbp_class_real(&v->h, klass);
    return real ? rbp_heap_class_name(&v->h, real) : NULL;
}

typedef struct slot_info {
    uint64_t addr, flags, klass, n;
    int type;               /* T_ type, -1 free, -2 garbage, -3 unreadable */
    unsigned age;
    bool b[NBITS - 1];
} slot_info;

static void slot_at(page_view *v, uint32_t k, slot_info *si)
{
    memset(si, 0, sizeof *si);
    si->addr = v->pg->start + (uint64_t)k * v->pg->slot_size;
    si->n = num_in_page(v, k);
    const uint8_t *b = slot_bytes(v, k);
    if (!b) {
        si->type = -3;
        return;
    }
    memcpy(&si->flags, b, 8);
    memcpy(&si->klass, b + 8, 8);
    si->type = rbp_heap_classify(&v->h, b, v->pg->slot_size);
    for (int i = 0; i < NBITS - 1; i++) si->b[i] = bit(v, (bit_kind)i, si->n);
    si->age = si->type >= 0 ? age_of(v, si->n, si->flags) : 0;
}

static const char *kind_name(int type)
{
    return type == -1 ? "free" : type == -2 ? "garbage" : type == -3 ? "unreadable" : rbp_type_name(type);
}

static void render_text(page_view *v, rbp_strbuf *b)
{
    const rbp_heap_page *pg = v->pg;
    rbp_sb_printf(b, "heap page 0x%" PRIx64 " (header 0x%" PRIx64 "): slot size %u, %u slots from 0x%" PRIx64
                  " to 0x%" PRIx64 "\n", v->body, pg->header, pg->slot_size, pg->total_slots, pg->start,
                  pg->start + (uint64_t)pg->total_slots * pg->slot_size);
    char fin[24] = "?", pin[24] = "?"; /* a count the layout does not place is unknown, not 0 */
    if (rbp_has(LAYOUT(v), RBP_L_page_final_slots)) snprintf(fin, sizeof fin, "%" PRIu64, v->final_slots);
    if (rbp_has(LAYOUT(v), RBP_L_page_pinned_slots)) snprintf(pin, sizeof pin, "%" PRIu64, v->pinned_slots);
    rbp_sb_printf(b, "  free_slots %" PRIu64 ", final_slots %s, pinned_slots %s; free list: %" PRIu64 " slots%s%s\n",
                  v->free_slots, fin, pin, v->listed, v->list_note[0] ? ", then " : "", v->list_note);
    /* The page the allocator is taking slots from hands its list to the
     * allocation cache (heap->freelist, a Ractor's newobj cache from 3.0). */
    if (!v->freelist && v->free_slots)
        rbp_sb_puts(b, "  (no free list on the page: the allocator holds it while it allocates from this page)\n");
    rbp_sb_printf(b, "  bits: M marked, U uncollectible, K marking, W wb_unprotected%s%s; age %s\n",
                  v->has[B_PINNED] ? ", P pinned" : "", v->has[B_REMEMBERED] ? ", R remembered" : "",
                  v->has[B_AGE] ? "from the page's age_bits" : "from FL_PROMOTED0/1");
    static const char LETTER[NBITS - 1] = {'M', 'U', 'K', 'W', 'P', 'R'};
    for (uint32_t k = 0; k < pg->total_slots; k++) {
        slot_info si;
        slot_at(v, k, &si);
        bool here = v->addr >= si.addr && v->addr < si.addr + pg->slot_size;
        rbp_sb_printf(b, "%c%5u 0x%" PRIx64 " ", here ? '>' : ' ', k, si.addr);
        char bits[NBITS];
        for (int i = 0; i < NBITS - 1; i++) bits[i] = si.b[i] ? LETTER[i] : '.';
        bits[NBITS - 1] = 0;
        if (si.type < 0) {
            rbp_sb_printf(b, "%s %-10s%s\n", bits, kind_name(si.type),
                          si.type == -1 && v->on_list[k] ? " (on the free list)" : "");
            continue;
        }
        const char *cls = slot_class(v, si.type, si.klass);
        rbp_sb_printf(b, "%s age %u %-10s %s\n", bits, si.age, rbp_type_name(si.type),
                      cls                          ? cls
                      : si.type == RBP_T_IMEMO     ? "(imemo)"
                      : si.klass == 0              ? "(hidden)"
                                                   : "?");
    }
}

static void render_json(page_view *v, rbp_strbuf *b)
{
    const rbp_heap_page *pg = v->pg;
    rbp_json j;
    rbp_json_init(&j, b, RBP_JSON_SPACED);
    rbp_json_object(&j);
    rbp_json_khex(&j, "address", v->addr);
    rbp_json_khex(&j, "page", v->body);
    rbp_json_khex(&j, "header", pg->header);
    rbp_json_khex(&j, "start", pg->start);
    rbp_json_ku64(&j, "slot_size", pg->slot_size);
    rbp_json_ku64(&j, "total_slots", pg->total_slots);
    rbp_json_ku64(&j, "free_slots", v->free_slots);
    rbp_json_key(&j, "final_slots");
    if (rbp_has(LAYOUT(v), RBP_L_page_final_slots)) rbp_json_u64(&j, v->final_slots);
    else rbp_json_null(&j);
    rbp_json_key(&j, "pinned_slots");
    if (rbp_has(LAYOUT(v), RBP_L_page_pinned_slots)) rbp_json_u64(&j, v->pinned_slots);
    else rbp_json_null(&j);
    rbp_json_kstr(&j, "age_from", v->has[B_AGE] ? "age_bits" : "flags");
    rbp_json_ku64(&j, "freelist_length", v->listed);
    rbp_json_kstr(&j, "freelist_note", v->list_note[0] ? v->list_note : NULL);
    rbp_json_key(&j, "bits");
    rbp_json_array(&j);
    for (int i = 0; i < NBITS - 1; i++)
        if (v->has[i]) rbp_json_str(&j, BIT_NAME[i]);
    rbp_json_array_end(&j);
    rbp_json_key(&j, "slots");
    rbp_json_array(&j);
    for (uint32_t k = 0; k < pg->total_slots; k++) {
        slot_info si;
        slot_at(v, k, &si);
        rbp_json_ws(&j, "\n  ");
        rbp_json_object(&j);
        rbp_json_ku64(&j, "index", k);
        rbp_json_khex(&j, "address", si.addr);
        rbp_json_kstr(&j, "type", kind_name(si.type));
        if (si.type == -1) rbp_json_kbool(&j, "on_freelist", v->on_list[k]);
        if (si.type >= 0) {
            rbp_json_khex(&j, "flags", si.flags);
            rbp_json_khex(&j, "klass", si.klass);
            rbp_json_kstr(&j, "class", slot_class(v, si.type, si.klass));
            for (int i = 0; i < NBITS - 1; i++)
                if (v->has[i]) rbp_json_kbool(&j, BIT_NAME[i], si.b[i]);
            rbp_json_ku64(&j, "age", si.age);
            rbp_json_kbool(&j, "old", si.age == 3);
        }
        rbp_json_object_end(&j);
    }
    rbp_json_ws(&j, "\n");
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    rbp_sb_putn(b, "\n", 1);
}

rbpeek_status rbpeek_page_render(rbpeek_session *s, uint64_t addr, rbpeek_format format, char **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "page: no session or no output");
    *out = NULL;
    page_view *v = calloc(1, sizeof *v);
    if (!v) return rbp_fail(s, RBPEEK_ERR_NOMEM, "page: out of memory");
    rbpeek_status st = rbp_heap_open(s, &v->h);
    if (st != RBPEEK_OK) {
        free(v);
        return st;
    }
    v->addr = addr;
    v->pg = page_holding(&v->h, addr);
    if (!v->pg) {
        const rbp_heap_page *lo = &v->h.pages[0], *hi = &v->h.pages[v->h.npages - 1];
        st = rbp_fail(s, RBPEEK_ERR_ARG, "page: 0x%" PRIx64 " is not in any of the %zu heap pages (0x%" PRIx64
                      " ... 0x%" PRIx64 "); give the address of an object or slot (ruby p ADDR says what it is)",
                      addr, v->h.npages, lo->start, hi->start + (uint64_t)hi->total_slots * hi->slot_size);
    } else {
        v->body = v->pg->start & ~(uint64_t)(v->h.page_align - 1);
        st = read_view(v);
        if (st == RBPEEK_OK) {
            walk_freelist(v);
            st = check_bits(v);
        }
    }
    if (st == RBPEEK_OK) {
        rbp_strbuf b;
        rbp_sb_init(&b);
        if (format == RBPEEK_FORMAT_JSON) render_json(v, &b);
        else render_text(v, &b);
        if (!(*out = rbp_sb_take(&b))) st = rbp_fail(s, RBPEEK_ERR_NOMEM, "page: out of memory");
    }
    free(v->mem);
    free(v->on_list);
    rbp_heap_close(&v->h);
    free(v);
    return st;
}

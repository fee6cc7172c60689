/*
 * Ruby object readers (see robject.h). Every reader validates the object's
 * type before trusting its contents, and bounds every length it takes from
 * the target, so a garbage VALUE yields "unknown", never a crash or a huge
 * allocation.
 */
#include "vm/robject.h"

#include "memory/machine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"

#define STRING_MAX (1u << 20)

/* Every object slot is at least 40 bytes (RVALUE, then the smallest size
 * pool), and RString and RArray fit in it. Their headers are read as
 * exactly this much: an object in the last slot of a heap page can end a
 * few bytes before the page does, and the memory after the page may be
 * unmapped. Reading past the object there failed the whole read, which
 * made ruby_global_symbols' ID table (allocated early, so in the last slot
 * of the first page) unreadable in some processes: every C method then
 * showed as "<unknown C method>". */
#define OBJ_HEADER_BYTES 40

/* A field of a header read as above; false when the layout puts it past
 * the header (a layout made from an unknown version's DWARF is not trusted
 * to keep these structs as small as every version so far has). */
static bool header_field(const rbp_layout *L, rbp_field_id id, const uint8_t *hdr, uint64_t *out)
{
    const rbp_field *f = &L->f[id];
    int end = f->offset + (f->bit_size ? (f->bit_offset + f->bit_size + 7) / 8 : f->size > 0 ? f->size : 8);
    if (f->offset < 0 || end > OBJ_HEADER_BYTES) return false;
    *out = rbp_field_extract(L, id, hdr);
    return true;
}

struct rbp_idcache {
    rbp_addrmap ids;         /* ID -> char* */
    rbp_addrmap classpaths;  /* class address -> char* (permanent paths only) */
};

static rbp_idcache *idcache(rbpeek_session *s)
{
    if (!s->idcache) {
        s->idcache = calloc(1, sizeof *s->idcache);
        if (!s->idcache) return NULL;
        rbp_addrmap_init(&s->idcache->ids, 1u << 18, free);
        rbp_addrmap_init(&s->idcache->classpaths, 1u << 16, free);
    }
    return s->idcache;
}

void rbp_idcache_free(rbp_idcache *c)
{
    if (!c) return;
    rbp_addrmap_destroy(&c->ids);
    rbp_addrmap_destroy(&c->classpaths);
    free(c);
}

bool rbp_is_heap_ptr(const rbpeek_session *s, uint64_t v)
{
    return v != 0 && (v & 7) == 0 && !rbp_is_nil(&s->rel, v);
}

bool rbp_read_field(rbpeek_session *s, uint64_t base, rbp_field_id id, uint64_t *out)
{
    const rbp_field *f = &s->layout.f[id];
    if (f->offset < 0) return false;
    size_t n = f->bit_size ? (size_t)(f->bit_offset + f->bit_size + 7) / 8 : (size_t)(f->size > 0 && f->size <= 8 ? f->size : 8);
    /* Bits spanning more than a word fit no storage unit: attach refuses
     * such a layout (rbp_layout_check), and raw holds one word. */
    if (n > 8) return false;
    uint8_t raw[8] = {0};
    if (!rbp_mem_read(s->mem, base + (uint64_t)f->offset, raw, n)) return false;
    rbp_field rel = *f;
    rel.offset = 0;
    uint64_t v = 0;
    memcpy(&v, raw, n);
    if (rel.bit_size) {
        v >>= rel.bit_offset;
        if (rel.bit_size < 64) v &= (UINT64_C(1) << rel.bit_size) - 1;
    }
    *out = v;
    return true;
}

bool rbp_obj_flags(rbpeek_session *s, uint64_t v, uint64_t *flags)
{
    return rbp_is_heap_ptr(s, v) && rbp_mem_u64(s->mem, v, flags);
}

int rbp_obj_type(rbpeek_session *s, uint64_t v)
{
    uint64_t flags;
    return rbp_obj_flags(s, v, &flags) ? (int)(flags & RBP_T_MASK) : -1;
}

int rbp_imemo_type(rbpeek_session *s, uint64_t v)
{
    uint64_t flags;
    if (!rbp_obj_flags(s, v, &flags) || (flags & RBP_T_MASK) != RBP_T_IMEMO) return -1;
    return (int)((flags >> RBP_FL_USHIFT) & 0x0f);
}

/* Where a String's bytes are and how many there are. */
static bool string_span(rbpeek_session *s, uint64_t v, uint64_t *ptr, uint64_t *len)
{
    const rbp_layout *L = &s->layout;
    uint8_t hdr[OBJ_HEADER_BYTES];
    if (!rbp_is_heap_ptr(s, v) || !rbp_mem_read(s->mem, v, hdr, sizeof hdr)) return false;
    uint64_t flags;
    memcpy(&flags, hdr, 8);
    if ((flags & RBP_T_MASK) != RBP_T_STRING) return false;
    bool noembed = flags & RBP_FL_USER(1);
    if (rbp_has(L, RBP_L_rstring_len)) { /* 3.2+: one len for both forms */
        if (!header_field(L, RBP_L_rstring_len, hdr, len)) return false;
        if (noembed) return header_field(L, RBP_L_rstring_heap_ptr, hdr, ptr) && (int64_t)*len >= 0;
        *ptr = v + (uint64_t)rbp_off(L, RBP_L_rstring_embed_ary);
    } else if (noembed) {
        if (!header_field(L, RBP_L_rstring_heap_len, hdr, len) || !header_field(L, RBP_L_rstring_heap_ptr, hdr, ptr))
            return false;
    } else {
        if (rbp_has(L, RBP_L_rstring_embed_len)) { /* 3.1 built with RVARGC */
            if (!header_field(L, RBP_L_rstring_embed_len, hdr, len)) return false;
            *len &= 0xffff;
        } else /* embedded length lives in flag bits FL_USER2..FL_USER6 */
            *len = (flags >> (RBP_FL_USHIFT + 2)) & 0x1f;
        rbp_field_id ary = rbp_has(L, RBP_L_rstring_embed_ary) ? RBP_L_rstring_embed_ary : RBP_L_rstring_ary;
        if (!rbp_has(L, ary)) return false;
        *ptr = v + (uint64_t)rbp_off(L, ary);
    }
    return (int64_t)*len >= 0;
}

long rbp_string_read(rbpeek_session *s, uint64_t v, char *buf, size_t max, bool *truncated)
{
    uint64_t ptr, len;
    if (truncated) *truncated = false;
    if (max == 0 || !string_span(s, v, &ptr, &len)) return -1;
    if (len >= max) {
        len = max - 1;
        if (truncated) *truncated = true;
    }
    if (len && !rbp_mem_read(s->mem, ptr, buf, (size_t)len)) return -1;
    buf[len] = '\0';
    return (long)len;
}

bool rbp_string_length(rbpeek_session *s, uint64_t v, uint64_t *len)
{
    uint64_t ptr;
    return string_span(s, v, &ptr, len);
}

char *rbp_string_dup(rbpeek_session *s, uint64_t v)
{
    uint64_t ptr, len;
    if (!string_span(s, v, &ptr, &len) || len > STRING_MAX) return NULL;
    char *buf = malloc((size_t)len + 1);
    if (!buf) return NULL;
    if (len && !rbp_mem_read(s->mem, ptr, buf, (size_t)len)) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

char *rbp_vm_progname(rbpeek_session *s)
{
    uint64_t v = 0;
    if (!rbp_has(&s->layout, RBP_L_vm_progname) ||
        !rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(&s->layout, RBP_L_vm_progname), &v))
        return NULL;
    return rbp_string_dup(s, v);
}

bool rbp_array_info(rbpeek_session *s, uint64_t v, long *len, uint64_t *elems_addr)
{
    const rbp_layout *L = &s->layout;
    uint8_t hdr[OBJ_HEADER_BYTES];
    if (!rbp_is_heap_ptr(s, v) || !rbp_mem_read(s->mem, v, hdr, sizeof hdr)) return false;
    uint64_t flags;
    memcpy(&flags, hdr, 8);
    if ((flags & RBP_T_MASK) != RBP_T_ARRAY) return false;
    if (flags & RBP_FL_USER(1)) { /* RARRAY_EMBED_FLAG */
        /* Embedded length: 2 bits before variable-width slots (3.2), 7 after. */
        uint64_t mask = s->rel.obj.ary_embed_len_mask;
        *len = (long)((flags >> (RBP_FL_USHIFT + 3)) & mask);
        *elems_addr = v + (uint64_t)rbp_off(L, RBP_L_rarray_embed_ary);
    } else {
        uint64_t n;
        if (!header_field(L, RBP_L_rarray_heap_len, hdr, &n) || !header_field(L, RBP_L_rarray_heap_ptr, hdr, elems_addr))
            return false;
        *len = (long)n;
    }
    return *len >= 0 && *len < (1L << 40);
}

bool rbp_array_at(rbpeek_session *s, uint64_t v, long index, uint64_t *out)
{
    long len;
    uint64_t elems;
    if (!rbp_array_info(s, v, &len, &elems) || index < 0 || index >= len) return false;
    return rbp_mem_u64(s->mem, elems + (uint64_t)index * 8, out);
}

/* ID -> serial as symbol.c's rb_id_to_serial: operator IDs are their own
 * serial; others carry 4 scope bits. Every operator ID is below 171 in all
 * supported versions, and every other ID is far above it. */
#define RBP_LAST_OP_ID 170
#define RBP_ID_ENTRY_UNIT 512
#define RBP_ID_ENTRY_SIZE 2

const char *rbp_id_name(rbpeek_session *s, uint64_t id)
{
    const rbp_layout *L = &s->layout;
    rbp_idcache *c = idcache(s);
    if (!id || !c) return NULL;
    const char *hit = rbp_addrmap_get(&c->ids, id);
    if (hit) return hit;
    if (!s->global_symbols || !rbp_has(L, RBP_L_symbols_ids)) return NULL;

    uint64_t serial = id > RBP_LAST_OP_ID ? id >> 4 : id;
    uint32_t last_id = 0;
    uint64_t ids = 0, chunk = 0, str = 0;
    if (rbp_has(L, RBP_L_symbols_last_id) &&
        rbp_mem_u32(s->mem, s->global_symbols + (uint64_t)rbp_off(L, RBP_L_symbols_last_id), &last_id) &&
        serial > last_id)
        return NULL;
    if (!rbp_mem_u64(s->mem, s->global_symbols + (uint64_t)rbp_off(L, RBP_L_symbols_ids), &ids)) return NULL;
    if (!rbp_array_at(s, ids, (long)(serial / RBP_ID_ENTRY_UNIT), &chunk)) return NULL;
    if (!rbp_array_at(s, chunk, (long)((serial % RBP_ID_ENTRY_UNIT) * RBP_ID_ENTRY_SIZE), &str)) return NULL;
    char *name = rbp_string_dup(s, str);
    if (!name) return NULL;
    rbp_addrmap_put(&c->ids, id, name);
    return rbp_addrmap_get(&c->ids, id);
}

bool rbp_id_unnamed(rbpeek_session *s, uint64_t id)
{
    const rbp_layout *L = &s->layout;
    uint32_t last_id = 0;
    uint64_t serial = id > RBP_LAST_OP_ID ? id >> 4 : id;
    return s->global_symbols && rbp_has(L, RBP_L_symbols_last_id) &&
           rbp_mem_u32(s->mem, s->global_symbols + (uint64_t)rbp_off(L, RBP_L_symbols_last_id), &last_id) &&
           serial > last_id;
}

/* The classext of a class: inline after RClass from 3.3, a pointer before. */
static bool classext_addr(rbpeek_session *s, uint64_t klass, uint64_t *ext)
{
    const rbp_layout *L = &s->layout;
    if (rbp_has(L, RBP_L_rclass_and_ext_classext)) {
        *ext = klass + (uint64_t)rbp_off(L, RBP_L_rclass_and_ext_classext);
        return true;
    }
    if (rbp_has(L, RBP_L_rclass_ptr)) return rbp_mem_u64(s->mem, klass + (uint64_t)rbp_off(L, RBP_L_rclass_ptr), ext) && *ext;
    return false;
}

const char *rbp_class_path(rbpeek_session *s, uint64_t klass, bool *permanent)
{
    const rbp_layout *L = &s->layout;
    rbp_idcache *c = idcache(s);
    *permanent = false;
    if (!c) return NULL;
    const char *hit = rbp_addrmap_get(&c->classpaths, klass);
    if (hit) {
        *permanent = true;
        return hit;
    }
    int t = rbp_obj_type(s, klass);
    if (t != RBP_T_CLASS && t != RBP_T_MODULE) return NULL;
    if (!rbp_has(L, RBP_L_classext_classpath)) return NULL; /* < 3.0: path kept in an ivar (heap walker's job) */
    uint64_t ext, path = 0;
    if (!classext_addr(s, klass, &ext) ||
        !rbp_mem_u64(s->mem, ext + (uint64_t)rbp_off(L, RBP_L_classext_classpath), &path) || !path)
        return NULL;
    uint64_t perm = 1; /* before 3.3 every stored classpath is permanent */
    if (rbp_has(L, RBP_L_classext_permanent_classpath) &&
        !rbp_read_field(s, ext, RBP_L_classext_permanent_classpath, &perm))
        return NULL;
    if (!perm) return NULL; /* a temporary path ("#<Class:0x...>::Foo") is not a name */
    char *name = rbp_string_dup(s, path);
    if (!name) return NULL;
    *permanent = true;
    rbp_addrmap_put(&c->classpaths, klass, name);
    return rbp_addrmap_get(&c->classpaths, klass);
}

/* Accepts addr as &ruby_global_symbols only if its ID table decodes
 * operator IDs the way every Ruby registers them: serial '+' is "+" and
 * serial '-' is "-". A random word pair passing this is not plausible. */
static bool symbols_table_valid(rbpeek_session *s, uint64_t addr)
{
    const rbp_layout *L = &s->layout;
    uint64_t ids = 0, chunk = 0;
    uint32_t last_id = 0;
    if (!rbp_mem_u32(s->mem, addr + (uint64_t)rbp_off(L, RBP_L_symbols_last_id), &last_id) || last_id < 1000 ||
        last_id > (1u << 28))
        return false;
    if (!rbp_mem_u64(s->mem, addr + (uint64_t)rbp_off(L, RBP_L_symbols_ids), &ids) || !rbp_is_heap_ptr(s, ids) ||
        rbp_obj_type(s, ids) != RBP_T_ARRAY || !rbp_array_at(s, ids, 0, &chunk))
        return false;
    static const char ops[] = {'+', '-'};
    for (size_t i = 0; i < sizeof ops; i++) {
        uint64_t str = 0;
        char buf[4];
        if (!rbp_array_at(s, chunk, (long)ops[i] * RBP_ID_ENTRY_SIZE, &str) ||
            rbp_string_read(s, str, buf, sizeof buf, NULL) != 1 || buf[0] != ops[i])
            return false;
    }
    return true;
}

#define SCAN_WINDOW (512 * 1024)

/* A VALUE that could point at a heap object: 8-aligned, and a user-space
 * address of the target's machine (below 2^47 on x86-64, 2^48 on
 * aarch64), unlike most words of code and constants. */
static bool plausible_object(const rbpeek_session *s, uint64_t v)
{
    return rbp_is_heap_ptr(s, v) && v >= 4096 && v < (UINT64_C(1) << rbp_machine_user_bits(rbp_machine_of_target(s)));
}

/* The candidates of one page of the window. */
static uint64_t scan_symbols_page(rbpeek_session *s, uint64_t base, int32_t ids_off, int32_t last_off)
{
    uint8_t page[4096 + 64];
    size_t got = rbp_mem_read_partial(s->mem, base, page, sizeof page);
    if (got < 16) return 0; /* unmapped: skip the page */
    for (size_t off = 0; off + (size_t)ids_off + 8 <= got && off < 4096; off += 8) {
        uint32_t last_id;
        uint64_t ids;
        memcpy(&last_id, page + off + last_off, 4);
        memcpy(&ids, page + off + ids_off, 8);
        /* cheap filters first: a plausible serial count and an object pointer */
        if (last_id < 1000 || last_id > (1u << 28) || !plausible_object(s, ids)) continue;
        if (symbols_table_valid(s, base + off)) return base + off;
    }
    return 0;
}

uint64_t rbp_locate_global_symbols(rbpeek_session *s, uint64_t anchor)
{
    const rbp_layout *L = &s->layout;
    if (!anchor || !rbp_has(L, RBP_L_symbols_ids) || !rbp_has(L, RBP_L_symbols_last_id)) return 0;
    int32_t ids_off = rbp_off(L, RBP_L_symbols_ids), last_off = rbp_off(L, RBP_L_symbols_last_id);
    /* ruby_global_symbols is a global of libruby like the anchor: scan out
     * from the anchor's page, nearest pages first, so that the few words
     * around it are tried before the far ones (each false candidate can
     * cost a read of an unmapped address, slow through a debugger). */
    uint64_t page0 = anchor & ~UINT64_C(4095);
    for (uint64_t d = 0; d <= SCAN_WINDOW; d += 4096) {
        uint64_t hit = scan_symbols_page(s, page0 + d, ids_off, last_off);
        if (!hit && d && page0 >= d) hit = scan_symbols_page(s, page0 - d, ids_off, last_off);
        if (hit) return hit;
    }
    return 0;
}

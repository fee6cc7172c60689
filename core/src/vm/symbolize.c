/*
 * The symbolizer (see symbolize.h).
 *
 * Line numbers follow iseq.c exactly: the pc is turned into an instruction
 * position (minus one, because a saved pc points past the current
 * instruction), and the position into an insns_info entry through the
 * succinct bitvector index that Ruby 2.6+ keeps instead of a positions array
 * (or the positions array, where one is still present).
 *
 * Everything read here is cached per iseq (and per iseq+owner for 3.4
 * labels, per iseq+pc for line numbers), because a sampler sees the same few
 * hundred iseqs thousands of times. Entries are validated against the iseq's current body pointer, so a
 * freed-and-reused iseq slot is noticed.
 */
#include "vm/symbolize.h"

#include "base/walkguard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "vm/robject.h"

#define MAX_PARENT_HOPS 256   /* bound on parent_iseq / ep chains */
#define LABEL_MAX 4096

struct rbp_symcache {
    rbp_addrmap iseqs;   /* iseq address -> iseq_entry */
    /* While a label is computed (hold > 0) the iseqs it has in hand must
     * stay valid: an entry that would make the full map clear itself, or
     * replace a stale entry, is kept here instead and freed when the hold
     * ends. */
    int hold;
    struct iseq_entry **held;
    size_t nheld, capheld;
    rbp_addrmap labels;  /* hash(iseq, owner) -> label_entry (3.4 labels) */
    rbp_addrmap cfuncs;  /* hash(owner, id) -> label_entry (3.4 C labels) */
};

/* Line numbers already computed for an iseq, by pc: an iseq's line table
 * never changes, and a sampler asks for the same few pcs of a hot method
 * over and over (each lookup reads up to three pages of the target).
 * Direct-mapped by pc; allocated on first use. */
#define LINE_MEMO 32
typedef struct line_memo {
    uint64_t pc[LINE_MEMO];   /* 0 = empty */
    int32_t line[LINE_MEMO];
} line_memo;

typedef struct iseq_entry {
    rbp_iseq_info info;       /* first: rbp_iseq_lineno gets back here from it */
    char *label, *path, *abspath;
    line_memo *lines;
} iseq_entry;

typedef struct label_entry {
    uint64_t a, b;
    char *label;
} label_entry;

static void free_iseq_entry(void *p)
{
    iseq_entry *e = p;
    if (!e) return;
    free(e->label);
    free(e->path);
    free(e->abspath);
    free(e->lines);
    free(e);
}

static void free_label_entry(void *p)
{
    label_entry *e = p;
    if (!e) return;
    free(e->label);
    free(e);
}

static rbp_symcache *symcache(rbpeek_session *s)
{
    if (!s->symcache) {
        s->symcache = calloc(1, sizeof *s->symcache);
        if (!s->symcache) return NULL;
        rbp_addrmap_init(&s->symcache->iseqs, 1u << 17, free_iseq_entry);
        rbp_addrmap_init(&s->symcache->labels, 1u << 17, free_label_entry);
        rbp_addrmap_init(&s->symcache->cfuncs, 1u << 16, free_label_entry);
    }
    return s->symcache;
}

static void release_held(rbp_symcache *c)
{
    for (size_t i = 0; i < c->nheld; i++) free_iseq_entry(c->held[i]);
    c->nheld = 0;
}

void rbp_symcache_free(rbp_symcache *c)
{
    if (!c) return;
    release_held(c);
    free(c->held);
    rbp_addrmap_destroy(&c->iseqs);
    rbp_addrmap_destroy(&c->labels);
    rbp_addrmap_destroy(&c->cfuncs);
    free(c);
}

static uint64_t u64_at(const rbp_layout *L, rbp_field_id id, const uint8_t *base)
{
    return rbp_has(L, id) ? rbp_field_extract(L, id, base) : 0;
}

/* location.first_lineno: a Fixnum VALUE (8 bytes) before Ruby 3.3's int (4
 * bytes); 0 when absent or not a plausible line. */
static int first_lineno(const rbp_layout *L, const uint8_t *body)
{
    if (!rbp_has(L, RBP_L_body_first_lineno)) return 0;
    uint64_t v = rbp_field_extract(L, RBP_L_body_first_lineno, body);
    int64_t line;
    if (L->f[RBP_L_body_first_lineno].size == 8) {
        if (!rbp_fixnum_get(v, &line)) return 0;
    } else {
        line = (int32_t)(uint32_t)v;
    }
    return line > 0 && line < (1 << 30) ? (int)line : 0;
}

/* rb_iseq_path / rb_iseq_realpath: pathobj is a String (both) or [path, realpath]. */
static void read_pathobj(rbpeek_session *s, uint64_t pathobj, char **path, char **abspath)
{
    *path = *abspath = NULL;
    int t = rbp_obj_type(s, pathobj);
    if (t == RBP_T_STRING) {
        *path = rbp_string_dup(s, pathobj);
        *abspath = rbp_string_dup(s, pathobj);
    } else if (t == RBP_T_ARRAY) {
        uint64_t p = 0, r = 0;
        if (rbp_array_at(s, pathobj, 0, &p)) *path = rbp_string_dup(s, p);
        if (rbp_array_at(s, pathobj, 1, &r) && rbp_obj_type(s, r) == RBP_T_STRING) *abspath = rbp_string_dup(s, r);
    }
}

/* Labels CRuby makes from C string literals (rb_fstring_lit): such a String
 * points into the image's .rodata, which a core made without its binaries
 * lacks. iseq.c labels every main iseq "<main>", load.c every required
 * file's top iseq "<top (required)>", and InstructionSequence.compile
 * "<compiled>"; a label whose header is readable, with that iseq type and
 * that length, is that literal. Anything else stays unknown. */
static char *literal_label(rbpeek_session *s, uint64_t label, int type)
{
    static const struct { int type; const char *text; } LITERALS[] = {
        {RBP_ISEQ_MAIN, "<main>"}, {RBP_ISEQ_TOP, "<top (required)>"}, {RBP_ISEQ_TOP, "<compiled>"},
    };
    uint64_t len;
    if (!rbp_string_length(s, label, &len)) return NULL;
    for (size_t i = 0; i < sizeof LITERALS / sizeof LITERALS[0]; i++)
        if (LITERALS[i].type == type && strlen(LITERALS[i].text) == len) return strdup(LITERALS[i].text);
    return NULL;
}

const rbp_iseq_info *rbp_iseq_get(rbpeek_session *s, uint64_t iseq)
{
    const rbp_layout *L = &s->layout;
    rbp_symcache *c = symcache(s);
    if (!c || rbp_imemo_type(s, iseq) != RBP_IMEMO_ISEQ) return NULL;
    uint64_t body = 0;
    if (!rbp_mem_u64(s->mem, iseq + (uint64_t)rbp_off(L, RBP_L_iseq_body), &body) || !body) return NULL;
    iseq_entry *e = rbp_addrmap_get(&c->iseqs, iseq);
    if (e && e->info.body == body) return &e->info;

    /* Read the whole constant body head in one go: every member we use lies
     * within its first few hundred bytes. */
    int32_t span = 0;
    static const rbp_field_id BODY_FIELDS[] = {
        RBP_L_body_type, RBP_L_body_iseq_size, RBP_L_body_iseq_encoded, RBP_L_body_pathobj,
        RBP_L_body_label, RBP_L_body_insns_body, RBP_L_body_insns_positions, RBP_L_body_insns_size,
        RBP_L_body_insns_succ, RBP_L_body_parent_iseq, RBP_L_body_local_iseq, RBP_L_body_builtin_attrs,
        RBP_L_body_first_lineno,
    };
    for (size_t i = 0; i < sizeof BODY_FIELDS / sizeof BODY_FIELDS[0]; i++)
        if (rbp_has(L, BODY_FIELDS[i]) && rbp_off(L, BODY_FIELDS[i]) + 8 > span)
            span = rbp_off(L, BODY_FIELDS[i]) + 8;
    if (span <= 0 || span > 4096) return NULL;
    uint8_t buf[4096];
    if (!rbp_mem_read(s->mem, body, buf, (size_t)span)) return NULL;

    e = calloc(1, sizeof *e);
    if (!e) return NULL;
    rbp_iseq_info *in = &e->info;
    in->iseq = iseq;
    in->body = body;
    in->type = (int)(u64_at(L, RBP_L_body_type, buf) & 0xff);
    in->iseq_size = (uint32_t)u64_at(L, RBP_L_body_iseq_size, buf);
    in->iseq_encoded = u64_at(L, RBP_L_body_iseq_encoded, buf);
    in->insns_body = u64_at(L, RBP_L_body_insns_body, buf);
    in->insns_positions = u64_at(L, RBP_L_body_insns_positions, buf);
    in->insns_size = (uint32_t)u64_at(L, RBP_L_body_insns_size, buf);
    in->insns_succ = u64_at(L, RBP_L_body_insns_succ, buf);
    in->parent_iseq = u64_at(L, RBP_L_body_parent_iseq, buf);
    in->local_iseq = u64_at(L, RBP_L_body_local_iseq, buf);
    in->builtin_attrs = (uint32_t)u64_at(L, RBP_L_body_builtin_attrs, buf);
    in->first_lineno = first_lineno(L, buf);
    e->label = rbp_string_dup(s, u64_at(L, RBP_L_body_label, buf));
    if (!e->label) e->label = literal_label(s, u64_at(L, RBP_L_body_label, buf), in->type);
    read_pathobj(s, u64_at(L, RBP_L_body_pathobj, buf), &e->path, &e->abspath);
    if (!e->label) e->label = strdup("?");
    if (!e->path) e->path = strdup("");
    in->label = e->label;
    in->path = e->path;
    in->abspath = e->abspath;
    if (!e->label || !e->path) {
        free_iseq_entry(e);
        return NULL;
    }
    bool would_drop = rbp_addrmap_get(&c->iseqs, iseq) != NULL || c->iseqs.len >= c->iseqs.max_entries;
    if (c->hold && would_drop) { /* keep every entry handed out valid until the hold ends */
        if (c->nheld == c->capheld) {
            size_t nc = c->capheld ? c->capheld * 2 : 16;
            iseq_entry **nh = realloc(c->held, nc * sizeof *nh);
            if (!nh) {
                free_iseq_entry(e);
                return NULL;
            }
            c->held = nh;
            c->capheld = nc;
        }
        c->held[c->nheld++] = e;
        return in;
    }
    if (!rbp_addrmap_put(&c->iseqs, iseq, e)) return NULL; /* put freed e */
    return in;
}

/* iseq.c's succ_index_lookup: rank of position pos in the bitvector. */
#define SUCC_IMM_SIZE 54       /* IMMEDIATE_TABLE_SIZE */
#define SUCC_IMM_BYTES 48      /* uint64_t imm_part[54 / 9] */
#define SUCC_BLOCK_BYTES 80    /* {unsigned rank; uint64_t small_block_ranks; uint64_t bits[8]} */

static bool succ_lookup(rbpeek_session *s, uint64_t table, uint32_t pos, uint32_t *rank)
{
    if (pos < SUCC_IMM_SIZE) {
        uint64_t imm;
        if (!rbp_mem_u64(s->mem, table + (pos / 9) * 8, &imm)) return false;
        *rank = (uint32_t)((imm >> ((pos % 9) * 7)) & 0x7f);
        return true;
    }
    uint32_t x = pos - SUCC_IMM_SIZE;
    uint8_t blk[SUCC_BLOCK_BYTES];
    if (!rbp_mem_read(s->mem, table + SUCC_IMM_BYTES + (uint64_t)(x / 512) * SUCC_BLOCK_BYTES, blk, sizeof blk))
        return false;
    uint32_t block_rank;
    uint64_t small_ranks, bits;
    uint32_t bit_index = x % 512, small = bit_index / 64;
    memcpy(&block_rank, blk, 4);
    memcpy(&small_ranks, blk + 8, 8);
    memcpy(&bits, blk + 16 + small * 8, 8);
    uint32_t small_rank = small == 0 ? 0 : (uint32_t)((small_ranks >> ((small - 1) * 9)) & 0x1ff);
    *rank = block_rank + small_rank + (uint32_t)__builtin_popcountll(bits << (63 - bit_index % 64));
    return true;
}

static int iseq_lineno_uncached(rbpeek_session *s, const rbp_iseq_info *in, uint64_t pc);

int rbp_iseq_lineno(rbpeek_session *s, const rbp_iseq_info *in, uint64_t pc)
{
    /* Every rbp_iseq_info handed out is the first member of an iseq_entry. */
    iseq_entry *e = (iseq_entry *)(uintptr_t)in;
    size_t slot = (size_t)((pc >> 3) % LINE_MEMO);
    if (pc && e->lines && e->lines->pc[slot] == pc) return e->lines->line[slot];
    int line = iseq_lineno_uncached(s, in, pc);
    if (pc && (e->lines || (e->lines = calloc(1, sizeof *e->lines)))) {
        e->lines->pc[slot] = pc;
        e->lines->line[slot] = line;
    }
    return line;
}

static int iseq_lineno_uncached(rbpeek_session *s, const rbp_iseq_info *in, uint64_t pc)
{
    const rbp_layout *L = &s->layout;
    if (!pc || pc < in->iseq_encoded) return 0;
    uint64_t n = (pc - in->iseq_encoded) / 8;
    if (n > in->iseq_size) return 0;
    uint32_t pos = n ? (uint32_t)n - 1 : 0;
    uint32_t size = in->insns_size, index;
    if (size == 0 || size > (1u << 24)) return 0;
    if (size == 1) {
        index = 0;
    } else if (in->insns_succ) {
        uint32_t rank;
        if (!succ_lookup(s, in->insns_succ, pos, &rank) || rank == 0 || rank > size) return 0;
        index = rank - 1;
    } else if (in->insns_positions) { /* linear search, as get_insn_info_linear_search */
        index = 0;
        for (uint32_t i = 1; i < size; i++) {
            uint32_t p;
            if (!rbp_mem_u32(s->mem, in->insns_positions + (uint64_t)i * 4, &p)) return 0;
            if (p == pos) { index = i; break; }
            if (p > pos) break;
            index = i;
        }
    } else {
        return 0;
    }
    uint32_t line;
    uint64_t entry = in->insns_body + (uint64_t)index * (uint64_t)L->f[RBP_L_insn_info_size].size;
    if (!rbp_mem_u32(s->mem, entry + (uint64_t)rbp_off(L, RBP_L_insn_info_line_no), &line)) return 0;
    return (int)line;
}

/* vm_insnhelper.c's check_method_entry. */
static uint64_t check_method_entry(rbpeek_session *s, uint64_t obj, bool can_be_svar)
{
    for (int hop = 0; hop < 2 && obj; hop++) {
        int t = rbp_imemo_type(s, obj);
        if (t == RBP_IMEMO_MENT) return obj;
        if (t != RBP_IMEMO_SVAR || !can_be_svar || !rbp_has(&s->layout, RBP_L_svar_cref_or_me)) return 0;
        if (!rbp_mem_u64(s->mem, obj + (uint64_t)rbp_off(&s->layout, RBP_L_svar_cref_or_me), &obj)) return 0;
        can_be_svar = false;
    }
    return 0;
}

#define VM_ENV_FLAG_LOCAL 0x0002

uint64_t rbp_frame_method_entry(rbpeek_session *s, uint64_t ep, size_t *budget)
{
    rbp_walkguard g = rbp_walkguard_start(MAX_PARENT_HOPS, budget);
    for (; ep && rbp_walkguard_step(&g, ep) == RBP_WALK_OK;) {
        uint64_t env[3]; /* ep[-2] me_cref, ep[-1] specval, ep[0] flags */
        if (!rbp_mem_read(s->mem, ep - 16, env, sizeof env)) return 0;
        if (env[2] & VM_ENV_FLAG_LOCAL) return check_method_entry(s, env[0], true);
        uint64_t me = check_method_entry(s, env[0], false);
        if (me) return me;
        ep = env[1] & ~UINT64_C(3); /* VM_ENV_PREV_EP */
    }
    return 0;
}

bool rbp_cme_read(rbpeek_session *s, uint64_t cme, rbp_cme *out)
{
    const rbp_layout *L = &s->layout;
    uint64_t def = 0, type = 0;
    memset(out, 0, sizeof *out);
    if (!cme || !rbp_mem_u64(s->mem, cme + (uint64_t)rbp_off(L, RBP_L_me_def), &def) || !def) return false;
    out->def = def;
    if (rbp_has(L, RBP_L_me_owner)) rbp_mem_u64(s->mem, cme + (uint64_t)rbp_off(L, RBP_L_me_owner), &out->owner);
    if (!rbp_mem_u64(s->mem, def + (uint64_t)rbp_off(L, RBP_L_mdef_original_id), &out->original_id)) return false;
    out->def_type = rbp_read_field(s, def, RBP_L_mdef_type, &type) ? (int)type : -1;
    if (out->def_type == 0 && rbp_has(L, RBP_L_mdef_iseqptr))
        rbp_mem_u64(s->mem, def + (uint64_t)rbp_off(L, RBP_L_mdef_iseqptr), &out->iseqptr);
    return true;
}

bool rbp_cme_is_cfunc_like(rbpeek_session *s, const rbp_cme *cme)
{
    if (cme->def_type == 1) return true; /* VM_METHOD_TYPE_CFUNC */
    if (cme->def_type == 0 && s->rel.frames.c_trace_builtins && cme->iseqptr) {
        const rbp_iseq_info *in = rbp_iseq_get(s, cme->iseqptr);
        return in && (in->builtin_attrs & RBP_BUILTIN_ATTR_C_TRACE);
    }
    return false;
}

/* 3.4's rb_gen_method_name: "Klass#name", "Klass.name", or just name when
 * the owner has no permanent name. */
static void gen_method_name(rbpeek_session *s, uint64_t owner, const char *name, char *out, size_t outlen)
{
    uint64_t flags;
    bool permanent;
    snprintf(out, outlen, "%s", name);
    if (!rbp_obj_flags(s, owner, &flags)) return;
    int t = (int)(flags & RBP_T_MASK);
    if (t != RBP_T_CLASS && t != RBP_T_MODULE) return;
    if (t == RBP_T_CLASS && (flags & RBP_FL_USER(1))) { /* FL_SINGLETON */
        uint64_t ext = 0, attached = 0;
        const rbp_layout *L = &s->layout;
        if (!rbp_has(L, RBP_L_rclass_and_ext_classext) || !rbp_has(L, RBP_L_classext_attached_object)) return;
        ext = owner + (uint64_t)rbp_off(L, RBP_L_rclass_and_ext_classext);
        if (!rbp_mem_u64(s->mem, ext + (uint64_t)rbp_off(L, RBP_L_classext_attached_object), &attached)) return;
        int at = rbp_obj_type(s, attached);
        if (at != RBP_T_CLASS && at != RBP_T_MODULE) return;
        const char *path = rbp_class_path(s, attached, &permanent);
        if (path && permanent) snprintf(out, outlen, "%s.%s", path, name);
        return;
    }
    const char *path = rbp_class_path(s, owner, &permanent);
    if (path && permanent) snprintf(out, outlen, "%s#%s", path, name);
}

/* 3.4's calculate_iseq_label. It recurses once per block nesting (a
 * block's label is built on its local iseq's), through a recursion guard
 * (base/walkguard.h): every hop and every level draws on one budget of
 * MAX_PARENT_HOPS, so garbage iseqs whose parents and local iseqs point at
 * each other cannot recurse without end; a local iseq met again further
 * up is a loop, seen at once; and the recursion, which takes a label
 * buffer per level, stops at MAX_LABEL_DEPTH levels below the first (a
 * real block's local iseq is a method, class or top-level iseq: one
 * level). */
#define MAX_LABEL_DEPTH 8
static void iseq_label_34_at(rbpeek_session *s, const rbp_iseq_info *in, uint64_t owner, char *out, size_t outlen,
                             size_t *budget, rbp_recguard *rec)
{
    rbp_walkguard g = rbp_walkguard_start(MAX_PARENT_HOPS, budget);
    for (; in && rbp_walkguard_step(&g, in->iseq) == RBP_WALK_OK;) {
        switch (in->type) {
        case RBP_ISEQ_TOP:
        case RBP_ISEQ_CLASS:
        case RBP_ISEQ_MAIN:
            snprintf(out, outlen, "%s", in->label);
            return;
        case RBP_ISEQ_METHOD:
            gen_method_name(s, owner, in->label, out, outlen);
            return;
        case RBP_ISEQ_BLOCK:
        case RBP_ISEQ_PLAIN: {
            int level = 0;
            const rbp_iseq_info *orig = in, *cur = in;
            if (orig->parent_iseq) {
                rbp_walkguard up = rbp_walkguard_start(MAX_PARENT_HOPS, budget);
                bool ok = true;
                while (cur && orig->local_iseq != cur->iseq && (ok = rbp_walkguard_step(&up, cur->iseq) == RBP_WALK_OK)) {
                    if (cur->type == RBP_ISEQ_BLOCK) level++;
                    cur = rbp_iseq_get(s, cur->parent_iseq);
                }
                if (!cur || !ok) {
                    snprintf(out, outlen, "%s", orig->label);
                    return;
                }
            }
            char inner[LABEL_MAX - 64]; /* room for the "block (N levels) in " prefix */
            /* no parent (Ruby would recurse forever), a local iseq met
             * again further up, or too deep: report the raw label */
            if (cur == orig || rbp_rec_enter(rec, cur->iseq) != RBP_WALK_OK) {
                snprintf(inner, sizeof inner, "%s", orig->label);
            } else {
                iseq_label_34_at(s, cur, owner, inner, sizeof inner, budget, rec);
                rbp_rec_leave(rec);
            }
            if (level <= 1)
                snprintf(out, outlen, "block in %s", inner);
            else
                snprintf(out, outlen, "block (%d levels) in %s", level, inner);
            return;
        }
        case RBP_ISEQ_RESCUE:
        case RBP_ISEQ_ENSURE:
        case RBP_ISEQ_EVAL:
            in = rbp_iseq_get(s, in->parent_iseq);
            continue;
        default:
            snprintf(out, outlen, "%s", in->label);
            return;
        }
    }
    snprintf(out, outlen, "?");
}

static void iseq_label_34(rbpeek_session *s, const rbp_iseq_info *in, uint64_t owner, char *out, size_t outlen)
{
    size_t budget = MAX_PARENT_HOPS;
    rbp_recguard rec;
    rbp_recguard_init(&rec, MAX_LABEL_DEPTH + 1, &budget);
    if (in) rbp_rec_enter(&rec, in->iseq);
    iseq_label_34_at(s, in, owner, out, outlen, &budget, &rec);
}

static uint64_t pair_key(uint64_t a, uint64_t b)
{
    uint64_t k = a * UINT64_C(0x9E3779B97F4A7C15) ^ (b + UINT64_C(0x632BE59BD9B4E019) + (a << 6) + (a >> 2));
    return k ? k : 1;
}

static const char *cached_label(rbp_addrmap *m, uint64_t a, uint64_t b)
{
    label_entry *e = rbp_addrmap_get(m, pair_key(a, b));
    return e && e->a == a && e->b == b ? e->label : NULL;
}

static const char *store_label(rbp_addrmap *m, uint64_t a, uint64_t b, const char *label)
{
    label_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->label = strdup(label))) {
        free(e);
        return NULL;
    }
    e->a = a;
    e->b = b;
    uint64_t key = pair_key(a, b);
    if (!rbp_addrmap_put(m, key, e)) return NULL;
    return e->label;
}

const char *rbp_iseq_frame_label(rbpeek_session *s, const rbp_iseq_info *in, uint64_t owner)
{
    if (!s->rel.frames.qualified_labels) return in->label;
    rbp_symcache *c = symcache(s);
    if (!c) return in->label;
    const char *hit = cached_label(&c->labels, in->iseq, owner);
    if (hit) return hit;
    char buf[LABEL_MAX];
    c->hold++; /* the iseqs met on the way, in included, stay valid until stored */
    iseq_label_34(s, in, owner, buf, sizeof buf);
    const char *stored = store_label(&c->labels, in->iseq, owner, buf);
    const char *label = stored ? stored : in->label;
    if (--c->hold == 0 && c->nheld) {
        if (!stored) label = "?"; /* in->label may be one of the held entries' */
        release_held(c);
    }
    return label;
}

const char *rbp_cfunc_label(rbpeek_session *s, const rbp_cme *cme)
{
    const char *name = rbp_id_name(s, cme->original_id);
    if (!name) return "<unknown C method>";
    if (!s->rel.frames.qualified_labels) return name;
    rbp_symcache *c = symcache(s);
    if (!c) return name;
    const char *hit = cached_label(&c->cfuncs, cme->owner, cme->original_id);
    if (hit) return hit;
    char buf[LABEL_MAX];
    gen_method_name(s, cme->owner, name, buf, sizeof buf);
    const char *stored = store_label(&c->cfuncs, cme->owner, cme->original_id, buf);
    return stored ? stored : name;
}

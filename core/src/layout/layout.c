/*
 * Layout tables: field metadata from layout_fields.def, the text format used
 * by layout files and the built-in tables, and the lookup of a built-in
 * table for a Ruby version (exact, else nearest patch of the same minor).
 */
#include "layout/layout.h"

#include "memory/machine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct field_meta {
    const char *name, *type, *member;
    size_t len; /* strlen(name): a lookup compares lengths before bytes */
} field_meta;

static const field_meta META[RBP_L_COUNT] = {
#define RBP_FIELD(id, type, member) {#id, type, member, sizeof #id - 1},
#define RBP_SIZE(id, type) {#id, type, NULL, sizeof #id - 1},
#include "layout/layout_fields.def"
#undef RBP_FIELD
#undef RBP_SIZE
};

const char *rbp_field_name(rbp_field_id id) { return id < RBP_L_COUNT ? META[id].name : "?"; }
const char *rbp_field_type(rbp_field_id id) { return id < RBP_L_COUNT ? META[id].type : "?"; }
const char *rbp_field_member(rbp_field_id id) { return id < RBP_L_COUNT ? META[id].member : NULL; }
bool rbp_field_is_size(rbp_field_id id) { return id < RBP_L_COUNT && META[id].member == NULL; }

/* A parse looks up every line's name, and the tables list the members in
 * this file's order: the search starts after the last line's member
 * (*hint), and compares the length and the first byte before the bytes. */
static rbp_field_id field_from(const char *name, int *hint)
{
    size_t len = strlen(name);
    for (int k = 0; k < RBP_L_COUNT; k++) {
        int i = (*hint + k) % RBP_L_COUNT;
        if (META[i].len == len && META[i].name[0] == name[0] && memcmp(META[i].name, name, len) == 0) {
            *hint = i + 1;
            return (rbp_field_id)i;
        }
    }
    return RBP_L_COUNT;
}

rbp_field_id rbp_field_by_name(const char *name)
{
    int hint = 0;
    return field_from(name, &hint);
}

void rbp_layout_clear(rbp_layout *l)
{
    memset(l, 0, sizeof *l);
    l->machine = RBP_MACHINE_DEFAULT;
    l->nsources = 1; /* group 0: members of no named source */
    for (int i = 0; i < RBP_L_COUNT; i++)
        l->f[i] = (rbp_field){.offset = -1, .size = 0, .bit_offset = 0, .bit_size = 0};
}

uint64_t rbp_field_extract(const rbp_layout *l, rbp_field_id id, const uint8_t *base)
{
    const rbp_field *f = &l->f[id];
    if (f->offset < 0) return 0;
    uint64_t v = 0;
    if (f->bit_size > 0) {
        /* Only as many bytes as the bits span: the struct may end right after. */
        int nbytes = (f->bit_offset + f->bit_size + 7) / 8;
        if (nbytes > 8) nbytes = 8;
        memcpy(&v, base + f->offset, (size_t)nbytes);
        v >>= f->bit_offset;
        if (f->bit_size < 64) v &= (UINT64_C(1) << f->bit_size) - 1;
        return v;
    }
    int n = f->size > 0 && f->size <= 8 ? f->size : 8;
    memcpy(&v, base + f->offset, (size_t)n);
    return v;
}

/* Bytes a reader takes at a member's offset: a bitfield's storage unit
 * (what the bits span, at most 8), else the member up to one word (wider
 * members are addressed, and their first word read). */
static int64_t read_span(const rbp_field *f)
{
    if (f->bit_size > 0) return (f->bit_offset + f->bit_size + 7) / 8;
    return f->size > 0 && f->size <= 8 ? f->size : 8;
}

/* The RBP_SIZE entry that gives the size of the struct member id lies in,
 * RBP_L_COUNT when the member list has none for that type. Every attach
 * checks every member: the first byte is compared before the string. */
typedef struct type_memo {
    const char *type;   /* the last type looked up (members come grouped by type) */
    rbp_field_id sz;
} type_memo;

static rbp_field_id size_of_type(rbp_field_id id, type_memo *m)
{
    const char *type = META[id].type;
    if (m->type == type) return m->sz;
    m->type = type;
    m->sz = RBP_L_COUNT;
    for (int i = 0; i < RBP_L_COUNT; i++)
        if (META[i].member == NULL && META[i].type[0] == type[0] && strcmp(META[i].type, type) == 0) {
            m->sz = (rbp_field_id)i;
            break;
        }
    return m->sz;
}

static bool check_field(const rbp_layout *l, rbp_field_id id, const rbp_field *f, const char *how, char *why,
                        size_t n, type_memo *m)
{
    const char *name = META[id].name;
    if (f->offset < 0) return true; /* absent */
    if (META[id].member == NULL) {
        if (f->size <= 0) {
            snprintf(why, n, "%s%s gives %s a size of %d bytes", how, name, META[id].type, f->size);
            return false;
        }
        return true;
    }
    if (f->bit_size > 0) {
        /* The bits are read from their storage unit and nowhere else: a
         * unit of 1, 2, 4 or 8 bytes that holds all of them. */
        if ((f->size != 1 && f->size != 2 && f->size != 4 && f->size != 8) ||
            f->bit_offset + f->bit_size > 8 * f->size) {
            snprintf(why, n, "%sbitfield %s (bits %d..%d) does not fit its %d-byte storage unit", how, name,
                     f->bit_offset, f->bit_offset + f->bit_size - 1, f->size);
            return false;
        }
    }
    rbp_field_id sz = size_of_type(id, m);
    if (sz == RBP_L_COUNT || l->f[sz].offset < 0 || l->f[sz].size <= 0) return true; /* struct size unknown */
    int64_t end = (int64_t)f->offset + (f->size > read_span(f) ? f->size : read_span(f));
    if (end > l->f[sz].size) {
        snprintf(why, n, "%s%s (offset %d, %lld bytes) lies past the end of %s (%s %d)", how, name, f->offset,
                 (long long)(end - f->offset), META[id].type, META[sz].name, l->f[sz].size);
        return false;
    }
    return true;
}

bool rbp_layout_check(const rbp_layout *l, char *why, size_t n)
{
    type_memo m = {NULL, RBP_L_COUNT};
    for (int i = 0; i < RBP_L_COUNT; i++)
        if (!check_field(l, (rbp_field_id)i, &l->f[i], "", why, n, &m)) return false;
    for (int a = 0; a < l->nalt; a++)
        if (l->alt[a].id >= RBP_L_COUNT || !check_field(l, l->alt[a].id, &l->alt[a].f, "alternative of ", why, n, &m))
            return false;
    return true;
}

static void set_err(char *err, size_t errlen, const char *fmt, int line, const char *what)
{
    if (err && errlen) snprintf(err, errlen, fmt, line, what);
}

int rbp_layout_parse(rbp_layout *out, const char *text, char *err, size_t errlen)
{
    rbp_layout_clear(out);
    int lineno = 0, fields = 0, hint = 0;
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[256];
        lineno++;
        if (len >= sizeof line) {
            set_err(err, errlen, "line %d: %s", lineno, "too long");
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : NULL;

        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char name[96];
        if (sscanf(line, "%95s", name) != 1) continue; /* blank or comment */
        if (strcmp(name, "ruby") == 0) {
            if (sscanf(line, "%*s %31s", out->ruby_version) != 1) {
                set_err(err, errlen, "line %d: %s", lineno, "'ruby' needs a version");
                return -1;
            }
            continue;
        }
        if (strcmp(name, "machine") == 0) {
            /* Never guessed: a layout of a machine this rbpeek cannot name
             * must not be read as x86-64's. */
            char m[32] = "";
            if (sscanf(line, "%*s %31s", m) != 1 || !(out->machine = rbp_machine_by_name(m))) {
                set_err(err, errlen, "line %d: 'machine' needs a machine this rbpeek knows (x86-64, aarch64, ...), not '%s'",
                        lineno, m);
                return -1;
            }
            continue;
        }
        if (strcmp(name, "source") == 0) {
            const char *what = line + strspn(line, " \t") + strlen("source");
            what += strspn(what, " \t");
            if (!*what || out->nsources >= RBP_LAYOUT_MAX_SOURCES) {
                set_err(err, errlen, "line %d: %s", lineno, "'source' needs words, and at most 5 of them fit");
                return -1;
            }
            char *dst = out->sources[out->nsources++];
            snprintf(dst, sizeof out->sources[0], "%s", what);
            for (size_t k = strlen(dst); k > 0 && (dst[k - 1] == ' ' || dst[k - 1] == '\t'); k--) dst[k - 1] = '\0';
            continue;
        }
        bool alt = strcmp(name, "alt") == 0;
        if (alt && sscanf(line, "%*s %95s", name) != 1) {
            set_err(err, errlen, "line %d: %s", lineno, "'alt' needs a field");
            return -1;
        }
        long off, size, boff = 0, bsize = 0;
        int n = sscanf(line, alt ? "%*s %*s %ld %ld %ld %ld" : "%*s %ld %ld %ld %ld", &off, &size, &boff, &bsize);
        if (n != 2 && n != 4) {
            set_err(err, errlen, "line %d: expected '<field> <offset> <size> [<bit_offset> <bit_size>]', got '%s'",
                    lineno, name);
            return -1;
        }
        if (off < 0 || off > 1 << 20 || size < 0 || size > 1 << 20 || boff < 0 || boff > 63 || bsize < 0 ||
            bsize > 64) {
            set_err(err, errlen, "line %d: value out of range for '%s'", lineno, name);
            return -1;
        }
        rbp_field_id id = field_from(name, &hint);
        if (id == RBP_L_COUNT) continue; /* a field this rbpeek does not use */
        rbp_field f = {(int32_t)off, (int32_t)size, (int16_t)boff, (int16_t)bsize};
        if (alt) {
            if (out->nalt >= RBP_LAYOUT_MAX_ALTS) {
                set_err(err, errlen, "line %d: %s", lineno, "too many 'alt' lines");
                return -1;
            }
            out->alt[out->nalt++] = (rbp_layout_alt){id, f};
            continue;
        }
        out->f[id] = f;
        out->src[id] = (uint8_t)(out->nsources - 1);
        fields++;
    }
    if (fields == 0) {
        set_err(err, errlen, "line %d: %s", lineno, "no fields found; is this an rbpeek layout file?");
        return -1;
    }
    return 0;
}

static size_t format_field(char *buf, size_t cap, const char *prefix, const char *name, const rbp_field *f)
{
    int n = f->bit_size ? snprintf(buf, cap, "%s%s %d %d %d %d\n", prefix, name, f->offset, f->size, f->bit_offset,
                                   f->bit_size)
                        : snprintf(buf, cap, "%s%s %d %d\n", prefix, name, f->offset, f->size);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap;
}

char *rbp_layout_format(const rbp_layout *l, const char *comment)
{
    size_t cap = 256 + (size_t)(RBP_L_COUNT + RBP_LAYOUT_MAX_ALTS) * 96 + RBP_LAYOUT_MAX_SOURCES * 80 + (comment ? strlen(comment) : 0);
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "# rbpeek layout (fields: core/src/layout/layout_fields.def)\n");
    if (comment) n += (size_t)snprintf(buf + n, cap - n, "# %s\n", comment);
    if (l->ruby_version[0]) n += (size_t)snprintf(buf + n, cap - n, "ruby %s\n", l->ruby_version);
    if (l->machine != RBP_MACHINE_DEFAULT && rbp_machine_name(l->machine))
        n += (size_t)snprintf(buf + n, cap - n, "machine %s\n", rbp_machine_name(l->machine));
    for (int g = 0; g < l->nsources && n < cap; g++) {
        if (g > 0) n += (size_t)snprintf(buf + n, cap - n, "source %s\n", l->sources[g]);
        for (int i = 0; i < RBP_L_COUNT && n < cap; i++)
            if (l->f[i].offset >= 0 && l->src[i] == g) n += format_field(buf + n, cap - n, "", META[i].name, &l->f[i]);
    }
    for (int a = 0; a < l->nalt && n < cap; a++)
        n += format_field(buf + n, cap - n, "alt ", META[l->alt[a].id].name, &l->alt[a].f);
    return buf;
}

/* Provided by the generated builtin_layouts.c. */
extern const size_t rbp_builtin_count;
extern const char *const rbp_builtin_versions[];
extern const char *const rbp_builtin_texts[];

size_t rbp_builtin_layout_count(void) { return rbp_builtin_count; }
const char *rbp_builtin_layout_version(size_t i) { return i < rbp_builtin_count ? rbp_builtin_versions[i] : NULL; }
const char *rbp_builtin_layout_text(size_t i) { return i < rbp_builtin_count ? rbp_builtin_texts[i] : NULL; }

uint16_t rbp_builtin_layout_machine(size_t i)
{
    /* One line of the table's text, looked for at each line's start. */
    for (const char *p = rbp_builtin_layout_text(i); p && *p;) {
        char name[32];
        if (strncmp(p, "machine ", 8) == 0 && sscanf(p + 8, "%31s", name) == 1) return rbp_machine_by_name(name);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return RBP_MACHINE_DEFAULT;
}

static bool parse_version(const char *v, int *maj, int *min, int *pat)
{
    *pat = 0;
    return v && sscanf(v, "%d.%d.%d", maj, min, pat) >= 2;
}

long rbp_builtin_layout_find(const char *version, uint16_t machine, bool *exact)
{
    int maj, min, pat;
    if (exact) *exact = false;
    if (!parse_version(version, &maj, &min, &pat)) return -1;
    long best = -1;
    int best_dist = 1 << 30;
    for (size_t i = 0; i < rbp_builtin_count; i++) {
        int bmaj, bmin, bpat;
        if (!parse_version(rbp_builtin_versions[i], &bmaj, &bmin, &bpat)) continue;
        if (bmaj != maj || bmin != min || rbp_builtin_layout_machine(i) != machine) continue;
        int dist = abs(bpat - pat);
        if (dist < best_dist) {
            best_dist = dist;
            best = (long)i;
        }
    }
    if (best >= 0 && exact) *exact = best_dist == 0;
    return best;
}

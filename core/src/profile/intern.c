/*
 * The profile's frame table: each distinct frame (its kind, label, path,
 * line, and for native frames module, pc, symbol and source place) is
 * stored once, in the profile's arena, and known by a 32-bit id from then
 * on, so the prefix tree compares and hashes integers. Lookup is one probe
 * sequence in an open-addressing table (table.h) keyed by the frame's hash.
 *
 * A frame's display name, the one string the text writers show (folded
 * stacks, the SVG, the top-N table), is made here once, when the frame is
 * first seen: "label (path:line)" for a Ruby or C-method frame ("label
 * (path)" without a line, "label" without a path, "?" for an empty label),
 * the label alone for the profile's own kinds. Writers that show a frame's
 * parts (speedscope, pprof) read them from the table, never from the name.
 */
#include "profile/profile.h"

#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "profile/table.h"

static inline uint64_t mix_in(uint64_t h, uint64_t v)
{
    return rbp_hash_u64(h ^ v) + 0x9e3779b97f4a7c15ULL;
}

static inline const char *nz(const char *s) { return s ? s : ""; }

static uint64_t desc_hash(const rbp_frame_desc *d, size_t label_len, size_t path_len)
{
    uint64_t h = rbp_hash_bytes(nz(d->label), label_len);
    h = mix_in(h, rbp_hash_bytes(nz(d->path), path_len));
    h = mix_in(h, ((uint64_t)(uint32_t)d->kind << 32) | (uint32_t)d->line);
    if (d->module || d->pc || d->symbol || d->native_file || d->native_line) {
        h = mix_in(h, d->pc);
        h = mix_in(h, rbp_hash_bytes(nz(d->module), strlen(nz(d->module))));
        h = mix_in(h, rbp_hash_bytes(nz(d->symbol), strlen(nz(d->symbol))));
        h = mix_in(h, rbp_hash_bytes(nz(d->native_file), strlen(nz(d->native_file))));
        h = mix_in(h, (uint32_t)d->native_line);
    }
    return h;
}

static bool same_str(const char *a, const char *b) { return strcmp(nz(a), nz(b)) == 0; }

static bool same_frame(const rbp_pframe *f, const rbp_frame_desc *d, size_t label_len, size_t path_len)
{
    return f->d.kind == d->kind && f->d.line == d->line && f->label_len == label_len && f->path_len == path_len &&
           memcmp(f->d.label, nz(d->label), label_len) == 0 && memcmp(f->d.path, nz(d->path), path_len) == 0 &&
           f->d.pc == d->pc && f->d.native_line == d->native_line && same_str(f->d.module, d->module) &&
           same_str(f->d.symbol, d->symbol) && same_str(f->d.native_file, d->native_file);
}

static uint64_t rbp_frame_rehash(const rbpeek_profile *p, uint32_t id) { return p->frames[id].hash; }

/* A Ruby or C-method frame's name, "label (path:line)" (with_line), or
 * "label (path)": "label (path)" without a line, "label" without a path, "?"
 * for an empty label. Writes it to out unless out is NULL; returns its
 * length. */
static size_t format_name(const rbp_pframe *f, bool with_line, char *out)
{
    const char *label = *f->d.label ? f->d.label : "?";
    size_t ll = strlen(label);
    char line[16] = "";
    if (with_line && f->path_len && f->d.line > 0) snprintf(line, sizeof line, ":%d", (int)f->d.line);
    size_t n = ll + (f->path_len ? 2 + f->path_len + strlen(line) + 1 : 0);
    if (!out) return n;
    memcpy(out, label, ll);
    char *w = out + ll;
    if (f->path_len) {
        memcpy(w, " (", 2);
        memcpy(w + 2, f->d.path, f->path_len);
        w += 2 + f->path_len;
        memcpy(w, line, strlen(line));
        w += strlen(line);
        *w++ = ')';
    }
    *w = '\0';
    return n;
}

static bool named_by_parts(const rbp_pframe *f) { return f->d.kind == RBP_PF_RUBY || f->d.kind == RBP_PF_CFUNC; }

/* The display name of a new frame, into the arena. */
static char *display_name(rbpeek_profile *p, const rbp_pframe *f, uint32_t *len)
{
    if (!named_by_parts(f)) {
        *len = f->label_len;
        return (char *)f->d.label;   /* already in the arena */
    }
    size_t need = format_name(f, true, NULL);
    if (need >= UINT32_MAX) return NULL;
    char *out = rbp_arena_alloc(&p->arena, need + 1);
    if (!out) return NULL;
    *len = (uint32_t)format_name(f, true, out);
    return out;
}

size_t rbp_pframe_method_name(const rbpeek_profile *p, uint32_t id, char *out)
{
    const rbp_pframe *f = &p->frames[id];
    if (named_by_parts(f)) return format_name(f, false, out);
    if (out) memcpy(out, p->names[id], (size_t)p->name_lens[id] + 1);
    return p->name_lens[id];
}

static const char *keep(rbpeek_profile *p, const char *s, bool *ok)
{
    if (!s || !*s) return "";
    char *c = rbp_arena_strdup(&p->arena, s);
    if (!c) *ok = false;
    return c ? c : "";
}

static bool grow_arrays(rbpeek_profile *p)
{
    if (p->nnames < p->names_cap) return true;
    uint32_t ncap = p->names_cap ? p->names_cap * 2 : 256;
    rbp_pframe *nf = realloc(p->frames, ncap * sizeof *nf);
    if (!nf) return false;
    p->frames = nf;
    char **nn = realloc(p->names, ncap * sizeof *nn);
    if (!nn) return false;
    p->names = nn;
    uint32_t *nl = realloc(p->name_lens, ncap * sizeof *nl);
    if (!nl) return false;
    p->name_lens = nl;
    p->names_cap = ncap;
    return true;
}

uint32_t rbp_profile_frame(rbpeek_profile *p, const rbp_frame_desc *d)
{
    size_t label_len = strlen(nz(d->label)), path_len = strlen(nz(d->path));
    if (label_len >= UINT32_MAX / 2 || path_len >= UINT32_MAX / 2 || p->nnames >= UINT32_MAX - 2) return UINT32_MAX;
    if (!rbp_table_grow(&p->name_table, &p->name_table_cap, p->nnames, rbp_frame_rehash, p)) return UINT32_MAX;
    uint64_t h = desc_hash(d, label_len, path_len);
    size_t mask = p->name_table_cap - 1, j = h & mask;
    for (uint32_t v; (v = p->name_table[j]) != 0; j = (j + 1) & mask) {
        rbp_pframe *f = &p->frames[v - 1];
        if (f->hash == h && same_frame(f, d, label_len, path_len)) {
            if (!f->d.first_line && d->first_line > 0) f->d.first_line = d->first_line;
            return v - 1;
        }
    }
    if (!grow_arrays(p)) return UINT32_MAX;
    bool ok = true;
    rbp_pframe f = {.d = *d, .label_len = (uint32_t)label_len, .path_len = (uint32_t)path_len, .hash = h};
    if (f.d.first_line < 0) f.d.first_line = 0;
    f.d.label = keep(p, d->label, &ok);
    f.d.path = keep(p, d->path, &ok);
    f.d.module = keep(p, d->module, &ok);
    f.d.symbol = keep(p, d->symbol, &ok);
    f.d.native_file = keep(p, d->native_file, &ok);
    uint32_t name_len = 0;
    char *name = ok ? display_name(p, &f, &name_len) : NULL;
    if (!name) return UINT32_MAX;
    uint32_t id = p->nnames++;
    p->frames[id] = f;
    p->names[id] = name;
    p->name_lens[id] = name_len;
    p->name_table[j] = id + 1;
    return id;
}

uint32_t rbp_intern(rbpeek_profile *p, const char *name)
{
    return rbp_profile_frame(p, &(rbp_frame_desc){.kind = RBP_PF_NAMED, .label = name});
}

/*
 * The speedscope writer (https://www.speedscope.app/file-format-schema.json):
 * "sampled" profiles whose frames are the profile's frame table (a frame
 * with a place in a Ruby file as its label, file and line; a machine frame
 * by its display name, with its source file and line where DWARF gives
 * them, else its module as the file; any other by its display name), with
 * one sample per distinct stack weighted by its count. A profile whose stacks start with process and thread root frames
 * (several processes, --per-thread) becomes one speedscope profile per
 * process and thread, named by them ("ruby app.rb (pid 12) / Thread "web"
 * (tid 13)"), its stacks without those frames, as speedscope shows threads;
 * any other profile is one speedscope profile, named by its title.
 */
#include "output/writer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "profile/profile.h"

enum { FLUSH_AT = 1 << 20 };

typedef struct rbp_ss_ctx {
    const rbpeek_profile *p;
    FILE *f;
    rbp_strbuf b;           /* pending output, written out past FLUSH_AT */
    rbp_json j;
    uint32_t *path;         /* frame ids root-first, indexed by depth - 1 */
    int pass;               /* 0: samples, 1: weights */
    const uint32_t *group;  /* the group's leading frame ids (process, thread), or NULL: every stack */
    uint32_t ngroup;
    uint64_t total;         /* the group's samples (counted by a pass 2) */
} rbp_ss_ctx;

/* A group of stacks: its leading process/thread nodes (at most two). */
typedef struct ss_group {
    uint32_t frames[2];
    uint32_t n;
} ss_group;

static bool is_root_kind(const rbpeek_profile *p, uint32_t node)
{
    int32_t k = p->frames[p->nodes[node].frame].d.kind;
    return k == RBP_PF_PROCESS || k == RBP_PF_THREAD;
}

/* The groups, in the sorted order of the tree: for each root child that is
 * a process frame, each of its thread children, and the process itself
 * for the rest of its stacks; a thread frame at the root alone; and one
 * group (n 0) for stacks starting with neither, if any. NULL (no groups:
 * one profile) when no root child is a process or thread frame. */
static ss_group *ss_groups(const rbpeek_profile *p, const rbp_children *ch, size_t *ngroups)
{
    *ngroups = 0;
    bool any = false, rest = false;
    for (uint32_t i = ch->off[0]; i < ch->off[1]; i++) {
        if (is_root_kind(p, ch->ids[i])) any = true;
        else rest = true;
    }
    if (!any) return NULL;
    size_t cap = 1 + (size_t)(ch->off[1] - ch->off[0]);
    for (uint32_t i = ch->off[0]; i < ch->off[1]; i++) {
        uint32_t c = ch->ids[i];
        cap += ch->off[c + 1] - ch->off[c];
    }
    ss_group *g = calloc(cap, sizeof *g);
    if (!g) return NULL;
    size_t n = 0;
    for (uint32_t i = ch->off[0]; i < ch->off[1]; i++) {
        uint32_t c = ch->ids[i];
        if (!is_root_kind(p, c)) continue;
        bool process = p->frames[p->nodes[c].frame].d.kind == RBP_PF_PROCESS;
        bool self_rest = !process || p->nodes[c].self > 0;
        if (process) {
            for (uint32_t k = ch->off[c]; k < ch->off[c + 1]; k++) {
                uint32_t t = ch->ids[k];
                if (p->frames[p->nodes[t].frame].d.kind == RBP_PF_THREAD)
                    g[n++] = (ss_group){{p->nodes[c].frame, p->nodes[t].frame}, 2};
                else
                    self_rest = true;
            }
        }
        if (self_rest) g[n++] = (ss_group){{p->nodes[c].frame, 0}, 1};
    }
    if (rest) g[n++] = (ss_group){{0, 0}, 0};
    *ngroups = n;
    return g;
}

/* Whether the stack in c->path (depth entries) is in the group, and where
 * its own frames start. A one-frame group takes only stacks whose next
 * frame is not a thread (those are the two-frame groups'). */
static bool ss_in_group(const rbp_ss_ctx *c, uint32_t depth, uint32_t *from)
{
    const rbpeek_profile *p = c->p;
    *from = 0;
    if (!c->group) return true;
    if (c->ngroup == 0) {
        return depth > 0 && !(p->frames[c->path[0]].d.kind == RBP_PF_PROCESS ||
                              p->frames[c->path[0]].d.kind == RBP_PF_THREAD);
    }
    if (depth <= c->ngroup) return false;
    for (uint32_t i = 0; i < c->ngroup; i++)
        if (c->path[i] != c->group[i]) return false;
    if (c->ngroup == 1 && p->frames[c->path[0]].d.kind == RBP_PF_PROCESS &&
        p->frames[c->path[1]].d.kind == RBP_PF_THREAD)
        return false;
    *from = c->ngroup;
    return true;
}

/* Writes what is pending; -1 (the profile's error set) if it cannot. */
static int ss_flush(rbp_ss_ctx *c)
{
    if (c->b.oom) {
        rbp_profile_fail(c->p, RBPEEK_ERR_NOMEM, "out of memory writing speedscope JSON");
        return -1;
    }
    if (c->b.len && fwrite(c->b.buf, 1, c->b.len, c->f) != c->b.len) {
        rbp_profile_fail(c->p, RBPEEK_ERR_IO, "error writing speedscope JSON: %s", strerror(errno));
        return -1;
    }
    c->b.len = 0;
    return 0;
}

static int rbp_ss_visit(void *vctx, uint32_t node, bool entering)
{
    rbp_ss_ctx *c = vctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &c->p->nodes[node];
    c->path[n->depth - 1] = n->frame;
    if (n->self == 0) return 0;
    uint32_t from;
    if (!ss_in_group(c, n->depth, &from)) return 0;
    if (c->pass == 2) {
        c->total += n->self;
        return 0;
    }
    if (c->pass == 1) {
        rbp_json_u64(&c->j, n->self);
    } else {
        rbp_json_array(&c->j);
        for (uint32_t d = from; d < n->depth; d++) rbp_json_u64(&c->j, c->path[d]);
        rbp_json_array_end(&c->j);
    }
    return c->b.len >= FLUSH_AT ? ss_flush(c) : 0;
}

/* The speedscope frame of profile frame i, on a line of its own: a place
 * in a Ruby file as name, file and line; a machine frame by its name, with
 * DWARF's source place or else its module as the file; any other by name. */
static void ss_frame(rbp_json *j, const rbpeek_profile *p, uint32_t i)
{
    const rbp_pframe *fr = rbp_profile_pframe(p, i);
    rbp_json_ws(j, "\n");
    rbp_json_object(j);
    if (rbp_pframe_has_place(fr)) {
        rbp_json_kstr(j, "name", rbp_pframe_label(fr));
        rbp_json_key(j, "file");
        rbp_json_strn(j, fr->d.path, fr->path_len);
        if (fr->d.line > 0) rbp_json_ki64(j, "line", fr->d.line);
    } else if (fr->d.kind == RBPEEK_FRAME_NATIVE && *fr->d.native_file && fr->d.native_line > 0) {
        /* a machine frame where DWARF gives its source place */
        rbp_json_key(j, "name");
        rbp_json_strn(j, p->names[i], p->name_lens[i]);
        rbp_json_kstr(j, "file", fr->d.native_file);
        rbp_json_ki64(j, "line", fr->d.native_line);
    } else if (fr->d.kind == RBPEEK_FRAME_NATIVE && *fr->d.module) {
        rbp_json_key(j, "name");
        rbp_json_strn(j, p->names[i], p->name_lens[i]);
        rbp_json_kstr(j, "file", fr->d.module);
    } else {
        rbp_json_key(j, "name");
        rbp_json_strn(j, p->names[i], p->name_lens[i]);
    }
    rbp_json_object_end(j);
}

/* The opening and "shared": {"frames": [...]}, a line for each frame. */
static rbpeek_status ss_write_frames(rbp_ss_ctx *c)
{
    const rbpeek_profile *p = c->p;
    rbp_json *j = &c->j;
    rbpeek_status st = RBPEEK_OK;
    rbp_json_object(j);
    rbp_json_kstr(j, "$schema", "https://www.speedscope.app/file-format-schema.json");
    rbp_json_ws(j, "\n");
    rbp_json_key(j, "shared");
    rbp_json_object(j);
    rbp_json_key(j, "frames");
    rbp_json_array(j);
    for (uint32_t i = 0; i < p->nnames && st == RBPEEK_OK; i++) {
        ss_frame(j, p, i);
        if (c->b.len >= FLUSH_AT && ss_flush(c) < 0) st = RBPEEK_ERR_IO;
    }
    if (!p->nnames) rbp_json_ws(j, "\n");
    rbp_json_array_end(j);
    rbp_json_object_end(j);
    return st;
}

/* A speedscope profile's name: the title when there are no groups, else
 * the group's process and thread frames ("(other stacks)" for the rest). */
static void ss_group_name(const rbp_ss_ctx *c, bool grouped, const char *title, rbp_strbuf *name)
{
    name->len = 0;
    if (!grouped) {
        rbp_sb_puts(name, title);
    } else if (c->ngroup == 0) {
        rbp_sb_puts(name, "(other stacks)");
    } else {
        for (uint32_t k = 0; k < c->ngroup; k++) {
            if (k) rbp_sb_puts(name, " / ");
            rbp_sb_puts(name, c->p->names[c->group[k]]);
        }
    }
}

/* One "sampled" profile of the group in c (its samples counted first, for
 * its endValue): its samples (pass 0) and weights (pass 1), each on a line
 * of its own. */
static rbpeek_status ss_write_profile(rbp_ss_ctx *c, const rbp_children *ch, const rbp_strbuf *name, bool first)
{
    rbp_json *j = &c->j;
    c->pass = 2;
    c->total = 0;
    rbpeek_status st = rbp_profile_walk(c->p, ch, rbp_ss_visit, c);
    if (st != RBPEEK_OK) return st;
    if (!first) rbp_json_ws(j, "\n");
    rbp_json_object(j);
    rbp_json_kstr(j, "type", "sampled");
    rbp_json_key(j, "name");
    rbp_json_strn(j, name->buf ? name->buf : "", name->len);
    rbp_json_kstr(j, "unit", "none");
    rbp_json_ku64(j, "startValue", 0);
    rbp_json_ku64(j, "endValue", c->total);
    for (int pass = 0; pass < 2 && st == RBPEEK_OK; pass++) {
        rbp_json_ws(j, "\n");
        rbp_json_key(j, pass == 0 ? "samples" : "weights");
        rbp_json_array(j);
        c->pass = pass;
        st = rbp_profile_walk(c->p, ch, rbp_ss_visit, c);
        rbp_json_array_end(j);
    }
    rbp_json_object_end(j);
    return st;
}

/* "profiles": one per group of stacks (ss_groups), or one for them all. */
static rbpeek_status ss_write_profiles(rbp_ss_ctx *c, const rbp_children *ch, const char *title)
{
    rbp_json_ws(&c->j, "\n");
    rbp_json_key(&c->j, "profiles");
    rbp_json_array(&c->j);
    size_t ngroups = 0;
    ss_group *groups = ss_groups(c->p, ch, &ngroups);
    rbp_strbuf name;
    rbp_sb_init(&name);
    rbpeek_status st = RBPEEK_OK;
    for (size_t gi = 0; gi < (groups ? ngroups : 1) && st == RBPEEK_OK; gi++) {
        c->group = groups ? groups[gi].frames : NULL;
        c->ngroup = groups ? groups[gi].n : 0;
        ss_group_name(c, groups != NULL, title, &name);
        st = ss_write_profile(c, ch, &name, gi == 0);
    }
    rbp_sb_free(&name);
    free(groups);
    return st;
}

/* The closing members (the file's name, the profile shown first, who
 * wrote it) and the last flush. */
static rbpeek_status ss_write_end(rbp_ss_ctx *c, const char *title)
{
    rbp_json *j = &c->j;
    rbp_json_array_end(j);
    rbp_json_ws(j, "\n");
    rbp_json_kstr(j, "name", title);
    rbp_json_ku64(j, "activeProfileIndex", 0);
    rbp_json_kstr(j, "exporter", "rbpeek");
    rbp_json_object_end(j);
    rbp_sb_putn(&c->b, "\n", 1);
    if (ss_flush(c) < 0) return c->b.oom ? RBPEEK_ERR_NOMEM : RBPEEK_ERR_IO;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_profile_write_speedscope(const rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    rbp_children ch;
    rbpeek_status st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) return st;
    rbp_ss_ctx c = {.p = p};
    rbp_sb_init(&c.b);
    rbp_json_init(&c.j, &c.b, RBP_JSON_TIGHT);
    c.path = malloc(((size_t)p->max_depth + 1) * sizeof *c.path);
    if (!c.path) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing speedscope JSON");
    }
    c.f = rbp_profile_open_out(p, path, &st);
    if (c.f) {
        const char *title = rbpeek_profile_meta(p, "title");
        char fallback[128];
        if (!title) {
            const char *pid = rbpeek_profile_meta(p, "pid");
            snprintf(fallback, sizeof fallback, "rbpeek sample%s%.40s", pid ? " pid " : "", pid ? pid : "");
            title = fallback;
        }
        st = ss_write_frames(&c);
        if (st == RBPEEK_OK) st = ss_write_profiles(&c, &ch, title);
        if (st == RBPEEK_OK) st = ss_write_end(&c, title);
        st = rbp_profile_close_out(p, c.f, path, st);
    }
    rbp_sb_free(&c.b);
    free(c.path);
    rbp_children_free(&ch);
    return st;
}

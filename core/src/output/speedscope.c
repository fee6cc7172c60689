/*
 * The speedscope writer (https://www.speedscope.app/file-format-schema.json):
 * one "sampled" profile whose frames are the profile's frame table (a
 * frame with a place in a Ruby file as its label, file and line; any other
 * by its display name), with one sample per distinct stack weighted by its
 * count.
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
} rbp_ss_ctx;

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
    if (c->pass == 1) {
        rbp_json_u64(&c->j, n->self);
    } else {
        rbp_json_array(&c->j);
        for (uint32_t d = 0; d < n->depth; d++) rbp_json_u64(&c->j, c->path[d]);
        rbp_json_array_end(&c->j);
    }
    return c->b.len >= FLUSH_AT ? ss_flush(c) : 0;
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
    rbp_json *j = &c.j;
    rbp_json_init(j, &c.b, RBP_JSON_TIGHT);
    c.path = malloc(((size_t)p->max_depth + 1) * sizeof *c.path);
    if (!c.path) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing speedscope JSON");
    }
    c.f = rbp_profile_open_out(p, path, &st);
    if (!c.f) goto out;
    const char *title = rbpeek_profile_meta(p, "title");
    char fallback[128];
    if (!title) {
        const char *pid = rbpeek_profile_meta(p, "pid");
        snprintf(fallback, sizeof fallback, "rbpeek sample%s%.40s", pid ? " pid " : "", pid ? pid : "");
        title = fallback;
    }
    /* The layout: a line for each frame, and the samples and weights on
     * lines of their own. */
    rbp_json_object(j);
    rbp_json_kstr(j, "$schema", "https://www.speedscope.app/file-format-schema.json");
    rbp_json_ws(j, "\n");
    rbp_json_key(j, "shared");
    rbp_json_object(j);
    rbp_json_key(j, "frames");
    rbp_json_array(j);
    for (uint32_t i = 0; i < p->nnames && st == RBPEEK_OK; i++) {
        const rbp_pframe *fr = rbp_profile_pframe(p, i);
        rbp_json_ws(j, "\n");
        rbp_json_object(j);
        if (rbp_pframe_has_place(fr)) {
            rbp_json_kstr(j, "name", rbp_pframe_label(fr));
            rbp_json_key(j, "file");
            rbp_json_strn(j, fr->d.path, fr->path_len);
            if (fr->d.line > 0) rbp_json_ki64(j, "line", fr->d.line);
        } else {
            rbp_json_key(j, "name");
            rbp_json_strn(j, p->names[i], p->name_lens[i]);
        }
        rbp_json_object_end(j);
        if (c.b.len >= FLUSH_AT && ss_flush(&c) < 0) st = RBPEEK_ERR_IO;
    }
    if (!p->nnames) rbp_json_ws(j, "\n");
    rbp_json_array_end(j);
    rbp_json_object_end(j);
    rbp_json_ws(j, "\n");
    rbp_json_key(j, "profiles");
    rbp_json_array(j);
    rbp_json_object(j);
    rbp_json_kstr(j, "type", "sampled");
    rbp_json_kstr(j, "name", title);
    rbp_json_kstr(j, "unit", "none");
    rbp_json_ku64(j, "startValue", 0);
    rbp_json_ku64(j, "endValue", p->nodes[0].total);
    rbp_json_ws(j, "\n");
    rbp_json_key(j, "samples");
    rbp_json_array(j);
    if (st == RBPEEK_OK) st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
    rbp_json_array_end(j);
    if (st == RBPEEK_OK) {
        rbp_json_ws(j, "\n");
        rbp_json_key(j, "weights");
        rbp_json_array(j);
        c.pass = 1;
        st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
        rbp_json_array_end(j);
    }
    if (st == RBPEEK_OK) {
        rbp_json_object_end(j);
        rbp_json_array_end(j);
        rbp_json_ws(j, "\n");
        rbp_json_kstr(j, "name", title);
        rbp_json_ku64(j, "activeProfileIndex", 0);
        rbp_json_kstr(j, "exporter", "rbpeek");
        rbp_json_object_end(j);
        rbp_sb_putn(&c.b, "\n", 1);
        if (ss_flush(&c) < 0) st = c.b.oom ? RBPEEK_ERR_NOMEM : RBPEEK_ERR_IO;
    }
    st = rbp_profile_close_out(p, c.f, path, st);
out:
    rbp_sb_free(&c.b);
    free(c.path);
    rbp_children_free(&ch);
    return st;
}

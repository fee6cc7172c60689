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

#include "base/strbuf.h"
#include "profile/profile.h"

/* Writes s[0..len) as a JSON string: quotes, backslashes and control
 * characters escaped (controls as \u00XX), invalid UTF-8 as U+FFFD. */
static void rbp_json_string(FILE *f, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    putc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        size_t n = 1;
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else if ((n = rbp_utf8_seq_len(u + i, len - i)) == 0) {
            fputs("\\ufffd", f);   /* JSON must stay valid UTF-8 */
            n = 1;
        } else {
            fwrite(u + i, 1, n, f);
        }
        i += n;
    }
    putc('"', f);
}

typedef struct rbp_ss_ctx {
    const rbpeek_profile *p;
    FILE *f;
    uint32_t *path;         /* frame ids root-first, indexed by depth - 1 */
    bool first;
    int pass;               /* 0: samples, 1: weights */
} rbp_ss_ctx;

static int rbp_ss_visit(void *vctx, uint32_t node, bool entering)
{
    rbp_ss_ctx *c = vctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &c->p->nodes[node];
    c->path[n->depth - 1] = n->frame;
    if (n->self == 0) return 0;
    if (!c->first) putc(',', c->f);
    c->first = false;
    if (c->pass == 1) {
        fprintf(c->f, "%llu", (unsigned long long)n->self);
        return 0;
    }
    putc('[', c->f);
    for (uint32_t d = 0; d < n->depth; d++) fprintf(c->f, d ? ",%u" : "%u", c->path[d]);
    if (putc(']', c->f) == EOF) {
        rbp_profile_fail(c->p, RBPEEK_ERR_IO, "error writing speedscope JSON: %s",
                         strerror(errno));
        return -1;
    }
    return 0;
}

rbpeek_status rbpeek_profile_write_speedscope(const rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    rbp_children ch;
    rbpeek_status st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) return st;
    rbp_ss_ctx c = {.p = p, .first = true};
    c.path = malloc(((size_t)p->max_depth + 1) * sizeof *c.path);
    if (!c.path) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing speedscope JSON");
    }
    c.f = rbp_profile_open_out(p, path, &st);
    if (!c.f) goto out;
    FILE *f = c.f;
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", f);
    fputs("\"shared\":{\"frames\":[\n", f);
    for (uint32_t i = 0; i < p->nnames; i++) {
        const rbp_pframe *fr = rbp_profile_pframe(p, i);
        fputs(i ? ",\n{\"name\":" : "{\"name\":", f);
        if (rbp_pframe_has_place(fr)) {
            const char *label = rbp_pframe_label(fr);
            rbp_json_string(f, label, strlen(label));
            fputs(",\"file\":", f);
            rbp_json_string(f, fr->d.path, fr->path_len);
            fprintf(f, ",\"line\":%ld}", (long)fr->d.line);
        } else {
            rbp_json_string(f, p->names[i], p->name_lens[i]);
            putc('}', f);
        }
    }
    fputs("]},\n\"profiles\":[{\"type\":\"sampled\",\"name\":", f);
    const char *title = rbpeek_profile_meta(p, "title");
    char fallback[128];
    if (!title) {
        const char *pid = rbpeek_profile_meta(p, "pid");
        snprintf(fallback, sizeof fallback, "rbpeek sample%s%.40s", pid ? " pid " : "",
                 pid ? pid : "");
        title = fallback;
    }
    rbp_json_string(f, title, strlen(title));
    fprintf(f, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":%llu,\n\"samples\":[",
            (unsigned long long)p->nodes[0].total);
    st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
    if (st == RBPEEK_OK) {
        fputs("],\n\"weights\":[", f);
        c.pass = 1;
        c.first = true;
        st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
    }
    if (st == RBPEEK_OK) {
        fputs("]}],\n\"name\":", f);
        rbp_json_string(f, title, strlen(title));
        fputs(",\"activeProfileIndex\":0,\"exporter\":\"rbpeek\"}\n", f);
    }
    st = rbp_profile_close_out(p, f, path, st);
out:
    free(c.path);
    rbp_children_free(&ch);
    return st;
}

/*
 * Output writers for snapshots: text that reads like Ruby's own backtrace
 * lines (quoting as the target version does: `label' before 3.4, 'label'
 * from 3.4), and the JSON document whose schema docs/usage.md fixes.
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "base/strbuf.h"
#include "context/context.h"
#include "vm/robject.h"

/* The VM's progname ($0 as the program was started), malloc'd, or NULL. */
static char *read_progname(rbpeek_session *s)
{
    uint64_t v = 0;
    if (!rbp_has(&s->layout, RBP_L_vm_progname) ||
        !rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(&s->layout, RBP_L_vm_progname), &v))
        return NULL;
    return rbp_string_dup(s, v);
}

/* What Ruby's Location#to_s prints for a frame whose path is nil: the
 * progname, with no line number. */
static const char *nil_path_text(rbpeek_session *s, char **progname)
{
    if (!*progname) *progname = read_progname(s);
    if (!*progname) *progname = strdup("(unknown)");
    return *progname ? *progname : "(unknown)";
}

static void text_thread(rbpeek_session *s, rbp_strbuf *b, const rbpeek_thread *t, size_t index, char **progname)
{
    bool new_quotes = rbp_ver_ge(s, 3, 4);
    rbp_sb_printf(b, "Thread %zu", index + 1);
    if (t->name) {
        rbp_sb_puts(b, " \"");
        rbp_sb_puts(b, t->name);
        rbp_sb_puts(b, "\"");
    }
    rbp_sb_printf(b, " (%s%s", t->is_main ? "main, " : "", rbpeek_thread_status_name(t->status));
    if (t->native_tid > 0) rbp_sb_printf(b, ", tid %lld", (long long)t->native_tid);
    if (t->ractor_index > 0) rbp_sb_printf(b, ", ractor %d", t->ractor_index);
    rbp_sb_puts(b, "):\n");
    if (t->nframes == 0 && !t->error) rbp_sb_puts(b, "    (no Ruby frames)\n");
    for (size_t i = 0; i < t->nframes; i++) {
        const rbpeek_frame *f = &t->frames[i];
        rbp_sb_printf(b, "    %s", f->path ? f->path : nil_path_text(s, progname));
        if (f->lineno) rbp_sb_printf(b, ":%d", f->lineno);
        rbp_sb_printf(b, new_quotes ? ":in '%s'\n" : ":in `%s'\n", f->label);
    }
    if (t->truncated) rbp_sb_puts(b, "    ... (stack cut at the frame limit)\n");
    if (t->error) rbp_sb_printf(b, "    (walk stopped: %s)\n", t->error);
}

static void json_thread(rbp_strbuf *b, const rbpeek_thread *t)
{
    rbp_sb_puts(b, "{\"name\": ");
    rbp_sb_json_str(b, t->name);
    rbp_sb_printf(b, ", \"main\": %s, \"native_tid\": ", t->is_main ? "true" : "false");
    if (t->native_tid > 0)
        rbp_sb_printf(b, "%lld", (long long)t->native_tid);
    else
        rbp_sb_puts(b, "null");
    rbp_sb_puts(b, ", \"status\": ");
    rbp_sb_json_str(b, rbpeek_thread_status_name(t->status));
    rbp_sb_printf(b, ", \"ractor\": %d, \"truncated\": %s, \"error\": ", t->ractor_index,
                  t->truncated ? "true" : "false");
    rbp_sb_json_str(b, t->error);
    rbp_sb_puts(b, ", \"frames\": [");
    for (size_t i = 0; i < t->nframes; i++) {
        const rbpeek_frame *f = &t->frames[i];
        rbp_sb_puts(b, i ? ", {\"label\": " : "{\"label\": ");
        rbp_sb_json_str(b, f->label);
        rbp_sb_puts(b, ", \"path\": ");
        rbp_sb_json_str(b, f->path);
        rbp_sb_puts(b, ", \"absolute_path\": ");
        rbp_sb_json_str(b, f->absolute_path);
        rbp_sb_printf(b, ", \"lineno\": %d, \"kind\": \"%s\"}", f->lineno,
                      f->kind == RBPEEK_FRAME_CFUNC ? "cfunc" : "ruby");
    }
    rbp_sb_puts(b, "]}");
}

rbpeek_status rbpeek_snapshot_render(rbpeek_session *s, const rbpeek_snapshot *snap, rbpeek_format format,
                                     long thread_index, char **out)
{
    if (!s || !snap || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "render: missing argument");
    *out = NULL;
    size_t n = rbpeek_snapshot_thread_count(snap);
    if (thread_index >= (long)n) return rbp_fail(s, RBPEEK_ERR_NOT_FOUND, "no Ruby thread #%ld", thread_index + 1);
    size_t first = thread_index < 0 ? 0 : (size_t)thread_index, last = thread_index < 0 ? n : first + 1;
    rbp_strbuf b;
    rbp_sb_init(&b);
    if (format == RBPEEK_FORMAT_JSON) {
        rbp_sb_puts(&b, "{\"ruby_version\": ");
        rbp_sb_json_str(&b, s->ruby_version);
        rbp_sb_puts(&b, ", \"threads\": [");
        for (size_t i = first; i < last; i++) {
            if (i > first) rbp_sb_puts(&b, ",\n  ");
            json_thread(&b, rbpeek_snapshot_thread(snap, i));
        }
        rbp_sb_puts(&b, "]}\n");
    } else if (format == RBPEEK_FORMAT_TEXT) {
        char *progname = NULL;
        for (size_t i = first; i < last; i++) {
            if (i > first) rbp_sb_puts(&b, "\n");
            text_thread(s, &b, rbpeek_snapshot_thread(snap, i), i, &progname);
        }
        free(progname);
    } else {
        return rbp_fail(s, RBPEEK_ERR_ARG, "render: unknown format %d", (int)format);
    }
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

static void json_symbol(rbp_strbuf *b, const char *name, uint64_t addr, const char *how, bool last)
{
    rbp_sb_printf(b, "\"%s\": ", name);
    if (addr)
        rbp_sb_printf(b, "{\"address\": %llu, \"found_by\": ", (unsigned long long)addr);
    else
        rbp_sb_puts(b, "{\"address\": null, \"found_by\": ");
    rbp_sb_json_str(b, addr ? how : NULL);
    rbp_sb_puts(b, last ? "}" : "}, ");
}

rbpeek_status rbpeek_session_describe(rbpeek_session *s, char **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "describe: missing argument");
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_sb_puts(&b, "{\"ruby_version\": ");
    rbp_sb_json_str(&b, s->ruby_version);
    rbp_sb_puts(&b, ", \"layout_source\": ");
    rbp_sb_json_str(&b, s->layout_source);
    rbp_sb_puts(&b, ", \"target_version\": ");
    rbp_sb_json_str(&b, s->target_version[0] ? s->target_version : NULL);
    rbp_sb_puts(&b, ", \"version_found_by\": ");
    rbp_sb_json_str(&b, s->version_override[0] ? "--ruby-version" : s->version_how);
    /* Where each group of members came from: a built-in table's public
     * facts and its line's supplement, or one unnamed group (DWARF, a file). */
    rbp_sb_puts(&b, ", \"layout_groups\": [");
    for (int g = 0, first = 1; g < s->layout.nsources; g++) {
        int members = 0;
        for (int i = 0; i < RBP_L_COUNT; i++) members += rbp_has(&s->layout, (rbp_field_id)i) && s->layout.src[i] == g;
        if (!members) continue;
        rbp_sb_puts(&b, first ? "{\"source\": " : ", {\"source\": ");
        rbp_sb_json_str(&b, g ? s->layout.sources[g] : s->layout_source);
        rbp_sb_printf(&b, ", \"members\": %d}", members);
        first = 0;
    }
    rbp_sb_puts(&b, "], \"layout_checks\": ");
    rbp_sb_json_str(&b, s->layout_checks);
    rbp_sb_puts(&b, ", \"warning\": ");
    rbp_sb_json_str(&b, s->warning[0] ? s->warning : NULL);
    /* What a frame whose path is nil prints as (Location#to_s). */
    char *progname = read_progname(s);
    rbp_sb_puts(&b, ", \"progname\": ");
    rbp_sb_json_str(&b, progname);
    free(progname);
    rbp_sb_puts(&b, ", \"memory_source\": ");
    rbp_sb_json_str(&b, rbp_mem_kind(s->mem));
    rbp_sb_printf(&b, ", \"vm\": %llu, \"vm_found_by\": ", (unsigned long long)s->vm);
    rbp_sb_json_str(&b, s->vm_source);
    rbp_sb_puts(&b, ", \"symbols\": {");
    json_symbol(&b, "ruby_version", s->version_addr, s->version_how, false);
    json_symbol(&b, "ruby_current_vm_ptr", s->vm_ptr_addr, s->vm_ptr_how, false);
    json_symbol(&b, "ruby_global_symbols", s->global_symbols, s->global_symbols_how, true);
    rbp_sb_puts(&b, "}}\n");
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

/*
 * `ruby info`'s description of a session (rbpeek_session_describe): what
 * attach found and how, as one JSON object.
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "base/strbuf.h"
#include "context/context.h"
#include "vm/robject.h"

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
    char *progname = rbp_vm_progname(s);
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

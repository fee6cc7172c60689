/*
 * `ruby info`'s description of a session (rbpeek_session_describe): what
 * attach found and how, as one JSON object.
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "context/context.h"
#include "vm/robject.h"

static void json_symbol(rbp_json *j, const char *name, uint64_t addr, const char *how)
{
    rbp_json_key(j, name);
    rbp_json_object(j);
    rbp_json_key(j, "address");
    if (addr) rbp_json_u64(j, addr);
    else rbp_json_null(j);
    rbp_json_kstr(j, "found_by", addr ? how : NULL);
    rbp_json_object_end(j);
}

rbpeek_status rbpeek_session_describe(rbpeek_session *s, char **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "describe: missing argument");
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_SPACED);
    rbp_json_object(&j);
    rbp_json_kstr(&j, "ruby_version", s->ruby_version);
    rbp_json_kstr(&j, "layout_source", s->layout_source);
    rbp_json_kstr(&j, "target_version", s->target_version[0] ? s->target_version : NULL);
    rbp_json_kstr(&j, "version_found_by", s->version_override[0] ? "--ruby-version" : s->version_how);
    /* Where each group of members came from: a built-in table's public
     * facts and its line's supplement, or one unnamed group (DWARF, a file). */
    rbp_json_key(&j, "layout_groups");
    rbp_json_array(&j);
    for (int g = 0; g < s->layout.nsources; g++) {
        int members = 0;
        for (int i = 0; i < RBP_L_COUNT; i++) members += rbp_has(&s->layout, (rbp_field_id)i) && s->layout.src[i] == g;
        if (!members) continue;
        rbp_json_object(&j);
        rbp_json_kstr(&j, "source", g ? s->layout.sources[g] : s->layout_source);
        rbp_json_ki64(&j, "members", members);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_kstr(&j, "layout_checks", s->layout_checks);
    rbp_json_kstr(&j, "warning", s->warning[0] ? s->warning : NULL);
    /* What a frame whose path is nil prints as (Location#to_s). */
    char *progname = rbp_vm_progname(s);
    rbp_json_kstr(&j, "progname", progname);
    free(progname);
    rbp_json_kstr(&j, "memory_source", rbp_mem_kind(s->mem));
    rbp_json_ku64(&j, "vm", s->vm);
    rbp_json_kstr(&j, "vm_found_by", s->vm_source);
    rbp_json_key(&j, "symbols");
    rbp_json_object(&j);
    json_symbol(&j, "ruby_version", s->version_addr, s->version_how);
    json_symbol(&j, "ruby_current_vm_ptr", s->vm_ptr_addr, s->vm_ptr_how);
    json_symbol(&j, "ruby_global_symbols", s->global_symbols, s->global_symbols_how);
    rbp_json_object_end(&j);
    rbp_json_object_end(&j);
    rbp_sb_putn(&b, "\n", 1);
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

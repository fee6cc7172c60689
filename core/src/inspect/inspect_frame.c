/*
 * A Ruby frame's locals for `ruby bt --locals` (rbpeek_frame_locals): the
 * names from its iseq's local table (body->local_table, local_table_size
 * IDs), the values from its environment, where local i of n lives at
 * ep[-(n - i + 2)] (below the VM_ENV_DATA_SIZE words me/cref, specval and
 * flags, as vm.c's binding code reads them); with the frame's self and its
 * method entry's owner. Every value goes through the value printer, so a
 * garbage slot prints as #<rbpeek: not a Ruby object ...>, never as
 * garbage. Anonymous and internal locals (*, **, &, ..., hidden temporaries)
 * are left out, as Binding#local_variables leaves them out.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "inspect/inspect.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

enum { MAX_LOCALS = 1 << 16 };

/* rb_is_local_id: a name that starts like a local variable. */
static bool local_name(const char *n)
{
    unsigned char c = n ? (unsigned char)n[0] : 0;
    return c == '_' || (c >= 'a' && c <= 'z') || c >= 0x80;
}

static void put_value(rbp_heap *h, uint64_t v, const rbp_inspect_limits *lim, rbp_strbuf *b)
{
    rbp_strbuf t;
    rbp_sb_init(&t);
    rbp_inspect_append(h, v, lim, &t, NULL);
    rbp_sb_json_str(b, t.buf ? t.buf : "");
    rbp_sb_free(&t);
}

/* One frame's JSON object into b, through an open heap. */
static void frame_json(rbpeek_session *s, rbp_heap *h, const rbpeek_frame *frame, const rbp_inspect_limits *lim,
                       rbp_strbuf *b)
{
    uint64_t body = 0, table = 0, size = 0;
    if (frame->kind != RBPEEK_FRAME_RUBY || !frame->iseq || !frame->ep) {
        rbp_sb_puts(b, "null");
        return;
    }
    if (!rbp_read_field(s, frame->iseq, RBP_L_iseq_body, &body) || !body ||
        !rbp_read_field(s, body, RBP_L_body_local_table, &table) ||
        !rbp_read_field(s, body, RBP_L_body_local_table_size, &size) || (size & 0xffffffffu) > MAX_LOCALS ||
        ((size & 0xffffffffu) && !table)) {
        rbp_sb_puts(b, "{\"error\": \"cannot read the local table of its iseq\"}");
        return;
    }
    size &= 0xffffffffu;
    uint64_t *ids = size ? malloc(size * 8) : NULL, *vals = size ? malloc(size * 8) : NULL;
    bool ok = !size || (ids && vals && rbp_mem_read(s->mem, table, ids, size * 8) &&
                        rbp_mem_read(s->mem, frame->ep - (size + 2) * 8, vals, size * 8));
    rbp_sb_puts(b, "{\"self\": ");
    put_value(h, frame->self, lim, b);
    rbp_cme cme;
    uint64_t me = rbp_frame_method_entry(s, frame->ep, NULL);
    rbp_sb_puts(b, ", \"owner\": ");
    if (me && rbp_cme_read(s, me, &cme) && cme.owner)
        rbp_sb_json_str(b, rbp_heap_class_name(h, cme.owner));
    else
        rbp_sb_puts(b, "null");
    rbp_sb_puts(b, ", \"locals\": {");
    if (!ok) {
        rbp_sb_puts(b, "}, \"error\": \"the local table or the environment is unreadable\"}");
    } else {
        bool first = true;
        for (uint64_t i = 0; i < size; i++) {
            const char *name = rbp_id_name(s, ids[i]);
            if (!local_name(name)) continue;
            if (!first) rbp_sb_puts(b, ", ");
            first = false;
            rbp_sb_json_str(b, name);
            rbp_sb_puts(b, ": ");
            put_value(h, vals[i], lim, b);
        }
        rbp_sb_puts(b, "}}");
    }
    free(ids);
    free(vals);
}

static rbpeek_status open_for_locals(rbpeek_session *s, rbp_heap *h)
{
    const rbp_layout *l = &s->layout;
    if (!rbp_has(l, RBP_L_body_local_table) || !rbp_has(l, RBP_L_body_local_table_size))
        return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT, "locals: the struct layout (%s) lacks the iseq's local table",
                        s->layout_source);
    return rbp_heap_open(s, h);
}

static rbpeek_status finish(rbpeek_session *s, rbp_heap *h, rbp_strbuf *b, char **out)
{
    rbp_heap_close(h);
    if (!(*out = rbp_sb_take(b))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "locals: out of memory");
    return RBPEEK_OK;
}

rbpeek_status rbpeek_frame_locals(rbpeek_session *s, const rbpeek_frame *frame, const rbpeek_inspect_options *opt,
                                  char **out)
{
    if (!s || !frame || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "locals: no session, frame or output");
    *out = NULL;
    if (frame->kind != RBPEEK_FRAME_RUBY || !frame->iseq || !frame->ep)
        return rbp_fail(s, RBPEEK_ERR_ARG, "locals: a C frame keeps its locals in C, where only DWARF could name them");
    rbp_heap h;
    rbpeek_status st = open_for_locals(s, &h);
    if (st != RBPEEK_OK) return st;
    size_t budget = RBP_INSP_COMMAND_BUDGET;   /* objects printed over the frame's self and locals */
    rbp_inspect_limits lim = {opt ? opt->depth : 8, opt ? opt->max_length : 100, &budget};
    rbp_strbuf b;
    rbp_sb_init(&b);
    frame_json(s, &h, frame, &lim, &b);
    return finish(s, &h, &b, out);
}

rbpeek_status rbpeek_thread_locals(rbpeek_session *s, const rbpeek_thread *t, const rbpeek_inspect_options *opt,
                                   char **out)
{
    if (!s || !t || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "locals: no session, thread or output");
    *out = NULL;
    rbp_heap h; /* opened once for all the thread's frames: its page table and caches serve them all */
    rbpeek_status st = open_for_locals(s, &h);
    if (st != RBPEEK_OK) return st;
    size_t budget = RBP_INSP_COMMAND_BUDGET;   /* objects printed over every frame's self and locals */
    rbp_inspect_limits lim = {opt ? opt->depth : 8, opt ? opt->max_length : 100, &budget};
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_sb_puts(&b, "[");
    for (size_t i = 0; i < t->nframes; i++) {
        if (i) rbp_sb_puts(&b, ", ");
        frame_json(s, &h, &t->frames[i], &lim, &b);
    }
    rbp_sb_puts(&b, "]");
    return finish(s, &h, &b, out);
}

/*
 * A Ruby frame's locals for `ruby bt --locals` (rbp_frame_locals_read, which
 * the backtrace printer calls, and rbpeek_frame_locals' JSON): the
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

#include "base/json.h"
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

static size_t keep(rbp_frame_locals *l, const char *text)
{
    size_t off = l->text.len;
    rbp_sb_puts(&l->text, text);
    rbp_sb_putn(&l->text, "", 1);
    return off;
}

static size_t keep_value(rbp_heap *h, uint64_t v, const rbp_inspect_limits *lim, rbp_frame_locals *l)
{
    size_t off = l->text.len;
    rbp_inspect_append(h, v, lim, &l->text, NULL);
    rbp_sb_putn(&l->text, "", 1);
    return off;
}

/* Appends local (name, value); a name already listed takes the new value
 * in its old place, as a JSON object read back keeps a repeated key. Only
 * names starting with '_' may repeat (def m(_, _) lists `_` twice), so only
 * those are compared, within a budget a hostile table cannot exceed. */
static void add_local(rbp_frame_locals *l, size_t name_off, size_t value_off, size_t *budget)
{
    const char *name = l->text.buf + name_off;
    if (name[0] == '_')
        for (size_t i = 0; i < l->n && *budget; i++, (*budget)--)
            if (strcmp(l->text.buf + l->name_off[i], name) == 0) {
                l->value_off[i] = value_off;
                return;
            }
    l->name_off[l->n] = name_off;
    l->value_off[l->n++] = value_off;
}

void rbp_frame_locals_free(rbp_frame_locals *l)
{
    rbp_sb_free(&l->text);
    free(l->name_off);
    free(l->value_off);
    *l = (rbp_frame_locals){0};
}

void rbp_frame_locals_read(rbpeek_session *s, rbp_heap *h, const rbpeek_frame *frame, const rbp_inspect_limits *lim,
                           rbp_frame_locals *l)
{
    *l = (rbp_frame_locals){.state = RBP_LOCALS_NONE};
    uint64_t body = 0, table = 0, size = 0;
    if (frame->kind != RBPEEK_FRAME_RUBY || !frame->iseq || !frame->ep) return;
    if (!rbp_read_field(s, frame->iseq, RBP_L_iseq_body, &body) || !body ||
        !rbp_read_field(s, body, RBP_L_body_local_table, &table) ||
        !rbp_read_field(s, body, RBP_L_body_local_table_size, &size) || (size & 0xffffffffu) > MAX_LOCALS ||
        ((size & 0xffffffffu) && !table)) {
        l->state = RBP_LOCALS_ERROR;
        l->error = "cannot read the local table of its iseq";
        return;
    }
    size &= 0xffffffffu;
    uint64_t *ids = size ? malloc(size * 8) : NULL, *vals = size ? malloc(size * 8) : NULL;
    l->name_off = size ? malloc(size * sizeof *l->name_off) : NULL;
    l->value_off = size ? malloc(size * sizeof *l->value_off) : NULL;
    bool ok = !size || (ids && vals && l->name_off && l->value_off && rbp_mem_read(s->mem, table, ids, size * 8) &&
                        rbp_mem_read(s->mem, frame->ep - (size + 2) * 8, vals, size * 8));
    l->state = RBP_LOCALS_READ;
    l->self_off = keep_value(h, frame->self, lim, l);
    rbp_cme cme;
    uint64_t me = rbp_frame_method_entry(s, frame->ep, NULL);
    if (me && rbp_cme_read(s, me, &cme) && cme.owner) {
        const char *owner = rbp_heap_class_name(h, cme.owner);
        l->has_owner = owner != NULL;
        if (owner) l->owner_off = keep(l, owner);
    }
    if (!ok) {
        l->error = "the local table or the environment is unreadable";
    } else {
        size_t budget = 1 << 20;
        for (uint64_t i = 0; i < size && !l->text.oom; i++) {
            const char *name = rbp_id_name(s, ids[i]);
            if (!local_name(name)) continue;
            size_t name_off = keep(l, name);
            size_t value_off = keep_value(h, vals[i], lim, l);
            if (!l->text.oom) add_local(l, name_off, value_off, &budget);
        }
    }
    free(ids);
    free(vals);
    if (l->text.oom) {
        rbp_frame_locals_free(l);
        *l = (rbp_frame_locals){.state = RBP_LOCALS_ERROR, .error = "out of memory"};
    }
}

void rbp_frame_locals_json(const rbp_frame_locals *l, const char *error_key, rbp_json *j)
{
    if (l->state == RBP_LOCALS_NONE) return;
    if (l->state == RBP_LOCALS_READ) {
        rbp_json_kstr(j, "self", rbp_locals_str(l, l->self_off));
        rbp_json_kstr(j, "owner", l->has_owner ? rbp_locals_str(l, l->owner_off) : NULL);
        rbp_json_key(j, "locals");
        rbp_json_object(j);
        for (size_t i = 0; i < l->n; i++)
            rbp_json_kstr(j, rbp_locals_str(l, l->name_off[i]), rbp_locals_str(l, l->value_off[i]));
        rbp_json_object_end(j);
    }
    if (l->error) rbp_json_kstr(j, error_key, l->error);
}

/* One frame's locals as JSON (rbpeek_frame_locals' shape): an object, or
 * null for a frame without locals. */
static void frame_json(rbpeek_session *s, rbp_heap *h, const rbpeek_frame *frame, const rbp_inspect_limits *lim,
                       rbp_json *j)
{
    rbp_frame_locals l;
    rbp_frame_locals_read(s, h, frame, lim, &l);
    if (l.state == RBP_LOCALS_NONE) {
        rbp_json_null(j);
    } else {
        rbp_json_object(j);
        rbp_frame_locals_json(&l, "error", j);
        rbp_json_object_end(j);
    }
    rbp_frame_locals_free(&l);
}

rbpeek_status rbp_locals_open(rbpeek_session *s, rbp_heap *h)
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

/* The limits of a locals command: opt's depth, length and bytes (the
 * defaults without), over one budget of objects (*budget) and of text
 * (*text) for everything it prints. */
static rbp_inspect_limits command_limits(const rbpeek_inspect_options *opt, size_t *budget, size_t *text)
{
    *budget = RBP_INSP_COMMAND_BUDGET;
    *text = RBP_INSP_COMMAND_TEXT;
    return (rbp_inspect_limits){opt ? opt->depth : 8, opt ? opt->max_length : 100, budget, opt ? opt->max_bytes : 0,
                                text};
}

rbpeek_status rbpeek_frame_locals(rbpeek_session *s, const rbpeek_frame *frame, const rbpeek_inspect_options *opt,
                                  char **out)
{
    if (!s || !frame || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "locals: no session, frame or output");
    *out = NULL;
    if (frame->kind != RBPEEK_FRAME_RUBY || !frame->iseq || !frame->ep)
        return rbp_fail(s, RBPEEK_ERR_ARG, "locals: a C frame keeps its locals in C, where only DWARF could name them");
    rbp_heap h;
    rbpeek_status st = rbp_locals_open(s, &h);
    if (st != RBPEEK_OK) return st;
    size_t budget, text;   /* objects printed over the frame's self and locals, and their bytes */
    rbp_inspect_limits lim = command_limits(opt, &budget, &text);
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_SPACED);
    frame_json(s, &h, frame, &lim, &j);
    return finish(s, &h, &b, out);
}

rbpeek_status rbpeek_thread_locals(rbpeek_session *s, const rbpeek_thread *t, const rbpeek_inspect_options *opt,
                                   char **out)
{
    if (!s || !t || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "locals: no session, thread or output");
    *out = NULL;
    rbp_heap h; /* opened once for all the thread's frames: its page table and caches serve them all */
    rbpeek_status st = rbp_locals_open(s, &h);
    if (st != RBPEEK_OK) return st;
    size_t budget, text;   /* objects printed over every frame's self and locals, and their bytes */
    rbp_inspect_limits lim = command_limits(opt, &budget, &text);
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_SPACED);
    rbp_json_array(&j);
    for (size_t i = 0; i < t->nframes; i++) frame_json(s, &h, &t->frames[i], &lim, &j);
    rbp_json_array_end(&j);
    return finish(s, &h, &b, out);
}

/*
 * The backtrace printer: `ruby bt` in gdb, lldb and the command line, text
 * and JSON, and the one frame line `ruby threads` and `ruby frame` show.
 * The debugger's side only picks the threads and says how it numbers them;
 * every rule of how Ruby prints a backtrace lives here (the quoting of the
 * label, which changed in 3.4; a nil path shown as the program's name).
 *
 * Text: per thread a title ('Thread 3 "name" (main, sleep, tid N, ractor
 * K):'), one line per frame as Thread::Backtrace::Location#to_s prints it,
 * with --locals each Ruby frame's self and locals below it, then what cut
 * the walk short; threads are separated by a blank line. JSON: the
 * document of docs/usage.md, laid out as Python's json.dumps(indent=1)
 * laid it out when the commands printed it.
 *
 * Frames are printed through a table by kind (frame_kinds): a kind says
 * its JSON name, whether it is shown, and how its line reads. With
 * --native (rbpeek_bt_options.show), a thread's frames are those of its
 * native stack (docs/native.md): its Ruby frames as above, a C method at
 * its C function with that function's place after it, machine frames as
 * "[native] symbol (module) at file:line" (module+0xoffset where no symbol
 * names them; the VM's internal ones only with --native-all), the GC's
 * frame ("[GC: marking]"), JIT code as "[JIT] label (path) at 0xPC" (the
 * Ruby method it runs; kind "jit" in JSON), then why the machine stack is cut, or what the
 * merge could not vouch for. A thread the GC runs on shows its GC frame
 * without --native too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "context/context.h"
#include "heap/heap.h"
#include "inspect/inspect.h"
#include "vm/robject.h"

typedef struct bt_ctx {
    rbpeek_session *s;
    const rbpeek_snapshot *snap;
    const rbpeek_bt_options *opt;
    char *progname;             /* read when a frame first needs it */
    bool progname_read;
    bool heap_open;             /* for --locals: opened once for every frame */
    const char *locals_error;   /* why no frame has locals (the heap would not open) */
    char locals_error_buf[512];
    rbp_heap heap;
    rbp_inspect_limits lim;
    size_t budget;              /* objects printed over every frame's self and locals: one budget a command */
    size_t text;                /* and their bytes of text */
} bt_ctx;

/* What Location#to_s prints for a frame whose path is nil: the progname,
 * with no line number. */
static const char *nil_path_text(bt_ctx *c)
{
    if (!c->progname_read) {
        c->progname = rbp_vm_progname(c->s);
        c->progname_read = true;
    }
    return c->progname && *c->progname ? c->progname : "(unknown)";
}

/* ":N" onto b, without printf: a 5,000-frame stack prints 5,000 of them. */
static void put_line_number(rbp_strbuf *b, int32_t n)
{
    char buf[16], *p = buf + sizeof buf;
    uint32_t u = n < 0 ? 0u - (uint32_t)n : (uint32_t)n;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (n < 0) *--p = '-';
    *--p = ':';
    rbp_sb_putn(b, p, (size_t)(buf + sizeof buf - p));
}

/* A Ruby or C-method frame: "path:line:in 'label'", Location#to_s. */
static void location_line(bt_ctx *c, rbp_strbuf *b, const rbpeek_frame *f)
{
    rbp_sb_puts(b, f->path ? f->path : nil_path_text(c));
    if (f->lineno_unknown) rbp_sb_putn(b, ":?", 2);
    else if (f->lineno) put_line_number(b, f->lineno);
    const rbp_label_quotes *q = rbp_release_quotes(c->s);
    rbp_sb_putn(b, ":in ", 4);
    rbp_sb_puts(b, q->open);
    rbp_sb_puts(b, f->label ? f->label : "");
    rbp_sb_puts(b, q->close);
}

/* Said where a frame's line is not known (rbpeek_frame.lineno_unknown). */
#define LINE_UNKNOWN_NOTE "line not known: YJIT's code is running this frame, and Ruby does not keep its line " \
                          "while it does (docs/versions.md)"

/* "lineno" (null where it is not known, with the note). */
static void json_lineno(rbp_json *j, const rbpeek_frame *f)
{
    rbp_json_key(j, "lineno");
    if (f->lineno_unknown) rbp_json_null(j);
    else rbp_json_i64(j, f->lineno);
}

static void json_line_note(rbp_json *j, const rbpeek_frame *f)
{
    if (f->lineno_unknown) rbp_json_kstr(j, "note", LINE_UNKNOWN_NOTE);
}

typedef struct frame_kind {
    const char *name;           /* the JSON "kind" */
    void (*line)(bt_ctx *c, rbp_strbuf *b, const rbpeek_frame *f);
    uint32_t show;              /* rbpeek_bt_options.show bits that show it; 0: always shown */
} frame_kind;

static const frame_kind frame_kinds[] = {
    [RBPEEK_FRAME_RUBY] = {"ruby", location_line, 0},
    [RBPEEK_FRAME_CFUNC] = {"cfunc", location_line, 0},
};

static const frame_kind *kind_of(const rbpeek_frame *f)
{
    if (f->kind < 0 || (size_t)f->kind >= sizeof frame_kinds / sizeof *frame_kinds || !frame_kinds[f->kind].name)
        return NULL;
    return &frame_kinds[f->kind];
}

/* Whether the options show frame f: Ruby's own frames always, other kinds
 * when opt->show asks for them. */
static bool shown(const bt_ctx *c, const rbpeek_frame *f)
{
    const frame_kind *k = kind_of(f);
    return k && (!k->show || (c->opt && (c->opt->show & k->show)));
}

static size_t shown_count(const bt_ctx *c, const rbpeek_thread *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nframes; i++) n += shown(c, &t->frames[i]);
    return n;
}

/* The kernel's TID (the snapshot's, else the debugger's), 0 if unknown. */
static int64_t thread_tid(const bt_ctx *c, const rbpeek_thread *t, size_t index)
{
    if (t->native_tid > 0) return t->native_tid;
    return c->opt && c->opt->tids && c->opt->tids[index] > 0 ? c->opt->tids[index] : 0;
}

/* Ruby's own record of the TID, when it is not the kernel's (a forked
 * child's main thread in 3.1 and 3.2 keeps its parent's; a process in
 * another PID namespace numbers its threads by that namespace). */
static bool ruby_tid_differs(const rbpeek_thread *t, int64_t tid)
{
    return t->ruby_tid > 0 && t->ruby_tid != tid;
}

/* Reads frame f's locals into l, or says why there are none. */
static void frame_locals(bt_ctx *c, const rbpeek_frame *f, rbp_frame_locals *l)
{
    *l = (rbp_frame_locals){.state = RBP_LOCALS_NONE};
    if (f->kind != RBPEEK_FRAME_RUBY) return;
    if (!c->heap_open && !c->locals_error) {
        if (rbp_locals_open(c->s, &c->heap) == RBPEEK_OK) {
            c->heap_open = true;
        } else {
            snprintf(c->locals_error_buf, sizeof c->locals_error_buf, "%.500s", c->s->error);
            c->locals_error = c->locals_error_buf;
        }
    }
    if (c->heap_open) {
        rbp_frame_locals_read(c->s, &c->heap, f, &c->lim, l);
    } else {
        l->state = RBP_LOCALS_ERROR;
        l->error = c->locals_error;
    }
}

static void text_locals(bt_ctx *c, rbp_strbuf *b, const rbpeek_frame *f);

/* --- native stacks (--native; docs/native.md) ------------------------------ */

/* The thread's native stack, when the options show it. */
static const rbpeek_native_stack *native_of(const bt_ctx *c, size_t index)
{
    if (!c->opt || !(c->opt->show & (RBPEEK_BT_NATIVE | RBPEEK_BT_NATIVE_ALL))) return NULL;
    return rbpeek_snapshot_native(c->snap, index);
}

/* The VM's internal frames only with --native-all. */
static bool stack_shown(const bt_ctx *c, const rbpeek_stack_frame *f)
{
    return !f->internal || (c->opt->show & RBPEEK_BT_NATIVE_ALL);
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

/* A machine frame: its symbol and module, or module+0xoffset where no
 * symbol names it; its source place where DWARF has it. */
static void native_where(rbp_strbuf *b, const rbpeek_native_frame *n)
{
    if (n->symbol)
        rbp_sb_puts(b, n->symbol);
    else if (n->module)
        rbp_sb_printf(b, "%s+0x%llx", base_name(n->module), (unsigned long long)n->module_offset);
    else
        rbp_sb_printf(b, "0x%llx", (unsigned long long)n->pc);
    if (n->symbol && n->module) rbp_sb_printf(b, " (%s)", base_name(n->module));
    if (n->file && n->line > 0) rbp_sb_printf(b, " at %s:%d", n->file, (int)n->line);
}

/* A machine frame of JIT code: "[JIT] label (path) at 0xPC", the Ruby
 * method whose code it runs, or "[JIT] at 0xPC" where it is not known;
 * never a module's name. */
static void text_jit_frame(rbp_strbuf *b, const rbpeek_stack_frame *f)
{
    rbp_sb_puts(b, "[JIT] ");
    if (f->ruby) {
        rbp_sb_puts(b, f->ruby->label ? f->ruby->label : "?");
        if (f->ruby->path) rbp_sb_printf(b, " (%s)", f->ruby->path);
        rbp_sb_puts(b, " ");
    }
    rbp_sb_printf(b, "at 0x%llx (YJIT code)", (unsigned long long)f->native->pc);
}

static void text_stack_frame(bt_ctx *c, rbp_strbuf *b, const rbpeek_stack_frame *f)
{
    rbp_sb_puts(b, "    ");
    if (f->kind == RBPEEK_FRAME_JIT && f->native) {
        text_jit_frame(b, f);
        rbp_sb_putn(b, "\n", 1);
        return;
    }
    if (f->ruby) {
        location_line(c, b, f->ruby);
        if (f->native) { /* a C method at its C function */
            rbp_sb_puts(b, " [");
            native_where(b, f->native);
            rbp_sb_puts(b, "]");
        }
    } else if (f->native) {
        rbp_sb_puts(b, "[native] ");
        native_where(b, f->native);
    } else {
        rbp_sb_puts(b, f->label ? f->label : "?");
    }
    rbp_sb_putn(b, "\n", 1);
    if (f->ruby && c->opt->locals) text_locals(c, b, f->ruby);
}

static void json_native_place(rbp_json *j, const rbpeek_native_frame *n)
{
    rbp_json_kstr(j, "module", n->module);
    rbp_json_khex(j, "pc", n->pc);
    if (n->module) rbp_json_khex(j, "offset", n->module_offset);
    if (n->file && n->line > 0) {
        rbp_json_kstr(j, "file", n->file);
        rbp_json_ki64(j, "line", n->line);
    }
}

static void json_frame(bt_ctx *c, rbp_json *j, const rbpeek_frame *f);

static void json_stack_frame(bt_ctx *c, rbp_json *j, const rbpeek_stack_frame *f)
{
    if (f->kind == RBPEEK_FRAME_JIT && f->native) { /* JIT code: the Ruby method it runs, if known */
        rbp_json_object(j);
        rbp_json_kstr(j, "kind", "jit");
        rbp_json_kstr(j, "label", f->ruby ? f->ruby->label : NULL);
        rbp_json_kstr(j, "path", f->ruby ? f->ruby->path : NULL);
        rbp_json_kstr(j, "module", NULL);
        rbp_json_khex(j, "pc", f->native->pc);
        rbp_json_object_end(j);
        return;
    }
    if (f->ruby && !f->native) {
        json_frame(c, j, f->ruby);
        return;
    }
    rbp_json_object(j);
    if (f->ruby) { /* a C method at its C function: its Ruby frame, and the function */
        rbp_json_kstr(j, "label", f->ruby->label);
        rbp_json_kstr(j, "path", f->ruby->path);
        rbp_json_kstr(j, "absolute_path", f->ruby->absolute_path);
        json_lineno(j, f->ruby);
        rbp_json_kstr(j, "kind", "cfunc");
        rbp_json_kstr(j, "symbol", f->native->symbol);
        json_native_place(j, f->native);
        json_line_note(j, f->ruby);
    } else if (f->native) {
        rbp_json_kstr(j, "kind", "native");
        rbp_json_kstr(j, "label", f->native->symbol);
        json_native_place(j, f->native);
        if (f->internal) rbp_json_kbool(j, "internal", true);
    } else {
        rbp_json_kstr(j, "kind", "gc");
        rbp_json_kstr(j, "label", f->label);
    }
    rbp_json_object_end(j);
}

/* --- text --------------------------------------------------------------- */

/* A value's text in the text output is cut after this many bytes: a
 * frame's locals must stay a screen a person reads (one puma thread's
 * request hash printed 55 KB on one line). JSON keeps each value within
 * --depth and --max-length only. */
#define LOCAL_TEXT_MAX 200
/* ... and so it is printed only up to about this many bytes (the printer's
 * max_output): showing 200 bytes of a value costs what 4 KiB of it cost,
 * not what the whole did (up to the 64 MiB and the million objects of a
 * value's budget: a frame of 29 such locals took seconds). A length at or
 * above it is told as a lower bound. */
#define LOCAL_TEXT_READ 4096

/* value, or its first LOCAL_TEXT_MAX bytes (cut between UTF-8 characters)
 * and how long it is, and where to see it whole. */
static void put_value(rbp_strbuf *b, const char *value)
{
    size_t len = strlen(value);
    if (len <= LOCAL_TEXT_MAX) {
        rbp_sb_putn(b, value, len);
        return;
    }
    size_t cut = LOCAL_TEXT_MAX;
    while (cut > 0 && ((unsigned char)value[cut] & 0xc0) == 0x80) cut--; /* not inside a character */
    rbp_sb_putn(b, value, cut);
    rbp_sb_printf(b, "\u2026 (%s%zu bytes; --json has it whole, --depth and --max-length shorten it)",
                  len >= LOCAL_TEXT_READ ? "over " : "", len >= LOCAL_TEXT_READ ? (size_t)LOCAL_TEXT_READ : len);
}

static void text_locals(bt_ctx *c, rbp_strbuf *b, const rbpeek_frame *f)
{
    rbp_frame_locals l;
    frame_locals(c, f, &l);
    if (l.state == RBP_LOCALS_READ) {
        rbp_sb_printf(b, "        self = ");
        put_value(b, rbp_locals_str(&l, l.self_off));
        if (l.has_owner && *rbp_locals_str(&l, l.owner_off))
            rbp_sb_printf(b, "  (in %s)", rbp_locals_str(&l, l.owner_off));
        rbp_sb_putn(b, "\n", 1);
        for (size_t i = 0; i < l.n; i++) {
            rbp_sb_printf(b, "        %s = ", rbp_locals_str(&l, l.name_off[i]));
            put_value(b, rbp_locals_str(&l, l.value_off[i]));
            rbp_sb_putn(b, "\n", 1);
        }
    } else if (l.state == RBP_LOCALS_ERROR) {
        rbp_sb_printf(b, "        (locals: %s)\n", l.error);
    }
    rbp_frame_locals_free(&l);
}

static void text_thread(bt_ctx *c, rbp_strbuf *b, size_t index)
{
    const rbpeek_thread *t = rbpeek_snapshot_thread(c->snap, index);
    int64_t number = c->opt && c->opt->numbers ? c->opt->numbers[index] : (int64_t)index + 1;
    rbp_sb_puts(b, "Thread");
    if (number >= 0) rbp_sb_printf(b, " %lld", (long long)number);
    if (t->name && *t->name) rbp_sb_printf(b, " \"%s\"", t->name);
    rbp_sb_printf(b, " (%s%s", t->is_main ? "main, " : "", rbpeek_thread_status_name(t->status));
    int64_t tid = thread_tid(c, t, index);
    if (tid) rbp_sb_printf(b, ", tid %lld", (long long)tid);
    if (ruby_tid_differs(t, tid)) rbp_sb_printf(b, ", Ruby's native_thread_id %lld", (long long)t->ruby_tid);
    if (t->ractor_index) rbp_sb_printf(b, ", ractor %d", (int)t->ractor_index);
    rbp_sb_puts(b, "):\n");
    size_t shown_frames = shown_count(c, t);
    const rbpeek_native_stack *ns = native_of(c, index);
    bool unknown = false;
    for (size_t i = 0; i < t->nframes; i++) unknown |= t->frames[i].lineno_unknown && shown(c, &t->frames[i]);
    if (ns) {
        for (size_t i = 0; i < ns->nframes; i++)
            if (stack_shown(c, &ns->frames[i])) text_stack_frame(c, b, &ns->frames[i]);
        if (ns->cut) rbp_sb_printf(b, "    (native stack cut: %s)\n", ns->cut);
        if (ns->note) rbp_sb_printf(b, "    (%s)\n", ns->note);
    } else {
        const char *gc = rbpeek_gc_phase_label(t->gc);
        if (gc) rbp_sb_printf(b, "    %s\n", gc);
        if (!shown_frames && !t->error) rbp_sb_puts(b, "    (no Ruby frames)\n");
        for (size_t i = 0; i < t->nframes; i++) {
            const rbpeek_frame *f = &t->frames[i];
            if (!shown(c, f)) continue;
            rbp_sb_putn(b, "    ", 4);
            kind_of(f)->line(c, b, f);
            rbp_sb_putn(b, "\n", 1);
            if (c->opt && c->opt->locals) text_locals(c, b, f);
        }
    }
    if (unknown) rbp_sb_puts(b, "    (?: " LINE_UNKNOWN_NOTE ")\n");
    if (t->truncated) rbp_sb_printf(b, "    ... (cut at %zu frames; use --max-frames)\n", shown_frames);
    if (t->error) rbp_sb_printf(b, "    (walk stopped early: %s)\n", t->error);
}

/* --- JSON --------------------------------------------------------------- */

static void json_frame(bt_ctx *c, rbp_json *j, const rbpeek_frame *f)
{
    rbp_json_object(j);
    rbp_json_kstr(j, "label", f->label);
    rbp_json_kstr(j, "path", f->path);
    rbp_json_kstr(j, "absolute_path", f->absolute_path);
    json_lineno(j, f);
    rbp_json_kstr(j, "kind", kind_of(f)->name);
    json_line_note(j, f);
    if (c->opt && c->opt->locals) {
        rbp_frame_locals l;
        frame_locals(c, f, &l);
        rbp_frame_locals_json(&l, "locals_error", j);
        rbp_frame_locals_free(&l);
    }
    rbp_json_object_end(j);
}

static void json_thread(bt_ctx *c, rbp_json *j, size_t index)
{
    const rbpeek_thread *t = rbpeek_snapshot_thread(c->snap, index);
    rbp_json_object(j);
    rbp_json_kstr(j, "name", t->name);
    rbp_json_kbool(j, "main", t->is_main);
    int64_t tid = thread_tid(c, t, index);
    rbp_json_key(j, "native_tid");
    if (tid) rbp_json_i64(j, tid);
    else rbp_json_null(j);
    if (ruby_tid_differs(t, tid)) rbp_json_ki64(j, "ruby_native_tid", t->ruby_tid);
    rbp_json_kstr(j, "status", rbpeek_thread_status_name(t->status));
    rbp_json_ki64(j, "ractor", t->ractor_index);
    rbp_json_kbool(j, "truncated", t->truncated);
    rbp_json_kstr(j, "error", t->error);
    const rbpeek_native_stack *ns = native_of(c, index);
    if (ns) {
        rbp_json_key(j, "native");
        rbp_json_object(j);
        rbp_json_kbool(j, "merged", ns->merged);
        rbp_json_kstr(j, "cut", ns->cut);
        rbp_json_kstr(j, "note", ns->note);
        rbp_json_object_end(j);
    }
    rbp_json_key(j, "frames");
    rbp_json_array(j);
    if (ns) {
        for (size_t i = 0; i < ns->nframes; i++)
            if (stack_shown(c, &ns->frames[i])) json_stack_frame(c, j, &ns->frames[i]);
    } else {
        const char *gc = rbpeek_gc_phase_label(t->gc);
        if (gc) {
            rbp_json_object(j);
            rbp_json_kstr(j, "kind", "gc");
            rbp_json_kstr(j, "label", gc);
            rbp_json_object_end(j);
        }
        for (size_t i = 0; i < t->nframes; i++)
            if (shown(c, &t->frames[i])) json_frame(c, j, &t->frames[i]);
    }
    rbp_json_array_end(j);
    rbp_json_object_end(j);
}

/* --- the API ------------------------------------------------------------ */

rbpeek_status rbpeek_snapshot_render_bt(rbpeek_session *s, const rbpeek_snapshot *snap, rbpeek_format format,
                                        const rbpeek_bt_options *opt, char **out)
{
    if (!s || !snap || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "render: missing argument");
    *out = NULL;
    if (format != RBPEEK_FORMAT_TEXT && format != RBPEEK_FORMAT_JSON)
        return rbp_fail(s, RBPEEK_ERR_ARG, "render: unknown format %d", (int)format);
    size_t n = rbpeek_snapshot_thread_count(snap);
    size_t count = opt && opt->threads ? opt->nthreads : n;
    for (size_t k = 0; opt && opt->threads && k < count; k++)
        if (opt->threads[k] >= n) return rbp_fail(s, RBPEEK_ERR_NOT_FOUND, "no Ruby thread #%zu", opt->threads[k] + 1);
    bt_ctx c = {.s = s, .snap = snap, .opt = opt};
    c.budget = RBP_INSP_COMMAND_BUDGET;
    c.text = RBP_INSP_COMMAND_TEXT;
    if (opt)
        c.lim = (rbp_inspect_limits){opt->locals_depth, opt->locals_max_length, &c.budget,
                                     format == RBPEEK_FORMAT_TEXT ? LOCAL_TEXT_READ : 0, &c.text};
    rbp_strbuf b;
    rbp_sb_init(&b);
    if (format == RBPEEK_FORMAT_JSON) {
        rbp_json j;
        rbp_json_init(&j, &b, RBP_JSON_INDENT1);
        rbp_json_object(&j);
        rbp_json_kstr(&j, "ruby_version", s->ruby_version);
        rbp_json_key(&j, "threads");
        rbp_json_array(&j);
        for (size_t k = 0; k < count; k++) json_thread(&c, &j, opt && opt->threads ? opt->threads[k] : k);
        rbp_json_array_end(&j);
        rbp_json_object_end(&j);
        rbp_sb_putn(&b, "\n", 1);
    } else {
        for (size_t k = 0; k < count; k++) {
            if (k) rbp_sb_putn(&b, "\n", 1);
            text_thread(&c, &b, opt && opt->threads ? opt->threads[k] : k);
        }
    }
    if (c.heap_open) rbp_heap_close(&c.heap);
    free(c.progname);
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

rbpeek_status rbpeek_snapshot_render(rbpeek_session *s, const rbpeek_snapshot *snap, rbpeek_format format,
                                     long thread_index, char **out)
{
    if (!s || !snap || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "render: missing argument");
    size_t one = thread_index < 0 ? 0 : (size_t)thread_index;
    rbpeek_bt_options opt = {.threads = thread_index < 0 ? NULL : &one, .nthreads = 1};
    return rbpeek_snapshot_render_bt(s, snap, format, &opt, out);
}

rbpeek_status rbpeek_frame_render(rbpeek_session *s, const rbpeek_frame *f, char **out)
{
    if (!s || !f || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "render: missing argument");
    *out = NULL;
    const frame_kind *k = kind_of(f);
    if (!k) return rbp_fail(s, RBPEEK_ERR_ARG, "render: unknown frame kind %d", (int)f->kind);
    bt_ctx c = {.s = s};
    rbp_strbuf b;
    rbp_sb_init(&b);
    k->line(&c, &b, f);
    free(c.progname);
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

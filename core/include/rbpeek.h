/*
 * rbpeek public API.
 *
 * rbpeek decodes a CRuby interpreter's state (threads, Ruby-level stacks,
 * heap) from raw memory reads alone: it never runs code in the target. A
 * session binds one target (a live process or a core file) to a memory
 * source, finds the Ruby VM, picks a struct layout for the target's Ruby
 * version, and then answers questions about it.
 *
 * Conventions:
 *  - Every object is an opaque handle named rbpeek_<object>, and every
 *    function is rbpeek_<object>_<verb>.
 *  - Functions return an rbpeek_status; on failure the session keeps a one-line
 *    human-readable message, available from rbpeek_session_error(). The
 *    message says what went wrong and, where there is one, what to try.
 *  - There is no global state: sessions are independent of one another.
 *  - Strings handed out are UTF-8 (Ruby's own bytes, which are UTF-8 for
 *    every path and name in practice) and stay valid for the lifetime of the
 *    object that returned them.
 *  - This header includes rbpeek_profile.h: profiles (the aggregated
 *    samples of `ruby sample`), their writers, and the sampler.
 */
#ifndef RBPEEK_H
#define RBPEEK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RBPEEK_API_VERSION 1

/* Only the functions declared here are exported from librbpeek.so. */
#if defined(__GNUC__)
#define RBPEEK_API __attribute__((visibility("default")))
#else
#define RBPEEK_API
#endif

typedef enum rbpeek_status {
    RBPEEK_OK = 0,
    RBPEEK_ERR_ARG = 1,          /* bad argument from the caller */
    RBPEEK_ERR_NOMEM = 2,
    RBPEEK_ERR_READ = 3,         /* target memory could not be read */
    RBPEEK_ERR_NOT_RUBY = 4,     /* no CRuby interpreter found in the target */
    RBPEEK_ERR_NO_LAYOUT = 5,    /* no struct layout for this Ruby version */
    RBPEEK_ERR_CORRUPT = 6,      /* interpreter state is inconsistent */
    RBPEEK_ERR_NOT_FOUND = 7,    /* the thing asked for does not exist */
    RBPEEK_ERR_IO = 8,           /* a local file could not be read/written */
    RBPEEK_ERR_UNSUPPORTED = 9,
    RBPEEK_ERR_STATE = 10,       /* call made in the wrong order */
} rbpeek_status;

/* Name of a status code, e.g. "RBPEEK_ERR_READ". Never NULL. */
RBPEEK_API const char *rbpeek_status_name(rbpeek_status status);

/* ---------------------------------------------------------------------------
 * Session: one target.
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_session rbpeek_session;

/* Reads up to len bytes of target memory at addr into buf. Returns the number
 * of bytes read (a short count means the rest is unreadable), or -1. */
typedef long (*rbpeek_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Looks up the address of a global symbol. Returns 0 and sets *addr when
 * found, nonzero otherwise. */
typedef int (*rbpeek_lookup_fn)(void *ctx, const char *name, uint64_t *addr);

RBPEEK_API rbpeek_session *rbpeek_session_new(void);
RBPEEK_API void rbpeek_session_free(rbpeek_session *s);

/* The last error message of this session ("" when none). */
RBPEEK_API const char *rbpeek_session_error(const rbpeek_session *s);

/* Memory sources. Exactly one of these must be set before attach. */
/* Reads go through a caller-supplied callback (e.g. a debugger's process). */
RBPEEK_API rbpeek_status rbpeek_session_use_reader(rbpeek_session *s, rbpeek_read_fn fn, void *ctx);
/* Reads a live process directly through /proc/PID/mem (the caller must be
 * allowed to, e.g. as its ptrace tracer). */
RBPEEK_API rbpeek_status rbpeek_session_use_pid(rbpeek_session *s, int pid);
/* Reads an ELF core file (x86-64's or aarch64's). Pages it lacks are read
 * from the files its NT_FILE note names, or its link map where it has no
 * note (qemu-user's). A core of an architecture rbpeek does not read is
 * refused with RBPEEK_ERR_UNSUPPORTED and one line naming it; so is it by
 * set_core_file and add_core_regions. */
RBPEEK_API rbpeek_status rbpeek_session_use_core(rbpeek_session *s, const char *core_path);

/* Where the files a core names are looked for first, as gdb's "set
 * sysroot" (another machine's core); call before use_core,
 * add_core_regions, set_core_file. NULL or "": as named. */
RBPEEK_API rbpeek_status rbpeek_session_set_sysroot(rbpeek_session *s, const char *dir);

/* The core file a reader's memory comes from (a debugger's core): a
 * truncated one is said, as use_core says it, on the warning line and in
 * front of an attach that fails (what is missing, what can still be
 * read). The memory it holds that maps no file (anonymous mappings: JIT
 * code among them, which native stacks need) is added to the regions,
 * which a debugger lists from the core's mapped files only. */
RBPEEK_API rbpeek_status rbpeek_session_set_core_file(rbpeek_session *s, const char *core_path);

/* The kernel's list of the target's threads, for a source that is not a
 * live process read directly (use_pid reads /proc/PID/task itself): the
 * debugger's thread list, or a core's NT_PRSTATUS notes. A thread's
 * native_tid is one of these or unknown, never a TID the target does not
 * have (a forked child's main thread keeps its parent's in Ruby's record).
 * Replaces the list given before; n 0 drops it. */
RBPEEK_API rbpeek_status rbpeek_session_set_kernel_tids(rbpeek_session *s, const int64_t *tids, size_t n);

/* The target's architecture as the debugger names it (gdb's
 * "i386:x86-64" or "aarch64", lldb's triple "x86_64-pc-linux-gnu"). One
 * rbpeek does not read is refused here and again at attach, with
 * RBPEEK_ERR_UNSUPPORTED and one line naming it: rbpeek reads x86-64 and
 * aarch64 targets. A name the core does not know says nothing. Call it after
 * use_reader/use_pid/use_core, which start a new target. */
RBPEEK_API rbpeek_status rbpeek_session_set_arch(rbpeek_session *s, const char *debugger_arch);

/* Symbol lookup. Optional: without it (or when it fails) symbols are taken
 * from the dynamic symbol tables of the ELF images mapped in the target. */
RBPEEK_API rbpeek_status rbpeek_session_use_lookup(rbpeek_session *s, rbpeek_lookup_fn fn, void *ctx);

/* Describes a mapped region of the target. Used to find ELF images (for
 * symbol fallback and DWARF). A live or core source fills these in itself;
 * a callback source should be told. path may be NULL or "". */
RBPEEK_API rbpeek_status rbpeek_session_add_region(rbpeek_session *s, uint64_t start, uint64_t end,
                                        uint64_t file_offset, const char *path);
/* Adds the files a core file says were mapped (its NT_FILE note) as
 * regions, for a callback source whose debugger does not list them: lldb
 * knows no modules for a core whose binaries are not on this machine, yet
 * the mapped files' names and places are what finds the Ruby in it. */
RBPEEK_API rbpeek_status rbpeek_session_add_core_regions(rbpeek_session *s, const char *core_path);
/* Adds, for a callback source whose debugger lists no mappings (gdb on
 * qemu's gdb stub), the files the dynamic linker's list names, found from
 * the auxiliary vector's AT_PHDR, AT_EXECFN and AT_PAGESZ. */
RBPEEK_API rbpeek_status rbpeek_session_add_linkmap_regions(rbpeek_session *s, uint64_t phdr, uint64_t execfn,
                                                             uint64_t pagesz);

/* Overrides, all optional, applied by attach. */
RBPEEK_API rbpeek_status rbpeek_session_set_vm(rbpeek_session *s, uint64_t vm_addr);
RBPEEK_API rbpeek_status rbpeek_session_set_layout_file(rbpeek_session *s, const char *path);
RBPEEK_API rbpeek_status rbpeek_session_set_ruby_version(rbpeek_session *s, const char *version);
/* Nonzero: take the layout from the target's DWARF only (`--layout dwarf`),
 * never from a built-in table; by default the release's own table is tried
 * first and DWARF only when it does not fit. */
RBPEEK_API rbpeek_status rbpeek_session_set_layout_dwarf(rbpeek_session *s, int on);
/* ELF files that may carry DWARF for the Ruby (libruby or the ruby
 * executable); tried before built-in tables. */
RBPEEK_API rbpeek_status rbpeek_session_add_debug_file(rbpeek_session *s, const char *path);

/* Finds the Ruby version, the layout and the VM. Must succeed before any
 * query. May be called again after a failure with other overrides. */
RBPEEK_API rbpeek_status rbpeek_session_attach(rbpeek_session *s);

/* Drops cached target memory. Call whenever the target may have run since
 * the last query (the sampler calls it after every resume). */
RBPEEK_API void rbpeek_session_invalidate(rbpeek_session *s);

/* After attach: facts about the target, for `ruby info`. */
RBPEEK_API const char *rbpeek_session_ruby_version(const rbpeek_session *s);
/* e.g. "dwarf:/usr/lib/libruby.so.3.4" or "builtin:3.1.2" or "file:x.layout" */
RBPEEK_API const char *rbpeek_session_layout_source(const rbpeek_session *s);
/* A warning worth showing the user once (e.g. nearest-table fallback), or "". */
RBPEEK_API const char *rbpeek_session_warning(const rbpeek_session *s);
RBPEEK_API uint64_t rbpeek_session_vm_addr(const rbpeek_session *s);
/* How the VM was found, e.g. "symbol ruby_current_vm_ptr (debugger)". */
RBPEEK_API const char *rbpeek_session_vm_source(const rbpeek_session *s);

/* Everything attach found, as one JSON object (for `ruby info`): version,
 * layout source, warning, memory source, VM address and how it was found,
 * and each symbol's address and how it was found (null when not found).
 * *out is malloc'd; release it with rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_session_describe(rbpeek_session *s, char **out);

/* Read statistics, for benchmarks: calls into the memory source and cache hits. */
typedef struct rbpeek_read_stats {
    uint64_t requests;       /* reads asked of the cache */
    uint64_t source_reads;   /* reads that reached the memory source */
    uint64_t source_bytes;
    uint64_t failures;       /* reads that failed (unreadable memory) */
} rbpeek_read_stats;
RBPEEK_API void rbpeek_session_read_stats(const rbpeek_session *s, rbpeek_read_stats *out);
RBPEEK_API void rbpeek_session_reset_read_stats(rbpeek_session *s);

/* ---------------------------------------------------------------------------
 * Snapshot: every Ruby thread and its Ruby-level stack at one moment.
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_snapshot rbpeek_snapshot;

typedef enum rbpeek_frame_kind {
    RBPEEK_FRAME_RUBY = 0,
    RBPEEK_FRAME_CFUNC = 1,
    RBPEEK_FRAME_NATIVE = 2,    /* a machine frame (native stacks, docs/native.md) */
    RBPEEK_FRAME_GC = 3,        /* the GC at work: "[GC: marking]" ... */
    RBPEEK_FRAME_JIT = 4,       /* a machine frame of JIT code (YJIT's): native stacks only */
    RBPEEK_FRAME_GVL = 5,       /* a profile's leaf: the thread waited for the GVL, "[GVL wait]" */
} rbpeek_frame_kind;

/* One frame, exactly as the target's Thread#backtrace_locations reports it. */
typedef struct rbpeek_frame {
    const char *label;
    const char *path;           /* NULL if Ruby reports nil (a C frame with no Ruby frame below it) */
    const char *absolute_path;  /* NULL if Ruby reports nil */
    int32_t lineno;
    int32_t kind;               /* rbpeek_frame_kind */
    uint64_t iseq;              /* iseq address, or 0 for C frames */
    int32_t first_lineno;       /* where the frame's method or block starts (its
                                 * iseq's first line), 0 for C frames or unknown */
    uint64_t self;              /* the frame's self (Ruby frames; else 0) */
    uint64_t ep;                /* its environment pointer: where its locals are (Ruby frames; else 0) */
    uint64_t instantiates;      /* a thread's innermost frame, when a C frame of Class#new,
                                 * Class#allocate, a Struct class's new or Array.new: the class whose
                                 * instance it allocates (its self); else 0 (and on every other frame) */
    int32_t lineno_unknown;     /* 1: the line is not known and lineno is 0: JIT code (YJIT) is running
                                 * this frame, and the pc Ruby keeps for it is stale, so the line it
                                 * gives would not be true (docs/versions.md); else 0 */
} rbpeek_frame;

/* The GC at work on a thread (rbpeek_thread.gc): its phase, as the
 * objspace's flags say at the moment of the snapshot. */
typedef enum rbpeek_gc_phase {
    RBPEEK_GC_NONE = 0,         /* no GC running on this thread */
    RBPEEK_GC_MARKING = 1,      /* "[GC: marking]" */
    RBPEEK_GC_SWEEPING = 2,     /* "[GC: sweeping]" */
    RBPEEK_GC_COMPACTING = 3,   /* "[GC: compacting]" */
    RBPEEK_GC_RUNNING = 4,      /* "[GC]": running, its phase not told */
} rbpeek_gc_phase;

/* The label of a GC frame: "[GC: marking]" ... "[GC]"; NULL for NONE. */
RBPEEK_API const char *rbpeek_gc_phase_label(int32_t phase);

/* The label of the frame a profile puts on top of the stack of a thread
 * sampled waiting for the GVL: "[GVL wait]". */
RBPEEK_API const char *rbpeek_gvl_wait_label(void);

typedef struct rbpeek_thread {
    const char *name;           /* NULL when the thread has no name */
    int32_t is_main;
    int32_t status;             /* rbpeek_thread_status */
    int64_t native_tid;         /* the kernel's TID of the native thread running it, as
                                 * the reader's PID namespace numbers it: glibc's thread
                                 * descriptor's, or Ruby's own record, whichever the
                                 * kernel lists (/proc/PID/task, or the list given to
                                 * rbpeek_session_set_kernel_tids); -1 when unknown */
    uint64_t pthread_id;        /* pthread_t of the native thread, 0 if none */
    uint64_t thread_addr;       /* rb_thread_t address */
    uint64_t thread_value;      /* the Thread object (VALUE) */
    uint64_t ractor_addr;       /* rb_ractor_t, 0 before Ruby 3.0 */
    int32_t ractor_index;       /* 0 = main ractor */
    int32_t truncated;          /* 1 if the stack was cut at the frame limit */
    const char *error;          /* NULL, or why this thread's walk stopped early */
    size_t nframes;
    const rbpeek_frame *frames; /* innermost first */
    int32_t torn;               /* rbpeek_snapshot_take_running: its stack changed while it was read */
    int32_t retried;            /* ... and it was walked again (kept, unless torn) */
    int64_t ruby_tid;           /* the TID Ruby itself records for it (3.1+), -1 if none: a
                                 * forked child's main thread keeps its parent's in 3.1
                                 * and 3.2, and a process in another PID namespace
                                 * numbers its threads by that namespace */
    int32_t gc;                 /* rbpeek_gc_phase: the GC runs on this thread (it holds the GVL
                                 * and the objspace says a GC step is running) */
    int32_t gvl;                /* rbpeek_gvl_role: its ractor's GVL, as Ruby's scheduler records
                                 * it at the snapshot */
} rbpeek_thread;

/* A thread and its ractor's GVL (rbpeek_thread.gvl), as Ruby's scheduler
 * records it: the holder (gvl.owner, sched.running) and the queue of the
 * threads waiting for it (gvl.waitq before 3.2, the scheduler's readyq
 * from 3.2). A thread in the queue waits for the GVL whatever its status
 * says: back from a blocking region (IO, an extension's work) or from a
 * sleep, it is still "sleep" for Ruby until it holds the GVL again. */
typedef enum rbpeek_gvl_role {
    RBPEEK_GVL_UNKNOWN = 0,     /* not read: this Ruby's layout names no queue, or it was damaged */
    RBPEEK_GVL_HOLDS = 1,       /* it holds its ractor's GVL */
    RBPEEK_GVL_QUEUED = 2,      /* it waits in the GVL's queue */
    RBPEEK_GVL_NONE = 3,        /* neither */
    RBPEEK_GVL_NOT_QUEUED = 4,  /* not in the queue; the holder not read (the GVL free or changing hands) */
} rbpeek_gvl_role;

typedef enum rbpeek_thread_status {
    RBPEEK_THREAD_RUNNABLE = 0,
    RBPEEK_THREAD_STOPPED = 1,          /* sleep with a timeout, or blocked */
    RBPEEK_THREAD_STOPPED_FOREVER = 2,  /* sleep forever, Queue#pop, join... */
    RBPEEK_THREAD_KILLED = 3,
} rbpeek_thread_status;

/* The status as Thread#status spells it: "run", "sleep" or "dead". */
RBPEEK_API const char *rbpeek_thread_status_name(int32_t status);

/* Walks every Ruby thread of every ractor. A failure to walk one thread is
 * recorded in that thread's error field, not returned. max_frames bounds each
 * stack (0 = the default of 100000). */
RBPEEK_API rbpeek_status rbpeek_snapshot_take(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out);
/* The same for a target that runs while it is read (the sampler's
 * nonblocking mode): each thread's walk is bracketed by two uncached reads
 * of its stack's markers (its execution context, current frame, and the
 * iseq and return pc of every frame); a thread whose markers differ is
 * marked torn (with an error) and must not be used. Drop the session's
 * memory cache before calling it. */
RBPEEK_API rbpeek_status rbpeek_snapshot_take_running(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out);
RBPEEK_API void rbpeek_snapshot_free(rbpeek_snapshot *snap);
RBPEEK_API size_t rbpeek_snapshot_thread_count(const rbpeek_snapshot *snap);
RBPEEK_API const rbpeek_thread *rbpeek_snapshot_thread(const rbpeek_snapshot *snap, size_t index);

/* ---------------------------------------------------------------------------
 * Native stacks (docs/native.md): a thread's machine stack, unwound by the
 * core (elfutils' libdwfl, with rbpeek's memory source) from the thread's
 * registers, and merged with its Ruby frames where the VM runs them
 * (`ruby bt --native`, `ruby sample --native`). Registers need a stopped
 * thread: a core has them (NT_PRSTATUS); a debugger gives them
 * (rbpeek_session_use_registers); for a live pid source the threads must
 * be in a ptrace stop of the calling thread (rbpeek_session_hold, or the
 * tracer's own stops while sampling).
 * ------------------------------------------------------------------------- */

/* The registers of thread tid, the target machine's, a word for each of
 * rbpeek_session_register_names in its order (DWARF's numbering). Returns
 * a mask of those filled (bit i: regs[i]); 0 when it has none for tid. */
typedef uint64_t (*rbpeek_regs_fn)(void *ctx, int64_t tid, uint64_t *regs);
/* Registers come from fn (a debugger's view of its stopped threads)
 * rather than from the source (a core's notes, ptrace). NULL: the source. */
RBPEEK_API rbpeek_status rbpeek_session_use_registers(rbpeek_session *s, rbpeek_regs_fn fn, void *ctx);
/* rbpeek_regs_fn's registers of the target's machine as known so far
 * (x86-64's until said), by space: "rax rdx ... rip", "x0 ... x29|fp
 * x30|lr sp pc" (| : either name). Valid until the next call. */
RBPEEK_API const char *rbpeek_session_register_names(rbpeek_session *s);

/* The kernel TIDs of the target's threads, as the debugger lists them:
 * where Ruby keeps no TID (before 3.1), a thread's is read from glibc's
 * descriptor and must be one of these (rbpeek_snapshot_resolve_tids), so
 * that its registers can be asked for. Without them: the core's notes, or
 * /proc/PID/task of a pid source. */
RBPEEK_API rbpeek_status rbpeek_session_set_thread_ids(rbpeek_session *s, const int64_t *tids, size_t n);

/* For a live pid source without a debugger (the command line): stops
 * every thread of the process with ptrace from the calling thread, so that
 * their registers can be read, until rbpeek_session_release (which the
 * same thread must call; it is also called by rbpeek_session_free). The
 * process is never left stopped: release detaches every thread, and if
 * the caller dies the kernel does. Fails (one line) when the process
 * cannot be traced. */
RBPEEK_API rbpeek_status rbpeek_session_hold(rbpeek_session *s);
RBPEEK_API void rbpeek_session_release(rbpeek_session *s);

/* One machine frame. */
typedef struct rbpeek_native_frame {
    uint64_t pc;                /* the instruction (the innermost frame, and a signal frame's
                                 * interrupted one), else the return address */
    const char *module;         /* the file the pc lies in, "[vdso]", or NULL: in no known module */
    uint64_t module_offset;     /* pc as an address of that file (what addr2line -e takes) */
    const char *symbol;         /* from .symtab (the file's or its debug file's), else .dynsym;
                                 * NULL: unnamed (shown as module+0xoffset) */
    uint64_t symbol_offset;     /* pc - the symbol's address */
    const char *file;           /* source file from DWARF's line table, NULL when unknown */
    int32_t line;               /* 0 when unknown */
    int32_t activation;         /* 1: pc is the current instruction, 0: a return address */
    uint64_t function;          /* the first address of the function holding pc (its symbol's, else
                                 * its FDE's), 0 when unknown: a profile counts a function's pcs as one */
} rbpeek_native_frame;

/* One frame of a thread's whole stack: a Ruby frame, a machine frame, a
 * C method's Ruby frame standing at its C function's machine frame (both
 * set), the GC at work, or a machine frame of JIT code (kind JIT: native
 * set, and ruby the Ruby frame whose code it runs where the VM says it,
 * else NULL; that Ruby frame also stands on its own, further down). */
typedef struct rbpeek_stack_frame {
    int32_t kind;                       /* rbpeek_frame_kind */
    int32_t internal;                   /* a machine frame of the VM's own call machinery (rb_vm_exec,
                                         * vm_call_cfunc..., the interpreter's unnamed static functions):
                                         * shown only with --native-all */
    const rbpeek_frame *ruby;           /* RUBY and CFUNC: the thread's Ruby frame (in its frames) */
    const rbpeek_native_frame *native;  /* NATIVE, and a CFUNC at its C function: the machine frame */
    const char *label;                  /* GC: "[GC: marking]"...; else NULL */
} rbpeek_stack_frame;

/* A thread's native stack, merged with its Ruby frames. */
typedef struct rbpeek_native_stack {
    size_t nframes;
    const rbpeek_stack_frame *frames;   /* innermost first */
    int32_t merged;                     /* 1: each Ruby frame stands where the VM runs it; 0: they could
                                         * not be placed (note says why): frames holds the machine frames,
                                         * then the Ruby frames, each in its own order */
    const char *note;                   /* NULL, or what the merge could not vouch for */
    const char *cut;                    /* NULL, or why the machine stack ends before its outermost
                                         * frame (the frames unwound are kept) */
    size_t nnative;
    const rbpeek_native_frame *native;  /* the machine frames as unwound, innermost first */
} rbpeek_native_stack;

#define RBPEEK_NATIVE_LINES 1u          /* give native frames their source file and line (DWARF) */

/* Takes a snapshot as rbpeek_snapshot_take does, and each thread's native
 * stack merged with its Ruby frames (rbpeek_snapshot_native). A thread
 * whose registers cannot be had (not stopped, no TID known) gets a stack
 * with no machine frames and cut saying why. Fails (one line) when native
 * stacks cannot be had at all: the unwinder cannot be loaded, or no
 * register source (a pid source not held, see rbpeek_session_hold). */
RBPEEK_API rbpeek_status rbpeek_snapshot_take_native(rbpeek_session *s, size_t max_frames, uint32_t flags,
                                                     rbpeek_snapshot **out);
/* Thread index's native stack, or NULL for a snapshot taken without. */
RBPEEK_API const rbpeek_native_stack *rbpeek_snapshot_native(const rbpeek_snapshot *snap, size_t index);

/* Output writers. Formats: */
typedef enum rbpeek_format {
    RBPEEK_FORMAT_TEXT = 0,   /* like Ruby's own backtrace lines */
    RBPEEK_FORMAT_JSON = 1,   /* the stable schema described in docs/usage.md */
} rbpeek_format;

/* `ruby bt`'s printer, the one gdb, lldb and the command line use: threads
 * as the target Ruby prints its own backtraces (text: a title per thread,
 * then one "path:line:in 'label'" line per frame, quoted as that version
 * quotes), or the JSON document of docs/usage.md. A debugger passes which
 * threads to print and its own numbers and TIDs for them. */
typedef struct rbpeek_bt_options {
    const size_t *threads;      /* indexes into the snapshot, in the order to print; NULL: every thread */
    size_t nthreads;
    const int64_t *numbers;     /* one per snapshot thread: the number its title shows (the
                                 * debugger's), < 0: none; NULL: index + 1 */
    const int64_t *tids;        /* one per snapshot thread: a TID to show where Ruby keeps
                                 * none (before 3.1), <= 0: none; NULL: none */
    int32_t locals;             /* nonzero: each Ruby frame's self, method owner and locals */
    int32_t locals_depth;       /* ... printed as rbpeek_value_inspect prints, within these limits */
    uint64_t locals_max_length;
    uint32_t show;              /* which frames besides Ruby's own: RBPEEK_BT_NATIVE... (a thread
                                 * the GC runs on shows its GC frame always) */
} rbpeek_bt_options;

/* rbpeek_bt_options.show: for a snapshot taken with rbpeek_snapshot_take_native,
 * each thread's native stack merged with its Ruby frames (docs/native.md);
 * with NATIVE_ALL, the VM's internal frames too. */
#define RBPEEK_BT_NATIVE 1u
#define RBPEEK_BT_NATIVE_ALL 2u

/* *out is a NUL-terminated malloc'd string to be released with rbpeek_free.
 * opt NULL: every thread, numbered from 1, no locals. */
RBPEEK_API rbpeek_status rbpeek_snapshot_render_bt(rbpeek_session *s, const rbpeek_snapshot *snap,
                                                   rbpeek_format format, const rbpeek_bt_options *opt, char **out);
/* The same for all threads (thread_index < 0) or one. */
RBPEEK_API rbpeek_status rbpeek_snapshot_render(rbpeek_session *s, const rbpeek_snapshot *snap,
                                     rbpeek_format format, long thread_index, char **out);
/* One frame's line as the target Ruby prints it in a backtrace ("path:line:in
 * 'label'"; a nil path is the program's name). *out as above. */
RBPEEK_API rbpeek_status rbpeek_frame_render(rbpeek_session *s, const rbpeek_frame *frame, char **out);
RBPEEK_API void rbpeek_free(void *p);

/* ---------------------------------------------------------------------------
 * Threads and locks: what each Ruby thread waits on (Mutex and its owner,
 * Queue, SizedQueue, ConditionVariable, Thread#join and its target, IO and
 * its fd, sleep, Thread.stop), the Mutexes it holds, the GVL owner, and the
 * deadlocks (cycles of Mutex and join waits) and hopeless waits (a Mutex
 * whose owning fiber has finished) among them.
 * ------------------------------------------------------------------------- */

/* Analyses the threads of snap, which must come from s with no
 * rbpeek_session_invalidate since. *out is a NUL-terminated malloc'd JSON
 * document (schema: docs/threads-and-locks.md) to be released with
 * rbpeek_free. Threads are referred to by their index in snap. */
RBPEEK_API rbpeek_status rbpeek_locks_render_json(rbpeek_session *s, const rbpeek_snapshot *snap, char **out);

/* ---------------------------------------------------------------------------
 * Heap: a census of the object heap (live objects by type and by class, with
 * the bytes they hold) and a heap dump in ObjectSpace.dump_all's JSON-lines
 * format, both read from outside the process (docs/heap.md says exactly
 * what is counted and where the dump differs from Ruby's own).
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_census rbpeek_census;

typedef struct rbpeek_census_summary {
    uint64_t pages;             /* heap pages walked */
    uint64_t rejected_pages;    /* listed by the GC, skipped: unreadable or implausible header */
    uint64_t slots;             /* slots of the pages walked (count_objects' :TOTAL) */
    uint64_t live;              /* slots holding an object */
    uint64_t free_slots;        /* count_objects' :FREE */
    uint64_t unreadable;        /* slots that could not be read or hold garbage */
    uint64_t bytes;             /* slot sizes of live objects plus the memory they own */
    uint64_t bytes_visible;     /* the same, over the objects memsize_of_all counts */
    size_t nclasses;            /* rows of rbpeek_census_class_at */
} rbpeek_census_summary;

typedef struct rbpeek_census_class {
    const char *name;           /* "Outer::Inner", "#<Class:0x...>", "(internal: imemo)"... */
    uint64_t address;           /* the class; 0 for rows grouping internal objects by type */
    uint64_t count;             /* objects whose obj.class is this class */
    uint64_t bytes;
    int32_t internal;           /* 1: a row of objects ObjectSpace hides (imemo, iclass, hidden) */
} rbpeek_census_class;

/* Walks every heap page (every size pool), reading each page in one call. */
RBPEEK_API rbpeek_status rbpeek_heap_census(rbpeek_session *s, rbpeek_census **out);
RBPEEK_API void rbpeek_census_free(rbpeek_census *c);
RBPEEK_API void rbpeek_census_get_summary(const rbpeek_census *c, rbpeek_census_summary *out);
/* Live objects of one T_ type (RUBY_T_STRING = 5...), and their bytes. */
RBPEEK_API uint64_t rbpeek_census_type(const rbpeek_census *c, int type, uint64_t *bytes);
/* Class rows, most objects first; NULL past the end. */
RBPEEK_API const rbpeek_census_class *rbpeek_census_class_at(const rbpeek_census *c, size_t index);
/* Text or JSON (schema: docs/heap.md). top: class rows to include (0 = all);
 * by_bytes: rank classes by bytes instead of count. *out is released with
 * rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_census_render(const rbpeek_census *c, rbpeek_format format, size_t top,
                                              int by_bytes, char **out);

typedef struct rbpeek_heap_dump_stats {
    uint64_t objects;           /* lines written, one per live object */
    uint64_t pages;
    uint64_t unreadable;        /* slots skipped as unreadable or garbage */
    uint64_t incomplete;        /* objects written whose references could not all be read */
    uint64_t bytes_written;
} rbpeek_heap_dump_stats;

/* Streams every live object to path as ObjectSpace.dump_all writes it (one
 * JSON object per line). out may be NULL. */
RBPEEK_API rbpeek_status rbpeek_heap_dump(rbpeek_session *s, const char *path, rbpeek_heap_dump_stats *out);

/* ---------------------------------------------------------------------------
 * GC: the collector's counters and state, read from the objspace, named as
 * GC.stat and GC.stat_heap name them (docs/inspect.md): counts, slots,
 * per-heap (size pool) figures, whether a GC is running and in which phase,
 * GC.disable and GC.stress.
 * ------------------------------------------------------------------------- */

/* Text or JSON; *out is released with rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_gc_render(rbpeek_session *s, rbpeek_format format, char **out);

/* ---------------------------------------------------------------------------
 * One heap page (`ruby page ADDR`; docs/inspect.md): the page whose aligned
 * body holds addr, with its slot size and counts, every slot's type, class
 * and GC bits (marked, uncollectible, marking, wb_unprotected, pinned,
 * remembered where the version has it, age) and its free list, as gc.c's
 * dump_page shows them. Fails with RBPEEK_ERR_ARG when addr is in no heap
 * page, RBPEEK_ERR_NO_LAYOUT when the layout lacks heap_page's bitmaps, and
 * refuses the layout when the page's bits contradict its slots.
 * ------------------------------------------------------------------------- */

/* Text (one line per slot) or JSON {"page", "slot_size", "slots": [...]}.
 * *out is released with rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_page_render(rbpeek_session *s, uint64_t addr, rbpeek_format format, char **out);

/* ---------------------------------------------------------------------------
 * Values: one VALUE printed as Ruby's own #inspect prints it (`ruby p`;
 * docs/inspect.md lists the types printed exactly). Never runs code in the
 * target. A VALUE that is not an immediate or a live object fails with
 * RBPEEK_ERR_ARG and a message saying what it is ("not a Ruby object: ...").
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_inspect_options {
    int32_t depth;          /* containers nested deeper are elided (U+2026); 0: only the top */
    uint64_t max_length;    /* elements per container and bytes per String shown */
    int32_t raw;            /* also the object's header: flags, shape, embedded or heap, parts' addresses */
    uint64_t max_bytes;     /* bytes of text a value prints, about, then a marker; 0: 64 MiB (and 16 MiB
                             * over all the values of rbpeek_frame_locals or rbpeek_thread_locals) */
} rbpeek_inspect_options;

/* Text (the inspect string, then with raw the header lines) or JSON
 * {"address", "type", "class", "inspect", "elided", "exact"[, "raw"]}. *out
 * is released with rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_value_inspect(rbpeek_session *s, uint64_t value, const rbpeek_inspect_options *opt,
                                              rbpeek_format format, char **out);

/* A Ruby frame's locals (names from its iseq's local table, values from its
 * environment), its self and its method's owner, each printed as
 * rbpeek_value_inspect prints a value, with the same limits. *out is JSON:
 * {"self": "...", "owner": "Holder" or null, "locals": {"name": "inspect", ...}}
 * (locals in the local table's order; anonymous and internal ones left out). */
RBPEEK_API rbpeek_status rbpeek_frame_locals(rbpeek_session *s, const rbpeek_frame *frame,
                                             const rbpeek_inspect_options *opt, char **out);
/* The same for every frame of a thread, in one pass (the heap is read once):
 * a JSON array aligned with t->frames, null for C frames. */
RBPEEK_API rbpeek_status rbpeek_thread_locals(rbpeek_session *s, const rbpeek_thread *t,
                                              const rbpeek_inspect_options *opt, char **out);

/* ---------------------------------------------------------------------------
 * Allocations (`ruby allocs`, docs/allocations.md).
 *
 * rbpeek_watch_probe: whether hardware watchpoints work on this machine, the
 * mechanism allocation-site sampling needs. It arms a counting write
 * watchpoint (perf_event_open, PERF_TYPE_BREAKPOINT) on a word of the
 * calling thread's own stack, writes it, and reads the count: nothing is
 * armed in any other thread or process, and nothing is left armed. Returns
 * an rbpeek_watch_support; msg gets one line saying what was found.
 * ------------------------------------------------------------------------- */
typedef enum rbpeek_watch_support {
    RBPEEK_WATCH_FIRES = 0,        /* a watched write trapped */
    RBPEEK_WATCH_NEVER_FIRES = 1,  /* accepted, but watched writes never trap (e.g. a VM) */
    RBPEEK_WATCH_FORBIDDEN = 2,    /* perf_event_open refused (perf_event_paranoid, seccomp) */
    RBPEEK_WATCH_NO_REGISTER = 3,  /* every debug register is in use */
    RBPEEK_WATCH_UNSUPPORTED = 4   /* the kernel has no breakpoint events */
} rbpeek_watch_support;
RBPEEK_API int rbpeek_watch_probe(char *msg, size_t msgsize);

/* rbpeek_alloc_counts_read: the target's allocation counters, read while it
 * runs (no stop): objects allocated since it started, as
 * GC.stat(:total_allocated_objects) counts them, per heap from 3.2 on, and
 * GC.count. Two reads a known time apart give the exact allocation rate. */
#define RBPEEK_ALLOC_MAX_HEAPS 8
typedef struct rbpeek_alloc_counts {
    uint64_t total;             /* objects allocated since boot */
    uint64_t gc_count;          /* GC.count; UINT64_MAX when the layout does not say */
    uint32_t nheaps;            /* 3.2+: heaps (size pools) below; 0 before */
    uint32_t slot_size[RBPEEK_ALLOC_MAX_HEAPS];
    uint64_t per_heap[RBPEEK_ALLOC_MAX_HEAPS];
} rbpeek_alloc_counts;
RBPEEK_API rbpeek_status rbpeek_alloc_counts_read(rbpeek_session *s, rbpeek_alloc_counts *out);

#ifdef __cplusplus
}
#endif

/* Profiles, their writers and the sampler: rbpeek_profile.h. */
#include "rbpeek_profile.h"

#endif /* RBPEEK_H */

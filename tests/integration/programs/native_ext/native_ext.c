/*
 * The C extension of native_stack.rb (tests of `ruby bt --native` and
 * `ruby sample --native`, docs/native.md). Built at test time against the
 * headers of the Ruby under test (extconf.rb; tests/integration/nativelib.py),
 * never committed built.
 *
 * Its methods make a thread's stack go Ruby -> C -> rb_yield -> Ruby -> C ->
 * rb_thread_call_without_gvl -> a libc sleep, where the thread parks:
 *
 *   NativeExt.outer { ... }   outer_c: yields to the block (rb_yield)
 *   NativeExt.inner           inner_c: releases the GVL and sleeps in
 *                             park_nogvl (nanosleep) until the process ends
 *   NativeExt.parked          how many threads sleep in park_nogvl
 *   NativeExt.spin(n)         spin_c: n rounds of arithmetic in C, with
 *                             the GVL held (a C frame on top while sampled)
 *   NativeExt.deep(n) { }     deep_c: n nested calls of a C function, the
 *                             innermost yielding to the block
 *   NativeExt.gc_wall_time    seconds of wall time (CLOCK_MONOTONIC) spent
 *                             in the GC since the first call, from the
 *                             GC's own enter and exit events (what a
 *                             wall-clock sampler sees; GC.stat(:time)
 *                             counts CPU time)
 *   NativeExt.gc_cpu_time     [CPU seconds of the thread the GC ran on,
 *                             spent between the GC's enter and exit
 *                             events since the first call (its own
 *                             CLOCK_THREAD_CPUTIME_ID, read in each
 *                             event), windows, CPU seconds one such read
 *                             costs]: the CPU time inside the GC's flag,
 *                             which a sampler of the thread's CPU time
 *                             should find (see gc_cpu_hook)
 *   NativeExt.gc_flag_polls   [polls, polls that found the GC running]:
 *                             from the first call, a thread of its own
 *                             (no GVL, never Ruby) asks rb_during_gc()
 *                             about every 200 us of wall time: the GC's
 *                             own flag, which a GC step sets before its
 *                             enter event and clears after its exit event
 *
 * The C functions are global (not static) so that they have names in
 * .dynsym too, and noinline so that each keeps a native frame of its own.
 */
#include <pthread.h>
#include <ruby.h>
#include <ruby/debug.h>
#include <ruby/thread.h>
#include <time.h>

static volatile int parked_count;

__attribute__((noinline)) void *park_nogvl(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&parked_count, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        struct timespec ts = {3600, 0};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

__attribute__((noinline)) VALUE inner_c(VALUE self)
{
    (void)self;
    rb_thread_call_without_gvl(park_nogvl, NULL, RUBY_UBF_IO, NULL);
    /* never reached: a frame after the call keeps this one from being a
     * tail call */
    return INT2FIX(parked_count);
}

__attribute__((noinline)) VALUE outer_c(VALUE self)
{
    (void)self;
    VALUE r = rb_yield(Qnil);
    return rb_ary_new_from_args(1, r);
}

static VALUE parked_c(VALUE self)
{
    (void)self;
    return INT2FIX(__atomic_load_n(&parked_count, __ATOMIC_SEQ_CST));
}

__attribute__((noinline)) VALUE spin_c(VALUE self, VALUE n)
{
    (void)self;
    long rounds = NUM2LONG(n);
    volatile unsigned long x = 1;
    for (long i = 0; i < rounds; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
    return ULONG2NUM(x);
}

__attribute__((noinline)) static VALUE deep_level(long n)
{
    if (n <= 0) return rb_yield(Qnil);
    VALUE r = deep_level(n - 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call: each level keeps its frame */
    return r;
}

__attribute__((noinline)) VALUE deep_c(VALUE self, VALUE n)
{
    (void)self;
    VALUE r = deep_level(NUM2LONG(n));
    return rb_ary_new_from_args(1, r);
}

static double gc_wall_total, gc_wall_entered;
static int gc_wall_inside;

static double monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The GC's CPU time, measured inside its flag: the enter event comes after
 * the GC sets its flag, the exit event before it clears it, so the CPU time
 * between the two clock readings lies inside the window in which a sampler
 * finds the flag set. Each window misses what lies outside its two readings:
 * the part of the first read before the kernel took the time and the part
 * of the second after, about one read in all (a system call: the vDSO has no
 * thread CPU clock), and the calling of the hooks. The read's own cost is
 * measured once (gc_read_cost) and reported for the caller to add per
 * window. (Ruby's GC.stat(:time) is not this window: 3.1 reads its clock
 * before setting the flag and after clearing it, 3.3 and later inside it,
 * around its marking and sweeping; docs/native.md.) */
static double gc_cpu_total, gc_cpu_entered, gc_read_cost;
static long gc_windows;
/* Read only once gc_cpu_time was called: on 2.7, whose GC runs in some
 * 17,000 steps a second, two system calls a step inside the flag drew a
 * tracer's stops there (docs/native.md), and the program there asks for
 * none (it has no GC.stat(:time) either). */
static int gc_cpu_on;

/* Internal events: no Ruby code may run here, and none does. */
static void gc_wall_hook(VALUE tpval, void *data)
{
    (void)data;
    rb_event_flag_t ev = rb_tracearg_event_flag(rb_tracearg_from_tracepoint(tpval));
    if (ev == RUBY_INTERNAL_EVENT_GC_ENTER) {
        gc_wall_entered = monotonic();
        if (gc_cpu_on) gc_cpu_entered = thread_cpu();
        gc_wall_inside = 1;
    } else if (gc_wall_inside) {
        if (gc_cpu_on) gc_cpu_total += thread_cpu() - gc_cpu_entered;
        gc_wall_total += monotonic() - gc_wall_entered;
        gc_windows++;
        gc_wall_inside = 0;
    }
}

/* The CPU time one read of the thread's CPU clock costs: the median of 21
 * rounds of 200 reads, timed by that clock itself. */
static double gc_read_cost_measure(void)
{
    double r[21];
    for (int k = 0; k < 21; k++) {
        double a = thread_cpu();
        for (int i = 0; i < 200; i++) (void)thread_cpu();
        r[k] = (thread_cpu() - a) / 201.0;
    }
    for (int i = 1; i < 21; i++)
        for (int j = i; j > 0 && r[j - 1] > r[j]; j--) {
            double x = r[j];
            r[j] = r[j - 1];
            r[j - 1] = x;
        }
    return r[10];
}

static void gc_hooks_start(void)
{
    static VALUE tp = Qnil;
    if (NIL_P(tp)) {
        tp = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT, gc_wall_hook, NULL);
        rb_gc_register_address(&tp);
        rb_tracepoint_enable(tp);
    }
}

static VALUE gc_wall_time_c(VALUE self)
{
    (void)self;
    gc_hooks_start();
    return DBL2NUM(gc_wall_total);
}

static VALUE gc_cpu_time_c(VALUE self)
{
    (void)self;
    if (!gc_cpu_on) {
        gc_read_cost = gc_read_cost_measure();
        gc_cpu_on = 1;
    }
    gc_hooks_start();
    return rb_ary_new_from_args(3, DBL2NUM(gc_cpu_total), LONG2NUM(gc_windows), DBL2NUM(gc_read_cost));
}

/* The GC's flag polled from a thread that is not Ruby's: rb_during_gc()
 * only reads a word of the objspace, as a debugger does, so the polls
 * measure exactly what a sampler that reads the flag should find: the
 * share of wall time in which it was set. (The enter and exit events
 * above measure the same window; the flag needs no hook inside the GC.) */
static long gc_polls, gc_polls_in;

static void *gc_flag_poller(void *arg)
{
    (void)arg;
    for (;;) {
        int in = rb_during_gc();
        __atomic_add_fetch(&gc_polls_in, in ? 1 : 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&gc_polls, 1, __ATOMIC_RELAXED);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static VALUE gc_flag_polls_c(VALUE self)
{
    (void)self;
    static int started;
    if (!started) {
        pthread_t t;
        if (pthread_create(&t, NULL, gc_flag_poller, NULL) != 0) rb_raise(rb_eRuntimeError, "pthread_create");
        pthread_detach(t);
        started = 1;
    }
    return rb_ary_new_from_args(2, LONG2NUM(__atomic_load_n(&gc_polls, __ATOMIC_RELAXED)),
                                LONG2NUM(__atomic_load_n(&gc_polls_in, __ATOMIC_RELAXED)));
}

void Init_native_ext(void)
{
    VALUE m = rb_define_module("NativeExt");
    rb_define_module_function(m, "outer", outer_c, 0);
    rb_define_module_function(m, "inner", inner_c, 0);
    rb_define_module_function(m, "parked", parked_c, 0);
    rb_define_module_function(m, "spin", spin_c, 1);
    rb_define_module_function(m, "deep", deep_c, 1);
    rb_define_module_function(m, "gc_wall_time", gc_wall_time_c, 0);
    rb_define_module_function(m, "gc_flag_polls", gc_flag_polls_c, 0);
    rb_define_module_function(m, "gc_cpu_time", gc_cpu_time_c, 0);
}

/*
 * Tests of `ruby allocs --sites`' judge (profile/alloc_sites.c) on threads
 * and native stacks built by hand, as a sampled snapshot holds them: a
 * stack is kept when an allocator function lies between its leaf and its
 * first Ruby frame (a GC step above it too), and dropped when the
 * allocator is only further down (another VM invocation's), when only the
 * GC is there (GC.start), when it could not be merged, or when the thread
 * has no machine frames; the site is the innermost Ruby frame; the
 * allocator's names with the compiler's clone suffixes; the sites' JSON;
 * a live thread that has not run since its previous sample dropped; a
 * site in Class#new counted with its class, and judged in the allocator
 * with only unnamed frames between it and the GC; a site's 64 most sampled
 * classes written; the pairs at their bound; and the profile scaled to
 * estimated allocations.
 */
#define _GNU_SOURCE   /* gettid */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_main.h"
#include "rbpeek.h"

#include "profile/alloc_sites.h"
#include "profile/profile.h"

/* Ruby's frames of the thread, innermost first: "*" (a C method, at its
 * caller's line), site_a, <main>. */
static const rbpeek_frame STRINGS[] = {
    {.label = "*", .path = "t.rb", .lineno = 7, .kind = RBPEEK_FRAME_CFUNC},
    {.label = "site_a", .path = "t.rb", .lineno = 7, .kind = RBPEEK_FRAME_RUBY, .first_lineno = 5},
    {.label = "<main>", .path = "t.rb", .lineno = 20, .kind = RBPEEK_FRAME_RUBY, .first_lineno = 1},
};
/* ... and a thread in Class#new (Point.new at line 9): it makes a Point. */
#define POINT 0x7f0000c1a550ull
static const rbpeek_frame POINTS[] = {
    {.label = "new", .path = "t.rb", .lineno = 9, .kind = RBPEEK_FRAME_CFUNC, .instantiates = POINT},
    {.label = "site_c", .path = "t.rb", .lineno = 9, .kind = RBPEEK_FRAME_RUBY, .first_lineno = 8},
    {.label = "<main>", .path = "t.rb", .lineno = 21, .kind = RBPEEK_FRAME_RUBY, .first_lineno = 1},
};
static const rbpeek_frame *RUBY = STRINGS;   /* the frames the next stacks are built of */

static rbpeek_thread thread_of(void)
{
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    t.is_main = 1;
    t.native_tid = 100;
    t.nframes = 3;
    t.frames = RUBY;
    return t;
}

static rbpeek_native_frame nat(const char *sym)
{
    return (rbpeek_native_frame){.pc = 0x1000, .module = "/lib/libruby.so", .symbol = sym};
}

/* A merged stack: syms[] are native frames (NULL: unnamed), "R0".."R2"
 * the thread's Ruby frames, "GC" the GC's frame. */
typedef struct built {
    rbpeek_stack_frame f[16];
    rbpeek_native_frame n[16];
    rbpeek_native_stack ns;
} built;

static void build(built *b, const char *const *syms, size_t count, int merged)
{
    memset(b, 0, sizeof *b);
    size_t nn = 0;
    for (size_t i = 0; i < count; i++) {
        const char *s = syms[i];
        if (s && s[0] == 'R' && s[1] >= '0' && s[1] <= '2' && !s[2]) {
            const rbpeek_frame *rf = &RUBY[s[1] - '0'];
            b->f[i] = (rbpeek_stack_frame){.kind = rf->kind, .ruby = rf};
        } else if (s && strcmp(s, "GC") == 0) {
            b->f[i] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_GC, .label = "[GC: sweeping]"};
        } else {
            b->n[nn] = nat(s);
            b->f[i] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .native = &b->n[nn]};
            nn++;
        }
    }
    b->ns = (rbpeek_native_stack){.nframes = count, .frames = b->f, .merged = merged, .nnative = nn,
                                  .native = b->n};
}

static rbp_sample_fate judge(rbpeek_alloc_sites *a, rbpeek_profile *p, const char *const *syms, size_t count,
                             int merged)
{
    built b;
    build(&b, syms, count, merged);
    rbpeek_thread t = thread_of();
    bool unknown;
    return rbp_alloc_sites_add_thread(a, p, &t, &b.ns, NULL, 0, &unknown);
}

#define JUDGE(a, p, merged, ...)                                                                         \
    judge(a, p, (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *), \
          merged)

static void test_names(void)
{
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("rb_wb_protected_newobj_of"));
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("rb_ec_wb_protected_newobj_of"));
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("rb_wb_unprotected_newobj_of"));
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("rb_newobj_of"));
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("newobj_slowpath_wb_protected.constprop.0"));
    CU_ASSERT_TRUE(rbpeek_alloc_sites_is_allocator("newobj_alloc.cold"));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator("rb_wb_protected_newobj_off"));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator("newobj"));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator("gc_sweep_step"));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator("rb_ary_new"));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator(""));
    CU_ASSERT_FALSE(rbpeek_alloc_sites_is_allocator(NULL));
}

static void test_judge(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* in the allocator's fast path, under String#* */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "rb_wb_protected_newobj_of", "str_new0", "rb_str_times", "R0", "R1", "R2"),
                    RBP_SAMPLE_ADDED);
    /* a GC step the allocator started (stripped: the static ones unnamed) */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, NULL, "rb_wb_protected_newobj_of", "rb_str_times", "R0", "R1", "R2"),
                    RBP_SAMPLE_ADDED);
    /* not in the allocator: in String#*'s own code */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "memcpy", "rb_str_times", "R0", "R1", "R2"), RBP_SAMPLE_FILTERED);
    /* the allocator only below the first Ruby frame: another invocation's */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "memcpy", "R0", "R1", "rb_wb_protected_newobj_of", "R2"), RBP_SAMPLE_FILTERED);
    /* the GC, the allocator not under it (GC.start, malloc's GC) */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", "gc_start", "garbage_collect", "R0", "R1", "R2"), RBP_SAMPLE_FILTERED);
    /* not merged: not judged, whatever it holds */
    CU_ASSERT_EQUAL(JUDGE(a, p, 0, "rb_wb_protected_newobj_of", "R0", "R1", "R2"), RBP_SAMPLE_FILTERED);
    /* no machine frames */
    rbpeek_thread t = thread_of();
    bool unknown;
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, NULL, NULL, 0, &unknown), RBP_SAMPLE_FILTERED);

    rbpeek_alloc_sites_stats st;
    rbpeek_alloc_sites_get_stats(a, &st);
    CU_ASSERT_EQUAL(st.stacks, 6);
    CU_ASSERT_EQUAL(st.allocator, 2);
    CU_ASSERT_EQUAL(st.allocator_gc, 1);
    CU_ASSERT_EQUAL(st.gc_elsewhere, 1);
    CU_ASSERT_EQUAL(st.unmerged, 1);
    CU_ASSERT_EQUAL(st.no_native, 1);
    CU_ASSERT_EQUAL(st.sites, 1);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 2);

    /* the site is the innermost Ruby frame: the C method, at its caller's line */
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    /* two kept samples: too few to cut into batches */
    CU_ASSERT_STRING_EQUAL(json, "{\"batches\":0,\"batched\":2,\"sites\":[{\"label\":\"*\",\"path\":\"t.rb\","
                                 "\"lineno\":7,\"kind\":\"cfunc\",\"samples\":2,\"types\":[],\"batch_samples\":[]}]}");
    rbpeek_free(json);
    /* another profile is refused */
    rbpeek_profile *other = rbpeek_profile_new();
    CU_ASSERT_EQUAL(rbpeek_alloc_sites_json(a, other, &json), RBPEEK_ERR_ARG);
    rbpeek_profile_free(other);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

static void test_typed(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    RUBY = POINTS;
    /* the named allocator under Class#new (an unstripped Ruby) */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", "rb_wb_protected_newobj_of", NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    /* stripped, tail calls: only unnamed frames between the GC and Class#new */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    /* ... but without the GC at work, nothing says the allocator runs */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, NULL, NULL, "R0", "R1", "R2"), RBP_SAMPLE_FILTERED);
    RUBY = STRINGS;
    /* a GC under a C method that makes no instance of its receiver: elsewhere */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2"), RBP_SAMPLE_FILTERED);
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "rb_wb_protected_newobj_of", "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    rbpeek_alloc_sites_stats st;
    rbpeek_alloc_sites_get_stats(a, &st);
    CU_ASSERT_EQUAL(st.allocator, 3);
    CU_ASSERT_EQUAL(st.typed, 2);
    CU_ASSERT_EQUAL(st.gc_elsewhere, 1);
    CU_ASSERT_EQUAL(st.sites, 2);
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    CU_ASSERT_STRING_EQUAL(json, "{\"batches\":0,\"batched\":3,\"sites\":[{\"label\":\"new\",\"path\":\"t.rb\","
                                 "\"lineno\":9,\"kind\":\"cfunc\",\"samples\":2,"
                                 "\"types\":[{\"class\":139637989418320,\"samples\":2}],\"batch_samples\":[]},"
                                 "{\"label\":\"*\",\"path\":\"t.rb\",\"lineno\":7,\"kind\":\"cfunc\","
                                 "\"samples\":1,\"types\":[],\"batch_samples\":[]}]}");
    rbpeek_free(json);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

/* A site making 70 classes: its 64 most sampled are written, most first;
 * another site's classes stay its own. */
static void test_typed_many(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    rbpeek_frame frames[3];
    memcpy(frames, POINTS, sizeof frames);
    RUBY = frames;
    for (uint64_t k = 1; k <= 70; k++) {
        frames[0].instantiates = 0x10000 * k;
        for (uint64_t i = 0; i < k; i++)
            CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    }
    frames[0].lineno = frames[1].lineno = 11; /* another line: another site */
    frames[0].instantiates = 0x10000;
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    RUBY = STRINGS;
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    size_t classes = 0;
    for (const char *q = json; (q = strstr(q, "\"class\":")); q++) classes++;
    CU_ASSERT_EQUAL(classes, 64 + 1);
    /* most first: 70 samples of 0x460000, then 69 of 0x450000 */
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"types\":[{\"class\":4587520,\"samples\":70},{\"class\":4521984,\"samples\":69},"));
    /* the six least sampled left out: 0x70000 (7 samples) is the last written */
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"class\":458752,\"samples\":7}],"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(json, "\"lineno\":11,\"kind\":\"cfunc\",\"samples\":1,\"types\":[{\"class\":65536,\"samples\":1}],"));
    rbpeek_free(json);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

/* When the (site, class) pairs are at their bound, a new pair's sample
 * keeps its site but not its class, and the pairs kept go on counting. */
static void test_typed_full(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    rbpeek_frame frames[3];
    memcpy(frames, POINTS, sizeof frames);
    RUBY = frames;
    for (uint64_t k = 1; k <= 65536; k++) {   /* alloc_sites.c's TYPED_MAX */
        frames[0].instantiates = 0x10 * k;
        JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2");
    }
    frames[0].instantiates = 0x10 * 65537;    /* a new pair: not kept */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    frames[0].instantiates = 0x10;            /* a kept one: counted */
    CU_ASSERT_EQUAL(JUDGE(a, p, 1, "GC", NULL, "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
    RUBY = STRINGS;
    rbpeek_alloc_sites_stats st;
    rbpeek_alloc_sites_get_stats(a, &st);
    CU_ASSERT_EQUAL(st.allocator, 65538);
    CU_ASSERT_EQUAL(st.typed, 65537);
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"types\":[{\"class\":16,\"samples\":2},"));
    rbpeek_free(json);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

static int pipe_fds[2];
static _Atomic pid_t parked_tid;

static void *parked(void *arg)
{
    (void)arg;
    parked_tid = gettid();
    char c;
    return read(pipe_fds[0], &c, 1) == 1 ? NULL : NULL;   /* blocked: its CPU time does not move */
}

static void test_not_run(void)
{
    CU_ASSERT_EQUAL_FATAL(pipe(pipe_fds), 0);
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, parked, NULL), 0);
    while (!parked_tid) usleep(1000);
    usleep(50000);   /* in its read by now */
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    rbpeek_sample_options opt = {.pid = getpid()};
    built b;
    const char *syms[] = {"rb_wb_protected_newobj_of", "R0", "R1", "R2"};
    build(&b, syms, 4, 1);
    rbpeek_thread t = thread_of();
    t.native_tid = parked_tid;
    bool unknown;
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, &opt, 0, &unknown), RBP_SAMPLE_ADDED);
    /* the parked thread has not run since: the same sample again, dropped */
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, &opt, 0, &unknown), RBP_SAMPLE_FILTERED);
    /* this thread runs: kept each time */
    t.native_tid = gettid();
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, &opt, 0, &unknown), RBP_SAMPLE_ADDED);
    for (volatile int i = 0; i < 5000000; i++) {}
    usleep(1000);   /* switched out: the kernel adds up its CPU time (a sampled thread is, by its stop) */
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, &opt, 0, &unknown), RBP_SAMPLE_ADDED);
    rbpeek_alloc_sites_stats st;
    rbpeek_alloc_sites_get_stats(a, &st);
    CU_ASSERT_EQUAL(st.not_run, 1);
    CU_ASSERT_EQUAL(st.allocator, 3);
    CU_ASSERT_EQUAL(write(pipe_fds[1], "x", 1), 1);
    pthread_join(th, NULL);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

static void test_scale(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    const char *s1[] = {"main", "a"}, *s2[] = {"main", "b"}, *s3[] = {"main"};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s1, 2, 3), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s2, 2, 1), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s3, 1, 1), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_scale_to(p, 5000000), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 5000000);
    CU_ASSERT_EQUAL(p->nodes[0].total, 5000000);
    uint64_t a = 0, b = 0, m = 0;
    for (uint32_t i = 1; i < p->nnodes; i++) {
        const char *name = rbp_profile_node_name(p, i);
        if (strcmp(name, "a") == 0) a = p->nodes[i].total;
        if (strcmp(name, "b") == 0) b = p->nodes[i].total;
        if (strcmp(name, "main") == 0) m = p->nodes[i].self;
    }
    CU_ASSERT_EQUAL(a, 3000000);
    CU_ASSERT_EQUAL(b, 1000000);
    CU_ASSERT_EQUAL(m, 1000000);
    /* an empty profile stays empty; a stack never scales to 0 */
    rbpeek_profile *e = rbpeek_profile_new();
    CU_ASSERT_EQUAL(rbpeek_profile_scale_to(e, 10), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(e), 0);
    CU_ASSERT_EQUAL(rbpeek_profile_scale_to(p, 1), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 3);
    rbpeek_profile_free(e);
    rbpeek_profile_free(p);
}

/* Each node's total is its self plus its children's totals, counted
 * without wrapping; returns the root's. */
static void assert_sums(const rbpeek_profile *p)
{
    for (uint32_t i = 0; i < p->nnodes; i++) {
        unsigned __int128 sum = p->nodes[i].self;
        for (uint32_t c = p->nodes[i].first_child; c != RBP_NO_NODE; c = p->nodes[c].next_sibling)
            sum += p->nodes[c].total;
        CU_ASSERT(sum == p->nodes[i].total);
        CU_ASSERT(p->nodes[i].total <= p->nodes[0].total);
    }
}

/* Scaled to a total a counter read backwards becomes through ctypes
 * (2^64 - d): the sums wrapped, rbpeek_profile_total was 0 and `top` said
 * "(0 samples in all)" over rows of 4.6e18 (issue 35). The total is taken
 * as 2^63 - 1: no sum wraps, the shares stay. */
static void test_scale_huge(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    const char *s1[] = {"main", "a"}, *s2[] = {"main", "b"}, *s3[] = {"main"};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s1, 2, 3), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s2, 2, 1), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, s3, 1, 1), RBPEEK_OK);
    char names[40][8];
    for (int i = 0; i < 40; i++) { /* stacks that round up, one each */
        snprintf(names[i], sizeof names[i], "c%d", i);
        const char *st[] = {"main", names[i]};
        CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, st, 2, 1), RBPEEK_OK);
    }
    for (uint64_t d = 1; d < 1000000; d = d * 7 + 1) {
        CU_ASSERT_EQUAL(rbpeek_profile_scale_to(p, UINT64_MAX - d + 1), RBPEEK_OK);
        uint64_t total = rbpeek_profile_total(p);
        CU_ASSERT(total >= UINT64_MAX / 2 - 64 && total <= UINT64_MAX / 2 + 64);
        assert_sums(p);
        uint64_t a = 0, b = 0;
        for (uint32_t i = 1; i < p->nnodes; i++) {
            if (strcmp(rbp_profile_node_name(p, i), "a") == 0) a = p->nodes[i].total;
            if (strcmp(rbp_profile_node_name(p, i), "b") == 0) b = p->nodes[i].total;
        }
        CU_ASSERT(b > 0 && (long double)a / b > 2.999999L && (long double)a / b < 3.000001L);
        char *top = NULL, want[64];
        CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 0, 5, &top), RBPEEK_OK);
        snprintf(want, sizeof want, "(%llu samples in all)", (unsigned long long)total);
        CU_ASSERT_PTR_NOT_NULL(strstr(top, want));
        rbpeek_free(top);
    }
    rbpeek_profile_free(p);
}

/* A Ruby frame YJIT's code runs allocating itself (putstring, newarray):
 * its line is not known to the walk, but YJIT saved its pc before the
 * call into the allocator, so the site takes the saved line; with none
 * (0) the frame stays as the walk gave it. */
static void test_saved_line(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    rbpeek_frame frames[2] = {STRINGS[1], STRINGS[2]};
    frames[0].lineno = 0;
    frames[0].lineno_unknown = 1;
    const rbpeek_frame *was = RUBY;
    RUBY = frames;
    built b;
    const char *syms[] = {"rb_ec_str_resurrect", "rb_wb_protected_newobj_of", "R0", "R1"};
    build(&b, syms, 4, 1);
    rbpeek_thread t = thread_of();
    t.nframes = 2;
    bool unknown;
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, NULL, 6, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_alloc_sites_add_thread(a, p, &t, &b.ns, NULL, 0, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(frames[0].lineno_unknown, 1);   /* the snapshot's frames are not changed */
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"label\":\"site_a\",\"path\":\"t.rb\",\"lineno\":6,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"label\":\"site_a\",\"path\":\"t.rb\",\"lineno\":null,"));
    rbpeek_free(json);
    RUBY = was;
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

/* The kept samples in the order taken, cut into batches: 300 samples, the
 * first 100 at site a (line 7) and the rest alternating with site b (line
 * 11): 20 batches of 15; a's samples are all in the first seven batches
 * (0-99: 6 2/3 batches) and half of the rest. */
static void test_batches(void)
{
    rbpeek_alloc_sites *a = rbpeek_alloc_sites_new();
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    rbpeek_frame frames[3];
    memcpy(frames, STRINGS, sizeof frames);
    RUBY = frames;
    uint64_t want_a[20] = {0};
    for (int i = 0; i < 300; i++) {
        bool at_a = i < 100 || i % 2 == 0;
        frames[0].lineno = frames[1].lineno = at_a ? 7 : 11;
        CU_ASSERT_EQUAL(JUDGE(a, p, 1, "rb_wb_protected_newobj_of", "R0", "R1", "R2"), RBP_SAMPLE_ADDED);
        if (at_a) want_a[i * 20 / 300]++;
    }
    RUBY = STRINGS;
    char *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_alloc_sites_json(a, p, &json), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"batches\":20,\"batched\":300,"));
    char want[512];
    size_t w = (size_t)snprintf(want, sizeof want, "\"lineno\":7,\"kind\":\"cfunc\",\"samples\":200,\"types\":[],"
                                                   "\"batch_samples\":[");
    for (int k = 0; k < 20; k++) w += (size_t)snprintf(want + w, sizeof want - w, "%s%llu", k ? "," : "",
                                                       (unsigned long long)want_a[k]);
    snprintf(want + w, sizeof want - w, "]");
    CU_ASSERT_PTR_NOT_NULL(strstr(json, want));
    CU_ASSERT_EQUAL(want_a[0], 15);
    CU_ASSERT_EQUAL(want_a[19], 7); /* 285-299: the seven even ones */
    rbpeek_free(json);
    rbpeek_profile_free(p);
    rbpeek_alloc_sites_free(a);
}

/* Wilson's interval (rbpeek_share_interval) against its formula worked by
 * hand, at its ends, with an effective (fractional) count, and for bad
 * input. */
static void test_interval(void)
{
    double lo, hi;
    /* k=40, n=100, z=1.6449: centre (0.4 + z^2/200) / (1 + z^2/100) =
     * 0.40263, half-width z sqrt(0.24/100 + z^2/40000) / (1 + z^2/100) = 0.07956 */
    rbpeek_share_interval(40, 100, 1.6449, &lo, &hi);
    CU_ASSERT_DOUBLE_EQUAL(lo, 0.3231, 5e-5);
    CU_ASSERT_DOUBLE_EQUAL(hi, 0.4822, 5e-5);
    rbpeek_share_interval(0, 50, 1.6449, &lo, &hi);
    CU_ASSERT(lo == 0.0 && hi > 0.03 && hi < 0.06);
    rbpeek_share_interval(50, 50, 1.6449, &lo, &hi);
    CU_ASSERT(fabs(hi - 1.0) < 1e-12 && lo > 0.94 && lo < 0.97);
    /* a share counted down to fewer effective samples is wider */
    double lo2, hi2;
    rbpeek_share_interval(12.5, 50.0, 1.6449, &lo2, &hi2);
    rbpeek_share_interval(25, 100, 1.6449, &lo, &hi);
    CU_ASSERT(lo2 < lo && hi2 > hi);
    rbpeek_share_interval(1, 0, 1.6449, &lo, &hi);
    CU_ASSERT(lo == 0.0 && hi == 1.0);
    rbpeek_share_interval(1, 10, 0, &lo, &hi);
    CU_ASSERT(lo == 0.0 && hi == 1.0);
    rbpeek_share_interval(NAN, 10, 1.6449, &lo, &hi);
    CU_ASSERT(lo == 0.0 && hi == 1.0);
}

static const rbp_cu_test TESTS[] = {
    {"allocator names", test_names},
    {"judging stacks", test_judge},
    {"a frame JIT code runs: the site at the line YJIT saved", test_saved_line},
    {"a site in Class#new, with its class", test_typed},
    {"a site making many classes", test_typed_many},
    {"the (site, class) pairs at their bound", test_typed_full},
    {"a thread that has not run since its last sample", test_not_run},
    {"the kept samples cut into batches, in order", test_batches},
    {"Wilson's interval of a share", test_interval},
    {"scaling to estimated allocations", test_scale},
    {"scaling to a total past 2^63 (a counter read backwards)", test_scale_huge},
    {NULL, NULL},
};

RBP_CU_MAIN("alloc_sites", TESTS)

/*
 * Tests of the sampler's whole stacks (sampler.c, rbp_sample_add_stack) on
 * hand-built threads and native stacks, as `ruby sample --native` and the
 * GC frames make them: the merged order root first, machine frames named
 * "symbol (module)" or "module+0xoffset" (one frame per function, whatever
 * the pc in it), a C method standing at its C function, the VM's internal
 * frames left out, a stack that could not be merged recorded with its Ruby
 * frames alone, and the GC's frame on top with or without a native stack.
 * Then what the writers make of such a profile: folded byte for byte, the
 * SVG's colours and titles apart for machine and GC frames, pprof's
 * mappings (one per module) and functions, speedscope's files.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "fixture_pprof.h"
#include "profile/profile.h"
#include "profile/sampler.h"
#include "rbpeek.h"

/* The thread's Ruby frames, innermost first. */
static const rbpeek_frame RUBY[] = {
    {.label = "NativeExt.inner", .path = "/app/n.rb", .lineno = 4, .kind = RBPEEK_FRAME_CFUNC},
    {.label = "Object#helper", .path = "/app/n.rb", .lineno = 4, .kind = RBPEEK_FRAME_RUBY},
    {.label = "<main>", .path = "/app/n.rb", .lineno = 9, .kind = RBPEEK_FRAME_RUBY},
};

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define EXT "/app/native_ext.so"
#define LIBRUBY "/usr/lib/libruby.so.3.1"

/* Machine frames, innermost first: a named libc function, a named one of
 * the extension, the C function of NativeExt.inner, an unnamed static of
 * libruby, rb_vm_exec (internal), main. */
static const rbpeek_native_frame NATIVE[] = {
    {.pc = 0x7f0000001234, .module = LIBC, .module_offset = 0x1234, .symbol = "__nanosleep", .symbol_offset = 0x14,
     .activation = 1, .function = 0x7f0000001220},
    {.pc = 0x7f1000000250, .module = EXT, .module_offset = 0x1250, .symbol = "park_nogvl", .symbol_offset = 0x10,
     .file = "native_ext.c", .line = 31, .function = 0x7f1000000240},
    {.pc = 0x7f1000000390, .module = EXT, .module_offset = 0x1390, .symbol = "inner_c", .symbol_offset = 0x30,
     .function = 0x7f1000000360},
    {.pc = 0x7f2000005678, .module = LIBRUBY, .module_offset = 0x45678, .function = 0x7f2000005600},
    {.pc = 0x7f2000009000, .module = LIBRUBY, .module_offset = 0x49000, .symbol = "rb_vm_exec", .symbol_offset = 0x40,
     .function = 0x7f2000008fc0},
    {.pc = 0x555500001000, .module = "/usr/bin/ruby", .module_offset = 0x1000, .symbol = "main", .symbol_offset = 9,
     .function = 0x555500000ff7},
};

/* The merged stack: libc, park_nogvl, inner at inner_c, the unnamed
 * static, helper, rb_vm_exec (internal), <main>, main. */
static rbpeek_stack_frame MERGED[8];

static rbpeek_native_stack merged_stack(void)
{
    int k = 0;
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .native = &NATIVE[0]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .native = &NATIVE[1]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_CFUNC, .ruby = &RUBY[0], .native = &NATIVE[2]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .native = &NATIVE[3]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_RUBY, .ruby = &RUBY[1]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .internal = 1, .native = &NATIVE[4]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_RUBY, .ruby = &RUBY[2]};
    MERGED[k++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .native = &NATIVE[5]};
    return (rbpeek_native_stack){.nframes = (size_t)k, .frames = MERGED, .merged = 1, .nnative = 6,
                                 .native = NATIVE};
}

static rbpeek_thread ruby_thread(void)
{
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    t.frames = RUBY;
    t.nframes = 3;
    t.native_tid = -1;
    t.status = RBPEEK_THREAD_RUNNABLE;
    return t;
}

static char *written(rbpeek_profile *p, const char *name, int which)
{
    char path[256];
    tmp_path(path, sizeof path, "sample_native", name);
    rbpeek_status st = which == 0   ? rbpeek_profile_write_folded(p, path)
                       : which == 1 ? rbpeek_profile_write_svg(p, path, NULL)
                                    : rbpeek_profile_write_speedscope(p, path);
    CU_ASSERT_EQUAL_FATAL(st, RBPEEK_OK);
    char *buf = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    unlink(path);
    return buf;
}

static rbp_sample_fate add(rbpeek_profile *p, const rbpeek_thread *t, const rbpeek_native_stack *ns,
                           rbp_sample_scratch *s, int32_t *gc, bool *unmerged)
{
    bool unknown;
    return rbp_sample_add_stack(p, t, ns, NULL, s, &unknown, gc, unmerged);
}

#define WHOLE_STACK                                                                                                 \
    "main (ruby);<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);libruby.so.3.1+0x45600;"                        \
    "NativeExt.inner (/app/n.rb:4);park_nogvl (native_ext.so);__nanosleep (libc.so.6)"

static void test_merged_order_and_names(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    rbpeek_thread t = ruby_thread();
    rbpeek_native_stack ns = merged_stack();
    int32_t gc;
    bool unmerged;
    CU_ASSERT_EQUAL(add(p, &t, &ns, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(gc, RBPEEK_GC_NONE);
    CU_ASSERT_FALSE(unmerged);
    /* Another pc in the same functions: the same frames. */
    rbpeek_native_frame moved[6];
    memcpy(moved, NATIVE, sizeof moved);
    for (int i = 0; i < 6; i++) {
        moved[i].pc += 4;
        moved[i].module_offset += 4;
    }
    rbpeek_stack_frame mf[8];
    memcpy(mf, MERGED, sizeof mf);
    for (int i = 0; i < 8; i++)
        if (mf[i].native) mf[i].native = &moved[mf[i].native - NATIVE];
    rbpeek_native_stack ns2 = ns;
    ns2.frames = mf;
    CU_ASSERT_EQUAL(add(p, &t, &ns2, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    char *out = written(p, "a.folded", 0);
    CU_ASSERT_STRING_EQUAL(out, WHOLE_STACK " 2\n");
    free(out);
    /* The frame table keeps each frame's kind and native parts. */
    int natives = 0, cfuncs = 0;
    for (uint32_t i = 0; i < p->nnames; i++) {
        const rbp_pframe *f = rbp_profile_pframe(p, i);
        if (f->d.kind == RBPEEK_FRAME_NATIVE) {
            natives++;
            CU_ASSERT(*f->d.module == '/');
            CU_ASSERT(f->d.pc != 0);
            if (!strcmp(f->d.symbol, "park_nogvl")) {
                CU_ASSERT_EQUAL(f->d.pc, 0x7f1000000240);
                CU_ASSERT_STRING_EQUAL(f->d.native_file, "native_ext.c");
                CU_ASSERT_EQUAL(f->d.native_line, 31);
            }
        } else if (f->d.kind == RBPEEK_FRAME_CFUNC) {
            cfuncs++;
            CU_ASSERT_STRING_EQUAL(f->d.symbol, "inner_c");
            CU_ASSERT_STRING_EQUAL(f->d.module, EXT);
        }
    }
    CU_ASSERT_EQUAL(natives, 4);   /* rb_vm_exec, internal, is left out */
    CU_ASSERT_EQUAL(cfuncs, 1);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static void test_gc_frames(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    rbpeek_thread t = ruby_thread();
    int32_t gc;
    bool unmerged;
    /* Without native stacks: the GC's frame on the Ruby frames. */
    t.gc = RBPEEK_GC_MARKING;
    CU_ASSERT_EQUAL(add(p, &t, NULL, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(gc, RBPEEK_GC_MARKING);
    t.gc = RBPEEK_GC_SWEEPING;
    CU_ASSERT_EQUAL(add(p, &t, NULL, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(gc, RBPEEK_GC_SWEEPING);
    t.gc = RBPEEK_GC_RUNNING;
    CU_ASSERT_EQUAL(add(p, &t, NULL, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    t.gc = RBPEEK_GC_NONE;
    CU_ASSERT_EQUAL(add(p, &t, NULL, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(gc, RBPEEK_GC_NONE);
    /* With one: the native stack holds the GC's frame innermost (as
     * native_stack.c puts it). */
    rbpeek_native_stack ns = merged_stack();
    rbpeek_stack_frame withgc[9];
    withgc[0] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_GC, .label = "[GC: compacting]"};
    memcpy(withgc + 1, MERGED, sizeof MERGED);
    ns.frames = withgc;
    ns.nframes = 9;
    t.gc = RBPEEK_GC_COMPACTING;
    CU_ASSERT_EQUAL(add(p, &t, &ns, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(gc, RBPEEK_GC_COMPACTING);
    char *out = written(p, "gc.folded", 0);
    CU_ASSERT_STRING_EQUAL(out, "<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);NativeExt.inner (/app/n.rb:4) 1\n"
                                "<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);NativeExt.inner (/app/n.rb:4);"
                                "[GC: marking] 1\n"
                                "<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);NativeExt.inner (/app/n.rb:4);"
                                "[GC: sweeping] 1\n"
                                "<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);NativeExt.inner (/app/n.rb:4);"
                                "[GC] 1\n" WHOLE_STACK ";[GC: compacting] 1\n");
    free(out);
    /* The SVG: GC frames green, machine frames blue and said so. */
    char *svg = written(p, "gc.svg", 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>park_nogvl (native_ext.so) (native frame, 1 sample"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>[GC: marking] (1 sample"));
    CU_ASSERT_PTR_NULL(strstr(svg, "<title>Object#helper (/app/n.rb:4) (native frame"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "blue: native frames, green: the GC</text>"));
    /* Each box's fill: a native one's blue is its largest part, a GC one's green. */
    int blue = 0, green = 0;
    for (const char *q = svg; (q = strstr(q, "<title>")); q++) {
        const char *fill = strstr(q, "fill=\"rgb(");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fill);
        unsigned r, g, b;
        CU_ASSERT_EQUAL_FATAL(sscanf(fill + 10, "%u,%u,%u", &r, &g, &b), 3);
        if (!strncmp(q + 7, "park_nogvl", 10) || !strncmp(q + 7, "__nanosleep", 11)) {
            CU_ASSERT(b > r && b > g);
            blue++;
        } else if (!strncmp(q + 7, "[GC", 3)) {
            CU_ASSERT(g > r && g > b);
            green++;
        } else if (!strncmp(q + 7, "Object#helper", 13)) {
            CU_ASSERT(r > b);
        }
    }
    CU_ASSERT(blue >= 2);
    CU_ASSERT_EQUAL(green, 4);
    free(svg);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static void test_unmerged_and_empty(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    rbpeek_thread t = ruby_thread();
    rbpeek_native_stack ns = merged_stack();
    ns.merged = 0;
    ns.note = "the VM's entry frames do not pair up with the Ruby frames";
    int32_t gc;
    bool unmerged;
    CU_ASSERT_EQUAL(add(p, &t, &ns, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    CU_ASSERT_TRUE(unmerged);
    char *out = written(p, "u.folded", 0);
    CU_ASSERT_STRING_EQUAL(out, "<main> (/app/n.rb:9);Object#helper (/app/n.rb:4);NativeExt.inner (/app/n.rb:4) 1\n");
    free(out);
    /* A merged stack of internal frames alone adds nothing. */
    rbpeek_stack_frame only = {.kind = RBPEEK_FRAME_NATIVE, .internal = 1, .native = &NATIVE[4]};
    rbpeek_native_stack ns2 = {.nframes = 1, .frames = &only, .merged = 1};
    CU_ASSERT_EQUAL(add(p, &t, &ns2, &s, &gc, &unmerged), RBP_SAMPLE_EMPTY);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 1);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static void test_pprof_and_speedscope(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    rbpeek_thread t = ruby_thread();
    rbpeek_native_stack ns = merged_stack();
    int32_t gc;
    bool unmerged;
    CU_ASSERT_EQUAL(add(p, &t, &ns, &s, &gc, &unmerged), RBP_SAMPLE_ADDED);
    char path[256];
    tmp_path(path, sizeof path, "sample_native", "n.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(p, path, NULL), RBPEEK_OK);
    Prof *pr = read_pprof(path);
    unlink(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pr);
    /* The Ruby program's mapping, then one per module: libc, the extension, libruby, ruby. */
    CU_ASSERT_EQUAL(pr->n_mapping, 5);
    const char *want_maps[] = {LIBC, EXT, LIBRUBY, "/usr/bin/ruby"};
    for (int m = 0; m < 4; m++) {
        bool found = false;
        for (size_t i = 1; i < pr->n_mapping; i++)
            found |= !strcmp(pprof_str(pr, pr->mapping[i]->filename), want_maps[m]);
        CU_ASSERT(found);
    }
    CU_ASSERT_EQUAL(pr->n_sample, 1);
    CU_ASSERT_EQUAL_FATAL(pr->sample[0]->n_location_id, 7);
    /* Leaf first: __nanosleep in libc's mapping at its function's address, named by its symbol. */
    const Perftools__Profiles__Location *leaf = pprof_location(pr, pr->sample[0]->location_id[0]);
    const Perftools__Profiles__Location *inner = pprof_location(pr, pr->sample[0]->location_id[2]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(leaf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(inner);
    CU_ASSERT_EQUAL(leaf->address, 0x7f0000001220);
    const Perftools__Profiles__Mapping *lm = pprof_mapping(pr, leaf->mapping_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lm);
    CU_ASSERT_STRING_EQUAL(pprof_str(pr, lm->filename), LIBC);
    const Perftools__Profiles__Function *fn = pprof_function(pr, leaf->line[0]->function_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fn);
    CU_ASSERT_STRING_EQUAL(pprof_str(pr, fn->name), "__nanosleep");
    /* The C method at its C function: Ruby's label and place, in the extension's mapping. */
    fn = pprof_function(pr, inner->line[0]->function_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fn);
    CU_ASSERT_STRING_EQUAL(pprof_str(pr, fn->name), "NativeExt.inner");
    CU_ASSERT_NOT_EQUAL(inner->mapping_id, 1);
    perftools__profiles__profile__free_unpacked(pr, NULL);

    char *ss = written(p, "n.speedscope.json", 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(ss, "{\"name\":\"park_nogvl (native_ext.so)\",\"file\":\"native_ext.c\",\"line\":31}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ss, "{\"name\":\"__nanosleep (libc.so.6)\",\"file\":\"" LIBC "\"}"));
    free(ss);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static const rbp_cu_test TESTS[] = {
    {"merged stacks: order, names, one frame per function", test_merged_order_and_names},
    {"GC frames, with and without native stacks; the SVG's colours", test_gc_frames},
    {"a stack not merged: its Ruby frames alone", test_unmerged_and_empty},
    {"pprof's mappings and functions, speedscope's files", test_pprof_and_speedscope},
    {NULL, NULL},
};

RBP_CU_MAIN("sample_native", TESTS)

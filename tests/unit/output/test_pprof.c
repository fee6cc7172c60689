/*
 * Tests of the pprof writer (pprof.c): every file written is gunzipped with
 * zlib and decoded with protobuf-c's own unpacker, and what it says is
 * compared with the stacks that went in: sample types and units, period,
 * each stack (leaf first) with its count and time, functions named by
 * their labels with their files and start lines (noted by the sampler, or
 * guessed from the lines seen), locations with lines,
 * frames without a place (a thread's root, a C method without a path),
 * frames known by a name alone (a folded file's: never split back into
 * parts), the title comment, the times; also an empty
 * profile, write errors, and counts too large for pprof's int64 values.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "fixture_pprof.h"
#include "rbpeek.h"

#include "profile/profile.h"

static void stack_text(const Prof *p, const Perftools__Profiles__Sample *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t k = s->n_location_id; k > 0; k--) {
        const Perftools__Profiles__Location *loc = pprof_location(p, s->location_id[k - 1]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(loc);
        CU_ASSERT_EQUAL_FATAL(loc->n_line, 1);
        CU_ASSERT_EQUAL(loc->mapping_id, 1);
        const Perftools__Profiles__Function *f = pprof_function(p, loc->line[0]->function_id);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s@%s:%lld", k == s->n_location_id ? "" : ";", pprof_str(p, f->name),
                 pprof_str(p, f->filename), (long long)loc->line[0]->line);
    }
}

/* The sample whose stack reads want, or NULL. */
static const Perftools__Profiles__Sample *find_sample(const Prof *p, const char *want)
{
    char buf[1024];
    for (size_t i = 0; i < p->n_sample; i++) {
        stack_text(p, p->sample[i], buf, sizeof buf);
        if (strcmp(buf, want) == 0) return p->sample[i];
    }
    return NULL;
}

static const Perftools__Profiles__Function *function_named(const Prof *p, const char *name, const char *file)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (strcmp(pprof_str(p, p->function[i]->name), name) == 0 && strcmp(pprof_str(p, p->function[i]->filename), file) == 0)
            return p->function[i];
    return NULL;
}

/* Frames as the sampler gives them: a Ruby frame, a C method's. */
#define RB(l, p, n) {.kind = RBP_PF_RUBY, .label = (l), .path = (p), .line = (n)}
#define CF(l, p, n) {.kind = RBP_PF_CFUNC, .label = (l), .path = (p), .line = (n)}

static void test_round_trip(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    const rbp_frame_desc a[] = {RB("<main>", "app.rb", 30), RB("Object#work", "app.rb", 12),
                                CF("Integer#times", "<internal:numeric>", 237),
                                RB("block in Object#work", "app.rb", 14)};
    const rbp_frame_desc b[] = {RB("<main>", "app.rb", 30), RB("Object#work", "app.rb", 16),
                                RB("block (2 levels) in idle", "lib/x.rb", 3)};
    const rbp_frame_desc c[] = {{.kind = RBP_PF_THREAD, .label = "Thread \"worker\" (tid 77)"},
                                CF("sleep", NULL, 0)};
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, a, 4, 7, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 3, 2, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 2, 1, NULL), RBPEEK_OK);   /* a stack ending inside another */
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, c, 2, 5, NULL), RBPEEK_OK);
    rbpeek_profile_set_meta(pr, "title", "ruby sample: pid 42");
    char path[512];
    tmp_path(path, sizeof path, "pprof", "rt.pb.gz");
    rbpeek_pprof_options opt = {.period_ns = 5000000, .on_cpu = 0, .time_nanos = 1700000000123456789LL,
                                .duration_nanos = 2500000000LL};
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, &opt), RBPEEK_OK);

    /* gzip magic first: pprof files are always compressed. */
    size_t raw_len = 0;
    char *raw = slurp(path, &raw_len);
    CU_ASSERT_TRUE_FATAL(raw && raw_len > 2 && (unsigned char)raw[0] == 0x1f && (unsigned char)raw[1] == 0x8b);
    free(raw);

    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_TRUE_FATAL(p->n_string_table > 0);
    CU_ASSERT_STRING_EQUAL(p->string_table[0], "");
    CU_ASSERT_EQUAL_FATAL(p->n_sample_type, 2);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[0]->type), "samples");
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[0]->unit), "count");
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[1]->type), "wall");
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[1]->unit), "nanoseconds");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->period_type);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->period_type->type), "wall");
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->period_type->unit), "nanoseconds");
    CU_ASSERT_EQUAL(p->period, 5000000);
    CU_ASSERT_EQUAL(p->time_nanos, 1700000000123456789LL);
    CU_ASSERT_EQUAL(p->duration_nanos, 2500000000LL);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->default_sample_type), "wall");
    CU_ASSERT_EQUAL_FATAL(p->n_comment, 1);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->comment[0]), "ruby sample: pid 42");
    CU_ASSERT_EQUAL_FATAL(p->n_mapping, 1);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->mapping[0]->filename), "ruby");
    CU_ASSERT_TRUE(p->mapping[0]->has_functions && p->mapping[0]->has_filenames && p->mapping[0]->has_line_numbers);

    /* Every stack, with its count and count x period. */
    CU_ASSERT_EQUAL(p->n_sample, 4);
    struct { const char *stack; int64_t count; } want[] = {
        {"<main>@app.rb:30;Object#work@app.rb:12;Integer#times@<internal:numeric>:237;"
         "block in Object#work@app.rb:14", 7},
        {"<main>@app.rb:30;Object#work@app.rb:16;block (2 levels) in idle@lib/x.rb:3", 2},
        {"<main>@app.rb:30;Object#work@app.rb:16", 1},
        {"Thread \"worker\" (tid 77)@:0;sleep@:0", 5},
    };
    int64_t total = 0;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const Perftools__Profiles__Sample *s = find_sample(p, want[i].stack);
        CU_ASSERT_PTR_NOT_NULL(s);
        if (!s) {
            fprintf(stderr, "missing stack: %s\n", want[i].stack);
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(s->n_value, 2);
        CU_ASSERT_EQUAL(s->value[0], want[i].count);
        CU_ASSERT_EQUAL(s->value[1], want[i].count * 5000000);
        total += s->value[0];
    }
    CU_ASSERT_EQUAL(total, (int64_t)rbpeek_profile_total(pr));

    /* One function per (label, file): Object#work at two lines is one
     * function starting at the smaller line, with two locations. */
    const Perftools__Profiles__Function *work = function_named(p, "Object#work", "app.rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(work);
    CU_ASSERT_EQUAL(work->start_line, 12);
    CU_ASSERT_EQUAL(work->system_name, 0);   /* a Ruby label: no system name (test_labels_whole_in_pprof) */
    size_t work_locs = 0;
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->line[0]->function_id == work->id) work_locs++;
    CU_ASSERT_EQUAL(work_locs, 2);
    const Perftools__Profiles__Function *blk = function_named(p, "block (2 levels) in idle", "lib/x.rb");
    CU_ASSERT_PTR_NOT_NULL(blk);
    CU_ASSERT_PTR_NOT_NULL(function_named(p, "sleep", ""));
    /* 8 distinct frame names, 7 distinct functions, ids unique and nonzero. */
    CU_ASSERT_EQUAL(p->n_location, 8);
    CU_ASSERT_EQUAL(p->n_function, 7);
    for (size_t i = 0; i < p->n_location; i++) {
        CU_ASSERT_NOT_EQUAL(p->location[i]->id, 0);
        for (size_t j = i + 1; j < p->n_location; j++) CU_ASSERT_NOT_EQUAL(p->location[i]->id, p->location[j]->id);
    }

    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

static void test_on_cpu_defaults_and_empty(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    char path[512];
    tmp_path(path, sizeof path, "pprof", "empty.pb.gz");
    rbpeek_pprof_options opt = {.on_cpu = 1};
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, &opt), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_sample, 0);
    CU_ASSERT_EQUAL(p->n_location, 0);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[1]->type), "cpu");
    CU_ASSERT_EQUAL(p->period, 10000000);   /* 0 means ruby sample's default, 100 Hz */
    CU_ASSERT_EQUAL(p->n_comment, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);

    /* NULL options: wall, 10 ms. */
    const rbp_frame_desc f[] = {RB("x", "a.rb", 1)};
    rbp_profile_add_frames(pr, f, 1, 3, NULL);
    rbpeek_profile_set_meta(pr, "program", "/usr/bin/ruby3.1");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->sample_type[1]->type), "wall");
    CU_ASSERT_EQUAL_FATAL(p->n_sample, 1);
    CU_ASSERT_EQUAL(p->sample[0]->value[1], 30000000);
    CU_ASSERT_STRING_EQUAL(pprof_str(p, p->mapping[0]->filename), "/usr/bin/ruby3.1");
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);

    CU_ASSERT_EQUAL(rbpeek_profile_write_pprof(pr, "/nonexistent-dir/x.pb.gz", NULL), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(pr), "/nonexistent-dir/x.pb.gz"));
    CU_ASSERT_EQUAL(rbpeek_profile_write_pprof(NULL, path, NULL), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_write_pprof(pr, "", NULL), RBPEEK_ERR_ARG);
    rbpeek_profile_free(pr);
}

/* Start lines the sampler gives (the iseq's first line) make the function:
 * two blocks with one label are two functions, each starting where Ruby
 * says, whatever lines they were sampled at. */
static void test_noted_start_lines(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    rbp_frame_desc a[] = {RB("<main>", "s.rb", 20), RB("block in <main>", "s.rb", 21)};
    rbp_frame_desc b[] = {RB("<main>", "s.rb", 30), RB("block in <main>", "s.rb", 33), CF("sleep", "s.rb", 33)};
    a[0].first_line = 1, a[1].first_line = 20;
    b[0].first_line = 1, b[1].first_line = 31;
    uint32_t ids[3];
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, a, 2, 4, ids), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 3, 1, ids), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_start_line(pr, ids[1]), 31);
    b[1].first_line = 99;   /* the first start seen for a frame stands */
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 3, 1, ids), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_start_line(pr, ids[1]), 31);
    char path[512];
    tmp_path(path, sizeof path, "pprof", "starts.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int blocks = 0, mains = 0;
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        if (strcmp(pprof_str(p, f->name), "block in <main>") == 0) {
            blocks++;
            CU_ASSERT_TRUE(f->start_line == 20 || f->start_line == 31);
        } else if (strcmp(pprof_str(p, f->name), "<main>") == 0) {
            mains++;
            CU_ASSERT_EQUAL(f->start_line, 1);
        } else {
            CU_ASSERT_STRING_EQUAL(pprof_str(p, f->name), "sleep");   /* a C method: no start noted */
            CU_ASSERT_EQUAL(f->start_line, 33);
        }
    }
    CU_ASSERT_EQUAL(blocks, 2);
    CU_ASSERT_EQUAL(mains, 1);
    CU_ASSERT_EQUAL(p->n_function, 4);
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

/* A frame at line 0 of its file (Ruby 2.7 reports "path:0:in" for a frame
 * that has not reached its first line) is still a function of its label in
 * that file, at line 0 (unknown): not a function named "label (path)"
 * with no file. */
static void test_line_zero(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    const rbp_frame_desc a[] = {RB("<main>", "z.rb", 5), RB("beta", "z.rb", 0)};
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, a, 2, 2, NULL), RBPEEK_OK);
    char path[512];
    tmp_path(path, sizeof path, "pprof", "zero.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL(function_named(p, "beta", "z.rb"));
    CU_ASSERT_PTR_NOT_NULL(find_sample(p, "<main>@z.rb:5;beta@z.rb:0"));
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

/* A frame known only by its name (a folded file's, add_stack's) is a
 * function of that name, with no file and no line, whatever it looks like:
 * nothing parses a name back into parts. */
static void test_names_stay_whole(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    const char *f[] = {"<main> (app.rb:30)", "work (app.rb:12)"};
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(pr, f, 2, 1), RBPEEK_OK);
    char path[512];
    tmp_path(path, sizeof path, "pprof", "names.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL(find_sample(p, "<main> (app.rb:30)@:0;work (app.rb:12)@:0"));
    CU_ASSERT_PTR_NOT_NULL(function_named(p, "work (app.rb:12)", ""));
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

/* Ruby's labels as `go tool pprof` shows them: whole. pprof reads a name
 * equal to its system name, with "<", ">", "[", "]" or "::" in it, as a
 * demangled C++ name and cuts out its "<...>" and "(...)" ("block (2
 * levels) in <main>" became "block  in ", "<main>" nothing); a Ruby label
 * has no system name (""), so pprof takes the name as demangled already.
 * A machine frame's symbol keeps its system name, for pprof to demangle. */
static void test_labels_whole_in_pprof(void)
{
    static const char *const labels[] = {"<main>", "<class:App>", "block (2 levels) in <class:App>",
                                         "Net::HTTP#request", "block in Foo::Bar.make", "<top (required)>"};
    enum { N = sizeof labels / sizeof *labels };
    rbpeek_profile *pr = rbpeek_profile_new();
    rbp_frame_desc a[N + 1];
    for (int i = 0; i < N; i++) a[i] = (rbp_frame_desc)RB(labels[i], "app.rb", 10 + i);
    a[N] = (rbp_frame_desc){.kind = RBPEEK_FRAME_NATIVE, .module = "/usr/lib/libx.so", .pc = 0x1000,
                            .symbol = "std::vector<int>::push_back(int)"};
    for (int depth = 1; depth <= N + 1; depth++)   /* each frame a leaf once: each has flat samples */
        CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, a, (size_t)depth, 1, NULL), RBPEEK_OK);
    char path[512];
    tmp_path(path, sizeof path, "pprof", "labels.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int i = 0; i < N; i++) {
        const Perftools__Profiles__Function *f = function_named(p, labels[i], "app.rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_STRING_EQUAL(pprof_str(p, f->system_name), "");
    }
    const Perftools__Profiles__Function *sym = function_named(p, a[N].symbol, "");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sym);
    CU_ASSERT_EQUAL(sym->system_name, sym->name);
    perftools__profiles__profile__free_unpacked(p, NULL);

    /* What pprof's own display shows: every label on a line of its own. */
    if (system("command -v go >/dev/null 2>&1") != 0) {
        fprintf(stderr, "(go is not installed: pprof's display not checked)\n");
    } else {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "HOME=${HOME:-/tmp} go tool pprof -top -sample_index=samples '%s' 2>&1", path);
        FILE *f = popen(cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        char line[512];
        int seen[N] = {0};
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = '\0';
            for (int i = 0; i < N; i++) {
                size_t ll = strlen(line), n = strlen(labels[i]);
                if (ll > n && strcmp(line + ll - n, labels[i]) == 0 && line[ll - n - 1] == ' ') seen[i] = 1;
            }
        }
        CU_ASSERT_EQUAL(pclose(f), 0);
        for (int i = 0; i < N; i++) {
            if (!seen[i]) fprintf(stderr, "go tool pprof -top does not show %s whole\n", labels[i]);
            CU_ASSERT_TRUE(seen[i]);
        }
    }
    unlink(path);
    rbpeek_profile_free(pr);
}

/* A deep recursion and many stacks: every sample decodes back. */
static void test_large(void)
{
    enum { DEPTH = 3000, STACKS = 2000 };
    rbpeek_profile *pr = rbpeek_profile_new();
    static rbp_frame_desc frames[DEPTH];
    for (int i = 0; i < DEPTH; i++) frames[i] = (rbp_frame_desc)RB("fib", "r.rb", 1 + i % 7);
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, frames, DEPTH, 2, NULL), RBPEEK_OK);
    char leaf[64];
    for (int i = 0; i < STACKS; i++) {
        snprintf(leaf, sizeof leaf, "m%d", i);
        const rbp_frame_desc st[] = {RB("<main>", "m.rb", 1), RB(leaf, "m.rb", 10 + i)};
        CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, st, 2, 1, NULL), RBPEEK_OK);
    }
    char path[512];
    tmp_path(path, sizeof path, "pprof", "large.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_sample, STACKS + 1);
    int64_t total = 0;
    size_t deepest = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        total += p->sample[i]->value[0];
        if (p->sample[i]->n_location_id > deepest) deepest = p->sample[i]->n_location_id;
    }
    CU_ASSERT_EQUAL(total, STACKS + 2);
    CU_ASSERT_EQUAL(deepest, DEPTH);
    const Perftools__Profiles__Function *fib = function_named(p, "fib", "r.rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fib);
    CU_ASSERT_EQUAL(fib->start_line, 1);
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

/* Counts near 2^64 (a folded file can hold any): pprof's values are
 * int64, so a count past INT64_MAX and a count times the period past it are
 * written as INT64_MAX. The product used to be computed in int64 (undefined
 * behaviour; UBSan stops on it, a plain build wrapped it negative). */
static void test_huge_counts(void)
{
    rbpeek_profile *pr = rbpeek_profile_new();
    const rbp_frame_desc a[] = {RB("<main>", "big.rb", 1), RB("huge", "big.rb", 2)};
    const rbp_frame_desc b[] = {RB("<main>", "big.rb", 1), RB("small", "big.rb", 3)};
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, a, 2, UINT64_MAX - 1, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 2, 1, NULL), RBPEEK_OK);
    char path[512];
    tmp_path(path, sizeof path, "pprof", "huge.pb.gz");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, NULL), RBPEEK_OK);
    Prof *p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const Perftools__Profiles__Sample *s = find_sample(p, "<main>@big.rb:1;huge@big.rb:2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->value[0], INT64_MAX);
    CU_ASSERT_EQUAL(s->value[1], INT64_MAX);
    s = find_sample(p, "<main>@big.rb:1;small@big.rb:3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->value[0], 1);
    CU_ASSERT_EQUAL(s->value[1], 10000000);
    perftools__profiles__profile__free_unpacked(p, NULL);
    rbpeek_profile_free(pr);

    /* A count that fits int64 but whose time does not, at the largest period
     * accepted: the time saturates, the count is exact. */
    pr = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbp_profile_add_frames(pr, b, 2, 3, NULL), RBPEEK_OK);
    rbpeek_pprof_options o = {.period_ns = (uint64_t)INT64_MAX / 2};
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_pprof(pr, path, &o), RBPEEK_OK);
    p = read_pprof(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    s = find_sample(p, "<main>@big.rb:1;small@big.rb:3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->value[0], 3);
    CU_ASSERT_EQUAL(s->value[1], INT64_MAX);
    perftools__profiles__profile__free_unpacked(p, NULL);
    unlink(path);
    rbpeek_profile_free(pr);
}

static const rbp_cu_test tests[] = {
    {"round trip: types, period, stacks, functions, locations", test_round_trip},
    {"on-CPU, defaults, empty profile, errors", test_on_cpu_defaults_and_empty},
    {"start lines noted by the sampler", test_noted_start_lines},
    {"names alone stay whole", test_names_stay_whole},
    {"Ruby labels whole in go tool pprof's display", test_labels_whole_in_pprof},
    {"a frame at line 0 keeps its file", test_line_zero},
    {"deep and wide profile", test_large},
    {"counts past int64 saturate", test_huge_counts},
    {NULL, NULL},
};

RBP_CU_MAIN("pprof", tests)

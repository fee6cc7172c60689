/*
 * Tests of the profile aggregator (profile/) and, through the public API,
 * of its text writers (output/folded.c, speedscope.c, top.c, writer.c):
 * stack merging and counts, the top-N table (self and total, recursion
 * counted once per stack), folded stacks (exact output, sanitising, write -> read -> write round
 * trip, malformed input), meta, speedscope JSON (parsed by Python's json
 * module and checked for the schema's structure), and a large profile
 * (10,000 distinct stacks and a 5,000-deep recursion).
 */
#define _GNU_SOURCE   /* strsep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "rbpeek.h"

#include "output/writer.h"
#include "profile/profile.h"

static void add(rbpeek_profile *p, const char *stack, uint64_t count)
{
    /* stack is "a;b;c" */
    char buf[4096];
    const char *frames[256];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", stack);
    for (char *s = buf, *tok; (tok = strsep(&s, ";")) != NULL && n < 256;) frames[n++] = tok;
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, frames, n, count), RBPEEK_OK);
}

static char *folded_of(const rbpeek_profile *p, const char *name)
{
    char path[512];
    tmp_path(path, sizeof path, "profile", name);
    CU_ASSERT_EQUAL(rbpeek_profile_write_folded(p, path), RBPEEK_OK);
    char *text = slurp(path, NULL);
    remove(path);
    return text;
}

static void test_merge_counts(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 0);
    add(p, "main;foo;bar", 1);
    add(p, "main;foo;bar", 2);
    add(p, "main;foo", 4);
    add(p, "main;baz", 1);
    add(p, "other", 10);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 18);
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), 4);
    /* Sorted by name at each level; a stack ending inside another (main;foo)
     * is its own line. */
    char *text = folded_of(p, "merge.folded");
    CU_ASSERT_STRING_EQUAL(text, "main;baz 1\nmain;foo 4\nmain;foo;bar 3\nother 10\n");
    free(text);
    /* count 0 adds nothing and no stack. */
    const char *f1[] = {"never"};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, f1, 1, 0), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 18);
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), 4);
    rbpeek_profile_free(p);
}

static void test_add_errors(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    const char *ok[] = {"a"};
    const char *withnull[] = {"a", NULL};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, ok, 0, 1), RBPEEK_ERR_ARG);
    CU_ASSERT_STRING_EQUAL(rbpeek_profile_error(p), "add_stack: empty stack");
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, NULL, 1, 1), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, withnull, 2, 1), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(NULL, ok, 1, 1), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, ok, 1, UINT64_MAX), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, ok, 1, 1), RBPEEK_ERR_ARG);   /* overflow */
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), UINT64_MAX);
    /* The failed add of a,NULL left a zero-count node; writers skip it. */
    char *text = folded_of(p, "errors.folded");
    CU_ASSERT_STRING_EQUAL(text, "a 18446744073709551615\n");
    free(text);
    CU_ASSERT_EQUAL(rbpeek_profile_total(NULL), 0);
    CU_ASSERT_STRING_EQUAL(rbpeek_profile_error(NULL), "");
    rbpeek_profile_free(NULL);
    rbpeek_profile_free(p);
}

/* Finds the row for frame in a top table; returns its sample count or -1. */
static long long top_row(const char *table, const char *frame)
{
    const char *line = strchr(table, '\n');   /* skip the heading */
    if (line) line = strchr(line + 1, '\n');  /* and the column names */
    while (line && *++line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        /* sscanf on a copy of the row: on the whole table it would strlen
         * the rest of the table for every row. */
        char row[1024];
        if (len < sizeof row) {
            memcpy(row, line, len);
            row[len] = '\0';
            unsigned long long v;
            char pct[32];
            int off = 0;
            if (sscanf(row, "%llu %31s %n", &v, pct, &off) == 2 && off > 0 &&
                strcmp(row + off, frame) == 0)
                return (long long)v;
        }
        line = end;
    }
    return -1;
}

static void test_top(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add(p, "a;b;a;b", 3);   /* recursion: a and b twice on one stack */
    add(p, "a;c", 1);
    add(p, "a", 2);
    add(p, "x;c;c;c", 4);
    char *t = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 1, 0, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(top_row(t, "b"), 3);
    CU_ASSERT_EQUAL(top_row(t, "a"), 2);
    CU_ASSERT_EQUAL(top_row(t, "c"), 5);
    CU_ASSERT_EQUAL(top_row(t, "x"), -1);   /* never a leaf */
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "Top 3 frames by self samples (10 samples in all)"));
    /* Highest first: c (5) then b (3) then a (2). */
    CU_ASSERT_TRUE(strstr(t, "  c\n") < strstr(t, "  b\n"));
    CU_ASSERT_TRUE(strstr(t, "  b\n") < strstr(t, "  a\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "         5   50.00%  c\n"));
    free(t);

    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 0, 0, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(top_row(t, "a"), 6);   /* 3 + 1 + 2, recursion once */
    CU_ASSERT_EQUAL(top_row(t, "b"), 3);
    CU_ASSERT_EQUAL(top_row(t, "c"), 5);   /* 1 + 4, c;c;c once */
    CU_ASSERT_EQUAL(top_row(t, "x"), 4);
    free(t);

    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 0, 2, &t), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "Top 2 frames by total samples"));
    CU_ASSERT_EQUAL(top_row(t, "a"), 6);
    CU_ASSERT_EQUAL(top_row(t, "c"), 5);
    CU_ASSERT_EQUAL(top_row(t, "x"), -1);
    free(t);
    CU_ASSERT_EQUAL(rbpeek_profile_top(p, 0, 2, NULL), RBPEEK_ERR_ARG);
    rbpeek_profile_free(p);

    /* A name with a newline stays on one row. */
    p = rbpeek_profile_new();
    add(p, "bad\nname", 1);
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 1, 5, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(top_row(t, "bad?name"), 1);
    free(t);
    rbpeek_profile_free(p);
}

static const rbpeek_frame_count *count_row(const rbpeek_frame_count *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

/* rbpeek top's counts: by frame they are the top-N table's; by method a
 * method's lines are one row, and a method on a stack at two lines (its
 * recursion) counts that stack once. */
static void test_frame_counts(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_frame_desc main_ = {.kind = RBP_PF_RUBY, .label = "<main>", .path = "app.rb", .line = 1};
    rbp_frame_desc run9 = {.kind = RBP_PF_RUBY, .label = "run", .path = "app.rb", .line = 9};
    rbp_frame_desc run12 = {.kind = RBP_PF_RUBY, .label = "run", .path = "app.rb", .line = 12};
    rbp_frame_desc sleep_ = {.kind = RBP_PF_CFUNC, .label = "Kernel#sleep", .path = "app.rb", .line = 12};
    rbp_frame_desc thread = {.kind = RBP_PF_THREAD, .label = "Thread \"w\" (tid 7)"};
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, (rbp_frame_desc[]){main_, run9}, 2, 3, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, (rbp_frame_desc[]){main_, run9, run12}, 3, 2, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, (rbp_frame_desc[]){thread, run12, sleep_}, 3, 5, NULL), RBPEEK_OK);

    rbpeek_frame_count *rows = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_frame_counts(p, 0, &rows, &n), RBPEEK_OK);
    CU_ASSERT_EQUAL(n, 5);
    const rbpeek_frame_count *r = count_row(rows, n, "run (app.rb:9)");
    CU_ASSERT_TRUE(r && r->self == 3 && r->total == 5);
    r = count_row(rows, n, "run (app.rb:12)");
    CU_ASSERT_TRUE(r && r->self == 2 && r->total == 7);
    r = count_row(rows, n, "Kernel#sleep (app.rb:12)");
    CU_ASSERT_TRUE(r && r->self == 5 && r->total == 5);
    r = count_row(rows, n, "<main> (app.rb:1)");
    CU_ASSERT_TRUE(r && r->self == 0 && r->total == 5);
    for (size_t i = 1; i < n; i++) CU_ASSERT_TRUE(strcmp(rows[i - 1].name, rows[i].name) < 0);
    rbpeek_free(rows);

    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_frame_counts(p, 1, &rows, &n), RBPEEK_OK);
    CU_ASSERT_EQUAL(n, 4);
    r = count_row(rows, n, "run (app.rb)");
    CU_ASSERT_TRUE(r && r->self == 5 && r->total == 10);   /* 3 + 2 + 5: the 9;12 stack once */
    r = count_row(rows, n, "Kernel#sleep (app.rb)");
    CU_ASSERT_TRUE(r && r->self == 5 && r->total == 5);
    r = count_row(rows, n, "Thread \"w\" (tid 7)");   /* the profile's own kinds keep their name */
    CU_ASSERT_TRUE(r && r->self == 0 && r->total == 5);
    CU_ASSERT_PTR_NOT_NULL(count_row(rows, n, "<main> (app.rb)"));
    rbpeek_free(rows);

    CU_ASSERT_EQUAL(rbpeek_profile_frame_counts(p, 1, NULL, &n), RBPEEK_ERR_ARG);
    rbpeek_profile_free(p);

    /* An empty profile has no rows. */
    p = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_frame_counts(p, 1, &rows, &n), RBPEEK_OK);
    CU_ASSERT_EQUAL(n, 0);
    rbpeek_free(rows);
    rbpeek_profile_free(p);
}

static void test_folded_sanitise(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    const char *frames[] = {"main (a.rb:1)", "x;y", "two\nlines\r\n", "with spaces  "};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, frames, 4, 7), RBPEEK_OK);
    char *text = folded_of(p, "sanitise.folded");
    CU_ASSERT_STRING_EQUAL(text, "main (a.rb:1);x:y;two lines  ;with spaces   7\n");
    free(text);
    rbpeek_profile_free(p);
}

static void test_folded_round_trip(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add(p, "<main> (app.rb:1);block (2 levels) in run (app.rb:9);Integer#times", 5);
    add(p, "<main> (app.rb:1);IO#read", 2);
    add(p, "<main> (app.rb:1);IO#read", 1);
    add(p, "<main> (app.rb:1);caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC (x.rb:3)", 4);
    add(p, "thread 2;sleep", 9);
    add(p, "a;;b", 1);   /* an empty frame name survives too */
    rbpeek_profile_set_meta(p, "pid", "42");
    char a[512], b[512];
    tmp_path(a, sizeof a, "profile", "rt-a.folded");
    tmp_path(b, sizeof b, "profile", "rt-b.folded");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(p, a), RBPEEK_OK);
    rbpeek_profile *q = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_read_folded(q, a), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_skipped_lines(q), 0);
    CU_ASSERT_EQUAL(rbpeek_profile_total(q), rbpeek_profile_total(p));
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(q), rbpeek_profile_stack_count(p));
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(q, b), RBPEEK_OK);
    char *ta = slurp(a, NULL), *tb = slurp(b, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT_STRING_EQUAL(ta, tb);
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "<main> (app.rb:1);IO#read 3\n"));
    /* Reading the same file again doubles every count. */
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(q, a), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(q), 2 * rbpeek_profile_total(p));
    free(ta);
    free(tb);
    remove(a);
    remove(b);
    rbpeek_profile_free(p);
    rbpeek_profile_free(q);
}

/* Write p, read it back, write that: the same bytes, totals and stacks.
 * Returns the text written. */
static char *round_trip(const rbpeek_profile *p, const char *name)
{
    char a[512], b[512];
    snprintf(b, sizeof b, "%s-again", name);
    tmp_path(a, sizeof a, "profile", name);
    char *tb = folded_of(p, b);
    rbpeek_profile *q = rbpeek_profile_new();
    spit(a, tb);
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(q, a), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_skipped_lines(q), 0);
    CU_ASSERT_EQUAL(rbpeek_profile_total(q), rbpeek_profile_total(p));
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(q), rbpeek_profile_stack_count(p));
    char *tq = folded_of(q, b);
    CU_ASSERT_STRING_EQUAL(tq, tb);
    free(tq);
    remove(a);
    rbpeek_profile_free(q);
    return tb;
}

/* What the reader used to take from the writer's output (issue 24): a
 * first frame that begins with U+FEFF lost it as a byte order mark; a
 * stack of one frame with an empty name was an "empty stack" line,
 * skipped, and a file of nothing else was refused as corrupt. */
static void test_folded_round_trip_edges(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add(p, "\xEF\xBB\xBF" "main;work", 3);
    add(p, "\xEF\xBB\xBF" "main", 1);
    add(p, "\xEF\xBB\xBF", 2);   /* a name of U+FEFF alone */
    char *t = round_trip(p, "bom.folded");
    /* One mark for the file, then the name's own. */
    CU_ASSERT_STRING_EQUAL(t, "\xEF\xBB\xBF\xEF\xBB\xBF 2\n\xEF\xBB\xBF" "main 1\n\xEF\xBB\xBF" "main;work 3\n");
    free(t);
    rbpeek_profile_free(p);

    /* U+FEFF in a first frame that is not on the first line: no mark. */
    p = rbpeek_profile_new();
    add(p, "a;b", 1);
    add(p, "\xEF\xBB\xBF" "z", 1);
    t = round_trip(p, "bom-later.folded");
    CU_ASSERT_STRING_EQUAL(t, "a;b 1\n\xEF\xBB\xBF" "z 1\n");
    free(t);
    rbpeek_profile_free(p);

    p = rbpeek_profile_new();
    add(p, "", 5);
    t = round_trip(p, "empty-only.folded");
    CU_ASSERT_STRING_EQUAL(t, " 5\n");
    free(t);
    add(p, ";", 1);
    add(p, "main;", 2);
    add(p, ";main", 4);
    t = round_trip(p, "empty-names.folded");
    CU_ASSERT_STRING_EQUAL(t, " 5\n; 1\n;main 4\nmain; 2\n");
    free(t);
    rbpeek_profile_free(p);
}

static void test_read_folded_robust(void)
{
    char path[512];
    tmp_path(path, sizeof path, "profile", "robust.folded");
    spit(path, "\xEF\xBB\xBF"                         /* BOM */
               "main;foo bar (a b.rb:3) 5\n"         /* spaces in a frame */
               "main;foo bar (a b.rb:3) 2\r\n"       /* CRLF */
               "\n   \n"                             /* blank lines: ignored */
               "no count here\n"                     /* malformed */
               "main;x 12abc\n"                      /* malformed */
               " 7\n"                                /* one frame, its name empty */
               "main;y 99999999999999999999999\n"    /* overflows */
               "main;z\t3\n"                         /* tab separator */
               "main;w 0\n"                          /* zero: valid, adds nothing */
               "main;last 1");                       /* no final newline */
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_read_folded(p, path), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 18);
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), 4);
    CU_ASSERT_EQUAL(rbpeek_profile_skipped_lines(p), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "skipped 3 malformed lines"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "line 5"));
    char *text = folded_of(p, "robust-out.folded");
    CU_ASSERT_STRING_EQUAL(text, " 7\nmain;foo bar (a b.rb:3) 7\nmain;last 1\nmain;z 3\n");
    free(text);
    rbpeek_profile_free(p);

    /* Nothing valid at all: an error naming the first bad line. */
    spit(path, "hello world\nthis is not folded\n");
    p = rbpeek_profile_new();
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(p, path), RBPEEK_ERR_CORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "line 1: sample count is not a whole number"));
    rbpeek_profile_free(p);

    /* Binary garbage with NUL bytes. */
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 4096; i++) fputc((i * 7919) & 0xFF, f);
    fclose(f);
    p = rbpeek_profile_new();
    rbpeek_status st = rbpeek_profile_read_folded(p, path);
    CU_ASSERT_TRUE(st == RBPEEK_OK || st == RBPEEK_ERR_CORRUPT);
    rbpeek_profile_free(p);

    /* Empty file: fine, no samples. */
    spit(path, "");
    p = rbpeek_profile_new();
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(p, path), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 0);
    remove(path);
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(p, path), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "cannot read"));
    CU_ASSERT_EQUAL(rbpeek_profile_read_folded(p, NULL), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_write_folded(p, "/nonexistent-dir/x.folded"), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "cannot write /nonexistent-dir/x.folded"));
    rbpeek_profile_free(p);
}

static void test_meta(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    CU_ASSERT_PTR_NULL(rbpeek_profile_meta(p, "pid"));
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, "pid", "1"), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, "rate_hz", "99"), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, "pid", "1234"), RBPEEK_OK);
    CU_ASSERT_STRING_EQUAL(rbpeek_profile_meta(p, "pid"), "1234");
    CU_ASSERT_STRING_EQUAL(rbpeek_profile_meta(p, "rate_hz"), "99");
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, NULL, "x"), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, "", "x"), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_set_meta(p, "k", NULL), RBPEEK_ERR_ARG);
    rbpeek_profile_free(p);
}

/* Runs a Python check on a file; returns its exit status (0 = all good). */
static int python_check(const char *script_name, const char *script, const char *arg)
{
    char sp[512], cmd[1200];
    tmp_path(sp, sizeof sp, "profile", script_name);
    spit(sp, script);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", sp, arg);
    int rc = system(cmd);
    remove(sp);
    return rc;
}

static const char SPEEDSCOPE_CHECK[] =
    "import json, sys\n"
    "d = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))\n"
    "assert d['$schema'] == 'https://www.speedscope.app/file-format-schema.json'\n"
    "frames = d['shared']['frames']\n"
    "assert len(d['profiles']) == 1\n"
    "p = d['profiles'][0]\n"
    "assert p['type'] == 'sampled' and p['unit'] == 'none' and p['startValue'] == 0\n"
    "assert len(p['samples']) == len(p['weights'])\n"
    "assert p['endValue'] == sum(p['weights'])\n"
    "for s in p['samples']:\n"
    "    assert s and all(isinstance(i, int) and 0 <= i < len(frames) for i in s)\n"
    "for f in frames:\n"
    "    assert isinstance(f['name'], str)\n"
    "    assert set(f) <= {'name', 'file', 'line'}\n"
    "byname = {f['name']: f for f in frames}\n"
    "stacks = {tuple(frames[i]['name'] for i in s): w for s, w in zip(p['samples'], p['weights'])}\n"
    "if len(sys.argv) > 2: sys.exit(0)\n"
    "assert byname['foo'] == {'name': 'foo', 'file': 'a.rb', 'line': 3}, byname['foo']\n"
    "b = byname['block (2 levels) in run']\n"
    "assert b['file'] == 'lib/x y.rb' and b['line'] == 12, b\n"
    "assert 'file' not in byname['Integer#times']\n"
    "assert 'file' not in byname['odd (no line)']\n"
    "assert byname['<main>']['file'] == '/app/main.rb'\n"
    "q = 'q\"uote\\\\back\\x01ctl\\ttab \\ufffd'\n"
    "assert q in byname, sorted(byname)\n"
    "assert stacks[('<main>', 'foo', 'Integer#times')] == 5, stacks\n"
    "assert stacks[('<main>', 'foo')] == 2\n"
    "assert stacks[('<main>', 'block (2 levels) in run', q)] == 1\n"
    "assert p['endValue'] == 9 and p['name'] == 'my profile'\n"
    "raw = open(sys.argv[1], 'rb').read()\n"
    "assert b'\\\\u0001' in raw and b'\\\\t' in raw and b'\\\\ufffd' in raw\n";

static void test_speedscope(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    /* Frames as the sampler gives them: the writer shows their parts. */
    const rbp_frame_desc mainf = {.kind = RBP_PF_RUBY, .label = "<main>", .path = "/app/main.rb", .line = 1},
                         foo = {.kind = RBP_PF_RUBY, .label = "foo", .path = "a.rb", .line = 3},
                         times = {.kind = RBP_PF_CFUNC, .label = "Integer#times"},
                         blk = {.kind = RBP_PF_RUBY, .label = "block (2 levels) in run", .path = "lib/x y.rb",
                                .line = 12},
                         odd = {.kind = RBP_PF_NAMED, .label = "q\"uote\\back\x01" "ctl\ttab \xFF"};
    const rbp_frame_desc s1[] = {mainf, foo, times}, s2[] = {mainf, blk, odd};
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, s1, 3, 5, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, s1, 2, 2, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_profile_add_frames(p, s2, 3, 1, NULL), RBPEEK_OK);
    add(p, "odd (no line)", 1);
    rbpeek_profile_set_meta(p, "title", "my profile");
    char path[512];
    tmp_path(path, sizeof path, "profile", "profile.speedscope.json");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_speedscope(p, path), RBPEEK_OK);
    int rc = python_check("check_speedscope.py", SPEEDSCOPE_CHECK, path);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0) {
        char *text = slurp(path, NULL);
        fprintf(stderr, "speedscope output:\n%s\n", text ? text : "(unreadable)");
        free(text);
    }
    remove(path);
    rbpeek_profile_free(p);

    /* An empty profile is still a valid file. */
    p = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_speedscope(p, path), RBPEEK_OK);
    char arg[600];
    snprintf(arg, sizeof arg, "%s' 'structure-only", path);
    CU_ASSERT_EQUAL(python_check("check_speedscope.py", SPEEDSCOPE_CHECK, arg), 0);
    remove(path);
    rbpeek_profile_free(p);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_large(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    enum { NSTACKS = 10000, DEPTH = 50, DEEP = 5000 };
    static char names[DEPTH][64];
    const char *frames[DEEP];
    double t0 = now();
    /* 10,000 distinct stacks of depth 50: a shared trunk that fans out. */
    for (int i = 0; i < NSTACKS; i++) {
        for (int d = 0; d < DEPTH; d++) {
            int v = d < 10 ? d : d < 20 ? (i % 7) * 100 + d : d < 35 ? (i % 97) * 1000 + d : i * 100 + d;
            snprintf(names[d], sizeof names[d], "method_%d (file_%d.rb:%d)", v, d % 13, d);
            frames[d] = names[d];
        }
        CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(p, frames, DEPTH, 1 + i % 3), RBPEEK_OK);
    }
    /* One 5,000-deep recursion, sampled twice. */
    frames[0] = "<main> (r.rb:1)";
    for (int d = 1; d < DEEP; d++) frames[d] = "recurse (r.rb:5)";
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(p, frames, DEEP, 2), RBPEEK_OK);
    double t1 = now();
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), NSTACKS + 1);
    uint64_t expect = 2;
    for (int i = 0; i < NSTACKS; i++) expect += 1 + i % 3;
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), expect);

    char *t = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_top(p, 0, 0, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(top_row(t, "recurse (r.rb:5)"), 2);   /* 4,999 times on one stack: once */
    CU_ASSERT_EQUAL(top_row(t, "method_0 (file_0.rb:0)"), (long long)(expect - 2));
    free(t);

    char a[512], b[512], s[512];
    tmp_path(a, sizeof a, "profile", "large-a.folded");
    tmp_path(b, sizeof b, "profile", "large-b.folded");
    tmp_path(s, sizeof s, "profile", "large.speedscope.json");
    double t2 = now();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(p, a), RBPEEK_OK);
    double t2b = now();
    rbpeek_profile *q = rbpeek_profile_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_read_folded(q, a), RBPEEK_OK);
    double t3 = now();
    t2 = t2b - t2;
    CU_ASSERT_EQUAL(rbpeek_profile_total(q), expect);
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(q, b), RBPEEK_OK);
    size_t la = 0, lb = 0;
    char *ta = slurp(a, &la), *tb = slurp(b, &lb);
    CU_ASSERT_TRUE(ta && tb && la == lb && memcmp(ta, tb, la) == 0);
    free(ta);
    free(tb);
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_speedscope(p, s), RBPEEK_OK);
    char arg[600];
    snprintf(arg, sizeof arg, "%s' 'structure-only", s);
    CU_ASSERT_EQUAL(python_check("check_large.py", SPEEDSCOPE_CHECK, arg), 0);
    printf("\n    [large: add %.3fs, write folded %.3fs, read folded %.3fs]\n", t1 - t0, t2,
           t3 - t2b);
    remove(a);
    remove(b);
    remove(s);
    rbpeek_profile_free(p);
    rbpeek_profile_free(q);
}

static void test_fmt_fixed(void)
{
    char buf[32];
    rbp_fmt_fixed(buf, sizeof buf, 12.345, 2);
    CU_ASSERT_STRING_EQUAL(buf, "12.35");   /* rounded, and always a '.' */
    rbp_fmt_fixed(buf, sizeof buf, 0.04, 1);
    CU_ASSERT_STRING_EQUAL(buf, "0.0");
    rbp_fmt_fixed(buf, sizeof buf, -3.25, 1);
    CU_ASSERT_STRING_EQUAL(buf, "-3.3");
    rbp_fmt_fixed(buf, sizeof buf, 100, 0);
    CU_ASSERT_STRING_EQUAL(buf, "100");
    rbp_fmt_fixed(buf, sizeof buf, 0.0 / 0.0, 1);
    CU_ASSERT_STRING_EQUAL(buf, "0.0");
    CU_ASSERT_EQUAL(rbp_utf8_length("caf\xC3\xA9"), 4);
    CU_ASSERT_EQUAL(rbp_utf8_length("\xFF\xFE" "a"), 3);
}

static const rbp_cu_test tests[] = {
    {"merge and counts", test_merge_counts},
    {"add_stack errors", test_add_errors},
    {"top-N self and total with recursion", test_top},
    {"frame counts by frame and by method", test_frame_counts},
    {"folded sanitising", test_folded_sanitise},
    {"folded round trip", test_folded_round_trip},
    {"folded round trip: U+FEFF and empty names", test_folded_round_trip_edges},
    {"read_folded robustness", test_read_folded_robust},
    {"meta", test_meta},
    {"speedscope JSON", test_speedscope},
    {"10k stacks and 5000-deep recursion", test_large},
    {"fixed-point formatting", test_fmt_fixed},
    {NULL, NULL},
};

RBP_CU_MAIN("profile", tests)

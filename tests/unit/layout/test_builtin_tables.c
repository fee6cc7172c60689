/*
 * The built-in tables, one per CRuby release 2.7.0 to 4.0.6 (x86-64's),
 * and aarch64's of the 3.1 line, made from public facts by
 * tools/rbpeek-factsgen.py:
 *
 *   - every release of those lines has a table, and each parses and names
 *     its own version;
 *   - each is internally consistent: members lie inside their struct where
 *     the table knows the struct's size, bitfields inside their word, and a
 *     table's alternative placements are for members it has;
 *   - for the four releases we build here, every member the table takes
 *     from the facts equals the one our DWARF gives (layouts/dwarf/), or,
 *     for a member whose place depends on the configuration (an `alt` line),
 *     one of its two placements does. The facts come from one build of
 *     each release and DWARF from another: this is what says the facts
 *     describe the releases as they are built. The same holds of aarch64's
 *     table of 3.1.2 against the DWARF of our arm64 build of it
 *     (layouts/dwarf/aarch64/): what says the facts with aarch64's glibc
 *     types describe aarch64.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "layout/layout.h"

/* The releases of each line, as published (ruby-lang.org's release list);
 * the generator makes one table per facts file, so a missing table means a
 * missing facts file or a generator that skipped one. */
static const struct {
    const char *line;
    int last_patch;
} LINES[] = {{"2.7", 8}, {"3.0", 7}, {"3.1", 7}, {"3.2", 11}, {"3.3", 12}, {"3.4", 10}, {"4.0", 6}};

static void test_every_release_has_a_table(void)
{
    size_t want = 0;
    for (size_t i = 0; i < sizeof LINES / sizeof LINES[0]; i++)
        for (int p = 0; p <= LINES[i].last_patch; p++) {
            char v[16];
            snprintf(v, sizeof v, "%s.%d", LINES[i].line, p);
            bool exact = false;
            long idx = rbp_builtin_layout_find(v, RBP_MACHINE_DEFAULT, &exact);
            if (idx < 0 || !exact) fprintf(stderr, "no built-in table for Ruby %s\n", v);
            CU_ASSERT(idx >= 0 && exact);
            want++;
        }
    /* and aarch64's tables, of the 3.1 line */
    for (int p = 0; p <= 7; p++) {
        char v[16];
        snprintf(v, sizeof v, "3.1.%d", p);
        bool exact = false;
        long idx = rbp_builtin_layout_find(v, EM_AARCH64, &exact);
        CU_ASSERT(idx >= 0 && exact);
        want++;
    }
    CU_ASSERT_EQUAL(rbp_builtin_layout_count(), want);
}

/* The size a table gives type (an RBP_SIZE member of that type), or -1. */
static int32_t type_size(const rbp_layout *l, const char *type)
{
    for (int i = 0; i < RBP_L_COUNT; i++)
        if (rbp_field_is_size((rbp_field_id)i) && rbp_has(l, (rbp_field_id)i) &&
            strcmp(rbp_field_type((rbp_field_id)i), type) == 0)
            return l->f[i].size;
    return -1;
}

static int consistency_problems(const rbp_layout *l, const char *ver)
{
    int bad = 0;
    for (int i = 0; i < RBP_L_COUNT; i++) {
        rbp_field_id id = (rbp_field_id)i;
        const rbp_field *f = &l->f[i];
        if (!rbp_has(l, id) || rbp_field_is_size(id)) continue;
        int32_t whole = type_size(l, rbp_field_type(id));
        int32_t end = f->offset + (f->bit_size ? (f->bit_offset + f->bit_size + 7) / 8 : f->size);
        if (whole >= 0 && end > whole) {
            fprintf(stderr, "%s: %s ends at %d, past sizeof(%s) = %d\n", ver, rbp_field_name(id), end,
                    rbp_field_type(id), whole);
            bad++;
        }
        if (f->bit_size && (f->size <= 0 || f->bit_offset + f->bit_size > f->size * 8 + 7)) {
            fprintf(stderr, "%s: bitfield %s does not fit its %d-byte word\n", ver, rbp_field_name(id), f->size);
            bad++;
        }
    }
    for (int a = 0; a < l->nalt; a++)
        if (!rbp_has(l, l->alt[a].id)) {
            fprintf(stderr, "%s: an alternative for %s, which the table lacks\n", ver, rbp_field_name(l->alt[a].id));
            bad++;
        }
    return bad;
}

static void test_tables_parse_and_are_consistent(void)
{
    for (size_t i = 0; i < rbp_builtin_layout_count(); i++) {
        const char *ver = rbp_builtin_layout_version(i);
        rbp_layout l;
        char err[256];
        CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, rbp_builtin_layout_text(i), err, sizeof err), 0);
        CU_ASSERT_STRING_EQUAL(l.ruby_version, ver);
        CU_ASSERT_EQUAL(l.machine, rbp_builtin_layout_machine(i));
        /* Two groups: the release's facts, then its line's supplement. */
        CU_ASSERT(l.nsources == 3 && strncmp(l.sources[1], "facts ", 6) == 0 && strncmp(l.sources[2], "line ", 5) == 0);
        CU_ASSERT_EQUAL(consistency_problems(&l, ver), 0);
    }
}

static bool same_field(const rbp_field *a, const rbp_field *b)
{
    return a->offset == b->offset && a->size == b->size && a->bit_offset == b->bit_offset &&
           a->bit_size == b->bit_size;
}

static void test_facts_equal_dwarf(void)
{
    static const struct {
        const char *version, *dir;
        uint16_t machine;
    } BUILT[] = {{"2.7.4", "", EM_X86_64}, {"3.1.2", "", EM_X86_64}, {"3.3.8", "", EM_X86_64},
                 {"3.4.5", "", EM_X86_64}, {"3.1.2", "aarch64/", EM_AARCH64}};
    const char *src = getenv("RBPEEK_SOURCE_DIR"); /* set by ctest */
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    for (size_t b = 0; b < sizeof BUILT / sizeof BUILT[0]; b++) {
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/layouts/dwarf/%s%s.layout", src, BUILT[b].dir, BUILT[b].version);
        char *text = slurp(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        rbp_layout dwarf, facts;
        CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&dwarf, text, err, sizeof err), 0);
        free(text);
        CU_ASSERT_EQUAL(dwarf.machine, BUILT[b].machine);
        bool exact = false;
        long idx = rbp_builtin_layout_find(BUILT[b].version, BUILT[b].machine, &exact);
        CU_ASSERT_FATAL(idx >= 0 && exact);
        CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&facts, rbp_builtin_layout_text((size_t)idx), err, sizeof err), 0);
        int compared = 0, differ = 0;
        for (int i = 0; i < RBP_L_COUNT; i++) {
            if (facts.src[i] != 1) continue; /* the facts group only: the supplement is DWARF's own */
            const rbp_field *d = &dwarf.f[i], *f = &facts.f[i];
            bool ok = same_field(d, f);
            for (int a = 0; a < facts.nalt && !ok; a++)
                ok = facts.alt[a].id == (rbp_field_id)i && same_field(d, &facts.alt[a].f);
            if (!ok) {
                fprintf(stderr, "%s%s: %s is %d/%d in the facts, %d/%d in DWARF\n", BUILT[b].dir, BUILT[b].version,
                        rbp_field_name((rbp_field_id)i), f->offset, f->size, d->offset, d->size);
                differ++;
            }
            compared++;
        }
        CU_ASSERT(compared > 70);
        CU_ASSERT_EQUAL(differ, 0);
    }
}

static const rbp_cu_test TESTS[] = {
    {"every release 2.7.0-4.0.6 has a table, 3.1's an aarch64 one too", test_every_release_has_a_table},
    {"every table parses, names its version and is consistent", test_tables_parse_and_are_consistent},
    {"facts equal our DWARF on every member both give", test_facts_equal_dwarf},
    {NULL, NULL},
};

RBP_CU_MAIN("builtin_tables", TESTS)

/*
 * Tests of the SVG flamegraph writer (flamegraph.c): the document is
 * well-formed XML whatever the frame names hold (markup characters,
 * non-ASCII, invalid UTF-8, control characters), checked both by xmllint
 * (when installed; Debian package libxml2-utils) and by a small
 * well-formedness checker here, so the test means something without it.
 * Also: box geometry, the title facts from meta, the min-width cut-off,
 * stable colours, the inverted layout, an empty profile, and a large
 * profile (10,000 distinct stacks plus a 5,000-deep recursion).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "rbpeek.h"

#include "base/strbuf.h"
#include "output/writer.h"
#include "profile/profile.h"

/* One pass over hay: repeated strstr calls would be quadratic under ASan,
 * whose interceptor measures the rest of the string at every call (a 34 MB
 * SVG took over 25 minutes). */
static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0, nl = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (*p == needle[0] && strncmp(p, needle, nl) == 0) {
            n++;
            p += nl - 1;
        }
    return n;
}

/* ---------------------------------------------------------------------------
 * A small XML well-formedness checker: UTF-8 throughout, only XML 1.0
 * characters, balanced and properly nested tags, quoted attributes without
 * '<', known entities only, one root element. Returns NULL or a reason.
 * ------------------------------------------------------------------------- */

static const char *xml_entity_ok(const char *s, size_t len, size_t *i)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (size_t k = 0; k < 5; k++) {
        size_t nl = strlen(named[k]);
        if (len - *i >= nl && memcmp(s + *i, named[k], nl) == 0) {
            *i += nl;
            return NULL;
        }
    }
    size_t j = *i + 1;
    if (j < len && s[j] == '#') {
        j++;
        bool hex = j < len && s[j] == 'x';
        if (hex) j++;
        size_t start = j;
        while (j < len && (hex ? strchr("0123456789abcdefABCDEF", s[j]) != NULL
                               : (s[j] >= '0' && s[j] <= '9')) && s[j])
            j++;
        if (j > start && j < len && s[j] == ';') {
            *i = j + 1;
            return NULL;
        }
    }
    return "bad entity reference";
}

static bool xml_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == ':' || c == '.';
}

static const char *xml_check(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = rbp_utf8_seq_len(u + i, len - i);
        if (n == 0) return "invalid UTF-8";
        if (u[i] < 0x20 && u[i] != '\t' && u[i] != '\n' && u[i] != '\r') return "control char";
        if (n == 3 && u[i] == 0xEF && u[i + 1] == 0xBF && u[i + 2] >= 0xBE) return "U+FFFE/F";
        i += n;
    }
    const char *stack[4096];
    size_t slen[4096], sp = 0, roots = 0;
    for (size_t i = 0; i < len;) {
        if (s[i] == '&') {
            const char *e = xml_entity_ok(s, len, &i);
            if (e) return e;
            continue;
        }
        if (s[i] != '<') {
            if (sp == 0 && s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r')
                return "text outside the root element";
            i++;
            continue;
        }
        const char *rest = s + i;
        const char *end;
        if (strncmp(rest, "<?", 2) == 0) {
            if (!(end = strstr(rest, "?>"))) return "unterminated PI";
            i = (size_t)(end - s) + 2;
        } else if (strncmp(rest, "<!--", 4) == 0) {
            if (!(end = strstr(rest + 4, "-->"))) return "unterminated comment";
            i = (size_t)(end - s) + 3;
        } else if (strncmp(rest, "<![CDATA[", 9) == 0) {
            if (sp == 0) return "CDATA outside the root";
            if (!(end = strstr(rest, "]]>"))) return "unterminated CDATA";
            i = (size_t)(end - s) + 3;
        } else if (rest[1] == '/') {
            size_t j = i + 2, start = j;
            while (j < len && xml_name_char(s[j])) j++;
            if (sp == 0 || j - start != slen[sp - 1] || memcmp(s + start, stack[sp - 1], j - start))
                return "mismatched end tag";
            while (j < len && s[j] == ' ') j++;
            if (j >= len || s[j] != '>') return "bad end tag";
            sp--;
            i = j + 1;
        } else {
            size_t j = i + 1, start = j;
            while (j < len && xml_name_char(s[j])) j++;
            if (j == start) return "bad tag name";
            if (sp == 0 && roots++ > 0) return "more than one root element";
            const char *name = s + start;
            size_t nlen = j - start;
            for (;;) {
                while (j < len && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t')) j++;
                if (j >= len) return "unterminated tag";
                if (s[j] == '>' || (s[j] == '/' && j + 1 < len && s[j + 1] == '>')) break;
                size_t an = j;
                while (j < len && xml_name_char(s[j])) j++;
                if (j == an || j >= len || s[j] != '=') return "bad attribute";
                j++;
                if (j >= len || (s[j] != '"' && s[j] != '\'')) return "unquoted attribute";
                char q = s[j++];
                while (j < len && s[j] != q) {
                    if (s[j] == '<') return "'<' in attribute";
                    if (s[j] == '&') {
                        const char *e = xml_entity_ok(s, len, &j);
                        if (e) return e;
                        continue;
                    }
                    j++;
                }
                if (j >= len) return "unterminated attribute";
                j++;
            }
            if (s[j] == '/') {
                i = j + 2;
            } else {
                if (sp == 4096) return "too deep";
                stack[sp] = name;
                slen[sp++] = nlen;
                i = j + 1;
            }
        }
    }
    if (sp != 0) return "unclosed element";
    if (roots != 1) return "no root element";
    return NULL;
}

static bool have_xmllint(void)
{
    static int have = -1;
    if (have < 0) {
        have = system("command -v xmllint >/dev/null 2>&1") == 0;
        if (!have)
            fprintf(stderr, "\n    [xmllint not installed (apt-get install libxml2-utils); "
                            "using the built-in checker only]\n");
    }
    return have;
}

/* Asserts the file is well-formed by both checkers; returns its text. */
static char *check_wellformed(const char *path, size_t *len)
{
    char *text = slurp(path, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    const char *why = xml_check(text, *len);
    if (why) fprintf(stderr, "\n    %s: %s\n", path, why);
    CU_ASSERT_PTR_NULL(why);
    if (have_xmllint()) {
        char cmd[1100];
        snprintf(cmd, sizeof cmd, "xmllint --noout --huge '%s'", path);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    return text;
}

/* The checkers must reject broken documents, or passing them proves nothing. */
static void test_checker_rejects(void)
{
    static const char *const bad[] = {
        "<a>&</a>", "<a><b></a></b>", "<a x=1/>", "<a>\xff</a>", "<a>\x01</a>",
        "<a x=\"<\"/>", "<a></a><b/>", "<a>&nope;</a>", "<a>", "<a>\xEF\xBF\xBE</a>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_PTR_NOT_NULL(xml_check(bad[i], strlen(bad[i])));
        if (have_xmllint()) {
            char path[512], cmd[1100];
            tmp_path(path, sizeof path, "flamegraph", "bad.xml");
            FILE *f = fopen(path, "wb");
            fputs(bad[i], f);
            fclose(f);
            snprintf(cmd, sizeof cmd, "xmllint --noout '%s' 2>/dev/null", path);
            CU_ASSERT_NOT_EQUAL(system(cmd), 0);
            remove(path);
        }
    }
    const char *good = "<?xml version=\"1.0\"?>\n<a x='1' y=\"&amp;&#38;&#x26;\"><!-- c -->"
                       "<b/><![CDATA[ <&> ]]>t\xC3\xA9</a>\n";
    CU_ASSERT_PTR_NULL(xml_check(good, strlen(good)));
}

static char *svg_of(const rbpeek_profile *p, const char *name, const rbpeek_svg_options *opt,
                    size_t *len)
{
    char path[512];
    tmp_path(path, sizeof path, "flamegraph", name);
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_svg(p, path, opt), RBPEEK_OK);
    char *text = check_wellformed(path, len);
    remove(path);
    return text;
}

static void add1(rbpeek_profile *p, const char *a, const char *b, const char *c, uint64_t n)
{
    const char *frames[] = {a, b, c};
    size_t k = c ? 3 : b ? 2 : 1;
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(p, frames, k, n), RBPEEK_OK);
}

static void test_escaping(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add1(p, "<main> (a&b.rb:1)", "say \"hi\" 'there' (x.rb:2)", "<script>alert(1)</script>", 3);
    add1(p, "<main> (a&b.rb:1)", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x94\xA5", NULL, 2);
    add1(p, "<main> (a&b.rb:1)", "bad \xFF\xFE utf8", "trunc \xE6\x97", 1);
    add1(p, "<main> (a&b.rb:1)", "overlong \xC0\xAF surrogate \xED\xA0\x80", "ctl \x01\x1B end", 1);
    add1(p, "noncharacter \xEF\xBF\xBF", "]]> cdata end", NULL, 1);
    rbpeek_profile_set_meta(p, "ruby_version", "3.4.5 <&>");
    rbpeek_svg_options opt = {.title = "T\xC3\xAFtle <x> & \"y\" \xFF"};
    size_t len;
    char *svg = svg_of(p, "escape.svg", &opt, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>&lt;script&gt;alert(1)&lt;/script&gt; (3 samples, 37.50%)</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "say &quot;hi&quot; &apos;there&apos; (x.rb:2)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "&lt;main&gt; (a&amp;b.rb:1)"));
    /* Non-ASCII passes through as UTF-8. */
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x94\xA5 (2 samples"));
    /* Invalid bytes become U+FFFD, one per byte. */
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "bad \xEF\xBF\xBD\xEF\xBF\xBD utf8"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "trunc \xEF\xBF\xBD\xEF\xBF\xBD ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "overlong \xEF\xBF\xBD\xEF\xBF\xBD surrogate \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "ctl \xEF\xBF\xBD\xEF\xBF\xBD end"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "noncharacter \xEF\xBF\xBD ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "]]&gt; cdata end"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "T\xC3\xAFtle &lt;x&gt; &amp; &quot;y&quot; \xEF\xBF\xBD"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "Ruby 3.4.5 &lt;&amp;&gt;"));
    CU_ASSERT_PTR_NULL(strstr(svg, "<script>alert"));
    free(svg);
    rbpeek_profile_free(p);
}

static void test_geometry_and_title(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add1(p, "main", "a", NULL, 3);
    add1(p, "main", "b", NULL, 1);
    rbpeek_profile_set_meta(p, "ruby_version", "3.3.8");
    rbpeek_profile_set_meta(p, "pid", "4242");
    rbpeek_profile_set_meta(p, "rate_hz", "99");
    rbpeek_profile_set_meta(p, "samples", "4");
    rbpeek_profile_set_meta(p, "title", "From meta");
    size_t len;
    char *svg = svg_of(p, "geometry.svg", NULL, &len);
    /* Defaults: 1200 px wide, 10 px margins, 16 px levels, 3 levels. */
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"1200\" height=\"134\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<text id=\"rbp-title\" x=\"600\" y=\"24\">From meta</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "Ruby 3.3.8  \xC2\xB7  pid 4242  \xC2\xB7  4 samples  \xC2\xB7  99 Hz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<g data-x=\"0\" data-n=\"4\"><title>all (4 samples, 100.00%)</title>"
                                       "<rect x=\"10.0\" y=\"88.0\" width=\"1180.0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<g data-x=\"0\" data-n=\"3\"><title>a (3 samples, 75.00%)</title>"
                                       "<rect x=\"10.0\" y=\"56.0\" width=\"885.0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<g data-x=\"3\" data-n=\"1\"><title>b (1 sample, 25.00%)</title>"
                                       "<rect x=\"895.0\" y=\"56.0\" width=\"295.0\""));
    /* The interactive parts are there. */
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "id=\"rbp-unzoom\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">Reset Zoom</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">Search</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "function rbpSearch(term)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "'Matched: '"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "function rbpZoom(g)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "id=\"rbp-details\""));
    free(svg);

    /* An explicit title wins; width and inversion are honoured. */
    rbpeek_svg_options opt = {.width = 600, .title = "Given", .inverted = 1};
    svg = svg_of(p, "inverted.svg", &opt, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<text id=\"rbp-title\" x=\"300\" y=\"24\">Given</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>all (4 samples, 100.00%)</title><rect x=\"10.0\" y=\"56.0\" width=\"580.0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>a (3 samples, 75.00%)</title><rect x=\"10.0\" y=\"88.0\" width=\"435.0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "inverted: true"));
    free(svg);

    /* A unit (ruby sample's "stacks": 2 samples of two threads recorded 4
     * stacks): the subtitle gives both counts, each with its word, and the
     * boxes count in the unit, so the root's count is the subtitle's. */
    rbpeek_profile_set_meta(p, "samples", "2");
    rbpeek_profile_set_meta(p, "unit", "stacks");
    svg = svg_of(p, "unit.svg", NULL, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "pid 4242  \xC2\xB7  2 samples  \xC2\xB7  4 stacks  \xC2\xB7  99 Hz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>all (4 stacks, 100.00%)</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>b (1 stack, 25.00%)</title>"));
    CU_ASSERT_PTR_NULL(strstr(svg, "samples, "));
    free(svg);
    rbpeek_profile_set_meta(p, "samples", "4");
    rbpeek_profile_set_meta(p, "unit", "");

    /* Width is clamped; the title falls back. */
    rbpeek_profile *q = rbpeek_profile_new();
    add1(q, "x", NULL, NULL, 1);
    rbpeek_svg_options narrow = {.width = 5};
    svg = svg_of(q, "narrow.svg", &narrow, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"200\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">Flame Graph</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">1 sample</text>"));   /* no meta: total */
    free(svg);
    rbpeek_profile_free(q);
    rbpeek_profile_free(p);
}

static void test_labels(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    const char *longname = "Some::Very::Long::Module::Name#with_a_long_method_name (lib/some/very/long/path.rb:1234)";
    add1(p, longname, NULL, NULL, 1);
    add1(p, "z", NULL, NULL, 99);
    size_t len;
    char *svg = svg_of(p, "labels.svg", NULL, &len);
    /* 1/100 of 1180 px = 11.8 px: no room for a label. */
    char want[512];
    snprintf(want, sizeof want, "<title>%s (1 sample, 1.00%%)</title>", longname);
    const char *g = strstr(svg, want);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *g_end = strstr(g, "</g>");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_end);
    CU_ASSERT_TRUE(strstr(g, "<text") == NULL || strstr(g, "<text") > g_end);
    CU_ASSERT_TRUE(g_end - strstr(g, "/>") == 2);   /* ends with the rect */
    free(svg);
    rbpeek_profile_free(p);

    /* Cut to fit with "..": 250 px fits (250 - 6) / 7.08 = 34 characters. */
    p = rbpeek_profile_new();
    add1(p, "\xC3\xA9" "abcdefghijklmnopqrstuvwxyzabcdefghijklmnop", NULL, NULL, 1);
    rbpeek_svg_options opt = {.width = 270};
    svg = svg_of(p, "labels2.svg", &opt, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">\xC3\xA9" "abcdefghijklmnopqrstuvwxyzabcde..</text>"));
    free(svg);
    rbpeek_profile_free(p);
}

/* ruby allocs --sites: each tooltip adds its share's interval, from the
 * effective number of samples given (rbpeek_share_interval: the same
 * figures the text and the JSON print), and counts in the profile's unit;
 * without ci_samples, none. */
static void test_intervals(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add1(p, "main", "site_a", NULL, 750000);
    add1(p, "main", "site_b", NULL, 250000);
    rbpeek_profile_set_meta(p, "unit", "allocations");
    rbpeek_svg_options opt = {.ci_samples = 400.0, .ci_z = 1.644854};
    size_t len;
    char *svg = svg_of(p, "intervals.svg", &opt, &len);
    double lo, hi;
    rbpeek_share_interval(0.25 * 400.0, 400.0, 1.644854, &lo, &hi);
    char want[256];
    snprintf(want, sizeof want, "<title>site_b (250000 allocations, 25.00%% [%.1f-%.1f%%, 90%% interval])</title>",
             100.0 * lo, 100.0 * hi);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, want));
    CU_ASSERT(lo > 0.21 && lo < 0.22 && hi > 0.28 && hi < 0.29);   /* 21.6-28.8% by hand */
    free(svg);
    svg = svg_of(p, "intervals2.svg", NULL, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>site_b (250000 allocations, 25.00%)</title>"));
    CU_ASSERT_PTR_NULL(strstr(svg, "interval]"));
    free(svg);
    rbpeek_profile_free(p);
}

static void test_min_width(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    add1(p, "big", "child", NULL, 1000000);
    add1(p, "tiny", "tinychild", NULL, 1);   /* 0.00118 px at 1200 */
    add1(p, "small", NULL, NULL, 100);        /* 0.118 px: kept by default */
    size_t len;
    char *svg = svg_of(p, "minwidth.svg", NULL, &len);
    CU_ASSERT_EQUAL(count_of(svg, "<g data-x"), 4);   /* all, big, child, small */
    CU_ASSERT_PTR_NULL(strstr(svg, "tiny"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>small "));
    free(svg);
    rbpeek_svg_options keep = {.min_width_px = -1};
    svg = svg_of(p, "minwidth-all.svg", &keep, &len);
    CU_ASSERT_EQUAL(count_of(svg, "<g data-x"), 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>tinychild (1 sample, 0.00%)</title>"));
    free(svg);
    rbpeek_svg_options coarse = {.min_width_px = 5};
    svg = svg_of(p, "minwidth-5.svg", &coarse, &len);
    CU_ASSERT_EQUAL(count_of(svg, "<g data-x"), 3);
    free(svg);
    rbpeek_profile_free(p);
}

static void test_deterministic(void)
{
    /* Same input in a different order gives the same bytes; a name gets the
     * same colour in another profile; colours are warm. */
    rbpeek_profile *a = rbpeek_profile_new(), *b = rbpeek_profile_new();
    add1(a, "main", "alpha", NULL, 2);
    add1(a, "main", "beta", "gamma", 3);
    add1(b, "main", "beta", "gamma", 3);
    add1(b, "main", "alpha", NULL, 2);
    size_t la, lb;
    char *sa = svg_of(a, "det-a.svg", NULL, &la), *sb = svg_of(b, "det-b.svg", NULL, &lb);
    CU_ASSERT_TRUE(la == lb && memcmp(sa, sb, la) == 0);
    rbpeek_profile *c = rbpeek_profile_new();
    add1(c, "other", "x", "gamma", 1);
    size_t lc;
    char *sc = svg_of(c, "det-c.svg", NULL, &lc);
    const char *ga = strstr(sa, "<title>gamma "), *gc = strstr(sc, "<title>gamma ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ga);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc);
    const char *fa = strstr(ga, "fill=\""), *fc = strstr(gc, "fill=\"");
    CU_ASSERT_EQUAL(strncmp(fa, fc, 24), 0);
    unsigned r, g, bl;
    for (const char *f = sa; (f = strstr(f, "fill=\"rgb(")) != NULL; f++) {
        CU_ASSERT_EQUAL_FATAL(sscanf(f, "fill=\"rgb(%u,%u,%u)", &r, &g, &bl), 3);
        CU_ASSERT_TRUE(r >= 205 && r <= 255 && g <= 230 && bl <= 55);
    }
    free(sa);
    free(sb);
    free(sc);
    rbpeek_profile_free(a);
    rbpeek_profile_free(b);
    rbpeek_profile_free(c);
}

static void test_empty_and_errors(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    size_t len;
    char *svg = svg_of(p, "empty.svg", NULL, &len);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">No samples</text>"));
    CU_ASSERT_EQUAL(count_of(svg, "<g data-x"), 0);
    free(svg);
    CU_ASSERT_EQUAL(rbpeek_profile_write_svg(p, "/nonexistent-dir/x.svg", NULL), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_profile_error(p), "/nonexistent-dir/x.svg"));
    CU_ASSERT_EQUAL(rbpeek_profile_write_svg(NULL, "x.svg", NULL), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_write_svg(p, NULL, NULL), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_write_folded(p, ""), RBPEEK_ERR_ARG);
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
    enum { NSTACKS = 10000, DEPTH = 50, DEEP = 5000 };
    static char names[DEPTH][64];
    const char *frames[DEEP];
    rbpeek_profile *p = rbpeek_profile_new();
    for (int i = 0; i < NSTACKS; i++) {
        for (int d = 0; d < DEPTH; d++) {
            int v = d < 5 ? d : d < 15 ? (i % 11) * 100 + d : d < 30 ? (i % 101) * 1000 + d : i * 100 + d;
            snprintf(names[d], sizeof names[d], "m%d (f%d.rb:%d)", v, d % 7, d);
            frames[d] = names[d];
        }
        CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(p, frames, DEPTH, 1), RBPEEK_OK);
    }
    char path[512];
    tmp_path(path, sizeof path, "flamegraph", "wide.svg");
    /* Every stack is 1/10,000 of 1,180 px = 0.118 px, just over a 0.1 px
     * cut-off: asked for explicitly, every distinct frame is drawn. */
    rbpeek_svg_options exact = {.min_width_px = 0.1};
    double t0 = now();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_svg(p, path, &exact), RBPEEK_OK);
    double t1 = now();
    size_t len;
    char *svg = check_wellformed(path, &len);
    size_t boxes = count_of(svg, "<g data-x");
    CU_ASSERT_TRUE(boxes > 100000);
    CU_ASSERT_PTR_NULL(strstr(svg, "px omitted"));
    printf("\n    [10,000 stacks x 50, --min-width 0.1: SVG in %.3fs, %zu boxes, %.1f MB]",
           t1 - t0, boxes, (double)len / 1e6);
    free(svg);
    /* By default the cut-off rises to keep the file to what a browser
     * opens quickly, and the subtitle says so. */
    t0 = now();
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_svg(p, path, NULL), RBPEEK_OK);
    t1 = now();
    svg = check_wellformed(path, &len);
    size_t auto_boxes = count_of(svg, "<g data-x");
    CU_ASSERT_TRUE(auto_boxes <= 30001 && auto_boxes > 10000);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "  \xC2\xB7  frames under "));
    printf("\n    [same, default cut-off: SVG in %.3fs, %zu boxes, %.1f MB]", t1 - t0, auto_boxes,
           (double)len / 1e6);
    free(svg);
    /* At a 1 px cut-off the file shrinks further. */
    rbpeek_svg_options coarse = {.min_width_px = 1};
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_svg(p, path, &coarse), RBPEEK_OK);
    svg = check_wellformed(path, &len);
    size_t coarse_boxes = count_of(svg, "<g data-x");
    CU_ASSERT_TRUE(coarse_boxes <= auto_boxes);
    printf("\n    [same at --min-width 1: %zu boxes, %.1f MB]", coarse_boxes, (double)len / 1e6);
    free(svg);
    remove(path);
    rbpeek_profile_free(p);

    /* A 5,000-deep recursion. */
    p = rbpeek_profile_new();
    frames[0] = "<main> (r.rb:1)";
    for (int d = 1; d < DEEP; d++) frames[d] = "recurse (r.rb:5)";
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(p, frames, DEEP, 3), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_add_stack(p, frames, 10, 1), RBPEEK_OK);
    tmp_path(path, sizeof path, "flamegraph", "deep.svg");
    t0 = now();   /* 5,001 boxes: the default cut-off is not raised */
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_svg(p, path, NULL), RBPEEK_OK);
    t1 = now();
    svg = check_wellformed(path, &len);
    CU_ASSERT_EQUAL(count_of(svg, "<g data-x"), DEEP + 1);
    char want[64];
    snprintf(want, sizeof want, "height=\"%d\"", 56 + (DEEP + 1) * 16 + 30);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, want));
    printf("\n    [5,000-deep stack: SVG in %.3fs, %.1f MB]\n", t1 - t0, (double)len / 1e6);
    free(svg);
    remove(path);
    rbpeek_profile_free(p);
}

static const rbp_cu_test tests[] = {
    {"well-formedness checkers reject bad XML", test_checker_rejects},
    {"XML escaping and UTF-8", test_escaping},
    {"geometry, title and options", test_geometry_and_title},
    {"labels", test_labels},
    {"min-width cut-off", test_min_width},
    {"shares' intervals in the tooltips", test_intervals},
    {"deterministic output and colours", test_deterministic},
    {"empty profile and errors", test_empty_and_errors},
    {"10k stacks and 5000-deep recursion", test_large},
    {NULL, NULL},
};

RBP_CU_MAIN("flamegraph", tests)

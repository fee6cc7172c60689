/*
 * rbpeek-flamegraph: turns a folded-stack file (Brendan Gregg's "a;b;c 12"
 * format, as `ruby sample` writes and many other profilers do) into rbpeek's
 * self-contained interactive SVG flamegraph, without Perl or any other tool.
 *
 *   rbpeek-flamegraph [--title T] [--width N] [--min-width PX] [--inverted]
 *                     [-o out.svg] input.folded|-
 *
 * Exit status: 0 written, 1 the input or output failed (one line on stderr
 * says why), 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbpeek.h"

static const char *prog = "rbpeek-flamegraph";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--title T] [--width N] [--min-width PX] [--inverted] [-o out.svg] "
            "input.folded\n"
            "  input.folded  folded stacks, one \"frame;frame;... COUNT\" per line ('-' = stdin)\n"
            "  -o, --output  SVG file to write (default: stdout)\n"
            "  --title T     title line (default \"Flame Graph\")\n"
            "  --width N     image width in pixels, 200..100000 (default 1200)\n"
            "  --min-width PX  omit frames narrower than PX pixels; 0 keeps all (default:\n"
            "                0.1, raised if need be to keep the graph to 30,000 frames)\n"
            "  --inverted    icicle graph: root at the top\n",
            prog);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (try --help)\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"title", required_argument, NULL, 't'},
        {"width", required_argument, NULL, 'w'},
        {"min-width", required_argument, NULL, 'm'},
        {"inverted", no_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    rbpeek_svg_options opt = {0};
    const char *out = "-";
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 't':
            opt.title = optarg;
            break;
        case 'w': {
            errno = 0;
            long w = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || w < 200 || w > 100000)
                return bad_usage("--width wants a whole number of pixels from 200 to 100000, "
                                 "not '%s'",
                                 optarg);
            opt.width = (int)w;
            break;
        }
        case 'm': {
            errno = 0;
            double m = strtod(optarg, &end);
            if (errno || *end || end == optarg || !isfinite(m) || m < 0)
                return bad_usage("--min-width wants a number of pixels >= 0, not '%s'", optarg);
            /* The library reads 0 as "default" and < 0 as "keep all"; the
             * command line's 0 means keep all, which is what a user means. */
            opt.min_width_px = m == 0 ? -1 : m;
            break;
        }
        case 'i':
            opt.inverted = 1;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return bad_usage("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *in = argv[optind];

    rbpeek_profile *p = rbpeek_profile_new();
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    int rc = 1;
    if (rbpeek_profile_read_folded(p, in) != RBPEEK_OK) {
        fprintf(stderr, "%s: %s\n", prog, rbpeek_profile_error(p));
        goto done;
    }
    if (rbpeek_profile_skipped_lines(p) > 0)
        fprintf(stderr, "%s: warning: %s\n", prog, rbpeek_profile_error(p));
    if (rbpeek_profile_total(p) == 0) {
        fprintf(stderr, "%s: no samples in %s (expected lines like \"main;work;leaf 12\")\n", prog,
                strcmp(in, "-") == 0 ? "<stdin>" : in);
        goto done;
    }
    if (rbpeek_profile_write_svg(p, out, &opt) != RBPEEK_OK) {
        fprintf(stderr, "%s: %s\n", prog, rbpeek_profile_error(p));
        goto done;
    }
    rc = 0;
done:
    rbpeek_profile_free(p);
    return rc;
}

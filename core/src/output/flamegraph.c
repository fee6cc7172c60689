/*
 * The SVG flamegraph writer: renders a profile's trie as one self-contained
 * SVG (inline style and script, no external files or tools). Each box is a
 * frame; its width is its share of the samples, its children stand on it
 * (or hang below it when inverted), siblings are sorted by name.
 *
 * The picture works without script (boxes, labels, <title> tooltips); the
 * embedded script adds click-to-zoom with "Reset Zoom", a "Search" that
 * colours matching frames and reports the share of samples they cover
 * ("Matched: 12.3%"), and a details line for the frame under the mouse.
 * Each box carries its exact sample offset and count (data-x, data-n) so
 * the script can re-lay out a zoomed subtree without rounding drift.
 *
 * Frames narrower than min_width_px are left out with their subtrees: they
 * are invisible anyway, and it bounds the output size by the image width
 * times the depth rather than by the number of distinct stacks. When the
 * caller leaves the cut-off at its default, it is also raised as far as
 * needed to keep the graph to FG_AUTO_MAX_BOXES boxes: a browser takes
 * about 20 s to open a 270,000-box (48 MB) SVG and 2 s for 30,000, and
 * boxes under a pixel add little but texture. The subtitle says so.
 *
 * Every string from the target is escaped and UTF-8-checked on the way out
 * (rbp_xml_write), so whatever bytes a Ruby label holds, the SVG is
 * well-formed XML.
 */
#include "output/writer.h"

#include "base/strbuf.h"
#include "profile/profile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FG_DEFAULT_WIDTH 1200
#define FG_MIN_WIDTH 200
#define FG_MAX_WIDTH 100000
#define FG_DEFAULT_MIN_PX 0.1
#define FG_AUTO_MAX_BOXES 30000
#define FG_XPAD 10
#define FG_FRAME_H 16
#define FG_FONT 12
#define FG_FONT_W 0.59      /* average glyph width as a fraction of the size */
#define FG_TEXT_DY 11.5     /* label baseline below the box top */
#define FG_STR_(x) #x
#define FG_STR(x) FG_STR_(x)
#define FG_YPAD_TOP 56      /* title, subtitle and the controls */
#define FG_YPAD_BOTTOM 30   /* the details line */
#define FG_REPLACEMENT "\xEF\xBF\xBD"   /* U+FFFD */

size_t rbp_xml_write(FILE *f, const char *s, size_t max_chars)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), written = 0;
    for (size_t i = 0; i < len && written < max_chars; written++) {
        unsigned char c = u[i];
        size_t n = 1;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
                fputs(FG_REPLACEMENT, f);   /* XML 1.0 has no way to carry these */
            } else if ((n = rbp_utf8_seq_len(u + i, len - i)) == 0) {
                fputs(FG_REPLACEMENT, f);   /* not UTF-8: one U+FFFD per bad byte */
                n = 1;
            } else if (n == 3 && c == 0xEF && u[i + 1] == 0xBF && u[i + 2] >= 0xBE) {
                fputs(FG_REPLACEMENT, f);   /* U+FFFE, U+FFFF: not XML characters */
            } else {
                fwrite(u + i, 1, n, f);
            }
        }
        i += n;
    }
    return written;
}

/* A colour from the name's hash: the same name gets the same colour in
 * every run and every graph, so a frame is easy to find again. Ruby frames
 * are warm (flamegraph.pl's palette); machine frames (--native) blue and
 * the GC's frames green, so that both stand apart from Ruby's. */
static void fg_colour(const char *name, int32_t kind, unsigned *r, unsigned *g, unsigned *b)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
        h ^= *s;
        h *= 16777619u;
    }
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    if (kind == RBPEEK_FRAME_NATIVE) {
        *r = 80 + (h & 0xFF) * 60 / 255;
        *g = 140 + ((h >> 8) & 0xFF) * 60 / 255;
        *b = 205 + ((h >> 16) & 0xFF) * 50 / 255;
    } else if (kind == RBPEEK_FRAME_JIT) { /* violets */
        *r = 165 + (h & 0xFF) * 50 / 255;
        *g = 110 + ((h >> 8) & 0xFF) * 40 / 255;
        *b = 215 + ((h >> 16) & 0xFF) * 40 / 255;
    } else if (kind == RBPEEK_FRAME_GC) {
        *r = 70 + (h & 0xFF) * 40 / 255;
        *g = 170 + ((h >> 8) & 0xFF) * 50 / 255;
        *b = 70 + ((h >> 16) & 0xFF) * 40 / 255;
    } else if (kind == RBPEEK_FRAME_GVL) {   /* a wait, not work: grey */
        *r = *g = *b = 175 + (h & 0xFF) * 30 / 255;
    } else {
        *r = 205 + (h & 0xFF) * 50 / 255;
        *g = 60 + ((h >> 8) & 0xFF) * 170 / 255;
        *b = ((h >> 16) & 0xFF) * 55 / 255;
    }
}

/* A node's frame kind (the root: a Ruby frame's colours). */
static int32_t fg_kind(const rbpeek_profile *p, uint32_t node)
{
    uint32_t frame = p->nodes[node].frame;
    return frame == RBP_ROOT_FRAME ? RBPEEK_FRAME_RUBY : rbp_profile_pframe(p, frame)->d.kind;
}

typedef struct fg_ctx {
    const rbpeek_profile *p;
    FILE *f;
    int pass;               /* 0: measure, 1: emit */
    double width;           /* image width */
    double scale;           /* px per sample */
    double min_px;
    bool raised;            /* the default cut-off was raised to limit boxes */
    int inverted;
    double height;
    uint32_t shown_depth;   /* deepest level drawn */
    uint64_t shown;         /* boxes drawn */
    uint64_t *xnext;        /* per depth: sample offset of the next child */
    double ci_samples, ci_z; /* > 0: each tooltip adds its share's interval (rbpeek_svg_options) */
    const char *unit;       /* what one count is, plural: meta "unit", else "samples" */
} fg_ctx;

/* "N unit" ("1 stack", "7 stacks"): the singular drops a final 's'. */
static void fg_count(FILE *f, const char *unit, uint64_t n)
{
    size_t len = strlen(unit);
    fprintf(f, "%llu ", (unsigned long long)n);
    rbp_xml_write(f, unit, n == 1 && len > 1 && unit[len - 1] == 's' ? rbp_utf8_length(unit) - 1 : SIZE_MAX);
}

/* The two-sided coverage of +-z: what the tooltip calls the interval. */
static double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

static void fg_num(FILE *f, double v)
{
    char buf[48];
    rbp_fmt_fixed(buf, sizeof buf, v, 1);
    fputs(buf, f);
}

static int fg_visit(void *vctx, uint32_t node, bool entering)
{
    fg_ctx *c = vctx;
    if (!entering) return 0;
    const rbp_pnode *n = &c->p->nodes[node];
    uint32_t d = n->depth;
    uint64_t x = d == 0 ? 0 : c->xnext[d - 1];
    if (d > 0) c->xnext[d - 1] += n->total;
    c->xnext[d] = x;
    double w = (double)n->total * c->scale;
    if (d > 0 && c->min_px >= 0 && w < c->min_px) return 1;
    if (c->pass == 0) {
        if (d > c->shown_depth) c->shown_depth = d;
        c->shown++;
        return 0;
    }

    FILE *f = c->f;
    const char *name = rbp_profile_node_name(c->p, node);
    uint64_t total = c->p->nodes[0].total;
    double px = FG_XPAD + (double)x * c->scale;
    double py = c->inverted ? FG_YPAD_TOP + (double)d * FG_FRAME_H
                            : c->height - FG_YPAD_BOTTOM - (double)(d + 1) * FG_FRAME_H;
    char pct[32];
    rbp_fmt_fixed(pct, sizeof pct, 100.0 * (double)n->total / (double)total, 2);
    unsigned r, g, b;
    int32_t kind = fg_kind(c->p, node);
    fg_colour(name, kind, &r, &g, &b);

    fprintf(f, "<g data-x=\"%llu\" data-n=\"%llu\"><title>", (unsigned long long)x,
            (unsigned long long)n->total);
    rbp_xml_write(f, name, SIZE_MAX);
    const char *what = kind == RBPEEK_FRAME_NATIVE ? "native frame, " : kind == RBPEEK_FRAME_JIT ? "JIT frame, " : "";
    fprintf(f, " (%s", what);
    fg_count(f, c->unit, n->total);
    fprintf(f, ", %s%%", pct);
    if (c->ci_samples > 0) {
        /* the share's interval, from the effective number of samples the
         * profile rests on (its counts may be scaled: ruby allocs --sites) */
        double lo, hi, share = (double)n->total / (double)total;
        char a[32], b[32], z[32];
        rbpeek_share_interval(share * c->ci_samples, c->ci_samples, c->ci_z, &lo, &hi);
        rbp_fmt_fixed(a, sizeof a, 100.0 * lo, 1);
        rbp_fmt_fixed(b, sizeof b, 100.0 * hi, 1);
        rbp_fmt_fixed(z, sizeof z, 100.0 * (2.0 * normal_cdf(c->ci_z) - 1.0), 0);
        fprintf(f, " [%s-%s%%, %s%% interval]", a, b, z);
    }
    fputs(")</title><rect x=\"", f);
    fg_num(f, px);
    fputs("\" y=\"", f);
    fg_num(f, py);
    fputs("\" width=\"", f);
    fg_num(f, w);
    /* Rounded corners and labels only where they can be seen: at the
     * default cut-off most boxes of a wide profile are under a pixel, and
     * these bytes would dominate the file. The script adds a label when a
     * zoom makes room for one. */
    fprintf(f, "\" height=\"%d\" fill=\"rgb(%u,%u,%u)\"%s/>", FG_FRAME_H - 1, r, g, b,
            w >= 4 ? " rx=\"2\" ry=\"2\"" : "");
    double fit = (w - 6) / (FG_FONT * FG_FONT_W);
    if (fit >= 3) {
        fputs("<text x=\"", f);
        fg_num(f, px + 3);
        fputs("\" y=\"", f);
        fg_num(f, py + FG_TEXT_DY);
        fputs("\">", f);
        /* As many characters as fit, ".." when cut. */
        size_t maxc = (size_t)fit, len = rbp_utf8_length(name);
        if (len <= maxc) {
            rbp_xml_write(f, name, SIZE_MAX);
        } else {
            rbp_xml_write(f, name, maxc - 2);
            fputs("..", f);
        }
        fputs("</text>", f);
    }
    if (fputs("</g>\n", f) == EOF) {
        rbp_profile_fail(c->p, RBPEEK_ERR_IO, "error writing SVG: %s", strerror(errno));
        return -1;
    }
    c->shown++;
    return 0;
}

/* The interactive part. Plain ES5 plus Array.from; no libraries. Names are
 * read back from each box's <title> ("NAME (N samples, P%)"), so no frame
 * text is ever placed inside the script. */
static const char FG_SCRIPT[] =
    "var rbp = { frames: [], zoomed: null, term: null };\n"
    "function rbpEl(id) { return document.getElementById(id); }\n"
    "function rbpInit() {\n"
    "  if (rbp.ready) return;\n"
    "  rbp.ready = true;\n"
    "  var gs = rbpEl('rbp-frames').getElementsByTagName('g');\n"
    "  var y0 = null;\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i], t = g.getElementsByTagName('title')[0].textContent;\n"
    "    var rect = g.getElementsByTagName('rect')[0];\n"
    "    var y = +rect.getAttribute('y');\n"
    "    if (y0 === null) y0 = y;\n"
    "    var fr = { g: g, rect: rect, text: g.getElementsByTagName('text')[0] || null, y: y,\n"
    "               x: +g.getAttribute('data-x'), n: +g.getAttribute('data-n'),\n"
    "               d: Math.round(Math.abs(y - y0) / rbpConf.fh), info: t,\n"
    "               name: t.substring(0, t.lastIndexOf(' (')), fill: rect.getAttribute('fill') };\n"
    "    g.rbpIndex = i;\n"
    "    rbp.frames.push(fr);\n"
    "  }\n"
    "  var box = rbpEl('rbp-frames');\n"
    "  box.addEventListener('click', function (e) {\n"
    "    var fr = rbpFrameOf(e.target); if (fr) rbpZoom(fr.g);\n"
    "  });\n"
    "  box.addEventListener('mouseover', function (e) {\n"
    "    var fr = rbpFrameOf(e.target);\n"
    "    if (fr) rbpEl('rbp-details').textContent = 'Function: ' + fr.info;\n"
    "  });\n"
    "  box.addEventListener('mouseout', function () { rbpEl('rbp-details').textContent = ' '; });\n"
    "  rbpEl('rbp-unzoom').addEventListener('click', function () { rbpUnzoom(); });\n"
    "  rbpEl('rbp-search').addEventListener('click', function () {\n"
    "    if (rbp.term !== null) rbpResetSearch(); else rbpSearchPrompt();\n"
    "  });\n"
    "  window.addEventListener('keydown', function (e) {\n"
    "    if ((e.ctrlKey && (e.key === 'f' || e.key === 'F')) || e.key === 'F3') {\n"
    "      e.preventDefault(); rbpSearchPrompt();\n"
    "    } else if (e.key === 'Escape') { rbpResetSearch(); rbpUnzoom(); }\n"
    "  });\n"
    "}\n"
    "function rbpFrameOf(el) {\n"
    "  while (el && el.getAttribute) {\n"
    "    if (el.rbpIndex !== undefined) return rbp.frames[el.rbpIndex];\n"
    "    el = el.parentNode;\n"
    "  }\n"
    "  return null;\n"
    "}\n"
    "function rbpFit(fr, x, w) {\n"
    "  fr.rect.setAttribute('x', x.toFixed(1));\n"
    "  fr.rect.setAttribute('width', w.toFixed(1));\n"
    "  var maxc = Math.floor((w - 6) / (rbpConf.font * 0.59)), label = '';\n"
    "  if (maxc >= 3) {\n"
    "    var cps = Array.from(fr.name);\n"
    "    label = cps.length <= maxc ? fr.name : cps.slice(0, maxc - 2).join('') + '..';\n"
    "  }\n"
    "  if (!fr.text) {\n"
    "    if (!label) return;\n"
    "    fr.text = document.createElementNS('http://www.w3.org/2000/svg', 'text');\n"
    "    fr.text.setAttribute('y', (fr.y + rbpConf.textDy).toFixed(1));\n"
    "    fr.g.appendChild(fr.text);\n"
    "  }\n"
    "  fr.text.setAttribute('x', (x + 3).toFixed(1));\n"
    "  fr.text.textContent = label;\n"
    "}\n"
    "function rbpShow(fr, on) {\n"
    "  if (on) fr.g.classList.remove('hide'); else fr.g.classList.add('hide');\n"
    "}\n"
    "function rbpZoom(g) {\n"
    "  var z = rbp.frames[g.rbpIndex], span = rbpConf.width - 2 * rbpConf.xpad;\n"
    "  var scale = span / z.n;\n"
    "  for (var i = 0; i < rbp.frames.length; i++) {\n"
    "    var fr = rbp.frames[i];\n"
    "    if (fr.d < z.d) {\n"
    "      var anc = fr.x <= z.x && fr.x + fr.n >= z.x + z.n;\n"
    "      rbpShow(fr, anc);\n"
    "      if (anc) { fr.g.classList.add('parent'); rbpFit(fr, rbpConf.xpad, span); }\n"
    "    } else {\n"
    "      var inside = fr.x >= z.x && fr.x + fr.n <= z.x + z.n;\n"
    "      fr.g.classList.remove('parent');\n"
    "      rbpShow(fr, inside);\n"
    "      if (inside) rbpFit(fr, rbpConf.xpad + (fr.x - z.x) * scale, fr.n * scale);\n"
    "    }\n"
    "  }\n"
    "  rbp.zoomed = z;\n"
    "  rbpEl('rbp-unzoom').classList.remove('hide');\n"
    "}\n"
    "function rbpUnzoom() {\n"
    "  var span = rbpConf.width - 2 * rbpConf.xpad, scale = span / Math.max(rbpConf.total, 1);\n"
    "  for (var i = 0; i < rbp.frames.length; i++) {\n"
    "    var fr = rbp.frames[i];\n"
    "    fr.g.classList.remove('parent');\n"
    "    rbpShow(fr, true);\n"
    "    rbpFit(fr, rbpConf.xpad + fr.x * scale, fr.n * scale);\n"
    "  }\n"
    "  rbp.zoomed = null;\n"
    "  rbpEl('rbp-unzoom').classList.add('hide');\n"
    "}\n"
    "function rbpSearchPrompt() {\n"
    "  var t = window.prompt('Search frames (regular expression):', rbp.term || '');\n"
    "  if (t !== null) rbpSearch(t);\n"
    "}\n"
    "function rbpSearch(term) {\n"
    "  if (term === null || term === undefined || term === '') { rbpResetSearch(); return 0; }\n"
    "  var re = null;\n"
    "  try { re = new RegExp(term); } catch (e) { re = null; }\n"
    "  var spans = [];\n"
    "  for (var i = 0; i < rbp.frames.length; i++) {\n"
    "    var fr = rbp.frames[i];\n"
    "    var hit = fr.d > 0 && (re ? re.test(fr.name) : fr.name.indexOf(term) >= 0);\n"
    "    fr.rect.setAttribute('fill', hit ? rbpConf.matchFill : fr.fill);\n"
    "    if (hit) spans.push([fr.x, fr.x + fr.n]);\n"
    "  }\n"
    "  // Nested matches (recursion, or a match inside a match) cover the same\n"
    "  // samples: merge the sample ranges before adding them up.\n"
    "  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
    "  var covered = 0, end = -1;\n"
    "  for (var j = 0; j < spans.length; j++) {\n"
    "    var s = spans[j][0], e = spans[j][1];\n"
    "    if (s < end) s = end;\n"
    "    if (e > s) { covered += e - s; end = e; }\n"
    "  }\n"
    "  var pct = 100 * covered / Math.max(rbpConf.total, 1);\n"
    "  rbp.term = term;\n"
    "  var m = rbpEl('rbp-matched');\n"
    "  m.textContent = 'Matched: ' + pct.toFixed(1) + '%';\n"
    "  m.classList.remove('hide');\n"
    "  rbpEl('rbp-search').textContent = 'Reset Search';\n"
    "  return pct;\n"
    "}\n"
    "function rbpResetSearch() {\n"
    "  for (var i = 0; i < rbp.frames.length; i++)\n"
    "    rbp.frames[i].rect.setAttribute('fill', rbp.frames[i].fill);\n"
    "  rbp.term = null;\n"
    "  rbpEl('rbp-matched').classList.add('hide');\n"
    "  rbpEl('rbp-search').textContent = 'Search';\n"
    "}\n"
    "if (document.readyState === 'complete') rbpInit();\n"
    "else window.addEventListener('load', rbpInit);\n";

static const char FG_STYLE[] =
    "text { font-family: Verdana, 'DejaVu Sans', sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
    "#rbp-title { font-size: 17px; text-anchor: middle; }\n"
    "#rbp-subtitle { text-anchor: middle; fill: rgb(90,90,90); }\n"
    "#rbp-search, #rbp-matched { text-anchor: end; }\n"
    ".rbp-btn { cursor: pointer; fill: rgb(30,60,170); }\n"
    ".rbp-btn:hover { text-decoration: underline; }\n"
    "#rbp-frames g { cursor: pointer; }\n"
    "#rbp-frames text { pointer-events: none; }\n"
    "#rbp-frames g:hover rect { stroke: rgb(40,40,40); stroke-width: 0.6; }\n"
    ".hide { display: none; }\n"
    ".parent { opacity: 0.5; }\n";

static int fg_u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

/* Raises c->min_px so that at most FG_AUTO_MAX_BOXES frames are drawn. A
 * child is never wider than its parent, so "every node at least this wide"
 * is already closed under ancestors and the cut can be picked from the
 * sorted node widths alone. */
static rbpeek_status fg_auto_cutoff(const rbpeek_profile *p, fg_ctx *c)
{
    size_t n = 0;
    for (uint32_t i = 1; i < p->nnodes; i++)
        if (p->nodes[i].total > 0 && (double)p->nodes[i].total * c->scale >= c->min_px) n++;
    if (n <= FG_AUTO_MAX_BOXES) return RBPEEK_OK;
    uint64_t *w = malloc(n * sizeof *w);
    if (!w) return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing the SVG");
    size_t k = 0;
    for (uint32_t i = 1; i < p->nnodes && k < n; i++)
        if (p->nodes[i].total > 0 && (double)p->nodes[i].total * c->scale >= c->min_px)
            w[k++] = p->nodes[i].total;
    qsort(w, k, sizeof *w, fg_u64_desc);
    /* Keep the nodes strictly wider than the first one that does not fit;
     * ties at the boundary go, so the count stays within the limit. The
     * half-sample margin keeps float rounding away from the boundary. */
    c->min_px = ((double)w[FG_AUTO_MAX_BOXES] + 0.5) * c->scale;
    c->raised = true;
    free(w);
    return RBPEEK_OK;
}

/* Appends "sep label value" to the subtitle when the meta key is set. */
static void fg_fact(FILE *f, const rbpeek_profile *p, const char *key, const char *before,
                    const char *after, int *nfacts)
{
    const char *v = rbpeek_profile_meta(p, key);
    if (!v || !*v) return;
    if ((*nfacts)++) fputs("  \xC2\xB7  ", f);   /* a middle dot between facts */
    fputs(before, f);
    rbp_xml_write(f, v, 200);
    fputs(after, f);
}

/* What the page is drawn with: its size, title and the samples in all. */
typedef struct fg_page {
    int width, h;
    const char *title;
    uint64_t total;
} fg_page;

/* The options, each in its range: the width, the cut-off (< 0 keeps all,
 * NaN the default) and the title (the profile's, else "Flame Graph"). */
static void fg_settle(const rbpeek_profile *p, const rbpeek_svg_options *opt, fg_page *pg, double *min_px)
{
    int width = opt && opt->width > 0 ? opt->width : FG_DEFAULT_WIDTH;
    if (width < FG_MIN_WIDTH) width = FG_MIN_WIDTH;
    if (width > FG_MAX_WIDTH) width = FG_MAX_WIDTH;
    pg->width = width;
    *min_px = FG_DEFAULT_MIN_PX;
    if (opt && opt->min_width_px != 0) *min_px = opt->min_width_px;   /* < 0 keeps all */
    if (*min_px != *min_px) *min_px = FG_DEFAULT_MIN_PX;               /* NaN */
    pg->title = opt && opt->title ? opt->title : rbpeek_profile_meta(p, "title");
    if (!pg->title) pg->title = "Flame Graph";
    pg->total = p->nodes[0].total;
}

/* The SVG's head: its size, title, style and script, and the background. */
static void fg_write_head(FILE *f, const fg_ctx *c, const fg_page *pg)
{
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", f);
    fprintf(f,
            "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            pg->width, pg->h, pg->width, pg->h);
    fputs("<!-- Flame graph written by rbpeek. Click a frame to zoom, Search (or Ctrl-F) to "
          "highlight frames matching a regular expression, Escape to reset. -->\n", f);
    fputs("<title>", f);
    rbp_xml_write(f, pg->title, SIZE_MAX);
    fputs("</title>\n", f);
    fprintf(f, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n", FG_STYLE);
    fprintf(f,
            "<script type=\"text/ecmascript\"><![CDATA[\n"
            "var rbpConf = { width: %d, height: %d, xpad: %d, fh: %d, font: %d, textDy: %s, "
            "inverted: %s, total: %llu, matchFill: 'rgb(230,0,230)' };\n%s]]></script>\n",
            pg->width, pg->h, FG_XPAD, FG_FRAME_H, FG_FONT, FG_STR(FG_TEXT_DY), c->inverted ? "true" : "false",
            (unsigned long long)pg->total, FG_SCRIPT);
    fputs("<defs><linearGradient id=\"rbp-bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
          "<stop stop-color=\"#f4f4f4\" offset=\"5%\"/><stop stop-color=\"#f4ecd8\" "
          "offset=\"95%\"/></linearGradient></defs>\n",
          f);
    fputs("<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"url(#rbp-bg)\"/>\n", f);
    fprintf(f, "<text id=\"rbp-title\" x=\"%d\" y=\"24\">", pg->width / 2);
    rbp_xml_write(f, pg->title, 300);
    fputs("</text>\n", f);
}

/* The colours' key, when they are not all Ruby's. */
static void fg_colour_key(FILE *f, const rbpeek_profile *p)
{
    bool seen[RBPEEK_FRAME_GVL + 1] = {false};
    for (uint32_t i = 0; i < p->nnames; i++)
        if (p->frames[i].d.kind >= 0 && p->frames[i].d.kind <= RBPEEK_FRAME_GVL) seen[p->frames[i].d.kind] = true;
    static const struct { int kind; const char *key; } keys[] = {
        {RBPEEK_FRAME_NATIVE, "blue: native frames"}, {RBPEEK_FRAME_JIT, "violet: JIT code"},
        {RBPEEK_FRAME_GC, "green: the GC"}, {RBPEEK_FRAME_GVL, "grey: waiting for the GVL"}};
    int nkeys = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (seen[keys[k].kind]) fprintf(f, "%s%s", nkeys++ ? ", " : "  \xC2\xB7  ", keys[k].key);
}

/* The subtitle: the profile's facts, the colours' key, and the cut-off
 * when it was raised. */
static void fg_write_subtitle(FILE *f, const fg_ctx *c, const fg_page *pg)
{
    const rbpeek_profile *p = c->p;
    fprintf(f, "<text id=\"rbp-subtitle\" x=\"%d\" y=\"42\">", pg->width / 2);
    int nfacts = 0;
    fg_fact(f, p, "ruby_version", "Ruby ", "", &nfacts);
    fg_fact(f, p, "pid", "pid ", "", &nfacts);
    /* The samples taken, then what the boxes count (the root's width),
     * when that is something else: both numbers, each with its word. */
    bool other_unit = strcmp(c->unit, "samples") != 0;
    if (rbpeek_profile_meta(p, "samples")) fg_fact(f, p, "samples", "", " samples", &nfacts);
    if (!rbpeek_profile_meta(p, "samples") || other_unit) {
        if (nfacts++) fputs("  \xC2\xB7  ", f);
        fg_count(f, c->unit, pg->total);
    }
    fg_fact(f, p, "rate_hz", "", " Hz", &nfacts);
    fg_colour_key(f, p);
    if (c->raised) {
        char px[48];
        rbp_fmt_fixed(px, sizeof px, c->min_px, 2);
        fprintf(f, "  \xC2\xB7  frames under %s px omitted", px);
    }
    fputs("</text>\n", f);
}

/* The buttons and the lines the script writes into. */
static void fg_write_controls(FILE *f, const fg_page *pg)
{
    fprintf(f, "<text id=\"rbp-unzoom\" class=\"rbp-btn hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
            FG_XPAD);
    fprintf(f, "<text id=\"rbp-search\" class=\"rbp-btn\" x=\"%d\" y=\"24\">Search</text>\n",
            pg->width - FG_XPAD);
    fprintf(f, "<text id=\"rbp-details\" x=\"%d\" y=\"%d\"> </text>\n", FG_XPAD, pg->h - 11);
    fprintf(f, "<text id=\"rbp-matched\" class=\"hide\" x=\"%d\" y=\"%d\"> </text>\n",
            pg->width - FG_XPAD, pg->h - 11);
    if (!pg->total)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">No samples</text>\n",
                pg->width / 2, FG_YPAD_TOP + 12);
}

rbpeek_status rbpeek_profile_write_svg(const rbpeek_profile *p, const char *path,
                                       const rbpeek_svg_options *opt)
{
    if (!p) return RBPEEK_ERR_ARG;
    if (p->err) p->err[0] = '\0';
    fg_page pg = {0};
    double min_px;
    fg_settle(p, opt, &pg, &min_px);
    uint64_t total = pg.total;

    rbp_children ch;
    rbpeek_status st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) return st;
    fg_ctx c = {.p = p, .width = pg.width, .min_px = min_px, .inverted = opt && opt->inverted,
                .ci_samples = opt && opt->ci_samples > 0 && opt->ci_z > 0 ? opt->ci_samples : 0,
                .ci_z = opt ? opt->ci_z : 0};
    c.unit = rbpeek_profile_meta(p, "unit");
    if (!c.unit || !*c.unit) c.unit = "samples";
    c.scale = total ? (double)(pg.width - 2 * FG_XPAD) / (double)total : 0;
    c.xnext = calloc((size_t)p->max_depth + 1, sizeof *c.xnext);
    if (!c.xnext) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing the SVG");
    }
    bool auto_cut = !(opt && opt->min_width_px != 0);
    if (total && auto_cut) st = fg_auto_cutoff(p, &c);
    if (total && st == RBPEEK_OK) st = rbp_profile_walk(p, &ch, fg_visit, &c);   /* measure */
    if (st == RBPEEK_OK) {
        uint32_t levels = total ? c.shown_depth + 1 : 1;
        c.height = FG_YPAD_TOP + (double)levels * FG_FRAME_H + FG_YPAD_BOTTOM;
        pg.h = (int)c.height;
        c.f = rbp_profile_open_out(p, path, &st);
    }
    if (c.f) {
        fg_write_head(c.f, &c, &pg);
        fg_write_subtitle(c.f, &c, &pg);
        fg_write_controls(c.f, &pg);
        fputs("<g id=\"rbp-frames\">\n", c.f);
        if (total) {
            c.pass = 1;
            c.shown = 0;
            st = rbp_profile_walk(p, &ch, fg_visit, &c);
        }
        if (st == RBPEEK_OK) fputs("</g>\n</svg>\n", c.f);
        st = rbp_profile_close_out(p, c.f, path, st);
    }
    free(c.xnext);
    rbp_children_free(&ch);
    return st;
}

/*
 * Discovery without symbols (see discover_scan.h).
 *
 * A core made on another machine comes without its binaries, and a core
 * leaves out the read-only pages of mapped files: `ruby_version`'s bytes
 * are in libruby's .rodata, so even when .dynsym names the symbol its
 * value cannot be read. What a core always has is the list of mapped files
 * (NT_FILE) and every written page, so the finders here use the image's
 * file name and its writable data (.data, and the .bss mapped anonymously
 * right after the image), where ruby_current_vm_ptr and ruby_global_symbols
 * live. Every scan is bounded and reads page by page, skipping what is not
 * mapped.
 */
#include "vm/discover_scan.h"

#include "vm/robject.h"

#include <stdio.h>
#include <string.h>

rbp_field_id rbp_vm_main_thread_field(const rbp_layout *L)
{
    if (rbp_has(L, RBP_L_vm_ractor_main_thread)) return RBP_L_vm_ractor_main_thread;
    return rbp_has(L, RBP_L_vm_main_thread) ? RBP_L_vm_main_thread : RBP_L_COUNT;
}

bool rbp_vm_plausible(rbpeek_session *s, uint64_t vm, char *why, size_t whylen)
{
    const rbp_layout *L = &s->layout;
    uint64_t main_th = 0, back = 0;
    rbp_field_id main_field = rbp_vm_main_thread_field(L);
    if (main_field == RBP_L_COUNT) {
        snprintf(why, whylen, "layout has no main thread member");
        return false;
    }
    if (!rbp_mem_u64(s->mem, vm + (uint64_t)rbp_off(L, main_field), &main_th)) {
        snprintf(why, whylen, "VM at 0x%llx is not readable", (unsigned long long)vm);
        return false;
    }
    if (!main_th) {
        snprintf(why, whylen, "VM at 0x%llx has no main thread (Ruby not started yet?)", (unsigned long long)vm);
        return false;
    }
    if (rbp_has(L, RBP_L_th_vm) && (!rbp_mem_u64(s->mem, main_th + (uint64_t)rbp_off(L, RBP_L_th_vm), &back) ||
                                    back != vm)) {
        snprintf(why, whylen, "0x%llx does not look like a Ruby VM (its main thread does not point back to it)",
                 (unsigned long long)vm);
        return false;
    }
    return true;
}

/* .bss of libruby is a few hundred KiB; 4 MiB past the image's last
 * mapping bounds the scan should an anonymous mapping follow it. */
#define BSS_SCAN_MAX (UINT64_C(4) << 20)
/* The image's writable data segment is its last file mapping; .data.rel.ro
 * before it is larger but holds no pointer we look for. */
#define DATA_SCAN_MAX (UINT64_C(8) << 20)

/* The file name of a path ("" for NULL). */
static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "";
}

bool rbp_is_ruby_image_path(const char *path)
{
    const char *base = base_name(path);
    return strncmp(base, "libruby", 7) == 0 || strncmp(base, "ruby", 4) == 0;
}

static bool is_libruby(const char *path) { return strncmp(base_name(path), "libruby", 7) == 0; }

bool rbp_version_from_image_name(const rbpeek_session *s, char *out, size_t n)
{
    for (size_t i = 0; i < s->nregions; i++) {
        const char *p = s->regions[i].path;
        if (!is_libruby(p)) continue;
        const char *so = strstr(base_name(p), ".so.");
        int a, b, c, len = 0;
        /* libruby.so.3.0.0 names the release; libruby-3.1.so.3.1 only its line. */
        if (so && sscanf(so, ".so.%d.%d.%d%n", &a, &b, &c, &len) == 3 && so[len] == '\0' && a >= 1 && a <= 9) {
            snprintf(out, n, "%d.%d.%d", a, b, c);
            return true;
        }
    }
    return false;
}

/* The span to scan: from the start of the Ruby image's last file mapping
 * (libruby's if there is one, else the ruby executable's) to the end of
 * readable memory after it, bounded. */
static bool data_span(const rbpeek_session *s, uint64_t *lo, uint64_t *image_end, uint64_t *hi)
{
    const rbp_region *best = NULL;
    for (int want_lib = 1; want_lib >= 0 && !best; want_lib--)
        for (size_t i = 0; i < s->nregions; i++) {
            const rbp_region *r = &s->regions[i];
            if (!rbp_is_ruby_image_path(r->path) || is_libruby(r->path) != (bool)want_lib) continue;
            if (!best || r->start > best->start) best = r;
        }
    if (!best || best->end <= best->start || best->end - best->start > DATA_SCAN_MAX) return false;
    *lo = best->start;
    *image_end = best->end;
    *hi = best->end + BSS_SCAN_MAX;
    return true;
}

/* Calls fn(s, word, address, ctx) for each aligned word of the span until it
 * returns true; returns the address it stopped at, or 0. Stops at the first
 * unreadable page after the image's own mapping. */
typedef bool (*word_fn)(rbpeek_session *s, uint64_t word, void *ctx);

static uint64_t scan_words(rbpeek_session *s, word_fn fn, void *ctx)
{
    uint64_t lo, image_end, hi;
    if (!data_span(s, &lo, &image_end, &hi)) return 0;
    uint64_t page[512];
    for (uint64_t base = lo; base < hi; base += sizeof page) {
        size_t got = rbp_mem_read_partial(s->mem, base, page, sizeof page);
        if (got == 0 && base >= image_end) break; /* past the .bss */
        for (size_t k = 0; k < got / 8; k++)
            if (page[k] && fn(s, page[k], ctx)) return base + k * 8;
    }
    return 0;
}

static bool equals(rbpeek_session *s, uint64_t word, void *ctx)
{
    (void)s;
    return word == *(const uint64_t *)ctx;
}

uint64_t rbp_scan_image_data_for(rbpeek_session *s, uint64_t value)
{
    return value ? scan_words(s, equals, &value) : 0;
}

static bool plausible_vm(rbpeek_session *s, uint64_t word, void *ctx)
{
    char why[160];
    if (word % 8 || !rbp_is_heap_ptr(s, word) || !rbp_vm_plausible(s, word, why, sizeof why)) return false;
    *(uint64_t *)ctx = word;
    return true;
}

uint64_t rbp_scan_image_data_for_vm(rbpeek_session *s, uint64_t *where)
{
    uint64_t vm = 0;
    *where = scan_words(s, plausible_vm, &vm);
    return *where ? vm : 0;
}

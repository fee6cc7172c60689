/*
 * fuzz_core: hostile core files. At start the recorded image (image.h) is
 * written out as an ELF core (a PT_NOTE with an NT_FILE note naming two
 * mapped files, one PT_LOAD per run of contiguous pages); each input then
 * edits that core as a broken one would look (truncated, segments dropped,
 * overlapping, moved, sizes and offsets wrong, header and note bytes
 * changed) before rbpeek opens it with rbpeek_session_use_core and runs the
 * operations the input picks, like `gdb -c CORE` then `ruby ...` does.
 *
 * Input: byte 0 = operation mask (ops.h, bits 0-7), byte 1 = mode, then
 * 8-byte edits: u8 kind, u8 segment, u16 arg, u32 value. Mode bit 0 opens
 * the core with rbpeek_session_use_core in a fresh session, exactly as
 * rbpeek-bt --core does; otherwise the core source is opened on its own
 * and served to one reused session through the reader callback (a fresh
 * session's 4 MiB page cache costs more page faults than the readers cost,
 * and the core source is the same code either way). Bits 3-4 are the
 * operations OP_LOCALS and OP_INSPECT (of thread bits 5-6). Through the callback, a census or
 * dump walks 2 of the heap's 53 page bodies from body 13 x (bits 5-6) (the
 * heap window of image.h), or, when bits 1-7 are all set, the whole heap
 * (some 0.7 s under the sanitizers); with use_core, which has no window,
 * they run only on the whole heap.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "image.h"
#include "memory/mem.h"
#include "ops.h"

#ifndef RBP_FUZZ_DATA
#define RBP_FUZZ_DATA "tests/fuzz/data"
#endif
#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

static image g_img;
static uint8_t *g_core;       /* the pristine core */
static size_t g_size, g_nseg, g_note_off, g_note_len;
static uint8_t *g_work;       /* the edited copy */
static size_t g_fsize;        /* the memfd's size now */
static int g_fd = -1;
static char g_path[64];
static rbpeek_session *g_s;   /* the reused session */
static rbp_source g_src;      /* this input's core source */

/* The core source, behind the heap window of image.h (g_img's). */
static long core_tramp(void *ctx, uint64_t addr, void *buf, size_t len)
{
    if (img_window_refuses(&g_img, addr, len)) return -1;
    return g_src.read ? g_src.read(g_src.ctx, addr, buf, len) : -1;
}

static void put_note(uint8_t *p, size_t *off, uint32_t type, const void *desc, uint32_t dlen)
{
    uint32_t hdr[3] = {5, dlen, type};
    memcpy(p + *off, hdr, 12);
    memcpy(p + *off + 12, "CORE\0\0\0", 8);
    memcpy(p + *off + 20, desc, dlen);
    *off += 20 + ((dlen + 3) & ~3u);
}

/* Builds the core: header, program headers, notes, then the pages. */
static void build_core(void)
{
    size_t nseg = 0;
    for (size_t i = 0; i < g_img.npages; i++)
        if (i == 0 || g_img.pages[i].addr != g_img.pages[i - 1].addr + IMG_PAGE) nseg++;
    /* NT_FILE: two mappings named after files that are not on this
     * machine, so the file fallback runs and finds nothing. */
    uint8_t nt_file[16 + 2 * 24 + 64] = {0};
    uint64_t hdr[2] = {2, IMG_PAGE};
    uint64_t ent[6] = {g_img.pages[0].addr, g_img.pages[0].addr + 16 * IMG_PAGE, 0,
                       g_img.pages[g_img.npages - 1].addr, g_img.pages[g_img.npages - 1].addr + IMG_PAGE, 3};
    memcpy(nt_file, hdr, 16);
    memcpy(nt_file + 16, ent, 48);
    memcpy(nt_file + 64, "/nonexistent/libruby.so.3.1\0/nonexistent/ruby\0", 46);
    uint8_t prstatus[336] = {0};
    g_note_len = 20 + sizeof nt_file + 20 + sizeof prstatus;
    size_t phoff = sizeof(Elf64_Ehdr);
    g_note_off = phoff + (nseg + 1) * sizeof(Elf64_Phdr);
    size_t data_off = (g_note_off + g_note_len + IMG_PAGE - 1) & ~(size_t)(IMG_PAGE - 1);
    g_size = data_off + g_img.npages * IMG_PAGE;
    g_core = calloc(1, g_size);
    g_work = malloc(g_size);
    if (!g_core || !g_work) abort();
    Elf64_Ehdr *eh = (Elf64_Ehdr *)g_core;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_CORE;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    eh->e_phoff = phoff;
    eh->e_ehsize = sizeof *eh;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = (uint16_t)(nseg + 1);
    Elf64_Phdr *ph = (Elf64_Phdr *)(g_core + phoff);
    ph[0] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = g_note_off, .p_filesz = g_note_len, .p_align = 4};
    size_t off = g_note_off;
    put_note(g_core, &off, NT_PRSTATUS, prstatus, sizeof prstatus);
    put_note(g_core, &off, NT_FILE, nt_file, sizeof nt_file);
    size_t seg = 0;
    for (size_t i = 0; i < g_img.npages; i++) {
        const img_page *p = &g_img.pages[i];
        size_t foff = data_off + i * IMG_PAGE;
        memcpy(g_core + foff, p->data, IMG_PAGE);
        if (i == 0 || p->addr != g_img.pages[i - 1].addr + IMG_PAGE) {
            seg++;
            ph[seg] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_offset = foff, .p_vaddr = p->addr,
                                   .p_align = IMG_PAGE};
        }
        ph[seg].p_filesz += IMG_PAGE;
        ph[seg].p_memsz += IMG_PAGE;
    }
    g_nseg = nseg + 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("RBPEEK_FUZZ_IMAGE");
    if (!path) path = RBP_FUZZ_DATA "/ruby3.1.img.gz";
    if (!img_load(&g_img, path) || g_img.npages == 0) abort();
    build_core();
    g_fd = memfd_create("fuzz_core", 0);
    if (g_fd < 0) abort();
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    g_s = rbpeek_session_new();
    if (!g_s || rbpeek_session_use_reader(g_s, core_tramp, NULL) != RBPEEK_OK ||
        rbpeek_session_use_lookup(g_s, img_lookup, &g_img) != RBPEEK_OK)
        abort();
    fuzz_image_heap(&g_img);
    fuzz_window_img = &g_img;
    return 0;
}

static void edit(uint8_t *c, size_t *size, const uint8_t *e)
{
    uint8_t kind = e[0];
    uint16_t arg;
    uint32_t val;
    memcpy(&arg, e + 2, 2);
    memcpy(&val, e + 4, 4);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)c;
    Elf64_Phdr *ph = (Elf64_Phdr *)(c + sizeof *eh);
    Elf64_Phdr *p = &ph[e[1] % g_nseg];
    const Elf64_Phdr *q = &ph[val % g_nseg];
    switch (kind % 10) {
    case 0: *size = val % (*size + 1); break;                               /* truncated */
    case 1: p->p_type = PT_NULL; break;                                      /* missing segment */
    case 2: p->p_vaddr = q->p_vaddr + (uint64_t)(int16_t)arg * IMG_PAGE; break; /* overlapping */
    case 3: p->p_offset += (int64_t)(int32_t)val; break;
    case 4: p->p_filesz = (int32_t)val < 0 ? ~(uint64_t)0 - (uint32_t)-(int32_t)val : val; break;
    case 5: p->p_memsz = (uint64_t)val << (arg & 31); break;
    case 6: *p = *q; break;                                                  /* duplicated */
    case 7: c[val % (g_note_off + g_note_len)] = (uint8_t)arg; break;        /* headers, notes */
    case 8: c[g_note_off + val % g_note_len] = (uint8_t)arg; break;
    case 9: eh->e_phnum = (uint16_t)(arg % (g_nseg + 2)); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    unsigned ops = data[0] | (unsigned)((data[1] >> 3) & 3) << 8;
    bool whole_heap = (data[1] | 1) == 0xff;
    img_set_heap_window(&g_img, (size_t)((data[1] >> 5) & 3) * 13, whole_heap ? 0 : 2);
    if ((data[1] & 1) && !whole_heap) ops &= ~(unsigned)(OP_CENSUS | OP_DUMP);
    size_t csize = g_size;
    memcpy(g_work, g_core, g_note_off + g_note_len);
    for (size_t i = 2; i + 8 <= size; i += 8) edit(g_work, &csize, data + i);
    /* Only the headers change and the size: the pages past them are the
     * pristine core's, written again only where the last input cut them. */
    size_t head = g_note_off + g_note_len;
    if (pwrite(g_fd, g_work, head < csize ? head : csize, 0) < 0) abort();
    if (csize < g_fsize && ftruncate(g_fd, (off_t)csize) != 0) abort();
    if (csize > g_fsize) {
        size_t from = g_fsize > head ? g_fsize : head;
        if (csize > from && pwrite(g_fd, g_core + from, csize - from, (off_t)from) < 0) abort();
    }
    g_fsize = csize;
    if (data[1] & 1) {
        rbpeek_session *s = rbpeek_session_new();
        if (rbpeek_session_use_core(s, g_path) == RBPEEK_OK) {
            rbpeek_session_use_lookup(s, img_lookup, &g_img);
            if (fuzz_attach(s)) fuzz_run_ops(s, ops, 0, 0, (data[1] >> 5) & 3);
        } else if (rbpeek_session_error(s)[0] == '\0') {
            abort(); /* a refused core must say why */
        }
        rbpeek_session_free(s);
        return 0;
    }
    char err[256] = "";
    rbp_region *regions = NULL;
    size_t n = rbp_source_core_regions(g_path, &regions);
    for (size_t i = 0; i < n; i++) free(regions[i].path);
    free(regions);
    if (rbp_source_core(g_path, &g_src, err, sizeof err)) {
        if (fuzz_attach(g_s)) fuzz_run_ops(g_s, ops, 0, 0, (data[1] >> 5) & 3);
        fuzz_end_run(g_s);
        if (g_src.close) g_src.close(g_src.ctx);
    } else if (!err[0]) {
        abort();
    }
    g_src = (rbp_source){0};
    return 0;
}

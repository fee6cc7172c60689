/*
 * .eh_frame_hdr's search table as a list of function starts: which
 * function of a module holds an address when no symbol says (see
 * eh_frame_hdr.h). Only the table's layout is read, never the CFI itself,
 * which libdwfl interprets for the unwinder.
 */
#include "native/dwfl/eh_frame_hdr.h"

#include <string.h>

/* .eh_frame_hdr (the LSB's exception frame header, which PT_GNU_EH_FRAME
 * points at): a version byte, three pointer encodings, the .eh_frame
 * pointer, the entry count, then the search table the unwinder itself
 * uses to find an FDE: (initial location, FDE address) pairs sorted by
 * location. Only its layout is read here, not the CFI: the table gives
 * each function's first address, which is what a C method's function
 * pointer is compared with. The encodings every x86-64 linker writes are
 * the only ones taken: the table's as data-relative signed 4-byte values
 * (0x3b), the others as fixed-size 4- or 8-byte values. */
static int enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x02: case 0x0a: return 2;   /* udata2, sdata2 */
    case 0x03: case 0x0b: return 4;   /* udata4, sdata4 */
    case 0x04: case 0x0c: return 8;   /* udata8, sdata8 */
    default: return -1;
    }
}

void rbp_eh_frame_hdr_function(Elf *e, uint64_t bias, uint64_t at, uint64_t *lo, uint64_t *hi)
{
    size_t nph = 0;
    if (!e || elf_getphdrnum(e, &nph) != 0) return;
    for (size_t i = 0; i < nph && i < 256; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME) continue;
        Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
        if (!d || d->d_size < 4) return;
        const uint8_t *h = d->d_buf;
        size_t len = d->d_size;
        int ptr_size = enc_size(h[1]), count_size = enc_size(h[2]);
        if (h[0] != 1 || h[3] != 0x3b || ptr_size < 0 || (count_size != 4 && count_size != 8)) return;
        size_t pos = 4 + (size_t)ptr_size;
        if (pos + (size_t)count_size > len) return;
        uint64_t count = 0;
        memcpy(&count, h + pos, (size_t)count_size); /* little-endian */
        pos += (size_t)count_size;
        if (count == 0 || count > (len - pos) / 8) return;
        const uint8_t *table = h + pos;
        int64_t want = (int64_t)(at - bias) - (int64_t)ph.p_vaddr; /* relative to the header, as the table */
        size_t l = 0, r = (size_t)count; /* first entry whose location is > want */
        while (l < r) {
            size_t mid = l + (r - l) / 2;
            int32_t loc;
            memcpy(&loc, table + mid * 8, 4);
            if (loc <= want) l = mid + 1;
            else r = mid;
        }
        if (l == 0) return;
        int32_t start, next = 0;
        memcpy(&start, table + (l - 1) * 8, 4);
        *lo = bias + ph.p_vaddr + (int64_t)start;
        if (l < count) {
            memcpy(&next, table + l * 8, 4);
            *hi = bias + ph.p_vaddr + (int64_t)next;
        } else {
            *hi = *lo + 1; /* the last function: its end is not in the table */
            if (at >= *hi) *hi = at + 1;
        }
        return;
    }
}

/*
 * The target's ELF machine (see machine.h): which machines rbpeek reads
 * (one list, RBP_READ), the names of the others so that a refusal can
 * name what it found, the debuggers' spellings of them, and the machine
 * field of an ELF header. e_machine sits at byte 18 of both ELF classes,
 * in the byte order e_ident[EI_DATA] gives, so one reader serves a 32-bit
 * or big-endian target's header too: the refusal names it all the same.
 */
#include "memory/machine.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"

/* The machines rbpeek has struct tables, registers (memory/regset.c) and
 * an unwinder for. */
static const uint16_t RBP_READ[] = {EM_X86_64, EM_AARCH64};

static const struct {
    uint16_t machine;
    const char *name;
} NAMES[] = {
    {EM_X86_64, "x86-64"}, {EM_AARCH64, "aarch64"}, {EM_386, "i386"},    {EM_ARM, "arm"},
    {EM_RISCV, "riscv"},   {EM_PPC64, "ppc64"},     {EM_PPC, "ppc"},     {EM_S390, "s390x"},
    {EM_MIPS, "mips"},     {EM_LOONGARCH, "loongarch"}, {EM_SPARCV9, "sparc64"},
};

bool rbp_machine_read(uint16_t m)
{
    for (size_t i = 0; i < sizeof RBP_READ / sizeof RBP_READ[0]; i++)
        if (RBP_READ[i] == m) return true;
    return false;
}

void rbp_machines_read(char *buf, size_t n)
{
    size_t used = 0;
    if (n) buf[0] = '\0';
    size_t count = sizeof RBP_READ / sizeof RBP_READ[0];
    for (size_t i = 0; i < count && used < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " and " : ", ";
        int k = snprintf(buf + used, n - used, "%s%s", sep, rbp_machine_name(RBP_READ[i]));
        if (k < 0) break;
        used += (size_t)k;
    }
}

unsigned rbp_machine_user_bits(uint16_t m) { return m == EM_AARCH64 ? 48 : 47; }

const char *rbp_machine_name(uint16_t m)
{
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (NAMES[i].machine == m) return NAMES[i].name;
    return NULL;
}

uint16_t rbp_machine_by_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strcmp(NAMES[i].name, name) == 0) return NAMES[i].machine;
    return RBP_MACHINE_UNKNOWN;
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

uint16_t rbp_machine_from_debugger(const char *name)
{
    if (!name || !*name) return RBP_MACHINE_UNKNOWN;
    /* Longest spellings first: "i386:x86-64" is x86-64, "i386" alone is not. */
    if (starts(name, "i386:x86-64") || starts(name, "x86_64") || starts(name, "x86-64") || starts(name, "amd64"))
        return EM_X86_64;
    if (starts(name, "aarch64") || starts(name, "arm64")) return EM_AARCH64;
    if (starts(name, "i386") || (name[0] == 'i' && strlen(name) >= 4 && starts(name + 2, "86"))) return EM_386;
    if (starts(name, "arm")) return EM_ARM;
    if (starts(name, "riscv")) return EM_RISCV;
    if (starts(name, "powerpc64") || starts(name, "ppc64") || strstr(name, "common64")) return EM_PPC64;
    if (starts(name, "powerpc") || starts(name, "ppc")) return EM_PPC;
    if (starts(name, "s390")) return EM_S390;
    if (starts(name, "mips")) return EM_MIPS;
    if (starts(name, "loongarch")) return EM_LOONGARCH;
    return RBP_MACHINE_UNKNOWN;
}

bool rbp_elf_header_machine(const void *hdr, size_t n, uint16_t *machine)
{
    const unsigned char *h = hdr;
    if (n < 20 || memcmp(h, ELFMAG, SELFMAG) != 0) return false;
    if (h[EI_DATA] == ELFDATA2MSB) *machine = (uint16_t)(h[18] << 8 | h[19]);
    else if (h[EI_DATA] == ELFDATA2LSB) *machine = (uint16_t)(h[19] << 8 | h[18]);
    else return false;
    return true;
}

bool rbp_file_machine(const char *path, uint16_t *machine)
{
    char kind[64];
    int fd = rbp_open_target_file(path, kind, sizeof kind);
    if (fd < 0) return false;
    unsigned char h[20];
    bool ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && rbp_elf_header_machine(h, sizeof h, machine);
    close(fd);
    return ok;
}

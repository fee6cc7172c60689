/*
 * Tests of the target's architecture (memory/machine.c, context/machine.c):
 * a target of a machine rbpeek does not read (riscv here) is refused in one
 * line that names what was found (riscv, ELF machine 243, and where it was
 * seen) and what rbpeek reads (x86-64 and aarch64), from every source the
 * session learns it from: a core's ELF header (use_core, set_core_file,
 * add_core_regions), the debugger's architecture (set_arch), the ELF header
 * of a Ruby image mapped (attach), and again at attach when a caller
 * ignored the first refusal. The fixtures are ELF headers made here as
 * those of issue 39's real arm64 files read (the core qemu-aarch64 wrote
 * of Debian's arm64 ruby3.1 on SIGQUIT: ET_CORE, EM_AARCH64; Debian's
 * arm64 libruby-3.1.so.3.1.2: ET_DYN), with their machine changed to one
 * rbpeek does not read; the same headers as arm64's and x86-64's are not
 * refused for their machine (it.arch_read reads the real arm64 ones). The
 * mapping of debuggers' names is checked with the names gdb and lldb gave.
 */
#include "cu_main.h"
#include "fixture_files.h"

#include <elf.h>
#include <limits.h>
#include <string.h>

#include "context/context.h"
#include "memory/machine.h"

/* A 64-byte ELF header of a file of type type (ET_CORE, ET_DYN) for machine. */
static char *header_of(uint16_t machine, uint16_t type, size_t *len)
{
    Elf64_Ehdr *eh = calloc(1, sizeof *eh);
    CU_ASSERT_FATAL(eh != NULL);
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = type;
    eh->e_machine = machine;
    eh->e_version = EV_CURRENT;
    eh->e_phoff = sizeof *eh;
    eh->e_ehsize = sizeof *eh;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    *len = sizeof *eh;
    return (char *)eh;
}

/* A core's header (of machine) in a file of its own (a core to open). */
static void core_file(char *path, size_t cap, uint16_t machine)
{
    size_t len;
    char *data = header_of(machine, ET_CORE, &len);
    tmp_path(path, cap, "machine", "header.core");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(fwrite(data, 1, len, f) == len);
    fclose(f);
    free(data);
}

/* The refusal: one line naming the machine found, where, and what rbpeek reads. */
static void assert_refusal(const rbpeek_session *s, const char *where)
{
    const char *e = rbpeek_session_error(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "the target is riscv (ELF machine 243, from "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, where));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "rbpeek reads x86-64 and aarch64 targets only"));
    CU_ASSERT_PTR_NULL(strchr(e, '\n'));
}

static void test_names(void)
{
    CU_ASSERT_TRUE(rbp_machine_read(EM_X86_64));
    CU_ASSERT_TRUE(rbp_machine_read(EM_AARCH64));
    CU_ASSERT_FALSE(rbp_machine_read(EM_RISCV));
    CU_ASSERT_FALSE(rbp_machine_read(EM_386));
    CU_ASSERT_FALSE(rbp_machine_read(RBP_MACHINE_UNKNOWN));
    CU_ASSERT_STRING_EQUAL(rbp_machine_name(EM_AARCH64), "aarch64");
    CU_ASSERT_PTR_NULL(rbp_machine_name(4242));
    CU_ASSERT_EQUAL(rbp_machine_by_name("aarch64"), EM_AARCH64);
    CU_ASSERT_EQUAL(rbp_machine_by_name("vax"), RBP_MACHINE_UNKNOWN);
    char read[64];
    rbp_machines_read(read, sizeof read);
    CU_ASSERT_STRING_EQUAL(read, "x86-64 and aarch64");
    /* gdb 13's and gdb-multiarch's names, lldb-16's triples */
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("i386:x86-64"), EM_X86_64);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("x86_64-pc-linux-gnu"), EM_X86_64);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("aarch64"), EM_AARCH64);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("aarch64--linux"), EM_AARCH64);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("arm64-apple-macosx"), EM_AARCH64);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("i386"), EM_386);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("i686-pc-linux-gnu"), EM_386);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("riscv:rv64"), EM_RISCV);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("i"), RBP_MACHINE_UNKNOWN);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger("auto"), RBP_MACHINE_UNKNOWN);
    CU_ASSERT_EQUAL(rbp_machine_from_debugger(""), RBP_MACHINE_UNKNOWN);
}

static void test_header(void)
{
    size_t len;
    char *core = header_of(EM_AARCH64, ET_CORE, &len);
    uint16_t m = 0;
    CU_ASSERT_TRUE(rbp_elf_header_machine(core, len, &m));
    CU_ASSERT_EQUAL(m, EM_AARCH64);
    CU_ASSERT_FALSE(rbp_elf_header_machine(core, 19, &m));   /* too short for e_machine */
    /* a big-endian header (s390x) reads in its own byte order */
    unsigned char be[20] = {0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2MSB, 1};
    be[18] = 0;
    be[19] = EM_S390;
    CU_ASSERT_TRUE(rbp_elf_header_machine(be, sizeof be, &m));
    CU_ASSERT_EQUAL(m, EM_S390);
    core[1] = 'X';
    CU_ASSERT_FALSE(rbp_elf_header_machine(core, len, &m));   /* no ELF magic */
    free(core);
}

static void test_use_core(void)
{
    char path[PATH_MAX];
    core_file(path, sizeof path, EM_RISCV);
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL(rbpeek_session_use_core(s, path), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the core's ELF header");
    unlink(path);
    /* an arm64 core is read: this one (a header alone) fails for what it lacks */
    core_file(path, sizeof path, EM_AARCH64);
    CU_ASSERT_EQUAL(rbpeek_session_use_core(s, path), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "program headers missing"));
    CU_ASSERT_PTR_NULL(strstr(rbpeek_session_error(s), "rbpeek reads"));
    rbpeek_session_free(s);
    unlink(path);
}

/* A debugger's session: memory through a reader, the core it has open. */
static long no_memory(void *ctx, uint64_t addr, void *buf, size_t len)
{
    (void)ctx, (void)addr, (void)buf, (void)len;
    return -1;
}

static void test_debugger_core(void)
{
    char path[PATH_MAX];
    core_file(path, sizeof path, EM_RISCV);
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, no_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_add_core_regions(s, path), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the core's ELF header");
    CU_ASSERT_EQUAL(rbpeek_session_set_core_file(s, path), RBPEEK_ERR_UNSUPPORTED);
    /* a caller that went on all the same is refused again at attach */
    CU_ASSERT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the core's ELF header");
    /* a new source is a new target: its machine is unknown again */
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, no_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_NOT_RUBY);
    rbpeek_session_free(s);
    unlink(path);
}

static void test_set_arch(void)
{
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, no_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_set_arch(s, "i386:x86-64"), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_set_arch(s, "auto"), RBPEEK_OK);   /* a name it does not know says nothing */
    CU_ASSERT_STRING_EQUAL(rbpeek_session_register_names(s),
                           "rax rdx rcx rbx rsi rdi rbp rsp r8 r9 r10 r11 r12 r13 r14 r15 rip");
    /* a new target: an arm64 one is read, with its own registers */
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, no_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_set_arch(s, "aarch64"), RBPEEK_OK);
    CU_ASSERT_STRING_EQUAL(rbpeek_session_register_names(s),
                           "x0 x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17 x18 x19 x20 x21 x22 x23 "
                           "x24 x25 x26 x27 x28 x29|fp x30|lr sp pc");
    CU_ASSERT_EQUAL(rbpeek_session_set_arch(s, "riscv:rv64"), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the debugger's architecture riscv:rv64");
    /* x86-64 said after does not outvote it */
    CU_ASSERT_EQUAL(rbpeek_session_set_arch(s, "i386:x86-64"), RBPEEK_ERR_UNSUPPORTED);
    CU_ASSERT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the debugger's architecture riscv:rv64");
    rbpeek_session_free(s);
}

/* Memory holding a libruby's ELF header at its load address (riscv's,
 * arm64's): an emulator's process, read through a debugger. */
#define IMAGE_BASE 0x5502880000ull
#define RUBY_BASE 0x5501000000ull
static const char *image_header;
static char ruby_header[64];   /* a ruby executable's, when its machine is set */

static long image_memory(void *ctx, uint64_t addr, void *buf, size_t len)
{
    (void)ctx;
    const char *src = NULL;
    uint64_t base = 0;
    if (addr >= IMAGE_BASE && addr - IMAGE_BASE < 64) src = image_header, base = IMAGE_BASE;
    if (addr >= RUBY_BASE && addr - RUBY_BASE < 64 && ruby_header[18]) src = ruby_header, base = RUBY_BASE;
    if (!src) return -1;
    size_t n = 64 - (size_t)(addr - base);
    if (n > len) n = len;
    memcpy(buf, src + (addr - base), n);
    return (long)n;
}

static void test_mapped_image(void)
{
    size_t len;
    char *hdr = header_of(EM_RISCV, ET_DYN, &len);
    image_header = hdr;
    const char *lib = "/nonexistent/usr/lib/riscv64-linux-gnu/libruby-3.1.so.3.1.2";
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, image_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_add_region(s, IMAGE_BASE, IMAGE_BASE + 0x36f000, 0, lib), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_UNSUPPORTED);
    assert_refusal(s, "the ELF header of /nonexistent/usr/lib/riscv64-linux-gnu/libruby-3.1.so.3.1.2");
    /* beside an x86-64 ruby executable, a riscv libruby mapped (as data) is outvoted */
    memcpy(ruby_header, hdr, sizeof ruby_header);
    ruby_header[18] = EM_X86_64;
    CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, image_memory, NULL), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_add_region(s, RUBY_BASE, RUBY_BASE + 0x1000, 0, "/nonexistent/usr/bin/ruby"),
                    RBPEEK_OK);
    CU_ASSERT_NOT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(strstr(rbpeek_session_error(s), "riscv"));
    rbpeek_session_free(s);
    memset(ruby_header, 0, sizeof ruby_header);
    /* the same image as x86-64's or arm64's: not refused for its machine (no Ruby in it, though) */
    const uint16_t read[] = {EM_X86_64, EM_AARCH64};
    for (size_t i = 0; i < 2; i++) {
        s = rbpeek_session_new();
        hdr[18] = (char)read[i];
        CU_ASSERT_EQUAL(rbpeek_session_use_reader(s, image_memory, NULL), RBPEEK_OK);
        CU_ASSERT_EQUAL(rbpeek_session_add_region(s, IMAGE_BASE, IMAGE_BASE + 0x36f000, 0, lib), RBPEEK_OK);
        CU_ASSERT_NOT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NULL(strstr(rbpeek_session_error(s), "rbpeek reads"));
        rbpeek_session_free(s);
    }
    free(hdr);
}

static const rbp_cu_test TESTS[] = {
    {"machine names and debuggers' names", test_names},
    {"the machine of an ELF header", test_header},
    {"use_core refuses a riscv core in one line, opens an arm64 one", test_use_core},
    {"a debugger's riscv core: add_core_regions, set_core_file, attach", test_debugger_core},
    {"set_arch: the debugger's architecture, the registers' names", test_set_arch},
    {"attach refuses a mapped riscv libruby, not an arm64 one", test_mapped_image},
    {NULL, NULL},
};

RBP_CU_MAIN("machine", TESTS)

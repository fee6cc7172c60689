/*
 * The step through a frame of YJIT's code (native/dwfl/jit_step.c), over
 * a made-up target: a "module" of code whose bytes end in each form of
 * call instruction, and stacks laid out as YJIT's entry prologue leaves
 * them per release (3.1's and 3.3/3.4's without frame pointers, with
 * short-lived pushes above; --yjit-perf's frame pointer; a stop in the
 * prologue) and as garbage: the caller's registers must be exactly those
 * the entry saved, and where no return address after a call into a module
 * lies above the frame, the step fails saying so.
 */
#include <string.h>

#include "cu_main.h"
#include "native/dwfl/jit_step.h"

/* x86-64's 17 registers, every one known (YJIT's frames are x86-64's) */
#define X86_ALL (((rbp_regmask)1 << 17) - 1)

#define MOD_LO 0x400000ull
#define MOD_HI 0x401000ull
#define STACK 0x7ff000000000ull

static uint8_t g_code[MOD_HI - MOD_LO];
static uint64_t g_stack[64];

static long fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    (void)ctx;
    if (addr >= MOD_LO && addr + len <= MOD_HI) {
        memcpy(buf, g_code + (addr - MOD_LO), len);
        return (long)len;
    }
    if (addr >= STACK && addr < STACK + sizeof g_stack) {
        size_t n = len < STACK + sizeof g_stack - addr ? len : (size_t)(STACK + sizeof g_stack - addr);
        memcpy(buf, (uint8_t *)g_stack + (addr - STACK), n);
        return (long)n;
    }
    return -1;
}

static bool fake_in_module(void *ctx, uint64_t addr)
{
    (void)ctx;
    return addr >= MOD_LO && addr < MOD_HI;
}

static const rbp_uw_host HOST = {.ctx = NULL, .read = fake_read};

/* Writes bytes at code offset off; returns the address just after them. */
static uint64_t put(uint64_t off, const uint8_t *b, size_t n)
{
    memcpy(g_code + off, b, n);
    return MOD_LO + off + n;
}

static void test_after_call(void)
{
    memset(g_code, 0x90, sizeof g_code);
    const uint8_t direct[] = {0xe8, 1, 2, 3, 4};                 /* call rel32 */
    const uint8_t reg[] = {0xff, 0xd0};                          /* call *%rax */
    const uint8_t rex_reg[] = {0x41, 0xff, 0xd3};                /* call *%r11 */
    const uint8_t disp8[] = {0xff, 0x50, 0x08};                  /* call *8(%rax) */
    const uint8_t rip[] = {0xff, 0x15, 1, 2, 3, 4};              /* call *disp(%rip) */
    const uint8_t sib[] = {0xff, 0x14, 0x24};                    /* call *(%rsp) */
    const uint8_t sib32[] = {0xff, 0x94, 0x24, 1, 2, 3, 4};      /* call *disp32(%rsp) */
    const uint8_t not_call[] = {0xff, 0xe0};                     /* jmp *%rax */
    const uint8_t mov[] = {0x48, 0x89, 0xc7};                    /* mov %rax, %rdi */
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x100, direct, sizeof direct)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x200, reg, sizeof reg)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x300, rex_reg, sizeof rex_reg)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x400, disp8, sizeof disp8)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x500, rip, sizeof rip)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x600, sib, sizeof sib)));
    CU_ASSERT(rbp_jit_after_call(&HOST, put(0x700, sib32, sizeof sib32)));
    CU_ASSERT(!rbp_jit_after_call(&HOST, put(0x800, not_call, sizeof not_call)));
    CU_ASSERT(!rbp_jit_after_call(&HOST, put(0x900, mov, sizeof mov)));
    CU_ASSERT(!rbp_jit_after_call(&HOST, 0x1234)); /* unreadable */
}

/* The return address every stack below uses: after call *%rax. */
static uint64_t ret_addr(void)
{
    memset(g_code, 0x90, sizeof g_code);
    const uint8_t reg[] = {0xff, 0xd0};
    return put(0x200, reg, sizeof reg);
}

static void regs_at(uint64_t sp, uint64_t regs[RBP_REGS_MAX], rbp_regmask *known)
{
    memset(regs, 0, RBP_REGS_MAX * sizeof *regs);
    regs[RBP_UW_X86_RSP] = sp;
    regs[RBP_UW_X86_RIP] = 0x7e0000001000ull; /* in the JIT code */
    regs[RBP_UW_X86_RBP] = 0xb0b0;
    regs[RBP_UW_X86_R14] = 0x1414;
    regs[RBP_UW_X86_RBX] = 0xeeee;            /* the JIT code's own: not the caller's */
    regs[RBP_UW_X86_R12] = 0xeeee;
    regs[RBP_UW_X86_R13] = 0xeeee;
    *known = X86_ALL & ~((rbp_regmask)1 << RBP_UW_X86_R15);
}

static void test_no_frame_pointer(void)
{
    uint64_t ret = ret_addr();
    memset(g_stack, 0, sizeof g_stack);
    /* two short-lived pushes (a hash and its alignment twin), then rbx,
     * r12, r13 as the entry pushed them, then the return address */
    g_stack[0] = 0x5555000;
    g_stack[1] = 0x5555000;
    g_stack[2] = 0x3333; /* rbx */
    g_stack[3] = 0x1212; /* r12 */
    g_stack[4] = 0x1313; /* r13 */
    g_stack[5] = ret;
    uint64_t regs[RBP_REGS_MAX], out[RBP_REGS_MAX];
    rbp_regmask known, k;
    char why[256];
    regs_at(STACK, regs, &known);
    CU_ASSERT_FATAL(rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RIP], ret);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RSP], STACK + 6 * 8);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RBX], 0x3333);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R12], 0x1212);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R13], 0x1313);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RBP], 0xb0b0); /* untouched by YJIT: the caller's */
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R14], 0x1414);
    CU_ASSERT(!(k & ((rbp_regmask)1 << RBP_UW_X86_R15)));     /* not known before, not after */
    CU_ASSERT(!(k & ((rbp_regmask)1 << 0)));                  /* rax: the JIT code's scratch, unknown */
}

static void test_frame_pointer(void)
{
    uint64_t ret = ret_addr();
    memset(g_stack, 0, sizeof g_stack);
    /* --yjit-perf: push rbp; mov rbp, rsp; push rbp; then r13, r12, rbx */
    uint64_t at = STACK + 5 * 8;
    g_stack[0] = 0x3333;     /* rbx */
    g_stack[1] = 0x1212;     /* r12 */
    g_stack[2] = 0x1313;     /* r13 */
    g_stack[3] = at - 8;     /* the copy of rbp */
    g_stack[4] = 0xcafe;     /* the caller's rbp */
    g_stack[5] = ret;
    uint64_t regs[RBP_REGS_MAX], out[RBP_REGS_MAX];
    rbp_regmask known, k;
    char why[256];
    regs_at(STACK, regs, &known);
    regs[RBP_UW_X86_RBP] = at - 8;
    CU_ASSERT_FATAL(rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RIP], ret);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RSP], at + 8);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RBP], 0xcafe);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RBX], 0x3333);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R12], 0x1212);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R13], 0x1313);
}

static void test_in_prologue(void)
{
    uint64_t ret = ret_addr();
    memset(g_stack, 0, sizeof g_stack);
    /* stopped after push r13: r12 and rbx still hold the caller's */
    g_stack[0] = 0x1313;
    g_stack[1] = ret;
    uint64_t regs[RBP_REGS_MAX], out[RBP_REGS_MAX];
    rbp_regmask known, k;
    char why[256];
    regs_at(STACK, regs, &known);
    regs[RBP_UW_X86_R12] = 0x1212;
    regs[RBP_UW_X86_RBX] = 0x3333;
    CU_ASSERT_FATAL(rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RSP], STACK + 2 * 8);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R13], 0x1313);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_R12], 0x1212);
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RBX], 0x3333);
}

static void test_garbage(void)
{
    uint64_t ret = ret_addr();
    uint64_t regs[RBP_REGS_MAX], out[RBP_REGS_MAX];
    rbp_regmask known, k;
    char why[256];
    /* words in the module but not after a call, stack addresses, values */
    for (size_t i = 0; i < 64; i++) g_stack[i] = i % 3 == 0 ? MOD_LO + 0x900 + i : i % 3 == 1 ? STACK + i : i;
    regs_at(STACK, regs, &known);
    CU_ASSERT(!rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "YJIT"));
    CU_ASSERT_EQUAL(k, 0);
    /* a return address too far above the frame (beyond the prologue's
     * reach) is not taken */
    g_stack[40] = ret;
    CU_ASSERT(!rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    /* an unreadable stack, an unknown stack pointer */
    regs[RBP_UW_X86_RSP] = 0x10;
    CU_ASSERT(!rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    rbp_regmask no_sp = known & ~((rbp_regmask)1 << RBP_UW_X86_RSP);
    CU_ASSERT(!rbp_jit_step(&HOST, fake_in_module, NULL, regs, no_sp, out, &k, why, sizeof why));
    /* the stack's end: a short read is searched as far as it goes */
    memset(g_stack, 0, sizeof g_stack);
    g_stack[63] = ret;
    regs[RBP_UW_X86_RSP] = STACK + 60 * 8;
    CU_ASSERT(rbp_jit_step(&HOST, fake_in_module, NULL, regs, known, out, &k, why, sizeof why));
    CU_ASSERT_EQUAL(out[RBP_UW_X86_RSP], STACK + 64 * 8);
}

static const rbp_cu_test TESTS[] = {
    {"a return address after each form of call", test_after_call},
    {"3.1, 3.3, 3.4: no frame pointer, short pushes above", test_no_frame_pointer},
    {"--yjit-perf: a frame pointer", test_frame_pointer},
    {"a stop in the entry prologue", test_in_prologue},
    {"garbage: no verified return address, a cut", test_garbage},
    {NULL, NULL},
};

RBP_CU_MAIN("native_jit_step", TESTS)

/*
 * Tests of how attach settles the members whose place depends on the size
 * of rb_jmpbuf_t (validate.c), on a synthetic image of one VM with one
 * thread: rb_thread_t.name is settled by what it holds (nil or a String),
 * rb_fiber_t.status follows the same choice, or, in a layout without a
 * name alternative, is settled by the running fiber reading FIBER_RESUMED;
 * when nothing tells, the member is left unknown rather than guessed.
 * The image's offsets are the test's own, not any Ruby's.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/robject.h"
#include "vm/validate.h"

enum {
    VM = 0x100000,      /* main_thread at 0, living_threads list head at 16 */
    TH = 0x200000,      /* lt node 0, self 16, ec 24; names at 40 and 200 */
    TH_SELF = 0x300000, /* the Thread object: a T_DATA */
    NAME = 0x300040,    /* a String */
    FIBER = 0x400000,   /* the running fiber; its ec is at +80 */
    EC = FIBER + 80,    /* vm_stack 0, size 8, cfp 16, fiber 24, thread 32 */
    STACK = 0x500000,   /* 64 words, the current frame the last of them */
    NAME_BUILTIN = 40, NAME_GLIBC = 200,
    STATUS_BUILTIN = 600, STATUS_GLIBC = 760,
    QNIL = 0x08,        /* Ruby before 3.2 */
};

typedef struct world {
    image im;
    uint8_t *th, *fiber;
    rbpeek_session *s;
} world;

/* One thread whose name is nil at name_at (and garbage elsewhere), its
 * fiber's status word 1 at resumed_at (0 when none) and 0x12 elsewhere. */
static void make(world *w, int name_at, int resumed_at, bool name_alt, bool fiber_alt)
{
    memset(w, 0, sizeof *w);
    image *im = &w->im;
    uint8_t *vm = add_region(im, VM, 64);
    w->th = add_region(im, TH, 512);
    uint8_t *obj = add_region(im, TH_SELF, 256);
    w->fiber = add_region(im, FIBER, 1024);
    uint8_t *stack = add_region(im, STACK, 64 * 8);
    put64(vm + 0, TH);
    put64(vm + 16, TH), put64(vm + 24, TH);        /* a list of one thread */
    put64(w->th + 0, VM + 16), put64(w->th + 8, VM + 16);
    put64(w->th + 16, TH_SELF);
    put64(w->th + 24, EC);
    put64(w->th + NAME_BUILTIN, 0x1234567);          /* not a VALUE */
    put64(w->th + NAME_GLIBC, 0x7654321);
    put64(w->th + name_at, QNIL);
    put64(obj, RBP_T_DATA);
    put64(obj + 0x40, RBP_T_STRING);
    uint8_t *ec = w->fiber + 80;
    put64(ec + 0, STACK), put64(ec + 8, 64), put64(ec + 16, STACK + 63 * 8);
    put64(ec + 24, FIBER), put64(ec + 32, TH);
    put32(w->fiber + STATUS_BUILTIN, 0x12), put32(w->fiber + STATUS_GLIBC, 0x12);
    if (resumed_at) put32(w->fiber + resumed_at, 0x9); /* RESUMED, with the blocking bit set above it */
    (void)stack;

    rbpeek_session *s = image_session(im, 2, 7, "2.7.8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    rbp_layout *L = &s->layout;
    s->vm = VM;
    set_field(L, RBP_L_vm_main_thread, 0, 8);
    set_field(L, RBP_L_vm_living_threads, 16, 16);
    set_field(L, RBP_L_th_vmlt_node, 0, 16);
    set_field(L, RBP_L_th_self, 16, 8);
    set_field(L, RBP_L_th_ec, 24, 8);
    set_field(L, RBP_L_ec_vm_stack, 0, 8);
    set_field(L, RBP_L_ec_vm_stack_size, 8, 8);
    set_field(L, RBP_L_ec_cfp, 16, 8);
    set_field(L, RBP_L_ec_fiber_ptr, 24, 8);
    set_field(L, RBP_L_ec_thread_ptr, 32, 8);
    set_field(L, RBP_L_cfp_size, 0, 8);
    set_field(L, RBP_L_cfp_pc, 0, 8);
    set_field(L, RBP_L_cfp_iseq, 0, 8);
    /* the facts' placement first, as the tables list them */
    set_field(L, RBP_L_th_name, name_alt ? NAME_GLIBC : NAME_BUILTIN, 8);
    set_field(L, RBP_L_fiber_status, STATUS_BUILTIN, 4);
    L->f[RBP_L_fiber_status].bit_size = 2;
    if (name_alt) L->alt[L->nalt++] = (rbp_layout_alt){RBP_L_th_name, {NAME_BUILTIN, 8, 0, 0}};
    if (fiber_alt) L->alt[L->nalt++] = (rbp_layout_alt){RBP_L_fiber_status, {STATUS_GLIBC, 4, 0, 2}};
    w->s = s;
}

static void done(world *w)
{
    rbpeek_session_free(w->s);
    image_free(&w->im);
}

static void test_name_settles_builtin_and_status_follows(void)
{
    world w;
    make(&w, NAME_BUILTIN, 0 /* the status word tells nothing */, true, true);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_th_name].offset, NAME_BUILTIN);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_BUILTIN);
    CU_ASSERT_PTR_NOT_NULL(strstr(w.s->layout_checks, "fiber_status settled at offset 600"));
    done(&w);
}

static void test_name_settles_glibc_and_status_follows(void)
{
    world w;
    make(&w, NAME_GLIBC, STATUS_BUILTIN /* misleading: the name decides */, true, true);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_th_name].offset, NAME_GLIBC);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_GLIBC);
    CU_ASSERT_EQUAL(w.s->layout.alt[1].f.offset, STATUS_BUILTIN); /* the other placement is kept */
    done(&w);
}

static void test_status_settled_by_the_running_fiber(void)
{
    world w;
    make(&w, NAME_BUILTIN, STATUS_GLIBC, false, true);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_GLIBC);
    done(&w);
    make(&w, NAME_BUILTIN, STATUS_BUILTIN, false, true);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_BUILTIN);
    done(&w);
}

static void test_status_left_unknown_when_nothing_tells(void)
{
    world w;
    make(&w, NAME_BUILTIN, 0, false, true);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_FALSE(rbp_has(&w.s->layout, RBP_L_fiber_status));
    CU_ASSERT_PTR_NOT_NULL(strstr(w.s->layout_checks, "fiber_status left unknown"));
    done(&w);
}

/* No thread has a name and the other word reads nil too: the name does not
 * tell, so the fiber's status decides for both. */
static void test_fiber_decides_when_both_names_fit(void)
{
    world w;
    make(&w, NAME_BUILTIN, STATUS_BUILTIN, true, true);
    put64(w.th + NAME_GLIBC, QNIL);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_th_name].offset, NAME_BUILTIN);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_BUILTIN);
    done(&w);
    make(&w, NAME_GLIBC, STATUS_GLIBC, true, true);
    put64(w.th + NAME_BUILTIN, QNIL);
    CU_ASSERT_EQUAL_FATAL(rbp_validate_layout(w.s), RBPEEK_OK);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_th_name].offset, NAME_GLIBC);
    CU_ASSERT_EQUAL(w.s->layout.f[RBP_L_fiber_status].offset, STATUS_GLIBC);
    done(&w);
}

static void test_name_that_fits_nowhere_is_refused(void)
{
    world w;
    make(&w, NAME_BUILTIN, 0, true, true);
    put64(w.th + NAME_BUILTIN, 0x1234567);
    CU_ASSERT_EQUAL(rbp_validate_layout(w.s), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(w.s), "rb_thread_t.name"));
    done(&w);
}

static const rbp_cu_test TESTS[] = {
    {"th_name settles __builtin_setjmp's placement; fiber_status follows", test_name_settles_builtin_and_status_follows},
    {"th_name settles glibc's placement; fiber_status follows", test_name_settles_glibc_and_status_follows},
    {"without a th_name alternative, the running fiber settles fiber_status", test_status_settled_by_the_running_fiber},
    {"fiber_status is left unknown when nothing tells", test_status_left_unknown_when_nothing_tells},
    {"both names fit: the running fiber decides for both", test_fiber_decides_when_both_names_fit},
    {"a thread name that fits neither placement refuses the layout", test_name_that_fits_nowhere_is_refused},
    {NULL, NULL},
};

RBP_CU_MAIN("validate", TESTS)

/*
 * Discovery without symbols (vm/discover_scan.c) on synthetic images: the
 * release named by libruby's file name, and the VM found in libruby's
 * writable data (a file mapping, then the .bss right after it) among decoy
 * pointers, as in a core made without its binaries.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "vm/discover_scan.h"

static void test_version_from_image_name(void)
{
    static const struct {
        const char *path;
        const char *want; /* NULL: no release in the name */
    } CASES[] = {
        {"/home/u/.rbenv/versions/3.0.0/lib/libruby.so.3.0.0", "3.0.0"},
        {"/opt/hostedtoolcache/Ruby/4.0.0/x64/lib/libruby.so.4.0.0", "4.0.0"},
        {"/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1", NULL},   /* Debian: the line only */
        {"/tmp/libruby.so.3.4.5.old", NULL},                      /* not the library's own name */
        {"/usr/bin/ruby3.1", NULL},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        image im = {0};
        rbpeek_session *s = image_session(&im, 0, 0, "");
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL(rbpeek_session_add_region(s, 0x7f0000000000, 0x7f0000010000, 0, CASES[i].path), RBPEEK_OK);
        char v[32] = "";
        bool got = rbp_version_from_image_name(s, v, sizeof v);
        CU_ASSERT_EQUAL(got, CASES[i].want != NULL);
        if (got && CASES[i].want) CU_ASSERT_STRING_EQUAL(v, CASES[i].want);
        rbpeek_session_free(s);
    }
}

enum {
    LIB = 0x7f0000000000,      /* libruby's last file mapping: 2 pages */
    BSS = LIB + 0x2000,        /* anonymous, right after it */
    HEAP = 0x560000000000,
    MAIN_TH_OFF = 40,          /* vm->ractor.main_thread */
    TH_VM_OFF = 32,            /* th->vm */
};

static void test_vm_found_in_bss_among_decoys(void)
{
    image im = {0};
    uint8_t *data = add_region(&im, LIB, 0x2000);
    uint8_t *bss = add_region(&im, BSS, 0x1000);
    uint8_t *heap = add_region(&im, HEAP, 0x1000);
    rbpeek_session *s = image_session(&im, 3, 4, "3.4.5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    set_field(&s->layout, RBP_L_vm_ractor_main_thread, MAIN_TH_OFF, 8);
    set_field(&s->layout, RBP_L_th_vm, TH_VM_OFF, 8);
    /* Only the file mapping is a region with a path, as in a core's NT_FILE. */
    CU_ASSERT_EQUAL(rbpeek_session_add_region(s, LIB, BSS, 0x3e4000, "/r/lib/libruby.so.3.4.5"), RBPEEK_OK);

    uint64_t vm = HEAP + 0x100, th = HEAP + 0x400, decoy = HEAP + 0x800, other_th = HEAP + 0x900;
    put64(heap + (vm - HEAP) + MAIN_TH_OFF, th);
    put64(heap + (th - HEAP) + TH_VM_OFF, vm);
    /* A decoy: its "main thread" points back somewhere else. */
    put64(heap + (decoy - HEAP) + MAIN_TH_OFF, other_th);
    put64(heap + (other_th - HEAP) + TH_VM_OFF, HEAP + 0x10);
    put64(data + 0x10, decoy);
    put64(data + 0x18, 0x1234567); /* unaligned: not a pointer */
    put64(data + 0x20, HEAP + 0xf000); /* unreadable */
    put64(bss + 0x470, vm);

    uint64_t where = 0;
    CU_ASSERT_EQUAL(rbp_scan_image_data_for_vm(s, &where), vm);
    CU_ASSERT_EQUAL(where, BSS + 0x470);
    CU_ASSERT_EQUAL(rbp_scan_image_data_for(s, vm), BSS + 0x470);
    CU_ASSERT_EQUAL(rbp_scan_image_data_for(s, HEAP + 0x1234), 0);

    /* Without the pointer there is no VM to find, and the scan stops at the
     * end of what is mapped after the image. */
    put64(bss + 0x470, 0);
    rbpeek_session_invalidate(s); /* the image changed under the read cache */
    CU_ASSERT_EQUAL(rbp_scan_image_data_for_vm(s, &where), 0);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_no_ruby_image(void)
{
    image im = {0};
    add_region(&im, LIB, 0x1000);
    rbpeek_session *s = image_session(&im, 3, 4, "3.4.5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(rbpeek_session_add_region(s, LIB, LIB + 0x1000, 0, "/usr/lib/libc.so.6"), RBPEEK_OK);
    uint64_t where = 1;
    CU_ASSERT_EQUAL(rbp_scan_image_data_for_vm(s, &where), 0);
    CU_ASSERT_EQUAL(where, 0);
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test TESTS[] = {
    {"the release in libruby's file name", test_version_from_image_name},
    {"the VM pointer in libruby's .bss, among decoys", test_vm_found_in_bss_among_decoys},
    {"no Ruby image, nothing scanned", test_no_ruby_image},
    {NULL, NULL},
};

RBP_CU_MAIN("discover_scan", TESTS)

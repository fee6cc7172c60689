/*
 * Tests of the typed T_DATA reader (rdata.c) on a synthetic memory image,
 * one object per encoding CRuby has used: 3.2's typed_flag word (1 = typed),
 * 3.3/3.4's with the embedded bit (2), and 4.0's, where a flag bit says
 * "typed" and bit 0 of the type word says "embedded". The objects are laid
 * out as each version's headers declare them; the expectations are what
 * RTYPEDDATA_P, RTYPEDDATA_TYPE and RTYPEDDATA_GET_DATA return there.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/rdata.h"
#include "vm/robject.h"

enum {
    HEAP = 0x100000,          /* object slots, 80 bytes apart */
    TYPE = 0x200000,          /* an rb_data_type_t (8-aligned, as every one is) */
    STRUCT = 0x300000,        /* a malloc'd C struct */
    FL_TYPED_40 = 1 << 6,     /* RUBY_TYPED_FL_IS_TYPED_DATA (RUBY_FL_USERPRIV0) */
};

static uint64_t slot(int i) { return HEAP + (uint64_t)i * 80; }

/* 3.x: struct RTypedData { RBasic basic; type; typed_flag; data; } */
static rbpeek_session *session_3x(image *im, int minor, const char *version)
{
    rbpeek_session *s = image_session(im, 3, minor, version);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    set_field(&s->layout, RBP_L_typeddata_type, 16, 8);
    set_field(&s->layout, RBP_L_typeddata_typed_flag, 24, 8);
    set_field(&s->layout, RBP_L_typeddata_data, 32, 8);
    return s;
}

static void test_typed_flag_32(void)
{
    image im = {0};
    uint8_t *h = add_region(&im, HEAP, 0x1000);
    add_region(&im, TYPE, 0x100);
    /* 0: typed, data pointer; 1: untyped RData (dfree pointer where
     * typed_flag is); 2: flag 3 means nothing before 3.3 */
    put64(h + 0, RBP_T_DATA), put64(h + 16, TYPE), put64(h + 24, 1), put64(h + 32, STRUCT);
    put64(h + 80, RBP_T_DATA), put64(h + 96, 0x401000), put64(h + 104, 0x402000), put64(h + 112, STRUCT);
    put64(h + 160, RBP_T_DATA), put64(h + 176, TYPE), put64(h + 184, 3), put64(h + 192, STRUCT);
    rbpeek_session *s = session_3x(&im, 2, "3.2.9");
    uint64_t type = 0, data = 0;
    CU_ASSERT_TRUE(rbp_typed_data(s, slot(0), &type, &data));
    CU_ASSERT_EQUAL(type, TYPE);
    CU_ASSERT_EQUAL(data, STRUCT);
    CU_ASSERT_FALSE(rbp_typed_data(s, slot(1), &type, &data));
    CU_ASSERT_FALSE(rbp_typed_data(s, slot(2), &type, &data));
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_embedded_flag_34(void)
{
    image im = {0};
    uint8_t *h = add_region(&im, HEAP, 0x1000);
    add_region(&im, TYPE, 0x100);
    /* 0: typed, embedded (flag 3: typed | embedded); 1: typed, not embedded */
    put64(h + 0, RBP_T_DATA), put64(h + 16, TYPE), put64(h + 24, 3);
    put64(h + 80, RBP_T_DATA), put64(h + 96, TYPE), put64(h + 104, 1), put64(h + 112, STRUCT);
    rbpeek_session *s = session_3x(&im, 4, "3.4.5");
    uint64_t type = 0, data = 0;
    CU_ASSERT_TRUE(rbp_typed_data(s, slot(0), &type, &data));
    CU_ASSERT_EQUAL(type, TYPE);
    CU_ASSERT_EQUAL(data, slot(0) + 32); /* the struct starts where the data pointer would be */
    CU_ASSERT_TRUE(rbp_typed_data(s, slot(1), &type, &data));
    CU_ASSERT_EQUAL(data, STRUCT);
    rbpeek_session_free(s);
    image_free(&im);
}

/* 4.0: struct RTypedData { RBasic basic; VALUE fields_obj; VALUE type; void *data; } */
static void test_flag_bit_40(void)
{
    image im = {0};
    uint8_t *h = add_region(&im, HEAP, 0x1000);
    add_region(&im, TYPE, 0x100);
    /* 0: typed, embedded (type | 1), as a 4.0 core's managed id tables;
     * 1: typed, malloc'd struct, as its Mutexes; 2: no typed flag (an
     * RData: its dmark sits where fields_obj is); 3: not T_DATA at all */
    put64(h + 0, RBP_T_DATA | FL_TYPED_40), put64(h + 24, TYPE | 1);
    put64(h + 80, RBP_T_DATA | FL_TYPED_40), put64(h + 104, TYPE), put64(h + 112, STRUCT);
    put64(h + 160, RBP_T_DATA), put64(h + 176, 0x401000), put64(h + 184, TYPE), put64(h + 192, STRUCT);
    put64(h + 240, RBP_T_STRING | FL_TYPED_40), put64(h + 264, TYPE);
    rbpeek_session *s = image_session(&im, 4, 0, "4.0.0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    set_field(&s->layout, RBP_L_typeddata_type, 24, 8);
    set_field(&s->layout, RBP_L_typeddata_data, 32, 8); /* no typed_flag member */
    uint64_t type = 0, data = 0;
    CU_ASSERT_TRUE(rbp_typed_data(s, slot(0), &type, &data));
    CU_ASSERT_EQUAL(type, TYPE); /* the embedded bit is not part of the pointer */
    CU_ASSERT_EQUAL(data, slot(0) + 32);
    CU_ASSERT_TRUE(rbp_typed_data(s, slot(1), &type, &data));
    CU_ASSERT_EQUAL(type, TYPE);
    CU_ASSERT_EQUAL(data, STRUCT);
    CU_ASSERT_FALSE(rbp_typed_data(s, slot(2), &type, &data));
    CU_ASSERT_FALSE(rbp_typed_data(s, slot(3), &type, &data));
    /* garbage: an unreadable object, a misaligned type word */
    CU_ASSERT_FALSE(rbp_typed_data(s, 0x900000, &type, &data));
    put64(h + 104, TYPE + 4);
    rbpeek_session_invalidate(s);
    CU_ASSERT_FALSE(rbp_typed_data(s, slot(1), &type, &data));
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test tests[] = {
    {"3.2: typed_flag 1, data pointer; RData refused", test_typed_flag_32},
    {"3.4: typed_flag's embedded bit", test_embedded_flag_34},
    {"4.0: typed-data flag bit, embedded bit in the type word", test_flag_bit_40},
    {NULL, NULL},
};

RBP_CU_MAIN("rdata", tests)

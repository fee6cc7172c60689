/*
 * Tests of the address map (base/addrmap.c): every key put is found with
 * its value, through growth; a value replaced or cleared is freed exactly
 * once and a map cleared holds nothing and takes keys again; destroying
 * frees what it holds, once; a bounded map clears itself when full; key 0
 * is refused (its value freed); an empty map's clear and destroy free
 * nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "cu_main.h"

/* Values are counters: freeing one counts it. */
static int g_freed[4096];

static void count_free(void *v) { g_freed[(int *)v - g_freed]++; }

static void *val(int i) { return &g_freed[i]; }

static int freed_total(void)
{
    int n = 0;
    for (int i = 0; i < 4096; i++) n += g_freed[i];
    return n;
}

static uint64_t key(int i) { return UINT64_C(0x7f0000001000) + (uint64_t)i * 40; }

static void test_put_get_grow(void)
{
    rbp_addrmap m;
    rbp_addrmap_init(&m, 0, NULL);
    CU_ASSERT_PTR_NULL(rbp_addrmap_get(&m, key(1)));
    for (int i = 0; i < 3000; i++) CU_ASSERT(rbp_addrmap_put(&m, key(i), val(i)));
    CU_ASSERT_EQUAL(m.len, 3000);
    for (int i = 0; i < 3000; i++) CU_ASSERT_PTR_EQUAL(rbp_addrmap_get(&m, key(i)), val(i));
    CU_ASSERT_PTR_NULL(rbp_addrmap_get(&m, key(3000)));
    CU_ASSERT_PTR_NULL(rbp_addrmap_get(&m, 0));
    rbp_addrmap_destroy(&m);
    CU_ASSERT_PTR_NULL(m.keys);
    CU_ASSERT_EQUAL(m.len, 0);
}

static void test_clear_frees_once_and_map_is_reusable(void)
{
    memset(g_freed, 0, sizeof g_freed);
    rbp_addrmap m;
    rbp_addrmap_init(&m, 0, count_free);
    for (int i = 0; i < 500; i++) rbp_addrmap_put(&m, key(i), val(i));
    rbp_addrmap_put(&m, key(7), val(1000)); /* replaces: the old value goes */
    CU_ASSERT_EQUAL(g_freed[7], 1);
    rbp_addrmap_put(&m, key(8), val(8)); /* the same value again: kept */
    CU_ASSERT_EQUAL(g_freed[8], 0);
    rbp_addrmap_clear(&m);
    CU_ASSERT_EQUAL(m.len, 0);
    for (int i = 0; i < 500; i++) {
        CU_ASSERT_PTR_NULL(rbp_addrmap_get(&m, key(i)));
        CU_ASSERT_EQUAL(g_freed[i], 1);
    }
    CU_ASSERT_EQUAL(g_freed[1000], 1);
    CU_ASSERT_EQUAL(freed_total(), 501);
    rbp_addrmap_clear(&m); /* empty: nothing more */
    CU_ASSERT_EQUAL(freed_total(), 501);
    for (int i = 0; i < 10; i++) CU_ASSERT(rbp_addrmap_put(&m, key(i), val(2000 + i)));
    CU_ASSERT_EQUAL(m.len, 10);
    CU_ASSERT_PTR_EQUAL(rbp_addrmap_get(&m, key(3)), val(2003));
    rbp_addrmap_destroy(&m);
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(g_freed[2000 + i], 1);
    CU_ASSERT_EQUAL(freed_total(), 511);
    rbp_addrmap_destroy(&m); /* twice: nothing */
    CU_ASSERT_EQUAL(freed_total(), 511);
}

static void test_bounded_and_key_zero(void)
{
    memset(g_freed, 0, sizeof g_freed);
    rbp_addrmap m;
    rbp_addrmap_init(&m, 100, count_free);
    for (int i = 0; i < 250; i++) CU_ASSERT(rbp_addrmap_put(&m, key(i), val(i)));
    /* cleared when the 101st and the 201st came: 50 left, 200 freed */
    CU_ASSERT_EQUAL(m.len, 50);
    CU_ASSERT_EQUAL(freed_total(), 200);
    CU_ASSERT_PTR_EQUAL(rbp_addrmap_get(&m, key(249)), val(249));
    CU_ASSERT_PTR_NULL(rbp_addrmap_get(&m, key(0)));
    CU_ASSERT(!rbp_addrmap_put(&m, 0, val(3000)));
    CU_ASSERT_EQUAL(g_freed[3000], 1);
    CU_ASSERT_EQUAL(m.len, 50);
    rbp_addrmap_destroy(&m);
    CU_ASSERT_EQUAL(freed_total(), 251);
    rbp_addrmap_init(&m, 0, count_free); /* never used */
    rbp_addrmap_clear(&m);
    rbp_addrmap_destroy(&m);
    CU_ASSERT_EQUAL(freed_total(), 251);
}

static const rbp_cu_test TESTS[] = {
    {"put and get through growth", test_put_get_grow},
    {"clear frees each value once; the map takes keys again", test_clear_frees_once_and_map_is_reusable},
    {"a bounded map clears when full; key 0 is refused", test_bounded_and_key_zero},
    {NULL, NULL},
};

RBP_CU_MAIN("addrmap", TESTS)

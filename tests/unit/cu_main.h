/*
 * Shared main() for the CUnit test executables: each test file defines its
 * suites in a table and calls RBP_CU_MAIN(table). Exit status is nonzero if
 * any assertion failed, so ctest sees failures.
 */
#ifndef RBP_CU_MAIN_H
#define RBP_CU_MAIN_H

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>

typedef struct rbp_cu_test {
    const char *name;
    void (*fn)(void);
} rbp_cu_test;

static inline int rbp_cu_run(const char *suite_name, const rbp_cu_test *tests)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
    if (!suite) return 2;
    for (const rbp_cu_test *t = tests; t->name; t++)
        if (!CU_add_test(suite, t->name, t->fn)) return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failed == 0 && run > 0) ? 0 : 1;
}

#define RBP_CU_MAIN(suite_name, tests) \
    int main(void) { return rbp_cu_run(suite_name, tests); }

#endif

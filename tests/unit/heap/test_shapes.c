/*
 * Tests of the heap decoders on Ruby 3.2's shapes, on a synthetic image of
 * one 160-byte-slot heap page: the shapes are found through the VM
 * (vm->shape_list, 3.2's place for them), a class's path and a singleton's
 * attached object are ivars found by walking the class's shape to the
 * root (rb_shape_get_iv_index's way) and read from the inline classext's
 * iv_ptr, and a shape of type 4, 3.2's SHAPE_INITIAL_CAPACITY, is not
 * taken for 3.3's "too complex"; a census checks that classes' method
 * tables decode before it counts. The offsets are those of the 3.2 tables
 * (facts and layouts/lines/3.2.layout); the image's addresses are the
 * test's own. The same image with its chains made to loop (shape parents,
 * singleton superclasses, attached objects, superclasses) checks that
 * every chain walk stops, says why, and shares the command's budget.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"

#include "context/context.h"
#include "heap/census.h"
#include "heap/heap.h"
#include "heap/obj.h"
#include "heap/obj_internal.h"
#include "heap/obj_values.h"
#include "vm/robject.h"

enum {
    VM = 0x1000, OBJSPACE = 0x2000, TABLE = 0x3000, HDR = 0x4000,
    IVS = 0x5000, IVS_META = 0x5100, SHAPES = 0x6000, GS = 0x7000,
    IDS = 0x8000, IDCHUNK = 0x8100, CHUNK_ELEMS = 0x9000, NAMES = 0xc000,
    BODY = 0x100000, START = BODY + 64, SLOT = 160,
    CLS = START, META = START + SLOT, OBJ = START + 2 * SLOT,
    SHAPE_SIZE = 32, INVALID_SHAPE = 0xffffffff,
    QNIL = 0x04, /* Ruby 3.2 */
};

/* An embedded String as 3.2 keeps one: embed.len at 16, bytes at 24. */
static void put_string(uint8_t *at, const char *text)
{
    put64(at, RBP_T_STRING);
    put64(at + 16, strlen(text));
    memcpy(at + 24, text, strlen(text) + 1);
}

static void put_shape(uint8_t *shapes, uint32_t id, uint64_t edge, uint32_t next, uint32_t capa, uint8_t type,
                      uint32_t parent)
{
    uint8_t *p = shapes + id * SHAPE_SIZE;
    put64(p + 8, edge);
    put32(p + 16, next);
    put32(p + 20, capa);
    p[24] = type;
    put32(p + 28, parent);
}

static uint64_t id_of(uint64_t serial) { return serial << 4 | 1; }

static rbpeek_session *world(image *im)
{
    uint8_t *vm = add_region(im, VM, 64), *os = add_region(im, OBJSPACE, 64), *tbl = add_region(im, TABLE, 64);
    uint8_t *hdr = add_region(im, HDR, 64), *body = add_region(im, BODY, 0x10000);
    uint8_t *ivs = add_region(im, IVS, 0x200), *shapes = add_region(im, SHAPES, 8 * SHAPE_SIZE);
    uint8_t *gs = add_region(im, GS, 64), *ids = add_region(im, IDS, 0x200);
    uint8_t *elems = add_region(im, CHUNK_ELEMS, 1024 * 8), *names = add_region(im, NAMES, 0x200);
    put64(vm + 8, OBJSPACE), put64(vm + 16, SHAPES);
    put64(os + 16, TABLE), put64(os + 24, 1);
    put64(tbl, HDR);
    put16(hdr + 0, SLOT), put16(hdr + 2, 3), put64(hdr + 32, START);
    put64(body, HDR); /* the page body points back to its header */

    /* IDs 300, 301, 302: __classpath__, @other, __attached__ (ids: one
     * chunk of 512 name/symbol pairs; the names are embedded Strings) */
    put32(gs, 1000), put64(gs + 16, IDS);
    put64(ids, RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(1) << (RBP_FL_USHIFT + 3))), put64(ids + 16, IDCHUNK);
    put64(ids + 0x100, RBP_T_ARRAY), put64(ids + 0x110, 1024), put64(ids + 0x120, CHUNK_ELEMS);
    const char *words[] = {"__classpath__", "@other", "__attached__"};
    for (int i = 0; i < 3; i++) {
        put_string(names + 0x40 * i, words[i]);
        put64(elems + (300 + i) % 512 * 2 * 8, NAMES + 0x40 * i);
    }

    /* shapes: 0 the root; 1 adds __classpath__; 2 then @other; 3 adds
     * __attached__; 4 is 3.2's SHAPE_INITIAL_CAPACITY of a 3-ivar object */
    put_shape(shapes, 0, 0, 0, 0, 0, INVALID_SHAPE);
    put_shape(shapes, 1, id_of(300), 1, 1, 1, 0);
    put_shape(shapes, 2, id_of(301), 2, 2, 1, 1);
    put_shape(shapes, 3, id_of(302), 1, 1, 1, 0);
    put_shape(shapes, 4, 0, 2, 3, 4, 2);

    /* class Foo (shape 2: ivars __classpath__, @other) and its metaclass
     * (shape 3: __attached__); classext inline after the 32-byte RClass,
     * iv_ptr first */
    uint8_t *cls = body + (CLS - BODY), *meta = body + (META - BODY), *obj = body + (OBJ - BODY);
    put64(cls, RBP_T_CLASS | (UINT64_C(2) << 32)), put64(cls + 8, META), put64(cls + 32, IVS);
    put64(meta, RBP_T_CLASS | RBP_FL_USER(0) | (UINT64_C(3) << 32)), put64(meta + 8, CLS), put64(meta + 32, IVS_META);
    put_string(ivs + 0x40, "Foo");
    put64(ivs, IVS + 0x40), put64(ivs + 8, QNIL);
    put64(ivs + 0x100, CLS);
    /* an embedded object of class Foo, shape 4 */
    put64(obj, RBP_T_OBJECT | RBP_FL_USER(1) | (UINT64_C(4) << 32)), put64(obj + 8, CLS);

    rbpeek_session *s = image_session(im, 3, 2, "3.2.0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    rbp_layout *L = &s->layout;
    s->vm = VM;
    s->global_symbols = GS;
    set_field(L, RBP_L_vm_objspace, 8, 8);
    set_field(L, RBP_L_vm_shape_list, 16, 8);
    set_field(L, RBP_L_objspace_pages_sorted, 16, 8);
    set_field(L, RBP_L_objspace_pages_allocated, 24, 8);
    set_field(L, RBP_L_page_slot_size, 0, 2);
    set_field(L, RBP_L_page_total_slots, 2, 2);
    set_field(L, RBP_L_page_start, 32, 8);
    set_field(L, RBP_L_rclass_super, 16, 8);
    set_field(L, RBP_L_rclass_m_tbl, 24, 8);
    set_field(L, RBP_L_rclass_and_ext_classext, 32, 112);
    set_field(L, RBP_L_classext_iv_ptr, 0, 8);
    set_field(L, RBP_L_robject_ivptr, 16, 8);
    set_field(L, RBP_L_robject_ary, 16, 8);
    set_field(L, RBP_L_shape_size, 0, SHAPE_SIZE);
    set_field(L, RBP_L_shape_edge_name, 8, 8);
    set_field(L, RBP_L_shape_next_iv_index, 16, 4);
    set_field(L, RBP_L_shape_capacity, 20, 4);
    set_field(L, RBP_L_shape_type, 24, 1);
    set_field(L, RBP_L_shape_parent_id, 28, 4);
    set_field(L, RBP_L_symbols_last_id, 0, 4);
    set_field(L, RBP_L_symbols_ids, 16, 8);
    set_field(L, RBP_L_rarray_heap_len, 16, 8);
    set_field(L, RBP_L_rarray_heap_ptr, 32, 8);
    set_field(L, RBP_L_rarray_embed_ary, 16, 8);
    set_field(L, RBP_L_rstring_heap_len, 16, 8);
    set_field(L, RBP_L_rstring_heap_ptr, 24, 8);
    set_field(L, RBP_L_rstring_embed_len, 16, 8);
    set_field(L, RBP_L_rstring_embed_ary, 24, 1);
    return s;
}

static void test_names_by_shape(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(h.shape_list, SHAPES);
    const char *path = rbp_heap_class_path(&h, CLS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    CU_ASSERT_STRING_EQUAL(path, "Foo");
    CU_ASSERT_STRING_EQUAL(rbp_heap_class_name(&h, CLS), "Foo");
    CU_ASSERT_STRING_EQUAL(rbp_heap_class_name(&h, META), "#<Class:Foo>");
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_shape_without_the_ivar(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    /* Foo's shape is now 3, which holds __attached__ but no __classpath__:
     * no path, and the walk ends at the root */
    uint8_t *cls = im.r[4].bytes + (CLS - BODY);
    put64(cls, RBP_T_CLASS | (UINT64_C(3) << 32));
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_PTR_NULL(rbp_heap_class_path(&h, CLS));
    rbp_heap_close(&h);
    /* a shape whose parent is itself must not loop */
    put_shape(im.r[6].bytes, 3, id_of(302), 1, 1, 1, 3);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_PTR_NULL(rbp_heap_class_path(&h, CLS));
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_type_4_is_not_too_complex_on_3_2(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    uint8_t buf[SLOT];
    rbp_obj o;
    CU_ASSERT_TRUE_FATAL(rbp_obj_at(&h, OBJ, buf, sizeof buf, &o));
    CU_ASSERT_FALSE(rbp_obj_too_complex(&h, &o));
    uint64_t n = 0;
    CU_ASSERT_TRUE(rbp_obj_ivar_count(&h, &o, &n));
    CU_ASSERT_EQUAL(n, 2);
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

/* The census runs on this heap; with the classes' m_tbl member misplaced
 * (pointing at an id table whose values are not method entries), the
 * layout is refused instead. */
static void test_census_checks_method_tables(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    uint8_t *mtbl = add_region(&im, 0xd000, 64), *items = add_region(&im, 0xe000, 64);
    put32(mtbl, 2), put32(mtbl + 4, 1), put64(mtbl + 16, 0xe000); /* capa 2, num 1 */
    put32(items, 7), put64(items + 8, OBJ);                        /* a T_OBJECT, not a method entry */
    set_field(&s->layout, RBP_L_id_table_capa, 0, 4);
    set_field(&s->layout, RBP_L_id_table_num, 4, 4);
    set_field(&s->layout, RBP_L_id_table_items, 16, 8);
    rbpeek_census *c = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_heap_census(s, &c), RBPEEK_OK);
    rbpeek_census_summary sum;
    rbpeek_census_get_summary(c, &sum);
    CU_ASSERT_EQUAL(sum.live, 3);
    rbpeek_census_free(c);

    put64(im.r[4].bytes + (CLS - BODY) + 24, 0xd000);
    put64(im.r[4].bytes + (META - BODY) + 24, 0xd000);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbpeek_heap_census(s, &c), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "method tables of 2 of the first 2 classes"));
    /* an entry that is a method entry (imemo_ment) is what a method table holds */
    uint8_t *ment = add_region(&im, 0xf000, 64);
    put64(ment, 0x1a | (UINT64_C(6) << 12));
    put64(items + 8, 0xf000);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbpeek_heap_census(s, &c), RBPEEK_OK);
    rbpeek_census_free(c);
    rbpeek_session_free(s);
    image_free(&im);
}

/* --- chains that loop (issue #12): each walk stops, says why, and the
 * command's shared budget caps all of them together ---------------------- */

static uint8_t *slot_of(image *im, uint64_t addr) { return im->r[4].bytes + (addr - BODY); }

static bool count_ivar(void *ctx, uint64_t id, uint64_t value)
{
    (void)id, (void)value;
    ++*(int *)ctx;
    return true;
}

static void test_shape_chain_loop(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    /* shape 2's parent is 5, 5's is 6, 6's is 2: a loop that never returns
     * to the object's own shape first, so no self-check would catch it */
    uint8_t *shapes = im.r[6].bytes;
    put_shape(shapes, 2, id_of(301), 2, 2, 1, 5);
    put_shape(shapes, 5, id_of(300), 1, 1, 1, 6);
    put_shape(shapes, 6, id_of(302), 1, 1, 1, 2);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    /* the ivar by name (rb_shape_get_iv_index's walk): found before the loop */
    uint64_t cached = 0, index = 99;
    CU_ASSERT_TRUE(rbp_shape_ivar_index(&h, UINT64_C(2) << 32, "__classpath__", &cached, &index));
    CU_ASSERT_EQUAL(h.chain_cuts, 0);
    /* ... and not found: the walk meets the loop */
    cached = 0;
    CU_ASSERT_FALSE(rbp_shape_ivar_index(&h, UINT64_C(2) << 32, "@nowhere", &cached, &index));
    CU_ASSERT_EQUAL(h.chain_cuts, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "the shape chain"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "it loops"));
    /* every ivar of an object of shape 2 (shape_slots): refused, not a
     * list of the loop's ivars over and over */
    uint8_t buf[SLOT];
    rbp_obj o;
    put64(slot_of(&im, OBJ), RBP_T_OBJECT | RBP_FL_USER(1) | (UINT64_C(2) << 32));
    CU_ASSERT_TRUE_FATAL(rbp_obj_at(&h, OBJ, buf, sizeof buf, &o));
    int n = 0;
    CU_ASSERT_EQUAL(rbp_obj_ivars_each(&h, &o, count_ivar, &n), RBP_VALUES_UNREADABLE);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(h.chain_cuts, 2);
    rbp_heap_close(&h);
    /* the session's warning line says the result is partial */
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_warning(s), "cut: 2 chain walks stopped, first the shape chain"));
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_singleton_chain_loop(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    /* META (a singleton) and the third slot, made a singleton too, are each
     * other's superclass: rbp_class_real would go round forever */
    uint8_t *meta = slot_of(&im, META), *other = slot_of(&im, OBJ);
    put64(other, RBP_T_CLASS | RBP_FL_USER(0) | (UINT64_C(3) << 32)), put64(other + 8, CLS);
    put64(meta + 16, OBJ), put64(other + 16, META);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_class_real(&h, META), 0);
    CU_ASSERT_EQUAL(h.chain_cuts, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "singleton/iclass chain"));
    /* the answer is cached: asking again costs no walk and no second cut */
    CU_ASSERT_EQUAL(rbp_class_real(&h, META), 0);
    CU_ASSERT_EQUAL(h.chain_cuts, 1);
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_attached_object_loop(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    /* META's attached object (the __attached__ ivar at IVS_META) is the
     * third slot, a singleton whose attached object is META: naming one
     * names the other, "#<Class:#<Class:...>>" without end */
    uint8_t *other = slot_of(&im, OBJ), *ivs = im.r[5].bytes;
    put64(other, RBP_T_CLASS | RBP_FL_USER(0) | (UINT64_C(3) << 32)), put64(other + 8, CLS);
    put64(other + 32, IVS + 0x180);
    put64(ivs + 0x100, OBJ), put64(ivs + 0x180, META);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    const char *name = rbp_heap_class_name(&h, META);
    CU_ASSERT_PTR_NOT_NULL_FATAL(name);
    CU_ASSERT_EQUAL(strncmp(name, "#<Class:#<Class:", 16), 0);
    CU_ASSERT(h.chain_cuts >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "attached objects"));
    /* the recursion guard sees the loop when it comes back to META, not
     * after RBP_HEAP_NAMING_DEPTH levels: META, OBJ, then META's address */
    int levels = 0;
    for (const char *p = name; (p = strstr(p, "#<Class:")) != NULL; p++) levels++;
    CU_ASSERT_EQUAL(levels, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "it contains itself"));
    if (levels != 3) fprintf(stderr, "\n  named %s\n", name);
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_superclass_loop_and_budget(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    /* Foo's superclass is the third slot (a plain class), whose superclass
     * is Foo: a search up the chain for a hidden ivar must stop */
    uint8_t *cls = slot_of(&im, CLS), *other = slot_of(&im, OBJ);
    put64(other, RBP_T_CLASS | (UINT64_C(3) << 32)), put64(other + 8, META);
    put64(cls + 16, OBJ), put64(other + 16, CLS);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_struct_members(&h, CLS), 0);
    CU_ASSERT_EQUAL(h.chain_cuts, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "the superclass chain of 0x"));
    /* the budget all walks share: spent, the next walk stops at once and
     * says so, however short its chain */
    h.chain_budget = 0;
    h.chain_cuts = 0;
    CU_ASSERT_EQUAL(rbp_class_real(&h, META), 0);
    CU_ASSERT_EQUAL(h.chain_cuts, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbp_heap_chain_note(&h), "budget is spent"));
    rbp_heap_close(&h);
    rbpeek_session_free(s);
    image_free(&im);
}

/* A census over a heap with a looping singleton chain: it completes, and
 * its text and JSON say that names are partial. */
static void test_census_reports_the_cut(void)
{
    image im = {0};
    rbpeek_session *s = world(&im);
    uint8_t *mtbl = add_region(&im, 0xd000, 64), *items = add_region(&im, 0xe000, 64);
    uint8_t *ment = add_region(&im, 0xf000, 64);
    put32(mtbl, 2), put32(mtbl + 4, 1), put64(mtbl + 16, 0xe000);
    put32(items, 7), put64(items + 8, 0xf000);
    put64(ment, 0x1a | (UINT64_C(6) << 12));
    set_field(&s->layout, RBP_L_id_table_capa, 0, 4);
    set_field(&s->layout, RBP_L_id_table_num, 4, 4);
    set_field(&s->layout, RBP_L_id_table_items, 16, 8);
    /* Foo's class is META, and META is its own superclass */
    put64(slot_of(&im, META) + 16, META);
    put64(slot_of(&im, CLS) + 8, META);
    rbpeek_census *c = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_heap_census(s, &c), RBPEEK_OK);
    char *text = NULL, *json = NULL;
    CU_ASSERT_EQUAL(rbpeek_census_render(c, RBPEEK_FORMAT_TEXT, 0, 0, &text), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_census_render(c, RBPEEK_FORMAT_JSON, 0, 0, &json), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\nCut: 1 chain walk stopped, first the singleton/iclass chain"));
    CU_ASSERT_PTR_NOT_NULL(json && strstr(json, "\"cut\": \"1 chain walk stopped"));
    rbpeek_free(text);
    rbpeek_free(json);
    rbpeek_census_free(c);
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test TESTS[] = {
    {"3.2: class paths and attached objects by the class's shape", test_names_by_shape},
    {"3.2: a shape without the ivar, and a shape that is its own parent", test_shape_without_the_ivar},
    {"3.2: shape type 4 is SHAPE_INITIAL_CAPACITY, not too complex", test_type_4_is_not_too_complex_on_3_2},
    {"a census refuses a layout whose classes' method tables do not decode", test_census_checks_method_tables},
    {"a shape chain that loops is cut and reported", test_shape_chain_loop},
    {"a singleton chain that loops is cut, once", test_singleton_chain_loop},
    {"singletons attached to each other are named without endless recursion", test_attached_object_loop},
    {"a superclass loop is cut; a spent budget stops every walk", test_superclass_loop_and_budget},
    {"a census over a looping class chain says its names are partial", test_census_reports_the_cut},
    {NULL, NULL},
};

RBP_CU_MAIN("shapes", TESTS)

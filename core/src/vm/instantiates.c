/*
 * C method frames that allocate an instance of their receiver (see
 * instantiates.h). Decided from the method entry: its owner is Class (the
 * value of the exported global rb_cClass) and its name "new" or
 * "allocate"; or its C function is one of INSTANTIATING, found by name in
 * the images (.dynsym, or .symtab where the Ruby keeps it): a Struct class's `new` is
 * owned by its singleton class and 3.3's Array.new by Array's, so only the
 * function tells them. Each of these allocates the receiver's instance in
 * its own frame and calls `initialize` in a frame of its own. Both are
 * looked up once a session; a Ruby without a name (stripped: the static
 * functions) loses only what needs it.
 */
#include "vm/instantiates.h"

#include <string.h>

#include "context/context.h"
#include "layout/layout.h"
#include "memory/mem.h"
#include "vm/robject.h"

enum { VM_METHOD_TYPE_CFUNC = 1 };

static const char *const INSTANTIATING[RBP_INSTANTIATING_FNS] = {
    "rb_class_new_instance_pass_kw", /* 3.x: Class#new, a Struct class's new (exported) */
    "rb_class_s_new",                /* 2.7: Class#new (static) */
    "rb_ary_s_new",                  /* 3.3+: Array.new (static) */
    "rb_class_alloc_m",              /* Class#allocate (static) */
    "struct_new_kw",                 /* 2.7: a Struct class's new (static) */
};

/* In the images' symbols only: this runs in the middle of a sample, maybe
 * with its thread held stopped, and a debugger's lookup of a name a
 * stripped Ruby lacks searched every symbol it had (and took a Ctrl-C
 * into a callback). What the debugger could add, debug info of the static
 * functions, is rare. */
static void look_up(rbpeek_session *s)
{
    const char *how;
    uint64_t at = 0, v = 0;
    s->class_Class = rbp_symbol_lookup_in(s, "rb_cClass", &at, &how, RBP_SYM_IMAGES) && rbp_mem_u64(s->mem, at, &v)
                         ? v
                         : 0;
    for (size_t i = 0; i < RBP_INSTANTIATING_FNS; i++)
        if (!rbp_symbol_lookup_in(s, INSTANTIATING[i], &s->instantiating_fn[i], &how, RBP_SYM_IMAGES))
            s->instantiating_fn[i] = 0;
    s->instantiates_looked_up = true;
}

static bool instantiating(const rbpeek_session *s, uint64_t fn)
{
    for (size_t i = 0; fn && i < RBP_INSTANTIATING_FNS; i++)
        if (s->instantiating_fn[i] == fn) return true;
    return false;
}

static bool is_class(rbpeek_session *s, uint64_t v)
{
    return v && rbp_is_heap_ptr(s, v) && rbp_obj_type(s, v) == RBP_T_CLASS;
}

uint64_t rbp_cfunc_instantiates(rbpeek_session *s, const rbp_cme *cme, uint64_t self)
{
    if (!cme || cme->def_type != VM_METHOD_TYPE_CFUNC || !self) return 0;
    /* Every one of them is named new or allocate: asked first, as the ID's
     * name is cached and the C function is one more read. */
    const char *name = rbp_id_name(s, cme->original_id);
    if (!name || (strcmp(name, "new") != 0 && strcmp(name, "allocate") != 0)) return 0;
    if (!s->instantiates_looked_up) look_up(s);
    bool yes = s->class_Class && cme->owner == s->class_Class;
    if (!yes && cme->def && rbp_has(&s->layout, RBP_L_mdef_cfunc_func)) {
        uint64_t fn = 0;
        yes = rbp_mem_u64(s->mem, cme->def + (uint64_t)rbp_off(&s->layout, RBP_L_mdef_cfunc_func), &fn) &&
              instantiating(s, fn);
    }
    return yes && is_class(s, self) ? self : 0;
}

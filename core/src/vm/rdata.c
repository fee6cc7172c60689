/*
 * Typed T_DATA objects (see rdata.h). Which encoding a target uses is told
 * by its layout: a layout with RTypedData.typed_flag is 3.x's, one without
 * it is 4.0's flag-bit scheme (include/ruby/internal/core/rtypeddata.h of
 * each line).
 */
#include "vm/rdata.h"

#include <string.h>

#include "vm/robject.h"

/* 4.0: RUBY_TYPED_FL_IS_TYPED_DATA is RUBY_FL_USERPRIV0, flag bit 6. */
#define FL_IS_TYPED_DATA (UINT64_C(1) << 6)
/* 4.0: TYPED_DATA_EMBEDDED, bit 0 of the type word. */
#define TYPE_EMBEDDED UINT64_C(1)
/* 3.3 - 3.4: typed_flag's embedded bit (values 1..3 are typed). */
#define FLAG_EMBEDDED UINT64_C(2)

bool rbp_typed_data_decode(const rbpeek_session *s, uint64_t v, uint64_t flags, rbp_word_fn word, void *ctx,
                           uint64_t *type, uint64_t *data)
{
    const rbp_layout *L = &s->layout;
    uint64_t t = 0, d = 0;
    bool embedded;
    if ((flags & RBP_T_MASK) != RBP_T_DATA || !rbp_has(L, RBP_L_typeddata_type) ||
        !rbp_has(L, RBP_L_typeddata_data) || !word(ctx, RBP_L_typeddata_type, &t))
        return false;
    if (rbp_has(L, RBP_L_typeddata_typed_flag)) {
        uint64_t flag = 0;
        if (!word(ctx, RBP_L_typeddata_typed_flag, &flag)) return false;
        /* 1 typed; from 3.3 also 2 (embedded) and 3 (both); anything else is
         * an untyped RData's dfree pointer or garbage */
        bool v33 = s->rel.obj.typed_flag_embedded;
        if (!(flag == 1 || (v33 && flag >= 1 && flag <= 3))) return false;
        embedded = v33 && (flag & FLAG_EMBEDDED);
    } else {
        if (!(flags & FL_IS_TYPED_DATA)) return false;
        embedded = t & TYPE_EMBEDDED;
        t &= ~UINT64_C(3); /* the low bits are flags; the struct is 8-aligned */
    }
    if (!t || (t & 7)) return false;
    if (embedded)
        d = v + (uint64_t)rbp_off(L, RBP_L_typeddata_data);
    else if (!word(ctx, RBP_L_typeddata_data, &d))
        return false;
    *type = t;
    *data = d;
    return true;
}

typedef struct target_obj {
    rbpeek_session *s;
    uint64_t v;
} target_obj;

static bool word_from_target(void *ctx, rbp_field_id id, uint64_t *out)
{
    const target_obj *o = ctx;
    return rbp_read_field(o->s, o->v, id, out);
}

bool rbp_typed_data(rbpeek_session *s, uint64_t v, uint64_t *type, uint64_t *data)
{
    uint64_t flags = 0;
    if (!rbp_obj_flags(s, v, &flags)) return false;
    target_obj o = {s, v};
    return rbp_typed_data_decode(s, v, flags, word_from_target, &o, type, data);
}

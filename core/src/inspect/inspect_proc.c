/*
 * Proc#inspect, byte for byte: proc.c's rb_block_to_s, the same from 2.7
 * (which dropped the old '@' before the location) to 4.0:
 *
 *   #<Proc:0x000055d5d3c6e2a8 /path/file.rb:12>            a block (iseq)
 *   #<Proc:0x000055d5d3c6e2a8 /path/file.rb:12 (lambda)>   a lambda
 *   #<Proc:0x000055d5d3c6e2a8(&:upcase) (lambda)>          Symbol#to_proc
 *   #<Proc:0x000055d5d5a0c1f8 (lambda)>                    Method#to_proc and
 *                                                          other C blocks: the
 *                                                          vm_ifunc's address
 *
 * The Proc is a typed T_DATA whose struct is an rb_proc_t: an rb_block (a
 * union of captured block, Symbol and Proc, and its type) and the
 * is_lambda bit. A block of type proc stands for another Proc's block,
 * followed (a bounded number of times) as Ruby does. Anything that does
 * not read as Ruby makes it (an unknown block type, an iseq that is no
 * iseq, a path that cannot be read) is not guessed at: the caller prints
 * the Kernel#to_s form and says why (rbp_insp.why).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "heap/obj.h"
#include "inspect/inspect_int.h"
#include "vm/rdata.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

enum { BLOCK_ISEQ, BLOCK_IFUNC, BLOCK_SYMBOL, BLOCK_PROC }; /* enum rb_block_type, 2.7 - 4.0 */
enum { MAX_PROC_CHAIN = 16 };

static const rbp_field_id PROC_FIELDS[] = {
    RBP_L_proc_block_code, RBP_L_proc_block_symbol, RBP_L_proc_block_proc, RBP_L_proc_block_type,
    RBP_L_proc_is_lambda,
};

/* Whether a T_DATA object is of the kind whose rb_data_type_t is named
 * struct_name ("proc", "time"); or, when that name lies in a part of the
 * image a core lacks, whose class is class_path or a subclass. */
bool rbp_insp_is_data(rbp_insp *in, const rbp_obj *o, const char *struct_name, const char *class_path)
{
    const char *name = rbp_data_struct_name(in->h, o);
    if (name) return strcmp(name, struct_name) == 0;
    return rbp_insp_inherits(in, rbp_class_real(in->h, o->klass), class_path);
}

bool rbp_insp_proc(rbp_insp *in, const rbp_obj *o)
{
    const rbp_layout *L = &in->s->layout;
    for (size_t i = 0; i < sizeof PROC_FIELDS / sizeof PROC_FIELDS[0]; i++)
        if (!rbp_has(L, PROC_FIELDS[i]))
            return rbp_insp_why(in, "this layout has no rb_proc_t members (Proc's struct is private to the VM)");
    uint64_t type_struct = 0, data = 0, lambda = 0;
    if (!rbp_typed_data(in->s, o->addr, &type_struct, &data) || !data)
        return rbp_insp_why(in, "its typed-data header does not point at an rb_proc_t");
    if (!rbp_read_field(in->s, data, RBP_L_proc_is_lambda, &lambda))
        return rbp_insp_why(in, "its rb_proc_t at 0x%" PRIx64 " cannot be read", data);

    /* rb_block_to_s: follow block_type_proc to the block it stands for */
    uint64_t block = data, btype = 0, word = 0;
    /* garbage can make the chain loop (a Proc standing for itself): the
     * guard stops it at once rather than after MAX_PROC_CHAIN reads */
    rbp_walkguard g = rbp_heap_chain_guard(in->h, MAX_PROC_CHAIN);
    for (;;) {
        if (!rbp_heap_chain_step(in->h, &g, block, "the chain of Procs", o->addr))
            return rbp_insp_why(in, "its block stands for a chain of Procs that was cut: %s",
                                rbp_walk_verdict_str(in->h->chain_last));
        if (!rbp_read_field(in->s, block, RBP_L_proc_block_type, &btype))
            return rbp_insp_why(in, "the rb_proc_t at 0x%" PRIx64 " cannot be read", block);
        if (btype != BLOCK_PROC) break;
        uint64_t inner = 0, t = 0;
        if (!rbp_read_field(in->s, block, RBP_L_proc_block_proc, &inner) ||
            rbp_obj_type(in->s, inner) != RBP_T_DATA || !rbp_typed_data(in->s, inner, &t, &block) || !block)
            return rbp_insp_why(in, "its block stands for another Proc that cannot be read");
    }
    rbp_strbuf *out = in->out;
    switch (btype) {
    case BLOCK_ISEQ: {
        const rbp_iseq_info *info = NULL;
        if (!rbp_read_field(in->s, block, RBP_L_proc_block_code, &word) || !(info = rbp_iseq_get(in->s, word)))
            return rbp_insp_why(in, "its block's code (0x%" PRIx64 ") is not a readable iseq", word);
        if (!info->path || !info->path[0])
            return rbp_insp_why(in, "the path of its iseq (0x%" PRIx64 ") cannot be read", word);
        rbp_sb_printf(out, "#<%s:0x%016" PRIx64 " %s:%d", rbp_insp_class_name(in, o->klass), o->addr, info->path,
                      info->first_lineno);
        break;
    }
    case BLOCK_SYMBOL:
        if (!rbp_read_field(in->s, block, RBP_L_proc_block_symbol, &word) ||
            !(rbp_is_static_symbol(word) || (rbp_heap_is_slot(in->h, word) && rbp_obj_type(in->s, word) == RBP_T_SYMBOL)))
            return rbp_insp_why(in, "its block's Symbol (0x%" PRIx64 ") is no Symbol", word);
        rbp_sb_printf(out, "#<%s:0x%016" PRIx64 "(&", rbp_insp_class_name(in, o->klass), o->addr);
        rbp_insp_symbol(in, word);
        rbp_sb_puts(out, ")");
        break;
    case BLOCK_IFUNC:
        if (!rbp_read_field(in->s, block, RBP_L_proc_block_code, &word))
            return rbp_insp_why(in, "its block's vm_ifunc pointer cannot be read");
        rbp_sb_printf(out, "#<%s:0x%016" PRIx64, rbp_insp_class_name(in, o->klass), word);
        break;
    default:
        return rbp_insp_why(in, "its block has type %" PRIu64 ", which Ruby never makes (0 to 3)", btype);
    }
    rbp_sb_puts(out, lambda ? " (lambda)>" : ">");
    return true;
}

/*
 * The target's architecture on the session: what each source says of its
 * ELF machine (a core's header, the debugger, the Ruby images mapped) is
 * recorded here, and a machine rbpeek does not read is refused here, in
 * one line naming what was found and what rbpeek reads, the way a Ruby
 * without a layout is refused. Reading an arm64 Ruby with an x86-64 table
 * validated by chance and printed garbage (issue 39), so the machine is
 * settled before any Ruby state is read, and a layout is chosen for it.
 * The list of machines read is memory/machine.c's.
 */
#include "context/context.h"

#include <stdio.h>

#include "memory/machine.h"

rbpeek_status rbp_machine_establish(rbpeek_session *s, uint16_t m, const char *how)
{
    if (m == RBP_MACHINE_UNKNOWN) return rbp_machine_verdict(s);
    /* The first machine not read that any source names is kept: one
     * source reading x86-64 (the ELF header of the emulator running an
     * arm64 program) does not outvote another that found arm64. */
    bool refused = s->machine != RBP_MACHINE_UNKNOWN && !rbp_machine_read(s->machine);
    if (!refused && (s->machine == RBP_MACHINE_UNKNOWN || !rbp_machine_read(m))) {
        s->machine = m;
        snprintf(s->machine_how, sizeof s->machine_how, "%s", how);
    }
    return rbp_machine_verdict(s);
}

rbpeek_status rbp_machine_verdict(rbpeek_session *s)
{
    if (s->machine == RBP_MACHINE_UNKNOWN || rbp_machine_read(s->machine)) return RBPEEK_OK;
    char read[64];
    rbp_machines_read(read, sizeof read);
    const char *name = rbp_machine_name(s->machine);
    if (name)
        return rbp_fail(s, RBPEEK_ERR_UNSUPPORTED,
                        "the target is %s (ELF machine %u, from %s); rbpeek reads %s targets only: it has no "
                        "struct tables, registers or unwinder of %s",
                        name, s->machine, s->machine_how, read, name);
    return rbp_fail(s, RBPEEK_ERR_UNSUPPORTED,
                    "the target's ELF machine is %u (from %s); rbpeek reads %s targets only: it has no struct "
                    "tables, registers or unwinder of that machine",
                    s->machine, s->machine_how, read);
}

uint16_t rbp_machine_of_target(const rbpeek_session *s)
{
    return s->machine != RBP_MACHINE_UNKNOWN ? s->machine : RBP_MACHINE_DEFAULT;
}

/*
 * What every reader of the context does with it: report a one-line error
 * or warning on the session, and resolve a symbol (the debugger's lookup
 * first, then the target's ELF images).
 */
#include "context/context.h"

#include <stdio.h>
#include <string.h>

#include "memory/elf_symbols.h"

rbpeek_status rbp_fail(rbpeek_session *s, rbpeek_status status, const char *fmt, ...)
{
    if (!s) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    /* The contract is one line: never let a target-derived newline through. */
    for (char *p = s->error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return status;
}

void rbp_warn(rbpeek_session *s, const char *fmt, ...)
{
    /* Warnings accumulate on one line: attach may have several to say. */
    size_t used = strlen(s->warning);
    if (used && used + 2 < sizeof s->warning) {
        memcpy(s->warning + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= sizeof s->warning) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->warning + used, sizeof s->warning - used, fmt, ap);
    va_end(ap);
}

static void warn_line(void *ctx, const char *line)
{
    rbpeek_session *s = ctx;
    if (!*line || strstr(s->warning, line)) return;
    rbp_warn(s, "%s", line);
}

rbp_warnsink rbp_session_warnsink(rbpeek_session *s) { return (rbp_warnsink){warn_line, s}; }

bool rbp_symbol_lookup_in(rbpeek_session *s, const char *name, uint64_t *addr, const char **how, unsigned from)
{
    /* The images' own symbols first: a few reads, where a debugger's lookup
     * can take tens of milliseconds a name (gdb parses its symbol tables);
     * the debugger then finds what they do not have (separate debug info). */
    if ((from & RBP_SYM_IMAGES) && rbp_elf_lookup(s->mem, s->regions, s->nregions, &s->elfcache, name, addr) &&
        *addr) {
        if (how) *how = "ELF dynamic symbols in target memory";
        return true;
    }
    if ((from & RBP_SYM_IMAGES) && rbp_elf_symtab_lookup(s->regions, s->nregions, name, addr, rbp_mem_warn(s->mem)) && *addr) {
        if (how) *how = ".symtab of the Ruby image on disk";
        return true;
    }
    if ((from & RBP_SYM_DEBUGGER) && s->lookup && s->lookup(s->lookup_ctx, name, addr) == 0 && *addr) {
        if (how) *how = "debugger symbol table";
        return true;
    }
    return false;
}

bool rbp_symbol_lookup(rbpeek_session *s, const char *name, uint64_t *addr, const char **how)
{
    return rbp_symbol_lookup_in(s, name, addr, how, RBP_SYM_IMAGES | RBP_SYM_DEBUGGER);
}

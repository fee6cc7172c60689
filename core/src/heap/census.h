/*
 * The heap census aggregator, apart from the heap walker so it can be
 * tested on synthetic input: slots are added one by one (type, class
 * pointer, bytes), pages with their tallies; finishing maps each class
 * pointer to the class Ruby's obj.class would report and to its name
 * through caller-supplied functions, and merges rows that meet there.
 */
#ifndef RBP_CENSUS_H
#define RBP_CENSUS_H

#include <stdbool.h>
#include <stdint.h>

#include "rbpeek.h"

rbpeek_census *rbp_census_new(const char *ruby_version);
/* One live object. internal: hidden from ObjectSpace.memsize_of_all.
 * Objects of internal types (imemo, iclass, node, zombie, moved) and hidden
 * ones (klass 0) are grouped by type, not by class. Returns false on OOM. */
bool rbp_census_add(rbpeek_census *c, int type, uint64_t klass, uint64_t bytes, bool internal);
/* One page after its walk. */
bool rbp_census_add_page(rbpeek_census *c, uint64_t header, uint64_t start, uint32_t slot_size, uint32_t slots,
                         uint32_t live, uint32_t free_slots, uint32_t unreadable);
/* Pages listed by the objspace but left out (bad header). */
void rbp_census_set_rejected_pages(rbpeek_census *c, uint64_t n);

typedef uint64_t (*rbp_census_real_fn)(void *ctx, uint64_t klass);       /* 0 = unknown */
typedef const char *(*rbp_census_name_fn)(void *ctx, uint64_t real);    /* never NULL */
bool rbp_census_finish(rbpeek_census *c, rbp_census_real_fn real, rbp_census_name_fn name, void *ctx);

/* Type names as ObjectSpace.count_objects spells them ("T_STRING"). */
const char *rbp_type_name(int type);

#endif

/*
 * Room a function needs only for the length of one call, kept from call to
 * call: the frame walker runs for every thread of every sample, and its
 * temporaries (the raw control frames, the frames being built, the value
 * stack it pins) would otherwise be a malloc and a free each time. Once
 * warm, a sample allocates none of them. One user at a time (the session is
 * single-threaded); the contents are not kept between calls.
 */
#ifndef RBP_SCRATCH_H
#define RBP_SCRATCH_H

#include <stddef.h>

typedef struct rbp_scratch {
    void *p;
    size_t cap;
} rbp_scratch;

/* Room for size bytes (contents undefined), or NULL if out of memory. */
void *rbp_scratch_get(rbp_scratch *sc, size_t size);
/* Room for size bytes keeping what the room held (the first size bytes of
 * it), for a buffer filled as reads succeed; NULL if out of memory, the
 * room then unchanged. */
void *rbp_scratch_grow(rbp_scratch *sc, size_t size);
/* Ends a use: room beyond what a real stack needs, asked for by a damaged
 * one, is given back rather than kept for the life of the session. */
void rbp_scratch_done(rbp_scratch *sc);
void rbp_scratch_free(rbp_scratch *sc);

#endif

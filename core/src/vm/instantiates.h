/*
 * Which C method frames allocate an instance of their receiver: Class#new
 * and Class#allocate on every release, the `new` of every class Struct.new
 * makes, and 3.3's Array.new. Such a frame caught in the object allocator
 * is allocating an instance of its self, exactly: that is the one
 * allocation made in its own frame, as `initialize` runs in a frame of its
 * own above it. The allocation sites (profile/alloc_sites.c) read a site's
 * type here; no other frame says what it allocates without decoding
 * bytecode.
 */
#ifndef RBP_INSTANTIATES_H
#define RBP_INSTANTIATES_H

#include <stdint.h>

#include "context/context.h"
#include "vm/symbolize.h"

/* The class a C method frame (its method entry cme, its self) makes an
 * instance of, or 0: another method, or what decides it is unreadable. */
uint64_t rbp_cfunc_instantiates(rbpeek_session *s, const rbp_cme *cme, uint64_t self);

#endif

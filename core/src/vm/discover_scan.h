/*
 * Discovery when the target's symbols are gone: a core opened without its
 * binaries, or a Ruby whose ruby_current_vm_ptr is hidden. Each finder reads
 * only the target's memory and its list of mapped files, and accepts an
 * answer only after a check that a wrong one fails.
 */
#ifndef RBP_DISCOVER_SCAN_H
#define RBP_DISCOVER_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context/context.h"

/* True for a path whose file looks like libruby or a ruby executable. */
bool rbp_is_ruby_image_path(const char *path);

/* The exact release named by the Ruby image's file name (libruby.so.X.Y.Z,
 * as `make install` names it), into out. False for names that carry no
 * patch release (Debian's libruby-3.1.so.3.1) or when no image is mapped. */
bool rbp_version_from_image_name(const rbpeek_session *s, char *out, size_t n);

/* The address of an aligned word equal to value inside the Ruby image's
 * writable data (its read-write mappings and the .bss right after them),
 * or 0. The VM pointer's home, found this way, anchors the search for
 * ruby_global_symbols, which lives beside it. */
uint64_t rbp_scan_image_data_for(rbpeek_session *s, uint64_t value);

/* A VM found by scanning the Ruby image's writable data for a pointer to
 * something that reads as a VM under the session's layout (its main thread
 * points back to it). Returns the VM and sets *where to the pointer's
 * address, or returns 0. */
uint64_t rbp_scan_image_data_for_vm(rbpeek_session *s, uint64_t *where);

/* A VM is plausible if its main thread points back at it (under the
 * session's layout); why says what failed. The check every VM candidate
 * passes, found by symbol, by --vm or by a scan. */
bool rbp_vm_plausible(rbpeek_session *s, uint64_t vm, char *why, size_t whylen);

/* The VM's member that points to its main thread: ractor.main_thread from
 * 3.0, main_thread before; RBP_L_COUNT when the layout has neither. */
rbp_field_id rbp_vm_main_thread_field(const rbp_layout *L);

#endif

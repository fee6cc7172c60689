/*
 * What the target's Ruby release means for every reader: the facts that
 * change from one release line to the next (special constants, flag bits
 * and masks, how a backtrace quotes a label, how frames are reported),
 * computed once at attach from the version (rbp_release_init). Readers ask
 * these facts; none of them compares version numbers itself. The only
 * other place that knows versions is layout/ (which table fits which
 * release). docs/versions.md's "Adding a release" lists what to check here.
 */
#ifndef RBP_CONTEXT_RELEASE_H
#define RBP_CONTEXT_RELEASE_H

#include <stdbool.h>
#include <stdint.h>

/* How a backtrace line quotes a method's label: `label' before 3.4,
 * 'label' from 3.4 (Feature #16495). */
typedef struct rbp_label_quotes {
    const char *open, *close;
} rbp_label_quotes;

typedef struct rbp_release {
    int major, minor, patch;
    rbp_label_quotes quotes;
} rbp_release;

/* Fills r for Ruby major.minor.patch. */
void rbp_release_init(rbp_release *r, int major, int minor, int patch);

#endif

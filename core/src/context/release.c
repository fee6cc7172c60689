/*
 * The release facts (release.h): each fact is a small named rule of the
 * release line, decided here and nowhere else.
 */
#include "context/release.h"

/* Whether the release is at least major.minor. */
static bool at_least(const rbp_release *r, int major, int minor)
{
    return r->major > major || (r->major == major && r->minor >= minor);
}

void rbp_release_init(rbp_release *r, int major, int minor, int patch)
{
    *r = (rbp_release){.major = major, .minor = minor, .patch = patch};
    r->quotes = at_least(r, 3, 4) ? (rbp_label_quotes){"'", "'"} : (rbp_label_quotes){"`", "'"};
}

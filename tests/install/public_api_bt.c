/*
 * A program outside the tree using librbpeek as installed: built by
 * test_install_prefix.py with nothing but `pkg-config rbpeek` (shared, then
 * static) and rbpeek.h's public API, it prints every Ruby thread's
 * backtrace of a live process as JSON, for comparison with what the process
 * records of itself.
 *
 *   public_api_bt PID
 */
#include <stdio.h>
#include <stdlib.h>

#include <rbpeek.h>

int main(int argc, char **argv)
{
    if (argc != 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: public_api_bt PID\n");
        return 2;
    }
    rbpeek_session *s = rbpeek_session_new();
    if (!s) return 1;
    rbpeek_snapshot *snap = NULL;
    char *out = NULL;
    rbpeek_status st = rbpeek_session_use_pid(s, atoi(argv[1]));
    if (st == RBPEEK_OK) st = rbpeek_session_attach(s);
    if (st == RBPEEK_OK) st = rbpeek_snapshot_take(s, 0, &snap);
    if (st == RBPEEK_OK) st = rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_JSON, -1, &out);
    if (st == RBPEEK_OK)
        fputs(out, stdout);
    else
        fprintf(stderr, "public_api_bt: %s: %s\n", rbpeek_status_name(st), rbpeek_session_error(s));
    rbpeek_free(out);
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
    return st == RBPEEK_OK ? 0 : 1;
}

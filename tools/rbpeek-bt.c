/*
 * rbpeek-bt: Ruby backtraces of every thread of a live process or a core
 * file, without a debugger (like pystack for Python). It uses the core's own
 * memory sources: /proc/PID/mem for a live process (the caller must be
 * allowed to read it; the process is not stopped, so a busy process may
 * show a torn stack) and the ELF core plus its mapped files for a core.
 *
 *   rbpeek-bt --pid PID [--json] [options]
 *   rbpeek-bt --core CORE [--json] [options]
 *
 * Also the debugger-free way the test suite exercises the whole core.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbpeek.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rbpeek-bt (--pid PID | --core CORE) [--json] [--max-frames N]\n"
            "                 [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z] [--debug-file ELF]\n"
            "Prints the Ruby backtrace of every thread of a live process or a core file.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"pid", required_argument, NULL, 'p'},        {"core", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},             {"max-frames", required_argument, NULL, 'm'},
        {"vm", required_argument, NULL, 'v'},         {"layout", required_argument, NULL, 'l'},
        {"ruby-version", required_argument, NULL, 'r'}, {"debug-file", required_argument, NULL, 'd'},
        {"stats", no_argument, NULL, 's'},            {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *core = NULL, *layout = NULL, *version = NULL;
    const char *debug_files[16];
    int ndebug = 0, pid = 0, json = 0, stats = 0;
    unsigned long long vm = 0;
    size_t max_frames = 0;
    int c;
    while ((c = getopt_long(argc, argv, "p:c:jm:v:l:r:d:sh", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'p':
            pid = (int)strtol(optarg, &end, 10);
            if (!*optarg || *end || pid <= 0) {
                fprintf(stderr, "rbpeek-bt: --pid wants a process id, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'c': core = optarg; break;
        case 'j': json = 1; break;
        case 'm': max_frames = strtoul(optarg, NULL, 10); break;
        case 'v':
            errno = 0;
            vm = strtoull(optarg, &end, 0);
            if (!*optarg || *end || errno || !vm) {
                fprintf(stderr, "rbpeek-bt: --vm wants an address like 0x55d0c0ffee00, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'l': layout = optarg; break;
        case 'r': version = optarg; break;
        case 'd':
            if (ndebug < 16) debug_files[ndebug++] = optarg;
            break;
        case 's': stats = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if ((pid == 0) == (core == NULL) || optind != argc) {
        usage(stderr);
        return 2;
    }

    rbpeek_session *s = rbpeek_session_new();
    if (!s) {
        fprintf(stderr, "rbpeek-bt: out of memory\n");
        return 1;
    }
    rbpeek_status st = pid ? rbpeek_session_use_pid(s, pid) : rbpeek_session_use_core(s, core);
    for (int i = 0; st == RBPEEK_OK && i < ndebug; i++) st = rbpeek_session_add_debug_file(s, debug_files[i]);
    if (st == RBPEEK_OK && vm) st = rbpeek_session_set_vm(s, vm);
    if (st == RBPEEK_OK && layout) st = rbpeek_session_set_layout_file(s, layout);
    if (st == RBPEEK_OK && version) st = rbpeek_session_set_ruby_version(s, version);
    if (st == RBPEEK_OK) st = rbpeek_session_attach(s);
    rbpeek_snapshot *snap = NULL;
    if (st == RBPEEK_OK) st = rbpeek_snapshot_take(s, max_frames, &snap);
    char *out = NULL;
    if (st == RBPEEK_OK)
        st = rbpeek_snapshot_render(s, snap, json ? RBPEEK_FORMAT_JSON : RBPEEK_FORMAT_TEXT, -1, &out);
    if (st != RBPEEK_OK) {
        fprintf(stderr, "rbpeek-bt: %s\n", rbpeek_session_error(s));
    } else {
        if (*rbpeek_session_warning(s)) fprintf(stderr, "rbpeek-bt: warning: %s\n", rbpeek_session_warning(s));
        fputs(out, stdout);
        if (stats) {
            rbpeek_read_stats rs;
            rbpeek_session_read_stats(s, &rs);
            fprintf(stderr, "layout: %s\nreads: %llu requests, %llu source reads, %llu bytes, %llu failures\n",
                    rbpeek_session_layout_source(s), (unsigned long long)rs.requests,
                    (unsigned long long)rs.source_reads, (unsigned long long)rs.source_bytes,
                    (unsigned long long)rs.failures);
        }
    }
    rbpeek_free(out);
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
    return st == RBPEEK_OK ? 0 : 1;
}

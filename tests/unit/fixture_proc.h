/*
 * Test helpers around the core_target fixture process (fixtures/
 * core_target.c): start a copy of it, read the addresses it reports, take a
 * core of it with gcore, stop it. Used by test_mem_core, test_mem_proc and
 * test_elf_symbols. The fixture is run from a copy in the test tmp dir so a
 * test can hide the executable and see that reads of its file-backed pages
 * then stop working (proving they came from the file).
 */
#ifndef RBP_FIXTURE_PROC_H
#define RBP_FIXTURE_PROC_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2; include this header first */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_emulator.h"

#ifndef RBP_CORE_TARGET
#error "RBP_CORE_TARGET (path of the core_target fixture) must be defined by the build"
#endif

typedef struct fixture_proc {
    pid_t pid;
    char exe[PATH_MAX];     /* the copy that runs */
    uint64_t buf, hole, marker, string, environ_addr, page;
} fixture_proc;

/* The byte at offset i of the fixture's buffer (same function as there). */
static inline unsigned char fixture_pattern(size_t i) { return (unsigned char)((i * 131u + 7u) ^ (i >> 8)); }

static inline const char *fixture_tmpdir(void)
{
    static char dir[PATH_MAX / 2];
    if (!dir[0]) {
        const char *t = getenv("RBPEEK_TEST_TMP");
        snprintf(dir, sizeof dir, "%s", t && *t ? t : "/tmp/rbpeek-test");
        /* mkdir -p */
        for (char *p = dir + 1; *p; p++) {
            if (*p != '/') continue;
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
        mkdir(dir, 0755);
    }
    return dir;
}

static inline int fixture_copy_file(const char *from, const char *to, mode_t mode, off_t limit)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[65536];
    off_t done = 0;
    int rc = 0;
    for (;;) {
        size_t want = sizeof buf;
        if (limit >= 0 && (off_t)want > limit - done) want = (size_t)(limit - done);
        if (want == 0) break;
        ssize_t n = read(in, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
        done += n;
    }
    close(in);
    close(out);
    return rc;
}

/* Starts a copy (named by tag) of the fixture executable exe; false if it
 * could not start. With core_dir, the child runs there with RLIMIT_CORE
 * unlimited, so a fatal signal makes the kernel write a core there (when
 * kernel.core_pattern is a plain file name). */
static inline bool fixture_start_in(fixture_proc *f, const char *tag, const char *exe, const char *core_dir)
{
    memset(f, 0, sizeof *f);
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return false;
    snprintf(f->exe, sizeof f->exe, "%s/core_target_%s", fixture_tmpdir(), tag);
    unlink(f->exe);
    if (fixture_copy_file(exe, f->exe, 0755, -1) != 0) return false;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with a test a fatal assertion ended */
        dup2(fds[1], 1);
        if (core_dir) {
            struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
            if (chdir(core_dir) != 0 || setrlimit(RLIMIT_CORE, &rl) != 0) _exit(126);
        }
        execl(f->exe, f->exe, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    f->pid = pid;
    char line[256];
    size_t n = 0;
    while (n < sizeof line - 1) {
        ssize_t r = read(fds[0], line + n, sizeof line - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (memchr(line, '\n', n)) break;
    }
    close(fds[0]);
    line[n] = '\0';
    unsigned long v[6];
    if (sscanf(line, "%lx %lx %lx %lx %lx %lx", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        f->pid = 0;
        return false;
    }
    f->buf = v[0], f->hole = v[1], f->marker = v[2], f->string = v[3], f->environ_addr = v[4], f->page = v[5];
    return true;
}

static inline bool fixture_start_exe(fixture_proc *f, const char *tag, const char *exe)
{
    return fixture_start_in(f, tag, exe, NULL);
}

static inline bool fixture_start(fixture_proc *f, const char *tag)
{
    return fixture_start_in(f, tag, RBP_CORE_TARGET, NULL);
}

static inline void fixture_stop(fixture_proc *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, NULL, 0);
        f->pid = 0;
    }
}

/* Removes the executable copy (a core of it still needs it until then). */
static inline void fixture_remove(fixture_proc *f)
{
    fixture_stop(f);
    if (f->exe[0]) unlink(f->exe);
    f->exe[0] = '\0';
}

/* True if an executable named prog is on PATH. */
static inline bool fixture_have(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, prog);
        if (access(buf, X_OK) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* Takes a core of the running fixture with gcore into core_out. */
static inline bool fixture_gcore(const fixture_proc *f, const char *tag, char *core_out, size_t outlen)
{
    char prefix[PATH_MAX - 32];
    snprintf(prefix, sizeof prefix, "%s/core_%s", fixture_tmpdir(), tag);
    snprintf(core_out, outlen, "%s.%d", prefix, (int)f->pid);
    unlink(core_out);
    char pidstr[32];
    snprintf(pidstr, sizeof pidstr, "%d", (int)f->pid);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        execlp("gcore", "gcore", "-o", prefix, pidstr, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return false;
    struct stat sb;
    return stat(core_out, &sb) == 0 && sb.st_size > 0;
}

#endif

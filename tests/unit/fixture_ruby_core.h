/*
 * A core of a real Ruby for the session tests: Debian's stripped ruby3.1
 * runs fixtures/walk_target.rb (which records its own backtrace_locations
 * and version into DIR and parks), gcore takes a core of it, and the
 * process is killed. Used by test_walk_core and test_oom_paths.
 */
#ifndef RBP_FIXTURE_RUBY_CORE_H
#define RBP_FIXTURE_RUBY_CORE_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIXTURE_RUBY "/usr/bin/ruby3.1"

static inline bool fixture_run(const char *cmd)
{
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

/* Makes <tmp>/<name>.<pid> in dir and the core's path in core; false when
 * the Ruby, gcore or the core is missing (the caller skips). */
static inline bool fixture_ruby_core(const char *name, char *dir, size_t dirsize, char *core, size_t coresize)
{
    if (access(FIXTURE_RUBY, X_OK) != 0 || !fixture_run("command -v gcore >/dev/null")) return false;
    const char *tmp = getenv("RBPEEK_TEST_TMP");
    snprintf(dir, dirsize, "%s/%s.%d", tmp && *tmp ? tmp : "/tmp", name, (int)getpid());
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (!fixture_run(cmd)) return false;
    const char *src = getenv("RBPEEK_SOURCE_DIR");
    char script[1024];
    snprintf(script, sizeof script, "%s/tests/unit/fixtures/walk_target.rb", src ? src : ".");
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        execl(FIXTURE_RUBY, FIXTURE_RUBY, script, dir, (char *)NULL);
        _exit(127);
    }
    char ready[700];
    snprintf(ready, sizeof ready, "%s/ready", dir);
    for (int i = 0; i < 600 && access(ready, F_OK) != 0; i++) usleep(50000);
    usleep(300000);
    snprintf(cmd, sizeof cmd, "gcore -o '%s/core' %d >/dev/null 2>&1", dir, (int)pid);
    bool ok = access(ready, F_OK) == 0 && fixture_run(cmd);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    snprintf(core, coresize, "%s/core.%d", dir, (int)pid);
    return ok && access(core, R_OK) == 0;
}

#endif

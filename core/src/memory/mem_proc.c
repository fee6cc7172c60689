/*
 * Memory source over a live process: reads /proc/PID/mem, regions from
 * /proc/PID/maps. The fd is opened read-only and only ever pread, so rbpeek
 * can never change the target. Reading another process's memory needs
 * ptrace access to it (same user and a permissive yama ptrace_scope, the
 * process's parent, or CAP_SYS_PTRACE); the target need not be stopped,
 * which is the caller's business (a sampler stops it for a consistent view).
 *
 * A process in another mount namespace (a container) names its files by
 * its own root: the path /proc/PID/maps shows for a file this side cannot
 * reach is the container's, and here may be missing or, worse, another
 * file (the host's own libruby of another release). So each mapped file's
 * path is checked against the inode the maps line gives: the path as it
 * is when it is that file here, else the same path under /proc/PID/root
 * (the process's own root, as the kernel resolves it for its tracer), so
 * that every reader of the images (symbols, DWARF) opens the file the
 * process really mapped.
 */
#define _GNU_SOURCE
#include "base/errbuf.h"
#include "memory/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* /proc/PID/maps of a sane process has a few thousand lines; the kernel's
 * vm.max_map_count default is 65530. Anything beyond this is not read. */
#define MAX_MAPS_LINES (1u << 20)

typedef struct proc_src {
    int fd;
    int pid;
} proc_src;


/* The kernel copies page by page and stops at the first unreadable one, so
 * a read running into an unmapped page comes back short; a read starting on
 * one fails with EIO (or EFAULT). Either way the rest is unreadable. */
static long proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    proc_src *p = ctx;
    size_t done = 0;
    while (done < len) {
        uint64_t a = addr + done;
        /* pread's offset is a signed off_t: the upper half of the address
         * space (the kernel's) cannot be addressed, and is unreadable anyway. */
        if (a < addr || a > (uint64_t)INT64_MAX) break;
        ssize_t n = pread(p->fd, (char *)buf + done, len - done, (off_t)a);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    return done ? (long)done : -1;
}

/* Many ranges in one process_vm_readv (scattered ranges are what it does
 * that a pread of /proc/PID/mem cannot). It stops at the first range it
 * cannot read; the ranges after it are tried again in a call of their own,
 * so a batch costs one call per unreadable range plus one. Unlike the fd,
 * the pid could name another process once the target is gone: callers use
 * this only while they hold the target stopped (rbp_mem_prefetch). */
static void proc_read_many(void *ctx, const uint64_t *addrs, uint8_t *const *bufs, size_t n, size_t len, long *got)
{
    proc_src *p = ctx;
    enum { BATCH = 64 };   /* well under IOV_MAX */
    size_t i = 0;
    while (i < n) {
        size_t k = n - i < BATCH ? n - i : BATCH;
        struct iovec local[BATCH], remote[BATCH];
        for (size_t j = 0; j < k; j++) {
            local[j] = (struct iovec){bufs[i + j], len};
            remote[j] = (struct iovec){(void *)(uintptr_t)addrs[i + j], len};
        }
        ssize_t r = process_vm_readv(p->pid, local, k, remote, k, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            if (errno != EFAULT) {   /* ENOSYS, EPERM, ESRCH: no batching here */
                for (; i < n; i++) got[i] = -1;
                return;
            }
            r = 0;
        }
        size_t whole = (size_t)r / len;
        for (size_t j = 0; j < whole && j < k; j++) got[i + j] = (long)len;
        if (whole >= k) {
            i += k;
            continue;
        }
        /* Range i+whole was cut short (rest bytes) or unreadable: leave it
         * to a plain read, which finds out how much of it is readable. */
        got[i + whole] = -1;
        i += whole + 1;
    }
}

static void proc_close(void *ctx)
{
    proc_src *p = ctx;
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    free(p);
}

bool rbp_source_proc(int pid, rbp_source *out, char *err, size_t errlen)
{
    if (pid <= 0 || !out) {
        rbp_set_err(err, errlen, "invalid pid %d", pid);
        return false;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) rbp_set_err(err, errlen, "no process %d", pid);
        else if (e == EACCES || e == EPERM)
            rbp_set_err(err, errlen, "cannot read memory of process %d: %s (needs ptrace permission: same user "
                    "with kernel.yama.ptrace_scope=0, or root/CAP_SYS_PTRACE)", pid, strerror(e));
        else rbp_set_err(err, errlen, "cannot open %s: %s", path, strerror(e));
        return false;
    }
    proc_src *p = malloc(sizeof *p);
    if (!p) {
        close(fd);
        rbp_set_err(err, errlen, "out of memory");
        return false;
    }
    p->fd = fd;
    p->pid = pid;
    *out = (rbp_source){.read = proc_read, .read_many = proc_read_many, .close = proc_close, .ctx = p, .kind = "proc"};
    return true;
}

/* Parses one maps line: "start-end perms offset dev inode [path]". The path
 * is the rest of the line after the inode's padding and may contain spaces
 * (and a " (deleted)" suffix, kept as the kernel wrote it). */
static bool parse_maps_line(char *line, rbp_region *r, unsigned long long *inode)
{
    unsigned long long start, end, ofs;
    char perms[8];
    int pathpos = 0;
    *inode = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &ofs, inode, &pathpos) < 5) return false;
    if (end <= start) return false;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    const char *path = pathpos > 0 && (size_t)pathpos <= n ? line + pathpos : "";
    r->start = start;
    r->end = end;
    r->file_offset = ofs;
    r->path = NULL;
    if (*path && !(r->path = strdup(path))) return false;
    return true;
}

static bool is_inode(const char *path, unsigned long long inode)
{
    struct stat st;
    return stat(path, &st) == 0 && (unsigned long long)st.st_ino == inode;
}

/* The path by which this side opens the file a region maps (see the top):
 * NULL to keep the region's own; else a malloc'd /proc/PID/root/PATH. */
static char *reachable_path(int pid, const char *path, unsigned long long inode, bool other_ns)
{
    if (!path || path[0] != '/' || inode == 0) return NULL;
    if (!other_ns && is_inode(path, inode)) return NULL;
    size_t need = strlen(path) + 32;
    char *inside = malloc(need);
    if (!inside) return NULL;
    snprintf(inside, need, "/proc/%d/root%s", pid, path);
    if (is_inode(inside, inode) || (other_ns && !is_inode(path, inode))) return inside;
    free(inside);
    return NULL;
}

/* Whether pid sees another mount namespace or another root than this
 * process (a container, a chroot). */
static bool other_mount_ns(int pid)
{
    char a[64];
    struct stat mine, theirs;
    snprintf(a, sizeof a, "/proc/%d/ns/mnt", pid);
    if (stat("/proc/self/ns/mnt", &mine) == 0 && stat(a, &theirs) == 0 && mine.st_ino != theirs.st_ino) return true;
    snprintf(a, sizeof a, "/proc/%d/root", pid);
    if (stat("/", &mine) == 0 && stat(a, &theirs) == 0 && (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev))
        return true;
    return false;
}

size_t rbp_source_proc_regions(int pid, rbp_region **out)
{
    if (!out) return 0;
    *out = NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    rbp_region *r = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t linecap = 0;
    bool failed = false;
    bool other_ns = other_mount_ns(pid);
    char *last_path = NULL, *last_fixed = NULL;   /* consecutive regions map the same file */
    while (n < MAX_MAPS_LINES && getline(&line, &linecap, f) > 0) {
        rbp_region reg;
        unsigned long long inode;
        if (!parse_maps_line(line, &reg, &inode)) continue;
        if (reg.path && reg.path[0] == '/') {
            char *fixed;
            if (last_path && !strcmp(last_path, reg.path)) {
                fixed = last_fixed ? strdup(last_fixed) : NULL;
            } else {
                fixed = reachable_path(pid, reg.path, inode, other_ns);
                free(last_path);
                free(last_fixed);
                last_path = strdup(reg.path);
                last_fixed = fixed ? strdup(fixed) : NULL;
            }
            if (fixed) {
                free(reg.path);
                reg.path = fixed;
            }
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 128;
            rbp_region *nr = realloc(r, ncap * sizeof *nr);
            if (!nr) {
                free(reg.path);
                failed = true;
                break;
            }
            r = nr;
            cap = ncap;
        }
        r[n++] = reg;
    }
    free(line);
    free(last_path);
    free(last_fixed);
    fclose(f);
    if (failed || n == 0) {
        for (size_t i = 0; i < n; i++) free(r[i].path);
        free(r);
        return 0;
    }
    *out = r;
    return n;
}

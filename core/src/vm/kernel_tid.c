/*
 * The kernel's thread id of a Ruby thread (see kernel_tid.h for why Ruby's
 * own record is not enough), and threads' TIDs as pairs for the caller
 * (rbp_kernel_tid_pairs, rbpeek_snapshot_resolve_tids' work, at the end).
 * Three things are kept on the session:
 *
 *  - the offset of the TID in glibc's struct pthread: the one glibc
 *    publishes for libthread_db (_thread_db_pthread_tid: bits, count,
 *    offset), read once, else one found by calibration on the threads'
 *    descriptors (rbp_kernel_tid_calibrate; Ruby 2.7 and cores of other
 *    machines' glibc). A published offset that gives the main thread no
 *    listed TID is dropped for calibration: a core from another machine
 *    may name a libc that is not the one it ran;
 *  - what the kernel lists: the caller's list (a debugger's threads, a
 *    core's NT_PRSTATUS), or for a live process read directly
 *    /proc/PID/task/TID, asked once per (pthread_t, TID) and remembered (a
 *    sampler asks every sample; a descriptor holding another TID is asked
 *    again);
 *  - a process in another PID namespace (a container) knows its threads by
 *    the namespace's numbers, which glibc's descriptor and Ruby's record
 *    hold, while /proc, ptrace and the debuggers outside use this side's:
 *    the NSpid lines of /proc/PID/task/TID/status map one to the other
 *    (read again, at most every 100 ms, when a TID is not in the map).
 *    Every TID handed out is this side's.
 */
#define _GNU_SOURCE
#include "vm/kernel_tid.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/addrmap.h"

/* glibc keeps the TID within the first few hundred bytes of struct pthread
 * (0x2d0 in glibc 2.26 to 2.37 on x86-64): calibration looks no further. */
#define PTHREAD_SCAN_BYTES 2048
#define CALIBRATE_EVERY 64          /* calls between calibration attempts that failed */
#define VERIFIED_MAX 65536          /* remembered pairs; the map is cleared when full */
#define NS_MAP_MAX 65536            /* threads mapped between PID namespaces */
#define NS_REREAD_NS 100000000ull   /* the namespace map is read at most this often */

typedef struct ns_pair {
    int64_t inner, outer;
} ns_pair;

struct rbp_ktids {
    int64_t *list;            /* the caller's list, when given */
    size_t nlist;
    long off;                 /* the TID's offset in struct pthread, -1 unknown */
    bool looked;              /* the published offset was looked for */
    bool published;           /* off came from glibc's own record */
    bool off_checked;         /* ... and gave the main thread a listed TID */
    unsigned calib_wait;
    rbp_addrmap verified;     /* pthread_t -> TID the kernel listed (this side's) */
    rbp_addrmap said;         /* pthread_t -> Ruby's own record of its TID when that was verified */
    int ns;                   /* 0 not asked, 1 same PID namespace, 2 another */
    ns_pair *nsmap;
    size_t nns;
    uint64_t ns_read_at;
};

static struct rbp_ktids *state(rbpeek_session *s)
{
    if (!s->ktids) {
        s->ktids = calloc(1, sizeof *s->ktids);
        if (!s->ktids) return NULL;
        s->ktids->off = -1;
        rbp_addrmap_init(&s->ktids->verified, VERIFIED_MAX, NULL);
        rbp_addrmap_init(&s->ktids->said, VERIFIED_MAX, NULL);
    }
    return s->ktids;
}

void rbp_kernel_tids_free(rbpeek_session *s)
{
    if (!s || !s->ktids) return;
    free(s->ktids->list);
    free(s->ktids->nsmap);
    rbp_addrmap_destroy(&s->ktids->verified);
    rbp_addrmap_destroy(&s->ktids->said);
    free(s->ktids);
    s->ktids = NULL;
}

bool rbp_kernel_tids_set(rbpeek_session *s, const int64_t *tids, size_t n)
{
    struct rbp_ktids *k = state(s);
    if (!k) return false;
    free(k->list);
    k->list = NULL;
    k->nlist = 0;
    if (n) {
        if (!(k->list = malloc(n * sizeof *k->list))) return false;
        memcpy(k->list, tids, n * sizeof *k->list);
        k->nlist = n;
    }
    rbp_addrmap_clear(&k->verified);
    rbp_addrmap_clear(&k->said);
    return true;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- PID namespaces ------------------------------------------------------- */

static bool other_namespace(rbpeek_session *s, struct rbp_ktids *k)
{
    if (!k->ns) {
        char path[64];
        struct stat mine, theirs;
        snprintf(path, sizeof path, "/proc/%d/ns/pid", s->pid);
        k->ns = stat("/proc/self/ns/pid", &mine) == 0 && stat(path, &theirs) == 0 &&
                        (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
                    ? 2
                    : 1;
    }
    return k->ns == 2;
}

/* The NSpid line of one task: this side's TID first, the innermost last. */
static bool task_nspid(int pid, const char *task, ns_pair *out)
{
    char path[320], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%.256s/status", pid, task);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    bool ok = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) != 0) continue;
        long long v[8];
        int n = 0;
        char *p = line + 6, *end;
        while (n < 8) {
            long long x = strtoll(p, &end, 10);
            if (end == p) break;
            v[n++] = x;
            p = end;
        }
        if (n >= 1) {
            *out = (ns_pair){.outer = v[0], .inner = v[n - 1]};
            ok = true;
        }
        break;
    }
    fclose(f);
    return ok;
}

static void read_nsmap(rbpeek_session *s, struct rbp_ktids *k)
{
    k->ns_read_at = now_ns();
    k->nns = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", s->pid);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(d)) != NULL && k->nns < NS_MAP_MAX) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        ns_pair p;
        if (!task_nspid(s->pid, e->d_name, &p)) continue;
        if (k->nns == cap) {
            size_t nc = cap ? cap * 2 : 32;
            ns_pair *m = realloc(k->nsmap, nc * sizeof *m);
            if (!m) break;
            k->nsmap = m;
            cap = nc;
        }
        k->nsmap[k->nns++] = p;
    }
    closedir(d);
}

/* A TID as the target's namespace numbers it, in this side's numbers; -1
 * when no thread of the target has it. */
static int64_t outer_tid(rbpeek_session *s, struct rbp_ktids *k, int64_t inner)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < k->nns; i++)
            if (k->nsmap[i].inner == inner) return k->nsmap[i].outer;
        if (pass || now_ns() - k->ns_read_at < NS_REREAD_NS) break;
        read_nsmap(s, k);
    }
    return -1;
}

/* --- what the kernel lists ------------------------------------------------ */

static bool in_list(const struct rbp_ktids *k, int64_t tid)
{
    for (size_t i = 0; i < k->nlist; i++)
        if (k->list[i] == tid) return true;
    return false;
}

/* tid (as the target numbers it) in this side's numbers when the kernel
 * lists it, else -1. */
static int64_t listed(rbpeek_session *s, struct rbp_ktids *k, int64_t tid)
{
    if (tid <= 0 || tid > INT32_MAX) return -1;
    if (k->list) return in_list(k, tid) ? tid : -1;
    if (s->pid <= 0) return tid;   /* nothing to ask */
    if (other_namespace(s, k)) return outer_tid(s, k, tid);
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%lld", s->pid, (long long)tid);
    return access(path, F_OK) == 0 ? tid : -1;
}

bool rbp_kernel_tid_listed(rbpeek_session *s, int64_t tid)
{
    struct rbp_ktids *k = state(s);
    return k ? listed(s, k, tid) > 0 : true;
}

/* --- glibc's descriptor ----------------------------------------------------- */

static void look_published(rbpeek_session *s, struct rbp_ktids *k)
{
    k->looked = true;
    uint64_t addr = 0;
    uint32_t desc[3];
    if (!rbp_symbol_lookup(s, "_thread_db_pthread_tid", &addr, NULL) || !rbp_mem_read(s->mem, addr, desc, sizeof desc))
        return;
    /* {size in bits, element count, offset}: a 32-bit pid_t. */
    if (desc[0] == 32 && desc[1] <= 1 && desc[2] % 4 == 0 && desc[2] < PTHREAD_SCAN_BYTES) {
        k->off = (long)desc[2];
        k->published = true;
    }
}

static int64_t descriptor_tid(rbpeek_session *s, struct rbp_ktids *k, uint64_t pthread_id)
{
    uint32_t v;
    if (!pthread_id || k->off < 0 || !rbp_mem_u32(s->mem, pthread_id + (uint64_t)k->off, &v) || (int32_t)v <= 0)
        return -1;
    return (int32_t)v;
}

void rbp_kernel_tid_calibrate(rbpeek_session *s, uint64_t main_pthread, const uint64_t *others, size_t n)
{
    struct rbp_ktids *k = state(s);
    if (!k || !main_pthread) return;
    if (!k->looked) look_published(s, k);
    if (k->off >= 0 && k->published && !k->off_checked) {
        /* A published offset must give the main thread a listed TID. */
        if (listed(s, k, descriptor_tid(s, k, main_pthread)) > 0) {
            k->off_checked = true;
            return;
        }
        k->off = -1;
        k->published = false;
    }
    if (k->off >= 0) return;
    if (k->calib_wait) {
        k->calib_wait--;
        return;
    }
    uint32_t buf[PTHREAD_SCAN_BYTES / 4];
    size_t got = rbp_mem_read_partial(s->mem, main_pthread, buf, sizeof buf) / 4;
    size_t best_hits = 0;
    for (size_t w = 0; w < got; w++) {
        if (listed(s, k, (int32_t)buf[w]) <= 0) continue;
        size_t hits = 1;
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            if (!others[i] || others[i] == main_pthread) continue;
            if (rbp_mem_u32(s->mem, others[i] + 4 * w, &v) && v != buf[w] && listed(s, k, (int32_t)v) > 0) hits++;
        }
        if (hits > best_hits) {
            best_hits = hits;
            k->off = (long)(4 * w);
        }
    }
    if (k->off < 0) k->calib_wait = CALIBRATE_EVERY;
    else k->off_checked = true;
}

int64_t rbp_kernel_tid(rbpeek_session *s, uint64_t pthread_id, int64_t ruby_tid)
{
    struct rbp_ktids *k = state(s);
    if (!k) return ruby_tid > 0 ? ruby_tid : -1;
    if (!k->looked) look_published(s, k);
    /* A live process in this namespace: asked once per pair (a sampler
     * asks every sample). While Ruby's own record of a thread is the one
     * it had when its pair was verified, the descriptor is not read
     * again either (a page of each thread's machine stack, every sample):
     * a thread that ends and one that takes its pthread_t after have two
     * TIDs, and Ruby records each thread's (3.1 on; none before, so
     * none is skipped there). */
    bool remember = !k->list && s->pid > 0 && !other_namespace(s, k);
    if (remember && ruby_tid > 0 && (int64_t)(uintptr_t)rbp_addrmap_get(&k->said, pthread_id) == ruby_tid) {
        int64_t v = (int64_t)(uintptr_t)rbp_addrmap_get(&k->verified, pthread_id);
        if (v > 0) return v;
    }
    int64_t d = descriptor_tid(s, k, pthread_id);
    if (d > 0) {
        if (remember && (int64_t)(uintptr_t)rbp_addrmap_get(&k->verified, pthread_id) == d) return d;
        int64_t mine = listed(s, k, d);
        if (mine > 0) {
            if (remember && rbp_addrmap_put(&k->verified, pthread_id, (void *)(uintptr_t)d) && ruby_tid > 0)
                rbp_addrmap_put(&k->said, pthread_id, (void *)(uintptr_t)ruby_tid);
            return mine;
        }
    }
    return listed(s, k, ruby_tid);
}

/* --- threads' kernel TIDs as pairs (rbpeek_snapshot_resolve_tids) ------- */

rbpeek_status rbp_kernel_tid_pairs(rbpeek_session *s, const rbpeek_thread *threads, size_t n,
                                   const int64_t *known_tids, size_t nknown, int pid, uint64_t *pairs,
                                   size_t max_pairs, size_t *npairs)
{
    if (npairs) *npairs = 0;
    if (!s || (!threads && n) || !npairs || (!pairs && max_pairs) || (!known_tids && nknown) || (!nknown && pid <= 0))
        return rbp_fail(s, RBPEEK_ERR_ARG, "resolve_tids: bad arguments");
    if (!s->attached || !s->mem) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    (void)pid;   /* a live process's list is the session's own (/proc/PID/task) */
    if (nknown && !rbp_kernel_tids_set(s, known_tids, nknown)) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    size_t k = 0;
    bool missing = false;
    for (size_t i = 0; i < n; i++) {
        const rbpeek_thread *t = &threads[i];
        if (!t->pthread_id) continue;
        /* The snapshot's TIDs were checked against the list it was taken
         * with; against this one, look again. */
        int64_t tid = nknown ? rbp_kernel_tid(s, t->pthread_id, t->ruby_tid) : t->native_tid;
        if (tid <= 0) {
            missing = true;
            continue;
        }
        if (k < max_pairs) {
            pairs[2 * k] = t->pthread_id;
            pairs[2 * k + 1] = (uint64_t)tid;
            k++;
        }
    }
    *npairs = k;
    if (nknown && s->pid > 0) rbp_kernel_tids_set(s, NULL, 0);   /* a live process's own list again */
    if (missing && !k)
        return rbp_fail(s, RBPEEK_ERR_NOT_FOUND, "cannot tell the threads' kernel TIDs: no TID the kernel lists was "
                        "found in Ruby's records or in glibc's thread descriptors");
    return RBPEEK_OK;
}

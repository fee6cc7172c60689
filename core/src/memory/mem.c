/*
 * The read cache over a memory source (see mem.h for why it exists).
 *
 * Direct-mapped: page number -> slot by a multiplicative hash. Each slot
 * remembers which page it holds, the generation it was filled in, and how
 * many leading bytes of the page were readable, so a page that is partly or
 * wholly unmapped is cached as such and costs one source call, not one per
 * request. Reads of BYPASS_BYTES or more go straight to the source: they are
 * bulk reads (heap pages) whose data is not re-read, and caching them would
 * only evict the hot stack pages.
 *
 * The pages each generation touched are remembered, so that after an
 * invalidation rbp_mem_prefetch can read them again in one batch: a sampler
 * walks the same threads every time, and on /proc/PID/mem one
 * process_vm_readv of some fifty pages costs less than fifty preads.
 */
#include "memory/mem.h"

#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT 12
#define PAGE_SIZE ((size_t)1 << PAGE_SHIFT)
#define SLOT_BITS 10 /* 1024 slots, 4 MiB */
#define NSLOTS ((size_t)1 << SLOT_BITS)
#define BYPASS_BYTES (16 * 1024)
#define MAX_HOT 256         /* pages remembered per generation for rbp_mem_prefetch */

typedef struct slot {
    uint64_t page;      /* page number (addr >> PAGE_SHIFT) */
    uint32_t gen;       /* generation this slot was filled in; 0 = never */
    uint32_t valid;     /* readable leading bytes of the page */
    uint32_t used_gen;  /* generation in which a read last used it */
    uint32_t strict_gen; /* generation in which a strict read last used it */
} slot;

struct rbp_mem {
    rbp_source src;
    uint32_t gen;
    slot slots[NSLOTS];
    uint8_t *data;      /* NSLOTS * PAGE_SIZE */
    rbpeek_read_stats stats;
    uint64_t pin_addr;  /* see rbp_mem_pin */
    size_t pin_len;
    const uint8_t *pin_data;
    uint64_t hot[MAX_HOT];       /* pages used in this generation, in first-use order */
    size_t nhot;
    uint64_t prev_hot[MAX_HOT];  /* ... and in the one before */
    size_t nprev;
    bool direct;        /* see rbp_mem_set_direct */
    uint32_t old_gen;   /* the generation before rbp_mem_fence (0: none) */
    bool strict;        /* see rbp_mem_set_strict */
    uint64_t strict_hot[MAX_HOT];  /* pages strict reads used since the last invalidation */
    size_t nstrict;
    uint64_t prev_strict[MAX_HOT]; /* ... and before it: what rbp_mem_fence fetches */
    size_t nprev_strict;
    rbp_warnsink warn;  /* see rbp_mem_set_warn */
    rbp_source fallback; /* see rbp_mem_set_fallback (read NULL: none) */
};

rbp_mem *rbp_mem_new(rbp_source src)
{
    rbp_mem *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->data = malloc(NSLOTS * PAGE_SIZE);
    if (!m->data) {
        free(m);
        return NULL;
    }
    m->src = src;
    m->gen = 1;
    return m;
}

void rbp_mem_free(rbp_mem *m)
{
    if (!m) return;
    if (m->src.close) m->src.close(m->src.ctx);
    if (m->fallback.close) m->fallback.close(m->fallback.ctx);
    free(m->data);
    free(m);
}

const char *rbp_mem_kind(const rbp_mem *m) { return m && m->src.kind ? m->src.kind : "none"; }

const char *rbp_mem_note(const rbp_mem *m) { return m && m->src.note ? m->src.note(m->src.ctx) : NULL; }

void rbp_mem_set_warn(rbp_mem *m, rbp_warnsink sink)
{
    if (!m) return;
    m->warn = sink;
    if (m->src.set_warn) m->src.set_warn(m->src.ctx, sink);
    if (m->fallback.set_warn) m->fallback.set_warn(m->fallback.ctx, sink);
}

void rbp_mem_add_source(rbp_mem *m, rbp_source src, bool first)
{
    if (!m) {
        if (src.close) src.close(src.ctx);
        return;
    }
    if (m->fallback.close) m->fallback.close(m->fallback.ctx);
    if (first) {
        m->fallback = m->src;
        m->src = src;
    } else {
        m->fallback = src;
    }
    if (src.set_warn) src.set_warn(src.ctx, m->warn);
    rbp_mem_invalidate(m);
}

const rbp_warnsink *rbp_mem_warn(const rbp_mem *m) { return m ? &m->warn : NULL; }

void rbp_mem_invalidate(rbp_mem *m)
{
    if (!m) return;
    memcpy(m->prev_hot, m->hot, m->nhot * sizeof m->hot[0]);
    m->nprev = m->nhot;
    m->nhot = 0;
    memcpy(m->prev_strict, m->strict_hot, m->nstrict * sizeof m->strict_hot[0]);
    m->nprev_strict = m->nstrict;
    m->nstrict = 0;
    m->old_gen = 0;
    if (++m->gen == 0) { /* wrapped: really clear, so no stale slot matches */
        memset(m->slots, 0, sizeof m->slots);
        m->gen = 1;
    }
}

void rbp_mem_refresh(rbp_mem *m)
{
    if (!m) return;
    m->old_gen = 0;
    if (++m->gen == 0) {
        memset(m->slots, 0, sizeof m->slots);
        m->gen = 1;
    }
}

void rbp_mem_stats(const rbp_mem *m, rbpeek_read_stats *out) { *out = m->stats; }
void rbp_mem_reset_stats(rbp_mem *m) { memset(&m->stats, 0, sizeof m->stats); }

static long source_read(rbp_mem *m, uint64_t addr, void *buf, size_t len)
{
    m->stats.source_reads++;
    long n = m->src.read(m->src.ctx, addr, buf, len);
    if (n < 0 || (size_t)n > len) n = n < 0 ? -1 : (long)len;
    if (m->fallback.read && (size_t)(n > 0 ? n : 0) < len) {
        /* what the source could not read, from the fallback */
        size_t done = n > 0 ? (size_t)n : 0;
        long k = m->fallback.read(m->fallback.ctx, addr + done, (uint8_t *)buf + done, len - done);
        if (k > 0) n = (long)(done + ((size_t)k > len - done ? len - done : (size_t)k));
    }
    if (n > 0) m->stats.source_bytes += (uint64_t)n;
    return n;
}

static slot *slot_of(rbp_mem *m, uint64_t page, uint8_t **data)
{
    size_t idx = (size_t)((page * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - SLOT_BITS));
    *data = m->data + idx * PAGE_SIZE;
    return &m->slots[idx];
}

static slot *fill(rbp_mem *m, uint64_t page, uint8_t **data)
{
    slot *s = slot_of(m, page, data);
    bool hit = s->page == page && (s->gen == m->gen || (!m->strict && m->old_gen && s->gen == m->old_gen));
    if (!hit) {
        long n = source_read(m, page << PAGE_SHIFT, *data, PAGE_SIZE);
        s->page = page;
        s->gen = m->gen;
        s->valid = n > 0 ? (uint32_t)n : 0;
    }
    if (s->used_gen != m->gen) {
        s->used_gen = m->gen;
        if (s->valid && m->nhot < MAX_HOT) m->hot[m->nhot++] = page;
    }
    if (m->strict && s->strict_gen != m->gen) {
        s->strict_gen = m->gen;
        if (s->valid && m->nstrict < MAX_HOT) m->strict_hot[m->nstrict++] = page;
    }
    return s;
}

/* Reads pages[0..npages) into the current generation, in one batch. */
static void fetch_pages(rbp_mem *m, const uint64_t *pages, size_t npages)
{
    uint64_t addrs[MAX_HOT];
    uint8_t *bufs[MAX_HOT];
    slot *slots[MAX_HOT];
    long got[MAX_HOT];
    size_t n = 0;
    for (size_t i = 0; i < npages && i < MAX_HOT; i++) {
        uint8_t *data;
        slot *s = slot_of(m, pages[i], &data);
        if (s->gen == m->gen) continue;   /* filled already, or two pages share the slot */
        s->gen = m->gen;                  /* claimed; set for real below */
        s->page = pages[i];
        s->valid = 0;
        addrs[n] = pages[i] << PAGE_SHIFT;
        bufs[n] = data;
        slots[n] = s;
        n++;
    }
    if (n == 0) return;
    m->src.read_many(m->src.ctx, addrs, bufs, n, PAGE_SIZE, got);
    m->stats.source_reads++;
    for (size_t i = 0; i < n; i++) {
        if (got[i] < 0) {
            slots[i]->gen = 0;            /* not read: filled on demand */
        } else {
            slots[i]->valid = (uint32_t)(got[i] > (long)PAGE_SIZE ? (long)PAGE_SIZE : got[i]);
            m->stats.source_bytes += (uint64_t)got[i];
        }
    }
}

void rbp_mem_prefetch(rbp_mem *m)
{
    if (!m || !m->src.read_many || m->nprev == 0) return;
    /* The list is kept: after an rbp_mem_refresh (the sampler had to stop
     * more than it prefetched for) the same pages are fetched again. */
    fetch_pages(m, m->prev_hot, m->nprev);
}

void rbp_mem_fence(rbp_mem *m)
{
    if (!m) return;
    m->old_gen = m->gen;
    if (++m->gen == 0) {
        memset(m->slots, 0, sizeof m->slots);
        m->gen = 1;
        m->old_gen = 0;
    }
    if (m->src.read_many && m->nprev_strict) fetch_pages(m, m->prev_strict, m->nprev_strict);
}

bool rbp_mem_set_strict(rbp_mem *m, bool on)
{
    if (!m) return false;
    bool was = m->strict;
    m->strict = on;
    return was;
}

bool rbp_mem_set_direct(rbp_mem *m, bool on)
{
    if (!m) return false;
    bool was = m->direct;
    m->direct = on;
    return was;
}

void rbp_mem_pin(rbp_mem *m, uint64_t addr, const void *data, size_t len)
{
    m->pin_addr = addr;
    m->pin_data = data;
    m->pin_len = data ? len : 0;
}

size_t rbp_mem_read_partial(rbp_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (!m || len == 0) return 0;
    m->stats.requests++;
    if (addr + len < addr) len = (size_t)(UINT64_MAX - addr); /* no wrap-around */
    if (m->pin_len && addr >= m->pin_addr && addr - m->pin_addr <= m->pin_len - len && len <= m->pin_len) {
        memcpy(buf, m->pin_data + (addr - m->pin_addr), len);
        return len;
    }
    if (len >= BYPASS_BYTES || m->direct) {
        long n = source_read(m, addr, buf, len);
        if (n <= 0) {
            /* Some sources refuse a big read that crosses into unmapped
             * memory; fall back to page-sized steps to find how much is
             * readable. */
            n = 0;
        }
        if ((size_t)n == len) return len;
        size_t done = (size_t)n;
        while (done < len) {
            uint64_t a = addr + done;
            size_t chunk = PAGE_SIZE - (size_t)(a & (PAGE_SIZE - 1));
            if (chunk > len - done) chunk = len - done;
            long k = source_read(m, a, (uint8_t *)buf + done, chunk);
            if (k <= 0) break;
            done += (size_t)k;
            if ((size_t)k < chunk) break;
        }
        if (done < len) m->stats.failures++;
        return done;
    }
    size_t done = 0;
    while (done < len) {
        uint64_t a = addr + done;
        uint64_t page = a >> PAGE_SHIFT;
        size_t in_page = (size_t)(a & (PAGE_SIZE - 1));
        size_t chunk = PAGE_SIZE - in_page;
        if (chunk > len - done) chunk = len - done;
        uint8_t *data;
        slot *s = fill(m, page, &data);
        if (s->valid <= in_page) break;
        size_t avail = s->valid - in_page;
        if (avail < chunk) chunk = avail;
        memcpy((uint8_t *)buf + done, data + in_page, chunk);
        done += chunk;
        if (s->valid < PAGE_SIZE && done < len) break;
    }
    if (done < len) m->stats.failures++;
    return done;
}

bool rbp_mem_read(rbp_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (addr == 0) { /* NULL is never a valid target address for us */
        if (m) m->stats.failures++;
        return false;
    }
    return rbp_mem_read_partial(m, addr, buf, len) == len;
}

bool rbp_mem_u64(rbp_mem *m, uint64_t addr, uint64_t *out)
{
    return rbp_mem_read(m, addr, out, sizeof *out);
}

bool rbp_mem_u32(rbp_mem *m, uint64_t addr, uint32_t *out)
{
    return rbp_mem_read(m, addr, out, sizeof *out);
}

bool rbp_mem_cstr(rbp_mem *m, uint64_t addr, char *buf, size_t max)
{
    if (max == 0) return false;
    size_t n = rbp_mem_read_partial(m, addr, buf, max - 1);
    buf[n] = '\0';
    return strlen(buf) < n; /* the terminator was within what we read */
}

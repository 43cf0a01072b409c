/*
 * cxl-shm: seeded random eviction of the non-coherent area's lines
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "system/cpu-timers.h"
#include "qemu/madvise.h"
#include "cxl-shm.h"
#include "trace.h"

#define CXLSHM_EVICT_CHUNK      1024    /* lines per hold of the BQL */
#define CXLSHM_EVICT_WINDOW     (256 * MiB)

/* Seeded random eviction (evict-rate lines per ms of guest time) */

static uint64_t cxl_shm_rand(CXLShmState *s)
{
    /* xorshift64*: small, fast, the same sequence for the same seed */
    uint64_t x = s->evict_state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->evict_state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/*
 * The candidates: the pages this host holds (image pages present), in a
 * window of at most CXLSHM_EVICT_WINDOW of the area that moves at random.
 */
static void cxl_shm_evict_scan(CXLShmState *s)
{
    const uint64_t chunk = 2 * MiB;
    uint64_t span = MIN(s->nc_size, CXLSHM_EVICT_WINDOW);
    uint64_t first = 0, pos;
    unsigned char vec[2 * MiB / CXLSHM_PAGE];
    size_t i;

    s->evict_npages = 0;
    if (s->nc_size > CXLSHM_EVICT_WINDOW) {
        first = (cxl_shm_rand(s) % (s->nc_size / chunk)) * chunk;
    }
    for (pos = 0; pos < span; pos += chunk) {
        uint64_t off = (first + pos) % s->nc_size;
        uint64_t len = MIN(chunk, s->nc_size - off);

        if (mincore(s->image + off, len, vec) < 0) {
            break;
        }
        for (i = 0; i < len / CXLSHM_PAGE; i++) {
            if (vec[i] & 1) {
                s->evict_pages[s->evict_npages++] = (off / CXLSHM_PAGE) + i;
            }
        }
    }
}

/*
 * One chunk of a millisecond's evictions.  The timer runs under the BQL,
 * so a rate above CXLSHM_EVICT_CHUNK lines is worked through in chunks
 * spread evenly over the millisecond, so that no chunk holds the BQL for
 * long (the other vCPUs' MMIO and the main loop wait for it meanwhile);
 * the candidates are found once per millisecond.  Milliseconds follow a
 * grid of guest time, each evicting evict-rate lines in the same seeded
 * order whatever the chunking.  A host too slow for the rate (a chunk
 * late for its share) spaces the chunks to leave the BQL free at least
 * as long as each held it: the rate is then a ceiling, a millisecond's
 * evictions run late and the grid starts again when they are done.
 */
static void cxl_shm_evict_tick(void *opaque)
{
    CXLShmState *s = opaque;
    CXLShmLineCount n = { 0 };
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), next, end;
    uint32_t k, count, evicted = 0;

    if (!s->evict_left) {
        next = s->evict_period + SCALE_MS;
        s->evict_period = s->evict_period && now >= next &&
                          now - next < SCALE_MS ? next : now;
        cxl_shm_evict_scan(s);
        s->evict_left = s->evict_npages ? s->evict_rate : 0;
    }
    count = MIN(s->evict_left, CXLSHM_EVICT_CHUNK);
    for (k = 0; k < count; k++) {
        uint64_t r = cxl_shm_rand(s);
        uint64_t page = s->evict_pages[r % s->evict_npages];
        uint64_t line = (r >> 32) % (CXLSHM_PAGE / CXLPOOL_LINE);
        uint64_t dpa = s->coherent_size + page * CXLSHM_PAGE +
                       line * CXLPOOL_LINE;
        uint64_t before = n.written;

        /*
         * A dirty line is written back, a clean one fetched again.  Under
         * the BQL: a line whose lock another host holds (it may be
         * stopped, for as long as it is) is not evicted this time.
         */
        if (!cxl_shm_lines_try_line(&s->lines, CXLSHM_LINE_FLUSH, dpa, &n)) {
            trace_cxl_shm_evict_busy(s->host_id, dpa);
            continue;
        }
        evicted++;
        trace_cxl_shm_evict(s->host_id, dpa, n.written - before);
    }
    s->evict_left -= count;
    if (count) {
        trace_cxl_shm_evict_chunk(s->host_id, count, s->evict_left);
        qatomic_add(&s->stats[CXLSHM_STAT_EVICTED], evicted);
        n.fetched = 0;      /* evictions are not invalidations */
        cxl_shm_count(s, &n);
        if (!s->evict_left) {
            cxl_shm_pool_sync_stats(s);
        }
    }
    /*
     * The next chunk at its share of the millisecond, the next
     * millisecond at its start; never at or before the end of this one,
     * so that the main loop (and the BQL) gets a turn between chunks,
     * and without icount (guest time is the host's) not before as long
     * again as this chunk took.  Under icount the grid alone decides, so
     * that runs repeat.
     */
    end = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    next = s->evict_period + (s->evict_left ?
            (int64_t)muldiv64(SCALE_MS, s->evict_rate - s->evict_left,
                              s->evict_rate) : SCALE_MS);
    if (!icount_enabled()) {
        next = MAX(next, end + (end - now));
    }
    timer_mod(s->evict_timer, MAX(next, end + 1));
}

/* At realize, once the image is made: evict-rate lines per millisecond */
void cxl_shm_evict_start(CXLShmState *s)
{
    if (s->evict_rate && s->nc_size) {
        /* pages, not huge pages: the eviction candidates are exact */
        qemu_madvise(s->image, s->nc_size, QEMU_MADV_NOHUGEPAGE);
        s->evict_state = s->evict_seed ^ (0x9e3779b97f4a7c15ULL *
                                          (s->host_id + 1));
        if (!s->evict_state) {
            s->evict_state = 1;
        }
        s->evict_pages = g_new(uint32_t, MIN(s->nc_size,
                                             CXLSHM_EVICT_WINDOW) /
                                         CXLSHM_PAGE);
        s->evict_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL,
                                      cxl_shm_evict_tick, s);
        timer_mod(s->evict_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + SCALE_MS);
    }
}

/* At unrealize, with the BQL: the timer is not running */
void cxl_shm_evict_stop(CXLShmState *s)
{
    if (s->evict_timer) {
        timer_free(s->evict_timer);
        s->evict_timer = NULL;
    }
    g_clear_pointer(&s->evict_pages, g_free);
}

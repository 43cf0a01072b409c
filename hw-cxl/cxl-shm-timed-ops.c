/*
 * cxl-shm: mode=timed, coherence operations on the model's cached lines
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The doorbell's and the guest's writebacks, invalidates and flushes,
 * non-temporal stores landing at a fence, and the host reset, acting on
 * the lines the cache model holds (cxl-shm-timed.c describes the model).
 */

#include "qemu/osdep.h"
#include "cxl-shm.h"
#include "cxl-shm-timed.h"
#include "trace.h"

/* One cached non-coherent line; cache lock held */
static void way_op(CXLShmState *s, CXLShmWay *w, CXLShmLineOp op,
                   CXLShmLineCount *n)
{
    uint64_t off = way_line(w) * CXLSHM_LINE;

    if (off < s->coherent_size) {
        if (op != CXLSHM_LINE_WRITEBACK) {
            w->tag = 0;         /* wbinvd / invd drop coherent lines too */
        }
        return;
    }
    if (op != CXLSHM_LINE_DROP) {
        cxl_shm_way_writeback(s, w, NULL, n);
    }
    if (op != CXLSHM_LINE_WRITEBACK) {
        w->tag = 0;             /* invalid: the next access fetches it */
        w->dirty = w->nt = 0;
    }
}

static void timed_done(CXLShmState *s, const CXLShmLineCount *n, Cost *c)
{
    c->ns += (int64_t)n->written * qatomic_read(&s->t.wb_ns);
    c->moved += n->written;
    cxl_shm_timed_moved(s, c);
}

/*
 * A non-temporal store to bytes @mask of the line at @off has just gone
 * through timed_nc() as a store: those bytes are the non-temporal
 * store's, not a cached store's.
 */
void cxl_shm_timed_nt_store(CXLShmState *s, uint64_t off, uint64_t mask)
{
    CXLShmWay *w;

    qemu_mutex_lock(&s->t.lock);
    w = cache_find(&s->t, off / CXLSHM_LINE);
    if (w) {
        w->nt |= mask;
        w->dirty &= ~mask;
    }
    qemu_mutex_unlock(&s->t.lock);
}

/*
 * The storing vCPU's fence: the line's non-temporal bytes reach the pool
 * and the line leaves the cache (non-temporal stores do not allocate).
 * A line evicted meanwhile was written by the eviction.  Charged here.
 */
void cxl_shm_timed_nt_land(CXLShmState *s, uint64_t off, uint64_t mask,
                           CXLShmLineCount *n)
{
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };
    CXLShmWay *w;

    qemu_mutex_lock(&s->t.lock);
    w = cache_find(&s->t, off / CXLSHM_LINE);
    if (w && w->nt) {
        cxl_shm_way_writeback(s, w, NULL, &m);
        w->tag = 0;
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&s->t.lock);
    n->written += m.written;
    n->conflicts += m.conflicts;
    cxl_shm_charge_ns(s, c.ns);
}

/*
 * The fence at an interrupt or exception delivery, under the BQL, which
 * never waits for another host: the queued clwb (@op writeback),
 * clflushopt (@op flush) or non-temporal bytes (@nt) of the line at @off
 * land if that needs no wait.  A line not cached, or clean, needs no
 * lock; a dirty one is written back only if its lock is free now.  false,
 * and nothing done, if another thread or host holds it.  Charged here.
 */
bool cxl_shm_timed_try_land(CXLShmState *s, uint64_t off, CXLShmLineOp op,
                            bool nt, uint64_t mask, CXLShmLineCount *n)
{
    CXLShmLineCount m = { 0 };
    CXLShmLineLock h = { NULL };
    Cost c = { 0 };
    CXLShmWay *w;
    bool done = true;

    qemu_mutex_lock(&s->t.lock);
    w = cache_find(&s->t, off / CXLSHM_LINE);
    if (w && nt && !w->nt) {
        w = NULL;       /* evicted meanwhile: the eviction wrote its bytes */
    }
    if (w && (w->dirty | w->nt)) {
        if (cxl_shm_lines_trylock(&s->lines, off, &h)) {
            cxl_shm_way_writeback(s, w, &h, &m);
            cxl_shm_lines_unlock(&s->lines, &h);
        } else {
            done = false;
        }
    }
    if (w && done && (nt || op != CXLSHM_LINE_WRITEBACK)) {
        w->tag = 0;     /* invalid: the next access fetches it */
        w->dirty = w->nt = 0;
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&s->t.lock);
    if (done && !nt && op != CXLSHM_LINE_WRITEBACK) {
        n->fetched++;
    }
    n->written += m.written;
    n->conflicts += m.conflicts;
    cxl_shm_charge_ns(s, c.ns);
    return done;
}

/*
 * The doorbell's or an instruction's operation on [off, off + len) of
 * the non-coherent area: the cached lines in it are written back and/or
 * invalidated.  Lines not cached need nothing (their pool copy is the
 * newest this host has).  @n counts as in direct mode (every line of the
 * range as invalidated, the lines written back).  Charged here.
 */
void cxl_shm_timed_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                         uint64_t len, CXLShmLineCount *n)
{
    CXLShmTimed *t = &s->t;
    uint64_t start = MAX(off, s->coherent_size), end = off + len;
    uint64_t total = (uint64_t)t->sets * t->cache_ways;
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };
    uint64_t l, i;

    if (start >= end) {
        return;
    }
    if (op != CXLSHM_LINE_WRITEBACK) {
        n->fetched += (end - start) / CXLSHM_LINE;
    }
    qemu_mutex_lock(&t->lock);
    if ((end - start) / CXLSHM_LINE <= total) {
        for (l = start / CXLSHM_LINE; l < end / CXLSHM_LINE; l++) {
            CXLShmWay *w = cache_find(t, l);

            if (w) {
                way_op(s, w, op, &m);
            }
        }
    } else {
        for (i = 0; i < total; i++) {
            CXLShmWay *w = &t->way[i];
            uint64_t wl = way_line(w) * CXLSHM_LINE;

            if ((w->tag & CXLSHM_WAY_VALID) && wl >= start && wl < end) {
                way_op(s, w, op, &m);
            }
        }
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&t->lock);
    n->written += m.written;
    n->conflicts += m.conflicts;
    cxl_shm_charge_ns(s, c.ns);
}

/* wbinvd, wbnoinvd, invd: every cached line */
void cxl_shm_timed_whole(CXLShmState *s, CXLShmLineOp op,
                         CXLShmLineCount *n)
{
    CXLShmTimed *t = &s->t;
    uint64_t total = (uint64_t)t->sets * t->cache_ways, i;
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };

    qemu_mutex_lock(&t->lock);
    for (i = 0; i < total; i++) {
        if (t->way[i].tag & CXLSHM_WAY_VALID) {
            if (op != CXLSHM_LINE_WRITEBACK &&
                way_line(&t->way[i]) * CXLSHM_LINE >= s->coherent_size) {
                m.fetched++;
            }
            way_op(s, &t->way[i], op, &m);
        }
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&t->lock);
    n->written += m.written;
    n->fetched += m.fetched;
    n->conflicts += m.conflicts;
    cxl_shm_charge_ns(s, c.ns);
}

/* A host reset: the cache is lost, dirty lines included; vCPUs stopped */
void cxl_shm_timed_reset(CXLShmState *s)
{
    CXLShmTimed *t = &s->t;
    uint32_t i;

    qemu_mutex_lock(&t->lock);
    memset(t->way, 0, sizeof(*t->way) * t->sets * t->cache_ways);
    t->busy_until = 0;
    for (i = 0; i < t->nr_held; i++) {
        if (t->held[i].word) {
            cxl_shm_lines_unlock(&s->lines, &t->held[i]);
        }
    }
    cxl_shm_sf_forget_me(s);
    qemu_mutex_unlock(&t->lock);
}

/* CDAT: reads cost a miss, writes a writeback */
void cxl_shm_timed_latency(CXLShmState *s, uint32_t *read_ns,
                           uint32_t *write_ns)
{
    *read_ns = qatomic_read(&s->t.miss_ns);
    *write_ns = qatomic_read(&s->t.wb_ns);
}

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

/*
 * One cached line; cache lock held.  false, and the way as it was, if
 * it is dirty and its page's lock is another host's now.
 */
static bool way_op(CXLShmState *s, CXLShmWay *w, CXLShmLineOp op,
                   CXLShmLineCount *n)
{
    uint64_t off = way_line(w) * CXLSHM_LINE;

    if (off < s->coherent_size) {
        if (op != CXLSHM_LINE_WRITEBACK) {
            w->tag = 0;         /* wbinvd / invd drop coherent lines too */
        }
        return true;
    }
    if (op != CXLSHM_LINE_DROP && !cxl_shm_way_writeback(s, w, NULL, n)) {
        return false;
    }
    if (op != CXLSHM_LINE_WRITEBACK) {
        w->tag = 0;             /* invalid: the next access fetches it */
        w->dirty = w->nt = 0;
    }
    return true;
}

/* The cost of the lines @m an operation wrote back; cache lock held */
static void timed_done(CXLShmState *s, const CXLShmLineCount *m, Cost *c)
{
    c->ns += (int64_t)m->written * qatomic_read(&s->t.wb_ns);
    c->moved += m->written;
    cxl_shm_timed_moved(s, c);
}

/* Once the cache lock is released: the counts @m join @n, @c is charged */
static void timed_end(CXLShmState *s, const CXLShmLineCount *m,
                      const Cost *c, CXLShmLineCount *n)
{
    n->written += m->written;
    n->fetched += m->fetched;
    n->conflicts += m->conflicts;
    cxl_shm_charge_ns(s, c->ns);
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
bool cxl_shm_timed_nt_land(CXLShmState *s, uint64_t off, uint64_t mask,
                           CXLShmLineCount *n)
{
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };
    CXLShmWay *w;
    bool done = true;

    qemu_mutex_lock(&s->t.lock);
    w = cache_find(&s->t, off / CXLSHM_LINE);
    if (w && w->nt) {
        done = cxl_shm_way_writeback(s, w, NULL, &m);
        if (done) {
            w->tag = 0;
        }
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&s->t.lock);
    timed_end(s, &m, &c, n);
    return done;
}

/*
 * The doorbell's or an instruction's operation on [off, off + len) of
 * the non-coherent area: the cached lines in it are written back and/or
 * invalidated.  Lines not cached need nothing (their pool copy is the
 * newest this host has).  @n counts as in direct mode (every line of the
 * range as invalidated, the lines written back).  Charged here.
 */
uint64_t cxl_shm_timed_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                             uint64_t len, CXLShmLineCount *n)
{
    CXLShmTimed *t = &s->t;
    uint64_t start = MAX(off, s->coherent_size), end = off + len;
    uint64_t total = (uint64_t)t->sets * t->cache_ways;
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };
    uint64_t l, i, got = end;

    if (start >= end) {
        return end;
    }
    qemu_mutex_lock(&t->lock);
    if ((end - start) / CXLSHM_LINE <= total) {
        for (l = start / CXLSHM_LINE; l < end / CXLSHM_LINE; l++) {
            CXLShmWay *w = cache_find(t, l);

            if (w && !way_op(s, w, op, &m)) {
                got = l * CXLSHM_LINE;  /* the lines before it are done */
                break;
            }
        }
    } else {
        /* not in line order: a busy line makes the whole range run again */
        for (i = 0; i < total; i++) {
            CXLShmWay *w = &t->way[i];
            uint64_t wl = way_line(w) * CXLSHM_LINE;

            if ((w->tag & CXLSHM_WAY_VALID) && wl >= start && wl < end &&
                !way_op(s, w, op, &m)) {
                got = off;
                break;
            }
        }
    }
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&t->lock);
    if (op != CXLSHM_LINE_WRITEBACK) {
        n->fetched += (MAX(got, start) - start) / CXLSHM_LINE;
    }
    timed_end(s, &m, &c, n);
    return got;
}

/*
 * wbinvd, wbnoinvd, invd: every cached line, from way *@from on; a busy
 * dirty line stops it there (false)
 */
bool cxl_shm_timed_whole(CXLShmState *s, CXLShmLineOp op, uint64_t *from,
                         CXLShmLineCount *n)
{
    CXLShmTimed *t = &s->t;
    uint64_t total = (uint64_t)t->sets * t->cache_ways, i;
    CXLShmLineCount m = { 0 };
    Cost c = { 0 };
    bool done = true;

    qemu_mutex_lock(&t->lock);
    for (i = MIN(*from, total); i < total; i++) {
        if (t->way[i].tag & CXLSHM_WAY_VALID) {
            bool nc = way_line(&t->way[i]) * CXLSHM_LINE >= s->coherent_size;

            if (!way_op(s, &t->way[i], op, &m)) {
                done = false;
                break;
            }
            if (op != CXLSHM_LINE_WRITEBACK && nc) {
                m.fetched++;
            }
        }
    }
    *from = done ? 0 : i;
    timed_done(s, &m, &c);
    qemu_mutex_unlock(&t->lock);
    timed_end(s, &m, &c, n);
    return done;
}

/*
 * A host reset: the cache is lost, dirty lines included; vCPUs stopped,
 * cache lock held (cxl_shm_host_reset())
 */
void cxl_shm_timed_reset(CXLShmState *s)
{
    CXLShmTimed *t = &s->t;
    uint32_t i;

    memset(t->way, 0, sizeof(*t->way) * t->sets * t->cache_ways);
    t->busy_until = 0;
    for (i = 0; i < t->nr_held; i++) {
        if (t->held[i].word) {
            cxl_shm_lines_unlock(&s->lines, &t->held[i]);
        }
    }
    cxl_shm_sf_forget_me(s);
}

/* CDAT: reads cost a miss, writes a writeback */
void cxl_shm_timed_latency(CXLShmState *s, uint32_t *read_ns,
                           uint32_t *write_ns)
{
    *read_ns = qatomic_read(&s->t.miss_ns);
    *write_ns = qatomic_read(&s->t.wb_ns);
}

/*
 * cxl-shm: mode=direct, the pool mapped as RAM
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A committed decoder maps the pool's RAM, with this host's image over
 * the non-coherent area: guest loads and stores do not trap.  A
 * writeback, invalidate or flush of a range or of the whole cache
 * (wbinvd, wbnoinvd, invd), from the doorbell or the guest's cache
 * maintenance, goes to the line engine (cxl-shm-line.c), and charges
 * latency-ns per line.
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "cxl-shm.h"
#include "trace.h"

static uint64_t direct_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                             uint64_t len, CXLShmLineCount *n)
{
    return cxl_shm_lines_op(&s->lines, op, off, len, n);
}

/*
 * Which pages of the pool file's [dpa, dpa + len) may hold data: @vec[i]
 * is 0 only for a page inside a hole of the file (SEEK_DATA/SEEK_HOLE),
 * the one place where the pool certainly reads as zeros.  Residency
 * (mincore) says nothing about content: a page another host wrote back
 * and the kernel dropped from the page cache of a disk-backed pool is on
 * disk.  A file system that cannot tell reports all of it as data.
 *
 * @run carries the data run found last across the calls of one
 * whole-cache operation, which walk the pool in order: on tmpfs SEEK_HOLE
 * walks the page cache up to the end of the file, so asking it again for
 * every chunk of a long run made a pass quadratic in the pool's size.
 * hugetlbfs reports everything as data; there a page the pool mapping
 * does not have (mincore) was never written and is zero.
 */
typedef struct CXLShmDataRun {
    off_t data, hole;           /* [data, hole): data; valid when hole > 0 */
    bool all;                   /* the file system cannot tell */
} CXLShmDataRun;

static void cxl_shm_pool_data(CXLShmState *s, uint64_t dpa, uint64_t len,
                              unsigned char *vec, CXLShmDataRun *run)
{
    off_t start = CXLPOOL_META_SIZE + dpa, end = start + len, pos = start;
    size_t pages = len / CXLSHM_PAGE;

    if (s->pool_hugetlbfs) {
        if (mincore(s->pool + dpa, len, vec) < 0) {
            memset(vec, 1, pages);
        }
        return;
    }
    memset(vec, 0, pages);
    while (pos < end && !run->all) {
        off_t data = run->data, hole = run->hole;
        size_t i;

        if (hole <= pos) {
            data = lseek(s->fd, pos, SEEK_DATA);
            if (data < 0 && errno == ENXIO) {
                run->data = run->hole = INT64_MAX;  /* only holes on */
                return;
            }
            hole = data < 0 ? -1 : lseek(s->fd, data, SEEK_HOLE);
            if (hole < 0) {
                run->all = true;
                break;
            }
            run->data = data;
            run->hole = hole;
        }
        if (data >= end) {
            return;
        }
        data = MAX(data, pos);
        hole = MIN(hole, end);
        for (i = (data - start) / CXLSHM_PAGE;
             i < DIV_ROUND_UP(hole - start, CXLSHM_PAGE); i++) {
            vec[i] = 1;
        }
        pos = hole;
    }
    if (run->all) {
        memset(vec, 1, pages);
    }
}

static bool direct_whole(CXLShmState *s, CXLShmLineOp op, uint64_t *from,
                         CXLShmLineCount *n)
{
    const uint64_t chunk = 2 * MiB;
    const size_t pages = chunk / CXLSHM_PAGE;
    g_autofree unsigned char *vi = g_malloc(pages);
    g_autofree unsigned char *vt = g_malloc(pages);
    g_autofree unsigned char *vp = g_malloc(pages);
    CXLShmDataRun run = { 0 };
    uint64_t off;

    /* from a page boundary: a busy range stops at one */
    for (off = QEMU_ALIGN_DOWN(MAX(*from, s->coherent_size) -
                               s->coherent_size, CXLSHM_PAGE);
         off < s->nc_size; off = QEMU_ALIGN_DOWN(off + chunk, chunk)) {
        uint64_t len = MIN(QEMU_ALIGN_DOWN(off + chunk, chunk), s->nc_size) -
                       off;
        uint64_t dpa = s->coherent_size + off, got;
        size_t i, np = len / CXLSHM_PAGE;

        if (!s->skip_unresident ||
            mincore(s->image + off, len, vi) < 0 ||
            mincore(s->twin + off, len, vt) < 0) {
            got = cxl_shm_range(s, op, dpa, len, n);
            if (got < dpa + len) {
                *from = got;
                return false;
            }
            continue;
        }
        cxl_shm_pool_data(s, dpa, len, vp, &run);
        for (i = 0; i < np; i++) {
            uint64_t p = dpa + i * CXLSHM_PAGE;

            if (((vi[i] | vt[i]) & 1) || vp[i]) {
                got = cxl_shm_range(s, op, p, CXLSHM_PAGE, n);
                if (got < p + CXLSHM_PAGE) {
                    *from = got;
                    return false;
                }
            } else if (op != CXLSHM_LINE_WRITEBACK) {
                n->fetched += CXLSHM_PAGE / CXLPOOL_LINE;
            }
        }
    }
    *from = 0;
    return true;
}

/* Non-temporal bytes @mask of the line at @line reach the pool */
static bool direct_nt_land(CXLShmState *s, uint64_t line, uint64_t mask,
                           CXLShmLineCount *n)
{
    return cxl_shm_lines_nt(&s->lines, line, mask, false, NULL, n);
}

static void direct_map(CXLShmState *s, CXLShmDirect *d)
{
    memory_region_init_alias(&d->alias, OBJECT(s), "cxl-shm-direct",
                             s->pool_mr, d->dpa, d->size);
    d->mr = &d->alias;
}

/* Line ops reach the image of the non-coherent area */
static MemoryRegion *direct_native_mr(CXLShmState *s, uint64_t *dpa_base)
{
    *dpa_base = s->coherent_size;
    return s->nc_size ? &s->image_mr : NULL;
}

/* Reads and writes alike: latency-ns per line */
static void direct_latency(CXLShmState *s, uint32_t *read_ns,
                           uint32_t *write_ns)
{
    *read_ns = *write_ns = qatomic_read(&s->latency_ns);
}

static bool direct_check_props(CXLShmState *s, Error **errp)
{
    if (s->t.cache_size != CXLSHM_TIMED_CACHE ||
        s->t.cache_ways != CXLSHM_TIMED_WAYS ||
        s->t.sf_entries != CXLSHM_TIMED_SF) {
        error_setg(errp, "properties 'cache-size', 'cache-ways' and "
                   "'snoop-filter-entries' apply to "
                   "mode=timed only");
        return false;
    }
    return true;
}

const CXLShmModeOps cxl_shm_direct_mode = {
    .maps_ram = true,
    .check_props = direct_check_props,
    .map = direct_map,
    .native_mr = direct_native_mr,
    .range = direct_range,
    .whole = direct_whole,
    .nt_land = direct_nt_land,
    .latency = direct_latency,
};

/*
 * cxl-shm: a multi-host CXL 3.0 shared-memory pod device (cxlpod)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A cxl-type3 subclass.  Several QEMU processes attach one pool file, each
 * as one host.  The coherent window [0, coherent-size) is the shared pool
 * pages; the non-coherent area [coherent-size, size) is served from a
 * private per-host image, and a twin copy (the pool's content when the
 * host last fetched the line) makes writeback exact per 64-byte line.
 * Coherence operations come from a doorbell in BAR5 (docs/interfaces.md
 * section 1) or, under TCG, from the guest's clflush/clflushopt/clwb.
 */

#include "qemu/osdep.h"
#include "qemu/mmap-alloc.h"
#include <sys/sysinfo.h>
#include "qemu/units.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qapi/qapi-types-cxl.h"
#include "qom/object_interfaces.h"
#include "hw/qdev-properties.h"
#include "hw/pci/pci.h"
#include "hw/cxl/cxl.h"
#include "hw/cxl/cxl_host.h"
#include "hw/core/cpu.h"
#include "exec/memory.h"
#include "exec/address-spaces.h"
#include "system/cache-maint.h"
#include "system/cpu-timers.h"
#include "system/system.h"
#include "system/cpus.h"
#include "system/tcg.h"
#include "system/kvm.h"
#include "exec/cpu-common.h"
#include "hw/boards.h"
#include "migration/blocker.h"
#include "qemu/rcu.h"
#include "qemu/madvise.h"
#include "cxl-shm.h"
#include "cxl-shm-doorbell.h"
#include "trace.h"

#define CXLSHM_BAR              5
#define CXLSHM_REGS_SIZE        0x1000
#define CXLSHM_REG_MAGIC        0x504c5843  /* "CXLP" */
#define CXLSHM_REG_VERSION      1

#define CXLSHM_CAP_NATIVE       (1u << 0)
#define CXLSHM_CAP_ATOMICS      (1u << 1)
#define CXLSHM_CAP_DIRECT       (1u << 2)

#define CXLSHM_PAGE             4096
#define CXLSHM_SIZE_MAX         (1 * TiB)
#define CXLSHM_LATENCY_MAX      65535
#define CXLSHM_BANDWIDTH_MAX    65535
#define CXLSHM_EVICT_MAX        100000
#define CXLSHM_EVICT_CHUNK      1024    /* lines per hold of the BQL */
#define CXLSHM_EVICT_WINDOW     (256 * MiB)

static const char *const op_names[] = {
    [CXLSHM_OP_WRITEBACK] = "writeback",
    [CXLSHM_OP_INVALIDATE] = "invalidate",
    [CXLSHM_OP_FLUSH] = "flush",
};

/* Is a decoder's range mapped (as RAM, or in mode=timed as I/O)? */
static bool cxl_shm_mapped(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->direct[i].mapped) {
            return true;
        }
    }
    return false;
}

bool cxl_shm_direct_active(CXLShmState *s)
{
    return !s->timed && cxl_shm_mapped(s);
}

static bool cxl_shm_native_active(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->native_registered[i]) {
            return true;
        }
    }
    return false;
}

uint32_t cxl_shm_caps(CXLShmState *s)
{
    uint32_t caps = 0;
    bool mapped = cxl_shm_mapped(s);

    if (mapped && cxl_shm_native_active(s)) {
        caps |= CXLSHM_CAP_NATIVE;
    }
    if (mapped && s->atomics_ok) {
        caps |= CXLSHM_CAP_ATOMICS;
    }
    if (mapped && !s->timed) {
        caps |= CXLSHM_CAP_DIRECT;
    }
    return caps;
}

/*
 * Without icount the guest's TSC is the host's (TCG reads the host's for
 * rdtsc, KVM offsets or scales it) and the guest's clocks derive from
 * it, so waits are timed in host ticks, at a rate measured once against
 * the host clock.  The host clock itself is no timer for this on some
 * virtual machines: on these, CLOCK_MONOTONIC jumps about 25 us ahead of
 * the TSC hundreds of times a second.  0 until measured: wait on the
 * host clock meanwhile.
 */
static uint64_t wait_ticks_per_ns_q32;
/*
 * What a charge costs beyond the time it waits (the statistics, reading
 * the ticks, the carry's bookkeeping), in ticks, measured once with the
 * rate: every wait is that much shorter, so that an access with a charge
 * takes the charge more than one without, not the charge plus its own
 * overhead (about 30-60 ns here, 6-12% of a 500 ns miss).
 */
static int64_t wait_cost_ticks;
/* this thread's overrun carry, described below with its bounds */
static __thread int64_t wait_overrun, wait_overrun_at;

/* @ns in ticks at @rate (ticks per ns, 32.32 fixed point) */
static int64_t ns_to_ticks(int64_t ns, uint64_t rate)
{
    uint64_t lo, hi;

    mulu64(&lo, &hi, ns, rate);
    return hi << 32 | lo >> 32;
}

#define CXLSHM_CAL_WAITS        1001
#define CXLSHM_CAL_WAIT_NS      200

static int cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static void cxl_shm_calibrate_wait(void)
{
    static uint64_t scratch;    /* stands in for a statistics counter */
    g_autofree int64_t *extra = NULL;
    int64_t t0, c0, t1, c1, len;
    uint64_t rate;
    int i;

    if (icount_enabled() || qatomic_read(&wait_ticks_per_ns_q32)) {
        return;
    }
    t0 = get_clock();
    c0 = cpu_get_host_ticks();
    g_usleep(10 * 1000);
    t1 = get_clock();
    c1 = cpu_get_host_ticks();
    if (t1 <= t0 || c1 <= c0 || c1 - c0 >= INT32_MAX) {
        return;
    }
    rate = ((uint64_t)(c1 - c0) << 32) / (t1 - t0);
    qatomic_set(&wait_ticks_per_ns_q32, rate);

    /*
     * What a short charge takes beyond its length and beyond the spin's
     * overshoot (which the carry pays back anyway), after a millisecond
     * of spinning so that the core is out of the sleep's low clock; the
     * 10th percentile, so that a slow stretch of the host does not make
     * every later wait too short
     */
    len = ns_to_ticks(CXLSHM_CAL_WAIT_NS, rate);
    c0 = cpu_get_host_ticks();
    while (cpu_get_host_ticks() - c0 < ns_to_ticks(1000 * 1000, rate)) {
        /* warm up */
    }
    extra = g_new(int64_t, CXLSHM_CAL_WAITS);
    for (i = 0; i < CXLSHM_CAL_WAITS; i++) {
        wait_overrun = 0;
        c0 = cpu_get_host_ticks();
        qatomic_add(&scratch, CXLSHM_CAL_WAIT_NS);
        cxl_shm_pass_time(CXLSHM_CAL_WAIT_NS);
        c1 = cpu_get_host_ticks();
        extra[i] = c1 - c0 - len - wait_overrun;
    }
    wait_overrun = 0;
    qsort(extra, CXLSHM_CAL_WAITS, sizeof(*extra), cmp_int64);
    qatomic_set(&wait_cost_ticks,
                MIN(MAX(extra[CXLSHM_CAL_WAITS / 10], 0), len / 2));
    trace_cxl_shm_wait_calibrated(rate * 1000 >> 32,
                                  qatomic_read(&wait_cost_ticks));
}

/*
 * How far this thread's last waits overran their end (the thread was
 * descheduled, or the host took an interrupt, while it waited), in
 * ticks, and when.  The next wait, if it comes within a millisecond, is
 * shortened by as much as it can (never below zero), so that over a run
 * of accesses a vCPU waits what was charged on average instead of that
 * plus every delay the host added meanwhile; at most 50 us are carried
 * (docs/device.md, "Latency").
 */
#define CXLSHM_OVERRUN_TTL_NS   (1000 * 1000)
#define CXLSHM_OVERRUN_MAX_NS   (50 * 1000)

/*
 * Let @ns of guest time pass on the calling vCPU, at the access it is
 * making.  With icount, exactly, in guest time: the virtual clock (and
 * the guest's TSC) jumps by @ns (patch 0006), so every run sees the
 * same.  Without icount, approximately: a wait on the host's ticks,
 * which the guest sees as time passing, less what earlier waits overran
 * and less the charge's own measured cost (wait_cost_ticks).
 * Never called with a lock of ours held but an atomic's line lock.
 */
void cxl_shm_pass_time(int64_t ns)
{
    uint64_t rate = qatomic_read(&wait_ticks_per_ns_q32);
    int64_t (*now_fn)(void) = rate ? cpu_get_host_ticks : get_clock;
    int64_t now, end, len, owed = 0;

    if (ns <= 0) {
        return;
    }
    if (icount_enabled()) {
        icount_advance_ns(ns);
        return;
    }
    if (!rate) {
        rate = 1ULL << 32;              /* host clock: 1 tick = 1 ns */
    }
    len = ns_to_ticks(MIN(ns, INT64_MAX / 4), rate) -
          qatomic_read(&wait_cost_ticks);
    if (len <= 0) {
        return;                         /* the charge's own cost covers it */
    }
    now = now_fn();
    if (now - wait_overrun_at < ns_to_ticks(CXLSHM_OVERRUN_TTL_NS, rate)) {
        owed = MIN(wait_overrun, len);
    } else {
        wait_overrun = 0;
    }
    end = now + len - owed;
    while (now < end) {
        now = now_fn();
    }
    wait_overrun = MIN(wait_overrun - owed + now - end,
                       ns_to_ticks(CXLSHM_OVERRUN_MAX_NS, rate));
    wait_overrun_at = now;
}

/*
 * What this thread was charged under the BQL and has not waited yet: a
 * fence point at interrupt or exception delivery runs under it, and no
 * wait may hold it.  Waited with this thread's next charge outside the
 * BQL; at most CXLSHM_OWED_MAX_NS is carried.
 */
#define CXLSHM_OWED_MAX_NS      (1000 * 1000)
static __thread int64_t charge_owed_ns;

/*
 * Charge @ns on the calling vCPU, in both modes: counted in
 * STAT_CHARGED_NS, then passed (cxl_shm_pass_time(): under -icount
 * exactly, at the instruction making the access, else a wait on the
 * host's ticks) together with what this thread owes, or owed if the BQL
 * is held.  Never with a lock of ours held except an atomic's line lock
 * (the line is busy meanwhile, as on hardware).
 */
void cxl_shm_charge_ns(CXLShmState *s, int64_t ns)
{
    if (ns <= 0) {
        return;
    }
    qatomic_add(&s->stats[CXLSHM_STAT_CHARGED_NS], ns);
    if (!icount_enabled() && bql_locked()) {
        charge_owed_ns = MIN(charge_owed_ns + ns, CXLSHM_OWED_MAX_NS);
        trace_cxl_shm_charge_owed(s->host_id, ns, charge_owed_ns);
        return;
    }
    ns += charge_owed_ns;
    charge_owed_ns = 0;
    cxl_shm_pass_time(ns);
}

/* Direct mode: the configured latency for @lines non-coherent lines */
static void cxl_shm_charge(CXLShmState *s, uint64_t lines)
{
    uint32_t lat = qatomic_read(&s->latency_ns);

    if (lat && lines) {
        cxl_shm_charge_ns(s, (int64_t)MIN(lines * lat, INT64_MAX / 2));
    }
}

static void cxl_shm_count(CXLShmState *s, const CXLShmLineCount *n)
{
    if (n->written) {
        qatomic_add(&s->stats[CXLSHM_STAT_WB_LINES], n->written);
    }
    if (n->fetched) {
        qatomic_add(&s->stats[CXLSHM_STAT_INV_LINES], n->fetched);
    }
    if (n->conflicts) {
        qatomic_add(&s->stats[CXLSHM_STAT_CONFLICTS], n->conflicts);
    }
}

/* Line engine callback: one writeback that overwrote another host's data */
static void cxl_shm_conflict(void *opaque, const CXLShmConflict *c)
{
    CXLShmState *s = opaque;
    g_autoptr(GString) j = NULL;
    int i;

    trace_cxl_shm_conflict(s->host_id, s->generation, c->offset, c->mask);
    if (!s->conflict_fp) {
        return;
    }
    j = g_string_new(NULL);
    g_string_append_printf(j, "{\"host\":%u,\"generation\":%" PRIu64
                           ",\"offset\":%" PRIu64 ",\"line\":\"0x%" PRIx64
                           "\",\"time_ns\":%" PRId64 ",\"lost_mask\":\"0x%016"
                           PRIx64 "\",\"lost_bytes\":%d", s->host_id,
                           s->generation, c->offset, c->offset,
                           qemu_clock_get_ns(QEMU_CLOCK_REALTIME), c->mask,
                           ctpop64(c->mask));
    g_string_append(j, ",\"base\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->base[i]);
    }
    g_string_append(j, "\",\"theirs\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->theirs[i]);
    }
    g_string_append(j, "\",\"mine\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->mine[i]);
    }
    g_string_append(j, "\"}\n");
    qemu_mutex_lock(&s->conflict_lock);
    fputs(j->str, s->conflict_fp);
    fflush(s->conflict_fp);
    qemu_mutex_unlock(&s->conflict_lock);
}

static void cxl_shm_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                          uint64_t len, CXLShmLineCount *n)
{
    if (!s->nc_size) {
        return;
    }
    if (s->timed) {
        cxl_shm_timed_range(s, op, off, len, n);
    } else {
        cxl_shm_lines_op(&s->lines, op, off, len, n);
    }
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

static void cxl_shm_whole(CXLShmState *s, CXLShmLineOp op,
                          CXLShmLineCount *n)
{
    const uint64_t chunk = 2 * MiB;
    const size_t pages = chunk / CXLSHM_PAGE;
    g_autofree unsigned char *vi = g_malloc(pages);
    g_autofree unsigned char *vt = g_malloc(pages);
    g_autofree unsigned char *vp = g_malloc(pages);
    CXLShmDataRun run = { 0 };
    uint64_t off;

    if (s->timed) {
        cxl_shm_timed_whole(s, op, n);
        return;
    }
    for (off = 0; off < s->nc_size; off += chunk) {
        uint64_t len = MIN(chunk, s->nc_size - off);
        uint64_t dpa = s->coherent_size + off;
        size_t i, np = len / CXLSHM_PAGE;

        if (!s->skip_unresident ||
            mincore(s->image + off, len, vi) < 0 ||
            mincore(s->twin + off, len, vt) < 0) {
            cxl_shm_range(s, op, dpa, len, n);
            continue;
        }
        cxl_shm_pool_data(s, dpa, len, vp, &run);
        for (i = 0; i < np; i++) {
            if (((vi[i] | vt[i]) & 1) || vp[i]) {
                cxl_shm_range(s, op, dpa + i * CXLSHM_PAGE, CXLSHM_PAGE, n);
            } else if (op != CXLSHM_LINE_WRITEBACK) {
                n->fetched += CXLSHM_PAGE / CXLPOOL_LINE;
            }
        }
    }
}

static CXLShmQueue *cxl_shm_queue(CXLShmState *s, CPUState *cpu)
{
    if (!cpu || cpu->cpu_index < 0 ||
        (uint32_t)cpu->cpu_index >= s->nr_queues) {
        return NULL;
    }
    return &s->queues[cpu->cpu_index];
}

/* Non-temporal bytes @mask of the line at @line reach the pool */
static void cxl_shm_nt_land(CXLShmState *s, uint64_t line, uint64_t mask,
                            CXLShmLineCount *n)
{
    if (s->timed) {
        cxl_shm_timed_nt_land(s, line, n);
    } else {
        cxl_shm_lines_nt(&s->lines, line, mask, false, NULL, n);
    }
}

/*
 * Under the BQL: one queued entry lands if its line's lock is free now;
 * false (nothing done) if another host holds it
 */
static bool cxl_shm_land_now(CXLShmState *s, uint64_t e, uint64_t mask,
                             CXLShmLineCount *n)
{
    uint64_t line = e & ~(uint64_t)(CXLPOOL_LINE - 1);
    CXLShmLineLock h;

    if (s->timed) {
        return cxl_shm_timed_try_land(s, line, e & CXLSHM_QUEUE_FLUSH ?
                                      CXLSHM_LINE_FLUSH :
                                      CXLSHM_LINE_WRITEBACK,
                                      e & CXLSHM_QUEUE_NT, n);
    }

    if (!(e & CXLSHM_QUEUE_NT)) {
        return cxl_shm_lines_try_line(&s->lines, e & CXLSHM_QUEUE_FLUSH ?
                                      CXLSHM_LINE_FLUSH :
                                      CXLSHM_LINE_WRITEBACK, line, n);
    }
    if (!cxl_shm_lines_trylock(&s->lines, line, &h)) {
        return false;
    }
    cxl_shm_lines_nt(&s->lines, line, mask, false, &h, n);
    cxl_shm_lines_unlock(&s->lines, &h);
    return true;
}

/*
 * A fence point of @cpu: its queued clwb / clflushopt / NT lines land.
 * At an interrupt or exception delivery this runs under the BQL, which
 * must not wait for another host (a stopped one may hold a line's lock
 * for as long as it is stopped): an entry whose line is locked stays
 * queued, in order, and lands at the vCPU's next fence point (still
 * pending), as a writeback still in flight would.
 */
static void cxl_shm_drain(CXLShmState *s, CPUState *cpu, CXLShmLineCount *n)
{
    CXLShmQueue *q = cxl_shm_queue(s, cpu);
    bool nowait = bql_locked();
    uint32_t i, len, kept = 0;

    if (!q || !q->len) {
        return;
    }
    len = q->len;
    for (i = 0; i < len; i++) {
        uint64_t e = q->entry[i];
        uint64_t line = e & ~(uint64_t)(CXLPOOL_LINE - 1);

        if (nowait) {
            if (!cxl_shm_land_now(s, e, q->mask[i], n)) {
                q->mask[kept] = q->mask[i];
                q->entry[kept++] = e;
            }
        } else if (e & CXLSHM_QUEUE_NT) {
            cxl_shm_nt_land(s, line, q->mask[i], n);
        } else {
            cxl_shm_range(s, e & CXLSHM_QUEUE_FLUSH ? CXLSHM_LINE_FLUSH :
                          CXLSHM_LINE_WRITEBACK, line, CXLPOOL_LINE, n);
        }
    }
    q->len = kept;
    if (kept) {
        trace_cxl_shm_native_fence_busy(s->host_id, cpu->cpu_index, kept);
        cache_maint_set_pending(cpu);
    }
    trace_cxl_shm_native_fence(s->host_id, cpu->cpu_index, len - kept);
}

/*
 * Queue one line for @cpu's next fence point (drained early when full):
 * a clwb (@flush false) or clflushopt (@flush true), or, @nt non-zero,
 * the bytes @nt of the line that non-temporal stores wrote (merged with
 * the previous entry when it is the same line's, as a write-combining
 * buffer merges them).
 */
static void cxl_shm_defer(CXLShmState *s, CPUState *cpu, uint64_t dpa,
                          bool flush, uint64_t nt, CXLShmLineCount *n)
{
    CXLShmQueue *q = cxl_shm_queue(s, cpu);

    if (!q) {
        if (nt) {
            cxl_shm_nt_land(s, dpa, nt, n);
        } else {
            cxl_shm_range(s, flush ? CXLSHM_LINE_FLUSH :
                          CXLSHM_LINE_WRITEBACK, dpa, CXLPOOL_LINE, n);
        }
        return;
    }
    if (nt && q->len && q->entry[q->len - 1] == (dpa | CXLSHM_QUEUE_NT)) {
        q->mask[q->len - 1] |= nt;
        return;
    }
    if (q->len == CXLSHM_QUEUE_LEN) {
        /* hardware may complete a weakly ordered flush early */
        cxl_shm_drain(s, cpu, n);
    }
    q->mask[q->len] = nt;
    q->entry[q->len++] = dpa | (nt ? CXLSHM_QUEUE_NT :
                                flush ? CXLSHM_QUEUE_FLUSH : 0);
    if (s->wb_deferred) {
        qatomic_inc(&s->stats[CXLSHM_STAT_DEFERRED]);
    }
    cache_maint_set_pending(cpu);
}

/*
 * One doorbell engine: an op runs when the one rung before it has
 * completed.  DB_OFFSET and DB_LEN are taken at the DB_OP write; the
 * ringer waits for the engine outside the BQL (another vCPU's op may take
 * long), and the op's line work and latency charge run without it too.
 * DB_STATUS reads busy while a rung op has not completed; DB_STATUS and
 * DB_LINES are written together, under the BQL, when it completes, so
 * they always describe one op (docs/device.md, "Guest control").
 */
static void cxl_shm_doorbell(CXLShmState *s, uint32_t op)
{
    uint64_t off = s->db_offset, len = s->db_len;
    CXLShmLineCount n = { 0 };
    uint32_t st = cxl_shm_db_check(op, off, len, s->size);
    unsigned epoch = s->db_epoch;
    uint64_t lines = 0;
    bool locked = bql_locked();

    s->db_queued++;
    if (locked) {
        bql_unlock();
    }
    qemu_mutex_lock(&s->db_engine);
    if (st == CXLSHM_DB_OK) {
        cxl_shm_range(s, cxl_shm_db_line_op(op), off, len, &n);
        cxl_shm_charge(s, (off + len - MIN(MAX(off, s->coherent_size),
                                           off + len)) / CXLPOOL_LINE);
        lines = op == CXLSHM_OP_WRITEBACK ? n.written : n.fetched;
    }
    if (locked) {
        bql_lock();
    }
    s->db_queued--;
    /* a device reset meanwhile cleared the registers: they stay cleared */
    if (s->db_epoch == epoch) {
        s->db_status = st;
        s->db_lines = lines;
    }
    if (st != CXLSHM_DB_OK) {
        qatomic_inc(&s->stats[CXLSHM_STAT_ERRORS]);
        trace_cxl_shm_op(s->host_id, "refused", off, len, 0, st);
    } else {
        qatomic_inc(&s->stats[CXLSHM_STAT_WB_OPS + op - 1]);
        cxl_shm_count(s, &n);
        trace_cxl_shm_op(s->host_id, op_names[op], off, len, lines, st);
    }
    cxl_shm_pool_sync_stats(s);
    qemu_mutex_unlock(&s->db_engine);
}

/*
 * Guest cache maintenance (system/cache-maint.h) on a directly mapped
 * decoder: @dpa is the decoder's DPA base plus the offset in the range.
 * Runs on the vCPU thread of @cpu without the BQL.
 */
static void cxl_shm_native(void *opaque, CPUState *cpu, CacheMaintOp cop,
                           uint64_t dpa, uint64_t len)
{
    CXLShmState *s = opaque;
    CXLShmLineCount n = { 0 };
    uint64_t l, start, end, lines = 0;
    const char *what = NULL;

    switch (cop) {
    case CACHE_MAINT_CLWB:
    case CACHE_MAINT_CLFLUSHOPT:
    case CACHE_MAINT_CLFLUSH:
        dpa = QEMU_ALIGN_DOWN(dpa, CXLPOOL_LINE);
        if (dpa < s->coherent_size || dpa >= s->size) {
            return;
        }
        qatomic_inc(&s->stats[CXLSHM_STAT_NATIVE_OPS]);
        if (cop != CACHE_MAINT_CLFLUSH && s->wb_deferred) {
            cxl_shm_defer(s, cpu, dpa, cop == CACHE_MAINT_CLFLUSHOPT, 0, &n);
        } else {
            cxl_shm_range(s, cop == CACHE_MAINT_CLWB ? CXLSHM_LINE_WRITEBACK :
                          CXLSHM_LINE_FLUSH, dpa, CXLPOOL_LINE, &n);
        }
        trace_cxl_shm_native_op(s->host_id, cop == CACHE_MAINT_CLWB ?
                                "clwb" : cop == CACHE_MAINT_CLFLUSH ?
                                "clflush" : "clflushopt", 0, dpa,
                                n.written);
        lines = 1;
        break;
    case CACHE_MAINT_NT_STORE:
    case CACHE_MAINT_NT_STORE_PART:
        /*
         * Non-temporal stores bypass the cache: their bytes, and only
         * theirs, are in the pool by the fence (a line that cached
         * stores left dirty goes whole: cxl_shm_lines_nt()).  With
         * writeback=immediate they land at the instruction, once its
         * last part is known (before it, the bytes of the parts still
         * to come would look like a cached store's).
         */
        start = MAX(dpa, s->coherent_size);
        end = MIN(dpa + len, s->size);
        for (l = QEMU_ALIGN_DOWN(start, CXLPOOL_LINE); l < end;
             l += CXLPOOL_LINE) {
            uint64_t from = MAX(start, l), to = MIN(end, l + CXLPOOL_LINE);
            uint64_t mask = (to - from == 64 ? ~0ULL :
                             (1ULL << (to - from)) - 1) << (from - l);

            qatomic_inc(&s->stats[CXLSHM_STAT_NT_LINES]);
            if (s->timed) {
                cxl_shm_timed_nt_store(s, l, mask);
            }
            cxl_shm_defer(s, cpu, l, false, mask, &n);
            lines++;
        }
        if (!s->wb_deferred && cop == CACHE_MAINT_NT_STORE) {
            /* immediate: the queue holds this store's lines alone */
            cxl_shm_drain(s, cpu, &n);
        }
        break;
    case CACHE_MAINT_FENCE:
        cxl_shm_drain(s, cpu, &n);
        lines = n.written + n.fetched;
        break;
    case CACHE_MAINT_WBINVD:
    case CACHE_MAINT_WBNOINVD:
    case CACHE_MAINT_INVD:
        /* serializing: this vCPU's queued work completes first */
        cxl_shm_drain(s, cpu, &n);
        what = cop == CACHE_MAINT_WBINVD ? "wbinvd" :
               cop == CACHE_MAINT_WBNOINVD ? "wbnoinvd" : "invd";
        cxl_shm_whole(s, cop == CACHE_MAINT_WBINVD ? CXLSHM_LINE_FLUSH :
                      cop == CACHE_MAINT_WBNOINVD ? CXLSHM_LINE_WRITEBACK :
                      CXLSHM_LINE_DROP, &n);
        qatomic_inc(&s->stats[CXLSHM_STAT_NATIVE_OPS]);
        trace_cxl_shm_whole(s->host_id, what, n.written, n.fetched);
        lines = n.written;
        break;
    default:
        return;
    }
    cxl_shm_count(s, &n);
    /*
     * The pool's copy of the counters follows at the points where queued
     * work completes (a fence, a whole-cache operation, an undeferred
     * line): copying every counter at each clwb cost more than queueing it.
     */
    if (cop == CACHE_MAINT_FENCE || what || !s->wb_deferred ||
        n.written || n.fetched) {
        cxl_shm_pool_sync_stats(s);
    }
    cxl_shm_charge(s, lines);
}

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
 * spread evenly over the millisecond (issue 9: no long hold of the BQL);
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

/* BAR5 register block */

static uint32_t cxl_shm_read32(CXLShmState *s, hwaddr addr)
{
    uint64_t v = 0;
    bool hi = addr & 4;

    if (addr >= 0x200 && addr < 0x800) {
        cxl_shm_pool_refresh_hosts(s);
    }
    switch (addr & ~7ULL) {
    case 0x000:
        return hi ? CXLSHM_REG_VERSION : CXLSHM_REG_MAGIC;
    case 0x008:
        return hi ? s->max_hosts : s->host_id;
    case 0x010:
        v = s->size;
        break;
    case 0x018:
        v = s->coherent_size;
        break;
    case 0x020:
        return hi ? s->timed : CXLPOOL_LINE;
    case 0x028:
        return hi ? cxl_shm_caps(s) : s->timed ? qatomic_read(&s->t.miss_ns)
                                               : qatomic_read(&s->latency_ns);
    case 0x030:
        return hi ? s->evict_rate : (s->wb_deferred ? 0 : 1);
    case 0x100:
        v = s->db_offset;
        break;
    case 0x108:
        v = s->db_len;
        break;
    case 0x110:
        if (!hi) {
            return 0;
        }
        return s->db_queued ? CXLSHM_DB_BUSY : s->db_status;
    case 0x118:
        v = s->db_lines;
        break;
    case 0x200: {
        uint32_t i;

        for (i = 0; i < s->max_hosts; i++) {
            if (qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE) {
                v |= 1ULL << i;
            }
        }
        break;
    }
    default:
        if (addr >= 0x400 && addr < 0x400 + 16 * CXLPOOL_MAX_HOSTS) {
            uint32_t i = (addr - 0x400) / 16;

            if (i >= s->max_hosts) {
                return 0;
            }
            if ((addr & 0xf) < 8) {
                return hi ? 0 : qatomic_read(&s->hosts[i].state);
            }
            v = qatomic_read(&s->hosts[i].generation);
            break;
        }
        if (addr >= 0x040 && addr < 0x060 && s->timed) {
            /* mode=timed: the cache and filter geometry, the latencies */
            static const uint32_t none;
            const uint32_t *r[8] = {
                &s->t.hit_ns, &s->t.miss_ns, &s->t.wb_ns, &s->t.bi_ns,
                &s->t.snoop_ns, &s->t.cache_ways, &s->t.sf_entries, &none,
            };

            if (addr == 0x05c) {
                return s->t.cache_size / KiB;
            }
            return qatomic_read(r[(addr - 0x040) / 4]);
        }
        if (addr >= 0x800 && addr < 0x800 + 8 * CXLSHM_STAT_NR) {
            v = qatomic_read(&s->stats[(addr - 0x800) / 8]);
            break;
        }
        return 0;
    }
    return hi ? v >> 32 : (uint32_t)v;
}

static void cxl_shm_write32(CXLShmState *s, hwaddr addr, uint32_t val)
{
    CXLShmDoorbellRegs r = { .offset = s->db_offset, .len = s->db_len };
    bool rang;
    uint32_t op = cxl_shm_db_write32(&r, addr, val, &rang);

    s->db_offset = r.offset;
    s->db_len = r.len;
    if (rang) {
        cxl_shm_doorbell(s, op);
    }
}

static uint64_t cxl_shm_reg_read(void *opaque, hwaddr addr, unsigned size)
{
    CXLShmState *s = opaque;
    uint64_t v;

    v = cxl_shm_read32(s, addr);
    if (size == 8) {
        v |= (uint64_t)cxl_shm_read32(s, addr + 4) << 32;
    }
    trace_cxl_shm_reg_read(addr, v, size);
    return v;
}

static void cxl_shm_reg_write(void *opaque, hwaddr addr, uint64_t val,
                              unsigned size)
{
    CXLShmState *s = opaque;

    trace_cxl_shm_reg_write(addr, val, size);
    cxl_shm_write32(s, addr, val);
    if (size == 8) {
        cxl_shm_write32(s, addr + 4, val >> 32);
    }
}

static const MemoryRegionOps cxl_shm_reg_ops = {
    .read = cxl_shm_reg_read,
    .write = cxl_shm_reg_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};

/* Direct mode: map the pool (with the image over the non-coherent area) */

static void cxl_shm_unmap(CXLShmState *s, int which)
{
    CXLShmDirect *d = &s->direct[which];

    if (s->native_registered[which]) {
        cache_maint_unregister(d->hpa, cxl_shm_native, s);
        s->native_registered[which] = false;
    }
    if (!d->mapped) {
        return;
    }
    memory_region_del_subregion(d->window, d->mr);
    object_unparent(OBJECT(d->mr));
    d->mapped = false;
    trace_cxl_shm_direct_unmap(s->host_id, which);
}

static void cxl_shm_map(CXLShmState *s, int which)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t *cache_mem = s->parent_obj.cxl_cstate.crb.cache_mem_registers;
    CXLShmDirect *d = &s->direct[which];
    uint64_t dpa = 0, base = 0, size = 0, map_size;
    MemoryRegionSection sec;
    uint32_t ctrl = 0, lo, hi;
    int i, iw = 0;

    for (i = 0; i <= which; i++) {
        uint64_t skip;

        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_BASE_LO + i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_BASE_HI + i * hdm_inc);
        base = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_SIZE_LO + i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_SIZE_HI + i * hdm_inc);
        size = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_DPA_SKIP_LO +
                      i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_DPA_SKIP_HI +
                      i * hdm_inc);
        skip = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        ctrl = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_CTRL + i * hdm_inc);
        iw = FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, IW);
        dpa += skip;
        if (i < which) {
            int ways = cxl_interleave_ways_dec(iw, NULL);

            dpa += ways ? size / ways : 0;
        }
    }

    map_size = dpa < s->size ? MIN(size, s->size - dpa) : 0;
    if (d->mapped && d->hpa == base && d->dpa == dpa &&
        d->size == map_size && iw == 0) {
        return;     /* rewritten with the values it had: nothing moves */
    }
    cxl_shm_unmap(s, which);
    if (iw != 0) {
        trace_cxl_shm_direct_refused(s->host_id, which, "interleaved");
        return;
    }
    if (!size || dpa >= s->size) {
        trace_cxl_shm_direct_refused(s->host_id, which, "no device memory");
        return;
    }

    /* Only ever map over a CXL fixed memory window, never over RAM */
    sec = memory_region_find(get_system_memory(), base, map_size);
    if (!sec.mr) {
        trace_cxl_shm_direct_refused(s->host_id, which, "no window");
        return;
    }
    if (sec.mr->ops != &cfmws_ops || int128_get64(sec.size) != map_size) {
        memory_region_unref(sec.mr);
        trace_cxl_shm_direct_refused(s->host_id, which,
                                     "not inside a CXL fixed memory window");
        return;
    }

    d->window = sec.mr;
    d->hpa = base;
    d->dpa = dpa;
    d->size = map_size;
    if (s->timed) {
        cxl_shm_timed_map(s, d);
    } else {
        memory_region_init_alias(&d->alias, OBJECT(s), "cxl-shm-direct",
                                 s->pool_mr, dpa, map_size);
        d->mr = &d->alias;
    }
    memory_region_add_subregion_overlap(sec.mr, sec.offset_within_region,
                                        d->mr, 1);
    memory_region_unref(sec.mr);
    d->mapped = true;
    trace_cxl_shm_direct_map(s->host_id, which, base, dpa, map_size);

    if (tcg_enabled()) {
        cache_maint_register(base, map_size, dpa, cxl_shm_native, s);
        s->native_registered[which] = true;
    }
}

static bool cxl_shm_decoder_committed(CXLShmState *s, int which)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t *cache_mem = s->parent_obj.cxl_cstate.crb.cache_mem_registers;
    uint32_t ctrl = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_CTRL +
                             which * hdm_inc);

    return FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, COMMITTED);
}

/*
 * Decoder @which was committed, uncommitted or reprogrammed while
 * committed.  A decoder's DPA range starts where the previous decoders'
 * skips and sizes end, so every committed decoder from @which on may
 * have moved: each is mapped again where its registers now say (a
 * decoder whose range did not change stays as it is).  A 64-bit base,
 * size or skip is written as two halves: between them the mapping
 * follows the half-written value, as the MMIO path does.
 */
static void cxl_shm_hdm_changed(CXLType3Dev *ct3d, int which, bool committed)
{
    CXLShmState *s = CXL_SHM(ct3d);
    int i;

    if (which < 0 || which >= CXLSHM_MAX_DECODERS) {
        return;
    }
    for (i = which; i < CXLSHM_MAX_DECODERS; i++) {
        if (i == which ? committed : cxl_shm_decoder_committed(s, i)) {
            cxl_shm_map(s, i);
        } else if (i == which) {
            cxl_shm_unmap(s, i);
        }
    }
}

/* CDAT: the pool is shareable, only the coherent window HW coherent */

static int cxl_shm_cdat_range(CXLShmState *s, CDATSubHeader **t, int handle,
                              uint64_t base, uint64_t len, bool coherent)
{
    static const struct {
        uint8_t type;
        bool latency;
    } lb[] = {
        { HMAT_LB_DATA_READ_LATENCY, true },
        { HMAT_LB_DATA_WRITE_LATENCY, true },
        { HMAT_LB_DATA_READ_BANDWIDTH, false },
        { HMAT_LB_DATA_WRITE_BANDWIDTH, false },
    };
    CDATDsmas *dsmas = g_new0(CDATDsmas, 1);
    CDATDsemts *dsemts = g_new0(CDATDsemts, 1);
    uint32_t lat[2];
    int n = 0, i;

    cxl_shm_timed_cdat_latency(s, &lat[0], &lat[1]);

    *dsmas = (CDATDsmas) {
        .header = { .type = CDAT_TYPE_DSMAS, .length = sizeof(*dsmas) },
        .DSMADhandle = handle,
        .flags = CDAT_DSMAS_FLAG_SHAREABLE |
                 (coherent ? CDAT_DSMAS_FLAG_HW_COHERENT : 0),
        .DPA_base = base,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsmas;
    for (i = 0; i < ARRAY_SIZE(lb); i++) {
        CDATDslbis *d = g_new0(CDATDslbis, 1);

        *d = (CDATDslbis) {
            .header = { .type = CDAT_TYPE_DSLBIS, .length = sizeof(*d) },
            .handle = handle,
            .flags = HMAT_LB_MEM_MEMORY,
            .data_type = lb[i].type,
            /* latency in ns (base unit ps), bandwidth in MB/s */
            .entry_base_unit = lb[i].latency ? 1000 : 1,
            .entry[0] = lb[i].latency ? lat[i] : s->bandwidth_mbs,
        };
        t[n++] = (CDATSubHeader *)d;
    }
    *dsemts = (CDATDsemts) {
        .header = { .type = CDAT_TYPE_DSEMTS, .length = sizeof(*dsemts) },
        .DSMAS_handle = handle,
        .EFI_memory_type_attr = 1, /* EFI_MEMORY_SP */
        .DPA_offset = 0,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsemts;
    return n;
}

/* The cxl-type3 class hook: @priv is the device */
static int cxl_shm_build_cdat(CDATSubHeader ***cdat_table, void *priv)
{
    CXLShmState *s = CXL_SHM(priv);
    CDATSubHeader **t = g_new0(CDATSubHeader *, 12);
    int n = 0, handle = 0;

    if (s->coherent_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, 0, s->coherent_size,
                                true);
    }
    if (s->nc_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, s->coherent_size,
                                s->nc_size, false);
    }
    *cdat_table = t;
    return n;
}

static void cxl_shm_free_cdat(CDATSubHeader **cdat_table, int num, void *priv)
{
    int i;

    for (i = 0; i < num; i++) {
        g_free(cdat_table[i]);
    }
    g_free(cdat_table);
}

/* Realize */

/*
 * memdev=ID: the pool's data is a memory-backend-file the user made, its
 * mem-path the pool file and its offset the metadata size, so that the
 * pool stays one file (docs/pool-format.md).  Checked before the pool is
 * touched; the pool's path is the backend's mem-path.
 */
static bool cxl_shm_check_memdev(CXLShmState *s, Error **errp)
{
    HostMemoryBackend *b = s->parent_obj.hostmem;
    const char *id = object_get_canonical_path_component(OBJECT(b));
    g_autofree char *path = NULL;
    MemoryRegion *mr;
    struct stat st;
    uint64_t size, offset;
    int fd;

    if (s->pool_path && *s->pool_path) {
        error_setg(errp, "cxl-shm: properties 'pool' and 'memdev' are both "
                   "set (allowed: one; 'pool=PATH' makes the memdev itself)");
        return false;
    }
    if (!object_dynamic_cast(OBJECT(b), TYPE_MEMORY_BACKEND_FILE)) {
        error_setg(errp, "cxl-shm: memdev '%s' is a %s (allowed: a "
                   "memory-backend-file whose mem-path is the pool file)",
                   id, object_get_typename(OBJECT(b)));
        return false;
    }
    if (host_memory_backend_is_mapped(b)) {
        error_setg(errp, "cxl-shm: memdev '%s' is already used by another "
                   "device (or as the machine's or a NUMA node's memory)",
                   id);
        return false;
    }
    if (!b->share) {
        error_setg(errp, "cxl-shm: memdev '%s' has share=off (allowed: "
                   "share=on: the hosts share the pool's pages)", id);
        return false;
    }
    if (object_property_get_bool(OBJECT(b), "readonly", NULL)) {
        error_setg(errp, "cxl-shm: memdev '%s' has readonly=on (a host "
                   "writes its pool)", id);
        return false;
    }
    offset = object_property_get_uint(OBJECT(b), "offset", NULL);
    if (offset != CXLPOOL_META_SIZE) {
        error_setg(errp, "cxl-shm: memdev '%s' has offset=%" PRIu64
                   " (allowed: offset=%" PRIu64 ", the pool's data starts "
                   "after its 2 MiB of metadata)", id, offset,
                   CXLPOOL_META_SIZE);
        return false;
    }
    mr = host_memory_backend_get_memory(b);
    size = memory_region_size(mr);
    if (s->size && s->size != size) {
        error_setg(errp, "cxl-shm: memdev '%s' is %" PRIu64 " bytes but "
                   "property 'size' is %" PRIu64 " (allowed: equal, or "
                   "'size' left out)", id, size, s->size);
        return false;
    }
    fd = memory_region_get_fd(mr);
    path = object_property_get_str(OBJECT(b), "mem-path", NULL);
    if (fd < 0 || !path || fstat(fd, &st) < 0) {
        error_setg(errp, "cxl-shm: memdev '%s' has no file (allowed: a "
                   "memory-backend-file)", id);
        return false;
    }
    if (st.st_nlink == 0) {
        error_setg(errp, "cxl-shm: memdev '%s' has mem-path '%s', a "
                   "directory: its file is unlinked and no other host can "
                   "open it (allowed: the pool file's path)", id, path);
        return false;
    }
    s->size = size;
    s->memdev = true;
    s->backend = b;
    g_free(s->pool_path);
    s->pool_path = g_steal_pointer(&path);
    trace_cxl_shm_memdev(s->pool_path, id, size);
    return true;
}

static bool cxl_shm_check_props(CXLShmState *s, Error **errp)
{
    CXLType3Dev *ct3d = &s->parent_obj;

    if (!icount_advance_check(errp)) {
        return false;
    }
    if (ct3d->hostmem && !cxl_shm_check_memdev(s, errp)) {
        return false;
    }
    if (!s->pool_path || !*s->pool_path) {
        error_setg(errp, "cxl-shm: property 'pool' is required (the path of "
                   "the pool file), or 'memdev' (a memory-backend-file on "
                   "it)");
        return false;
    }
    if (ct3d->hostvmem || ct3d->hostpmem ||
        ct3d->dc.num_regions || ct3d->lsa) {
        error_setg(errp, "cxl-shm: the device takes its memory from 'pool' "
                   "or 'memdev'; 'volatile-memdev', 'persistent-memdev', "
                   "'lsa' and 'num-dc-regions' must not be set");
        return false;
    }
    s->timed = s->mode == CXL_SHM_MODE_TIMED;
    if (!s->size || s->size % (256 * MiB) || s->size > CXLSHM_SIZE_MAX) {
        error_setg(errp, "cxl-shm: property 'size' is %" PRIu64 " (allowed: "
                   "a multiple of 256 MiB in [256 MiB, 1 TiB])", s->size);
        return false;
    }
    if (s->coherent_size % (2 * MiB) || s->coherent_size > s->size) {
        error_setg(errp, "cxl-shm: property 'coherent-size' is %" PRIu64
                   " (allowed: a multiple of 2 MiB in [0, size=%" PRIu64 "])",
                   s->coherent_size, s->size);
        return false;
    }
    if (s->max_hosts < 1 || s->max_hosts > CXLPOOL_MAX_HOSTS) {
        error_setg(errp, "cxl-shm: property 'max-hosts' is %u (allowed: "
                   "[1, %d])", s->max_hosts, CXLPOOL_MAX_HOSTS);
        return false;
    }
    if (s->host_id >= s->max_hosts) {
        error_setg(errp, "cxl-shm: property 'host-id' is %u (allowed: "
                   "[0, max-hosts-1=%u])", s->host_id, s->max_hosts - 1);
        return false;
    }
    if (s->latency_ns > CXLSHM_LATENCY_MAX) {
        error_setg(errp, "cxl-shm: property 'latency-ns' is %u (allowed: "
                   "[0, %d])", s->latency_ns, CXLSHM_LATENCY_MAX);
        return false;
    }
    if (s->bandwidth_mbs < 1 || s->bandwidth_mbs > CXLSHM_BANDWIDTH_MAX) {
        error_setg(errp, "cxl-shm: property 'bandwidth-mbs' is %u (allowed: "
                   "[1, %d])", s->bandwidth_mbs, CXLSHM_BANDWIDTH_MAX);
        return false;
    }
    s->wb_deferred = s->writeback == CXL_SHM_WRITEBACK_DEFERRED;
    if (s->evict_rate > CXLSHM_EVICT_MAX) {
        error_setg(errp, "cxl-shm: property 'evict-rate' is %u (allowed: "
                   "[0, %d] lines per millisecond)", s->evict_rate,
                   CXLSHM_EVICT_MAX);
        return false;
    }
    if (!s->timed && (s->t.cache_size != CXLSHM_TIMED_CACHE ||
                      s->t.cache_ways != CXLSHM_TIMED_WAYS ||
                      s->t.sf_entries != CXLSHM_TIMED_SF ||
                      (s->t.stale_log && *s->t.stale_log))) {
        error_setg(errp, "cxl-shm: properties 'cache-size', 'cache-ways', "
                   "'snoop-filter-entries' and 'stale-log' apply to "
                   "mode=timed only");
        return false;
    }
    if (!cxl_shm_timed_check_props(s, errp)) {
        return false;
    }
    if (s->pool_mode > 0777 || (s->pool_mode & 0600) != 0600) {
        error_setg(errp, "cxl-shm: property 'pool-mode' is 0%o (allowed: a "
                   "file mode in [0600, 0777] with owner read and write)",
                   s->pool_mode);
        return false;
    }
    return true;
}

/*
 * The pool's data: the user's memdev, or for pool=PATH the backend the
 * user would have given (mem-path=PATH, offset=2M, share=on).
 */
static bool cxl_shm_make_backend(CXLShmState *s, Error **errp)
{
    static int count;
    g_autofree char *name = NULL;
    Object *o;

    if (s->memdev) {
        s->parent_obj.hostmem = NULL;   /* the parent would take it as pmem */
        goto mapped;
    }
    name = g_strdup_printf("cxl-shm-pool%d", count++);
    o = object_new(TYPE_MEMORY_BACKEND_FILE);

    if (!object_property_set_str(o, "mem-path", s->pool_path, errp) ||
        !object_property_set_uint(o, "size", s->size, errp) ||
        !object_property_set_uint(o, "offset", CXLPOOL_META_SIZE, errp) ||
        !object_property_set_bool(o, "share", true, errp)) {
        object_unref(o);
        return false;
    }
    object_property_add_child(OBJECT(s), name, o);
    object_unref(o);
    if (!user_creatable_complete(USER_CREATABLE(o), errp)) {
        object_unparent(o);
        return false;
    }
    s->backend = MEMORY_BACKEND(o);
mapped:
    s->pool_mr = host_memory_backend_get_memory(s->backend);
    s->pool = memory_region_get_ram_ptr(s->pool_mr);
    s->lines.pool = s->pool;    /* also without a non-coherent area */
    return true;
}

static void cxl_shm_drop_backend(CXLShmState *s)
{
    if (s->backend && s->memdev) {
        /* the user's: the memdev link keeps its reference */
        s->parent_obj.hostmem = s->backend;
        s->backend = NULL;
        s->pool_mr = NULL;
        s->pool = NULL;
    } else if (s->backend) {
        object_unparent(OBJECT(s->backend));
        s->backend = NULL;
        s->pool_mr = NULL;
        s->pool = NULL;
    }
}

/*
 * The host starts with a clean copy of the pool.  Image and twin are fresh
 * zero pages: copy only the file's data extents, line by line under the
 * line locks, so that a host uses memory only for the parts of the area
 * that hold data or that it touches.
 */
static void cxl_shm_load_image(CXLShmState *s)
{
    off_t base = CXLPOOL_META_SIZE + s->coherent_size;
    uint64_t off = 0;

    while (off < s->nc_size) {
        off_t data = lseek(s->fd, base + off, SEEK_DATA);
        off_t hole;
        uint64_t from, to;

        if (data < 0) {
            break;              /* only holes (zeros) left */
        }
        hole = lseek(s->fd, data, SEEK_HOLE);
        if (hole < 0 || hole > base + (off_t)s->nc_size) {
            hole = base + s->nc_size;
        }
        from = QEMU_ALIGN_DOWN(data - base, CXLSHM_PAGE);
        to = QEMU_ALIGN_UP(hole - base, CXLSHM_PAGE);
        if (to <= from) {
            break;
        }
        cxl_shm_lines_load(&s->lines, s->coherent_size + from, to - from);
        off = to;
    }
}

/* Bytes of the per-page "in sync" words (cxl-shm-line.h) */
static size_t cxl_shm_seen_size(CXLShmState *s)
{
    return s->nc_size / CXLSHM_LOCK_PAGE * sizeof(uint64_t);
}

static bool cxl_shm_make_image(CXLShmState *s, Error **errp)
{
    void *twin, *seen;

    s->nc_size = s->size - s->coherent_size;
    if (!s->nc_size) {
        return true;
    }
    if (!memory_region_init_ram(&s->image_mr, OBJECT(s), "cxl-shm-image",
                                s->nc_size, errp)) {
        return false;
    }
    twin = mmap(NULL, s->nc_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (twin == MAP_FAILED) {
        error_setg_errno(errp, errno, "cxl-shm: cannot allocate the twin of "
                         "the non-coherent area (%" PRIu64 " bytes)",
                         s->nc_size);
        object_unparent(OBJECT(&s->image_mr));
        return false;
    }
    seen = mmap(NULL, cxl_shm_seen_size(s), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (seen == MAP_FAILED) {
        error_setg_errno(errp, errno, "cxl-shm: cannot allocate the page "
                         "versions of the non-coherent area");
        munmap(twin, s->nc_size);
        object_unparent(OBJECT(&s->image_mr));
        return false;
    }
    s->lines.seen = seen;
    s->lines.runs = g_new0(CXLShmRun, CXLSHM_NR_LOCKS);
    s->twin = twin;
    s->image = memory_region_get_ram_ptr(&s->image_mr);
    s->lines.image = s->image;
    s->lines.twin = s->twin;
    s->lines.conflict = cxl_shm_conflict;
    cxl_shm_load_image(s);
    /* loads and stores of the non-coherent area hit the image */
    memory_region_add_subregion_overlap(s->pool_mr, s->coherent_size,
                                        &s->image_mr, 1);
    return true;
}

static void cxl_shm_drop_image(CXLShmState *s)
{
    if (!s->nc_size) {
        return;
    }
    if (s->image) {
        memory_region_del_subregion(s->pool_mr, &s->image_mr);
        object_unparent(OBJECT(&s->image_mr));
        s->image = NULL;
    }
    if (s->twin) {
        munmap(s->twin, s->nc_size);
        s->twin = NULL;
    }
    if (s->lines.seen) {
        munmap(s->lines.seen, cxl_shm_seen_size(s));
        s->lines.seen = NULL;
    }
    g_free(s->lines.runs);
    s->lines.runs = NULL;
}

/*
 * Guest atomics on the coherent window must be atomic across the hosts'
 * QEMUs.  KVM runs them natively; TCG does only when its vCPUs translate
 * with CF_PARALLEL, which the accelerator turns on for every vCPU, CPU
 * hotplug included, once a device asks (patch 0007).
 */
static bool cxl_shm_setup_atomics(CXLShmState *s, Error **errp)
{
    if (kvm_enabled()) {
        /*
         * mode=timed serves every access as MMIO, and KVM emulates an
         * atomic on MMIO as a read and a write: not atomic across hosts.
         */
        s->atomics_ok = !s->timed;
        return true;
    }
    if (!tcg_enabled()) {
        s->atomics_ok = false;
        return true;
    }
    if (!tcg_require_parallel_atomics("cxl-shm", errp)) {
        error_append_hint(errp, "Cross-host atomics on the coherent window "
                          "need it: drop parallel-atomics=off.\n");
        return false;
    }
    s->atomics_ok = true;
    return true;
}

static bool cxl_shm_no_swap(void)
{
    struct sysinfo si;

    return sysinfo(&si) == 0 && si.totalswap == 0;
}

/*
 * The devices of this QEMU that are in their pod, for one exit notifier
 * that makes them leave at exit.  A notifier per device could not be
 * removed safely after an unplug: QEMU runs the exit notifiers from
 * exit() without the BQL, while the deferred release (cxl_shm_release)
 * runs under it on the RCU thread.  The list, and every leave, are under
 * cxl_shm_live_lock.
 */
static QemuMutex cxl_shm_live_lock;
static QLIST_HEAD(, CXLShmState) cxl_shm_live =
    QLIST_HEAD_INITIALIZER(cxl_shm_live);
static Notifier cxl_shm_exit_notifier;

static void cxl_shm_exit_notify(Notifier *n, void *data)
{
    CXLShmState *s;

    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_FOREACH(s, &cxl_shm_live, live) {
        cxl_shm_pool_leave(s);
    }
    qemu_mutex_unlock(&cxl_shm_live_lock);
}

/* At the end of a successful realize, with the BQL */
static void cxl_shm_live_add(CXLShmState *s)
{
    if (!cxl_shm_exit_notifier.notify) {
        qemu_mutex_init(&cxl_shm_live_lock);
        cxl_shm_exit_notifier.notify = cxl_shm_exit_notify;
        qemu_add_exit_notifier(&cxl_shm_exit_notifier);
    }
    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_INSERT_HEAD(&cxl_shm_live, s, live);
    qemu_mutex_unlock(&cxl_shm_live_lock);
}

/*
 * The mailbox commands one head of the shared device may use: an
 * allowlist, so that a command a later QEMU tree adds is refused until
 * someone has decided it is safe here.  Each was checked against the
 * QEMU 10.0 tree (hw/cxl/cxl-mailbox-utils.c):
 *
 * - reads of device state, logs and capabilities, and the poison and
 *   scan media lists (Scan Media and Inject Poison change only this
 *   host's lists, never the media);
 * - this host's own event records and interrupt policy, and the device
 *   timestamp (Linux sets it at probe);
 * - Clear Poison (4302h), whose 64-byte write reaches the pool through
 *   cxl_shm_set_cacheline(): one whole line under its lock, as a head's
 *   own store may write it.
 *
 * Left out: Sanitize (4400h; the parent memsets the whole pool, every
 * host's data, bypassing the images and the line locks), firmware
 * Transfer and Activate (0201h, 0202h; the device's firmware is every
 * head's), Set Feature (0502h; device-wide scrub settings), Set LSA
 * (4103h; a shared device's label area is every head's, and the pool
 * has none), and everything the tree does not have yet (Secure Erase
 * 4401h, Media Operations 4402h, which zeroes ranges upstream, Set
 * Partition Info, Set Shutdown State, the dynamic capacity commands).
 * A guest that sends one gets Unsupported, and the Command Effects Log
 * does not offer it.  The parent builds the command set in its reset
 * (cxl_device_register_init_t3), hence the call after every parent
 * reset.
 */
static const uint16_t cxl_shm_mbox_allowlist[] = {
    0x0100, 0x0101, 0x0102, 0x0103,     /* event records, interrupt policy */
    0x0200,                             /* Get FW Info */
    0x0300, 0x0301,                     /* Get / Set Timestamp */
    0x0400, 0x0401,                     /* Get Supported Logs, Get Log */
    0x0500, 0x0501,                     /* Get Supported Features, Feature */
    0x4000,                             /* Identify Memory Device */
    0x4100, 0x4102,                     /* Get Partition Info, Get LSA */
    0x4300, 0x4301, 0x4302,             /* poison list, inject, clear */
    0x4303, 0x4304, 0x4305,             /* scan media */
    0x4500,                             /* Get Security State */
};

static bool cxl_shm_mbox_allowed(uint16_t opcode)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cxl_shm_mbox_allowlist); i++) {
        if (cxl_shm_mbox_allowlist[i] == opcode) {
            return true;
        }
    }
    return false;
}

static void cxl_shm_restrict_mailbox(CXLShmState *s)
{
    CXLCCI *cci = &s->parent_obj.cci;
    size_t i, j;
    int set, cmd;

    for (set = 0; set < 256; set++) {
        for (cmd = 0; cmd < 256; cmd++) {
            if (cci->cxl_cmd_set[set][cmd].handler &&
                !cxl_shm_mbox_allowed(set << 8 | cmd)) {
                cci->cxl_cmd_set[set][cmd].handler = NULL;
            }
        }
    }
    for (i = j = 0; i < cci->cel_size; i++) {
        if (cxl_shm_mbox_allowed(cci->cel_log[i].opcode)) {
            cci->cel_log[j++] = cci->cel_log[i];
        }
    }
    /* Get Log may read past cel_size: leave no stale entry there */
    memset(&cci->cel_log[j], 0, (cci->cel_size - j) * sizeof(cci->cel_log[0]));
    cci->cel_size = j;
}

/*
 * Clear Poison (4302h) writes 64 bytes of the command's payload into the
 * media.  The parent writes them through its host address space, which
 * here is the pool with this host's image over the non-coherent area: a
 * store by this host in the non-coherent area, a plain unlocked copy in
 * the coherent window.  Write the line as the device's own media write
 * instead, whole and under the line's lock.  The caller checks only
 * dpa + 64 against the capacity (which can wrap): check again here.  An
 * unaligned DPA (the spec requires 64-byte alignment) gets Internal Error,
 * the only failure this hook can return; so does a line whose lock
 * another host keeps for more than CXLSHM_MEDIA_WAIT_US (it may be
 * stopped, for as long as it is: the mailbox runs under the BQL, which
 * must not wait for it).  The guest may try again.
 */
#define CXLSHM_MEDIA_WAIT_US    10000

static bool cxl_shm_set_cacheline(CXLType3Dev *ct3d, uint64_t dpa_offset,
                                  uint8_t *data)
{
    CXLShmState *s = CXL_SHM(ct3d);

    if (dpa_offset % CXLSHM_LINE || dpa_offset >= s->size ||
        s->size - dpa_offset < CXLSHM_LINE) {
        return false;
    }
    if (!cxl_shm_lines_try_media_write(&s->lines, dpa_offset, data,
                                       CXLSHM_MEDIA_WAIT_US)) {
        trace_cxl_shm_media_write_busy(s->host_id, dpa_offset);
        return false;
    }
    trace_cxl_shm_media_write(s->host_id, dpa_offset);
    return true;
}


static void cxl_shm_realize(PCIDevice *pci_dev, Error **errp)
{
    ERRP_GUARD();
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    CXLType3Dev *ct3d = &s->parent_obj;

    s->fd = -1;
    if (!cxl_shm_check_props(s, errp)) {
        return;
    }
    /* before the pool is touched: a refusal here leaves it as it was */
    if (!cxl_shm_setup_atomics(s, errp)) {
        return;
    }
    if (s->conflict_log && *s->conflict_log) {
        s->conflict_fp = fopen(s->conflict_log, "a");
        if (!s->conflict_fp) {
            error_setg_errno(errp, errno, "cxl-shm: cannot open "
                             "conflict-log '%s'", s->conflict_log);
            return;
        }
    }
    if (!cxl_shm_timed_open_log(s, errp)) {
        goto fail_log;
    }
    if (!cxl_shm_pool_join(s, errp)) {
        goto fail_log;
    }
    if (!cxl_shm_make_backend(s, errp)) {
        goto fail_leave;
    }
    /*
     * Line locks an earlier life of this host died holding: take them
     * over and roll their half-written lines back, now that the pool's
     * data is mapped and before anything else touches a line.
     */
    cxl_shm_lines_recover_own(&s->lines);
    if (!cxl_shm_make_image(s, errp)) {
        goto fail_backend;
    }
    if (!cxl_shm_timed_init(s, errp)) {
        goto fail_image;
    }
    cxl_shm_calibrate_wait();           /* latency may be set at run time */

    ct3d->hostvmem = s->backend;
    sc->parent_realize(pci_dev, errp);
    if (*errp) {
        ct3d->hostvmem = NULL;
        goto fail_image;
    }

    memory_region_init_io(&s->regs, OBJECT(s), &cxl_shm_reg_ops, s,
                          "cxl-shm-regs", CXLSHM_REGS_SIZE);
    /*
     * The doorbell drops the BQL for its line work (cxl_shm_doorbell()).
     * The memory core's re-entrancy guard is a flag of the device, set
     * for as long as a callback of one of its regions runs: with it, any
     * other vCPU's access to any of the device's BARs meanwhile would be
     * refused as re-entrant I/O (reads of 0, writes dropped).  BAR5 does
     * no DMA, so nothing can re-enter the device from it: no guard.
     */
    s->regs.disable_reentrancy_guard = true;
    pci_register_bar(pci_dev, CXLSHM_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);

    /*
     * The twin, the deferred queues and the pool's state live outside
     * the guest's RAM: a migrated or restored host would write stale
     * lines over the other hosts' data.
     */
    error_setg(&s->migration_blocker, "cxl-shm: a host of a pod cannot be "
               "migrated or snapshotted (its cache image and the pool's "
               "state are not part of the VM state)");
    if (migrate_add_blocker(&s->migration_blocker, errp) < 0) {
        goto fail_parent;
    }

    s->nr_queues = MACHINE(qdev_get_machine())->smp.max_cpus;
    s->queues = g_new0(CXLShmQueue, s->nr_queues);
    s->skip_unresident = cxl_shm_no_swap();
    /* on hugetlbfs a page the pool mapping lacks was never written */
    s->pool_hugetlbfs = s->fd >= 0 && qemu_fd_getpagesize(s->fd) !=
                                      qemu_real_host_page_size();
    qemu_mutex_init(&s->conflict_lock);
    qemu_mutex_init(&s->db_engine);
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
    cxl_shm_live_add(s);
    return;

fail_parent:
    sc->parent_exit(pci_dev);
    ct3d->hostvmem = NULL;
fail_image:
    cxl_shm_timed_fini(s);      /* no vCPU has run: no grace period */
    cxl_shm_timed_release(s);
    cxl_shm_drop_image(s);
fail_backend:
    cxl_shm_drop_backend(s);
fail_leave:
    cxl_shm_pool_abort(s);
fail_log:
    cxl_shm_timed_close_log(s);
    if (s->conflict_fp) {
        fclose(s->conflict_fp);
        s->conflict_fp = NULL;
    }
}

/*
 * What a vCPU may still be using after the unplug: a cache-maintenance
 * instruction, an atomic step or an MMIO access that looked the device up
 * before it was unmapped reaches the timed-mode cache, the image, the
 * twin, the queues and the pool until the end of its RCU read-side
 * critical section.  So they go after a grace period, with the BQL, and
 * the host leaves the pod then, as at a clean exit (or at exit, if QEMU
 * quits first: then the exit notifier made it leave, and leaving again
 * does nothing).
 */
static void cxl_shm_release(struct rcu_head *head)
{
    CXLShmState *s = container_of(head, CXLShmState, release_rcu);

    trace_cxl_shm_release(s->pool_path, s->host_id);
    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_REMOVE(s, live);
    cxl_shm_timed_release(s);
    cxl_shm_timed_close_log(s);
    if (s->conflict_fp) {
        fclose(s->conflict_fp);
        s->conflict_fp = NULL;
    }
    qemu_mutex_destroy(&s->conflict_lock);
    qemu_mutex_destroy(&s->db_engine);
    g_free(s->queues);
    s->queues = NULL;
    cxl_shm_drop_image(s);
    cxl_shm_drop_backend(s);
    cxl_shm_pool_leave(s);
    qemu_mutex_unlock(&cxl_shm_live_lock);
    object_unref(OBJECT(s));
}

/*
 * Unrealize can run inside an RCU read-side critical section: a guest
 * that powers the root port's slot off unplugs the device from its own
 * config write.  Nothing here may wait for a grace period (a reader that
 * calls synchronize_rcu() never returns): what readers may still use is
 * released by cxl_shm_release(), after one.
 */
static void cxl_shm_exit(PCIDevice *pci_dev)
{
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        cxl_shm_unmap(s, i);
    }
    cxl_shm_timed_fini(s);
    if (s->evict_timer) {
        timer_free(s->evict_timer);
        s->evict_timer = NULL;
    }
    g_clear_pointer(&s->evict_pages, g_free);
    migrate_del_blocker(&s->migration_blocker);
    sc->parent_exit(pci_dev);
    s->parent_obj.hostvmem = NULL;
    object_ref(OBJECT(s));
    call_rcu1(&s->release_rcu, cxl_shm_release);
}

/*
 * A host reset is a host failure followed by a rejoin: the lines it had
 * not written back are lost (its queued clwb / clflushopt too), its image
 * is fetched again from the pool, and its generation grows, which the
 * other hosts see in the host table.  Runs with the BQL and with every
 * vCPU of this QEMU stopped (cxl_shm_host_reset_stopped()): none is
 * inside the device, so no thread of this process holds a line lock of
 * the old generation, which the rejoin takes over.
 */
static void cxl_shm_host_reset(CXLShmState *s)
{
    uint32_t i;

    for (i = 0; i < s->nr_queues; i++) {
        s->queues[i].len = 0;
    }
    /* evictions start a new millisecond, on the pages held from now on */
    s->evict_left = 0;
    cxl_shm_pool_rejoin(s);
    cxl_shm_timed_reset(s);
    if (s->nc_size) {
        ram_block_discard_range(s->image_mr.ram_block, 0, s->nc_size);
        qemu_madvise(s->twin, s->nc_size, QEMU_MADV_DONTNEED);
        /* a twin of zeros is in sync with nothing */
        qemu_madvise(s->lines.seen, cxl_shm_seen_size(s),
                     QEMU_MADV_DONTNEED);
        memset(s->lines.runs, 0, CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
        cxl_shm_load_image(s);
    }
    qatomic_inc(&s->stats[CXLSHM_STAT_RESETS]);
    cxl_shm_pool_sync_stats(s);
    trace_cxl_shm_reset(s->host_id, s->generation);
}

/* Is every vCPU of this QEMU stopped (none can be inside the device)? */
static bool cxl_shm_vcpus_stopped(void)
{
    CPUState *cpu;

    CPU_FOREACH(cpu) {
        if (!cpu_is_stopped(cpu)) {
            return false;
        }
    }
    return true;
}

/*
 * The host reset with this QEMU's vCPUs stopped.  A machine reset has
 * stopped them already; a reset of the device alone (a secondary bus
 * reset of its root port, from a vCPU's config write or from the
 * monitor) comes while the others run, in clwb / clflushopt, a doorbell
 * or an atomic of the device without the BQL: they are paused for it
 * (pause_all_vcpus() waits until each has left the device), and resumed
 * after.  From a vCPU thread, which cannot pause the others, it runs as
 * that vCPU's safe work (cxl_shm_reset_work).
 */
static void cxl_shm_host_reset_stopped(CXLShmState *s)
{
    bool pause = !cxl_shm_vcpus_stopped();

    trace_cxl_shm_reset_pause(s->host_id, pause);
    if (pause) {
        pause_all_vcpus();
    }
    cxl_shm_host_reset(s);
    if (pause) {
        resume_all_vcpus();
    }
}

/*
 * A reset asked for by a vCPU (its config write set the root port's
 * secondary bus reset): the host reset runs as safe work of that vCPU,
 * before it executes another instruction, while every vCPU of this QEMU
 * is outside guest code (the exclusive section of async_safe_run_on_cpu),
 * so none is inside the device.  It lands at the same point of the
 * guest's execution on every run, and nothing in the main loop waits for
 * it.  A machine reset that comes first supersedes it (reset_pending).
 */
static void cxl_shm_reset_work(CPUState *cpu, run_on_cpu_data data)
{
    CXLShmState *s = data.host_ptr;

    bql_lock();
    if (DEVICE(s)->realized && s->reset_pending > 0) {
        s->reset_pending--;
        trace_cxl_shm_reset_pause(s->host_id, false);
        cxl_shm_host_reset(s);
    }
    bql_unlock();
    object_unref(OBJECT(s));
}

static void cxl_shm_reset(DeviceState *dev)
{
    CXLShmState *s = CXL_SHM(dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    int i;

    sc->parent_reset(dev);
    cxl_shm_restrict_mailbox(s);
    /* the parent clears the decoders without an uncommit */
    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        cxl_shm_unmap(s, i);
    }
    s->db_offset = 0;
    s->db_len = 0;
    s->db_lines = 0;
    s->db_status = 0;
    s->db_epoch++;
    /* the first reset is the machine's (or the hot-plug's) own */
    if (s->reset_once && current_cpu) {
        s->reset_pending++;
        object_ref(OBJECT(s));
        async_safe_run_on_cpu(current_cpu, cxl_shm_reset_work,
                              RUN_ON_CPU_HOST_PTR(s));
        cpu_exit(current_cpu);
    } else if (s->reset_once) {
        s->reset_pending = 0;   /* this reset supersedes a queued one */
        cxl_shm_host_reset_stopped(s);
    }
    s->reset_once = true;
}

/*
 * latency-ns can change at run time (qom-set, or cxl-shm-set-latency):
 * the charge uses the new value from the next operation on, and the
 * CDAT's DSLBIS latencies follow (its sequence number grows, so software
 * that cached the table can tell).
 */
static void cxl_shm_cdat_set_latency(CXLShmState *s)
{
    CDATObject *cdat = &s->parent_obj.cxl_cstate.cdat;
    CDATTableHeader *hdr;
    uint32_t rd, wr;
    uint8_t sum = 0;
    int i, b;

    cxl_shm_timed_cdat_latency(s, &rd, &wr);

    if (!cdat->entry || cdat->entry_len < 1) {
        return;
    }
    for (i = 1; i < cdat->entry_len; i++) {
        CDATDslbis *d = cdat->entry[i].base;

        if (d->header.type == CDAT_TYPE_DSLBIS &&
            (d->data_type == HMAT_LB_DATA_READ_LATENCY ||
             d->data_type == HMAT_LB_DATA_WRITE_LATENCY)) {
            d->entry[0] = d->data_type == HMAT_LB_DATA_READ_LATENCY ? rd
                                                                    : wr;
        }
    }
    hdr = cdat->entry[0].base;
    hdr->sequence++;
    hdr->checksum = 0;
    for (i = 0; i < cdat->entry_len; i++) {
        const uint8_t *p = cdat->entry[i].base;

        for (b = 0; b < cdat->entry[i].length; b++) {
            sum += p[b];
        }
    }
    hdr->checksum = ~sum + 1;
}

/*
 * The latency properties: settable at run time (qom-set), checked, and
 * reported in the CDAT.  latency-ns is mode=direct's charge per line of a
 * coherence operation; the others are mode=timed's.
 */
static void cxl_shm_get_latency(Object *obj, Visitor *v, const char *name,
                                void *opaque, Error **errp)
{
    uint32_t *ptr = object_field_prop_ptr(obj, opaque);
    uint32_t val = qatomic_read(ptr);

    visit_type_uint32(v, name, &val, errp);
}

static void cxl_shm_set_latency(Object *obj, Visitor *v, const char *name,
                                void *opaque, Error **errp)
{
    CXLShmState *s = CXL_SHM(obj);
    const Property *prop = opaque;
    uint32_t *ptr = object_field_prop_ptr(obj, prop);
    bool direct_prop = ptr == &s->latency_ns;
    uint32_t val;

    if (!visit_type_uint32(v, name, &val, errp)) {
        return;
    }
    if (val > CXLSHM_LATENCY_MAX) {
        error_setg(errp, "cxl-shm: property '%s' is %u (allowed: [0, %u])",
                   name, val, CXLSHM_LATENCY_MAX);
        return;
    }
    if (DEVICE(obj)->realized && val && direct_prop == s->timed) {
        error_setg(errp, "cxl-shm: property '%s' applies to mode=%s only",
                   name, direct_prop ? "direct" : "timed");
        return;
    }
    qatomic_set(ptr, val);
    if (DEVICE(obj)->realized) {
        cxl_shm_cdat_set_latency(s);
        trace_cxl_shm_latency(s->host_id, name, val);
    }
}

static void cxl_shm_set_default_latency(ObjectProperty *op,
                                        const Property *prop)
{
    object_property_set_default_uint(op, prop->defval.u);
}

static const PropertyInfo cxl_shm_prop_latency = {
    .type = "uint32",
    .description = "ns, 0..65535 (settable at run time)",
    .get = cxl_shm_get_latency,
    .set = cxl_shm_set_latency,
    .set_default_value = cxl_shm_set_default_latency,
    .realized_set_allowed = true,
};

/*
 * Enum properties of the QAPI types that query-cxl-shm reports them as;
 * the visitor reads or writes the field (get and set alike)
 */
static void cxl_shm_visit_enum(Object *obj, Visitor *v, const char *name,
                               void *opaque, Error **errp)
{
    const Property *prop = opaque;
    int *ptr = object_field_prop_ptr(obj, prop);

    visit_type_enum(v, name, ptr, prop->info->enum_table, errp);
}

static void cxl_shm_enum_default(ObjectProperty *op, const Property *prop)
{
    object_property_set_default_str(op,
        qapi_enum_lookup(prop->info->enum_table, prop->defval.i));
}

static const PropertyInfo cxl_shm_prop_mode = {
    .type = "CxlShmMode",
    .description = "direct (the pool mapped as RAM) or timed (every access "
                   "through the cache model)",
    .enum_table = &CxlShmMode_lookup,
    .get = cxl_shm_visit_enum,
    .set = cxl_shm_visit_enum,
    .set_default_value = cxl_shm_enum_default,
};

static const PropertyInfo cxl_shm_prop_writeback = {
    .type = "CxlShmWriteback",
    .description = "deferred (clwb/clflushopt take effect at the next "
                   "fence) or immediate (at the instruction)",
    .enum_table = &CxlShmWriteback_lookup,
    .get = cxl_shm_visit_enum,
    .set = cxl_shm_visit_enum,
    .set_default_value = cxl_shm_enum_default,
};

#define DEFINE_PROP_LATENCY(name, field, def) \
    DEFINE_PROP_UNSIGNED(name, CXLShmState, field, def, \
                         cxl_shm_prop_latency, uint32_t)

static const Property cxl_shm_props[] = {
    DEFINE_PROP_STRING("pool", CXLShmState, pool_path),
    DEFINE_PROP_SIGNED("mode", CXLShmState, mode, CXL_SHM_MODE_DIRECT,
                       cxl_shm_prop_mode, CxlShmMode),
    DEFINE_PROP_SIZE("size", CXLShmState, size, 0),
    DEFINE_PROP_SIZE("coherent-size", CXLShmState, coherent_size, 0),
    DEFINE_PROP_UINT32("host-id", CXLShmState, host_id, 0),
    DEFINE_PROP_UINT32("max-hosts", CXLShmState, max_hosts, 2),
    DEFINE_PROP_LATENCY("latency-ns", latency_ns, 0),
    DEFINE_PROP_UINT32("bandwidth-mbs", CXLShmState, bandwidth_mbs, 16000),
    DEFINE_PROP_UINT32("pool-mode", CXLShmState, pool_mode, 0600),
    DEFINE_PROP_SIGNED("writeback", CXLShmState, writeback,
                       CXL_SHM_WRITEBACK_DEFERRED, cxl_shm_prop_writeback,
                       CxlShmWriteback),
    DEFINE_PROP_UINT32("evict-rate", CXLShmState, evict_rate, 0),
    DEFINE_PROP_UINT64("evict-seed", CXLShmState, evict_seed, 1),
    DEFINE_PROP_STRING("conflict-log", CXLShmState, conflict_log),
    /* mode=timed: docs/device.md says where each default comes from */
    DEFINE_PROP_SIZE("cache-size", CXLShmState, t.cache_size,
                     CXLSHM_TIMED_CACHE),
    DEFINE_PROP_UINT32("cache-ways", CXLShmState, t.cache_ways,
                       CXLSHM_TIMED_WAYS),
    DEFINE_PROP_UINT32("snoop-filter-entries", CXLShmState, t.sf_entries,
                       CXLSHM_TIMED_SF),
    DEFINE_PROP_LATENCY("hit-latency-ns", t.hit_ns, 20),
    DEFINE_PROP_LATENCY("miss-latency-ns", t.miss_ns, 250),
    DEFINE_PROP_LATENCY("writeback-latency-ns", t.wb_ns, 250),
    DEFINE_PROP_LATENCY("back-invalidate-latency-ns", t.bi_ns, 200),
    DEFINE_PROP_LATENCY("snoop-latency-ns", t.snoop_ns, 450),
    DEFINE_PROP_STRING("stale-log", CXLShmState, t.stale_log),
};

static void cxl_shm_class_init(ObjectClass *oc, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(oc);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(oc);
    CXLType3Class *cvc = CXL_TYPE3_CLASS(oc);
    CXLShmClass *sc = CXL_SHM_CLASS(oc);

    sc->parent_realize = pc->realize;
    sc->parent_exit = pc->exit;
    sc->parent_reset = dc->legacy_reset;
    pc->realize = cxl_shm_realize;
    pc->exit = cxl_shm_exit;
    device_class_set_legacy_reset(dc, cxl_shm_reset);
    cvc->hdm_decoder_changed = cxl_shm_hdm_changed;
    cvc->set_cacheline = cxl_shm_set_cacheline;
    cvc->build_cdat_table = cxl_shm_build_cdat;
    cvc->free_cdat_table = cxl_shm_free_cdat;
    dc->desc = "CXL 3.0 multi-host shared memory pod device (cxlpod)";
    /*
     * A host joins the pod with its machine and leaves with its QEMU
     * (docs/failure-model.md): the join, the direct map and the TCG hooks
     * are set up before any vCPU runs
     */
    dc->hotpluggable = false;
    device_class_set_props(dc, cxl_shm_props);
}

static const TypeInfo cxl_shm_info = {
    .name = TYPE_CXL_SHM,
    .parent = TYPE_CXL_TYPE3,
    .instance_size = sizeof(CXLShmState),
    .class_size = sizeof(CXLShmClass),
    .class_init = cxl_shm_class_init,
};

static void cxl_shm_register_types(void)
{
    type_register_static(&cxl_shm_info);
}

type_init(cxl_shm_register_types)

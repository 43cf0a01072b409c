/*
 * cxl-shm: guest cache maintenance: the per-vCPU queue and its fence points
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Under TCG the guest's clwb, clflushopt, clflush, non-temporal stores,
 * fences and whole-cache instructions on a mapped decoder reach
 * cxl_shm_native() (system/cache-maint.h).  With writeback=deferred a
 * clwb or clflushopt, and a non-temporal store's bytes, wait in the
 * vCPU's queue until its next fence point, as on hardware.
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "hw/core/cpu.h"
#include "system/cache-maint.h"
#include "cxl-shm.h"
#include "trace.h"

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
    s->mode_ops->nt_land(s, line, mask, n);
}

/*
 * Under the BQL: one queued entry lands if its line's lock is free now;
 * false (nothing done) if another host holds it
 */
static bool cxl_shm_land_now(CXLShmState *s, uint64_t e, uint64_t mask,
                             CXLShmLineCount *n)
{
    uint64_t line = e & ~(uint64_t)(CXLPOOL_LINE - 1);

    return s->mode_ops->try_land(s, line, e & CXLSHM_QUEUE_FLUSH ?
                                 CXLSHM_LINE_FLUSH : CXLSHM_LINE_WRITEBACK,
                                 e & CXLSHM_QUEUE_NT, mask, n);
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
    uint64_t old_pc;

    if (!q || !q->len) {
        return;
    }
    len = q->len;
    old_pc = cxl_shm_set_insn_pc(0);
    for (i = 0; i < len; i++) {
        uint64_t e = q->entry[i];
        uint64_t line = e & ~(uint64_t)(CXLPOOL_LINE - 1);
        uint32_t run = 1;

        /* a conflict names the instruction that queued the line */
        cxl_shm_set_insn_pc(q->pc[i]);
        if (nowait) {
            if (!cxl_shm_land_now(s, e, q->mask[i], n)) {
                q->mask[kept] = q->mask[i];
                q->pc[kept] = q->pc[i];
                q->entry[kept++] = e;
            }
        } else if (e & CXLSHM_QUEUE_NT) {
            cxl_shm_nt_land(s, line, q->mask[i], n);
        } else {
            /*
             * The following entries that continue the range, of the same
             * kind and queued by the same instruction (a loop of clwb over
             * a buffer), land in one range op: one lock per page instead
             * of one per line.  They are weakly ordered among themselves,
             * so any order in which they land is one hardware could show.
             */
            while (i + run < len &&
                   q->entry[i + run] == e + run * CXLPOOL_LINE &&
                   q->pc[i + run] == q->pc[i]) {
                run++;
            }
            cxl_shm_range(s, e & CXLSHM_QUEUE_FLUSH ? CXLSHM_LINE_FLUSH :
                          CXLSHM_LINE_WRITEBACK, line,
                          (uint64_t)run * CXLPOOL_LINE, n);
            i += run - 1;
        }
    }
    cxl_shm_set_insn_pc(old_pc);
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
                          bool flush, uint64_t nt, uint64_t pc,
                          CXLShmLineCount *n)
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
        q->mask[q->len - 1] |= nt;     /* the PC of the store that queued it */
        return;
    }
    if (q->len == CXLSHM_QUEUE_LEN) {
        /* hardware may complete a weakly ordered flush early */
        cxl_shm_drain(s, cpu, n);
    }
    q->mask[q->len] = nt;
    q->pc[q->len] = pc;
    q->entry[q->len++] = dpa | (nt ? CXLSHM_QUEUE_NT :
                                flush ? CXLSHM_QUEUE_FLUSH : 0);
    if (s->wb_deferred) {
        qatomic_inc(&s->stats[CXLSHM_STAT_DEFERRED]);
    }
    cache_maint_set_pending(cpu);
}

/* One hooked operation: @dpa and @len for a line op, @pc its guest PC */
static void cxl_shm_native_op(CXLShmState *s, CPUState *cpu,
                              CacheMaintOp cop, uint64_t dpa, uint64_t len,
                              uint64_t pc)
{
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
            cxl_shm_defer(s, cpu, dpa, cop == CACHE_MAINT_CLFLUSHOPT, 0, pc,
                          &n);
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
            if (s->mode_ops->nt_store) {
                s->mode_ops->nt_store(s, l, mask);
            }
            cxl_shm_defer(s, cpu, l, false, mask, pc, &n);
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
        s->mode_ops->whole(s, cop == CACHE_MAINT_WBINVD ? CXLSHM_LINE_FLUSH :
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

/*
 * Guest cache maintenance of the hooked region
 * (memory_region_set_cache_maint()): for a line op, @addr is the offset
 * in s->native_mr and the guest PC of @cpu is the instruction's (the
 * front end updates it before the hook), which a conflict the op makes
 * names.  Runs on the vCPU thread of @cpu without the BQL.
 */
void cxl_shm_native(void *opaque, CPUState *cpu, CacheMaintOp cop,
                    hwaddr addr, uint64_t len)
{
    CXLShmState *s = opaque;
    uint64_t pc = 0, old_pc;

    if (cop != CACHE_MAINT_FENCE && cop != CACHE_MAINT_WBINVD &&
        cop != CACHE_MAINT_WBNOINVD && cop != CACHE_MAINT_INVD &&
        cpu && cpu->cc->get_pc) {
        pc = cpu->cc->get_pc(cpu);
    }
    old_pc = cxl_shm_set_insn_pc(pc);
    cxl_shm_native_op(s, cpu, cop, s->native_base + addr, len, pc);
    cxl_shm_set_insn_pc(old_pc);
}

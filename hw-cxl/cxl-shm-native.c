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
#include "exec/io-insn.h"
#include "system/tcg.h"
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

/*
 * One queued entry (and the entries after it that continue its range)
 * lands: how many entries are done (fewer than *@run when a line was
 * busy; *@run: the entries the range covered)
 */
static uint32_t cxl_shm_land(CXLShmState *s, CXLShmQueue *q, uint32_t i,
                             uint32_t *run, CXLShmLineCount *n)
{
    uint64_t e = q->entry[i];
    uint64_t line = e & ~(uint64_t)(CXLPOOL_LINE - 1);
    CXLShmLineOp op = e & CXLSHM_QUEUE_FLUSH ? CXLSHM_LINE_FLUSH
                                             : CXLSHM_LINE_WRITEBACK;

    *run = 1;
    if (e & CXLSHM_QUEUE_NT) {
        return s->mode_ops->nt_land(s, line, q->mask[i], n);
    }
    /*
     * The following entries that continue the range, of the same kind
     * and queued by the same instruction (a loop of clwb over a buffer),
     * land in one range op: one lock per page instead of one per line.
     * They are weakly ordered among themselves, so any order in which
     * they land is one hardware could show.
     */
    while (i + *run < q->len && q->entry[i + *run] == e + *run * CXLPOOL_LINE &&
           q->pc[i + *run] == q->pc[i]) {
        (*run)++;
    }
    return (cxl_shm_range(s, op, line, (uint64_t)*run * CXLPOOL_LINE, n) -
            line) / CXLPOOL_LINE;
}

/*
 * A fence point of @cpu: its queued clwb / clflushopt / NT lines land.
 * None waits for another host: the entries from the first whose line
 * another host holds on stay queued, in order (the vCPU still pending),
 * and false is returned, for the vCPU to run the fence again; at an
 * interrupt or exception delivery (under the BQL) they land at the
 * vCPU's next fence point, as writebacks still in flight would.
 */
static bool cxl_shm_drain(CXLShmState *s, CPUState *cpu, CXLShmLineCount *n)
{
    CXLShmQueue *q = cxl_shm_queue(s, cpu);
    uint32_t i, len, done, run;
    uint64_t old_pc;

    if (!q || !q->len) {
        return true;
    }
    len = q->len;
    old_pc = cxl_shm_set_insn_pc(0);
    for (i = 0; i < len; i += run) {
        /* a conflict names the instruction that queued the line */
        cxl_shm_set_insn_pc(q->pc[i]);
        done = cxl_shm_land(s, q, i, &run, n);
        if (done < run) {
            i += done;
            break;
        }
    }
    cxl_shm_set_insn_pc(old_pc);
    if (i < len) {
        memmove(q->entry, q->entry + i, (len - i) * sizeof(q->entry[0]));
        memmove(q->mask, q->mask + i, (len - i) * sizeof(q->mask[0]));
        memmove(q->pc, q->pc + i, (len - i) * sizeof(q->pc[0]));
        q->len = len - i;
        trace_cxl_shm_native_fence_busy(s->host_id, cpu->cpu_index, q->len);
        cache_maint_set_pending(cpu);
        trace_cxl_shm_native_fence(s->host_id, cpu->cpu_index, i);
        return false;
    }
    q->len = 0;
    trace_cxl_shm_native_fence(s->host_id, cpu->cpu_index, len);
    return true;
}

/*
 * Queue one line for @cpu's next fence point (drained early when full):
 * a clwb (@flush false) or clflushopt (@flush true), or, @nt non-zero,
 * the bytes @nt of the line that non-temporal stores wrote (merged with
 * the previous entry when it is the same line's, as a write-combining
 * buffer merges them).
 */
static bool cxl_shm_defer(CXLShmState *s, CPUState *cpu, uint64_t dpa,
                          bool flush, uint64_t nt, uint64_t pc,
                          CXLShmLineCount *n)
{
    CXLShmQueue *q = cxl_shm_queue(s, cpu);

    if (!q) {
        if (nt) {
            return s->mode_ops->nt_land(s, dpa, nt, n);
        }
        return cxl_shm_range(s, flush ? CXLSHM_LINE_FLUSH :
                             CXLSHM_LINE_WRITEBACK, dpa, CXLPOOL_LINE, n) ==
               dpa + CXLPOOL_LINE;
    }
    if (nt && q->len && q->entry[q->len - 1] == (dpa | CXLSHM_QUEUE_NT)) {
        q->mask[q->len - 1] |= nt;     /* the PC of the store that queued it */
        return true;
    }
    /* hardware may complete a weakly ordered flush early */
    if (q->len == CXLSHM_QUEUE_LEN && !cxl_shm_drain(s, cpu, n)) {
        return false;
    }
    q->mask[q->len] = nt;
    q->pc[q->len] = pc;
    q->entry[q->len++] = dpa | (nt ? CXLSHM_QUEUE_NT :
                                flush ? CXLSHM_QUEUE_FLUSH : 0);
    if (s->wb_deferred) {
        qatomic_inc(&s->stats[CXLSHM_STAT_DEFERRED]);
    }
    cache_maint_set_pending(cpu);
    return true;
}

/*
 * One hooked operation: @dpa and @len for a line op, @pc its guest PC.
 * false if a line it needs is another host's now: the instruction runs
 * again (what it did so far, a part of the lines, is an outcome of a
 * cache that completes some writebacks early).
 */
static bool cxl_shm_native_op(CXLShmState *s, CPUState *cpu,
                              CacheMaintOp cop, uint64_t dpa, uint64_t len,
                              uint64_t pc)
{
    CXLShmQueue *q = cxl_shm_queue(s, cpu);
    CXLShmLineCount n = { 0 };
    uint64_t l, start, end, lines = 0, whole_from = 0;
    const char *what = NULL;
    bool done = true, retry;
    CXLShmLineOp op;

    switch (cop) {
    case CACHE_MAINT_CLWB:
    case CACHE_MAINT_CLFLUSHOPT:
    case CACHE_MAINT_CLFLUSH:
        dpa = QEMU_ALIGN_DOWN(dpa, CXLPOOL_LINE);
        if (dpa < s->coherent_size || dpa >= s->size) {
            return true;
        }
        if (cop != CACHE_MAINT_CLFLUSH && s->wb_deferred) {
            done = cxl_shm_defer(s, cpu, dpa, cop == CACHE_MAINT_CLFLUSHOPT,
                                 0, pc, &n);
        } else {
            done = cxl_shm_range(s, cop == CACHE_MAINT_CLWB ?
                                 CXLSHM_LINE_WRITEBACK : CXLSHM_LINE_FLUSH,
                                 dpa, CXLPOOL_LINE, &n) == dpa + CXLPOOL_LINE;
        }
        if (done) {
            qatomic_inc(&s->stats[CXLSHM_STAT_NATIVE_OPS]);
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
        for (l = QEMU_ALIGN_DOWN(start, CXLPOOL_LINE); l < end && done;
             l += CXLPOOL_LINE) {
            uint64_t from = MAX(start, l), to = MIN(end, l + CXLPOOL_LINE);
            uint64_t mask = (to - from == 64 ? ~0ULL :
                             (1ULL << (to - from)) - 1) << (from - l);

            qatomic_inc(&s->stats[CXLSHM_STAT_NT_LINES]);
            if (s->mode_ops->nt_store) {
                s->mode_ops->nt_store(s, l, mask);
            }
            done = cxl_shm_defer(s, cpu, l, false, mask, pc, &n);
            lines++;
        }
        if (done && !s->wb_deferred && cop == CACHE_MAINT_NT_STORE) {
            /* immediate: the queue holds this store's lines alone */
            done = cxl_shm_drain(s, cpu, &n);
        }
        break;
    case CACHE_MAINT_FENCE:
        if (q && bql_locked()) {
            /*
             * An interrupt or exception delivery: a wbinvd that found a
             * line busy is not the instruction run next; when it runs
             * again it starts over (the handler may dirty any line)
             */
            q->whole_op = 0;
            if (s->mode_ops->interrupted) {
                s->mode_ops->interrupted(s, cpu);
            }
        }
        done = cxl_shm_drain(s, cpu, &n);
        lines = n.written + n.fetched;
        break;
    case CACHE_MAINT_WBINVD:
    case CACHE_MAINT_WBNOINVD:
    case CACHE_MAINT_INVD:
        /* serializing: this vCPU's queued work completes first */
        done = cxl_shm_drain(s, cpu, &n);
        if (!done) {
            break;
        }
        what = cop == CACHE_MAINT_WBINVD ? "wbinvd" :
               cop == CACHE_MAINT_WBNOINVD ? "wbnoinvd" : "invd";
        op = cop == CACHE_MAINT_WBINVD ? CXLSHM_LINE_FLUSH :
             cop == CACHE_MAINT_WBNOINVD ? CXLSHM_LINE_WRITEBACK :
             CXLSHM_LINE_DROP;
        /* the same instruction run again goes on where it stopped */
        if (q && q->whole_op == op + 1) {
            whole_from = q->whole_from;
        }
        done = s->mode_ops->whole(s, op, &whole_from, &n);
        if (q) {
            q->whole_op = done ? 0 : op + 1;
            q->whole_from = whole_from;
            if (!done) {
                /* an interrupt delivery before the next try resets it */
                cache_maint_set_pending(cpu);
            }
        }
        if (done) {
            qatomic_inc(&s->stats[CXLSHM_STAT_NATIVE_OPS]);
        }
        trace_cxl_shm_whole(s->host_id, what, n.written, n.fetched);
        lines = n.written;
        break;
    default:
        return true;
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
    /*
     * The instruction runs again (not the fence of an interrupt delivery,
     * under the BQL: its lines stay queued).  A try costs a line's
     * latency, so guest time moves on meanwhile.
     */
    retry = !done && !bql_locked();
    if (retry) {
        lines = MAX(lines, 1);
        qatomic_inc(&s->stats[CXLSHM_STAT_RETRIES]);
        trace_cxl_shm_native_retry(s->host_id, cpu ? cpu->cpu_index : -1,
                                   cop);
    }
    cxl_shm_charge(s, lines);
    if (retry) {
        sched_yield();          /* the holder may want this host CPU */
    }
    return done;
}

/*
 * Guest cache maintenance of the hooked region
 * (memory_region_set_cache_maint()): for a line op, @addr is the offset
 * in s->native_mr and the guest PC of @cpu is the instruction's (the
 * front end updates it before the hook), which a conflict the op makes
 * names.  Runs on the vCPU thread of @cpu without the BQL (or, for the
 * fence of an interrupt delivery, with it), and never waits for another
 * host: false when the instruction must run again.
 */
static bool cxl_shm_native(void *opaque, CPUState *cpu, CacheMaintOp cop,
                           hwaddr addr, uint64_t len)
{
    CXLShmState *s = opaque;
    uint64_t pc = 0, old_pc;
    bool done;

    if (cop != CACHE_MAINT_FENCE && cop != CACHE_MAINT_WBINVD &&
        cop != CACHE_MAINT_WBNOINVD && cop != CACHE_MAINT_INVD &&
        cpu && cpu->cc->get_pc) {
        pc = cpu->cc->get_pc(cpu);
    }
    old_pc = cxl_shm_set_insn_pc(pc);
    done = cxl_shm_native_op(s, cpu, cop, s->native_base + addr, len, pc);
    cxl_shm_set_insn_pc(old_pc);
    return done;
}

/* Guest cache maintenance reaches the device under TCG */
bool cxl_shm_native_built(void)
{
    return true;
}

/* Route the guest's cache maintenance of @mr to @s, or stop (@s NULL) */
void cxl_shm_native_hook(MemoryRegion *mr, CXLShmState *s)
{
    memory_region_set_cache_maint(mr, s ? cxl_shm_native : NULL, s);
}

/* Every TCG vCPU translates guest atomics as host atomics (CF_PARALLEL) */
bool cxl_shm_require_parallel_atomics(Error **errp)
{
    return tcg_require_parallel_atomics("cxl-shm", errp);
}

/*
 * The guest PC of the access to the device @cpu is making, or 0: TCG
 * knows it (cpu_io_insn_pc()); under an accelerator that runs the guest
 * natively the device cannot know it (nor in a QEMU without the
 * TCG path: cxl-shm-native-stub.c)
 */
uint64_t cxl_shm_access_pc(CPUState *cpu)
{
    vaddr pc;

    if (!cpu || !tcg_enabled() || !cpu_io_insn_pc(cpu, &pc)) {
        return 0;
    }
    return pc;
}

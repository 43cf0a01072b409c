/*
 * cxl-shm: the doorbell (see cxl-shm-doorbell.h)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A DB_OP write queues the op in a ring and returns (an op of one piece
 * rung with nothing queued runs in the write, if no line of it is busy:
 * db_inline()).  The device's doorbell thread runs the ops one at a
 * time, in the order of their DB_OP writes, without the BQL, 1 MiB at a
 * time; a line another host holds makes it try again a little later
 * (never a wait for that host), so a device reset, an unplug or quit
 * stops it within one piece.  DB_STATUS reads busy until the last op
 * rung has completed and its latency has passed (cxl_shm_now()), then
 * the status of the last op completed; DB_LINES is that op's line count
 * (docs/interfaces.md, section 1).  The register decode and checks come
 * first, without QEMU (cxl-shm-doorbell.h, CXLSHM_DB_DECODE_ONLY).
 */

#include "qemu/osdep.h"
#include "cxl-shm-doorbell.h"

static uint64_t set_half(uint64_t reg, bool high, uint32_t val)
{
    return high ? (reg & 0xffffffffULL) | ((uint64_t)val << 32)
                : (reg & ~0xffffffffULL) | val;
}

uint32_t cxl_shm_db_write32(CXLShmDoorbellRegs *r, uint64_t addr,
                            uint32_t val, bool *rang)
{
    *rang = false;
    switch (addr) {
    case A_CXLSHM_DB_OFFSET:
    case A_CXLSHM_DB_OFFSET + 4:
        r->offset = set_half(r->offset, addr & 4, val);
        break;
    case A_CXLSHM_DB_LEN:
    case A_CXLSHM_DB_LEN + 4:
        r->len = set_half(r->len, addr & 4, val);
        break;
    case A_CXLSHM_DB_OP:
        *rang = true;
        return val;
    case A_CXLSHM_DB_CTRL:
        r->ctrl = val & R_CXLSHM_DB_CTRL_IRQ_MASK;
        break;
    default:
        break;
    }
    return 0;
}

uint32_t cxl_shm_db_check(uint32_t op, uint64_t off, uint64_t len,
                          uint64_t size)
{
    if (op < CXLSHM_OP_WRITEBACK || op > CXLSHM_OP_FLUSH) {
        return CXLSHM_DB_BADOP;
    }
    if (len == 0) {
        return CXLSHM_DB_ZERO;
    }
    if ((off | len) & (CXLSHM_LINE - 1)) {
        return CXLSHM_DB_UNALIGNED;
    }
    if (off + len < off || off + len > size) {
        return CXLSHM_DB_RANGE;
    }
    return CXLSHM_DB_OK;
}

CXLShmLineOp cxl_shm_db_line_op(uint32_t op)
{
    /* invalidate writes a dirty line back first, as clflush does */
    return op == CXLSHM_OP_WRITEBACK ? CXLSHM_LINE_WRITEBACK
                                     : CXLSHM_LINE_FLUSH;
}

#ifndef CXLSHM_DB_DECODE_ONLY

#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "system/cpu-timers.h"
#include "hw/pci/msix.h"
#include "cxl-shm.h"
#include "trace.h"

/* A busy line: the thread tries again after this, doubled up to the max */
#define DB_RETRY_MIN_US         10
#define DB_RETRY_MAX_US         1000
/*
 * An op runs in pieces of this many bytes, so that a reset or an unplug
 * waits for one piece at most (a few hundred microseconds), not for a
 * whole-area flush
 */
#define DB_CHUNK                (1 * MiB)
/* An op of at most this many bytes may run in its DB_OP write */
#define DB_INLINE_MAX           DB_CHUNK

static const char *const op_names[] = {
    [CXLSHM_OP_WRITEBACK] = "writeback",
    [CXLSHM_OP_INVALIDATE] = "invalidate",
    [CXLSHM_OP_FLUSH] = "flush",
};

/*
 * DB_CTRL.IRQ: the ops completing from now on raise the doorbell's MSI-X
 * vector once the guest may see them complete, at @ready (cxl_shm_now()):
 * a timer of the main loop raises it there, under the BQL, which no
 * thread that completes an op holds or takes (the vCPU of an inline op
 * runs without it, the doorbell's thread never takes it).  d->lock held.
 */
static void db_irq_owe(CXLShmDoorbell *d, int64_t ready)
{
    if (!(d->regs.ctrl & R_CXLSHM_DB_CTRL_IRQ_MASK) || d->stop) {
        return;
    }
    d->irq_due = MAX(d->irq_due, ready);
    /* the first op owed is raised on time, the later ones after it */
    timer_mod_anticipate_ns(d->irq_timer, ready);
}

/*
 * The timer: one message for the ops completed by now (a guest's handler
 * reads DB_STATUS, which tells busy from done), and the timer again for
 * one completing later.  Main loop, BQL held.
 */
static void db_irq(void *opaque)
{
    CXLShmState *s = opaque;
    CXLShmDoorbell *d = &s->db;
    bool raise;

    qemu_mutex_lock(&d->lock);
    raise = d->irq_due && !d->stop &&
            (d->regs.ctrl & R_CXLSHM_DB_CTRL_IRQ_MASK);
    if (raise && d->irq_due > cxl_shm_now()) {
        timer_mod_ns(d->irq_timer, d->irq_due);
    } else {
        d->irq_due = 0;
    }
    qemu_mutex_unlock(&d->lock);
    if (raise) {
        trace_cxl_shm_db_irq(s->host_id, CXLSHM_DB_MSIX_VECTOR);
        msix_notify(PCI_DEVICE(s), CXLSHM_DB_MSIX_VECTOR);
    }
}

/*
 * Run one accepted op: its lines, each busy one tried again until it is
 * free or the thread is asked to leave, for a reset (d->park) or the
 * unplug (d->stop): the op then ends where it got, as if the rest of the
 * range were still being worked on when the device was reset.  Returns
 * whether it got to its end; *@lines: the lines it moved.
 */
static bool db_run(CXLShmState *s, const CXLShmDbOp *op, CXLShmLineCount *n,
                   uint64_t *lines)
{
    CXLShmDoorbell *d = &s->db;
    uint64_t from = op->from, end = op->off + op->len;
    unsigned wait_us = DB_RETRY_MIN_US;

    cxl_shm_set_insn_pc(op->pc);
    while (from < end && !qatomic_read(&d->stop) && !qatomic_read(&d->park)) {
        uint64_t len = MIN(end - from, DB_CHUNK);
        uint64_t got = cxl_shm_range(s, cxl_shm_db_line_op(op->op), from,
                                     len, n);

        if (got < from + len) {
            qatomic_inc(&s->stats[CXLSHM_STAT_RETRIES]);
            trace_cxl_shm_db_retry(s->host_id, got, wait_us);
            g_usleep(wait_us);
            wait_us = MIN(wait_us * 2, DB_RETRY_MAX_US);
        } else {
            wait_us = DB_RETRY_MIN_US;
        }
        from = got;
    }
    cxl_shm_set_insn_pc(0);
    *lines = op->op == CXLSHM_OP_WRITEBACK ? n->written : n->fetched;
    return from >= end;
}

/*
 * The latency of an op moving over @len bytes of the non-coherent area,
 * counted as charged; the op completes for the guest that much later
 */
static int64_t db_charge(CXLShmState *s, const CXLShmDbOp *op)
{
    uint64_t start = MIN(MAX(op->off, s->coherent_size), op->off + op->len);
    uint64_t lines = (op->off + op->len - start) / CXLPOOL_LINE;
    int64_t ns = (int64_t)MIN(lines * qatomic_read(&s->latency_ns),
                              INT64_MAX / 4);

    if (ns) {
        qatomic_add(&s->stats[CXLSHM_STAT_CHARGED_NS], ns);
    }
    return ns;
}

/*
 * The op @op is done (@done: to its end) or left: its counts, and, if no
 * device reset came meanwhile, DB_STATUS and DB_LINES and when its
 * latency @ns has passed.  @n: the lines moved now, @lines: the op's
 * lines in all.  d->lock held.
 */
static void db_complete(CXLShmState *s, const CXLShmDbOp *op, bool done,
                        uint64_t lines, const CXLShmLineCount *n, int64_t ns)
{
    CXLShmDoorbell *d = &s->db;

    /* an op a reset or the unplug cut short is not counted */
    if (done) {
        qatomic_inc(&s->stats[CXLSHM_STAT_WB_OPS + op->op - 1]);
    }
    cxl_shm_count(s, n);
    trace_cxl_shm_op(s->host_id, op_names[op->op], op->off, op->len, lines,
                     CXLSHM_DB_OK);
    if (d->epoch == op->epoch) {
        /*
         * The op takes its latency from its ring, or from the end of the
         * op before it: under -icount the guest sees it complete at an
         * exact instruction count, however long the work took (unless
         * that was longer than the latency)
         */
        d->status = cxl_shm_far_db_status(s);
        d->lines = lines;
        d->ready_ns = MAX(d->ready_ns, op->rung_ns) + ns;
        db_irq_owe(d, d->ready_ns);
    }
}

__thread bool cxl_shm_in_db_thread;

static void *db_thread(void *opaque)
{
    CXLShmState *s = opaque;
    CXLShmDoorbell *d = &s->db;

    cxl_shm_in_db_thread = true;
    rcu_register_thread();
    qemu_mutex_lock(&d->lock);
    while (!d->stop) {
        CXLShmDbOp op;
        CXLShmLineCount n = { 0 };
        uint64_t lines = 0;
        int64_t ns = 0;
        bool done;

        if (d->park || d->head == d->tail) {
            d->idle = true;
            qemu_cond_broadcast(&d->cond);
            qemu_cond_wait(&d->cond, &d->lock);
            continue;
        }
        d->idle = false;
        op = d->ring[d->head % CXLSHM_DB_RING];
        qemu_mutex_unlock(&d->lock);

        /* what the mode charges (mode=timed) delays the completion */
        cxl_shm_charge_to(&ns);
        done = db_run(s, &op, &n, &lines);
        cxl_shm_charge_to(NULL);
        ns += op.ns + db_charge(s, &op);
        cxl_shm_pool_sync_stats(s);

        qemu_mutex_lock(&d->lock);
        db_complete(s, &op, done, op.lines + lines, &n, ns);
        d->head++;
    }
    d->idle = true;
    qemu_cond_broadcast(&d->cond);
    qemu_mutex_unlock(&d->lock);
    rcu_unregister_thread();
    return NULL;
}

/*
 * An op of at most one piece rung with nothing queued runs at once, in
 * the DB_OP write (without the BQL: BAR5 is lockless), if none of its
 * lines is another host's now (no wait: the line engine never waits);
 * it then costs no hand-over to the thread, as much as the thread would
 * have taken.  true when done; false, with what it did recorded in @e
 * (from where the thread goes on, the lines moved so far), if a line
 * was busy.  Called with d->lock held (the thread is idle: the ring is
 * empty), so no other op starts meanwhile; other vCPUs' doorbell
 * accesses wait for d->lock that long (one piece at most).
 */
static bool db_inline(CXLShmState *s, CXLShmDbOp *e)
{
    CXLShmLineCount n = { 0 };
    uint64_t end = e->off + e->len, lines;
    int64_t ns = 0;
    bool done;
    /*
     * A conflict it makes names the instruction that rang it: unwound
     * from this vCPU's access only if one is reported
     */
    uint64_t old_pc;

    if (s->far) {
        /* a remote host's op waits for a reply: the thread's to run */
        e->from = e->off;
        e->lines = 0;
        e->ns = 0;
        return false;
    }
    old_pc = cxl_shm_set_insn_pc(CXLSHM_PC_ACCESS);
    cxl_shm_charge_to(&ns);
    e->from = cxl_shm_range(s, cxl_shm_db_line_op(e->op), e->off, e->len,
                            &n);
    cxl_shm_charge_to(NULL);
    cxl_shm_set_insn_pc(old_pc);
    done = e->from >= end;
    lines = e->op == CXLSHM_OP_WRITEBACK ? n.written : n.fetched;
    if (!done) {
        /* the rest, and these lines' counts, go to the thread */
        cxl_shm_count(s, &n);
        e->lines = lines;
        e->ns = ns;
        return false;
    }
    db_complete(s, e, true, lines, &n, ns + db_charge(s, e));
    cxl_shm_pool_sync_stats(s);
    return true;
}

/*
 * DB_OFFSET, DB_LEN or DB_CTRL (@addr, 8-byte aligned), as the guest last
 * wrote it, or DB_LINES
 */
uint64_t cxl_shm_db_reg(CXLShmState *s, uint64_t addr)
{
    CXLShmDoorbell *d = &s->db;
    uint64_t v;

    qemu_mutex_lock(&d->lock);
    v = addr == A_CXLSHM_DB_LEN ? d->regs.len :
        addr == A_CXLSHM_DB_CTRL ? d->regs.ctrl :
        addr == A_CXLSHM_DB_LINES ? (d->refused ? 0 : d->lines) :
        d->regs.offset;
    qemu_mutex_unlock(&d->lock);
    return v;
}

static void db_ring_locked(CXLShmState *s, uint32_t op);

/* A 32-bit write at @addr of BAR5: a doorbell register, or nothing */
void cxl_shm_db_write(CXLShmState *s, uint64_t addr, uint32_t val)
{
    bool rang;
    uint32_t op;

    qemu_mutex_lock(&s->db.lock);
    op = cxl_shm_db_write32(&s->db.regs, addr, val, &rang);
    if (rang) {
        db_ring_locked(s, op);
    }
    qemu_mutex_unlock(&s->db.lock);
}

/*
 * A DB_OP write: the op, with DB_OFFSET and DB_LEN as they are now, goes
 * into the ring.  A refused op takes no place in it: counted and traced
 * at once, it is the last op rung, whose status DB_STATUS shows once the
 * ops before it are done (until another op is rung).  A full ring drops
 * the op and makes DB_STATUS read CXLSHM_DB_FULL once it has drained.
 */
static void db_ring_locked(CXLShmState *s, uint32_t op)
{
    CXLShmDoorbell *d = &s->db;
    uint32_t st = cxl_shm_db_check(op, d->regs.offset, d->regs.len, s->size);
    CXLShmDbOp *e;

    if (st != CXLSHM_DB_OK) {
        d->refused = st;
        qatomic_inc(&s->stats[CXLSHM_STAT_ERRORS]);
        trace_cxl_shm_op(s->host_id, "refused", d->regs.offset, d->regs.len,
                         0, st);
        /* it completes now, or with the last op queued (its message) */
        if (d->head == d->tail) {
            db_irq_owe(d, MAX(d->ready_ns, cxl_shm_now()));
        }
        return;
    }
    if (d->tail - d->head >= CXLSHM_DB_RING) {
        d->overflow = true;
        qatomic_inc(&s->stats[CXLSHM_STAT_ERRORS]);
        trace_cxl_shm_db_full(s->host_id, op);
        return;
    }
    e = &d->ring[d->tail % CXLSHM_DB_RING];
    e->op = op;
    e->off = e->from = d->regs.offset;
    e->len = d->regs.len;
    e->lines = 0;
    e->ns = 0;
    e->rung_ns = cxl_shm_now();
    e->epoch = d->epoch;
    d->refused = 0;
    if (d->head == d->tail && !d->park && !d->stop &&
        e->len <= DB_INLINE_MAX && db_inline(s, e)) {
        return;
    }
    /*
     * A conflict the op makes in the thread names the instruction that
     * rang it: looked up now, in the ringing vCPU (a TB lookup, which an
     * op run inline does not pay)
     */
    e->pc = cxl_shm_access_pc(current_cpu);
    d->tail++;
    qemu_cond_broadcast(&d->cond);
}

/* DB_STATUS: busy until the ring is empty and the latency has passed */
uint32_t cxl_shm_db_status(CXLShmState *s)
{
    CXLShmDoorbell *d = &s->db;
    uint32_t st;

    qemu_mutex_lock(&d->lock);
    if (d->head != d->tail || cxl_shm_now() < d->ready_ns) {
        st = CXLSHM_DB_BUSY;
    } else if (d->overflow) {
        /* said once, then the last op's status again */
        st = CXLSHM_DB_FULL;
        d->overflow = false;
    } else {
        st = d->refused ?: d->status;
    }
    qemu_mutex_unlock(&d->lock);
    return st;
}

void cxl_shm_db_init(CXLShmState *s)
{
    CXLShmDoorbell *d = &s->db;
    g_autofree char *name = g_strdup_printf("cxl-shm-db-%u", s->host_id);

    qemu_mutex_init(&d->lock);
    qemu_cond_init(&d->cond);
    /* on the clock DB_STATUS's latency passes on (cxl_shm_now()) */
    d->irq_timer = timer_new_ns(icount_enabled() ? QEMU_CLOCK_VIRTUAL
                                                 : QEMU_CLOCK_REALTIME,
                                db_irq, s);
    d->idle = true;
    qemu_thread_create(&d->thread, name, db_thread, s, QEMU_THREAD_JOINABLE);
}

/*
 * Wait until the thread has left the op it runs (it looks between two
 * attempts, each of which is bounded: no line engine call waits for
 * another host) and runs none until cxl_shm_db_resume(); the ops queued
 * and the one running are dropped (what the running one did stays done).
 * Returns with d->lock held.
 */
static void db_park(CXLShmDoorbell *d)
{
    qemu_mutex_lock(&d->lock);
    qatomic_set(&d->park, true);
    qemu_cond_broadcast(&d->cond);
    while (!d->idle && !d->stop) {
        qemu_cond_wait(&d->cond, &d->lock);
    }
    d->head = d->tail;
    d->epoch++;
}

/*
 * A device reset: the ops queued and the one running are dropped, the
 * registers cleared; the thread goes on with ops rung from now on.
 */
void cxl_shm_db_reset(CXLShmState *s)
{
    CXLShmDoorbell *d = &s->db;

    db_park(d);
    d->regs = (CXLShmDoorbellRegs) { 0 };
    d->irq_due = 0;
    timer_del(d->irq_timer);
    d->lines = 0;
    d->status = 0;
    d->refused = 0;
    d->overflow = false;
    d->ready_ns = 0;
    qatomic_set(&d->park, false);
    qemu_cond_broadcast(&d->cond);
    qemu_mutex_unlock(&d->lock);
}

/*
 * The host reset: no op may touch the image meanwhile, and the ops this
 * host had rung are lost with it (as its queued clwb are); the registers
 * keep what they last said
 */
void cxl_shm_db_pause(CXLShmState *s)
{
    db_park(&s->db);
    qemu_mutex_unlock(&s->db.lock);
}

void cxl_shm_db_resume(CXLShmState *s)
{
    CXLShmDoorbell *d = &s->db;

    qemu_mutex_lock(&d->lock);
    qatomic_set(&d->park, false);
    qemu_cond_broadcast(&d->cond);
    qemu_mutex_unlock(&d->lock);
}

/*
 * At exit: the thread leaves (within one piece) and runs nothing more,
 * whatever resets come after; joined by cxl_shm_db_fini() if the device
 * is unplugged, else it ends with the process
 */
void cxl_shm_db_stop(CXLShmState *s)
{
    CXLShmDoorbell *d = &s->db;

    qemu_mutex_lock(&d->lock);
    qatomic_set(&d->stop, true);
    qemu_cond_broadcast(&d->cond);
    while (!d->idle) {
        qemu_cond_wait(&d->cond, &d->lock);
    }
    qemu_mutex_unlock(&d->lock);
}

/*
 * Unplug: the thread leaves (within one piece), what is queued is not
 * run, and no interrupt is raised any more (before the MSI-X table goes
 * with the parent's exit).  The lock stays usable until
 * cxl_shm_db_free(), after the grace period (the exit notifier may still
 * pause the doorbell meanwhile).
 */
void cxl_shm_db_fini(CXLShmState *s)
{
    cxl_shm_db_stop(s);
    qemu_thread_join(&s->db.thread);
    timer_del(s->db.irq_timer);
}

void cxl_shm_db_free(CXLShmState *s)
{
    timer_free(s->db.irq_timer);
    s->db.irq_timer = NULL;
    qemu_cond_destroy(&s->db.cond);
    qemu_mutex_destroy(&s->db.lock);
}

#endif

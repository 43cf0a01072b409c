/*
 * cxl-shm: mode=timed, every access through a cache model that charges
 * CXL latency
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * In mode=timed a committed HDM decoder maps an I/O region over its
 * range instead of the pool's RAM, so every guest load and store of the
 * device reaches timed_access().  A per-host cache model (cache-size,
 * cache-ways, LRU) holds lines of both areas: a non-coherent line's data
 * is the host's image, fetched from the pool on a miss and written back
 * whole when it is evicted dirty; the coherent window's data is the pool
 * itself, and a snoop filter in the pool's metadata, shared by the
 * hosts, decides hits, snoops and back-invalidates there.  An access's
 * costs are summed and charged once its locks are released.
 * docs/device.md, "Timed mode", describes each outcome and its cost.
 *
 * Locking: t->lock (this host's cache) is taken before any line lock;
 * every access runs under it, without the BQL (the region does not ask
 * for global locking: memory_region_enable_lockless_io()), and so does
 * a host reset (cxl_shm_host_reset()).  Line locks are only tried, never
 * waited for.  Set i of the snoop filter is guarded by line lock i,
 * which every store takes, so a store never lands inside another host's
 * atomic: an atomic's load (tcg_atomic_step_active()) takes its line's
 * lock, and the end of the exclusive step (timed_step_done()) releases
 * it.  The only line lock held while t->lock is taken is an atomic's,
 * between its load and its store, while this QEMU's other vCPUs are
 * stopped.
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "qapi/error.h"
#include "hw/core/cpu.h"
#include "exec/memory.h"
#include "exec/cpu-common.h"
#include "exec/target_page.h"
#include "exec/io-insn.h"
#include "hw/boards.h"
#include "system/cpu-timers.h"
#include "system/tcg.h"
#include "system/kvm.h"
#include "cxl-shm.h"
#include "cxl-shm-timed.h"
#include "trace.h"

#define TIMED_CACHE_MIN         (64 * KiB)
#define TIMED_CACHE_MAX         (1 * GiB)
#define TIMED_WAYS_MAX          64

/* Lines moved over the device's link: wait while it is busy */
void cxl_shm_timed_moved(CXLShmState *s, Cost *c)
{
    CXLShmTimed *t = &s->t;
    int64_t now, start, xfer;

    if (!c->moved) {
        return;
    }
    xfer = c->moved * 64000 / s->bandwidth_mbs;    /* ns for 64 B at MB/s */
    now = cxl_shm_now();
    start = MAX(now, t->busy_until);
    t->busy_until = start + xfer;
    c->ns += start - now;
    c->moved = 0;
}

/* Per-vCPU line lock of an atomic in progress (NULL: not a vCPU's) */
static CXLShmLineLock *held_of(CXLShmState *s, CPUState *cpu)
{
    if (!cpu || cpu->cpu_index < 0 ||
        (uint32_t)cpu->cpu_index >= s->t.nr_held) {
        return NULL;
    }
    return &s->t.held[cpu->cpu_index];
}

/* The end of an exclusive atomic step: the pair is done */
static void timed_step_done(void *opaque, CPUState *cpu)
{
    CXLShmState *s = opaque;
    CXLShmLineLock *h = held_of(s, cpu);

    if (h && h->word) {
        cxl_shm_lines_unlock(&s->lines, h);
    }
}

/* Bytes [off % 64, off % 64 + size) of a line as a mask */
static uint64_t byte_mask(uint64_t off, unsigned size)
{
    unsigned b = off % CXLSHM_LINE;

    return (size >= 64 ? ~0ULL : ((1ULL << size) - 1)) << b;
}

/*
 * A dirty non-coherent way goes to the pool: whole when a cached store
 * dirtied it, only its non-temporal bytes otherwise (cxl_shm_lines_nt).
 * false, and the way as it was, if the line's lock is another's now.
 */
bool cxl_shm_way_writeback(CXLShmState *s, CXLShmWay *w, CXLShmLineLock *held,
                           CXLShmLineCount *n)
{
    uint64_t off = way_line(w) * CXLSHM_LINE;

    if (w->nt) {
        if (!cxl_shm_lines_nt(&s->lines, off, w->nt, w->dirty != 0, held,
                              n)) {
            return false;
        }
    } else if (w->dirty) {
        if (!cxl_shm_lines_one(&s->lines, CXLSHM_LINE_WRITEBACK, off, true,
                               held, n)) {
            return false;
        }
    }
    w->dirty = w->nt = 0;
    return true;
}

/*
 * Room in the cache for @line (not cached): the set's LRU way, written
 * back first when it holds a dirty non-coherent line; cache lock held,
 * and at most the line lock @held.  NULL, and nothing changed, if the
 * victim is dirty and its page's lock is another host's now.
 */
static CXLShmWay *cache_alloc(CXLShmState *s, uint64_t line,
                              CXLShmLineLock *held, Cost *c)
{
    CXLShmTimed *t = &s->t;
    CXLShmWay *set = cache_set(t, line), *w = NULL;
    CXLShmLineCount n = { 0 };
    uint64_t voff;
    uint32_t i;

    for (i = 0; i < t->cache_ways; i++) {
        if (!(set[i].tag & CXLSHM_WAY_VALID)) {
            w = &set[i];
            break;
        }
        if (!w || set[i].stamp < w->stamp) {
            w = &set[i];
        }
    }
    if (w->tag & CXLSHM_WAY_VALID) {
        voff = way_line(w) * CXLSHM_LINE;
        if (voff >= s->coherent_size && (w->dirty | w->nt)) {
            if (!cxl_shm_way_writeback(s, w, held, &n)) {
                return NULL;    /* the victim's page is another's now */
            }
            stat_add(s, CXLSHM_STAT_WB_LINES, n.written);
            stat_add(s, CXLSHM_STAT_CONFLICTS, n.conflicts);
            c->ns += (int64_t)n.written * qatomic_read(&t->wb_ns);
            c->moved += n.written;
        }
        /*
         * A coherent victim stays in the filter (a silent clean
         * eviction): a later store by another host back-invalidates it
         * for nothing, as on hardware whose caches drop lines silently.
         */
        qatomic_inc(&s->stats[CXLSHM_STAT_CACHE_EVICTIONS]);
        trace_cxl_shm_timed_evict(s->host_id, voff, n.written != 0);
    }
    w->tag = CXLSHM_WAY_VALID | line;
    w->dirty = w->nt = 0;
    return w;
}

/* Loads and stores of one line */

static uint64_t ld_bytes(const uint8_t *p, unsigned size)
{
    uint64_t v = 0;

    if (!is_power_of_2(size) || ((uintptr_t)p & (size - 1))) {
        memcpy(&v, p, size);    /* unaligned (not from TCG): not atomic */
    } else if (size == 1) {
        v = qatomic_read(p);
    } else if (size == 2) {
        v = qatomic_read((const uint16_t *)p);
    } else if (size == 4) {
        v = qatomic_read((const uint32_t *)p);
    } else {
        v = qatomic_read((const uint64_t *)p);
    }
    return v;
}

static void st_bytes(uint8_t *p, unsigned size, uint64_t v)
{
    if (!is_power_of_2(size) || ((uintptr_t)p & (size - 1))) {
        memcpy(p, &v, size);
    } else if (size == 1) {
        qatomic_set(p, v);
    } else if (size == 2) {
        qatomic_set((uint16_t *)p, v);
    } else if (size == 4) {
        qatomic_set((uint32_t *)p, v);
    } else {
        qatomic_set((uint64_t *)p, v);
    }
}

/* A load of a line whose pool copy is newer than this host's */
static void timed_stale(CXLShmState *s, CPUState *cpu, CXLShmWay *w,
                        uint64_t off, unsigned size, uint64_t val)
{
    uint64_t line = QEMU_ALIGN_DOWN(off, CXLSHM_LINE);
    uint8_t cur[CXLSHM_LINE];
    bool report = !(w->tag & CXLSHM_WAY_REPORTED);
    uint64_t pc = 0;

    qatomic_inc(&s->stats[CXLSHM_STAT_STALE_READS]);
    if (report ||
        trace_event_get_state_backends(TRACE_CXL_SHM_TIMED_STALE)) {
        pc = cxl_shm_access_pc(cpu);    /* a TB lookup: not for every load */
    }
    trace_cxl_shm_timed_stale(s->host_id, off, pc);
    if (!report) {
        return;
    }
    w->tag |= CXLSHM_WAY_REPORTED;
    memcpy(cur, s->pool + line, CXLSHM_LINE);
    cxl_shm_stale_read(s, off, size, val,
                       s->image + (line - s->coherent_size), cur, pc);
}

/*
 * A non-coherent access inside one line; cache lock held.  *@busy set,
 * and nothing done that another host could see, if a line lock it needs
 * is another host's now.
 */
static uint64_t timed_nc(CXLShmState *s, CPUState *cpu, uint64_t off,
                         unsigned size, bool write, uint64_t val, Cost *c,
                         bool *busy)
{
    CXLShmTimed *t = &s->t;
    uint64_t line = off / CXLSHM_LINE, loff = line * CXLSHM_LINE;
    uint8_t *img = s->image + (off - s->coherent_size);
    CXLShmLineLock *held = held_of(s, cpu);
    CXLShmWay *w = cache_find(t, line);

    if (held && held->word &&
        !cxl_shm_lines_lock_covers(&s->lines, held, off)) {
        /*
         * An atomic straddling the coherent boundary: its coherent
         * part's line lock goes before this part may wait for the
         * lock of its page (a fill or an eviction), so no thread holds
         * two lock words and no two hosts wait for each other's
         * (docs/device.md, "Atomics").
         */
        trace_cxl_shm_timed_lock_dropped(s->host_id, off);
        cxl_shm_lines_unlock(&s->lines, held);
    }
    if (w) {
        qatomic_inc(&s->stats[CXLSHM_STAT_HITS]);
        c->ns += qatomic_read(&t->hit_ns);
    } else {
        CXLShmLineCount n = { 0 };

        w = cache_alloc(s, line, held, c);
        if (!w) {
            *busy = true;
            return 0;
        }
        /* fill: image and twin become the pool's line */
        if (!cxl_shm_lines_one(&s->lines, CXLSHM_LINE_DROP, loff, false,
                               held, &n)) {
            w->tag = 0;         /* the victim is gone: an early eviction */
            *busy = true;
            return 0;
        }
        qatomic_inc(&s->stats[CXLSHM_STAT_MISSES]);
        c->ns += qatomic_read(&t->miss_ns);
        c->moved++;
        trace_cxl_shm_timed_miss(s->host_id, off, write);
    }
    w->stamp = ++t->clock;
    if (write) {
        st_bytes(img, size, val);
        w->dirty |= byte_mask(off, size);
        w->nt &= ~byte_mask(off, size);
        return 0;
    }
    val = ld_bytes(img, size);
    if (memcmp(s->twin + (loff - s->coherent_size), s->pool + loff,
               CXLSHM_LINE)) {
        timed_stale(s, cpu, w, off, size, val);
    }
    return val;
}

/*
 * Without the lock: entry @ent, whose word was @e, lists @me, and its word
 * still names the same line and epoch after that (an entry evicted and
 * made again, or a store, in between changes it; the writers store the
 * holders before the word)
 */
static bool sf_holds(CXLPoolSnoopEntry *ent, uint64_t e, uint64_t me)
{
    smp_rmb();      /* the holders after the word @e */
    if (!(qatomic_read(&ent->holders) & me)) {
        return false;
    }
    smp_rmb();      /* the word again after the holders */
    return !((qatomic_read(&ent->tag) ^ e) & SF_IDENT_MASK);
}

/*
 * A coherent-window access inside one line; cache lock held.  *@busy as
 * for timed_nc().
 */
static uint64_t timed_coherent(CXLShmState *s, CPUState *cpu, uint64_t off,
                               unsigned size, bool write, uint64_t val,
                               Cost *c, bool *busy)
{
    CXLShmTimed *t = &s->t;
    uint64_t line = off / CXLSHM_LINE, me = sf_bit(s->host_id);
    CXLPoolSnoopEntry *set = cxl_shm_sf_set(s, off);
    uint64_t tag = cxl_shm_sf_tag(off);
    uint64_t e, holders, owner, others;
    CXLShmLineLock *held = held_of(s, cpu), local = { NULL }, *h;
    /* an atomic's load and store, not any exclusive section (page walk) */
    bool excl = cpu && tcg_enabled() && tcg_atomic_step_active();
    CXLShmWay *w = cache_find(t, line);
    bool cached = w != NULL, present, snooped = false;
    int i;

    if (held && held->word &&
        !cxl_shm_lines_lock_covers(&s->lines, held, off)) {
        /*
         * An atomic whose accesses span two lock words (a split lock):
         * its first line is released before anything takes another
         * lock, so it is atomic across hosts per line only
         * (docs/device.md), and no thread ever holds two line locks.
         */
        cxl_shm_lines_unlock(&s->lines, held);
    }
    if (!w) {
        w = cache_alloc(s, line, held, c);
        if (!w) {
            *busy = true;
            return 0;
        }
    }
    w->stamp = ++t->clock;

    /*
     * A read hit needs no lock: the filter still lists this host, and no
     * store moved the entry's epoch since this host's copy was made.  The
     * epoch is what makes a copy stale beyond 64 hosts too, where a
     * holders bit stands for every host of its class (a coarse filter's
     * entry): the filter back-invalidates the whole class, as hardware's
     * would, and the hosts whose copy the store made stale all miss.
     */
    if (!write && !excl && cached) {
        i = cxl_shm_sf_find(s, set, tag, &e);
        if (i >= 0 && sf_epoch(e) == w->epoch && sf_holds(&set[i], e, me)) {
            qatomic_inc(&s->stats[CXLSHM_STAT_HITS]);
            c->ns += qatomic_read(&t->hit_ns);
            return ld_bytes(s->pool + off, size);
        }
    }

    if (held && held->word) {
        h = held;                   /* the atomic's second access */
    } else {
        h = excl && held ? held : &local;
        if (!cxl_shm_lines_trylock(&s->lines, off, h, cpu != NULL)) {
            /*
             * Another host's (or, for a thread that is not a vCPU, this
             * host's atomic's): the vCPU runs the access again, any other
             * thread gets an error.  The way allocated for the line holds
             * nothing yet.
             */
            if (!cached) {
                w->tag = 0;
            }
            *busy = true;
            return 0;
        }
    }

    i = cxl_shm_sf_find(s, set, tag, &e);
    if (i < 0) {
        i = cxl_shm_sf_insert(s, set, tag, off, c);
        e = set[i].tag;
    }
    /* hosts that left or died hold nothing any more */
    holders = cxl_shm_sf_live(s, set[i].holders);
    owner = e & SF_OWNER_MASK;
    /* the owner field is exact: a host that left or died owns nothing */
    if (owner && (!(holders & sf_bit(owner - 1)) ||
                  (owner != s->host_id + 1 &&
                   (owner > s->max_hosts ||
                    qatomic_read(&s->hosts[owner - 1].state) !=
                    CXLPOOL_HOST_LIVE)))) {
        owner = 0;
    }
    present = cached && (holders & me) && sf_epoch(e) == w->epoch;

    if (write || excl) {
        /* ownership for a store (an atomic's load takes it for its store) */
        others = holders & ~me;
        if ((holders & me) && owner != s->host_id + 1 &&
            cxl_shm_sf_classmates(s)) {
            /*
             * Past 64 hosts this host's bit stands for its live
             * classmates too: a coarse filter back-invalidates the
             * class, as it cannot tell whether the copy is this host's
             * (unless this host owns the line: a classmate's read since
             * its store would have snooped it and cleared the owner)
             */
            others |= me;
        }
        if (others) {
            stat_add(s, CXLSHM_STAT_BACK_INVAL, ctpop64(others));
            c->ns += qatomic_read(&t->bi_ns);
            trace_cxl_shm_timed_back_inval(s->host_id, off, others);
        }
        holders = me;
        owner = s->host_id + 1;
        e = cxl_shm_sf_new_epoch(s, e);
    } else if (owner && owner != s->host_id + 1) {
        /* another host holds it modified: it writes it back, then shares */
        snooped = true;
        owner = 0;
        holders |= me;
    } else {
        holders |= me;
    }
    if (snooped) {
        /* a read that another host's cache answers (counted as a miss) */
        qatomic_inc(&s->stats[CXLSHM_STAT_SNOOPS]);
        qatomic_inc(&s->stats[CXLSHM_STAT_MISSES]);
        c->ns += qatomic_read(&t->snoop_ns);
        c->moved++;
        trace_cxl_shm_timed_snoop(s->host_id, off);
    } else if (present) {
        qatomic_inc(&s->stats[CXLSHM_STAT_HITS]);
        c->ns += qatomic_read(&t->hit_ns);
    } else {
        qatomic_inc(&s->stats[CXLSHM_STAT_MISSES]);
        c->ns += qatomic_read(&t->miss_ns);
        c->moved++;
        trace_cxl_shm_timed_miss(s->host_id, off, write);
    }
    qatomic_set(&set[i].holders, holders);
    smp_wmb();      /* a lock-free reader re-reads the tag after holders */
    qatomic_set(&set[i].tag, (e & ~SF_OWNER_MASK) | owner);
    cxl_shm_sf_touch(s, set, i);
    w->epoch = sf_epoch(e);

    if (write) {
        st_bytes(s->pool + off, size, val);
        val = 0;
    } else {
        val = ld_bytes(s->pool + off, size);
    }
    if (h == &local) {
        cxl_shm_lines_unlock(&s->lines, h);
    }
    return val;
}

/*
 * A vCPU's access that cannot be run again from its start, so waits for
 * a busy line (bounded) instead: the access's later piece once an
 * earlier one has stored (a read-modify-write run twice would add twice,
 * which hardware never does), an access of a helper without a return
 * address (an interrupt delivery's stack push), a KVM vCPU's
 */
#define TIMED_WAIT_MAX_US       100000
#define TIMED_WAIT_STEP_US      10

/*
 * May the vCPU @cpu's access at @dpa, of which @done bytes are done, run
 * again (MEMTX_RETRY)?  @p: the vCPU's record of its access pieces
 */
static bool timed_may_retry(CPUState *cpu, CXLShmPiece *p, uint64_t dpa,
                            unsigned done, bool write)
{
    uintptr_t insn = cpu_io_insn_id(cpu);
    bool cont = p && insn && p->ra == insn && p->next == dpa;

    return tcg_enabled() && insn && !(cont && p->stored) &&
           !(write && done);
}

/*
 * One access (any size, any alignment) at DPA @dpa.  A line lock another
 * host holds now: a vCPU under TCG runs the access again later
 * (MEMTX_RETRY), if nothing it did is visible yet; any other thread (DMA,
 * the monitor, a debugger) gets MEMTX_ERROR; what cannot run again
 * (timed_may_retry()) tries again here for at most TIMED_WAIT_MAX_US,
 * then fails (MEMTX_ERROR, a load reading all ones: a completion
 * timeout).
 */
static MemTxResult timed_access(CXLShmState *s, uint64_t dpa, unsigned size,
                                bool write, uint64_t *val)
{
    CPUState *cpu = current_cpu;
    CXLShmPiece *piece = NULL;
    Cost c = { 0 };
    uint64_t ret = 0, old_pc;
    int64_t deadline = 0;
    unsigned done = 0;
    bool busy, cont = false;

    if (dpa >= s->size || size > s->size - dpa) {
        *val = 0;               /* outside the device: reads as zero */
        return MEMTX_OK;
    }
    if (held_of(s, cpu)) {      /* a vCPU of this machine */
        uintptr_t insn = cpu_io_insn_id(cpu);

        piece = &s->t.piece[cpu->cpu_index];
        cont = insn && piece->ra == insn && piece->next == dpa;
    }
    for (;;) {
        busy = false;
        old_pc = cxl_shm_set_insn_pc(cpu ? CXLSHM_PC_ACCESS : 0);
        qemu_mutex_lock(&s->t.lock);
        while (done < size) {
            uint64_t off = dpa + done;
            unsigned n = MIN(size - done,
                             CXLSHM_LINE - (unsigned)(off % CXLSHM_LINE));
            uint64_t part = write ? *val >> (done * 8) : 0;
            uint64_t v;

            if (n < 8) {
                part &= (1ULL << (n * 8)) - 1;
            }
            v = off < s->coherent_size
                ? timed_coherent(s, cpu, off, n, write, part, &c, &busy)
                : timed_nc(s, cpu, off, n, write, part, &c, &busy);
            if (busy) {
                break;
            }
            if (!write) {
                ret |= v << (done * 8);
            }
            done += n;
        }
        cxl_shm_timed_moved(s, &c);
        if (!(++s->t.accesses % 65536)) {
            cxl_shm_pool_sync_stats(s);     /* the other hosts see them */
        }
        qemu_mutex_unlock(&s->t.lock);
        cxl_shm_set_insn_pc(old_pc);
        if (!busy) {
            break;
        }
        qatomic_inc(&s->stats[CXLSHM_STAT_RETRIES]);
        trace_cxl_shm_timed_busy(s->host_id, dpa + done, write, cpu != NULL);
        if (!cpu) {
            *val = ~0ULL;       /* what a failed read returns on PCIe */
            return MEMTX_ERROR;
        }
        if (timed_may_retry(cpu, piece, dpa, done, write)) {
            /*
             * The retry costs what a miss does (not inside an atomic's
             * exclusive step, which stops the other vCPUs): guest time
             * moves on under -icount, a wait on the host's ticks otherwise
             */
            if (!tcg_atomic_step_active()) {
                c.ns += qatomic_read(&s->t.miss_ns);
            }
            cxl_shm_charge_ns(s, c.ns);
            return MEMTX_RETRY;
        }
        if (!deadline) {
            deadline = g_get_monotonic_time() + TIMED_WAIT_MAX_US;
        } else if (g_get_monotonic_time() >= deadline) {
            trace_cxl_shm_timed_timeout(s->host_id, dpa + done, write);
            *val = ~0ULL;       /* a completion timeout: all ones */
            return MEMTX_ERROR;
        }
        g_usleep(TIMED_WAIT_STEP_US);
    }
    if (piece) {
        /* the next piece of this access continues it */
        piece->ra = cpu_io_insn_id(cpu);
        piece->next = dpa + size;
        piece->stored = (cont && piece->stored) || write;
    }
    if (cpu) {
        /* no vCPU waits for a DMA or debugger access: guest time stays */
        cxl_shm_charge_ns(s, c.ns);
    }
    *val = ret;
    return MEMTX_OK;
}

/* The region spans the device: @addr is the DPA */
static MemTxResult cxl_shm_timed_read(void *opaque, hwaddr addr,
                                      uint64_t *val, unsigned size,
                                      MemTxAttrs attrs)
{
    return timed_access(opaque, addr, size, false, val);
}

static MemTxResult cxl_shm_timed_write(void *opaque, hwaddr addr,
                                       uint64_t val, unsigned size,
                                       MemTxAttrs attrs)
{
    return timed_access(opaque, addr, size, true, &val);
}

static const MemoryRegionOps cxl_shm_timed_ops = {
    .read_with_attrs = cxl_shm_timed_read,
    .write_with_attrs = cxl_shm_timed_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 1,
        .max_access_size = 8,
        .unaligned = true,
    },
    .impl = {
        .min_access_size = 1,
        .max_access_size = 8,
        .unaligned = true,
    },
};

/*
 * A decoder maps an alias of the one I/O region that spans the device
 * (made at realize, never re-initialised): a vCPU still dispatching into
 * it while a decoder is reprogrammed sees a valid region and its DPA.
 */
static void cxl_shm_timed_map(CXLShmState *s, CXLShmDirect *d)
{
    memory_region_init_alias(&d->alias, OBJECT(s), "cxl-shm-timed-window",
                             &s->t.io, d->dpa, d->size);
    d->mr = &d->alias;
}

/* Every access reaches the I/O region; its offset is the DPA */
static MemoryRegion *cxl_shm_timed_native_mr(CXLShmState *s,
                                             uint64_t *dpa_base)
{
    *dpa_base = 0;
    return &s->t.io;
}

/* Realize */

static bool cxl_shm_timed_check_props(CXLShmState *s, Error **errp)
{
    CXLShmTimed *t = &s->t;
    uint64_t lines;

    if (s->latency_ns) {
        error_setg(errp, "property 'latency-ns' is the per-line "
                   "charge of mode=direct; with mode=timed set "
                   "miss-latency-ns, hit-latency-ns, writeback-latency-ns, "
                   "back-invalidate-latency-ns and snoop-latency-ns");
        return false;
    }
    if (s->evict_rate) {
        error_setg(errp, "property 'evict-rate' applies to "
                   "mode=direct; with mode=timed lines are evicted by the "
                   "cache model (set cache-size and cache-ways)");
        return false;
    }
    if (t->cache_ways < 1 || t->cache_ways > TIMED_WAYS_MAX) {
        error_setg(errp, "property 'cache-ways' is %u (allowed: "
                   "[1, %d])", t->cache_ways, TIMED_WAYS_MAX);
        return false;
    }
    lines = t->cache_size / CXLSHM_LINE;
    if (t->cache_size < TIMED_CACHE_MIN || t->cache_size > TIMED_CACHE_MAX ||
        t->cache_size % CXLSHM_LINE || lines % t->cache_ways) {
        error_setg(errp, "property 'cache-size' is %" PRIu64
                   " (allowed: [64 KiB, 1 GiB], a whole number of %u-way "
                   "sets of 64-byte lines)", t->cache_size, t->cache_ways);
        return false;
    }
    if (t->sf_entries < CXLSHM_NR_LOCKS ||
        t->sf_entries > CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS ||
        t->sf_entries % CXLSHM_NR_LOCKS) {
        error_setg(errp, "property 'snoop-filter-entries' is %u "
                   "(allowed: a multiple of %d in [%d, %d])", t->sf_entries,
                   CXLSHM_NR_LOCKS, CXLSHM_NR_LOCKS,
                   CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS);
        return false;
    }
    return true;
}

/* After the pool is joined and mapped, before the parent's realize */
static bool cxl_shm_timed_init(CXLShmState *s, Error **errp)
{
    CXLShmTimed *t = &s->t;
    MachineState *ms = MACHINE(qdev_get_machine());

    if (!cxl_shm_sf_join(s, errp)) {
        return false;
    }
    qemu_mutex_init(&t->lock);
    qemu_mutex_lock(&t->lock);
    cxl_shm_sf_forget_me(s);
    qemu_mutex_unlock(&t->lock);
    memory_region_init_io(&t->io, OBJECT(s), &cxl_shm_timed_ops, s,
                          "cxl-shm-timed", s->size);
    /* accesses run without the BQL, under the cache lock */
    memory_region_enable_lockless_io(&t->io);
    t->sets = t->cache_size / CXLSHM_LINE / t->cache_ways;
    t->way = g_new0(CXLShmWay, (size_t)t->sets * t->cache_ways);
    /*
     * Touch the tags now: a first miss in a set would otherwise fault a
     * page in (about 14 us here, several times a miss's whole cost), and
     * the host cost of a miss would depend on whether its set was used
     * before.
     */
    memset(t->way, 0, (size_t)t->sets * t->cache_ways * sizeof(*t->way));
    t->nr_held = ms->smp.max_cpus;
    t->held = g_new0(CXLShmLineLock, t->nr_held);
    t->piece = g_new0(CXLShmPiece, t->nr_held);
    if (tcg_enabled()) {
        tcg_atomic_step_hook_add(timed_step_done, s);
    }
    return true;
}

/*
 * The device goes away (an unplug, or a failed realize): no new atomic
 * step hook call.  A vCPU may still be in an access or in a step (the
 * hook runs inside an RCU read-side section, and the MMIO path without
 * the BQL): the cache and the per-vCPU locks go only in
 * cxl_shm_timed_release(), after a grace period; the region goes with
 * the device (docs/devel/memory.rst: an I/O region is not destroyed
 * before its owner).
 */
static void cxl_shm_timed_fini(CXLShmState *s)
{
    CXLShmTimed *t = &s->t;

    if (!t->way || t->released) {
        return;
    }
    t->released = true;
    if (tcg_enabled()) {
        tcg_atomic_step_hook_remove(timed_step_done, s);
    }
}

/*
 * After cxl_shm_timed_fini() and a grace period, with the BQL; before the
 * host leaves its pod.  A line lock a vCPU took at an atomic's load and
 * whose hook no longer ran (the hook was removed in between) is given
 * back, as a reset does.
 */
static void cxl_shm_timed_release(CXLShmState *s)
{
    CXLShmTimed *t = &s->t;
    uint32_t i;

    if (!t->way) {
        return;
    }
    assert(t->released);
    for (i = 0; i < t->nr_held; i++) {
        if (t->held[i].word && s->joined) {
            cxl_shm_lines_unlock(&s->lines, &t->held[i]);
        }
    }
    qemu_mutex_destroy(&t->lock);
    g_free(t->way);
    t->way = NULL;
    g_free(t->held);
    t->held = NULL;
    g_free(t->piece);
    t->piece = NULL;
}

const CXLShmModeOps cxl_shm_timed_mode = {
    .maps_ram = false,
    .check_props = cxl_shm_timed_check_props,
    .init = cxl_shm_timed_init,
    .fini = cxl_shm_timed_fini,
    .release = cxl_shm_timed_release,
    .reset = cxl_shm_timed_reset,
    .map = cxl_shm_timed_map,
    .native_mr = cxl_shm_timed_native_mr,
    .range = cxl_shm_timed_range,
    .whole = cxl_shm_timed_whole,
    .nt_store = cxl_shm_timed_nt_store,
    .nt_land = cxl_shm_timed_nt_land,
    .latency = cxl_shm_timed_latency,
};

/*
 * cxl-shm: the BAR5 register block and its doorbell
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/main-loop.h"
#include "exec/memory.h"
#include "hw/pci/pci.h"
#include "hw/registerfields.h"
#include "cxl-shm-regs.h"
#include "cxl-shm-doorbell.h"
#include "cxl-shm.h"
#include "trace.h"

static const char *const op_names[] = {
    [CXLSHM_OP_WRITEBACK] = "writeback",
    [CXLSHM_OP_INVALIDATE] = "invalidate",
    [CXLSHM_OP_FLUSH] = "flush",
};

uint32_t cxl_shm_caps(CXLShmState *s)
{
    uint32_t caps = 0;
    bool mapped = cxl_shm_mapped(s);

    if (mapped && cxl_shm_native_active(s)) {
        caps = FIELD_DP32(caps, CXLSHM_CAPS, NATIVE, 1);
    }
    if (mapped && s->atomics_ok) {
        caps = FIELD_DP32(caps, CXLSHM_CAPS, ATOMICS, 1);
    }
    if (mapped && s->mode_ops->maps_ram) {
        caps = FIELD_DP32(caps, CXLSHM_CAPS, DIRECT, 1);
    }
    return caps;
}

/*
 * One doorbell engine: an op runs when the one rung before it has
 * completed.  DB_OFFSET and DB_LEN are taken at the DB_OP write, which
 * also takes the op's ticket (the order of the DB_OP writes); the ringer
 * waits for its turn outside the BQL (another vCPU's op may take long),
 * and the op's line work and latency charge run without it too.  Without
 * the ticket, a later ring could take the engine in the moment between
 * an earlier ringer's dropping the BQL and its taking the engine.
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
    uint64_t lines = 0, ticket = qatomic_fetch_inc(&s->db_ticket);
    bool locked = bql_locked();

    s->db_queued++;
    if (locked) {
        bql_unlock();
    }
    qemu_mutex_lock(&s->db_engine);
    while (s->db_serving != ticket) {
        qemu_cond_wait(&s->db_turn, &s->db_engine);
    }
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
    s->db_serving++;
    qemu_cond_broadcast(&s->db_turn);
    qemu_mutex_unlock(&s->db_engine);
}

/* BAR5 register block */

static uint32_t cxl_shm_read32(CXLShmState *s, hwaddr addr)
{
    uint64_t v = 0;
    bool hi = addr & 4;

    if (addr >= A_CXLSHM_HOST_LIVE && addr < A_CXLSHM_STATS) {
        cxl_shm_pool_refresh_hosts(s);
    }
    /* by 8-byte pairs: a 64-bit register, or two 32-bit ones (lo, hi) */
    switch (addr & ~7ULL) {
    case A_CXLSHM_MAGIC:                            /* and VERSION */
        return hi ? CXLSHM_VERSION_VALUE : CXLSHM_MAGIC_VALUE;
    case A_CXLSHM_HOST_ID:                          /* and MAX_HOSTS */
        return hi ? s->max_hosts : s->host_id;
    case A_CXLSHM_SIZE:
        v = s->size;
        break;
    case A_CXLSHM_COHERENT_SIZE:
        v = s->coherent_size;
        break;
    case A_CXLSHM_LINE_SIZE:                        /* and MODE */
        return hi ? s->timed : CXLPOOL_LINE;
    case A_CXLSHM_LATENCY_NS: {                     /* and CAPS */
        uint32_t rd, wr;

        if (hi) {
            return cxl_shm_caps(s);
        }
        s->mode_ops->latency(s, &rd, &wr);
        return rd;
    }
    case A_CXLSHM_WB_MODE:                          /* and EVICT_RATE */
        return hi ? s->evict_rate : (s->wb_deferred ? 0 : 1);
    case A_CXLSHM_DB_OFFSET:
        v = s->db_offset;
        break;
    case A_CXLSHM_DB_LEN:
        v = s->db_len;
        break;
    case A_CXLSHM_DB_OP:                            /* and DB_STATUS */
        if (!hi) {
            return 0;
        }
        return s->db_queued ? CXLSHM_DB_BUSY : s->db_status;
    case A_CXLSHM_DB_LINES:
        v = s->db_lines;
        break;
    case A_CXLSHM_HOST_LIVE: {
        uint32_t i;

        for (i = 0; i < s->max_hosts; i++) {
            if (qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE) {
                v |= 1ULL << i;
            }
        }
        break;
    }
    default:
        if (addr >= A_CXLSHM_HOST_TABLE &&
            addr < A_CXLSHM_HOST_STATE(CXLPOOL_MAX_HOSTS)) {
            uint32_t i = (addr - A_CXLSHM_HOST_TABLE) / CXLSHM_HOST_STRIDE;

            if (i >= s->max_hosts) {
                return 0;
            }
            if (addr < A_CXLSHM_HOST_GEN(i)) {
                return hi ? 0 : qatomic_read(&s->hosts[i].state);
            }
            v = qatomic_read(&s->hosts[i].generation);
            break;
        }
        if (addr >= A_CXLSHM_HIT_NS && addr < CXLSHM_TIMED_REGS_END &&
            s->timed) {
            /* mode=timed: the cache and filter geometry, the latencies */
            static const uint32_t none;
            const uint32_t *r[8] = {
                &s->t.hit_ns, &s->t.miss_ns, &s->t.wb_ns, &s->t.bi_ns,
                &s->t.snoop_ns, &s->t.cache_ways, &s->t.sf_entries, &none,
            };

            if (addr == A_CXLSHM_CACHE_KIB) {
                return s->t.cache_size / KiB;
            }
            return qatomic_read(r[(addr - A_CXLSHM_HIT_NS) / 4]);
        }
        if (addr >= A_CXLSHM_STATS && addr < A_CXLSHM_STAT(CXLSHM_STAT_NR)) {
            v = qatomic_read(&s->stats[(addr - A_CXLSHM_STATS) / 8]);
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
    uint64_t old_pc = cxl_shm_set_insn_pc(CXLSHM_PC_ACCESS);

    trace_cxl_shm_reg_write(addr, val, size);
    cxl_shm_write32(s, addr, val);
    if (size == 8) {
        cxl_shm_write32(s, addr + 4, val >> 32);
    }
    cxl_shm_set_insn_pc(old_pc);
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

void cxl_shm_regs_init(CXLShmState *s)
{
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
    pci_register_bar(PCI_DEVICE(s), CXLSHM_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);
}

/* A device reset clears the doorbell registers */
void cxl_shm_regs_reset(CXLShmState *s)
{
    s->db_offset = 0;
    s->db_len = 0;
    s->db_lines = 0;
    s->db_status = 0;
    s->db_epoch++;
}

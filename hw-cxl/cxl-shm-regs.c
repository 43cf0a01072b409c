/*
 * cxl-shm: the BAR5 register block (its doorbell: cxl-shm-doorbell.c)
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

G_STATIC_ASSERT(CXLSHM_HOST_LIVE_WORDS * 64 >= CXLPOOL_MAX_HOSTS);
/* the register block's layout (docs/interfaces.md, CXLPOD_HOST_WORDS) */
G_STATIC_ASSERT(CXLSHM_HOST_LIVE_WORDS == 4);
G_STATIC_ASSERT(A_CXLSHM_HOST_LIVE_WORD(CXLSHM_HOST_LIVE_WORDS) <=
                A_CXLSHM_STATS);
G_STATIC_ASSERT(A_CXLSHM_HOST_STATE(CXLPOOL_MAX_HOSTS) <= CXLSHM_REGS_SIZE);

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

/* BAR5 register block */

static uint32_t cxl_shm_read32(CXLShmState *s, hwaddr addr)
{
    uint64_t v = 0;
    bool hi = addr & 4;

    if ((addr >= A_CXLSHM_HOST_LIVE &&
         addr < A_CXLSHM_HOST_LIVE_WORD(CXLSHM_HOST_LIVE_WORDS)) ||
        addr >= A_CXLSHM_HOST_TABLE) {
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
    case A_CXLSHM_DB_LEN:
    case A_CXLSHM_DB_LINES:
        v = cxl_shm_db_reg(s, addr & ~7ULL);
        break;
    case A_CXLSHM_DB_OP:                            /* and DB_STATUS */
        return hi ? cxl_shm_db_status(s) : 0;
    case A_CXLSHM_DB_CTRL:
        return hi ? 0 : cxl_shm_db_reg(s, A_CXLSHM_DB_CTRL);
    case A_CXLSHM_HOST_LIVE_WORD(0):
    case A_CXLSHM_HOST_LIVE_WORD(1):
    case A_CXLSHM_HOST_LIVE_WORD(2):
    case A_CXLSHM_HOST_LIVE_WORD(3): {
        uint32_t i = (addr - A_CXLSHM_HOST_LIVE) / 8 * 64;
        uint32_t end = MIN(i + 64, s->max_hosts);

        for (; i < end; i++) {
            if (qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE) {
                v |= 1ULL << (i % 64);
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
    cxl_shm_db_write(s, addr, val);
    if (size == 8) {
        cxl_shm_db_write(s, addr + 4, val >> 32);
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

void cxl_shm_regs_init(CXLShmState *s)
{
    memory_region_init_io(&s->regs, OBJECT(s), &cxl_shm_reg_ops, s,
                          "cxl-shm-regs", CXLSHM_REGS_SIZE);
    /*
     * No register needs the BQL: the doorbell's are under its own lock,
     * the others are read atomically (the host table's reaping under its
     * own lock), so a doorbell op run in its DB_OP write holds no global
     * lock
     */
    memory_region_enable_lockless_io(&s->regs);
    pci_register_bar(PCI_DEVICE(s), CXLSHM_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);
}

/*
 * cxl-shm: the BAR5 register block, for the device and its drivers
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The one definition of the register map (docs/interfaces.md, section
 * 1): the device (hw-cxl/cxl-shm-regs.c, after hw/registerfields.h), the
 * guest library (guest-tools/libcxlpod.c) and the qtest include it.  It
 * needs no QEMU header: outside QEMU, REG32, REG64 and FIELD below define
 * the same A_x (byte address), R_x (register number) and R_x_F_SHIFT,
 * _LENGTH and _MASK constants that QEMU's do.
 *
 * Every register reads as 32 bits at a 4-byte aligned address, or as 64
 * bits (two halves, low first) at an 8-byte aligned one.  Writes go to
 * the doorbell registers only; the other registers are read only.
 */

#ifndef HW_CXLPOD_CXL_SHM_REGS_H
#define HW_CXLPOD_CXL_SHM_REGS_H

/*
 * Without hw/registerfields.h: the same constants (one enum a register
 * or field), for this header only (undefined at its end, so that
 * registerfields.h may follow)
 */
#ifndef REG32
#define CXLSHM_REGS_OWN_REG32
#define REG32(reg, addr)                                                  \
    enum { A_ ## reg = (addr), R_ ## reg = (addr) / 4 };
#endif
#ifndef REG64
#define CXLSHM_REGS_OWN_REG64
#define REG64(reg, addr)                                                  \
    enum { A_ ## reg = (addr), R_ ## reg = (addr) / 8 };
#endif
#ifndef FIELD
#define CXLSHM_REGS_OWN_FIELD
#define FIELD(reg, field, shift, length)                                  \
    enum {                                                                \
        R_ ## reg ## _ ## field ## _SHIFT = (shift),                      \
        R_ ## reg ## _ ## field ## _LENGTH = (length),                    \
        R_ ## reg ## _ ## field ## _MASK =                                \
            ((~0ULL) >> (64 - (length))) << (shift)                       \
    };
#endif

#define CXLSHM_BAR              5
#define CXLSHM_REGS_SIZE        0x2000

/* Identity */
REG32(CXLSHM_MAGIC, 0x000)
#define CXLSHM_MAGIC_VALUE      0x504c5843      /* "CXLP" */
REG32(CXLSHM_VERSION, 0x004)
#define CXLSHM_VERSION_VALUE    2       /* 1: 32 hosts, table at 0x400 */
REG32(CXLSHM_HOST_ID, 0x008)
REG32(CXLSHM_MAX_HOSTS, 0x00c)
REG64(CXLSHM_SIZE, 0x010)                       /* bytes of device memory */
REG64(CXLSHM_COHERENT_SIZE, 0x018)
REG32(CXLSHM_LINE_SIZE, 0x020)
REG32(CXLSHM_MODE, 0x024)                       /* 0 direct, 1 timed */
REG32(CXLSHM_LATENCY_NS, 0x028)                 /* per line, or a miss */
REG32(CXLSHM_CAPS, 0x02c)
    FIELD(CXLSHM_CAPS, NATIVE, 0, 1)            /* clwb & co. reach it */
    FIELD(CXLSHM_CAPS, ATOMICS, 1, 1)           /* cross-host atomics */
    FIELD(CXLSHM_CAPS, DIRECT, 2, 1)            /* the pool mapped as RAM */
REG32(CXLSHM_WB_MODE, 0x030)                    /* 0 deferred, 1 immediate */
REG32(CXLSHM_EVICT_RATE, 0x034)                 /* lines per ms */

/* mode=timed's cache model (0 in mode=direct) */
REG32(CXLSHM_HIT_NS, 0x040)
REG32(CXLSHM_MISS_NS, 0x044)
REG32(CXLSHM_WB_NS, 0x048)
REG32(CXLSHM_BI_NS, 0x04c)
REG32(CXLSHM_SNOOP_NS, 0x050)
REG32(CXLSHM_CACHE_WAYS, 0x054)
REG32(CXLSHM_SF_ENTRIES, 0x058)
REG32(CXLSHM_CACHE_KIB, 0x05c)
#define CXLSHM_TIMED_REGS_END   0x060

/* The doorbell: DB_OFFSET and DB_LEN, then the op written to DB_OP */
REG64(CXLSHM_DB_OFFSET, 0x100)
REG64(CXLSHM_DB_LEN, 0x108)
REG32(CXLSHM_DB_OP, 0x110)
REG32(CXLSHM_DB_STATUS, 0x114)
REG64(CXLSHM_DB_LINES, 0x118)                   /* lines the last op moved */
REG32(CXLSHM_DB_CTRL, 0x120)
    FIELD(CXLSHM_DB_CTRL, IRQ, 0, 1)            /* MSI-X at completion */

/*
 * The MSI-X vector DB_CTRL.IRQ raises (in the cxl-type3 table of BAR4:
 * vector 0 is the DOE's, 2-6 the event logs', 7 the mailbox's)
 */
#define CXLSHM_DB_MSIX_VECTOR   1

/* DB_OP values */
enum {
    CXLSHM_OP_WRITEBACK = 1,
    CXLSHM_OP_INVALIDATE = 2,
    CXLSHM_OP_FLUSH = 3,
};

/* DB_STATUS values */
enum {
    CXLSHM_DB_OK = 0,
    CXLSHM_DB_RANGE = 1,
    CXLSHM_DB_UNALIGNED = 2,
    CXLSHM_DB_ZERO = 3,
    CXLSHM_DB_BADOP = 4,
    CXLSHM_DB_BUSY = 5,         /* read only: a rung op has not completed */
    CXLSHM_DB_FULL = 6,         /* read only: an op was dropped, ring full */
    CXLSHM_DB_LOST = 7,         /* a remote host lost its pool service */
    CXLSHM_DB_ERROR = 8,        /* the pool service refused a request */
};

/*
 * The pod's hosts: a bitmap of the live ones (host h: bit h % 64 of the
 * 64-bit word h / 64), then 16 bytes a host (state, generation)
 */
REG64(CXLSHM_HOST_LIVE, 0x200)
#define CXLSHM_HOST_LIVE_WORDS  4
#define A_CXLSHM_HOST_LIVE_WORD(w) (A_CXLSHM_HOST_LIVE + 8 * (w))
REG32(CXLSHM_HOST_TABLE, 0x1000)
#define CXLSHM_HOST_STRIDE      16
#define A_CXLSHM_HOST_STATE(i)  (A_CXLSHM_HOST_TABLE + CXLSHM_HOST_STRIDE * (i))
#define A_CXLSHM_HOST_GEN(i)    (A_CXLSHM_HOST_STATE(i) + 8)

/* Statistics: 64-bit counter i (CXLSHM_STAT_*) at A_CXLSHM_STAT(i) */
REG64(CXLSHM_STATS, 0x800)
#define A_CXLSHM_STAT(i)        (A_CXLSHM_STATS + 8 * (i))

/* Per-host statistics, in this order here and in the pool's host table */
enum {
    CXLSHM_STAT_WB_OPS,
    CXLSHM_STAT_INV_OPS,
    CXLSHM_STAT_FLUSH_OPS,
    CXLSHM_STAT_WB_LINES,
    CXLSHM_STAT_INV_LINES,
    CXLSHM_STAT_NATIVE_OPS,
    CXLSHM_STAT_ERRORS,
    CXLSHM_STAT_CONFLICTS,      /* writebacks over another host's data */
    CXLSHM_STAT_EVICTED,        /* lines evicted (evict-rate) */
    CXLSHM_STAT_NT_LINES,       /* lines written by non-temporal stores */
    CXLSHM_STAT_DEFERRED,       /* clwb/clflushopt queued until a fence */
    CXLSHM_STAT_RESETS,         /* host resets (lines dropped, rejoined) */
    /* mode=timed; in the extended statistics area, not the host table */
    CXLSHM_STAT_HITS,           /* accesses that hit this host's cache */
    CXLSHM_STAT_MISSES,         /* accesses that filled a line */
    CXLSHM_STAT_CACHE_EVICTIONS,/* lines evicted for capacity */
    CXLSHM_STAT_BACK_INVAL,     /* other hosts' coherent copies invalidated */
    CXLSHM_STAT_SNOOPS,         /* reads of a line another host modified */
    CXLSHM_STAT_SF_EVICTIONS,   /* snoop-filter entries evicted (full) */
    CXLSHM_STAT_STALE_READS,    /* loads of a copy older than the pool */
    CXLSHM_STAT_CHARGED_NS,     /* latency charged, ns */
    CXLSHM_STAT_RETRIES,        /* operations that found a line busy */
    CXLSHM_STAT_NR,
};

#ifdef CXLSHM_REGS_OWN_REG32
#undef CXLSHM_REGS_OWN_REG32
#undef REG32
#endif
#ifdef CXLSHM_REGS_OWN_REG64
#undef CXLSHM_REGS_OWN_REG64
#undef REG64
#endif
#ifdef CXLSHM_REGS_OWN_FIELD
#undef CXLSHM_REGS_OWN_FIELD
#undef FIELD
#endif

#endif

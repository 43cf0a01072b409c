/*
 * cxl-shm: the doorbell's register decode and its checks
 * (see cxl-shm-doorbell.h)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
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

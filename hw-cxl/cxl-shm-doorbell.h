/*
 * cxl-shm: the doorbell's register decode and its checks
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What a guest's writes to the doorbell registers of BAR5 do
 * (docs/interfaces.md, section 1), with no QEMU dependency, so that the
 * fuzz target (tests/fuzz) drives exactly the device's code.
 */

#ifndef HW_CXLPOD_CXL_SHM_DOORBELL_H
#define HW_CXLPOD_CXL_SHM_DOORBELL_H

#include "cxl-shm-line.h"
#include "cxl-shm-regs.h"

typedef struct CXLShmDoorbellRegs {
    uint64_t offset;            /* DB_OFFSET */
    uint64_t len;               /* DB_LEN */
} CXLShmDoorbellRegs;

/*
 * A 32-bit write at @addr of BAR5 (4-byte aligned).  Returns the op the
 * guest rang (the value written to DB_OP, any value) with *rang set, or
 * updates DB_OFFSET / DB_LEN; any other address is ignored.
 */
uint32_t cxl_shm_db_write32(CXLShmDoorbellRegs *r, uint64_t addr,
                            uint32_t val, bool *rang);

/*
 * The status of doorbell op @op over [@off, @off + @len) on a pool of
 * @size bytes: CXLSHM_DB_OK, or why it is refused (checked in this order:
 * op, zero length, alignment, range).
 */
uint32_t cxl_shm_db_check(uint32_t op, uint64_t off, uint64_t len,
                          uint64_t size);

/* The line operation of an accepted op */
CXLShmLineOp cxl_shm_db_line_op(uint32_t op);

#endif

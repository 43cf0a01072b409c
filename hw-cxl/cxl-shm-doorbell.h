/*
 * cxl-shm: the doorbell: its register decode and checks, its ring and
 * the thread that runs its ops
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What a guest's writes to the doorbell registers of BAR5 do
 * (docs/interfaces.md, section 1).  The decode has no QEMU dependency,
 * so that the fuzz target (tests/fuzz) drives exactly the device's code
 * (built with CXLSHM_DB_DECODE_ONLY, which leaves the rest out).
 */

#ifndef HW_CXLPOD_CXL_SHM_DOORBELL_H
#define HW_CXLPOD_CXL_SHM_DOORBELL_H

#include "cxl-shm-line.h"
#include "cxl-shm-regs.h"

typedef struct CXLShmDoorbellRegs {
    uint64_t offset;            /* DB_OFFSET */
    uint64_t len;               /* DB_LEN */
    uint32_t ctrl;              /* DB_CTRL */
} CXLShmDoorbellRegs;

/*
 * A 32-bit write at @addr of BAR5 (4-byte aligned).  Returns the op the
 * guest rang (the value written to DB_OP, any value) with *rang set, or
 * updates DB_OFFSET / DB_LEN / DB_CTRL (its defined bits); any other
 * address is ignored.
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

#ifndef CXLSHM_DB_DECODE_ONLY
#include "qemu/thread.h"
#include "qemu/timer.h"

#define CXLSHM_DB_RING          64      /* ops rung and not yet completed */

typedef struct CXLShmDbOp {
    uint32_t op;                /* accepted (cxl_shm_db_check()) */
    uint64_t off;
    uint64_t len;
    uint64_t from;              /* the lines before it are done */
    uint64_t lines;             /* lines moved before the thread took it */
    int64_t ns;                 /* latency charged before that */
    uint64_t pc;                /* the guest PC of the DB_OP write */
    int64_t rung_ns;            /* cxl_shm_now() at the DB_OP write */
    unsigned epoch;             /* the device reset it was rung after */
} CXLShmDbOp;

typedef struct CXLShmDoorbell {
    CXLShmDoorbellRegs regs;    /* DB_OFFSET, DB_LEN, DB_CTRL (lock) */
    QemuThread thread;
    QemuMutex lock;             /* everything below */
    QemuCond cond;              /* an op rung, completed, or a request */
    CXLShmDbOp ring[CXLSHM_DB_RING];
    uint64_t head;              /* the op running or next (ring index) */
    uint64_t tail;              /* where the next DB_OP write goes */
    uint32_t status;            /* of the last op completed */
    uint32_t refused;           /* the last ring's, refused at once, or 0 */
    uint64_t lines;             /* DB_LINES of the last op completed */
    int64_t ready_ns;           /* its latency has passed (cxl_shm_now()) */
    int64_t irq_due;            /* an MSI-X owed at this time, or 0 */
    QEMUTimer *irq_timer;       /* raises it, in the main loop */
    unsigned epoch;             /* device resets */
    bool overflow;              /* an op was dropped: the ring was full */
    bool park;                  /* run no op (a reset) */
    bool stop;                  /* leave (unplug) */
    bool idle;                  /* the thread runs no op */
} CXLShmDoorbell;

typedef struct CXLShmState CXLShmState;

void cxl_shm_db_init(CXLShmState *s);
void cxl_shm_db_fini(CXLShmState *s);
void cxl_shm_db_free(CXLShmState *s);
void cxl_shm_db_write(CXLShmState *s, uint64_t addr, uint32_t val);
uint64_t cxl_shm_db_reg(CXLShmState *s, uint64_t addr);
uint32_t cxl_shm_db_status(CXLShmState *s);
void cxl_shm_db_reset(CXLShmState *s);
void cxl_shm_db_pause(CXLShmState *s);
void cxl_shm_db_resume(CXLShmState *s);
void cxl_shm_db_stop(CXLShmState *s);
#endif

#endif

/*
 * cxl-shm: what the device needs of icount
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Under -icount the latency the device charges is a jump of guest time
 * (icount_advance_ns()), which record/replay cannot log.  Kept apart so
 * that the device builds without icount_advance_ns(): the series for
 * upstream adds the device before that core change, with a stub
 * (cxl-shm-icount-stub.c) that refuses -icount.
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "system/cpu-timers.h"
#include "cxl-shm.h"

/* Realize: refuse record/replay, which a jump of guest time breaks */
bool cxl_shm_icount_check(Error **errp)
{
    return icount_advance_check(errp);
}

/* Let @ns of guest time pass at the access the vCPU is making */
void cxl_shm_icount_advance(int64_t ns)
{
    icount_advance_ns(ns);
}

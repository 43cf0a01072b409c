/*
 * cxl-shm: icount stubs, for a QEMU without icount_advance_ns()
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Without a way to charge latency as guest time, the device refuses
 * -icount, so that no latency it is configured with goes unseen.
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "system/cpu-timers.h"
#include "cxl-shm.h"

bool cxl_shm_icount_check(Error **errp)
{
    if (icount_enabled()) {
        error_setg(errp, "cxl-shm under -icount is not in this build of "
                   "QEMU (it needs icount_advance_ns())");
        return false;
    }
    return true;
}

void cxl_shm_icount_advance(int64_t ns)
{
    g_assert_not_reached();     /* icount refused at realize */
}

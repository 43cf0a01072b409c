/*
 * cxl-shm: mode=timed stub, for a QEMU without the TCG and icount
 * changes timed mode needs
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "cxl-shm.h"

static bool cxl_shm_timed_check_props(CXLShmState *s, Error **errp)
{
    error_setg(errp, "mode=timed is not in this build of QEMU");
    return false;
}

/* Refused at realize: no other operation is ever called */
const CXLShmModeOps cxl_shm_timed_mode = {
    .check_props = cxl_shm_timed_check_props,
};

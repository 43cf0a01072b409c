/*
 * cxl-shm QMP stubs for builds without CONFIG_CXL_SHM
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-cxl.h"

CxlShmInfoList *qmp_query_cxl_shm(Error **errp)
{
    return NULL;
}

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

void qmp_cxl_shm_set_latency(const char *path, uint32_t latency_ns,
                             Error **errp)
{
    error_setg(errp, "cxl-shm support is not compiled in");
}

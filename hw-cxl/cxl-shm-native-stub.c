/*
 * cxl-shm: TCG stubs, for a QEMU without the cache maintenance hook and
 * the parallel-atomics property
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The guest's cache maintenance instructions do not reach the device (its
 * CAPS register says so): only the doorbell's operations keep the
 * non-coherent area coherent.  Guest atomics on the coherent window are
 * atomic across hosts under TCG only when every vCPU translates them as
 * host atomics, which TCG does for MTTCG with more than one vCPU; any
 * other TCG configuration is refused.
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "hw/core/cpu.h"
#include "hw/boards.h"
#include "cxl-shm.h"

bool cxl_shm_native_built(void)
{
    return false;
}

void cxl_shm_native_hook(MemoryRegion *mr, CXLShmState *s)
{
    g_assert_not_reached();     /* never hooked: cxl_shm_native_built() */
}

bool cxl_shm_require_parallel_atomics(Error **errp)
{
    MachineState *ms = MACHINE(qdev_get_machine());

    if (!qemu_tcg_mttcg_enabled() || ms->smp.max_cpus < 2) {
        error_setg(errp, "cxl-shm under TCG needs -accel tcg,thread=multi "
                   "and more than one vCPU in this build of QEMU: with "
                   "them only are guest atomics atomic across hosts");
        return false;
    }
    return true;
}

/* Without TCG's accessors the device names no guest PC in its events */
uint64_t cxl_shm_access_pc(CPUState *cpu)
{
    return 0;
}

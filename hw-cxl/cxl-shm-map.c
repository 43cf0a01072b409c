/*
 * cxl-shm: the direct map of committed HDM decoders
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A committed decoder maps the pool (mode=direct, with the image over
 * the non-coherent area) or the timed-mode I/O region over its range in
 * a CXL fixed memory window, and registers the range for guest cache
 * maintenance under TCG.
 */

#include "qemu/osdep.h"
#include "exec/memory.h"
#include "exec/address-spaces.h"
#include "hw/cxl/cxl.h"
#include "hw/cxl/cxl_host.h"
#include "system/tcg.h"
#include "cxl-shm.h"
#include "trace.h"

/* Is a decoder's range mapped (as RAM, or in mode=timed as I/O)? */
bool cxl_shm_mapped(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->direct[i].mapped) {
            return true;
        }
    }
    return false;
}

bool cxl_shm_native_active(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->native_registered[i]) {
            return true;
        }
    }
    return false;
}

/* Direct mode: map the pool (with the image over the non-coherent area) */

void cxl_shm_unmap(CXLShmState *s, int which)
{
    CXLShmDirect *d = &s->direct[which];

    s->native_registered[which] = false;
    if (!d->mapped) {
        return;
    }
    memory_region_del_subregion(d->window, d->mr);
    object_unparent(OBJECT(d->mr));
    d->mapped = false;
    trace_cxl_shm_direct_unmap(s->host_id, which);
}

static void cxl_shm_map(CXLShmState *s, int which)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t *cache_mem = s->parent_obj.cxl_cstate.crb.cache_mem_registers;
    CXLShmDirect *d = &s->direct[which];
    uint64_t dpa = 0, base = 0, size = 0, map_size;
    MemoryRegionSection sec;
    uint32_t ctrl = 0, lo, hi;
    int i, iw = 0;

    for (i = 0; i <= which; i++) {
        uint64_t skip;

        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_BASE_LO + i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_BASE_HI + i * hdm_inc);
        base = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_SIZE_LO + i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_SIZE_HI + i * hdm_inc);
        size = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        lo = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_DPA_SKIP_LO +
                      i * hdm_inc);
        hi = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_DPA_SKIP_HI +
                      i * hdm_inc);
        skip = ((uint64_t)hi << 32) | (lo & 0xf0000000);
        ctrl = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_CTRL + i * hdm_inc);
        iw = FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, IW);
        dpa += skip;
        if (i < which) {
            int ways = cxl_interleave_ways_dec(iw, NULL);

            dpa += ways ? size / ways : 0;
        }
    }

    map_size = dpa < s->size ? MIN(size, s->size - dpa) : 0;
    if (d->mapped && d->hpa == base && d->dpa == dpa &&
        d->size == map_size && iw == 0) {
        return;     /* rewritten with the values it had: nothing moves */
    }
    cxl_shm_unmap(s, which);
    if (iw != 0) {
        trace_cxl_shm_direct_refused(s->host_id, which, "interleaved");
        return;
    }
    if (!size || dpa >= s->size) {
        trace_cxl_shm_direct_refused(s->host_id, which, "no device memory");
        return;
    }

    /* Only ever map over a CXL fixed memory window, never over RAM */
    sec = memory_region_find(get_system_memory(), base, map_size);
    if (!sec.mr) {
        trace_cxl_shm_direct_refused(s->host_id, which, "no window");
        return;
    }
    if (sec.mr->ops != &cfmws_ops || int128_get64(sec.size) != map_size) {
        memory_region_unref(sec.mr);
        trace_cxl_shm_direct_refused(s->host_id, which,
                                     "not inside a CXL fixed memory window");
        return;
    }

    d->window = sec.mr;
    d->hpa = base;
    d->dpa = dpa;
    d->size = map_size;
    s->mode_ops->map(s, d);
    memory_region_add_subregion_overlap(sec.mr, sec.offset_within_region,
                                        d->mr, 1);
    memory_region_unref(sec.mr);
    d->mapped = true;
    trace_cxl_shm_direct_map(s->host_id, which, base, dpa, map_size);

    /*
     * Guest cache maintenance of the mapped range reaches the device: the
     * hook is on the region every decoder's alias leads to, set when a
     * decoder first maps it and kept until the device goes
     * (cxl_shm_unhook()), so that a decoder reprogrammed or uncommitted
     * neither flushes the TBs again nor strands the vCPUs' queued lines:
     * their next fence still lands them.
     */
    if (tcg_enabled() && cxl_shm_native_built()) {
        if (!s->native_mr) {
            s->native_mr = s->mode_ops->native_mr(s, &s->native_base);
            if (s->native_mr) {
                cxl_shm_native_hook(s->native_mr, s);
            }
        }
        s->native_registered[which] = true;
    }
}

static bool cxl_shm_decoder_committed(CXLShmState *s, int which)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t *cache_mem = s->parent_obj.cxl_cstate.crb.cache_mem_registers;
    uint32_t ctrl = ldl_le_p(cache_mem + R_CXL_HDM_DECODER0_CTRL +
                             which * hdm_inc);

    return FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, COMMITTED);
}

/*
 * Decoder @which was committed, uncommitted or reprogrammed while
 * committed.  A decoder's DPA range starts where the previous decoders'
 * skips and sizes end, so every committed decoder from @which on may
 * have moved: each is mapped again where its registers now say (a
 * decoder whose range did not change stays as it is).  A 64-bit base,
 * size or skip is written as two halves: between them the mapping
 * follows the half-written value, as the MMIO path does.
 */
void cxl_shm_hdm_changed(CXLType3Dev *ct3d, int which, bool committed)
{
    CXLShmState *s = CXL_SHM(ct3d);
    int i;

    if (which < 0 || which >= CXLSHM_MAX_DECODERS) {
        return;
    }
    for (i = which; i < CXLSHM_MAX_DECODERS; i++) {
        if (i == which ? committed : cxl_shm_decoder_committed(s, i)) {
            cxl_shm_map(s, i);
        } else if (i == which) {
            cxl_shm_unmap(s, i);
        }
    }
}

void cxl_shm_unmap_all(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        cxl_shm_unmap(s, i);
    }
}

/*
 * The device goes: no cache maintenance reaches it any more (a vCPU
 * already in the hook finishes within its RCU read-side critical
 * section, before cxl_shm_release())
 */
void cxl_shm_unhook(CXLShmState *s)
{
    if (s->native_mr) {
        cxl_shm_native_hook(s->native_mr, NULL);
        s->native_mr = NULL;
    }
}

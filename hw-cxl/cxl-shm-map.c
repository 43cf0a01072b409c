/*
 * cxl-shm: the direct map of committed HDM decoders
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A committed decoder maps the pool (mode=direct, with the image over
 * the non-coherent area) or the timed-mode I/O region over its range in
 * a CXL fixed memory window, if the window routes that range to this
 * device, and registers the range for guest cache maintenance under TCG.
 */

#include "qemu/osdep.h"
#include "exec/memory.h"
#include "exec/address-spaces.h"
#include "hw/cxl/cxl.h"
#include "hw/cxl/cxl_host.h"
#include "hw/pci/pci_bridge.h"
#include "hw/pci/pci_bus.h"
#include "hw/pci/pci_host.h"
#include "hw/pci/pcie_port.h"
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

/* A 64-bit field of HDM decoder @dec (LO, HI): its bits 28-63 */
#define HDM_REG64(dec, reg)                                                 \
    (((uint64_t)ldl_le_p((dec) + R_CXL_HDM_DECODER0_##reg##_HI) << 32) |   \
     (ldl_le_p((dec) + R_CXL_HDM_DECODER0_##reg##_LO) & 0xf0000000))

/*
 * Do the HDM decoders of a host bridge or switch (@cache_mem) send all of
 * [base, base + size) to one port (*@port)?  A guest access takes the
 * first decoder whose range holds its address, and goes nowhere if that
 * one is not committed (cxl_hdm_find_target(), hw/cxl/cxl-host.c): so the
 * first decoder that overlaps the range must be committed, hold all of
 * it, and name the same port in each of its interleave ways.
 */
static bool cxl_shm_hdm_route(uint32_t *cache_mem, hwaddr base,
                              uint64_t size, uint8_t *port)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t cap = ldl_le_p(cache_mem + R_CXL_HDM_DECODER_CAPABILITY);
    int count = cxl_decoder_count_dec(FIELD_EX32(cap,
                                                 CXL_HDM_DECODER_CAPABILITY,
                                                 DECODER_COUNT));
    int i, way, ways;

    for (i = 0; i < count; i++) {
        uint32_t *dec = cache_mem + i * hdm_inc;
        uint64_t dbase = HDM_REG64(dec, BASE), dsize = HDM_REG64(dec, SIZE);
        uint64_t targets;
        uint32_t ctrl;

        if (base + size <= dbase || base >= dbase + dsize) {
            continue;
        }
        ctrl = ldl_le_p(dec + R_CXL_HDM_DECODER0_CTRL);
        if (!FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, COMMITTED) ||
            base < dbase || base + size > dbase + dsize) {
            return false;
        }
        /* the ways cxl_hdm_find_target() picks from: 1 << IW, at most 8 */
        ways = 1 << FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, IW);
        if (ways > 8) {
            return false;
        }
        targets = ((uint64_t)ldl_le_p(dec + R_CXL_HDM_DECODER0_TARGET_LIST_HI)
                   << 32) | ldl_le_p(dec + R_CXL_HDM_DECODER0_TARGET_LIST_LO);
        *port = targets & 0xff;
        for (way = 1; way < ways; way++) {
            if (((targets >> (way * 8)) & 0xff) != *port) {
                return false;
            }
        }
        return true;
    }
    return false;
}

/*
 * Does window @fw route all of [base, base + size) to this device, as a
 * guest access through it is routed (cxl_cfmws_find_device(),
 * hw/cxl/cxl-host.c): the window's target host bridge, its HDM decoders
 * (none for a host bridge in passthrough, with one root port), the root
 * port, and below it the device or one switch (its upstream port's HDM
 * decoders, a downstream port) and then the device?  NULL if it does,
 * else why not.  What it does not route reaches what hardware would reach
 * (the window's MMIO path), never the device's memory.
 */
static const char *cxl_shm_routed(CXLShmState *s, CXLFixedWindow *fw,
                                  hwaddr base, uint64_t size)
{
    CXLComponentState *cstate;
    PCIHostState *hb;
    PCIDevice *d;
    uint8_t port;
    int i;

    for (i = 1; i < fw->num_targets; i++) {
        if (fw->target_hbs[i] != fw->target_hbs[0]) {
            return "the window interleaves host bridges";
        }
    }
    hb = fw->target_hbs[0] ? PCI_HOST_BRIDGE(fw->target_hbs[0]->
                                             cxl_host_bridge) : NULL;
    if (!hb || !hb->bus || !pci_bus_is_cxl(hb->bus)) {
        return "the window has no CXL host bridge";
    }
    if (cxl_get_hb_passthrough(hb)) {
        d = pcie_find_port_first(hb->bus);
    } else {
        cstate = cxl_get_hb_cstate(hb);
        if (!cstate || !cxl_shm_hdm_route(cstate->crb.cache_mem_registers,
                                          base, size, &port)) {
            return "the host bridge's decoders do not route it to one "
                   "root port";
        }
        d = pcie_find_port_by_pn(hb->bus, port);
    }
    d = d ? pci_bridge_get_sec_bus(PCI_BRIDGE(d))->devices[0] : NULL;
    if (d && object_dynamic_cast(OBJECT(d), TYPE_CXL_USP)) {
        cstate = cxl_usp_to_cstate(CXL_USP(d));
        if (!cstate || !cxl_shm_hdm_route(cstate->crb.cache_mem_registers,
                                          base, size, &port)) {
            return "the switch's decoders do not route it to one "
                   "downstream port";
        }
        d = pcie_find_port_by_pn(&PCI_BRIDGE(d)->sec_bus, port);
        d = d ? pci_bridge_get_sec_bus(PCI_BRIDGE(d))->devices[0] : NULL;
    }
    if (d != PCI_DEVICE(s)) {
        return "the window routes it to another device or none";
    }
    return NULL;
}

static void cxl_shm_map(CXLShmState *s, int which)
{
    int hdm_inc = R_CXL_HDM_DECODER1_BASE_LO - R_CXL_HDM_DECODER0_BASE_LO;
    uint32_t *cache_mem = s->parent_obj.cxl_cstate.crb.cache_mem_registers;
    CXLShmDirect *d = &s->direct[which];
    uint64_t dpa = 0, base = 0, size = 0, map_size;
    MemoryRegionSection sec;
    const char *why;
    uint32_t ctrl = 0;
    int i, iw = 0;

    for (i = 0; i <= which; i++) {
        uint32_t *dec = cache_mem + i * hdm_inc;

        base = HDM_REG64(dec, BASE);
        size = HDM_REG64(dec, SIZE);
        ctrl = ldl_le_p(dec + R_CXL_HDM_DECODER0_CTRL);
        iw = FIELD_EX32(ctrl, CXL_HDM_DECODER0_CTRL, IW);
        dpa += HDM_REG64(dec, DPA_SKIP);
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
    why = cxl_shm_routed(s, sec.mr->opaque, base, map_size);
    if (why) {
        memory_region_unref(sec.mr);
        trace_cxl_shm_direct_refused(s->host_id, which, why);
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
 * A host bridge's or switch's HDM decoder was committed or uncommitted
 * (patches-pending/0017's notifier): each committed decoder of this
 * device is mapped again where the routing now lets it, or not at all.
 * Linux commits a region bottom up, so the device's own decoder usually
 * commits first, unrouted, and is mapped here when the host bridge's
 * commits.
 */
static void cxl_shm_route_changed(Notifier *n, void *data)
{
    CXLShmState *s = container_of(n, CXLShmState, route_notifier);
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (cxl_shm_decoder_committed(s, i)) {
            cxl_shm_unmap(s, i);
            cxl_shm_map(s, i);
        }
    }
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
    if (!s->route_notifier.notify) {
        s->route_notifier.notify = cxl_shm_route_changed;
        cxl_hdm_decoder_add_notifier(&s->route_notifier);
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
 * section, before cxl_shm_release()), nor a routing change
 */
void cxl_shm_unhook(CXLShmState *s)
{
    if (s->route_notifier.notify) {
        cxl_hdm_decoder_remove_notifier(&s->route_notifier);
        s->route_notifier.notify = NULL;
    }
    if (s->native_mr) {
        cxl_shm_native_hook(s->native_mr, NULL);
        s->native_mr = NULL;
    }
}

/*
 * cxl-shm: the CXL_SHM_CONFLICT and CXL_SHM_STALE_READ events, and the
 * guest PC they name
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A guest can make conflicts and stale reads as fast as it runs, so each
 * kind is limited per device by a token bucket: a burst of
 * CXLSHM_EVENT_BURST events, then CXLSHM_EVENT_RATE per second, and an
 * event counts the ones suppressed before it (@missed).  Not QEMU's
 * monitor throttle (one event per period, the last one kept): it would
 * hide the first conflict of a burst, the one a user debugging a
 * protocol needs, and drop the count of the others.  The device's
 * statistics count every one regardless.
 */

#include "qemu/osdep.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "qemu/cutils.h"
#include "hw/core/cpu.h"
#include "qapi/qapi-events-cxl.h"
#include "cxl-shm.h"
#include "trace.h"

/*
 * What this thread is serving, for the PC an event names: the guest PC of
 * the instruction that came in through a cache maintenance hook (which
 * knows it); CXLSHM_PC_ACCESS, an access to the device by current_cpu
 * (its PC is unwound when an event needs it); 0, nothing a PC can be
 * given for (a timer, an eviction, a fence or whole-cache operation whose
 * PC the hook does not know, a thread that is not a vCPU).  Each entry
 * point sets it and restores what it found.
 */
static __thread uint64_t cxl_shm_insn_pc;

/* Set it; returns the value it had */
uint64_t cxl_shm_set_insn_pc(uint64_t pc)
{
    uint64_t old = cxl_shm_insn_pc;

    cxl_shm_insn_pc = pc;
    return old;
}

void cxl_shm_events_init(CXLShmState *s)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int i;

    s->qom_path = object_get_canonical_path(OBJECT(s));
    qemu_mutex_init(&s->event_lock);
    for (i = 0; i < CXLSHM_EVENT__MAX; i++) {
        s->event_limit[i] = (CXLShmEventLimit) {
            .stamp_ns = now, .tokens = CXLSHM_EVENT_BURST,
        };
    }
}

void cxl_shm_events_fini(CXLShmState *s)
{
    qemu_mutex_destroy(&s->event_lock);
    g_free(s->qom_path);
    s->qom_path = NULL;
}

/*
 * May an event of @kind go out now?  If so, @missed is the number the
 * limit suppressed since the previous one of its kind.  The rate is in
 * guest time: under -icount the events a run sends are the same every
 * time, and a qtest steps the clock.
 */
static bool cxl_shm_event_allow(CXLShmState *s, CXLShmEventKind kind,
                                uint64_t *missed)
{
    CXLShmEventLimit *l = &s->event_limit[kind];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int64_t per = NANOSECONDS_PER_SECOND / CXLSHM_EVENT_RATE;
    bool ok;

    qemu_mutex_lock(&s->event_lock);
    if (now - l->stamp_ns >= per) {
        uint64_t add = (now - l->stamp_ns) / per;

        l->tokens = MIN(l->tokens + add, CXLSHM_EVENT_BURST);
        l->stamp_ns += add * per;
    }
    ok = l->tokens > 0;
    if (ok) {
        l->tokens--;
        *missed = l->missed;
        l->missed = 0;
    } else {
        l->missed++;
    }
    qemu_mutex_unlock(&s->event_lock);
    return ok;
}

/* A line as an event carries it: 128 hex digits */
static char *cxl_shm_hex(const uint8_t *p)
{
    return g_string_free(qemu_hexdump_line(NULL, p, CXLPOOL_LINE, 0, 0),
                         false);
}

/* Line engine callback: one writeback that overwrote another host's data */
void cxl_shm_conflict(void *opaque, const CXLShmConflict *c)
{
    CXLShmState *s = opaque;
    g_autofree char *base = NULL, *theirs = NULL, *mine = NULL;
    uint64_t missed, pc = cxl_shm_insn_pc == CXLSHM_PC_ACCESS ?
                          cxl_shm_access_pc(current_cpu) : cxl_shm_insn_pc;

    trace_cxl_shm_conflict(s->host_id, s->generation, c->offset, c->mask,
                           pc);
    if (!cxl_shm_event_allow(s, CXLSHM_EVENT_CONFLICT, &missed)) {
        return;
    }
    base = cxl_shm_hex(c->base);
    theirs = cxl_shm_hex(c->theirs);
    mine = cxl_shm_hex(c->mine);
    qapi_event_send_cxl_shm_conflict(s->qom_path, s->host_id, s->generation,
                                     c->offset, c->mask, ctpop64(c->mask),
                                     base, theirs, mine, pc != 0, pc, missed);
}

void cxl_shm_stale_read(CXLShmState *s, uint64_t off, unsigned size,
                        uint64_t val, const uint8_t *stale,
                        const uint8_t *current, uint64_t pc)
{
    g_autofree char *was = NULL, *now = NULL;
    uint64_t missed;

    if (!cxl_shm_event_allow(s, CXLSHM_EVENT_STALE_READ, &missed)) {
        return;
    }
    was = cxl_shm_hex(stale);
    now = cxl_shm_hex(current);
    qapi_event_send_cxl_shm_stale_read(s->qom_path, s->host_id,
                                       s->generation, off,
                                       QEMU_ALIGN_DOWN(off, CXLPOOL_LINE),
                                       size, val, was, now, pc != 0, pc,
                                       missed);
}

/*
 * cxl-shm: time charged to the guest for device accesses
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Both modes charge latency through cxl_shm_charge_ns(): under -icount
 * as an exact jump of guest time, otherwise as a wait on the host's
 * ticks, calibrated once against the host clock.
 */

#include "qemu/osdep.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "qemu/main-loop.h"
#include "system/cpu-timers.h"
#include "cxl-shm.h"
#include "trace.h"

/*
 * Without icount the guest's TSC is the host's (TCG reads the host's for
 * rdtsc, KVM offsets or scales it) and the guest's clocks derive from
 * it, so waits are timed in host ticks, at a rate measured once against
 * the host clock.  The host clock itself is no timer for this on some
 * virtual machines: on these, CLOCK_MONOTONIC jumps about 25 us ahead of
 * the TSC hundreds of times a second.  0 until measured: wait on the
 * host clock meanwhile.
 */
static uint64_t wait_ticks_per_ns_q32;
/*
 * What a charge costs beyond the time it waits (the statistics, reading
 * the ticks, the carry's bookkeeping), in ticks, measured once with the
 * rate: every wait is that much shorter, so that an access with a charge
 * takes the charge more than one without, not the charge plus its own
 * overhead (about 30-60 ns here, 6-12% of a 500 ns miss).
 */
static int64_t wait_cost_ticks;
/* this thread's overrun carry, described below with its bounds */
static __thread int64_t wait_overrun, wait_overrun_at;

/* @ns in ticks at @rate (ticks per ns, 32.32 fixed point) */
static int64_t ns_to_ticks(int64_t ns, uint64_t rate)
{
    uint64_t lo, hi;

    mulu64(&lo, &hi, ns, rate);
    return hi << 32 | lo >> 32;
}

#define CXLSHM_CAL_WAITS        1001
#define CXLSHM_CAL_WAIT_NS      200

static int cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

void cxl_shm_calibrate_wait(void)
{
    static uint64_t scratch;    /* stands in for a statistics counter */
    g_autofree int64_t *extra = NULL;
    int64_t t0, c0, t1, c1, len;
    uint64_t rate;
    int i;

    if (icount_enabled() || qatomic_read(&wait_ticks_per_ns_q32)) {
        return;
    }
    t0 = get_clock();
    c0 = cpu_get_host_ticks();
    g_usleep(10 * 1000);
    t1 = get_clock();
    c1 = cpu_get_host_ticks();
    if (t1 <= t0 || c1 <= c0 || c1 - c0 >= INT32_MAX) {
        return;
    }
    rate = ((uint64_t)(c1 - c0) << 32) / (t1 - t0);
    qatomic_set(&wait_ticks_per_ns_q32, rate);

    /*
     * What a short charge takes beyond its length and beyond the spin's
     * overshoot (which the carry pays back anyway), after a millisecond
     * of spinning so that the core is out of the sleep's low clock; the
     * 10th percentile, so that a slow stretch of the host does not make
     * every later wait too short
     */
    len = ns_to_ticks(CXLSHM_CAL_WAIT_NS, rate);
    c0 = cpu_get_host_ticks();
    while (cpu_get_host_ticks() - c0 < ns_to_ticks(1000 * 1000, rate)) {
        /* warm up */
    }
    extra = g_new(int64_t, CXLSHM_CAL_WAITS);
    for (i = 0; i < CXLSHM_CAL_WAITS; i++) {
        wait_overrun = 0;
        c0 = cpu_get_host_ticks();
        qatomic_add(&scratch, CXLSHM_CAL_WAIT_NS);
        cxl_shm_pass_time(CXLSHM_CAL_WAIT_NS);
        c1 = cpu_get_host_ticks();
        extra[i] = c1 - c0 - len - wait_overrun;
    }
    wait_overrun = 0;
    qsort(extra, CXLSHM_CAL_WAITS, sizeof(*extra), cmp_int64);
    qatomic_set(&wait_cost_ticks,
                MIN(MAX(extra[CXLSHM_CAL_WAITS / 10], 0), len / 2));
    trace_cxl_shm_wait_calibrated(rate * 1000 >> 32,
                                  qatomic_read(&wait_cost_ticks));
}

/*
 * How far this thread's last waits overran their end (the thread was
 * descheduled, or the host took an interrupt, while it waited), in
 * ticks, and when.  The next wait, if it comes within a millisecond, is
 * shortened by as much as it can (never below zero), so that over a run
 * of accesses a vCPU waits what was charged on average instead of that
 * plus every delay the host added meanwhile; at most 50 us are carried
 * (docs/device.md, "Latency").
 */
#define CXLSHM_OVERRUN_TTL_NS   (1000 * 1000)
#define CXLSHM_OVERRUN_MAX_NS   (50 * 1000)

/*
 * Let @ns of guest time pass on the calling vCPU, at the access it is
 * making.  With icount, exactly, in guest time: the virtual clock (and
 * the guest's TSC) jumps by @ns (icount_advance_ns()), so every run
 * sees the same.  Without icount, approximately: a wait on the host's ticks,
 * which the guest sees as time passing, less what earlier waits overran
 * and less the charge's own measured cost (wait_cost_ticks).
 * Never called with a lock of ours held but an atomic's line lock.
 */
void cxl_shm_pass_time(int64_t ns)
{
    uint64_t rate = qatomic_read(&wait_ticks_per_ns_q32);
    int64_t (*now_fn)(void) = rate ? cpu_get_host_ticks : get_clock;
    int64_t now, end, len, owed = 0;

    if (ns <= 0) {
        return;
    }
    if (icount_enabled()) {
        cxl_shm_icount_advance(ns);
        return;
    }
    if (!rate) {
        rate = 1ULL << 32;              /* host clock: 1 tick = 1 ns */
    }
    len = ns_to_ticks(MIN(ns, INT64_MAX / 4), rate) -
          qatomic_read(&wait_cost_ticks);
    if (len <= 0) {
        return;                         /* the charge's own cost covers it */
    }
    now = now_fn();
    if (now - wait_overrun_at < ns_to_ticks(CXLSHM_OVERRUN_TTL_NS, rate)) {
        owed = MIN(wait_overrun, len);
    } else {
        wait_overrun = 0;
    }
    end = now + len - owed;
    while (now < end) {
        now = now_fn();
    }
    wait_overrun = MIN(wait_overrun - owed + now - end,
                       ns_to_ticks(CXLSHM_OVERRUN_MAX_NS, rate));
    wait_overrun_at = now;
}

/*
 * The clock latency passes on: guest time under -icount, else the host's
 * (which the guest's clocks follow); the bandwidth queue of mode=timed
 * and the doorbell's completions are kept in it
 */
int64_t cxl_shm_now(void)
{
    return icount_enabled() ? qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL)
                            : get_clock();
}

/* Where this thread's charges go instead of passing (cxl_shm_charge_to()) */
static __thread int64_t *charge_sink;

void cxl_shm_charge_to(int64_t *sink)
{
    charge_sink = sink;
}

/*
 * Charge @ns, in both modes: counted in STAT_CHARGED_NS, then passed on
 * the calling vCPU (cxl_shm_pass_time(): under -icount exactly, at the
 * instruction making the access, else a wait on the host's ticks); or
 * added to this thread's sink (the doorbell's thread, whose op completes
 * that much later for the guest).  Under the BQL (the fence of an
 * interrupt delivery), without -icount, counted only: nothing waits
 * holding it.  Never with a lock of ours held except an atomic's line
 * lock (the line is busy meanwhile, as on hardware).
 */
void cxl_shm_charge_ns(CXLShmState *s, int64_t ns)
{
    if (ns <= 0) {
        return;
    }
    qatomic_add(&s->stats[CXLSHM_STAT_CHARGED_NS], ns);
    if (charge_sink) {
        *charge_sink += ns;
        return;
    }
    if (!icount_enabled() && bql_locked()) {
        return;
    }
    cxl_shm_pass_time(ns);
}

/* Direct mode: the configured latency for @lines non-coherent lines */
void cxl_shm_charge(CXLShmState *s, uint64_t lines)
{
    uint32_t lat = qatomic_read(&s->latency_ns);

    if (lat && lines) {
        cxl_shm_charge_ns(s, (int64_t)MIN(lines * lat, INT64_MAX / 2));
    }
}

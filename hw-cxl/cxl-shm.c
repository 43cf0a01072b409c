/*
 * cxl-shm: a multi-host CXL 3.0 shared-memory pod device (cxlpod)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A cxl-type3 subclass.  Several QEMU processes attach one pool file, each
 * as one host.  The coherent window [0, coherent-size) is the shared pool
 * pages; the non-coherent area [coherent-size, size) is served from a
 * private per-host image, and a twin copy (the pool's content when the
 * host last fetched the line) makes writeback exact per 64-byte line.
 * Coherence operations come from a doorbell in BAR5 (docs/interfaces.md
 * section 1) or, under TCG, from the guest's clflush/clflushopt/clwb.
 *
 * This file is the device's life: its properties, realize and unrealize,
 * reset.  Each concept it uses is a file of its own (cxl-shm.h lists
 * them; docs/architecture.md follows a store, a clwb, a doorbell and a
 * timed-mode miss through them).
 */

#include "qemu/osdep.h"
#include "qemu/mmap-alloc.h"
#include <sys/sysinfo.h>
#include "qemu/main-loop.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qapi/qapi-types-cxl.h"
#include "hw/qdev-properties.h"
#include "hw/core/qdev-prop-internal.h"
#include "hw/resettable.h"
#include "hw/pci/pci.h"
#include "hw/cxl/cxl.h"
#include "hw/core/cpu.h"
#include "system/system.h"
#include "system/cpu-timers.h"
#include "system/tcg.h"
#include "system/kvm.h"
#include "hw/boards.h"
#include "migration/blocker.h"
#include "qemu/rcu.h"
#include "cxl-shm.h"
#include "trace.h"

#define CXLSHM_SIZE_MAX         (1 * TiB)
#define CXLSHM_LATENCY_MAX      65535
#define CXLSHM_BANDWIDTH_MAX    65535

/* Realize */

static bool cxl_shm_check_props(CXLShmState *s, Error **errp)
{
    CXLType3Dev *ct3d = &s->parent_obj;

    if (!cxl_shm_icount_check(errp)) {
        return false;
    }
    if (!cxl_shm_far_check_props(s, errp)) {
        return false;
    }
    if (ct3d->hostmem && !cxl_shm_check_memdev(s, errp)) {
        return false;
    }
    if (!s->pool_path || !*s->pool_path) {
        error_setg(errp, "property 'pool' is required (the path of "
                   "the pool file), or 'memdev' (a memory-backend-file on "
                   "it)");
        return false;
    }
    if (ct3d->hostvmem || ct3d->hostpmem ||
        ct3d->dc.num_regions || ct3d->lsa) {
        error_setg(errp, "the device takes its memory from 'pool' "
                   "or 'memdev'; 'volatile-memdev', 'persistent-memdev', "
                   "'lsa' and 'num-dc-regions' must not be set");
        return false;
    }
    s->timed = s->mode == CXL_SHM_MODE_TIMED;
    s->mode_ops = s->timed ? &cxl_shm_timed_mode :
                  cxl_shm_far_wanted(s) ? cxl_shm_far_ops->mode :
                  &cxl_shm_direct_mode;
    if (!s->size || s->size % (256 * MiB) || s->size > CXLSHM_SIZE_MAX) {
        error_setg(errp, "property 'size' is %" PRIu64 " (allowed: "
                   "a multiple of 256 MiB in [256 MiB, 1 TiB])", s->size);
        return false;
    }
    if (s->coherent_size % (2 * MiB) || s->coherent_size > s->size) {
        error_setg(errp, "property 'coherent-size' is %" PRIu64
                   " (allowed: a multiple of 2 MiB in [0, size=%" PRIu64 "])",
                   s->coherent_size, s->size);
        return false;
    }
    if (s->max_hosts < 1 || s->max_hosts > CXLPOOL_MAX_HOSTS) {
        error_setg(errp, "property 'max-hosts' is %u (allowed: "
                   "[1, %d])", s->max_hosts, CXLPOOL_MAX_HOSTS);
        return false;
    }
    if (s->host_id >= s->max_hosts) {
        error_setg(errp, "property 'host-id' is %u (allowed: "
                   "[0, max-hosts-1=%u])", s->host_id, s->max_hosts - 1);
        return false;
    }
    if (s->latency_ns > CXLSHM_LATENCY_MAX) {
        error_setg(errp, "property 'latency-ns' is %u (allowed: "
                   "[0, %d])", s->latency_ns, CXLSHM_LATENCY_MAX);
        return false;
    }
    if (s->bandwidth_mbs < 1 || s->bandwidth_mbs > CXLSHM_BANDWIDTH_MAX) {
        error_setg(errp, "property 'bandwidth-mbs' is %u (allowed: "
                   "[1, %d])", s->bandwidth_mbs, CXLSHM_BANDWIDTH_MAX);
        return false;
    }
    s->wb_deferred = s->writeback == CXL_SHM_WRITEBACK_DEFERRED;
    if (s->evict_rate > CXLSHM_EVICT_MAX) {
        error_setg(errp, "property 'evict-rate' is %u (allowed: "
                   "[0, %d] lines per millisecond)", s->evict_rate,
                   CXLSHM_EVICT_MAX);
        return false;
    }
    if (!s->mode_ops->check_props(s, errp)) {
        return false;
    }
    if (s->pool_mode > 0777 || (s->pool_mode & 0600) != 0600) {
        error_setg(errp, "property 'pool-mode' is 0%o (allowed: a "
                   "file mode in [0600, 0777] with owner read and write)",
                   s->pool_mode);
        return false;
    }
    return true;
}

/*
 * Guest atomics on the coherent window must be atomic across the hosts'
 * QEMUs.  KVM runs them natively; TCG does only when its vCPUs translate
 * with CF_PARALLEL, which the accelerator turns on for every vCPU, CPU
 * hotplug included, once a device asks (tcg_require_parallel_atomics()).
 */
static bool cxl_shm_setup_atomics(CXLShmState *s, Error **errp)
{
    ERRP_GUARD();
    if (kvm_enabled()) {
        /*
         * mode=timed and a remote host's coherent window serve every
         * access as MMIO, and KVM emulates an atomic on MMIO as a read
         * and a write: not atomic across hosts.
         */
        s->atomics_ok = s->mode_ops->maps_ram;
        return true;
    }
    if (!tcg_enabled()) {
        s->atomics_ok = false;
        return true;
    }
    if (!cxl_shm_require_parallel_atomics(errp)) {
        error_append_hint(errp, "Cross-host atomics on the coherent window "
                          "need it: drop parallel-atomics=off.\n");
        return false;
    }
    s->atomics_ok = true;
    return true;
}

/*
 * The devices of this QEMU that are in their pod, for one exit notifier
 * that makes them leave at exit.  A notifier per device could not be
 * removed safely after an unplug: QEMU runs the exit notifiers from
 * exit() without the BQL, while the deferred release (cxl_shm_release)
 * runs under it on the RCU thread.  The list, and every leave, are under
 * cxl_shm_live_lock.
 */
const CXLShmFarOps *cxl_shm_far_ops;

static QemuMutex cxl_shm_live_lock;
static QLIST_HEAD(, CXLShmState) cxl_shm_live =
    QLIST_HEAD_INITIALIZER(cxl_shm_live);
static Notifier cxl_shm_exit_notifier;

static void cxl_shm_exit_notify(Notifier *n, void *data)
{
    CXLShmState *s;

    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_FOREACH(s, &cxl_shm_live, live) {
        /*
         * The doorbell's thread stops between two pieces; vCPUs may
         * still run, so the metadata stays mapped (the exit unmaps it)
         */
        cxl_shm_db_stop(s);
        cxl_shm_pool_leave(s, false);
    }
    qemu_mutex_unlock(&cxl_shm_live_lock);
}

/* At the end of a successful realize, with the BQL */
static void cxl_shm_live_add(CXLShmState *s)
{
    if (!cxl_shm_exit_notifier.notify) {
        qemu_mutex_init(&cxl_shm_live_lock);
        cxl_shm_exit_notifier.notify = cxl_shm_exit_notify;
        qemu_add_exit_notifier(&cxl_shm_exit_notifier);
    }
    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_INSERT_HEAD(&cxl_shm_live, s, live);
    qemu_mutex_unlock(&cxl_shm_live_lock);
}

/* The mode's teardown, in two steps around a grace period */
static void cxl_shm_mode_fini(CXLShmState *s)
{
    if (s->mode_ops->fini) {
        s->mode_ops->fini(s);
    }
}

static void cxl_shm_mode_release(CXLShmState *s)
{
    if (s->mode_ops->release) {
        s->mode_ops->release(s);
    }
}

static void cxl_shm_realize(PCIDevice *pci_dev, Error **errp)
{
    ERRP_GUARD();
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    CXLType3Dev *ct3d = &s->parent_obj;
    struct sysinfo si;

    s->fd = -1;
    if (!cxl_shm_check_props(s, errp)) {
        return;
    }
    /* before the pool is touched: a refusal here leaves it as it was */
    if (!cxl_shm_setup_atomics(s, errp)) {
        return;
    }
    if (cxl_shm_far_wanted(s) ? !cxl_shm_far_ops->join(s, errp)
                              : !cxl_shm_pool_join(s, errp)) {
        if (s->far) {
            goto fail_leave;
        }
        return;
    }
    if (!cxl_shm_make_backend(s, errp)) {
        goto fail_leave;
    }
    /*
     * Line locks an earlier life of this host died holding: take them
     * over and roll their half-written lines back, now that the pool's
     * data is mapped and before anything else touches a line.
     */
    if (!s->far) {
        cxl_shm_lines_recover_own(&s->lines);
    }
    if (!cxl_shm_make_image(s, errp)) {
        goto fail_backend;
    }
    if (s->mode_ops->init && !s->mode_ops->init(s, errp)) {
        goto fail_image;
    }
    cxl_shm_calibrate_wait();           /* latency may be set at run time */

    ct3d->hostvmem = s->backend;
    sc->parent_realize(pci_dev, errp);
    if (*errp) {
        ct3d->hostvmem = NULL;
        goto fail_image;
    }

    cxl_shm_regs_init(s);

    /*
     * The twin, the deferred queues and the pool's state live outside
     * the guest's RAM: a migrated or restored host would write stale
     * lines over the other hosts' data.
     */
    error_setg(&s->migration_blocker, "a host of a cxl-shm pod cannot be "
               "migrated or snapshotted (its cache image and the pool's "
               "state are not part of the VM state)");
    if (migrate_add_blocker(&s->migration_blocker, errp) < 0) {
        goto fail_parent;
    }

    s->nr_queues = MACHINE(qdev_get_machine())->smp.max_cpus;
    s->queues = g_new0(CXLShmQueue, s->nr_queues);
    /* without swap, a page the image does not have was never written */
    s->skip_unresident = sysinfo(&si) == 0 && si.totalswap == 0;
    /* on hugetlbfs a page the pool mapping lacks was never written */
    s->pool_hugetlbfs = s->fd >= 0 && qemu_fd_getpagesize(s->fd) !=
                                      qemu_real_host_page_size();
    cxl_shm_events_init(s);
    qemu_mutex_init(&s->reap_lock);
    if (s->far) {
        cxl_shm_far_ops->start(s, s->nr_queues);
    }
    cxl_shm_db_init(s);
    cxl_shm_evict_start(s);
    cxl_shm_live_add(s);
    return;

fail_parent:
    sc->parent_exit(pci_dev);
    ct3d->hostvmem = NULL;
fail_image:
    cxl_shm_mode_fini(s);       /* no vCPU has run: no grace period */
    cxl_shm_mode_release(s);
    cxl_shm_drop_image(s);
fail_backend:
    cxl_shm_drop_backend(s);
fail_leave:
    cxl_shm_pool_abort(s);
}

/*
 * What a vCPU may still be using after the unplug: a cache-maintenance
 * instruction, an atomic step or an MMIO access that looked the device up
 * before it was unmapped reaches the timed-mode cache, the image, the
 * twin, the queues and the pool until the end of its RCU read-side
 * critical section.  So they go after a grace period, with the BQL, and
 * the host leaves the pod then, as at a clean exit (or at exit, if QEMU
 * quits first: then the exit notifier made it leave, and leaving again
 * does nothing).
 */
static void cxl_shm_release(struct rcu_head *head)
{
    CXLShmState *s = container_of(head, CXLShmState, release_rcu);

    trace_cxl_shm_release(s->pool_path, s->host_id);
    qemu_mutex_lock(&cxl_shm_live_lock);
    QLIST_REMOVE(s, live);
    cxl_shm_mode_release(s);
    cxl_shm_events_fini(s);
    cxl_shm_db_free(s);
    qemu_mutex_destroy(&s->reap_lock);
    g_free(s->queues);
    s->queues = NULL;
    cxl_shm_drop_image(s);
    cxl_shm_drop_backend(s);
    cxl_shm_pool_leave(s, true);
    qemu_mutex_unlock(&cxl_shm_live_lock);
    object_unref(OBJECT(s));
}

/*
 * Unrealize can run inside an RCU read-side critical section: a guest
 * that powers the root port's slot off unplugs the device from its own
 * config write.  Nothing here may wait for a grace period (a reader that
 * calls synchronize_rcu() never returns): what readers may still use is
 * released by cxl_shm_release(), after one.
 */
static void cxl_shm_exit(PCIDevice *pci_dev)
{
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);

    cxl_shm_unmap_all(s);
    cxl_shm_unhook(s);
    cxl_shm_db_fini(s);
    cxl_shm_mode_fini(s);
    cxl_shm_evict_stop(s);
    migrate_del_blocker(&s->migration_blocker);
    sc->parent_exit(pci_dev);
    s->parent_obj.hostvmem = NULL;
    object_ref(OBJECT(s));
    call_rcu1(&s->release_rcu, cxl_shm_release);
}

/*
 * A host reset is a host failure followed by a rejoin: the lines it had
 * not written back are lost (its queued clwb / clflushopt too), its image
 * is fetched again from the pool, and its generation grows, which the
 * other hosts see in the host table.  No thread of this process is
 * inside a line operation meanwhile, so none uses a lock of the old
 * generation or the image while they change: every vCPU is stopped or
 * outside guest code (cxl_shm_reset_hold()), the doorbell's thread
 * parked, the BQL held (timers, the mailbox, the monitor), and in
 * mode=timed the cache lock, under which every other access runs (DMA).
 */
static void cxl_shm_host_reset(CXLShmState *s)
{
    uint32_t i;

    for (i = 0; i < s->nr_queues; i++) {
        s->queues[i].len = 0;
        s->queues[i].whole_op = 0;
    }
    /* evictions start a new millisecond, on the pages held from now on */
    s->evict_left = 0;
    cxl_shm_db_pause(s);
    if (s->timed) {
        qemu_mutex_lock(&s->t.lock);
    }
    cxl_shm_pool_rejoin(s);
    if (s->mode_ops->reset) {
        s->mode_ops->reset(s);
    }
    /* a remote host's mode reset dropped its dirty lines, in place */
    if (!s->far) {
        cxl_shm_reload_image(s);
    }
    if (s->timed) {
        qemu_mutex_unlock(&s->t.lock);
    }
    cxl_shm_db_resume(s);
    qatomic_inc(&s->stats[CXLSHM_STAT_RESETS]);
    cxl_shm_pool_sync_stats(s);
    trace_cxl_shm_reset(s->host_id, s->generation);
}

/* Is every vCPU of this QEMU stopped (none can be inside the device)? */
static bool cxl_shm_vcpus_stopped(void)
{
    CPUState *cpu;

    CPU_FOREACH(cpu) {
        if (!cpu_is_stopped(cpu)) {
            return false;
        }
    }
    return true;
}

/*
 * A reset while vCPUs run (a secondary bus reset of the root port, from
 * a vCPU's config write or from the main loop): the host reset runs as
 * safe work of a vCPU, before it executes another instruction, while
 * every vCPU of this QEMU is outside guest code (the exclusive section
 * of async_safe_run_on_cpu), so none is inside the device; nothing waits
 * for it.  A machine reset that comes first supersedes it
 * (reset_pending).
 */
static void cxl_shm_reset_work(CPUState *cpu, run_on_cpu_data data)
{
    CXLShmState *s = data.host_ptr;

    bql_lock();
    if (DEVICE(s)->realized && s->reset_pending > 0) {
        s->reset_pending--;
        trace_cxl_shm_reset_deferred(s->host_id, cpu->cpu_index);
        cxl_shm_host_reset(s);
    }
    bql_unlock();
    object_unref(OBJECT(s));
}

/* Reset, enter phase: the doorbell's registers and ops (local state only) */
static void cxl_shm_reset_enter(Object *obj, ResetType type)
{
    CXLShmState *s = CXL_SHM(obj);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);

    if (sc->parent_phases.enter) {
        sc->parent_phases.enter(obj, type);
    }
    cxl_shm_db_reset(s);
}

/*
 * Reset, hold phase: after the parent's (a legacy reset, which its hold
 * phase runs), the mailbox restricted again, the decoders unmapped and
 * the host reset: at once when every vCPU is stopped (a machine reset),
 * else as a vCPU's safe work (cxl_shm_reset_work()); the reset never
 * pauses the vCPUs itself
 */
static void cxl_shm_reset_hold(Object *obj, ResetType type)
{
    CXLShmState *s = CXL_SHM(obj);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);

    if (sc->parent_phases.hold) {
        sc->parent_phases.hold(obj, type);
    }
    cxl_shm_restrict_mailbox(s);
    /* the parent clears the decoders without an uncommit */
    cxl_shm_unmap_all(s);
    /* the first reset is the machine's (or the hot-plug's) own */
    if (s->reset_once && (current_cpu || !cxl_shm_vcpus_stopped())) {
        s->reset_pending++;
        object_ref(OBJECT(s));
        async_safe_run_on_cpu(current_cpu ?: first_cpu, cxl_shm_reset_work,
                              RUN_ON_CPU_HOST_PTR(s));
        if (current_cpu) {
            cpu_exit(current_cpu);
        }
    } else if (s->reset_once) {
        s->reset_pending = 0;   /* this reset supersedes a queued one */
        cxl_shm_host_reset(s);
    }
    s->reset_once = true;
}

/*
 * The latency properties: settable at run time (qom-set), checked, and
 * reported in the CDAT.  latency-ns is mode=direct's charge per line of a
 * coherence operation; the others are mode=timed's.
 */
static void cxl_shm_get_latency(Object *obj, Visitor *v, const char *name,
                                void *opaque, Error **errp)
{
    uint32_t *ptr = object_field_prop_ptr(obj, opaque);
    uint32_t val = qatomic_read(ptr);

    visit_type_uint32(v, name, &val, errp);
}

static void cxl_shm_set_latency(Object *obj, Visitor *v, const char *name,
                                void *opaque, Error **errp)
{
    CXLShmState *s = CXL_SHM(obj);
    const Property *prop = opaque;
    uint32_t *ptr = object_field_prop_ptr(obj, prop);
    bool direct_prop = ptr == &s->latency_ns;
    uint32_t val;

    if (!visit_type_uint32(v, name, &val, errp)) {
        return;
    }
    if (val > CXLSHM_LATENCY_MAX) {
        error_setg(errp, "property '%s' is %u (allowed: [0, %u])",
                   name, val, CXLSHM_LATENCY_MAX);
        return;
    }
    if (DEVICE(obj)->realized && val && direct_prop == s->timed) {
        error_setg(errp, "property '%s' applies to mode=%s only",
                   name, direct_prop ? "direct" : "timed");
        return;
    }
    qatomic_set(ptr, val);
    if (DEVICE(obj)->realized) {
        cxl_shm_cdat_set_latency(s);
        trace_cxl_shm_latency(s->host_id, name, val);
    }
}

static void cxl_shm_set_default_latency(ObjectProperty *op,
                                        const Property *prop)
{
    object_property_set_default_uint(op, prop->defval.u);
}

static const PropertyInfo cxl_shm_prop_latency = {
    .type = "uint32",
    .description = "ns, 0..65535 (settable at run time)",
    .get = cxl_shm_get_latency,
    .set = cxl_shm_set_latency,
    .set_default_value = cxl_shm_set_default_latency,
    .realized_set_allowed = true,
};

/* Enum properties of the QAPI types that query-cxl-shm reports them as */
static const PropertyInfo cxl_shm_prop_mode = {
    .type = "CxlShmMode",
    .description = "direct (the pool mapped as RAM) or timed (every access "
                   "through the cache model)",
    .enum_table = &CxlShmMode_lookup,
    .get = qdev_propinfo_get_enum,
    .set = qdev_propinfo_set_enum,
    .set_default_value = qdev_propinfo_set_default_value_enum,
};

static const PropertyInfo cxl_shm_prop_writeback = {
    .type = "CxlShmWriteback",
    .description = "deferred (clwb/clflushopt take effect at the next "
                   "fence) or immediate (at the instruction)",
    .enum_table = &CxlShmWriteback_lookup,
    .get = qdev_propinfo_get_enum,
    .set = qdev_propinfo_set_enum,
    .set_default_value = qdev_propinfo_set_default_value_enum,
};

#define DEFINE_PROP_LATENCY(name, field, def) \
    DEFINE_PROP_UNSIGNED(name, CXLShmState, field, def, \
                         cxl_shm_prop_latency, uint32_t)

static const Property cxl_shm_props[] = {
    DEFINE_PROP_STRING("pool", CXLShmState, pool_path),
    DEFINE_PROP_STRING("pool-key", CXLShmState, pool_key),
    DEFINE_PROP_UINT32("remote-timeout-ms", CXLShmState, remote_timeout_ms,
                       1000),
    DEFINE_PROP_SIGNED("mode", CXLShmState, mode, CXL_SHM_MODE_DIRECT,
                       cxl_shm_prop_mode, CxlShmMode),
    DEFINE_PROP_SIZE("size", CXLShmState, size, 0),
    DEFINE_PROP_SIZE("coherent-size", CXLShmState, coherent_size, 0),
    DEFINE_PROP_UINT32("host-id", CXLShmState, host_id, 0),
    DEFINE_PROP_UINT32("max-hosts", CXLShmState, max_hosts, 2),
    DEFINE_PROP_LATENCY("latency-ns", latency_ns, 0),
    DEFINE_PROP_UINT32("bandwidth-mbs", CXLShmState, bandwidth_mbs, 16000),
    DEFINE_PROP_UINT32("pool-mode", CXLShmState, pool_mode, 0600),
    DEFINE_PROP_SIGNED("writeback", CXLShmState, writeback,
                       CXL_SHM_WRITEBACK_DEFERRED, cxl_shm_prop_writeback,
                       CxlShmWriteback),
    DEFINE_PROP_UINT32("evict-rate", CXLShmState, evict_rate, 0),
    DEFINE_PROP_UINT64("evict-seed", CXLShmState, evict_seed, 1),
    /* test-only fault points (cxl-shm-pool.c), refused outside qtest */
    DEFINE_PROP_STRING("x-test-kill-at", CXLShmState, test_kill_at),
    DEFINE_PROP_STRING("x-test-stop-at", CXLShmState, test_stop_at),
    /* mode=timed: docs/device.md says where each default comes from */
    DEFINE_PROP_SIZE("cache-size", CXLShmState, t.cache_size,
                     CXLSHM_TIMED_CACHE),
    DEFINE_PROP_UINT32("cache-ways", CXLShmState, t.cache_ways,
                       CXLSHM_TIMED_WAYS),
    DEFINE_PROP_UINT32("snoop-filter-entries", CXLShmState, t.sf_entries,
                       CXLSHM_TIMED_SF),
    DEFINE_PROP_LATENCY("hit-latency-ns", t.hit_ns, 20),
    DEFINE_PROP_LATENCY("miss-latency-ns", t.miss_ns, 250),
    DEFINE_PROP_LATENCY("writeback-latency-ns", t.wb_ns, 250),
    DEFINE_PROP_LATENCY("back-invalidate-latency-ns", t.bi_ns, 200),
    DEFINE_PROP_LATENCY("snoop-latency-ns", t.snoop_ns, 450),
};

static void cxl_shm_class_init(ObjectClass *oc, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(oc);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(oc);
    CXLType3Class *cvc = CXL_TYPE3_CLASS(oc);
    CXLShmClass *sc = CXL_SHM_CLASS(oc);
    ResettableClass *rc = RESETTABLE_CLASS(oc);

    sc->parent_realize = pc->realize;
    sc->parent_exit = pc->exit;
    pc->realize = cxl_shm_realize;
    pc->exit = cxl_shm_exit;
    resettable_class_set_parent_phases(rc, cxl_shm_reset_enter,
                                       cxl_shm_reset_hold, NULL,
                                       &sc->parent_phases);
    cvc->hdm_decoder_changed = cxl_shm_hdm_changed;
    cvc->set_cacheline = cxl_shm_set_cacheline;
    cvc->build_cdat_table = cxl_shm_build_cdat;
    cvc->free_cdat_table = cxl_shm_free_cdat;
    dc->desc = "CXL 3.0 multi-host shared memory device";
    /*
     * A host joins the pod with its machine and leaves with its QEMU
     * (docs/failure-model.md): the join, the direct map and the TCG hooks
     * are set up before any vCPU runs
     */
    dc->hotpluggable = false;
    device_class_set_props(dc, cxl_shm_props);
}

static const TypeInfo cxl_shm_info = {
    .name = TYPE_CXL_SHM,
    .parent = TYPE_CXL_TYPE3,
    .instance_size = sizeof(CXLShmState),
    .class_size = sizeof(CXLShmClass),
    .class_init = cxl_shm_class_init,
};

static void cxl_shm_register_types(void)
{
    type_register_static(&cxl_shm_info);
}

type_init(cxl_shm_register_types)

/*
 * qtest for cxlpod's cxl-shm device: identify, MMIO path, doorbell,
 * refused operations, two QEMUs on one pool, host failure and rejoin,
 * concurrent join, a table of refused configurations, CDAT, and under
 * TCG native clwb/clflushopt/clflush and cross-host atomics.  With
 * "-m perf" also a load-bandwidth benchmark (see docs/device.md).
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Run: QTEST_QEMU_BINARY=build/qemu/qemu-system-x86_64 \
 *      build/qemu/tests/qtest/cxl-shm-test [--tap -k]
 */

#include "qemu/osdep.h"
#include <sys/mount.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include "qemu/bswap.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "qobject/qstring.h"
/* the pool format (physically ../../hw-cxl from this file) */
#include "../../hw-cxl/cxl-shm-format.h"

#define KiB 1024ULL
#define MiB (1024ULL * 1024)

#define POOL_SIZE       (256 * MiB)
#define COH_SIZE        (64 * MiB)
#define META_SIZE       (2 * MiB)
#define LINE            64

/* PCI layout the test programs (no firmware runs under qtest) */
#define PXB_BUS         12
#define DEV_BUS         13
#define BAR0_ADDR       0xe0000000ULL
#define BAR5_ADDR       0xe0100000ULL
#define BAR2_ADDR       0xe0200000ULL   /* CXL device registers (mailbox) */

/* BAR5: the device's register map, A_CXLSHM_* (cxl-shm-regs.h) */
#define OP_WB           CXLSHM_OP_WRITEBACK
#define OP_INV          CXLSHM_OP_INVALIDATE
#define OP_FLUSH        CXLSHM_OP_FLUSH
#define CAP_NATIVE      R_CXLSHM_CAPS_NATIVE_MASK
#define CAP_ATOMICS     R_CXLSHM_CAPS_ATOMICS_MASK
#define CAP_DIRECT      R_CXLSHM_CAPS_DIRECT_MASK

typedef struct Host {
    QTestState *qts;
    uint64_t hpa;       /* where device memory appears */
} Host;

static char *tmpdir;

static uint32_t cfg_addr(int bus, int devfn, int off)
{
    return 0x80000000u | (bus << 16) | (devfn << 8) | (off & 0xfc);
}

static uint32_t cfg_readl(QTestState *qts, int bus, int devfn, int off)
{
    qtest_outl(qts, 0xcf8, cfg_addr(bus, devfn, off));
    return qtest_inl(qts, 0xcfc);
}

static void cfg_writel(QTestState *qts, int bus, int devfn, int off,
                       uint32_t val)
{
    qtest_outl(qts, 0xcf8, cfg_addr(bus, devfn, off));
    qtest_outl(qts, 0xcfc, val);
}

/* Debian's firmware (seabios, qemu-system-data) when present */
static const char *fw_args(void)
{
    if (g_file_test("/usr/share/seabios/bios-256k.bin", G_FILE_TEST_EXISTS)) {
        return "-L /usr/share/seabios -L /usr/share/qemu ";
    }
    return "";
}

static char *host_args_n(const char *pool, int host_id, int max_hosts,
                         const char *extra)
{
    return g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-shm,bus=rp0,id=shm0,pool=%s,size=%llu,"
        "coherent-size=%llu,host-id=%d,max-hosts=%d%s "
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        fw_args(), PXB_BUS, pool, POOL_SIZE, COH_SIZE, host_id, max_hosts,
        extra ? extra : "");
}

static char *host_args(const char *pool, int host_id, const char *extra)
{
    return host_args_n(pool, host_id, 4, extra);
}

/* Base of the CXL fixed memory window, from the memory tree */
static uint64_t find_window(QTestState *qts)
{
    g_autofree char *mtree = qtest_hmp(qts, "info mtree");
    const char *p = strstr(mtree, ": cxl-fixed-memory-region");
    const char *line;
    unsigned long long base = 0;

    g_assert_nonnull(p);
    for (line = p; line > mtree && line[-1] != '\n'; line--) {
        /* find the start of the line */
    }
    while (*line == ' ') {
        line++;
    }
    g_assert_cmpint(sscanf(line, "%llx-", &base), ==, 1);
    return base;
}

/* Find the HDM decoder capability in the component registers */
static uint64_t find_hdm(QTestState *qts)
{
    uint64_t cm = BAR0_ADDR + 0x1000;
    uint32_t hdr = qtest_readl(qts, cm);
    int n = hdr >> 24, i;

    g_assert_cmpint(hdr & 0xffff, ==, 1);
    for (i = 1; i <= n; i++) {
        uint32_t e = qtest_readl(qts, cm + 4 * i);

        if ((e & 0xffff) == 5) {
            return cm + (e >> 20);
        }
    }
    g_assert_not_reached();
}

/*
 * Bring the device up as firmware and the OS would: root port bus
 * numbers and memory window, BAR0 (component registers) and BAR5, then
 * commit HDM decoder 0 of the endpoint for the whole device at the
 * window base (the host bridge has one root port: passthrough).
 */
static void host_enable(Host *h, bool commit)
{
    QTestState *qts = h->qts;
    uint64_t hdm;
    uint32_t id;

    /* root port 12:00.0 */
    cfg_writel(qts, PXB_BUS, 0, 0x18,
               PXB_BUS | (DEV_BUS << 8) | (DEV_BUS << 16));
    cfg_writel(qts, PXB_BUS, 0, 0x20, 0xe0f0e000);
    cfg_writel(qts, PXB_BUS, 0, 0x04, 0x6);

    id = cfg_readl(qts, DEV_BUS, 0, 0);
    g_assert_cmphex(id, ==, 0x0d938086);
    cfg_writel(qts, DEV_BUS, 0, 0x10, BAR0_ADDR);
    cfg_writel(qts, DEV_BUS, 0, 0x14, 0);
    cfg_writel(qts, DEV_BUS, 0, 0x24, BAR5_ADDR);
    cfg_writel(qts, DEV_BUS, 0, 0x04, 0x6);

    h->hpa = find_window(qts);
    if (!commit) {
        return;
    }
    hdm = find_hdm(qts);
    qtest_writel(qts, hdm + 0x04, 0x2);                     /* enable */
    qtest_writel(qts, hdm + 0x10, h->hpa & 0xf0000000);     /* base lo */
    qtest_writel(qts, hdm + 0x14, h->hpa >> 32);            /* base hi */
    qtest_writel(qts, hdm + 0x18, POOL_SIZE & 0xf0000000);  /* size lo */
    qtest_writel(qts, hdm + 0x1c, POOL_SIZE >> 32);         /* size hi */
    qtest_writel(qts, hdm + 0x20, 1 << 9);                  /* commit */
    g_assert_cmphex(qtest_readl(qts, hdm + 0x20) & (1 << 10), ==, 1 << 10);
}

static void host_start(Host *h, const char *pool, int host_id, bool commit)
{
    g_autofree char *args = host_args(pool, host_id, NULL);

    h->qts = qtest_init(args);
    host_enable(h, commit);
}

static uint32_t r32(Host *h, uint32_t off)
{
    return qtest_readl(h->qts, BAR5_ADDR + off);
}

static uint64_t r64(Host *h, uint32_t off)
{
    return qtest_readq(h->qts, BAR5_ADDR + off);
}

/* Statistics counter @i (CXLSHM_STAT_*) */
static uint64_t rstat(Host *h, int i)
{
    return r64(h, A_CXLSHM_STAT(i));
}

/*
 * DB_STATUS once the doorbell is done: the device runs its ops in a
 * thread of its own, so it reads busy until then (bounded: a test that
 * waits longer than 60 s has found a device that hangs)
 */
static uint32_t db_wait(Host *h)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    uint32_t st;

    while ((st = r32(h, A_CXLSHM_DB_STATUS)) == CXLSHM_DB_BUSY) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(50);
    }
    return st;
}

static uint32_t doorbell(Host *h, uint32_t op, uint64_t off, uint64_t len)
{
    qtest_writeq(h->qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, off);
    qtest_writeq(h->qts, BAR5_ADDR + A_CXLSHM_DB_LEN, len);
    qtest_writel(h->qts, BAR5_ADDR + A_CXLSHM_DB_OP, op);
    return db_wait(h);
}

static uint64_t mem_rq(Host *h, uint64_t off)
{
    return qtest_readq(h->qts, h->hpa + off);
}

static void mem_wq(Host *h, uint64_t off, uint64_t v)
{
    qtest_writeq(h->qts, h->hpa + off, v);
}

static char *pool_path(const char *name)
{
    g_autofree char *p = g_build_filename(tmpdir, name, NULL);

    unlink(p);
    return g_steal_pointer(&p);
}

static void pool_pread(const char *pool, uint64_t off, void *buf, size_t len)
{
    int fd = open(pool, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, off), ==, len);
    close(fd);
}

static uint64_t pool_rq(const char *pool, uint64_t off)
{
    uint64_t v;

    pool_pread(pool, META_SIZE + off, &v, sizeof(v));
    return v;
}

/* Identify registers and the state of a fresh device */
static void test_identify(void)
{
    g_autofree char *pool = pool_path("identify.pool");
    Host h;
    struct stat st;

    host_start(&h, pool, 2, false);
    g_assert_cmphex(r32(&h, A_CXLSHM_MAGIC), ==, CXLSHM_MAGIC_VALUE);
    g_assert_cmpuint(r32(&h, A_CXLSHM_VERSION), ==, CXLSHM_VERSION_VALUE);
    g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_ID), ==, 2);
    g_assert_cmpuint(r32(&h, A_CXLSHM_MAX_HOSTS), ==, 4);
    g_assert_cmphex(r64(&h, A_CXLSHM_SIZE), ==, POOL_SIZE);
    g_assert_cmphex(r32(&h, A_CXLSHM_SIZE), ==, (uint32_t)POOL_SIZE);
    g_assert_cmphex(r32(&h, A_CXLSHM_SIZE + 4), ==, POOL_SIZE >> 32);
    g_assert_cmphex(r64(&h, A_CXLSHM_COHERENT_SIZE), ==, COH_SIZE);
    g_assert_cmpuint(r32(&h, A_CXLSHM_LINE_SIZE), ==, 64);
    g_assert_cmpuint(r32(&h, A_CXLSHM_MODE), ==, 0);
    g_assert_cmpuint(r32(&h, A_CXLSHM_LATENCY_NS), ==, 0);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS), ==, 0);       /* not mapped yet */
    g_assert_cmphex(r64(&h, A_CXLSHM_HOST_LIVE), ==, 1 << 2);
    g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_STATE(2)), ==, 1);
    g_assert_cmpuint(r64(&h, A_CXLSHM_HOST_GEN(2)), ==, 1);
    g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_STATE(0)), ==, 0);
    g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_STATE(7)), ==, 0);  /* beyond max */
    g_assert_cmpuint(r32(&h, 0xffc), ==, 0);            /* unknown */
    qtest_writel(h.qts, BAR5_ADDR + A_CXLSHM_MAGIC, 0);        /* RO */
    g_assert_cmphex(r32(&h, A_CXLSHM_MAGIC), ==, CXLSHM_MAGIC_VALUE);

    /* owner-only pool file, metadata + data */
    g_assert_cmpint(stat(pool, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0600);
    g_assert_cmpint(st.st_size, ==, cxlpool_file_size(POOL_SIZE, 4));

    /* committing the decoder maps the device: CAPS.DIRECT */
    host_enable(&h, true);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, CAP_DIRECT);
    mem_wq(&h, 0x1000, 0x1122334455667788ULL);
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0x1122334455667788ULL);
    g_assert_cmphex(pool_rq(pool, 0x1000), ==, 0x1122334455667788ULL);

    /* uncommit unmaps, commit maps again (same data: it is the pool) */
    {
        uint64_t hdm = find_hdm(h.qts);

        qtest_writel(h.qts, hdm + 0x20, 0);
        g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, 0);
        qtest_writel(h.qts, hdm + 0x20, 1 << 9);
        g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, CAP_DIRECT);
        g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0x1122334455667788ULL);
    }

    /*
     * The host joins the pod with its machine and leaves with its QEMU:
     * no hot-unplug (nor hot-plug) of the device
     */
    {
        QDict *rsp = qtest_qmp(h.qts, "{'execute': 'device_del', "
                               "'arguments': {'id': 'shm0'}}");
        QDict *err = qdict_get_qdict(rsp, "error");

        g_assert_nonnull(err);
        g_assert_nonnull(strstr(qdict_get_str(err, "desc"),
                                "does not support hotplugging"));
        qobject_unref(rsp);
        g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_STATE(2)), ==, 1);
    }

    /* a reset clears the decoders: the mapping goes away */
    qtest_qmp_assert_success(h.qts, "{'execute': 'system_reset'}");
    host_enable(&h, false);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS), ==, 0);
    {
        g_autofree char *mtree = qtest_hmp(h.qts, "info mtree");

        g_assert_null(strstr(mtree, "cxl-shm-direct"));
    }
    qtest_quit(h.qts);
}

/*
 * A guest that powers its root port's slot off unplugs the device:
 * pcie_cap_slot_write_config() does not ask it (hotpluggable=false stops
 * device_del only).  The unplug runs inside the guest's config write, in
 * an RCU read-side critical section, so the teardown must not wait for a
 * grace period there (it did: synchronize_rcu() in a reader never
 * returns).  The host then leaves the pod as a clean shutdown does, the
 * others keep its written-back data, and this QEMU goes on running.
 */
static void slot_power_off_hung(int sig)
{
    static const char msg[] = "slot-power-off: QEMU did not answer within "
                              "30 s after the slot power-off\n";

    if (write(2, msg, sizeof(msg) - 1) < 0) {
        /* nothing more to say */
    }
    abort();    /* libqtest's abort hook kills the QEMUs */
}

/* Power the slot of @h's root port off, as a guest can; watched (30 s) */
static void slot_power_off(Host *h)
{
    struct sigaction sa = { 0 }, old;
    QDict *rsp;
    uint32_t ctl;
    int cap;

    /* the root port's PCI Express capability (ID 10h) */
    cap = cfg_readl(h->qts, PXB_BUS, 0, 0x34) & 0xfc;
    while (cap && (cfg_readl(h->qts, PXB_BUS, 0, cap) & 0xff) != 0x10) {
        cap = (cfg_readl(h->qts, PXB_BUS, 0, cap) >> 8) & 0xfc;
    }
    g_assert_cmpint(cap, !=, 0);
    /* Slot Capabilities: power controller present */
    g_assert_cmphex(cfg_readl(h->qts, PXB_BUS, 0, cap + 0x14) & 0x2, ==, 0x2);
    qtest_qmp_assert_success(h->qts, "{'execute': 'qom-get', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'type'}}");

    /* Slot Control: power indicator off (9:8 = 11b), power off (bit 10) */
    ctl = cfg_readl(h->qts, PXB_BUS, 0, cap + 0x18) & 0xffff;
    sa.sa_handler = slot_power_off_hung;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    alarm(30);
    cfg_writel(h->qts, PXB_BUS, 0, cap + 0x18, ctl | 0x0700);
    rsp = qtest_qmp(h->qts, "{'execute': 'qom-get', 'arguments': "
                    "{'path': '/machine/peripheral/shm0', "
                    "'property': 'type'}}");
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    /* the device is gone */
    g_assert_nonnull(strstr(qdict_get_str(qdict_get_qdict(rsp, "error"),
                                          "desc"), "not found"));
    qobject_unref(rsp);
}

static void test_slot_power_off(void)
{
    g_autofree char *pool = pool_path("slot.pool");
    uint64_t nc = COH_SIZE + 0x40000;
    Host a, b;
    int i;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&b, 0x2000, 0x77);                       /* coherent window */
    mem_wq(&b, nc, 0x88);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, LINE), ==, 0);
    mem_wq(&b, nc + LINE, 0x99);                    /* dirty: lost */
    slot_power_off(&b);

    /* b left (its pool state goes after a grace period: poll up to 5 s) */
    for (i = 0; i < 500 && r32(&a, A_CXLSHM_HOST_STATE(1)) != 3; i++) {
        g_usleep(10000);
    }
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 3);
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 1);
    g_assert_cmphex(mem_rq(&a, 0x2000), ==, 0x77);
    g_assert_cmpuint(doorbell(&a, OP_INV, nc, 2 * LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0x88);
    g_assert_cmphex(mem_rq(&a, nc + LINE), ==, 0);
    qtest_qmp_assert_success(b.qts, "{'execute': 'query-status'}");
    qtest_quit(b.qts);

    /* QEMU quits at once after the power-off: the host still left */
    host_start(&b, pool, 1, true);
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 1);
    slot_power_off(&b);
    qtest_quit(b.qts);
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 3);
    qtest_quit(a.qts);
}

/*
 * A 2-way interleaved decoder is not mapped: accesses take the MMIO path
 * (cxl_type3_read/write), which must see the same image and pool.  With
 * one device behind a passthrough host bridge, HPA offset 2 * D reaches
 * DPA D for D a multiple of 256.
 */
static void test_mmio_path(void)
{
    g_autofree char *pool = pool_path("mmio.pool");
    uint64_t nc = COH_SIZE + 0x100, hdm;
    Host h;

    host_start(&h, pool, 0, false);
    hdm = find_hdm(h.qts);
    qtest_writel(h.qts, hdm + 0x10, h.hpa & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x14, h.hpa >> 32);
    qtest_writel(h.qts, hdm + 0x18, (2 * POOL_SIZE) & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x1c, (2 * POOL_SIZE) >> 32);
    qtest_writel(h.qts, hdm + 0x20, (1 << 9) | (1 << 4));   /* 2 ways */
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS), ==, 0);

    mem_wq(&h, 2 * 0x1000, 0x77);                   /* coherent */
    g_assert_cmphex(pool_rq(pool, 0x1000), ==, 0x77);
    mem_wq(&h, 2 * nc, 0x88);                       /* non-coherent */
    g_assert_cmphex(mem_rq(&h, 2 * nc), ==, 0x88);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0);
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0x88);
    qtest_quit(h.qts);
}

/*
 * Reprogramming a committed decoder (base, then DPA skip) without
 * uncommitting it: the direct mapping follows the registers, as the MMIO
 * path does, so device memory appears where the decoder now says and
 * nowhere else.  A stale mapping at the old base would still show (and
 * take stores into) the pool there.
 */
static void test_hdm_reprogram(void)
{
    g_autofree char *pool = pool_path("reprogram.pool");
    uint64_t hdm, old_hpa, new_hpa;
    Host h;

    host_start(&h, pool, 0, true);
    hdm = find_hdm(h.qts);
    old_hpa = h.hpa;
    new_hpa = old_hpa + POOL_SIZE;
    mem_wq(&h, 0x1000, 0x1111222233334444ULL);
    g_assert_cmphex(pool_rq(pool, 0x1000), ==, 0x1111222233334444ULL);

    /* base: the decoder moves up by the device's size, still committed */
    qtest_writel(h.qts, hdm + 0x10, new_hpa & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x14, new_hpa >> 32);
    g_assert_cmphex(qtest_readl(h.qts, hdm + 0x20) & (1 << 10), ==, 1 << 10);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, CAP_DIRECT);
    g_assert_cmphex(qtest_readq(h.qts, new_hpa + 0x1000), ==,
                    0x1111222233334444ULL);
    qtest_writeq(h.qts, new_hpa + 0x2000, 0x5555666677778888ULL);
    g_assert_cmphex(pool_rq(pool, 0x2000), ==, 0x5555666677778888ULL);
    /* the old base decodes nothing now: no pool data, stores go nowhere */
    g_assert_cmphex(qtest_readq(h.qts, old_hpa + 0x1000), !=,
                    0x1111222233334444ULL);
    qtest_writeq(h.qts, old_hpa + 0x3000, 0x9999aaaabbbbccccULL);
    g_assert_cmphex(pool_rq(pool, 0x3000), ==, 0);
    {
        /* each address space prints the tree: look for ranges, not counts */
        g_autofree char *mtree = qtest_hmp(h.qts, "info mtree");
        g_autofree char *at_new = g_strdup_printf(
            "%016" PRIx64 "-%016" PRIx64 " (prio 1, ram): alias cxl-shm-direct",
            new_hpa, (uint64_t)(new_hpa + POOL_SIZE - 1));
        g_autofree char *at_old = g_strdup_printf(
            "%016" PRIx64 "-%016" PRIx64 " (prio 1, ram): alias cxl-shm-direct",
            old_hpa, (uint64_t)(old_hpa + POOL_SIZE - 1));

        g_assert_nonnull(strstr(mtree, at_new));
        g_assert_null(strstr(mtree, at_old));
    }

    /* DPA skip of the whole device: nothing left to decode, unmapped */
    qtest_writel(h.qts, hdm + 0x24, POOL_SIZE & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x28, POOL_SIZE >> 32);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, 0);
    qtest_writeq(h.qts, new_hpa + 0x4000, 0x1234ULL);
    g_assert_cmphex(pool_rq(pool, 0x4000), ==, 0);
    g_assert_cmphex(pool_rq(pool, 0x1000), ==, 0x1111222233334444ULL);

    /* back to no skip: mapped again, the same pool */
    qtest_writel(h.qts, hdm + 0x24, 0);
    qtest_writel(h.qts, hdm + 0x28, 0);
    g_assert_cmpuint(r32(&h, A_CXLSHM_CAPS) & CAP_DIRECT, ==, CAP_DIRECT);
    g_assert_cmphex(qtest_readq(h.qts, new_hpa + 0x2000), ==,
                    0x5555666677778888ULL);
    qtest_quit(h.qts);
}

/*
 * Two decoders on a 512 MiB device: decoder 1's DPA range starts where
 * decoder 0's ends, so growing decoder 0 to the whole device leaves
 * decoder 1 nothing to decode: its mapping must go, not keep pointing
 * at the old DPA.
 */
static void test_hdm_reprogram_two(void)
{
    g_autofree char *pool = pool_path("reprogram2.pool");
    g_autofree char *args = g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-shm,bus=rp0,id=shm0,pool=%s,size=%llu,"
        "coherent-size=%llu,host-id=0,max-hosts=4 "
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        fw_args(), PXB_BUS, pool, 2 * POOL_SIZE, COH_SIZE);
    uint64_t hdm, hpa1, mib256 = POOL_SIZE;
    g_autofree char *at1 = NULL;
    Host h;

    h.qts = qtest_init(args);
    host_enable(&h, false);
    hdm = find_hdm(h.qts);
    qtest_writel(h.qts, hdm + 0x04, 0x2);
    qtest_writel(h.qts, hdm + 0x10, h.hpa & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x14, h.hpa >> 32);
    qtest_writel(h.qts, hdm + 0x18, mib256 & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x1c, mib256 >> 32);
    qtest_writel(h.qts, hdm + 0x20, 1 << 9);
    hpa1 = h.hpa + 2 * mib256;
    qtest_writel(h.qts, hdm + 0x30, hpa1 & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x34, hpa1 >> 32);
    qtest_writel(h.qts, hdm + 0x38, mib256 & 0xf0000000);
    qtest_writel(h.qts, hdm + 0x3c, mib256 >> 32);
    qtest_writel(h.qts, hdm + 0x40, 1 << 9);
    g_assert_cmphex(qtest_readl(h.qts, hdm + 0x40) & (1 << 10), ==, 1 << 10);
    /* decoder 1 serves DPA [256 MiB, 512 MiB) (non-coherent: the image) */
    qtest_writeq(h.qts, hpa1 + 0x1000, 0x0102030405060708ULL);
    g_assert_cmphex(qtest_readq(h.qts, hpa1 + 0x1000), ==,
                    0x0102030405060708ULL);
    at1 = g_strdup_printf("%016" PRIx64 "-%016" PRIx64
                          " (prio 1, ram): alias cxl-shm-direct", hpa1,
                          (uint64_t)(hpa1 + mib256 - 1));
    {
        g_autofree char *mtree = qtest_hmp(h.qts, "info mtree");

        g_assert_nonnull(strstr(mtree, at1));
    }

    /* decoder 0 grows to the whole device while both are committed */
    qtest_writel(h.qts, hdm + 0x18, (2 * mib256) & 0xf0000000);
    {
        g_autofree char *mtree = qtest_hmp(h.qts, "info mtree");

        g_assert_null(strstr(mtree, at1));
    }
    /* decoder 1's range decodes nothing now: no data, stores go nowhere */
    g_assert_cmphex(qtest_readq(h.qts, hpa1 + 0x1000), !=,
                    0x0102030405060708ULL);
    qtest_writeq(h.qts, hpa1 + 0x2000, 0x1111ULL);
    /* decoder 0 now reaches the upper half: the line stored, not the new */
    g_assert_cmphex(qtest_readq(h.qts, h.hpa + mib256 + 0x1000), ==,
                    0x0102030405060708ULL);
    g_assert_cmphex(qtest_readq(h.qts, h.hpa + mib256 + 0x2000), ==, 0);
    qtest_quit(h.qts);
}

/* Every doorbell operation on both areas */
static void test_doorbell(void)
{
    g_autofree char *pool = pool_path("doorbell.pool");
    uint64_t nc = COH_SIZE + 0x10000;
    Host h;

    host_start(&h, pool, 0, true);

    /* writeback: exactly the dirty lines */
    mem_wq(&h, nc, 0xaaaa);
    mem_wq(&h, nc + 3 * LINE + 8, 0xbbbb);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0);
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, 8 * LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 2);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0xaaaa);
    g_assert_cmphex(pool_rq(pool, nc + 3 * LINE + 8), ==, 0xbbbb);
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, 8 * LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 0);

    /* invalidate drops every line of the range, writing dirty ones back */
    mem_wq(&h, nc + LINE, 0xcccc);
    g_assert_cmpuint(doorbell(&h, OP_INV, nc, 4 * LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 4);
    g_assert_cmphex(pool_rq(pool, nc + LINE), ==, 0xcccc);
    g_assert_cmphex(mem_rq(&h, nc + LINE), ==, 0xcccc);

    /* flush = writeback + invalidate */
    mem_wq(&h, nc + 2 * LINE, 0xdddd);
    g_assert_cmpuint(doorbell(&h, OP_FLUSH, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc + 2 * LINE), ==, 0xdddd);

    /* coherent window: stores reach the pool at once, ops touch nothing */
    mem_wq(&h, 0x40, 0xeeee);
    g_assert_cmphex(pool_rq(pool, 0x40), ==, 0xeeee);
    g_assert_cmpuint(doorbell(&h, OP_FLUSH, 0, 64 * LINE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 0);
    /* a range across the boundary only touches the non-coherent part */
    g_assert_cmpuint(doorbell(&h, OP_INV, COH_SIZE - 4 * LINE, 8 * LINE),
                     ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 4);

    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_OPS), ==, 2);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_INV_OPS), ==, 2);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_FLUSH_OPS), ==, 2);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_LINES), ==, 4);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_INV_LINES), ==, 9);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_NATIVE_OPS), ==, 0);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_ERRORS), ==, 0);

    /* the whole device in one operation */
    g_assert_cmpuint(doorbell(&h, OP_FLUSH, 0, POOL_SIZE), ==, 0);
    g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==,
                     (POOL_SIZE - COH_SIZE) / LINE);

    /* latency: charged per line touched, changed at run time over QMP */
    qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'latency-ns', 'value': 10000}}");
    g_assert_cmpuint(r32(&h, A_CXLSHM_LATENCY_NS), ==, 10000);
    {
        int64_t t0 = g_get_monotonic_time();

        g_assert_cmpuint(doorbell(&h, OP_WB, nc, 1000 * LINE), ==, 0);
        /* 1000 lines x 10 us */
        g_assert_cmpint(g_get_monotonic_time() - t0, >=, 10000);
    }
    /* and counted, as in timed mode (STAT_CHARGED_NS: both modes) */
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_CHARGED_NS), ==, 1000 * 10000);

    qtest_quit(h.qts);
}

/* Refused operations set a status and change nothing */
static void test_refused_ops(void)
{
    g_autofree char *pool = pool_path("refused-ops.pool");
    uint64_t nc = COH_SIZE + 0x20000;
    static const struct {
        uint32_t op;
        uint64_t off, len;
        uint32_t status;
    } bad[] = {
        { OP_WB, POOL_SIZE, LINE, 1 },                  /* out of range */
        { OP_FLUSH, POOL_SIZE - LINE, 2 * LINE, 1 },    /* past the end */
        { OP_INV, 0xffffffffffffffc0ULL, 2 * LINE, 1 }, /* overflow */
        { OP_WB, COH_SIZE + 0x20008, LINE, 2 },         /* offset unaligned */
        { OP_WB, COH_SIZE + 0x20000, 32, 2 },           /* len unaligned */
        { OP_FLUSH, COH_SIZE + 0x20000, 0, 3 },         /* zero length */
        { 0, COH_SIZE + 0x20000, LINE, 4 },             /* reserved op */
        { 4, COH_SIZE + 0x20000, LINE, 4 },
        { 0xffffffff, COH_SIZE + 0x20000, LINE, 4 },
    };
    Host h;
    int i;

    host_start(&h, pool, 0, true);
    mem_wq(&h, nc, 0x1234);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        g_assert_cmpuint(doorbell(&h, bad[i].op, bad[i].off, bad[i].len), ==,
                         bad[i].status);
        g_assert_cmpuint(r64(&h, A_CXLSHM_DB_LINES), ==, 0);
        g_assert_cmpuint(rstat(&h, CXLSHM_STAT_ERRORS), ==, i + 1);
        /* nothing written back, nothing dropped */
        g_assert_cmphex(pool_rq(pool, nc), ==, 0);
        g_assert_cmphex(mem_rq(&h, nc), ==, 0x1234);
    }
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_OPS) +
                     rstat(&h, CXLSHM_STAT_INV_OPS) +
                     rstat(&h, CXLSHM_STAT_FLUSH_OPS), ==, 0);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_LINES), ==, 0);
    /* a good op after the refused ones works */
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0x1234);
    qtest_quit(h.qts);
}

/*
 * The doorbell's completion interrupt (docs/interfaces.md, DB_CTRL): the
 * test enables MSI-X as a driver would, BAR4 holding the table and the
 * PBA (cxl-type3's), and finds them from the MSI-X capability
 */
#define BAR4_ADDR       0xe0300000ULL
#define MSIX_RAM        0x100000ULL     /* where an unmasked vector writes */

typedef struct Msix {
    uint64_t table;     /* the vector table, in BAR4 */
    uint64_t pba;       /* the pending bits, in BAR4 */
} Msix;

static void msix_setup(Host *h, Msix *m)
{
    uint32_t cap = cfg_readl(h->qts, DEV_BUS, 0, 0x34) & 0xfc;
    uint32_t dw = 0;

    while (cap) {
        dw = cfg_readl(h->qts, DEV_BUS, 0, cap);
        if ((dw & 0xff) == 0x11) {
            break;
        }
        cap = (dw >> 8) & 0xfc;
    }
    g_assert_cmpuint(cap, !=, 0);
    /* table and PBA in BAR4 (BIR 4), whose address the test chooses */
    g_assert_cmpuint(cfg_readl(h->qts, DEV_BUS, 0, cap + 4) & 7, ==, 4);
    g_assert_cmpuint(cfg_readl(h->qts, DEV_BUS, 0, cap + 8) & 7, ==, 4);
    cfg_writel(h->qts, DEV_BUS, 0, 0x20, BAR4_ADDR);
    m->table = BAR4_ADDR + (cfg_readl(h->qts, DEV_BUS, 0, cap + 4) & ~7u);
    m->pba = BAR4_ADDR + (cfg_readl(h->qts, DEV_BUS, 0, cap + 8) & ~7u);
    /* the doorbell's vector exists */
    g_assert_cmpuint((dw >> 16) & 0x7ff, >=, CXLSHM_DB_MSIX_VECTOR);
    /* MSI-X enable, the function not masked */
    cfg_writel(h->qts, DEV_BUS, 0, cap, (dw & 0x3fffffff) | (1u << 31));
}

/* Vector @v's entry: a write of @data to @addr, masked or not */
static void msix_vector(Host *h, Msix *m, int v, uint64_t addr,
                        uint32_t data, bool masked)
{
    uint64_t e = m->table + 16 * v;

    qtest_writel(h->qts, e, (uint32_t)addr);
    qtest_writel(h->qts, e + 4, addr >> 32);
    qtest_writel(h->qts, e + 8, data);
    qtest_writel(h->qts, e + 12, masked);
}

static bool msix_pending(Host *h, Msix *m, int v)
{
    return qtest_readl(h->qts, m->pba + 4 * (v / 32)) & (1u << (v % 32));
}

/* Is vector @v pending within @ms milliseconds (the main loop raises it)? */
static bool msix_pending_within(Host *h, Msix *m, int v, int ms)
{
    gint64 end = g_get_monotonic_time() + ms * 1000;

    do {
        if (msix_pending(h, m, v)) {
            return true;
        }
        g_usleep(1000);
    } while (g_get_monotonic_time() < end);
    return false;
}

/* Ring @op without waiting: DB_STATUS is the test's to read */
static void db_ring(Host *h, uint32_t op, uint64_t off, uint64_t len)
{
    qtest_writeq(h->qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, off);
    qtest_writeq(h->qts, BAR5_ADDR + A_CXLSHM_DB_LEN, len);
    qtest_writel(h->qts, BAR5_ADDR + A_CXLSHM_DB_OP, op);
}

/*
 * DB_CTRL.IRQ set: an op completing raises the doorbell's vector, no
 * earlier than DB_STATUS reads it done, for an op run in its DB_OP write
 * (one line), one run by the doorbell's thread (4 MiB), one whose
 * latency delays it, and a refused one; with the vector masked it is
 * left pending, unmasked its message is written.  A device reset clears
 * DB_CTRL.
 */
static void test_doorbell_irq(void)
{
    g_autofree char *pool = pool_path("doorbell-irq.pool");
    const int v = CXLSHM_DB_MSIX_VECTOR;
    uint64_t nc = COH_SIZE + 0x10000;
    Msix m;
    Host h;
    int i;

    host_start(&h, pool, 0, true);
    msix_setup(&h, &m);
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb, true);
    qtest_writel(h.qts, BAR5_ADDR + A_CXLSHM_DB_CTRL, 0xffffffff);
    /* only the defined bit sticks */
    g_assert_cmphex(r32(&h, A_CXLSHM_DB_CTRL), ==,
                    R_CXLSHM_DB_CTRL_IRQ_MASK);
    g_assert_false(msix_pending(&h, &m, v));

    /* inline (one line), by the thread (4 MiB: more than one piece) */
    for (i = 0; i < 2; i++) {
        uint64_t len = i ? 4 * MiB : LINE;

        mem_wq(&h, nc, 0x1000 + i);
        db_ring(&h, OP_WB, nc, len);
        g_assert_true(msix_pending_within(&h, &m, v, 10000));
        g_assert_cmpuint(r32(&h, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
        g_assert_cmphex(pool_rq(pool, nc), ==, 0x1000 + i);
        /* the PBA bit stays until the vector is unmasked */
        g_assert_true(msix_pending(&h, &m, v));
        msix_vector(&h, &m, v, MSIX_RAM, 0xdb, false);
        g_assert_false(msix_pending(&h, &m, v));
        g_assert_cmphex(qtest_readl(h.qts, MSIX_RAM), ==, 0xdb);
        qtest_writel(h.qts, MSIX_RAM, 0);
        msix_vector(&h, &m, v, MSIX_RAM, 0xdb, true);
    }

    /* unmasked: the message is written when the op completes */
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb01, false);
    g_assert_cmpuint(doorbell(&h, OP_FLUSH, nc, LINE), ==, 0);
    for (i = 0; i < 10000 && qtest_readl(h.qts, MSIX_RAM) != 0xdb01; i++) {
        g_usleep(1000);
    }
    g_assert_cmphex(qtest_readl(h.qts, MSIX_RAM), ==, 0xdb01);
    g_assert_false(msix_pending(&h, &m, v));
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb, true);

    /* a latency of 2000 lines x 60 us: not before DB_STATUS is done */
    qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'latency-ns', 'value': 60000}}");
    db_ring(&h, OP_WB, nc, 2000 * LINE);
    g_assert_cmpuint(r32(&h, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);
    g_assert_true(msix_pending_within(&h, &m, v, 10000));
    g_assert_cmpuint(r32(&h, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb, false);
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb, true);
    qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'latency-ns', 'value': 0}}");

    /* a refused op completes too */
    db_ring(&h, 0, nc, LINE);
    g_assert_true(msix_pending_within(&h, &m, v, 10000));
    g_assert_cmpuint(r32(&h, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BADOP);

    /* the other vectors stay quiet */
    for (i = 0; i < 8; i++) {
        g_assert_true(i == v || !msix_pending(&h, &m, i));
    }

    /* a device reset clears DB_CTRL */
    qtest_qmp_assert_success(h.qts, "{'execute': 'system_reset'}");
    host_enable(&h, true);
    g_assert_cmphex(r32(&h, A_CXLSHM_DB_CTRL), ==, 0);
    qtest_quit(h.qts);
}

/*
 * DB_CTRL.IRQ clear (as after a reset): MSI-X enabled and the vector
 * masked, no op leaves it pending; set later, the next op does
 */
static void test_doorbell_irq_off(void)
{
    g_autofree char *pool = pool_path("doorbell-irq-off.pool");
    const int v = CXLSHM_DB_MSIX_VECTOR;
    uint64_t nc = COH_SIZE + 0x10000;
    Msix m;
    Host h;

    host_start(&h, pool, 0, true);
    msix_setup(&h, &m);
    msix_vector(&h, &m, v, MSIX_RAM, 0xdb, true);
    g_assert_cmphex(r32(&h, A_CXLSHM_DB_CTRL), ==, 0);
    mem_wq(&h, nc, 0x2000);
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, LINE), ==, 0);
    g_assert_cmpuint(doorbell(&h, OP_FLUSH, nc, 4 * MiB), ==, 0);
    g_assert_cmpuint(doorbell(&h, 0, nc, LINE), ==, CXLSHM_DB_BADOP);
    g_assert_false(msix_pending_within(&h, &m, v, 200));

    /* enabled after an op completed: nothing owed for that one */
    qtest_writel(h.qts, BAR5_ADDR + A_CXLSHM_DB_CTRL, 1);
    g_assert_false(msix_pending_within(&h, &m, v, 200));
    g_assert_cmpuint(doorbell(&h, OP_WB, nc, LINE), ==, 0);
    g_assert_true(msix_pending_within(&h, &m, v, 10000));
    qtest_quit(h.qts);
}

/* Two QEMUs on one pool: the visibility matrix */
static void test_two_hosts(void)
{
    g_autofree char *pool = pool_path("two.pool");
    uint64_t nc = COH_SIZE + 0x40000;
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 3);
    g_assert_cmphex(r64(&b, A_CXLSHM_HOST_LIVE), ==, 3);

    /* coherent window: seen by the other host at once */
    mem_wq(&a, 0x2000, 0xc0ffee);
    g_assert_cmphex(mem_rq(&b, 0x2000), ==, 0xc0ffee);
    mem_wq(&b, 0x2008, 0xbeef);
    g_assert_cmphex(mem_rq(&a, 0x2008), ==, 0xbeef);

    /* non-coherent: needs writeback by the writer AND invalidate by reader */
    g_assert_cmphex(mem_rq(&b, nc), ==, 0);         /* b caches the line */
    mem_wq(&a, nc, 0xa1);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0);
    g_assert_cmpuint(doorbell(&b, OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0);         /* not written back */
    g_assert_cmpuint(doorbell(&a, OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0);         /* stale: b's image */
    g_assert_cmpuint(doorbell(&b, OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0xa1);      /* now visible */

    /* writeback of a line a did not change never clobbers b's data */
    mem_wq(&b, nc + LINE, 0xb2);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + LINE, LINE), ==, 0);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc, 16 * LINE), ==, 0);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LINES), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + LINE), ==, 0xb2);
    g_assert_cmpuint(doorbell(&a, OP_INV, nc + LINE, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc + LINE), ==, 0xb2);

    /* false sharing clobbers: the whole line is written back */
    mem_wq(&a, nc + 2 * LINE, 0xa3);                /* bytes 0..7 */
    mem_wq(&b, nc + 2 * LINE + 8, 0xb3);            /* bytes 8..15 */
    g_assert_cmpuint(doorbell(&a, OP_WB, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + 2 * LINE), ==, 0);   /* a's lost */
    g_assert_cmphex(pool_rq(pool, nc + 2 * LINE + 8), ==, 0xb3);
    g_assert_cmpuint(doorbell(&a, OP_FLUSH, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc + 2 * LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc + 2 * LINE + 8), ==, 0xb3);

    qtest_quit(b.qts);
    /* a clean exit leaves the slot "left" */
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 3);
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 1);
    qtest_quit(a.qts);
}

/* mode=timed (docs/device.md, "Timed mode"); no latency unless asked */
#define TIMED           ",mode=timed,hit-latency-ns=0,miss-latency-ns=0," \
                        "writeback-latency-ns=0,back-invalidate-latency-ns=0," \
                        "snoop-latency-ns=0"

/*
 * The event @name the device emitted before now, which must be there:
 * a QMP round trip after the accesses brings every event they made
 */
static QDict *qmp_event_after(Host *h, const char *name)
{
    QDict *ev;

    qtest_qmp_assert_success(h->qts, "{ 'execute': 'query-status' }");
    ev = qtest_qmp_event_ref(h->qts, name);
    g_assert_nonnull(ev);
    return ev;
}

static void timed_start(Host *h, const char *pool, int host_id,
                        const char *extra)
{
    g_autofree char *opts = g_strdup_printf(TIMED "%s", extra ?: "");
    g_autofree char *args = host_args(pool, host_id, opts);

    h->qts = qtest_init(args);
    host_enable(h, true);
    g_assert_cmpuint(r32(h, A_CXLSHM_MODE), ==, 1);
}

/*
 * Pool format 4: a pod of 256 host slots with hosts 130, 194 and 255 (the
 * last words of HOST_LIVE, all 8 host bits of a lock tag; 130 and 194
 * share the snoop filter's holders bit 2, as hosts of one class of a
 * coarse filter do).  Each sees the others in the host table, a
 * non-coherent line goes from 255 to 130 by writeback and invalidate,
 * and in the coherent window 255's store makes the copies of both hosts
 * of class 2 stale: each of them misses next, although the other's read
 * has set their shared bit again.  Then class 2 alone: 130's store
 * back-invalidates its own class (194's copy), but not again once it
 * owns the line; 194's reset keeps the class's bit, so its next read
 * snoops 130's modified copy; and once 130 is killed owning the line,
 * 194 no longer snoops it (each failed on the device before its fix).
 */
static void test_wide_pod(void)
{
    g_autofree char *pool = pool_path("wide.pool");
    g_autofree char *opts = g_strdup_printf(TIMED ",snoop-filter-entries="
                                            "8192");
    uint64_t nc = COH_SIZE + 0x40000, l = 0x1000, hits, misses, bi, snoops;
    const int ids[3] = { 130, 194, 255 };
    struct stat st;
    int status;
    pid_t pid;
    Host h[3];
    int i;

    for (i = 0; i < 3; i++) {
        g_autofree char *args = host_args_n(pool, ids[i], 256, opts);

        h[i].qts = qtest_init(args);
        host_enable(&h[i], true);
    }
    g_assert_cmpuint(r32(&h[0], A_CXLSHM_MAX_HOSTS), ==, 256);
    g_assert_cmphex(r64(&h[0], A_CXLSHM_HOST_LIVE_WORD(0)), ==, 0);
    g_assert_cmphex(r64(&h[0], A_CXLSHM_HOST_LIVE_WORD(1)), ==, 0);
    g_assert_cmphex(r64(&h[0], A_CXLSHM_HOST_LIVE_WORD(2)), ==, 1ULL << 2);
    g_assert_cmphex(r64(&h[0], A_CXLSHM_HOST_LIVE_WORD(3)), ==,
                    1ULL << 2 | 1ULL << 63);
    g_assert_cmpuint(r32(&h[2], A_CXLSHM_HOST_STATE(130)), ==, 1);
    g_assert_cmpuint(r64(&h[0], A_CXLSHM_HOST_GEN(255)), ==, 1);
    g_assert_cmpuint(r32(&h[0], A_CXLSHM_HOST_STATE(129)), ==, 0);
    g_assert_cmpint(stat(pool, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, cxlpool_file_size(POOL_SIZE, 256));

    /* non-coherent: written back by 255, stale in 130 until invalidated */
    g_assert_cmphex(mem_rq(&h[0], nc), ==, 0);
    mem_wq(&h[2], nc, 0xc255);
    g_assert_cmpuint(doorbell(&h[2], OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0xc255);
    g_assert_cmphex(mem_rq(&h[0], nc), ==, 0);
    g_assert_cmpuint(doorbell(&h[0], OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&h[0], nc), ==, 0xc255);

    /* coherent: 130 and 194 hold the line, 255 stores */
    g_assert_cmphex(mem_rq(&h[0], l), ==, 0);
    g_assert_cmphex(mem_rq(&h[1], l), ==, 0);
    g_assert_cmphex(mem_rq(&h[1], l + 8), ==, 0);
    hits = rstat(&h[1], CXLSHM_STAT_HITS);
    g_assert_cmpuint(hits, ==, 1);
    mem_wq(&h[2], l, 5);
    g_assert_cmpuint(rstat(&h[2], CXLSHM_STAT_BACK_INVAL), ==, 1);
    hits = rstat(&h[0], CXLSHM_STAT_HITS);
    misses = rstat(&h[0], CXLSHM_STAT_MISSES);
    g_assert_cmphex(mem_rq(&h[0], l), ==, 5);       /* a snoop of 255's */
    g_assert_cmpuint(rstat(&h[0], CXLSHM_STAT_HITS), ==, hits);
    g_assert_cmpuint(rstat(&h[0], CXLSHM_STAT_MISSES), ==, misses + 1);
    g_assert_cmpuint(rstat(&h[0], CXLSHM_STAT_SNOOPS), ==, 1);
    hits = rstat(&h[1], CXLSHM_STAT_HITS);
    misses = rstat(&h[1], CXLSHM_STAT_MISSES);
    g_assert_cmphex(mem_rq(&h[1], l), ==, 5);       /* stale too: a miss */
    g_assert_cmpuint(rstat(&h[1], CXLSHM_STAT_HITS), ==, hits);
    g_assert_cmpuint(rstat(&h[1], CXLSHM_STAT_MISSES), ==, misses + 1);
    g_assert_cmphex(mem_rq(&h[1], l + 8), ==, 0);   /* then a hit */
    g_assert_cmpuint(rstat(&h[1], CXLSHM_STAT_HITS), ==, hits + 1);

    qtest_quit(h[2].qts);
    g_assert_cmpuint(r32(&h[0], A_CXLSHM_HOST_STATE(255)), ==, 3);
    g_assert_cmphex(r64(&h[0], A_CXLSHM_HOST_LIVE_WORD(3)), ==, 1ULL << 2);

    /*
     * Class 2 alone holds the line (255 left): 130's store cannot tell
     * its own copy from 194's, so the class is back-invalidated once
     */
    bi = rstat(&h[0], CXLSHM_STAT_BACK_INVAL);
    mem_wq(&h[0], l, 6);
    g_assert_cmpuint(rstat(&h[0], CXLSHM_STAT_BACK_INVAL), ==, bi + 1);
    /* ... but not once it owns the line: no other copy can exist */
    mem_wq(&h[0], l + 8, 6);
    g_assert_cmpuint(rstat(&h[0], CXLSHM_STAT_BACK_INVAL), ==, bi + 1);

    /*
     * 194's reset keeps class 2's bit while 130 is live: 130's modified
     * copy is still snooped by 194's next read
     */
    snoops = rstat(&h[1], CXLSHM_STAT_SNOOPS);
    qtest_qmp_assert_success(h[1].qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(h[1].qts, "RESET");
    host_enable(&h[1], true);
    g_assert_cmphex(mem_rq(&h[1], l), ==, 6);
    g_assert_cmpuint(rstat(&h[1], CXLSHM_STAT_SNOOPS), ==, snoops + 1);

    /*
     * 130 owns the line again and dies: 194, of its class, still holds
     * the class's bit, but a dead owner is snooped no more
     */
    mem_wq(&h[0], l, 7);
    pid = qtest_pid(h[0].qts);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    qtest_remove_abrt_handler(h[0].qts);
    g_assert_cmpuint(r32(&h[1], A_CXLSHM_HOST_STATE(130)), ==, 2);
    snoops = rstat(&h[1], CXLSHM_STAT_SNOOPS);
    g_assert_cmphex(mem_rq(&h[1], l), ==, 7);
    g_assert_cmpuint(rstat(&h[1], CXLSHM_STAT_SNOOPS), ==, snoops);
    qtest_quit(h[1].qts);
}

/*
 * Non-coherent area: a 64 KiB 16-way cache has 64 sets, so lines 4 KiB
 * apart share a set.  A store reaches the pool without any flush once
 * capacity pressure evicts its line; a reader's stale copy is counted
 * as a stale read on each load and turns fresh once it is evicted.
 */
static void test_timed_noncoherent(void)
{
    g_autofree char *pool = pool_path("timed-nc.pool");
    QDict *ev, *data;
    uint64_t nc = COH_SIZE + 0x10000;
    Host a, b;
    int k;

    timed_start(&a, pool, 0, ",cache-size=64K");
    timed_start(&b, pool, 1, ",cache-size=64K");

    g_assert_cmphex(mem_rq(&b, nc), ==, 0);         /* b caches the line */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_MISSES), ==, 1);
    mem_wq(&a, nc, 0xa1);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0);      /* dirty in a's cache */
    g_assert_cmphex(mem_rq(&a, nc), ==, 0xa1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_HITS), ==, 1);

    /* 16 more lines of the set: a's LRU line (nc) is evicted, written */
    for (k = 1; k <= 16; k++) {
        mem_wq(&a, nc + k * 4096, k);
    }
    g_assert_cmphex(pool_rq(pool, nc), ==, 0xa1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_CACHE_EVICTIONS), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_LINES), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc + 4096), ==, 0);   /* still cached */

    /* b's copy is older than the pool: a stale read, each time */
    g_assert_cmphex(mem_rq(&b, nc), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc + 8), ==, 0);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_STALE_READS), ==, 2);
    for (k = 1; k <= 16; k++) {
        g_assert_cmphex(mem_rq(&b, nc + k * 4096), ==, 0);
    }
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_CACHE_EVICTIONS), ==, 1);
    /* it was clean */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_WB_LINES), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0xa1);          /* fresh now */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_STALE_READS), ==, 2);

    /* CXL_SHM_STALE_READ: one event per fetch of the line */
    ev = qmp_event_after(&b, "CXL_SHM_STALE_READ");
    data = qdict_get_qdict(ev, "data");
    g_assert_cmpuint(qdict_get_int(data, "host-id"), ==, 1);
    g_assert_cmpuint(qdict_get_int(data, "dpa"), ==, nc);
    g_assert_cmpuint(qdict_get_int(data, "line"), ==, nc);
    g_assert_cmpuint(qdict_get_int(data, "size"), ==, 8);
    g_assert_cmpuint(qdict_get_int(data, "missed"), ==, 0);
    g_assert_true(g_str_has_prefix(qdict_get_str(data, "current"),
                                   "a1000000"));
    g_assert_true(g_str_has_prefix(qdict_get_str(data, "stale"),
                                   "00000000"));
    g_assert_cmpstr(qdict_get_str(data, "qom-path"), ==,
                    "/machine/peripheral/shm0");
    qobject_unref(ev);
    g_assert_null(qtest_qmp_event_ref(b.qts, "CXL_SHM_STALE_READ"));

    /* mode=timed reports its latencies once, under "timed" */
    qtest_qmp_assert_success(b.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'miss-latency-ns', 'value': 250}}");
    ev = qtest_qmp(b.qts, "{'execute': 'query-cxl-shm'}");
    data = qobject_to(QDict, qlist_peek(qdict_get_qlist(ev, "return")));
    g_assert_false(qdict_haskey(data, "latency-ns"));
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(data, "timed"),
                                  "miss-latency-ns"), ==, 250);
    qobject_unref(ev);

    /* a store of the same value dirties its line: written back whole */
    mem_wq(&b, nc + LINE + 8, 0xb2);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + LINE, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + LINE + 8), ==, 0xb2);
    mem_wq(&a, nc + LINE, 0);           /* a fetched the line before b's */
    g_assert_cmphex(mem_rq(&a, nc + LINE + 8), ==, 0xb2);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc + LINE, LINE), ==, 0);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_OPS), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc + LINE + 8), ==, 0xb2);

    /* invalidate drops the copy: the next load fetches the pool's line */
    mem_wq(&b, nc + 2 * LINE, 0xb3);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc + 2 * LINE), ==, 0xb3);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * Coherent window: every store is seen at once; the snoop filter
 * (8192 entries: one per set) counts back-invalidates, snoops and, once a
 * set is full, its evictions.  Lines 32 MiB apart share a filter set.
 */
static void test_timed_coherent(void)
{
    g_autofree char *pool = pool_path("timed-coh.pool");
    const char *sf = ",snoop-filter-entries=8192";
    uint64_t l = 0x1000, l2 = 0x1000 + 32 * MiB;
    Host a, b;

    timed_start(&a, pool, 0, sf);
    timed_start(&b, pool, 1, sf);

    g_assert_cmphex(mem_rq(&a, l), ==, 0);
    g_assert_cmphex(mem_rq(&b, l), ==, 0);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_MISSES), ==, 1);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_MISSES), ==, 1);
    g_assert_cmphex(mem_rq(&b, l + 8), ==, 0);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_HITS), ==, 1);

    mem_wq(&a, l, 5);                   /* b's copy is back-invalidated */
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_BACK_INVAL), ==, 1);
    g_assert_cmphex(pool_rq(pool, l), ==, 5);
    g_assert_cmphex(mem_rq(&b, l), ==, 5);      /* a held it modified */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_SNOOPS), ==, 1);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_MISSES), ==, 2);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_HITS), ==, 1);      /* the store */
    g_assert_cmphex(mem_rq(&a, l), ==, 5);      /* shared now: a hit */
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_HITS), ==, 2);
    mem_wq(&b, l, 6);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_BACK_INVAL), ==, 1);
    mem_wq(&b, l + 8, 7);               /* b alone holds it: no more */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_BACK_INVAL), ==, 1);

    /* the filter set is full: tracking l2 evicts l from b (its holder) */
    g_assert_cmphex(mem_rq(&a, l2), ==, 0);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_SF_EVICTIONS), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_BACK_INVAL), ==, 2);
    g_assert_cmphex(mem_rq(&b, l), ==, 6);      /* b lost it: a miss */
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_MISSES), ==, 3);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_SF_EVICTIONS), ==, 1);

    /* a host that left holds nothing: no back-invalidate for its copy */
    g_assert_cmphex(mem_rq(&b, l + 0x40), ==, 0);
    qtest_quit(b.qts);
    mem_wq(&a, l + 0x40, 8);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_BACK_INVAL), ==, 2);
    qtest_quit(a.qts);
}

/*
 * The filter's sets are indexed by line, as a snoop filter's are: the 64
 * lines of one page spread over 64 sets and never evict each other with
 * the default 4 ways; the fifth line of one set (lines 512 KiB apart)
 * evicts the oldest of its four.
 */
static void test_timed_filter_sets(void)
{
    g_autofree char *pool = pool_path("timed-sets.pool");
    uint64_t page = 0x10000, k;
    Host a;

    timed_start(&a, pool, 0, NULL);
    for (k = 0; k < 4096 / LINE; k++) {
        g_assert_cmphex(mem_rq(&a, page + k * LINE), ==, 0);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_MISSES), ==, 64);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_SF_EVICTIONS), ==, 0);
    for (k = 0; k < 4096 / LINE; k++) {
        g_assert_cmphex(mem_rq(&a, page + k * LINE), ==, 0);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_HITS), ==, 64);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_MISSES), ==, 64);

    /* five lines of one set: the fifth evicts the first */
    for (k = 1; k <= 4; k++) {
        g_assert_cmphex(mem_rq(&a, page + k * 512 * KiB), ==, 0);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_SF_EVICTIONS), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_BACK_INVAL), ==, 1);
    g_assert_cmphex(mem_rq(&a, page), ==, 0);       /* evicted: a miss */
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_MISSES), ==, 64 + 4 + 1);
    qtest_quit(a.qts);
}

/* Every host of a pool must see the same snoop filter */
static void test_timed_filter_mismatch(void)
{
    g_autofree char *pool = pool_path("timed-sf.pool");
    g_autofree char *cmd = NULL, *out = NULL, *err = NULL;
    g_autofree char *dev = host_args(pool, 1, TIMED
                                     ",snoop-filter-entries=16384");
    g_autofree char *before = NULL, *after = NULL;
    int status;
    Host a;

    timed_start(&a, pool, 0, NULL);
    cmd = g_strdup_printf("timeout 30 %s -accel qtest -display none -S %s",
                          g_getenv("QTEST_QEMU_BINARY"), dev);
    g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status, NULL));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "the pod's snoop filter has 32768 entries"));
    g_assert_cmpuint(r64(&a, A_CXLSHM_HOST_LIVE), ==, 1);
    qtest_quit(a.qts);
}

/* A host that dies loses its dirty lines; survivors see it; it rejoins */
static void test_failure_rejoin(void)
{
    g_autofree char *pool = pool_path("failure.pool");
    uint64_t nc = COH_SIZE + 0x80000;
    Host a, b;
    pid_t pid;
    int status;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    g_assert_cmpuint(r64(&a, A_CXLSHM_HOST_GEN(1)), ==, 1);

    mem_wq(&b, 0x3000, 0x5a5a);                     /* coherent: survives */
    mem_wq(&b, nc, 0x1111);                         /* flushed: survives */
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, LINE), ==, 0);
    mem_wq(&b, nc + LINE, 0x2222);                  /* dirty: lost */

    pid = qtest_pid(b.qts);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    /*
     * b's QTestState is abandoned (libqtest would report the SIGKILL),
     * and its abort hook removed: it would signal the reaped pid
     */
    qtest_remove_abrt_handler(b.qts);

    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 2);     /* failed */
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 1);
    g_assert_cmphex(mem_rq(&a, 0x3000), ==, 0x5a5a);
    g_assert_cmpuint(doorbell(&a, OP_INV, nc, 2 * LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0x1111);
    g_assert_cmphex(mem_rq(&a, nc + LINE), ==, 0);

    /* a restarted host rejoins with the next generation */
    host_start(&b, pool, 1, true);
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 1);
    g_assert_cmpuint(r64(&a, A_CXLSHM_HOST_GEN(1)), ==, 2);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(1)), ==, 2);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0x1111);    /* fresh image */

    /* QMP shows the same host table */
    {
        QDict *rsp = qtest_qmp(a.qts, "{'execute': 'query-cxl-shm'}");
        QList *l = qdict_get_qlist(rsp, "return");
        QDict *info = qobject_to(QDict, qlist_peek(l));
        QList *hosts = qdict_get_qlist(info, "hosts");
        QDict *h1;

        g_assert_cmpuint(qlist_size(hosts), ==, 4);
        qobject_unref(qlist_pop(hosts));
        h1 = qobject_to(QDict, qlist_peek(hosts));
        g_assert_cmpstr(qdict_get_str(info, "mode"), ==, "direct");
        g_assert_cmpint(qdict_get_int(info, "coherent-size"), ==, COH_SIZE);
        /* the CAPS register once, by name (no raw copy, no bool) */
        g_assert_false(qdict_haskey(info, "caps"));
        g_assert_false(qdict_haskey(info, "direct-mapped"));
        g_assert_cmpint(qdict_get_int(info, "latency-ns"), ==, 0);
        g_assert_false(qdict_haskey(info, "timed"));
        {
            QList *caps = qdict_get_qlist(info, "capabilities");
            const QListEntry *e;
            bool direct = false;

            QLIST_FOREACH_ENTRY(caps, e) {
                direct |= !strcmp(qstring_get_str(
                                      qobject_to(QString, e->value)),
                                  "direct-mapped");
            }
            g_assert_true(direct);
        }
        g_assert_cmpstr(qdict_get_str(h1, "state"), ==, "live");
        g_assert_cmpint(qdict_get_int(h1, "generation"), ==, 2);
        qobject_unref(rsp);
    }

    /* a host id held by a live QEMU is refused: see refused-config */
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

static void table_read_hung(int sig)
{
    static const char msg[] = "table-read-locked: a host-table read waited "
                              "30 s for the pool lock\n";

    if (write(2, msg, sizeof(msg) - 1) < 0) {
        /* nothing more to say */
    }
    abort();    /* libqtest's abort hook kills the QEMUs */
}

/*
 * A host-table read (BAR5 under the BQL, or query-cxl-shm) never waits
 * for the pool lock: while another process holds it, a dead host reads
 * as the table has it (still live) at once, and the first read after the
 * lock is free marks it failed.  Watched: a read that waited for the
 * lock would wait for this test, which holds it.
 */
static void test_table_read_locked(void)
{
    g_autofree char *pool = pool_path("table-locked.pool");
    struct sigaction sa = { 0 }, old;
    QDict *rsp, *h1;
    QList *hosts;
    Host a, b;
    pid_t pid;
    int fd, status;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    pid = qtest_pid(b.qts);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    qtest_remove_abrt_handler(b.qts);       /* abandoned, as above */

    fd = open(pool, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(flock(fd, LOCK_EX), ==, 0);
    sa.sa_handler = table_read_hung;
    sigaction(SIGALRM, &sa, &old);
    alarm(30);
    /* not reaped */
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 1);
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 3);
    rsp = qtest_qmp(a.qts, "{'execute': 'query-cxl-shm'}");
    hosts = qdict_get_qlist(qobject_to(QDict, qlist_peek(
                                qdict_get_qlist(rsp, "return"))), "hosts");
    qobject_unref(qlist_pop(hosts));
    h1 = qobject_to(QDict, qlist_peek(hosts));
    g_assert_cmpstr(qdict_get_str(h1, "state"), ==, "live");
    qobject_unref(rsp);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    g_assert_cmpint(flock(fd, LOCK_UN), ==, 0);
    close(fd);

    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 2);     /* failed */
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 1);
    qtest_quit(a.qts);
}

/*
 * Migration and savevm are refused at run time by the migration blocker:
 * a clear error, and the host goes on as before, live with the same
 * generation and its dirty line still its own (docs/failure-model.md)
 */
static void test_migration_refused(void)
{
    g_autofree char *pool = pool_path("migrate.pool");
    const char *why = "cannot be migrated or snapshotted";
    uint64_t nc = COH_SIZE + 0x40000;
    QDict *rsp;
    char *out;
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&a, nc, 0x1234);                         /* dirty in a */

    rsp = qtest_qmp(a.qts, "{'execute': 'migrate', 'arguments': "
                    "{'uri': 'exec:cat >/dev/null'}}");
    g_assert_true(qdict_haskey(rsp, "error"));
    g_assert_nonnull(strstr(qdict_get_str(qdict_get_qdict(rsp, "error"),
                                          "desc"), why));
    qobject_unref(rsp);
    out = qtest_hmp(a.qts, "savevm snap0");
    g_assert_nonnull(strstr(out, why));
    g_free(out);
    rsp = qtest_qmp(a.qts, "{'execute': 'query-migrate'}");
    {
        QDict *ret = qdict_get_qdict(rsp, "return");
        QList *reasons = qdict_get_qlist(ret, "blocked-reasons");

        g_assert_false(qdict_haskey(ret, "status"));   /* none ever ran */
        g_assert_nonnull(reasons);
        g_assert_nonnull(strstr(qstring_get_str(qobject_to(QString,
                                    qlist_peek(reasons))), why));
    }
    qobject_unref(rsp);

    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);     /* live */
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0x1234);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc, LINE), ==, 0);
    g_assert_cmpuint(doorbell(&b, OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0x1234);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * A QEMU whose start is refused after it joined (-only-migratable: the
 * migration blocker fails at the end of realize), started in the
 * background with @extra appended to the device's options (or NULL)
 */
static GPid refused_start(const char *pool, int host_id, const char *extra)
{
    g_autofree char *dev = host_args(pool, host_id, extra);
    g_autofree char *cmd = g_strdup_printf(
        "%s -accel qtest -display none -S -qtest null -only-migratable %s",
        g_getenv("QTEST_QEMU_BINARY"), dev);
    g_auto(GStrv) argv = NULL;
    GPid pid;

    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async(NULL, argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD |
                                G_SPAWN_STDOUT_TO_DEV_NULL |
                                G_SPAWN_STDERR_TO_DEV_NULL,
                                NULL, NULL, &pid, NULL));
    return pid;
}

static void refused_wait_exit(GPid pid)
{
    int status;

    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
}

/*
 * The pod after a refused start raced a joining host @b (host 1): the
 * file at the path is the one b uses (b's coherent store is in it), b
 * writes back as before, a third host joins that pool and sees b live
 * and b's data, and the refused host is not live.
 */
static void refused_pod_intact(const char *pool, Host *b, uint64_t v)
{
    uint64_t nc = COH_SIZE + 0x5000;
    Host c;

    g_assert_true(g_file_test(pool, G_FILE_TEST_IS_REGULAR));
    mem_wq(b, 0x1000, v);
    g_assert_cmphex(pool_rq(pool, 0x1000), ==, v);
    mem_wq(b, nc, v + 1);
    g_assert_cmpuint(doorbell(b, OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc), ==, v + 1);
    g_assert_cmpuint(r32(b, A_CXLSHM_HOST_STATE(1)), ==, 1);
    g_assert_cmpuint(r32(b, A_CXLSHM_HOST_STATE(0)), !=, 1);

    host_start(&c, pool, 2, true);
    g_assert_cmpuint(r32(&c, A_CXLSHM_HOST_STATE(1)), ==, 1);
    g_assert_cmpuint(r32(&c, A_CXLSHM_HOST_STATE(0)), !=, 1);
    g_assert_cmphex(mem_rq(&c, 0x1000), ==, v);
    g_assert_cmphex(mem_rq(&c, nc), ==, v + 1);
    qtest_quit(c.qts);
}

/*
 * A start refused after its join must not undo the pool a peer joined
 * in between (docs/failure-model.md).  Deterministic: the refused host
 * stops itself (test hook x-test-stop-at) just before it takes the
 * pool lock to undo what it made; meanwhile host 1 joins the pool it
 * made (a missing file it created, a user's empty file it filled); then
 * it goes on and exits, and the pod must be intact.  Then the race as a
 * user meets it: 20 times a refused host and a good one started at once
 * on a missing pool.
 */
static void test_refused_start_race(void)
{
    g_autofree char *pool = pool_path("refused-race.pool");
    const char *stop = ",x-test-stop-at=abort-before-flock";
    int empty, round, status;
    GPid pid;
    Host b;

    for (empty = 0; empty < 2; empty++) {
        unlink(pool);
        if (empty) {
            g_assert_true(g_file_set_contents(pool, "", 0, NULL));
        }
        pid = refused_start(pool, 0, stop);
        /* stopped at the step, the pool made and joined */
        g_assert_cmpint(waitpid(pid, &status, WUNTRACED), ==, pid);
        g_assert_true(WIFSTOPPED(status));
        host_start(&b, pool, 1, true);
        g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);
        kill(pid, SIGCONT);
        refused_wait_exit(pid);
        refused_pod_intact(pool, &b, 0x1000 + empty);
        qtest_quit(b.qts);
    }

    for (round = 0; round < 20; round++) {
        g_autofree char *args = host_args(pool, 1, NULL);

        unlink(pool);
        pid = refused_start(pool, 0, NULL);
        b.qts = qtest_init_without_qmp_handshake(args);
        qtest_qmp_handshake(b.qts, NULL);
        host_enable(&b, true);
        refused_wait_exit(pid);
        refused_pod_intact(pool, &b, 0x2000 + round);
        qtest_quit(b.qts);
    }
    unlink(pool);
}

/*
 * pool=PATH is checked at the join on the file the join opened, and the
 * memory backend opens PATH again: a file put at PATH in between (here
 * by the test, while the host is stopped right after its join, test hook
 * x-test-stop-at=after-join) is refused, with the error naming
 * it, and left as it was.  The old device mapped the other file and ran.
 */
static void test_pool_replaced(void)
{
    g_autofree char *pool = pool_path("replaced.pool");
    g_autofree char *other = pool_path("replaced.other");
    g_autofree char *dev = host_args(pool, 0, ",x-test-stop-at=after-join");
    g_autofree char *cmd = g_strdup_printf(
        "%s -accel qtest -display none -S -qtest null %s",
        g_getenv("QTEST_QEMU_BINARY"), dev);
    g_auto(GStrv) argv = NULL;
    g_autofree char *err = NULL;
    char junk[4096], after[4096];
    struct stat st;
    gint64 deadline;
    gsize len;
    int status, err_fd, fd;
    GPid pid;

    /* another file the backend could map: the pool's size, no header */
    unlink(pool);
    memset(junk, 'j', sizeof(junk));
    fd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, META_SIZE + POOL_SIZE), ==, 0);
    g_assert_cmpint(pwrite(fd, junk, sizeof(junk), 0), ==, sizeof(junk));
    close(fd);
    g_assert_true(g_shell_parse_argv(cmd, NULL, &argv, NULL));
    g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD |
                                           G_SPAWN_STDOUT_TO_DEV_NULL,
                                           NULL, NULL, &pid, NULL, NULL,
                                           &err_fd, NULL));
    g_assert_cmpint(waitpid(pid, &status, WUNTRACED), ==, pid);
    g_assert_true(WIFSTOPPED(status));
    g_assert_cmpint(rename(other, pool), ==, 0);
    kill(pid, SIGCONT);
    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (g_get_monotonic_time() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            g_assert_not_reached();     /* it ran on the other file */
        }
        g_usleep(10000);
    }
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    {
        GIOChannel *ch = g_io_channel_unix_new(err_fd);

        g_io_channel_read_to_end(ch, &err, &len, NULL);
        g_io_channel_shutdown(ch, FALSE, NULL);
        g_io_channel_unref(ch);
    }
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, "was removed or replaced between its "
                                 "check and its mapping"));
    /* the other file is as it was: its first page, its size */
    fd = open(pool, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, after, sizeof(after), 0), ==, sizeof(after));
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    close(fd);
    g_assert_true(memcmp(after, junk, sizeof(junk)) == 0);
    g_assert_cmpint(st.st_size, ==, META_SIZE + POOL_SIZE);
    close(err_fd);
    unlink(pool);
}

/*
 * A refused start whose undo finds the pool lock held (a peer stopped in
 * its join, leave or reset; here the test holds it) does not wait for it
 * beyond a bounded time: it exits, keeping the pool it made (without the
 * lock it cannot know that no other host joined it), with its entry not
 * live.  30 s watchdog: the old device waited for the lock forever.
 */
static void stopped_peer_watch(const char *what);
static void stopped_peer_unwatch(void);

static void test_refused_start_flock(void)
{
    g_autofree char *pool = pool_path("refused-flock.pool");
    const char *stop = ",x-test-stop-at=abort-before-flock";
    int fd, status;
    GPid pid;
    Host b;

    unlink(pool);
    pid = refused_start(pool, 0, stop);
    g_assert_cmpint(waitpid(pid, &status, WUNTRACED), ==, pid);
    g_assert_true(WIFSTOPPED(status));
    fd = open(pool, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(flock(fd, LOCK_EX), ==, 0);
    stopped_peer_watch("a refused start's undo");
    kill(pid, SIGCONT);
    refused_wait_exit(pid);
    stopped_peer_unwatch();
    g_assert_cmpint(flock(fd, LOCK_UN), ==, 0);
    close(fd);
    /* the pool stayed: a host joins it and finds host 0 not live */
    g_assert_true(g_file_test(pool, G_FILE_TEST_IS_REGULAR));
    host_start(&b, pool, 1, true);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(1)), ==, 1);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), !=, 1);
    qtest_quit(b.qts);
    unlink(pool);
}

/* Refused configurations: error text, and the pool left byte-identical */

/* Digest of the content (holes read as zeros), mode and size of a file */
static char *file_digest(const char *path)
{
    g_autoptr(GChecksum) ck = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree uint8_t *buf = g_malloc(MiB);
    int fd = open(path, O_RDONLY);
    off_t data = 0, hole;
    struct stat st;

    if (fd < 0) {
        return g_strdup("missing");
    }
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    /* hash the data extents and where they are: holes are zeros */
    while ((data = lseek(fd, data, SEEK_DATA)) >= 0) {
        hole = lseek(fd, data, SEEK_HOLE);
        g_assert_cmpint(hole, >, data);
        while (data < hole) {
            size_t n = MIN(hole - data, MiB);
            size_t k;

            g_assert_cmpint(pread(fd, buf, n, data), ==, n);
            /* zeros may be stored or a hole: hash non-zero 4 KiB blocks */
            for (k = 0; k < n; k += 4096) {
                size_t len = MIN(4096, n - k);
                uint64_t at = data + k;

                if (buf[k] || memcmp(buf + k, buf + k + 1, len - 1)) {
                    g_checksum_update(ck, (uint8_t *)&at, sizeof(at));
                    g_checksum_update(ck, buf + k, len);
                }
            }
            data += n;
        }
    }
    close(fd);
    return g_strdup_printf("%s/%o/%lld", g_checksum_get_string(ck),
                           st.st_mode & 07777, (long long)st.st_size);
}

static char *run_qemu(const char *args, int *exit_status)
{
    const char *qemu = g_getenv("QTEST_QEMU_BINARY");
    g_autofree char *cmd = g_strdup_printf(
        "timeout 30 %s -accel qtest -display none -S -qtest null %s",
        qemu, args);
    g_autofree char *out = NULL;
    char *err = NULL;
    int status;

    g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status, NULL));
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return err;
}

/*
 * What the QEMU under test has of the device.  The series that adds it
 * to QEMU does so in stages: (a) direct mode, (b) its TCG path (guest
 * cache maintenance, parallel atomics), (c) latency under -icount and
 * mode=timed; until a stage, a stub refuses what it adds "in this build
 * of QEMU".  This test runs at each stage: a case that needs a later one
 * skips itself, saying which.
 */
enum {
    NEED_TCG = 1,       /* the device under -accel tcg: stage b */
    NEED_ICOUNT = 2,    /* the device under -icount: stage c */
    NEED_TIMED = 4,     /* mode=timed: stage c */
};

/* Does the device start with these options, up to its pool? */
static bool device_built(const char *qemu_opts, const char *dev_opts)
{
    g_autofree char *args = host_args("/nonexistent/cxl-shm-probe.pool", 0,
                                      dev_opts);
    g_autofree char *cmd = g_strdup_printf(
        "timeout 30 %s -display none -S %s %s",
        g_getenv("QTEST_QEMU_BINARY"), qemu_opts, args);
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status, NULL));
    /* it must fail (no pool), and not as a stub of a later stage */
    g_assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return !strstr(err, "in this build of QEMU");
}

/* NULL if the QEMU under test has what @need says, else why not */
static const char *missing(unsigned need)
{
    static const struct {
        unsigned need;
        const char *qemu, *dev, *why;
    } probes[] = {
        { NEED_TCG, "-accel tcg -smp 1", NULL,
          "the device's TCG path is not in this QEMU (a later stage of "
          "the series)" },
        { NEED_ICOUNT, "-accel tcg -smp 1 -icount shift=0", NULL,
          "the device under -icount is not in this QEMU (a later stage "
          "of the series)" },
        { NEED_TIMED, "-accel qtest -qtest null", TIMED,
          "mode=timed is not in this QEMU (a later stage of the series)" },
    };
    static int have[ARRAY_SIZE(probes)] = { -1, -1, -1 };
    int i;

    for (i = 0; i < ARRAY_SIZE(probes); i++) {
        if (!(need & probes[i].need)) {
            continue;
        }
        if (have[i] < 0) {
            have[i] = device_built(probes[i].qemu, probes[i].dev);
        }
        if (!have[i]) {
            return probes[i].why;
        }
    }
    return NULL;
}

typedef struct {
    unsigned need;
    GTestFunc fn;
    GTestDataFunc data_fn;
    const void *data;
} StagedCase;

static void staged_case(const void *opaque)
{
    const StagedCase *c = opaque;
    const char *why = missing(c->need);

    if (why) {
        g_test_skip(why);
    } else if (c->fn) {
        c->fn();
    } else {
        c->data_fn(c->data);
    }
}

/* A case that needs what @need says (NEED_*) */
static void add_staged(const char *path, unsigned need, GTestFunc fn)
{
    StagedCase *c = g_new0(StagedCase, 1);

    c->need = need;
    c->fn = fn;
    qtest_add_data_func(path, c, staged_case);
}

static void add_staged_data(const char *path, unsigned need,
                            const void *data, GTestDataFunc fn)
{
    StagedCase *c = g_new0(StagedCase, 1);

    c->need = need;
    c->data_fn = fn;
    c->data = data;
    qtest_add_data_func(path, c, staged_case);
}

static void patch_pool(const char *pool, uint64_t off, const void *data,
                       size_t len)
{
    int fd = open(pool, O_WRONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, data, len, off), ==, len);
    close(fd);
}

static void make_pool(const char *pool)
{
    g_autofree char *args = host_args(pool, 0, NULL);
    QTestState *qts = qtest_init(args);

    qtest_quit(qts);
}

typedef enum {
    POOL_GOOD,          /* a valid pool made by cxl-shm */
    POOL_MISSING,
    POOL_TEXT,          /* some other file */
    POOL_BAD_MAGIC,
    POOL_VERSION,       /* version 5 with a valid checksum */
    POOL_OLD,           /* version 3, the format before */
    POOL_CORRUPT,       /* geometry changed, checksum not */
    POOL_SHORT,         /* truncated data */
    POOL_LIVE,          /* host 0 is held by a running QEMU */
    POOL_NO_HEADER,     /* its creator was killed before the header */
    POOL_READONLY,      /* mode 0400 */
    POOL_OTHER_USER,    /* owned by uid 65534 */
    POOL_DIR,           /* a directory */
    POOL_FIFO,          /* a named pipe */
    POOL_FULL_FS,       /* to be created on a full file system */
    POOL_EMPTY,         /* an empty file of mode 0644 the user made */
    POOL_EMPTY_FULL_FS, /* the same, on a full file system */
} PoolKind;

/* Type, mode, owner and (regular files) content: what a refusal keeps */
static char *file_state(const char *path)
{
    g_autofree char *digest = NULL;
    struct stat st;

    if (lstat(path, &st) < 0) {
        return g_strdup("missing");
    }
    if (S_ISREG(st.st_mode)) {
        digest = file_digest(path);
    }
    return g_strdup_printf("mode 0%o uid %u size %lld %s",
                           (unsigned)st.st_mode, (unsigned)st.st_uid,
                           (long long)st.st_size, digest ? digest : "");
}

/*
 * cxlpod-pool (host-tools/, built by scripts/build-tools.sh): from
 * $CXLPOD_POOL_TOOL, else under $CXLPOD_TOP (scripts/test.sh sets it);
 * NULL when neither is set (a run from QEMU's own test harness)
 */
static char *pool_tool(void)
{
    const char *tool = g_getenv("CXLPOD_POOL_TOOL");
    const char *top = g_getenv("CXLPOD_TOP");

    if (tool) {
        return g_strdup(tool);
    }
    return top ? g_build_filename(top, "build", "meson", "host-tools",
                                  "cxlpod-pool", NULL) : NULL;
}

/* What 'cxlpod-pool check' says about @path (stdout and stderr), @rc */
static char *pool_check(const char *tool, const char *path, int *rc)
{
    const char *argv[] = { tool, "check", path, NULL };
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL,
                               G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, NULL));
    *rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return g_strconcat(out, err, NULL);
}

/*
 * What check must say about a pool of @kind after QEMU refused to start
 * on it (@device: the device's error): its exit status and a part of its
 * output.  A pool refused for the device's options is fine (the next
 * good start joins it), an empty file is a pool to be; a broken one is a
 * problem, in the device's words (the two share the format code).
 */
static int pool_check_expect(PoolKind kind, const char *device,
                             const char **msg)
{
    switch (kind) {
    case POOL_GOOD:
    case POOL_LIVE:
    case POOL_OTHER_USER:           /* a note: that user's QEMUs can join */
        *msg = ": ok (size 268435456, coherent-size 67108864, max-hosts 4)";
        return 0;
    case POOL_EMPTY:
    case POOL_EMPTY_FULL_FS:
        *msg = ": ok (empty)";
        return 0;
    case POOL_MISSING:
    case POOL_FULL_FS:              /* never created */
        *msg = "cannot open pool";
        return 2;
    case POOL_DIR:                  /* the device fails at open(O_RDWR) */
        *msg = "is not a regular file";
        return 1;
    default:
        *msg = device;
        return 1;
    }
}

static const struct {
    const char *name;
    PoolKind kind;
    const char *extra;      /* replaces cxl-shm options, %s = pool */
    const char *error;      /* expected in stderr */
    const char *qemu;       /* more QEMU options, or NULL */
} refused[] = {
    { "no-pool", POOL_GOOD, "size=256M", "property 'pool' is required" },
    { "size-zero", POOL_GOOD, "pool=%s,size=0", "property 'size'" },
    { "size-unaligned", POOL_GOOD, "pool=%s,size=100M", "property 'size'" },
    { "size-huge", POOL_GOOD, "pool=%s,size=2T", "1 TiB" },
    { "coherent-unaligned", POOL_GOOD,
      "pool=%s,size=256M,coherent-size=3M", "property 'coherent-size'" },
    { "coherent-too-big", POOL_GOOD,
      "pool=%s,size=256M,coherent-size=512M", "[0, size=268435456]" },
    { "max-hosts-zero", POOL_GOOD, "pool=%s,size=256M,max-hosts=0",
      "property 'max-hosts' is 0 (allowed: [1, 256])" },
    { "max-hosts-257", POOL_GOOD, "pool=%s,size=256M,max-hosts=257",
      "property 'max-hosts' is 257" },
    { "host-id-range", POOL_GOOD, "pool=%s,size=256M,max-hosts=4,host-id=4",
      "property 'host-id' is 4 (allowed: [0, max-hosts-1=3])" },
    { "mode-bogus", POOL_GOOD, "pool=%s,size=256M,mode=fast",
      "Parameter 'mode' does not accept value 'fast'" },
    { "timed-latency-ns", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "latency-ns=100", "with mode=timed set miss-latency-ns" },
    { "timed-evict-rate", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "evict-rate=10", "lines are evicted by the cache model" },
    { "timed-cache-size", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "cache-size=1000", "property 'cache-size' is 1000" },
    { "timed-cache-ways", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "cache-ways=0", "property 'cache-ways' is 0" },
    { "timed-sf", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "snoop-filter-entries=1000", "property 'snoop-filter-entries' is "
      "1000" },
    { "timed-miss-latency", POOL_GOOD, "pool=%s,size=256M,mode=timed,"
      "miss-latency-ns=70000", "property 'miss-latency-ns' is 70000" },
    { "direct-cache-size", POOL_GOOD, "pool=%s,size=256M,cache-size=1M",
      "apply to mode=timed only" },
    { "latency", POOL_GOOD, "pool=%s,size=256M,latency-ns=70000",
      "property 'latency-ns' is 70000" },
    { "bandwidth", POOL_GOOD, "pool=%s,size=256M,bandwidth-mbs=0",
      "property 'bandwidth-mbs' is 0" },
    { "pool-mode", POOL_GOOD, "pool=%s,size=256M,pool-mode=0400",
      "property 'pool-mode'" },
    { "writeback", POOL_GOOD, "pool=%s,size=256M,writeback=later",
      "Parameter 'writeback' does not accept value 'later'" },
    { "evict-rate", POOL_GOOD, "pool=%s,size=256M,evict-rate=100001",
      "property 'evict-rate' is 100001" },
    /* a test hook naming no step (it used to be a warning only) */
    { "test-hook-step", POOL_GOOD, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4,x-test-kill-at=no-such-step", "property "
      "'x-test-kill-at' is 'no-such-step' (allowed: one of after-open, " },
    { "memdev", POOL_GOOD, "pool=%s,size=256M,volatile-memdev=m0",
      "must not be set" },
    { "geometry-size", POOL_GOOD, "pool=%s,size=512M,coherent-size=64M,"
      "max-hosts=4", "has another geometry" },
    { "geometry-coherent", POOL_GOOD, "pool=%s,size=256M,"
      "coherent-size=32M,max-hosts=4", "has another geometry" },
    { "geometry-hosts", POOL_GOOD, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=8", "has another geometry" },
    { "not-a-pool", POOL_TEXT, "pool=%s,size=256M",
      "is not a cxlpod pool" },
    { "bad-magic", POOL_BAD_MAGIC, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "bad magic" },
    { "version", POOL_VERSION, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "has format version 5" },
    { "version-before", POOL_OLD, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "has format version 3, this QEMU supports version 4 "
      "only: upgrade it in place with 'cxlpod-pool upgrade " },
    { "corrupt", POOL_CORRUPT, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "corrupt header" },
    { "truncated", POOL_SHORT, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "bytes long" },
    { "host-in-use", POOL_LIVE, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4,host-id=0", "host-id 0 is in use" },
    { "no-directory", POOL_MISSING, "pool=%s/nodir/x.pool,size=256M",
      "cannot open pool" },
    { "no-header", POOL_NO_HEADER, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "was stopped before writing one, so no host ever "
      "joined it; remove the file (or make it a pool again with "
      "'cxlpod-pool create" },
    { "read-only", POOL_READONLY, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "is read-only (mode 0400)" },
    { "other-user", POOL_OTHER_USER, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "belongs to uid 65534" },
    { "directory", POOL_DIR, "pool=%s,size=256M", "cannot open pool" },
    { "fifo", POOL_FIFO, "pool=%s,size=256M", "is not a regular file" },
    { "full-fs", POOL_FULL_FS, "pool=%s,size=256M",
      "cannot allocate the 260 MiB of pool" },
    /* a refused start leaves a user's empty file its size and its mode */
    { "empty-full-fs", POOL_EMPTY_FULL_FS, "pool=%s,size=256M",
      "cannot allocate the 260 MiB of pool" },
    /* refused after the pool checks: nothing may have been written */
    { "only-migratable", POOL_GOOD, "pool=%s,size=256M,coherent-size=64M,"
      "max-hosts=4", "cannot be migrated", "-only-migratable" },
    { "only-migratable-empty", POOL_EMPTY, "pool=%s,size=256M",
      "cannot be migrated", "-only-migratable" },
    { "only-migratable-missing", POOL_MISSING, "pool=%s/om.pool,size=256M",
      "cannot be migrated", "-only-migratable" },
};

/* The pool-file cases that need root: chmod/chown, a tmpfs mount */
static bool refused_needs_root(PoolKind kind)
{
    return kind == POOL_READONLY || kind == POOL_OTHER_USER ||
           kind == POOL_FULL_FS || kind == POOL_EMPTY_FULL_FS;
}

/* @data: NULL for the cases anyone can run, else those that need root */
static void test_refused_config(const void *data)
{
    g_autofree char *good = pool_path("good.pool");
    g_autofree char *tool = pool_tool();
    g_autoptr(GString) skipped = g_string_new(NULL);
    g_autoptr(GString) later = g_string_new(NULL);
    bool root_cases = data != NULL;
    int i, nskipped = 0, nlater = 0;

    if (root_cases && geteuid() != 0) {
        g_test_skip("the read-only, other-user and full file system pool "
                    "cases need root");
        return;
    }

    if (tool && !g_file_test(tool, G_FILE_TEST_IS_EXECUTABLE)) {
        g_test_message("no cxlpod-pool at %s (scripts/build-tools.sh)", tool);
        g_assert_not_reached();
    }
    if (!tool) {
        g_test_message("CXLPOD_TOP not set: the pools are not checked with "
                       "cxlpod-pool");
    }
    make_pool(good);
    for (i = 0; i < ARRAY_SIZE(refused); i++) {
        g_autofree char *pool = pool_path("refused.pool");
        g_autofree char *opts = NULL;
        g_autofree char *args = NULL;
        g_autofree char *before = NULL;
        g_autofree char *after = NULL;
        g_autofree char *err = NULL;
        g_autofree char *cmd = NULL;
        QTestState *live = NULL;
        int status;

        if (refused_needs_root(refused[i].kind) != root_cases) {
            continue;
        }
        if (strstr(refused[i].extra, "mode=timed") && missing(NEED_TIMED)) {
            g_string_append_printf(later, " %s", refused[i].name);
            nlater++;
            continue;
        }
        switch (refused[i].kind) {
        case POOL_MISSING:
            break;
        case POOL_NO_HEADER:
            /* what pool_create leaves when killed after sizing the file */
            g_assert_true(g_file_set_contents(pool, "", 0, NULL));
            g_assert_cmpint(truncate(pool, cxlpool_file_size(POOL_SIZE, 4)),
                            ==, 0);
            /* killed a minute ago: a new file would be waited for 5 s */
            g_assert_cmpint(utimensat(AT_FDCWD, pool, (struct timespec[2]) {
                { .tv_sec = time(NULL) - 60 },
                { .tv_sec = time(NULL) - 60 } }, 0), ==, 0);
            break;
        case POOL_DIR:
            g_assert_cmpint(mkdir(pool, 0700), ==, 0);
            break;
        case POOL_FIFO:
            g_assert_cmpint(mkfifo(pool, 0600), ==, 0);
            break;
        case POOL_EMPTY:
            g_assert_true(g_file_set_contents(pool, "", 0, NULL));
            g_assert_cmpint(chmod(pool, 0644), ==, 0);
            break;
        case POOL_FULL_FS:
        case POOL_EMPTY_FULL_FS: {
            g_autofree char *mnt = g_build_filename(tmpdir, "full", NULL);
            g_autofree char *mcmd = NULL;

            g_mkdir_with_parents(mnt, 0700);
            mcmd = g_strdup_printf("mount -t tmpfs -o size=16M cxlpod-full %s "
                                   "2>/dev/null", mnt);
            if (system(mcmd) != 0) {
                /* e.g. a container without CAP_SYS_ADMIN */
                g_string_append_printf(skipped, " %s", refused[i].name);
                nskipped++;
                continue;
            }
            g_free(pool);
            pool = g_build_filename(mnt, "p.pool", NULL);
            if (refused[i].kind == POOL_EMPTY_FULL_FS) {
                g_assert_true(g_file_set_contents(pool, "", 0, NULL));
                g_assert_cmpint(chmod(pool, 0644), ==, 0);
            }
            break;
        }
        case POOL_TEXT:
            g_assert_true(g_file_set_contents(pool, "hello, world\n", -1,
                                              NULL));
            break;
        default:
            cmd = g_strdup_printf("cp --sparse=always %s %s", good, pool);
            g_assert_cmpint(system(cmd), ==, 0);
            break;
        }
        if (refused[i].kind == POOL_BAD_MAGIC) {
            patch_pool(pool, 0, "XXXX", 4);
        } else if (refused[i].kind == POOL_VERSION) {
            /* version 5, checksum made valid: a future format */
            uint8_t hdr[0x5c];
            uint32_t ver = 5, crc;
            g_autofree char *ck = NULL;

            pool_pread(pool, 0, hdr, sizeof(hdr));
            memcpy(hdr + 8, &ver, 4);
            crc = 0;
            /* crc32c as QEMU computes it (qemu/crc32c.h) */
            {
                int k, b;
                uint32_t c = 0xffffffff;

                for (k = 0; k < sizeof(hdr); k++) {
                    c ^= hdr[k];
                    for (b = 0; b < 8; b++) {
                        c = (c >> 1) ^ (0x82f63b78 & -(c & 1));
                    }
                }
                crc = c ^ 0xffffffff;
            }
            patch_pool(pool, 0, hdr, sizeof(hdr));
            patch_pool(pool, 0x5c, &crc, 4);
        } else if (refused[i].kind == POOL_OLD) {
            /* the format before: refused with the command that upgrades */
            uint32_t ver = 3;

            patch_pool(pool, 8, &ver, 4);
        } else if (refused[i].kind == POOL_CORRUPT) {
            uint64_t coh = 128 * MiB;

            patch_pool(pool, 0x20, &coh, 8);
        } else if (refused[i].kind == POOL_SHORT) {
            g_assert_cmpint(truncate(pool, META_SIZE + POOL_SIZE / 2), ==, 0);
        } else if (refused[i].kind == POOL_READONLY) {
            g_assert_cmpint(chmod(pool, 0400), ==, 0);
        } else if (refused[i].kind == POOL_OTHER_USER) {
            g_assert_cmpint(chown(pool, 65534, 65534), ==, 0);
        } else if (refused[i].kind == POOL_LIVE) {
            g_autofree char *largs = host_args(pool, 0, NULL);

            live = qtest_init(largs);
        }

        opts = g_strdup_printf(refused[i].extra, tmpdir);
        if (strstr(refused[i].extra, "%s") &&
            refused[i].kind != POOL_MISSING) {
            g_free(opts);
            opts = g_strdup_printf(refused[i].extra, pool);
        }
        args = g_strdup_printf(
            "%s-machine q35,cxl=on -m 128M -nodefaults "
            "-object memory-backend-ram,id=m0,size=256M "
            "-device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 "
            "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
            "-device cxl-shm,bus=rp0,%s "
            "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G %s", fw_args(),
            opts, refused[i].qemu ? refused[i].qemu : "");

        if (refused[i].kind == POOL_MISSING && strstr(opts, "om.pool")) {
            g_free(pool);
            pool = g_build_filename(tmpdir, "om.pool", NULL);
            unlink(pool);
        }
        before = file_state(pool);
        err = run_qemu(args, &status);
        after = file_state(pool);
        if (g_test_verbose()) {
            g_test_message("%s: %s", refused[i].name, err);
        }
        g_assert_cmpint(status, ==, 1);
        if (!strstr(err, refused[i].error)) {
            g_test_message("case %s: expected '%s' in: %s", refused[i].name,
                           refused[i].error, err);
            g_assert_not_reached();
        }
        g_assert_cmpstr(before, ==, after);
        if (tool) {
            /* the tool reads the same file the same way, and keeps it */
            int rc, want_rc;
            const char *want;
            g_autofree char *out = pool_check(tool, pool, &rc);
            g_autofree char *checked = file_state(pool);

            want_rc = pool_check_expect(refused[i].kind, refused[i].error,
                                        &want);
            if (rc != want_rc || !strstr(out, want)) {
                g_test_message("case %s: cxlpod-pool check exited %d (want "
                               "%d) without '%s': %s", refused[i].name, rc,
                               want_rc, want, out);
                g_assert_not_reached();
            }
            g_assert_cmpstr(checked, ==, after);
        }
        if (live) {
            qtest_quit(live);
        }
        if (refused[i].kind == POOL_DIR) {
            rmdir(pool);
        } else {
            unlink(pool);
        }
        if (refused[i].kind == POOL_FULL_FS ||
            refused[i].kind == POOL_EMPTY_FULL_FS) {
            g_autofree char *ucmd = g_strdup_printf("umount %s/full", tmpdir);

            g_assert_cmpint(system(ucmd), ==, 0);
        }
    }
    unlink(good);
    if (nskipped || nlater) {
        /* the others passed; the case shows as skipped, with the rows */
        g_autofree char *tmpfs = g_strdup_printf(
            "could not mount a 16 MiB tmpfs, %d cases did not run:%s",
            nskipped, skipped->str);
        g_autofree char *stage = g_strdup_printf(
            "mode=timed is not in this QEMU (a later stage of the series), "
            "%d cases did not run:%s", nlater, later->str);
        g_autofree char *why = g_strdup_printf(
            "%s%s%s", nskipped ? tmpfs : "", nskipped && nlater ? "; " : "",
            nlater ? stage : "");

        g_test_skip(why);
    }
}

/* N QEMUs starting at once on a missing pool agree on one pool */
/* N QEMUs started at once on @pool (max-hosts=8): how many created it */
static int race_round(const char *pool, int round, QTestState **q, int n)
{
    int i, creates = 0;

    for (i = 0; i < n; i++) {
        g_autofree char *log = g_strdup_printf("%s/race-%d-%d.log", tmpdir,
                                               round, i);
        g_autofree char *extra = g_strdup_printf(
            " -trace cxl_shm_pool_create -D %s", log);
        g_autofree char *base = host_args(pool, i, NULL);
        g_autofree char *args = NULL;
        char *mh = strstr(base, "max-hosts=4");

        g_assert_nonnull(mh);
        mh[strlen("max-hosts=")] = '8';
        args = g_strconcat(base, extra, NULL);
        unlink(log);
        q[i] = qtest_init_without_qmp_handshake(args);
    }
    for (i = 0; i < n; i++) {
        g_autofree char *log = g_strdup_printf("%s/race-%d-%d.log", tmpdir,
                                               round, i);
        g_autofree char *text = NULL;

        qtest_qmp_handshake(q[i], NULL);
        if (g_file_get_contents(log, &text, NULL, NULL) &&
            strstr(text, "cxl_shm_pool_create")) {
            creates++;
        }
        unlink(log);
    }
    return creates;
}

/*
 * Eight QEMUs started at the same moment on a missing pool: exactly one
 * creates it, all join with generation 1.  After they all left, eight
 * again on the existing pool: nobody creates, all join, generation 2.
 */
static void test_concurrent_join(void)
{
    g_autofree char *pool = pool_path("race.pool");
    QTestState *q[8];
    Host h;
    int i, round;

    for (round = 1; round <= 2; round++) {
        g_assert_cmpint(race_round(pool, round, q, 8), ==, round == 1);
        h.qts = q[7];
        host_enable(&h, false);
        g_assert_cmphex(r64(&h, A_CXLSHM_HOST_LIVE), ==, 0xff);
        for (i = 0; i < 8; i++) {
            g_assert_cmpuint(r32(&h, A_CXLSHM_HOST_STATE(i)), ==, 1);
            g_assert_cmpuint(r64(&h, A_CXLSHM_HOST_GEN(i)), ==, round);
        }
        for (i = 0; i < 8; i++) {
            qtest_quit(q[i]);
        }
    }
}

/* CDAT over DOE (extended config space: q35 ECAM at 0xb0000000) */

#define ECAM_BASE       0xb0000000ULL
#define DOE_CAP         0x190

static uint32_t cdat_read_entry(QTestState *qts, uint64_t doe, int handle,
                                uint32_t *buf, int max)
{
    uint32_t len, rsp;
    int i;

    qtest_writel(qts, doe + 0x10, 0x00021e98);  /* CXL, table access */
    qtest_writel(qts, doe + 0x10, 3);
    qtest_writel(qts, doe + 0x10, handle << 16); /* read entry, CDAT */
    qtest_writel(qts, doe + 0x08, 1u << 31);     /* go */
    g_assert_cmphex(qtest_readl(qts, doe + 0x0c) & (1u << 31), !=, 0);
    g_assert_cmphex(qtest_readl(qts, doe + 0x14), ==, 0x00021e98);
    qtest_writel(qts, doe + 0x14, 0);
    len = qtest_readl(qts, doe + 0x14);
    qtest_writel(qts, doe + 0x14, 0);
    rsp = qtest_readl(qts, doe + 0x14);
    qtest_writel(qts, doe + 0x14, 0);
    g_assert_cmpuint(len - 3, <=, max);
    for (i = 0; i < len - 3; i++) {
        buf[i] = qtest_readl(qts, doe + 0x14);
        qtest_writel(qts, doe + 0x14, 0);
    }
    return rsp >> 16;   /* next entry handle */
}

/*
 * Read the whole CDAT; check its ranges, that its DSLBIS carry @lat_ns and
 * @bw_mbs, and that its checksum holds.  Returns the header's sequence.
 */
static uint32_t cdat_check(QTestState *qts, uint64_t doe, unsigned lat_ns,
                           unsigned bw_mbs)
{
    uint32_t e[64], seq;
    uint8_t sum = 0;
    int handle, ndsmas = 0, ndslbis = 0, i;
    uint8_t *b = (uint8_t *)e;

    handle = cdat_read_entry(qts, doe, 0, e, ARRAY_SIZE(e)); /* header */
    memcpy(&seq, b + 12, 4);
    for (i = 0; i < 16; i++) {
        sum += b[i];
    }
    while (handle != 0xffff) {
        uint16_t elen;

        handle = cdat_read_entry(qts, doe, handle, e, ARRAY_SIZE(e));
        memcpy(&elen, b + 2, 2);
        for (i = 0; i < elen; i++) {
            sum += b[i];
        }
        if (b[0] == 0) {            /* DSMAS */
            uint64_t base, len;

            memcpy(&base, b + 8, 8);
            memcpy(&len, b + 16, 8);
            if (b[4] == 0) {
                g_assert_cmphex(b[5], ==, 0x18);    /* SHAREABLE|COHERENT */
                g_assert_cmphex(base, ==, 0);
                g_assert_cmphex(len, ==, COH_SIZE);
            } else {
                g_assert_cmphex(b[5], ==, 0x08);    /* SHAREABLE only */
                g_assert_cmphex(base, ==, COH_SIZE);
                g_assert_cmphex(len, ==, POOL_SIZE - COH_SIZE);
            }
            ndsmas++;
        } else if (b[0] == 1) {     /* DSLBIS */
            uint64_t unit;
            uint16_t val;

            memcpy(&unit, b + 8, 8);
            memcpy(&val, b + 16, 2);
            if (b[6] <= 2) {        /* access/read/write latency */
                g_assert_cmpuint(unit * val, ==, lat_ns * 1000ULL);
            } else {                /* bandwidth */
                g_assert_cmpuint(unit * val, ==, bw_mbs);
            }
            ndslbis++;
        }
    }
    g_assert_cmpint(ndsmas, ==, 2);
    g_assert_cmpint(ndslbis, ==, 8);
    g_assert_cmpuint(sum, ==, 0);
    return seq;
}

static void test_cdat(void)
{
    g_autofree char *pool = pool_path("cdat.pool");
    g_autofree char *args = host_args(pool, 0,
                                      ",latency-ns=180,bandwidth-mbs=20000");
    uint64_t doe = ECAM_BASE + (DEV_BUS << 20) + DOE_CAP;
    QDict *rsp;
    Host h;

    h.qts = qtest_init(args);
    host_enable(&h, false);
    cfg_writel(h.qts, 0, 0, 0x64, ECAM_BASE >> 32);
    cfg_writel(h.qts, 0, 0, 0x60, (uint32_t)ECAM_BASE | 1);
    g_assert_cmphex(qtest_readl(h.qts, doe) & 0xffff, ==, 0x2e);
    g_assert_cmpuint(cdat_check(h.qts, doe, 180, 20000), ==, 0);

    /* latency at run time: qom-set, twice; the CDAT follows each */
    qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'latency-ns', 'value': 300}}");
    g_assert_cmpuint(r32(&h, A_CXLSHM_LATENCY_NS), ==, 300);
    g_assert_cmpuint(cdat_check(h.qts, doe, 300, 20000), ==, 1);
    qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', 'arguments': "
                             "{'path': '/machine/peripheral/shm0', "
                             "'property': 'latency-ns', 'value': 250}}");
    g_assert_cmpuint(cdat_check(h.qts, doe, 250, 20000), ==, 2);
    /* qom-set is the one way: no command duplicates it */
    rsp = qtest_qmp(h.qts, "{'execute': 'cxl-shm-set-latency', 'arguments': "
                    "{'path': '/machine/peripheral/shm0', "
                    "'latency-ns': 200}}");
    g_assert_true(qdict_haskey(rsp, "error"));
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "class"),
                    ==, "CommandNotFound");
    qobject_unref(rsp);
    /* out of range: refused, nothing changes */
    rsp = qtest_qmp(h.qts, "{'execute': 'qom-set', 'arguments': "
                    "{'path': '/machine/peripheral/shm0', "
                    "'property': 'latency-ns', 'value': 70000}}");
    g_assert_true(qdict_haskey(rsp, "error"));
    qobject_unref(rsp);
    g_assert_cmpuint(r32(&h, A_CXLSHM_LATENCY_NS), ==, 250);
    g_assert_cmpuint(cdat_check(h.qts, doe, 250, 20000), ==, 2);
    qtest_quit(h.qts);
}

/*
 * A reset returns the CXL device DVSEC to its power-on values (CXL r3.1
 * 8.1.3: Mem_Enable and the other writable fields default to 0).  A
 * guest that enabled memory decoding and rebooted found Mem_Enable still
 * set beside the reset HDM decoders, and Linux then refused the device
 * ("Range register decodes outside platform defined CXL ranges"): a
 * system_reset left the host without its region.
 */
static uint64_t dvsec_find(QTestState *qts)
{
    uint64_t dev = ECAM_BASE + (DEV_BUS << 20);
    uint32_t off = 0x100, hdr;

    while (off) {
        hdr = qtest_readl(qts, dev + off);
        if ((hdr & 0xffff) == 0x23 &&
            (qtest_readl(qts, dev + off + 4) & 0xffff) == 0x1e98 &&
            (qtest_readw(qts, dev + off + 8)) == 0) {
            return dev + off;
        }
        off = hdr >> 20;
    }
    g_assert_not_reached();
}

static void reset_dvsec_setup(Host *h)
{
    host_enable(h, false);
    cfg_writel(h->qts, 0, 0, 0x64, ECAM_BASE >> 32);
    cfg_writel(h->qts, 0, 0, 0x60, (uint32_t)ECAM_BASE | 1);
}

static void test_reset_dvsec(void)
{
    g_autofree char *pool = pool_path("reset-dvsec.pool");
    uint64_t d;
    uint16_t ctrl;
    Host h;

    host_start(&h, pool, 0, false);
    reset_dvsec_setup(&h);
    d = dvsec_find(h.qts);
    ctrl = qtest_readw(h.qts, d + 0x0c);
    g_assert_cmphex(ctrl & 0x4, ==, 0);                 /* Mem_Enable */
    /* what Linux's cxl_pci does on a first boot, and a range base */
    qtest_writew(h.qts, d + 0x0c, ctrl | 0x4);
    qtest_writel(h.qts, d + 0x20, 0x1);                 /* range 1 base hi */
    qtest_writel(h.qts, d + 0x24, 0x10000000);          /* range 1 base lo */
    g_assert_cmphex(qtest_readw(h.qts, d + 0x0c), ==, ctrl | 0x4);
    g_assert_cmphex(qtest_readl(h.qts, d + 0x20), ==, 0x1);

    qtest_qmp_assert_success(h.qts, "{'execute': 'system_reset'}");
    reset_dvsec_setup(&h);
    g_assert_cmphex(dvsec_find(h.qts), ==, d);
    g_assert_cmphex(qtest_readw(h.qts, d + 0x0c), ==, ctrl);
    g_assert_cmphex(qtest_readl(h.qts, d + 0x20), ==, 0);
    g_assert_cmphex(qtest_readl(h.qts, d + 0x24), ==, 0);
    /* the read-only fields are as before: the range's size is still there */
    g_assert_cmphex(qtest_readl(h.qts, d + 0x1c) & 0xf0000000, ==,
                    POOL_SIZE & 0xf0000000);
    qtest_quit(h.qts);
}

/*
 * Native cache maintenance under TCG.  A 64 KiB firmware (no BIOS runs)
 * enters protected mode with PAE paging whose tables the test writes:
 * linear 0x200000 -> the non-coherent area, 0x400000 -> the coherent
 * window.  It stores to four lines, clwb / clflushopt / clflush the first
 * three, does a lock xadd and 10000000 lock incl in the coherent window,
 * sets a flag at 0x5000 and halts.  Source (GNU as, --32):
 *
 *     .code16
 *     .org 0xf000
 * start16: cli
 *     lgdtl %cs:(gdtdesc - start16 + 0xf000)
 *     movl %cr0, %eax; orl $1, %eax; movl %eax, %cr0
 *     ljmpl $0x08, $(0xffff0000 + start32 - start16 + 0xf000)
 *     .code32
 * start32: movw $0x10, %ax; movw %ax, %ds; movw %ax, %es; movw %ax, %ss
 *     movl $0x1000, %eax; movl %eax, %cr3
 *     movl %cr4, %eax; orl $0x20, %eax; movl %eax, %cr4
 *     movl %cr0, %eax; orl $0x80000000, %eax; movl %eax, %cr0
 *     movl $0x11111111, 0x200000; clwb 0x200000
 *     movl $0x22222222, 0x200040; clflushopt 0x200040
 *     movl $0x33333333, 0x200080; clflush 0x200080
 *     movl $0x44444444, 0x2000c0
 *     movl $1, %eax; lock xaddl %eax, 0x400000
 *     movl $10000000, %ecx
 * 2:  lock incl 0x400008; decl %ecx; jnz 2b
 *     movl $1, 0x5000
 * 1:  hlt; jmp 1b
 *     .p2align 3
 * gdt: .quad 0, 0x00cf9a000000ffff, 0x00cf92000000ffff
 * gdtdesc: .word 23; .long 0xffff0000 + gdt - start16 + 0xf000
 *     .code16
 *     .org 0xfff0
 *     jmp start16
 */
static const uint8_t fw_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xc0, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x11,
    0x11, 0x11, 0x66, 0x0f, 0xae, 0x35, 0x00, 0x00, 0x20, 0x00, 0xc7, 0x05,
    0x40, 0x00, 0x20, 0x00, 0x22, 0x22, 0x22, 0x22, 0x66, 0x0f, 0xae, 0x3d,
    0x40, 0x00, 0x20, 0x00, 0xc7, 0x05, 0x80, 0x00, 0x20, 0x00, 0x33, 0x33,
    0x33, 0x33, 0x0f, 0xae, 0x3d, 0x80, 0x00, 0x20, 0x00, 0xc7, 0x05, 0xc0,
    0x00, 0x20, 0x00, 0x44, 0x44, 0x44, 0x44, 0xb8, 0x01, 0x00, 0x00, 0x00,
    0xf0, 0x0f, 0xc1, 0x05, 0x00, 0x00, 0x40, 0x00, 0xb9, 0x80, 0x96, 0x98,
    0x00, 0xf0, 0xff, 0x05, 0x08, 0x00, 0x40, 0x00, 0x49, 0x75, 0xf6, 0xc7,
    0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00,
    0x17, 0x00, 0xa8, 0xf0, 0xff, 0xff,
};
static const uint8_t fw_reset[] = { 0xe9, 0x0d, 0xf0 };

/* Start a paused TCG host (-smp 1) that runs @code at 0xf000 */
static void fw_host_start_code(Host *h, const char *pool, int host_id,
                               const uint8_t *code, size_t code_len,
                               const char *extra, const char *qemu_opts)
{
    g_autofree char *fw = g_build_filename(tmpdir, "fw.bin", NULL);
    g_autofree uint8_t *img = g_malloc0(0x10000);
    g_autofree char *args = host_args(pool, host_id, extra);
    g_autofree char *all = NULL;
    uint64_t pdpt[4] = { 0x2001, 0, 0, 0x3001 };
    uint64_t pd0[3], pd3 = 0xffe00083;

    memcpy(img + 0xf000, code, code_len);
    memcpy(img + 0xfff0, fw_reset, sizeof(fw_reset));
    g_assert_true(g_file_set_contents(fw, (char *)img, 0x10000, NULL));

    /* CXLSHM_TEST_TCG overrides the TCG options, e.g. "tcg,thread=single" */
    all = g_strdup_printf("%s -accel %s -smp 1 -cpu max -S -bios %s %s", args,
                          g_getenv("CXLSHM_TEST_TCG") ?: "tcg", fw,
                          qemu_opts ?: "");
    h->qts = qtest_init(all);
    host_enable(h, true);
    /* TCG: native ops, atomics, and in mode=direct the direct mapping */
    /* a remote host (pool-key): atomics, no direct coherent window */
    g_assert_cmphex(r32(h, A_CXLSHM_CAPS), ==,
                    extra && strstr(extra, "pool-key") ?
                    CAP_NATIVE | CAP_ATOMICS :
                    CAP_NATIVE | CAP_ATOMICS |
                    (extra && strstr(extra, "mode=timed") ? 0 : CAP_DIRECT));

    pd0[0] = 0x83;
    pd0[1] = (h->hpa + COH_SIZE) | 0x83;
    pd0[2] = h->hpa | 0x83;
    qtest_memwrite(h->qts, 0x1000, pdpt, sizeof(pdpt));
    qtest_memwrite(h->qts, 0x2000, pd0, sizeof(pd0));
    qtest_memwrite(h->qts, 0x3000 + 511 * 8, &pd3, sizeof(pd3));
}

static void fw_host_start(Host *h, const char *pool, int host_id)
{
    fw_host_start_code(h, pool, host_id, fw_code, sizeof(fw_code), NULL,
                       NULL);
}

static void fw_host_wait(Host *h)
{
    int i;

    for (i = 0; i < 3000 && qtest_readl(h->qts, 0x5000) != 1; i++) {
        g_usleep(10000);
    }
    g_assert_cmpuint(qtest_readl(h->qts, 0x5000), ==, 1);
}

static void test_native_tcg(void)
{
    g_autofree char *pool = pool_path("native.pool");
    Host h;

    fw_host_start(&h, pool, 0);
    mem_wq(&h, 0, 41);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_host_wait(&h);

    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11111111);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0x22222222);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0x33333333);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0xc0), ==, 0);  /* no flush */
    g_assert_cmphex(mem_rq(&h, COH_SIZE + 0xc0), ==, 0x44444444);
    g_assert_cmphex(pool_rq(pool, 0), ==, 42);               /* lock xadd */
    g_assert_cmpuint(pool_rq(pool, 8), ==, 10000000);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_NATIVE_OPS), ==, 3);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_LINES), ==, 3);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_INV_LINES), ==, 2);
    qtest_quit(h.qts);
}

/* Two -smp 1 TCG guests, 10000000 lock incl each on one counter: exact */
static void test_atomics_tcg(void)
{
    g_autofree char *pool = pool_path("atomics.pool");
    Host a, b;

    fw_host_start(&a, pool, 0);
    fw_host_start(&b, pool, 1);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    qtest_qmp_assert_success(b.qts, "{'execute': 'cont'}");
    fw_host_wait(&a);
    fw_host_wait(&b);
    g_assert_cmpuint(pool_rq(pool, 8), ==, 20000000);
    g_assert_cmpuint(pool_rq(pool, 0), ==, 2);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * Cross-host atomics cannot be had with -accel tcg,parallel-atomics=off:
 * the device is refused, says why, and creates no pool.
 */
static void test_atomics_refused(void)
{
    g_autofree char *pool = pool_path("atomics-off.pool");
    g_autofree char *dev = host_args(pool, 0, NULL);
    g_autofree char *cmd = g_strdup_printf(
        "timeout 30 %s -accel tcg,parallel-atomics=off -display none -S %s",
        g_getenv("QTEST_QEMU_BINARY"), dev);
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status, NULL));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "parallel-atomics=off"));
    g_assert_false(g_file_test(pool, G_FILE_TEST_EXISTS));
}

/*
 * Deferred writeback, non-temporal stores, wbinvd and invd under TCG.  A
 * firmware with the prologue above (cli: no interrupt is a fence point)
 * runs in phases; it reports each phase at 0x5000 and waits at some for
 * the test's go at 0x5010.  Source (GNU as --32, after the prologue):
 *
 *     movl $0x11111111, 0x200000; clwb 0x200000
 *     movl $0x22222222, 0x200040; clflushopt 0x200040
 *     movl $1, 0x5000
 * 1:  cmpl $1, 0x5010; jne 1b
 *     sfence
 *     movl $2, 0x5000
 *     movl $0x33333333, %eax; movnti %eax, 0x200080
 *     movl $3, 0x5000
 * 2:  cmpl $2, 0x5010; jne 2b
 *     sfence
 *     movl $4, 0x5000
 *     movl $0x44444444, 0x2000c0
 *     movl $0x55555555, 0x201000
 *     movl $5, 0x5000
 * 3:  cmpl $3, 0x5010; jne 3b
 *     wbinvd
 *     movl $6, 0x5000
 *     movl $0x66666666, 0x202000
 *     invd
 *     movl 0x202000, %eax; movl %eax, 0x5020
 *     movl $7, 0x5000
 * 4:  hlt; jmp 4b
 */
static const uint8_t fw_fidelity[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0x20, 0xf1, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x11,
    0x11, 0x11, 0x66, 0x0f, 0xae, 0x35, 0x00, 0x00, 0x20, 0x00, 0xc7, 0x05,
    0x40, 0x00, 0x20, 0x00, 0x22, 0x22, 0x22, 0x22, 0x66, 0x0f, 0xae, 0x3d,
    0x40, 0x00, 0x20, 0x00, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x83, 0x3d, 0x10, 0x50, 0x00, 0x00, 0x01, 0x75, 0xf7, 0x0f,
    0xae, 0xf8, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
    0xb8, 0x33, 0x33, 0x33, 0x33, 0x0f, 0xc3, 0x05, 0x80, 0x00, 0x20, 0x00,
    0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x83, 0x3d,
    0x10, 0x50, 0x00, 0x00, 0x02, 0x75, 0xf7, 0x0f, 0xae, 0xf8, 0xc7, 0x05,
    0x00, 0x50, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0xc7, 0x05, 0xc0, 0x00,
    0x20, 0x00, 0x44, 0x44, 0x44, 0x44, 0xc7, 0x05, 0x00, 0x10, 0x20, 0x00,
    0x55, 0x55, 0x55, 0x55, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x05, 0x00,
    0x00, 0x00, 0x83, 0x3d, 0x10, 0x50, 0x00, 0x00, 0x03, 0x75, 0xf7, 0x0f,
    0x09, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0xc7,
    0x05, 0x00, 0x20, 0x20, 0x00, 0x66, 0x66, 0x66, 0x66, 0x0f, 0x08, 0xa1,
    0x00, 0x20, 0x20, 0x00, 0xa3, 0x20, 0x50, 0x00, 0x00, 0xc7, 0x05, 0x00,
    0x50, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x66, 0x90,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00,
    0x17, 0x00, 0x08, 0xf1, 0xff, 0xff,
};

static void fw_phase(Host *h, uint32_t phase)
{
    int i;

    /* the firmware may already be past @phase if it does not wait there */
    for (i = 0; i < 3000 && qtest_readl(h->qts, 0x5000) < phase; i++) {
        g_usleep(10000);
    }
    g_assert_cmpuint(qtest_readl(h->qts, 0x5000), >=, phase);
}

static void test_fidelity_tcg(void)
{
    g_autofree char *pool = pool_path("fidelity.pool");
    Host h;

    fw_host_start_code(&h, pool, 0, fw_fidelity, sizeof(fw_fidelity), NULL,
                       NULL);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");

    /*
     * clwb and clflushopt without a fence: nothing in the pool yet.  The
     * vCPU stored phase 1 after both retired (in order), so a device that
     * completed them at the instruction would show them now; nothing
     * else of this QEMU lands them later (no eviction, no interrupt:
     * cli), so no wait is needed.
     */
    fw_phase(&h, 1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_DEFERRED), ==, 2);
    qtest_writel(h.qts, 0x5010, 1);
    fw_phase(&h, 2);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11111111);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0x22222222);

    /* movnti: in the pool by the sfence, not before */
    fw_phase(&h, 3);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0);
    qtest_writel(h.qts, 0x5010, 2);
    fw_phase(&h, 4);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0x33333333);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_NT_LINES), ==, 1);

    /* wbinvd: every dirty line of the area */
    fw_phase(&h, 5);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0xc0), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x1000), ==, 0);
    qtest_writel(h.qts, 0x5010, 3);
    fw_phase(&h, 6);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0xc0), ==, 0x44444444);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x1000), ==, 0x55555555);

    /* invd: the dirty line is gone, the re-read sees the pool's 0 */
    fw_phase(&h, 7);
    g_assert_cmphex(qtest_readl(h.qts, 0x5020), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x2000), ==, 0);
    g_assert_cmphex(mem_rq(&h, COH_SIZE + 0x2000), ==, 0);
    qtest_quit(h.qts);
}

/*
 * wbinvd on a pool in a disk file whose page another host wrote back and
 * the kernel then dropped from the page cache: the page is not resident
 * in any mapping (mincore() says absent) but holds data, and wbinvd must
 * fetch it like any other (it was skipped as if it were zeros).  Host a
 * runs fw_fidelity up to its wbinvd, which it never touched the page
 * before; host b writes the page back and quits; the test writes the
 * file back to disk and drops the page before letting a's wbinvd run.
 */
static void test_wbinvd_dropped_pages(void)
{
    g_autofree char *pool = pool_path("wbinvd-dropped.pool");
    uint64_t p = COH_SIZE + 64 * MiB;     /* far from what a touches */
    size_t pagesz = qemu_real_host_page_size();
    unsigned char vec;
    void *map;
    int fd;
    Host a, b;

    fw_host_start_code(&a, pool, 0, fw_fidelity, sizeof(fw_fidelity), NULL,
                       NULL);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    fw_phase(&a, 1);
    qtest_writel(a.qts, 0x5010, 1);
    fw_phase(&a, 3);
    qtest_writel(a.qts, 0x5010, 2);
    fw_phase(&a, 5);                /* waits for the go of its wbinvd */

    host_start(&b, pool, 1, true);
    mem_wq(&b, p + 8, 0xfeedULL);
    g_assert_cmpuint(doorbell(&b, OP_WB, p, LINE), ==, 0);
    qtest_quit(b.qts);
    g_assert_cmphex(pool_rq(pool, p + 8), ==, 0xfeedULL);

    fd = open(pool, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fdatasync(fd), ==, 0);
    /* the whole file: a large folio holding the page goes whole */
    g_assert_cmpint(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), ==, 0);
    map = mmap(NULL, pagesz, PROT_READ, MAP_SHARED, fd, META_SIZE + p);
    g_assert_true(map != MAP_FAILED);
    g_assert_cmpint(mincore(map, pagesz, &vec), ==, 0);
    munmap(map, pagesz);
    close(fd);
    if (vec & 1) {
        g_test_skip("the kernel kept the pool page in its page cache "
                    "(a file system that cannot drop it?)");
        qtest_quit(a.qts);
        return;
    }

    qtest_writel(a.qts, 0x5010, 3);
    fw_phase(&a, 6);
    g_assert_cmphex(mem_rq(&a, p + 8), ==, 0xfeedULL);
    qtest_quit(a.qts);
}

/* writeback=immediate: clwb lands at the instruction (the old behaviour) */
static void test_immediate_tcg(void)
{
    g_autofree char *pool = pool_path("immediate.pool");
    Host h;

    fw_host_start_code(&h, pool, 0, fw_fidelity, sizeof(fw_fidelity),
                       ",writeback=immediate", NULL);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_phase(&h, 1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11111111);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0x22222222);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_DEFERRED), ==, 0);
    g_assert_cmpuint(r32(&h, A_CXLSHM_WB_MODE), ==, 1);
    qtest_writel(h.qts, 0x5010, 1);
    fw_phase(&h, 3);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0x33333333);
    qtest_quit(h.qts);
}

/*
 * Every register access of a vCPU is served while a long doorbell
 * operation runs elsewhere: the doorbell drops the BQL for its line
 * work, and the BAR's accesses meanwhile must not be refused as
 * re-entrant I/O of the device (reads of 0, writes that vanish).  The
 * test thread rings 20 whole-area flushes while the guest's vCPU, in a
 * loop, reads MAGIC, reads STAT_ERRORS, rings a reserved op (refused:
 * counted in STAT_ERRORS, the doorbell registers otherwise untouched)
 * and reads the counter again: every MAGIC read right, every ring
 * counted, and all 20 flushes counted.  The body after fw_code's
 * prologue (BAR5 mapped by a 2 MiB page at 0xe0000000):
 *
 *     xorl %edi, %edi; xorl %esi, %esi
 * 1:  movl 0xe0100000, %eax; cmpl $CXLSHM_MAGIC_VALUE, %eax; je 2f; incl %edi
 * 2:  movl 0xe0100830, %ebx; movl $7, 0xe0100110
 *     movl 0xe0100830, %eax; cmpl %ebx, %eax; ja 3f; incl %edi
 * 3:  incl %esi; movl %esi, 0x5034; movl %edi, 0x5030
 *     cmpl $1, 0x5010; jne 1b
 *     movl $1, 0x5000
 * 4:  hlt; jmp 4b
 */
static void test_doorbell_concurrent(void)
{
    static const uint8_t body[] = {
        0x31, 0xff, 0x31, 0xf6, 0xa1, 0x00, 0x00, 0x10, 0xe0, 0x3d, 0x43,
        0x58, 0x4c, 0x50, 0x74, 0x01, 0x47, 0x8b, 0x1d, 0x30, 0x08, 0x10,
        0xe0, 0xc7, 0x05, 0x10, 0x01, 0x10, 0xe0, 0x07, 0x00, 0x00, 0x00,
        0xa1, 0x30, 0x08, 0x10, 0xe0, 0x39, 0xd8, 0x77, 0x01, 0x47, 0x46,
        0x89, 0x35, 0x34, 0x50, 0x00, 0x00, 0x89, 0x3d, 0x30, 0x50, 0x00,
        0x00, 0x83, 0x3d, 0x10, 0x50, 0x00, 0x00, 0x01, 0x75, 0xc3, 0xc7,
        0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb,
        0xfd,
    };
    g_autofree char *pool = pool_path("doorbell-concurrent.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t pde = 0xe0000083;
    uint32_t iters;
    gint64 deadline;
    Host h;
    int i;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* its GDT */
    memcpy(code + 0x40, body, sizeof(body));
    fw_host_start_code(&h, pool, 0, code, sizeof(fw_code), NULL, NULL);
    qtest_memwrite(h.qts, 0x3000 + 256 * 8, &pde, sizeof(pde));
    qtest_writeq(h.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, COH_SIZE);
    qtest_writeq(h.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, POOL_SIZE - COH_SIZE);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (qtest_readl(h.qts, 0x5034) < 2) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    /*
     * DB_STATUS is shared with the guest's refused rings: not read.  The
     * rings return at once (the doorbell's thread runs the ops); the
     * guest's iterations until the 20 flushes are counted ran beside them
     */
    iters = qtest_readl(h.qts, 0x5034);
    for (i = 0; i < 20; i++) {
        qtest_writeq(h.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, COH_SIZE);
        qtest_writeq(h.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, POOL_SIZE - COH_SIZE);
        qtest_writel(h.qts, BAR5_ADDR + A_CXLSHM_DB_OP, OP_FLUSH);
    }
    deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    while (rstat(&h, CXLSHM_STAT_FLUSH_OPS) < 20) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    iters = qtest_readl(h.qts, 0x5034) - iters;
    qtest_writel(h.qts, 0x5010, 1);
    fw_host_wait(&h);
    g_test_message("%u guest iterations beside 20 whole-area flushes "
                   "(%u during them), %u wrong", qtest_readl(h.qts, 0x5034),
                   iters, qtest_readl(h.qts, 0x5030));
    g_assert_cmpuint(iters, >, 2);
    g_assert_cmpuint(qtest_readl(h.qts, 0x5030), ==, 0);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_FLUSH_OPS), ==, 20);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_ERRORS), ==,
                     qtest_readl(h.qts, 0x5034));
    qtest_quit(h.qts);
}

/*
 * Two doorbells at once (docs/device.md, "Guest control"): the device has
 * one doorbell engine, so a ring while another op is in flight queues
 * behind it (the DB_OP write returns at once) and then runs with the
 * DB_OFFSET / DB_LEN it latched at its write; DB_STATUS reads 5 (busy)
 * while a rung op has not completed, and DB_STATUS and DB_LINES are
 * written together when an op completes, so they always describe one
 * op.  The guest's vCPU rings a writeback of 16384 lines whose
 * latency charge takes about a second; while it runs, the test thread
 * (another requester) reads the identify and statistics registers, sets
 * its own DB_OFFSET / DB_LEN and rings a reserved op.  The body after
 * fw_code's prologue:
 *
 *     movl $0x11, 0x200000; movl $1, 0x5040; movl $1, DB_OP
 *     movl DB_STATUS, %eax; movl %eax, 0x5044
 *     movl DB_LINES, %eax; movl %eax, 0x5048; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static bool log_has(const char *log, const char *what)
{
    g_autofree char *text = NULL;

    return g_file_get_contents(log, &text, NULL, NULL) &&
           strstr(text, what);
}

static void test_doorbell_two_rings(void)
{
    static const uint8_t body[] = {
        0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x00, 0x00, 0x00, 0xc7,
        0x05, 0x40, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xc7, 0x05,
        0x10, 0x01, 0x10, 0xe0, 0x01, 0x00, 0x00, 0x00, 0xa1, 0x14, 0x01,
        0x10, 0xe0, 0xa3, 0x44, 0x50, 0x00, 0x00, 0xa1, 0x18, 0x01, 0x10,
        0xe0, 0xa3, 0x48, 0x50, 0x00, 0x00, 0xc7, 0x05, 0x00, 0x50, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd,
    };
    g_autofree char *pool = pool_path("doorbell-two.pool");
    g_autofree char *log = g_build_filename(tmpdir, "doorbell-two.log",
                                            NULL);
    g_autofree char *opts = g_strdup_printf("-trace cxl_shm_op -trace "
                                            "cxl_shm_reg_write -D %s", log);
    g_autofree char *text = NULL;
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t pde = 0xe0000083, b_off = COH_SIZE + 0x100000;
    uint32_t busy, st, lines;
    const char *op_a, *op_b;
    gint64 deadline, t0, waited;
    Host a;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* its GDT */
    memcpy(code + 0x40, body, sizeof(body));
    unlink(log);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code),
                       ",latency-ns=60000", opts);
    qtest_memwrite(a.qts, 0x3000 + 256 * 8, &pde, sizeof(pde));
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, COH_SIZE);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, 16384 * LINE);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    /* the vCPU's DB_OP write has reached the device: its op runs */
    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (!log_has(log, "addr 0x110 val 0x1 size 4")) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    busy = r32(&a, A_CXLSHM_DB_STATUS);

    /* every read is served, right, while the op runs */
    g_assert_cmphex(r32(&a, A_CXLSHM_MAGIC), ==, CXLSHM_MAGIC_VALUE);
    g_assert_cmpuint(r64(&a, A_CXLSHM_SIZE), ==, POOL_SIZE);
    g_assert_cmpuint(r64(&a, A_CXLSHM_COHERENT_SIZE), ==, COH_SIZE);
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_ID), ==, 0);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_OFFSET), ==, COH_SIZE);
    /* every write takes effect: the parameters now read back as set */
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, b_off);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, LINE);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_OFFSET), ==, b_off);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LEN), ==, LINE);
    t0 = g_get_monotonic_time();
    qtest_writel(a.qts, BAR5_ADDR + A_CXLSHM_DB_OP, 7);
    waited = g_get_monotonic_time() - t0;
    /* queued behind the vCPU's op: busy until both are done */
    st = db_wait(&a);
    lines = r64(&a, A_CXLSHM_DB_LINES);
    fw_host_wait(&a);
    g_test_message("DB_STATUS %u while the vCPU's op ran; the second ring "
                   "took %" PRId64 " us; then DB_STATUS %u DB_LINES %u; "
                   "the vCPU read %u %u", busy, waited, st, lines,
                   qtest_readl(a.qts, 0x5044), qtest_readl(a.qts, 0x5048));

    /* both ops traced; the registers describe the last, the refused one */
    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    op_a = strstr(text, "cxl_shm_op host 0 writeback");
    op_b = strstr(text, "cxl_shm_op host 0 refused");
    g_assert_nonnull(op_a);
    g_assert_nonnull(op_b);
    g_assert_cmpuint(st, ==, 4);
    g_assert_cmpuint(lines, ==, 0);
    /* what the vCPU read after its ring: one op's pair, or busy */
    st = qtest_readl(a.qts, 0x5044);
    lines = qtest_readl(a.qts, 0x5048);
    g_assert_true(st == 5 || (st == 0 && lines == 1) ||
                  (st == 4 && lines == 0));
    g_assert_cmpuint(busy, ==, 5);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_OPS), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_ERRORS), ==, 1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_OFFSET), ==, b_off);
    qtest_quit(a.qts);
}

/*
 * Latency under icount: a firmware (flat protected mode) reads the TSC,
 * rings a writeback of 16 non-coherent lines, reads the TSC again.  With
 * -icount the TSC is the virtual clock in ns, so the charge must show
 * exactly: latency-ns=1000 adds 16000 to what latency-ns=0 gives, and the
 * same run twice gives the same count.  fw_latency, assembled with GNU as
 * (--32, linked at 0xfffff000) from: cli; lgdtl; set CR0.PE; ljmpl to
 * 32-bit; load flat data segments; rdtsc; mov %eax,%ebx; movl DB_OFFSET
 * = 0x04000000 (two halves), DB_LEN = 0x400, DB_OP = 1 (BAR5 at
 * 0xe0100000); 2: mov DB_STATUS,%eax; cmp $5,%eax; je 2b (the doorbell
 * completes asynchronously: busy until its latency has passed); rdtsc;
 * sub %ebx,%eax; mov %eax,0x5010; movl $1,0x5000; 1: hlt; jmp 1b; then,
 * at 0xfffff080, the GDT (null, flat code, flat data) and its descriptor.
 */
static const uint8_t fw_latency[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0x98, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0x0f, 0x31, 0x89, 0xc3, 0xc7, 0x05, 0x00, 0x01, 0x10, 0xe0, 0x00, 0x00,
    0x00, 0x04, 0xc7, 0x05, 0x04, 0x01, 0x10, 0xe0, 0x00, 0x00, 0x00, 0x00,
    0xc7, 0x05, 0x08, 0x01, 0x10, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xc7, 0x05,
    0x0c, 0x01, 0x10, 0xe0, 0x00, 0x00, 0x00, 0x00, 0xc7, 0x05, 0x10, 0x01,
    0x10, 0xe0, 0x01, 0x00, 0x00, 0x00, 0xa1, 0x14, 0x01, 0x10, 0xe0, 0x83,
    0xf8, 0x05, 0x74, 0xf6, 0x0f, 0x31, 0x29, 0xd8, 0xa3, 0x10, 0x50, 0x00,
    0x00, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4,
    0xeb, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0x80, 0xf0,
    0xff, 0xff,
};

static uint32_t latency_run(unsigned lat_ns, const char *qemu_opts)
{
    g_autofree char *pool = pool_path("latency.pool");
    g_autofree char *extra = g_strdup_printf(",latency-ns=%u", lat_ns);
    uint32_t ticks;
    Host h;

    fw_host_start_code(&h, pool, 0, fw_latency, sizeof(fw_latency), extra,
                       qemu_opts);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_host_wait(&h);
    ticks = qtest_readl(h.qts, 0x5010);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_OPS), ==, 1);
    qtest_quit(h.qts);
    return ticks;
}

static void test_latency_icount(void)
{
    const char *icount = "-icount shift=0,sleep=off";
    uint32_t base = latency_run(0, icount);
    uint32_t again = latency_run(0, icount);
    uint32_t charged = latency_run(1000, icount);
    uint32_t wall;

    uint32_t charged2 = latency_run(1000, icount);

    /*
     * The op completes for the guest 16000 ns of guest time after its
     * ring, at an exact instruction count (the poll's first read after
     * that), the same in every run.  16 lines, nothing queued and no line
     * busy: the op runs in its DB_OP write, so without latency the first
     * poll reads it done, also the same in every run.
     */
    g_test_message("icount: %u and %u ticks without latency, %u and %u "
                   "with 16 x 1000 ns", base, again, charged, charged2);
    g_assert_cmpuint(base, >, 0);
    g_assert_cmpuint(base, <, 100);
    g_assert_cmpuint(again, ==, base);
    g_assert_cmpuint(charged2, ==, charged);
    g_assert_cmpuint(charged, >=, 16 * 1000);
    g_assert_cmpuint(charged, <, 16 * 1000 + 32);
    /*
     * Without icount the same charge is a wait on the host clock and the
     * TSC is the host's (>= 1 GHz on hosts QEMU's TCG runs x86 on): at
     * least 16000 ticks.
     */
    wall = latency_run(1000, NULL);
    g_test_message("no icount: %u TSC ticks with 16 x 1000 ns", wall);
    g_assert_cmpuint(wall, >=, 16 * 1000);
}

/*
 * mode=timed under TCG: two -smp 1 guests, 100000 lock incl each on one
 * coherent counter through the device's I/O path, count exactly (the
 * firmware of test_native_tcg with a shorter loop).
 */
static void test_timed_atomics_tcg(void)
{
    g_autofree char *pool = pool_path("timed-atomics.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint32_t n = 100000;
    Host a, b;

    g_assert_cmphex(ldl_le_p(code + 0x8d), ==, 10000000);
    stl_le_p(code + 0x8d, n);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), TIMED, NULL);
    fw_host_start_code(&b, pool, 1, code, sizeof(fw_code), TIMED, NULL);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    qtest_qmp_assert_success(b.qts, "{'execute': 'cont'}");
    fw_host_wait(&a);
    fw_host_wait(&b);
    g_assert_cmpuint(pool_rq(pool, 8), ==, 2 * n);
    g_assert_cmpuint(pool_rq(pool, 0), ==, 2);
    /* clwb, clflushopt and clflush reached the cache model */
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11111111);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0x33333333);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_BACK_INVAL) +
                     rstat(&b, CXLSHM_STAT_BACK_INVAL), >, 0);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * mode=timed: an atomic whose accesses straddle the coherent boundary
 * (lock xadd on the 4 bytes at DPA coherent-size - 2) never holds the
 * coherent line's lock word while it waits for the non-coherent page's:
 * two such waits in two hosts, each for the word the other holds, would
 * never end (cxl-shm-line.h: one lock word at a time).  The test makes
 * the non-coherent word busy (held under host b's tag: b is live, so
 * nobody takes it over), lets host a run the atomic, waits until a's
 * coherent access has been counted, then until the coherent word is
 * free while a waits for the other; then frees it, and the atomic
 * completes: the old value in eax, the sum in both halves.  (The
 * accesses are atomic across hosts per area only: docs/device.md.)
 *
 * The body after fw_code's prologue (offset 0x40):
 *     movl $0x10001, %eax; lock xaddl %eax, 0x7ffffe
 *     movl %eax, 0x5020; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 * with linear 0x600000 mapped to DPA coherent-size - 2 MiB and 0x800000
 * to DPA coherent-size (2 MiB pages).
 */
static void test_timed_atomic_boundary(void)
{
    static const uint8_t body[] = {
        0xb8, 0x01, 0x00, 0x01, 0x00,
        0xf0, 0x0f, 0xc1, 0x05, 0xfe, 0xff, 0x7f, 0x00,
        0xa3, 0x20, 0x50, 0x00, 0x00,
        0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0xf4, 0xeb, 0xfd,
    };
    g_autofree char *pool = pool_path("timed-boundary.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t coh_word = 0x10000 + ((COH_SIZE - LINE) / LINE % 8192) * 8;
    uint64_t nc_word = 0x10000 + (COH_SIZE / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0, w, pd[2];
    uint16_t lo = 0xfffe, hi = 0x0007;
    gint64 deadline;
    Host a, b;

    g_assert_cmphex(code[0x3f], ==, 0xc0);      /* mov %eax, %cr0 */
    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    memcpy(code + 0x40, body, sizeof(body));
    timed_start(&b, pool, 1, NULL);
    /* in the pool before a starts: a's cache is empty, both accesses miss */
    patch_pool(pool, META_SIZE + COH_SIZE - 2, &lo, 2);
    patch_pool(pool, META_SIZE + COH_SIZE, &hi, 2);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), TIMED, NULL);
    pd[0] = (a.hpa + COH_SIZE - 2 * MiB) | 0x83;
    pd[1] = (a.hpa + COH_SIZE) | 0x83;
    qtest_memwrite(a.qts, 0x2000 + 3 * 8, pd, sizeof(pd));
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_MISSES), ==, 0);

    pool_pread(pool, nc_word, &w, 8);
    g_assert_cmphex(w, ==, 0);
    patch_pool(pool, nc_word, &tag, 8);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    /* a's coherent access (a miss) is done, its non-coherent one waits */
    deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    while (rstat(&a, CXLSHM_STAT_MISSES) < 1) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    for (;;) {
        pool_pread(pool, coh_word, &w, 8);
        if (!w) {
            break;
        }
        if (g_get_monotonic_time() > deadline) {
            g_test_message("host a holds the coherent word (%" PRIx64
                           ") while it waits for the non-coherent one", w);
            patch_pool(pool, nc_word, &zero, 8);
            g_assert_not_reached();
        }
        g_usleep(1000);
    }
    g_assert_cmpuint(qtest_readl(a.qts, 0x5000), ==, 0);
    patch_pool(pool, nc_word, &zero, 8);
    fw_host_wait(&a);
    g_assert_cmphex(qtest_readl(a.qts, 0x5020), ==, 0x0007fffe);
    /* 0x0007fffe + 0x10001, the coherent half and the cached one */
    g_assert_cmphex(qtest_readw(a.qts, a.hpa + COH_SIZE - 2), ==, 0xffff);
    g_assert_cmphex(qtest_readw(a.qts, a.hpa + COH_SIZE), ==, 0x0008);
    pool_pread(pool, coh_word, &w, 8);
    g_assert_cmphex(w, ==, 0);
    pool_pread(pool, nc_word, &w, 8);
    g_assert_cmphex(w, ==, 0);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * A dependent-load chase over @n lines of the non-coherent area (linear
 * 0x200000 = DPA coherent-size), after the prologue of fw_code:
 *
 *     movl 0x5004, %esi; movl 0x5008, %ecx; rdtsc; movl %eax, %ebx
 * 1:  movl (%esi), %esi; decl %ecx; jnz 1b
 *     rdtsc; subl %ebx, %eax; movl %eax, 0x5010; movl %esi, 0x500c
 *     movl $1, 0x5000
 * 2:  hlt; jmp 2b
 */
static const uint8_t fw_chase[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xc0, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0x8b, 0x35, 0x04, 0x50, 0x00, 0x00, 0x8b, 0x0d,
    0x08, 0x50, 0x00, 0x00, 0x0f, 0x31, 0x89, 0xc3, 0x8b, 0x36, 0x49, 0x75,
    0xfb, 0x0f, 0x31, 0x29, 0xd8, 0xa3, 0x10, 0x50, 0x00, 0x00, 0x89, 0x35,
    0x0c, 0x50, 0x00, 0x00, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00,
    0x17, 0x00, 0xa8, 0xf0, 0xff, 0xff,
};

typedef struct ChaseResult {
    uint32_t ticks;             /* TSC ticks of the loop */
    double wall_us;             /* from cont to done */
    uint64_t misses;
} ChaseResult;

/*
 * Start a host on firmware @code (fw_chase or a variant) whose chase
 * cycles through n lines of the non-coherent area from 0x200000 (its
 * pointers written into the pool file), halted before the first
 * instruction
 */
static void chase_start(Host *h, const char *pool, uint32_t n,
                        const uint8_t *code, size_t code_len,
                        const char *extra, const char *opts)
{
    uint32_t params[2] = { 0x200000, n };
    g_autofree uint32_t *chain = g_new0(uint32_t, n * (LINE / 4));
    uint32_t i;
    int fd;

    g_assert_cmpuint(n * LINE, <=, 2 * MiB);
    fw_host_start_code(h, pool, 0, code, code_len, extra, opts);
    for (i = 0; i < n; i++) {
        chain[i * (LINE / 4)] = 0x200000 + ((i + 1) % n) * LINE;
    }
    fd = open(pool, O_WRONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, chain, n * LINE, META_SIZE + COH_SIZE), ==,
                    n * LINE);
    close(fd);
    qtest_memwrite(h->qts, 0x5004, params, sizeof(params));
}

/*
 * Until the chase firmware sets its done word (0x5000 = 1), polled every
 * 1 ms (fewer polls disturb the vCPU's timing less); a chase that has not
 * finished after 120 s is a failure, not a hang
 */
static void chase_wait_done(Host *h)
{
    gint64 deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;

    while (qtest_readl(h->qts, 0x5000) != 1) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static ChaseResult chase_run(unsigned miss_ns, uint32_t n, const char *opts)
{
    g_autofree char *pool = pool_path("chase.pool");
    g_autofree char *extra = g_strdup_printf(TIMED ",miss-latency-ns=%u",
                                             miss_ns);
    ChaseResult r;
    int64_t t0;
    Host h;

    chase_start(&h, pool, n, fw_chase, sizeof(fw_chase), extra, opts);
    t0 = g_get_monotonic_time();
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    chase_wait_done(&h);
    r.wall_us = g_get_monotonic_time() - t0;
    r.ticks = qtest_readl(h.qts, 0x5010);
    r.misses = rstat(&h, CXLSHM_STAT_MISSES);
    g_assert_cmphex(qtest_readl(h.qts, 0x500c), ==, 0x200000);
    qtest_quit(h.qts);
    return r;
}

/*
 * Under -icount shift=0 a load that misses costs exactly the configured
 * miss latency in guest time (the TSC), the same in every run.
 */
static void test_timed_latency_icount(void)
{
    const char *icount = "-icount shift=0,sleep=off";
    uint32_t n = 1000;
    ChaseResult base = chase_run(0, n, icount);
    ChaseResult lat = chase_run(250, n, icount);
    ChaseResult again = chase_run(250, n, icount);

    g_test_message("icount: %u ticks for %u loads without latency, %u with "
                   "a 250 ns miss", base.ticks, n, lat.ticks);
    g_assert_cmpuint(base.misses, ==, n);
    g_assert_cmpuint(lat.misses, ==, n);
    g_assert_cmpuint(lat.ticks, ==, again.ticks);
    /*
     * Each load: the miss, plus the loop's 3 instructions at 1 ns each
     * (without latency TCG's I/O path shows one more: 4 ns per load).
     */
    g_assert_cmpuint(lat.ticks, >=, n * (250 + 3) - 2);
    g_assert_cmpuint(lat.ticks, <=, n * (250 + 3) + 2);
}

/*
 * Record/replay is refused at start, in both modes: the latency the
 * device charges moves the virtual clock in the middle of a translation
 * block (icount_advance_ns) without an event in the replay log, so a
 * replay would diverge.  The pool is not touched.
 */
static void test_record_replay_refused(void)
{
    static const char *const modes[] = { "", TIMED };
    g_autofree char *pool = pool_path("rr.pool");
    int i;

    for (i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *dev = host_args(pool, 0, modes[i]);
        g_autofree char *cmd = g_strdup_printf(
            "timeout 30 %s -accel tcg -display none -S "
            "-icount shift=0,rr=record,rrfile=/dev/null %s",
            g_getenv("QTEST_QEMU_BINARY"), dev);
        g_autofree char *out = NULL, *err = NULL;
        g_autofree char *before = file_state(pool);
        g_autofree char *after = NULL;
        int status;

        g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status,
                                                NULL));
        after = file_state(pool);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 ||
            !strstr(err, "record/replay is not supported")) {
            g_test_message("mode '%s': status 0x%x, stderr: %s", modes[i],
                           status, err);
            g_assert_not_reached();
        }
        g_assert_cmpstr(before, ==, after);
    }
}

/*
 * A line lock word that names a host beyond the pool's max-hosts (foreign
 * or corrupt metadata: no host of this pool can have written it) is taken
 * over as a dead holder's, and nothing is rolled back from an undo slot
 * the pool does not have.  Format 4 sizes the undo area by max-hosts: the
 * engine's bound was the build's 256 hosts, so host 200's slot was read
 * megabytes past the 4-host pool's tail (whatever was mapped there; the
 * unit test line-engine foreign-tag puts a PROT_NONE page there and
 * crashed on that engine).  Here the takeover, end to end.
 */
static void test_foreign_lock_tag(void)
{
    g_autofree char *pool = pool_path("foreign-tag.pool");
    uint64_t off = COH_SIZE + 0x5000;
    uint64_t tag = CXLPOOL_TAG(200, 0, 1);
    uint64_t lock = 0x10000 + ((off / 4096) % 8192) * 8, word;
    Host h;

    host_start(&h, pool, 0, true);
    qtest_quit(h.qts);
    patch_pool(pool, lock, &tag, 8);
    host_start(&h, pool, 0, true);
    mem_wq(&h, off, 0xf00d);
    g_assert_cmpuint(doorbell(&h, OP_WB, off, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, off), ==, 0xf00d);
    pool_pread(pool, lock, &word, 8);
    g_assert_cmphex(word, ==, 0);
    qtest_quit(h.qts);
}

/*
 * A host that died in the middle of a writeback left its line lock held
 * and its undo record armed; the next QEMU on the same slot takes the
 * lock over at its join and rolls the half-written line back.  (The kill
 * test found that this crashed the rejoining QEMU: the rollback ran
 * before the pool data was mapped.)  Layout: docs/pool-format.md.
 */
static void test_rejoin_rollback(void)
{
    g_autofree char *pool = pool_path("rollback.pool");
    uint64_t off = COH_SIZE + 0x3000;
    uint64_t tag = CXLPOOL_TAG(0, 0, 1);    /* host 0, slot 0, generation 1 */
    CXLPoolLayout lo;
    uint64_t undo;
    uint64_t lock = 0x10000 + ((off / 4096) % 8192) * 8;
    uint8_t old[LINE], torn[LINE], got[LINE];
    uint64_t zero = 0;
    Host h;

    cxlpool_layout(&lo, POOL_SIZE, 4);
    undo = lo.undo + (0 * 2 + 1) * 64 * 128;    /* host 0, bank 1 */
    host_start(&h, pool, 0, false);     /* generation 1, then leaves */
    qtest_quit(h.qts);

    memset(old, 0x5a, sizeof(old));
    memset(torn, 0xa5, LINE / 2);       /* died half-way through the line */
    memset(torn + LINE / 2, 0x5a, LINE / 2);
    patch_pool(pool, META_SIZE + off, torn, LINE);
    patch_pool(pool, undo + 8, &off, 8);
    patch_pool(pool, undo + 16, old, LINE);
    patch_pool(pool, undo, &tag, 8);
    patch_pool(pool, lock, &tag, 8);

    host_start(&h, pool, 0, false);     /* generation 2 rolls it back */
    g_assert_cmpuint(r64(&h, A_CXLSHM_HOST_GEN(0)), ==, 2);
    pool_pread(pool, META_SIZE + off, got, LINE);
    g_assert_cmpmem(got, LINE, old, LINE);
    pool_pread(pool, lock, &tag, 8);
    g_assert_cmphex(tag, ==, zero);
    pool_pread(pool, undo, &tag, 8);
    g_assert_cmphex(tag, ==, zero);
    qtest_quit(h.qts);
}

/*
 * A guest reset is a host failure and a rejoin: the unflushed line is
 * lost, the image is fetched again, the generation grows and another host
 * sees it in the host table.
 */
static void test_reset(void)
{
    g_autofree char *pool = pool_path("reset.pool");
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 1);

    mem_wq(&b, COH_SIZE + 0x40, 0xb0b);             /* b publishes a line */
    g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE, 0x1000), ==, 0);
    mem_wq(&a, COH_SIZE, 0xdead);                   /* a's dirty line */
    mem_wq(&a, 8, 0xc0c0);                          /* coherent window */

    qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(a.qts, "RESET");
    host_enable(&a, true);

    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RESETS), ==, 1);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 2);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);
    g_assert_cmphex(mem_rq(&a, COH_SIZE), ==, 0);           /* lost */
    g_assert_cmphex(mem_rq(&a, COH_SIZE + 0x40), ==, 0xb0b); /* fetched */
    g_assert_cmphex(mem_rq(&a, 8), ==, 0xc0c0);             /* survives */
    g_assert_cmpuint(doorbell(&a, OP_FLUSH, COH_SIZE, 0x1000), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0);        /* never lands */
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * A reset of the device while a doorbell op is in flight: the guest's
 * vCPU rings a doorbell writeback whose latency keeps it busy for about
 * a second (16384 lines at 60 us), and meanwhile the test thread resets
 * the device with a secondary bus reset of its root port (as another
 * vCPU of the guest can).  The host reset (image dropped and fetched
 * again, generation + 1, line locks of earlier lives taken over) runs
 * as a vCPU's safe work, soon after, with every vCPU outside guest code
 * and the doorbell's thread out of the op (its trace before the
 * reset's); the op's line is in the pool
 * if the op was counted, else not; DB_STATUS reads 0 (the registers
 * cleared), no line lock is left held, and the other host sees the new
 * generation and works on.  The body after fw_code's prologue (BAR5
 * mapped by a 2 MiB page at 0xe0000000; DB_OFFSET and DB_LEN set by the
 * test):
 *
 *     movl $0x11, 0x200000; movl $1, 0x5040
 *     movl $1, 0xe0100110; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
/* One statistic of this host's device from query-cxl-shm */
static int64_t shm_stat(QTestState *qts, const char *name)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-cxl-shm'}");
    QDict *info = qobject_to(QDict, qlist_peek(qdict_get_qlist(rsp,
                                                               "return")));
    int64_t v = qdict_get_int(qdict_get_qdict(info, "stats"), name);

    qobject_unref(rsp);
    return v;
}

/*
 * The host reset of a reset that came while vCPUs ran is their safe
 * work: done soon, not in the reset itself.  Waits until @n are counted.
 */
static void shm_wait_resets(QTestState *qts, int64_t n)
{
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

    while (shm_stat(qts, "resets") < n) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    g_assert_cmpint(shm_stat(qts, "resets"), ==, n);
}

static void test_reset_inside_doorbell(void)
{
    static const uint8_t body[] = {
        0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x00, 0x00, 0x00, 0xc7,
        0x05, 0x40, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xc7, 0x05,
        0x10, 0x01, 0x10, 0xe0, 0x01, 0x00, 0x00, 0x00, 0xc7, 0x05, 0x00,
        0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd,
    };
    g_autofree char *pool = pool_path("reset-doorbell.pool");
    g_autofree char *log = g_build_filename(tmpdir, "reset-doorbell.log",
                                            NULL);
    g_autofree char *opts = g_strdup_printf("-trace cxl_shm_op -trace "
                                            "cxl_shm_reset -D %s", log);
    g_autofree char *text = NULL;
    const char *op, *reset;
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    g_autofree uint64_t *locks = g_malloc(8192 * 8);
    uint64_t pde = 0xe0000083;
    int64_t wb;
    Host a, b;
    int i;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    memcpy(code + 0x40, body, sizeof(body));
    host_start(&b, pool, 1, true);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code),
                       ",latency-ns=60000", opts);
    qtest_memwrite(a.qts, 0x3000 + 256 * 8, &pde, sizeof(pde));
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, COH_SIZE);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, 16384 * LINE);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    /* rung: the DB_OP write returns at once, the op is in flight */
    fw_host_wait(&a);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);

    /* secondary bus reset of the root port: Bridge Control bit 6 */
    cfg_writel(a.qts, PXB_BUS, 0, 0x3c, (1 << 6) << 16);
    cfg_writel(a.qts, PXB_BUS, 0, 0x3c, 0);
    /* the reset cleared the BARs: the statistics from QMP */
    shm_wait_resets(a.qts, 1);
    wb = shm_stat(a.qts, "writeback-ops");
    g_test_message("the op was %s when the reset came",
                   wb ? "done (its latency still running)" : "not begun");
    /* its 16384 lines are one piece of the thread's: all or nothing */
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, wb ? 0x11ULL : 0ULL);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 2);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);
    /* the doorbell's thread left the op before the reset began */
    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    op = strstr(text, "cxl_shm_op host 0 writeback");
    reset = strstr(text, "cxl_shm_reset host 0");
    g_assert_nonnull(op);
    g_assert_nonnull(reset);
    if (reset < op) {
        g_test_message("the host reset ran while the doorbell's thread "
                       "was inside the op; the trace:");
        g_test_message("%s", text);
        g_assert_not_reached();
    }

    pool_pread(pool, 0x10000, locks, 8192 * 8);
    for (i = 0; i < 8192; i++) {
        g_assert_cmphex(locks[i], ==, 0);
    }
    mem_wq(&b, COH_SIZE + 0x40, 0xb0b);
    g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE, 0x1000), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0xb0b);
    host_enable(&a, true);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, 0);
    g_assert_cmpuint(doorbell(&a, OP_INV, COH_SIZE, 0x1000), ==, 0);
    g_assert_cmphex(mem_rq(&a, COH_SIZE + 0x40), ==, 0xb0b);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * The guest's own vCPU resets the device (a secondary bus reset of its
 * root port from a config write): the host reset cannot pause the vCPUs
 * from there and runs as that vCPU's safe work, before its next
 * instruction, with every vCPU outside guest code: the reset is counted,
 * the other host sees the new generation, and the unflushed line stored
 * just before is lost.  The
 * body after fw_code's prologue:
 *
 *     movl $0x11, 0x200000
 *     movw $0xcf8, %dx; movl $0x800c003c, %eax; outl %eax, %dx
 *     movw $0xcfc, %dx; movl $0x00400000, %eax; outl %eax, %dx
 *     xorl %eax, %eax; outl %eax, %dx; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static void test_reset_from_vcpu(void)
{
    static const uint8_t body[] = {
        0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x00, 0x00, 0x00, 0x66,
        0xba, 0xf8, 0x0c, 0xb8, 0x3c, 0x00, 0x0c, 0x80, 0xef, 0x66, 0xba,
        0xfc, 0x0c, 0xb8, 0x00, 0x00, 0x40, 0x00, 0xef, 0x31, 0xc0, 0xef,
        0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4,
        0xeb, 0xfd,
    };
    g_autofree char *pool = pool_path("reset-vcpu.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    Host a, b;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    memcpy(code + 0x40, body, sizeof(body));
    host_start(&b, pool, 1, true);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), NULL, NULL);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    fw_host_wait(&a);
    shm_wait_resets(a.qts, 1);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 2);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);
    host_enable(&a, true);
    g_assert_cmphex(mem_rq(&a, COH_SIZE), ==, 0);           /* lost */
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0);
    mem_wq(&b, COH_SIZE + 0x40, 0xb0b);
    g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE, 0x1000), ==, 0);
    g_assert_cmpuint(doorbell(&a, OP_INV, COH_SIZE, 0x1000), ==, 0);
    g_assert_cmphex(mem_rq(&a, COH_SIZE + 0x40), ==, 0xb0b);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/* Map BAR2 and find the primary mailbox in the device capability array */
static uint64_t find_mbox(QTestState *qts)
{
    int n, i;

    cfg_writel(qts, DEV_BUS, 0, 0x18, BAR2_ADDR);
    cfg_writel(qts, DEV_BUS, 0, 0x1c, 0);
    n = (qtest_readq(qts, BAR2_ADDR) >> 32) & 0xffff;
    for (i = 1; i <= n; i++) {
        uint64_t e = BAR2_ADDR + 16 * i;

        if ((qtest_readl(qts, e) & 0xffff) == 2) {
            return BAR2_ADDR + qtest_readl(qts, e + 4);
        }
    }
    g_assert_not_reached();
}

/* One mailbox command; returns its return code */
static uint16_t mbox_cmd(QTestState *qts, uint64_t mb, uint16_t opcode,
                         const void *in, size_t len, void *out, size_t outlen)
{
    if (len) {
        qtest_memwrite(qts, mb + 0x20, in, len);
    }
    qtest_writeq(qts, mb + 0x08, opcode | ((uint64_t)len << 16));
    qtest_writel(qts, mb + 0x04, 1);                    /* doorbell */
    g_assert_cmpuint(qtest_readl(qts, mb + 0x04) & 1, ==, 0);
    if (outlen) {
        qtest_memread(qts, mb + 0x20, out, outlen);
    }
    return (qtest_readq(qts, mb + 0x10) >> 32) & 0xffff;
}

/* Is OPCODE in the Command Effects Log? */
static bool cel_has(QTestState *qts, uint64_t mb, uint16_t opcode)
{
    static const uint8_t cel_uuid[16] = {
        0x0d, 0xa9, 0xc0, 0xb5, 0xbf, 0x41, 0x4b, 0x78,
        0x8f, 0x79, 0x96, 0xb1, 0x62, 0x3b, 0x3f, 0x17,
    };
    uint8_t logs[8 + 20], req[24], cel[2048];
    uint32_t size, i;

    g_assert_cmpuint(mbox_cmd(qts, mb, 0x0400, NULL, 0, logs, sizeof(logs)),
                     ==, 0);
    g_assert_cmpmem(logs + 8, 16, cel_uuid, 16);
    size = ldl_le_p(logs + 24);
    g_assert_cmpuint(size, <=, sizeof(cel));
    memcpy(req, cel_uuid, 16);
    stl_le_p(req + 16, 0);
    stl_le_p(req + 20, size);
    g_assert_cmpuint(mbox_cmd(qts, mb, 0x0401, req, sizeof(req), cel, size),
                     ==, 0);
    for (i = 0; i < size; i += 4) {
        if (lduw_le_p(cel + i) == opcode) {
            return true;
        }
    }
    return false;
}

/*
 * One guest must never wipe the pod: Sanitize is neither offered (CEL)
 * nor carried out (Unsupported, pool untouched, also after a reset that
 * rebuilds the parent's command set).  Clear Poison's data write lands
 * in the pool as one whole line; a non-coherent copy cached by a host
 * stays stale until that host invalidates.
 */
static void test_mailbox(void)
{
    g_autofree char *pool = pool_path("mailbox.pool");
    uint64_t nc = COH_SIZE + 0x2000, mb;
    uint8_t clear[8 + LINE], line[LINE], want[LINE];
    Host a, b;
    int pass;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&a, 0x2000, 0xc0c0c0c0ULL);
    mem_wq(&a, nc, 0xabcdULL);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, 0x2000), ==, 0xc0c0c0c0ULL);

    for (pass = 0; pass < 2; pass++) {
        mb = find_mbox(a.qts);
        g_assert_false(cel_has(a.qts, mb, 0x4400));
        g_assert_true(cel_has(a.qts, mb, 0x4302));      /* Clear Poison */
        g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4400, NULL, 0, NULL, 0),
                        ==, 0x3);                       /* Unsupported */
        g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4401, NULL, 0, NULL, 0),
                        ==, 0x3);                       /* Secure Erase */
        qtest_clock_step(a.qts, 60000000000LL);     /* 60 s */
        g_assert_cmphex(pool_rq(pool, 0x2000), ==, 0xc0c0c0c0ULL);
        g_assert_cmphex(pool_rq(pool, nc), ==, 0xabcdULL);
        g_assert_cmphex(mem_rq(&b, 0x2000), ==, 0xc0c0c0c0ULL);
        if (pass == 0) {
            /* a reset rebuilds the parent's command set */
            qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
            qtest_qmp_eventwait(a.qts, "RESET");
            host_enable(&a, true);
        }
    }

    /* Clear Poison writes a whole line into the pool, both areas */
    memset(want, 0x5a, sizeof(want));
    stq_le_p(clear, nc);
    memcpy(clear + 8, want, LINE);
    g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4302, clear, sizeof(clear),
                             NULL, 0), ==, 0);
    pool_pread(pool, META_SIZE + nc, line, LINE);
    g_assert_cmpmem(line, LINE, want, LINE);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0xabcdULL);     /* a's copy: stale */
    g_assert_cmpuint(doorbell(&a, OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0x5a5a5a5a5a5a5a5aULL);
    stq_le_p(clear, 0x2000);
    g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4302, clear, sizeof(clear),
                             NULL, 0), ==, 0);
    g_assert_cmphex(mem_rq(&b, 0x2000), ==, 0x5a5a5a5a5a5a5a5aULL);
    g_assert_cmphex(mem_rq(&b, 0x2038), ==, 0x5a5a5a5a5a5a5a5aULL);
    qtest_quit(b.qts);
    qtest_quit(a.qts);

    /* a device that is all coherent window (no image) takes it too */
    {
        g_autofree char *pool2 = pool_path("mailbox-coh.pool");
        g_autofree char *args = host_args(pool2, 0, NULL);
        g_autofree char *old = g_strdup_printf("coherent-size=%llu",
                                               COH_SIZE);
        g_autofree char *new = g_strdup_printf("coherent-size=%llu",
                                               POOL_SIZE);
        g_auto(GStrv) parts = g_strsplit(args, old, 2);
        g_autofree char *all = g_strjoinv(new, parts);
        Host c;

        g_assert_nonnull(parts[1]);
        c.qts = qtest_init(all);
        host_enable(&c, true);
        mb = find_mbox(c.qts);
        stq_le_p(clear, POOL_SIZE - LINE);
        g_assert_cmphex(mbox_cmd(c.qts, mb, 0x4302, clear, sizeof(clear),
                                 NULL, 0), ==, 0);
        g_assert_cmphex(mem_rq(&c, POOL_SIZE - 8), ==, 0x5a5a5a5a5a5a5a5aULL);
        qtest_quit(c.qts);
    }
}

/* SHA-256 of the pool's data area, as the pool file holds it */
static char *pool_data_digest(const char *pool)
{
    g_autoptr(GChecksum) ck = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree uint8_t *buf = g_malloc(MiB);
    uint64_t off;
    int fd = open(pool, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    for (off = 0; off < POOL_SIZE; off += MiB) {
        g_assert_cmpint(pread(fd, buf, MiB, META_SIZE + off), ==, MiB);
        g_checksum_update(ck, buf, MiB);
    }
    close(fd);
    return g_strdup(g_checksum_get_string(ck));
}

/*
 * The mailbox is an allowlist: exactly the commands one head of a shared
 * device may use are offered (CEL) and carried out.  Every command of
 * the QEMU 10.0 tree that changes the device for all heads (firmware
 * transfer and activation, Set Feature, Set LSA, Sanitize) and any
 * command the tree may gain (Secure Erase, Media Operations, the dynamic
 * capacity commands) answers Unsupported and leaves the pool unchanged.
 */
static const uint16_t mbox_allowed[] = {
    0x0100, 0x0101, 0x0102, 0x0103,         /* event records, policy */
    0x0200,                                 /* Get FW Info */
    0x0300, 0x0301,                         /* timestamp */
    0x0400, 0x0401,                         /* logs */
    0x0500, 0x0501,                         /* features: read */
    0x4000,                                 /* Identify Memory Device */
    0x4100, 0x4102,                         /* partition info, Get LSA */
    0x4300, 0x4301, 0x4302, 0x4303, 0x4304, 0x4305,    /* poison, scan */
    0x4500,                                 /* Get Security State */
};

static void test_mailbox_allowlist(void)
{
    static const uint16_t refused[] = {
        0x0201, 0x0202,                     /* FW Transfer, Activate */
        0x0502,                             /* Set Feature */
        0x4101,                             /* Set Partition Info */
        0x4103,                             /* Set LSA */
        0x4400, 0x4401, 0x4402,             /* Sanitize, Erase, Media Ops */
        0x4800, 0x4801, 0x4802, 0x4803,     /* dynamic capacity */
        0x4204,                             /* Set Shutdown State */
    };
    g_autofree char *pool = pool_path("mailbox-allow.pool");
    g_autofree char *before = NULL, *after = NULL;
    uint8_t payload[72];
    uint64_t nc = COH_SIZE + 0x3000, mb;
    size_t i, j;
    Host a;

    host_start(&a, pool, 0, true);
    mem_wq(&a, 0x3000, 0x1111);
    mem_wq(&a, nc, 0x2222);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc, LINE), ==, 0);
    before = pool_data_digest(pool);
    mb = find_mbox(a.qts);

    for (i = 0; i < ARRAY_SIZE(mbox_allowed); i++) {
        if (!cel_has(a.qts, mb, mbox_allowed[i])) {
            g_test_message("allowed command %04x is not in the CEL",
                           mbox_allowed[i]);
            g_assert_not_reached();
        }
    }
    for (i = 0; i < ARRAY_SIZE(refused); i++) {
        uint16_t rc;

        g_assert_false(cel_has(a.qts, mb, refused[i]));
        for (j = 0; j < 3; j++) {
            /* no payload, a short one, a Set LSA sized one of 0x5a */
            size_t len = j == 0 ? 0 : j == 1 ? 8 : sizeof(payload);

            memset(payload, j == 2 ? 0x5a : 0, sizeof(payload));
            rc = mbox_cmd(a.qts, mb, refused[i], payload, len, NULL, 0);
            if (rc != 0x3) {
                g_test_message("command %04x (%zu bytes): return code %u, "
                               "not Unsupported", refused[i], len, rc);
                g_assert_not_reached();
            }
        }
    }

    /*
     * Get Supported Features (CXL r3.1 8.2.9.6.1): header of 8 bytes, then
     * 48-byte entries.  Set Feature is refused, so no feature may be
     * offered as changeable: Attribute Flags bit 0 clear and Set Feature
     * Size 0 in every entry.
     */
    {
        uint8_t req[8] = { 0 }, out[8 + 4 * 48];
        uint16_t n;

        stl_le_p(req, sizeof(out));
        g_assert_cmphex(mbox_cmd(a.qts, mb, 0x0500, req, sizeof(req), out,
                                 sizeof(out)), ==, 0);
        n = lduw_le_p(out);
        g_assert_cmpuint(n, >=, 1);
        g_assert_cmpuint(n, <=, 4);
        for (i = 0; i < n; i++) {
            const uint8_t *e = out + 8 + 48 * i;

            g_test_message("feature %zu: set size %u, attributes 0x%x", i,
                           lduw_le_p(e + 20), ldl_le_p(e + 22));
            g_assert_cmpuint(ldl_le_p(e + 22) & 1, ==, 0);
            g_assert_cmpuint(lduw_le_p(e + 20), ==, 0);
        }
    }

    qtest_clock_step(a.qts, 60000000000LL);     /* background work: none */
    after = pool_data_digest(pool);
    g_assert_cmpstr(before, ==, after);
    g_assert_cmphex(mem_rq(&a, 0x3000), ==, 0x1111);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0x2222);
    qtest_quit(a.qts);
}

/*
 * A writeback over bytes another host wrote back since this host fetched
 * the line is counted and reported (CXL_SHM_CONFLICT).
 */
static void test_conflict(void)
{
    g_autofree char *pool = pool_path("conflict.pool");
    QDict *ev, *data;
    unsigned events = 0, missed = 0;
    Host a, b;
    int i;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);

    mem_wq(&b, COH_SIZE + 0x88, 0xbbbb);            /* b: bytes 8..15 */
    g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
    mem_wq(&a, COH_SIZE + 0x80, 0xaaaa);            /* a, stale: bytes 0..7 */
    g_assert_cmpuint(doorbell(&a, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x88), ==, 0);  /* clobbered */
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_CONFLICTS), ==, 1);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_CONFLICTS), ==, 0);

    ev = qmp_event_after(&a, "CXL_SHM_CONFLICT");
    data = qdict_get_qdict(ev, "data");
    g_assert_cmpuint(qdict_get_int(data, "host-id"), ==, 0);
    g_assert_cmpuint(qdict_get_int(data, "generation"), ==, 1);
    g_assert_cmpuint(qdict_get_int(data, "dpa"), ==, COH_SIZE + 0x80);
    /* b's bytes 8 and 9 (0xbbbb) are lost */
    g_assert_cmphex(qdict_get_int(data, "lost-mask"), ==, 0x300);
    g_assert_cmpuint(qdict_get_int(data, "lost-bytes"), ==, 2);
    g_assert_true(g_str_has_prefix(qdict_get_str(data, "theirs"),
                                   "0000000000000000bbbb00"));
    g_assert_true(g_str_has_prefix(qdict_get_str(data, "mine"),
                                   "aaaa000000000000000000"));
    g_assert_cmpuint(qdict_get_int(data, "missed"), ==, 0);
    qobject_unref(ev);
    g_assert_null(qtest_qmp_event_ref(a.qts, "CXL_SHM_CONFLICT"));
    g_assert_null(qtest_qmp_event_ref(b.qts, "CXL_SHM_CONFLICT"));

    /*
     * The events are rate-limited (a burst of 256, then 100 a second of
     * guest time, which only qtest_clock_step() moves here), the count is
     * not: 600 more conflicts give 255 events (the burst's rest), and the
     * first event once a token is back counts the 345 suppressed
     */
    for (i = 0; i < 600; i++) {
        g_assert_cmpuint(doorbell(&b, OP_INV, COH_SIZE + 0x80, 64), ==, 0);
        g_assert_cmpuint(doorbell(&a, OP_INV, COH_SIZE + 0x80, 64), ==, 0);
        mem_wq(&b, COH_SIZE + 0x88, 0xbb00 + i);
        g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
        mem_wq(&a, COH_SIZE + 0x80, 0xaa00 + i);
        g_assert_cmpuint(doorbell(&a, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_CONFLICTS), ==, 601);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_CONFLICTS), ==, 0);
    qtest_qmp_assert_success(a.qts, "{ 'execute': 'query-status' }");
    while ((ev = qtest_qmp_event_ref(a.qts, "CXL_SHM_CONFLICT"))) {
        events++;
        missed += qdict_get_int(qdict_get_qdict(ev, "data"), "missed");
        qobject_unref(ev);
    }
    g_assert_cmpuint(events, ==, 255);
    g_assert_cmpuint(missed, ==, 0);
    qtest_clock_step(a.qts, 10 * 1000 * 1000);     /* one token back */
    g_assert_cmpuint(doorbell(&b, OP_INV, COH_SIZE + 0x80, 64), ==, 0);
    g_assert_cmpuint(doorbell(&a, OP_INV, COH_SIZE + 0x80, 64), ==, 0);
    mem_wq(&b, COH_SIZE + 0x88, 0xbbff);
    g_assert_cmpuint(doorbell(&b, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
    mem_wq(&a, COH_SIZE + 0x80, 0xaaff);
    g_assert_cmpuint(doorbell(&a, OP_WB, COH_SIZE + 0x80, 64), ==, 0);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_CONFLICTS), ==, 602);
    ev = qmp_event_after(&a, "CXL_SHM_CONFLICT");
    g_assert_cmpuint(qdict_get_int(qdict_get_qdict(ev, "data"), "missed"),
                     ==, 345);
    qobject_unref(ev);
    g_assert_null(qtest_qmp_event_ref(a.qts, "CXL_SHM_CONFLICT"));
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/* Seeded eviction: an unflushed line reaches the pool by itself */
static void test_eviction(void)
{
    g_autofree char *pool = pool_path("evict.pool");
    g_autofree char *args = host_args(pool, 0, ",evict-rate=1000");
    Host h;

    h.qts = qtest_init(args);
    host_enable(&h, true);
    g_assert_cmpuint(r32(&h, A_CXLSHM_EVICT_RATE), ==, 1000);
    mem_wq(&h, COH_SIZE + 0x100, 0xe1e1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x100), ==, 0);
    qtest_clock_step(h.qts, 50 * 1000 * 1000);      /* 50 ms guest time */
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x100), ==, 0xe1e1);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_EVICTED), >=, 1000);
    g_assert_cmphex(mem_rq(&h, COH_SIZE + 0x100), ==, 0xe1e1);
    qtest_quit(h.qts);
}

/* A watchdog for a step that must not wait for a stopped peer */
static const char *stopped_peer_what;

static void stopped_peer_hung(int sig)
{
    static const char msg[] = "stopped-peer: this step waited 30 s for a "
                              "stopped peer: ";

    if (write(2, msg, sizeof(msg) - 1) < 0 ||
        write(2, stopped_peer_what, strlen(stopped_peer_what)) < 0 ||
        write(2, "\n", 1) < 0) {
        /* nothing more to say */
    }
    abort();    /* libqtest's abort hook kills the QEMUs */
}

static void stopped_peer_watch(const char *what)
{
    struct sigaction sa = { 0 };

    stopped_peer_what = what;
    sa.sa_handler = stopped_peer_hung;
    sigaction(SIGALRM, &sa, NULL);
    alarm(30);
}

static void stopped_peer_unwatch(void)
{
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

/* query-cxl-shm answers (the main loop and the BQL are free) */
static void stopped_peer_qmp(QTestState *qts)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-cxl-shm'}");

    g_assert_true(qdict_haskey(rsp, "return"));
    qobject_unref(rsp);
}

/*
 * A peer stopped (SIGSTOP, a debugger) while it holds a line lock never
 * freezes another host's main loop: host b stands in for the stopped
 * peer, its tag (live: nobody takes the lock over) written into the lock
 * word of the page host a holds dirty.  a's eviction timer (under the
 * BQL) skips the busy lines: the clock steps, QMP answers; once the
 * lock is free the dirty line is evicted to the pool.  a's mailbox Clear
 * Poison of a line of that page answers (Internal Error, after a bounded
 * wait) instead of waiting under the BQL, and succeeds once it is free.
 * 30 s watchdog on each step: the old device waited forever.
 */
static void test_stopped_peer_line_lock(void)
{
    g_autofree char *pool = pool_path("stopped-line.pool");
    g_autofree char *args = host_args(pool, 0, ",evict-rate=1000");
    uint64_t nc = COH_SIZE + 0x7000;
    uint64_t word = 0x10000 + (nc / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0, w, mb;
    uint8_t clear[8 + LINE], line[LINE];
    Host a, b;

    host_start(&b, pool, 1, true);
    a.qts = qtest_init(args);
    host_enable(&a, true);
    mem_wq(&a, nc + 0x100, 0xe1e1);
    pool_pread(pool, word, &w, 8);
    g_assert_cmphex(w, ==, 0);
    patch_pool(pool, word, &tag, 8);

    stopped_peer_watch("a's eviction timer");
    qtest_clock_step(a.qts, 5 * 1000 * 1000);       /* 5 ms guest time */
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    g_assert_cmphex(pool_rq(pool, nc + 0x100), ==, 0);

    mb = find_mbox(a.qts);
    memset(clear, 0x5a, sizeof(clear));
    stq_le_p(clear, nc + 0x200);
    stopped_peer_watch("a's Clear Poison");
    g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4302, clear, sizeof(clear),
                             NULL, 0), ==, 0x4);    /* Internal Error */
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    pool_pread(pool, META_SIZE + nc + 0x200, line, LINE);
    g_assert_cmphex(line[0], ==, 0);

    patch_pool(pool, word, &zero, 8);
    qtest_clock_step(a.qts, 50 * 1000 * 1000);
    g_assert_cmphex(pool_rq(pool, nc + 0x100), ==, 0xe1e1);
    g_assert_cmphex(mbox_cmd(a.qts, mb, 0x4302, clear, sizeof(clear),
                             NULL, 0), ==, 0);
    pool_pread(pool, META_SIZE + nc + 0x200, line, LINE);
    g_assert_cmphex(line[0], ==, 0x5a);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * The fence at an interrupt or exception delivery runs under the BQL: a
 * queued clwb whose line's lock a stopped peer holds must not make it
 * wait there.  The guest dirties a non-coherent line, clwb's it (queued,
 * writeback=deferred), then raises int $0x20 (its IDT's handler is an
 * iret) while the line's lock word is held under live host b's tag: the
 * delivery does not wait (the vCPU reaches the handler, the monitor and
 * QMP answer, the line is not in the pool yet); the handler's iret, a
 * fence point outside the BQL, may wait for the lock like any vCPU that
 * needs the line, and once the lock is free the line lands.  The body
 * after fw_code's prologue (IDT at 0x6000, its descriptor at 0x6800,
 * both written by the test):
 *
 *     jmp 1f; iret                    (the handler, at 0xfffff042)
 * 1:  movl $0x7000, %esp; lidt 0x6800
 *     movl $0x11, 0x200000; clwb 0x200000; movl $1, 0x5000
 * 2:  cmpl $1, 0x5010; jne 2b
 *     int $0x20; movl $2, 0x5000
 * 3:  cmpl $2, 0x5010; jne 3b
 *     sfence; movl $3, 0x5000
 * 4:  hlt; jmp 4b
 */
static void stopped_peer_fence(bool timed)
{
    static const uint8_t body[] = {
        0xeb, 0x01, 0xcf, 0xbc, 0x00, 0x70, 0x00, 0x00, 0x0f, 0x01, 0x1d,
        0x00, 0x68, 0x00, 0x00, 0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11,
        0x00, 0x00, 0x00, 0x66, 0x0f, 0xae, 0x35, 0x00, 0x00, 0x20, 0x00,
        0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x83,
        0x3d, 0x10, 0x50, 0x00, 0x00, 0x01, 0x75, 0xf7, 0xcd, 0x20, 0xc7,
        0x05, 0x00, 0x50, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x83, 0x3d,
        0x10, 0x50, 0x00, 0x00, 0x02, 0x75, 0xf7, 0x0f, 0xae, 0xf8, 0xc7,
        0x05, 0x00, 0x50, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0xf4, 0xeb,
        0xfd,
    };
    g_autofree char *pool = pool_path("stopped-fence.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t word = 0x10000 + (COH_SIZE / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0;
    /* vector 0x20: a 32-bit interrupt gate to 0xfffff042, selector 8 */
    uint64_t gate = 0x0008f042ULL | 0xffff8e00ULL << 32;
    uint8_t idtr[6] = { 0x07, 0x01, 0x00, 0x60, 0x00, 0x00 };
    Host a, b;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* its GDT */
    memcpy(code + 0x40, body, sizeof(body));
    host_start(&b, pool, 1, true);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code),
                       timed ? TIMED : NULL, NULL);
    qtest_memwrite(a.qts, 0x6000 + 0x20 * 8, &gate, sizeof(gate));
    qtest_memwrite(a.qts, 0x6800, idtr, sizeof(idtr));
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    fw_phase(&a, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_DEFERRED), ==, 1);
    patch_pool(pool, word, &tag, 8);

    stopped_peer_watch("a's fence at an exception delivery");
    qtest_writel(a.qts, 0x5010, 1);
    /* delivered: the vCPU is in the handler (the monitor answers) */
    for (;;) {
        g_autofree char *regs = qtest_hmp(a.qts, "info registers");

        if (strstr(regs, "EIP=fffff042")) {
            break;
        }
        g_usleep(1000);
    }
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0);
    g_assert_cmpuint(qtest_readl(a.qts, 0x5000), ==, 1);

    /* iret is a fence point outside the BQL: the vCPU may wait there */
    patch_pool(pool, word, &zero, 8);
    fw_phase(&a, 2);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11);
    qtest_writel(a.qts, 0x5010, 2);
    fw_phase(&a, 3);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

static void test_stopped_peer_fence(void)
{
    stopped_peer_fence(false);
}

/* QMP command @cmd answers within a second although a peer is stopped */
static void stopped_peer_cmd(QTestState *qts, const char *cmd)
{
    gint64 t0 = g_get_monotonic_time(), took;

    qtest_qmp_assert_success(qts, "{'execute': %s}", cmd);
    took = g_get_monotonic_time() - t0;
    g_test_message("%s answered in %" PRId64 " us", cmd, took);
    g_assert_cmpint(took, <, G_USEC_PER_SEC);
}

/*
 * a's vCPU runs an instruction again and again, a line it needs being
 * locked by a stopped peer: it stays pausable.  Waits until it has
 * retried 10 times (a device without the counter: 2 s, time enough to be
 * there); QMP stop answers within a second and leaves it paused (no more
 * tries), cont answers.  Returns the tries counted at the stop.
 */
static uint64_t stopped_peer_pausable(Host *a, const char *what)
{
    gint64 deadline = g_get_monotonic_time() + 2 * G_USEC_PER_SEC;
    uint64_t retries;
    QDict *rsp;

    while (rstat(a, CXLSHM_STAT_RETRIES) < 10 &&
           g_get_monotonic_time() < deadline) {
        g_usleep(1000);
    }
    stopped_peer_watch(what);
    stopped_peer_cmd(a->qts, "stop");
    rsp = qtest_qmp(a->qts, "{'execute': 'query-status'}");
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "return"),
                                  "status"), ==, "paused");
    qobject_unref(rsp);
    retries = rstat(a, CXLSHM_STAT_RETRIES);
    g_usleep(20000);
    g_assert_cmpuint(rstat(a, CXLSHM_STAT_RETRIES), ==, retries);
    stopped_peer_cmd(a->qts, "cont");
    stopped_peer_qmp(a->qts);
    stopped_peer_unwatch();
    g_test_message("%" PRIu64 " tries before the stop", retries);
    g_assert_cmpuint(retries, >=, 10);
    g_assert_cmpuint(qtest_readl(a->qts, 0x5000), ==, 0);
    return retries;
}

/*
 * No vCPU waits for another host (docs/failure-model.md, "A stopped
 * host"): the guest stores to a non-coherent line, clwb's it and fences,
 * while the line's page lock is held under live host b's tag (b stopped
 * in the middle of a writeback).  The sfence finds the line busy and the
 * vCPU runs it again, and again (counted in STAT_RETRIES): it stays
 * pausable, so a's QMP stop and cont each answer within a second, and
 * the line is not in the pool.  Once the lock is free the fence
 * completes and the line lands.  The old device's vCPU spun inside the
 * fence, in an RCU read-side section, until b went on: stop did not
 * answer (30 s watchdog).  The body after fw_code's prologue:
 *
 *     movl $0x11, 0x200000; clwb 0x200000; sfence; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static void test_stopped_peer_vcpu(void)
{
    static const uint8_t body[] = {
        0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x00, 0x00, 0x00, 0x66,
        0x0f, 0xae, 0x35, 0x00, 0x00, 0x20, 0x00, 0x0f, 0xae, 0xf8, 0xc7,
        0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb,
        0xfd,
    };
    g_autofree char *pool = pool_path("stopped-vcpu.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t word = 0x10000 + (COH_SIZE / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0;
    Host a, b;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* its GDT */
    memcpy(code + 0x40, body, sizeof(body));
    host_start(&b, pool, 1, true);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), NULL, NULL);
    patch_pool(pool, word, &tag, 8);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");

    /* the vCPU is at its sfence, running it again and again */
    stopped_peer_pausable(&a, "a's QMP stop and cont while its vCPU "
                          "retries");
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0);

    /* b goes on: the fence completes, the line is in the pool */
    patch_pool(pool, word, &zero, 8);
    fw_phase(&a, 1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * The same for a mode=timed access (patch accel/tcg MEMTX_RETRY): the
 * guest loads a coherent line whose lock word is held under live host
 * b's tag; the load is a miss that needs the lock, so the vCPU runs it
 * again and again, stays pausable (stop and cont answer), and reads the
 * line once the lock is free.  The old device waited for the lock inside
 * the MMIO access.  The body after fw_code's prologue:
 *
 *     movl 0x400040, %eax; movl %eax, 0x5004; movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static void test_stopped_peer_vcpu_timed(void)
{
    static const uint8_t body[] = {
        0xa1, 0x40, 0x00, 0x40, 0x00, 0xa3, 0x04, 0x50, 0x00, 0x00, 0xc7,
        0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb,
        0xfd,
    };
    g_autofree char *pool = pool_path("stopped-vcpu-timed.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t word = 0x10000 + 1 * 8;    /* coherent line 1's lock word */
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0, v = 0x5eed;
    Host a, b;

    g_assert_cmphex(code[0x40], ==, 0xc7);      /* the body of fw_code */
    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* its GDT */
    memcpy(code + 0x40, body, sizeof(body));
    timed_start(&b, pool, 1, NULL);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), TIMED, NULL);
    patch_pool(pool, META_SIZE + 0x40, &v, 8);
    patch_pool(pool, word, &tag, 8);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");

    stopped_peer_pausable(&a, "a's QMP stop and cont while its timed load "
                          "retries");

    patch_pool(pool, word, &zero, 8);
    fw_phase(&a, 1);
    g_assert_cmphex(qtest_readl(a.qts, 0x5004), ==, 0x5eed);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * The doorbell completes asynchronously (docs/interfaces.md, section 1):
 * a ring whose range holds a line a stopped peer keeps locked returns at
 * once and DB_STATUS reads busy until the line is free; meanwhile a's
 * QMP stop, cont and system_reset answer within a second (the reset
 * drops the op: DB_STATUS reads 0, the line was lost with the image);
 * a second op rung while the lock is held completes once b goes on; and
 * quit with an op in flight exits at once.  The old device ran the op
 * inside the DB_OP write, waiting for b: the write did not return.
 */
static void test_stopped_peer_doorbell(void)
{
    g_autofree char *pool = pool_path("stopped-db.pool");
    uint64_t nc = COH_SIZE + 0xa000;
    uint64_t word = 0x10000 + (nc / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0;
    gint64 t0;
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&a, nc + 0x40, 0xd0d0);
    patch_pool(pool, word, &tag, 8);

    stopped_peer_watch("a's doorbell ring");
    t0 = g_get_monotonic_time();
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, nc);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, 4096);
    qtest_writel(a.qts, BAR5_ADDR + A_CXLSHM_DB_OP, OP_WB);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, G_USEC_PER_SEC);
    g_usleep(20000);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);
    g_assert_cmphex(pool_rq(pool, nc + 0x40), ==, 0);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RETRIES), >, 0);
    stopped_peer_cmd(a.qts, "stop");
    stopped_peer_cmd(a.qts, "cont");
    stopped_peer_cmd(a.qts, "system_reset");
    qtest_qmp_eventwait(a.qts, "RESET");
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    /* the reset dropped the op and the dirty line */
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + 0x40), ==, 0);

    host_enable(&a, true);
    mem_wq(&a, nc + 0x80, 0xd1d1);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET, nc);
    qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, 4096);
    qtest_writel(a.qts, BAR5_ADDR + A_CXLSHM_DB_OP, OP_WB);
    g_usleep(20000);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);
    patch_pool(pool, word, &zero, 8);
    g_assert_cmpuint(db_wait(&a), ==, 0);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_OPS), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc + 0x80), ==, 0xd1d1);

    /* quit with an op in flight */
    mem_wq(&a, nc + 0xc0, 0xd2d2);
    patch_pool(pool, word, &tag, 8);
    qtest_writel(a.qts, BAR5_ADDR + A_CXLSHM_DB_OP, OP_WB);
    stopped_peer_watch("a's quit with a doorbell op in flight");
    qtest_quit(a.qts);
    stopped_peer_unwatch();
    patch_pool(pool, word, &zero, 8);
    g_assert_cmphex(pool_rq(pool, nc + 0xc0), ==, 0);
    qtest_quit(b.qts);
}

/*
 * The same in mode=timed: the clwb'd line is dirty in a's cache model,
 * and the fence at the delivery must not wait for its lock either.
 */
static void test_stopped_peer_fence_timed(void)
{
    stopped_peer_fence(true);
}

/*
 * A timed host's reset removes its earlier life's marks from the pod's
 * snoop filter, each set under its coherent line's lock: a set whose lock
 * a stopped peer keeps must not make the reset wait under the BQL.  a
 * reads two coherent lines (the filter lists a for both), the lock word
 * of the first is held under live host b's tag, a's system_reset answers
 * (30 s watchdog) with a's mark gone from the free set and still in the
 * held one.  It stays there once the lock is free (the reset does not
 * come back for it), as a filter's entry stays after a host dropped its
 * line silently: b's store back-invalidates a, then b alone holds the
 * line, and a works on.
 */
/* The holders word of the filter entry of coherent line @off, or 0 */
static uint64_t sf_entry_of(const char *pool, uint64_t off)
{
    CXLPoolSnoopEntry e[4];
    CXLPoolLayout lo;
    int i;

    /* the default filter: 32768 entries, 4 ways per set */
    cxlpool_layout(&lo, POOL_SIZE, 4);
    pool_pread(pool, lo.sf_entries + (off / LINE % 8192) * sizeof(e), e,
               sizeof(e));
    for (i = 0; i < 4; i++) {
        if ((e[i].tag & 1ULL << 63) &&
            ((e[i].tag >> 42) & 0x1fffff) == off / LINE / 8192) {
            return e[i].holders;
        }
    }
    return 0;
}

static void test_stopped_peer_reset_timed(void)
{
    g_autofree char *pool = pool_path("stopped-reset-timed.pool");
    uint64_t held = 0x2040, free_line = 0x3080;
    uint64_t word = 0x10000 + (held / LINE % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0;
    Host a, b;

    timed_start(&a, pool, 0, NULL);
    timed_start(&b, pool, 1, NULL);
    g_assert_cmphex(mem_rq(&a, held), ==, 0);
    g_assert_cmphex(mem_rq(&a, free_line), ==, 0);
    g_assert_cmphex(sf_entry_of(pool, held) & 1, ==, 1);
    g_assert_cmphex(sf_entry_of(pool, free_line) & 1, ==, 1);
    patch_pool(pool, word, &tag, 8);

    stopped_peer_watch("a's timed reset (its snoop filter cleanup)");
    qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(a.qts, "RESET");
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    g_assert_cmphex(sf_entry_of(pool, free_line) & 1, ==, 0);
    g_assert_cmphex(sf_entry_of(pool, held) & 1, ==, 1);

    patch_pool(pool, word, &zero, 8);
    host_enable(&a, true);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RESETS), ==, 1);
    g_assert_cmphex(sf_entry_of(pool, held) & 1, ==, 1);
    mem_wq(&b, held, 0xb1);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_BACK_INVAL), ==, 1);
    g_assert_cmphex(sf_entry_of(pool, held) & 3, ==, 2);
    g_assert_cmphex(mem_rq(&a, held), ==, 0xb1);
    g_assert_cmphex(sf_entry_of(pool, held) & 3, ==, 3);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * A host's reset fetches its image again, page by page, under QEMU's
 * global lock: a page whose lock a stopped peer keeps, stopped in the
 * middle of writing one of its lines, must not make it wait.  Set up in
 * the pool (as host b, live, would leave it): the lock word of a page
 * under b's tag, b's undo record armed for one line with its old bytes,
 * that line torn (its first half written), another line of the page
 * whole.  a's reset answers (30 s watchdog) and a sees the whole line
 * and the torn one as it was before b's write; once b's write is
 * finished (line complete, record disarmed, lock free), a's invalidate
 * fetches it.
 */
static void test_stopped_peer_reset_load(void)
{
    g_autofree char *pool = pool_path("stopped-load.pool");
    uint64_t page = COH_SIZE + 0x9000, off = page + 0x40;
    uint64_t word = 0x10000 + (page / 4096 % 8192) * 8;
    uint64_t tag = CXLPOOL_TAG(1, 63, 1), zero = 0;
    uint8_t old[LINE], torn[LINE], fresh[LINE], whole[LINE];
    CXLPoolLayout lo;
    uint64_t undo;
    Host a, b;

    cxlpool_layout(&lo, POOL_SIZE, 4);
    undo = lo.undo + (1 * 2 + 1) * 64 * 128 + 63 * 128;
    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    memset(old, 0x5a, LINE);
    memset(fresh, 0xa5, LINE);
    memcpy(torn, fresh, LINE / 2);
    memcpy(torn + LINE / 2, old, LINE / 2);
    memset(whole, 0x77, LINE);
    patch_pool(pool, word, &tag, 8);
    patch_pool(pool, META_SIZE + page + 0x80, whole, LINE);
    patch_pool(pool, undo + 8, &off, 8);
    patch_pool(pool, undo + 16, old, LINE);
    patch_pool(pool, undo, &tag, 8);
    patch_pool(pool, META_SIZE + off, torn, LINE);

    stopped_peer_watch("a's reset (its image load)");
    qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(a.qts, "RESET");
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    host_enable(&a, true);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RESETS), ==, 1);
    g_assert_cmphex(mem_rq(&a, page + 0x80), ==, 0x7777777777777777ULL);
    g_assert_cmphex(mem_rq(&a, off), ==, 0x5a5a5a5a5a5a5a5aULL);
    g_assert_cmphex(mem_rq(&a, off + 56), ==, 0x5a5a5a5a5a5a5a5aULL);

    /* b's write finishes: the whole line, the record disarmed, unlocked */
    patch_pool(pool, META_SIZE + off, fresh, LINE);
    patch_pool(pool, undo, &zero, 8);
    patch_pool(pool, word, &zero, 8);
    g_assert_cmpuint(doorbell(&a, OP_INV, page, 4096), ==, 0);
    g_assert_cmphex(mem_rq(&a, off), ==, 0xa5a5a5a5a5a5a5a5ULL);
    g_assert_cmphex(mem_rq(&a, page + 0x80), ==, 0x7777777777777777ULL);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * A peer stopped while it holds the pool's file lock (a stopped QEMU in
 * the middle of its join, leave or reset; here the test holds it) never
 * freezes another host: a's reset (its rejoin) and a's clean exit (its
 * leave) do not wait for it beyond a bounded time, and the other hosts
 * see the new generation, then the host as left.
 */
static void test_stopped_peer_file_lock(void)
{
    g_autofree char *pool = pool_path("stopped-flock.pool");
    int fd;
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    fd = open(pool, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(flock(fd, LOCK_EX), ==, 0);

    stopped_peer_watch("a's reset");
    qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(a.qts, "RESET");
    stopped_peer_qmp(a.qts);
    stopped_peer_unwatch();
    host_enable(&a, true);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RESETS), ==, 1);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 2);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 1);

    stopped_peer_watch("a's leave at exit");
    qtest_quit(a.qts);
    stopped_peer_unwatch();
    g_assert_cmpint(flock(fd, LOCK_UN), ==, 0);
    close(fd);
    g_assert_cmpuint(r32(&b, A_CXLSHM_HOST_STATE(0)), ==, 3);     /* left */
    qtest_quit(b.qts);
}

/*
 * The outcomes that no cross-host wait leaves behind (docs/device.md's
 * outcome table), each with a line lock held for a live peer, as the
 * stopped-peer cases hold one: live host b's tag written into the lock
 * word.
 */
static const uint64_t peer_tag = CXLPOOL_TAG(1, 63, 1);

static void peer_hold(const char *pool, uint64_t word)
{
    patch_pool(pool, word, &peer_tag, 8);
}

static void peer_free(const char *pool, uint64_t word)
{
    uint64_t zero = 0;

    patch_pool(pool, word, &zero, 8);
}

/* The lock word of pool offset @off (coherent: per line, else per page) */
static uint64_t lock_word_of(uint64_t off)
{
    return 0x10000 + (off < COH_SIZE ? off / LINE : off / 4096) % 8192 * 8;
}

static uint32_t pool_rl(const char *pool, uint64_t off)
{
    uint32_t v;

    pool_pread(pool, META_SIZE + off, &v, sizeof(v));
    return v;
}

/*
 * mode=timed, an access split into pieces (docs/device.md, outcome "the
 * split access"): the guest's unaligned `addl $1` on coherent bytes
 * 0x3e..0x41 reads both lines (line 1 is a hit: no lock), then stores
 * in two pieces, bytes 0x3e..0x3f in line 0, then 0x40..0x41 in line 1,
 * whose lock a peer keeps.  The first piece stored, so the access must
 * not run again (it would add twice): the second piece tries again, for
 * at most 100 ms.  @release: the peer lets go meanwhile (once the test
 * sees the first piece in the pool and a try counted), and the store
 * completes, applied once: 0x0000ffff + 1 = 0x00010000.  Else a
 * completion timeout:
 * the second piece is dropped (MEMTX_ERROR), about 100 ms after the
 * first, traced (cxl_shm_timed_timeout), every try counted in
 * STAT_RETRIES; the first piece stays applied once.  Then a read of
 * another held line by a thread that is not a vCPU (qtest's) reads all
 * ones at once.  The body after
 * fw_code's prologue:
 *
 *     movl 0x400040, %eax; movl $1, 0x5000
 * 1:  cmpl $1, 0x5010; jne 1b
 *     addl $1, 0x40003e; movl $2, 0x5000
 * 2:  hlt; jmp 2b
 */
static void timed_split(bool release)
{
    static const uint8_t body[] = {
        0xa1, 0x40, 0x00, 0x40, 0x00, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x83, 0x3d, 0x10, 0x50, 0x00, 0x00, 0x01,
        0x75, 0xf7, 0x83, 0x05, 0x3e, 0x00, 0x40, 0x00, 0x01, 0xc7, 0x05,
        0x00, 0x50, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd,
    };
    g_autofree char *pool = pool_path("timed-split.pool");
    g_autofree char *log = g_build_filename(tmpdir, "timed-split.log", NULL);
    g_autofree char *opts = g_strdup_printf("-trace cxl_shm_timed_timeout "
                                            "-D %s", log);
    g_autofree char *text = NULL;
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t word = lock_word_of(0x40);
    uint32_t v = 0xffff;
    gint64 t0, took, deadline;
    bool timeout;
    Host a, b;

    memcpy(code + 0x40, body, sizeof(body));
    timed_start(&b, pool, 1, NULL);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), TIMED, opts);
    patch_pool(pool, META_SIZE + 0x3e, &v, 4);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    fw_phase(&a, 1);
    peer_hold(pool, word);
    qtest_writel(a.qts, 0x5010, 1);

    /* the first piece lands: bytes 0x3e..0x3f go from 0xffff to 0 */
    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (pool_rl(pool, 0x3c) >> 16) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(100);
    }
    t0 = g_get_monotonic_time();
    if (release) {
        /* once the second piece has found the line busy */
        while (!rstat(&a, CXLSHM_STAT_RETRIES)) {
            g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        }
        peer_free(pool, word);
    }
    fw_phase(&a, 2);
    took = g_get_monotonic_time() - t0;
    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    timeout = strstr(text, "cxl_shm_timed_timeout") != NULL;
    g_test_message("the split store took %" PRId64 " us after its first "
                   "piece; timed out: %d", took, timeout);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_RETRIES), >, 0);
    if (release && !timeout) {
        g_assert_cmphex(pool_rl(pool, 0x3e), ==, 0x10000);
    } else {
        /* released only after 100 ms (a loaded machine), or never */
        g_assert_true(timeout);
        g_assert_cmphex(pool_rl(pool, 0x3e), ==, 0);
        g_assert_cmpint(took, >=, 90000);
    }
    if (!release) {
        g_assert_cmpint(took, <, 2 * G_USEC_PER_SEC);
        /* a thread that is not a vCPU (here qtest's) gets all ones at once */
        peer_hold(pool, lock_word_of(0x80));
        g_assert_cmphex(mem_rq(&a, 0x80), ==, UINT64_MAX);
        peer_free(pool, lock_word_of(0x80));
        g_assert_cmphex(mem_rq(&a, 0x80), ==, 0);
        peer_free(pool, word);
    }
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

static void test_timed_split_rmw(void)
{
    timed_split(true);
}

static void test_timed_split_timeout(void)
{
    timed_split(false);
}

/*
 * wbinvd keeps a cursor while it runs again and again (a page lock a
 * peer keeps stops it there), and only then: after an interrupt
 * delivery, and after a reset, the instruction starts over from the
 * first line.  The guest stores its run number to a line of page 0 and
 * of page 1 of the non-coherent area, then wbinvd; page 1's lock is held
 * for a peer.  1. wbinvd wrote page 0 and runs again at page 1.  2. An
 * NMI (QMP inject-nmi; the guest turned its APIC off, so it reaches the
 * CPU) stores a new run number to page 0 in its handler: the wbinvd run
 * after the iret writes page 0 again.  3. system_reset: the firmware
 * runs again with a new run number and writes page 0 again.  4. The peer
 * lets go: wbinvd completes with both pages in the pool.  A cursor kept
 * across 2 or 3 would skip page 0, leaving a dirty line behind a wbinvd
 * that completed.  The body after fw_code's prologue (IDT at 0x6000, its
 * descriptor at 0x6800, both written by the test; NMI handler at
 * 0xfffff083):
 *
 *     movl $0x1b, %ecx; rdmsr; andl $0xfffff7ff, %eax; wrmsr
 *     movl $0x7000, %esp; lidt 0x6800
 *     incl 0x5020; movl 0x5020, %eax
 *     movl %eax, 0x200000; movl %eax, 0x201000; movl %eax, 0x5004
 *     wbinvd; movl 0x5020, %eax; movl %eax, 0x5000
 * 1:  hlt; jmp 1b
 * nmi: incl 0x5020; movl 0x5020, %eax
 *     movl %eax, 0x200000; movl %eax, 0x5008; iret
 */
static void wbinvd_retrying(Host *a)
{
    uint64_t r = rstat(a, CXLSHM_STAT_RETRIES);
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

    while (rstat(a, CXLSHM_STAT_RETRIES) < r + 3) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

static void test_wbinvd_cursor(void)
{
    static const uint8_t body[] = {
        0xb9, 0x1b, 0x00, 0x00, 0x00, 0x0f, 0x32, 0x25, 0xff, 0xf7, 0xff,
        0xff, 0x0f, 0x30, 0xbc, 0x00, 0x70, 0x00, 0x00, 0x0f, 0x01, 0x1d,
        0x00, 0x68, 0x00, 0x00, 0xff, 0x05, 0x20, 0x50, 0x00, 0x00, 0xa1,
        0x20, 0x50, 0x00, 0x00, 0xa3, 0x00, 0x00, 0x20, 0x00, 0xa3, 0x00,
        0x10, 0x20, 0x00, 0xa3, 0x04, 0x50, 0x00, 0x00, 0x0f, 0x09, 0xa1,
        0x20, 0x50, 0x00, 0x00, 0xa3, 0x00, 0x50, 0x00, 0x00, 0xf4, 0xeb,
        0xfd, 0xff, 0x05, 0x20, 0x50, 0x00, 0x00, 0xa1, 0x20, 0x50, 0x00,
        0x00, 0xa3, 0x00, 0x00, 0x20, 0x00, 0xa3, 0x08, 0x50, 0x00, 0x00,
        0xcf,
    };
    g_autofree char *pool = pool_path("wbinvd-cursor.pool");
    g_autofree uint8_t *code = g_memdup2(fw_code, sizeof(fw_code));
    uint64_t p0 = COH_SIZE, p1 = COH_SIZE + 0x1000;
    uint64_t word = lock_word_of(p1);
    /* vector 2: a 32-bit interrupt gate to 0xfffff083, selector 8 */
    uint64_t gate = 0x0008f083ULL | 0xffff8e00ULL << 32;
    uint8_t idtr[6] = { 0x07, 0x01, 0x00, 0x60, 0x00, 0x00 };
    Host a, b;

    g_assert_cmpuint(0x40 + sizeof(body), <=, 0xa8);   /* fw_code's GDT */
    memcpy(code + 0x40, body, sizeof(body));
    host_start(&b, pool, 1, true);
    fw_host_start_code(&a, pool, 0, code, sizeof(fw_code), NULL, NULL);
    qtest_memwrite(a.qts, 0x6000 + 2 * 8, &gate, sizeof(gate));
    qtest_memwrite(a.qts, 0x6800, idtr, sizeof(idtr));
    peer_hold(pool, word);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");

    /* 1: stopped at page 1, page 0 written */
    while (qtest_readl(a.qts, 0x5004) != 1) {
        g_usleep(1000);
    }
    wbinvd_retrying(&a);
    g_assert_cmphex(pool_rq(pool, p0), ==, 1);
    g_assert_cmphex(pool_rq(pool, p1), ==, 0);

    /* 2: an interrupt delivery in between: the wbinvd after it starts over */
    qtest_qmp_assert_success(a.qts, "{'execute': 'inject-nmi'}");
    while (qtest_readl(a.qts, 0x5008) != 2) {
        g_usleep(1000);
    }
    wbinvd_retrying(&a);
    g_assert_cmphex(pool_rq(pool, p0), ==, 2);
    g_assert_cmphex(pool_rq(pool, p1), ==, 0);

    /* 3: a reset in between: the firmware's wbinvd starts over */
    qtest_qmp_assert_success(a.qts, "{'execute': 'stop'}");
    qtest_qmp_assert_success(a.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(a.qts, "RESET");
    host_enable(&a, true);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    while (qtest_readl(a.qts, 0x5004) != 3) {
        g_usleep(1000);
    }
    wbinvd_retrying(&a);
    g_assert_cmphex(pool_rq(pool, p0), ==, 3);
    g_assert_cmphex(pool_rq(pool, p1), ==, 0);

    /* 4: the peer lets go: wbinvd completes */
    peer_free(pool, word);
    fw_phase(&a, 3);
    g_assert_cmphex(pool_rq(pool, p0), ==, 3);
    g_assert_cmphex(pool_rq(pool, p1), ==, 3);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * The doorbell's ring holds 64 ops (docs/interfaces.md, DB_STATUS): the
 * first op's page is held for a peer, so it and the 63 rung after it
 * wait; the 65th is dropped (STAT_ERRORS, never run).  Once the peer
 * lets go, the 64 run in order, DB_STATUS reads 6 (FULL) once, then the
 * last op's status (0) with its line count.
 */
static void test_doorbell_full(void)
{
    g_autofree char *pool = pool_path("db-full.pool");
    uint64_t held = COH_SIZE + 0xc000, q = COH_SIZE + 0xd000;
    uint64_t dropped = COH_SIZE + 0xe000, last = q + 62 * LINE;
    uint64_t word = lock_word_of(held), errors;
    int i;
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&a, held, 0xf0);
    mem_wq(&a, last, 0xf1);
    mem_wq(&a, dropped, 0xf2);
    errors = rstat(&a, CXLSHM_STAT_ERRORS);
    peer_hold(pool, word);

    db_ring(&a, OP_WB, held, 4096);
    for (i = 0; i < 63; i++) {
        db_ring(&a, OP_WB, q + i * LINE, LINE);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_ERRORS), ==, errors);
    db_ring(&a, OP_WB, dropped, LINE);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_ERRORS), ==, errors + 1);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);

    peer_free(pool, word);
    g_assert_cmpuint(db_wait(&a), ==, CXLSHM_DB_FULL);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_OPS), ==, 64);
    g_assert_cmphex(pool_rq(pool, held), ==, 0xf0);
    g_assert_cmphex(pool_rq(pool, last), ==, 0xf1);
    g_assert_cmphex(pool_rq(pool, dropped), ==, 0);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * A device reset (a secondary bus reset of the root port, here from the
 * main loop while the vCPU runs: the host reset is its safe work) drops
 * the doorbell's ops, the one running and those queued behind it: the
 * first op's page is held for a peer, a second op is queued; after the
 * reset DB_STATUS and DB_LINES read 0 (docs/interfaces.md), and once the
 * peer lets go neither op runs: a line of the second op's range, dirtied
 * again after the reset, stays out of the pool until a new op.
 */
static void test_doorbell_reset_drops(void)
{
    g_autofree char *pool = pool_path("db-reset.pool");
    uint64_t held = COH_SIZE + 0xc000, q = COH_SIZE + 0xd000;
    uint64_t word = lock_word_of(held);
    Host a, b;

    host_start(&a, pool, 0, true);
    host_start(&b, pool, 1, true);
    mem_wq(&a, held, 0xe0);
    mem_wq(&a, q, 0xe1);
    peer_hold(pool, word);
    db_ring(&a, OP_WB, held, 4096);
    db_ring(&a, OP_WB, q, 4096);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);

    cfg_writel(a.qts, PXB_BUS, 0, 0x3c, (1 << 6) << 16);
    cfg_writel(a.qts, PXB_BUS, 0, 0x3c, 0);
    shm_wait_resets(a.qts, 1);
    host_enable(&a, true);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
    g_assert_cmpuint(r64(&a, A_CXLSHM_DB_LINES), ==, 0);

    mem_wq(&a, q, 0xe2);
    peer_free(pool, word);
    g_usleep(100000);
    g_assert_cmpuint(r32(&a, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_OK);
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_WB_OPS), ==, 0);
    g_assert_cmphex(pool_rq(pool, held), ==, 0);
    g_assert_cmphex(pool_rq(pool, q), ==, 0);
    g_assert_cmpuint(doorbell(&a, OP_WB, q, 4096), ==, CXLSHM_DB_OK);
    g_assert_cmphex(pool_rq(pool, q), ==, 0xe2);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
}

/*
 * A high evict-rate is worked through in chunks spread over the
 * millisecond, each a short hold of the BQL, not in one timer callback
 * that holds it for the whole rate: 100000 lines per ms come
 * as chunks of at most 1024, and every millisecond still evicts exactly
 * the rate.
 */
static void test_eviction_chunks(void)
{
    g_autofree char *pool = pool_path("evict-chunks.pool");
    g_autofree char *args = host_args(pool, 0, ",evict-rate=100000");
    uint64_t prev = 0, now;
    Host h;
    int i, chunks = 0;

    h.qts = qtest_init(args);
    host_enable(&h, true);
    mem_wq(&h, COH_SIZE + 0x100, 0xe1e1);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x100), ==, 0);
    qtest_clock_step(h.qts, 1000 * 1000 - 1);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_EVICTED), ==, 0);
    /* the first millisecond, in steps of 1 us: no step evicts it all */
    for (i = 0; i < 1000; i++) {
        qtest_clock_step(h.qts, 1000);
        now = rstat(&h, CXLSHM_STAT_EVICTED);
        g_assert_cmpuint(now - prev, <=, 1024);
        chunks += now != prev;
        prev = now;
    }
    g_assert_cmpuint(prev, ==, 100000);
    g_assert_cmpint(chunks, ==, 98);        /* 100000 / 1024, rounded up */
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x100), ==, 0xe1e1);
    /* the next one, stepped at once, evicts exactly the rate again */
    qtest_clock_step(h.qts, 1000 * 1000);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_EVICTED), ==, 200000);
    qtest_quit(h.qts);
}

/*
 * A hostile guest's register writes through the real device (the fuzz
 * target covers the doorbell decode and the line engine; this covers the
 * MMIO glue, the host table and the statistics around them, and runs
 * under the sanitizers with scripts/test-sanitize.sh).  A seeded random
 * program of 32- and 64-bit writes and reads anywhere in BAR5, doorbell
 * operations with ranges near every edge, and the guest's own stores;
 * CXLSHM_HOSTILE_SEED=N replays a run, CXLSHM_HOSTILE_STEPS=N runs longer.
 * After every op write the status is the documented one for the op and
 * the registers as they now read; at the end the read-only registers are
 * unchanged, every refused op was counted, both hosts are live with
 * generation 1, the other host's dirty lines are still in its image only,
 * and nothing in the pool changed but the lines this guest stored to.
 */
static uint64_t hostile_rand(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545f4914f6cdd1dULL;
}

static uint32_t hostile_expect(uint32_t op, uint64_t off, uint64_t len)
{
    if (op < OP_WB || op > OP_FLUSH) {
        return 4;
    }
    if (!len) {
        return 3;
    }
    if ((off | len) % LINE) {
        return 2;
    }
    return off + len < off || off + len > POOL_SIZE ? 1 : 0;
}

static uint64_t hostile_edge(uint64_t *x)
{
    static const uint64_t edges[] = {
        0, COH_SIZE - LINE, COH_SIZE, COH_SIZE + MiB, COH_SIZE + 2 * MiB,
        COH_SIZE + 3 * MiB, POOL_SIZE - LINE, POOL_SIZE, POOL_SIZE + LINE,
        UINT64_MAX - LINE + 1, 1ULL << 63,
    };
    uint64_t r = hostile_rand(x);

    switch (r % 4) {
    case 0:
        return edges[(r >> 8) % ARRAY_SIZE(edges)];
    case 1:
        return edges[(r >> 8) % ARRAY_SIZE(edges)] + LINE * ((r >> 16) % 64);
    case 2:
        return (r >> 8) % (POOL_SIZE + MiB);            /* any alignment */
    default:
        return hostile_rand(x);
    }
}

static void test_hostile_registers(const void *data)
{
    const char *mode = data;
    g_autofree char *pool = pool_path("hostile.pool");
    const char *seed_env = g_getenv("CXLSHM_HOSTILE_SEED");
    const char *steps_env = g_getenv("CXLSHM_HOSTILE_STEPS");
    uint64_t seed = seed_env ? g_ascii_strtoull(seed_env, NULL, 0) :
                    (uint32_t)g_test_rand_int() | 1;
    uint64_t x = seed, nc = COH_SIZE, errors = 0, i, steps;
    const uint64_t z = nc, y = nc + 2 * MiB, d = nc + 3 * MiB;
    static const uint32_t ro[] = {
        A_CXLSHM_MAGIC, A_CXLSHM_VERSION, A_CXLSHM_HOST_ID,
        A_CXLSHM_MAX_HOSTS, A_CXLSHM_SIZE, A_CXLSHM_SIZE + 4,
        A_CXLSHM_COHERENT_SIZE, A_CXLSHM_COHERENT_SIZE + 4,
        A_CXLSHM_LINE_SIZE, A_CXLSHM_MODE, A_CXLSHM_LATENCY_NS,
        A_CXLSHM_CAPS, A_CXLSHM_WB_MODE, A_CXLSHM_EVICT_RATE,
    };
    uint32_t ro_before[ARRAY_SIZE(ro)];
    g_autofree uint8_t *buf = g_malloc(MiB);
    Host a, b;

    steps = steps_env ? g_ascii_strtoull(steps_env, NULL, 0) : 3000;
    g_test_message("hostile-registers/%s: seed %" PRIu64 ", %" PRIu64
                   " steps (CXLSHM_HOSTILE_SEED replays it)", mode, seed,
                   steps);
    if (!strcmp(mode, "timed")) {
        timed_start(&a, pool, 0, NULL);
        timed_start(&b, pool, 1, NULL);
    } else {
        host_start(&a, pool, 0, true);
        host_start(&b, pool, 1, true);
    }
    /* b: a coherent line, 16 written-back lines, 16 dirty ones */
    mem_wq(&b, 0x1000, 0xc0c0c0c0);
    for (i = 0; i < 16; i++) {
        mem_wq(&b, y + i * 4096, 0xb0b0b0b0 + i);
        mem_wq(&b, d + i * 4096, 0xd0d0d0d0 + i);
    }
    g_assert_cmpuint(doorbell(&b, OP_WB, y, 64 * KiB), ==, 0);
    for (i = 0; i < ARRAY_SIZE(ro); i++) {
        ro_before[i] = r32(&a, ro[i]);
    }

    for (i = 0; i < steps; i++) {
        uint64_t r = hostile_rand(&x), v = hostile_rand(&x);
        uint32_t addr = (r >> 8) % 4096, op = 0;
        bool rang = false;

        switch (r % 8) {
        case 0:
        case 1:
        case 2:                     /* a 32- or 64-bit write anywhere */
            if (r % 8 == 2) {
                addr &= ~7u;
                qtest_writeq(a.qts, BAR5_ADDR + addr, v);
            } else {
                addr &= ~3u;
                qtest_writel(a.qts, BAR5_ADDR + addr, v);
            }
            rang = addr == A_CXLSHM_DB_OP;
            op = v;
            break;
        case 3:                     /* reads anywhere, every size */
            qtest_readb(a.qts, BAR5_ADDR + addr);
            qtest_readl(a.qts, BAR5_ADDR + (addr & ~3u));
            qtest_readq(a.qts, BAR5_ADDR + (addr & ~7u));
            break;
        case 4:                     /* this guest's own stores */
            mem_wq(&a, z + (v % MiB & ~7ULL), hostile_rand(&x));
            break;
        default:                    /* an op on a range near an edge */
            op = (r >> 20) % 8 ? 1 + (r >> 24) % 3 : v;
            qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_OFFSET,
                         hostile_edge(&x));
            qtest_writeq(a.qts, BAR5_ADDR + A_CXLSHM_DB_LEN, (r >> 28) % 4 ?
                         LINE * (hostile_rand(&x) % 8192) : hostile_edge(&x));
            qtest_writel(a.qts, BAR5_ADDR + A_CXLSHM_DB_OP, op);
            rang = true;
            break;
        }
        if (rang) {
            uint32_t want = hostile_expect(op, r64(&a, A_CXLSHM_DB_OFFSET),
                                           r64(&a, A_CXLSHM_DB_LEN));

            g_assert_cmpuint(db_wait(&a), ==, want);
            errors += want != 0;
        }
    }

    for (i = 0; i < ARRAY_SIZE(ro); i++) {
        g_assert_cmphex(r32(&a, ro[i]), ==, ro_before[i]);
    }
    g_assert_cmpuint(rstat(&a, CXLSHM_STAT_ERRORS), ==, errors);
    g_assert_cmphex(r64(&b, A_CXLSHM_HOST_LIVE), ==, 3);
    g_assert_cmpuint(r64(&b, A_CXLSHM_HOST_GEN(0)), ==, 1);
    g_assert_cmpuint(r64(&a, A_CXLSHM_HOST_GEN(1)), ==, 1);
    /* the pool: b's lines as b left them, a's stores only in a's range */
    for (i = 0; i < POOL_SIZE; i += 8) {
        uint64_t want = 0, got;

        if (!(i % MiB)) {
            pool_pread(pool, META_SIZE + i, buf, MiB);
        }
        if (i >= z && i < z + MiB) {
            continue;               /* a's stores, written back or not */
        }
        if (i == 0x1000) {
            if (!strcmp(mode, "timed")) {
                continue;   /* may sit modified in b's cache: see below */
            }
            want = 0xc0c0c0c0;
        } else if (i >= y && i < y + 16 * 4096 && !(i % 4096)) {
            want = 0xb0b0b0b0 + (i - y) / 4096;
        }
        memcpy(&got, buf + i % MiB, 8);
        if (got != want) {
            g_test_message("pool offset 0x%" PRIx64 ": 0x%" PRIx64
                           ", expected 0x%" PRIx64, i, got, want);
            g_assert_not_reached();
        }
    }
    g_assert_cmphex(mem_rq(&a, 0x1000), ==, 0xc0c0c0c0);    /* coherent */
    /* b's dirty lines are still b's alone */
    for (i = 0; i < 16; i++) {
        g_assert_cmphex(mem_rq(&b, d + i * 4096), ==, 0xd0d0d0d0 + i);
    }
    qtest_quit(b.qts);
    qtest_quit(a.qts);
}

/*
 * Benchmark (run with -m perf): sequential 4-byte loads cycling over
 * 32 MiB (256 MiB loaded; 8 MiB on the MMIO paths), by a firmware like the
 * one above (after paging is on):
 *
 *     movl 0x5004, %esi; movl 0x5008, %ecx; xorl %edx, %edx
 * 1:  addl (%esi), %edx; addl $4, %esi; decl %ecx; jnz 1b
 *     movl %edx, 0x500c; movl $1, 0x5000
 * 2:  hlt; jmp 2b
 *
 * Linear 0x40000000 is mapped with 2 MiB pages to guest RAM, the coherent
 * window, the non-coherent area, the MMIO path of cxl-shm (2-way decoder)
 * or a stock cxl-type3.  Wall time from "cont" to the done flag.
 */
static const uint8_t bench_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0x88, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0x8b, 0x35, 0x04, 0x50, 0x00, 0x00, 0x8b, 0x0d,
    0x08, 0x50, 0x00, 0x00, 0x31, 0xd2, 0x03, 0x16, 0x83, 0xc6, 0x04, 0x49,
    0x75, 0xf8, 0x89, 0x15, 0x0c, 0x50, 0x00, 0x00, 0xc7, 0x05, 0x00, 0x50,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x8d, 0xb4, 0x00,
    0x00, 0x8d, 0x74, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0x70, 0xf0, 0xff, 0xff,
};

#define BENCH_SPAN      (32 * MiB)     /* distinct memory read */
#define BENCH_FAST      (256 * MiB)    /* bytes loaded, RAM-speed paths */
#define BENCH_SLOW      (8 * MiB)      /* bytes loaded, MMIO paths */

typedef enum {
    BENCH_RAM, BENCH_COHERENT, BENCH_NONCOHERENT, BENCH_MMIO, BENCH_STOCK,
    BENCH_TIMED_COH, BENCH_TIMED_NC,
} BenchKind;

static double bench_run(BenchKind kind)
{
    static const char *const names[] = {
        "guest RAM", "cxl-shm coherent", "cxl-shm non-coherent",
        "cxl-shm MMIO path", "stock cxl-type3", "timed coherent",
        "timed non-coherent",
    };
    g_autofree char *pool = pool_path("bench.pool");
    g_autofree char *fw = g_build_filename(tmpdir, "bench.bin", NULL);
    g_autofree uint8_t *img = g_malloc0(0x10000);
    g_autofree char *args = NULL;
    g_autofree char *all = NULL;
    uint64_t pdpt[4] = { 0x2001, 0x4001, 0, 0x3001 };
    uint64_t pd0 = 0x83, pd3 = 0xffe00083, pd1[512];
    uint64_t bytes = kind >= BENCH_MMIO ? BENCH_SLOW : BENCH_FAST;
    bool timed = kind >= BENCH_TIMED_COH;
    uint32_t params[2] = { 0x40000000, bytes / 4 };
    uint64_t target, hdm;
    int64_t t0, t1;
    double mbs;
    Host h;
    int i;

    memcpy(img + 0xf000, bench_code, sizeof(bench_code));
    memcpy(img + 0xfff0, fw_reset, sizeof(fw_reset));
    g_assert_true(g_file_set_contents(fw, (char *)img, 0x10000, NULL));
    if (kind == BENCH_STOCK) {
        args = g_strdup_printf(
            "%s-machine q35,cxl=on -m 128M -nodefaults "
            "-object memory-backend-ram,id=vmem0,size=256M "
            "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
            "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
            "-device cxl-type3,bus=rp0,volatile-memdev=vmem0,id=t3 "
            "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
            fw_args(), PXB_BUS);
    } else {
        /* mode=timed without latency: the cost of the path itself */
        args = host_args(pool, 0, timed ? TIMED : NULL);
    }
    all = g_strdup_printf("%s -accel tcg -smp 1 -cpu max -S -bios %s",
                          args, fw);
    h.qts = qtest_init(all);
    host_enable(&h, kind != BENCH_MMIO);
    if (kind == BENCH_MMIO) {
        hdm = find_hdm(h.qts);
        qtest_writel(h.qts, hdm + 0x10, h.hpa & 0xf0000000);
        qtest_writel(h.qts, hdm + 0x14, h.hpa >> 32);
        qtest_writel(h.qts, hdm + 0x18, (2 * POOL_SIZE) & 0xf0000000);
        qtest_writel(h.qts, hdm + 0x1c, (2 * POOL_SIZE) >> 32);
        qtest_writel(h.qts, hdm + 0x20, (1 << 9) | (1 << 4));
    }
    switch (kind) {
    case BENCH_RAM:
        target = 32 * MiB;
        break;
    case BENCH_NONCOHERENT:
    case BENCH_TIMED_NC:
        target = h.hpa + COH_SIZE;
        break;
    default:
        target = h.hpa;
        break;
    }
    for (i = 0; i < ARRAY_SIZE(pd1); i++) {
        /* 1 GiB of linear space cycling over BENCH_SPAN */
        pd1[i] = (target + i * 2 * MiB % BENCH_SPAN) | 0x83;
    }
    qtest_memwrite(h.qts, 0x1000, pdpt, sizeof(pdpt));
    qtest_memwrite(h.qts, 0x2000, &pd0, sizeof(pd0));
    qtest_memwrite(h.qts, 0x4000, pd1, sizeof(pd1));
    qtest_memwrite(h.qts, 0x3000 + 511 * 8, &pd3, sizeof(pd3));
    qtest_memwrite(h.qts, 0x5004, params, sizeof(params));

    t0 = g_get_monotonic_time();
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    while (qtest_readl(h.qts, 0x5000) != 1) {
        g_usleep(500);
    }
    t1 = g_get_monotonic_time();
    qtest_quit(h.qts);

    mbs = (double)bytes / MiB / ((t1 - t0) / 1e6);
    g_test_message("bench: %-22s %8.1f MiB/s  %7.1f ns per 4-byte load",
                   names[kind], mbs, (t1 - t0) * 1e3 / (bytes / 4));
    return mbs;
}

static void test_bench(void)
{
    double ram = bench_run(BENCH_RAM);
    double coh = bench_run(BENCH_COHERENT);
    double nc = bench_run(BENCH_NONCOHERENT);
    double mmio = bench_run(BENCH_MMIO);
    double stock = bench_run(BENCH_STOCK);

    g_test_message("bench: coherent/RAM %.2f  non-coherent/RAM %.2f  "
                   "coherent/stock %.1fx  MMIO path/stock %.2f",
                   coh / ram, nc / ram, coh / stock, mmio / stock);
}

/*
 * fw_chase that runs again: where fw_chase halts after setting the done
 * word, this one waits while the word stays 1 and then jumps back to
 * reading its parameters (0xfffff040), so that one QEMU runs the chase
 * as often as the test asks, by writing 0 to the done word.
 *     cmp dword [0x5000], 1 ; je .-9 ; jmp 0xfffff040
 */
static void fw_chase_again(uint8_t *code)
{
    static const uint8_t again[] = {
        0x83, 0x3d, 0x00, 0x50, 0x00, 0x00, 0x01,
        0x74, 0xf7,
        0xe9, 0xc4, 0xff, 0xff, 0xff,
    };

    memcpy(code, fw_chase, sizeof(fw_chase));
    g_assert_cmphex(code[0x40], ==, 0x8b);          /* mov esi, [0x5004] */
    g_assert_cmphex(code[0x6e], ==, 0xf4);          /* hlt */
    memcpy(code + 0x6e, again, sizeof(again));
}

/*
 * Without icount, in one QEMU: the chase without latency and with miss
 * latency @miss_ns, alternated (0, L, L, 0, 0, L, ...) for @rounds pairs
 * over the same chain, after one warm-up run (translation).  The cache
 * is the smallest (64 KiB), so every load of the n-line cycle misses in
 * every run (checked).  @path and @lat get the fastest run of each, the
 * TSC ticks of all n loads.  Comparing the two inside one QEMU matters:
 * TCG's own cost per access differs by up to 300 ns between QEMU
 * processes (code and data placement), far less within one.
 */
static void chase_paired(unsigned miss_ns, uint32_t n, int rounds,
                         uint32_t *path, uint32_t *lat)
{
    g_autofree char *pool = pool_path("chase.pool");
    uint8_t code[sizeof(fw_chase)];
    uint64_t misses;
    int run;
    Host h;

    fw_chase_again(code);
    chase_start(&h, pool, n, code, sizeof(code), TIMED ",cache-size=64K",
                NULL);
    *path = *lat = UINT32_MAX;
    for (run = -1; run < 2 * rounds; run++) {
        unsigned ns = run >= 0 && ((run + 1) / 2) % 2 ? miss_ns : 0;
        uint32_t ticks;

        qtest_qmp_assert_success(h.qts, "{'execute': 'qom-set', "
                                 "'arguments': {'path': "
                                 "'/machine/peripheral/shm0', "
                                 "'property': 'miss-latency-ns', "
                                 "'value': %u}}", ns);
        if (run < 0) {
            qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
        } else {
            qtest_writel(h.qts, 0x5000, 0);
        }
        chase_wait_done(&h);
        g_assert_cmphex(qtest_readl(h.qts, 0x500c), ==, 0x200000);
        ticks = qtest_readl(h.qts, 0x5010);
        if (run >= 0 && ns) {
            *lat = MIN(*lat, ticks);
        } else if (run >= 0) {
            *path = MIN(*path, ticks);
        }
    }
    misses = rstat(&h, CXLSHM_STAT_MISSES);
    g_assert_cmpuint(misses, ==, (uint64_t)n * (2 * rounds + 1));
    qtest_quit(h.qts);
}

/* The host's TSC rate, against the monotonic clock over 200 ms */
static double host_tsc_ghz(void)
{
    int64_t t0 = g_get_monotonic_time();
    uint64_t c0 = __builtin_ia32_rdtsc();

    g_usleep(200000);
    return (double)(__builtin_ia32_rdtsc() - c0) /
           ((g_get_monotonic_time() - t0) * 1000.0);
}

/*
 * mode=timed benchmark (run with -m perf; scripts/bench-timed.sh): the
 * host cost of an access on the timed path against stock cxl-type3's
 * MMIO path, side by side; then the dependent-load latency a guest
 * measures for configured miss latencies, under -icount shift=0 (guest
 * TSC ticks = ns; each load also runs the loop's 3 instructions, 3 ns)
 * and without icount (wall time, less the same chase without latency).
 */
static void test_timed_bench(void)
{
    static const unsigned icount_ns[] = { 150, 250, 400 };
    static const unsigned wall_ns[] = { 500, 1000, 2000 };
    const char *icount = "-icount shift=0,sleep=off";
    double stock = bench_run(BENCH_STOCK);
    double tcoh = bench_run(BENCH_TIMED_COH);
    double tnc = bench_run(BENCH_TIMED_NC);
    uint32_t n = 20000, i;
    double ghz;

    g_test_message("timed-bench: per access, timed/stock time: coherent "
                   "%.2fx, non-coherent %.2fx (target <= 1.5x)",
                   stock / tcoh, stock / tnc);
    g_test_message("timed-bench: icount shift=0, %u dependent loads, each "
                   "= miss + 3 ns of loop", n);
    g_test_message("timed-bench: %-10s %-12s %-12s %-8s %s", "configured",
                   "run 1 (ns)", "run 2 (ns)", "error", "runs equal");
    for (i = 0; i < ARRAY_SIZE(icount_ns); i++) {
        ChaseResult a = chase_run(icount_ns[i], n, icount);
        ChaseResult b = chase_run(icount_ns[i], n, icount);
        double per = (double)a.ticks / n - 3;

        g_test_message("timed-bench: %-10u %-12.2f %-12.2f %+7.2f%% %s",
                       icount_ns[i], (double)a.ticks / n - 3,
                       (double)b.ticks / n - 3,
                       (per - icount_ns[i]) * 100.0 / icount_ns[i],
                       a.ticks == b.ticks ? "yes" : "NO");
    }
    /* without icount the guest's TSC is the host's: ticks -> ns */
    ghz = host_tsc_ghz();
    g_test_message("timed-bench: no icount (TSC %.3f GHz), %u dependent "
                   "loads; in one QEMU per row, 15 runs with the latency "
                   "and 15 without (TCG's path), alternated; fastest of "
                   "each", ghz, n);
    g_test_message("timed-bench: %-10s %-10s %-10s %-14s %s", "configured",
                   "raw (ns)", "path (ns)", "less path (ns)", "error");
    for (i = 0; i < ARRAY_SIZE(wall_ns); i++) {
        uint32_t base, lat;
        double raw, path;

        chase_paired(wall_ns[i], n, 15, &base, &lat);
        raw = lat / ghz / n;
        path = base / ghz / n;
        g_test_message("timed-bench: %-10u %-10.1f %-10.1f %-14.1f %+6.1f%%",
                       wall_ns[i], raw, path, raw - path,
                       (raw - path - wall_ns[i]) * 100.0 / wall_ns[i]);
    }
}

/* --- memdev: the pool's data from a user-given memory-backend-file ---- */

/* A host whose cxl-shm takes memdev=m, @obj the backend's extra options */
static char *memdev_args(const char *pool, int host_id, const char *obj,
                         const char *dev)
{
    return g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-object memory-backend-file,id=m,mem-path=%s,size=%llu,offset=2M,"
        "share=on%s "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-shm,bus=rp0,id=shm0,memdev=m,coherent-size=%llu,"
        "host-id=%d,max-hosts=4%s "
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        fw_args(), pool, POOL_SIZE, obj ? obj : "", PXB_BUS, COH_SIZE,
        host_id, dev ? dev : "");
}

static void memdev_start(Host *h, const char *pool, int host_id,
                         const char *obj, const char *dev)
{
    g_autofree char *args = memdev_args(pool, host_id, obj, dev);

    h->qts = qtest_init(args);
    host_enable(h, true);
}

/* Coherent stores seen at once, non-coherent ones after wb + inv */
static void memdev_see_each_other(Host *a, Host *b, uint64_t v)
{
    uint64_t nc = COH_SIZE + 0x80000;

    mem_wq(a, 0x3000, v);
    g_assert_cmphex(mem_rq(b, 0x3000), ==, v);
    mem_wq(b, 0x3008, v + 1);
    g_assert_cmphex(mem_rq(a, 0x3008), ==, v + 1);
    g_assert_cmphex(mem_rq(b, nc), !=, v);
    mem_wq(a, nc, v);
    g_assert_cmpuint(doorbell(a, OP_WB, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(b, nc), !=, v);         /* stale image */
    g_assert_cmpuint(doorbell(b, OP_INV, nc, LINE), ==, 0);
    g_assert_cmphex(mem_rq(b, nc), ==, v);
}

#define TMPFS_MAGIC_FS 0x01021994     /* statfs f_type of tmpfs */

static bool on_tmpfs(const char *path)
{
    struct statfs sf;

    return statfs(path, &sf) == 0 && sf.f_type == TMPFS_MAGIC_FS;
}

/*
 * Two QEMUs on one memory-backend-file at @pool that neither had (the
 * backends create and size the file, the first device writes the
 * header), then a third with the short form pool=PATH on the same file.
 * The file is removed once all three joined (they keep it open), so a
 * failed check leaves no pool behind.
 */
static void memdev_two_hosts(const char *pool)
{
    uint8_t magic[8];
    Host a, b, c;

    memdev_start(&a, pool, 0, NULL, NULL);
    memdev_start(&b, pool, 1, NULL, ",size=256M");
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 3);
    g_assert_cmpuint(r64(&b, A_CXLSHM_SIZE), ==, POOL_SIZE);
    pool_pread(pool, 0, magic, sizeof(magic));
    g_assert_cmpmem(magic, 8, "CXLPOOL\0", 8);
    host_start(&c, pool, 2, true);
    unlink(pool);
    memdev_see_each_other(&a, &b, 0x1234);
    memdev_see_each_other(&b, &a, 0x5678);
    g_assert_cmphex(r64(&c, A_CXLSHM_HOST_LIVE), ==, 7);
    memdev_see_each_other(&c, &a, 0x9abc);
    qtest_quit(c.qts);
    qtest_quit(b.qts);
    g_assert_cmpuint(r32(&a, A_CXLSHM_HOST_STATE(1)), ==, 3);      /* left */
    qtest_quit(a.qts);
}

/* ... on a file of the test's temporary directory (a disk file here) */
static void test_memdev_two_hosts(void)
{
    g_autofree char *pool = pool_path("memdev.pool");

    g_test_message("memdev-two-hosts: %s is %s", pool,
                   on_tmpfs(tmpdir) ? "on tmpfs (no disk file case)" :
                   "a file on a disk file system");
    memdev_two_hosts(pool);
}

/* ... and on tmpfs, /dev/shm (its pages are shared memory, not a cache) */
static void test_memdev_two_hosts_shm(void)
{
    g_autofree char *pool = NULL;

    if (!on_tmpfs("/dev/shm") || access("/dev/shm", W_OK)) {
        g_test_skip("no writable tmpfs at /dev/shm: the tmpfs case was not "
                    "run");
        return;
    }
    pool = g_strdup_printf("/dev/shm/cxl-shm-test-%d.pool", getpid());
    unlink(pool);
    memdev_two_hosts(pool);
}

/* prealloc=on: the pool's blocks are allocated before the guest runs */
static void test_memdev_prealloc(void)
{
    g_autofree char *pool = pool_path("prealloc.pool");
    struct stat st;
    Host a, b;

    memdev_start(&a, pool, 0, ",prealloc=on", NULL);
    g_assert_cmpint(stat(pool, &st), ==, 0);
    g_assert_cmpuint((uint64_t)st.st_blocks * 512, >=, POOL_SIZE);
    memdev_start(&b, pool, 1, ",prealloc=on", NULL);
    memdev_see_each_other(&a, &b, 0xfeed);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
    unlink(pool);
}

/* A hugetlbfs mount with room for the pool, or NULL */
static char *hugetlbfs_dir(void)
{
    g_autofree char *mounts = NULL;
    g_autofree char *meminfo = NULL;
    char **lines;
    char *dir = NULL;
    const char *f;
    unsigned long free_pages = 0, page_kb = 0;
    int i;

    if (!g_file_get_contents("/proc/meminfo", &meminfo, NULL, NULL) ||
        !g_file_get_contents("/proc/mounts", &mounts, NULL, NULL)) {
        return NULL;
    }
    f = strstr(meminfo, "HugePages_Free:");
    if (f) {
        sscanf(f, "HugePages_Free: %lu", &free_pages);
    }
    f = strstr(meminfo, "Hugepagesize:");
    if (f) {
        sscanf(f, "Hugepagesize: %lu", &page_kb);
    }
    if (page_kb != 2048 ||
        free_pages * 2 * MiB < cxlpool_file_size(POOL_SIZE, 4)) {
        return NULL;
    }
    lines = g_strsplit(mounts, "\n", -1);
    for (i = 0; lines[i] && !dir; i++) {
        char **w = g_strsplit(lines[i], " ", -1);

        if (w[0] && w[1] && w[2] && !strcmp(w[2], "hugetlbfs") &&
            !strstr(lines[i], "pagesize=1G") && access(w[1], W_OK) == 0) {
            dir = g_strdup(w[1]);
        }
        g_strfreev(w);
    }
    g_strfreev(lines);
    return dir;
}

/* The same two hosts on a hugetlbfs mount (2 MiB pages), if there is one */
static void test_memdev_hugetlbfs(void)
{
    g_autofree char *dir = hugetlbfs_dir();
    g_autofree char *pool = NULL;
    Host a, b;

    if (!dir) {
        g_test_skip("no writable hugetlbfs mount with 2 MiB pages and 129 "
                    "free huge pages: the hugetlbfs case was not run");
        return;
    }
    pool = g_strdup_printf("%s/cxl-shm-test-%d.pool", dir, getpid());
    unlink(pool);
    memdev_start(&a, pool, 0, NULL, NULL);
    memdev_start(&b, pool, 1, NULL, NULL);
    memdev_see_each_other(&a, &b, 0x4242);
    qtest_quit(b.qts);
    qtest_quit(a.qts);
    g_test_message("hugetlbfs: two hosts on %s", pool);
    unlink(pool);
}

static const struct {
    const char *name;
    const char *obj;        /* the backend, %s = pool */
    const char *dev;        /* cxl-shm options after memdev=m */
    const char *more;       /* more QEMU options */
    const char *error;
} memdev_refused[] = {
    { "share-off", "memory-backend-file,id=m,mem-path=%s,size=256M,"
      "offset=2M,share=off", "", "", "memdev 'm' has share=off" },
    { "size", "memory-backend-file,id=m,mem-path=%s,size=256M,offset=2M,"
      "share=on", ",size=512M", "",
      "memdev 'm' is 268435456 bytes but property 'size' is 536870912" },
    { "offset", "memory-backend-file,id=m,mem-path=%s,size=256M,share=on",
      "", "", "memdev 'm' has offset=0 (allowed: offset=2097152" },
    { "not-a-file", "memory-backend-ram,id=m,size=256M,share=on", "", "",
      "memdev 'm' is a memory-backend-ram" },
    { "with-pool", "memory-backend-file,id=m,mem-path=%s,size=256M,"
      "offset=2M,share=on", ",pool=/nonexistent/p.pool", "",
      "properties 'pool' and 'memdev' are both set" },
    { "in-use", "memory-backend-file,id=m,mem-path=%s,size=256M,offset=2M,"
      "share=on", "", "-machine memory-backend=m",
      "memdev 'm' is already used by another device" },
    { "directory", "memory-backend-file,id=m,mem-path=" "%s.d,size=256M,"
      "offset=2M,share=on", "", "", "a directory: its file is unlinked" },
    { "geometry", "memory-backend-file,id=m,mem-path=%s,size=256M,"
      "offset=2M,share=on", ",max-hosts=8", "", "has another geometry" },
};

/* Each refusal names what is wrong and leaves the pool byte-identical */
static void test_memdev_refused(void)
{
    g_autofree char *pool = pool_path("memdev-refused.pool");
    g_autofree char *dir = g_strdup_printf("%s.d", pool);
    int i;

    make_pool(pool);
    g_assert_cmpint(mkdir(dir, 0700), ==, 0);
    for (i = 0; i < ARRAY_SIZE(memdev_refused); i++) {
        g_autofree char *obj = g_strdup_printf(memdev_refused[i].obj, pool);
        g_autofree char *before = file_state(pool);
        g_autofree char *after = NULL;
        g_autofree char *err = NULL;
        g_autofree char *args = NULL;
        int status;

        args = g_strdup_printf(
            "%s-machine q35,cxl=on -m %s -nodefaults -object %s "
            "-device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 "
            "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
            "-device cxl-shm,bus=rp0,memdev=m,coherent-size=64M,"
            "max-hosts=4%s "
            "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G %s", fw_args(),
            *memdev_refused[i].more ? "256M" : "128M", obj,
            memdev_refused[i].dev, memdev_refused[i].more);
        err = run_qemu(args, &status);
        after = file_state(pool);
        if (g_test_verbose()) {
            g_test_message("%s: %s", memdev_refused[i].name, err);
        }
        g_assert_cmpint(status, ==, 1);
        if (!strstr(err, memdev_refused[i].error)) {
            g_test_message("case %s: expected '%s' in: %s",
                           memdev_refused[i].name, memdev_refused[i].error,
                           err);
            g_assert_not_reached();
        }
        g_assert_cmpstr(before, ==, after);
    }
    rmdir(dir);
    unlink(pool);
}

/* --- issue 35 item 5: hooks, unplug, routing ------------------------- */

/*
 * The test-only fault points (x-test-kill-at, x-test-stop-at) are device
 * properties that realize refuses unless the qtest accelerator runs: a
 * QEMU under TCG given one is refused, saying so, before the pool is
 * touched (it was an environment variable any QEMU obeyed or warned
 * about).
 */
static void test_test_hook_refused(void)
{
    g_autofree char *pool = pool_path("hook.pool");
    g_autofree char *dev = host_args(pool, 0, ",x-test-stop-at=after-join");
    g_autofree char *cmd = g_strdup_printf(
        "timeout 30 %s -accel tcg,thread=multi -smp 2 -display none -S %s",
        g_getenv("QTEST_QEMU_BINARY"), dev);
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status;

    g_assert_true(g_spawn_command_line_sync(cmd, &out, &err, &status, NULL));
    g_test_message("%s", err);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "property 'x-test-stop-at' is a test hook "
                                 "(allowed only under the qtest "
                                 "accelerator)"));
    g_assert_false(g_file_test(pool, G_FILE_TEST_EXISTS));
}

/*
 * A device whose slot the guest powers off leaves nothing behind: its
 * user-given memdev is free again once the device is gone (object-del
 * succeeds; it stayed "in use" forever), in mode=direct and in
 * mode=timed, and QEMU goes on and quits cleanly (in mode=direct the
 * coherent store is in the pool).
 */
static void unplug_memdev(const char *mode)
{
    g_autofree char *pool = pool_path("unplug.pool");
    QDict *rsp = NULL;
    Host h;
    int i;

    memdev_start(&h, pool, 0, NULL, mode);
    mem_wq(&h, 0x1000, 0x5a5a);
    slot_power_off(&h);
    /* the device's release comes after a grace period: up to 5 s */
    for (i = 0; i < 500; i++) {
        rsp = qtest_qmp(h.qts, "{'execute': 'object-del', "
                        "'arguments': {'id': 'm'}}");
        if (!qdict_haskey(rsp, "error")) {
            break;
        }
        if (i == 499) {
            g_test_message("object-del m: %s",
                           qdict_get_str(qdict_get_qdict(rsp, "error"),
                                         "desc"));
        }
        qobject_unref(rsp);
        rsp = NULL;
        g_usleep(10000);
    }
    g_assert_nonnull(rsp);
    qobject_unref(rsp);
    qtest_qmp_assert_success(h.qts, "{'execute': 'query-status'}");
    qtest_quit(h.qts);
    if (!mode) {
        g_assert_cmphex(pool_rq(pool, 0x1000), ==, 0x5a5a);
    }
    unlink(pool);
}

static void test_unplug_memdev(void)
{
    unplug_memdev(NULL);
}

static void test_unplug_memdev_timed(void)
{
    unplug_memdev(",mode=timed");
}

/* Base of the memory region called @name in the memory tree */
static uint64_t find_region(QTestState *qts, const char *name)
{
    g_autofree char *mtree = qtest_hmp(qts, "info mtree");
    g_autofree char *pat = g_strdup_printf(": %s\r", name);
    const char *p = strstr(mtree, pat);
    const char *line;
    unsigned long long base = 0;

    if (!p) {
        g_free(pat);
        pat = g_strdup_printf(": %s\n", name);
        p = strstr(mtree, pat);
    }
    g_assert_nonnull(p);
    for (line = p; line > mtree && line[-1] != '\n'; line--) {
        /* find the start of the line */
    }
    while (*line == ' ') {
        line++;
    }
    g_assert_cmpint(sscanf(line, "%llx-", &base), ==, 1);
    return base;
}

/* The HDM decoder capability of the component registers at @cm */
static uint64_t hdm_of(QTestState *qts, uint64_t cm)
{
    uint32_t hdr = qtest_readl(qts, cm);
    int n = hdr >> 24, i;

    g_assert_cmpint(hdr & 0xffff, ==, 1);
    for (i = 1; i <= n; i++) {
        uint32_t e = qtest_readl(qts, cm + 4 * i);

        if ((e & 0xffff) == 5) {
            return cm + (e >> 20);
        }
    }
    g_assert_not_reached();
}

/* Is the device's memory mapped (CAPS.DIRECT, and in the memory tree)? */
static bool route_mapped(Host *h)
{
    g_autofree char *mtree = qtest_hmp(h->qts, "info mtree");
    bool direct = r32(h, A_CXLSHM_CAPS) & CAP_DIRECT;

    g_assert_cmpint(direct, ==, !!strstr(mtree, "cxl-shm-direct"));
    return direct;
}

/* Uncommit and commit the device's decoder 0 again */
static void route_recommit(Host *h)
{
    uint64_t hdm = find_hdm(h->qts);

    qtest_writel(h->qts, hdm + 0x20, 0);
    qtest_writel(h->qts, hdm + 0x20, 1 << 9);
    g_assert_cmphex(qtest_readl(h->qts, hdm + 0x20) & (1 << 10), ==, 1 << 10);
}

/*
 * The direct map follows the routing a guest access takes on hardware
 * (and through the window's MMIO path, cxl_cfmws_find_device()): the
 * fixed memory window's target host bridge, its HDM decoder, the root
 * port, the device.  A device whose decoder is committed but which the
 * window does not route to is not mapped, and the guest sees there what
 * the window's MMIO path gives for an unrouted access (zeros), not the
 * pool.  Here the window targets another host bridge (cxl.2).
 */
static void test_route_other_hb(void)
{
    g_autofree char *pool = pool_path("route-hb.pool");
    g_autofree char *args = g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device pxb-cxl,bus_nr=20,bus=pcie.0,id=cxl.2 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-rp,port=0,bus=cxl.2,id=rp2,chassis=1,slot=1 "
        "-device cxl-shm,bus=rp0,id=shm0,pool=%s,size=%llu,"
        "coherent-size=%llu,host-id=0,max-hosts=4 "
        "-M cxl-fmw.0.targets.0=cxl.2,cxl-fmw.0.size=4G",
        fw_args(), PXB_BUS, pool, POOL_SIZE, COH_SIZE);
    uint64_t v = 0x1122334455667788ULL;
    Host h;

    h.qts = qtest_init(args);
    host_enable(&h, true);
    g_assert_false(route_mapped(&h));
    patch_pool(pool, META_SIZE + 0x1000, &v, sizeof(v));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);
    qtest_quit(h.qts);
    unlink(pool);
}

/*
 * A host bridge with two root ports decodes with its own HDM decoder: the
 * device is mapped only while that decoder is committed and routes the
 * range to the device's root port (port 0), not to the other (port 1).
 * Committed bottom up, as Linux does: the device's decoder first, then
 * the host bridge's; the device follows the bridge's commits and
 * uncommits (patches-pending/0017's notifier).
 */
static void test_route_hb_decoder(void)
{
    g_autofree char *pool = pool_path("route-rp.pool");
    g_autofree char *args = g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-rp,port=1,bus=cxl.1,id=rp1,chassis=0,slot=3 "
        "-device cxl-shm,bus=rp0,id=shm0,pool=%s,size=%llu,"
        "coherent-size=%llu,host-id=0,max-hosts=4 "
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        fw_args(), PXB_BUS, pool, POOL_SIZE, COH_SIZE);
    uint64_t v = 0x0102030405060708ULL, hb;
    Host h;

    h.qts = qtest_init(args);
    host_enable(&h, true);
    patch_pool(pool, META_SIZE + 0x1000, &v, sizeof(v));

    /* the host bridge's decoder is not committed: nothing routes there */
    g_assert_false(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);

    /* committed, but to the other root port */
    hb = hdm_of(h.qts, find_region(h.qts, "cxl_host_reg") + 0x1000);
    qtest_writel(h.qts, hb + 0x04, 0x2);
    qtest_writel(h.qts, hb + 0x10, h.hpa & 0xf0000000);
    qtest_writel(h.qts, hb + 0x14, h.hpa >> 32);
    qtest_writel(h.qts, hb + 0x18, POOL_SIZE & 0xf0000000);
    qtest_writel(h.qts, hb + 0x1c, POOL_SIZE >> 32);
    qtest_writel(h.qts, hb + 0x24, 1);                  /* target: port 1 */
    qtest_writel(h.qts, hb + 0x20, 1 << 9);
    g_assert_cmphex(qtest_readl(h.qts, hb + 0x20) & (1 << 10), ==, 1 << 10);
    g_assert_false(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);
    route_recommit(&h);
    g_assert_false(route_mapped(&h));

    /* routed to the device's root port: mapped, the pool's data */
    qtest_writel(h.qts, hb + 0x20, 0);
    qtest_writel(h.qts, hb + 0x24, 0);                  /* target: port 0 */
    qtest_writel(h.qts, hb + 0x20, 1 << 9);
    g_assert_true(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, v);

    /* the bridge's decoder uncommitted: unmapped again */
    qtest_writel(h.qts, hb + 0x20, 0);
    g_assert_false(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);
    qtest_quit(h.qts);
    unlink(pool);
}

/*
 * Behind a switch the switch's upstream port decodes too: with the device
 * below downstream port 0, committed bottom up, the device is not mapped
 * while the upstream port's decoder is uncommitted (loads read zeros),
 * mapped with the pool's data once it commits to port 0, unmapped when it
 * is uncommitted.  The host bridge is a passthrough (one root port).
 */
#define SW_USP_BUS      13
#define SW_DSP_BUS      14
#define SW_DEV_BUS      15
#define SW_USP_BAR0     0xe0800000ULL

static void test_route_switch(void)
{
    g_autofree char *pool = pool_path("route-sw.pool");
    g_autofree char *args = g_strdup_printf(
        "%s-machine q35,cxl=on -m 128M -nodefaults "
        "-device pxb-cxl,bus_nr=%d,bus=pcie.0,id=cxl.1 "
        "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 "
        "-device cxl-upstream,bus=rp0,id=us0 "
        "-device cxl-downstream,port=0,bus=us0,id=ds0,chassis=0,slot=4 "
        "-device cxl-shm,bus=ds0,id=shm0,pool=%s,size=%llu,"
        "coherent-size=%llu,host-id=0,max-hosts=4 "
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        fw_args(), PXB_BUS, pool, POOL_SIZE, COH_SIZE);
    uint64_t v = 0x1020304050607080ULL, hdm, sw;
    QTestState *qts;
    Host h;

    h.qts = qts = qtest_init(args);
    /* root port, upstream port, downstream port: buses and windows */
    cfg_writel(qts, PXB_BUS, 0, 0x18,
               PXB_BUS | (SW_USP_BUS << 8) | (SW_DEV_BUS << 16));
    cfg_writel(qts, SW_USP_BUS, 0, 0x18,
               SW_USP_BUS | (SW_DSP_BUS << 8) | (SW_DEV_BUS << 16));
    cfg_writel(qts, SW_DSP_BUS, 0, 0x18,
               SW_DSP_BUS | (SW_DEV_BUS << 8) | (SW_DEV_BUS << 16));
    cfg_writel(qts, PXB_BUS, 0, 0x20, 0xe0f0e000);
    cfg_writel(qts, SW_USP_BUS, 0, 0x20, 0xe0f0e000);
    cfg_writel(qts, SW_DSP_BUS, 0, 0x20, 0xe07fe000);
    cfg_writel(qts, SW_USP_BUS, 0, 0x10, SW_USP_BAR0);  /* its registers */
    cfg_writel(qts, SW_USP_BUS, 0, 0x14, 0);
    cfg_writel(qts, PXB_BUS, 0, 0x04, 0x6);
    cfg_writel(qts, SW_USP_BUS, 0, 0x04, 0x6);
    cfg_writel(qts, SW_DSP_BUS, 0, 0x04, 0x6);
    g_assert_cmphex(cfg_readl(qts, SW_DEV_BUS, 0, 0), ==, 0x0d938086);
    cfg_writel(qts, SW_DEV_BUS, 0, 0x10, BAR0_ADDR);
    cfg_writel(qts, SW_DEV_BUS, 0, 0x14, 0);
    cfg_writel(qts, SW_DEV_BUS, 0, 0x24, BAR5_ADDR);
    cfg_writel(qts, SW_DEV_BUS, 0, 0x04, 0x6);
    h.hpa = find_window(qts);

    /* the device's decoder first, for the whole device */
    hdm = find_hdm(qts);
    qtest_writel(qts, hdm + 0x04, 0x2);
    qtest_writel(qts, hdm + 0x10, h.hpa & 0xf0000000);
    qtest_writel(qts, hdm + 0x14, h.hpa >> 32);
    qtest_writel(qts, hdm + 0x18, POOL_SIZE & 0xf0000000);
    qtest_writel(qts, hdm + 0x1c, POOL_SIZE >> 32);
    qtest_writel(qts, hdm + 0x20, 1 << 9);
    g_assert_cmphex(qtest_readl(qts, hdm + 0x20) & (1 << 10), ==, 1 << 10);
    patch_pool(pool, META_SIZE + 0x1000, &v, sizeof(v));

    /* the switch's decoder uncommitted: nothing routes there */
    g_assert_false(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);

    /* committed to downstream port 0: mapped, the pool's data */
    sw = hdm_of(qts, SW_USP_BAR0 + 0x1000);
    qtest_writel(qts, sw + 0x04, 0x2);
    qtest_writel(qts, sw + 0x10, h.hpa & 0xf0000000);
    qtest_writel(qts, sw + 0x14, h.hpa >> 32);
    qtest_writel(qts, sw + 0x18, POOL_SIZE & 0xf0000000);
    qtest_writel(qts, sw + 0x1c, POOL_SIZE >> 32);
    qtest_writel(qts, sw + 0x24, 0);                    /* target: port 0 */
    qtest_writel(qts, sw + 0x20, 1 << 9);
    g_assert_cmphex(qtest_readl(qts, sw + 0x20) & (1 << 10), ==, 1 << 10);
    g_assert_true(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, v);

    /* uncommitted again: unmapped */
    qtest_writel(qts, sw + 0x20, 0);
    g_assert_false(route_mapped(&h));
    g_assert_cmphex(mem_rq(&h, 0x1000), ==, 0);
    qtest_quit(qts);
    unlink(pool);
}

/*
 * A remote pool: `cxlpod-pool serve` on loopback, a host joined to it
 * over UCX (pool=ucx://ADDR:PORT) and a local host mapping the pool file.
 * Data written back by either is read by the other after its
 * invalidate; a wrong geometry and a wrong key are refused at realize,
 * naming the service; the service killed, the remote host's next
 * doorbell op fails (DB_STATUS "lost") within its timeout and QMP still
 * answers.
 */
typedef struct Service {
    GPid pid;
    int port;
    char *where;
} Service;

/* A failed assertion kills the service too (stopped or not) */
static void service_abort(void *opaque)
{
    Service *sv = opaque;

    kill(sv->pid, SIGKILL);
}

static bool service_start(Service *sv, const char *tool, const char *pool)
{
    const char *argv[] = { tool, "serve", "--listen", "127.0.0.1:0", pool,
                           NULL };
    g_autoptr(GIOChannel) ch = NULL;
    g_autofree char *line = NULL;
    int out;

    g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD |
                                           G_SPAWN_STDERR_TO_DEV_NULL,
                                           NULL, NULL, &sv->pid, NULL, &out,
                                           NULL, NULL));
    ch = g_io_channel_unix_new(out);
    g_io_channel_set_close_on_unref(ch, true);
    while (g_io_channel_read_line(ch, &line, NULL, NULL, NULL) ==
           G_IO_STATUS_NORMAL) {
        if (sscanf(line, "listening on 127.0.0.1:%d", &sv->port) == 1) {
            sv->where = g_strdup_printf("127.0.0.1:%d", sv->port);
            qtest_add_abrt_handler(service_abort, sv);
            return true;
        }
        g_free(line);
        line = NULL;
    }
    return false;
}

static void service_stop(Service *sv)
{
    int st;

    qtest_remove_abrt_handler(sv);
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, &st, 0);
    g_spawn_close_pid(sv->pid);
    g_free(sv->where);
}

static char *remote_opts(Service *sv, const char *key, const char *extra)
{
    return g_strdup_printf(",pool-key=%s%s", key,
                           extra ? extra : ",remote-timeout-ms=1000");
}

/*
 * A remote host's test: its pool made with cxlpod-pool, whose path is
 * returned; NULL, and the test skipped, without the tool
 */
static char *remote_pool_create(const char *pool)
{
    char *tool = pool_tool();
    g_autofree char *cmd = NULL;
    int status;

    if (!tool || !g_file_test(tool, G_FILE_TEST_IS_EXECUTABLE)) {
        g_test_skip("no cxlpod-pool (scripts/build-tools.sh, CXLPOD_TOP)");
        g_free(tool);
        return NULL;
    }
    cmd = g_strdup_printf("%s create --size %llu --coherent-size %llu "
                          "--max-hosts 4 %s", tool, POOL_SIZE, COH_SIZE,
                          pool);
    g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return tool;
}

/*
 * @pool served on loopback; *@url and *@opts (with @extra, or the
 * default timeout) for a remote host's cxl-shm
 */
static void remote_pool_serve(Service *sv, const char *tool, const char *pool,
                              const char *extra, char **url, char **opts)
{
    g_autofree char *key = g_strdup_printf("%s.key", pool);

    g_assert_true(service_start(sv, tool, pool));
    *url = g_strdup_printf("ucx://%s", sv->where);
    *opts = remote_opts(sv, key, extra);
}

static void test_remote(void)
{
    g_autofree char *pool = pool_path("remote.pool");
    g_autofree char *key = g_strdup_printf("%s.key", pool);
    g_autofree char *badkey = pool_path("remote-bad.key");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL, *args = NULL, *err = NULL;
    const uint64_t nc = COH_SIZE + 0x40000;
    int status, i;
    gint64 t0;
    QDict *r;
    Service sv;
    Host a, b;

    args = host_args("ucx://127.0.0.1:1", 0, ",pool-key=/nonexistent");
    err = run_qemu(args, &status);
    if (strstr(err, "in this build of QEMU")) {
        g_test_skip("a remote pool is not in this build of QEMU");
        return;
    }
    g_clear_pointer(&err, g_free);
    g_clear_pointer(&args, g_free);
    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);

    host_start(&a, pool, 0, true);
    args = host_args(url, 1, opts);
    t0 = g_get_monotonic_time();
    b.qts = qtest_init(args);
    /* the join and the fill of 192 MiB (docs/device.md) */
    g_test_message("remote host started in %" PRId64 " ms",
                   (g_get_monotonic_time() - t0) / 1000);
    host_enable(&b, true);
    /* the host table is the service's: both live */
    t0 = g_get_monotonic_time();
    while (r64(&b, A_CXLSHM_HOST_LIVE) != 3) {
        g_assert_cmpint(g_get_monotonic_time() - t0, <, 5 * G_USEC_PER_SEC);
        g_usleep(10000);
    }
    g_assert_cmphex(r64(&a, A_CXLSHM_HOST_LIVE), ==, 3);
    /* not TCG (-accel qtest): no atomics; never a direct window */
    g_assert_cmphex(r32(&b, A_CXLSHM_CAPS) & (CAP_ATOMICS | CAP_DIRECT),
                    ==, 0);

    /* remote -> local: b's image, written back through its doorbell */
    mem_wq(&b, nc, 0xb1b1);
    mem_wq(&b, nc + 3 * LINE + 8, 0xb2b2);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0xb1b1);    /* at RAM speed */
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, 4 * LINE), ==, 0);
    g_assert_cmpuint(r64(&b, A_CXLSHM_DB_LINES), ==, 2);
    g_assert_cmphex(pool_rq(pool, nc), ==, 0xb1b1);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0);         /* a's stale image */
    g_assert_cmpuint(doorbell(&a, OP_INV, nc, 4 * LINE), ==, 0);
    g_assert_cmphex(mem_rq(&a, nc), ==, 0xb1b1);
    g_assert_cmphex(mem_rq(&a, nc + 3 * LINE + 8), ==, 0xb2b2);
    /* a clean range: nothing is sent */
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, 4 * LINE), ==, 0);
    g_assert_cmpuint(r64(&b, A_CXLSHM_DB_LINES), ==, 0);

    /* local -> remote: b sees it only after its invalidate */
    mem_wq(&a, nc + LINE, 0xa1a1);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc + LINE, LINE), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc + LINE), ==, 0);
    g_assert_cmpuint(doorbell(&b, OP_INV, nc, 4 * LINE), ==, 0);
    g_assert_cmpuint(r64(&b, A_CXLSHM_DB_LINES), ==, 4);
    g_assert_cmphex(mem_rq(&b, nc + LINE), ==, 0xa1a1);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0xb1b1);

    /* flush: written back, then fetched again */
    mem_wq(&b, nc + 2 * LINE, 0xf1f1);
    mem_wq(&a, nc + 2 * LINE + 32, 0xa2a2);
    g_assert_cmpuint(doorbell(&a, OP_WB, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmpuint(doorbell(&b, OP_FLUSH, nc + 2 * LINE, LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + 2 * LINE), ==, 0xf1f1);
    /* the line went whole, as a local writeback: a's bytes are lost */
    g_assert_cmphex(mem_rq(&b, nc + 2 * LINE + 32), ==, 0);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_CONFLICTS), ==, 1);

    /* a large range, more than one request of each kind */
    for (i = 0; i < 300; i++) {
        mem_wq(&b, nc + 0x100000 + i * LINE, 0x1000 + i);
    }
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 0x100000, 1 * MiB), ==, 0);
    g_assert_cmpuint(r64(&b, A_CXLSHM_DB_LINES), ==, 300);
    g_assert_cmpuint(doorbell(&a, OP_INV, nc + 0x100000, 1 * MiB), ==, 0);
    for (i = 0; i < 300; i += 37) {
        g_assert_cmphex(mem_rq(&a, nc + 0x100000 + i * LINE), ==, 0x1000 + i);
    }

    /* one-line writeback through the doorbell, local and remote */
    for (i = 0; i < 2; i++) {
        Host *h = i ? &b : &a;
        gint64 us = 0;
        int k;

        for (k = 0; k < 100; k++) {
            mem_wq(h, nc + 0x200000, k);
            t0 = g_get_monotonic_time();
            g_assert_cmpuint(doorbell(h, OP_WB, nc + 0x200000, LINE), ==, 0);
            us += g_get_monotonic_time() - t0;
        }
        g_test_message("%s host: one-line writeback by the doorbell, %"
                       PRId64 " us (qtest round trips included)",
                       i ? "remote" : "local", us / 100);
    }

    /* a reset loses b's lines not written back, keeps the others */
    mem_wq(&b, nc + 0x300000, 0x1057);
    mem_wq(&b, nc + 0x300040, 0x5afe);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 0x300040, LINE), ==, 0);
    qtest_qmp_assert_success(b.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(b.qts, "RESET");
    host_enable(&b, true);
    g_assert_cmpuint(rstat(&b, CXLSHM_STAT_RESETS), ==, 1);
    g_assert_cmphex(mem_rq(&b, nc + 0x300000), ==, 0);
    g_assert_cmphex(mem_rq(&b, nc + 0x300040), ==, 0x5afe);
    g_assert_cmphex(mem_rq(&b, nc), ==, 0xb1b1);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 0x300000, 2 * LINE), ==, 0);
    g_assert_cmphex(pool_rq(pool, nc + 0x300000), ==, 0);

    /*
     * a reset while a writeback is in flight (the service stopped): its
     * reply, come after the reset, is not the result of the writeback
     * run after it, which sends the bytes stored after the reset
     */
    kill(sv.pid, SIGSTOP);
    mem_wq(&b, nc + 0x380000, 0x01d);
    db_ring(&b, OP_WB, nc + 0x380000, LINE);
    g_usleep(100 * 1000);
    g_assert_cmpuint(r32(&b, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);
    qtest_qmp_assert_success(b.qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(b.qts, "RESET");
    host_enable(&b, true);
    kill(sv.pid, SIGCONT);
    g_usleep(200 * 1000);           /* the old request's reply comes */
    g_assert_cmphex(mem_rq(&b, nc + 0x380000), ==, 0);
    mem_wq(&b, nc + 0x380000, 0x2e5e7);
    g_assert_cmpuint(doorbell(&b, OP_WB, nc + 0x380000, LINE), ==, 0);
    g_assert_cmpuint(r64(&b, A_CXLSHM_DB_LINES), ==, 1);
    g_assert_cmphex(pool_rq(pool, nc + 0x380000), ==, 0x2e5e7);

    /* the host table through QMP */
    r = qtest_qmp(b.qts, "{'execute': 'query-cxl-shm'}");
    g_assert_true(qdict_haskey(r, "return"));
    qobject_unref(r);

    /* refused at realize: the geometry, the key, naming the service */
    g_free(args);
    args = host_args_n(url, 2, 8, opts);
    err = run_qemu(args, &status);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, sv.where));
    g_assert_nonnull(strstr(err, "max-hosts=4"));
    g_assert_nonnull(strstr(err, "max-hosts=8"));
    g_clear_pointer(&err, g_free);
    g_assert_true(g_file_set_contents(badkey, "0123456789abcdef0123456789abcd"
                                      "ef0123456789abcdef0123456789abcdef\n",
                                      -1, NULL));
    g_free(opts);
    opts = remote_opts(&sv, badkey, NULL);
    g_free(args);
    args = host_args(url, 2, opts);
    err = run_qemu(args, &status);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, sv.where));
    g_assert_nonnull(strstr(err, "wrong key"));
    g_clear_pointer(&err, g_free);
    /* a FIFO as the key file: refused at once, not waited on */
    g_free(badkey);
    badkey = pool_path("remote-fifo.key");
    g_assert_cmpint(mkfifo(badkey, 0600), ==, 0);
    g_free(opts);
    opts = remote_opts(&sv, badkey, NULL);
    g_free(args);
    args = host_args(url, 2, opts);
    t0 = g_get_monotonic_time();
    err = run_qemu(args, &status);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, "not a regular file"));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
    g_clear_pointer(&err, g_free);
    unlink(badkey);
    /* slot 1 is b's */
    g_free(opts);
    opts = remote_opts(&sv, key, NULL);
    g_free(args);
    args = host_args(url, 1, opts);
    err = run_qemu(args, &status);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, "slot busy"));
    g_clear_pointer(&err, g_free);

    /* a service that does not answer: the join times out, bounded */
    kill(sv.pid, SIGSTOP);
    g_free(opts);
    opts = remote_opts(&sv, key, ",remote-timeout-ms=500");
    g_free(args);
    args = host_args(url, 2, opts);
    t0 = g_get_monotonic_time();
    err = run_qemu(args, &status);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, sv.where));
    g_assert_nonnull(strstr(err, "timeout"));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
    g_clear_pointer(&err, g_free);
    kill(sv.pid, SIGCONT);

    /* the service killed: b's next op fails in bounded time */
    service_stop(&sv);
    mem_wq(&b, nc, 0xdead);
    t0 = g_get_monotonic_time();
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, LINE), ==, CXLSHM_DB_LOST);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 3 * G_USEC_PER_SEC);
    g_assert_cmpuint(doorbell(&b, OP_INV, nc, LINE), ==, CXLSHM_DB_LOST);
    r = qtest_qmp(b.qts, "{'execute': 'query-cxl-shm'}");
    g_assert_true(qdict_haskey(r, "return"));
    qobject_unref(r);
    t0 = g_get_monotonic_time();
    qtest_quit(b.qts);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 3 * G_USEC_PER_SEC);
    qtest_quit(a.qts);
}

/*
 * The slot of a remote host powered off while a doorbell invalidate is
 * in flight to a stopped service (SIGSTOP): QEMU answers QMP within 1 s
 * and stays up when the service goes on and the reply comes.
 */
static void test_remote_unplug(void)
{
    g_autofree char *pool = pool_path("remote-unplug.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL, *args = NULL;
    const uint64_t nc = COH_SIZE + 0x40000;
    int i;
    gint64 t0;
    Service sv;
    Host b;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, ",remote-timeout-ms=5000", &url, &opts);
    args = host_args(url, 1, opts);
    b.qts = qtest_init(args);
    host_enable(&b, true);
    for (i = 0; i < 8; i++) {
        mem_wq(&b, nc + i * 0x10000, 0x1000 + i);
    }
    g_assert_cmpuint(doorbell(&b, OP_WB, nc, 8 * 0x10000), ==, 0);

    kill(sv.pid, SIGSTOP);
    db_ring(&b, OP_INV, nc, 8 * 0x10000);
    g_usleep(100 * 1000);
    g_assert_cmpuint(r32(&b, A_CXLSHM_DB_STATUS), ==, CXLSHM_DB_BUSY);
    slot_power_off(&b);
    t0 = g_get_monotonic_time();
    qtest_qmp_assert_success(b.qts, "{'execute': 'query-status'}");
    g_assert_cmpint(g_get_monotonic_time() - t0, <, G_USEC_PER_SEC);
    /* the grace period passes, the release runs; then the reply comes */
    g_usleep(300 * 1000);
    t0 = g_get_monotonic_time();
    qtest_qmp_assert_success(b.qts, "{'execute': 'query-status'}");
    g_assert_cmpint(g_get_monotonic_time() - t0, <, G_USEC_PER_SEC);
    kill(sv.pid, SIGCONT);
    g_usleep(300 * 1000);
    qtest_qmp_assert_success(b.qts, "{'execute': 'query-status'}");
    qtest_quit(b.qts);
    service_stop(&sv);
}

/*
 * A remote host's guest cache maintenance under TCG: fw_code without
 * its coherent-window atomics (not served on a remote host), ending in
 * an sfence.  clwb and clflushopt land at the fence, clflush at once,
 * each through the service: the vCPU runs the instruction again until
 * the reply came.
 */
static const uint8_t remote_fw_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xa8, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x11,
    0x11, 0x11, 0x66, 0x0f, 0xae, 0x35, 0x00, 0x00, 0x20, 0x00, 0xc7, 0x05,
    0x40, 0x00, 0x20, 0x00, 0x22, 0x22, 0x22, 0x22, 0x66, 0x0f, 0xae, 0x3d,
    0x40, 0x00, 0x20, 0x00, 0xc7, 0x05, 0x80, 0x00, 0x20, 0x00, 0x33, 0x33,
    0x33, 0x33, 0x0f, 0xae, 0x3d, 0x80, 0x00, 0x20, 0x00, 0xc7, 0x05, 0xc0,
    0x00, 0x20, 0x00, 0x44, 0x44, 0x44, 0x44, 0x0f, 0xae, 0xf8, 0xc7, 0x05,
    0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x90,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00,
    0x17, 0x00, 0x90, 0xf0, 0xff, 0xff,
};

static void test_remote_tcg(void)
{
    g_autofree char *pool = pool_path("remote-tcg.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    Service sv;
    Host h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    fw_host_start_code(&h, url, 1, remote_fw_code, sizeof(remote_fw_code),
                       opts, NULL);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_host_wait(&h);

    g_assert_cmphex(pool_rq(pool, COH_SIZE), ==, 0x11111111);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x40), ==, 0x22222222);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x80), ==, 0x33333333);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0xc0), ==, 0);  /* no flush */
    g_assert_cmphex(mem_rq(&h, COH_SIZE + 0xc0), ==, 0x44444444);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_NATIVE_OPS), ==, 3);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_WB_LINES), ==, 3);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_INV_LINES), ==, 2);
    g_test_message("vCPU re-executions while a reply was due: %" PRIu64,
                   rstat(&h, CXLSHM_STAT_RETRIES));
    qtest_quit(h.qts);
    service_stop(&sv);
}

/*
 * A remote host's coherent window under TCG: each load and store goes to
 * the service (a store is a masked store of its word).  Source, after
 * fw_code's paging set-up:
 *
 *     movl $0x55667788, 0x400000; movl 0x400000, %eax; movl %eax, 0x200100
 *     movl 0x400010, %ebx; movl %ebx, 0x200104; clflush 0x200100
 *     movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static const uint8_t remote_cw_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0x90, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xc7, 0x05, 0x00, 0x00, 0x40, 0x00, 0x88, 0x77,
    0x66, 0x55, 0xa1, 0x00, 0x00, 0x40, 0x00, 0xa3, 0x00, 0x01, 0x20, 0x00,
    0x8b, 0x1d, 0x10, 0x00, 0x40, 0x00, 0x89, 0x1d, 0x04, 0x01, 0x20, 0x00,
    0x0f, 0xae, 0x3d, 0x00, 0x01, 0x20, 0x00, 0xc7, 0x05, 0x00, 0x50, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x8d, 0x74, 0x26, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00,
    0x17, 0x00, 0x78, 0xf0, 0xff, 0xff,
};

static void test_remote_coherent_tcg(void)
{
    g_autofree char *pool = pool_path("remote-cw.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    uint64_t mine = 0x1122334400000000ULL, theirs = 0xabcdef01;
    int fd;
    Service sv;
    Host h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    /* another host's data in the window, and bytes the store keeps */
    fd = open(pool, O_WRONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, &theirs, 8, META_SIZE + 0x10), ==, 8);
    g_assert_cmpint(pwrite(fd, &mine, 8, META_SIZE), ==, 8);
    close(fd);
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    fw_host_start_code(&h, url, 1, remote_cw_code, sizeof(remote_cw_code),
                       opts, NULL);
    /* not a vCPU: an error, never a wait */
    g_assert_cmphex(mem_rq(&h, 0x10), ==, UINT64_MAX);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_host_wait(&h);

    /* the store's 4 bytes only */
    g_assert_cmphex(pool_rq(pool, 0), ==, 0x1122334455667788ULL);
    g_assert_cmphex(pool_rq(pool, COH_SIZE + 0x100), ==,
                    (theirs << 32) | 0x55667788);
    qtest_quit(h.qts);
    service_stop(&sv);
}

/*
 * Atomics across machines: a remote host's guest runs lock incl on a
 * coherent counter while a local host's guest (the pool file mapped)
 * runs lock incl on it at full speed; every increment counts.  The
 * firmware of test_native_tcg with shorter loops.  The remote host
 * starts first and is still counting when the local one has finished,
 * so the local host's whole run falls inside the remote one's.
 */
static void test_remote_atomics_tcg(void)
{
    g_autofree char *pool = pool_path("remote-atomics.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    g_autofree uint8_t *code_a = g_memdup2(fw_code, sizeof(fw_code));
    g_autofree uint8_t *code_b = g_memdup2(fw_code, sizeof(fw_code));
    const uint32_t na = 2000000, nb = 3000;
    int i;
    Service sv;
    Host a, b;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    g_assert_cmphex(ldl_le_p(fw_code + 0x8d), ==, 10000000);
    stl_le_p(code_a + 0x8d, na);
    stl_le_p(code_b + 0x8d, nb);
    fw_host_start_code(&b, url, 1, code_b, sizeof(fw_code), opts, NULL);
    fw_host_start_code(&a, pool, 0, code_a, sizeof(fw_code), NULL, NULL);

    qtest_qmp_assert_success(b.qts, "{'execute': 'cont'}");
    for (i = 0; i < 3000 && pool_rq(pool, 8) < 10; i++) {
        g_usleep(1000);
    }
    g_assert_cmpuint(pool_rq(pool, 8), >=, 10);
    qtest_qmp_assert_success(a.qts, "{'execute': 'cont'}");
    fw_host_wait(&a);
    /* the local run fell within the remote one */
    g_assert_cmpuint(qtest_readl(b.qts, 0x5000), ==, 0);
    fw_host_wait(&b);

    g_assert_cmpuint(pool_rq(pool, 8), ==, na + nb);
    g_assert_cmpuint(pool_rq(pool, 0), ==, 2);              /* lock xadd */
    g_test_message("remote host: %" PRIu64 " swaps lost to the local host "
                   "and run again, for %u increments",
                   rstat(&b, CXLSHM_STAT_RETRIES), nb);
    qtest_quit(a.qts);
    qtest_quit(b.qts);
    service_stop(&sv);
}

/*
 * A remote host's instruction that loads and stores the coherent window
 * runs again while its replies are due, and must not do its access
 * twice: 2000 addl $1 (not locked) and a movsl, alone on the pool, add
 * exactly 2000 and copy it.  Before the device kept an instruction's
 * accesses (FarRun), each run again fetched anew and stored anew: the
 * first addl never finished and added without end.  Source, after
 * fw_code's paging set-up:
 *
 *     movl $2000, %ecx
 * 2:  addl $1, 0x400010; decl %ecx; jnz 2b
 *     movl $0x400010, %esi; movl $0x400018, %edi; movsl
 *     movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static const uint8_t remote_rmw_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0x80, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xb9, 0xd0, 0x07, 0x00, 0x00, 0x83, 0x05, 0x10,
    0x00, 0x40, 0x00, 0x01, 0x49, 0x75, 0xf6, 0xbe, 0x10, 0x00, 0x40, 0x00,
    0xbf, 0x18, 0x00, 0x40, 0x00, 0xa5, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x90, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0x68, 0xf0,
    0xff, 0xff,
};

static void test_remote_rmw_tcg(void)
{
    g_autofree char *pool = pool_path("remote-rmw.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    Service sv;
    Host h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    fw_host_start_code(&h, url, 1, remote_rmw_code, sizeof(remote_rmw_code),
                       opts, NULL);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    fw_host_wait(&h);
    g_assert_cmpuint(pool_rq(pool, 0x10), ==, 2000);
    g_assert_cmpuint(pool_rq(pool, 0x18), ==, 2000);
    qtest_quit(h.qts);
    service_stop(&sv);
}

/*
 * A remote host's instructions that make several accesses to the
 * coherent window each run again until every reply has come, and each
 * access is done once, from the bytes of that run: cmpsl (two loads of
 * one line), a 16-byte load and store (movdqu: two 8-byte pieces each),
 * pusha with the stack in the window (eight stores, two to each word),
 * lock cmpxchg8b (a swap of a whole word), and the same movdqu store run
 * a second time after the test cleared its bytes in the pool (it stores
 * both halves again).  The device before kept no accesses and never
 * finished the cmpsl; its first design (4a1e2b1, answered by the PC)
 * never finished the cmpsl, the movdqu load or the pusha, and retired
 * the second movdqu store without its upper half (a review's runs).
 * Source,
 * after fw_code's set-up with CR4.OSFXSR also set (orl $0x220):
 *
 *     movl $0x400010, %esi; movl $0x400018, %edi; cmpsl
 *     setz 0x5008
 *     movdqu 0x400010, %xmm0
 *     movl %esp, %ebp; movl $0x400040, %esp
 *     movl $0xa0a0a0a0, %eax; movl $0xc1c1c1c1, %ecx
 *     movl $0xd2d2d2d2, %edx; movl $0xb3b3b3b3, %ebx
 *     pusha
 *     movl %ebp, %esp
 *     xorl %eax, %eax; xorl %edx, %edx; movl $2, %ebx; movl $1, %ecx
 *     lock cmpxchg8b 0x400060
 *     setz 0x5009
 *     movl $2, %ebx
 * 3:  movdqu %xmm0, 0x400050
 *     decl %ebx; jz 4f
 *     movl $2, 0x5000
 * 2:  cmpl $1, 0x5004; jne 2b
 *     jmp 3b
 * 4:  movl $1, 0x5000
 * 1:  hlt; jmp 1b
 */
static const uint8_t remote_shapes_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xe8, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x0d,
    0x20, 0x02, 0x00, 0x00, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00,
    0x00, 0x00, 0x80, 0x0f, 0x22, 0xc0, 0xbe, 0x10, 0x00, 0x40, 0x00, 0xbf,
    0x18, 0x00, 0x40, 0x00, 0xa7, 0x0f, 0x94, 0x05, 0x08, 0x50, 0x00, 0x00,
    0xf3, 0x0f, 0x6f, 0x05, 0x10, 0x00, 0x40, 0x00, 0x89, 0xe5, 0xbc, 0x40,
    0x00, 0x40, 0x00, 0xb8, 0xa0, 0xa0, 0xa0, 0xa0, 0xb9, 0xc1, 0xc1, 0xc1,
    0xc1, 0xba, 0xd2, 0xd2, 0xd2, 0xd2, 0xbb, 0xb3, 0xb3, 0xb3, 0xb3, 0x60,
    0x89, 0xec, 0x31, 0xc0, 0x31, 0xd2, 0xbb, 0x02, 0x00, 0x00, 0x00, 0xb9,
    0x01, 0x00, 0x00, 0x00, 0xf0, 0x0f, 0xc7, 0x0d, 0x60, 0x00, 0x40, 0x00,
    0x0f, 0x94, 0x05, 0x09, 0x50, 0x00, 0x00, 0xbb, 0x02, 0x00, 0x00, 0x00,
    0xf3, 0x0f, 0x7f, 0x05, 0x50, 0x00, 0x40, 0x00, 0x4b, 0x74, 0x15, 0xc7,
    0x05, 0x00, 0x50, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x83, 0x3d, 0x04,
    0x50, 0x00, 0x00, 0x01, 0x75, 0xf7, 0xeb, 0xe0, 0xc7, 0x05, 0x00, 0x50,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0x8d, 0xb4, 0x26,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0xd0, 0xf0, 0xff, 0xff,
};

static void test_remote_shapes_tcg(void)
{
    g_autofree char *pool = pool_path("remote-shapes.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    uint64_t w = 0x0123456789abcdefULL, zero[2] = { 0, 0 };
    int fd, i;
    Service sv;
    Host h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    fd = open(pool, O_WRONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, &w, 8, META_SIZE + 0x10), ==, 8);
    g_assert_cmpint(pwrite(fd, &w, 8, META_SIZE + 0x18), ==, 8);
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    fw_host_start_code(&h, url, 1, remote_shapes_code,
                       sizeof(remote_shapes_code), opts, NULL);
    qtest_qmp_assert_success(h.qts, "{'execute': 'cont'}");
    for (i = 0; i < 3000 && qtest_readl(h.qts, 0x5000) != 2; i++) {
        g_usleep(10000);
    }
    g_assert_cmpuint(qtest_readl(h.qts, 0x5000), ==, 2);

    g_assert_cmpuint(qtest_readb(h.qts, 0x5008), ==, 1);     /* cmpsl */
    g_assert_cmphex(pool_rq(pool, 0x50), ==, w);             /* movdqu */
    g_assert_cmphex(pool_rq(pool, 0x58), ==, w);
    g_assert_cmphex(pool_rq(pool, 0x38), ==, 0xa0a0a0a0c1c1c1c1ULL);
    g_assert_cmphex(pool_rq(pool, 0x30), ==, 0xd2d2d2d2b3b3b3b3ULL);
    g_assert_cmphex(pool_rq(pool, 0x28) >> 32, ==, 0x400040);  /* esp */
    g_assert_cmpuint(qtest_readb(h.qts, 0x5009), ==, 1);     /* cmpxchg8b */
    g_assert_cmphex(pool_rq(pool, 0x60), ==, 0x100000002ULL);

    /* the same store again, after its bytes changed in the pool */
    g_assert_cmpint(pwrite(fd, zero, 16, META_SIZE + 0x50), ==, 16);
    qtest_writel(h.qts, 0x5004, 1);
    fw_host_wait(&h);
    g_assert_cmphex(pool_rq(pool, 0x50), ==, w);
    g_assert_cmphex(pool_rq(pool, 0x58), ==, w);
    close(fd);
    qtest_quit(h.qts);
    service_stop(&sv);
}

/*
 * A remote host's locked instruction whose swap is out runs again before
 * the vCPU takes an interrupt, an NMI included: 2000 lock incl on a
 * coherent counter, NMIs injected all the while (QMP inject-nmi; the
 * handler counts them at 0x5010), add exactly 2000.  On the device of
 * 1c7f4d3 the exclusive step that runs the instruction again checked
 * for interrupts first: an NMI then ran its handler, the instruction
 * ran afresh and swapped again, and the counter passed 2000.  The local
 * APIC enabled with LINT1 an NMI (where inject-nmi arrives), mapped at
 * 0xfee00000.  Source, after fw_code's set-up:
 *
 *     movl $0x7000, %esp
 *     movl $0x1ff, 0xfee000f0; movl $0x400, 0xfee00360
 *     lidtl (idtdesc)
 *     movl $1, 0x5004
 * 2:  cmpl $1, 0x5008; jne 2b
 *     movl $2000, %ecx
 * 3:  lock incl 0x400008; decl %ecx; jnz 3b
 *     movl $1, 0x5000
 * 1:  hlt; jmp 1b
 * nmi: incl 0x5010
 *     iret
 *     (an IDT of three gates, vector 2 the 32-bit interrupt gate of nmi)
 */
static const uint8_t remote_nmi_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xb0, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xbc, 0x00, 0x70, 0x00, 0x00, 0xc7, 0x05, 0xf0,
    0x00, 0xe0, 0xfe, 0xff, 0x01, 0x00, 0x00, 0xc7, 0x05, 0x60, 0x03, 0xe0,
    0xfe, 0x00, 0x04, 0x00, 0x00, 0x0f, 0x01, 0x1d, 0xce, 0xf0, 0xff, 0xff,
    0xc7, 0x05, 0x04, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x83, 0x3d,
    0x08, 0x50, 0x00, 0x00, 0x01, 0x75, 0xf7, 0xb9, 0xd0, 0x07, 0x00, 0x00,
    0xf0, 0xff, 0x05, 0x08, 0x00, 0x40, 0x00, 0x49, 0x75, 0xf6, 0xc7, 0x05,
    0x00, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xf4, 0xeb, 0xfd, 0xff,
    0x05, 0x10, 0x50, 0x00, 0x00, 0xcf, 0x66, 0x90, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0x98, 0xf0,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8f, 0xf0, 0x08, 0x00, 0x00, 0x8e,
    0xff, 0xff, 0x17, 0x00, 0xb6, 0xf0, 0xff, 0xff,
};

/*
 * A remote host (host 1) running @code with the local APIC's page mapped
 * (its firmware passes LINT1 as NMI, where inject-nmi arrives), started
 * and run until the firmware says it is ready at 0x5004
 */
static void remote_nmi_host_start(Host *h, const char *url, const char *opts,
                                  const uint8_t *code, size_t len)
{
    int i;

    fw_host_start_code(h, url, 1, code, len, opts, NULL);
    qtest_writeq(h->qts, 0x3000 + 503 * 8, 0xfee00000 | 0x9b);  /* UC */
    qtest_qmp_assert_success(h->qts, "{'execute': 'cont'}");
    for (i = 0; i < 3000 && qtest_readl(h->qts, 0x5004) != 1; i++) {
        g_usleep(10000);
    }
    g_assert_cmpuint(qtest_readl(h->qts, 0x5004), ==, 1);
}

static void test_remote_nmi_tcg(void)
{
    g_autofree char *pool = pool_path("remote-nmi.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    int i, nmis = 0;
    Service sv;
    Host h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, NULL, &url, &opts);
    remote_nmi_host_start(&h, url, opts, remote_nmi_code,
                          sizeof(remote_nmi_code));
    qtest_writel(h.qts, 0x5008, 1);
    for (i = 0; i < 30000 && qtest_readl(h.qts, 0x5000) != 1; i++) {
        qtest_qmp_assert_success(h.qts, "{'execute': 'inject-nmi'}");
        nmis++;
        g_usleep(500);
    }
    fw_host_wait(&h);
    g_test_message("%d NMIs injected, %u taken, during 2000 remote atomics",
                   nmis, qtest_readl(h.qts, 0x5010));
    g_assert_cmpuint(qtest_readl(h.qts, 0x5010), >, 0);
    g_assert_cmpuint(pool_rq(pool, 8), ==, 2000);
    qtest_quit(h.qts);
    service_stop(&sv);
}

/*
 * A remote host's writeback orphaned by an interrupt still counts what it
 * did: the guest stores 0x11111111 into a non-coherent line, a local
 * host writes 0x33333333 over the same bytes and writes them back
 * through its doorbell (a conflict is the line engine's), the guest's
 * clwb + sfence goes to a stopped service, an NMI is taken meanwhile
 * (the request orphaned), then the service goes on: the writeback lands
 * over the other host's bytes, a conflict, and STAT_CONFLICTS is 1.
 * Before (the orphan's reply discarded uncounted when the sfence ran
 * again) it was 0: the 2+2 trial's litmus fs row on a remote host.
 * Source, after fw_code's set-up and remote_nmi_code's APIC and IDT:
 *
 *     movl $0x11111111, 0x200000
 *     movl $1, 0x5004
 * 2:  cmpl $1, 0x5008; jne 2b
 *     clwb 0x200000
 *     sfence
 *     movl $1, 0x5000
 * 1:  hlt; jmp 1b
 * nmi: incl 0x5010
 *     iret
 */
static const uint8_t remote_orphan_code[] = {
    0xfa, 0x2e, 0x66, 0x0f, 0x01, 0x16, 0xb8, 0xf0, 0x0f, 0x20, 0xc0, 0x66,
    0x83, 0xc8, 0x01, 0x0f, 0x22, 0xc0, 0x66, 0xea, 0x1a, 0xf0, 0xff, 0xff,
    0x08, 0x00, 0x66, 0xb8, 0x10, 0x00, 0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xd0,
    0xb8, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xe0, 0x83,
    0xc8, 0x20, 0x0f, 0x22, 0xe0, 0x0f, 0x20, 0xc0, 0x0d, 0x00, 0x00, 0x00,
    0x80, 0x0f, 0x22, 0xc0, 0xbc, 0x00, 0x70, 0x00, 0x00, 0xc7, 0x05, 0xf0,
    0x00, 0xe0, 0xfe, 0xff, 0x01, 0x00, 0x00, 0xc7, 0x05, 0x60, 0x03, 0xe0,
    0xfe, 0x00, 0x04, 0x00, 0x00, 0x0f, 0x01, 0x1d, 0xd6, 0xf0, 0xff, 0xff,
    0xc7, 0x05, 0x00, 0x00, 0x20, 0x00, 0x11, 0x11, 0x11, 0x11, 0xc7, 0x05,
    0x04, 0x50, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x83, 0x3d, 0x08, 0x50,
    0x00, 0x00, 0x01, 0x75, 0xf7, 0x66, 0x0f, 0xae, 0x35, 0x00, 0x00, 0x20,
    0x00, 0x0f, 0xae, 0xf8, 0xc7, 0x05, 0x00, 0x50, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0xf4, 0xeb, 0xfd, 0xff, 0x05, 0x10, 0x50, 0x00, 0x00, 0xcf,
    0x8d, 0x74, 0x26, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0x00, 0x00, 0x00, 0x9a, 0xcf, 0x00, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x92, 0xcf, 0x00, 0x17, 0x00, 0xa0, 0xf0, 0xff, 0xff, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x95, 0xf0, 0x08, 0x00, 0x00, 0x8e, 0xff, 0xff, 0x17, 0x00,
    0xbe, 0xf0, 0xff, 0xff,
};

static void test_remote_orphan_tcg(void)
{
    g_autofree char *pool = pool_path("remote-orphan.pool");
    g_autofree char *tool = NULL;
    g_autofree char *url = NULL, *opts = NULL;
    int i;
    Service sv;
    Host a, h;

    tool = remote_pool_create(pool);
    if (!tool) {
        return;
    }
    remote_pool_serve(&sv, tool, pool, ",remote-timeout-ms=10000", &url,
                      &opts);
    remote_nmi_host_start(&h, url, opts, remote_orphan_code,
                          sizeof(remote_orphan_code));
    host_start(&a, pool, 0, true);
    mem_wq(&a, COH_SIZE, 0x33333333);
    g_assert_cmpuint(doorbell(&a, OP_WB, COH_SIZE, LINE), ==, 0);

    kill(sv.pid, SIGSTOP);
    qtest_writel(h.qts, 0x5008, 1);
    g_usleep(200 * 1000);
    for (i = 0; i < 100 && qtest_readl(h.qts, 0x5010) == 0; i++) {
        qtest_qmp_assert_success(h.qts, "{'execute': 'inject-nmi'}");
        g_usleep(20 * 1000);
    }
    g_assert_cmpuint(qtest_readl(h.qts, 0x5010), >, 0);
    g_assert_cmpuint(qtest_readl(h.qts, 0x5000), ==, 0);    /* still due */
    kill(sv.pid, SIGCONT);
    fw_host_wait(&h);
    g_assert_cmphex(pool_rq(pool, COH_SIZE) & 0xffffffff, ==, 0x11111111);
    g_assert_cmpuint(rstat(&h, CXLSHM_STAT_CONFLICTS), ==, 1);
    qtest_quit(a.qts);
    qtest_quit(h.qts);
    service_stop(&sv);
}

static char *tmpdir_full;      /* made at start: no allocation on abort */

/*
 * The work directory and its files, the tmpfs a case mounts there
 * included; also run when a failed assertion aborts
 */
static void remove_tmpdir(void *unused)
{
    GDir *dir;
    const char *name;

    umount2(tmpdir_full, MNT_DETACH | UMOUNT_NOFOLLOW);
    dir = g_dir_open(tmpdir, 0, NULL);
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(tmpdir, name, NULL);

        if (unlink(path) < 0) {
            rmdir(path);
        }
    }
    if (dir) {
        g_dir_close(dir);
    }
    rmdir(tmpdir);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = g_dir_make_tmp("cxl-shm-test-XXXXXX", NULL);
    g_assert_nonnull(tmpdir);
    tmpdir_full = g_build_filename(tmpdir, "full", NULL);
    /* a failed assertion aborts: its pools (GiBs) go too */
    qtest_add_abrt_handler(remove_tmpdir, tmpdir);

    qtest_add_func("/cxl-shm/identify", test_identify);
    qtest_add_func("/cxl-shm/slot-power-off", test_slot_power_off);
    qtest_add_func("/cxl-shm/mmio-path", test_mmio_path);
    qtest_add_func("/cxl-shm/hdm-reprogram", test_hdm_reprogram);
    qtest_add_func("/cxl-shm/hdm-reprogram-two", test_hdm_reprogram_two);
    qtest_add_func("/cxl-shm/doorbell", test_doorbell);
    add_staged("/cxl-shm/doorbell-concurrent", NEED_TCG,
               test_doorbell_concurrent);
    add_staged("/cxl-shm/doorbell-two-rings", NEED_TCG,
               test_doorbell_two_rings);
    qtest_add_func("/cxl-shm/refused-ops", test_refused_ops);
    qtest_add_func("/cxl-shm/doorbell-irq", test_doorbell_irq);
    qtest_add_func("/cxl-shm/doorbell-irq-off", test_doorbell_irq_off);
    qtest_add_func("/cxl-shm/two-hosts", test_two_hosts);
    qtest_add_func("/cxl-shm/remote", test_remote);
    qtest_add_func("/cxl-shm/remote-unplug", test_remote_unplug);
    add_staged("/cxl-shm/remote-tcg", NEED_TCG, test_remote_tcg);
    add_staged("/cxl-shm/remote-coherent-tcg", NEED_TCG,
               test_remote_coherent_tcg);
    add_staged("/cxl-shm/remote-atomics-tcg", NEED_TCG,
               test_remote_atomics_tcg);
    add_staged("/cxl-shm/remote-rmw-tcg", NEED_TCG, test_remote_rmw_tcg);
    add_staged("/cxl-shm/remote-shapes-tcg", NEED_TCG,
               test_remote_shapes_tcg);
    add_staged("/cxl-shm/remote-nmi-tcg", NEED_TCG, test_remote_nmi_tcg);
    add_staged("/cxl-shm/remote-orphan-tcg", NEED_TCG,
               test_remote_orphan_tcg);
    qtest_add_func("/cxl-shm/wide-pod", test_wide_pod);
    qtest_add_func("/cxl-shm/foreign-lock-tag", test_foreign_lock_tag);
    qtest_add_func("/cxl-shm/failure-rejoin", test_failure_rejoin);
    qtest_add_func("/cxl-shm/concurrent-join", test_concurrent_join);
    qtest_add_data_func("/cxl-shm/refused-config", NULL, test_refused_config);
    qtest_add_data_func("/cxl-shm/refused-config-root", "root",
                        test_refused_config);
    qtest_add_func("/cxl-shm/memdev-two-hosts", test_memdev_two_hosts);
    qtest_add_func("/cxl-shm/memdev-two-hosts-shm",
                   test_memdev_two_hosts_shm);
    qtest_add_func("/cxl-shm/memdev-prealloc", test_memdev_prealloc);
    qtest_add_func("/cxl-shm/memdev-hugetlbfs", test_memdev_hugetlbfs);
    qtest_add_func("/cxl-shm/memdev-refused", test_memdev_refused);
    qtest_add_func("/cxl-shm/cdat", test_cdat);
    qtest_add_func("/cxl-shm/reset-dvsec", test_reset_dvsec);
    add_staged("/cxl-shm/native-tcg", NEED_TCG, test_native_tcg);
    add_staged("/cxl-shm/atomics-tcg", NEED_TCG, test_atomics_tcg);
    add_staged("/cxl-shm/atomics-refused", NEED_TCG, test_atomics_refused);
    add_staged("/cxl-shm/fidelity-tcg", NEED_TCG, test_fidelity_tcg);
    add_staged("/cxl-shm/immediate-tcg", NEED_TCG, test_immediate_tcg);
    add_staged("/cxl-shm/wbinvd-dropped-pages", NEED_TCG,
               test_wbinvd_dropped_pages);
    add_staged("/cxl-shm/latency-icount", NEED_TCG | NEED_ICOUNT,
               test_latency_icount);
    add_staged("/cxl-shm/record-replay-refused",
               NEED_TCG | NEED_ICOUNT | NEED_TIMED,
               test_record_replay_refused);
    qtest_add_func("/cxl-shm/rejoin-rollback", test_rejoin_rollback);
    qtest_add_func("/cxl-shm/reset", test_reset);
    add_staged("/cxl-shm/reset-inside-doorbell", NEED_TCG,
               test_reset_inside_doorbell);
    add_staged("/cxl-shm/reset-from-vcpu", NEED_TCG, test_reset_from_vcpu);
    qtest_add_func("/cxl-shm/mailbox", test_mailbox);
    qtest_add_func("/cxl-shm/mailbox-allowlist", test_mailbox_allowlist);
    qtest_add_func("/cxl-shm/conflict", test_conflict);
    qtest_add_func("/cxl-shm/eviction", test_eviction);
    qtest_add_func("/cxl-shm/eviction-chunks", test_eviction_chunks);
    qtest_add_func("/cxl-shm/migration-refused", test_migration_refused);
    qtest_add_func("/cxl-shm/refused-start-race", test_refused_start_race);
    qtest_add_func("/cxl-shm/refused-start-flock", test_refused_start_flock);
    qtest_add_func("/cxl-shm/table-read-locked", test_table_read_locked);
    qtest_add_func("/cxl-shm/stopped-peer-line-lock",
                   test_stopped_peer_line_lock);
    qtest_add_func("/cxl-shm/stopped-peer-file-lock",
                   test_stopped_peer_file_lock);
    add_staged("/cxl-shm/stopped-peer-fence", NEED_TCG,
               test_stopped_peer_fence);
    add_staged("/cxl-shm/stopped-peer-vcpu", NEED_TCG, test_stopped_peer_vcpu);
    qtest_add_func("/cxl-shm/pool-replaced", test_pool_replaced);
    add_staged("/cxl-shm/stopped-peer-vcpu-timed", NEED_TCG | NEED_TIMED,
               test_stopped_peer_vcpu_timed);
    qtest_add_func("/cxl-shm/stopped-peer-doorbell",
                   test_stopped_peer_doorbell);
    add_staged("/cxl-shm/stopped-peer-fence-timed", NEED_TCG | NEED_TIMED,
               test_stopped_peer_fence_timed);
    add_staged("/cxl-shm/stopped-peer-reset-timed", NEED_TIMED,
               test_stopped_peer_reset_timed);
    qtest_add_func("/cxl-shm/stopped-peer-reset-load",
                   test_stopped_peer_reset_load);
    add_staged("/cxl-shm/timed-split-rmw", NEED_TCG | NEED_TIMED,
               test_timed_split_rmw);
    add_staged("/cxl-shm/timed-split-timeout", NEED_TCG | NEED_TIMED,
               test_timed_split_timeout);
    add_staged("/cxl-shm/wbinvd-cursor", NEED_TCG, test_wbinvd_cursor);
    qtest_add_func("/cxl-shm/doorbell-full", test_doorbell_full);
    qtest_add_func("/cxl-shm/doorbell-reset-drops",
                   test_doorbell_reset_drops);
    qtest_add_data_func("/cxl-shm/hostile-registers/direct", "direct",
                        test_hostile_registers);
    add_staged_data("/cxl-shm/hostile-registers/timed", NEED_TIMED, "timed",
                    test_hostile_registers);
    add_staged("/cxl-shm/timed-noncoherent", NEED_TIMED,
               test_timed_noncoherent);
    add_staged("/cxl-shm/timed-coherent", NEED_TIMED, test_timed_coherent);
    add_staged("/cxl-shm/timed-filter-sets", NEED_TIMED,
               test_timed_filter_sets);
    add_staged("/cxl-shm/timed-filter-mismatch", NEED_TIMED,
               test_timed_filter_mismatch);
    add_staged("/cxl-shm/timed-atomics-tcg", NEED_TCG | NEED_TIMED,
               test_timed_atomics_tcg);
    add_staged("/cxl-shm/timed-atomic-boundary", NEED_TCG | NEED_TIMED,
               test_timed_atomic_boundary);
    add_staged("/cxl-shm/timed-latency-icount",
               NEED_TCG | NEED_ICOUNT | NEED_TIMED,
               test_timed_latency_icount);
    qtest_add_func("/cxl-shm/test-hook-refused", test_test_hook_refused);
    qtest_add_func("/cxl-shm/unplug-memdev", test_unplug_memdev);
    add_staged("/cxl-shm/unplug-memdev-timed", NEED_TIMED,
               test_unplug_memdev_timed);
    qtest_add_func("/cxl-shm/route-other-hb", test_route_other_hb);
    qtest_add_func("/cxl-shm/route-hb-decoder", test_route_hb_decoder);
    qtest_add_func("/cxl-shm/route-switch", test_route_switch);
    if (g_test_perf()) {
        add_staged("/cxl-shm/bench", NEED_TCG, test_bench);
        add_staged("/cxl-shm/timed-bench", NEED_TCG | NEED_ICOUNT | NEED_TIMED,
                   test_timed_bench);
    }

    ret = g_test_run();
    qtest_remove_abrt_handler(tmpdir);
    remove_tmpdir(NULL);
    g_free(tmpdir_full);
    g_free(tmpdir);
    return ret;
}

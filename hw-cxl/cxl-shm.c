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
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/timer.h"
#include "qemu/main-loop.h"
#include "qapi/error.h"
#include "qom/object_interfaces.h"
#include "hw/qdev-properties.h"
#include "hw/pci/pci.h"
#include "hw/cxl/cxl.h"
#include "hw/cxl/cxl_host.h"
#include "hw/core/cpu.h"
#include "exec/translation-block.h"
#include "exec/memory.h"
#include "exec/address-spaces.h"
#include "system/cache-maint.h"
#include "system/system.h"
#include "system/tcg.h"
#include "system/kvm.h"
#include "cxl-shm.h"
#include "trace.h"

#define CXLSHM_BAR              5
#define CXLSHM_REGS_SIZE        0x1000
#define CXLSHM_REG_MAGIC        0x504c5843  /* "CXLP" */
#define CXLSHM_REG_VERSION      1

#define CXLSHM_CAP_NATIVE       (1u << 0)
#define CXLSHM_CAP_ATOMICS      (1u << 1)
#define CXLSHM_CAP_DIRECT       (1u << 2)

enum {
    CXLSHM_OP_WRITEBACK = 1,
    CXLSHM_OP_INVALIDATE = 2,
    CXLSHM_OP_FLUSH = 3,
};

enum {
    CXLSHM_DB_OK = 0,
    CXLSHM_DB_RANGE = 1,
    CXLSHM_DB_UNALIGNED = 2,
    CXLSHM_DB_ZERO = 3,
    CXLSHM_DB_BADOP = 4,
};

#define CXLSHM_PAGE             4096
#define CXLSHM_SIZE_MAX         (1 * TiB)
#define CXLSHM_LATENCY_MAX      65535
#define CXLSHM_BANDWIDTH_MAX    65535

static const char *const op_names[] = {
    [CXLSHM_OP_WRITEBACK] = "writeback",
    [CXLSHM_OP_INVALIDATE] = "invalidate",
    [CXLSHM_OP_FLUSH] = "flush",
};

bool cxl_shm_direct_active(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->direct[i].mapped) {
            return true;
        }
    }
    return false;
}

static bool cxl_shm_native_active(CXLShmState *s)
{
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        if (s->native_registered[i]) {
            return true;
        }
    }
    return false;
}

uint32_t cxl_shm_caps(CXLShmState *s)
{
    uint32_t caps = 0;
    bool direct = cxl_shm_direct_active(s);

    if (direct && cxl_shm_native_active(s)) {
        caps |= CXLSHM_CAP_NATIVE;
    }
    if (direct && s->atomics_ok) {
        caps |= CXLSHM_CAP_ATOMICS;
    }
    if (direct) {
        caps |= CXLSHM_CAP_DIRECT;
    }
    return caps;
}

/* Charge the configured latency: a busy-wait on the host clock */
static void cxl_shm_charge(CXLShmState *s, uint64_t lines)
{
    int64_t end;

    if (!s->latency_ns || !lines) {
        return;
    }
    end = get_clock() + (int64_t)MIN(lines * s->latency_ns, INT64_MAX / 2);
    while (get_clock() < end) {
        /* spin */
    }
}

/*
 * Coherence work on the non-coherent lines of [offset, offset + len), which
 * the caller has validated.  Writeback copies exactly the lines whose image
 * differs from the twin, whole; invalidate writes such lines back first
 * and reloads image and twin from the pool.  Returns lines touched.
 */
static uint64_t cxl_shm_lines(CXLShmState *s, int op, uint64_t offset,
                              uint64_t len, uint64_t *wb, uint64_t *inv)
{
    uint64_t start = MAX(offset, s->coherent_size);
    uint64_t end = offset + len;
    uint64_t l;
    uint8_t line[CXLPOOL_LINE];

    *wb = 0;
    *inv = 0;
    if (start >= end) {
        return 0;
    }
    for (l = start; l < end; l += CXLPOOL_LINE) {
        uint64_t i = l - s->coherent_size;
        uint8_t *img = s->image + i;
        uint8_t *twin = s->twin + i;
        uint8_t *pool = s->pool + l;

        /* every op writes a dirty line back first */
        if (memcmp(img, twin, CXLPOOL_LINE) != 0) {
            memcpy(line, img, CXLPOOL_LINE);
            memcpy(pool, line, CXLPOOL_LINE);
            memcpy(twin, line, CXLPOOL_LINE);
            (*wb)++;
        }
        if (op != CXLSHM_OP_WRITEBACK) {
            /* reload; equal lines are left alone so pages stay unpopulated */
            memcpy(line, pool, CXLPOOL_LINE);
            if (memcmp(img, line, CXLPOOL_LINE) != 0) {
                memcpy(img, line, CXLPOOL_LINE);
            }
            if (memcmp(twin, line, CXLPOOL_LINE) != 0) {
                memcpy(twin, line, CXLPOOL_LINE);
            }
            (*inv)++;
        }
    }
    return (end - start) / CXLPOOL_LINE;
}

static void cxl_shm_doorbell(CXLShmState *s, uint32_t op)
{
    uint64_t off = s->db_offset, len = s->db_len;
    uint64_t wb = 0, inv = 0, touched = 0;
    uint32_t st;

    if (op < CXLSHM_OP_WRITEBACK || op > CXLSHM_OP_FLUSH) {
        st = CXLSHM_DB_BADOP;
    } else if (len == 0) {
        st = CXLSHM_DB_ZERO;
    } else if ((off | len) & (CXLPOOL_LINE - 1)) {
        st = CXLSHM_DB_UNALIGNED;
    } else if (off + len < off || off + len > s->size) {
        st = CXLSHM_DB_RANGE;
    } else {
        st = CXLSHM_DB_OK;
    }

    s->db_status = st;
    if (st != CXLSHM_DB_OK) {
        s->db_lines = 0;
        s->stats[CXLSHM_STAT_ERRORS]++;
        trace_cxl_shm_op(s->host_id, "refused", off, len, 0, st);
        cxl_shm_pool_sync_stats(s);
        return;
    }

    touched = cxl_shm_lines(s, op, off, len, &wb, &inv);
    s->db_lines = op == CXLSHM_OP_WRITEBACK ? wb : inv;
    s->stats[CXLSHM_STAT_WB_OPS + op - 1]++;
    s->stats[CXLSHM_STAT_WB_LINES] += wb;
    s->stats[CXLSHM_STAT_INV_LINES] += inv;
    cxl_shm_pool_sync_stats(s);
    trace_cxl_shm_op(s->host_id, op_names[op], off, len, s->db_lines, st);
    cxl_shm_charge(s, touched);
}

/* Guest clflush/clflushopt/clwb on a mapped HPA (cache-maint hook) */
static void cxl_shm_native(void *opaque, hwaddr hpa, CacheMaintOp cop)
{
    CXLShmState *s = opaque;
    uint64_t wb, inv, touched, dpa;
    int op = cop == CACHE_MAINT_CLWB ? CXLSHM_OP_WRITEBACK : CXLSHM_OP_FLUSH;
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        CXLShmDirect *d = &s->direct[i];

        if (!d->mapped || hpa < d->hpa || hpa - d->hpa >= d->size) {
            continue;
        }
        dpa = QEMU_ALIGN_DOWN(d->dpa + (hpa - d->hpa), CXLPOOL_LINE);
        touched = cxl_shm_lines(s, op, dpa, CXLPOOL_LINE, &wb, &inv);
        s->stats[CXLSHM_STAT_NATIVE_OPS]++;
        s->stats[CXLSHM_STAT_WB_LINES] += wb;
        s->stats[CXLSHM_STAT_INV_LINES] += inv;
        cxl_shm_pool_sync_stats(s);
        trace_cxl_shm_native_op(s->host_id, op_names[op], hpa, dpa,
                                op == CXLSHM_OP_WRITEBACK ? wb : inv);
        cxl_shm_charge(s, touched);
        return;
    }
}

/* BAR5 register block */

static uint32_t cxl_shm_read32(CXLShmState *s, hwaddr addr)
{
    uint64_t v = 0;
    bool hi = addr & 4;

    if (addr >= 0x200 && addr < 0x800) {
        cxl_shm_pool_refresh_hosts(s);
    }
    switch (addr & ~7ULL) {
    case 0x000:
        return hi ? CXLSHM_REG_VERSION : CXLSHM_REG_MAGIC;
    case 0x008:
        return hi ? s->max_hosts : s->host_id;
    case 0x010:
        v = s->size;
        break;
    case 0x018:
        v = s->coherent_size;
        break;
    case 0x020:
        return hi ? 0 /* direct */ : CXLPOOL_LINE;
    case 0x028:
        return hi ? cxl_shm_caps(s) : s->latency_ns;
    case 0x100:
        v = s->db_offset;
        break;
    case 0x108:
        v = s->db_len;
        break;
    case 0x110:
        return hi ? s->db_status : 0;
    case 0x118:
        v = s->db_lines;
        break;
    case 0x200: {
        uint32_t i;

        for (i = 0; i < s->max_hosts; i++) {
            if (qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE) {
                v |= 1ULL << i;
            }
        }
        break;
    }
    default:
        if (addr >= 0x400 && addr < 0x400 + 16 * CXLPOOL_MAX_HOSTS) {
            uint32_t i = (addr - 0x400) / 16;

            if (i >= s->max_hosts) {
                return 0;
            }
            if ((addr & 0xf) < 8) {
                return hi ? 0 : qatomic_read(&s->hosts[i].state);
            }
            v = qatomic_read(&s->hosts[i].generation);
            break;
        }
        if (addr >= 0x800 && addr < 0x800 + 8 * CXLSHM_STAT_NR) {
            v = s->stats[(addr - 0x800) / 8];
            break;
        }
        return 0;
    }
    return hi ? v >> 32 : (uint32_t)v;
}

static void cxl_shm_write32(CXLShmState *s, hwaddr addr, uint32_t val)
{
    switch (addr) {
    case 0x100:
        s->db_offset = deposit64(s->db_offset, 0, 32, val);
        break;
    case 0x104:
        s->db_offset = deposit64(s->db_offset, 32, 32, val);
        break;
    case 0x108:
        s->db_len = deposit64(s->db_len, 0, 32, val);
        break;
    case 0x10c:
        s->db_len = deposit64(s->db_len, 32, 32, val);
        break;
    case 0x110:
        cxl_shm_doorbell(s, val);
        break;
    default:
        break;
    }
}

static uint64_t cxl_shm_reg_read(void *opaque, hwaddr addr, unsigned size)
{
    CXLShmState *s = opaque;
    uint64_t v;

    v = cxl_shm_read32(s, addr);
    if (size == 8) {
        v |= (uint64_t)cxl_shm_read32(s, addr + 4) << 32;
    }
    trace_cxl_shm_reg_read(addr, v, size);
    return v;
}

static void cxl_shm_reg_write(void *opaque, hwaddr addr, uint64_t val,
                              unsigned size)
{
    CXLShmState *s = opaque;

    trace_cxl_shm_reg_write(addr, val, size);
    cxl_shm_write32(s, addr, val);
    if (size == 8) {
        cxl_shm_write32(s, addr + 4, val >> 32);
    }
}

static const MemoryRegionOps cxl_shm_reg_ops = {
    .read = cxl_shm_reg_read,
    .write = cxl_shm_reg_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};

/* Direct mode: map the pool (with the image over the non-coherent area) */

static void cxl_shm_unmap(CXLShmState *s, int which)
{
    CXLShmDirect *d = &s->direct[which];

    if (s->native_registered[which]) {
        cache_maint_unregister(d->hpa, cxl_shm_native, s);
        s->native_registered[which] = false;
    }
    if (!d->mapped) {
        return;
    }
    memory_region_del_subregion(d->window, &d->alias);
    object_unparent(OBJECT(&d->alias));
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

    if (iw != 0) {
        trace_cxl_shm_direct_refused(s->host_id, which, "interleaved");
        return;
    }
    if (!size || dpa >= s->size) {
        trace_cxl_shm_direct_refused(s->host_id, which, "no device memory");
        return;
    }
    map_size = MIN(size, s->size - dpa);

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

    memory_region_init_alias(&d->alias, OBJECT(s), "cxl-shm-direct",
                             s->pool_mr, dpa, map_size);
    d->window = sec.mr;
    d->hpa = base;
    d->dpa = dpa;
    d->size = map_size;
    memory_region_add_subregion_overlap(sec.mr, sec.offset_within_region,
                                        &d->alias, 1);
    memory_region_unref(sec.mr);
    d->mapped = true;
    trace_cxl_shm_direct_map(s->host_id, which, base, dpa, map_size);

    if (tcg_enabled()) {
        cache_maint_register(base, map_size, cxl_shm_native, s);
        s->native_registered[which] = true;
    }
}

static void cxl_shm_hdm_changed(CXLType3Dev *ct3d, int which, bool committed)
{
    CXLShmState *s = CXL_SHM(ct3d);

    if (which < 0 || which >= CXLSHM_MAX_DECODERS) {
        return;
    }
    cxl_shm_unmap(s, which);
    if (committed) {
        cxl_shm_map(s, which);
    }
}

/* CDAT: the pool is shareable, only the coherent window HW coherent */

static int cxl_shm_cdat_range(CXLShmState *s, CDATSubHeader **t, int handle,
                              uint64_t base, uint64_t len, bool coherent)
{
    static const struct {
        uint8_t type;
        bool latency;
    } lb[] = {
        { HMAT_LB_DATA_READ_LATENCY, true },
        { HMAT_LB_DATA_WRITE_LATENCY, true },
        { HMAT_LB_DATA_READ_BANDWIDTH, false },
        { HMAT_LB_DATA_WRITE_BANDWIDTH, false },
    };
    CDATDsmas *dsmas = g_new0(CDATDsmas, 1);
    CDATDsemts *dsemts = g_new0(CDATDsemts, 1);
    int n = 0, i;

    *dsmas = (CDATDsmas) {
        .header = { .type = CDAT_TYPE_DSMAS, .length = sizeof(*dsmas) },
        .DSMADhandle = handle,
        .flags = CDAT_DSMAS_FLAG_SHAREABLE |
                 (coherent ? CDAT_DSMAS_FLAG_HW_COHERENT : 0),
        .DPA_base = base,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsmas;
    for (i = 0; i < ARRAY_SIZE(lb); i++) {
        CDATDslbis *d = g_new0(CDATDslbis, 1);

        *d = (CDATDslbis) {
            .header = { .type = CDAT_TYPE_DSLBIS, .length = sizeof(*d) },
            .handle = handle,
            .flags = HMAT_LB_MEM_MEMORY,
            .data_type = lb[i].type,
            /* latency in ns (base unit ps), bandwidth in MB/s */
            .entry_base_unit = lb[i].latency ? 1000 : 1,
            .entry[0] = lb[i].latency ? s->latency_ns : s->bandwidth_mbs,
        };
        t[n++] = (CDATSubHeader *)d;
    }
    *dsemts = (CDATDsemts) {
        .header = { .type = CDAT_TYPE_DSEMTS, .length = sizeof(*dsemts) },
        .DSMAS_handle = handle,
        .EFI_memory_type_attr = 1, /* EFI_MEMORY_SP */
        .DPA_offset = 0,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsemts;
    return n;
}

static int cxl_shm_build_cdat(CDATSubHeader ***cdat_table, void *priv)
{
    CXLShmState *s = priv;
    CDATSubHeader **t = g_new0(CDATSubHeader *, 12);
    int n = 0, handle = 0;

    if (s->coherent_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, 0, s->coherent_size,
                                true);
    }
    if (s->nc_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, s->coherent_size,
                                s->nc_size, false);
    }
    *cdat_table = t;
    return n;
}

static void cxl_shm_free_cdat(CDATSubHeader **cdat_table, int num, void *priv)
{
    int i;

    for (i = 0; i < num; i++) {
        g_free(cdat_table[i]);
    }
    g_free(cdat_table);
}

/* Realize */

static bool cxl_shm_check_props(CXLShmState *s, Error **errp)
{
    CXLType3Dev *ct3d = &s->parent_obj;

    if (!s->pool_path || !*s->pool_path) {
        error_setg(errp, "cxl-shm: property 'pool' is required (the path of "
                   "the pool file)");
        return false;
    }
    if (ct3d->hostmem || ct3d->hostvmem || ct3d->hostpmem ||
        ct3d->dc.num_regions || ct3d->lsa) {
        error_setg(errp, "cxl-shm: the device takes its memory from 'pool'; "
                   "'memdev', 'volatile-memdev', 'persistent-memdev', 'lsa' "
                   "and 'num-dc-regions' must not be set");
        return false;
    }
    if (!s->mode || !strcmp(s->mode, "direct")) {
        /* the default */
    } else if (!strcmp(s->mode, "timed")) {
        error_setg(errp, "cxl-shm: mode 'timed' is not implemented yet "
                   "(allowed: direct)");
        return false;
    } else {
        error_setg(errp, "cxl-shm: property 'mode' is '%s' (allowed: direct)",
                   s->mode);
        return false;
    }
    if (!s->size || s->size % (256 * MiB) || s->size > CXLSHM_SIZE_MAX) {
        error_setg(errp, "cxl-shm: property 'size' is %" PRIu64 " (allowed: "
                   "a multiple of 256 MiB in [256 MiB, 1 TiB])", s->size);
        return false;
    }
    if (s->coherent_size % (2 * MiB) || s->coherent_size > s->size) {
        error_setg(errp, "cxl-shm: property 'coherent-size' is %" PRIu64
                   " (allowed: a multiple of 2 MiB in [0, size=%" PRIu64 "])",
                   s->coherent_size, s->size);
        return false;
    }
    if (s->max_hosts < 1 || s->max_hosts > CXLPOOL_MAX_HOSTS) {
        error_setg(errp, "cxl-shm: property 'max-hosts' is %u (allowed: "
                   "[1, %d])", s->max_hosts, CXLPOOL_MAX_HOSTS);
        return false;
    }
    if (s->host_id >= s->max_hosts) {
        error_setg(errp, "cxl-shm: property 'host-id' is %u (allowed: "
                   "[0, max-hosts-1=%u])", s->host_id, s->max_hosts - 1);
        return false;
    }
    if (s->latency_ns > CXLSHM_LATENCY_MAX) {
        error_setg(errp, "cxl-shm: property 'latency-ns' is %u (allowed: "
                   "[0, %d])", s->latency_ns, CXLSHM_LATENCY_MAX);
        return false;
    }
    if (s->bandwidth_mbs < 1 || s->bandwidth_mbs > CXLSHM_BANDWIDTH_MAX) {
        error_setg(errp, "cxl-shm: property 'bandwidth-mbs' is %u (allowed: "
                   "[1, %d])", s->bandwidth_mbs, CXLSHM_BANDWIDTH_MAX);
        return false;
    }
    if (s->pool_mode > 0777 || (s->pool_mode & 0600) != 0600) {
        error_setg(errp, "cxl-shm: property 'pool-mode' is 0%o (allowed: a "
                   "file mode in [0600, 0777] with owner read and write)",
                   s->pool_mode);
        return false;
    }
    return true;
}

static bool cxl_shm_make_backend(CXLShmState *s, Error **errp)
{
    static int count;
    g_autofree char *name = g_strdup_printf("cxl-shm-pool%d", count++);
    Object *o = object_new(TYPE_MEMORY_BACKEND_FILE);

    if (!object_property_set_str(o, "mem-path", s->pool_path, errp) ||
        !object_property_set_uint(o, "size", s->size, errp) ||
        !object_property_set_uint(o, "offset", CXLPOOL_META_SIZE, errp) ||
        !object_property_set_bool(o, "share", true, errp)) {
        object_unref(o);
        return false;
    }
    object_property_add_child(OBJECT(s), name, o);
    object_unref(o);
    if (!user_creatable_complete(USER_CREATABLE(o), errp)) {
        object_unparent(o);
        return false;
    }
    s->backend = MEMORY_BACKEND(o);
    s->pool_mr = host_memory_backend_get_memory(s->backend);
    s->pool = memory_region_get_ram_ptr(s->pool_mr);
    return true;
}

static void cxl_shm_drop_backend(CXLShmState *s)
{
    if (s->backend) {
        object_unparent(OBJECT(s->backend));
        s->backend = NULL;
        s->pool_mr = NULL;
        s->pool = NULL;
    }
}

static bool cxl_shm_make_image(CXLShmState *s, Error **errp)
{
    uint64_t off;
    void *twin;

    s->nc_size = s->size - s->coherent_size;
    if (!s->nc_size) {
        return true;
    }
    if (!memory_region_init_ram(&s->image_mr, OBJECT(s), "cxl-shm-image",
                                s->nc_size, errp)) {
        return false;
    }
    twin = mmap(NULL, s->nc_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (twin == MAP_FAILED) {
        error_setg_errno(errp, errno, "cxl-shm: cannot allocate the twin of "
                         "the non-coherent area (%" PRIu64 " bytes)",
                         s->nc_size);
        object_unparent(OBJECT(&s->image_mr));
        return false;
    }
    s->twin = twin;
    s->image = memory_region_get_ram_ptr(&s->image_mr);
    /*
     * The host starts with a clean copy of the pool.  Image and twin are
     * fresh zero pages: copy only non-zero pages of the file's data
     * extents, so that a host uses memory only for the parts of the area
     * that hold data or that it touches.
     */
    off = 0;
    while (off < s->nc_size) {
        off_t base = CXLPOOL_META_SIZE + s->coherent_size;
        off_t data = lseek(s->fd, base + off, SEEK_DATA);
        off_t hole;

        if (data < 0) {
            break;              /* only holes (zeros) left */
        }
        hole = lseek(s->fd, data, SEEK_HOLE);
        if (hole < 0) {
            hole = base + s->nc_size;
        }
        off = QEMU_ALIGN_DOWN(data - base, CXLSHM_PAGE);
        for (; off < MIN(hole - base, s->nc_size); off += CXLSHM_PAGE) {
            const uint8_t *src = s->pool + s->coherent_size + off;

            if (!buffer_is_zero(src, CXLSHM_PAGE)) {
                memcpy(s->image + off, src, CXLSHM_PAGE);
                memcpy(s->twin + off, src, CXLSHM_PAGE);
            }
        }
    }
    /* loads and stores of the non-coherent area hit the image */
    memory_region_add_subregion_overlap(s->pool_mr, s->coherent_size,
                                        &s->image_mr, 1);
    return true;
}

static void cxl_shm_drop_image(CXLShmState *s)
{
    if (!s->nc_size) {
        return;
    }
    if (s->image) {
        memory_region_del_subregion(s->pool_mr, &s->image_mr);
        object_unparent(OBJECT(&s->image_mr));
        s->image = NULL;
    }
    if (s->twin) {
        munmap(s->twin, s->nc_size);
        s->twin = NULL;
    }
}

/*
 * Cross-host atomics in the coherent window need host atomic instructions
 * on the shared pages.  KVM has them; TCG emits them only with CF_PARALLEL,
 * which QEMU sets only for MTTCG with maxcpus > 1: force it for every vCPU.
 */
static void cxl_shm_setup_atomics(CXLShmState *s)
{
    CPUState *cpu;

    if (kvm_enabled()) {
        s->atomics_ok = true;
        return;
    }
    if (!tcg_enabled()) {
        s->atomics_ok = false;
        return;
    }
    CPU_FOREACH(cpu) {
        if (!tcg_cflags_has(cpu, CF_PARALLEL)) {
            tcg_cflags_set(cpu, CF_PARALLEL);
        }
    }
    s->atomics_ok = true;
}

static void cxl_shm_exit_notify(Notifier *n, void *data)
{
    CXLShmState *s = container_of(n, CXLShmState, exit_notifier);

    cxl_shm_pool_leave(s);
}

static void cxl_shm_realize(PCIDevice *pci_dev, Error **errp)
{
    ERRP_GUARD();
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    CXLType3Dev *ct3d = &s->parent_obj;
    CXLComponentState *cstate = &ct3d->cxl_cstate;
    CDATObject *cdat = &cstate->cdat;

    s->fd = -1;
    if (!cxl_shm_check_props(s, errp)) {
        return;
    }
    if (!cxl_shm_pool_join(s, errp)) {
        return;
    }
    if (!cxl_shm_make_backend(s, errp)) {
        goto fail_leave;
    }
    if (!cxl_shm_make_image(s, errp)) {
        goto fail_backend;
    }

    ct3d->hostvmem = s->backend;
    sc->parent_realize(pci_dev, errp);
    if (*errp) {
        ct3d->hostvmem = NULL;
        goto fail_image;
    }

    /* Replace the parent's CDAT by ours (two DSMAS ranges) */
    cxl_doe_cdat_release(cstate);
    cdat->entry = NULL;
    cdat->built_buf = NULL;
    cdat->built_buf_len = 0;
    cdat->buf = NULL;
    cdat->build_cdat_table = cxl_shm_build_cdat;
    cdat->free_cdat_table = cxl_shm_free_cdat;
    cdat->private = s;
    if (!cxl_doe_cdat_init(cstate, errp)) {
        goto fail_parent;
    }

    memory_region_init_io(&s->regs, OBJECT(s), &cxl_shm_reg_ops, s,
                          "cxl-shm-regs", CXLSHM_REGS_SIZE);
    pci_register_bar(pci_dev, CXLSHM_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);

    cxl_shm_setup_atomics(s);
    s->exit_notifier.notify = cxl_shm_exit_notify;
    qemu_add_exit_notifier(&s->exit_notifier);
    return;

fail_parent:
    sc->parent_exit(pci_dev);
    ct3d->hostvmem = NULL;
fail_image:
    cxl_shm_drop_image(s);
fail_backend:
    cxl_shm_drop_backend(s);
fail_leave:
    cxl_shm_pool_leave(s);
}

static void cxl_shm_exit(PCIDevice *pci_dev)
{
    CXLShmState *s = CXL_SHM(pci_dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    int i;

    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        cxl_shm_unmap(s, i);
    }
    qemu_remove_exit_notifier(&s->exit_notifier);
    sc->parent_exit(pci_dev);
    s->parent_obj.hostvmem = NULL;
    cxl_shm_drop_image(s);
    cxl_shm_drop_backend(s);
    cxl_shm_pool_leave(s);
}

static void cxl_shm_reset(DeviceState *dev)
{
    CXLShmState *s = CXL_SHM(dev);
    CXLShmClass *sc = CXL_SHM_GET_CLASS(s);
    int i;

    sc->parent_reset(dev);
    /* the parent clears the decoders without an uncommit */
    for (i = 0; i < CXLSHM_MAX_DECODERS; i++) {
        cxl_shm_unmap(s, i);
    }
    s->db_offset = 0;
    s->db_len = 0;
    s->db_lines = 0;
    s->db_status = 0;
}

static const Property cxl_shm_props[] = {
    DEFINE_PROP_STRING("pool", CXLShmState, pool_path),
    DEFINE_PROP_STRING("mode", CXLShmState, mode),
    DEFINE_PROP_SIZE("size", CXLShmState, size, 0),
    DEFINE_PROP_SIZE("coherent-size", CXLShmState, coherent_size, 0),
    DEFINE_PROP_UINT32("host-id", CXLShmState, host_id, 0),
    DEFINE_PROP_UINT32("max-hosts", CXLShmState, max_hosts, 2),
    DEFINE_PROP_UINT32("latency-ns", CXLShmState, latency_ns, 0),
    DEFINE_PROP_UINT32("bandwidth-mbs", CXLShmState, bandwidth_mbs, 16000),
    DEFINE_PROP_UINT32("pool-mode", CXLShmState, pool_mode, 0600),
};

static void cxl_shm_class_init(ObjectClass *oc, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(oc);
    PCIDeviceClass *pc = PCI_DEVICE_CLASS(oc);
    CXLType3Class *cvc = CXL_TYPE3_CLASS(oc);
    CXLShmClass *sc = CXL_SHM_CLASS(oc);

    sc->parent_realize = pc->realize;
    sc->parent_exit = pc->exit;
    sc->parent_reset = dc->legacy_reset;
    pc->realize = cxl_shm_realize;
    pc->exit = cxl_shm_exit;
    device_class_set_legacy_reset(dc, cxl_shm_reset);
    cvc->hdm_decoder_changed = cxl_shm_hdm_changed;
    dc->desc = "CXL 3.0 multi-host shared memory pod device (cxlpod)";
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

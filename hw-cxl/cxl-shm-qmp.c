/*
 * cxl-shm: QMP command query-cxl-shm
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-cxl.h"
#include "hw/qdev-core.h"
#include "cxl-shm.h"

static CxlShmStats *cxl_shm_stats(const uint64_t *v, const uint64_t *x)
{
    CxlShmStats *st = g_new0(CxlShmStats, 1);

    st->writeback_ops = qatomic_read(&v[CXLSHM_STAT_WB_OPS]);
    st->invalidate_ops = qatomic_read(&v[CXLSHM_STAT_INV_OPS]);
    st->flush_ops = qatomic_read(&v[CXLSHM_STAT_FLUSH_OPS]);
    st->native_ops = qatomic_read(&v[CXLSHM_STAT_NATIVE_OPS]);
    st->lines_written_back = qatomic_read(&v[CXLSHM_STAT_WB_LINES]);
    st->lines_invalidated = qatomic_read(&v[CXLSHM_STAT_INV_LINES]);
    st->bytes_written_back = st->lines_written_back * CXLPOOL_LINE;
    st->bytes_invalidated = st->lines_invalidated * CXLPOOL_LINE;
    st->errors = qatomic_read(&v[CXLSHM_STAT_ERRORS]);
    st->conflicts = qatomic_read(&v[CXLSHM_STAT_CONFLICTS]);
    st->lines_evicted = qatomic_read(&v[CXLSHM_STAT_EVICTED]);
    st->nt_lines = qatomic_read(&v[CXLSHM_STAT_NT_LINES]);
    st->deferred = qatomic_read(&v[CXLSHM_STAT_DEFERRED]);
    st->resets = qatomic_read(&v[CXLSHM_STAT_RESETS]);
#define XSTAT(i) qatomic_read(&x[(i) - (x == v ? 0 : CXLSHM_STAT_TABLE_NR)])
    st->hits = XSTAT(CXLSHM_STAT_HITS);
    st->misses = XSTAT(CXLSHM_STAT_MISSES);
    st->cache_evictions = XSTAT(CXLSHM_STAT_CACHE_EVICTIONS);
    st->back_invalidates = XSTAT(CXLSHM_STAT_BACK_INVAL);
    st->snoops = XSTAT(CXLSHM_STAT_SNOOPS);
    st->snoop_filter_evictions = XSTAT(CXLSHM_STAT_SF_EVICTIONS);
    st->stale_reads = XSTAT(CXLSHM_STAT_STALE_READS);
    st->charged_ns = XSTAT(CXLSHM_STAT_CHARGED_NS);
    st->retries = XSTAT(CXLSHM_STAT_RETRIES);
#undef XSTAT
    return st;
}

static int cxl_shm_collect(Object *obj, void *opaque)
{
    CxlShmInfoList ***tail = opaque;
    CXLShmState *s;
    CxlShmInfo *info;
    CxlShmHostList **htail;
    CxlShmCapabilityList **ctail;
    uint32_t i, st, caps;

    if (!object_dynamic_cast(obj, TYPE_CXL_SHM) || !DEVICE(obj)->realized) {
        return 0;
    }
    s = CXL_SHM(obj);
    cxl_shm_pool_refresh_hosts(s);
    cxl_shm_pool_sync_stats(s);

    info = g_new0(CxlShmInfo, 1);
    info->path = object_get_canonical_path(obj);
    info->id = g_strdup(DEVICE(obj)->id ? DEVICE(obj)->id : "");
    info->mode = s->timed ? CXL_SHM_MODE_TIMED : CXL_SHM_MODE_DIRECT;
    info->pool = g_strdup(s->pool_path);
    info->size = s->size;
    info->coherent_size = s->coherent_size;
    info->line_size = CXLPOOL_LINE;
    info->host_id = s->host_id;
    info->max_hosts = s->max_hosts;
    if (!s->timed) {
        info->has_latency_ns = true;
        info->latency_ns = qatomic_read(&s->latency_ns);
    } else {
        info->timed = g_new0(CxlShmTimed, 1);
        info->timed->cache_size = s->t.cache_size;
        info->timed->cache_ways = s->t.cache_ways;
        info->timed->snoop_filter_entries = s->t.sf_entries;
        info->timed->hit_latency_ns = qatomic_read(&s->t.hit_ns);
        info->timed->miss_latency_ns = qatomic_read(&s->t.miss_ns);
        info->timed->writeback_latency_ns = qatomic_read(&s->t.wb_ns);
        info->timed->back_invalidate_latency_ns = qatomic_read(&s->t.bi_ns);
        info->timed->snoop_latency_ns = qatomic_read(&s->t.snoop_ns);
        info->timed->bandwidth_mbs = s->bandwidth_mbs;
    }
    info->generation = s->generation;
    ctail = &info->capabilities;
    caps = cxl_shm_caps(s);
    for (i = 0; i < CXL_SHM_CAPABILITY__MAX; i++) {
        /* the enum's order is the CAPS bit order */
        if (caps & (1u << i)) {
            QAPI_LIST_APPEND(ctail, (CxlShmCapability)i);
        }
    }
    info->writeback = s->wb_deferred ? CXL_SHM_WRITEBACK_DEFERRED
                                     : CXL_SHM_WRITEBACK_IMMEDIATE;
    info->evict_rate = s->evict_rate;

    htail = &info->hosts;
    for (i = 0; s->hosts && i < s->max_hosts; i++) {
        CxlShmHost *h = g_new0(CxlShmHost, 1);

        h->host_id = i;
        st = qatomic_read(&s->hosts[i].state);
        /* the enum's order is the host table's state numbering */
        h->state = st < CXL_SHM_HOST_STATE__MAX ? (CxlShmHostState)st
                                                : CXL_SHM_HOST_STATE_FAILED;
        h->generation = qatomic_read(&s->hosts[i].generation);
        h->pid = s->hosts[i].pid;
        h->stats = cxl_shm_stats(s->hosts[i].stats,
                                 cxl_shm_pool_xstat(s, i,
                                                    CXLSHM_STAT_TABLE_NR));
        QAPI_LIST_APPEND(htail, h);
    }

    info->stats = cxl_shm_stats(s->stats, s->stats);

    QAPI_LIST_APPEND(*tail, info);
    return 0;
}

CxlShmInfoList *qmp_query_cxl_shm(Error **errp)
{
    CxlShmInfoList *head = NULL, **tail = &head;

    object_child_foreach_recursive(object_get_root(), cxl_shm_collect, &tail);
    return head;
}

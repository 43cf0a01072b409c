/*
 * cxl-shm: the JSON-lines logs of conflicts and stale reads
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/timer.h"
#include "qemu/host-utils.h"
#include "qapi/error.h"
#include "cxl-shm.h"
#include "trace.h"

/* Line engine callback: one writeback that overwrote another host's data */
void cxl_shm_conflict(void *opaque, const CXLShmConflict *c)
{
    CXLShmState *s = opaque;
    g_autoptr(GString) j = NULL;
    int i;

    trace_cxl_shm_conflict(s->host_id, s->generation, c->offset, c->mask);
    if (!s->conflict_fp) {
        return;
    }
    j = g_string_new(NULL);
    g_string_append_printf(j, "{\"host\":%u,\"generation\":%" PRIu64
                           ",\"offset\":%" PRIu64 ",\"line\":\"0x%" PRIx64
                           "\",\"time_ns\":%" PRId64 ",\"lost_mask\":\"0x%016"
                           PRIx64 "\",\"lost_bytes\":%d", s->host_id,
                           s->generation, c->offset, c->offset,
                           qemu_clock_get_ns(QEMU_CLOCK_REALTIME), c->mask,
                           ctpop64(c->mask));
    g_string_append(j, ",\"base\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->base[i]);
    }
    g_string_append(j, "\",\"theirs\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->theirs[i]);
    }
    g_string_append(j, "\",\"mine\":\"");
    for (i = 0; i < CXLPOOL_LINE; i++) {
        g_string_append_printf(j, "%02x", c->mine[i]);
    }
    g_string_append(j, "\"}\n");
    qemu_mutex_lock(&s->conflict_lock);
    fputs(j->str, s->conflict_fp);
    fflush(s->conflict_fp);
    qemu_mutex_unlock(&s->conflict_lock);
}

/*
 * conflict-log, and mode=timed's stale-log: before the pool is touched,
 * so that a refusal leaves it as it was
 */
bool cxl_shm_open_logs(CXLShmState *s, Error **errp)
{
    CXLShmTimed *t = &s->t;

    if (s->conflict_log && *s->conflict_log) {
        s->conflict_fp = fopen(s->conflict_log, "a");
        if (!s->conflict_fp) {
            error_setg_errno(errp, errno, "cannot open "
                             "conflict-log '%s'", s->conflict_log);
            return false;
        }
    }
    /* only mode=timed accepts a stale-log (its check_props) */
    if (t->stale_log && *t->stale_log) {
        t->stale_fp = fopen(t->stale_log, "a");
        if (!t->stale_fp) {
            error_setg_errno(errp, errno, "cannot open stale-log "
                             "'%s'", t->stale_log);
            cxl_shm_close_logs(s);
            return false;
        }
    }
    return true;
}

void cxl_shm_close_logs(CXLShmState *s)
{
    if (s->t.stale_fp) {
        fclose(s->t.stale_fp);
        s->t.stale_fp = NULL;
    }
    if (s->conflict_fp) {
        fclose(s->conflict_fp);
        s->conflict_fp = NULL;
    }
}

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

/* ,"@key":"@p's @len bytes in hex": a member of the record @j writes */
void cxl_shm_log_hex(GString *j, const char *key, const uint8_t *p,
                     size_t len)
{
    size_t i;

    g_string_append_printf(j, ",\"%s\":\"", key);
    for (i = 0; i < len; i++) {
        g_string_append_printf(j, "%02x", p[i]);
    }
    g_string_append_c(j, '"');
}

/*
 * The record @j ends and goes to @fp as one line, whole (the vCPUs that
 * write records share the file: @lock)
 */
void cxl_shm_log_record(FILE *fp, QemuMutex *lock, GString *j)
{
    g_string_append(j, "}\n");
    qemu_mutex_lock(lock);
    fputs(j->str, fp);
    fflush(fp);
    qemu_mutex_unlock(lock);
}

/* Line engine callback: one writeback that overwrote another host's data */
void cxl_shm_conflict(void *opaque, const CXLShmConflict *c)
{
    CXLShmState *s = opaque;
    g_autoptr(GString) j = NULL;

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
    cxl_shm_log_hex(j, "base", c->base, CXLPOOL_LINE);
    cxl_shm_log_hex(j, "theirs", c->theirs, CXLPOOL_LINE);
    cxl_shm_log_hex(j, "mine", c->mine, CXLPOOL_LINE);
    cxl_shm_log_record(s->conflict_fp, &s->conflict_lock, j);
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

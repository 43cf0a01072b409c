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

/*
 * cxl-shm: a host of a remote pool (pool=ucx://ADDR:PORT)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The pool is served by `cxlpod-pool serve` on another machine
 * (host-tools/pool-serve.c) over UCX (cxl-shm-remote.c, the client).
 * Realize joins the service, with a bounded wait as a network block
 * device opens its export, and fills the non-coherent area's image and
 * twin from it (FETCH, 64 KiB at a time).  No pool file is opened: the
 * host table and statistics are the service's, and the device keeps a
 * private shadow of the host table that its thread refreshes.
 *
 * The client is single-threaded: a device thread owns it.  It polls the
 * client's fd and an eventfd for submissions, drives progress (the
 * client sends the heartbeats) and applies each reply to the image and
 * twin.  A caller (a vCPU, the doorbell's thread, the main loop) has one
 * request slot: its operation submits a request and returns "not yet"
 * (a range that got nowhere), and the operation run again finds the
 * reply.  Nothing but realize waits for the service.
 *
 * Writeback sends the bytes where the image differs from the twin (up to
 * CXLSHM_WIRE_MAX_LINES lines a request); when the service has written
 * them the twin takes the bytes sent, so a store made meanwhile stays
 * dirty.  Only the device thread reads the twin against the image or
 * changes the twin: it takes a writeback's bytes when it sends it (a
 * consistent snapshot of each line, as cxl-shm-line.c takes, so a vCPU's
 * store made during the writeback is in it whole or stays dirty, as on
 * hardware), and applies replies in the order
 * their requests went out, under its lock (which a reset takes).
 * Invalidate fetches; flush writes back, then fetches, keeping
 * the bytes stored since the writeback dirty.  The coherent window is
 * an I/O region whose loads fetch and whose stores are masked stores at
 * the service (far_cw_access()).
 */

#include "qemu/osdep.h"
#include <poll.h>
#include <sys/eventfd.h>
#include "qemu/bitops.h"
#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/module.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "exec/memory.h"
#include "hw/core/cpu.h"
#include "exec/io-insn.h"
#include "system/tcg.h"
#include "cxl-shm.h"
#include "cxl-shm-remote.h"
#include "trace.h"

#define FAR_SCHEME              "ucx://"
#define FAR_LEAVE_WAIT_MS       200     /* the LEAVE at unrealize or exit */
#define FAR_HOSTS_PERIOD_MS     500     /* the host table's refresh */
#define FAR_FILL_DEPTH          8       /* FETCHes in flight while filling */

typedef enum FarState {
    FAR_IDLE,                   /* the caller's */
    FAR_QUEUED,                 /* submitted, the thread's */
    FAR_INFLIGHT,               /* sent, the thread's */
    FAR_DONE,                   /* replied, the caller's */
} FarState;

typedef enum FarKind {
    FAR_RANGE,                  /* a piece of a range operation (op) */
    FAR_LOAD,                   /* a coherent line's bytes */
    FAR_STORE,                  /* a coherent word's bytes (mask) */
    FAR_CAS,                    /* an atomic's word: expect -> value */
} FarKind;

#define FAR_RUN_MAX             16      /* accesses an instruction replays */

/*
 * The accesses one instruction has done to the coherent window, in
 * order: a load's line, a store's word, bytes and mask.  Run again
 * (cpu_io_insn_rerun()), the instruction is answered from them up to the
 * access that asked for the retry (see far_cw_access()).
 */
typedef struct FarRunAccess {
    bool store;
    uint64_t at;                /* the line (a load), the word (a store) */
    uint64_t value, mask;       /* a store's; a load's word in value */
    uint8_t bytes[CXLSHM_LINE]; /* a load's */
} FarRunAccess;

typedef struct FarRun {
    uint32_t n;                 /* accesses done */
    uint32_t pos;               /* accesses of this run answered so far */
    int64_t since_ms;           /* its first run (the bound of its retries) */
    bool refused;               /* a 16-byte atomic: it fails */
    FarRunAccess acc[FAR_RUN_MAX];
} FarRun;

/* One caller's request: a piece [off, end) of a range operation, or */
typedef struct FarSlot {
    int state;                  /* FarState, atomic */
    FarKind kind;
    uint64_t value, mask;       /* FAR_STORE; FAR_CAS: value */
    uint64_t expect;            /* FAR_CAS: the word its load read */
    FarRun run;                 /* a vCPU's: far_cw_access() */
    CXLShmLineOp op;
    uint64_t off, end;
    uint64_t want_end;          /* the end of the range asked for */
    uint32_t seq;               /* this request's, the caller's */
    uint64_t sent;              /* the thread's: when it was sent */
    uint32_t valid_from;        /* atomic: requests before it abandoned */
    uint32_t claim_from;        /* atomic: requests before it orphaned */
    bool wb_stage;              /* a writeback (of a flush) is in flight */
    uint64_t force;             /* a non-temporal line's bytes to send */
    uint32_t nlines;
    CXLShmWireLine *lines;      /* CXLSHM_WIRE_MAX_LINES */
    uint8_t *buf;               /* CXLSHM_WIRE_MAX_FETCH */
    CXLShmRemoteReq req;
    int status;                 /* CXLShmWireStatus when done */
    CXLShmLineCount n;          /* what it did */
} FarSlot;

struct CXLShmFar {
    char *addr;
    uint16_t port;
    char *where;                /* ADDR:PORT as given */
    CXLShmRemote *r;
    QemuThread thread;
    bool started;
    int efd;                    /* a submission, or stop */
    FarSlot *slot;
    uint32_t nslots;            /* vCPUs, the doorbell's thread, the rest */
    bool stop;
    bool failed;                /* atomic: the service is lost */
    char *why;
    CXLShmRemoteReq hosts_req;
    CXLShmRemoteReq leave_req;  /* the thread's, as it exits */
    CXLPoolHost *hosts_buf;
    int64_t hosts_due_ms;
    MemoryRegion whole;         /* the coherent window over the pool */
    MemoryRegion coherent;
    MemoryRegion rest;
    bool regions;
    bool left;                  /* far_leave() ran */
    /* the device thread's, while it applies a reply; a reset takes it */
    QemuMutex lock;
    uint64_t sent;              /* requests sent (the thread's) */
    int db_error;               /* atomic: a doorbell piece's error status */
    bool said_error;            /* the thread's: an error status reported */
};

static bool far_failed(CXLShmState *s)
{
    return s->far && qatomic_read(&s->far->failed);
}

/* The doorbell's op is done: lost, refused (a piece of it), or OK */
static uint32_t far_db_status(CXLShmState *s)
{
    int e = qatomic_xchg(&s->far->db_error, 0);

    if (far_failed(s) || e == CXLSHM_WIRE_LOST ||
        e == CXLSHM_WIRE_TIMEOUT) {
        return CXLSHM_DB_LOST;
    }
    return e ? CXLSHM_DB_ERROR : CXLSHM_DB_OK;
}

/* ucx://ADDR:PORT, ADDR an IPv4 literal, a name or [IPv6] */
static bool far_parse(CXLShmState *s, char **addr, uint16_t *port,
                      Error **errp)
{
    const char *a = s->pool_path + strlen(FAR_SCHEME), *colon, *end;
    unsigned long p;

    if (*a == '[') {
        end = strchr(a, ']');
        colon = end ? end + 1 : NULL;
        if (!end || *colon != ':') {
            goto bad;
        }
        *addr = g_strndup(a + 1, end - a - 1);
    } else {
        colon = strrchr(a, ':');
        if (!colon || colon == a || memchr(a, ':', colon - a)) {
            goto bad;
        }
        *addr = g_strndup(a, colon - a);
    }
    if (qemu_strtoul(colon + 1, NULL, 10, &p) < 0 || p == 0 || p > 65535) {
        g_free(*addr);
        *addr = NULL;
        goto bad;
    }
    *port = p;
    return true;
bad:
    error_setg(errp, "property 'pool' is '%s' (allowed: a path, or "
               "ucx://ADDR:PORT with ADDR an IPv4 address, a name or "
               "[IPv6] and PORT in [1, 65535])", s->pool_path);
    return false;
}

/* The properties of a remote host, before anything is opened */
static bool far_check_remote(CXLShmState *s, Error **errp)
{
    bool far = cxl_shm_far_wanted(s);

    if (!far) {
        if (s->pool_key) {
            error_setg(errp, "property 'pool-key' applies to a remote "
                       "pool only (pool=ucx://ADDR:PORT)");
            return false;
        }
        return true;
    }
    if (s->parent_obj.hostmem) {
        error_setg(errp, "property 'memdev' cannot be used with a remote "
                   "pool (pool=%s): the pool is the service's", s->pool_path);
        return false;
    }
    if (!s->pool_key || !*s->pool_key) {
        error_setg(errp, "property 'pool-key' is required with a remote "
                   "pool (pool=%s): the pod's key file, made by "
                   "`cxlpod-pool create` beside the pool", s->pool_path);
        return false;
    }
    if (s->mode != CXL_SHM_MODE_DIRECT) {
        error_setg(errp, "a remote pool (pool=%s) runs mode=direct only "
                   "for now (mode=timed is not supported on a remote host)",
                   s->pool_path);
        return false;
    }
    if (s->evict_rate) {
        error_setg(errp, "property 'evict-rate' is not supported on a "
                   "remote host (pool=%s) yet", s->pool_path);
        return false;
    }
    if (s->remote_timeout_ms < 1 || s->remote_timeout_ms > 60000) {
        error_setg(errp, "property 'remote-timeout-ms' is %u (allowed: "
                   "[1, 60000])", s->remote_timeout_ms);
        return false;
    }
    return true;
}

/* Drive the client until @req completes (realize only: bounded) */
static void far_wait(CXLShmFar *f, CXLShmRemoteReq *req)
{
    while (req->status == CXLSHM_REMOTE_PENDING) {
        if (!cxl_shm_remote_progress(f->r)) {
            continue;           /* it completed every request */
        }
        if (req->status != CXLSHM_REMOTE_PENDING) {
            break;
        }
        if (cxl_shm_remote_arm(f->r) && cxl_shm_remote_fd(f->r) >= 0) {
            struct pollfd p = { .fd = cxl_shm_remote_fd(f->r),
                                .events = POLLIN };
            int t = cxl_shm_remote_timeout_ms(f->r);

            poll(&p, 1, t < 0 || t > 10 ? 10 : t);
        } else if (cxl_shm_remote_fd(f->r) < 0) {
            g_usleep(10);
        }
    }
}

static const char *far_cause(int status)
{
    switch (status) {
    case CXLSHM_WIRE_EACCES:
        return "refused: wrong key (EACCES)";
    case CXLSHM_WIRE_EBUSY:
        return "slot busy: another host is joined in it (EBUSY)";
    case CXLSHM_WIRE_EPERM:
        return "refused (EPERM)";
    case CXLSHM_WIRE_TIMEOUT:
        return "timeout";
    case CXLSHM_WIRE_LOST:
        return "connection refused or lost";
    default:
        return cxl_shm_remote_status_name(status);
    }
}

/* The service's host table into the shadow */
static void far_hosts_apply(CXLShmState *s, const CXLShmRemoteReq *req)
{
    CXLShmFar *f = s->far;
    uint32_t i, n = MIN(req->got / sizeof(CXLPoolHost), s->max_hosts);

    for (i = 0; i < n; i++) {
        CXLPoolHost *h = &s->hosts[i];

        h->pid = f->hosts_buf[i].pid;
        memcpy(h->stats, f->hosts_buf[i].stats, sizeof(h->stats));
        qatomic_set(&h->generation, f->hosts_buf[i].generation);
        qatomic_set(&h->state, f->hosts_buf[i].state);
    }
}

/*
 * Realize: connect, join slot host-id, check the geometry.  Bounded by
 * remote-timeout-ms; the error names the service and the cause.
 */
static bool far_join(CXLShmState *s, Error **errp)
{
    CXLShmFar *f = g_new0(CXLShmFar, 1);
    uint8_t key[CXLSHM_WIRE_KEY];
    g_autoptr(GError) gerr = NULL;
    CXLShmRemoteReq req = { 0 };
    const CXLShmWireJoined *j;

    f->efd = -1;
    qemu_mutex_init(&f->lock);
    s->far = f;
    if (!far_parse(s, &f->addr, &f->port, errp)) {
        return false;
    }
    f->where = g_strdup(s->pool_path + strlen(FAR_SCHEME));
    /* the device thread's wake-up: a submission, or stop */
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) {
        error_setg_errno(errp, errno, "host %u of the pool service at %s: "
                         "cannot create the device thread's eventfd",
                         s->host_id, f->where);
        return false;
    }
    if (!cxl_shm_remote_read_key(s->pool_key, key, &gerr)) {
        error_setg(errp, "pool-key '%s': %s", s->pool_key, gerr->message);
        return false;
    }
    f->r = cxl_shm_remote_new(f->addr, f->port, key, sizeof(key),
                              s->remote_timeout_ms, &gerr);
    memset(key, 0, sizeof(key));
    if (!f->r) {
        error_setg(errp, "cannot reach the pool service at %s: %s",
                   f->where, gerr->message);
        return false;
    }
    trace_cxl_shm_far_join(f->where, s->host_id);
    cxl_shm_remote_join(f->r, s->host_id, &req);
    far_wait(f, &req);
    if (req.status != CXLSHM_WIRE_OK) {
        const char *e = cxl_shm_remote_error(f->r);

        error_setg(errp, "host %u cannot join the pool service at %s: %s%s%s",
                   s->host_id, f->where, far_cause(req.status),
                   e ? ": " : "", e ? e : "");
        return false;
    }
    s->generation = req.value0;
    j = cxl_shm_remote_geometry(f->r);
    if (j->size != s->size || j->coherent_size != s->coherent_size ||
        j->max_hosts != s->max_hosts) {
        error_setg(errp, "the pool service at %s has size=%" PRIu64
                   ", coherent-size=%" PRIu64 ", max-hosts=%u but this "
                   "host has size=%" PRIu64 ", coherent-size=%" PRIu64
                   ", max-hosts=%u (they must be equal)", f->where,
                   j->size, j->coherent_size, j->max_hosts, s->size,
                   s->coherent_size, s->max_hosts);
        return false;
    }
    /* a private shadow of the metadata the device reads */
    cxlpool_layout(&s->layout, s->size, s->max_hosts);
    s->tail = g_malloc0(s->layout.tail_size);
    s->hosts = cxl_shm_pool_tail(s, s->layout.hosts);
    f->hosts_buf = g_new0(CXLPoolHost, s->max_hosts);
    f->hosts_req.buf = f->hosts_buf;
    f->hosts_req.len = s->max_hosts * sizeof(CXLPoolHost);
    cxl_shm_remote_hosts(f->r, &f->hosts_req);
    far_wait(f, &f->hosts_req);
    if (f->hosts_req.status == CXLSHM_WIRE_OK) {
        far_hosts_apply(s, &f->hosts_req);
    }
    s->lines.coherent_size = s->coherent_size;
    s->lines.size = s->size;
    s->lines.host_id = s->host_id;
    s->lines.generation = s->generation;
    trace_cxl_shm_far_joined(f->where, s->host_id, s->generation,
                             j->heartbeat_ms);
    return true;
}

/*
 * Fetched bytes @src of [dpa, dpa + len) into the image and twin: @drop,
 * the image takes them (its dirty bytes are lost); else only the bytes
 * where the image equals the twin (clean) do, so a byte stored since the
 * writeback stays dirty.  Word by word with compare-and-swap against the
 * vCPUs' stores.  A page of zeros neither the image nor the twin has
 * stays absent.
 */
static void far_apply_fetch(CXLShmState *s, uint64_t dpa, uint64_t len,
                            const uint8_t *src, bool drop)
{
    uint64_t p;

    for (p = 0; p < len; p += CXLSHM_PAGE) {
        uint64_t o = dpa - s->coherent_size + p;
        uint64_t plen = MIN(CXLSHM_PAGE, len - p), w;
        unsigned char vi = 1, vt = 1;

        if (plen == CXLSHM_PAGE && !(o % CXLSHM_PAGE) &&
            buffer_is_zero(src + p, plen) &&
            mincore(s->image + o, CXLSHM_PAGE, &vi) == 0 &&
            mincore(s->twin + o, CXLSHM_PAGE, &vt) == 0 &&
            !(vi & 1) && !(vt & 1)) {
            continue;
        }
        for (w = 0; w < plen; w += 8) {
            uint64_t *img = (uint64_t *)(s->image + o + w);
            uint64_t *tw = (uint64_t *)(s->twin + o + w);
            uint64_t nv, cur, twv;

            memcpy(&nv, src + p + w, 8);
            twv = *tw;
            cur = qatomic_read(img);
            for (;;) {
                uint64_t want = nv;
                uint64_t seen;

                if (!drop && cur != twv) {
                    uint64_t dirty = 0;
                    int b;

                    for (b = 0; b < 8; b++) {
                        if (((cur ^ twv) >> (b * 8)) & 0xff) {
                            dirty |= 0xffULL << (b * 8);
                        }
                    }
                    want = (cur & dirty) | (nv & ~dirty);
                }
                if (want == cur) {
                    break;
                }
                seen = qatomic_cmpxchg(img, cur, want);
                if (seen == cur) {
                    break;
                }
                cur = seen;
            }
            if (twv != nv) {
                *tw = nv;
            }
        }
    }
}

/*
 * Realize: the image and twin from the service, FAR_FILL_DEPTH FETCHes
 * of 64 KiB in flight (bounded: each request by remote-timeout-ms)
 */
static bool far_fill(CXLShmState *s, Error **errp)
{
    CXLShmFar *f = s->far;
    CXLShmRemoteReq req[FAR_FILL_DEPTH];
    uint64_t at[FAR_FILL_DEPTH];
    g_autofree uint8_t *buf = g_malloc(FAR_FILL_DEPTH *
                                       CXLSHM_WIRE_MAX_FETCH);
    uint64_t next = s->coherent_size, left = 0;
    int64_t t0 = g_get_monotonic_time();
    int i;

    if (!s->nc_size) {
        return true;
    }
    memset(req, 0, sizeof(req));
    for (i = 0; i < FAR_FILL_DEPTH; i++) {
        req[i].status = CXLSHM_WIRE_OK;
        at[i] = UINT64_MAX;
    }
    do {
        left = 0;
        for (i = 0; i < FAR_FILL_DEPTH; i++) {
            if (req[i].status == CXLSHM_REMOTE_PENDING) {
                left++;
                continue;
            }
            if (req[i].status != CXLSHM_WIRE_OK) {
                const char *e = cxl_shm_remote_error(f->r);

                error_setg(errp, "host %u cannot fetch its non-coherent "
                           "area from the pool service at %s: %s%s%s",
                           s->host_id, f->where,
                           far_cause(req[i].status), e ? ": " : "",
                           e ? e : "");
                /* the other requests are on this stack: closed now */
                cxl_shm_remote_free(f->r);
                f->r = NULL;
                return false;
            }
            if (at[i] != UINT64_MAX) {
                far_apply_fetch(s, at[i], req[i].len,
                                req[i].buf, true);
                at[i] = UINT64_MAX;
            }
            if (next < s->size) {
                uint32_t len = MIN(s->size - next, CXLSHM_WIRE_MAX_FETCH);

                req[i].buf = buf + i * CXLSHM_WIRE_MAX_FETCH;
                req[i].len = len;
                at[i] = next;
                cxl_shm_remote_fetch(f->r, next, len, &req[i]);
                next += len;
                left++;
            }
        }
        if (left) {
            for (i = 0; i < FAR_FILL_DEPTH; i++) {
                if (req[i].status == CXLSHM_REMOTE_PENDING) {
                    far_wait(f, &req[i]);
                    break;
                }
            }
        }
    } while (left);
    trace_cxl_shm_far_filled(s->host_id, s->nc_size,
                             (g_get_monotonic_time() - t0) / 1000);
    return true;
}

/* The service is lost: said once, on stderr and as a trace event */
static void far_lost(CXLShmState *s, int status)
{
    CXLShmFar *f = s->far;
    const char *e = cxl_shm_remote_error(f->r);

    if (qatomic_xchg(&f->failed, true)) {
        return;
    }
    f->why = g_strdup_printf("%s%s%s", far_cause(status), e ? ": " : "",
                             e ? e : "");
    error_report("cxl-shm: host %u lost the pool service at %s: %s",
                 s->host_id, f->where, f->why);
    trace_cxl_shm_far_lost(s->host_id, f->where, f->why);
}

/*
 * A consistent copy of an image line vCPUs may be storing into, as
 * cxl-shm-line.c's snapshot(): word by word (a vCPU's aligned store is in
 * it whole or not at all), read again until two reads agree, so the line
 * sent is one the line held at one moment
 */
static void far_snapshot(const uint8_t *img, uint8_t *data)
{
    uint64_t x[CXLSHM_LINE / 8], y[CXLSHM_LINE / 8];
    int tries, k;

    for (k = 0; k < CXLSHM_LINE / 8; k++) {
        x[k] = qatomic_read((const uint64_t *)img + k);
    }
    for (tries = 0; tries < 64; tries++) {
        smp_rmb();  /* the second read is not hoisted above the first */
        for (k = 0; k < CXLSHM_LINE / 8; k++) {
            y[k] = qatomic_read((const uint64_t *)img + k);
        }
        if (!memcmp(x, y, sizeof(x))) {
            break;
        }
        memcpy(x, y, sizeof(x));
    }
    memcpy(data, x, CXLSHM_LINE);
}

/* The lines of [off, end) whose image differs from the twin, from @off */
static uint64_t far_collect_dirty(CXLShmState *s, FarSlot *sl, uint64_t off,
                                  uint64_t end)
{
    const uint64_t chunk = 2 * MiB;
    unsigned char vi[512], vt[512];
    uint64_t l = off;

    sl->nlines = 0;
    while (l < end && sl->nlines < CXLSHM_WIRE_MAX_LINES) {
        uint64_t o = l - s->coherent_size;
        uint64_t page = QEMU_ALIGN_DOWN(o, CXLSHM_PAGE);
        uint64_t pend = MIN(page + CXLSHM_PAGE, end - s->coherent_size);
        CXLShmWireLine *w;
        uint64_t mask = 0;
        int k;

        /* whole pages neither the image nor the twin has are clean */
        if (s->skip_unresident && o == page && !(o % chunk) &&
            end - l >= chunk &&
            mincore(s->image + o, chunk, vi) == 0 &&
            mincore(s->twin + o, chunk, vt) == 0) {
            size_t i;

            for (i = 0; i < chunk / CXLSHM_PAGE; i++) {
                if ((vi[i] | vt[i]) & 1) {
                    break;
                }
            }
            if (i) {
                l += i * CXLSHM_PAGE;
                continue;
            }
        }
        if (o == page && pend - o == CXLSHM_PAGE && !sl->force &&
            memcmp(s->image + o, s->twin + o, CXLSHM_PAGE) == 0) {
            l += CXLSHM_PAGE;
            continue;
        }
        w = &sl->lines[sl->nlines];
        far_snapshot(s->image + o, w->data);
        for (k = 0; k < CXLSHM_LINE; k++) {
            if (w->data[k] != s->twin[o + k]) {
                mask |= 1ULL << k;
            }
        }
        if (sl->force && l == off) {
            mask |= sl->force;
        }
        if (mask) {
            w->offset = l;
            w->mask = mask;
            sl->nlines++;
        }
        l += CXLSHM_LINE;
    }
    return MIN(l, end);
}

/* @sl's request to the device thread */
static void far_queue(CXLShmFar *f, FarSlot *sl)
{
    qatomic_store_release(&sl->state, FAR_QUEUED);
    if (eventfd_write(f->efd, 1) < 0) {
        /* the counter is full: the thread has work to find anyway */
    }
}

/*
 * Queue the piece of [off, end) from @off.  Its dirty bytes are taken
 * by the device thread when it sends it (far_send()), so requests go out
 * in the order their data was taken.
 */
static void far_start(CXLShmState *s, FarSlot *sl, CXLShmLineOp op,
                      uint64_t off, uint64_t end, uint64_t force)
{
    memset(&sl->n, 0, sizeof(sl->n));
    sl->kind = FAR_RANGE;
    sl->op = op;
    sl->off = off;
    sl->want_end = end;
    sl->force = force;
    sl->seq++;
    sl->nlines = 0;
    sl->end = op == CXLSHM_LINE_DROP ?
              MIN(end, off + CXLSHM_WIRE_MAX_FETCH) : end;
    sl->wb_stage = op != CXLSHM_LINE_DROP;
    far_queue(s->far, sl);
}

/*
 * Is @sl's request still its caller's?  A host reset abandons it
 * (far_abandon()): its reply is applied to nothing, as the image and the
 * twin are no longer its.  An interrupt delivery orphans it
 * (far_orphan()): the operation the vCPU runs next is the handler's, or
 * the interrupted instruction run again, so no operation takes it as its
 * own; but it goes on and its reply is applied, as a line the cache
 * wrote back or refreshed by itself (a fetch then keeps the bytes stored
 * since: a dirty line is never dropped by an orphan).  Abandoning it
 * instead would need a whole round trip without an interrupt for a
 * vCPU's operation to finish: under load, never.
 */
static bool far_own(FarSlot *sl)
{
    return (int32_t)(sl->seq - qatomic_read(&sl->valid_from)) >= 0;
}

static bool far_claimed(FarSlot *sl)
{
    return far_own(sl) &&
           (int32_t)(sl->seq - qatomic_read(&sl->claim_from)) >= 0;
}

static void far_abandon(FarSlot *sl)
{
    qatomic_set(&sl->valid_from, sl->seq + 1);
    qatomic_set(&sl->claim_from, sl->seq + 1);
}

static void far_orphan(FarSlot *sl)
{
    qatomic_set(&sl->claim_from, sl->seq + 1);
}

/*
 * A finished request that no operation takes (an orphan's, or one the
 * vCPU's next operation does not match): it was done all the same, so
 * what it did counts (lines written, fetched, conflicts)
 */
static void far_discard(CXLShmState *s, FarSlot *sl)
{
    qatomic_set(&sl->state, FAR_IDLE);
    if (sl->kind == FAR_RANGE && far_own(sl)) {
        cxl_shm_count(s, &sl->n);
    }
}

static FarSlot *far_slot(CXLShmState *s)
{
    CXLShmFar *f = s->far;

    if (cxl_shm_in_db_thread) {
        return &f->slot[f->nslots - 2];
    }
    if (current_cpu && current_cpu->cpu_index >= 0 &&
        (uint32_t)current_cpu->cpu_index < f->nslots - 2) {
        return &f->slot[current_cpu->cpu_index];
    }
    return &f->slot[f->nslots - 1];
}

/*
 * A range operation (CXLShmModeOps::range): how far it got.  The first
 * call submits the piece from @off and returns @off (not yet); called
 * again from @off once the reply came, it returns the piece's end and
 * submits the next.  The service lost, the operation is dropped (the
 * whole range returned) and the doorbell reports it.
 */
static uint64_t far_op(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                       uint64_t len, uint64_t force, CXLShmLineCount *n)
{
    CXLShmFar *f = s->far;
    FarSlot *sl;
    uint64_t end = off + len, from = MAX(off, s->coherent_size), got;
    int st;

    if (end <= from) {
        return end;
    }
    if (far_failed(s) || !qatomic_read(&f->started)) {
        /* dropped, as a link that is down drops a posted write */
        trace_cxl_shm_far_dropped(s->host_id, from, end);
        return end;
    }
    sl = far_slot(s);
    st = qatomic_load_acquire(&sl->state);
    if (st == FAR_QUEUED || st == FAR_INFLIGHT) {
        return off;
    }
    got = from;
    if (st == FAR_DONE) {
        if (!far_claimed(sl) || sl->kind != FAR_RANGE || sl->op != op ||
            sl->off != from || sl->want_end != end || sl->force != force) {
            far_discard(s, sl);
        } else {
            qatomic_set(&sl->state, FAR_IDLE);
            n->written += sl->n.written;
            n->fetched += sl->n.fetched;
            n->conflicts += sl->n.conflicts;
            if (sl->status != CXLSHM_WIRE_OK &&
                sl->status != CXLSHM_WIRE_BUSY) {
                /* lost or refused: dropped, the doorbell reports it */
                if (cxl_shm_in_db_thread) {
                    qatomic_set(&f->db_error, sl->status);
                }
                return end;
            }
            if (sl->status == CXLSHM_WIRE_OK) {
                got = sl->end;
            }
        }
    }
    if (got < end) {
        far_start(s, sl, op, got, end, force);
    }
    return got == from ? off : got;
}

static uint64_t far_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                          uint64_t len, CXLShmLineCount *n)
{
    return far_op(s, op, off, len, 0, n);
}

/* wbinvd, wbnoinvd, invd: the whole area, from *@from on */
static bool far_whole(CXLShmState *s, CXLShmLineOp op, uint64_t *from,
                      CXLShmLineCount *n)
{
    uint64_t start = MAX(*from, s->coherent_size), got;

    got = far_range(s, op, start, s->size - start, n);
    if (got < s->size) {
        *from = got;
        return false;
    }
    *from = 0;
    return true;
}

/* Non-temporal bytes @mask of a line (and its dirty ones) to the pool */
static bool far_nt_land(CXLShmState *s, uint64_t line, uint64_t mask,
                        CXLShmLineCount *n)
{
    return far_op(s, CXLSHM_LINE_WRITEBACK, line, CXLSHM_LINE, mask, n) ==
           line + CXLSHM_LINE;
}

static void far_finish(FarSlot *sl, int status)
{
    sl->status = status;
    qatomic_store_release(&sl->state, FAR_DONE);
}

/*
 * Device thread: the service refused a request (EINVAL, EIO, EPERM,
 * EPROTO): an error, not "done".  Said once on stderr, traced each time;
 * the doorbell's op reads DB_STATUS 8 (error), a vCPU's cache
 * maintenance retires with its lines left as they were (docs/device.md),
 * a coherent-window access fails (MEMTX_ERROR).
 */
static void far_error(CXLShmState *s, FarSlot *sl, int status)
{
    CXLShmFar *f = s->far;

    trace_cxl_shm_far_error(s->host_id, sl->off, sl->end,
                            cxl_shm_remote_status_name(status));
    if (!f->said_error) {
        f->said_error = true;
        error_report("cxl-shm: host %u: the pool service at %s refused a "
                     "request for [0x%" PRIx64 ", 0x%" PRIx64 "): %s",
                     s->host_id, f->where, sl->off, sl->end,
                     cxl_shm_remote_status_name(status));
    }
}

/* Device thread: send a queued piece */
static void far_send(CXLShmState *s, FarSlot *sl)
{
    CXLShmFar *f = s->far;

    memset(&sl->req, 0, sizeof(sl->req));
    if (sl->kind == FAR_STORE || sl->kind == FAR_CAS) {
        sl->sent = ++f->sent;
        if (sl->kind == FAR_CAS) {
            cxl_shm_remote_atomic(f->r, CXLSHM_ATOMIC_CMPXCHG, sl->off,
                                  sl->expect, sl->value, &sl->req);
        } else {
            cxl_shm_remote_atomic(f->r, CXLSHM_ATOMIC_STORE, sl->off,
                                  sl->value, sl->mask, &sl->req);
        }
        return;
    }
    if (sl->wb_stage && sl->nlines == 0) {
        /* the dirty bytes are taken now, in the order requests go out */
        uint64_t lim = sl->op == CXLSHM_LINE_WRITEBACK ? sl->want_end :
                       MIN(sl->want_end, sl->off + CXLSHM_WIRE_MAX_FETCH);

        sl->end = far_collect_dirty(s, sl, sl->off, lim);
        if (!sl->nlines) {
            sl->wb_stage = false;
            if (sl->op == CXLSHM_LINE_WRITEBACK) {
                far_finish(sl, CXLSHM_WIRE_OK);     /* nothing dirty */
                return;
            }
        }
    }
    sl->sent = ++f->sent;
    if (sl->wb_stage) {
        cxl_shm_remote_writeback(f->r, sl->lines, sl->nlines, &sl->req);
    } else {
        sl->req.buf = sl->buf;
        sl->req.len = sl->end - sl->off;
        cxl_shm_remote_fetch(f->r, sl->off, sl->end - sl->off, &sl->req);
    }
    trace_cxl_shm_far_send(s->host_id, sl->wb_stage ? "writeback" : "fetch",
                           sl->off, sl->end, sl->nlines);
}

/* Device thread: a reply came for @sl */
static void far_reply(CXLShmState *s, FarSlot *sl)
{
    CXLShmRemoteReq *r = &sl->req;
    uint32_t i, k, done;

    if (r->status == CXLSHM_WIRE_LOST || r->status == CXLSHM_WIRE_TIMEOUT) {
        far_lost(s, r->status);
    } else if (r->status != CXLSHM_WIRE_OK && r->status != CXLSHM_WIRE_BUSY) {
        far_error(s, sl, r->status);
    }
    if (sl->kind != FAR_RANGE) {
        far_finish(sl, r->status);
        return;
    }
    if (!far_own(sl)) {
        /* abandoned: the image and the twin are no longer its */
        trace_cxl_shm_far_abandoned(s->host_id, sl->off, sl->end);
        far_finish(sl, r->status);
        return;
    }
    if (!sl->wb_stage) {
        if (r->status == CXLSHM_WIRE_OK) {
            far_apply_fetch(s, sl->off, sl->end - sl->off, sl->buf,
                            sl->op == CXLSHM_LINE_DROP && far_claimed(sl));
            sl->n.fetched += (sl->end - sl->off) / CXLSHM_LINE;
        }
        far_finish(sl, r->status);
        return;
    }
    /* the twin takes the bytes sent, of the lines written */
    done = r->status == CXLSHM_WIRE_OK ? sl->nlines :
           r->status == CXLSHM_WIRE_BUSY ? MIN(r->count, sl->nlines) : 0;
    for (i = 0; i < done; i++) {
        CXLShmWireLine *w = &sl->lines[i];
        uint8_t *tw = s->twin + (w->offset - s->coherent_size);

        for (k = 0; k < CXLSHM_LINE; k++) {
            if ((w->mask >> k) & 1) {
                tw[k] = w->data[k];
            }
        }
    }
    if (r->status == CXLSHM_WIRE_OK || r->status == CXLSHM_WIRE_BUSY) {
        sl->n.written += r->value0;
        sl->n.conflicts += r->value1;
        if (r->value1) {
            trace_cxl_shm_far_conflicts(s->host_id, sl->off, r->value1);
        }
    }
    if (r->status == CXLSHM_WIRE_OK && sl->op == CXLSHM_LINE_FLUSH) {
        sl->wb_stage = false;
        far_send(s, sl);
        return;
    }
    far_finish(sl, r->status);
}

/*
 * The device thread, once stopped (or a refused realize, the thread never
 * started): the host leaves, LEAVE's reply waited for at most
 * FAR_LEAVE_WAIT_MS, then the thread exits.  No request is sent after.
 */
static void far_send_leave(CXLShmState *s)
{
    CXLShmFar *f = s->far;
    CXLShmRemoteReq *req = &f->leave_req;
    int64_t end = g_get_monotonic_time() + FAR_LEAVE_WAIT_MS * 1000;

    qatomic_set(&f->failed, true);
    if (f->why || cxl_shm_remote_error(f->r)) {
        return;
    }
    cxl_shm_remote_leave(f->r, req);
    while (req->status == CXLSHM_REMOTE_PENDING &&
           cxl_shm_remote_progress(f->r)) {
        int64_t left = (end - g_get_monotonic_time()) / 1000;
        struct pollfd p = { .fd = cxl_shm_remote_fd(f->r),
                            .events = POLLIN };

        if (left <= 0 || req->status != CXLSHM_REMOTE_PENDING) {
            break;
        }
        if (cxl_shm_remote_arm(f->r) && p.fd >= 0) {
            poll(&p, 1, MIN(left, 10));
        } else if (p.fd < 0) {
            poll(NULL, 0, 1);
        }
    }
    trace_cxl_shm_far_leave(s->host_id, f->where);
}

/*
 * Device thread: the replies in the order their requests were sent, up
 * to the first one still due, so a writeback's twin update never lands
 * after a later request's on the same line (a DROP's, a later
 * writeback's)
 */
static void far_replies(CXLShmState *s)
{
    CXLShmFar *f = s->far;
    uint32_t i;

    for (;;) {
        FarSlot *first = NULL;

        for (i = 0; i < f->nslots; i++) {
            FarSlot *sl = &f->slot[i];

            if (qatomic_read(&sl->state) == FAR_INFLIGHT &&
                (!first || sl->sent < first->sent)) {
                first = sl;
            }
        }
        if (!first || first->req.status == CXLSHM_REMOTE_PENDING) {
            return;
        }
        far_reply(s, first);
    }
}

static void *far_thread(void *opaque)
{
    CXLShmState *s = opaque;
    CXLShmFar *f = s->far;
    uint32_t i;

    while (!qatomic_read(&f->stop)) {
        struct pollfd p[2] = {
            { .fd = f->efd, .events = POLLIN },
            { .fd = cxl_shm_remote_fd(f->r), .events = POLLIN },
        };
        bool lost = qatomic_read(&f->failed);
        int64_t now = g_get_monotonic_time() / 1000;
        eventfd_t v;
        int t;

        if (eventfd_read(f->efd, &v) < 0) {
            /* nothing was submitted */
        }
        qemu_mutex_lock(&f->lock);
        for (i = 0; i < f->nslots; i++) {
            FarSlot *sl = &f->slot[i];

            if (qatomic_load_acquire(&sl->state) == FAR_QUEUED) {
                qatomic_set(&sl->state, FAR_INFLIGHT);
                if (!far_own(sl)) {
                    far_finish(sl, CXLSHM_WIRE_OK);     /* abandoned */
                } else if (lost) {
                    memset(&sl->n, 0, sizeof(sl->n));
                    far_finish(sl, CXLSHM_WIRE_LOST);
                } else {
                    far_send(s, sl);
                }
            }
        }
        qemu_mutex_unlock(&f->lock);
        if (!lost && f->hosts_req.status != CXLSHM_REMOTE_PENDING &&
            now >= f->hosts_due_ms) {
            if (f->hosts_req.status == CXLSHM_WIRE_OK) {
                far_hosts_apply(s, &f->hosts_req);
            }
            f->hosts_due_ms = now + FAR_HOSTS_PERIOD_MS;
            cxl_shm_remote_hosts(f->r, &f->hosts_req);
        }
        if (!lost && !cxl_shm_remote_progress(f->r)) {
            far_lost(s, CXLSHM_WIRE_LOST);
        }
        qemu_mutex_lock(&f->lock);
        far_replies(s);
        qemu_mutex_unlock(&f->lock);
        if (qatomic_read(&f->failed)) {
            poll(p, 1, FAR_HOSTS_PERIOD_MS);
            continue;
        }
        t = cxl_shm_remote_timeout_ms(f->r);
        t = t < 0 || t > FAR_HOSTS_PERIOD_MS ? FAR_HOSTS_PERIOD_MS : t;
        if (p[1].fd < 0) {
            poll(p, 1, MIN(t, 1));
        } else if (cxl_shm_remote_arm(f->r)) {
            poll(p, 2, t);
        }
    }
    far_send_leave(s);
    return NULL;
}

/* Realize, once the image is filled: the thread takes the client */
static void far_start_thread(CXLShmState *s, uint32_t nr_cpus)
{
    CXLShmFar *f = s->far;
    uint32_t i;

    f->nslots = nr_cpus + 2;
    f->slot = g_new0(FarSlot, f->nslots);
    for (i = 0; i < f->nslots; i++) {
        f->slot[i].lines = g_new(CXLShmWireLine, CXLSHM_WIRE_MAX_LINES);
        f->slot[i].buf = g_malloc(CXLSHM_WIRE_MAX_FETCH);
    }
    f->hosts_due_ms = g_get_monotonic_time() / 1000 + FAR_HOSTS_PERIOD_MS;
    f->started = true;
    qemu_thread_create(&f->thread, "cxl-shm-far", far_thread, s,
                       QEMU_THREAD_JOINABLE);
}

/*
 * Unrealize (CXLShmModeOps::fini), exit, a refused realize: no new
 * request from here on (ops are dropped, the doorbell's fail); the thread
 * is told to stop and joined.  It sends LEAVE itself and exits within
 * FAR_LEAVE_WAIT_MS plus one reply's handling; it never needs the BQL,
 * so joining it here, with the BQL, waits for no other host.  A refused
 * realize (no thread yet) leaves from here, bounded the same way.
 */
static void far_leave(CXLShmState *s)
{
    CXLShmFar *f = s->far;

    if (!f || !f->r || f->left) {
        return;
    }
    f->left = true;
    qatomic_set(&f->failed, true);
    if (!f->started) {
        far_send_leave(s);
        return;
    }
    qatomic_set(&f->stop, true);
    if (eventfd_write(f->efd, 1) < 0) {
        /* full: the thread wakes anyway */
    }
    qemu_thread_join(&f->thread);
    qatomic_set(&f->started, false);
}

/*
 * Unrealize, once no decoder maps f->whole: the thread stopped, and the
 * regions over the pool unparented (as the decoders' aliases are in
 * cxl-shm-map.c) while their storage, in s->far, lives until the release
 * after the grace period; they no longer hold a reference on the device.
 */
static void far_fini(CXLShmState *s)
{
    CXLShmFar *f = s->far;

    far_leave(s);
    if (f && f->regions) {
        if (s->coherent_size) {
            memory_region_del_subregion(&f->whole, &f->coherent);
            object_unparent(OBJECT(&f->coherent));
        }
        memory_region_del_subregion(&f->whole, &f->rest);
        object_unparent(OBJECT(&f->rest));
        object_unparent(OBJECT(&f->whole));
        f->regions = false;
    }
}

/* After the last use (the release, or a refused realize) */
static void far_free(CXLShmState *s)
{
    CXLShmFar *f = s->far;
    uint32_t i;

    if (!f) {
        return;
    }
    far_leave(s);
    if (f->r) {
        cxl_shm_remote_free(f->r);
    }
    if (f->efd >= 0) {
        close(f->efd);
    }
    for (i = 0; i < f->nslots; i++) {
        g_free(f->slot[i].lines);
        g_free(f->slot[i].buf);
    }
    g_free(f->slot);
    g_free(f->hosts_buf);
    g_free(f->addr);
    g_free(f->where);
    g_free(f->why);
    qemu_mutex_destroy(&f->lock);
    g_free(f);
    s->far = NULL;
    g_free(s->tail);
    s->tail = NULL;
    s->hosts = NULL;
}

/*
 * The coherent window of a remote host: every access goes to the
 * service.  A load fetches its line, a store is a masked store of its
 * 8-byte word (CXLSHM_ATOMIC_STORE), under the line's lock at the
 * service.  Any thread but a TCG vCPU (DMA, the monitor, qtest), an
 * access across a line (a load) or a word (a store), and a host that
 * lost the service get MEMTX_ERROR (a load reads all ones).
 *
 * A vCPU's access asks for a retry (MEMTX_RETRY) and the instruction to
 * run again alone, before any interrupt (cpu_io_insn_again()); it is
 * done when the instruction runs again and the reply has come.  An
 * instruction run again makes its accesses again: the vCPU keeps those
 * it has done (FarRun) and answers them as it did (a load the bytes it
 * read, a store done) up to the access that asked for the retry.  So a
 * load's bytes are the ones its store was made from (an add to memory
 * adds once), a store is sent once, and the bytes never come from an
 * earlier run of the instruction (cpu_io_insn_rerun() is false for
 * that: its accesses are forgotten).
 *
 * A locked read-modify-write (TCG runs it as a load and a store in an
 * exclusive step, tcg_atomic_step_active()) is a compare-and-swap of its
 * word at the service (CXLSHM_ATOMIC_CMPXCHG): "the word my load read ->
 * that word with my bytes", atomic with every other host's atomics and
 * stores, local ones included.  A swap that found another word (another
 * host's update came between) changed nothing: the instruction runs
 * again from its load, anew.
 */
static bool far_cw_vcpu(CXLShmState *s)
{
    return current_cpu && tcg_enabled() && cpu_io_insn_id(current_cpu) &&
           current_cpu->cpu_index >= 0 &&
           (uint32_t)current_cpu->cpu_index < s->far->nslots - 2;
}

static void far_run_reset(FarRun *r)
{
    r->n = r->pos = 0;
    r->refused = false;
}

/* The word @word as this instruction's load read it, if it did */
static bool far_run_word(FarRun *r, uint64_t word, uint64_t *old)
{
    uint32_t i = r->n;

    while (i--) {
        FarRunAccess *a = &r->acc[i];

        if (!a->store && a->at == QEMU_ALIGN_DOWN(word, CXLSHM_LINE)) {
            *old = ldq_le_p(a->bytes + (word - a->at));
            return true;
        }
    }
    return false;
}

/* The instruction runs again, alone: answer it from its first access */
static MemTxResult far_cw_again(FarRun *r)
{
    r->pos = 0;
    cpu_io_insn_again(current_cpu);
    return MEMTX_RETRY;
}

/* Did this instruction load another word than @word? */
static bool far_run_other_word(FarRun *r, uint64_t word)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        if (!r->acc[i].store && r->acc[i].value != word) {
            return true;
        }
    }
    return false;
}

/* The access fails (a load reads all ones, a store is dropped) */
static MemTxResult far_cw_fail(CXLShmState *s, FarRun *r, hwaddr addr,
                               bool write, uint64_t *val, const char *why)
{
    trace_cxl_shm_far_cw_failed(s->host_id, addr, write, why);
    if (r) {
        far_run_reset(r);
    }
    if (!write) {
        *val = ~0ULL;
    }
    return MEMTX_ERROR;
}

static MemTxResult far_cw_access(CXLShmState *s, hwaddr addr, unsigned size,
                                 bool write, uint64_t *val)
{
    CXLShmFar *f = s->far;
    uint64_t line = QEMU_ALIGN_DOWN(addr, CXLSHM_LINE);
    uint64_t word = QEMU_ALIGN_DOWN(addr, 8), mask = 0, v = 0, old = 0;
    int64_t now_ms = g_get_monotonic_time() / 1000;
    bool step, swap, mine;
    FarRunAccess *a;
    FarSlot *sl;
    FarRun *r;
    int st;

    trace_cxl_shm_far_coherent(s->host_id, addr, size, write);
    if (far_failed(s) || !qatomic_read(&f->started) || !far_cw_vcpu(s)) {
        return far_cw_fail(s, NULL, addr, write, val, "not a vCPU's");
    }
    if (write ? addr + size > word + 8 : addr + size > line + CXLSHM_LINE) {
        return far_cw_fail(s, NULL, addr, write, val, "across a word");
    }
    if (write) {
        mask = (size == 8 ? ~0ULL : (1ULL << (size * 8)) - 1) <<
               ((addr - word) * 8);
        v = (*val << ((addr - word) * 8)) & mask;
    }
    step = tcg_atomic_step_active();
    sl = far_slot(s);
    r = &sl->run;
    if (!cpu_io_insn_rerun(current_cpu)) {
        /* an instruction's first run: nothing done, it runs again */
        far_run_reset(r);
        r->since_ms = now_ms;
    } else if (r->pos < r->n) {
        a = &r->acc[r->pos];
        if (a->store == write && a->at == (write ? word : line) &&
            (!write || (a->value == v && a->mask == mask))) {
            r->pos++;
            if (!write) {
                *val = ldn_le_p(a->bytes + (addr - line), size);
            }
            return MEMTX_OK;
        }
        r->n = r->pos;          /* not what it did: from here on, anew */
    }
    if (r->refused) {
        return far_cw_fail(s, r, addr, write, val, "16-byte atomic");
    }
    if (step && !write && far_run_other_word(r, word)) {
        /*
         * An atomic's second load of another word: a 16-byte atomic
         * (cmpxchg16b), which a swap of 8 bytes cannot make atomic.  It
         * fails, loads and stores, rather than half land.
         */
        r->refused = true;
        qatomic_inc(&s->stats[CXLSHM_STAT_ERRORS]);
        error_report_once("cxl-shm: host %u: a 16-byte atomic on the "
                          "coherent window of a remote host fails (its "
                          "loads read all ones, its stores are dropped)",
                          s->host_id);
        return far_cw_fail(s, NULL, addr, write, val, "16-byte atomic");
    }
    if (cpu_io_insn_rerun(current_cpu) &&
        now_ms - r->since_ms > s->remote_timeout_ms) {
        /* the line stayed busy at the service: a completion timeout */
        return far_cw_fail(s, r, addr, write, val, "timeout");
    }
    swap = write && step && far_run_word(r, word, &old);

    st = qatomic_load_acquire(&sl->state);
    mine = far_own(sl) && sl->status != CXLSHM_WIRE_BUSY &&
           (write ? sl->kind == (swap ? FAR_CAS : FAR_STORE) &&
                    sl->off == word && sl->mask == mask &&
                    (swap ? sl->expect == old &&
                            sl->value == ((old & ~mask) | v) :
                            sl->value == v) :
                    sl->kind == FAR_LOAD && sl->off == line);
    if (st == FAR_QUEUED || st == FAR_INFLIGHT) {
        return far_cw_again(r);
    }
    if (st == FAR_DONE && mine && cpu_io_insn_rerun(current_cpu)) {
        qatomic_set(&sl->state, FAR_IDLE);
        if (sl->status != CXLSHM_WIRE_OK) {
            return far_cw_fail(s, r, addr, write, val, "refused or lost");
        }
        if (swap) {
            trace_cxl_shm_far_swap(s->host_id, word, old, sl->req.value0);
            if (sl->req.value0 != old) {
                /* another host's update came first: run again, anew */
                qatomic_inc(&s->stats[CXLSHM_STAT_RETRIES]);
                far_run_reset(r);
                return far_cw_again(r);
            }
            qatomic_inc(&s->stats[CXLSHM_STAT_NATIVE_OPS]);
        }
        if (r->n == FAR_RUN_MAX) {
            return far_cw_fail(s, r, addr, write, val, "too many accesses");
        }
        a = &r->acc[r->n++];
        r->pos = r->n;
        a->store = write;
        a->at = write ? word : line;
        a->value = write ? v : word;
        a->mask = mask;
        if (!write) {
            memcpy(a->bytes, sl->buf, CXLSHM_LINE);
            *val = ldn_le_p(sl->buf + (addr - line), size);
        }
        return MEMTX_OK;
    }
    if (st == FAR_DONE) {
        far_discard(s, sl);
    }
    memset(&sl->n, 0, sizeof(sl->n));
    sl->kind = swap ? FAR_CAS : write ? FAR_STORE : FAR_LOAD;
    sl->off = write ? word : line;
    sl->end = sl->off + (write ? 8 : CXLSHM_LINE);
    sl->nlines = 0;
    sl->wb_stage = false;
    sl->mask = mask;
    sl->expect = old;
    sl->value = swap ? (old & ~mask) | v : v;
    sl->seq++;
    far_queue(f, sl);
    return far_cw_again(r);
}

static MemTxResult far_cw_read(void *opaque, hwaddr addr, uint64_t *data,
                               unsigned size, MemTxAttrs attrs)
{
    return far_cw_access(opaque, addr, size, false, data);
}

static MemTxResult far_cw_write(void *opaque, hwaddr addr, uint64_t data,
                                unsigned size, MemTxAttrs attrs)
{
    return far_cw_access(opaque, addr, size, true, &data);
}

static const MemoryRegionOps far_cw_ops = {
    .read_with_attrs = far_cw_read,
    .write_with_attrs = far_cw_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 1,
        .max_access_size = 8,
        .unaligned = true,
    },
    .impl = {
        .min_access_size = 1,
        .max_access_size = 8,
        .unaligned = true,
    },
};

/* What a decoder maps: the coherent window's I/O, the image after it */
static void far_map(CXLShmState *s, CXLShmDirect *d)
{
    CXLShmFar *f = s->far;

    if (!f->regions) {
        memory_region_init(&f->whole, OBJECT(s), "cxl-shm-far", s->size);
        memory_region_init_alias(&f->rest, OBJECT(s), "cxl-shm-far-pool",
                                 s->pool_mr, 0, s->size);
        memory_region_add_subregion(&f->whole, 0, &f->rest);
        if (s->coherent_size) {
            memory_region_init_io(&f->coherent, OBJECT(s), &far_cw_ops, s,
                                  "cxl-shm-far-coherent", s->coherent_size);
            memory_region_add_subregion_overlap(&f->whole, 0, &f->coherent,
                                                1);
        }
        f->regions = true;
    }
    memory_region_init_alias(&d->alias, OBJECT(s), "cxl-shm-direct",
                             &f->whole, d->dpa, d->size);
    d->mr = &d->alias;
}

/*
 * A host reset (every vCPU outside guest code, the doorbell parked): the
 * lines it had not written back are lost, the image going back to its
 * twin (the pool as this host last fetched or wrote it).  It neither
 * leaves nor rejoins: that would wait for the service.
 */
static void far_reset(CXLShmState *s)
{
    const uint64_t chunk = 2 * MiB;
    unsigned char vi[512], vt[512];
    CXLShmFar *f = s->far;
    uint64_t o, p;
    size_t i;

    /*
     * the requests in flight are abandoned: their replies go nowhere; no
     * instruction runs again
     */
    qemu_mutex_lock(&f->lock);
    for (i = 0; i < f->nslots; i++) {
        far_abandon(&f->slot[i]);
        far_run_reset(&f->slot[i].run);
    }
    for (o = 0; o < s->nc_size; o += chunk) {
        uint64_t len = MIN(chunk, s->nc_size - o);
        bool known = mincore(s->image + o, len, vi) == 0 &&
                     mincore(s->twin + o, len, vt) == 0;

        for (i = 0, p = o; p < o + len; i++, p += CXLSHM_PAGE) {
            if ((!known || ((vi[i] | vt[i]) & 1)) &&
                memcmp(s->image + p, s->twin + p, CXLSHM_PAGE)) {
                memcpy(s->image + p, s->twin + p, CXLSHM_PAGE);
            }
        }
    }
    qemu_mutex_unlock(&f->lock);
    trace_cxl_shm_far_reset(s->host_id);
}

/*
 * An interrupt or exception delivery on @cpu: the operation its vCPU runs
 * next is the handler's, not the one its request was made for (see
 * far_own())
 */
static void far_interrupted(CXLShmState *s, CPUState *cpu)
{
    CXLShmFar *f = s->far;

    if (f->slot && cpu->cpu_index >= 0 &&
        (uint32_t)cpu->cpu_index < f->nslots - 2) {
        far_orphan(&f->slot[cpu->cpu_index]);
    }
}

static MemoryRegion *far_native_mr(CXLShmState *s, uint64_t *dpa_base)
{
    *dpa_base = s->coherent_size;
    return s->nc_size ? &s->image_mr : NULL;
}

static void far_latency(CXLShmState *s, uint32_t *read_ns, uint32_t *write_ns)
{
    *read_ns = *write_ns = qatomic_read(&s->latency_ns);
}

static bool far_check_props(CXLShmState *s, Error **errp)
{
    return cxl_shm_direct_mode.check_props(s, errp);
}

static const CXLShmModeOps far_mode = {
    .maps_ram = false,
    .fini = far_fini,
    .check_props = far_check_props,
    .reset = far_reset,
    .map = far_map,
    .native_mr = far_native_mr,
    .range = far_range,
    .whole = far_whole,
    .nt_land = far_nt_land,
    .interrupted = far_interrupted,
    .latency = far_latency,
};

static const CXLShmFarOps far_ops = {
    .check_props = far_check_remote,
    .join = far_join,
    .fill = far_fill,
    .start = far_start_thread,
    .leave = far_leave,
    .free = far_free,
    .failed = far_failed,
    .db_status = far_db_status,
    .mode = &far_mode,
};

static void far_register(void)
{
    cxl_shm_far_ops = &far_ops;
}

type_init(far_register)

/*
 * cxl-shm: a multi-host CXL 3.0 shared-memory pod device (cxlpod)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_CXLPOD_CXL_SHM_H
#define HW_CXLPOD_CXL_SHM_H

#include "hw/cxl/cxl.h"
#include "system/hostmem.h"
#include "qapi/qapi-types-cxl.h"
#include "qemu/notify.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "cxl-shm-line.h"
#include "cxl-shm-format.h"
#include "cxl-shm-doorbell.h"

#define TYPE_CXL_SHM "cxl-shm"
OBJECT_DECLARE_TYPE(CXLShmState, CXLShmClass, CXL_SHM)

#define CXLSHM_MAX_DECODERS     4
#define CXLSHM_PAGE             4096

/* clwb / clflushopt / non-temporal lines of one vCPU, until its next fence */
#define CXLSHM_QUEUE_LEN        512
#define CXLSHM_QUEUE_FLUSH      1ULL    /* low bits of an entry: flush, */
#define CXLSHM_QUEUE_NT         2ULL    /* non-temporal bytes (mask[]) */

typedef struct CXLShmQueue {
    uint32_t len;
    /* a whole-cache op that found a line busy: where it goes on from */
    int whole_op;               /* CXLSHM_LINE_* + 1, 0: none */
    uint64_t whole_from;
    uint64_t entry[CXLSHM_QUEUE_LEN];   /* line DPA | CXLSHM_QUEUE_* */
    uint64_t mask[CXLSHM_QUEUE_LEN];    /* CXLSHM_QUEUE_NT: bytes stored */
    uint64_t pc[CXLSHM_QUEUE_LEN];      /* the instruction's guest PC */
} CXLShmQueue;

typedef struct CXLShmDirect {
    bool mapped;
    MemoryRegion alias;         /* the pool's RAM, or mode=timed's region */
    MemoryRegion *mr;           /* what is mapped (&alias) */
    MemoryRegion *window;       /* the fixed memory window we are mapped in */
    hwaddr hpa;
    uint64_t dpa;
    uint64_t size;
} CXLShmDirect;

/* mode=timed: one way of the host's cache model */
typedef struct CXLShmWay {
    uint64_t tag;               /* CXLSHM_WAY_* flags | line index (DPA/64) */
    uint64_t stamp;             /* last use (LRU) */
    uint64_t dirty;             /* bit i: byte i stored by a cached store */
    uint64_t nt;                /* bit i: by a non-temporal store since */
    uint32_t epoch;             /* coherent: the filter entry's epoch then */
} CXLShmWay;

/* mode=timed: a vCPU's last access piece (MMIO accesses come in pieces) */
typedef struct CXLShmPiece {
    uintptr_t ra;               /* the access's insn (cpu_io_insn_id()) */
    uint64_t next;              /* the DPA a next piece of it would be at */
    bool stored;                /* a piece of it stored */
} CXLShmPiece;

#define CXLSHM_WAY_VALID        (1ULL << 63)
#define CXLSHM_WAY_REPORTED     (1ULL << 61)    /* a stale read was logged */
#define CXLSHM_WAY_LINE         ((1ULL << 40) - 1)

/* mode=timed defaults: a last-level cache share of a server CPU */
#define CXLSHM_TIMED_CACHE      (32 * MiB)
#define CXLSHM_TIMED_WAYS       16
#define CXLSHM_TIMED_SF         32768   /* snoop-filter entries */

typedef struct CXLShmTimed {
    /* properties */
    uint64_t cache_size;
    uint32_t cache_ways;
    uint32_t sf_entries;
    uint32_t hit_ns;
    uint32_t miss_ns;
    uint32_t wb_ns;
    uint32_t bi_ns;
    uint32_t snoop_ns;

    /* the host's cache: sets x ways, guarded by lock */
    QemuMutex lock;
    uint32_t sets;
    CXLShmWay *way;
    uint64_t clock;
    uint64_t accesses;
    /* the pod's snoop filter (pool metadata) */
    CXLPoolSnoopEntry *sf;
    CXLPoolSnoopHeader *sf_header;
    uint32_t sf_ways;
    /* bandwidth: the device's link is busy until then (ns) */
    int64_t busy_until;
    /* per vCPU: the coherent line lock held over an atomic's accesses */
    CXLShmLineLock *held;
    uint32_t nr_held;
    /* per vCPU: the access its last piece belonged to (timed_access()) */
    CXLShmPiece *piece;
    bool released;              /* cxl_shm_timed_fini() ran */
    MemoryRegion io;            /* the whole device; decoders alias it */
} CXLShmTimed;

/* What a starting device made of the pool file (undone if refused) */
typedef enum CXLShmPoolMade {
    CXLSHM_MADE_NOTHING,        /* it joined a pool that was there */
    CXLSHM_MADE_FILE,           /* it created the file */
    CXLSHM_MADE_IN_EMPTY,       /* it made a pool in a user's empty file */
    CXLSHM_MADE_IN_ZEROS,       /* in a zero-filled file (a new memdev's) */
} CXLShmPoolMade;

/* The events a device emits, each rate-limited (cxl-shm-log.c) */
typedef enum CXLShmEventKind {
    CXLSHM_EVENT_CONFLICT,
    CXLSHM_EVENT_STALE_READ,
    CXLSHM_EVENT__MAX,
} CXLShmEventKind;

#define CXLSHM_EVENT_BURST 256
#define CXLSHM_EVENT_RATE 100           /* per second after a burst */

typedef struct CXLShmEventLimit {
    int64_t stamp_ns;           /* tokens were last added */
    uint64_t tokens;
    uint64_t missed;            /* suppressed since the last one sent */
} CXLShmEventLimit;

/*
 * What mode=direct (cxl-shm-direct.c) and mode=timed (cxl-shm-timed*.c)
 * each do their own way; chosen once, from the mode property, before
 * the pool is touched (s->mode_ops).  The hooks that may be NULL say so.
 */
typedef struct CXLShmModeOps {
    /* the decoders map the pool's RAM (guest accesses do not trap) */
    bool maps_ram;
    /* the mode's properties, before the pool is touched */
    bool (*check_props)(CXLShmState *s, Error **errp);
    /* after the pool is joined and mapped, before the parent's realize */
    bool (*init)(CXLShmState *s, Error **errp);                 /* or NULL */
    /* unrealize or a failed realize: no new access starts (BQL held) */
    void (*fini)(CXLShmState *s);                                /* or NULL */
    /* after fini and a grace period, before the host leaves its pod */
    void (*release)(CXLShmState *s);                             /* or NULL */
    /* a host reset (cxl_shm_host_reset(): mode=timed's cache lock held) */
    void (*reset)(CXLShmState *s);                               /* or NULL */
    /* what a committed decoder maps over @d's range: sets d->mr */
    void (*map)(CXLShmState *s, CXLShmDirect *d);
    /*
     * the region whose guest cache maintenance the device hooks (the
     * leaf a mapped decoder's accesses reach), and the DPA of its offset 0
     */
    MemoryRegion *(*native_mr)(CXLShmState *s, uint64_t *dpa_base);
    /*
     * writeback / invalidate / flush of [off, off + len): how far it got
     * (off + len: all of it; less: the line there is another host's now,
     * the rest untouched, for the caller to retry)
     */
    uint64_t (*range)(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                      uint64_t len, CXLShmLineCount *n);
    /*
     * the same for the whole non-coherent area from DPA *@from on: false
     * if a line was busy (*@from: where to go on), true when done
     */
    bool (*whole)(CXLShmState *s, CXLShmLineOp op, uint64_t *from,
                  CXLShmLineCount *n);
    /* a non-temporal store of bytes @mask of the line at @off was made */
    void (*nt_store)(CXLShmState *s, uint64_t off, uint64_t mask); /* NULL */
    /* at a fence: a line's non-temporal bytes @mask reach the pool */
    bool (*nt_land)(CXLShmState *s, uint64_t off, uint64_t mask,
                    CXLShmLineCount *n);
    /*
     * an interrupt or exception delivery on @cpu (the BQL held): the
     * operation it runs next is not the one it left unfinished
     */
    void (*interrupted)(CXLShmState *s, CPUState *cpu);          /* NULL */
    /* the read and write latency the device reports (CDAT, registers) */
    void (*latency)(CXLShmState *s, uint32_t *read_ns, uint32_t *write_ns);
} CXLShmModeOps;

extern const CXLShmModeOps cxl_shm_direct_mode;
extern const CXLShmModeOps cxl_shm_timed_mode;

/* A host of a remote pool (cxl-shm-far.c) */
typedef struct CXLShmFar CXLShmFar;

struct CXLShmState {
    CXLType3Dev parent_obj;

    /* properties */
    char *pool_path;
    CxlShmMode mode;
    uint64_t size;
    uint64_t coherent_size;
    uint32_t host_id;
    uint32_t max_hosts;
    uint32_t latency_ns;
    uint32_t bandwidth_mbs;
    uint32_t pool_mode;
    CxlShmWriteback writeback;
    uint32_t evict_rate;
    uint64_t evict_seed;
    char *test_kill_at;         /* x-test-kill-at: qtest only */
    char *test_stop_at;         /* x-test-stop-at: qtest only */
    char *pool_key;             /* pool=ucx://: the pod's key file */
    uint32_t remote_timeout_ms; /* pool=ucx://: each request's bound */

    /* pool */
    int fd;
    uint8_t *meta;              /* the head: CXLPOOL_META_SIZE bytes */
    uint8_t *tail;              /* the tail: layout.tail_size bytes */
    CXLPoolLayout layout;
    CXLPoolHeader *hdr;
    CXLPoolHost *hosts;
    bool joined;
    uint64_t generation;
    bool memdev;                /* the data is the user's memdev */
    CXLShmPoolMade made;        /* what this start made, to undo if refused */
    mode_t made_old_mode;       /* the mode of a user's empty file */
    CXLPoolHost slot_before;    /* our host entry before this join */
    uint64_t peer_gen[CXLPOOL_MAX_HOSTS];   /* generations at this join */
    CXLShmFar *far;             /* a remote pool's host, or NULL */
    HostMemoryBackend *backend;
    MemoryRegion *pool_mr;
    uint8_t *pool;

    /* non-coherent area: private image and twin (pool at last fetch) */
    uint64_t nc_size;
    MemoryRegion image_mr;
    uint8_t *image;
    uint8_t *twin;

    /* line engine, deferred writeback, eviction, conflict report */
    CXLShmLines lines;
    bool wb_deferred;
    bool skip_unresident;       /* whole-area ops may skip absent pages */
    bool pool_hugetlbfs;        /* the pool file is on hugetlbfs */
    CXLShmQueue *queues;        /* one per possible vCPU */
    uint32_t nr_queues;
    QEMUTimer *evict_timer;
    uint64_t evict_state;
    uint32_t *evict_pages;      /* this millisecond's candidate pages */
    size_t evict_npages;
    uint32_t evict_left;        /* lines still to evict this millisecond */
    int64_t evict_period;       /* when this millisecond began */
    /* the events' source and rate limits (cxl-shm-log.c) */
    char *qom_path;
    QemuMutex event_lock;
    QemuMutex reap_lock;        /* one thread reaps dead hosts at a time */
    CXLShmEventLimit event_limit[CXLSHM_EVENT__MAX];
    bool reset_once;
    unsigned reset_pending;     /* host resets queued as a vCPU's safe work */

    /* the mode's operations; mode=timed's state (cxl-shm-timed.c) */
    const CXLShmModeOps *mode_ops;
    bool timed;
    CXLShmTimed t;

    /* direct mode */
    CXLShmDirect direct[CXLSHM_MAX_DECODERS];
    bool native_registered[CXLSHM_MAX_DECODERS];
    MemoryRegion *native_mr;    /* hooked since a decoder first mapped */
    Notifier route_notifier;    /* host bridge / switch decoder changes */
    uint64_t native_base;       /* the DPA of its offset 0 */
    bool atomics_ok;

    /* BAR5 and its doorbell (cxl-shm-doorbell.c) */
    MemoryRegion regs;
    CXLShmDoorbell db;
    uint64_t stats[CXLSHM_STAT_NR];

    QLIST_ENTRY(CXLShmState) live;  /* in the pod: cxl_shm_live */
    Error *migration_blocker;
    struct rcu_head release_rcu;    /* cxl_shm_exit() to cxl_shm_release() */
};

struct CXLShmClass {
    CXLType3Class parent_class;
    void (*parent_realize)(PCIDevice *dev, Error **errp);
    PCIUnregisterFunc *parent_exit;
    ResettablePhases parent_phases;
};

/*
 * A host of a remote pool (pool=ucx://ADDR:PORT), in cxl-shm-far.c,
 * which needs UCX: built, it sets cxl_shm_far_ops at start; without it
 * ucx:// is refused.  Only check_props and the mode are used while
 * s->far is NULL.
 */
typedef struct CXLShmFarOps {
    bool (*check_props)(CXLShmState *s, Error **errp);
    bool (*join)(CXLShmState *s, Error **errp);     /* realize, bounded */
    bool (*fill)(CXLShmState *s, Error **errp);     /* the image, bounded */
    void (*start)(CXLShmState *s, uint32_t nr_cpus);    /* its thread */
    void (*leave)(CXLShmState *s);                  /* exit, unrealize */
    void (*free)(CXLShmState *s);                   /* after the last use */
    bool (*failed)(CXLShmState *s);                 /* the service lost */
    /* the doorbell's op done: DB_STATUS (OK, LOST, ERROR), error cleared */
    uint32_t (*db_status)(CXLShmState *s);
    const CXLShmModeOps *mode;
} CXLShmFarOps;

extern const CXLShmFarOps *cxl_shm_far_ops;

static inline bool cxl_shm_far_wanted(CXLShmState *s)
{
    return s->pool_path && g_str_has_prefix(s->pool_path, "ucx://");
}

static inline bool cxl_shm_far_check_props(CXLShmState *s, Error **errp)
{
    if (cxl_shm_far_ops) {
        return cxl_shm_far_ops->check_props(s, errp);
    }
    if (cxl_shm_far_wanted(s) || s->pool_key) {
        error_setg(errp, "a remote pool (pool=ucx://, pool-key) is not in "
                   "this build of QEMU");
        return false;
    }
    return true;
}

static inline bool cxl_shm_far_failed(CXLShmState *s)
{
    return s->far && cxl_shm_far_ops->failed(s);
}

/* DB_STATUS of a doorbell op just done (0, OK, on a local host) */
static inline uint32_t cxl_shm_far_db_status(CXLShmState *s)
{
    return s->far ? cxl_shm_far_ops->db_status(s) : 0;
}

/* cxl-shm-doorbell.c: true on the doorbell's thread */
extern __thread bool cxl_shm_in_db_thread;

/* cxl-shm-pool.c */
bool cxl_shm_pool_join(CXLShmState *s, Error **errp);
void cxl_shm_pool_abort(CXLShmState *s);
void cxl_shm_pool_rejoin(CXLShmState *s);
void cxl_shm_pool_leave(CXLShmState *s, bool unmap);
void cxl_shm_pool_refresh_hosts(CXLShmState *s);
void cxl_shm_pool_sync_stats(CXLShmState *s);

uint64_t *cxl_shm_pool_xstat(CXLShmState *s, uint32_t host, int i);

/* The tail's area at file offset @off (a CXLPoolLayout field) */
static inline void *cxl_shm_pool_tail(CXLShmState *s, uint64_t off)
{
    return s->tail + (off - s->layout.tail);
}

/* cxl-shm-time.c: latency charged to the guest */
void cxl_shm_charge_ns(CXLShmState *s, int64_t ns);
void cxl_shm_charge_to(int64_t *sink);
void cxl_shm_pass_time(int64_t ns);
int64_t cxl_shm_now(void);

void cxl_shm_calibrate_wait(void);
void cxl_shm_charge(CXLShmState *s, uint64_t lines);

/* The line engine's counts of one operation, into the statistics */
static inline void cxl_shm_count(CXLShmState *s, const CXLShmLineCount *n)
{
    if (n->written) {
        qatomic_add(&s->stats[CXLSHM_STAT_WB_LINES], n->written);
    }
    if (n->fetched) {
        qatomic_add(&s->stats[CXLSHM_STAT_INV_LINES], n->fetched);
    }
    if (n->conflicts) {
        qatomic_add(&s->stats[CXLSHM_STAT_CONFLICTS], n->conflicts);
    }
}

/* cxl-shm-log.c */
void cxl_shm_events_init(CXLShmState *s);
void cxl_shm_events_fini(CXLShmState *s);
/* the PC of the access current_cpu is making, unwound when needed */
#define CXLSHM_PC_ACCESS UINT64_MAX
uint64_t cxl_shm_set_insn_pc(uint64_t pc);
uint64_t cxl_shm_access_pc(CPUState *cpu);
void cxl_shm_conflict(void *opaque, const CXLShmConflict *c);
void cxl_shm_stale_read(CXLShmState *s, uint64_t off, unsigned size,
                        uint64_t val, const uint8_t *stale,
                        const uint8_t *current, uint64_t pc);

/*
 * A coherence operation on [off, off + len) of the non-coherent area:
 * how far it got (off + len when done; see CXLShmModeOps::range)
 */
static inline uint64_t cxl_shm_range(CXLShmState *s, CXLShmLineOp op,
                                     uint64_t off, uint64_t len,
                                     CXLShmLineCount *n)
{
    return s->nc_size ? s->mode_ops->range(s, op, off, len, n) : off + len;
}

/*
 * cxl-shm-native.c: what the device needs of TCG.  Kept behind these
 * functions so that the device builds without the TCG side (the series
 * for upstream adds the device first, then its TCG path, with stubs).
 */
bool cxl_shm_native_built(void);
void cxl_shm_native_hook(MemoryRegion *mr, CXLShmState *s);
bool cxl_shm_require_parallel_atomics(Error **errp);

/* cxl-shm-icount.c: what the device needs of icount (the same) */
bool cxl_shm_icount_check(Error **errp);
void cxl_shm_icount_advance(int64_t ns);

/* cxl-shm-regs.c */
uint32_t cxl_shm_caps(CXLShmState *s);
void cxl_shm_regs_init(CXLShmState *s);

/* cxl-shm-map.c */
bool cxl_shm_mapped(CXLShmState *s);
bool cxl_shm_native_active(CXLShmState *s);
void cxl_shm_unmap(CXLShmState *s, int which);
void cxl_shm_unhook(CXLShmState *s);
void cxl_shm_unmap_all(CXLShmState *s);
void cxl_shm_hdm_changed(CXLType3Dev *ct3d, int which, bool committed);

/* cxl-shm-evict.c */
#define CXLSHM_EVICT_MAX        100000
void cxl_shm_evict_start(CXLShmState *s);
void cxl_shm_evict_stop(CXLShmState *s);

/* cxl-shm-cdat.c */
int cxl_shm_build_cdat(CDATSubHeader ***cdat_table, void *priv);
void cxl_shm_free_cdat(CDATSubHeader **cdat_table, int num, void *priv);
void cxl_shm_cdat_set_latency(CXLShmState *s);

/* cxl-shm-backend.c */
bool cxl_shm_check_memdev(CXLShmState *s, Error **errp);
bool cxl_shm_make_backend(CXLShmState *s, Error **errp);
void cxl_shm_drop_backend(CXLShmState *s);
void cxl_shm_load_image(CXLShmState *s);
size_t cxl_shm_seen_size(CXLShmState *s);
bool cxl_shm_make_image(CXLShmState *s, Error **errp);
void cxl_shm_drop_image(CXLShmState *s);
void cxl_shm_reload_image(CXLShmState *s);

/* cxl-shm-mbox.c */
void cxl_shm_restrict_mailbox(CXLShmState *s);
bool cxl_shm_set_cacheline(CXLType3Dev *ct3d, uint64_t dpa_offset,
                           uint8_t *data);

#endif

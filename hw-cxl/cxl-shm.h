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
#include "qemu/notify.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "system/cache-maint.h"
#include "cxl-shm-line.h"

#define TYPE_CXL_SHM "cxl-shm"
OBJECT_DECLARE_TYPE(CXLShmState, CXLShmClass, CXL_SHM)

/* Pool file format (docs/pool-format.md) */
#define CXLPOOL_MAGIC           "CXLPOOL\0"
#define CXLPOOL_VERSION         2
#define CXLPOOL_META_SIZE       (2 * MiB)
#define CXLPOOL_HEADER_SIZE     4096
#define CXLPOOL_HOSTS_OFFSET    0x1000
#define CXLPOOL_LINELOCK_OFFSET 0x10000     /* CXLSHM_NR_LOCKS x 8 bytes */
#define CXLPOOL_UNDO_OFFSET     0x20000     /* [host][bank][slot] undo */
#define CXLPOOL_LOCK_OFFSET     0x100000
#define CXLPOOL_LINE            CXLSHM_LINE
#define CXLPOOL_MAX_HOSTS       CXLSHM_MAX_HOSTS

enum {
    CXLPOOL_HOST_FREE = 0,
    CXLPOOL_HOST_LIVE = 1,
    CXLPOOL_HOST_FAILED = 2,
    CXLPOOL_HOST_LEFT = 3,
};

/* Per-host statistics, in this order in the pool's host table */
enum {
    CXLSHM_STAT_WB_OPS,
    CXLSHM_STAT_INV_OPS,
    CXLSHM_STAT_FLUSH_OPS,
    CXLSHM_STAT_WB_LINES,
    CXLSHM_STAT_INV_LINES,
    CXLSHM_STAT_NATIVE_OPS,
    CXLSHM_STAT_ERRORS,
    CXLSHM_STAT_CONFLICTS,      /* writebacks over another host's data */
    CXLSHM_STAT_EVICTED,        /* lines evicted (evict-rate) */
    CXLSHM_STAT_NT_LINES,       /* lines written by non-temporal stores */
    CXLSHM_STAT_DEFERRED,       /* clwb/clflushopt queued until a fence */
    CXLSHM_STAT_RESETS,         /* host resets (lines dropped, rejoined) */
    CXLSHM_STAT_NR,
};

typedef struct CXLPoolHeader {
    char magic[8];              /* 0x00 "CXLPOOL\0" */
    uint32_t version;           /* 0x08 */
    uint32_t header_size;       /* 0x0c */
    uint64_t meta_size;         /* 0x10 data starts here in the file */
    uint64_t data_size;         /* 0x18 */
    uint64_t coherent_size;     /* 0x20 */
    uint32_t line_size;         /* 0x28 */
    uint32_t max_hosts;         /* 0x2c */
    uint32_t hosts_offset;      /* 0x30 */
    uint32_t host_entry_size;   /* 0x34 */
    uint64_t lock_offset;       /* 0x38 */
    uint64_t create_time_ns;    /* 0x40 wall clock */
    uint32_t crc;               /* 0x48 crc32c of bytes [0, 0x48) */
    uint32_t reserved0;         /* 0x4c */
} CXLPoolHeader;

typedef struct CXLPoolHost {
    uint32_t state;             /* 0x00 CXLPOOL_HOST_* */
    uint32_t pid;               /* 0x04 */
    uint64_t generation;        /* 0x08 */
    uint64_t join_time_ns;      /* 0x10 */
    uint64_t leave_time_ns;     /* 0x18 */
    uint64_t stats[12];         /* 0x20 CXLSHM_STAT_* */
} CXLPoolHost;

#define CXLSHM_MAX_DECODERS     4

/* clwb / clflushopt / non-temporal lines of one vCPU, until its next fence */
#define CXLSHM_QUEUE_LEN        512
#define CXLSHM_QUEUE_FLUSH      1ULL    /* low bit of an entry: flush */

typedef struct CXLShmQueue {
    uint32_t len;
    uint64_t entry[CXLSHM_QUEUE_LEN];   /* line DPA | CXLSHM_QUEUE_FLUSH */
} CXLShmQueue;

typedef struct CXLShmDirect {
    bool mapped;
    MemoryRegion alias;
    MemoryRegion *window;       /* the fixed memory window we are mapped in */
    hwaddr hpa;
    uint64_t dpa;
    uint64_t size;
} CXLShmDirect;

struct CXLShmState {
    CXLType3Dev parent_obj;

    /* properties */
    char *pool_path;
    char *mode;
    uint64_t size;
    uint64_t coherent_size;
    uint32_t host_id;
    uint32_t max_hosts;
    uint32_t latency_ns;
    uint32_t bandwidth_mbs;
    uint32_t pool_mode;
    char *writeback;
    uint32_t evict_rate;
    uint64_t evict_seed;
    char *conflict_log;

    /* pool */
    int fd;
    uint8_t *meta;
    CXLPoolHeader *hdr;
    CXLPoolHost *hosts;
    bool joined;
    uint64_t generation;
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
    CXLShmQueue *queues;        /* one per possible vCPU */
    uint32_t nr_queues;
    QEMUTimer *evict_timer;
    uint64_t evict_state;
    FILE *conflict_fp;
    QemuMutex conflict_lock;
    bool reset_once;

    /* direct mode */
    CXLShmDirect direct[CXLSHM_MAX_DECODERS];
    bool native_registered[CXLSHM_MAX_DECODERS];
    bool atomics_ok;

    /* BAR5 */
    MemoryRegion regs;
    uint64_t db_offset;
    uint64_t db_len;
    uint64_t db_lines;
    uint32_t db_status;
    uint64_t stats[CXLSHM_STAT_NR];

    Notifier exit_notifier;
    Error *migration_blocker;
};

struct CXLShmClass {
    CXLType3Class parent_class;
    void (*parent_realize)(PCIDevice *dev, Error **errp);
    PCIUnregisterFunc *parent_exit;
    DeviceReset parent_reset;
};

/* cxl-shm-pool.c */
bool cxl_shm_pool_join(CXLShmState *s, Error **errp);
void cxl_shm_pool_rejoin(CXLShmState *s);
void cxl_shm_pool_leave(CXLShmState *s);
void cxl_shm_pool_refresh_hosts(CXLShmState *s);
void cxl_shm_pool_sync_stats(CXLShmState *s);
const char *cxl_shm_host_state_name(uint32_t state);

/* cxl-shm.c */
uint32_t cxl_shm_caps(CXLShmState *s);
bool cxl_shm_direct_active(CXLShmState *s);

#endif

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
#include "cxl-shm-format.h"

#define TYPE_CXL_SHM "cxl-shm"
OBJECT_DECLARE_TYPE(CXLShmState, CXLShmClass, CXL_SHM)

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

/* What a starting device made of the pool file (undone if refused) */
typedef enum CXLShmPoolMade {
    CXLSHM_MADE_NOTHING,        /* it joined a pool that was there */
    CXLSHM_MADE_FILE,           /* it created the file */
    CXLSHM_MADE_IN_EMPTY,       /* it made a pool in a user's empty file */
    CXLSHM_MADE_IN_ZEROS,       /* in a zero-filled file (a new memdev's) */
} CXLShmPoolMade;

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
    bool memdev;                /* the data is the user's memdev */
    CXLShmPoolMade made;        /* what this start made, to undo if refused */
    mode_t made_old_mode;       /* the mode of a user's empty file */
    CXLPoolHost slot_before;    /* our host entry before this join */
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
void cxl_shm_pool_abort(CXLShmState *s);
void cxl_shm_pool_rejoin(CXLShmState *s);
void cxl_shm_pool_leave(CXLShmState *s);
void cxl_shm_pool_refresh_hosts(CXLShmState *s);
void cxl_shm_pool_sync_stats(CXLShmState *s);

/* cxl-shm.c */
uint32_t cxl_shm_caps(CXLShmState *s);
bool cxl_shm_direct_active(CXLShmState *s);

#endif

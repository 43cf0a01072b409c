/*
 * cxl-shm: mode=timed, what the cache model's files share
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_CXLPOD_CXL_SHM_TIMED_H
#define HW_CXLPOD_CXL_SHM_TIMED_H

#include "cxl-shm.h"

/* A snoop filter entry's first word (pool metadata, CXLPoolSnoopEntry) */
#define SF_VALID                (1ULL << 63)
#define SF_TAG_SHIFT            42
#define SF_TAG_MASK             0x1fffffULL
#define SF_AGE_SHIFT            38
#define SF_AGE_MAX              15ULL
#define SF_OWNER_MASK           0x1ffULL       /* the owner + 1, bits 0..8 */
#define SF_EPOCH_SHIFT          9              /* stores to the line, 9..37 */
#define SF_EPOCH_MASK           0x1fffffffULL

static inline uint32_t sf_epoch(uint64_t e)
{
    return (e >> SF_EPOCH_SHIFT) & SF_EPOCH_MASK;
}

/*
 * What names a copy's entry: valid, tag and epoch; not the age and owner,
 * which other hosts' accesses move without making a copy stale
 */
#define SF_IDENT_MASK \
    (~((SF_AGE_MAX << SF_AGE_SHIFT) | SF_OWNER_MASK))

/* The holders bit of host @h: h % 64 (coarse beyond 64 hosts) */
static inline uint64_t sf_bit(uint32_t h)
{
    return 1ULL << (h % 64);
}

/* What one access or operation costs, summed and charged at its end */
typedef struct Cost {
    int64_t ns;
    uint64_t moved;             /* lines over the link (bandwidth) */
} Cost;

static inline void stat_add(CXLShmState *s, int i, uint64_t v)
{
    if (v) {
        qatomic_add(&s->stats[i], v);
    }
}

/* The cache model */

static inline CXLShmWay *cache_set(CXLShmTimed *t, uint64_t line)
{
    return &t->way[(line % t->sets) * t->cache_ways];
}

static inline CXLShmWay *cache_find(CXLShmTimed *t, uint64_t line)
{
    CXLShmWay *set = cache_set(t, line);
    uint32_t i;

    for (i = 0; i < t->cache_ways; i++) {
        if ((set[i].tag & (CXLSHM_WAY_VALID | CXLSHM_WAY_LINE)) ==
            (CXLSHM_WAY_VALID | line)) {
            return &set[i];
        }
    }
    return NULL;
}

static inline uint64_t way_line(const CXLShmWay *w)
{
    return w->tag & CXLSHM_WAY_LINE;
}

/* cxl-shm-timed.c */
void cxl_shm_timed_moved(CXLShmState *s, Cost *c);
bool cxl_shm_way_writeback(CXLShmState *s, CXLShmWay *w, CXLShmLineLock *held,
                           CXLShmLineCount *n);

/* cxl-shm-timed-ops.c: mode=timed's coherence operations */
uint64_t cxl_shm_timed_range(CXLShmState *s, CXLShmLineOp op, uint64_t off,
                             uint64_t len, CXLShmLineCount *n);
bool cxl_shm_timed_whole(CXLShmState *s, CXLShmLineOp op, uint64_t *from,
                         CXLShmLineCount *n);
void cxl_shm_timed_reset(CXLShmState *s);
void cxl_shm_timed_nt_store(CXLShmState *s, uint64_t off, uint64_t mask);
bool cxl_shm_timed_nt_land(CXLShmState *s, uint64_t off, uint64_t mask,
                           CXLShmLineCount *n);
void cxl_shm_timed_latency(CXLShmState *s, uint32_t *read_ns,
                           uint32_t *write_ns);

/* cxl-shm-snoop.c */
CXLPoolSnoopEntry *cxl_shm_sf_set(CXLShmState *s, uint64_t off);
uint64_t cxl_shm_sf_tag(uint64_t off);
int cxl_shm_sf_find(CXLShmState *s, const CXLPoolSnoopEntry *set,
                    uint64_t tag, uint64_t *word);
void cxl_shm_sf_touch(CXLShmState *s, CXLPoolSnoopEntry *set, int i);
int cxl_shm_sf_insert(CXLShmState *s, CXLPoolSnoopEntry *set, uint64_t tag,
                      uint64_t off, Cost *c);
uint64_t cxl_shm_sf_live(CXLShmState *s, uint64_t bits);
bool cxl_shm_sf_classmates(CXLShmState *s);
uint64_t cxl_shm_sf_new_epoch(CXLShmState *s, uint64_t e);
void cxl_shm_sf_forget_me(CXLShmState *s);
bool cxl_shm_sf_join(CXLShmState *s, Error **errp);

#endif

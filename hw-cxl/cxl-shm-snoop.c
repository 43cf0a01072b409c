/*
 * cxl-shm: mode=timed, the pod's snoop filter in the pool's metadata
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Shared by the hosts: which hosts hold each coherent line and which one
 * holds it modified (cxl-shm-timed.c describes the model).
 */

#include "qemu/osdep.h"
#include "qemu/host-utils.h"
#include "qapi/error.h"
#include "cxl-shm.h"
#include "cxl-shm-timed.h"
#include "trace.h"

/*
 * Set (line % 8192), indexed by the line address as a snoop filter's is,
 * guarded by the coherent line's own lock word (cxl_shm_lines_trylock());
 * the tag is the rest of the line number (21 bits: a 1 TiB pool).
 */
CXLPoolSnoopEntry *cxl_shm_sf_set(CXLShmState *s, uint64_t off)
{
    return &s->t.sf[((off / CXLSHM_LINE) % CXLSHM_NR_LOCKS) * s->t.sf_ways];
}

uint64_t cxl_shm_sf_tag(uint64_t off)
{
    return (off / CXLSHM_LINE / CXLSHM_NR_LOCKS) & SF_TAG_MASK;
}

/* The way of @tag in @set, its first word in *@word; -1 if none */
int cxl_shm_sf_find(CXLShmState *s, const CXLPoolSnoopEntry *set,
                    uint64_t tag, uint64_t *word)
{
    uint32_t i;

    for (i = 0; i < s->t.sf_ways; i++) {
        uint64_t e = qatomic_read(&set[i].tag);

        if ((e & SF_VALID) && ((e >> SF_TAG_SHIFT) & SF_TAG_MASK) == tag) {
            *word = e;
            return i;
        }
    }
    return -1;
}

/* Entry @i was used: it is the youngest of its set; lock held */
void cxl_shm_sf_touch(CXLShmState *s, CXLPoolSnoopEntry *set, int i)
{
    uint32_t j;

    for (j = 0; j < s->t.sf_ways; j++) {
        uint64_t e = set[j].tag;
        uint64_t age = (e >> SF_AGE_SHIFT) & SF_AGE_MAX;

        if (j == i) {
            age = 0;
        } else if ((e & SF_VALID) && age < SF_AGE_MAX) {
            age++;
        }
        e = (e & ~(SF_AGE_MAX << SF_AGE_SHIFT)) | age << SF_AGE_SHIFT;
        qatomic_set(&set[j].tag, e);
    }
}

/*
 * A free entry for @tag, evicting the oldest one of a full set from every
 * host that holds it (each such host counts as back-invalidated: its next
 * access to that line misses); lock held.
 */
int cxl_shm_sf_insert(CXLShmState *s, CXLPoolSnoopEntry *set, uint64_t tag,
                      uint64_t off, Cost *c)
{
    uint32_t i, victim = 0;
    uint64_t oldest = 0, holders;

    for (i = 0; i < s->t.sf_ways; i++) {
        uint64_t e = set[i].tag, age = (e >> SF_AGE_SHIFT) & SF_AGE_MAX;

        if (!(e & SF_VALID)) {
            victim = i;
            goto take;
        }
        if (age > oldest || i == 0) {
            oldest = age;
            victim = i;
        }
    }
    holders = cxl_shm_sf_live(s, set[victim].holders);
    qatomic_inc(&s->stats[CXLSHM_STAT_SF_EVICTIONS]);
    stat_add(s, CXLSHM_STAT_BACK_INVAL, ctpop64(holders));
    if (holders) {
        c->ns += qatomic_read(&s->t.bi_ns);
    }
    trace_cxl_shm_timed_sf_evict(s->host_id, off, holders);
take:
    qatomic_set(&set[victim].holders, 0);
    smp_wmb();      /* a lock-free reader re-reads the tag after holders */
    qatomic_set(&set[victim].tag,
                cxl_shm_sf_new_epoch(s, SF_VALID | tag << SF_TAG_SHIFT));
    return victim;
}

/*
 * @e with an epoch no copy can have: the pod's count of epochs handed
 * out (new entries and stores alike), so that an entry made again for a
 * line never takes the epoch a store gave an earlier one
 */
uint64_t cxl_shm_sf_new_epoch(CXLShmState *s, uint64_t e)
{
    uint64_t n = qatomic_fetch_inc(&s->t.sf_header->inserts);

    return (e & ~(SF_EPOCH_MASK << SF_EPOCH_SHIFT)) |
           (n & SF_EPOCH_MASK) << SF_EPOCH_SHIFT;
}

/*
 * Whether a host of holders bit @b other than this one is live in the
 * pool's table (hosts b, b + 64, ...: one host up to 64 hosts)
 */
static bool sf_class_live(CXLShmState *s, uint64_t b)
{
    uint32_t h;

    for (h = b; h < s->max_hosts; h += 64) {
        if (h != s->host_id &&
            qatomic_read(&s->hosts[h].state) == CXLPOOL_HOST_LIVE) {
            return true;
        }
    }
    return false;
}

/* Whether a host sharing this host's holders bit is live (past 64 hosts) */
bool cxl_shm_sf_classmates(CXLShmState *s)
{
    return sf_class_live(s, s->host_id % 64);
}

/*
 * The holders bits among @bits that stand for a live host (this host's
 * always does): hosts that left or died hold nothing.  Only the bits
 * asked about are looked up, so a line one or two hosts hold costs one
 * or two reads of the host table, whatever the pod's size.
 */
uint64_t cxl_shm_sf_live(CXLShmState *s, uint64_t bits)
{
    uint64_t live = bits & sf_bit(s->host_id), rest = bits & ~live;

    while (rest) {
        uint32_t b = ctz64(rest);

        rest &= rest - 1;
        if (sf_class_live(s, b)) {
            live |= 1ULL << b;
        }
    }
    return live;
}

/*
 * This host's (earlier lives') marks in the filter: gone, at its join and
 * at each reset, in each set whose lock (coherent line i: lock word i,
 * coherent-size >= 2 MiB here) is free now: never a wait, under the BQL
 * and the cache lock.  A set whose lock another host keeps (it may be
 * stopped) keeps this host's marks, as a filter does after a host
 * dropped its lines silently: another host's store there counts a
 * back-invalidate of this host, its read a snoop, until the entry is
 * stored to or evicted.
 */
void cxl_shm_sf_forget_me(CXLShmState *s)
{
    uint64_t me;
    uint32_t i, j, busy = 0;

    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        CXLPoolSnoopEntry *set = &s->t.sf[i * s->t.sf_ways];
        CXLShmLineLock h;

        if (!cxl_shm_lines_trylock(&s->lines, i * CXLSHM_LINE, &h, false)) {
            busy++;
            continue;
        }
        /*
         * Past 64 hosts the bit stands for this host's live classmates
         * too: it stays while one of them is live, as a coarse filter
         * cannot tell which host of the class dropped its lines.  Looked
         * at under the set's lock: a classmate that stores here holds it
         * and is live before it does.
         */
        me = cxl_shm_sf_classmates(s) ? 0 : sf_bit(s->host_id);
        for (j = 0; j < s->t.sf_ways; j++) {
            uint64_t e = set[j].tag;

            if (!(e & SF_VALID)) {
                continue;
            }
            if ((e & SF_OWNER_MASK) == s->host_id + 1) {
                qatomic_set(&set[j].tag, e & ~SF_OWNER_MASK);
            }
            qatomic_set(&set[j].holders, set[j].holders & ~me);
        }
        cxl_shm_lines_unlock(&s->lines, &h);
    }
    if (busy) {
        trace_cxl_shm_timed_sf_stale(s->host_id, busy);
    }
}

/*
 * The pod's snoop filter: its size is fixed by the first mode=timed host
 * that joins the pool (under the pool's flock); later ones must agree.
 */
bool cxl_shm_sf_join(CXLShmState *s, Error **errp)
{
    ERRP_GUARD();
    CXLPoolSnoopHeader *sh = cxl_shm_pool_tail(s, s->layout.sf_header);
    CXLPoolSnoopEntry *sf = cxl_shm_pool_tail(s, s->layout.sf_entries);
    uint32_t ways = s->t.sf_entries / CXLSHM_NR_LOCKS;
    bool ok = true;

    cxlpool_flock(s->fd, LOCK_EX);
    if (qatomic_read(&sh->magic) != CXLPOOL_SF_MAGIC) {
        memset(sf, 0, (size_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS *
               sizeof(*sf));
        qatomic_set(&sh->ways, ways);
        qatomic_set(&sh->inserts, 0);
        smp_wmb();  /* the entries and ways are set before the magic */
        qatomic_set(&sh->magic, CXLPOOL_SF_MAGIC);
    } else if (qatomic_read(&sh->ways) != ways) {
        error_setg(errp, "property 'snoop-filter-entries' is %u, "
                   "but the pod's snoop filter has %" PRIu64 " entries (set "
                   "by the first mode=timed host; every host of a pool must "
                   "agree)", s->t.sf_entries,
                   qatomic_read(&sh->ways) * CXLSHM_NR_LOCKS);
        error_append_hint(errp, "Use snoop-filter-entries=%" PRIu64 ", or "
                          "make a new pool.\n",
                          qatomic_read(&sh->ways) * CXLSHM_NR_LOCKS);
        ok = false;
    }
    cxlpool_flock(s->fd, LOCK_UN);
    if (ok) {
        s->t.sf = sf;
        s->t.sf_header = sh;
        s->t.sf_ways = ways;
    }
    return ok;
}

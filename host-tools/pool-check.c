/*
 * cxlpod-pool check: every invariant of the format, what is wrong and
 * how to recover
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "pool.h"

typedef struct Report {
    int problems;
    int notes;
} Report;

static G_GNUC_PRINTF(3, 4) void problem(Report *r, const char *recovery,
                                        const char *fmt, ...)
{
    va_list ap;

    printf("problem: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n  recovery: %s\n", recovery);
    r->problems++;
}

static G_GNUC_PRINTF(2, 3) void note(Report *r, const char *fmt, ...)
{
    va_list ap;

    printf("note: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    r->notes++;
}

static void check_hosts(Pool *p, Report *r)
{
    uint32_t i;

    for (i = 0; i < p->nr_hosts; i++) {
        CXLPoolHost *e = &p->hosts[i];
        uint32_t state = qatomic_read(&e->state);
        const char *name = cxlpool_host_state_name(state);
        bool locked = cxlpool_host_locked(p->fd, i);
        g_autofree char *reset = g_strdup_printf(
            "stop any QEMU of host %u, then 'cxlpod-pool reset-host %u %s'",
            i, i, p->path);

        if (state > CXLPOOL_HOST_LEFT) {
            problem(r, reset, "host %u has state %u (allowed: 0 free, 1 live, "
                    "2 failed, 3 left)", i, state);
            continue;
        }
        if (state != CXLPOOL_HOST_FREE && e->generation == 0) {
            problem(r, reset, "host %u is %s but has generation 0 (it never "
                    "joined)", i, name);
        }
        if (state == CXLPOOL_HOST_LIVE && e->leave_time_ns) {
            problem(r, reset, "host %u is live but has a leave time", i);
        }
        if (state == CXLPOOL_HOST_LEFT && !e->leave_time_ns) {
            if (e->join_time_ns && !locked) {
                /* a join writes pid, join time, leave time 0, generation */
                note(r, "host %u (pid %u) was stopped half-way through "
                     "joining (generation %" PRIu64 " taken, never live); "
                     "its next join is generation %" PRIu64, i, e->pid,
                     e->generation, e->generation + 1);
            } else if (!e->join_time_ns) {
                problem(r, reset, "host %u has left but has no leave time",
                        i);
            }
        }
        if (state == CXLPOOL_HOST_LIVE && !locked) {
            note(r, "host %u (pid %u, generation %" PRIu64 ") died without "
                 "leaving: the table says live but its liveness lock is "
                 "free; the next host start marks it failed, or run "
                 "'cxlpod-pool reset-host %u %s'", i, e->pid, e->generation,
                 i, p->path);
        } else if (state != CXLPOOL_HOST_LIVE && locked) {
            note(r, "host %u is %s but its liveness lock is held: a QEMU is "
                 "joining it right now, or was stopped while joining", i,
                 name);
        } else if (state == CXLPOOL_HOST_FAILED) {
            note(r, "host %u (generation %" PRIu64 ") failed; it rejoins "
                 "with generation %" PRIu64, i, e->generation,
                 e->generation + 1);
        }
    }
}

static void check_locks(Pool *p, Report *r)
{
    uint64_t *locks = (uint64_t *)(p->meta + CXLPOOL_LINELOCK_OFFSET);
    CXLShmUndo *undo = pool_tail(p, p->lo.undo);
    g_autofree char *wipe = g_strdup_printf(
        "the metadata was written by something other than cxlpod: stop "
        "every host, then 'cxlpod-pool wipe %s' (the data is lost) or make "
        "a new pool", p->path);
    unsigned i, dead = 0, pending = 0;

    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        uint64_t w = qatomic_read(&locks[i]);

        if (!w) {
            continue;
        }
        if (!(w & CXLPOOL_TAG_HELD) ||
            CXLPOOL_TAG_HOST(w) >= p->hdr->max_hosts ||
            CXLPOOL_TAG_SLOT(w) >= CXLSHM_UNDO_SLOTS) {
            problem(r, wipe, "line lock word %u is 0x%016" PRIx64 ", not a "
                    "lock tag of a host of this pool", i, w);
        } else if (!owner_alive(p, w)) {
            dead++;
        }
    }
    for (i = 0; i < pool_undo_slots(p); i++) {
        uint64_t a = qatomic_read(&undo[i].armed);

        if (!a) {
            continue;
        }
        if (!(a & CXLPOOL_TAG_HELD) ||
            CXLPOOL_TAG_HOST(a) != i / (2 * CXLSHM_UNDO_SLOTS) ||
            undo[i].offset >= p->hdr->data_size) {
            problem(r, wipe, "undo slot %u is armed with 0x%016" PRIx64
                    " (offset 0x%" PRIx64 "), not a write of its host", i, a,
                    undo[i].offset);
        } else if (!owner_alive(p, a)) {
            pending++;
        }
    }
    if (dead || pending) {
        note(r, "%u line locks and %u unfinished line writes belong to dead "
             "hosts: the next host that needs those pages takes the locks "
             "over and rolls the writes back (nothing to do)", dead, pending);
    }
}

#define RESERVED_RECOVERY \
    "something other than cxlpod wrote the metadata; the hosts do not read " \
    "this area, so they still start: find the writer, and make a new pool " \
    "if in doubt"

/*
 * The lock turns: each entry's waiting bitmap names hosts of this pool
 * only, and its last word a host + 1 of this pool or 0 (a live pod sets
 * them; they need not be zero)
 */
static void check_turns(Pool *p, Report *r)
{
    const uint64_t *t = pool_tail(p, p->lo.turns);
    uint32_t nw = p->lo.turn_words - 1, i, w;

    for (i = 0; i < CXLSHM_NR_LOCKS; i++, t += p->lo.turn_words) {
        bool bad = qatomic_read(&t[nw]) > p->nr_hosts;

        for (w = 0; w < nw && !bad; w++) {
            uint64_t bits = qatomic_read(&t[w]);

            bad = w * 64 + 64 > p->nr_hosts &&
                  (bits >> (p->nr_hosts - w * 64));
        }
        if (bad) {
            problem(r, "something other than cxlpod wrote the lock turns; "
                    "a stale turn costs a lock at most 5 ms, so the hosts "
                    "still start: find the writer",
                    "lock turn entry %u (byte 0x%" PRIx64 ") names a host "
                    "beyond max-hosts %u", i,
                    p->lo.turns + (uint64_t)i * p->lo.turn_words * 8,
                    p->nr_hosts);
            return;
        }
    }
}

/* The byte at file offset @k of the head or the tail */
static uint8_t meta_byte(Pool *p, uint64_t k)
{
    return k < CXLPOOL_META_SIZE ? p->meta[k] : *(uint8_t *)pool_tail(p, k);
}

/* The first non-zero byte of [start, end) of the head or the tail, or end */
static uint64_t first_nonzero(Pool *p, uint64_t start, uint64_t end)
{
    uint64_t k;

    for (k = start; k < end && !meta_byte(p, k); k++) {
    }
    return k;
}

/* Where format version 3 kept what version 4 keeps in the tail */
static const struct {
    uint64_t start, end;
    const char *what;
} v3_areas[] = {
    { POOL_V3_HOSTS, POOL_V3_HOSTS_END, "host table" },
    { POOL_V3_UNDO, POOL_V3_UNDO_END, "undo slots" },
    { POOL_V3_TURNS, POOL_V3_XSTATS_END, "lock turns and extended statistics" },
    { POOL_V3_SF, POOL_V3_SF_END, "snoop filter" },
};

/*
 * Metadata no cxlpod code writes: must be zero.  The areas the device
 * writes lie between these gaps: in the head the line locks, page
 * versions (and the liveness bytes, only ever locked; the line locks end
 * where version 3's undo slots begin); in the tail the
 * host table, extended statistics, undo slots, lock turns, the snoop
 * filter's header and entries (checked by check_snoop_filter()).  The
 * areas format version 3 used in the head are zero in a new pool and
 * zeroed by the last step of 'cxlpod-pool upgrade': bytes there are a
 * note (an upgrade stopped before that step), not a problem.
 */
static void check_reserved(Pool *p, Report *r)
{
    const CXLPoolLayout *lo = &p->lo;
    uint64_t n = p->nr_hosts;
    const struct {
        uint64_t start, end;
        const char *what;
    } areas[] = {
        { sizeof(CXLPoolHeader), POOL_V3_HOSTS,
          "the rest of the header page" },
        { POOL_V3_HOSTS_END, CXLPOOL_LINELOCK_OFFSET,
          "the space before the line locks" },
        { POOL_V3_XSTATS_END, CXLPOOL_LOCK_OFFSET,
          "the space after the page versions" },
        { CXLPOOL_LOCK_OFFSET, POOL_V3_SF,
          "the liveness lock bytes (only ever locked)" },
        { POOL_V3_SF_END, CXLPOOL_META_SIZE, "the end of the head" },
        { lo->hosts + n * sizeof(CXLPoolHost), lo->xstats,
          "the space after the host table" },
        { lo->xstats + n * CXLPOOL_XSTATS_PER_HOST * 8, lo->undo,
          "the space after the extended statistics" },
        /* undo slots, turns and the filter's header follow each other */
        { lo->sf_header + sizeof(CXLPoolSnoopHeader), lo->sf_entries,
          "the rest of the snoop filter header page" },
        { lo->sf_entries + (uint64_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS *
          sizeof(CXLPoolSnoopEntry), lo->tail + lo->tail_size,
          "the space after the snoop filter" },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(areas); i++) {
        uint64_t k = first_nonzero(p, areas[i].start, areas[i].end);

        if (k < areas[i].end) {
            problem(r, RESERVED_RECOVERY, "metadata no cxlpod code writes is "
                    "not zero: %s (byte 0x%" PRIx64 " is 0x%02x)",
                    areas[i].what, k, meta_byte(p, k));
        }
    }
    for (i = 0; i < G_N_ELEMENTS(v3_areas); i++) {
        uint64_t k = first_nonzero(p, v3_areas[i].start, v3_areas[i].end);

        if (k < v3_areas[i].end) {
            note(r, "the %s of format version 3 (0x%" PRIx64 "..0x%" PRIx64
                 ") is not zero (byte 0x%" PRIx64 " is 0x%02x): an upgrade "
                 "was stopped before it cleared it, or something other than "
                 "cxlpod wrote it; no host reads it, and 'cxlpod-pool upgrade "
                 "%s' clears it", v3_areas[i].what, v3_areas[i].start,
                 v3_areas[i].end, k, p->meta[k], p->path);
        }
    }
}

#define SF_RESET_RECOVERY \
    "something other than cxlpod wrote the snoop filter; the next mode=timed " \
    "host zeroes it and sets it up again, so the hosts still start: find " \
    "the writer"
/* An entry's first word (docs/pool-format.md, "Snoop filter") */
#define SF_VALID                (1ULL << 63)
#define SF_OWNER_MASK           0x1ffULL        /* owner + 1, bits 0..8 */

/* The first non-zero snoop-filter entry from @from on, or the end */
static uint64_t first_entry(const CXLPoolSnoopEntry *sf, uint64_t from)
{
    uint64_t n = (uint64_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS;

    while (from < n && !qatomic_read(&sf[from].tag) &&
           !qatomic_read(&sf[from].holders)) {
        from++;
    }
    return from;
}

/*
 * The entries of a set-up filter: an invalid entry is zero (the device
 * writes an entry only when it makes it valid); a valid one has an owner
 * of this pool (bits 9..41, the epoch and age, take any value)
 */
static void check_sf_entries(Pool *p, Report *r, const CXLPoolSnoopEntry *sf,
                             uint64_t n)
{
    uint64_t e;

    for (e = 0; e < n; e++) {
        uint64_t t = qatomic_read(&sf[e].tag);
        uint64_t h = qatomic_read(&sf[e].holders);

        if (!t && !h) {
            continue;
        }
        if (!(t & SF_VALID) ||
            (t & SF_OWNER_MASK) > p->nr_hosts ||
            (p->nr_hosts < 64 && (h >> p->nr_hosts))) {
            problem(r, SF_RESET_RECOVERY, "snoop filter entry %" PRIu64
                    " (byte 0x%" PRIx64 ") is 0x%016" PRIx64 " 0x%016"
                    PRIx64 ": not an entry of a host of this pool", e,
                    p->lo.sf_entries + e * sizeof(*sf), t, h);
            return;
        }
    }
}

/*
 * The snoop filter (mode=timed): the first timed host zeroes the entries,
 * writes ways and then the magic; a later timed host of another size is
 * refused, and one that finds another magic sets the filter up again.
 */
static void check_snoop_filter(Pool *p, Report *r)
{
    CXLPoolSnoopHeader *sh = pool_tail(p, p->lo.sf_header);
    const CXLPoolSnoopEntry *sf = pool_tail(p, p->lo.sf_entries);
    uint64_t magic = qatomic_read(&sh->magic);
    uint64_t ways = qatomic_read(&sh->ways);
    uint64_t n = (uint64_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS, e;
    g_autofree char *wipe = g_strdup_printf(
        "stop every host, then 'cxlpod-pool wipe %s' (clears the filter; the "
        "data is lost) or make a new pool", p->path);

    if (magic == 0) {
        /* no timed host joined, or one was stopped while setting it up */
        e = first_entry(sf, 0);
        if (e < n) {
            problem(r, SF_RESET_RECOVERY, "the snoop filter is not set up "
                    "(no magic) but entry %" PRIu64 " is 0x%016" PRIx64
                    " 0x%016" PRIx64 ": the device zeroes the entries "
                    "before it writes the magic", e,
                    qatomic_read(&sf[e].tag), qatomic_read(&sf[e].holders));
        }
    } else if (magic != CXLPOOL_SF_MAGIC) {
        problem(r, SF_RESET_RECOVERY, "the snoop filter header has magic "
                "0x%016" PRIx64 " (allowed: 0, or 0x%016" PRIx64
                " \"3SFSNOOP\")", magic, (uint64_t)CXLPOOL_SF_MAGIC);
    } else if (ways < 1 || ways > CXLPOOL_SF_MAX_WAYS) {
        problem(r, wipe, "the snoop filter has %" PRIu64 " ways (allowed: "
                "1..%d): every mode=timed host is refused", ways,
                CXLPOOL_SF_MAX_WAYS);
    } else {
        check_sf_entries(p, r, sf, ways * CXLSHM_NR_LOCKS);
        e = first_entry(sf, ways * CXLSHM_NR_LOCKS);
        if (e < n) {
            problem(r, RESERVED_RECOVERY, "the snoop filter has %" PRIu64
                    " ways (%" PRIu64 " entries) but entry %" PRIu64 " (byte "
                    "0x%" PRIx64 ") is 0x%016" PRIx64 " 0x%016" PRIx64
                    ": no cxlpod code writes beyond the filter", ways,
                    ways * CXLSHM_NR_LOCKS, e,
                    p->lo.sf_entries + e * sizeof(*sf),
                    qatomic_read(&sf[e].tag), qatomic_read(&sf[e].holders));
        }
    }
}

int cmd_check(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - check every invariant of the format");
    g_autoptr(GError) err = NULL;
    Report r = { 0 };
    const char *why;
    CXLPoolGeometry g;
    Pool p;
    int ret;

    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 2) {
        fail("check: %s", err ? err->message : "usage: cxlpod-pool check "
             "POOL");
        return 2;
    }
    ret = pool_open(&p, argv[1], false);
    if (ret == 2) {
        pool_close(&p);
        return 2;
    }
    if (ret == 1 && p.empty) {
        /* what a QEMU killed before it sized a new pool leaves */
        note(&r, "'%s' is empty: the next host start creates the pool in "
             "it (the file's mode is set then)", argv[1]);
        printf("%s: ok (empty), 1 note\n", argv[1]);
        pool_close(&p);
        return 0;
    }
    if (ret == 1) {
        g_autofree char *why = NULL;

        if (p.err == CXLPOOL_ERR_VERSION &&
            pool_v3_upgradable(argv[1], p.fd, &p.st, &why) >= 0) {
            if (why) {
                note(&r, "'cxlpod-pool upgrade' refuses it now: %s", why);
            } else {
                note(&r, "no host is live and no host left a write "
                     "unfinished: 'cxlpod-pool upgrade %s' can upgrade it "
                     "now", argv[1]);
            }
        }
        if (p.err != CXLPOOL_OK) {
            problem(&r, cxlpool_recovery(p.err), "the header is refused "
                    "(above): no host can start on this file");
        } else {
            problem(&r, "give the device a path to a regular file",
                    "'%s' is not a regular file", argv[1]);
        }
        pool_close(&p);
        return 1;
    }
    g.size = p.hdr->data_size;
    g.coherent_size = p.hdr->coherent_size;
    g.max_hosts = p.hdr->max_hosts;
    why = cxlpool_geometry_problem(&g);
    if (why) {
        problem(&r, "no cxl-shm device accepts this geometry: make a new "
                "pool", "the header's geometry is invalid: %s", why);
    }
    if (p.st.st_uid != geteuid()) {
        note(&r, "the pool belongs to uid %u: only QEMUs running as that "
             "user can join it", (unsigned)p.st.st_uid);
    }
    if (!(p.st.st_mode & S_IWUSR)) {
        problem(&r, "chmod u+w the file", "the pool is read-only (mode "
                "0%o): no host can join it", (unsigned)(p.st.st_mode & 07777));
    }
    if (!why) {
        check_hosts(&p, &r);
        check_locks(&p, &r);
        check_reserved(&p, &r);
        check_turns(&p, &r);
        check_snoop_filter(&p, &r);
    }
    if (r.problems) {
        printf("%s: %d problem%s, %d note%s\n", argv[1], r.problems,
               r.problems > 1 ? "s" : "", r.notes, r.notes == 1 ? "" : "s");
    } else {
        printf("%s: ok (size %" PRIu64 ", coherent-size %" PRIu64
               ", max-hosts %u), %d note%s\n", argv[1], g.size,
               g.coherent_size, g.max_hosts, r.notes, r.notes == 1 ? "" : "s");
    }
    pool_close(&p);
    return r.problems ? 1 : 0;
}

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

    for (i = 0; i < CXLPOOL_MAX_HOSTS; i++) {
        CXLPoolHost *e = &p->hosts[i];
        uint32_t state = qatomic_read(&e->state);
        const char *name = cxlpool_host_state_name(state);
        bool locked = cxlpool_host_locked(p->fd, i);
        g_autofree char *reset = g_strdup_printf(
            "stop any QEMU of host %u, then 'cxlpod-pool reset-host %u %s'",
            i, i, p->path);

        if (i >= p->hdr->max_hosts) {
            static const CXLPoolHost zero;

            if (memcmp(e, &zero, sizeof(zero))) {
                problem(r, "the table was written by something other than "
                        "cxlpod: make a new pool",
                        "host slot %u is beyond max-hosts %u but not zero", i,
                        p->hdr->max_hosts);
            }
            continue;
        }
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
    CXLShmUndo *undo = (CXLShmUndo *)(p->meta + CXLPOOL_UNDO_OFFSET);
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
    for (i = 0; i < CXLPOOL_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS; i++) {
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

/* The first non-zero byte of [start, end) of the metadata, or end */
static uint64_t first_nonzero(Pool *p, uint64_t start, uint64_t end)
{
    uint64_t k;

    for (k = start; k < end && !p->meta[k]; k++) {
    }
    return k;
}

/*
 * Metadata no cxlpod code writes: must be zero.  The areas the device
 * writes lie between these gaps: the host table, line locks, undo slots,
 * page versions, extended statistics, the snoop filter's header and
 * entries (checked by check_snoop_filter()).
 */
static void check_reserved(Pool *p, Report *r)
{
    static const struct {
        uint64_t start, end;
        const char *what;
    } areas[] = {
        { sizeof(CXLPoolHeader), CXLPOOL_HOSTS_OFFSET,
          "the rest of the header page" },
        { CXLPOOL_HOSTS_OFFSET + CXLPOOL_MAX_HOSTS * sizeof(CXLPoolHost),
          CXLPOOL_LINELOCK_OFFSET, "the space after the host table" },
        { CXLPOOL_UNDO_OFFSET + CXLPOOL_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS *
          sizeof(CXLShmUndo), CXLPOOL_VERSIONS_OFFSET,
          "the space after the undo slots" },
        /* the lock turns fill the space up to the extended statistics */
        { CXLPOOL_XSTATS_OFFSET +
          CXLPOOL_MAX_HOSTS * CXLPOOL_XSTATS_PER_HOST * 8,
          CXLPOOL_LOCK_OFFSET, "the space after the extended statistics" },
        { CXLPOOL_LOCK_OFFSET, CXLPOOL_SF_OFFSET,
          "the liveness lock bytes (only ever locked)" },
        { CXLPOOL_SF_OFFSET + sizeof(CXLPoolSnoopHeader), CXLPOOL_SF_ENTRIES,
          "the rest of the snoop filter header page" },
        { CXLPOOL_SF_ENTRIES + CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS * 8,
          CXLPOOL_META_SIZE, "the space after the snoop filter" },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(areas); i++) {
        uint64_t k = first_nonzero(p, areas[i].start, areas[i].end);

        if (k < areas[i].end) {
            problem(r, RESERVED_RECOVERY, "metadata no cxlpod code writes is "
                    "not zero: %s (byte 0x%" PRIx64 " is 0x%02x)",
                    areas[i].what, k, p->meta[k]);
        }
    }
}

/* The magic of the per-page filter layout of earlier builds, "1SFSNOOP" */
#define SF_MAGIC_PER_PAGE 0x504f4f4e53465331ULL
#define SF_RESET_RECOVERY \
    "something other than cxlpod wrote the snoop filter; the next mode=timed " \
    "host zeroes it and sets it up again, so the hosts still start: find " \
    "the writer"

/* The first non-zero snoop-filter entry from @from on, or the end */
static uint64_t first_entry(const uint64_t *sf, uint64_t from)
{
    uint64_t n = (uint64_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS;

    while (from < n && !qatomic_read(&sf[from])) {
        from++;
    }
    return from;
}

/*
 * The snoop filter (mode=timed): the first timed host zeroes the entries,
 * writes ways and then the magic; a later timed host of another size is
 * refused, and one that finds another magic sets the filter up again.
 */
static void check_snoop_filter(Pool *p, Report *r)
{
    CXLPoolSnoopHeader *sh = (CXLPoolSnoopHeader *)(p->meta +
                                                    CXLPOOL_SF_OFFSET);
    const uint64_t *sf = (const uint64_t *)(p->meta + CXLPOOL_SF_ENTRIES);
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
                    ": the device zeroes the entries before it writes the "
                    "magic", e, qatomic_read(&sf[e]));
        }
    } else if (magic == SF_MAGIC_PER_PAGE) {
        note(r, "the snoop filter has the per-page layout of earlier builds: "
             "the next mode=timed host sets it up again (nothing to do)");
    } else if (magic != CXLPOOL_SF_MAGIC) {
        problem(r, SF_RESET_RECOVERY, "the snoop filter header has magic "
                "0x%016" PRIx64 " (allowed: 0, or 0x%016" PRIx64
                " \"2SFSNOOP\")", magic, (uint64_t)CXLPOOL_SF_MAGIC);
    } else if (ways < 1 || ways > CXLPOOL_SF_MAX_WAYS) {
        problem(r, wipe, "the snoop filter has %" PRIu64 " ways (allowed: "
                "1..%d): every mode=timed host is refused", ways,
                CXLPOOL_SF_MAX_WAYS);
    } else {
        e = first_entry(sf, ways * CXLSHM_NR_LOCKS);
        if (e < n) {
            problem(r, RESERVED_RECOVERY, "the snoop filter has %" PRIu64
                    " ways (%" PRIu64 " entries) but entry %" PRIu64 " (byte "
                    "0x%" PRIx64 ") is 0x%016" PRIx64 ": no cxlpod code "
                    "writes beyond the filter", ways, ways * CXLSHM_NR_LOCKS,
                    e, CXLPOOL_SF_ENTRIES + e * 8, qatomic_read(&sf[e]));
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
    if (p.hdr->reserved0) {
        problem(&r, "make a new pool", "the header's reserved word is "
                "0x%x, not 0", p.hdr->reserved0);
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

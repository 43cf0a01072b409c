/*
 * cxlpod-pool upgrade: a pool of format version 3 made a pool of format
 * version 4 in place, its data and host table kept
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Under the pool's flock (exclusive, as a joining QEMU takes it), and
 * only while no host is live and no host left a line lock held or an
 * undo slot armed.  The order makes a stop at any point harmless
 * (docs/pool-format.md, "Upgrading from version 3"):
 *
 *   1. extend the file by the version-4 tail (fallocate, as a create)
 *   2. write the whole tail: the host table and extended statistics
 *      copied, undo slots, lock turns and snoop filter empty; fsync
 *   3. write the version-4 header (one write of the 4 KiB header page);
 *      fsync.  Before this the file is a version-3 pool (perhaps longer
 *      by the tail, which a new run of upgrade writes again), after it a
 *      version-4 pool
 *   4. zero the areas version 3 used in the head, which version 4 keeps
 *      zero; a version-4 pool where a stop left them is still valid
 *      ('check' notes it) and upgrade on it clears them
 */

#include "pool.h"
#include "qemu/crc32c.h"
#include "qemu/cutils.h"

/* The header of format version 3 */
typedef struct PoolV3Header {
    char magic[8];              /* 0x00 "CXLPOOL\0" */
    uint32_t version;           /* 0x08 3 */
    uint32_t header_size;       /* 0x0c 4096 */
    uint64_t meta_size;         /* 0x10 0x200000 */
    uint64_t data_size;         /* 0x18 */
    uint64_t coherent_size;     /* 0x20 */
    uint32_t line_size;         /* 0x28 64 */
    uint32_t max_hosts;         /* 0x2c 1..32 */
    uint32_t hosts_offset;      /* 0x30 0x1000 */
    uint32_t host_entry_size;   /* 0x34 128 */
    uint64_t lock_offset;       /* 0x38 0x100000 */
    uint64_t create_time_ns;    /* 0x40 */
    uint32_t crc;               /* 0x48 crc32c of [0, 0x48) */
    uint32_t reserved0;         /* 0x4c */
} PoolV3Header;

G_STATIC_ASSERT(sizeof(PoolV3Header) == 0x50);
G_STATIC_ASSERT(offsetof(PoolV3Header, crc) == POOL_V3_HEADER_CRC);

/* Version 3's lock tag: host in bits 56..62 (version 4: 55..62) */
#define V3_TAG_HOST(t)          ((uint32_t)(((t) >> 56) & 0x7f))

/* Why a version-3 header cannot be upgraded, or NULL */
static const char *v3_problem(const PoolV3Header *h, uint64_t file_size,
                              const CXLPoolLayout *lo)
{
    CXLPoolGeometry g = {
        .size = h->data_size,
        .coherent_size = h->coherent_size,
        .max_hosts = h->max_hosts,
    };

    if (h->crc != crc32c(0xffffffff, (const uint8_t *)h,
                         POOL_V3_HEADER_CRC)) {
        return "its header is corrupt (checksum mismatch)";
    }
    if (h->header_size != CXLPOOL_HEADER_SIZE ||
        h->meta_size != CXLPOOL_META_SIZE || h->line_size != CXLPOOL_LINE ||
        h->hosts_offset != POOL_V3_HOSTS ||
        h->host_entry_size != sizeof(CXLPoolHost) ||
        h->lock_offset != CXLPOOL_LOCK_OFFSET || h->reserved0) {
        return "its header has layout constants no version-3 cxlpod wrote";
    }
    if (h->max_hosts > POOL_V3_MAX_HOSTS || cxlpool_geometry_problem(&g)) {
        return "its header's geometry is one no device accepts";
    }
    /* the longer size: an upgrade stopped after it extended the file */
    if (file_size != CXLPOOL_META_SIZE + h->data_size &&
        file_size != lo->tail + lo->tail_size) {
        return "its file size is neither the one its header gives nor that "
               "of the same pool in version 4";
    }
    return NULL;
}

/* Append " i (pid P)" for each host whose liveness byte is locked */
static void live_hosts(int fd, const CXLPoolHost *hosts, GString *out)
{
    uint32_t i;

    /* every byte a host of either version could lock */
    for (i = 0; i < CXLPOOL_MAX_HOSTS; i++) {
        if (cxlpool_host_locked(fd, i)) {
            g_string_append_printf(out, " %u", i);
            if (i < POOL_V3_MAX_HOSTS) {
                g_string_append_printf(out, " (pid %u)", hosts[i].pid);
            }
        }
    }
}

/*
 * The line locks held and undo slots armed of a version-3 head: how many,
 * and the hosts their tags name (a mask)
 */
static uint64_t v3_locks(const uint8_t *head, unsigned *held,
                         unsigned *armed)
{
    const uint64_t *locks = (const uint64_t *)(head +
                                               CXLPOOL_LINELOCK_OFFSET);
    const CXLShmUndo *undo = (const CXLShmUndo *)(head + POOL_V3_UNDO);
    uint64_t hosts = 0;
    unsigned i;

    *held = *armed = 0;
    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        uint64_t w = qatomic_read(&locks[i]);

        if (w) {
            (*held)++;
            hosts |= 1ULL << V3_TAG_HOST(w);
        }
    }
    for (i = 0; i < POOL_V3_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS; i++) {
        uint64_t a = qatomic_read(&undo[i].armed);

        if (a) {
            (*armed)++;
            hosts |= 1ULL << (i / (2 * CXLSHM_UNDO_SLOTS));
        }
    }
    return hosts;
}

static const struct {
    uint64_t start, end;
} v3_areas[] = {
    { POOL_V3_HOSTS, POOL_V3_HOSTS_END },
    { POOL_V3_UNDO, POOL_V3_UNDO_END },
    { POOL_V3_TURNS, POOL_V3_XSTATS_END },
    { POOL_V3_SF, POOL_V3_SF_END },
};

/* Are the areas version 3 used in the head all zero? */
static bool v3_areas_zero(const uint8_t *head)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(v3_areas); i++) {
        if (!buffer_is_zero(head + v3_areas[i].start,
                            v3_areas[i].end - v3_areas[i].start)) {
            return false;
        }
    }
    return true;
}

/* Zero them (through the mapping: hugetlbfs has no write(2)) and sync */
static int v3_areas_clear(uint8_t *head, int fd)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(v3_areas); i++) {
        memset(head + v3_areas[i].start, 0,
               v3_areas[i].end - v3_areas[i].start);
    }
    if (msync(head, CXLPOOL_META_SIZE, MS_SYNC) < 0 || fsync(fd) < 0) {
        return -1;
    }
    return 0;
}

#define V3_AREAS_TEXT \
    "the areas version 3 used in the head (host table 0x1000, undo slots " \
    "0x20000, lock turns and extended statistics 0xb0000, snoop filter " \
    "0x110000)"

/* A pool already of version 4: say so; clear what a stopped run left */
static int upgrade_v4(const char *path, int fd, bool dry)
{
    uint8_t *head = mmap(NULL, CXLPOOL_META_SIZE,
                         PROT_READ | (dry ? 0 : PROT_WRITE), MAP_SHARED, fd,
                         0);
    int ret = 0;

    if (head == MAP_FAILED) {
        fail("upgrade: cannot map the head of pool '%s': %s", path,
             strerror(errno));
        return 2;
    }
    printf("pool '%s' is already format version %u: nothing to upgrade\n",
           path, CXLPOOL_VERSION);
    if (!v3_areas_zero(head)) {
        /* no version-4 host reads them: safe while hosts run */
        if (dry) {
            printf("would clear %s, which an upgrade stopped before its "
                   "last step left\n", V3_AREAS_TEXT);
        } else if (v3_areas_clear(head, fd) < 0) {
            fail("upgrade: cannot clear the version-3 areas of '%s': %s",
                 path, strerror(errno));
            ret = 1;
        } else {
            printf("cleared %s, which an upgrade stopped before its last "
                   "step left\n", V3_AREAS_TEXT);
        }
    }
    munmap(head, CXLPOOL_META_SIZE);
    return ret;
}

/* Extend the file by the tail (step 1): 0, or -1 with errno */
static int extend(int fd, const CXLPoolLayout *lo)
{
    /* allocated now: a full file system is an error here, not a SIGBUS */
    if (fallocate(fd, 0, lo->tail, lo->tail_size) == 0) {
        return 0;
    }
    if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
        return -1;
    }
    return ftruncate(fd, lo->tail + lo->tail_size);
}

/* The version-4 tail of a version-3 head, in @buf (tail_size, zeroed) */
static void build_tail(uint8_t *buf, const uint8_t *head,
                       const CXLPoolLayout *lo, uint32_t max_hosts)
{
    memcpy(buf + (lo->hosts - lo->tail), head + POOL_V3_HOSTS,
           (size_t)max_hosts * sizeof(CXLPoolHost));
    /* the same [host][32] words, rows of the hosts of this pool only */
    memcpy(buf + (lo->xstats - lo->tail), head + POOL_V3_XSTATS,
           (size_t)max_hosts * CXLPOOL_XSTATS_PER_HOST * 8);
    /* undo slots (none armed), turns and the filter: zero */
}

/*
 * Why the version-3 pool @v3 (its header) in @fd cannot be upgraded now,
 * or NULL: its header, its size, a live host, a lock held or an undo slot
 * armed.  Reads only.
 */
static char *v3_refusal(const char *path, int fd, const struct stat *st,
                        const PoolV3Header *v3)
{
    g_autoptr(GString) live = g_string_new(NULL);
    CXLPoolLayout lo;
    const char *why;
    unsigned held, armed;
    uint64_t hosts;
    uint8_t *head;
    char *msg = NULL;

    cxlpool_layout(&lo, v3->data_size, v3->max_hosts);
    why = v3_problem(v3, st->st_size, &lo);
    if (why) {
        return g_strdup_printf("pool '%s' has format version 3 but %s: "
                               "refusing to upgrade it ('cxlpod-pool check' "
                               "of the cxlpod that made it says more)", path,
                               why);
    }
    head = mmap(NULL, CXLPOOL_META_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (head == MAP_FAILED) {
        return g_strdup_printf("cannot map the head of pool '%s': %s", path,
                               strerror(errno));
    }
    live_hosts(fd, (const CXLPoolHost *)(head + POOL_V3_HOSTS), live);
    hosts = v3_locks(head, &held, &armed);
    if (live->len) {
        msg = g_strdup_printf("pool '%s' has live hosts:%s; stop every QEMU "
                              "of the pod (a clean stop), then run the "
                              "upgrade again", path, live->str);
    } else if (held || armed) {
        g_autoptr(GString) names = g_string_new(NULL);
        uint32_t i;

        for (i = 0; i < POOL_V3_MAX_HOSTS; i++) {
            if (hosts & (1ULL << i)) {
                g_string_append_printf(names, " %u", i);
            }
        }
        msg = g_strdup_printf("pool '%s' has %u line locks held and %u undo "
                              "slots armed, of hosts%s: line writes those "
                              "hosts left unfinished when they died, which "
                              "only a host of format version 3 rolls back.  "
                              "Run 'cxlpod-pool check %s' of the cxlpod "
                              "that made the pool, start each of those "
                              "hosts once more with that cxlpod (its join "
                              "releases what it left) and stop it cleanly, "
                              "then run the upgrade again; if the data need "
                              "not be kept, make a new pool instead", path,
                              held, armed, names->str, path);
    }
    munmap(head, CXLPOOL_META_SIZE);
    return msg;
}

int pool_v3_upgradable(const char *path, int fd, const struct stat *st,
                       char **why)
{
    PoolV3Header v3;

    *why = NULL;
    if ((uint64_t)st->st_size < CXLPOOL_META_SIZE ||
        pread(fd, &v3, sizeof(v3), 0) != sizeof(v3) ||
        memcmp(v3.magic, CXLPOOL_MAGIC, sizeof(v3.magic)) ||
        v3.version != POOL_V3_VERSION) {
        return -1;
    }
    *why = v3_refusal(path, fd, st, &v3);
    return *why ? 1 : 0;
}

static int upgrade_v3(const char *path, int fd, const struct stat *st,
                      const PoolV3Header *v3, bool dry)
{
    CXLPoolGeometry g = {
        .size = v3->data_size,
        .coherent_size = v3->coherent_size,
        .max_hosts = v3->max_hosts,
    };
    g_autofree uint8_t *tail = NULL;
    g_autofree uint8_t *page = NULL;
    g_autofree char *why = NULL;
    uint64_t v3_len = CXLPOOL_META_SIZE + v3->data_size, v4_len;
    CXLPoolLayout lo;
    uint8_t *head;
    int ret = 1, err;

    cxlpool_layout(&lo, g.size, g.max_hosts);
    v4_len = lo.tail + lo.tail_size;
    why = v3_refusal(path, fd, st, v3);
    if (why) {
        fail("upgrade: %s", why);
        return 1;
    }
    head = mmap(NULL, CXLPOOL_META_SIZE, PROT_READ | (dry ? 0 : PROT_WRITE),
                MAP_SHARED, fd, 0);
    if (head == MAP_FAILED) {
        fail("upgrade: cannot map the head of pool '%s': %s", path,
             strerror(errno));
        return 2;
    }
    printf("pool '%s': format version 3, size %" PRIu64 " coherent-size %"
           PRIu64 " max-hosts %u; no host live, no line lock held, no undo "
           "slot armed\n", path, g.size, g.coherent_size, g.max_hosts);

    if (dry) {
        if ((uint64_t)st->st_size == v3_len) {
            printf("would extend the file from %" PRIu64 " to %" PRIu64
                   " bytes (the tail: 0x%" PRIx64 " bytes at 0x%" PRIx64
                   ")\n", v3_len, v4_len, lo.tail_size, lo.tail);
        } else {
            printf("the file is %" PRIu64 " bytes already (an upgrade was "
                   "stopped before its header): would write its tail "
                   "again\n", v4_len);
        }
        printf("would write the tail: the host table of %u hosts and their "
               "extended statistics copied, undo slots, lock turns and "
               "snoop filter empty; then sync it\n", g.max_hosts);
        printf("would write the version-%u header\n", CXLPOOL_VERSION);
        printf("would clear %s\n", V3_AREAS_TEXT);
        ret = 0;
        goto out;
    }

    /* 1. the tail's blocks */
    if ((uint64_t)st->st_size == v3_len) {
        if (extend(fd, &lo) < 0) {
            fail("upgrade: cannot extend pool '%s' to %" PRIu64 " bytes: %s",
                 path, v4_len, strerror(errno));
            if (ftruncate(fd, v3_len) < 0) {
                fail("upgrade: could not cut '%s' back to %" PRIu64
                     " bytes", path, v3_len);
            }
            goto out;
        }
        printf("extended the file from %" PRIu64 " to %" PRIu64 " bytes "
               "(the tail: 0x%" PRIx64 " bytes at 0x%" PRIx64 ")\n", v3_len,
               v4_len, lo.tail_size, lo.tail);
    } else {
        printf("the file is %" PRIu64 " bytes already (an upgrade was "
               "stopped before its header): its tail is written again\n",
               v4_len);
    }

    /* 2. the whole tail, synced before the header says it is there */
    tail = g_malloc0(lo.tail_size);
    build_tail(tail, head, &lo, g.max_hosts);
    err = cxlpool_write_at(fd, lo.tail, tail, lo.tail_size);
    if (err < 0 || (err = fsync(fd) < 0 ? -errno : 0) < 0) {
        fail("upgrade: cannot write the tail of pool '%s': %s (it is still "
             "version 3; run the upgrade again)", path, strerror(-err));
        goto out;
    }
    printf("wrote the tail and synced it: the host table of %u hosts "
           "(states, generations, pids, times, statistics) and their "
           "extended statistics copied; undo slots, lock turns and snoop "
           "filter empty (the next mode=timed host sets the filter up)\n",
           g.max_hosts);

    /* 3. the header last: from here on the pool is version 4 */
    page = g_malloc0(CXLPOOL_HEADER_SIZE);
    cxlpool_header_init((CXLPoolHeader *)page, &g, v3->create_time_ns);
    err = cxlpool_write_at(fd, 0, page, CXLPOOL_HEADER_SIZE);
    if (err < 0 || (err = fsync(fd) < 0 ? -errno : 0) < 0) {
        fail("upgrade: cannot write the header of pool '%s': %s (run the "
             "upgrade again)", path, strerror(-err));
        goto out;
    }
    printf("wrote the version-%u header (creation time kept) and synced "
           "it\n", CXLPOOL_VERSION);

    /* 4. what version 3 kept in the head */
    if (v3_areas_clear(head, fd) < 0) {
        fail("upgrade: pool '%s' is version 4, but clearing %s failed: %s "
             "(no host reads them; run the upgrade again)", path,
             V3_AREAS_TEXT, strerror(errno));
        goto out;
    }
    printf("cleared %s\n", V3_AREAS_TEXT);
    printf("pool '%s' is now format version %u: %" PRIu64 " bytes, data "
           "kept\n", path, CXLPOOL_VERSION, v4_len);
    ret = 0;
out:
    munmap(head, CXLPOOL_META_SIZE);
    return ret;
}

int cmd_upgrade(int argc, char **argv)
{
    gboolean dry = FALSE;
    GOptionEntry entries[] = {
        { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry,
          "say what would be done, write nothing", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - convert a pool of format version 3 to version 4 in place "
        "(its data and host table kept; no host may run on it)");
    g_autoptr(GError) err = NULL;
    CXLPoolHeader h = { 0 };
    PoolV3Header v3;
    CXLPoolError e;
    const char *path;
    struct stat st;
    bool big;
    int fd, ret;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 2) {
        fail("upgrade: %s", err ? err->message : "usage: cxlpod-pool "
             "upgrade [--dry-run] POOL");
        return 2;
    }
    path = argv[1];
    fd = pool_open_locked(path, dry ? O_RDONLY : O_RDWR, true, &st);
    if (fd < 0) {
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        fail("upgrade: '%s' is not a regular file", path);
        close(fd);
        return 1;
    }
    big = (uint64_t)st.st_size >= CXLPOOL_META_SIZE;
    if (big && pread(fd, &h, sizeof(h), 0) != sizeof(h)) {
        fail("upgrade: cannot read the header of pool '%s': %s", path,
             strerror(errno));
        close(fd);
        return 2;
    }
    e = cxlpool_check(big ? &h : NULL, st.st_size, NULL);
    if (e == CXLPOOL_OK) {
        ret = upgrade_v4(path, fd, dry);
    } else if (e == CXLPOOL_ERR_VERSION && h.version == POOL_V3_VERSION) {
        memcpy(&v3, &h, sizeof(v3));
        ret = upgrade_v3(path, fd, &st, &v3, dry);
    } else if (e > CXLPOOL_ERR_VERSION && h.version == CXLPOOL_VERSION) {
        g_autofree char *msg = cxlpool_error_message(e, path, &h, st.st_size,
                                                     NULL);

        fail("upgrade: %s; it has format version %u already: see "
             "'cxlpod-pool check %s'", msg, CXLPOOL_VERSION, path);
        ret = 1;
    } else {
        g_autofree char *msg = cxlpool_error_message(e, path, &h, st.st_size,
                                                     NULL);

        fail("upgrade: %s; upgrade converts pools of format version 3 "
             "only", msg);
        ret = 1;
    }
    close(fd);
    return ret;
}

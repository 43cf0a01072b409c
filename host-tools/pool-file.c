/*
 * cxlpod-pool: opening, locking, validating and mapping a pool file, and
 * the small helpers the commands share (messages, sizes, times, a host
 * slot's status, line locks in use)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "pool.h"

const char *const stat_names[CXLSHM_STAT_NR] = {
    "writeback_ops", "invalidate_ops", "flush_ops", "lines_written_back",
    "lines_invalidated", "native_ops", "errors", "conflicts",
    "evicted_lines", "nt_lines", "deferred", "resets",
    /* the extended statistics (mode=timed, and charged ns) */
    "hits", "misses", "cache_evictions", "back_invalidates", "snoops",
    "snoop_filter_evictions", "stale_reads", "charged_ns", "retries",
};

G_GNUC_PRINTF(1, 2) void fail(const char *fmt, ...)
{
    va_list ap;

    fputs("cxlpod-pool: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* "256M", "1G", "268435456" */
bool parse_size(const char *s, uint64_t *out)
{
    char *end;
    uint64_t v;

    errno = 0;
    v = g_ascii_strtoull(s, &end, 0);
    if (errno || end == s) {
        return false;
    }
    switch (g_ascii_toupper(*end)) {
    case 'K':
        v <<= 10, end++;
        break;
    case 'M':
        v <<= 20, end++;
        break;
    case 'G':
        v <<= 30, end++;
        break;
    case 'T':
        v <<= 40, end++;
        break;
    }
    if (*end == 'i' || *end == 'B') {
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    }
    *out = v;
    return *end == 0;
}

char *fmt_time(uint64_t ns)
{
    time_t t = ns / 1000000000ULL;
    struct tm tm;
    char buf[64];

    if (!ns) {
        return g_strdup("-");
    }
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return g_strdup(buf);
}

/*
 * The pool's flock: exclusive (blocking, as a joining QEMU takes it) for
 * commands that write; shared for inspect and check, waiting at most
 * about 5 s for a QEMU that is creating the pool (then read anyway).
 */
static bool lock_pool(int fd, bool exclusive, const char *path)
{
    int i;

    if (exclusive) {
        if (cxlpool_flock(fd, LOCK_EX) < 0) {
            fail("cannot lock pool '%s': %s", path, strerror(errno));
            return false;
        }
        return true;
    }
    for (i = 0; i < 500; i++) {
        if (cxlpool_flock(fd, LOCK_SH | LOCK_NB) == 0) {
            return true;
        }
        g_usleep(10000);
    }
    fprintf(stderr, "cxlpod-pool: pool '%s' stayed locked by a starting "
            "QEMU for 5 s; reading it anyway\n", path);
    return true;
}

/*
 * Open @path and take its flock; like a joining QEMU, open it again if the
 * file was removed or replaced while we waited.  Returns the fd or -1.
 */
int pool_open_locked(const char *path, int flags, bool exclusive,
                     struct stat *st)
{
    int tries;

    for (tries = 0; tries < 10; tries++) {
        /* a FIFO is refused as not a regular file, not waited on */
        int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK);
        int ret;

        if (fd < 0) {
            fail("cannot open pool '%s': %s", path, strerror(errno));
            return -1;
        }
        if (!lock_pool(fd, exclusive, path)) {
            close(fd);
            return -1;
        }
        ret = cxlpool_fd_is_path(fd, path, st);
        if (ret < 0) {
            fail("cannot stat pool '%s': %s", path, strerror(-ret));
            close(fd);
            return -1;
        }
        if (ret) {
            return fd;
        }
        close(fd);
    }
    fail("pool '%s' was removed or replaced 10 times while opening it",
         path);
    return -1;
}

/* Statistic @k of host @host: the host table's, then the extended area */
uint64_t pool_stat(const Pool *p, uint32_t host, int k)
{
    const uint64_t *x = pool_tail(p, p->lo.xstats);

    if (k < CXLSHM_STAT_TABLE_NR) {
        return qatomic_read(&p->hosts[host].stats[k]);
    }
    return qatomic_read(&x[host * CXLPOOL_XSTATS_PER_HOST + k -
                           CXLSHM_STAT_TABLE_NR]);
}

/*
 * Open, lock, validate (any geometry) and map the metadata of a pool: the
 * head and the tail, two mappings (on hugetlbfs both start and end on a
 * huge page: the layout makes the tail's offset and size multiples of
 * CXLPOOL_TAIL_ALIGN)
 */
int pool_open(Pool *p, const char *path, bool write)
{
    CXLPoolHeader h = { 0 };
    int prot = PROT_READ | (write ? PROT_WRITE : 0);
    bool big;

    memset(p, 0, sizeof(*p));
    p->path = path;
    p->fd = pool_open_locked(path, write ? O_RDWR : O_RDONLY, write, &p->st);
    if (p->fd < 0) {
        return 2;
    }
    if (!S_ISREG(p->st.st_mode)) {
        fail("pool '%s' is not a regular file", path);
        return 1;
    }
    if (p->st.st_size == 0) {
        p->empty = true;
        fail("pool '%s' is empty: not a pool yet; the next host start (or "
             "'cxlpod-pool create') makes it one", path);
        return 1;
    }
    if ((uint64_t)p->st.st_size >= CXLPOOL_META_SIZE &&
        pread(p->fd, &h, sizeof(h), 0) != sizeof(h)) {
        fail("cannot read the header of pool '%s': %s", path,
             strerror(errno));
        return 2;
    }
    big = (uint64_t)p->st.st_size >= CXLPOOL_META_SIZE;
    p->err = cxlpool_check(big ? &h : NULL, p->st.st_size, NULL);
    if (p->err != CXLPOOL_OK) {
        g_autofree char *msg = cxlpool_error_message(p->err, path, &h,
                                                     p->st.st_size, NULL);

        fail("%s", msg);
        return 1;
    }
    p->meta = mmap(NULL, CXLPOOL_META_SIZE, prot, MAP_SHARED, p->fd, 0);
    if (p->meta == MAP_FAILED) {
        p->meta = NULL;
        fail("cannot map the metadata of pool '%s': %s", path,
             strerror(errno));
        return 2;
    }
    p->hdr = (CXLPoolHeader *)p->meta;
    /* cxlpool_check() took max_hosts and the tail from this header */
    p->nr_hosts = MIN(p->hdr->max_hosts, CXLPOOL_MAX_HOSTS);
    cxlpool_layout(&p->lo, p->hdr->data_size, p->nr_hosts);
    p->tail = mmap(NULL, p->lo.tail_size, prot, MAP_SHARED, p->fd,
                   p->lo.tail);
    if (p->tail == MAP_FAILED) {
        p->tail = NULL;
        fail("cannot map the metadata tail of pool '%s' (0x%" PRIx64
             " bytes at 0x%" PRIx64 "): %s", path, p->lo.tail_size,
             p->lo.tail, strerror(errno));
        return 2;
    }
    p->hosts = pool_tail(p, p->lo.hosts);
    if (write) {
        CXLPoolGeometry g = {
            .size = p->hdr->data_size,
            .coherent_size = p->hdr->coherent_size,
            .max_hosts = p->hdr->max_hosts,
        };
        const char *why = cxlpool_geometry_problem(&g);

        if (why) {
            fail("pool '%s' has an impossible geometry (%s); see "
                 "'cxlpod-pool check'", path, why);
            return 1;
        }
    }
    return 0;
}

int pool_sync(Pool *p)
{
    if (msync(p->meta, CXLPOOL_META_SIZE, MS_SYNC) < 0 ||
        msync(p->tail, p->lo.tail_size, MS_SYNC) < 0) {
        return -1;
    }
    return 0;
}

void pool_close(Pool *p)
{
    if (p->meta) {
        munmap(p->meta, CXLPOOL_META_SIZE);
    }
    if (p->tail) {
        munmap(p->tail, p->lo.tail_size);
    }
    if (p->fd >= 0) {
        close(p->fd);       /* drops the flock */
    }
    p->fd = -1;
}

/* What a host slot is now: its table state, corrected by its lock */
const char *host_status(Pool *p, uint32_t i, bool *locked)
{
    uint32_t state = qatomic_read(&p->hosts[i].state);

    *locked = cxlpool_host_locked(p->fd, i);
    if (state == CXLPOOL_HOST_LIVE) {
        return *locked ? "live" : "failed";
    }
    if (*locked) {
        return "joining";
    }
    return cxlpool_host_state_name(state);
}

/* A held line lock whose owner is still running */
bool owner_alive(Pool *p, uint64_t tag)
{
    uint32_t host = CXLPOOL_TAG_HOST(tag);

    return host < p->hdr->max_hosts &&
           qatomic_read(&p->hosts[host].state) == CXLPOOL_HOST_LIVE &&
           CXLPOOL_TAG_GEN(qatomic_read(&p->hosts[host].generation)) ==
           CXLPOOL_TAG_GEN(tag) &&
           cxlpool_host_locked(p->fd, host);
}

void count_locks(Pool *p, unsigned *held, unsigned *armed)
{
    const uint64_t *locks = (uint64_t *)(p->meta + CXLPOOL_LINELOCK_OFFSET);
    const CXLShmUndo *undo = pool_tail(p, p->lo.undo);
    unsigned i;

    *held = *armed = 0;
    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        *held += qatomic_read(&locks[i]) != 0;
    }
    for (i = 0; i < pool_undo_slots(p); i++) {
        *armed += qatomic_read(&undo[i].armed) != 0;
    }
}

/*
 * cxl-shm: the pool file format, shared by the device and cxlpod-pool
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * See cxl-shm-format.h and docs/pool-format.md.  Host-tools build this
 * file too, against tests/unit/shim: QEMU's crc32c(), buffer_is_zero()
 * and qemu_lock_fd_test() are all of QEMU it uses beyond qemu/osdep.h
 * and qemu/atomic.h, and the shim implements them for the host tools.
 */

#include "qemu/osdep.h"
#include <sys/file.h>
#include <sys/mman.h>
#include "qemu/atomic.h"
#include "qemu/crc32c.h"
#include "qemu/cutils.h"
#include "cxl-shm-format.h"

G_STATIC_ASSERT(sizeof(CXLPoolHeader) == 0x60);
G_STATIC_ASSERT(sizeof(CXLPoolHost) == 128);
G_STATIC_ASSERT(sizeof(CXLShmUndo) == 128);
G_STATIC_ASSERT(sizeof(CXLPoolSnoopEntry) == 16);
G_STATIC_ASSERT(CXLPOOL_LINELOCK_OFFSET + CXLSHM_NR_LOCKS * 8 <=
                CXLPOOL_VERSIONS_OFFSET);
G_STATIC_ASSERT(CXLPOOL_VERSIONS_OFFSET + CXLSHM_NR_LOCKS * 8 <=
                CXLPOOL_LOCK_OFFSET);
G_STATIC_ASSERT(CXLPOOL_LOCK_OFFSET + CXLPOOL_MAX_HOSTS <= CXLPOOL_META_SIZE);
G_STATIC_ASSERT(CXLSHM_STAT_TABLE_NR ==
                G_N_ELEMENTS(((CXLPoolHost *)0)->stats));
G_STATIC_ASSERT(CXLSHM_STAT_NR - CXLSHM_STAT_TABLE_NR <=
                CXLPOOL_XSTATS_PER_HOST);
/* the tag's host and slot fields; the text of cxlpool_geometry_problem() */
G_STATIC_ASSERT(CXLPOOL_MAX_HOSTS == 256);
G_STATIC_ASSERT(CXLPOOL_MAX_HOSTS <= 256 && CXLSHM_UNDO_SLOTS <= 128);

const char *cxlpool_host_state_name(uint32_t state)
{
    switch (state) {
    case CXLPOOL_HOST_FREE:
        return "free";
    case CXLPOOL_HOST_LIVE:
        return "live";
    case CXLPOOL_HOST_FAILED:
        return "failed";
    case CXLPOOL_HOST_LEFT:
        return "left";
    default:
        return "invalid";
    }
}

uint32_t cxlpool_header_crc(const CXLPoolHeader *h)
{
    return crc32c(0xffffffff, (const uint8_t *)h,
                  offsetof(CXLPoolHeader, crc));
}

void cxlpool_header_init(CXLPoolHeader *h, const CXLPoolGeometry *g,
                         uint64_t create_time_ns)
{
    CXLPoolLayout lo;

    memset(h, 0, sizeof(*h));
    memcpy(h->magic, CXLPOOL_MAGIC, sizeof(h->magic));
    h->version = CXLPOOL_VERSION;
    h->header_size = CXLPOOL_HEADER_SIZE;
    h->meta_size = CXLPOOL_META_SIZE;
    h->data_size = g->size;
    h->coherent_size = g->coherent_size;
    h->line_size = CXLPOOL_LINE;
    h->max_hosts = g->max_hosts;
    cxlpool_layout(&lo, g->size, g->max_hosts);
    h->tail_offset = lo.tail;
    h->tail_size = lo.tail_size;
    h->hosts_offset = lo.hosts;
    h->host_entry_size = sizeof(CXLPoolHost);
    h->lock_offset = CXLPOOL_LOCK_OFFSET;
    h->create_time_ns = create_time_ns;
    h->crc = cxlpool_header_crc(h);
}

CXLPoolError cxlpool_check(const CXLPoolHeader *h, uint64_t file_size,
                           const CXLPoolGeometry *want)
{
    CXLPoolLayout lo;

    if (!h || file_size < CXLPOOL_META_SIZE) {
        return CXLPOOL_ERR_TOO_SMALL;
    }
    if (buffer_is_zero(h, sizeof(*h))) {
        /* cxlpool_allocate first, cxlpool_write_header last */
        return CXLPOOL_ERR_NO_HEADER;
    }
    if (memcmp(h->magic, CXLPOOL_MAGIC, sizeof(h->magic)) != 0) {
        return CXLPOOL_ERR_MAGIC;
    }
    if (h->version != CXLPOOL_VERSION) {
        return CXLPOOL_ERR_VERSION;
    }
    if (h->crc != cxlpool_header_crc(h)) {
        return CXLPOOL_ERR_CRC;
    }
    if (h->max_hosts < 1 || h->max_hosts > CXLPOOL_MAX_HOSTS ||
        h->data_size > CXLPOOL_SIZE_MAX) {
        return CXLPOOL_ERR_LAYOUT;
    }
    cxlpool_layout(&lo, h->data_size, h->max_hosts);
    if (h->header_size != CXLPOOL_HEADER_SIZE ||
        h->meta_size != CXLPOOL_META_SIZE ||
        h->line_size != CXLPOOL_LINE ||
        h->tail_offset != lo.tail ||
        h->tail_size != lo.tail_size ||
        h->hosts_offset != lo.hosts ||
        h->host_entry_size != sizeof(CXLPoolHost) ||
        h->lock_offset != CXLPOOL_LOCK_OFFSET) {
        return CXLPOOL_ERR_LAYOUT;
    }
    if (want && (h->data_size != want->size ||
                 h->coherent_size != want->coherent_size ||
                 h->max_hosts != want->max_hosts)) {
        return CXLPOOL_ERR_GEOMETRY;
    }
    if (file_size != lo.tail + lo.tail_size) {
        return CXLPOOL_ERR_FILE_SIZE;
    }
    return CXLPOOL_OK;
}

char *cxlpool_error_message(CXLPoolError e, const char *path,
                            const CXLPoolHeader *h, uint64_t file_size,
                            const CXLPoolGeometry *want)
{
    switch (e) {
    case CXLPOOL_OK:
        return g_strdup_printf("pool '%s' is a valid cxlpod pool", path);
    case CXLPOOL_ERR_TOO_SMALL:
        return g_strdup_printf("pool '%s' is not a cxlpod pool (%" PRIu64
                               " bytes, smaller than its metadata area); "
                               "refusing to touch it", path, file_size);
    case CXLPOOL_ERR_NO_HEADER:
        return g_strdup_printf("pool '%s' has no header: if it is a cxlpod "
                               "pool, the QEMU that created it was stopped "
                               "before writing one, so no host ever joined "
                               "it; remove the file (or make it a pool again "
                               "with 'cxlpod-pool create %s') and start "
                               "again", path, path);
    case CXLPOOL_ERR_MAGIC:
        return g_strdup_printf("pool '%s' is not a cxlpod pool (bad magic); "
                               "refusing to touch it", path);
    case CXLPOOL_ERR_VERSION:
        if (h->version == CXLPOOL_VERSION - 1) {
            return g_strdup_printf("pool '%s' has format version %u, this "
                                   "QEMU supports version %u only: upgrade "
                                   "it in place with 'cxlpod-pool upgrade "
                                   "%s' (its data is kept; no host may run "
                                   "on it meanwhile)", path, h->version,
                                   CXLPOOL_VERSION, path);
        }
        return g_strdup_printf("pool '%s' has format version %u, this QEMU "
                               "supports version %u only", path, h->version,
                               CXLPOOL_VERSION);
    case CXLPOOL_ERR_CRC:
        return g_strdup_printf("pool '%s' has a corrupt header (checksum "
                               "mismatch); refusing to touch it", path);
    case CXLPOOL_ERR_LAYOUT:
        return g_strdup_printf("pool '%s' has an unsupported layout "
                               "(metadata size 0x%" PRIx64 ", line size %u, "
                               "max-hosts %u, tail 0x%" PRIx64 "+0x%"
                               PRIx64 ")", path, h->meta_size, h->line_size,
                               h->max_hosts, h->tail_offset, h->tail_size);
    case CXLPOOL_ERR_GEOMETRY:
        return g_strdup_printf("pool '%s' has another geometry: pool size=%"
                               PRIu64 " coherent-size=%" PRIu64
                               " max-hosts=%u, device asks size=%" PRIu64
                               " coherent-size=%" PRIu64 " max-hosts=%u",
                               path, h->data_size, h->coherent_size,
                               h->max_hosts, want->size, want->coherent_size,
                               want->max_hosts);
    case CXLPOOL_ERR_FILE_SIZE:
        return g_strdup_printf("pool '%s' is %" PRIu64 " bytes long, its "
                               "header says %" PRIu64 "; refusing to touch "
                               "it", path, file_size,
                               cxlpool_file_size(h->data_size,
                                                 h->max_hosts));
    }
    return g_strdup_printf("pool '%s': unknown error %d", path, e);
}

const char *cxlpool_recovery(CXLPoolError e)
{
    switch (e) {
    case CXLPOOL_OK:
        return "nothing to do";
    case CXLPOOL_ERR_TOO_SMALL:
    case CXLPOOL_ERR_MAGIC:
        return "this file is not a pool: give the device another path, or "
               "remove the file if it is yours and not needed";
    case CXLPOOL_ERR_NO_HEADER:
        return "no host ever joined this pool, so nothing is lost: run "
               "'cxlpod-pool create' on it (it writes the header in place) "
               "or remove it, then start the hosts";
    case CXLPOOL_ERR_VERSION:
        return "a pool of the format before this one is upgraded in place "
               "with 'cxlpod-pool upgrade POOL' while no host runs on it; "
               "another version was made by another cxlpod: use that "
               "version, or make a new pool";
    case CXLPOOL_ERR_LAYOUT:
        return "the pool was made by another cxlpod version: use that "
               "version, or make a new pool (the data cannot be converted)";
    case CXLPOOL_ERR_CRC:
        return "the header was changed by something other than cxlpod: "
               "restore the file from a copy, or make a new pool; the data "
               "area may still hold what the hosts wrote";
    case CXLPOOL_ERR_GEOMETRY:
        return "start the device with the pool's size, coherent-size and "
               "max-hosts (cxlpod-pool inspect shows them), or use another "
               "pool file";
    case CXLPOOL_ERR_FILE_SIZE:
        return "the file was truncated or extended after its creation: "
               "restore it from a copy, or make a new pool";
    }
    return "unknown";
}

const char *cxlpool_geometry_problem(const CXLPoolGeometry *g)
{
    if (g->size == 0 || g->size % CXLPOOL_SIZE_ALIGN) {
        return "size is not a non-zero multiple of 256 MiB";
    }
    if (g->size > CXLPOOL_SIZE_MAX) {
        return "size is larger than 1 TiB";
    }
    if (g->coherent_size % CXLPOOL_COHERENT_ALIGN) {
        return "coherent-size is not a multiple of 2 MiB";
    }
    if (g->coherent_size > g->size) {
        return "coherent-size is larger than size";
    }
    if (g->max_hosts < 1 || g->max_hosts > CXLPOOL_MAX_HOSTS) {
        return "max-hosts is not in [1, 256]";
    }
    return NULL;
}

int cxlpool_flock(int fd, int op)
{
    int ret;

    do {
        ret = flock(fd, op);
    } while (ret < 0 && errno == EINTR);
    return ret;
}

int cxlpool_fd_is_path(int fd, const char *path, struct stat *st)
{
    struct stat ps;

    if (fstat(fd, st) < 0) {
        return -errno;
    }
    return st->st_nlink > 0 && stat(path, &ps) == 0 &&
           ps.st_dev == st->st_dev && ps.st_ino == st->st_ino;
}

bool cxlpool_host_locked(int fd, uint32_t host)
{
    /* -EAGAIN: held; another error: cannot tell, so assume alive */
    return qemu_lock_fd_test(fd, CXLPOOL_HOST_LOCK(host), 1, true) != 0;
}

uint32_t cxlpool_reap(int fd, CXLPoolHost *hosts, uint32_t max_hosts,
                      int self, uint64_t *reaped)
{
    uint32_t i, n = 0;

    for (i = 0; i < max_hosts; i++) {
        CXLPoolHost *e = &hosts[i];

        if ((int)i == self) {
            continue;
        }
        /*
         * From live only: a host that wrote "left" (or a rejoin's new
         * state) after the read above, then dropped its lock, keeps it
         */
        if (qatomic_read(&e->state) == CXLPOOL_HOST_LIVE &&
            !cxlpool_host_locked(fd, i) &&
            qatomic_cmpxchg(&e->state, CXLPOOL_HOST_LIVE,
                            CXLPOOL_HOST_FAILED) == CXLPOOL_HOST_LIVE) {
            reaped[i / 64] |= 1ULL << (i % 64);
            n++;
        }
    }
    return n;
}

int cxlpool_allocate(int fd, uint64_t len)
{
    /*
     * The blocks are allocated now, so that a full file system is an
     * error here and not a SIGBUS on some guest store later.
     */
    if (fallocate(fd, 0, 0, len) == 0) {
        return 0;
    }
    if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
        return -1;
    }
    if (ftruncate(fd, len) < 0) {
        return -2;
    }
    return 0;
}

int cxlpool_write_header(int fd, const CXLPoolGeometry *g,
                         uint64_t create_time_ns)
{
    g_autofree uint8_t *buf = g_malloc0(CXLPOOL_HEADER_SIZE);

    cxlpool_header_init((CXLPoolHeader *)buf, g, create_time_ns);
    return cxlpool_write_at(fd, 0, buf, CXLPOOL_HEADER_SIZE);
}

int cxlpool_write_at(int fd, uint64_t off, const void *buf, size_t len)
{
    ssize_t n = pwrite(fd, buf, len, off);
    size_t maplen = QEMU_ALIGN_UP(len, CXLPOOL_TAIL_ALIGN);
    void *m;

    if (n >= 0) {
        return (size_t)n == len ? 0 : -EIO;
    }
    if (errno != EINVAL || off % CXLPOOL_TAIL_ALIGN) {
        return -errno;
    }
    /* hugetlbfs has no write(2): through a shared mapping */
    m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    if (m == MAP_FAILED) {
        return -errno;
    }
    memcpy(m, buf, len);
    munmap(m, maplen);
    return 0;
}

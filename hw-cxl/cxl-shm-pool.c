/*
 * cxl-shm: pool file creation, validation, host join/leave and liveness
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The pool file is a 2 MiB metadata area (header, host table, liveness
 * lock bytes) followed by the data (docs/pool-format.md).  Creating or
 * validating the header happens under flock(LOCK_EX) so that N QEMUs
 * started at once agree on one pool.  Nothing is written to the file
 * before it has been validated (or found empty).  Each host holds an
 * open file description (OFD) write lock on its own byte at
 * CXLPOOL_LOCK_OFFSET + host-id for its whole life: the kernel drops it
 * when the process dies, so a host that is "live" in the table but whose
 * lock byte is free has failed.
 */

#include "qemu/osdep.h"
#include <sys/file.h>
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/crc32c.h"
#include "qemu/atomic.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "cxl-shm.h"
#include "trace.h"

QEMU_BUILD_BUG_ON(sizeof(CXLPoolHeader) != 0x50);
QEMU_BUILD_BUG_ON(sizeof(CXLPoolHost) != 128);
QEMU_BUILD_BUG_ON(CXLPOOL_HOSTS_OFFSET + CXLPOOL_MAX_HOSTS *
                  sizeof(CXLPoolHost) > CXLPOOL_LINELOCK_OFFSET);
QEMU_BUILD_BUG_ON(CXLPOOL_LINELOCK_OFFSET + CXLSHM_NR_LOCKS * 8 >
                  CXLPOOL_UNDO_OFFSET);
QEMU_BUILD_BUG_ON(sizeof(CXLShmUndo) != 128);
QEMU_BUILD_BUG_ON(CXLPOOL_UNDO_OFFSET + CXLPOOL_MAX_HOSTS * 2 *
                  CXLSHM_UNDO_SLOTS * sizeof(CXLShmUndo) >
                  CXLPOOL_LOCK_OFFSET);
QEMU_BUILD_BUG_ON(CXLSHM_STAT_NR > ARRAY_SIZE(((CXLPoolHost *)0)->stats));

const char *cxl_shm_host_state_name(uint32_t state)
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

static uint32_t pool_header_crc(const CXLPoolHeader *h)
{
    return crc32c(0xffffffff, (const uint8_t *)h,
                  offsetof(CXLPoolHeader, crc));
}

static int pool_flock(int fd, int op)
{
    int ret;

    do {
        ret = flock(fd, op);
    } while (ret < 0 && errno == EINTR);
    return ret;
}

/* OFD lock on the liveness byte of @host: F_WRLCK to take, F_UNLCK to drop */
static int pool_host_lock(int fd, uint32_t host, short type)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = CXLPOOL_LOCK_OFFSET + host,
        .l_len = 1,
        .l_type = type,
    };

    if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        return -errno;
    }
    return 0;
}

/* true if some process holds the liveness byte of @host */
static bool pool_host_locked(int fd, uint32_t host)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = CXLPOOL_LOCK_OFFSET + host,
        .l_len = 1,
        .l_type = F_WRLCK,
    };

    if (fcntl(fd, F_OFD_GETLK, &fl) < 0) {
        return true;    /* cannot tell: assume alive */
    }
    return fl.l_type != F_UNLCK;
}

static bool pool_validate(CXLShmState *s, const CXLPoolHeader *h,
                          uint64_t file_size, Error **errp)
{
    uint64_t want = CXLPOOL_META_SIZE + s->size;

    if (buffer_is_zero(h, sizeof(*h))) {
        /* pool_create sizes the file first and writes the header last */
        error_setg(errp, "cxl-shm: pool '%s' has no header: if it is a "
                   "cxlpod pool, the QEMU that created it was stopped "
                   "before writing one, so no host ever joined it; remove "
                   "the file and start again", s->pool_path);
        return false;
    }
    if (memcmp(h->magic, CXLPOOL_MAGIC, sizeof(h->magic)) != 0) {
        error_setg(errp, "cxl-shm: pool '%s' is not a cxlpod pool "
                   "(bad magic); refusing to touch it", s->pool_path);
        return false;
    }
    if (h->version != CXLPOOL_VERSION) {
        error_setg(errp, "cxl-shm: pool '%s' has format version %u, this "
                   "QEMU supports version %u only", s->pool_path,
                   h->version, CXLPOOL_VERSION);
        return false;
    }
    if (h->crc != pool_header_crc(h)) {
        error_setg(errp, "cxl-shm: pool '%s' has a corrupt header "
                   "(checksum mismatch); refusing to touch it",
                   s->pool_path);
        return false;
    }
    if (h->header_size != CXLPOOL_HEADER_SIZE ||
        h->meta_size != CXLPOOL_META_SIZE ||
        h->line_size != CXLPOOL_LINE ||
        h->hosts_offset != CXLPOOL_HOSTS_OFFSET ||
        h->host_entry_size != sizeof(CXLPoolHost) ||
        h->lock_offset != CXLPOOL_LOCK_OFFSET) {
        error_setg(errp, "cxl-shm: pool '%s' has an unsupported layout "
                   "(metadata size 0x%" PRIx64 ", line size %u)",
                   s->pool_path, h->meta_size, h->line_size);
        return false;
    }
    if (h->data_size != s->size || h->coherent_size != s->coherent_size ||
        h->max_hosts != s->max_hosts) {
        error_setg(errp, "cxl-shm: pool '%s' has another geometry: pool "
                   "size=%" PRIu64 " coherent-size=%" PRIu64 " max-hosts=%u, "
                   "device asks size=%" PRIu64 " coherent-size=%" PRIu64
                   " max-hosts=%u", s->pool_path, h->data_size,
                   h->coherent_size, h->max_hosts, s->size,
                   s->coherent_size, s->max_hosts);
        return false;
    }
    if (file_size != want) {
        error_setg(errp, "cxl-shm: pool '%s' is %" PRIu64 " bytes long, "
                   "its header says %" PRIu64 "; refusing to touch it",
                   s->pool_path, file_size, want);
        return false;
    }
    return true;
}

static bool pool_create(CXLShmState *s, Error **errp)
{
    g_autofree uint8_t *buf = g_malloc0(CXLPOOL_LOCK_OFFSET);
    CXLPoolHeader *h = (CXLPoolHeader *)buf;
    ssize_t n;

    memcpy(h->magic, CXLPOOL_MAGIC, sizeof(h->magic));
    h->version = CXLPOOL_VERSION;
    h->header_size = CXLPOOL_HEADER_SIZE;
    h->meta_size = CXLPOOL_META_SIZE;
    h->data_size = s->size;
    h->coherent_size = s->coherent_size;
    h->line_size = CXLPOOL_LINE;
    h->max_hosts = s->max_hosts;
    h->hosts_offset = CXLPOOL_HOSTS_OFFSET;
    h->host_entry_size = sizeof(CXLPoolHost);
    h->lock_offset = CXLPOOL_LOCK_OFFSET;
    h->create_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    h->crc = pool_header_crc(h);

    /*
     * Size first, header last: a torn create is refused with a hint.
     * The blocks are allocated now, so that a full file system is an
     * error here and not a SIGBUS on some guest store later.
     */
    if (fallocate(s->fd, 0, 0, CXLPOOL_META_SIZE + s->size) < 0) {
        if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
            error_setg_errno(errp, errno, "cxl-shm: cannot allocate the "
                             "%" PRIu64 " MiB of pool '%s' on its file "
                             "system", (CXLPOOL_META_SIZE + s->size) >> 20,
                             s->pool_path);
            return false;
        }
        if (ftruncate(s->fd, CXLPOOL_META_SIZE + s->size) < 0) {
            error_setg_errno(errp, errno, "cxl-shm: cannot size pool '%s'",
                             s->pool_path);
            return false;
        }
    }
    n = pwrite(s->fd, buf, CXLPOOL_HOSTS_OFFSET +
               CXLPOOL_MAX_HOSTS * sizeof(CXLPoolHost), 0);
    if (n != CXLPOOL_HOSTS_OFFSET + CXLPOOL_MAX_HOSTS * sizeof(CXLPoolHost)) {
        error_setg_errno(errp, n < 0 ? errno : EIO,
                         "cxl-shm: cannot write pool header of '%s'",
                         s->pool_path);
        return false;
    }
    trace_cxl_shm_pool_create(s->pool_path, s->size, s->coherent_size,
                              s->max_hosts);
    return true;
}

/* Called with the flock held: mark live hosts whose lock is free failed */
static void pool_reap_locked(CXLShmState *s)
{
    uint32_t i;

    for (i = 0; i < s->max_hosts; i++) {
        CXLPoolHost *e = &s->hosts[i];

        if (i == s->host_id && s->joined) {
            continue;
        }
        if (qatomic_read(&e->state) == CXLPOOL_HOST_LIVE &&
            !pool_host_locked(s->fd, i)) {
            qatomic_set(&e->state, CXLPOOL_HOST_FAILED);
            trace_cxl_shm_pool_host_failed(s->pool_path, i,
                                           qatomic_read(&e->generation));
        }
    }
}

/*
 * Line engine: is the writer (@host, low 48 bits of @gen) of a held line
 * lock still running?  Called after a long spin, without any lock.
 */
static bool pool_owner_alive(void *opaque, uint32_t host, uint64_t gen)
{
    CXLShmState *s = opaque;
    CXLPoolHost *e;

    if (host >= s->max_hosts) {
        return false;
    }
    e = &s->hosts[host];
    return qatomic_read(&e->state) == CXLPOOL_HOST_LIVE &&
           (qatomic_read(&e->generation) & ((1ULL << 48) - 1)) == gen &&
           pool_host_locked(s->fd, host);
}

void cxl_shm_pool_refresh_hosts(CXLShmState *s)
{
    uint32_t i;
    bool suspect = false;

    if (!s->joined) {
        return;
    }
    for (i = 0; i < s->max_hosts; i++) {
        if (i != s->host_id &&
            qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE &&
            !pool_host_locked(s->fd, i)) {
            suspect = true;
            break;
        }
    }
    if (!suspect) {
        return;
    }
    /*
     * Re-check under the pool lock: the host may be rejoining right now.
     * This runs for a guest's register read, under the BQL: never wait
     * for the lock (a joining QEMU holds it while it allocates a new
     * pool); whoever holds it reaps, or the next read does.
     */
    if (pool_flock(s->fd, LOCK_EX | LOCK_NB) < 0) {
        return;
    }
    pool_reap_locked(s);
    pool_flock(s->fd, LOCK_UN);
}

bool cxl_shm_pool_join(CXLShmState *s, Error **errp)
{
    CXLPoolHeader h;
    struct stat st;
    CXLPoolHost *me;
    bool created = false;
    int tries;
    void *meta;
    ssize_t n;
    int ret;

    /*
     * O_EXCL first: a refused start removes only a file it made.  A file
     * removed (or replaced) while this QEMU waited for its lock was a
     * refused create of another QEMU: open the path again, or two QEMUs
     * would make two pods of one name.
     */
    for (tries = 0;; tries++) {
        struct stat ps;

        s->fd = qemu_create(s->pool_path, O_RDWR | O_EXCL, s->pool_mode,
                            NULL);
        created = s->fd >= 0;
        if (!created) {
            s->fd = qemu_create(s->pool_path, O_RDWR, s->pool_mode, errp);
        }
        if (s->fd < 0) {
            error_prepend(errp, "cxl-shm: cannot open pool: ");
            return false;
        }
        if (pool_flock(s->fd, LOCK_EX) < 0) {
            error_setg_errno(errp, errno, "cxl-shm: cannot lock pool '%s'",
                             s->pool_path);
            goto fail_close;
        }
        if (fstat(s->fd, &st) < 0) {
            error_setg_errno(errp, errno, "cxl-shm: cannot stat pool '%s'",
                             s->pool_path);
            goto fail_unlock;
        }
        if (st.st_nlink > 0 && stat(s->pool_path, &ps) == 0 &&
            ps.st_dev == st.st_dev && ps.st_ino == st.st_ino) {
            break;
        }
        pool_flock(s->fd, LOCK_UN);
        qemu_close(s->fd);
        s->fd = -1;
        if (tries == 10) {
            error_setg(errp, "cxl-shm: pool '%s' was removed or replaced "
                       "10 times while this QEMU opened it", s->pool_path);
            return false;
        }
    }
    /* the mode asked for, whatever the umask */
    if (created && fchmod(s->fd, s->pool_mode) < 0) {
        error_setg_errno(errp, errno, "cxl-shm: cannot set the mode of "
                         "pool '%s'", s->pool_path);
        goto fail_unlock;
    }
    if (!S_ISREG(st.st_mode)) {
        error_setg(errp, "cxl-shm: pool '%s' is not a regular file",
                   s->pool_path);
        goto fail_unlock;
    }
    if (st.st_uid != geteuid()) {
        error_setg(errp, "cxl-shm: pool '%s' belongs to uid %u, this QEMU "
                   "runs as uid %u: a pod's hosts run as one user; refusing "
                   "to touch it", s->pool_path, (unsigned)st.st_uid,
                   (unsigned)geteuid());
        goto fail_unlock;
    }
    if (!created && !(st.st_mode & S_IWUSR)) {
        error_setg(errp, "cxl-shm: pool '%s' is read-only (mode 0%o); a "
                   "host writes its pool", s->pool_path,
                   (unsigned)(st.st_mode & 07777));
        goto fail_unlock;
    }

    if (st.st_size == 0) {
        if (!created && fchmod(s->fd, s->pool_mode) < 0) {
            error_setg_errno(errp, errno, "cxl-shm: cannot set the mode of "
                             "pool '%s'", s->pool_path);
            goto fail_unlock;
        }
        if (!pool_create(s, errp)) {
            /* an empty file the user made stays empty */
            if (!created && ftruncate(s->fd, 0) < 0) {
                warn_report("cxl-shm: could not empty '%s' again after the "
                            "refused create", s->pool_path);
            }
            goto fail_unlock;
        }
    } else {
        if (st.st_size < CXLPOOL_META_SIZE) {
            error_setg(errp, "cxl-shm: pool '%s' is not a cxlpod pool "
                       "(%" PRIu64 " bytes, smaller than its metadata "
                       "area); refusing to touch it", s->pool_path,
                       (uint64_t)st.st_size);
            goto fail_unlock;
        }
        n = pread(s->fd, &h, sizeof(h), 0);
        if (n != sizeof(h)) {
            error_setg_errno(errp, n < 0 ? errno : EIO,
                             "cxl-shm: cannot read pool header of '%s'",
                             s->pool_path);
            goto fail_unlock;
        }
        if (!pool_validate(s, &h, st.st_size, errp)) {
            goto fail_unlock;
        }
    }

    ret = pool_host_lock(s->fd, s->host_id, F_WRLCK);
    if (ret == -EAGAIN || ret == -EACCES) {
        error_setg(errp, "cxl-shm: host-id %u is in use by a running QEMU on "
                   "pool '%s' (allowed: a free host id in [0, %u])",
                   s->host_id, s->pool_path, s->max_hosts - 1);
        goto fail_unlock;
    } else if (ret < 0) {
        error_setg_errno(errp, -ret, "cxl-shm: cannot lock host slot %u of "
                         "pool '%s'", s->host_id, s->pool_path);
        goto fail_unlock;
    }

    meta = mmap(NULL, CXLPOOL_META_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                s->fd, 0);
    if (meta == MAP_FAILED) {
        error_setg_errno(errp, errno, "cxl-shm: cannot map pool metadata of "
                         "'%s'", s->pool_path);
        pool_host_lock(s->fd, s->host_id, F_UNLCK);
        goto fail_unlock;
    }
    s->meta = meta;
    s->hdr = meta;
    s->hosts = (CXLPoolHost *)(s->meta + CXLPOOL_HOSTS_OFFSET);

    pool_reap_locked(s);

    me = &s->hosts[s->host_id];
    s->generation = qatomic_read(&me->generation) + 1;
    memset(me->stats, 0, sizeof(me->stats));
    me->pid = getpid();
    me->join_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    me->leave_time_ns = 0;
    qatomic_set(&me->generation, s->generation);
    /* other hosts must see the new generation once they see "live" */
    smp_wmb();
    qatomic_set(&me->state, CXLPOOL_HOST_LIVE);
    s->joined = true;

    /* line locks and undo slots; locks an earlier life of ours left held */
    s->lines.locks = (uint64_t *)(s->meta + CXLPOOL_LINELOCK_OFFSET);
    s->lines.undo = (CXLShmUndo *)(s->meta + CXLPOOL_UNDO_OFFSET);
    s->lines.host_id = s->host_id;
    s->lines.generation = s->generation;
    s->lines.coherent_size = s->coherent_size;
    s->lines.size = s->size;
    s->lines.owner_alive = pool_owner_alive;
    s->lines.opaque = s;
    cxl_shm_lines_recover_own(&s->lines);

    pool_flock(s->fd, LOCK_UN);
    trace_cxl_shm_pool_join(s->pool_path, s->host_id, s->generation);
    return true;

fail_unlock:
    /* nobody else can have joined a file this QEMU made: remove it */
    if (created && unlink(s->pool_path) < 0) {
        warn_report("cxl-shm: could not remove '%s' after the refused "
                    "start", s->pool_path);
    }
    pool_flock(s->fd, LOCK_UN);
fail_close:
    qemu_close(s->fd);
    s->fd = -1;
    return false;
}

/*
 * A reset host is a failed host that rejoins at once: new generation (the
 * other hosts see it in the host table), same slot and liveness lock.
 * No line operation may be running (the vCPUs are stopped).
 */
void cxl_shm_pool_rejoin(CXLShmState *s)
{
    CXLPoolHost *me;

    if (!s->joined) {
        return;
    }
    pool_flock(s->fd, LOCK_EX);
    me = &s->hosts[s->host_id];
    s->generation = qatomic_read(&me->generation) + 1;
    me->join_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    qatomic_set(&me->generation, s->generation);
    s->lines.generation = s->generation;
    cxl_shm_lines_recover_own(&s->lines);
    pool_flock(s->fd, LOCK_UN);
    trace_cxl_shm_pool_rejoin(s->pool_path, s->host_id, s->generation);
}

void cxl_shm_pool_sync_stats(CXLShmState *s)
{
    int i;

    if (!s->joined) {
        return;
    }
    for (i = 0; i < CXLSHM_STAT_NR; i++) {
        qatomic_set(&s->hosts[s->host_id].stats[i],
                    qatomic_read(&s->stats[i]));
    }
}

void cxl_shm_pool_leave(CXLShmState *s)
{
    CXLPoolHost *me;

    if (!s->joined) {
        return;
    }
    cxl_shm_pool_sync_stats(s);
    pool_flock(s->fd, LOCK_EX);
    me = &s->hosts[s->host_id];
    me->leave_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    /* the leave time is valid once the state says "left" */
    smp_wmb();
    qatomic_set(&me->state, CXLPOOL_HOST_LEFT);
    pool_host_lock(s->fd, s->host_id, F_UNLCK);
    pool_flock(s->fd, LOCK_UN);
    s->joined = false;
    trace_cxl_shm_pool_leave(s->pool_path, s->host_id, s->generation);

    munmap(s->meta, CXLPOOL_META_SIZE);
    s->meta = NULL;
    s->hdr = NULL;
    s->hosts = NULL;
    qemu_close(s->fd);
    s->fd = -1;
}

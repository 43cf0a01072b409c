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
 * lock byte is free has failed.  The format itself (layout, validation,
 * liveness probe, creation) is in cxl-shm-format.c, which cxlpod-pool
 * shares.
 */

#include "qemu/osdep.h"
#include <sys/file.h>
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/atomic.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "system/qtest.h"
#include "cxl-shm.h"
#include "trace.h"

/*
 * Test-only fault points: with x-test-kill-at=<step> this QEMU kills
 * itself with SIGKILL at that step of joining, leaving or resetting, so
 * that tests can check what the next start makes of a pool left at each
 * step (tests/qtest/kill-steps.sh); with x-test-stop-at=<step> it stops
 * itself there (SIGSTOP), so that a test can run another host while this
 * one waits at the step and then let it go on (SIGCONT).  The properties
 * are refused unless the qtest accelerator runs, and so is a step name
 * that is not one of these.
 */
static const char *const pool_test_steps[] = {
    "after-open", "after-flock", "after-allocate", "after-header",
    "after-host-lock", "after-generation", "after-slot-claim",
    "after-join", "leave-after-flock", "leave-after-state",
    "reset-after-flock", "reset-after-generation", "abort-before-flock",
    NULL,
};

static void pool_test_kill(CXLShmState *s, const char *step)
{
    if (s->test_kill_at && strcmp(s->test_kill_at, step) == 0) {
        raise(SIGKILL);
    }
    if (s->test_stop_at && strcmp(s->test_stop_at, step) == 0) {
        raise(SIGSTOP);
    }
}

static bool pool_test_step_check(const char *prop, const char *at,
                                 Error **errp)
{
    g_autofree char *steps = NULL;
    int i;

    if (!at) {
        return true;
    }
    if (!qtest_enabled()) {
        error_setg(errp, "property '%s' is a test hook (allowed only "
                   "under the qtest accelerator)", prop);
        return false;
    }
    for (i = 0; pool_test_steps[i]; i++) {
        if (strcmp(at, pool_test_steps[i]) == 0) {
            return true;
        }
    }
    steps = g_strjoinv(", ", (char **)pool_test_steps);
    error_setg(errp, "property '%s' is '%s' (allowed: one of %s)", prop,
               at, steps);
    return false;
}

/* Create the pool in the empty file s->fd: size first, header last */
static bool pool_create(CXLShmState *s, Error **errp)
{
    CXLPoolGeometry g = {
        .size = s->size,
        .coherent_size = s->coherent_size,
        .max_hosts = s->max_hosts,
    };
    int ret;
    uint64_t len = cxlpool_file_size(s->size, s->max_hosts);

    /* a torn create (no header) is refused with a hint */
    ret = cxlpool_allocate(s->fd, len);
    if (ret == -1) {
        error_setg_errno(errp, errno, "cannot allocate the "
                         "%" PRIu64 " MiB of pool '%s' on its file "
                         "system", len >> 20, s->pool_path);
        return false;
    } else if (ret < 0) {
        error_setg_errno(errp, errno, "cannot size pool '%s'",
                         s->pool_path);
        return false;
    }
    pool_test_kill(s, "after-allocate");
    ret = cxlpool_write_header(s->fd, &g,
                               qemu_clock_get_ns(QEMU_CLOCK_HOST));
    if (ret < 0) {
        error_setg_errno(errp, -ret, "cannot write pool header "
                         "of '%s'", s->pool_path);
        return false;
    }
    pool_test_kill(s, "after-header");
    trace_cxl_shm_pool_create(s->pool_path, s->size, s->coherent_size,
                              s->max_hosts);
    return true;
}

/* Called with the flock held: mark live hosts whose lock is free failed */
static void pool_reap_locked(CXLShmState *s)
{
    uint64_t reaped[DIV_ROUND_UP(CXLPOOL_MAX_HOSTS, 64)] = { 0 };
    uint32_t i;

    if (!cxlpool_reap(s->fd, s->hosts, s->max_hosts,
                      s->joined ? s->host_id : -1, reaped)) {
        return;
    }
    for (i = 0; i < s->max_hosts; i++) {
        if (reaped[i / 64] & (1ULL << (i % 64))) {
            uint64_t gen = qatomic_read(&s->hosts[i].generation);

            trace_cxl_shm_pool_host_failed(s->pool_path, i, gen);
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
           cxlpool_host_locked(s->fd, host);
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
            !cxlpool_host_locked(s->fd, i)) {
            suspect = true;
            break;
        }
    }
    if (!suspect) {
        return;
    }
    /*
     * Re-check under the pool lock: the host may be rejoining right now.
     * This runs for a guest's register read (BAR5 is lockless: from any
     * vCPU at once) and QMP: never wait for the lock (a joining QEMU
     * holds it while it allocates a new pool), nor for another thread of
     * this QEMU reaping (the flock does not exclude it); whoever holds
     * them reaps, or the next read does.
     */
    if (qemu_mutex_trylock(&s->reap_lock)) {
        return;
    }
    if (cxlpool_flock(s->fd, LOCK_EX | LOCK_NB) == 0) {
        pool_reap_locked(s);
        cxlpool_flock(s->fd, LOCK_UN);
    }
    qemu_mutex_unlock(&s->reap_lock);
}

/* A new pool's metadata is all zero where its header goes */
#define POOL_HEAD_LEN CXLPOOL_HEADER_SIZE

static int pool_head_is_zero(int fd)
{
    g_autofree uint8_t *buf = g_malloc(POOL_HEAD_LEN);
    ssize_t n = pread(fd, buf, POOL_HEAD_LEN, 0);

    if (n < 0) {
        return -errno;
    }
    return n == POOL_HEAD_LEN && buffer_is_zero(buf, POOL_HEAD_LEN);
}

/*
 * A refused start leaves the file as it found it: a file it created is
 * removed (nobody else can have joined it), a user's empty file is
 * emptied again with its own mode, the header written into a zero-filled
 * file (a new memdev's) is zeroed again.  Called with the flock held.
 */
static void pool_undo_made(CXLShmState *s)
{
    static const uint8_t zeros[POOL_HEAD_LEN];
    struct stat st;

    switch (s->made) {
    case CXLSHM_MADE_FILE:
        /* only if the path still names the file this start made */
        if (cxlpool_fd_is_path(s->fd, s->pool_path, &st) <= 0) {
            warn_report("'%s' is no longer the pool this start made: left "
                        "as it is", s->pool_path);
        } else if (unlink(s->pool_path) < 0) {
            warn_report("could not remove '%s' after the refused "
                        "start", s->pool_path);
        }
        break;
    case CXLSHM_MADE_IN_EMPTY:
        if (ftruncate(s->fd, 0) < 0 ||
            fchmod(s->fd, s->made_old_mode) < 0) {
            warn_report("could not make '%s' empty again (mode "
                        "0%o) after the refused start", s->pool_path,
                        (unsigned)s->made_old_mode);
        }
        break;
    case CXLSHM_MADE_IN_ZEROS:
        /* the header zeroed, the tail this start added cut off */
        if (cxlpool_write_at(s->fd, 0, zeros, sizeof(zeros)) < 0 ||
            ftruncate(s->fd, CXLPOOL_META_SIZE + s->size) < 0) {
            warn_report("could not zero the header of '%s' again "
                        "after the refused start", s->pool_path);
        }
        break;
    case CXLSHM_MADE_NOTHING:
        break;
    }
    s->made = CXLSHM_MADE_NOTHING;
}

/*
 * pool=PATH found a file of exactly the pool's size whose metadata is all
 * zero: a create stopped before its header (refused, with the recovery),
 * or the file a memdev host's backend has just made and sized, whose
 * device has not yet taken the flock to write the header (QEMU makes the
 * backends before the devices).  While the file is younger than
 * POOL_NEW_FILE_NS the caller gives the flock up and looks again.
 */
#define POOL_NEW_FILE_NS        (5 * NANOSECONDS_PER_SECOND)
#define POOL_NEW_FILE_POLL_US   20000

static bool pool_header_may_come(CXLShmState *s, const struct stat *st)
{
    int64_t made = st->st_mtim.tv_sec * NANOSECONDS_PER_SECOND +
                   st->st_mtim.tv_nsec;

    return st->st_size == CXLPOOL_META_SIZE + s->size &&
           qemu_clock_get_ns(QEMU_CLOCK_HOST) - made < POOL_NEW_FILE_NS &&
           pool_head_is_zero(s->fd) == 1;
}

/* The flock is given up and the pool file closed (a refused start) */
static void pool_close(CXLShmState *s)
{
    cxlpool_flock(s->fd, LOCK_UN);
    qemu_close(s->fd);
    s->fd = -1;
}

/*
 * memdev: the backend has opened (and, when it was missing or empty,
 * created and sized) the pool file.  Take a descriptor of that file, not
 * of whatever its path names now.
 */
static bool pool_open_memdev(CXLShmState *s, struct stat *st, Error **errp)
{
    MemoryRegion *mr = host_memory_backend_get_memory(s->backend);
    int ret;

    s->fd = fcntl(memory_region_get_fd(mr), F_DUPFD_CLOEXEC, 0);
    if (s->fd < 0) {
        error_setg_errno(errp, errno, "cannot use the file of "
                         "memdev '%s'", s->pool_path);
        return false;
    }
    pool_test_kill(s, "after-open");
    if (cxlpool_flock(s->fd, LOCK_EX) < 0) {
        error_setg_errno(errp, errno, "cannot lock pool '%s'",
                         s->pool_path);
        pool_close(s);
        return false;
    }
    ret = cxlpool_fd_is_path(s->fd, s->pool_path, st);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "cannot stat pool '%s'",
                         s->pool_path);
    } else if (!ret) {
        error_setg(errp, "pool '%s' was removed or replaced after "
                   "its memory backend opened it", s->pool_path);
    } else {
        return true;
    }
    pool_close(s);
    return false;
}

/*
 * pool=PATH: this device opens (or creates) the file itself, and takes
 * its flock.  O_EXCL first: a refused start removes only a file it made.
 * A file removed (or replaced) while this QEMU waited for its lock was a
 * refused create of another QEMU: open the path again, or two QEMUs
 * would make two pods of one name.  *@created: this QEMU made the file.
 */
static bool pool_open_path(CXLShmState *s, struct stat *st, bool *created,
                           Error **errp)
{
    ERRP_GUARD();
    int tries, ret;

    for (tries = 0; ; tries++) {
        s->fd = qemu_create(s->pool_path, O_RDWR | O_EXCL, s->pool_mode,
                            NULL);
        *created = s->fd >= 0;
        if (!*created) {
            s->fd = qemu_create(s->pool_path, O_RDWR, s->pool_mode, errp);
        }
        if (s->fd < 0) {
            error_prepend(errp, "cannot open pool: ");
            return false;
        }
        pool_test_kill(s, "after-open");
        if (cxlpool_flock(s->fd, LOCK_EX) < 0) {
            error_setg_errno(errp, errno, "cannot lock pool '%s'",
                             s->pool_path);
            pool_close(s);
            return false;
        }
        ret = cxlpool_fd_is_path(s->fd, s->pool_path, st);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "cannot stat pool '%s'",
                             s->pool_path);
            pool_undo_made(s);
            pool_close(s);
            return false;
        }
        if (ret && !*created && pool_header_may_come(s, st)) {
            /* not a try: the wait ends when the file is no longer new */
            tries--;
            trace_cxl_shm_pool_wait_header(s->pool_path);
            pool_close(s);
            g_usleep(POOL_NEW_FILE_POLL_US);
            continue;
        }
        if (ret) {
            s->made = *created ? CXLSHM_MADE_FILE : CXLSHM_MADE_NOTHING;
            return true;
        }
        pool_close(s);
        if (tries == 10) {
            error_setg(errp, "pool '%s' was removed or replaced "
                       "10 times while this QEMU opened it", s->pool_path);
            return false;
        }
    }
}

/* The file may be this pod's: a regular file of this user's, writable */
static bool pool_check_file(CXLShmState *s, const struct stat *st,
                            bool created, Error **errp)
{
    /* the mode asked for, whatever the umask */
    if (created && fchmod(s->fd, s->pool_mode) < 0) {
        error_setg_errno(errp, errno, "cannot set the mode of "
                         "pool '%s'", s->pool_path);
        return false;
    }
    if (!S_ISREG(st->st_mode)) {
        error_setg(errp, "pool '%s' is not a regular file",
                   s->pool_path);
        return false;
    }
    if (st->st_uid != geteuid()) {
        error_setg(errp, "pool '%s' belongs to uid %u, this QEMU "
                   "runs as uid %u: a pod's hosts run as one user; refusing "
                   "to touch it", s->pool_path, (unsigned)st->st_uid,
                   (unsigned)geteuid());
        return false;
    }
    if (!created && !(st->st_mode & S_IWUSR)) {
        error_setg(errp, "pool '%s' is read-only (mode 0%o); a "
                   "host writes its pool", s->pool_path,
                   (unsigned)(st->st_mode & 07777));
        return false;
    }
    return true;
}

/*
 * A new pool is made in an empty or a new memdev's zero-filled file;
 * any other file's header must describe this device's geometry
 */
static bool pool_make_or_check(CXLShmState *s, const struct stat *st,
                               bool created, Error **errp)
{
    CXLPoolGeometry want = {
        .size = s->size,
        .coherent_size = s->coherent_size,
        .max_hosts = s->max_hosts,
    };
    g_autofree char *msg = NULL;
    CXLPoolHeader h;
    CXLPoolError e;
    ssize_t n;

    if (st->st_size == 0) {
        if (!created) {
            /* a user's empty file: stays empty, with its mode, if refused */
            s->made = CXLSHM_MADE_IN_EMPTY;
            s->made_old_mode = st->st_mode & 07777;
            if (fchmod(s->fd, s->pool_mode) < 0) {
                error_setg_errno(errp, errno, "cannot set the mode "
                                 "of pool '%s'", s->pool_path);
                return false;
            }
        }
        return pool_create(s, errp);
    }
    if (s->memdev && st->st_size == CXLPOOL_META_SIZE + s->size &&
        pool_head_is_zero(s->fd) == 1) {
        /*
         * The file the memory backend created and sized (or a zero-filled
         * file of the pool's size): a new pool.  Its first QEMU writes the
         * header, under the flock; the next ones find it.
         */
        s->made = CXLSHM_MADE_IN_ZEROS;
        return pool_create(s, errp);
    }
    if (st->st_size >= CXLPOOL_META_SIZE) {
        n = pread(s->fd, &h, sizeof(h), 0);
        if (n != sizeof(h)) {
            error_setg_errno(errp, n < 0 ? errno : EIO,
                             "cannot read pool header of '%s'",
                             s->pool_path);
            return false;
        }
    }
    e = cxlpool_check(st->st_size >= CXLPOOL_META_SIZE ? &h : NULL,
                      st->st_size, &want);
    if (e != CXLPOOL_OK) {
        msg = cxlpool_error_message(e, s->pool_path, &h, st->st_size, &want);
        error_setg(errp, "%s", msg);
        return false;
    }
    return true;
}

/* This host's liveness lock: held for its whole life */
static bool pool_lock_host(CXLShmState *s, Error **errp)
{
    int ret = qemu_lock_fd(s->fd, CXLPOOL_HOST_LOCK(s->host_id), 1, true);

    if (ret == -EAGAIN || ret == -EACCES) {
        error_setg(errp, "host-id %u is in use by a running QEMU on "
                   "pool '%s' (allowed: a free host id in [0, %u])",
                   s->host_id, s->pool_path, s->max_hosts - 1);
        return false;
    } else if (ret < 0) {
        error_setg_errno(errp, -ret, "cannot lock host slot %u of "
                         "pool '%s'", s->host_id, s->pool_path);
        return false;
    }
    pool_test_kill(s, "after-host-lock");
    return true;
}

/*
 * The metadata mapped: the head (header, locks) and the tail (host table,
 * undo slots, turns, snoop filter); else the host unlocked
 */
static bool pool_map_meta(CXLShmState *s, Error **errp)
{
    CXLPoolLayout *lo = &s->layout;
    void *meta, *tail;

    cxlpool_layout(lo, s->size, s->max_hosts);
    meta = mmap(NULL, CXLPOOL_META_SIZE, PROT_READ | PROT_WRITE,
                MAP_SHARED, s->fd, 0);
    tail = meta == MAP_FAILED ? MAP_FAILED :
           mmap(NULL, lo->tail_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                s->fd, lo->tail);
    if (tail == MAP_FAILED) {
        error_setg_errno(errp, errno, "cannot map pool metadata of "
                         "'%s'", s->pool_path);
        if (meta != MAP_FAILED) {
            munmap(meta, CXLPOOL_META_SIZE);
        }
        qemu_unlock_fd(s->fd, CXLPOOL_HOST_LOCK(s->host_id), 1);
        return false;
    }
    s->meta = meta;
    s->tail = tail;
    s->hdr = meta;
    s->hosts = cxl_shm_pool_tail(s, lo->hosts);
    return true;
}

static void pool_unmap_meta(CXLShmState *s)
{
    munmap(s->meta, CXLPOOL_META_SIZE);
    munmap(s->tail, s->layout.tail_size);
    s->meta = NULL;
    s->tail = NULL;
    s->hdr = NULL;
    s->hosts = NULL;
}

/*
 * Failed hosts reaped, this host's entry claimed with its next
 * generation, then marked live
 */
static void pool_claim_slot(CXLShmState *s)
{
    CXLPoolHost *me = &s->hosts[s->host_id];
    uint32_t i;

    pool_reap_locked(s);

    s->slot_before = *me;       /* a start refused later puts it back */
    for (i = 0; i < s->max_hosts; i++) {
        s->peer_gen[i] = qatomic_read(&s->hosts[i].generation);
    }
    s->generation = qatomic_read(&me->generation) + 1;
    memset(me->stats, 0, sizeof(me->stats));
    me->pid = getpid();
    me->join_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    me->leave_time_ns = 0;
    qatomic_set(&me->generation, s->generation);
    pool_test_kill(s, "after-generation");
    /* other hosts must see the new generation once they see "live" */
    smp_wmb();
    qatomic_set(&me->state, CXLPOOL_HOST_LIVE);
    s->joined = true;
    pool_test_kill(s, "after-slot-claim");
}

/*
 * The line engine's view of the pool: line locks and undo slots.  The
 * locks an earlier life of ours left held are taken over once the pool's
 * data is mapped (realize, after the backend): a rollback writes pool
 * lines.
 */
static void pool_setup_lines(CXLShmState *s)
{
    s->lines.locks = (uint64_t *)(s->meta + CXLPOOL_LINELOCK_OFFSET);
    s->lines.undo = cxl_shm_pool_tail(s, s->layout.undo);
    s->lines.versions = (uint64_t *)(s->meta + CXLPOOL_VERSIONS_OFFSET);
    s->lines.turns = cxl_shm_pool_tail(s, s->layout.turns);
    s->lines.turn_words = s->layout.turn_words;
    /* the line engine copies a turn entry into an array of the largest */
    assert(s->lines.turn_words >= 2 &&
           s->lines.turn_words <= CXLSHM_TURN_WORDS_MAX);
    s->lines.max_hosts = s->max_hosts;
    s->lines.host_id = s->host_id;
    s->lines.generation = s->generation;
    s->lines.coherent_size = s->coherent_size;
    s->lines.size = s->size;
    s->lines.owner_alive = pool_owner_alive;
    s->lines.opaque = s;
}

/*
 * This host joins its pod: the pool file opened and flocked, checked (or
 * a new pool made in it), this host's liveness lock taken, the metadata
 * mapped and the host's entry claimed.  A refusal leaves the file as it
 * found it (pool_undo_made()).
 */
bool cxl_shm_pool_join(CXLShmState *s, Error **errp)
{
    struct stat st;
    bool created = false;

    if (!pool_test_step_check("x-test-kill-at", s->test_kill_at, errp) ||
        !pool_test_step_check("x-test-stop-at", s->test_stop_at, errp)) {
        return false;
    }
    s->made = CXLSHM_MADE_NOTHING;
    if (s->memdev ? !pool_open_memdev(s, &st, errp)
                  : !pool_open_path(s, &st, &created, errp)) {
        return false;
    }
    pool_test_kill(s, "after-flock");
    if (!pool_check_file(s, &st, created, errp) ||
        !pool_make_or_check(s, &st, created, errp) ||
        !pool_lock_host(s, errp) ||
        !pool_map_meta(s, errp)) {
        pool_undo_made(s);
        pool_close(s);
        return false;
    }
    pool_claim_slot(s);
    pool_setup_lines(s);
    cxlpool_flock(s->fd, LOCK_UN);
    trace_cxl_shm_pool_join(s->pool_path, s->host_id, s->generation);
    pool_test_kill(s, "after-join");
    return true;
}

/*
 * The pool lock for a live host's own entry (its rejoin, its leave), which
 * runs under the BQL or at exit: never waited for beyond
 * POOL_FLOCK_WAIT_US.  Another process keeps it only while it creates,
 * joins, leaves or resets, unless it is stopped there (SIGSTOP, a
 * debugger): then this host goes on without it.  What the lock orders
 * here is only another host's reaping, which never touches a host whose
 * liveness lock is held (a rejoin keeps it throughout) and turns only a
 * "live" entry into "failed" (compare-and-swap: a leave writes "left"
 * before it drops its liveness lock).  true if taken (the caller
 * unlocks).
 */
#define POOL_FLOCK_WAIT_US      100000
#define POOL_FLOCK_POLL_US      1000

static bool pool_flock_bounded(CXLShmState *s, const char *what)
{
    int64_t end = g_get_monotonic_time() + POOL_FLOCK_WAIT_US;

    while (cxlpool_flock(s->fd, LOCK_EX | LOCK_NB) < 0) {
        if (g_get_monotonic_time() >= end) {
            trace_cxl_shm_pool_flock_busy(s->pool_path, s->host_id, what);
            return false;
        }
        g_usleep(POOL_FLOCK_POLL_US);
    }
    return true;
}

/*
 * A reset host is a failed host that rejoins at once: new generation (the
 * other hosts see it in the host table), same slot and liveness lock.
 * No thread of this process is inside a line operation meanwhile
 * (cxl_shm_host_reset()).
 */
void cxl_shm_pool_rejoin(CXLShmState *s)
{
    CXLPoolHost *me;
    bool locked;

    if (!s->joined) {
        return;
    }
    locked = pool_flock_bounded(s, "rejoined");
    pool_test_kill(s, "reset-after-flock");
    me = &s->hosts[s->host_id];
    s->generation = qatomic_read(&me->generation) + 1;
    me->join_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    qatomic_set(&me->generation, s->generation);
    pool_test_kill(s, "reset-after-generation");
    qatomic_set(&s->lines.generation, s->generation);
    cxl_shm_lines_recover_own(&s->lines);
    if (locked) {
        cxlpool_flock(s->fd, LOCK_UN);
    }
    trace_cxl_shm_pool_rejoin(s->pool_path, s->host_id, s->generation);
}

uint64_t *cxl_shm_pool_xstat(CXLShmState *s, uint32_t host, int i)
{
    uint64_t *x = cxl_shm_pool_tail(s, s->layout.xstats);

    return &x[host * CXLPOOL_XSTATS_PER_HOST + i - CXLSHM_STAT_TABLE_NR];
}

void cxl_shm_pool_sync_stats(CXLShmState *s)
{
    int i;

    if (!s->joined) {
        return;
    }
    for (i = 0; i < CXLSHM_STAT_NR; i++) {
        uint64_t *to = i < CXLSHM_STAT_TABLE_NR ?
            &s->hosts[s->host_id].stats[i] :
            cxl_shm_pool_xstat(s, s->host_id, i);

        qatomic_set(to, qatomic_read(&s->stats[i]));
    }
}

/*
 * Has another host joined the pool since this start joined it (its
 * generation moved: it may be live or have left data behind), or is one
 * live?  Called with the flock held, which every join takes.
 */
static bool pool_peer_joined(CXLShmState *s)
{
    uint32_t i;

    for (i = 0; i < s->max_hosts; i++) {
        if (i != s->host_id &&
            (qatomic_read(&s->hosts[i].generation) != s->peer_gen[i] ||
             qatomic_read(&s->hosts[i].state) == CXLPOOL_HOST_LIVE)) {
            return true;
        }
    }
    return false;
}

/*
 * The start was refused after the join (a later step of realize failed):
 * leave the file as this start found it, as far as no other host depends
 * on it.  The flock was free since the join, so another host may have
 * joined the pool this start made: then the pool stays a pool (removing,
 * emptying or zeroing it would pull it from under a live host, or lose
 * what a host that came and left wrote back), and only this start's host
 * entry is put back.  Decided under the flock, which every join takes.
 * A pool nobody else joined is unmade.  In a pool that was there, the
 * host entry is put back as it was (state, generation, pid, times,
 * statistics).  What the join did to other hosts' entries stays: a dead
 * host marked failed is a fact, not a change this start could take back.
 */
void cxl_shm_pool_abort(CXLShmState *s)
{
    CXLPoolHost *me;
    bool locked;

    if (s->far) {
        cxl_shm_far_ops->free(s);
        return;
    }
    if (!s->joined) {
        return;
    }
    pool_test_kill(s, "abort-before-flock");
    /*
     * Bounded (a refused start may come at run time, under the BQL): a
     * process that keeps the lock is joining, leaving or resetting on
     * this pool, or stopped there, so the pool stays as if a peer joined.
     */
    locked = pool_flock_bounded(s, "undid its start");
    if (s->made != CXLSHM_MADE_NOTHING && (!locked || pool_peer_joined(s))) {
        trace_cxl_shm_pool_abort_kept(s->pool_path, s->host_id, s->made);
        s->made = CXLSHM_MADE_NOTHING;
    }
    me = &s->hosts[s->host_id];
    if (s->made == CXLSHM_MADE_NOTHING) {
        qatomic_set(&me->state, CXLPOOL_HOST_LEFT);
        /* not live while the entry is rewritten */
        smp_wmb();
        me->pid = s->slot_before.pid;
        memcpy(me->stats, s->slot_before.stats, sizeof(me->stats));
        me->join_time_ns = s->slot_before.join_time_ns;
        me->leave_time_ns = s->slot_before.leave_time_ns;
        qatomic_set(&me->generation, s->slot_before.generation);
        /* the old entry is whole once its state is back */
        smp_wmb();
        qatomic_set(&me->state, s->slot_before.state);
    }
    pool_unmap_meta(s);
    pool_undo_made(s);
    qemu_unlock_fd(s->fd, CXLPOOL_HOST_LOCK(s->host_id), 1);
    if (locked) {
        cxlpool_flock(s->fd, LOCK_UN);
    }
    s->joined = false;
    trace_cxl_shm_pool_abort(s->pool_path, s->host_id);
    qemu_close(s->fd);
    s->fd = -1;
}

void cxl_shm_pool_leave(CXLShmState *s, bool unmap)
{
    CXLPoolHost *me;
    bool locked;

    if (s->far) {
        /* at exit threads may still run: they find the service lost */
        if (unmap) {
            cxl_shm_far_ops->free(s);
        } else {
            cxl_shm_far_ops->leave(s);
        }
        return;
    }
    if (!s->joined) {
        return;
    }
    cxl_shm_pool_sync_stats(s);
    locked = pool_flock_bounded(s, "left");
    pool_test_kill(s, "leave-after-flock");
    me = &s->hosts[s->host_id];
    me->leave_time_ns = qemu_clock_get_ns(QEMU_CLOCK_HOST);
    /* the leave time is valid once the state says "left" */
    smp_wmb();
    qatomic_set(&me->state, CXLPOOL_HOST_LEFT);
    pool_test_kill(s, "leave-after-state");
    qemu_unlock_fd(s->fd, CXLPOOL_HOST_LOCK(s->host_id), 1);
    if (locked) {
        cxlpool_flock(s->fd, LOCK_UN);
    }
    s->joined = false;
    trace_cxl_shm_pool_leave(s->pool_path, s->host_id, s->generation);
    if (!unmap) {
        return;                 /* at exit: threads may still look at it */
    }
    pool_unmap_meta(s);
    qemu_close(s->fd);
    s->fd = -1;
}

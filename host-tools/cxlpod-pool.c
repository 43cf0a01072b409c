/*
 * cxlpod-pool: create, inspect, check and repair a cxlpod pool file
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   cxlpod-pool create --size S [--coherent-size C] [--max-hosts N]
 *                      [--mode 0600] [--owner USER[:GROUP]] POOL
 *   cxlpod-pool inspect [--json] POOL
 *   cxlpod-pool check POOL
 *   cxlpod-pool reset-host N POOL
 *   cxlpod-pool wipe POOL
 *
 * The format code (layout, validation, liveness probe, creation) is the
 * device's own, hw-cxl/cxl-shm-format.c.  Commands that write take the
 * pool's flock exclusively, as a joining QEMU does, so they never race a
 * start; reset-host and wipe refuse while the host (any host) holds its
 * liveness lock.  See docs/pool-tool.md.
 *
 * Exit status: 0 done (check: no problem), 1 refused or problems found,
 * 2 usage error or the file cannot be opened.
 */

#include "qemu/osdep.h"
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pwd.h>
#include <grp.h>
#include <time.h>
#include <json-glib/json-glib.h>
#include "qemu/atomic.h"
#include "cxl-shm-format.h"

static const char *const stat_names[CXLSHM_STAT_NR] = {
    "writeback_ops", "invalidate_ops", "flush_ops", "lines_written_back",
    "lines_invalidated", "native_ops", "errors", "conflicts",
    "evicted_lines", "nt_lines", "deferred", "resets",
    /* the extended statistics (mode=timed, and charged ns) */
    "hits", "misses", "cache_evictions", "back_invalidates", "snoops",
    "snoop_filter_evictions", "stale_reads", "charged_ns",
};

static G_GNUC_PRINTF(1, 2) void fail(const char *fmt, ...)
{
    va_list ap;

    fputs("cxlpod-pool: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* "256M", "1G", "268435456" */
static bool parse_size(const char *s, uint64_t *out)
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

static char *fmt_time(uint64_t ns)
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
static int open_pool(const char *path, int flags, bool exclusive,
                     struct stat *st)
{
    int tries;

    for (tries = 0; tries < 10; tries++) {
        int fd = open(path, flags | O_CLOEXEC);
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

typedef struct Pool Pool;
static uint64_t pool_stat(const Pool *p, uint32_t host, int k);

struct Pool {
    const char *path;
    int fd;
    struct stat st;
    uint8_t *meta;
    CXLPoolHeader *hdr;
    CXLPoolHost *hosts;
    CXLPoolError err;
    bool empty;                 /* 0 bytes: a create stopped before sizing */
    uint32_t nr_hosts;          /* max_hosts, at most CXLPOOL_MAX_HOSTS */
};

/* Statistic @k of host @host: the host table's, then the extended area */
static uint64_t pool_stat(const Pool *p, uint32_t host, int k)
{
    const uint64_t *x = (const uint64_t *)(p->meta + CXLPOOL_XSTATS_OFFSET);

    if (k < CXLSHM_STAT_TABLE_NR) {
        return qatomic_read(&p->hosts[host].stats[k]);
    }
    return qatomic_read(&x[host * CXLPOOL_XSTATS_PER_HOST + k -
                           CXLSHM_STAT_TABLE_NR]);
}

/* Open, lock, validate (any geometry) and map the metadata of a pool */
static int pool_open(Pool *p, const char *path, bool write)
{
    CXLPoolHeader h = { 0 };
    int prot = PROT_READ | (write ? PROT_WRITE : 0);
    bool big;

    memset(p, 0, sizeof(*p));
    p->path = path;
    p->fd = open_pool(path, write ? O_RDWR : O_RDONLY, write, &p->st);
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
    p->hosts = (CXLPoolHost *)(p->meta + CXLPOOL_HOSTS_OFFSET);
    p->nr_hosts = MIN(p->hdr->max_hosts, CXLPOOL_MAX_HOSTS);
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

static void pool_close(Pool *p)
{
    if (p->meta) {
        munmap(p->meta, CXLPOOL_META_SIZE);
    }
    if (p->fd >= 0) {
        close(p->fd);       /* drops the flock */
    }
    p->fd = -1;
}

/* What a host slot is now: its table state, corrected by its lock */
static const char *host_status(Pool *p, uint32_t i, bool *locked)
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
static bool owner_alive(Pool *p, uint64_t tag)
{
    uint32_t host = CXLPOOL_TAG_HOST(tag);

    return host < p->hdr->max_hosts &&
           qatomic_read(&p->hosts[host].state) == CXLPOOL_HOST_LIVE &&
           CXLPOOL_TAG_GEN(qatomic_read(&p->hosts[host].generation)) ==
           CXLPOOL_TAG_GEN(tag) &&
           cxlpool_host_locked(p->fd, host);
}

static void count_locks(Pool *p, unsigned *held, unsigned *armed)
{
    const uint64_t *locks = (uint64_t *)(p->meta + CXLPOOL_LINELOCK_OFFSET);
    const CXLShmUndo *undo = (CXLShmUndo *)(p->meta + CXLPOOL_UNDO_OFFSET);
    unsigned i;

    *held = *armed = 0;
    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        *held += qatomic_read(&locks[i]) != 0;
    }
    for (i = 0; i < CXLPOOL_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS; i++) {
        *armed += qatomic_read(&undo[i].armed) != 0;
    }
}

/* create */

static bool parse_owner(const char *s, uid_t *uid, gid_t *gid)
{
    g_auto(GStrv) parts = g_strsplit(s, ":", 2);
    struct passwd *pw;
    char *end;

    *gid = (gid_t)-1;
    pw = getpwnam(parts[0]);
    if (pw) {
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
    } else {
        *uid = g_ascii_strtoull(parts[0], &end, 10);
        if (!*parts[0] || *end) {
            return false;
        }
    }
    if (parts[1]) {
        struct group *gr = getgrnam(parts[1]);

        if (gr) {
            *gid = gr->gr_gid;
        } else {
            *gid = g_ascii_strtoull(parts[1], &end, 10);
            if (!*parts[1] || *end) {
                return false;
            }
        }
    }
    return true;
}

static int cmd_create(int argc, char **argv)
{
    g_autofree char *size_s = NULL;
    g_autofree char *coh_s = NULL;
    g_autofree char *mode_s = NULL;
    g_autofree char *owner = NULL;
    int max_hosts = 2;
    GOptionEntry entries[] = {
        { "size", 's', 0, G_OPTION_ARG_STRING, &size_s,
          "data size, a multiple of 256M (required)", "SIZE" },
        { "coherent-size", 'c', 0, G_OPTION_ARG_STRING, &coh_s,
          "hardware-coherent window, a multiple of 2M (default 0)", "SIZE" },
        { "max-hosts", 'n', 0, G_OPTION_ARG_INT, &max_hosts,
          "host slots, 1..32 (default 2)", "N" },
        { "mode", 'm', 0, G_OPTION_ARG_STRING, &mode_s,
          "permissions, owner rw at least (default 0600)", "MODE" },
        { "owner", 'o', 0, G_OPTION_ARG_STRING, &owner,
          "owner of the file: the user the pod's QEMUs run as",
          "USER[:GROUP]" },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - make a pool file (the geometry the hosts will use)");
    g_autoptr(GError) err = NULL;
    CXLPoolGeometry g = { 0 };
    unsigned long mode = 0600;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    const char *path, *why;
    struct stat st;
    bool created;
    char *end;
    int fd, tries, ret;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fail("create: %s", err->message);
        return 2;
    }
    if (argc != 2 || !size_s) {
        fail("create: usage: cxlpod-pool create --size SIZE "
             "[--coherent-size SIZE] [--max-hosts N] [--mode MODE] "
             "[--owner USER[:GROUP]] POOL");
        return 2;
    }
    path = argv[1];
    if (!parse_size(size_s, &g.size) ||
        (coh_s && !parse_size(coh_s, &g.coherent_size))) {
        fail("create: bad size '%s'", coh_s && parse_size(size_s, &g.size) ?
             coh_s : size_s);
        return 2;
    }
    g.max_hosts = max_hosts < 0 ? 0 : max_hosts;
    why = cxlpool_geometry_problem(&g);
    if (why) {
        fail("create: %s", why);
        return 2;
    }
    if (mode_s) {
        mode = g_ascii_strtoull(mode_s, &end, 8);
        if (*end || mode > 0777 || (mode & 0600) != 0600) {
            fail("create: mode '%s' (allowed: 0600..0777 with owner read "
                 "and write)", mode_s);
            return 2;
        }
    }
    if (owner && !parse_owner(owner, &uid, &gid)) {
        fail("create: no such user or group '%s'", owner);
        return 2;
    }

    for (tries = 0;; tries++) {
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        created = fd >= 0;
        if (!created && errno == EEXIST) {
            fd = open(path, O_RDWR | O_CLOEXEC);
        }
        if (fd < 0) {
            fail("cannot open pool '%s': %s", path, strerror(errno));
            return 2;
        }
        if (cxlpool_flock(fd, LOCK_EX) < 0) {
            fail("cannot lock pool '%s': %s", path, strerror(errno));
            close(fd);
            return 2;
        }
        ret = cxlpool_fd_is_path(fd, path, &st);
        if (ret > 0) {
            break;
        }
        close(fd);
        if (ret < 0 || tries == 10) {
            fail("pool '%s' could not be opened stably", path);
            return 2;
        }
    }
    if (!S_ISREG(st.st_mode)) {
        fail("'%s' is not a regular file", path);
        close(fd);
        return 1;
    }
    if (st.st_size != 0) {
        CXLPoolHeader h = { 0 };
        CXLPoolError e = CXLPOOL_ERR_TOO_SMALL;

        if ((uint64_t)st.st_size >= CXLPOOL_META_SIZE &&
            pread(fd, &h, sizeof(h), 0) == sizeof(h)) {
            e = cxlpool_check(&h, st.st_size, NULL);
        }
        if (e != CXLPOOL_ERR_NO_HEADER) {
            g_autofree char *msg = cxlpool_error_message(e, path, &h,
                                                         st.st_size, NULL);

            fail("'%s' exists and is not empty (%s): refusing to overwrite "
                 "it", path, msg);
            close(fd);
            return 1;
        }
        /* a torn create: no host ever joined, make it again in place */
        if (ftruncate(fd, 0) < 0) {
            fail("cannot empty '%s': %s", path, strerror(errno));
            close(fd);
            return 1;
        }
        printf("pool '%s' had no header (a create that was stopped): "
               "making it again\n", path);
    }
    if (fchmod(fd, mode) < 0 ||
        ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0)) {
        fail("cannot set the mode or owner of '%s': %s", path,
             strerror(errno));
        goto refused;
    }
    ret = cxlpool_allocate(fd, CXLPOOL_META_SIZE + g.size);
    if (ret < 0) {
        fail("cannot %s the %" PRIu64 " MiB of pool '%s' on its file "
             "system: %s", ret == -1 ? "allocate" : "size",
             (CXLPOOL_META_SIZE + g.size) >> 20, path, strerror(errno));
        goto refused;
    }
    ret = cxlpool_write_header(fd, &g, g_get_real_time() * 1000);
    if (ret < 0 || fsync(fd) < 0) {
        fail("cannot write the header of pool '%s': %s", path,
             strerror(ret < 0 ? -ret : errno));
        goto refused;
    }
    close(fd);
    printf("created pool '%s': size %" PRIu64 " coherent-size %" PRIu64
           " max-hosts %u mode 0%lo\n", path, g.size, g.coherent_size,
           g.max_hosts, mode);
    return 0;

refused:
    if (created) {
        unlink(path);
    } else if (ftruncate(fd, 0) < 0) {
        fail("could not empty '%s' again", path);
    }
    close(fd);
    return 1;
}

/* inspect */

static void print_text(Pool *p)
{
    CXLPoolHeader *h = p->hdr;
    g_autofree char *created = fmt_time(h->create_time_ns);
    unsigned held, armed;
    uint32_t i;
    int k;

    count_locks(p, &held, &armed);
    printf("pool %s\n", p->path);
    printf("  format    version %u, created %s\n", h->version, created);
    printf("  geometry  size %" PRIu64 " (%" PRIu64 " MiB), coherent-size %"
           PRIu64 " (%" PRIu64 " MiB), max-hosts %u, line %u\n",
           h->data_size, h->data_size >> 20, h->coherent_size,
           h->coherent_size >> 20, h->max_hosts, h->line_size);
    printf("  file      %lld bytes, mode 0%o, uid %u\n",
           (long long)p->st.st_size, (unsigned)(p->st.st_mode & 07777),
           (unsigned)p->st.st_uid);
    printf("  locks     %u line locks held, %u undo slots armed\n",
           held, armed);
    printf("  host  status   table    lock  pid       generation  joined"
           "                leave\n");
    for (i = 0; i < p->nr_hosts; i++) {
        CXLPoolHost *e = &p->hosts[i];
        g_autofree char *jt = fmt_time(e->join_time_ns);
        g_autofree char *lt = fmt_time(e->leave_time_ns);
        bool locked;
        const char *status = host_status(p, i, &locked);

        printf("  %-4u  %-7s  %-7s  %-4s  %-8u  %-10" PRIu64 "  %-20s  %s\n",
               i, status, cxlpool_host_state_name(e->state),
               locked ? "held" : "free", e->pid, e->generation, jt, lt);
        if (e->generation) {
            printf("        stats");
            for (k = 0; k < CXLSHM_STAT_NR; k++) {
                printf(" %s=%" PRIu64, stat_names[k], pool_stat(p, i, k));
            }
            printf("\n");
        }
    }
}

static void print_json(Pool *p)
{
    CXLPoolHeader *h = p->hdr;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;
    unsigned held, armed;
    uint32_t i;
    int k;

    count_locks(p, &held, &armed);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, p->path);
    json_builder_set_member_name(b, "version");
    json_builder_add_int_value(b, h->version);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, h->data_size);
    json_builder_set_member_name(b, "coherent_size");
    json_builder_add_int_value(b, h->coherent_size);
    json_builder_set_member_name(b, "max_hosts");
    json_builder_add_int_value(b, h->max_hosts);
    json_builder_set_member_name(b, "line_size");
    json_builder_add_int_value(b, h->line_size);
    json_builder_set_member_name(b, "create_time_ns");
    json_builder_add_int_value(b, h->create_time_ns);
    json_builder_set_member_name(b, "file_size");
    json_builder_add_int_value(b, p->st.st_size);
    json_builder_set_member_name(b, "file_mode");
    json_builder_add_int_value(b, p->st.st_mode & 07777);
    json_builder_set_member_name(b, "line_locks_held");
    json_builder_add_int_value(b, held);
    json_builder_set_member_name(b, "undo_armed");
    json_builder_add_int_value(b, armed);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (i = 0; i < p->nr_hosts; i++) {
        CXLPoolHost *e = &p->hosts[i];
        bool locked;
        const char *status = host_status(p, i, &locked);

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, i);
        json_builder_set_member_name(b, "status");
        json_builder_add_string_value(b, status);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, cxlpool_host_state_name(e->state));
        json_builder_set_member_name(b, "locked");
        json_builder_add_boolean_value(b, locked);
        json_builder_set_member_name(b, "pid");
        json_builder_add_int_value(b, e->pid);
        json_builder_set_member_name(b, "generation");
        json_builder_add_int_value(b, e->generation);
        json_builder_set_member_name(b, "join_time_ns");
        json_builder_add_int_value(b, e->join_time_ns);
        json_builder_set_member_name(b, "leave_time_ns");
        json_builder_add_int_value(b, e->leave_time_ns);
        json_builder_set_member_name(b, "stats");
        json_builder_begin_object(b);
        for (k = 0; k < CXLSHM_STAT_NR; k++) {
            json_builder_set_member_name(b, stat_names[k]);
            json_builder_add_int_value(b, pool_stat(p, i, k));
        }
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

static int cmd_inspect(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "json", 'j', 0, G_OPTION_ARG_NONE, &json,
          "print one JSON object", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - header, geometry and host table");
    g_autoptr(GError) err = NULL;
    Pool p;
    int ret;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 2) {
        fail("inspect: %s", err ? err->message : "usage: cxlpod-pool "
             "inspect [--json] POOL");
        return 2;
    }
    ret = pool_open(&p, argv[1], false);
    if (ret == 0) {
        if (json) {
            print_json(&p);
        } else {
            print_text(&p);
        }
    }
    pool_close(&p);
    return ret;
}

/* check */

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

/* Metadata no cxlpod code writes: must be zero */
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
          sizeof(CXLShmUndo), CXLPOOL_LOCK_OFFSET,
          "the space after the undo slots" },
        { CXLPOOL_LOCK_OFFSET, CXLPOOL_META_SIZE,
          "the liveness lock bytes (only ever locked)" },
    };
    size_t i;
    uint64_t k;

    for (i = 0; i < G_N_ELEMENTS(areas); i++) {
        for (k = areas[i].start; k < areas[i].end; k++) {
            if (p->meta[k]) {
                problem(r, "something other than cxlpod wrote the metadata; "
                        "the hosts do not read this area, so they still "
                        "start: find the writer, and make a new pool if in "
                        "doubt", "metadata no cxlpod code writes is not zero: "
                        "%s (byte 0x%" PRIx64 " is 0x%02x)", areas[i].what,
                        k, p->meta[k]);
                break;
            }
        }
    }
}

static int cmd_check(int argc, char **argv)
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

/* reset-host, wipe */

static int cmd_reset_host(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "N POOL - clear the slot of host N, left by a dead host");
    g_autoptr(GError) err = NULL;
    CXLPoolHost *e;
    uint64_t host;
    uint32_t state;
    Pool p;
    int ret;

    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 3 ||
        !g_ascii_string_to_unsigned(argv[1], 10, 0, CXLPOOL_MAX_HOSTS - 1,
                                    &host, NULL)) {
        fail("reset-host: %s", err ? err->message : "usage: cxlpod-pool "
             "reset-host N POOL (N in [0, 31])");
        return 2;
    }
    ret = pool_open(&p, argv[2], true);
    if (ret) {
        pool_close(&p);
        return ret;
    }
    if (host >= p.hdr->max_hosts) {
        fail("reset-host: host %" PRIu64 " is not in [0, max-hosts-1=%u]",
             host, p.hdr->max_hosts - 1);
        pool_close(&p);
        return 2;
    }
    e = &p.hosts[host];
    state = qatomic_read(&e->state);
    if (cxlpool_host_locked(p.fd, host)) {
        fail("reset-host: host %" PRIu64 " of pool '%s' is live (pid %u "
             "holds its liveness lock); stop that QEMU first", host,
             argv[2], e->pid);
        pool_close(&p);
        return 1;
    }
    /*
     * The generation stays: line locks and undo slots name their owner
     * by (host, generation), and peers tell a restarted host by it, so it
     * only grows.  The next join of this slot is generation + 1.
     */
    qatomic_set(&e->state, CXLPOOL_HOST_FREE);
    e->pid = 0;
    e->join_time_ns = 0;
    e->leave_time_ns = 0;
    memset(e->stats, 0, sizeof(e->stats));
    memset(p.meta + CXLPOOL_XSTATS_OFFSET +
           host * CXLPOOL_XSTATS_PER_HOST * 8, 0,
           CXLPOOL_XSTATS_PER_HOST * 8);
    if (msync(p.meta, CXLPOOL_META_SIZE, MS_SYNC) < 0) {
        fail("reset-host: cannot write the host table of '%s': %s",
             argv[2], strerror(errno));
        pool_close(&p);
        return 1;
    }
    printf("host %" PRIu64 " of pool '%s': was %s, now free (generation %"
           PRIu64 " kept: its next join is generation %" PRIu64 ")\n", host,
           argv[2], cxlpool_host_state_name(state), e->generation,
           e->generation + 1);
    pool_close(&p);
    return 0;
}

static bool zero_data(int fd, uint64_t off, uint64_t len)
{
    g_autofree uint8_t *zeros = NULL;
    uint64_t done;

    /* a hole reads as zeros; allocate it again so no store can SIGBUS */
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                  len) == 0) {
        if (fallocate(fd, 0, off, len) == 0 || errno == EOPNOTSUPP) {
            return true;
        }
        return false;
    }
    zeros = g_malloc0(1 << 20);
    for (done = 0; done < len; done += 1 << 20) {
        size_t n = MIN(len - done, 1 << 20);

        if (pwrite(fd, zeros, n, off + done) != (ssize_t)n) {
            return false;
        }
    }
    return fdatasync(fd) == 0;
}

static int cmd_wipe(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - zero the data of a pool no host is running on");
    g_autoptr(GError) err = NULL;
    g_autoptr(GString) live = g_string_new(NULL);
    uint32_t i;
    Pool p;
    int ret;

    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 2) {
        fail("wipe: %s", err ? err->message : "usage: cxlpod-pool wipe POOL");
        return 2;
    }
    ret = pool_open(&p, argv[1], true);
    if (ret) {
        pool_close(&p);
        return ret;
    }
    for (i = 0; i < p.hdr->max_hosts; i++) {
        if (cxlpool_host_locked(p.fd, i)) {
            g_string_append_printf(live, " %u (pid %u)", i, p.hosts[i].pid);
        }
    }
    if (live->len) {
        fail("wipe: pool '%s' has live hosts:%s; stop them first", argv[1],
             live->str);
        pool_close(&p);
        return 1;
    }
    if (!zero_data(p.fd, CXLPOOL_META_SIZE, p.hdr->data_size)) {
        fail("wipe: cannot zero the data of '%s': %s", argv[1],
             strerror(errno));
        pool_close(&p);
        return 1;
    }
    /*
     * Undo records of the old data must never be replayed over the new;
     * the extended statistics go with them, and the snoop filter tracks
     * lines that no host holds any more (the next timed host sets it up).
     */
    memset(p.meta + CXLPOOL_LINELOCK_OFFSET, 0,
           CXLPOOL_LOCK_OFFSET - CXLPOOL_LINELOCK_OFFSET);
    memset(p.meta + CXLPOOL_SF_OFFSET, 0,
           CXLPOOL_META_SIZE - CXLPOOL_SF_OFFSET);
    if (msync(p.meta, CXLPOOL_META_SIZE, MS_SYNC) < 0) {
        fail("wipe: cannot write the metadata of '%s': %s", argv[1],
             strerror(errno));
        pool_close(&p);
        return 1;
    }
    printf("pool '%s': %" PRIu64 " bytes of data zeroed, line locks, undo "
           "slots, extended statistics and snoop filter cleared, host table "
           "kept\n", argv[1],
           p.hdr->data_size);
    pool_close(&p);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    { "create", cmd_create, "make a pool file" },
    { "inspect", cmd_inspect, "header, geometry, host table (--json)" },
    { "check", cmd_check, "check every invariant; what is wrong, how to "
      "recover" },
    { "reset-host", cmd_reset_host, "clear the slot of a dead host" },
    { "wipe", cmd_wipe, "zero the data (no host may be live)" },
};

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: cxlpod-pool COMMAND [OPTIONS] ...\n\ncommands:\n");
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    }
    fprintf(f, "\n'cxlpod-pool COMMAND --help' shows its options.\n");
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            g_autofree char *prg = g_strdup_printf("cxlpod-pool %s", argv[1]);

            g_set_prgname(prg);
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fail("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}

/*
 * cxlpod-pool's commands that write a pool: create, reset-host and wipe;
 * each takes the pool's flock exclusively, as a joining QEMU does
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "pool.h"
#include <pwd.h>
#include <grp.h>

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

int cmd_create(int argc, char **argv)
{
    g_autofree char *size_s = NULL;
    g_autofree char *coh_s = NULL;
    g_autofree char *mode_s = NULL;
    g_autofree char *owner = NULL;
    g_autofree char *key = NULL;
    int max_hosts = 2;
    GOptionEntry entries[] = {
        { "size", 's', 0, G_OPTION_ARG_STRING, &size_s,
          "data size, a multiple of 256M (required)", "SIZE" },
        { "coherent-size", 'c', 0, G_OPTION_ARG_STRING, &coh_s,
          "hardware-coherent window, a multiple of 2M (default 0)", "SIZE" },
        { "max-hosts", 'n', 0, G_OPTION_ARG_INT, &max_hosts,
          "host slots, 1.." stringify(CXLPOOL_MAX_HOSTS) " (default 2)",
          "N" },
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
            /* never wait on a FIFO for a writer */
            fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
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
    ret = cxlpool_allocate(fd, cxlpool_file_size(g.size, g.max_hosts));
    if (ret < 0) {
        fail("cannot %s the %" PRIu64 " MiB of pool '%s' on its file "
             "system: %s", ret == -1 ? "allocate" : "size",
             cxlpool_file_size(g.size, g.max_hosts) >> 20, path,
             strerror(errno));
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
    /* the pod's key, for remote hosts (cxlpod-pool serve); one kept */
    key = pool_key_path(path);
    ret = pool_key_make(key, uid, gid);
    if (ret < 0 && ret != -EEXIST) {
        fail("cannot make the pod's key '%s': %s", key, strerror(-ret));
        return 1;
    }
    printf("%s key '%s'\n", ret == -EEXIST ? "kept the pod's" :
           "made the pod's", key);
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
int cmd_reset_host(int argc, char **argv)
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
             "reset-host N POOL (N in [0, max-hosts - 1])");
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
    memset(pool_tail(&p, p.lo.xstats + host * CXLPOOL_XSTATS_PER_HOST * 8),
           0, CXLPOOL_XSTATS_PER_HOST * 8);
    if (pool_sync(&p) < 0) {
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

int cmd_wipe(int argc, char **argv)
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
     * Undo records of the old data must never be replayed over the new
     * (the page versions, between them, start again at zero);
     * the extended statistics go with them, and the snoop filter tracks
     * lines that no host holds any more (the next timed host sets it up).
     */
    memset(p.meta + CXLPOOL_LINELOCK_OFFSET, 0,
           CXLPOOL_LOCK_OFFSET - CXLPOOL_LINELOCK_OFFSET);
    memset(pool_tail(&p, p.lo.xstats), 0,
           p.lo.tail + p.lo.tail_size - p.lo.xstats);
    if (pool_sync(&p) < 0) {
        fail("wipe: cannot write the metadata of '%s': %s", argv[1],
             strerror(errno));
        pool_close(&p);
        return 1;
    }
    printf("pool '%s': %" PRIu64 " bytes of data zeroed, line locks, page "
           "versions, undo slots, extended statistics and snoop filter "
           "cleared, host table kept\n", argv[1],
           p.hdr->data_size);
    pool_close(&p);
    return 0;
}

/*
 * The paths of a pod run: the default QEMU, kernel and initramfs (from
 * the environment or the repository), the checks that they exist, and the
 * work directory.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* Fill in default paths and check that everything exists. */
void resolve_paths(struct opts *o)
{
    char *top = find_top();
    const char *e;
    if (!o->qemu && (e = getenv("CXLPOD_QEMU")) && *e) {
        o->qemu = g_strdup(e);
    }
    if (!o->qemu && top) {
        o->qemu = g_strdup_printf("%s/build/qemu/qemu-system-x86_64", top);
    }
    if (!o->kernel && (e = getenv("CXLPOD_KERNEL")) && *e) {
        o->kernel = g_strdup(e);
    }
    if (!o->kernel && top) {
        o->kernel = find_default_kernel(top);
        if (!o->kernel) {
            die(EXIT_USAGE, "no guest kernel: nothing matches "
                "%s/build/guest/kernel-*/boot/vmlinuz-* (build the guest image "
                "with scripts/build-guest.sh, or give --kernel / CXLPOD_KERNEL)",
                top);
        }
    }
    if (!o->initrd && (e = getenv("CXLPOD_INITRD")) && *e) {
        o->initrd = g_strdup(e);
    }
    if (!o->initrd && top) {
        o->initrd = g_strdup_printf("%s/build/guest/initramfs.cpio", top);
    }
    if (!o->qemu || !o->kernel || !o->initrd) {
        die(EXIT_USAGE, "cannot find the cxlpod repository from the executable's "
            "location; set CXLPOD_TOP or give --qemu, --kernel and --initrd");
    }
    if (access(o->qemu, X_OK) != 0) {
        die(EXIT_USAGE, "QEMU binary %s: %s (build it with scripts/build-qemu.sh, "
            "or give --qemu / CXLPOD_QEMU)", o->qemu, strerror(errno));
    }
    if (!is_file(o->kernel)) {
        die(EXIT_USAGE, "guest kernel %s: %s (give --kernel / CXLPOD_KERNEL)",
            o->kernel, path_exists(o->kernel) ? "not a regular file"
                                              : strerror(errno));
    }
    if (!is_file(o->initrd)) {
        die(EXIT_USAGE, "guest initramfs %s: %s (build the guest image with "
            "scripts/build-guest.sh, or give --initrd / CXLPOD_INITRD)",
            o->initrd, path_exists(o->initrd) ? "not a regular file"
                                              : strerror(errno));
    }
    if (o->job_file && !is_file(o->job_file)) {
        die(EXIT_USAGE, "job file %s: %s", o->job_file,
            path_exists(o->job_file) ? "not a regular file" : strerror(errno));
    }
    for (int i = 0; i < o->n_host_jobs; i++) {
        if (!is_file(o->host_jobs[i].file)) {
            die(EXIT_USAGE, "job file %s (host %d): %s", o->host_jobs[i].file,
                o->host_jobs[i].host, strerror(errno ? errno : EINVAL));
        }
    }
    g_free(top);
}

void make_workdir(struct opts *o)
{
    if (o->workdir_given) {
        if (mkdir(o->workdir, 0755) < 0 && errno != EEXIST) {
            die(EXIT_USAGE, "cannot create work dir %s: %s", o->workdir,
                strerror(errno));
        }
        if (!is_dir(o->workdir)) {
            die(EXIT_USAGE, "work dir %s is not a directory", o->workdir);
        }
        char *abs = realpath(o->workdir, NULL);
        if (abs) {
            g_free(o->workdir);
            o->workdir = abs;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) {
            tmp = "/tmp";
        }
        char *t = g_strdup_printf("%s/cxlpod-XXXXXX", tmp);
        if (!mkdtemp(t)) {
            die(EXIT_USAGE, "cannot create a work dir %s: %s", t, strerror(errno));
        }
        o->workdir = t;
    }
    /*
     * One launcher per work directory: a second one would rewrite the
     * running pod's jobs, pool and logs.  The lock is held until exit (not
     * inherited by the QEMUs: O_CLOEXEC).
     */
    {
        g_autofree char *lk = g_strdup_printf("%s/.cxlpod-launch.lock", o->workdir);
        int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        char pid[32] = "";
        if (fd < 0) {
            die(EXIT_USAGE, "cannot create %s: %s", lk, strerror(errno));
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
            pid[n > 0 ? n : 0] = '\0';
            g_strstrip(pid);
            die(EXIT_USAGE, "work dir %s is in use by another cxlpod-launch%s%s%s",
                o->workdir, *pid ? " (pid " : "", pid, *pid ? ")" : "");
        }
        if (ftruncate(fd, 0) == 0) {
            dprintf(fd, "%d\n", (int)getpid());
        }
        /* fd stays open: the lock lasts as long as this process */
    }
    /* unix socket paths are limited to sizeof(sun_path) */
    char *probe = g_strdup_printf("%s/host%d.console", o->workdir, o->nhosts - 1);
    if (strlen(probe) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        die(EXIT_USAGE, "work dir path %s is too long for unix sockets "
            "(%zu bytes max); use a shorter -w", o->workdir,
            sizeof(((struct sockaddr_un *)0)->sun_path) - 20);
    }
    g_free(probe);
    if (!o->pool) {
        o->pool = g_strdup_printf("%s/pool.img", o->workdir);
    }
}

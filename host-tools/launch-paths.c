/*
 * The paths of a pod run: the default QEMU, kernel and initramfs (from
 * the environment, the installation the launcher belongs to, or the
 * repository), the checks that they exist, and the work directory.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/*
 * The folders of an installation (meson's bindir, libexecdir and the
 * project's guestdir option, relative to the prefix unless given outside
 * it); host-tools/meson.build passes them.  The defaults are meson's.
 */
#ifndef CXLPOD_BINDIR
#define CXLPOD_BINDIR "bin"
#endif
#ifndef CXLPOD_LIBEXECDIR
#define CXLPOD_LIBEXECDIR "libexec"
#endif
#ifndef CXLPOD_GUESTDIR
#define CXLPOD_GUESTDIR "share/cxlpod"
#endif

/*
 * Folder WHICH (a configured install folder, relative to the prefix or
 * absolute) of the installation that the executable EXE belongs to, or
 * NULL when EXE is not PREFIX/BINDIR/NAME.  No file is looked at: the
 * caller checks that the folder holds what it wants.
 */
char *install_dir(const char *exe, const char *which)
{
    g_autofree char *dir = g_path_get_dirname(exe);
    const char *bindir = CXLPOD_BINDIR;
    size_t dl = strlen(dir), bl = strlen(bindir);

    if (g_path_is_absolute(bindir)) {
        /* bin outside the prefix: only absolute folders can be found */
        return strcmp(dir, bindir) == 0 && g_path_is_absolute(which)
               ? g_strdup(which) : NULL;
    }
    if (g_path_is_absolute(which)) {
        return g_strdup(which);
    }
    if (dl <= bl || strcmp(dir + dl - bl, bindir) != 0 || dir[dl - bl - 1] != '/') {
        return NULL;
    }
    /* PREFIX is dir without "/BINDIR" ("" for a prefix of "/") */
    return g_strdup_printf("%.*s/%s", (int)(dl - bl - 1), dir, which);
}

/*
 * The installation this launcher runs from: PREFIX/GUESTDIR/guest when
 * /proc/self/exe is PREFIX/BINDIR/cxlpod-launch and that folder exists
 * (scripts/install.sh, meson install or the Debian package put it there);
 * *qemu gets PREFIX/LIBEXECDIR/cxlpod/qemu-system-x86_64.  NULL when the
 * launcher is not installed (a build folder of a checkout).
 */
static char *find_installed(char **qemu)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return NULL;
    }
    exe[n] = '\0';
    g_autofree char *data = install_dir(exe, CXLPOD_GUESTDIR);
    g_autofree char *libexec = install_dir(exe, CXLPOD_LIBEXECDIR);
    if (!data || !libexec) {
        return NULL;
    }
    char *guest = g_strdup_printf("%s/guest", data);
    if (!is_dir(guest)) {
        g_free(guest);
        return NULL;
    }
    *qemu = g_strdup_printf("%s/cxlpod/qemu-system-x86_64", libexec);
    return guest;
}

/*
 * Fill in default paths and check that everything exists.  Each of QEMU,
 * kernel and initramfs: the option, else its environment variable, else
 * the installation the launcher belongs to, else the checkout ($TOP).
 */
void resolve_paths(struct opts *o)
{
    g_autofree char *inst_qemu = NULL;
    g_autofree char *guest = find_installed(&inst_qemu);
    char *top = NULL;
    const char *e, *where;
    if (!o->qemu && (e = getenv("CXLPOD_QEMU")) && *e) {
        o->qemu = g_strdup(e);
    }
    if (!o->kernel && (e = getenv("CXLPOD_KERNEL")) && *e) {
        o->kernel = g_strdup(e);
    }
    if (!o->initrd && (e = getenv("CXLPOD_INITRD")) && *e) {
        o->initrd = g_strdup(e);
    }
    if (!guest && (!o->qemu || !o->kernel || !o->initrd)) {
        top = find_top();
        if (top) {
            guest = g_strdup_printf("%s/build/guest", top);
            inst_qemu = g_strdup_printf("%s/build/qemu/qemu-system-x86_64", top);
        }
    }
    where = top ? "build it with scripts/build-all.sh"
                : "the installation is incomplete: install cxlpod again";
    if (!o->qemu && guest) {
        o->qemu = g_strdup(inst_qemu);
    }
    if (!o->kernel && guest) {
        o->kernel = find_default_kernel(guest);
        if (!o->kernel) {
            die(EXIT_USAGE, "no guest kernel: nothing matches "
                "%s/kernel-*/boot/vmlinuz-* (%s, or give --kernel / "
                "CXLPOD_KERNEL)", guest, where);
        }
    }
    if (!o->initrd && guest) {
        o->initrd = g_strdup_printf("%s/initramfs.cpio", guest);
    }
    if (!o->qemu || !o->kernel || !o->initrd) {
        die(EXIT_USAGE, "cannot find cxlpod's QEMU and guest image: the launcher "
            "is neither installed (PREFIX/" CXLPOD_BINDIR " with PREFIX/"
            CXLPOD_GUESTDIR "/guest) nor in a cxlpod checkout; set CXLPOD_TOP "
            "or give --qemu, --kernel and --initrd");
    }
    if (access(o->qemu, X_OK) != 0) {
        die(EXIT_USAGE, "QEMU binary %s: %s (%s, or give --qemu / CXLPOD_QEMU)",
            o->qemu, strerror(errno),
            top ? "build it with scripts/build-qemu.sh" : where);
    }
    if (!is_file(o->kernel)) {
        die(EXIT_USAGE, "guest kernel %s: %s (give --kernel / CXLPOD_KERNEL)",
            o->kernel, path_exists(o->kernel) ? "not a regular file"
                                              : strerror(errno));
    }
    if (!is_file(o->initrd)) {
        die(EXIT_USAGE, "guest initramfs %s: %s (%s, or give --initrd / "
            "CXLPOD_INITRD)", o->initrd,
            path_exists(o->initrd) ? "not a regular file" : strerror(errno),
            top ? "build the guest image with scripts/build-guest.sh" : where);
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

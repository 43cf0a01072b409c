/*
 * The pod as a set of hosts: the pod network (a VDE switch on a unix
 * socket in the work directory, one virtio NIC per guest) and host-userland
 * guests (this machine's root file system over virtio-9p, the launch
 * directory read-write, this machine's secrets hidden from them); the
 * pod's ssh is launch-ssh.c.
 *
 * Nothing here touches the host's IP stack: the switch and the QEMUs talk
 * over unix-domain sockets, the guests have no route off the segment, and
 * the host reaches a guest's sshd through a chardev socket, not a NIC.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

#include <sys/mount.h>
#include <sched.h>

static GPid g_switch_pid;
static int g_switch_stdin = -1;

/*
 * This machine's secrets, hidden from host-userland guests: the QEMU of a
 * host-userland guest runs in a mount namespace of its own where they are
 * covered (files by /dev/null, directories by an empty tmpfs), so the 9p
 * export of / never serves them.  Collected before any fork; the child
 * only makes system calls.
 */
static char **g_mask_files, **g_mask_dirs;
static char *g_shadow[2];       /* the hash-less copies (NULL: none) */
static bool g_mask_active;

/*
 * A copy of /etc/shadow (or gshadow) whose password hashes are all "*":
 * the accounts stay as they are for sshd (not locked, not expired), only
 * the hashes are gone.
 */

static char *hashless_copy(const struct opts *o, const char *src, const char *name)
{
    g_autofree char *s = NULL;
    if (!g_file_get_contents(src, &s, NULL, NULL)) {
        return NULL;
    }
    GString *b = g_string_new(NULL);
    g_auto(GStrv) lines = g_strsplit(s, "\n", -1);
    for (int i = 0; lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], ":", -1);
        if (f[0] && f[1] && *f[0]) {
            g_free(f[1]);
            f[1] = g_strdup("*");
            g_autofree char *l = g_strjoinv(":", f);
            g_string_append_printf(b, "%s\n", l);
        }
    }
    char *dst = g_build_filename(o->workdir, name, NULL);
    write_file(dst, b->str, 0600);
    g_string_free(b, TRUE);
    return dst;
}

static void collect_secrets(const struct opts *o)
{
    static const char *const file_globs[] = {
        "/etc/shadow-", "/etc/gshadow-",
        "/etc/ssh/ssh_host_*_key", "/etc/ssl/private/*", NULL };
    static const char *const dir_globs[] = {
        "/root/.ssh", "/root/.gnupg", "/home/*/.ssh", "/home/*/.gnupg", NULL };
    GPtrArray *f = g_ptr_array_new(), *d = g_ptr_array_new();

    for (int k = 0; k < 2; k++) {
        const char *const *globs = k ? dir_globs : file_globs;
        for (int i = 0; globs[i]; i++) {
            glob_t g;
            if (glob(globs[i], 0, NULL, &g) != 0) {
                continue;
            }
            for (size_t j = 0; j < g.gl_pathc; j++) {
                struct stat st;
                if (lstat(g.gl_pathv[j], &st) == 0 &&
                    (k ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
                    g_ptr_array_add(k ? d : f, g_strdup(g.gl_pathv[j]));
                }
            }
            globfree(&g);
        }
    }
    g_ptr_array_add(f, NULL);
    g_ptr_array_add(d, NULL);
    g_mask_files = (char **)g_ptr_array_free(f, FALSE);
    g_mask_dirs = (char **)g_ptr_array_free(d, FALSE);
    g_shadow[0] = hashless_copy(o, "/etc/shadow", "shadow.nohash");
    g_shadow[1] = hashless_copy(o, "/etc/gshadow", "gshadow.nohash");
    g_mask_active = true;
}

static void child_fail(const char *what, const char *path)
{
    int e = errno;
    const char *es = strerror(e);

    (void)!write(2, PROG ": cannot hide ", 14 + strlen(PROG));
    (void)!write(2, path, strlen(path));
    (void)!write(2, " from the guests (", 18);
    (void)!write(2, what, strlen(what));
    (void)!write(2, "): ", 3);
    (void)!write(2, es, strlen(es));
    (void)!write(2, "\n", 1);
    _exit(126);
}

/* In a host-userland QEMU's child, before exec (async-signal-safe). */
void pod_child_mask(void)
{
    if (!g_mask_active) {
        return;
    }
    if (unshare(CLONE_NEWNS) < 0) {
        child_fail("unshare", "anything");
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        child_fail("private mounts", "/");
    }
    static const char *const real[2] = { "/etc/shadow", "/etc/gshadow" };
    for (int i = 0; i < 2; i++) {
        if (g_shadow[i] && mount(g_shadow[i], real[i], NULL, MS_BIND, NULL) < 0) {
            child_fail("bind a copy without hashes", real[i]);
        }
    }
    for (int i = 0; g_mask_files[i]; i++) {
        if (mount("/dev/null", g_mask_files[i], NULL, MS_BIND, NULL) < 0) {
            child_fail("bind /dev/null", g_mask_files[i]);
        }
    }
    for (int i = 0; g_mask_dirs[i]; i++) {
        if (mount("tmpfs", g_mask_dirs[i], "tmpfs",
                  MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=700") < 0) {
            child_fail("tmpfs", g_mask_dirs[i]);
        }
    }
}

bool pod_has_net(const struct opts *o)
{
    return o->userland == USERLAND_HOST || o->net;
}

const char *userland_name(enum userland u)
{
    return u == USERLAND_HOST ? "host" : "initramfs";
}

/* Address of host i on the segment, with the prefix length: 254 hosts
 * to a value of the third octet, the fourth 1..254 (launch.h). */
char *pod_addr(int i, bool with_len)
{
    return g_strdup_printf(POD_NET_PREFIX ".%d.%d%s", i / POD_NET_PER_OCTET,
                           i % POD_NET_PER_OCTET + 1,
                           with_len ? "/" POD_NET_LEN : "");
}

/* MAC of host i: locally administered, fixed by the host id, so a host
 * restarted after a kill comes back with the same one; the id in the last
 * two bytes (52:54:00:c1:00:II below host 256). */
char *pod_mac(int i)
{
    return g_strdup_printf("52:54:00:c1:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
}

/* WORKDIR/name */
char *wd_path(const struct opts *o, const char *name)
{
    return g_build_filename(o->workdir, name, NULL);
}

/* Whether `qemu -KIND help` lists NAME (a netdev or device type). */
static bool qemu_lists(const char *qemu, const char *kind, const char *name)
{
    const char *argv[] = { qemu, "-M", "none", kind, "help", NULL };
    g_autofree char *out = NULL;
    g_autoptr(GError) err = NULL;
    int st;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, &out, NULL, &st, &err)) {
        return false;
    }
    g_auto(GStrv) lines = g_strsplit(out ? out : "", "\n", -1);
    for (int i = 0; lines[i]; i++) {
        g_strstrip(lines[i]);
        /* "vde" alone, or name "virtio-9p-pci", bus PCI ... */
        if (!strcmp(lines[i], name) ||
            (g_str_has_prefix(lines[i], "name \"") &&
             !strncmp(lines[i] + 6, name, strlen(name)) &&
             lines[i][6 + strlen(name)] == '"')) {
            return true;
        }
    }
    return false;
}

/* NAME on PATH, else in one of extra_dirs (NULL-terminated), or NULL. */
char *find_program(const char *name, const char *const *extra_dirs)
{
    char *p = g_find_program_in_path(name);
    for (int i = 0; !p && extra_dirs && extra_dirs[i]; i++) {
        char *c = g_build_filename(extra_dirs[i], name, NULL);
        if (g_file_test(c, G_FILE_TEST_IS_EXECUTABLE)) {
            p = c;
        } else {
            g_free(c);
        }
    }
    return p;
}

/* Write a file of the work directory whole, or die. */
void write_file(const char *path, const char *data, int mode)
{
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents_full(path, data, -1,
                                  G_FILE_SET_CONTENTS_CONSISTENT, mode, &err)) {
        die(EXIT_USAGE, "cannot write %s: %s", path, err->message);
    }
}

/* /etc/hosts of every guest */
static void prepare_hosts_file(const struct opts *o)
{
    GString *h = g_string_new("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n");
    for (int i = 0; i < o->nhosts; i++) {
        g_autofree char *a = pod_addr(i, false);
        g_string_append_printf(h, "%s\thost%d\n", a, i);
    }
    g_autofree char *p = wd_path(o, "net-hosts");
    write_file(p, h->str, 0644);
    g_string_free(h, TRUE);
}

/*
 * The directory shared read-write with host-userland guests at the same
 * path: the launcher's current directory.  Refused: the root itself (the
 * guests' root is this machine's, read-only), the kernel's own file
 * systems, and a directory this process cannot write.
 */
static void check_jobdir(const struct opts *o)
{
    const char *d = o->jobdir;
    static const char *const never[] = { "/proc", "/sys", "/dev", NULL };

    if (!strcmp(d, "/")) {
        die(EXIT_USAGE, "--userland host shares the current directory "
            "read-write with the guests at the same path; it cannot be / "
            "(the guests' root is this machine's, read-only): cd to a "
            "project directory first");
    }
    for (int i = 0; never[i]; i++) {
        size_t l = strlen(never[i]);
        if (!strncmp(d, never[i], l) && (d[l] == '/' || !d[l])) {
            die(EXIT_USAGE, "--userland host cannot share %s with the "
                "guests (%s is the kernel's, not a directory of files): cd "
                "to a project directory first", d, never[i]);
        }
    }
    /* where the guest's init writes or mounts its own things */
    static const char *const system[] = { "/etc", "/run", "/tmp", "/var",
        "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib64", "/root/.ssh",
        "/cxlpod", NULL };
    for (int i = 0; system[i]; i++) {
        if (!strcmp(d, system[i])) {
            die(EXIT_USAGE, "--userland host cannot share %s with the "
                "guests read-write: it is a system directory the guests "
                "have of their own (cd to a project directory first)", d);
        }
    }
    if (!strncmp(d, "/etc/", 5)) {
        die(EXIT_USAGE, "--userland host cannot share %s with the guests: "
            "the guests write their own /etc (cd to a project directory "
            "first)", d);
    }
    /* the work directory holds the pod's keys and the ssh config this
     * machine runs: no guest may write it */
    size_t dl = strlen(d);
    if (!strncmp(o->workdir, d, dl) && o->workdir[dl] == '/') {
        die(EXIT_USAGE, "--userland host shares %s read-write with the "
            "guests, and the work directory %s is inside it (the pod's keys "
            "and ssh config must not be writable by a guest): give -w DIR "
            "outside it, or launch from a project directory", d, o->workdir);
    }
    if (strchr(d, '\n')) {
        die(EXIT_USAGE, "--userland host cannot share %s: its name has a "
            "newline", d);
    }
    if (access(d, R_OK | W_OK | X_OK) < 0) {
        die(EXIT_USAGE, "--userland host cannot share the current directory "
            "%s with the guests: %s", d, strerror(errno));
    }
}

/* Each host's fw_cfg opt/cxlpod/config: shell assignments /init sources. */
static void prepare_host_config(const struct opts *o, struct host *h)
{
    GString *b = g_string_new("# cxlpod-launch: sourced by the guest's /init\n");
    g_string_append_printf(b, "CXLPOD_USERLAND=%s\n", userland_name(o->userland));
    if (pod_has_net(o)) {
        g_autofree char *a = pod_addr(h->id, true);
        g_autofree char *m = pod_mac(h->id);
        g_string_append_printf(b, "CXLPOD_NET_ADDR=%s\nCXLPOD_NET_MAC=%s\n", a, m);
    }
    if (o->userland == USERLAND_HOST) {
        const char *legacy = getenv("CXLPOD_SSH_LEGACY");

        g_string_append(b, "CXLPOD_WORK=");
        shell_quote(b, o->jobdir);
        g_string_append(b, "\n");
        /*
         * The guests' ssh: "fast" (P-256 keys and key exchange, connection
         * sharing, no ~/.bashrc for commands; docs/launcher.md), or with
         * CXLPOD_SSH_LEGACY=1 the settings before it, the baseline of
         * scripts/bench-pod.sh's ssh benchmark
         */
        g_string_append_printf(b, "CXLPOD_SSH=%s\n",
                               legacy && !strcmp(legacy, "1") ? "legacy" : "fast");
    }
    g_string_append_printf(b, "CXLPOD_SERVE=%d\n", h->serve ? 1 : 0);
    write_file(h->hp.config, b->str, 0644);
    g_string_free(b, TRUE);
}

/*
 * Before any QEMU starts: what the pod network and host userland need,
 * each missing piece refused with what to install.
 */
void pod_prepare(struct opts *o, struct host *hosts)
{
    if (o->userland == USERLAND_HOST) {
        check_jobdir(o);
        if (!qemu_lists(o->qemu, "-device", "virtio-9p-pci")) {
            die(EXIT_USAGE, "--userland host needs virtio-9p, which %s was "
                "built without (scripts/build-qemu.sh builds it with "
                "--enable-virtfs)", o->qemu);
        }
        pod_prepare_ssh(o);
        if (geteuid() == 0) {
            collect_secrets(o);
        }
    }
    if (pod_has_net(o)) {
        if (!qemu_lists(o->qemu, "-netdev", "vde")) {
            die(EXIT_USAGE, "the pod network needs QEMU's -netdev vde, which "
                "%s was built without (scripts/build-qemu.sh builds it with "
                "libvdeplug)", o->qemu);
        }
        const char *const sbin[] = { "/usr/bin", "/usr/sbin", NULL };
        g_autofree char *sw = find_program("vde_switch", sbin);
        if (!sw) {
            die(EXIT_USAGE, "the pod network needs vde_switch: install vde2 "
                "(scripts/deps.sh does)");
        }
        g_free(o->vde_switch);
        o->vde_switch = g_steal_pointer(&sw);
        g_autofree char *sock = wd_path(o, "net");
        /* the switch's control socket: DIR/net/ctl, at most 107 bytes */
        if (strlen(sock) + 5 >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            die(EXIT_USAGE, "the work directory %s is too long for the pod "
                "switch's unix socket (%zu bytes at most): give a shorter "
                "-w DIR", o->workdir,
                sizeof(((struct sockaddr_un *)0)->sun_path) - 10);
        }
        prepare_hosts_file(o);
    }
    for (int i = 0; i < o->nhosts; i++) {
        prepare_host_config(o, &hosts[i]);
    }
}

static void switch_child_setup(gpointer data)
{
    (void)data;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

/*
 * Start the pod's switch: vde_switch with its control directory WORKDIR/net
 * and standard input a pipe this process holds, so that it exits (and
 * removes its sockets) when the launcher does, however it ends.
 */
void pod_switch_start(const struct opts *o)
{
    if (!pod_has_net(o)) {
        return;
    }
    g_autofree char *sock = wd_path(o, "net");
    g_autofree char *log = wd_path(o, "net.log");
    g_autofree char *ctl = g_build_filename(sock, "ctl", NULL);
    g_autofree char *nports = g_strdup_printf("%d", o->nhosts * 2 + 8);
    const char *argv[] = { o->vde_switch, "--sock", sock, "--numports",
                           nports, NULL };
    g_autoptr(GError) err = NULL;
    int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (logfd < 0) {
        die(EXIT_USAGE, "cannot create %s: %s", log, strerror(errno));
    }
    /* a switch left by an earlier run in this work directory */
    if (path_exists(ctl)) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        g_strlcpy(sa.sun_path, ctl, sizeof(sa.sun_path));
        bool live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0) {
            close(fd);
        }
        if (live) {
            die(EXIT_USAGE, "a pod switch is already running in %s (another "
                "cxlpod-launch uses this work directory?)", sock);
        }
        unlink(ctl);
        rmdir(sock);
    }
    if (!g_spawn_async_with_pipes_and_fds(NULL, (const gchar *const *)argv, NULL,
            G_SPAWN_DO_NOT_REAP_CHILD, switch_child_setup, NULL, -1, logfd, logfd,
            NULL, NULL, 0, &g_switch_pid, &g_switch_stdin, NULL, NULL, &err)) {
        close(logfd);
        die(EXIT_USAGE, "cannot start the pod switch %s: %s", o->vde_switch,
            err->message);
    }
    close(logfd);
    /* wait for its control socket (it makes it at once) */
    double deadline = now_s() + 10;
    while (!path_exists(ctl)) {
        int st;
        if (waitpid(g_switch_pid, &st, WNOHANG) == g_switch_pid) {
            char how[96];
            g_autofree char *tail = NULL;
            g_switch_pid = 0;
            describe_status(st, how, sizeof(how));
            g_file_get_contents(log, &tail, NULL, NULL);
            die(EXIT_USAGE, "the pod switch exited at once (status %s): %s",
                how, tail && *tail ? g_strstrip(tail) : "(no message)");
        }
        if (now_s() > deadline) {
            die(EXIT_USAGE, "the pod switch (pid %d) made no control socket "
                "%s in 10 s", (int)g_switch_pid, ctl);
        }
        g_usleep(5000);
    }
    if (!o->quiet) {
        g_autofree char *first = pod_addr(0, false);
        g_autofree char *last = pod_addr(o->nhosts - 1, true);
        msg("pod network: switch %s (pid %d), hosts host0..host%d at "
            "%s..%s", sock, (int)g_switch_pid, o->nhosts - 1, first, last);
    }
}

void pod_switch_stop(void)
{
    if (g_switch_stdin >= 0) {
        close(g_switch_stdin);     /* EOF: it cleans up and exits */
        g_switch_stdin = -1;
    }
    if (g_switch_pid > 0) {
        double deadline = now_s() + 2;
        int st;
        while (waitpid(g_switch_pid, &st, WNOHANG) == 0) {
            if (now_s() > deadline) {
                kill(g_switch_pid, SIGKILL);
                waitpid(g_switch_pid, &st, 0);
                break;
            }
            g_usleep(5000);
        }
        g_switch_pid = 0;
    }
}

static void fwcfg(GPtrArray *a, const char *name, const char *path)
{
    g_autofree char *p = qemu_opt_escape(path);
    argv_add(a, "-fw_cfg");
    argv_addf(a, "name=opt/cxlpod/%s,file=%s", name, p);
}

/* The QEMU arguments of the pod network, host userland and the files the
 * guest's /init reads from fw_cfg. */
void add_pod_args(GPtrArray *a, const struct opts *o, int host,
                  const struct host_paths *hp)
{
    fwcfg(a, "config", hp->config);
    if (pod_has_net(o)) {
        g_autofree char *sock = wd_path(o, "net");
        g_autofree char *qs = qemu_opt_escape(sock);
        g_autofree char *mac = pod_mac(host);
        g_autofree char *hosts = wd_path(o, "net-hosts");
        argv_add(a, "-netdev");
        argv_addf(a, "vde,id=podnet,sock=%s", qs);
        argv_add(a, "-device");
        /* romfile=: no PXE option ROM, the guest boots from -kernel */
        argv_addf(a, "virtio-net-pci,bus=pcie.0,netdev=podnet,mac=%s,romfile=", mac);
        fwcfg(a, "hosts", hosts);
    }
    if (o->userland == USERLAND_HOST) {
        g_autofree char *jd = qemu_opt_escape(o->jobdir);
        g_autofree char *dir = wd_path(o, "ssh");
        g_autofree char *id = g_build_filename(dir, "id_ed25519", NULL);
        g_autofree char *idpub = g_build_filename(dir, "id_ed25519.pub", NULL);
        g_autofree char *hk = g_build_filename(dir, "ssh_host_ed25519_key", NULL);
        g_autofree char *idec = g_build_filename(dir, "id_ecdsa", NULL);
        g_autofree char *idecpub = g_build_filename(dir, "id_ecdsa.pub", NULL);
        g_autofree char *hkec = g_build_filename(dir, "ssh_host_ecdsa_key", NULL);
        g_autofree char *kh = g_build_filename(dir, "known_hosts", NULL);
        g_autofree char *ssh = qemu_opt_escape(hp->ssh);

        /* this machine's root, read-only; multidevs=remap keeps inode
         * numbers unique across the file systems mounted under / */
        argv_add(a, "-fsdev");
        argv_add(a, "local,id=hostroot,path=/,security_model=none,readonly=on,"
            "multidevs=remap");
        argv_add(a, "-device");
        argv_add(a, "virtio-9p-pci,bus=pcie.0,fsdev=hostroot,mount_tag=cxlpod-root,romfile=");
        argv_add(a, "-fsdev");
        argv_addf(a, "local,id=work,path=%s,security_model=none,multidevs=remap", jd);
        argv_add(a, "-device");
        argv_add(a, "virtio-9p-pci,bus=pcie.0,fsdev=work,mount_tag=cxlpod-work,romfile=");
        /* ssh from the host: a virtio-serial port on a chardev socket */
        argv_add(a, "-device");
        argv_add(a, "virtio-serial-pci,bus=pcie.0,id=podser,romfile=");
        argv_add(a, "-chardev");
        argv_addf(a, "socket,id=podssh,path=%s,server=on,wait=off", ssh);
        argv_add(a, "-device");
        argv_add(a, "virtserialport,bus=podser.0,chardev=podssh,name=cxlpod.ssh");
        fwcfg(a, "ssh-id", id);
        fwcfg(a, "ssh-id.pub", idpub);
        fwcfg(a, "ssh-hostkey", hk);
        fwcfg(a, "ssh-id-ecdsa", idec);
        fwcfg(a, "ssh-id-ecdsa.pub", idecpub);
        fwcfg(a, "ssh-hostkey-ecdsa", hkec);
        fwcfg(a, "ssh-known-hosts", kh);
    }
}

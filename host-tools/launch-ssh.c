/*
 * The pod's ssh: the key pairs and the ssh config made for a host-userland
 * pod in WORKDIR/ssh, and the `ssh` and `proxy` subcommands that log into
 * a guest over its virtio-serial port (the host's IP stack is never used).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* Run argv, die with `what` and its output if it fails. */
static void run_or_die(const char *const *argv, const char *what)
{
    g_autofree char *out = NULL, *errs = NULL;
    g_autoptr(GError) err = NULL;
    int st;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                      &out, &errs, &st, &err)) {
        die(EXIT_USAGE, "%s: cannot run %s: %s", what, argv[0], err->message);
    }
    if (!g_spawn_check_wait_status(st, NULL)) {
        die(EXIT_USAGE, "%s: %s failed: %s", what, argv[0],
            errs && *errs ? g_strstrip(errs) : "(no message)");
    }
}

/* The public half of a key file's key ("TYPE BASE64"), or NULL. */
static char *pubkey_of(const char *pubfile)
{
    g_autofree char *s = NULL;
    if (!g_file_get_contents(pubfile, &s, NULL, NULL)) {
        return NULL;
    }
    g_auto(GStrv) w = g_strsplit_set(g_strstrip(s), " \t", 3);
    if (!w[0] || !w[1] || !(g_str_has_prefix(w[0], "ssh-") ||
                            g_str_has_prefix(w[0], "ecdsa-sha2-"))) {
        return NULL;
    }
    return g_strdup_printf("%s %s", w[0], w[1]);
}

/*
 * A key pair made for the pod (never the user's own keys): created with
 * ssh-keygen if missing, kept in the work directory so that a restarted
 * host and a second run in the same work directory use the same keys.  A
 * private key without its public half, or two that do not match, is a
 * key clash: refused with the file names.
 */
static void ensure_key(const char *keygen, const char *key, const char *type,
                       const char *comment)
{
    g_autofree char *pub = g_strdup_printf("%s.pub", key);
    bool have_key = path_exists(key), have_pub = path_exists(pub);

    if (have_key && have_pub) {
        const char *argv[] = { keygen, "-y", "-f", key, NULL };
        g_autofree char *out = NULL;
        int st;
        g_autofree char *want = pubkey_of(pub);
        if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL,
                          NULL, NULL, &out, NULL, &st, NULL) ||
            !g_spawn_check_wait_status(st, NULL) || !want ||
            !g_str_has_prefix(g_strstrip(out), want)) {
            die(EXIT_USAGE, "ssh key clash: %s and %s are not one key pair "
                "(remove both and the pod makes new ones)", key, pub);
        }
        return;
    }
    if (have_key != have_pub) {
        die(EXIT_USAGE, "ssh key clash: %s exists without %s (remove it and "
            "the pod makes a new pair)", have_key ? key : pub,
            have_key ? pub : key);
    }
    /* -b 256: an ecdsa key is nistp256 (ed25519 ignores -b) */
    const char *argv[] = { keygen, "-q", "-t", type, "-b", "256", "-N", "",
                           "-C", comment, "-f", key, NULL };
    run_or_die(argv, "making the pod's ssh keys");
}

/* ssh's config language: a value in double quotes (no quotes inside). */
static char *ssh_quote(const char *s)
{
    if (strchr(s, '"')) {
        die(EXIT_USAGE, "the path %s contains a double quote, which an ssh "
            "config cannot hold", s);
    }
    return g_strdup_printf("\"%s\"", s);
}

/* The pod's ssh files in WORKDIR/ssh (see docs/launcher.md, "ssh"). */
void pod_prepare_ssh(const struct opts *o)
{
    const char *const sbin[] = { "/usr/bin", "/usr/sbin", "/sbin", NULL };
    g_autofree char *keygen = find_program("ssh-keygen", sbin);
    g_autofree char *dir = wd_path(o, "ssh");
    g_autofree char *id = g_build_filename(dir, "id_ed25519", NULL);
    g_autofree char *hk = g_build_filename(dir, "ssh_host_ed25519_key", NULL);
    g_autofree char *hkpub = g_strdup_printf("%s.pub", hk);
    g_autofree char *idec = g_build_filename(dir, "id_ecdsa", NULL);
    g_autofree char *hkec = g_build_filename(dir, "ssh_host_ecdsa_key", NULL);
    g_autofree char *hkecpub = g_strdup_printf("%s.pub", hkec);
    g_autofree char *kh = g_build_filename(dir, "known_hosts", NULL);
    g_autofree char *cfg = g_build_filename(dir, "config", NULL);

    if (!keygen) {
        die(EXIT_USAGE, "ssh-keygen not found: install openssh-client "
            "(scripts/deps.sh does)");
    }
    if (g_mkdir_with_parents(dir, 0700) < 0) {
        die(EXIT_USAGE, "cannot create %s: %s", dir, strerror(errno));
    }
    ensure_key(keygen, id, "ed25519", "cxlpod-pod-user");
    ensure_key(keygen, hk, "ed25519", "cxlpod-pod-host");
    /*
     * The same pairs as ecdsa nistp256 keys, which the guests use first:
     * OpenSSL's P-256 code is several times faster under TCG than
     * OpenSSH's own ed25519 and curve25519 (docs/benchmarks.md section
     * 6, "ssh and mpirun between guests")
     */
    ensure_key(keygen, idec, "ecdsa", "cxlpod-pod-user");
    ensure_key(keygen, hkec, "ecdsa", "cxlpod-pod-host");

    /* one host key of each type for the whole pod: every name and address */
    GString *names = g_string_new(NULL);
    for (int i = 0; i < o->nhosts; i++) {
        g_autofree char *a = pod_addr(i, false);
        g_string_append_printf(names, "%shost%d,%s", i ? "," : "", i, a);
    }
    GString *k = g_string_new(NULL);
    const char *pubs[] = { hkpub, hkecpub };
    for (size_t i = 0; i < G_N_ELEMENTS(pubs); i++) {
        g_autofree char *hostpub = pubkey_of(pubs[i]);
        if (!hostpub) {
            die(EXIT_USAGE, "ssh key clash: %s is not a public key", pubs[i]);
        }
        g_string_append_printf(k, "%s %s\n", names->str, hostpub);
    }
    write_file(kh, k->str, 0644);
    g_string_free(k, TRUE);
    g_string_free(names, TRUE);

    /* the host side: `ssh -F WORKDIR/ssh/config hostI` (cxlpod-launch ssh) */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    g_autofree char *qexe = ssh_quote(n > 0 ? exe : PROG);
    g_autofree char *qwd = ssh_quote(o->workdir);
    g_autofree char *qid = ssh_quote(id);
    g_autofree char *qidec = ssh_quote(idec);
    g_autofree char *qkh = ssh_quote(kh);
    g_autofree char *cm = g_build_filename(dir, "cm-%h", NULL);
    /* ssh binds "ControlPath.XXXXXXXXXXXXXXXX" for the last host's
     * name: stay under 108 */
    g_autofree char *last = g_strdup_printf("/cm-host%d", o->nhosts - 1);
    size_t room = sizeof(((struct sockaddr_un *)0)->sun_path) - 1 - 17 -
                  strlen(last) - strlen("/ssh");
    if (strlen(o->workdir) > room) {
        die(EXIT_USAGE, "the work directory %s is too long for the ssh "
            "control socket of --userland host (%zu bytes at most with %d "
            "hosts): give a shorter -w DIR", o->workdir, room, o->nhosts);
    }
    g_autofree char *qcm = ssh_quote(cm);
    g_autofree char *c = g_strdup_printf(
        "# made by cxlpod-launch for the pod in %s: ssh -F THIS hostI\n"
        "Host host*\n"
        "    User root\n"
        "    IdentityFile %s\n"
        "    IdentityFile %s\n"
        "    IdentitiesOnly yes\n"
        "    KexAlgorithms ecdh-sha2-nistp256,curve25519-sha256,"
        "curve25519-sha256@libssh.org\n"
        "    HostKeyAlgorithms ecdsa-sha2-nistp256,ssh-ed25519\n"
        "    GSSAPIAuthentication no\n"
        "    UserKnownHostsFile %s\n"
        "    StrictHostKeyChecking yes\n"
        "    ProxyCommand %s proxy %s %%h\n"
        "    ControlMaster auto\n"
        "    ControlPath %s\n"
        "    ControlPersist 30\n"
        "    BatchMode yes\n"
        "    ConnectTimeout 120\n"
        "    ServerAliveInterval 10\n"
        "    ServerAliveCountMax 6\n"
        "    LogLevel ERROR\n",
        o->workdir, qidec, qid, qkh, qexe, qwd, qcm);
    write_file(cfg, c, 0644);
}

/*
 * `cxlpod-launch proxy WORKDIR HOST`: ssh's ProxyCommand.  Relays standard
 * input and output to host HOST's (hostI or I) ssh port, the unix socket
 * of its virtio-serial chardev.
 */
int proxy_main(int argc, char **argv)
{
    int n;
    char **w = subcommand_words(argc, argv, "WORKDIR HOST",
                                "relay stdin/stdout to a host-userland "
                                "guest's sshd (ssh's ProxyCommand)", 2, 2, &n);
    const char *h = w[1];
    long id;
    if (g_str_has_prefix(h, "host")) {
        h += 4;
    }
    if (!parse_int(h, 0, MAX_HOSTS - 1, &id)) {
        die(EXIT_USAGE, "proxy: '%s' is not a host (hostI or I)", w[1]);
    }
    g_autofree char *path = g_strdup_printf("%s/host%ld.ssh", w[0], id);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sa.sun_path)) {
        die(EXIT_USAGE, "proxy: %s is too long for a unix socket", path);
    }
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die(EXIT_USAGE, "host %ld: cannot reach its ssh port %s: %s (is the "
            "pod running, with --userland host?)", id, path, strerror(errno));
    }
    /*
     * The handshake with the guest's cxlpod-vportd (guest-tools/vportd.c):
     * our hello, repeated every half second until it answers with its
     * ready (a sshd of the connection before may still be reading and eat
     * a hello), then go, after which the stream is ssh's.
     */
    {
        char nonce[17], line[256];
        size_t n = 0;
        double deadline = now_s() + 120;
        bool ready = false;

        snprintf(nonce, sizeof(nonce), "%016llx",
                 (unsigned long long)g_random_int() << 32 | g_random_int());
        g_autofree char *hello = g_strdup_printf("cxlpod-vport-hello-2 %s\n", nonce);
        g_autofree char *want = g_strdup_printf("cxlpod-vport-ready-2 %s", nonce);
        while (!ready) {
            struct pollfd pf = { .fd = fd, .events = POLLIN };
            if (now_s() > deadline) {
                die(EXIT_USAGE, "host %ld: no answer on its ssh port %s in "
                    "120 s (is its sshd up? the guest's cxlpod-vportd "
                    "serves it)", id, path);
            }
            if (!write_all(fd, hello, strlen(hello))) {
                die(EXIT_USAGE, "host %ld: writing to its ssh port %s: %s",
                    id, path, strerror(errno));
            }
            while (!ready && poll(&pf, 1, 500) > 0) {
                char c;
                if (read(fd, &c, 1) != 1) {
                    die(EXIT_USAGE, "host %ld: its ssh port %s closed",
                        id, path);
                }
                if (c != '\n') {
                    if (n < sizeof(line) - 1) {
                        line[n++] = c;
                    }
                    continue;
                }
                line[n] = '\0';
                n = 0;
                ready = !strcmp(line, want);
            }
        }
        if (!write_all(fd, "cxlpod-vport-go-2\n", 18)) {
            die(EXIT_USAGE, "host %ld: writing to its ssh port %s: %s", id,
                path, strerror(errno));
        }
    }
    struct pollfd p[2] = { { .fd = 0, .events = POLLIN },
                           { .fd = fd, .events = POLLIN } };
    char buf[65536];
    bool in_open = true;
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (in_open && p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(0, buf, sizeof(buf));
            if (r <= 0) {
                shutdown(fd, SHUT_WR);
                in_open = false;
                p[0].fd = -1;
            } else if (!write_all(fd, buf, (size_t)r)) {
                break;
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(fd, buf, sizeof(buf));
            if (r <= 0 || !write_all(1, buf, (size_t)r)) {
                break;
            }
        }
    }
    close(fd);
    return 0;
}

/*
 * `cxlpod-launch ssh WORKDIR I [COMMAND...]`: log into (or run COMMAND in)
 * host I of a running host-userland pod, as root, with the pod's own key.
 */
int ssh_main(int argc, char **argv)
{
    if (argc < 4 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
        fprintf(argc < 4 ? stderr : stdout,
                "usage: " PROG " ssh WORKDIR I [COMMAND...]\n"
                "  log into host I of a running --userland host pod (or run\n"
                "  COMMAND there); the same as ssh -F WORKDIR/ssh/config hostI\n");
        return argc < 4 ? EXIT_USAGE : EXIT_OK;
    }
    long id;
    const char *h = argv[3];
    if (g_str_has_prefix(h, "host")) {
        h += 4;
    }
    if (!parse_int(h, 0, MAX_HOSTS - 1, &id)) {
        die(EXIT_USAGE, "ssh: '%s' is not a host id", argv[3]);
    }
    g_autofree char *cfg = g_build_filename(argv[2], "ssh", "config", NULL);
    if (!is_file(cfg)) {
        die(EXIT_USAGE, "ssh: %s not found: is %s the work directory of a "
            "--userland host pod?", cfg, argv[2]);
    }
    g_autofree char *sock = g_strdup_printf("%s/host%ld.ssh", argv[2], id);
    if (!path_exists(sock)) {
        die(EXIT_USAGE, "ssh: host %ld has no ssh port %s (not running, or "
            "not a host of this pod)", id, sock);
    }
    const char *const dirs[] = { "/usr/bin", NULL };
    g_autofree char *ssh = find_program("ssh", dirs);
    if (!ssh) {
        die(EXIT_USAGE, "ssh: no ssh client: install openssh-client");
    }
    GPtrArray *a = g_ptr_array_new();
    g_ptr_array_add(a, ssh);
    g_ptr_array_add(a, "-F");
    g_ptr_array_add(a, cfg);
    if (argc == 4 && isatty(0)) {
        g_ptr_array_add(a, "-t");
    }
    g_ptr_array_add(a, g_strdup_printf("host%ld", id));
    for (int i = 4; i < argc; i++) {
        g_ptr_array_add(a, argv[i]);
    }
    g_ptr_array_add(a, NULL);
    fflush(NULL);
    execv(ssh, (char **)a->pdata);
    die(EXIT_USAGE, "ssh: cannot run %s: %s", ssh, strerror(errno));
}

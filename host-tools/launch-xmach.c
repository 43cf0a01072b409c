/*
 * A pod across machines (docs/multi-machine.md): one launcher per machine,
 * each running some of the pod's hosts (--local-hosts FIRST-LAST); on the
 * pool's machine the pool service for the others (--serve); on the others
 * the remote pool (--pool ucx://ADDR:PORT --pool-key PATH); and the pod
 * network joined across them (--net-listen / --net-join).
 *
 * The network link: the joining launcher opens two TCP connections to the
 * listening one.  Each starts with three lines:
 *
 *     CXLPOD-NET 2 nonce NONCE                      (the listener: 16 random
 *                                                    bytes)
 *     CXLPOD-NET 2 KIND NHOSTS FIRST LAST NAME PROOF NONCE2
 *                                                   (the joiner; KIND is
 *                                                    ctl or link)
 *     CXLPOD-NET 2 ok NHOSTS FIRST LAST NAME PROOF2 (the listener's reply)
 *     CXLPOD-NET 2 refused WHY...
 *
 * NONCE and NONCE2 are exactly 32 lowercase hex digits and NAME up to
 * XMACH_NAME_MAX of [A-Za-z0-9._-] (xmach_nonce_ok, xmach_name_ok):
 * anything else is refused before it is signed or printed.  PROOF is
 * HMAC-SHA256 under the pod's key (--pool-key, or POOL.key beside the
 * pool), in hex ("-" without a key), of the fields "cxlpod-net-proof 2",
 * "join", KIND, NHOSTS, FIRST, LAST, NAME, NONCE, NONCE2, each as
 * LEN:TEXT and a newline (xmach_net_proof); PROOF2 the same with
 * "answer", "ok" and the listener's own fields.  A side that has the key
 * refuses a missing or wrong proof; a listener with a key refuses a
 * joiner without NONCE2.
 *
 * After it, the "link" connection is both switches' cable: it becomes the
 * standard input and output of a vde_plug on this machine's switch, which
 * carries the pod segment's Ethernet frames over it (vde_plug's stream
 * encapsulation, unencrypted).  The "ctl" connection carries lines
 * between the launchers: "jobs-done" (every job of the sender's hosts,
 * and for the listener of every other machine, has ended: serving hosts
 * may stop), "fail H WHY" (host H failed and its launcher stops the pod),
 * "end" (the sender's launcher ends normally).  A ctl connection that
 * closes without "end" is a launcher that died (killed, or its machine).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>

#define NET_HELLO "CXLPOD-NET 2 "
#define HANDSHAKE_S 10          /* a hello line's wait */
#define PENDING_MAX 32          /* connections without their hello yet */
#define PENDING_PER_ADDR 8      /* of them from one address */
#define SERVE_START_S 15        /* cxlpod-pool serve's "listening on" */

/* Another machine's launcher, as this one knows it. */
struct peer {
    char *name;
    char *addr;             /* ADDR:PORT it connected from / we joined */
    int first, last;        /* its hosts */
    int ctl;                /* the ctl connection (-1: closed) */
    GString *in;            /* ctl input not yet a whole line */
    GPid plug;              /* vde_plug on the link connection (0: none) */
    bool jobs_done;         /* it sent jobs-done */
    bool told_jobs_done;    /* we sent it jobs-done */
    bool ended;             /* it sent end */
    bool gone;              /* its ctl closed, or its link went down */
    double t_link_down;     /* its vde_plug exited (0: not) */
    char link_how[96];      /* ... with this status */
};

static GPtrArray *g_peers;          /* struct peer * */
static void machines_start(const struct opts *o);
static int machines_tick(void);
static void machines_stop(void);
static void machines_report(void);
static int g_listen_fd = -1;
static bool g_local_jobs_done;
static double g_join_t0, g_join_said;
static GPtrArray *g_problems;       /* char *: for the report */
static bool g_fail_seen[MAX_HOSTS]; /* "fail H" handled for host H */
static GPid g_serve_pid;
static int g_serve_out = -1;        /* its stdout, drained to the log */
static int g_serve_log = -1;
static char *g_serve_addr;          /* where it listens */
static bool g_serve_reported;

static void problem(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!g_problems) {
        g_problems = g_ptr_array_new_with_free_func(g_free);
    }
    msg("%s", s);
    g_ptr_array_add(g_problems, s);
}

bool host_local(const struct opts *o, int host)
{
    return !o->local_given ||
           (host >= o->first_local && host <= o->last_local);
}

bool pool_is_remote(const struct opts *o)
{
    return o->pool && g_str_has_prefix(o->pool, REMOTE_POOL_SCHEME);
}

/*
 * THE place where a host takes a remote pool: cxl-shm's pool=ucx://
 * ADDR:PORT and pool-key=PATH, in mode=direct (the device side of issue
 * 37).  The launcher refuses a remote pool before any host starts when
 * the QEMU's cxl-shm has no pool-key property (remote_pool_supported).
 */
void add_remote_pool_args(GString *dev, const struct opts *o)
{
    g_autofree char *pool = qemu_opt_escape(o->pool);
    g_autofree char *key = qemu_opt_escape(o->pool_key ? o->pool_key : "");
    g_string_append_printf(dev, ",pool=%s,pool-key=%s", pool, key);
}

/* Whether this QEMU's cxl-shm takes a remote pool (has pool-key). */
static bool remote_pool_supported(const char *qemu)
{
    const char *argv[] = { qemu, "-M", "none", "-device", "cxl-shm,help",
                           NULL };
    g_autofree char *out = NULL;
    int st;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, &out, NULL, &st, NULL)) {
        return false;
    }
    return out && strstr(out, "pool-key") != NULL;
}

/* "I" or "FIRST-LAST", host ids 0..MAX_HOSTS-1, FIRST <= LAST */
bool parse_host_range(const char *s, int *first, int *last)
{
    long a, b;
    g_auto(GStrv) w = g_strsplit(s, "-", 3);

    if (!w[0] || !parse_int(w[0], 0, MAX_HOSTS - 1, &a)) {
        return false;
    }
    if (!w[1]) {
        b = a;
    } else if (w[2] || !parse_int(w[1], a, MAX_HOSTS - 1, &b)) {
        return false;
    }
    *first = (int)a;
    *last = (int)b;
    return true;
}

/* "IPV4:PORT" (port 0..65535) */
bool parse_addr_port(const char *s, char **addr, int *port)
{
    const char *c = strrchr(s, ':');
    struct in_addr ia;
    long p;

    if (!c || c == s) {
        return false;
    }
    g_autofree char *a = g_strndup(s, c - s);
    if (inet_pton(AF_INET, a, &ia) != 1 || !parse_int(c + 1, 0, 65535, &p)) {
        return false;
    }
    *addr = g_steal_pointer(&a);
    *port = (int)p;
    return true;
}

static struct sockaddr_in sockaddr_of(const char *s)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    g_autofree char *a = NULL;
    int port = 0;

    if (parse_addr_port(s, &a, &port)) {
        inet_pton(AF_INET, a, &sa.sin_addr);
        sa.sin_port = htons(port);
    }
    return sa;
}

/*
 * --machine NAME:FIRST-LAST: the ranges inside the pod, apart, and this
 * machine's hosts the rest (one range); the options it needs or cannot
 * forward.
 */
static void machines_check(struct opts *o)
{
    bool taken[MAX_HOSTS] = { false };

    if (!o->net_listen) {
        die(EXIT_USAGE, "--machine needs --net-listen ADDR:PORT: the address "
            "the other machines' launchers join this one's pod network at");
    }
    if (sockaddr_of(o->net_listen).sin_addr.s_addr == htonl(INADDR_ANY)) {
        die(EXIT_USAGE, "--machine with --net-listen %s: the other machines "
            "join the address given there; give this machine's address "
            "they reach it at, not 0.0.0.0", o->net_listen);
    }
    if (o->local_given) {
        die(EXIT_USAGE, "--machine gives this machine the hosts no --machine "
            "names; leave --local-hosts out");
    }
    if (o->config) {
        die(EXIT_USAGE, "--machine forwards the command line's options to "
            "the other machines' launchers, not a --config file: give them "
            "on the command line");
    }
    if (o->conflict_log || o->stale_log) {
        die(EXIT_USAGE, "--conflict-log/--stale-log: each launcher writes "
            "its own hosts' events; with --machine run one launcher per "
            "machine, each with its log");
    }
    for (int k = 0; k < o->n_machines; k++) {
        const struct machine_spec *m = &o->machines[k];
        if (m->last >= o->nhosts) {
            die(EXIT_USAGE, "--machine %s:%d-%d: the pod has %d hosts (-n), "
                "0..%d", m->name, m->first, m->last, o->nhosts,
                o->nhosts - 1);
        }
        for (int j = 0; j < k; j++) {
            if (!strcmp(o->machines[j].name, m->name)) {
                die(EXIT_USAGE, "--machine %s given twice", m->name);
            }
        }
        for (int i = m->first; i <= m->last; i++) {
            if (taken[i]) {
                die(EXIT_USAGE, "--machine %s:%d-%d: host %d is another "
                    "--machine's too", m->name, m->first, m->last, i);
            }
            taken[i] = true;
        }
    }
    int first = -1, last = -1;
    for (int i = 0; i < o->nhosts; i++) {
        if (!taken[i]) {
            if (last >= 0 && last != i - 1) {
                die(EXIT_USAGE, "--machine: the hosts left to this machine "
                    "(%d..%d and %d) are not one range", first, last, i);
            }
            first = first < 0 ? i : first;
            last = i;
        }
    }
    if (first < 0) {
        die(EXIT_USAGE, "--machine: every host is another machine's; this "
            "one (the pool's, the network's hub) runs at least one");
    }
    o->first_local = first;
    o->last_local = last;
    o->local_given = true;
}

/* Cross-checks of the options of a pod across machines (parse_args). */
void xmach_check(struct opts *o)
{
    if (o->local_given && o->last_local >= o->nhosts) {
        die(EXIT_USAGE, "--local-hosts %d-%d: the pod has %d hosts (-n), "
            "0..%d", o->first_local, o->last_local, o->nhosts, o->nhosts - 1);
    }
    if (pool_is_remote(o)) {
        g_autofree char *addr = NULL;
        int port;
        if (o->device != DEV_CXL_SHM) {
            die(EXIT_USAGE, "--pool %s: only cxl-shm takes a remote pool",
                o->pool);
        }
        if (!parse_addr_port(o->pool + strlen(REMOTE_POOL_SCHEME), &addr,
                             &port) || port == 0) {
            die(EXIT_USAGE, "--pool %s: expected " REMOTE_POOL_SCHEME
                "ADDR:PORT (the pool service's IP address and port)", o->pool);
        }
        if (!o->pool_key) {
            die(EXIT_USAGE, "--pool %s needs --pool-key PATH: the pod's key "
                "(the pool machine's POOL.key, copied as an ssh private key "
                "is)", o->pool);
        }
        if (o->serve) {
            die(EXIT_USAGE, "--serve serves a pool file of this machine; "
                "--pool %s is another machine's", o->pool);
        }
        if (o->backend == BACKEND_MEMDEV) {
            die(EXIT_USAGE, "--pool-backend memdev: a remote pool has no "
                "file here to back a memory backend");
        }
    } else if (o->pool_key) {
        die(EXIT_USAGE, "--pool-key goes with --pool " REMOTE_POOL_SCHEME
            "ADDR:PORT (a pool on another machine)");
    }
    if (o->serve && o->device != DEV_CXL_SHM) {
        die(EXIT_USAGE, "--serve: only cxl-shm pools are served");
    }
    if (o->serve_hb_ms && !o->serve) {
        die(EXIT_USAGE, "--serve-heartbeat-timeout goes with --serve (this "
            "machine serves the pool)");
    }
    if (o->net_listen && o->net_join) {
        die(EXIT_USAGE, "--net-listen and --net-join: one launcher of the "
            "pod listens, the others join it");
    }
    if (o->net_listen || o->net_join) {
        o->net = true;
    }
    if (o->pod_keys && o->userland != USERLAND_HOST) {
        msg("warning: --pod-keys: only --userland host guests have ssh; "
            "ignored");
    }
    if (o->n_machines) {
        machines_check(o);
    }
    if (!o->machine) {
        o->machine = g_strdup(g_get_host_name());
        if (o->net && !xmach_name_ok(o->machine)) {
            die(EXIT_USAGE, "this machine's name '%s' is not one the pod "
                "network takes: give --machine-name NAME (up to %d of "
                "A-Z a-z 0-9 . _ -)", o->machine, XMACH_NAME_MAX);
        }
    }
}

/* Run cxlpod-pool with argv (after the program), die on failure. */
static void pool_tool(const char *tool, const char *const *args,
                      const char *what)
{
    g_autoptr(GPtrArray) a = argv_new();
    g_autofree char *errs = NULL;
    g_autoptr(GError) err = NULL;
    int st;

    argv_add(a, tool);
    for (int i = 0; args[i]; i++) {
        argv_add(a, args[i]);
    }
    g_ptr_array_add(a, NULL);
    if (!g_spawn_sync(NULL, (char **)a->pdata, NULL,
                      G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &errs,
                      &st, &err)) {
        die(EXIT_USAGE, "%s: cannot run %s: %s", what, tool, err->message);
    }
    if (!g_spawn_check_wait_status(st, NULL)) {
        die(EXIT_USAGE, "%s: %s failed: %s", what, tool,
            errs && *errs ? g_strstrip(errs) : "(no message)");
    }
}

/* cxlpod-pool beside this launcher (a build folder, PREFIX/bin), or PATH */
static char *find_pool_tool(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    if (n > 0) {
        exe[n] = '\0';
        g_autofree char *dir = g_path_get_dirname(exe);
        char *p = g_build_filename(dir, "cxlpod-pool", NULL);
        if (g_file_test(p, G_FILE_TEST_IS_EXECUTABLE)) {
            return p;
        }
        g_free(p);
    }
    return g_find_program_in_path("cxlpod-pool");
}

/* Copy the pod's ssh keys from --pod-keys DIR into WORKDIR/ssh. */
static void copy_pod_keys(const struct opts *o)
{
    static const char *const names[] = { "id_ed25519", "ssh_host_ed25519_key",
                                         "id_ecdsa", "ssh_host_ecdsa_key",
                                         NULL };
    g_autofree char *dir = wd_path(o, "ssh");

    if (g_mkdir_with_parents(dir, 0700) < 0) {
        die(EXIT_USAGE, "cannot create %s: %s", dir, strerror(errno));
    }
    for (int i = 0; names[i]; i++) {
        for (int pub = 0; pub < 2; pub++) {
            g_autofree char *n = g_strdup_printf("%s%s", names[i],
                                                 pub ? ".pub" : "");
            g_autofree char *src = g_build_filename(o->pod_keys, n, NULL);
            g_autofree char *dst = g_build_filename(dir, n, NULL);
            g_autofree char *s = NULL, *d = NULL;
            gsize sl, dl;
            g_autoptr(GError) err = NULL;
            if (!g_file_get_contents(src, &s, &sl, &err)) {
                die(EXIT_USAGE, "--pod-keys %s: %s (give the pod's first "
                    "machine's WORKDIR/ssh, copied)", o->pod_keys,
                    err->message);
            }
            if (g_file_get_contents(dst, &d, &dl, NULL)) {
                if (dl != sl || memcmp(d, s, sl)) {
                    die(EXIT_USAGE, "ssh key clash: %s differs from %s (the "
                        "work directory has keys of another pod: give a "
                        "fresh -w DIR)", dst, src);
                }
                continue;
            }
            write_file(dst, s, pub ? 0644 : 0600);
        }
    }
}

/*
 * Before the hosts start: the remote pool's checks, the pool and its key
 * for --serve, the pod's ssh keys for --pod-keys.
 */
void xmach_prepare(struct opts *o)
{
    if (pool_is_remote(o)) {
        if (!remote_pool_supported(o->qemu)) {
            die(EXIT_USAGE, "--pool %s: this QEMU's cxl-shm cannot take a "
                "remote pool yet (it has no pool-key property: the device "
                "side of issue 37 is not in %s); run the hosts of this "
                "machine on a pool file of their own machine instead",
                o->pool, o->qemu);
        }
        if (access(o->pool_key, R_OK) < 0) {
            die(EXIT_USAGE, "--pool-key %s: %s", o->pool_key,
                strerror(errno));
        }
    }
    if (o->serve) {
        g_autofree char *tool = find_pool_tool();
        g_autofree char *key = g_strdup_printf("%s.key", o->pool);
        struct stat st;
        if (!tool) {
            die(EXIT_USAGE, "--serve needs cxlpod-pool (built beside the "
                "launcher, or on PATH)");
        }
        if (stat(o->pool, &st) < 0 || st.st_size == 0) {
            g_autofree char *size = fmt_size(o->size);
            g_autofree char *cs = fmt_size(o->coherent_size);
            g_autofree char *mh = g_strdup_printf("%d", o->max_hosts ?
                                                  o->max_hosts : o->nhosts);
            const char *args[] = { "create", "--size", size,
                                   "--coherent-size", cs, "--max-hosts", mh,
                                   o->pool, NULL };
            pool_tool(tool, args, "--serve: making the pool");
            if (!o->quiet) {
                msg("pool %s made (and its key %s) for the pool service",
                    o->pool, key);
            }
        } else if (!path_exists(key)) {
            const char *args[] = { "key", o->pool, NULL };
            pool_tool(tool, args, "--serve: making the pod's key");
        }
    }
    if (o->pod_keys && o->userland == USERLAND_HOST) {
        copy_pod_keys(o);
    }
}

static void plug_child_setup(gpointer data)
{
    (void)data;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

/* Start cxlpod-pool serve and wait for its "listening on" line. */
static void serve_start(const struct opts *o)
{
    g_autofree char *tool = find_pool_tool();
    g_autofree char *log = wd_path(o, "pool-serve.log");
    g_autofree char *hb = g_strdup_printf("%d", o->serve_hb_ms);
    const char *argv[] = { tool, "serve", "--listen", o->serve, o->pool,
                           "--heartbeat-timeout", hb, NULL };
    g_autoptr(GError) err = NULL;
    int out;

    if (!o->serve_hb_ms) {
        argv[5] = NULL;         /* the service's own default */
    }

    g_serve_log = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g_serve_log < 0) {
        die(EXIT_USAGE, "cannot create %s: %s", log, strerror(errno));
    }
    if (!g_spawn_async_with_pipes_and_fds(NULL, argv, NULL,
            G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL,
            plug_child_setup, NULL, -1, -1, g_serve_log, NULL, NULL, 0,
            &g_serve_pid, NULL, &out, NULL, &err)) {
        die(EXIT_USAGE, "--serve: cannot start %s: %s", tool, err->message);
    }
    g_serve_out = out;
    /* its first line: "listening on ADDR:PORT" */
    GString *line = g_string_new(NULL);
    double deadline = now_s() + SERVE_START_S;
    while (!strchr(line->str, '\n')) {
        struct pollfd p = { .fd = out, .events = POLLIN };
        char c[256];
        int st;
        if (waitpid(g_serve_pid, &st, WNOHANG) == g_serve_pid) {
            char how[96];
            g_autofree char *tail = NULL;
            g_serve_pid = 0;
            describe_status(st, how, sizeof(how));
            g_file_get_contents(log, &tail, NULL, NULL);
            die(EXIT_USAGE, "--serve %s: the pool service exited at once "
                "(status %s): %s", o->serve, how,
                tail && *tail ? g_strstrip(tail) : "(no message)");
        }
        if (now_s() > deadline) {
            die(EXIT_USAGE, "--serve %s: the pool service (pid %d) did not "
                "say where it listens in %d s (see %s)", o->serve,
                (int)g_serve_pid, SERVE_START_S, log);
        }
        if (poll(&p, 1, 100) > 0) {
            ssize_t n = read(out, c, sizeof(c));
            if (n > 0) {
                g_string_append_len(line, c, n);
            }
        }
    }
    (void)!write(g_serve_log, line->str, line->len);
    const char *at = strstr(line->str, "listening on ");
    g_serve_addr = g_strstrip(g_strdup(at ? at + 13 : o->serve));
    g_string_free(line, TRUE);
    fcntl(out, F_SETFL, O_NONBLOCK);
    if (!o->quiet) {
        msg("pool service: cxlpod-pool serve (pid %d) listening on %s for "
            "the hosts of other machines; log %s", (int)g_serve_pid,
            g_serve_addr, log);
    }
}

/* Whether the pool service still runs (reported once when it died). */
static void serve_check(void)
{
    int st;

    if (g_serve_out >= 0) {
        char buf[4096];
        ssize_t n;
        while ((n = read(g_serve_out, buf, sizeof(buf))) > 0) {
            (void)!write(g_serve_log, buf, n);
        }
    }
    if (g_serve_pid > 0 && waitpid(g_serve_pid, &st, WNOHANG) == g_serve_pid) {
        char how[96];
        describe_status(st, how, sizeof(how));
        g_serve_pid = 0;
        if (!g_serve_reported) {
            g_serve_reported = true;
            problem("the pool service (cxlpod-pool serve on %s) exited "
                    "(status %s) while the pod ran: the hosts of the other "
                    "machines lost their pool", g_serve_addr, how);
        }
    }
}

static void serve_stop(void)
{
    if (g_serve_pid > 0) {
        int st;
        double deadline = now_s() + TERM_GRACE_S;
        kill(g_serve_pid, SIGTERM);
        while (waitpid(g_serve_pid, &st, WNOHANG) == 0) {
            if (now_s() > deadline) {
                kill(g_serve_pid, SIGKILL);
                waitpid(g_serve_pid, &st, 0);
                break;
            }
            g_usleep(5000);
        }
        g_serve_pid = 0;
    }
    serve_check();
    if (g_serve_out >= 0) {
        close(g_serve_out);
        g_serve_out = -1;
    }
    if (g_serve_log >= 0) {
        close(g_serve_log);
        g_serve_log = -1;
    }
}

/* Read one line (at most n - 1 bytes, without its newline) byte by byte,
 * so that nothing after it is taken from the connection. */
static bool read_line_fd(int fd, char *buf, size_t n)
{
    size_t len = 0;
    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return false;
        }
        if (c == '\n') {
            buf[len] = '\0';
            return true;
        }
        if (len + 1 >= n) {
            return false;
        }
        buf[len++] = c;
    }
}

/*
 * A machine that vanishes without closing (power lost, network cut) is
 * found in about a minute on the ctl and link connections: keepalive
 * probes when nothing is sent (after 20 s, then every 10 s), and
 * TCP_USER_TIMEOUT when what is sent stays unacknowledged (the link's
 * frames, a ctl line), which would otherwise be retransmitted for about
 * 15 minutes (tcp_retries2).  The socket options stay with the socket
 * when vde_plug gets it.
 */
#define NET_DEAD_S 60

static void set_timeouts(int fd, int s)
{
    struct timeval tv = { .tv_sec = s };
    int one = 1;
    unsigned int uto = NET_DEAD_S * 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    int idle = 20, intvl = 10, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
}

static void send_line(int fd, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void send_line(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *s = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (fd >= 0) {
        (void)!send(fd, s, strlen(s), MSG_NOSIGNAL);
    }
}

/*
 * The pod's key, which a joining launcher proves it holds: --pool-key, or
 * the pool file's POOL.key (docs/pool-tool.md, "create"); NULL when this
 * machine has none.
 */
static char *g_net_key;

static void net_key_load(const struct opts *o)
{
    g_autofree char *path = o->pool_key ? g_strdup(o->pool_key) :
                            pool_is_remote(o) ? NULL :
                            g_strdup_printf("%s.key", o->pool);
    char *s = NULL;

    if (path && g_file_get_contents(path, &s, NULL, NULL)) {
        g_strstrip(s);
        if (*s) {
            g_net_key = s;
            return;
        }
        g_free(s);
    }
    if (o->net_listen) {
        struct sockaddr_in sa = sockaddr_of(o->net_listen);
        /* without a key anyone who reaches the port joins, or stops the
         * pod with one connection: only this machine's own loopback */
        if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127) {
            die(EXIT_USAGE, "--net-listen %s: no pod key (%s): listening "
                "beyond the loopback needs one, or any launcher that "
                "reaches the port joins the pod's segment (cxlpod-pool "
                "create makes POOL.key; docs/multi-machine.md, "
                "\"Security\")", o->net_listen,
                path ? path : "no --pool-key");
        }
        msg("warning: pod network: no pod key (%s): any launcher that "
            "reaches %s can join the pod's segment (docs/multi-machine.md, "
            "\"Security\")", path ? path : "no --pool-key", o->net_listen);
    }
}

/* Whether n bytes differ, in a time that does not depend on where */
static bool differ_ct(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)a[i] ^ (unsigned char)b[i];
    }
    return d != 0;
}

/*
 * A machine's name as the pod knows it (--machine-name, --machine NAME,
 * a hello line's NAME): 1..XMACH_NAME_MAX of [A-Za-z0-9._-], not starting
 * with '-' or '.', so that it cannot split a line, reach a terminal as
 * an escape, leave a directory in a file name or pass as an option.
 */
bool xmach_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > XMACH_NAME_MAX || s[0] == '-' || s[0] == '.') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!g_ascii_isalnum(s[i]) && !strchr("._-", s[i])) {
            return false;
        }
    }
    return true;
}

/* A nonce of the handshake: exactly 32 lowercase hex digits. */
bool xmach_nonce_ok(const char *s)
{
    size_t i;

    for (i = 0; s[i]; i++) {
        if (!g_ascii_isdigit(s[i]) && (s[i] < 'a' || s[i] > 'f')) {
            return false;
        }
    }
    return i == 32;
}

/*
 * HMAC-SHA256 under the pod's key, in hex, of a message that names one
 * proof only: a label, the direction ("join": the joiner's, "answer":
 * the listener's), the connection kind, the prover's pod size, hosts and
 * name, the listener's nonce and the joiner's, each field as LEN:TEXT and
 * a newline, so that no field can be read as another or as two.
 */
char *xmach_net_proof(const char *key, const char *dir, const char *kind,
                      int n, int first, int last, const char *name,
                      const char *lnonce, const char *jnonce)
{
    char nb[16], fb[16], lb[16];
    const char *f[] = { "cxlpod-net-proof 2", dir, kind, nb, fb, lb, name,
                        lnonce, jnonce };
    GString *m = g_string_new(NULL);

    snprintf(nb, sizeof(nb), "%d", n);
    snprintf(fb, sizeof(fb), "%d", first);
    snprintf(lb, sizeof(lb), "%d", last);
    for (size_t i = 0; i < G_N_ELEMENTS(f); i++) {
        g_string_append_printf(m, "%zu:%s\n", strlen(f[i]), f[i]);
    }
    char *r = g_compute_hmac_for_data(G_CHECKSUM_SHA256, (const guchar *)key,
                                      strlen(key), (const guchar *)m->str,
                                      m->len);
    g_string_free(m, TRUE);
    return r;
}

/* 16 random bytes in hex; false if the kernel gave none */
static bool make_nonce(char out[33])
{
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
        return false;
    }
    for (int i = 0; i < 16; i++) {
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    }
    return true;
}

/* A hello line: KIND NHOSTS FIRST LAST NAME [PROOF [NONCE]] after the
 * prefix (proof NULL for "-") */
static bool parse_hello(const char *line, char **kind, int *n, int *first,
                        int *last, char **name, char **proof, char **nonce)
{
    if (!g_str_has_prefix(line, NET_HELLO)) {
        return false;
    }
    g_auto(GStrv) w = g_strsplit(line + strlen(NET_HELLO), " ", 8);
    long v[3];
    guint nw = g_strv_length(w);
    if (nw < 5 || nw > 7 || !parse_int(w[1], 1, MAX_HOSTS, &v[0]) ||
        !parse_int(w[2], 0, MAX_HOSTS - 1, &v[1]) ||
        !parse_int(w[3], v[1], MAX_HOSTS - 1, &v[2]) || !*w[4]) {
        return false;
    }
    if (strcmp(w[0], "ctl") && strcmp(w[0], "link") && strcmp(w[0], "ok")) {
        return false;
    }
    if (!xmach_name_ok(w[4]) || (nw == 7 && !xmach_nonce_ok(w[6]))) {
        return false;
    }
    *kind = g_strdup(w[0]);
    *n = (int)v[0];
    *first = (int)v[1];
    *last = (int)v[2];
    *name = g_strdup(w[4]);
    if (proof) {
        *proof = nw >= 6 && strcmp(w[5], "-") ? g_strdup(w[5]) : NULL;
    }
    if (nonce) {
        *nonce = nw == 7 ? g_strdup(w[6]) : NULL;
    }
    return true;
}

static bool pending_drop_all(void);

/* vde_plug on this machine's switch, its stdin and stdout the link. */
static GPid plug_start(const struct opts *o, int fd, const char *peer)
{
    const char *const bins[] = { "/usr/bin", "/usr/sbin", NULL };
    g_autofree char *plug = find_program("vde_plug", bins);
    g_autofree char *sock = wd_path(o, "net");
    g_autofree char *lname = g_strdup_printf("net-link-%s.log", peer);
    g_autofree char *log = wd_path(o, lname);
    const char *argv[] = { plug, sock, NULL };
    g_autoptr(GError) err = NULL;
    GPid pid;

    if (!plug) {
        die(EXIT_USAGE, "the pod network across machines needs vde_plug: "
            "install vde2 (scripts/deps.sh does)");
    }
    int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    /* blocking again, no timeouts: vde_plug's own loop */
    struct timeval tv = { 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    fcntl(fd, F_SETFL, 0);
    while (!g_spawn_async_with_pipes_and_fds(NULL, argv, NULL,
               G_SPAWN_DO_NOT_REAP_CHILD, plug_child_setup, NULL, fd, fd,
               logfd, NULL, NULL, 0, &pid, NULL, NULL, NULL, &err)) {
        /* out of fds with unproven connections waiting: they go first */
        if (pending_drop_all()) {
            msg("pod network: no room to start %s for %s (%s): every "
                "connection still without its hello closed", plug, peer,
                err->message);
            g_clear_error(&err);
            continue;
        }
        die(EXIT_USAGE, "the pod network link to %s: cannot start %s: %s",
            peer, plug, err->message);
    }
    if (logfd >= 0) {
        close(logfd);
    }
    close(fd);
    return pid;
}

static struct peer *peer_named(const char *name)
{
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!strcmp(p->name, name) && !p->gone) {
            return p;
        }
    }
    return NULL;
}

/* Whether hosts first..last are this launcher's or a live peer's. */
static const char *range_taken(const struct opts *o, int first, int last)
{
    if (o->local_given ? first <= o->last_local && last >= o->first_local :
        true) {
        return o->machine;
    }
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!p->gone && first <= p->last && last >= p->first) {
            return p->name;
        }
    }
    return NULL;
}

/* The listener: one connection's hello, answered. */
static void accept_line(const struct opts *o, int fd, const char *from,
                        const char *nonce, const char *line)
{
    g_autofree char *kind = NULL, *name = NULL, *proof = NULL;
    g_autofree char *theirs = NULL;
    int n, first, last;

    if (!parse_hello(line, &kind, &n, &first, &last, &name, &proof,
                     &theirs)) {
        msg("pod network: a connection from %s was not a cxlpod launcher's; "
            "closed", from);
        close(fd);
        return;
    }
    g_autofree char *refuse = NULL;
    struct peer *p = peer_named(name);
    const char *taken;
    /* the joiner's proof, over both nonces (its own is required then) */
    g_autofree char *want = g_net_key && theirs ?
        xmach_net_proof(g_net_key, "join", kind, n, first, last, name, nonce,
                        theirs) : NULL;
    if (g_net_key && (!want || !proof || strlen(proof) != strlen(want) ||
                 differ_ct(proof, want, strlen(want)))) {
        refuse = g_strdup_printf("%s (its --pool-key, or its pool's "
                                 "POOL.key, is not this pod's key)",
                                 proof ? "wrong pod key" : "no pod key");
    } else if (n != o->nhosts) {
        refuse = g_strdup_printf("the pod has %d hosts here, %d there (give "
                                 "every launcher the same -n)", o->nhosts, n);
    } else if (last >= o->nhosts) {
        refuse = g_strdup_printf("hosts %d-%d: the pod has 0..%d", first,
                                 last, o->nhosts - 1);
    } else if (!strcmp(kind, "ctl")) {
        taken = range_taken(o, first, last);
        if (!strcmp(name, o->machine) || p) {
            refuse = g_strdup_printf("a machine named %s is in the pod "
                                     "already (--machine-name)", name);
        } else if (taken) {
            refuse = g_strdup_printf("hosts %d-%d overlap machine %s's",
                                     first, last, taken);
        }
    } else if (!strcmp(kind, "link")) {
        if (!p || p->first != first || p->last != last || p->plug) {
            refuse = g_strdup_printf("a link without its launcher's control "
                                     "connection");
        }
    } else {
        refuse = g_strdup_printf("unknown connection kind %s", kind);
    }
    if (refuse) {
        msg("pod network: refused machine %s (hosts %d-%d, from %s): %s",
            name, first, last, from, refuse);
        send_line(fd, NET_HELLO "refused %s\n", refuse);
        close(fd);
        return;
    }
    /* this launcher's proof, over the joiner's nonce */
    int lf = o->local_given ? o->first_local : 0;
    int ll = o->local_given ? o->last_local : o->nhosts - 1;
    g_autofree char *mine = g_net_key ?
        xmach_net_proof(g_net_key, "answer", "ok", o->nhosts, lf, ll,
                        o->machine, nonce, theirs) : g_strdup("-");
    send_line(fd, NET_HELLO "ok %d %d %d %s %s\n", o->nhosts, lf, ll,
              o->machine, mine);
    if (!strcmp(kind, "ctl")) {
        p = g_new0(struct peer, 1);
        p->name = g_strdup(name);
        p->addr = g_strdup(from);
        p->first = first;
        p->last = last;
        p->ctl = fd;
        p->in = g_string_new(NULL);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        if (!g_peers) {
            g_peers = g_ptr_array_new();
        }
        g_ptr_array_add(g_peers, p);
    } else {
        p->plug = plug_start(o, fd, name);
        if (!o->quiet) {
            msg("pod network: machine %s (hosts %d-%d, from %s) joined",
                name, first, last, from);
        }
    }
}

/*
 * Connections whose hello line has not come yet: read as it comes, once
 * a tick, so that a slow or silent client never holds the launcher's
 * loop; dropped after HANDSHAKE_S.
 */
struct pending {
    int fd;
    char *from;
    in_addr_t addr;         /* the source address, for PENDING_PER_ADDR */
    GString *in;
    double deadline;
    char nonce[33];
};
static GPtrArray *g_pending;
static unsigned g_pending_dropped;      /* closed for the caps, not said */
static double g_pending_said;

static void pending_free(guint i)
{
    struct pending *pc = g_ptr_array_index(g_pending, i);

    close(pc->fd);
    g_free(pc->from);
    g_string_free(pc->in, TRUE);
    g_free(pc);
    g_ptr_array_remove_index(g_pending, i);
}

/*
 * Room for one more connection from addr: when PENDING_PER_ADDR of them
 * come from there, or PENDING_MAX in all, the oldest such is closed
 * (g_pending is oldest first), so that connections that never say
 * anything hold neither this launcher's fds nor a real joiner out.
 */
static void pending_make_room(in_addr_t addr)
{
    guint same = 0, oldest_same = 0;

    for (guint i = g_pending->len; i-- > 0;) {
        struct pending *pc = g_ptr_array_index(g_pending, i);
        if (pc->addr == addr) {
            same++;
            oldest_same = i;
        }
    }
    if (same >= PENDING_PER_ADDR) {
        pending_free(oldest_same);
    } else if (g_pending->len >= PENDING_MAX) {
        pending_free(0);
    } else {
        return;
    }
    g_pending_dropped++;
    if (now_s() - g_pending_said >= 10) {
        g_pending_said = now_s();
        msg("pod network: %u connection(s) without a hello closed early "
            "(more than %d waiting, or %d from one address)",
            g_pending_dropped, PENDING_MAX, PENDING_PER_ADDR);
        g_pending_dropped = 0;
    }
}

/* Every connection still waiting for its hello closed (fds for a spawn) */
static bool pending_drop_all(void)
{
    bool any = g_pending && g_pending->len;

    while (g_pending && g_pending->len) {
        pending_free(g_pending->len - 1);
    }
    return any;
}

static void accept_start(int fd, in_addr_t addr, const char *from)
{
    struct pending *pc = g_new0(struct pending, 1);

    if (!g_pending) {
        g_pending = g_ptr_array_new();
    }
    pending_make_room(addr);

    set_timeouts(fd, HANDSHAKE_S);
    if (!make_nonce(pc->nonce)) {
        msg("pod network: no random nonce (%s); a connection from %s "
            "closed", strerror(errno), from);
        close(fd);
        g_free(pc);
        return;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    send_line(fd, NET_HELLO "nonce %s\n", pc->nonce);
    pc->fd = fd;
    pc->addr = addr;
    pc->from = g_strdup(from);
    pc->in = g_string_new(NULL);
    pc->deadline = now_s() + HANDSHAKE_S;
    g_ptr_array_add(g_pending, pc);
}

static void pending_tick(const struct opts *o)
{
    for (guint i = 0; g_pending && i < g_pending->len;) {
        struct pending *pc = g_ptr_array_index(g_pending, i);
        char buf[512];
        ssize_t r;
        bool drop = false;

        /* the joiner sends nothing past its line before the answer */
        while ((r = recv(pc->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
            g_string_append_len(pc->in, buf, r);
            if (pc->in->len > 1024) {
                drop = true;
                break;
            }
        }
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            drop = true;
        }
        char *nl = strchr(pc->in->str, '\n');
        if (nl) {
            /* out of the list first: starting vde_plug may empty it */
            g_ptr_array_remove_index(g_pending, i);
            *nl = '\0';
            accept_line(o, pc->fd, pc->from, pc->nonce, pc->in->str);
            g_free(pc->from);
            g_string_free(pc->in, TRUE);
            g_free(pc);
            continue;
        } else if (drop || now_s() > pc->deadline) {
            msg("pod network: a connection from %s %s; closed", pc->from,
                drop ? "was not a cxlpod launcher's" :
                "sent no hello in " G_STRINGIFY(HANDSHAKE_S) " s");
            close(pc->fd);
        } else {
            i++;
            continue;
        }
        g_free(pc->from);
        g_string_free(pc->in, TRUE);
        g_free(pc);
        g_ptr_array_remove_index(g_pending, i);
    }
}

/* The main context's pending sources (the signal sources set g_signal) */
static void run_sources(void)
{
    while (g_main_context_iteration(NULL, FALSE)) {
    }
}

/*
 * One connect() to sa, not past deadline (now_s()) and not past a
 * signal: non-blocking, polled in slices of 100 ms.  The connected
 * socket (blocking), or -1 with *err.
 */
static int connect_bounded(const struct sockaddr_in *sa, double deadline,
                           int *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd < 0) {
        die(EXIT_USAGE, "socket: %s", strerror(errno));
    }
    *err = 0;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
        *err = errno;
    }
    while (*err == EINPROGRESS || *err == EINTR) {
        double left = deadline - now_s();
        struct pollfd pf = { .fd = fd, .events = POLLOUT };
        int r;

        run_sources();
        if (g_signal || left <= 0) {
            *err = g_signal ? EINTR : ETIMEDOUT;
            break;
        }
        r = poll(&pf, 1, (int)MIN(left * 1000 + 1, 100));
        if (r < 0 && errno != EINTR) {
            *err = errno;
        } else if (r > 0) {
            socklen_t l = sizeof(*err);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &l) < 0) {
                *err = errno;
            }
        }
    }
    if (*err) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, 0);
    return fd;
}

/* The joiner: one connection to the listener, hello answered "ok". */
static int join_one(const struct opts *o, const char *kind, struct peer *p)
{
    struct sockaddr_in sa = sockaddr_of(o->net_join);
    double t0 = now_s(), said = t0;
    double deadline = g_join_t0 + o->join_timeout_s;
    int fd;

    for (;;) {
        int e;
        fd = connect_bounded(&sa, deadline, &e);
        if (fd >= 0) {
            break;
        }
        if (e != ECONNREFUSED && e != ENETUNREACH && e != EHOSTUNREACH &&
            e != ETIMEDOUT && e != EINTR) {
            die(EXIT_USAGE, "--net-join %s: %s", o->net_join, strerror(e));
        }
        double t = now_s();
        if (g_signal) {
            die(EXIT_INTR, "interrupted while joining the pod network");
        }
        if (t >= deadline) {
            die(EXIT_TIMEOUT, "--net-join %s: no launcher listens there "
                "after %.0f s (%s; --join-timeout)", o->net_join,
                t - g_join_t0, strerror(e));
        }
        if (!o->quiet && t - said >= 10) {
            said = t;
            msg("waiting for the pod network's listener at %s (%.0f s; %s)",
                o->net_join, t - t0, strerror(e));
        }
        /* its signal sources (Ctrl-C) set g_signal */
        for (int i = 0; i < 20 && !g_signal; i++) {
            run_sources();
            g_usleep(10000);
        }
    }
    set_timeouts(fd, HANDSHAKE_S);
    char line[512];
    errno = 0;
    int lf = o->local_given ? o->first_local : 0;
    int ll = o->local_given ? o->last_local : o->nhosts - 1;
    if (!read_line_fd(fd, line, sizeof(line)) ||
        !g_str_has_prefix(line, NET_HELLO "nonce ")) {
        die(EXIT_USAGE, "--net-join %s: no cxlpod launcher's greeting there "
            "(%s)", o->net_join, errno ? strerror(errno) : "not one");
    }
    /* nothing but a nonce of the right form is signed */
    char lnonce[33];
    if (!xmach_nonce_ok(line + strlen(NET_HELLO "nonce "))) {
        die(EXIT_USAGE, "--net-join %s: no cxlpod launcher's greeting there "
            "(a malformed nonce)", o->net_join);
    }
    memcpy(lnonce, line + strlen(NET_HELLO "nonce "), sizeof(lnonce));
    char mine[33];
    if (!make_nonce(mine)) {
        die(EXIT_USAGE, "--net-join: no random nonce: %s", strerror(errno));
    }
    g_autofree char *proof = g_net_key ?
        xmach_net_proof(g_net_key, "join", kind, o->nhosts, lf, ll,
                        o->machine, lnonce, mine) : g_strdup("-");
    send_line(fd, NET_HELLO "%s %d %d %d %s %s %s\n", kind, o->nhosts, lf,
              ll, o->machine, proof, mine);
    if (!read_line_fd(fd, line, sizeof(line))) {
        die(EXIT_USAGE, "--net-join %s: no answer from the launcher there "
            "(%s)", o->net_join, strerror(errno));
    }
    if (g_str_has_prefix(line, NET_HELLO "refused ")) {
        /* another machine's words: printable ASCII only to the terminal */
        for (char *c = line; *c; c++) {
            if (*c < 0x20 || *c > 0x7e) {
                *c = '?';
            }
        }
        die(EXIT_USAGE, "--net-join %s: the launcher there refused this "
            "machine (%s): %s", o->net_join, o->machine,
            line + strlen(NET_HELLO "refused "));
    }
    g_autofree char *k = NULL, *name = NULL, *theirs = NULL;
    int n, first, last;
    if (!parse_hello(line, &k, &n, &first, &last, &name, &theirs, NULL) ||
        strcmp(k, "ok")) {
        die(EXIT_USAGE, "--net-join %s: not a cxlpod launcher's answer",
            o->net_join);
    }
    /* the listener proves it holds the pod's key too */
    g_autofree char *want = g_net_key ?
        xmach_net_proof(g_net_key, "answer", "ok", n, first, last, name,
                        lnonce, mine) : NULL;
    if (want && (!theirs || strlen(theirs) != strlen(want) ||
                 differ_ct(theirs, want, strlen(want)))) {
        die(EXIT_USAGE, "--net-join %s: the launcher there (%s) %s: not "
            "this pod's, or a pod network without a key", o->net_join, name,
            theirs ? "answered with another pod's key" :
            "did not prove it holds the pod's key");
    }
    if (!p->name) {
        p->name = g_strdup(name);
        p->first = first;
        p->last = last;
    }
    return fd;
}

/*
 * After the pod switch started: the pool service (--serve), the listener
 * (--net-listen) or the joined link (--net-join).
 */
void xmach_start(const struct opts *o)
{
    g_join_t0 = g_join_said = now_s();
    if (o->net_listen || o->net_join) {
        net_key_load(o);
    }
    if (o->serve) {
        serve_start(o);
    }
    if (o->net_listen) {
        struct sockaddr_in sa = sockaddr_of(o->net_listen);
        int one = 1;
        g_listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC |
                             SOCK_NONBLOCK, 0);
        if (g_listen_fd < 0 ||
            setsockopt(g_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
                       sizeof(one)) < 0 ||
            bind(g_listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(g_listen_fd, 16) < 0) {
            die(EXIT_USAGE, "--net-listen %s: %s", o->net_listen,
                strerror(errno));
        }
        if (!o->quiet) {
            msg("pod network: machine %s (hosts %d-%d) listens on %s for the "
                "other machines", o->machine,
                o->local_given ? o->first_local : 0,
                o->local_given ? o->last_local : o->nhosts - 1,
                o->net_listen);
        }
    }
    if (o->n_machines) {
        machines_start(o);
    }
    if (o->net_join) {
        struct peer *p = g_new0(struct peer, 1);
        p->ctl = join_one(o, "ctl", p);
        p->addr = g_strdup(o->net_join);
        p->in = g_string_new(NULL);
        int link = join_one(o, "link", p);
        fcntl(p->ctl, F_SETFL, O_NONBLOCK);
        g_peers = g_ptr_array_new();
        g_ptr_array_add(g_peers, p);
        p->plug = plug_start(o, link, p->name);
        if (!o->quiet) {
            msg("pod network: joined machine %s (hosts %d-%d) at %s",
                p->name, p->first, p->last, o->net_join);
        }
    }
}

/* Whether every host of the pod is this machine's or a joined one's
 * (the listener starts its hosts then); a progress line while not. */
bool xmach_ready(const struct opts *o)
{
    if (!o->net_listen) {
        return true;
    }
    GString *missing = g_string_new(NULL);
    for (int i = 0; i < o->nhosts; i++) {
        bool have = host_local(o, i);
        for (guint k = 0; !have && g_peers && k < g_peers->len; k++) {
            struct peer *p = g_ptr_array_index(g_peers, k);
            have = !p->gone && p->plug && i >= p->first && i <= p->last;
        }
        if (!have) {
            g_string_append_printf(missing, "%s%d", missing->len ? "," : "",
                                   i);
        }
    }
    bool ready = missing->len == 0;
    double t = now_s();
    if (!ready && t - g_join_t0 > o->join_timeout_s) {
        die(EXIT_TIMEOUT, "--net-listen %s: hosts %s of the pod never joined "
            "(%.0f s, --join-timeout): start their machines' launchers with "
            "--net-join", o->net_listen, missing->str, t - g_join_t0);
    }
    if (!ready && !o->quiet && t - g_join_said >= 10) {
        g_join_said = t;
        msg("waiting for the other machines to join the pod network on %s: "
            "hosts %s missing (%.0f s)", o->net_listen, missing->str,
            t - g_join_t0);
    }
    g_string_free(missing, TRUE);
    return ready;
}

/*
 * Whether this launcher may end now that its hosts are gone: the
 * listener's switch carries the other machines' traffic between them, so
 * it waits until every one has ended (or is gone), with a progress line.
 */
bool xmach_may_end(const struct opts *o)
{
    static double t0, said;
    GString *left = g_string_new(NULL);

    for (guint i = 0; o->net_listen && g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!p->ended && !p->gone) {
            g_string_append_printf(left, "%s%s (hosts %d-%d)",
                                   left->len ? ", " : "", p->name, p->first,
                                   p->last);
        }
    }
    bool done = left->len == 0;
    double t = now_s();
    if (!done && t0 == 0) {
        t0 = said = t;
    }
    if (!done && !o->quiet && t - said >= 10) {
        said = t;
        msg("this machine's hosts have ended; waiting for machine%s %s, "
            "whose traffic goes through this machine's switch (%.0f s)",
            strchr(left->str, ',') ? "s" : "", left->str, t - t0);
    }
    g_string_free(left, TRUE);
    return done;
}

/* Every other machine's jobs have ended (or it has left). */
bool xmach_peers_jobs_done(void)
{
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!p->jobs_done && !p->ended && !p->gone) {
            return false;
        }
    }
    return true;
}

/*
 * Tell the others that this machine's jobs have ended: a joiner at once,
 * the listener (which relays) each peer once every other one's have too.
 */
static void send_jobs_done(void)
{
    for (guint i = 0; g_local_jobs_done && g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        bool others = true;
        for (guint k = 0; k < g_peers->len; k++) {
            struct peer *q = g_ptr_array_index(g_peers, k);
            others &= q == p || q->jobs_done || q->ended || q->gone;
        }
        if (!p->told_jobs_done && others) {
            p->told_jobs_done = true;
            send_line(p->ctl, "jobs-done\n");
        }
    }
}

void xmach_jobs_done(void)
{
    g_local_jobs_done = true;
    send_jobs_done();
}

/* A host of this machine failed and the pod stops: tell the others
 * (not the machine the host is on, when it was a remote one). */
void xmach_host_failed(int host, const char *why)
{
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!(host >= p->first && host <= p->last)) {
            send_line(p->ctl, "fail %d %s\n", host, why ? why : "failed");
        }
    }
}

/*
 * Once a tick: the pool service, new machines, the others' messages and
 * links.  Returns a host of another machine that failed (the pod is to
 * be stopped for it), with the reason in why, or -1.
 */
int xmach_tick(const struct opts *o, char *why, size_t n)
{
    int failed = -1;

    serve_check();
    pending_tick(o);
    for (;;) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        if (g_listen_fd < 0) {
            break;
        }
        int fd = accept4(g_listen_fd, (struct sockaddr *)&sa, &sl,
                         SOCK_CLOEXEC);
        if (fd < 0) {
            break;
        }
        char a[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a));
        g_autofree char *from = g_strdup_printf("%s:%d", a,
                                                ntohs(sa.sin_port));
        accept_start(fd, sa.sin_addr.s_addr, from);
    }
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        const char *lost = NULL;
        char buf[4096];
        ssize_t r;
        while (p->ctl >= 0 && (r = recv(p->ctl, buf, sizeof(buf),
                                        MSG_DONTWAIT)) != 0) {
            if (r < 0) {
                if (errno == EAGAIN || errno == EINTR) {
                    break;
                }
                lost = strerror(errno);
                break;
            }
            g_string_append_len(p->in, buf, r);
        }
        if (p->ctl >= 0 && r == 0) {
            lost = "connection closed";
        }
        char *nl;
        while ((nl = strchr(p->in->str, '\n'))) {
            *nl = '\0';
            const char *l = p->in->str;
            int h;
            if (!strcmp(l, "jobs-done")) {
                p->jobs_done = true;
            } else if (!strcmp(l, "end")) {
                p->ended = true;
                if (!o->quiet) {
                    msg("pod network: machine %s (hosts %d-%d): its launcher "
                        "ended", p->name, p->first, p->last);
                }
            } else if (sscanf(l, "fail %d", &h) == 1 && h >= 0 &&
                       h < o->nhosts && !host_local(o, h) &&
                       !g_fail_seen[h]) {
                g_fail_seen[h] = true;     /* once (relays come back) */
                const char *w = strchr(l + 5, ' ');
                problem("machine %s: host %d failed (%s)", p->name, h,
                        w ? w + 1 : "failed");
                if (failed < 0) {
                    failed = h;
                    snprintf(why, n, "machine %s: host %d failed", p->name, h);
                }
            }
            g_string_erase(p->in, 0, nl + 1 - p->in->str);
        }
        if (lost) {
            close(p->ctl);
            p->ctl = -1;
            if (!p->ended && !p->gone) {
                p->gone = true;
                problem("machine %s (hosts %d-%d, %s): its launcher is gone "
                        "without ending (%s): killed, or its machine or the "
                        "network between failed", p->name, p->first, p->last,
                        p->addr, lost);
                if (failed < 0) {
                    failed = p->first;
                    snprintf(why, n, "machine %s's launcher is gone",
                             p->name);
                }
            }
        }
        int st;
        if (p->plug > 0 && waitpid(p->plug, &st, WNOHANG) == p->plug) {
            describe_status(st, p->link_how, sizeof(p->link_how));
            p->plug = 0;
            p->t_link_down = now_s();
        }
        /* a link down while its launcher's control connection stays up
         * for a second (else that launcher is gone, said above) */
        if (p->t_link_down > 0 && now_s() - p->t_link_down > 1.0) {
            p->t_link_down = 0;
            if (!p->ended && !p->gone) {
                p->gone = true;
                problem("machine %s (hosts %d-%d): the pod network link to "
                        "it is down (vde_plug exited with status %s): its "
                        "hosts are unreachable", p->name, p->first, p->last,
                        p->link_how);
                if (failed < 0) {
                    failed = p->first;
                    snprintf(why, n, "the link to machine %s is down",
                             p->name);
                }
            }
        }
    }
    send_jobs_done();
    int mf = machines_tick();
    return failed >= 0 ? failed : mf;
}

/* The pod has ended here: say so to the others, stop links and service. */
void xmach_stop(void)
{
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (p->ctl >= 0) {
            send_line(p->ctl, "end\n");
            shutdown(p->ctl, SHUT_WR);
            close(p->ctl);
            p->ctl = -1;
        }
        if (p->plug > 0) {
            int st;
            double deadline = now_s() + 2;
            kill(p->plug, SIGTERM);
            while (waitpid(p->plug, &st, WNOHANG) == 0) {
                if (now_s() > deadline) {
                    kill(p->plug, SIGKILL);
                    waitpid(p->plug, &st, 0);
                    break;
                }
                g_usleep(5000);
            }
            p->plug = 0;
        }
    }
    if (g_listen_fd >= 0) {
        close(g_listen_fd);
        g_listen_fd = -1;
    }
    for (guint i = 0; g_pending && i < g_pending->len; i++) {
        struct pending *pc = g_ptr_array_index(g_pending, i);
        close(pc->fd);
    }
    machines_stop();
    serve_stop();
}

/* The problems of a pod across machines after the summary lines; the
 * exit status they make (EXIT_JOBFAIL, or EXIT_OK with none). */
int xmach_report(const struct opts *o)
{
    (void)o;
    fflush(stdout);
    machines_report();
    for (guint i = 0; g_problems && i < g_problems->len; i++) {
        printf("pod across machines: %s\n",
               (char *)g_ptr_array_index(g_problems, i));
    }
    return g_problems && g_problems->len ? EXIT_JOBFAIL : EXIT_OK;
}

/* --machine: the other machines' launchers this one started            */

struct machine_run {
    const struct machine_spec *m;
    GPid pid;               /* 0: reaped */
    int status;
    bool reported;
    char *out, *err;        /* WORKDIR/machine-NAME.out, .err */
    int in;                 /* its command's stdin (-1: all sent) */
    char *script;           /* what it is sent there, from... */
    size_t sent;            /* ...this offset on */
};
static struct machine_run *g_mruns;
static int g_n_mruns;

/* Options that are this machine's, not forwarded (or forwarded rewritten) */
static const char *const not_forwarded[] = {
    "hosts", "workdir", "pool", "pool-key", "serve",
    "serve-heartbeat-timeout", "net-listen", "net-join",
    "local-hosts", "machine-name", "pod-keys", "machine", "ssh-command",
    "remote-launcher", "job", "job-host", "json", "dry-run", "conflict-log",
    "stale-log", NULL
};

static void add_word(GString *b, const char *w)
{
    g_string_append_c(b, ' ');
    shell_quote(b, w);
}

/* A file of the script: its bytes as base64, decoded to dest there. */
static void add_file(GString *b, const char *dest, const char *data,
                     gsize len)
{
    g_autofree char *enc = g_base64_encode((const guchar *)data, len);
    g_string_append_printf(b, "base64 -d >%s <<'CXLPOD_EOF'\n", dest);
    for (size_t i = 0, n = strlen(enc); i < n; i += 76) {
        g_string_append_len(b, enc + i, MIN(76, n - i));
        g_string_append_c(b, '\n');
    }
    g_string_append(b, "CXLPOD_EOF\n");
}

static void add_file_from(GString *b, const char *dest, const char *src)
{
    g_autofree char *s = NULL;
    gsize len;
    g_autoptr(GError) err = NULL;

    if (!g_file_get_contents(src, &s, &len, &err)) {
        die(EXIT_USAGE, "--machine: %s", err->message);
    }
    add_file(b, dest, s, len);
}

/*
 * Where the other machines' hosts take the pool from: the pool service
 * when this launcher serves it (--serve: pool=ucx://, the pod's key sent
 * along), else the same pool path (machines that share the pool file:
 * launchers on one machine, or the test's network namespaces).
 */
static void machine_pool_args(GString *b, const struct opts *o)
{
    if (o->serve) {
        g_autofree char *key = g_strdup_printf("%s.key", o->pool);
        g_autofree char *url = g_strdup_printf(REMOTE_POOL_SCHEME "%s",
                                               g_serve_addr);
        add_file_from(b, "\"$d/pool.key\"", key);
        g_string_append(b, "set -- \"$@\" --pool ");
        shell_quote(b, url);
        g_string_append(b, " --pool-key \"$d/pool.key\"\n");
    } else {
        g_string_append(b, "set -- \"$@\" --pool ");
        shell_quote(b, o->pool);
        g_string_append(b, "\n");
    }
}

/*
 * The script machine m's shell runs (sh -s): the pod's files into a new
 * directory there, then its launcher with this one's pod options, in the
 * background so that a signal to the shell is handled at once: the shell
 * passes SIGTERM on to the launcher and waits for it.  Whichever way the
 * shell ends, it removes the pod's secrets it wrote (the pool's key, the
 * pod's ssh keys and the launcher's copy of them) and keeps the rest (the
 * launcher's logs in $d/w).
 */
static char *machine_script(const struct opts *o, const struct machine_spec *m)
{
    GString *b = g_string_new("set -e\numask 077\n"
        "d=$(mktemp -d \"${TMPDIR:-/tmp}/cxlpod-machine.XXXXXX\")\n"
        "pid=\n"
        "forget() { rm -rf \"$d/pool.key\" \"$d/ssh\" \"$d/w/ssh\"; }\n"
        "trap forget EXIT\n"
        "trap 'if [ -n \"$pid\" ]; then kill -TERM \"$pid\" 2>/dev/null; "
        "wait \"$pid\"; fi; forget; exit 143' HUP INT TERM\n"
        "set --\n");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';

    if (o->userland == USERLAND_HOST) {
        static const char *const keys[] = { "id_ed25519", "ssh_host_ed25519_key",
                                            "id_ecdsa", "ssh_host_ecdsa_key",
                                            NULL };
        g_string_append(b, "mkdir \"$d/ssh\"\n");
        for (int i = 0; keys[i]; i++) {
            for (int pub = 0; pub < 2; pub++) {
                g_autofree char *name = g_strdup_printf("%s%s", keys[i],
                                                        pub ? ".pub" : "");
                g_autofree char *src = g_build_filename(o->workdir, "ssh",
                                                        name, NULL);
                g_autofree char *dst = g_strdup_printf("\"$d/ssh/%s\"", name);
                add_file_from(b, dst, src);
            }
        }
        g_string_append(b, "set -- \"$@\" --pod-keys \"$d/ssh\"\n");
    }
    machine_pool_args(b, o);
    if (o->job_file) {
        add_file_from(b, "\"$d/job\"", o->job_file);
        g_string_append(b, "set -- \"$@\" --job \"$d/job\"\n");
    }
    for (int i = 0; i < o->n_host_jobs; i++) {
        g_autofree char *dst = g_strdup_printf("\"$d/job-%d\"",
                                               o->host_jobs[i].host);
        add_file_from(b, dst, o->host_jobs[i].file);
        g_string_append_printf(b, "set -- \"$@\" --job-host %d:\"$d/job-%d\"\n",
                               o->host_jobs[i].host, o->host_jobs[i].host);
    }
    /* the launch directory: this one's path if it has it */
    g_string_append(b, "cd ");
    shell_quote(b, o->jobdir ? o->jobdir : "/");
    g_string_append(b, " 2>/dev/null || { mkdir \"$d/proj\"; cd \"$d/proj\"; }\n");
    add_word(b, o->remote_launcher ? o->remote_launcher :
             (n > 0 ? exe : PROG));
    g_autofree char *nh = g_strdup_printf("%d", o->nhosts);
    g_autofree char *range = g_strdup_printf("%d-%d", m->first, m->last);
    add_word(b, "-n");
    add_word(b, nh);
    add_word(b, "--local-hosts");
    add_word(b, range);
    add_word(b, "--machine-name");
    add_word(b, m->name);
    add_word(b, "--net-join");
    add_word(b, o->net_listen);
    g_string_append(b, " -w \"$d/w\" \"$@\"");
    for (guint i = 0; i + 1 < o->given->len; i += 2) {
        const char *name = g_ptr_array_index(o->given, i);
        const char *val = g_ptr_array_index(o->given, i + 1);
        if (g_strv_contains(not_forwarded, name)) {
            continue;
        }
        g_autofree char *opt = g_strdup_printf("--%s", name);
        add_word(b, opt);
        if (val) {
            add_word(b, val);
        }
    }
    if (o->job_cmd->len) {
        g_string_append(b, " --");
        for (guint i = 0; i < o->job_cmd->len; i++) {
            add_word(b, g_ptr_array_index(o->job_cmd, i));
        }
    }
    g_string_append(b, " </dev/null &\n"
                       "pid=$!\n"
                       "st=0\n"
                       "wait \"$pid\" || st=$?\n"
                       "pid=\n"
                       "forget\n"
                       "exit \"$st\"\n");
    return g_string_free(b, FALSE);
}

/*
 * Send what the pipe to machine mr's command takes now of its script,
 * never waiting: the rest at the next tick (a command that does not read,
 * an ssh waiting for something, holds neither the launcher nor the other
 * machines).  The pipe closed once all is sent, or the command is gone.
 */
static void machine_feed(struct machine_run *mr)
{
    size_t len = mr->script ? strlen(mr->script) : 0;

    while (mr->in >= 0 && mr->sent < len) {
        ssize_t r = write(mr->in, mr->script + mr->sent, len - mr->sent);
        if (r > 0) {
            mr->sent += r;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        msg("machine %s: could not send its launcher's script: %s",
            mr->m->name, r < 0 ? strerror(errno) : "nothing written");
        break;
    }
    if (mr->in >= 0) {
        close(mr->in);
        mr->in = -1;
    }
    g_clear_pointer(&mr->script, g_free);
}

/* Start every --machine's launcher (after this one listens). */
static void machines_start(const struct opts *o)
{
    g_auto(GStrv) cmd = NULL;
    g_autoptr(GError) err = NULL;

    /* the default ssh never prompts: no terminal is there to answer (it
     * runs in a process group of its own), a prompt would stop it */
    if (!g_shell_parse_argv(o->ssh_command ? o->ssh_command :
                            "ssh -o BatchMode=yes", NULL, &cmd, &err)) {
        die(EXIT_USAGE, "--ssh-command '%s': %s", o->ssh_command,
            err->message);
    }
    g_mruns = g_new0(struct machine_run, o->n_machines);
    g_n_mruns = o->n_machines;
    for (int k = 0; k < o->n_machines; k++) {
        g_mruns[k].in = -1;
    }
    for (int k = 0; k < o->n_machines; k++) {
        const struct machine_spec *m = &o->machines[k];
        struct machine_run *mr = &g_mruns[k];
        g_autoptr(GPtrArray) a = argv_new();
        char *script = machine_script(o, m);
        g_autofree char *on = g_strdup_printf("machine-%s.out", m->name);
        g_autofree char *en = g_strdup_printf("machine-%s.err", m->name);
        g_autoptr(GError) e2 = NULL;
        int in;

        mr->m = m;
        mr->out = wd_path(o, on);
        mr->err = wd_path(o, en);
        for (int i = 0; cmd[i]; i++) {
            argv_add(a, cmd[i]);
        }
        argv_add(a, m->name);
        argv_add(a, "sh");
        argv_add(a, "-s");
        g_ptr_array_add(a, NULL);
        int ofd = open(mr->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int efd = open(mr->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (ofd < 0 || efd < 0) {
            die(EXIT_USAGE, "cannot create %s: %s", mr->out, strerror(errno));
        }
        if (!g_spawn_async_with_pipes_and_fds(NULL,
                (const gchar *const *)a->pdata, NULL,
                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                plug_child_setup, NULL, -1, ofd, efd, NULL, NULL, 0,
                &mr->pid, &in, NULL, NULL, &e2)) {
            die(EXIT_USAGE, "--machine %s: cannot run %s: %s", m->name,
                cmd[0], e2->message);
        }
        close(ofd);
        close(efd);
        fcntl(in, F_SETFL, O_NONBLOCK);
        mr->in = in;
        mr->script = script;
        mr->sent = 0;
        machine_feed(mr);
        if (!o->quiet) {
            msg("machine %s (hosts %d-%d): started its launcher with '%s %s "
                "sh -s' (pid %d); its messages in %s", m->name, m->first,
                m->last, o->ssh_command ? o->ssh_command :
                "ssh -o BatchMode=yes", m->name,
                (int)mr->pid, mr->err);
        }
    }
}

/* The last line of a file (for messages), or "". */
static char *last_line(const char *path)
{
    g_autofree char *s = NULL;
    if (!g_file_get_contents(path, &s, NULL, NULL)) {
        return g_strdup("");
    }
    g_strstrip(s);
    const char *nl = strrchr(s, '\n');
    return g_strdup(nl ? nl + 1 : s);
}

static bool peer_joined(const char *name)
{
    for (guint i = 0; g_peers && i < g_peers->len; i++) {
        struct peer *p = g_ptr_array_index(g_peers, i);
        if (!strcmp(p->name, name)) {
            return true;
        }
    }
    return false;
}

/* A --machine launcher that ended: a problem unless it exited 0; the
 * host to stop the pod for when it never joined (else -1). */
static int machine_reaped(struct machine_run *mr, int st)
{
    mr->pid = 0;
    mr->status = st;
    if (g_spawn_check_wait_status(st, NULL) || mr->reported) {
        return -1;
    }
    char how[96];
    g_autofree char *tail = last_line(mr->err);
    describe_status(st, how, sizeof(how));
    mr->reported = true;
    bool joined = peer_joined(mr->m->name);
    problem("machine %s (hosts %d-%d): its launcher exited (status %s)%s: "
            "%s (all in %s)", mr->m->name, mr->m->first, mr->m->last, how,
            joined ? "" : " before it joined", *tail ? tail : "(no message)",
            mr->err);
    return joined ? -1 : mr->m->first;
}

static int machines_tick(void)
{
    int failed = -1;
    for (int k = 0; k < g_n_mruns; k++) {
        struct machine_run *mr = &g_mruns[k];
        int st;
        machine_feed(mr);
        if (mr->pid > 0 && waitpid(mr->pid, &st, WNOHANG) == mr->pid) {
            int f = machine_reaped(mr, st);
            failed = failed < 0 ? f : failed;
        }
    }
    return failed;
}

/* After the pod: every --machine launcher ends (it was told "end"). */
static void machines_stop(void)
{
    double deadline = now_s() + 30;
    for (int k = 0; k < g_n_mruns; k++) {
        struct machine_run *mr = &g_mruns[k];
        int st;
        while (mr->pid > 0) {
            if (waitpid(mr->pid, &st, WNOHANG) == mr->pid) {
                machine_reaped(mr, st);
                break;
            }
            if (now_s() > deadline) {
                msg("machine %s: its launcher has not ended 30 s after the "
                    "pod; stopping it", mr->m->name);
                kill(mr->pid, SIGTERM);
                g_usleep(TERM_GRACE_S * 1e6);
                kill(mr->pid, SIGKILL);
                waitpid(mr->pid, &st, 0);
                machine_reaped(mr, st);
                break;
            }
            g_usleep(20000);
        }
    }
}

/* The --machine launchers' results (their stdout), after this one's. */
static void machines_report(void)
{
    for (int k = 0; k < g_n_mruns; k++) {
        g_autofree char *s = NULL;
        gsize len;
        if (g_file_get_contents(g_mruns[k].out, &s, &len, NULL) && len) {
            fwrite(s, 1, len, stdout);
        }
    }
}

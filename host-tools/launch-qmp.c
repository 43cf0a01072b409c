/*
 * QMP: what the survivors see of a killed or exited host (their host
 * table through query-cxl-shm), the pool file's host table after the run,
 * and the `qmp` subcommand.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* what the survivors see: their host table over QMP                   */

static int unix_connect(const char *path);
static char *read_line_fd(int fd, GString *pending, int timeout_ms);
static char *qmp_exchange(int s, GString *pending, const char *cmd);

#define DETECT_POLL_MS 2
#define LEFT_LIMIT_S 2.0    /* a clean exit not in the table by then */

/* Kill specs of a host fire on its runs 1..this. */
int kill_runs(const struct opts *o, int host)
{
    return o->restart[host] ? o->restarts : 1;
}

/* A running host other than `not` whose QMP can be asked (-1: none). */
static int pick_survivor(int not, int skip)
{
    for (int i = 0; i < g_nhosts; i++) {
        if (i != not && i != skip && g_hosts[i].pid > 0 &&
            !g_hosts[i].term_sent && !g_hosts[i].rep.ended) {
            return i;
        }
    }
    return -1;
}

/* A QMP session with host i (greeting and capabilities done); -1 if not. */
static int qmp_open(int i, GString *pending)
{
    int s = unix_connect(g_hosts[i].hp.qmp);
    if (s < 0) {
        return -1;
    }
    char *g = read_line_fd(s, pending, 2000);
    bool ok = g && strstr(g, "\"QMP\"");
    g_free(g);
    if (ok) {
        char *r = qmp_exchange(s, pending, "{\"execute\":\"qmp_capabilities\"}");
        ok = r && strstr(r, "\"return\"");
        g_free(r);
    }
    if (!ok) {
        close(s);
        return -1;
    }
    return s;
}

/*
 * Ask survivor `sv` for host `host`'s state (query-cxl-shm) until it is
 * not `from`, or until `deadline`.  Returns 1 and the state, generation
 * and time of the reply that showed the change, 0 on the deadline (the
 * last state seen), -1 if QMP failed.
 */
static int watch_host_state(int sv, int host, const char *from, double deadline,
                            char *state, size_t n, uint64_t *gen, double *t_seen)
{
    GString *pending = g_string_new(NULL);
    int s = qmp_open(sv, pending);
    int ret = -1;
    snprintf(state, n, "?");
    if (s < 0) {
        g_string_free(pending, TRUE);
        return -1;
    }
    for (;;) {
        char *r = qmp_exchange(s, pending, "{\"execute\":\"query-cxl-shm\"}");
        double t = now_s();
        if (!r || !qmp_host_state(r, host, state, n, gen)) {
            g_free(r);
            break;
        }
        g_free(r);
        if (strcmp(state, from)) {
            *t_seen = t;
            ret = 1;
            break;
        }
        if (t > deadline) {
            ret = 0;
            break;
        }
        poll(NULL, 0, DETECT_POLL_MS);
    }
    close(s);
    g_string_free(pending, TRUE);
    return ret;
}

/* Right after the SIGKILL of host h at tk: how long until a survivor's
 * host table says it failed. */
void detect_kill(struct host *h, struct kill_rec *kr, double tk, bool quiet)
{
    char state[16];
    uint64_t gen = 0;
    double ts = 0;
    int sv = pick_survivor(h->id, -1);
    int r = sv < 0 ? -1 : watch_host_state(sv, h->id, "live", tk + DETECT_LIMIT_S,
                                           state, sizeof(state), &gen, &ts);
    if (r < 0 && sv >= 0) {
        int sv2 = pick_survivor(h->id, sv);     /* that one did not answer */
        if (sv2 >= 0) {
            sv = sv2;
            r = watch_host_state(sv, h->id, "live", tk + DETECT_LIMIT_S,
                                 state, sizeof(state), &gen, &ts);
        }
    }
    if (r < 0) {
        if (sv >= 0 || !quiet) {
            msg("host %d: no survivor's QMP answered: failure detection not "
                "measured", h->id);
        }
        return;
    }
    kr->seen_by = sv;
    kr->gen = gen;
    if (r == 1 && !strcmp(state, "failed")) {
        kr->detect_s = ts - tk;
        if (!quiet) {
            msg("host %d: host %d's table shows it failed (generation %llu) "
                "%.1f ms after the SIGKILL", h->id, sv, (unsigned long long)gen,
                kr->detect_s * 1e3);
        }
    } else {
        msg("host %d: host %d's table shows it %s, not failed, %.1f s after "
            "the SIGKILL", h->id, sv, state, now_s() - tk);
    }
}

/* Host h's QEMU exited by itself: what a survivor's table says (left). */
void check_clean_exit(struct host *h, bool quiet)
{
    char state[16];
    uint64_t gen = 0;
    double ts;
    int sv = pick_survivor(h->id, -1);
    if (sv < 0) {
        return;     /* nobody left to ask */
    }
    int r = watch_host_state(sv, h->id, "live", now_s() + LEFT_LIMIT_S, state,
                             sizeof(state), &gen, &ts);
    if (r < 0) {
        return;
    }
    snprintf(h->exit_state, sizeof(h->exit_state), "%s", state);
    h->exit_seen_by = sv;
    if (strcmp(state, "left")) {
        msg("host %d: exited cleanly but host %d's table shows it %s, not left",
            h->id, sv, state);
    } else if (!quiet) {
        msg("host %d: exited; host %d's table shows it left (generation %llu)",
            h->id, sv, (unsigned long long)gen);
    }
}

/*
 * After the run: the host table as the pool file holds it
 * (docs/pool-format.md), which also covers the host that exited last,
 * when no survivor's QMP was left to ask.  Returns the number of entries
 * read into state[] / gen[] (0 if the file is not a pool of version 2).
 */
#define POOL_MAGIC "CXLPOOL"
int read_pool_hosts(const char *pool, int n, unsigned *state, uint64_t *gen)
{
    int fd = open(pool, O_RDONLY | O_CLOEXEC);
    unsigned char hdr[0x50];
    if (fd < 0) {
        return 0;
    }
    uint32_t version = 0, max_hosts = 0, hoff = 0, hsize = 0;
    if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        memcmp(hdr, POOL_MAGIC, 8)) {
        close(fd);
        return 0;
    }
    memcpy(&version, hdr + 0x08, 4);
    memcpy(&max_hosts, hdr + 0x2c, 4);
    memcpy(&hoff, hdr + 0x30, 4);
    memcpy(&hsize, hdr + 0x34, 4);
    if (version != 2 || hsize < 16 || max_hosts > MAX_HOSTS) {
        close(fd);
        return 0;
    }
    int got = 0;
    for (int i = 0; i < n && i < (int)max_hosts; i++) {
        unsigned char e[16];
        if (pread(fd, e, sizeof(e), (off_t)hoff + (off_t)hsize * i) != 16) {
            break;
        }
        uint32_t st;
        memcpy(&st, e, 4);
        memcpy(&gen[i], e + 8, 8);
        state[i] = st;
        got++;
    }
    close(fd);
    return got;
}

const char *pool_state_name(unsigned st)
{
    static const char *const names[] = { "free", "live", "failed", "left" };
    return st < 4 ? names[st] : "?";
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ */
/* qmp subcommand                                                      */

static int unix_connect(const char *path)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sun.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return -1;
    }
    if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Read one line (QMP messages are one JSON object per line). */
static char *read_line_fd(int fd, GString *pending, int timeout_ms)
{
    for (;;) {
        char *nl = pending->len ? memchr(pending->str, '\n', pending->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - pending->str);
            char *line = g_malloc(n + 1);
            memcpy(line, pending->str, n);
            line[n] = '\0';
            if (n && line[n - 1] == '\r') {
                line[n - 1] = '\0';
            }
            g_string_erase(pending, 0, (gssize)(n + 1));
            return line;
        }
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int r = poll(&pf, 1, timeout_ms);
        if (r <= 0) {
            return NULL;
        }
        char tmp[4096];
        ssize_t got = read(fd, tmp, sizeof(tmp));
        if (got <= 0) {
            return NULL;
        }
        g_string_append_len(pending, tmp, (size_t)got);
    }
}

/* Send a command; return the first non-event reply line (or NULL). */
static char *qmp_exchange(int s, GString *pending, const char *cmd)
{
    if (!write_all(s, cmd, strlen(cmd)) || !write_all(s, "\n", 1)) {
        return NULL;
    }
    for (;;) {
        char *line = read_line_fd(s, pending, 10000);
        if (!line || !strstr(line, "\"event\"")) {
            return line;
        }
        g_free(line);
    }
}

int qmp_main(int argc, char **argv)
{
    long host;
    if (argc < 5 || argc > 6 || !parse_int(argv[3], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, "usage: " PROG " qmp WORKDIR I COMMAND ['{ARGUMENTS}']\n"
                "  e.g. " PROG " qmp /tmp/cxlpod-abc 0 query-status\n");
        return EXIT_USAGE;
    }
    char *path = g_strdup_printf("%s/host%ld.qmp", argv[2], host);
    int s = unix_connect(path);
    if (s < 0) {
        die(EXIT_USAGE, "cannot connect to %s: %s (is host %ld running?)", path,
            strerror(errno), host);
    }
    signal(SIGPIPE, SIG_IGN);
    GString *pending = g_string_new(NULL);
    char *greeting = read_line_fd(s, pending, 10000);
    if (!greeting || !strstr(greeting, "\"QMP\"")) {
        die(EXIT_JOBFAIL, "%s: no QMP greeting", path);
    }
    g_free(greeting);
    char *r = qmp_exchange(s, pending, "{\"execute\":\"qmp_capabilities\"}");
    if (!r || !strstr(r, "\"return\"")) {
        die(EXIT_JOBFAIL, "%s: qmp_capabilities failed: %s", path, r ? r : "EOF");
    }
    g_free(r);
    char *cmd;
    if (argc == 6) {
        cmd = g_strdup_printf("{\"execute\":\"%s\",\"arguments\":%s}", argv[4],
                        argv[5]);
    } else {
        cmd = g_strdup_printf("{\"execute\":\"%s\"}", argv[4]);
    }
    r = qmp_exchange(s, pending, cmd);
    if (!r) {
        die(EXIT_JOBFAIL, "%s: no reply to %s", path, argv[4]);
    }
    printf("%s\n", r);
    int status = strstr(r, "\"return\"") ? EXIT_OK : EXIT_JOBFAIL;
    g_free(r);
    g_free(cmd);
    g_string_free(pending, TRUE);
    g_free(path);
    close(s);
    return status;
}

/*
 * QMP: what the survivors see of a killed or exited host (their host
 * table through query-cxl-shm), the pool file's host table after the run,
 * and the `qmp` subcommand.  The client is GIO (a socket connection read
 * line by line, with timeouts) and json-glib (commands and replies).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include "launch.h"

/* what the survivors see: their host table over QMP                   */

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

/* A QMP session with host i (greeting and capabilities done). */
static bool qmp_open(int i, struct qmp *q)
{
    int s = unix_connect(g_hosts[i].hp.qmp);
    if (s < 0 || !qmp_attach(q, s, 2)) {
        return false;
    }
    g_autofree char *why = NULL;
    if (qmp_handshake(q, 2, &why) <= 0) {
        qmp_close(q);
        return false;
    }
    return true;
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
    struct qmp q;
    int ret = -1;
    snprintf(state, n, "?");
    if (!qmp_open(sv, &q)) {
        return -1;
    }
    for (;;) {
        char *r = qmp_exchange(&q, "query-cxl-shm", NULL);
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
        g_usleep(DETECT_POLL_MS * 1000);
    }
    qmp_close(&q);
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

/*
 * Host h's QEMU exited by itself: what a survivor's table says (left).
 * With no survivor left to ask (the last host, or the others' jobs ended
 * while this QEMU was still exiting), what the pool file's table says,
 * which is what a host joining later reads: exit_seen_by is then -1.
 */
void check_clean_exit(struct host *h, const char *pool, bool quiet)
{
    char state[16];
    uint64_t gen = 0;
    double ts;
    int sv = pick_survivor(h->id, -1);
    int r = sv < 0 ? -1 : watch_host_state(sv, h->id, "live",
                                           now_s() + LEFT_LIMIT_S, state,
                                           sizeof(state), &gen, &ts);
    if (r < 0) {
        unsigned st[MAX_HOSTS];
        uint64_t gens[MAX_HOSTS];
        if (read_pool_hosts(pool, h->id + 1, st, gens) != h->id + 1) {
            return;     /* not a pool this launcher can read */
        }
        snprintf(state, sizeof(state), "%s", pool_state_name(st[h->id]));
        gen = gens[h->id];
        sv = -1;
    }
    snprintf(h->exit_state, sizeof(h->exit_state), "%s", state);
    h->exit_seen_by = sv;
    g_autofree char *who = sv < 0 ? g_strdup("the pool file's table")
                                  : g_strdup_printf("host %d's table", sv);
    if (strcmp(state, "left")) {
        msg("host %d: exited cleanly but %s shows it %s, not left", h->id,
            who, state);
    } else if (!quiet) {
        msg("host %d: exited; %s shows it left (generation %llu)", h->id,
            who, (unsigned long long)gen);
    }
}

/*
 * After the run: the host table as the pool file holds it
 * (docs/pool-format.md), which also covers the host that exited last,
 * when no survivor's QMP was left to ask.  Returns the number of entries
 * read into state[] / gen[] (0 if the file is not a pool of version 4).
 */
#define POOL_MAGIC "CXLPOOL"
int read_pool_hosts(const char *pool, int n, unsigned *state, uint64_t *gen)
{
    int fd = open(pool, O_RDONLY | O_CLOEXEC);
    unsigned char hdr[0x60];
    if (fd < 0) {
        return 0;
    }
    uint32_t version = 0, max_hosts = 0, hsize = 0;
    uint64_t hoff = 0;
    if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        memcmp(hdr, POOL_MAGIC, 8)) {
        close(fd);
        return 0;
    }
    memcpy(&version, hdr + 0x08, 4);
    memcpy(&max_hosts, hdr + 0x2c, 4);
    memcpy(&hoff, hdr + 0x50, 8);
    memcpy(&hsize, hdr + 0x58, 4);
    if (version != 4 || hsize < 16 || hsize > 4096 || max_hosts > MAX_HOSTS) {
        close(fd);
        return 0;
    }
    /* the entries asked for in one read: a pod's exits stay O(hosts) */
    int want = MIN(n, (int)max_hosts), got = 0;
    g_autofree unsigned char *t = g_malloc((size_t)hsize * MAX(want, 1));
    ssize_t r = pread(fd, t, (size_t)hsize * want, (off_t)hoff);
    for (int i = 0; r > 0 && i < want && (ssize_t)hsize * (i + 1) <= r; i++) {
        uint32_t st;
        memcpy(&st, t + (size_t)hsize * i, 4);
        memcpy(&gen[i], t + (size_t)hsize * i + 8, 8);
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
/* the client (launch.h: also the events monitor's, launch-events.c)   */

int unix_connect(const char *path)
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

/* Take over the connected socket fd; reads wait at most timeout_s. */
bool qmp_attach(struct qmp *q, int fd, guint timeout_s)
{
    g_autoptr(GSocket) sock = g_socket_new_from_fd(fd, NULL);
    if (!sock) {
        close(fd);
        return false;
    }
    g_socket_set_timeout(sock, timeout_s);
    q->conn = g_socket_connection_factory_create_connection(sock);
    q->reply_s = QMP_REPLY_S;
    q->in = g_data_input_stream_new(
        g_io_stream_get_input_stream(G_IO_STREAM(q->conn)));
    return true;
}

void qmp_close(struct qmp *q)
{
    g_clear_object(&q->in);
    if (q->conn) {
        g_io_stream_close(G_IO_STREAM(q->conn), NULL, NULL);
        g_clear_object(&q->conn);
    }
}

/* One line (QMP messages are one JSON object per line); NULL on EOF,
 * error or after timeout_s without one. */
char *qmp_read_line(struct qmp *q, guint timeout_s)
{
    g_socket_set_timeout(g_socket_connection_get_socket(q->conn), timeout_s);
    gsize n;
    char *line = g_data_input_stream_read_line(q->in, &n, NULL, NULL);
    if (line && n && line[n - 1] == '\r') {
        line[n - 1] = '\0';
    }
    return line;
}

/* Whether a QMP message is an object with this member. */
bool reply_has(const char *line, const char *member)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonNode *root;
    if (!json_parser_load_from_data(parser, line, -1, NULL)) {
        return false;
    }
    root = json_parser_get_root(parser);
    return JSON_NODE_HOLDS_OBJECT(root) &&
           json_object_has_member(json_node_get_object(root), member);
}

/* {"execute": CMD[, "arguments": ARGS]} (json-glib); takes args. */
static char *qmp_command(const char *cmd, JsonNode *args)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "execute");
    json_builder_add_string_value(b, cmd);
    if (args) {
        json_builder_set_member_name(b, "arguments");
        json_builder_add_value(b, args);
    }
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

/* Send a command; return the first non-event reply line (or NULL after
 * q->reply_s without one). */
char *qmp_exchange(struct qmp *q, const char *cmd, JsonNode *args)
{
    g_autofree char *text = qmp_command(cmd, args);
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(q->conn));
    if (!g_output_stream_write_all(out, text, strlen(text), NULL, NULL,
                                   NULL) ||
        !g_output_stream_write_all(out, "\n", 1, NULL, NULL, NULL)) {
        return NULL;
    }
    for (;;) {
        char *line = qmp_read_line(q, q->reply_s);
        if (!line || !reply_has(line, "event")) {
            return line;
        }
        g_free(line);
    }
}

/*
 * The greeting (within greeting_s; 0: no limit) and qmp_capabilities: 1
 * if both went through; else *why (g_free) and 0 when the peer said
 * nothing (EOF, or no line in time), -1 when it said something else.
 */
int qmp_handshake(struct qmp *q, guint greeting_s, char **why)
{
    g_autofree char *g = qmp_read_line(q, greeting_s);
    if (!g || !reply_has(g, "QMP")) {
        *why = g_strdup("no QMP greeting");
        return g ? -1 : 0;
    }
    g_autofree char *r = qmp_exchange(q, "qmp_capabilities", NULL);
    if (!r || !reply_has(r, "return")) {
        *why = g_strdup_printf("qmp_capabilities failed: %s", r ? r : "EOF");
        return r ? -1 : 0;
    }
    return 1;
}

int qmp_main(int argc, char **argv)
{
    long host;
    int nw;
    g_autofree char **w = subcommand_words(argc, argv,
        "WORKDIR I COMMAND ['{ARGUMENTS}']",
        "Send one QMP command to host I of the pod run in WORKDIR and print "
        "the reply;\ne.g. " PROG " qmp /tmp/cxlpod-abc 0 query-status",
        3, 4, &nw);
    if (!w) {
        return EXIT_USAGE;
    }
    if (!parse_int(w[1], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, PROG " qmp: host '%s' is not a number in [0, %d]\n",
                w[1], MAX_HOSTS - 1);
        return EXIT_USAGE;
    }
    JsonNode *args = NULL;
    if (nw == 4) {
        g_autoptr(JsonParser) parser = json_parser_new();
        g_autoptr(GError) err = NULL;
        if (!json_parser_load_from_data(parser, w[3], -1, &err) ||
            !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
            die(EXIT_USAGE, "arguments '%s': not a JSON object%s%s", w[3],
                err ? ": " : "", err ? err->message : "");
        }
        args = json_node_copy(json_parser_get_root(parser));
    }
    char *path = g_strdup_printf("%s/host%ld.qmp", w[0], host);
    int s = unix_connect(path);
    if (s < 0) {
        die(EXIT_USAGE, "cannot connect to %s: %s (is host %ld running?)", path,
            strerror(errno), host);
    }
    signal(SIGPIPE, SIG_IGN);
    struct qmp q;
    if (!qmp_attach(&q, s, 10)) {
        die(EXIT_JOBFAIL, "%s: no QMP greeting", path);
    }
    g_autofree char *why = NULL;
    if (qmp_handshake(&q, 10, &why) <= 0) {
        die(EXIT_JOBFAIL, "%s: %s", path, why);
    }
    char *r = qmp_exchange(&q, w[2], args);
    if (!r) {
        die(EXIT_JOBFAIL, "%s: no reply to %s", path, w[2]);
    }
    printf("%s\n", r);
    int status = reply_has(r, "return") ? EXIT_OK : EXIT_JOBFAIL;
    g_free(r);
    qmp_close(&q);
    g_free(path);
    return status;
}

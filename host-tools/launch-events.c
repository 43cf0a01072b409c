/*
 * The conflict and stale-read logs (--conflict-log, --stale-log): cxl-shm
 * reports each conflicting writeback and each stale read as a QMP event
 * (CXL_SHM_CONFLICT, CXL_SHM_STALE_READ); every QEMU of the pod gets a
 * second QMP monitor for them (WORKDIR/hostI.events, wait=on: QEMU waits
 * until the launcher is connected, so no event goes unheard), a thread per
 * host reads it, and each event becomes one JSON line of the log, in the
 * format the device's own log files had (docs/guest-guide.md, "Reading the
 * conflict report").  One file for all hosts; one lock, whole lines.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <inttypes.h>
#include "launch.h"

#define EVENTS_CONNECT_S 30.0   /* spawn -> QEMU's events socket accepts */
#define EVENTS_JOIN_S 5.0       /* a reader's end after its QEMU's */

/* ------------------------------------------------------------------ */
/* events -> records                                                   */

/* Member @name of @obj as an unsigned 64-bit integer (json-glib keeps a
 * value above INT64_MAX as its two's complement bits). */
static bool member_u64(JsonObject *obj, const char *name, uint64_t *v)
{
    JsonNode *n = json_object_get_member(obj, name);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_INT64) {
        return false;
    }
    *v = (uint64_t)json_node_get_int(n);
    return true;
}

static bool member_i64(JsonObject *obj, const char *name, int64_t *v)
{
    uint64_t u;
    if (!member_u64(obj, name, &u)) {
        return false;
    }
    *v = (int64_t)u;
    return true;
}

/* Member @name of @obj if it is a string, else NULL. */
static const char *member_string(JsonObject *obj, const char *name)
{
    JsonNode *n = json_object_get_member(obj, name);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_STRING) {
        return NULL;
    }
    return json_node_get_string(n);
}

/* Member @name of @obj if it is an object, else NULL. */
static JsonObject *member_object(JsonObject *obj, const char *name)
{
    JsonNode *n = json_object_get_member(obj, name);
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

/* Member @name of @obj if it is a non-empty string of hex digits (it goes
 * into the record as is), else NULL. */
static const char *member_hex(JsonObject *obj, const char *name)
{
    const char *s = member_string(obj, name);
    if (!s || !*s) {
        return NULL;
    }
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isxdigit(*p)) {
            return NULL;
        }
    }
    return s;
}

/* {"host":H,"generation":G,"offset":O,"line":"0x<O>"[,"pc":"0x<pc>"]
 * (H and O are the event's host-id and dpa): what both records begin
 * with */
static bool record_head(GString *j, JsonObject *d, uint64_t line)
{
    uint64_t host, gen, off, pc;
    if (!member_u64(d, "host-id", &host) || host > UINT32_MAX ||
        !member_u64(d, "generation", &gen) ||
        !member_u64(d, "dpa", &off)) {
        return false;
    }
    g_string_append_printf(j, "{\"host\":%" PRIu64 ",\"generation\":%" PRIu64
                           ",\"offset\":%" PRIu64 ",\"line\":\"0x%" PRIx64
                           "\"", host, gen, off,
                           line == UINT64_MAX ? off : line);
    if (json_object_has_member(d, "pc")) {
        if (!member_u64(d, "pc", &pc)) {
            return false;
        }
        g_string_append_printf(j, ",\"pc\":\"0x%" PRIx64 "\"", pc);
    }
    return true;
}

/* ,"@key":"@hex" */
static bool record_hex(GString *j, JsonObject *d, const char *key,
                       const char *member)
{
    const char *hex = member_hex(d, member);
    if (!hex) {
        return false;
    }
    g_string_append_printf(j, ",\"%s\":\"%s\"", key, hex);
    return true;
}

/*
 * The log record (one JSON object, no newline) of a CXL_SHM_CONFLICT or
 * CXL_SHM_STALE_READ event given as its QMP text, and in *log which log
 * takes it; NULL for any other message, or an event without the members
 * the record needs.  time_ns is the event's timestamp (wall clock);
 * "missed" (events the device's rate limit dropped just before this one)
 * only when not 0.
 */
char *event_record(const char *text, enum event_log *log)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GString) j = g_string_new(NULL);
    JsonNode *root;
    JsonObject *ev, *d, *ts;
    const char *name;
    int64_t sec, usec, time_ns, n;
    uint64_t v, missed = 0;

    if (!json_parser_load_from_data(parser, text, -1, NULL)) {
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        return NULL;
    }
    ev = json_node_get_object(root);
    name = member_string(ev, "event");
    d = member_object(ev, "data");
    ts = member_object(ev, "timestamp");
    if (!name || !d || !ts || !member_i64(ts, "seconds", &sec) ||
        !member_i64(ts, "microseconds", &usec) ||
        (json_object_has_member(d, "missed") &&
         !member_u64(d, "missed", &missed))) {
        return NULL;
    }
    time_ns = sec * 1000000000 + usec * 1000;

    if (!strcmp(name, "CXL_SHM_CONFLICT")) {
        if (!record_head(j, d, UINT64_MAX) ||
            !member_u64(d, "lost-mask", &v) ||
            !member_i64(d, "lost-bytes", &n)) {
            return NULL;
        }
        g_string_append_printf(j, ",\"time_ns\":%" PRId64 ",\"lost_mask\":"
                               "\"0x%016" PRIx64 "\",\"lost_bytes\":%" PRId64,
                               time_ns, v, n);
        if (!record_hex(j, d, "base", "base") ||
            !record_hex(j, d, "theirs", "theirs") ||
            !record_hex(j, d, "mine", "mine")) {
            return NULL;
        }
        *log = EVENT_LOG_CONFLICT;
    } else if (!strcmp(name, "CXL_SHM_STALE_READ")) {
        uint64_t line;
        if (!member_u64(d, "line", &line) || !record_head(j, d, line) ||
            !member_i64(d, "size", &n) || !member_u64(d, "value", &v)) {
            return NULL;
        }
        g_string_append_printf(j, ",\"time_ns\":%" PRId64 ",\"size\":%" PRId64
                               ",\"value\":\"0x%" PRIx64 "\"", time_ns, n, v);
        if (!record_hex(j, d, "stale", "stale") ||
            !record_hex(j, d, "current", "current")) {
            return NULL;
        }
        *log = EVENT_LOG_STALE;
    } else {
        return NULL;
    }
    if (missed) {
        g_string_append_printf(j, ",\"missed\":%" PRIu64, missed);
    }
    g_string_append_c(j, '}');
    return g_string_free(g_steal_pointer(&j), FALSE);
}

/* ------------------------------------------------------------------ */
/* the log files                                                       */

static const char *const log_option[] = {
    [EVENT_LOG_CONFLICT] = "--conflict-log",
    [EVENT_LOG_STALE] = "--stale-log",
};

/* The logs of the pod: one lock for both, held for a whole record. */
static struct {
    GMutex lock;
    FILE *fp[EVENT_LOG_N];
    const char *path[EVENT_LOG_N];
    uint64_t records[EVENT_LOG_N];
    int error[EVENT_LOG_N];     /* errno of the first failed write */
    uint64_t unreadable;        /* cxl-shm events without a record */
    char *first_unreadable;     /* the first of them, as QEMU sent it */
} logs;

bool events_wanted(const struct opts *o)
{
    return o->conflict_log || o->stale_log;
}

/* Open (append) the logs asked for; exits with status 2 if one cannot be. */
void events_open_logs(const struct opts *o)
{
    logs.path[EVENT_LOG_CONFLICT] = o->conflict_log;
    logs.path[EVENT_LOG_STALE] = o->stale_log;
    for (int k = 0; k < EVENT_LOG_N; k++) {
        if (logs.path[k] && !logs.fp[k]) {
            logs.fp[k] = fopen(logs.path[k], "ae");
            if (!logs.fp[k]) {
                die(EXIT_USAGE, "%s %s: %s", log_option[k], logs.path[k],
                    strerror(errno));
            }
        }
    }
}

/* One record as one whole line, written at once (one stdio call: the
 * main thread's fflush(NULL) before a spawn cannot split it). */
static void log_write(enum event_log k, const char *record)
{
    g_mutex_lock(&logs.lock);
    if (logs.fp[k]) {
        fprintf(logs.fp[k], "%s\n", record);
        if (fflush(logs.fp[k]) != 0 && !logs.error[k]) {
            logs.error[k] = errno ? errno : EIO;
        }
        logs.records[k]++;
    }
    g_mutex_unlock(&logs.lock);
}

/* A cxl-shm event that event_record() could not read: said at the end
 * (a device whose events changed shape would otherwise leave the logs
 * silently short). */
static void log_unreadable(const char *line)
{
    g_mutex_lock(&logs.lock);
    if (!logs.unreadable++) {
        logs.first_unreadable = g_strdup(line);
    }
    g_mutex_unlock(&logs.lock);
}

/* After the readers: close the logs, say what they hold. */
void events_close_logs(bool quiet)
{
    if (logs.unreadable) {
        msg("%llu cxl-shm event%s could not be made into log records "
            "(a member missing or not of its type); the first: %.400s",
            (unsigned long long)logs.unreadable,
            logs.unreadable == 1 ? "" : "s", logs.first_unreadable);
        g_clear_pointer(&logs.first_unreadable, g_free);
        logs.unreadable = 0;
    }
    for (int k = 0; k < EVENT_LOG_N; k++) {
        if (!logs.fp[k]) {
            continue;
        }
        if (fclose(logs.fp[k]) != 0 && !logs.error[k]) {
            logs.error[k] = errno;
        }
        logs.fp[k] = NULL;
        if (logs.error[k]) {
            msg("%s %s: write failed: %s; records are missing", log_option[k],
                logs.path[k], strerror(logs.error[k]));
        } else if (!quiet) {
            msg("%s: %llu record%s in %s", log_option[k] + 2,
                (unsigned long long)logs.records[k],
                logs.records[k] == 1 ? "" : "s", logs.path[k]);
        }
    }
}

/* ------------------------------------------------------------------ */
/* a reader per host                                                   */

struct events_reader {
    char *path;             /* WORKDIR/hostI.events */
    GThread *thread;
    GMutex lock;            /* stop, fd */
    bool stop;              /* the launcher is done with this run */
    int fd;                 /* the connected socket (-1: none yet) */
    int done;               /* the thread has ended (atomic) */
    char *error;            /* why it could not listen (atomic pointer) */
};

/* Connect to QEMU's events socket (it appears once QEMU has parsed its
 * command line): -1 and *why on the deadline, an error or a stop. */
static int reader_connect(struct events_reader *rd, char **why)
{
    double deadline = now_s() + EVENTS_CONNECT_S;
    for (;;) {
        int fd = unix_connect(rd->path);
        if (fd >= 0) {
            return fd;
        }
        int e = errno;
        g_mutex_lock(&rd->lock);
        bool stop = rd->stop;
        g_mutex_unlock(&rd->lock);
        if (stop) {
            return -1;
        }
        if (e != ENOENT && e != ECONNREFUSED) {
            *why = g_strdup_printf("cannot connect to its events monitor "
                                   "%s: %s", rd->path, strerror(e));
            return -1;
        }
        if (now_s() > deadline) {
            *why = g_strdup_printf("cannot connect to its events monitor "
                                   "%s within %.0f s (%s): QEMU did not "
                                   "open it", rd->path, EVENTS_CONNECT_S,
                                   strerror(e));
            return -1;
        }
        g_usleep(POLL_MS * 1000);
    }
}

static gpointer reader_main(gpointer data)
{
    struct events_reader *rd = data;
    struct qmp q = { 0 };
    char *why = NULL;
    int fd = reader_connect(rd, &why);

    if (fd >= 0) {
        g_mutex_lock(&rd->lock);
        if (!rd->stop) {
            rd->fd = fd;
        }
        g_mutex_unlock(&rd->lock);
        if (rd->fd < 0) {
            close(fd);
            fd = -1;
        }
    }
    /*
     * QEMU greets once its monitors exist (after the memory backends,
     * before the devices), then waits for the capabilities; an EOF means
     * it exited, which the launcher reports for itself.  No time limit:
     * the reader ends with its QEMU.
     */
    if (fd >= 0 && qmp_attach(&q, fcntl(fd, F_DUPFD_CLOEXEC, 0), 0)) {
        q.reply_s = 0;
        g_autofree char *hs = NULL;
        int r = qmp_handshake(&q, 0, &hs);
        if (r > 0) {
            char *line;
            while ((line = qmp_read_line(&q, 0)) != NULL) {
                enum event_log k;
                g_autofree char *rec = event_record(line, &k);
                if (rec) {
                    log_write(k, rec);
                } else if (strstr(line, "\"CXL_SHM_CONFLICT\"") ||
                           strstr(line, "\"CXL_SHM_STALE_READ\"")) {
                    log_unreadable(line);
                }
                g_free(line);
            }
        } else if (r < 0) {     /* an answer, but not QMP's */
            why = g_strdup_printf("its events monitor %s: %s", rd->path, hs);
        }
        qmp_close(&q);
    }
    if (why) {
        g_atomic_pointer_set(&rd->error, why);
    }
    g_atomic_int_set(&rd->done, 1);
    return NULL;
}

/*
 * Host h's QEMU was just spawned: listen to its events (a thread that
 * connects, with a deadline, and reads until the QEMU has gone).
 */
void events_start(struct host *h, const struct opts *o)
{
    if (!events_wanted(o)) {
        return;
    }
    events_stop(h);
    struct events_reader *rd = g_new0(struct events_reader, 1);
    rd->path = g_strdup(h->hp.events);
    rd->fd = -1;
    g_mutex_init(&rd->lock);
    rd->thread = g_thread_new("cxlpod-events", reader_main, rd);
    h->events = rd;
}

/* Why host h's events cannot be listened to (NULL: they can, so far). */
const char *events_failed(const struct host *h)
{
    return h->events ? g_atomic_pointer_get(&h->events->error) : NULL;
}

/*
 * Done with host h's current run: its reader reads to EOF (its QEMU has
 * gone, or is going) and is joined.  Bounded: a reader still blocked
 * EVENTS_JOIN_S later has its socket shut down.
 */
void events_stop(struct host *h)
{
    struct events_reader *rd = h->events;
    if (!rd) {
        return;
    }
    g_mutex_lock(&rd->lock);
    rd->stop = true;
    g_mutex_unlock(&rd->lock);
    double deadline = now_s() + EVENTS_JOIN_S;
    while (!g_atomic_int_get(&rd->done) && now_s() < deadline) {
        g_usleep(POLL_MS * 1000 / 4);
    }
    if (!g_atomic_int_get(&rd->done)) {
        g_mutex_lock(&rd->lock);
        if (rd->fd >= 0) {
            shutdown(rd->fd, SHUT_RDWR);
        }
        g_mutex_unlock(&rd->lock);
        msg("host %d: its events monitor was still open %.0f s after the "
            "launcher was done with it; closed", h->id, EVENTS_JOIN_S);
    }
    g_thread_join(rd->thread);
    if (rd->fd >= 0) {
        close(rd->fd);
    }
    g_mutex_clear(&rd->lock);
    g_free(g_atomic_pointer_get(&rd->error));
    g_free(rd->path);
    g_free(rd);
    h->events = NULL;
}

/* Every reader, at the end of the pod (or on the way out). */
void events_stop_all(void)
{
    for (int i = 0; i < g_nhosts; i++) {
        events_stop(&g_hosts[i]);
    }
}

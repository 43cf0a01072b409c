/*
 * cxlpod-pool serve: the pool as a service for hosts on other machines,
 * over UCX (UCP active messages), with the device's own line engine
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The protocol is hw-cxl/cxl-shm-wire.h's (docs/interfaces.md, "Remote
 * pool protocol"); docs/pool-tool.md says how to run it.  One thread: UCX
 * progress, then the requests that arrived, one at a time, each to its
 * end or to "busy".  For each joined remote host the service holds the
 * host's liveness byte (an OFD lock on its own open of the file, so local
 * hosts see it live exactly as they see a local QEMU) and a line engine
 * view of its own (the host's twin and a scratch image, sparse), so a
 * remote writeback takes the same locks, undo records, versions and
 * conflict checks as a local one.  Locks are only ever tried: a lock
 * another host keeps past a short bound makes the request "busy" and the
 * client tries again; the service never waits for a local host.
 */

#include "pool.h"
#include <poll.h>
#include <signal.h>
#include <netdb.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <ucp/api/ucp.h>
#include "cxl-shm-remote.h"

#define SERVE_DEFAULT_PORT      17600
#define SERVE_BUSY_US           200     /* a request's bound on busy locks */
#define SERVE_FLOCK_US          100000  /* the pool's flock, at most */
#define SERVE_MAX_CONNS         1024
#define SERVE_MAX_UNJOINED      16      /* connections yet to join */
#define SERVE_IDLE_US           10000000 /* left, and silent, at most */
#define SERVE_REFUSED_US        100000  /* a refusal's reply, to be sent */
/* A JOIN request, exactly; and the largest request (a full WRITEBACK) */
#define SERVE_JOIN_LEN          (sizeof(CXLShmWireReq) + CXLSHM_WIRE_MAC)
#define SERVE_MAX_LEN           (sizeof(CXLShmWireReq) + \
                                 CXLSHM_WIRE_MAX_LINES * sizeof(CXLShmWireLine))

typedef struct Slot Slot;

typedef struct Conn {
    ucp_ep_h ep;
    char peer[INET6_ADDRSTRLEN + 8];
    uint8_t nonce[CXLSHM_WIRE_NONCE];
    Slot *slot;                 /* joined: the one host it acts for */
    int64_t last_us;            /* last message from the client */
    int64_t accept_us;          /* when it was accepted */
    int64_t dead_us;            /* when it was found dead */
    bool ever_joined;           /* a JOIN succeeded on it once */
    unsigned in_flight;         /* sends not completed yet */
    const char *dead;           /* why the connection is to be dropped */
    bool closing;
    void *close_req;
} Conn;

struct Slot {
    uint32_t host;
    uint64_t generation;
    int lock_fd;                /* holds the host's liveness byte */
    Conn *conn;
    CXLShmLines lines;
    uint64_t nc_size;           /* the non-coherent area */
    uint8_t *image;             /* scratch: the line being written back */
    uint8_t *twin;              /* the host's lines as it last had them */
    uint64_t *seen;
    size_t seen_len;
};

typedef struct Msg {
    Conn *conn;
    size_t len;
    uint8_t data[];
} Msg;

typedef struct Serve {
    Pool p;
    const char *path;
    uint8_t *data;
    uint64_t size;
    uint64_t coherent;
    uint8_t key[CXLSHM_WIRE_KEY];
    uint32_t hb_ms;
    uint32_t join_ms;           /* from connect to join, at most */
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int efd;
    GPtrArray *conns;           /* Conn, open or closing */
    GQueue conn_reqs;           /* ucp_conn_request_h to accept */
    GQueue inbox;               /* Msg */
    Slot *slots[CXLPOOL_MAX_HOSTS];
} Serve;

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig G_GNUC_UNUSED)
{
    serve_stop = 1;
}

G_GNUC_PRINTF(1, 2) static void slog(const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *ts = g_date_time_format(now, "%H:%M:%S.%f");
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "%.12s cxlpod-pool serve: %s\n", ts, msg);
}

static int64_t now_us(void)
{
    return g_get_monotonic_time();
}

/* The pool's flock, tried for SERVE_FLOCK_US at most (never held long) */
static bool flock_bounded(Serve *S)
{
    int64_t end = now_us() + SERVE_FLOCK_US;

    do {
        if (cxlpool_flock(S->p.fd, LOCK_EX | LOCK_NB) == 0) {
            return true;
        }
        g_usleep(1000);
    } while (now_us() < end);
    return false;
}

/* ---- keys ---- */

char *pool_key_path(const char *pool)
{
    return g_strdup_printf("%s.key", pool);
}

int pool_key_make(const char *path, uid_t uid, gid_t gid)
{
    uint8_t key[CXLSHM_WIRE_KEY];
    char hex[2 * CXLSHM_WIRE_KEY + 2];
    size_t i;
    int fd;

    if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
        return -errno;
    }
    for (i = 0; i < sizeof(key); i++) {
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    }
    hex[2 * sizeof(key)] = '\n';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0) {
        int e = errno;

        close(fd);
        unlink(path);
        return -e;
    }
    if (write(fd, hex, 2 * sizeof(key) + 1) != 2 * sizeof(key) + 1 ||
        fsync(fd) < 0) {
        int e = errno;

        close(fd);
        unlink(path);
        return -e;
    }
    close(fd);
    return 0;
}

/*
 * The key file: 64 hex digits, owned by the service's user and readable
 * by it only; checked on the open file (never a path checked, then
 * opened) and read through it
 */
static bool key_load(const char *path, uint8_t *key)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *via = NULL;
    struct stat st;
    bool ok;
    /* O_NONBLOCK: a FIFO in its place is refused, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0) {
        fail("serve: no key file '%s' (%s): make it with 'cxlpod-pool key "
             "POOL' (cxlpod-pool create makes one beside every new pool)",
             path, strerror(errno));
        return false;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        fail("serve: key file '%s' is not a regular file", path);
        close(fd);
        return false;
    }
    if (st.st_uid != geteuid()) {
        fail("serve: key file '%s' is owned by uid %u, not by the service's "
             "user (uid %u): chown it", path, (unsigned)st.st_uid,
             (unsigned)geteuid());
        close(fd);
        return false;
    }
    if (st.st_mode & 077) {
        fail("serve: key file '%s' has mode 0%o: it must be readable by "
             "its owner only (chmod 600)", path, st.st_mode & 0777);
        close(fd);
        return false;
    }
    /* the very file checked: its open descriptor */
    via = g_strdup_printf("/proc/self/fd/%d", fd);
    ok = cxl_shm_remote_read_key(via, key, &err);
    close(fd);
    if (!ok) {
        fail("serve: key file '%s': %s", path, err->message);
        return false;
    }
    return true;
}

int cmd_key(int argc, char **argv)
{
    g_autofree char *path = NULL;
    int ret;

    if (argc != 2 || argv[1][0] == '-') {
        fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr,
                "usage: cxlpod-pool key POOL\n\nMake the pod's key, "
                "POOL.key (mode 0600), if it is missing: the secret a "
                "remote host proves it holds to 'cxlpod-pool serve'.\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    path = pool_key_path(argv[1]);
    ret = pool_key_make(path, (uid_t)-1, (gid_t)-1);
    if (ret == -EEXIST) {
        printf("key '%s' exists: kept\n", path);
        return 0;
    }
    if (ret < 0) {
        fail("cannot make key '%s': %s", path, strerror(-ret));
        return 1;
    }
    printf("made key '%s'\n", path);
    return 0;
}

/* ---- replies and connections ---- */

typedef struct Sending {
    Conn *c;
    void *buf;
} Sending;

static void send_done(void *request, ucs_status_t status G_GNUC_UNUSED,
                      void *user_data)
{
    Sending *sd = user_data;

    sd->c->in_flight--;
    g_free(sd->buf);
    g_free(sd);
    ucp_request_free(request);
}

static void am_send(Conn *c, unsigned id, void *buf, size_t len)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_AM_SEND_FLAG_EAGER,
        .cb.send = send_done,
    };
    Sending *sd;
    ucs_status_ptr_t sp;

    if ((c->dead && strcmp(c->dead, "refused")) || c->closing) {
        g_free(buf);
        return;
    }
    sd = g_new(Sending, 1);
    sd->c = c;
    sd->buf = buf;
    param.user_data = sd;
    sp = ucp_am_send_nbx(c->ep, id, NULL, 0, buf, len, &param);
    if (UCS_PTR_IS_ERR(sp)) {
        g_free(buf);
        g_free(sd);
        c->dead = "send failed";
    } else if (sp == NULL) {
        g_free(buf);
        g_free(sd);
    } else {
        c->in_flight++;
    }
}

static void reply(Conn *c, const CXLShmWireReq *rq, int status,
                  uint32_t count, uint64_t v0, uint64_t v1,
                  const void *payload, size_t plen)
{
    uint8_t *buf = g_malloc(sizeof(CXLShmWireReply) + plen);
    CXLShmWireReply r = {
        .id = rq->id, .op = rq->op, .status = status, .count = count,
        .value0 = v0, .value1 = v1,
    };

    memcpy(buf, &r, sizeof(r));
    if (plen) {
        memcpy(buf + sizeof(r), payload, plen);
    }
    am_send(c, CXLSHM_AM_REPLY, buf, sizeof(r) + plen);
}

static void conn_close(Serve *S G_GNUC_UNUSED, Conn *c, bool force)
{
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0,
    };
    ucs_status_ptr_t sp;

    if (c->closing) {
        return;
    }
    c->closing = true;
    sp = ucp_ep_close_nbx(c->ep, &p);
    c->close_req = UCS_PTR_IS_PTR(sp) ? sp : NULL;
}

static void ep_error(void *arg, ucp_ep_h ep G_GNUC_UNUSED,
                     ucs_status_t status)
{
    Conn *c = arg;

    if (!c->dead) {
        c->dead = ucs_status_string(status);
    }
}

static void conn_handler(ucp_conn_request_h req, void *arg)
{
    Serve *S = arg;

    g_queue_push_tail(&S->conn_reqs, req);
}

static void peer_name(ucp_conn_request_h req, char *buf, size_t len)
{
    ucp_conn_request_attr_t a = {
        .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR,
    };
    char host[INET6_ADDRSTRLEN], port[8];

    snprintf(buf, len, "?");
    if (ucp_conn_request_query(req, &a) == UCS_OK &&
        getnameinfo((struct sockaddr *)&a.client_address,
                    sizeof(a.client_address), host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        snprintf(buf, len, "%s:%s", host, port);
    }
}

/*
 * Draw a fresh nonce for the connection's next JOIN and send it (a
 * HELLO); no randomness: the connection is dropped, never a weak nonce
 */
static void new_nonce(Conn *c, bool send)
{
    CXLShmWireHello *h;

    if (getrandom(c->nonce, sizeof(c->nonce), 0) != sizeof(c->nonce)) {
        c->dead = "no random nonce";
        return;
    }
    if (!send) {
        return;
    }
    h = g_new0(CXLShmWireHello, 1);
    h->magic = CXLSHM_WIRE_MAGIC;
    h->version = CXLSHM_WIRE_VERSION;
    memcpy(h->nonce, c->nonce, sizeof(h->nonce));
    am_send(c, CXLSHM_AM_HELLO, h, sizeof(*h));
}

static void send_hello(Conn *c)
{
    new_nonce(c, true);
}

static void conn_accept(Serve *S, ucp_conn_request_h req)
{
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler.cb = ep_error,
    };
    Conn *c = g_new0(Conn, 1);
    guint i, unjoined = 0;

    peer_name(req, c->peer, sizeof(c->peer));
    for (i = 0; i < S->conns->len; i++) {
        Conn *o = g_ptr_array_index(S->conns, i);

        unjoined += !o->closing && !o->ever_joined;
    }
    if (S->conns->len >= SERVE_MAX_CONNS ||
        unjoined >= SERVE_MAX_UNJOINED) {
        slog("refused a connection from %s: %u connections already, %u "
             "of them yet to join", c->peer, S->conns->len, unjoined);
        ucp_listener_reject(S->listener, req);
        g_free(c);
        return;
    }
    ep.err_handler.arg = c;
    if (ucp_ep_create(S->worker, &ep, &c->ep) != UCS_OK) {
        slog("cannot accept a connection from %s", c->peer);
        g_free(c);
        return;
    }
    c->last_us = c->accept_us = now_us();
    g_ptr_array_add(S->conns, c);
    send_hello(c);
}

static Conn *conn_of(Serve *S, ucp_ep_h ep)
{
    guint i;

    for (i = 0; i < S->conns->len; i++) {
        Conn *c = g_ptr_array_index(S->conns, i);

        if (c->ep == ep && !c->closing) {
            return c;
        }
    }
    return NULL;
}

static ucs_status_t am_req(void *arg, const void *header G_GNUC_UNUSED,
                           size_t hlen G_GNUC_UNUSED,
                           void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    Serve *S = arg;
    Conn *c = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ?
              conn_of(S, param->reply_ep) : NULL;
    Msg *m;

    if (!c) {
        return UCS_OK;          /* not from a connection of ours */
    }
    if (c->dead) {
        return UCS_OK;          /* to be dropped: nothing more is read */
    }
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        c->dead = "sent a rendezvous message (the protocol is eager only)";
        return UCS_OK;
    }
    /* sized before it is copied: an unjoined peer can send a JOIN only */
    if (!c->ever_joined ? len != SERVE_JOIN_LEN : len > SERVE_MAX_LEN) {
        slog("dropped %s: a message of %zu bytes %s", c->peer, len,
             c->ever_joined ? "(larger than any request)" :
             "before a join (not a JOIN request)");
        c->dead = "message of a bad size";
        return UCS_OK;
    }
    c->last_us = now_us();
    m = g_malloc(sizeof(*m) + len);
    m->conn = c;
    m->len = len;
    memcpy(m->data, data, len);
    g_queue_push_tail(&S->inbox, m);
    return UCS_OK;
}

/* ---- host slots ---- */

static bool serve_owner_alive(void *opaque, uint32_t host, uint64_t gen)
{
    Serve *S = opaque;
    CXLPoolHost *e;

    if (host >= S->p.nr_hosts) {
        return false;
    }
    e = &S->p.hosts[host];
    return qatomic_read(&e->state) == CXLPOOL_HOST_LIVE &&
           CXLPOOL_TAG_GEN(qatomic_read(&e->generation)) == gen &&
           cxlpool_host_locked(S->p.fd, host);
}

static void *anon(size_t len)
{
    void *p = mmap(NULL, MAX(len, 4096), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

static void slot_free(Slot *s)
{
    if (s->image) {
        munmap(s->image, MAX(s->nc_size, 4096));
    }
    if (s->twin) {
        munmap(s->twin, MAX(s->nc_size, 4096));
    }
    if (s->seen) {
        munmap(s->seen, MAX(s->seen_len, 4096));
    }
    g_free(s->lines.runs);
    if (s->lock_fd >= 0) {
        close(s->lock_fd);      /* drops the liveness byte */
    }
    g_free(s);
}

/* The line engine's view for host @s (pool, metadata, its own twin) */
static bool slot_lines(Serve *S, Slot *s)
{
    CXLShmLines *l = &s->lines;

    s->nc_size = S->size - S->coherent;
    s->image = anon(s->nc_size);
    s->twin = anon(s->nc_size);
    s->seen_len = s->nc_size / CXLSHM_LOCK_PAGE * 8;
    s->seen = anon(s->seen_len);
    if (!s->image || !s->twin || !s->seen) {
        return false;
    }
    l->pool = S->data;
    l->image = s->image;
    l->twin = s->twin;
    l->coherent_size = S->coherent;
    l->size = S->size;
    l->locks = (uint64_t *)(S->p.meta + CXLPOOL_LINELOCK_OFFSET);
    l->undo = pool_tail(&S->p, S->p.lo.undo);
    l->max_hosts = S->p.nr_hosts;
    l->versions = (uint64_t *)(S->p.meta + CXLPOOL_VERSIONS_OFFSET);
    l->seen = s->seen;
    l->runs = g_new0(CXLShmRun, CXLSHM_NR_LOCKS);
    l->turns = pool_tail(&S->p, S->p.lo.turns);
    l->turn_words = S->p.lo.turn_words;
    /* the line engine copies a turn entry into an array of the largest */
    assert(l->turn_words >= 2 && l->turn_words <= CXLSHM_TURN_WORDS_MAX);
    l->host_id = s->host;
    l->generation = s->generation;
    l->owner_alive = serve_owner_alive;
    l->opaque = S;
    return true;
}

/*
 * Take over the line locks an ended life of @host (any generation but
 * @keep_gen) left held, rolling back its unfinished writes: the
 * engine's recover_own with a view of that host
 */
static void recover_host(Serve *S, uint32_t host, uint64_t keep_gen)
{
    CXLShmLines l = {
        .pool = S->data,
        .coherent_size = S->coherent,
        .size = S->size,
        .locks = (uint64_t *)(S->p.meta + CXLPOOL_LINELOCK_OFFSET),
        .undo = pool_tail(&S->p, S->p.lo.undo),
        .max_hosts = S->p.nr_hosts,
        .versions = (uint64_t *)(S->p.meta + CXLPOOL_VERSIONS_OFFSET),
        .turns = pool_tail(&S->p, S->p.lo.turns),
        .turn_words = S->p.lo.turn_words,
        .host_id = host,
        .generation = keep_gen,
        .owner_alive = serve_owner_alive,
        .opaque = S,
    };

    cxl_shm_lines_recover_own(&l);
}

static void reap(Serve *S, bool recover)
{
    uint64_t reaped[DIV_ROUND_UP(CXLPOOL_MAX_HOSTS, 64)] = { 0 };
    uint32_t i;

    if (!cxlpool_reap(S->p.fd, S->p.hosts, S->p.nr_hosts, -1, reaped)) {
        return;
    }
    for (i = 0; i < S->p.nr_hosts; i++) {
        if (reaped[i / 64] & (1ULL << (i % 64))) {
            uint64_t gen = qatomic_read(&S->p.hosts[i].generation);

            slog("host %u (generation %" PRIu64 ") found dead: failed", i,
                 gen);
            if (recover) {
                recover_host(S, i, gen + 1);
            }
        }
    }
}

static void stat_add(Serve *S, Slot *s, int k, uint64_t v)
{
    uint64_t *p = &S->p.hosts[s->host].stats[k];

    if (v) {
        qatomic_set(p, qatomic_read(p) + v);
    }
}

/*
 * Host @s is gone without leaving (its connection dropped, its heartbeat
 * stopped, the service stops): failed exactly as a killed local host
 * is, its entry failed, its liveness byte free, its locks taken over
 */
static void slot_fail(Serve *S, Slot *s, const char *why)
{
    CXLPoolHost *e = &S->p.hosts[s->host];
    bool locked = flock_bounded(S);

    qatomic_cmpxchg(&e->state, CXLPOOL_HOST_LIVE, CXLPOOL_HOST_FAILED);
    close(s->lock_fd);
    s->lock_fd = -1;
    if (locked) {
        cxlpool_flock(S->p.fd, LOCK_UN);
    }
    recover_host(S, s->host, s->generation + 1);
    slog("host %u (generation %" PRIu64 ", %s) failed: %s", s->host,
         s->generation, s->conn ? s->conn->peer : "?", why);
    S->slots[s->host] = NULL;
    if (s->conn) {
        s->conn->slot = NULL;
    }
    slot_free(s);
}

static void slot_leave(Serve *S, Slot *s)
{
    CXLPoolHost *e = &S->p.hosts[s->host];
    bool locked = flock_bounded(S);

    e->leave_time_ns = g_get_real_time() * 1000;
    smp_wmb();  /* the leave time is valid once the state says "left" */
    qatomic_set(&e->state, CXLPOOL_HOST_LEFT);
    close(s->lock_fd);
    s->lock_fd = -1;
    if (locked) {
        cxlpool_flock(S->p.fd, LOCK_UN);
    }
    slog("host %u (generation %" PRIu64 ", %s) left", s->host,
         s->generation, s->conn->peer);
    S->slots[s->host] = NULL;
    s->conn->slot = NULL;
    slot_free(s);
}

/* ---- requests ---- */

static bool mac_ok(Serve *S, Conn *c, uint32_t slot, const uint8_t *mac)
{
    uint8_t want[CXLSHM_WIRE_MAC];
    gsize len = sizeof(want);
    uint8_t slot_le[4] = { slot, slot >> 8, slot >> 16, slot >> 24 };
    uint8_t diff = 0;
    GHmac *h;
    size_t i;

    h = g_hmac_new(G_CHECKSUM_SHA256, S->key, sizeof(S->key));
    g_hmac_update(h, (const guchar *)CXLSHM_WIRE_AUTH_LABEL,
                  strlen(CXLSHM_WIRE_AUTH_LABEL));
    g_hmac_update(h, c->nonce, sizeof(c->nonce));
    g_hmac_update(h, slot_le, sizeof(slot_le));
    g_hmac_get_digest(h, want, &len);
    g_hmac_unref(h);
    for (i = 0; i < sizeof(want); i++) {
        diff |= want[i] ^ mac[i];   /* constant time */
    }
    return diff == 0;
}

static void do_join(Serve *S, Conn *c, const CXLShmWireReq *rq,
                    const uint8_t *payload, size_t plen)
{
    CXLShmWireJoined j = {
        .size = S->size, .coherent_size = S->coherent,
        .max_hosts = S->p.nr_hosts, .heartbeat_ms = S->hb_ms,
    };
    CXLPoolHost *e;
    struct stat st;
    Slot *s;
    int fd;

    if (c->slot) {
        /* already joined: its nonce was used up, so no proof could pass */
        reply(c, rq, CXLSHM_WIRE_EPERM, 0, 0, 0, NULL, 0);
        return;
    }
    if (plen != CXLSHM_WIRE_MAC || rq->arg0 > UINT32_MAX ||
        !mac_ok(S, c, rq->arg0, payload)) {
        slog("refused %s: no proof of the pod's key (slot %" PRIu64 ")",
             c->peer, rq->arg0);
        reply(c, rq, CXLSHM_WIRE_EACCES, 0, 0, 0, NULL, 0);
        c->dead = "refused";
        return;
    }
    /*
     * the nonce proves one join only: a join that is answered with an
     * error gets a new one (a HELLO, before the reply), a joined
     * connection gets its next one when it leaves
     */
    new_nonce(c, false);
    c->accept_us = now_us();    /* proven: the join time again, if busy */
    if (c->dead) {
        return;
    }
    if (rq->arg0 >= S->p.nr_hosts) {
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_EINVAL, 0, 0, 0, NULL, 0);
        return;
    }
    if (S->slots[rq->arg0]) {
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_EBUSY, 0, 0, 0, NULL, 0);
        return;
    }
    /* an open of its own: the OFD lock of this slot is this fd's */
    fd = open(S->path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_ino != S->p.st.st_ino ||
        st.st_dev != S->p.st.st_dev) {
        slog("cannot open pool '%s' again for host %" PRIu64 ": %s",
             S->path, rq->arg0, fd < 0 ? strerror(errno) : "replaced");
        if (fd >= 0) {
            close(fd);
        }
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_EIO, 0, 0, 0, NULL, 0);
        return;
    }
    /* tried once: a local host keeping it makes the join "busy" */
    if (cxlpool_flock(S->p.fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_BUSY, 0, 0, 0, NULL, 0);
        return;
    }
    if (qemu_lock_fd(fd, CXLPOOL_HOST_LOCK(rq->arg0), 1, true) < 0) {
        cxlpool_flock(S->p.fd, LOCK_UN);
        close(fd);
        slog("%s asked for host %" PRIu64 ", which is in use", c->peer,
             rq->arg0);
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_EBUSY, 0, 0, 0, NULL, 0);
        return;
    }
    s = g_new0(Slot, 1);
    s->host = rq->arg0;
    s->lock_fd = fd;
    reap(S, false);
    /* the device's claim (hw-cxl/cxl-shm-pool.c pool_claim_slot()) */
    e = &S->p.hosts[s->host];
    s->generation = qatomic_read(&e->generation) + 1;
    memset(e->stats, 0, sizeof(e->stats));
    e->pid = getpid();
    e->join_time_ns = g_get_real_time() * 1000;
    e->leave_time_ns = 0;
    qatomic_set(&e->generation, s->generation);
    smp_wmb();  /* other hosts see the new generation once they see "live" */
    qatomic_set(&e->state, CXLPOOL_HOST_LIVE);
    cxlpool_flock(S->p.fd, LOCK_UN);
    if (!slot_lines(S, s)) {
        slog("no memory for host %u's lines", s->host);
        s->conn = c;
        S->slots[s->host] = s;
        c->slot = s;
        slot_fail(S, s, "no memory");
        send_hello(c);
        reply(c, rq, CXLSHM_WIRE_EIO, 0, 0, 0, NULL, 0);
        return;
    }
    cxl_shm_lines_recover_own(&s->lines);
    s->conn = c;
    c->slot = s;
    c->ever_joined = true;
    S->slots[s->host] = s;
    slog("host %u joined from %s, generation %" PRIu64, s->host, c->peer,
         s->generation);
    reply(c, rq, CXLSHM_WIRE_OK, 0, s->generation, 0, &j, sizeof(j));
}

static void do_writeback(Serve *S, Conn *c, const CXLShmWireReq *rq,
                         const uint8_t *payload, size_t plen)
{
    Slot *s = c->slot;
    CXLShmLineCount n = { 0 };
    const CXLShmWireLine *lines = (const CXLShmWireLine *)payload;
    int64_t end;
    uint32_t i, k;

    if (rq->count == 0 || rq->count > CXLSHM_WIRE_MAX_LINES ||
        plen != (size_t)rq->count * sizeof(CXLShmWireLine)) {
        stat_add(S, s, CXLSHM_STAT_ERRORS, 1);
        reply(c, rq, CXLSHM_WIRE_EINVAL, 0, 0, 0, NULL, 0);
        return;
    }
    /* all checked before any is written: an error writes nothing */
    for (i = 0; i < rq->count; i++) {
        uint64_t off = lines[i].offset;

        if (off % CXLSHM_LINE || off < S->coherent ||
            off > S->size - CXLSHM_LINE) {
            stat_add(S, s, CXLSHM_STAT_ERRORS, 1);
            reply(c, rq, CXLSHM_WIRE_EINVAL, i, 0, 0, NULL, 0);
            return;
        }
    }
    end = now_us() + SERVE_BUSY_US;
    for (i = 0; i < rq->count; i++) {
        uint64_t off = lines[i].offset, mask = lines[i].mask;
        uint8_t *img = s->image + (off - S->coherent);
        const uint8_t *tw = s->twin + (off - S->coherent);

        if (!mask) {
            continue;           /* a clean line */
        }
        for (k = 0; k < CXLSHM_LINE; k++) {
            img[k] = (mask >> k) & 1 ? lines[i].data[k] : tw[k];
        }
        while (!cxl_shm_lines_one(&s->lines, CXLSHM_LINE_WRITEBACK, off,
                                  true, NULL, &n)) {
            if (now_us() >= end) {
                goto busy;
            }
            sched_yield();
        }
    }
    stat_add(S, s, CXLSHM_STAT_WB_OPS, 1);
    stat_add(S, s, CXLSHM_STAT_WB_LINES, n.written);
    stat_add(S, s, CXLSHM_STAT_CONFLICTS, n.conflicts);
    reply(c, rq, CXLSHM_WIRE_OK, rq->count, n.written, n.conflicts, NULL, 0);
    return;

busy:
    stat_add(S, s, CXLSHM_STAT_WB_LINES, n.written);
    stat_add(S, s, CXLSHM_STAT_CONFLICTS, n.conflicts);
    reply(c, rq, CXLSHM_WIRE_BUSY, i, n.written, n.conflicts, NULL, 0);
}

static void do_fetch(Serve *S, Conn *c, const CXLShmWireReq *rq)
{
    Slot *s = c->slot;
    uint64_t off = rq->offset, len = rq->count, end, at, nc;
    CXLShmLineCount n = { 0 };
    g_autofree uint8_t *buf = NULL;
    int64_t until;

    if (len == 0 || len % CXLSHM_LINE || len > CXLSHM_WIRE_MAX_FETCH ||
        off % CXLSHM_LINE || off >= S->size || len > S->size - off) {
        stat_add(S, s, CXLSHM_STAT_ERRORS, 1);
        reply(c, rq, CXLSHM_WIRE_EINVAL, 0, 0, 0, NULL, 0);
        return;
    }
    end = off + len;
    buf = g_malloc(len);
    if (off < S->coherent) {
        /* the coherent window: the pool itself */
        memcpy(buf, S->data + off, MIN(end, S->coherent) - off);
    }
    nc = MAX(off, S->coherent);
    at = nc;
    until = now_us() + SERVE_BUSY_US;
    while (at < end) {
        at = cxl_shm_lines_op(&s->lines, CXLSHM_LINE_DROP, at, end - at, &n);
        if (at < end) {
            if (now_us() >= until) {
                stat_add(S, s, CXLSHM_STAT_INV_LINES, n.fetched);
                reply(c, rq, CXLSHM_WIRE_BUSY, 0, 0, 0, NULL, 0);
                return;
            }
            sched_yield();
        }
    }
    if (nc < end) {
        memcpy(buf + (nc - off), s->twin + (nc - S->coherent), end - nc);
    }
    stat_add(S, s, CXLSHM_STAT_INV_OPS, 1);
    stat_add(S, s, CXLSHM_STAT_INV_LINES, n.fetched);
    reply(c, rq, CXLSHM_WIRE_OK, len, 0, 0, buf, len);
}

static void do_atomic(Serve *S, Conn *c, const CXLShmWireReq *rq)
{
    Slot *s = c->slot;
    CXLShmLineLock h;
    uint64_t *p, old;
    int64_t until;

    if (rq->offset % 8 || rq->offset >= S->coherent ||
        rq->offset > S->coherent - 8 || rq->flags < CXLSHM_ATOMIC_FETCH_ADD ||
        rq->flags > CXLSHM_ATOMIC_STORE) {
        stat_add(S, s, CXLSHM_STAT_ERRORS, 1);
        reply(c, rq, CXLSHM_WIRE_EINVAL, 0, 0, 0, NULL, 0);
        return;
    }
    /* the line's lock too, as mode=timed's atomics take it */
    until = now_us() + SERVE_BUSY_US;
    while (!cxl_shm_lines_trylock(&s->lines, rq->offset, &h, true)) {
        if (now_us() >= until) {
            reply(c, rq, CXLSHM_WIRE_BUSY, 0, 0, 0, NULL, 0);
            return;
        }
        sched_yield();
    }
    p = (uint64_t *)(S->data + rq->offset);
    switch (rq->flags) {
    case CXLSHM_ATOMIC_FETCH_ADD:
        old = qatomic_fetch_add(p, rq->arg0);
        break;
    case CXLSHM_ATOMIC_CMPXCHG:
        old = qatomic_cmpxchg(p, rq->arg0, rq->arg1);
        break;
    case CXLSHM_ATOMIC_XCHG:
        old = qatomic_xchg(p, rq->arg0);
        break;
    case CXLSHM_ATOMIC_STORE: {
        /* a remote host's store: its bytes (mask arg1) of the word */
        uint64_t seen;

        old = qatomic_read(p);
        while ((seen = qatomic_cmpxchg(p, old, (old & ~rq->arg1) |
                                       (rq->arg0 & rq->arg1))) != old) {
            old = seen;
        }
        break;
    }
    default:
        old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
        break;
    }
    cxl_shm_lines_unlock(&s->lines, &h);
    stat_add(S, s, CXLSHM_STAT_NATIVE_OPS, 1);
    reply(c, rq, CXLSHM_WIRE_OK, 0, old, 0, NULL, 0);
}

static void do_hosts(Serve *S, Conn *c, const CXLShmWireReq *rq)
{
    size_t len = (size_t)S->p.nr_hosts * sizeof(CXLPoolHost);
    g_autofree CXLPoolHost *t = g_malloc(len);
    uint32_t i;

    /* the device's refresh: live hosts whose byte is free are failed */
    if (cxlpool_flock(S->p.fd, LOCK_EX | LOCK_NB) == 0) {
        reap(S, true);
        cxlpool_flock(S->p.fd, LOCK_UN);
    }
    for (i = 0; i < S->p.nr_hosts; i++) {
        memcpy(&t[i], &S->p.hosts[i], sizeof(t[i]));
    }
    reply(c, rq, CXLSHM_WIRE_OK, S->p.nr_hosts, 0, 0, t, len);
}

static void handle(Serve *S, Msg *m)
{
    Conn *c = m->conn;
    CXLShmWireReq rq;
    const uint8_t *payload = m->data + sizeof(rq);
    size_t plen;

    if (c->dead || c->closing) {
        return;
    }
    if (m->len < sizeof(rq)) {
        slog("dropped %s: a message of %zu bytes", c->peer, m->len);
        c->dead = "malformed message";
        return;
    }
    memcpy(&rq, m->data, sizeof(rq));
    plen = m->len - sizeof(rq);
    if (rq.magic != CXLSHM_WIRE_MAGIC) {
        slog("dropped %s: not the cxlpod pool protocol", c->peer);
        c->dead = "bad magic";
        return;
    }
    if (rq.op == CXLSHM_REQ_JOIN) {
        do_join(S, c, &rq, payload, plen);
        return;
    }
    if (!c->slot) {
        slog("refused %s: request %u before a join", c->peer, rq.op);
        reply(c, &rq, CXLSHM_WIRE_EACCES, 0, 0, 0, NULL, 0);
        c->dead = "refused";
        return;
    }
    /* every request but WRITEBACK is its header only */
    if (rq.op != CXLSHM_REQ_WRITEBACK && plen) {
        stat_add(S, c->slot, CXLSHM_STAT_ERRORS, 1);
        reply(c, &rq, CXLSHM_WIRE_EPROTO, 0, 0, 0, NULL, 0);
        return;
    }
    switch (rq.op) {
    case CXLSHM_REQ_HEARTBEAT:
        reply(c, &rq, CXLSHM_WIRE_OK, 0, 0, 0, NULL, 0);
        break;
    case CXLSHM_REQ_LEAVE:
        slot_leave(S, c->slot);
        send_hello(c);          /* the nonce of a rejoin */
        reply(c, &rq, CXLSHM_WIRE_OK, 0, 0, 0, NULL, 0);
        break;
    case CXLSHM_REQ_WRITEBACK:
        do_writeback(S, c, &rq, payload, plen);
        break;
    case CXLSHM_REQ_FETCH:
        do_fetch(S, c, &rq);
        break;
    case CXLSHM_REQ_ATOMIC:
        do_atomic(S, c, &rq);
        break;
    case CXLSHM_REQ_HOSTS:
        do_hosts(S, c, &rq);
        break;
    default:
        stat_add(S, c->slot, CXLSHM_STAT_ERRORS, 1);
        reply(c, &rq, CXLSHM_WIRE_EPROTO, 0, 0, 0, NULL, 0);
        break;
    }
}

/* Drop dead and silent connections, failing the host of each */
static void sweep(Serve *S)
{
    int64_t now = now_us();
    guint i;

    for (i = 0; i < S->conns->len; i++) {
        Conn *c = g_ptr_array_index(S->conns, i);

        if (c->closing) {
            if (c->in_flight == 0 && (!c->close_req ||
                ucp_request_check_status(c->close_req) != UCS_INPROGRESS)) {
                if (c->close_req) {
                    ucp_request_free(c->close_req);
                }
                g_ptr_array_remove_index_fast(S->conns, i--);
                g_free(c);
            }
            continue;
        }
        if (!c->dead && c->slot &&
            now - c->last_us > (int64_t)S->hb_ms * 1000) {
            c->dead = "no heartbeat";
        }
        if (!c->dead && !c->ever_joined &&
            now - c->accept_us > (int64_t)S->join_ms * 1000) {
            c->dead = "no join in time";
        }
        if (!c->dead && c->ever_joined && !c->slot &&
            now - c->last_us > (int64_t)SERVE_IDLE_US) {
            c->dead = "left, and idle";
        }
        if (c->dead) {
            if (!c->dead_us) {
                c->dead_us = now;
            }
            if (c->slot) {
                g_autofree char *why = g_strdup_printf(
                    "%s (heartbeat timeout %u ms)", c->dead, S->hb_ms);

                slot_fail(S, c->slot, why);
            }
            /*
             * a refused client gets its reply (for a short while at
             * most) before the connection is closed, by force
             */
            if (!strcmp(c->dead, "refused") && c->in_flight &&
                now - c->dead_us < SERVE_REFUSED_US) {
                continue;
            }
            conn_close(S, c, true);
        }
    }
}

/* ---- setup ---- */

static bool addr_is_any(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
               htonl(INADDR_ANY);
    }
    return sa->sa_family == AF_INET6 &&
           IN6_IS_ADDR_UNSPECIFIED(
               &((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* ADDR:PORT, [V6]:PORT or ADDR (the default port) */
static bool parse_listen(const char *s, char **host, uint16_t *port)
{
    const char *colon;
    char *end;
    unsigned long p = SERVE_DEFAULT_PORT;

    if (s[0] == '[') {
        const char *rb = strchr(s, ']');

        if (!rb) {
            return false;
        }
        *host = g_strndup(s + 1, rb - s - 1);
        colon = rb[1] == ':' ? rb + 1 : NULL;
        if (rb[1] && !colon) {
            g_free(*host);
            return false;
        }
    } else {
        colon = strrchr(s, ':');
        if (colon && strchr(s, ':') != colon) {
            colon = NULL;       /* a bare IPv6 address */
            *host = g_strdup(s);
        } else {
            *host = colon ? g_strndup(s, colon - s) : g_strdup(s);
        }
    }
    if (colon) {
        p = strtoul(colon + 1, &end, 10);
        if (!colon[1] || *end || p > 65535) {
            g_free(*host);
            return false;
        }
    }
    *port = p;
    return **host != 0;
}

static bool serve_listen(Serve *S, const char *listen, bool named)
{
    g_autofree char *host = NULL;
    struct addrinfo hints = {
        .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV,
    };
    struct addrinfo *ai = NULL;
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                      UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = CXLSHM_AM_REQ,
        .cb = am_req,
        .arg = S,
    };
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                      UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .conn_handler.cb = conn_handler,
        .conn_handler.arg = S,
    };
    ucp_listener_attr_t la = {
        .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR,
    };
    char port_s[8], hbuf[INET6_ADDRSTRLEN], pbuf[8];
    ucs_status_t st;
    uint16_t port;
    bool loop;
    char dev[IF_NAMESIZE + 1];

    if (!parse_listen(listen, &host, &port)) {
        fail("serve: --listen '%s': not ADDR:PORT", listen);
        return false;
    }
    snprintf(port_s, sizeof(port_s), "%u", port);
    if (getaddrinfo(host, port_s, &hints, &ai) != 0) {
        fail("serve: --listen '%s': cannot resolve '%s'", listen, host);
        return false;
    }
    loop = cxl_shm_remote_is_loopback(ai->ai_addr);
    if (!loop && (addr_is_any(ai->ai_addr) || !named ||
                  !g_hostname_is_ip_address(host))) {
        fail("serve: refusing to listen on '%s', which is not a loopback "
             "address: name the one address to serve on with --listen "
             "ADDR:PORT (an IP address, not a wildcard or a host name)",
             host);
        freeaddrinfo(ai);
        return false;
    }
    st = cxl_shm_remote_ucx_start(cxl_shm_remote_netdev(ai->ai_addr, true,
                                                        dev, sizeof(dev)) ?
                                  dev : NULL, &S->ctx, &S->worker, &S->efd);
    if (st == UCS_OK) {
        st = ucp_worker_set_am_recv_handler(S->worker, &am);
    }
    if (st == UCS_OK && S->efd < 0) {
        st = UCS_ERR_UNSUPPORTED;       /* the loop sleeps on it */
    }
    if (st == UCS_OK) {
        lp.sockaddr.addr = ai->ai_addr;
        lp.sockaddr.addrlen = ai->ai_addrlen;
        st = ucp_listener_create(S->worker, &lp, &S->listener);
    }
    freeaddrinfo(ai);
    if (st != UCS_OK) {
        fail("serve: cannot listen on %s: %s", listen,
             ucs_status_string(st));
        return false;
    }
    if (ucp_listener_query(S->listener, &la) != UCS_OK ||
        getnameinfo((struct sockaddr *)&la.sockaddr, sizeof(la.sockaddr),
                    hbuf, sizeof(hbuf), pbuf, sizeof(pbuf),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fail("serve: cannot tell the address it listens on");
        return false;
    }
    printf("listening on %s%s%s:%s\n", strchr(hbuf, ':') ? "[" : "", hbuf,
           strchr(hbuf, ':') ? "]" : "", pbuf);
    fflush(stdout);
    return true;
}

int cmd_serve(int argc, char **argv)
{
    g_autofree char *listen = NULL;
    g_autofree char *key_path = NULL;
    int hb_ms = 1000, join_ms = 5000;
    gboolean spin = FALSE;
    GOptionEntry entries[] = {
        { "listen", 'l', 0, G_OPTION_ARG_STRING, &listen,
          "address and port to serve on (default 127.0.0.1:"
          stringify(SERVE_DEFAULT_PORT) "; port 0: any free one).  Only "
          "loopback unless this names another address explicitly (an IP "
          "address, never a wildcard)", "ADDR:PORT" },
        { "key", 'k', 0, G_OPTION_ARG_FILENAME, &key_path,
          "the pod's key (default POOL.key)", "FILE" },
        { "heartbeat-timeout", 't', 0, G_OPTION_ARG_INT, &hb_ms,
          "fail a remote host silent this long (default 1000)", "MS" },
        { "join-timeout", 'j', 0, G_OPTION_ARG_INT, &join_ms,
          "drop a connection that has not joined this long after it "
          "connected (default 5000)", "MS" },
        { "spin", 's', 0, G_OPTION_ARG_NONE, &spin,
          "poll UCX without sleeping (lower latency, a core busy)", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - serve the pool to hosts on other machines over UCX");
    g_autoptr(GError) err = NULL;
    Serve *S;
    struct sigaction sa = { .sa_handler = on_signal };
    guint i;
    int ret = 0;

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_description(ctx,
        "A remote host must prove it holds the pod's key (POOL.key, made by "
        "'cxlpod-pool create' or 'cxlpod-pool key') before any request is "
        "served.\nUCX_TLS defaults to tcp and UCX_NET_DEVICES to the "
        "interface of the listen address, unless set.\nSee docs/pool-tool.md.");
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fail("serve: %s", err->message);
        return 2;
    }
    if (argc != 2 || hb_ms < 10 || hb_ms > 600000 || join_ms < 100 ||
        join_ms > 600000) {
        fail("serve: usage: cxlpod-pool serve [--listen ADDR:PORT] "
             "[--key FILE] [--heartbeat-timeout MS (10..600000)] "
             "[--join-timeout MS (100..600000)] [--spin] POOL");
        return 2;
    }
    S = g_new0(Serve, 1);
    S->path = argv[1];
    S->hb_ms = hb_ms;
    S->join_ms = join_ms;
    S->efd = -1;
    S->conns = g_ptr_array_new();
    if (!key_path) {
        key_path = pool_key_path(S->path);
    }
    if (!key_load(key_path, S->key)) {
        return 1;
    }
    ret = pool_open(&S->p, S->path, true);
    if (ret) {
        return ret;
    }
    S->size = S->p.hdr->data_size;
    S->coherent = S->p.hdr->coherent_size;
    S->data = mmap(NULL, S->size, PROT_READ | PROT_WRITE, MAP_SHARED,
                   S->p.fd, CXLPOOL_META_SIZE);
    if (S->data == MAP_FAILED) {
        fail("serve: cannot map the data of pool '%s': %s", S->path,
             strerror(errno));
        return 2;
    }
    /* pool_open() took the flock; remote hosts dead since the last run */
    reap(S, true);
    cxlpool_flock(S->p.fd, LOCK_UN);
    if (!serve_listen(S, listen ? listen : "127.0.0.1", listen != NULL)) {
        return 1;
    }
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    slog("serving pool '%s' (%" PRIu64 " MiB, coherent %" PRIu64 " MiB, "
         "%u hosts), heartbeat timeout %u ms", S->path, S->size >> 20,
         S->coherent >> 20, S->p.nr_hosts, S->hb_ms);

    while (!serve_stop) {
        Msg *m;

        while (ucp_worker_progress(S->worker)) {
            /* drain */
        }
        while (!g_queue_is_empty(&S->conn_reqs)) {
            conn_accept(S, g_queue_pop_head(&S->conn_reqs));
        }
        while ((m = g_queue_pop_head(&S->inbox))) {
            handle(S, m);
            g_free(m);
            while (ucp_worker_progress(S->worker)) {
                /* send the reply now */
            }
        }
        sweep(S);
        if (!spin && g_queue_is_empty(&S->inbox) &&
            g_queue_is_empty(&S->conn_reqs) &&
            ucp_worker_arm(S->worker) == UCS_OK) {
            struct pollfd pfd = { .fd = S->efd, .events = POLLIN };

            poll(&pfd, 1, MAX(1, MIN(50, (int)S->hb_ms / 4)));
        }
    }

    slog("stopping: the remote hosts still joined are failed");
    for (i = 0; i < CXLPOOL_MAX_HOSTS; i++) {
        if (S->slots[i]) {
            slot_fail(S, S->slots[i], "the service stopped");
        }
    }
    for (i = 0; i < S->conns->len; i++) {
        conn_close(S, g_ptr_array_index(S->conns, i), true);
    }
    for (i = 0; i < 100 && S->conns->len; i++) {
        ucp_worker_progress(S->worker);
        sweep(S);
    }
    ucp_listener_destroy(S->listener);
    ucp_worker_destroy(S->worker);
    ucp_cleanup(S->ctx);
    munmap(S->data, S->size);
    pool_close(&S->p);
    return 0;
}

/*
 * cxl-shm: client of a remote pool (`cxlpod-pool serve`) over UCX
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * See cxl-shm-remote.h; the protocol is cxl-shm-wire.h's.  UCP active
 * messages, always eager (no rendezvous to drive), with the reply flag
 * so that the service answers on this endpoint.
 */

#include "qemu/osdep.h"
#include <fcntl.h>
#include <netdb.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <ucp/api/ucp.h>
#include "cxl-shm-remote.h"

#define REMOTE_TIMEOUT_MS       5000

/* docs/interfaces.md, section 3, gives these sizes */
G_STATIC_ASSERT(sizeof(CXLShmWireHello) == 48);
G_STATIC_ASSERT(sizeof(CXLShmWireReq) == 48);
G_STATIC_ASSERT(sizeof(CXLShmWireReply) == 32);
G_STATIC_ASSERT(sizeof(CXLShmWireLine) == 80);
G_STATIC_ASSERT(sizeof(CXLShmWireJoined) == 24);
#define REMOTE_ERROR            g_quark_from_static_string("cxl-shm-remote")

struct CXLShmRemote {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    int efd;
    uint8_t key[CXLSHM_WIRE_KEY];
    size_t key_len;
    bool have_nonce;
    uint8_t nonce[CXLSHM_WIRE_NONCE];
    CXLShmRemoteReq *join_req;  /* a JOIN waiting for the nonce */
    uint32_t join_slot;
    GHashTable *pending;        /* id -> CXLShmRemoteReq */
    uint64_t next_id;
    char *error;                /* set once the connection is lost */
    bool joined;
    CXLShmWireJoined geo;
    uint32_t timeout_ms;
    int64_t last_send_us;
    CXLShmRemoteReq hb;
};

const char *cxl_shm_remote_status_name(int status)
{
    switch (status) {
    case CXLSHM_REMOTE_PENDING:
        return "pending";
    case CXLSHM_WIRE_OK:
        return "ok";
    case CXLSHM_WIRE_BUSY:
        return "busy";
    case CXLSHM_WIRE_EINVAL:
        return "invalid request";
    case CXLSHM_WIRE_EACCES:
        return "refused: wrong key";
    case CXLSHM_WIRE_EPERM:
        return "not allowed";
    case CXLSHM_WIRE_EBUSY:
        return "slot in use";
    case CXLSHM_WIRE_EPROTO:
        return "protocol error";
    case CXLSHM_WIRE_EIO:
        return "service error";
    case CXLSHM_WIRE_LOST:
        return "connection lost";
    case CXLSHM_WIRE_TIMEOUT:
        return "timed out";
    }
    return "unknown status";
}

static int64_t now_us(void)
{
    return g_get_monotonic_time();
}

static void req_complete(CXLShmRemoteReq *req, int status)
{
    req->status = status;
}

static gboolean fail_one(gpointer key G_GNUC_UNUSED, gpointer value,
                         gpointer opaque)
{
    req_complete(value, GPOINTER_TO_INT(opaque));
    return TRUE;
}

/* The connection is gone: every pending request completes with LOST */
static void remote_lost(CXLShmRemote *r, const char *why)
{
    if (!r->error) {
        r->error = g_strdup(why);
    }
    g_hash_table_foreach_remove(r->pending, fail_one,
                                GINT_TO_POINTER(CXLSHM_WIRE_LOST));
    if (r->join_req) {
        req_complete(r->join_req, CXLSHM_WIRE_LOST);
        r->join_req = NULL;
    }
    r->joined = false;
}

static void ep_error(void *arg, ucp_ep_h ep G_GNUC_UNUSED,
                     ucs_status_t status)
{
    CXLShmRemote *r = arg;
    g_autofree char *why = g_strdup_printf("connection to the pool service "
                                           "lost: %s",
                                           ucs_status_string(status));

    remote_lost(r, why);
}

static ucs_status_t am_hello(void *arg, const void *header G_GNUC_UNUSED,
                             size_t hlen G_GNUC_UNUSED,
                             void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    CXLShmRemote *r = arg;
    const CXLShmWireHello *h = data;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        len != sizeof(*h) || h->magic != CXLSHM_WIRE_MAGIC ||
        h->version != CXLSHM_WIRE_VERSION) {
        remote_lost(r, "the pool service speaks another protocol");
        return UCS_OK;
    }
    memcpy(r->nonce, h->nonce, sizeof(r->nonce));
    r->have_nonce = true;
    return UCS_OK;
}

static ucs_status_t am_reply(void *arg, const void *header G_GNUC_UNUSED,
                             size_t hlen G_GNUC_UNUSED,
                             void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    CXLShmRemote *r = arg;
    CXLShmWireReply rep;
    CXLShmRemoteReq *req;
    size_t plen;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        len < sizeof(rep)) {
        remote_lost(r, "malformed reply from the pool service");
        return UCS_OK;
    }
    memcpy(&rep, data, sizeof(rep));
    req = g_hash_table_lookup(r->pending, &rep.id);
    if (!req) {
        return UCS_OK;          /* timed out already */
    }
    g_hash_table_remove(r->pending, &rep.id);
    plen = len - sizeof(rep);
    if (rep.op != req->op) {
        req_complete(req, CXLSHM_WIRE_EPROTO);
        remote_lost(r, "the pool service answered a request with the reply "
                    "of another kind");
        return UCS_OK;
    }
    req->count = rep.count;
    req->value0 = rep.value0;
    req->value1 = rep.value1;
    req->got = 0;
    if (plen && req->buf) {
        req->got = MIN(plen, req->len);
        memcpy(req->buf, (uint8_t *)data + sizeof(rep), req->got);
    }
    if (rep.op == CXLSHM_REQ_JOIN && rep.status == CXLSHM_WIRE_OK) {
        if (plen != sizeof(r->geo)) {
            /* joined without a geometry: no use, and not the protocol */
            req_complete(req, CXLSHM_WIRE_EPROTO);
            remote_lost(r, "the pool service's JOIN reply has no geometry");
            return UCS_OK;
        }
        memcpy(&r->geo, (uint8_t *)data + sizeof(rep), sizeof(r->geo));
        r->joined = true;
    }
    if (rep.op == CXLSHM_REQ_LEAVE) {
        r->joined = false;
    }
    req_complete(req, rep.status);
    return UCS_OK;
}

static void send_done(void *request, ucs_status_t status G_GNUC_UNUSED,
                      void *user_data)
{
    g_free(user_data);
    ucp_request_free(request);
}

/* Send one request (header and payload); false if it cannot go */
static bool send_req(CXLShmRemote *r, CXLShmWireReq *hdr,
                     const void *payload, size_t plen, CXLShmRemoteReq *req)
{
    size_t len = sizeof(*hdr) + plen;
    uint8_t *buf;
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY,
        .cb.send = send_done,
    };
    ucs_status_ptr_t sp;

    req->status = CXLSHM_REMOTE_PENDING;
    req->got = 0;
    if (r->error || !r->ep) {
        req_complete(req, CXLSHM_WIRE_LOST);
        return false;
    }
    hdr->magic = CXLSHM_WIRE_MAGIC;
    hdr->id = ++r->next_id;
    buf = g_malloc(len);
    memcpy(buf, hdr, sizeof(*hdr));
    if (plen) {
        memcpy(buf + sizeof(*hdr), payload, plen);
    }
    param.user_data = buf;
    sp = ucp_am_send_nbx(r->ep, CXLSHM_AM_REQ, NULL, 0, buf, len, &param);
    if (UCS_PTR_IS_ERR(sp)) {
        g_free(buf);
        remote_lost(r, ucs_status_string(UCS_PTR_STATUS(sp)));
        req_complete(req, CXLSHM_WIRE_LOST);
        return false;
    }
    if (sp == NULL) {
        g_free(buf);            /* done already: no callback */
    }
    req->id = hdr->id;
    req->op = hdr->op;
    req->deadline_us = now_us() + (int64_t)r->timeout_ms * 1000;
    g_hash_table_insert(r->pending, &req->id, req);
    r->last_send_us = now_us();
    return true;
}

static void send_join(CXLShmRemote *r)
{
    CXLShmRemoteReq *req = r->join_req;
    CXLShmWireReq hdr = { .op = CXLSHM_REQ_JOIN, .arg0 = r->join_slot };
    uint8_t mac[CXLSHM_WIRE_MAC];
    gsize mac_len = sizeof(mac);
    uint8_t slot_le[4];
    GHmac *h;

    r->join_req = NULL;
    slot_le[0] = r->join_slot;
    slot_le[1] = r->join_slot >> 8;
    slot_le[2] = r->join_slot >> 16;
    slot_le[3] = r->join_slot >> 24;
    h = g_hmac_new(G_CHECKSUM_SHA256, r->key, r->key_len);
    g_hmac_update(h, (const guchar *)CXLSHM_WIRE_AUTH_LABEL,
                  strlen(CXLSHM_WIRE_AUTH_LABEL));
    g_hmac_update(h, r->nonce, sizeof(r->nonce));
    g_hmac_update(h, slot_le, sizeof(slot_le));
    g_hmac_get_digest(h, mac, &mac_len);
    g_hmac_unref(h);
    /* a nonce proves one join: the next comes in a HELLO of its own */
    r->have_nonce = false;
    send_req(r, &hdr, mac, sizeof(mac), req);
}

bool cxl_shm_remote_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return false;
}

/* Does @a (an interface's address) hold the same IP address as @b? */
static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    if (!a || a->sa_family != b->sa_family) {
        return false;
    }
    if (a->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    }
    return a->sa_family == AF_INET6 &&
           !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                   &((const struct sockaddr_in6 *)b)->sin6_addr,
                   sizeof(struct in6_addr));
}

bool cxl_shm_remote_netdev(const struct sockaddr *sa, bool local,
                           char *buf, size_t len)
{
    struct sockaddr_storage me;
    socklen_t melen = sizeof(me);
    const struct sockaddr *want = sa;
    struct ifaddrs *ifs, *i;
    bool found = false;

    if (cxl_shm_remote_is_loopback(sa)) {
        return g_strlcpy(buf, "lo", len) < len;
    }
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
        return false;
    }
    if (!local) {
        /* the address a datagram to @sa would leave from: nothing is sent */
        int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        bool ok = fd >= 0 &&
                  connect(fd, sa, sa->sa_family == AF_INET ?
                          sizeof(struct sockaddr_in) :
                          sizeof(struct sockaddr_in6)) == 0 &&
                  getsockname(fd, (struct sockaddr *)&me, &melen) == 0;

        if (fd >= 0) {
            close(fd);
        }
        if (!ok) {
            return false;
        }
        want = (const struct sockaddr *)&me;
    }
    if (getifaddrs(&ifs) < 0) {
        return false;
    }
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (same_ip(i->ifa_addr, want)) {
            found = g_strlcpy(buf, i->ifa_name, len) < len;
        }
    }
    freeifaddrs(ifs);
    return found;
}

ucs_status_t cxl_shm_remote_ucx_start(const char *netdev, ucp_context_h *ctx,
                                      ucp_worker_h *worker, int *efd)
{
    ucp_config_t *cfg;
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
    };
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    ucs_status_t st;

    *ctx = NULL;
    *worker = NULL;
    *efd = -1;
    st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        return st;
    }
    if (!getenv("UCX_TLS")) {
        ucp_config_modify(cfg, "TLS", "tcp");
    }
    if (!getenv("UCX_NET_DEVICES") && netdev) {
        ucp_config_modify(cfg, "NET_DEVICES", netdev);
    }
    st = ucp_init(&params, cfg, ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        *ctx = NULL;
        return st;
    }
    st = ucp_worker_create(*ctx, &wp, worker);
    if (st != UCS_OK) {
        *worker = NULL;
        return st;
    }
    if (ucp_worker_get_efd(*worker, efd) != UCS_OK) {
        *efd = -1;
    }
    return UCS_OK;
}

CXLShmRemote *cxl_shm_remote_new(const char *addr, uint16_t port,
                                 const uint8_t *key, size_t key_len,
                                 uint32_t timeout_ms, GError **errp)
{
    CXLShmRemote *r;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    char port_s[8], dev[IF_NAMESIZE + 1];
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                      UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG,
    };
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
                      UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler.cb = ep_error,
    };
    ucs_status_t st;
    int ret;

    if (key_len > sizeof(r->key)) {
        g_set_error(errp, REMOTE_ERROR, 0,
                    "key of %zu bytes (at most %zu)", key_len,
                    sizeof(r->key));
        return NULL;
    }
    snprintf(port_s, sizeof(port_s), "%u", port);
    ret = getaddrinfo(addr, port_s, &hints, &ai);
    if (ret) {
        g_set_error(errp, REMOTE_ERROR, 0,
                    "cannot resolve '%s': %s", addr, gai_strerror(ret));
        return NULL;
    }
    r = g_new0(CXLShmRemote, 1);
    r->efd = -1;
    memcpy(r->key, key, key_len);
    r->key_len = key_len;
    r->timeout_ms = timeout_ms ? timeout_ms : REMOTE_TIMEOUT_MS;
    r->pending = g_hash_table_new(g_int64_hash, g_int64_equal);
    r->hb.status = CXLSHM_WIRE_OK;

    st = cxl_shm_remote_ucx_start(cxl_shm_remote_netdev(ai->ai_addr, false,
                                                        dev, sizeof(dev)) ?
                                  dev : NULL, &r->ctx, &r->worker, &r->efd);
    if (st != UCS_OK) {
        goto fail;
    }
    am.id = CXLSHM_AM_HELLO;
    am.cb = am_hello;
    am.arg = r;
    st = ucp_worker_set_am_recv_handler(r->worker, &am);
    if (st != UCS_OK) {
        goto fail;
    }
    am.id = CXLSHM_AM_REPLY;
    am.cb = am_reply;
    st = ucp_worker_set_am_recv_handler(r->worker, &am);
    if (st != UCS_OK) {
        goto fail;
    }
    ep.sockaddr.addr = ai->ai_addr;
    ep.sockaddr.addrlen = ai->ai_addrlen;
    ep.err_handler.arg = r;
    st = ucp_ep_create(r->worker, &ep, &r->ep);
    if (st != UCS_OK) {
        r->ep = NULL;
        goto fail;
    }
    freeaddrinfo(ai);
    r->last_send_us = now_us();
    return r;

fail:
    g_set_error(errp, REMOTE_ERROR, 0,
                "cannot connect to the pool service at %s:%u: %s", addr,
                port, ucs_status_string(st));
    freeaddrinfo(ai);
    cxl_shm_remote_free(r);
    return NULL;
}

/* The connection is lost (@why) and its endpoint closed by force */
static void remote_abort(CXLShmRemote *r, const char *why)
{
    ucp_ep_h ep = r->ep;

    remote_lost(r, why);
    r->ep = NULL;
    if (ep) {
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags = UCP_EP_CLOSE_FLAG_FORCE,
        };
        ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &p);
        int i;

        /* a forced close completes locally within a few progress calls */
        for (i = 0; i < 1000 && UCS_PTR_IS_PTR(sp) &&
             ucp_request_check_status(sp) == UCS_INPROGRESS; i++) {
            ucp_worker_progress(r->worker);
        }
        if (UCS_PTR_IS_PTR(sp)) {
            ucp_request_free(sp);
        }
    }
}

void cxl_shm_remote_free(CXLShmRemote *r)
{
    if (!r) {
        return;
    }
    remote_abort(r, "closed");
    if (r->worker) {
        ucp_worker_destroy(r->worker);
    }
    if (r->ctx) {
        ucp_cleanup(r->ctx);
    }
    g_hash_table_destroy(r->pending);
    g_free(r->error);
    g_free(r);
}

bool cxl_shm_remote_read_key(const char *path, uint8_t *key, GError **errp)
{
    /* the hex digits, a newline, some slack; a key file is no bigger */
    char text[4 * CXLSHM_WIRE_KEY + 1];
    struct stat st;
    ssize_t len;
    size_t i;
    bool ok = false;
    /* O_NONBLOCK: a FIFO or a device in its place is refused, not waited */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0) {
        g_set_error(errp, REMOTE_ERROR, 0, "cannot open key file '%s': %s",
                    path, g_strerror(errno));
        return false;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        g_set_error(errp, REMOTE_ERROR, 0,
                    "key file '%s' is not a regular file", path);
        close(fd);
        return false;
    }
    do {
        len = read(fd, text, sizeof(text) - 1);
    } while (len < 0 && errno == EINTR);
    close(fd);
    if (len < 0) {
        g_set_error(errp, REMOTE_ERROR, 0, "cannot read key file '%s': %s",
                    path, g_strerror(errno));
        return false;
    }
    text[len] = 0;
    g_strchomp(text);
    if (strlen(text) != 2 * CXLSHM_WIRE_KEY) {
        goto bad;
    }
    for (i = 0; i < CXLSHM_WIRE_KEY; i++) {
        int hi = g_ascii_xdigit_value(text[2 * i]);
        int lo = g_ascii_xdigit_value(text[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            goto bad;
        }
        key[i] = hi << 4 | lo;
    }
    ok = true;
bad:
    if (!ok) {
        g_set_error(errp, REMOTE_ERROR, 0,
                    "key file '%s' is not %d hex digits", path,
                    2 * CXLSHM_WIRE_KEY);
    }
    explicit_bzero(text, sizeof(text));
    return ok;
}

int cxl_shm_remote_fd(CXLShmRemote *r)
{
    return r->efd;
}

bool cxl_shm_remote_arm(CXLShmRemote *r)
{
    return r->efd >= 0 && ucp_worker_arm(r->worker) == UCS_OK;
}

const char *cxl_shm_remote_error(CXLShmRemote *r)
{
    return r->error;
}

const CXLShmWireJoined *cxl_shm_remote_geometry(CXLShmRemote *r)
{
    return &r->geo;
}

static void earliest(gpointer key G_GNUC_UNUSED, gpointer value,
                     gpointer opaque)
{
    const CXLShmRemoteReq *req = value;
    int64_t *due = opaque;

    *due = MIN(*due, req->deadline_us);
}

int cxl_shm_remote_timeout_ms(CXLShmRemote *r)
{
    int64_t due = INT64_MAX, now = now_us();

    if (r->error) {
        return -1;
    }
    g_hash_table_foreach(r->pending, earliest, &due);
    if (r->join_req) {
        due = MIN(due, r->join_req->deadline_us);
    }
    if (r->joined) {
        due = MIN(due, r->last_send_us + (int64_t)r->geo.heartbeat_ms * 250);
    }
    if (due == INT64_MAX) {
        return -1;
    }
    return due <= now ? 0 : MIN((due - now + 999) / 1000, INT_MAX);
}

static gboolean expired(gpointer key G_GNUC_UNUSED, gpointer value,
                        gpointer opaque)
{
    CXLShmRemoteReq *req = value;

    if (req->deadline_us > *(int64_t *)opaque) {
        return FALSE;
    }
    req_complete(req, CXLSHM_WIRE_TIMEOUT);
    return TRUE;
}

bool cxl_shm_remote_progress(CXLShmRemote *r)
{
    int64_t now;

    if (r->worker) {
        while (ucp_worker_progress(r->worker)) {
            /* drain what arrived */
        }
    }
    if (r->error) {
        return false;
    }
    if (r->join_req && r->have_nonce) {
        send_join(r);
    }
    now = now_us();
    if (r->join_req && now >= r->join_req->deadline_us) {
        req_complete(r->join_req, CXLSHM_WIRE_TIMEOUT);
        r->join_req = NULL;
        remote_abort(r, "the pool service did not answer a join in time");
        return false;
    }
    /*
     * A request with no reply in time may or may not have been done (a
     * fetch-add applied once, or not at all): the connection is given up,
     * so that the service fails this host and rolls back what it left
     * unfinished, as for a host that crashed; never retried on it
     */
    if (g_hash_table_foreach_remove(r->pending, expired, &now)) {
        g_autofree char *why = g_strdup_printf(
            "the pool service did not answer a %s within %u ms: the "
            "connection is given up", r->hb.status == CXLSHM_WIRE_TIMEOUT ?
            "heartbeat" : "request", r->timeout_ms);

        remote_abort(r, why);
        return false;
    }
    if (r->joined && r->hb.status != CXLSHM_REMOTE_PENDING &&
        now - r->last_send_us >= (int64_t)r->geo.heartbeat_ms * 250) {
        cxl_shm_remote_heartbeat(r, &r->hb);
    }
    return !r->error;
}

bool cxl_shm_remote_join(CXLShmRemote *r, uint32_t slot, CXLShmRemoteReq *req)
{
    req->status = CXLSHM_REMOTE_PENDING;
    if (r->error) {
        req_complete(req, CXLSHM_WIRE_LOST);
        return false;
    }
    if (r->join_req || r->joined) {
        req_complete(req, CXLSHM_WIRE_EPERM);
        return false;
    }
    r->join_req = req;
    r->join_slot = slot;
    /* the deadline of a join covers the wait for the service's nonce */
    req->deadline_us = now_us() + (int64_t)r->timeout_ms * 1000;
    if (r->have_nonce) {
        send_join(r);
    }
    return true;
}

static bool simple(CXLShmRemote *r, CXLShmWireOp op, CXLShmRemoteReq *req)
{
    CXLShmWireReq hdr = { .op = op };

    return send_req(r, &hdr, NULL, 0, req);
}

bool cxl_shm_remote_leave(CXLShmRemote *r, CXLShmRemoteReq *req)
{
    return simple(r, CXLSHM_REQ_LEAVE, req);
}

bool cxl_shm_remote_heartbeat(CXLShmRemote *r, CXLShmRemoteReq *req)
{
    return simple(r, CXLSHM_REQ_HEARTBEAT, req);
}

bool cxl_shm_remote_hosts(CXLShmRemote *r, CXLShmRemoteReq *req)
{
    return simple(r, CXLSHM_REQ_HOSTS, req);
}

bool cxl_shm_remote_writeback(CXLShmRemote *r, const CXLShmWireLine *lines,
                              uint32_t n, CXLShmRemoteReq *req)
{
    CXLShmWireReq hdr = { .op = CXLSHM_REQ_WRITEBACK, .count = n };

    return send_req(r, &hdr, lines, (size_t)n * sizeof(*lines), req);
}

bool cxl_shm_remote_fetch(CXLShmRemote *r, uint64_t offset, uint32_t len,
                          CXLShmRemoteReq *req)
{
    CXLShmWireReq hdr = {
        .op = CXLSHM_REQ_FETCH, .offset = offset, .count = len,
    };

    return send_req(r, &hdr, NULL, 0, req);
}

bool cxl_shm_remote_atomic(CXLShmRemote *r, CXLShmWireAtomic op,
                           uint64_t offset, uint64_t arg0, uint64_t arg1,
                           CXLShmRemoteReq *req)
{
    CXLShmWireReq hdr = {
        .op = CXLSHM_REQ_ATOMIC, .flags = op, .offset = offset,
        .arg0 = arg0, .arg1 = arg1,
    };

    return send_req(r, &hdr, NULL, 0, req);
}

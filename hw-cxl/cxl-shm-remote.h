/*
 * cxl-shm: client of a remote pool (`cxlpod-pool serve`) over UCX
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Nothing here waits: a request is submitted, and the caller drives
 * cxl_shm_remote_progress() (from its main loop when the fd of
 * cxl_shm_remote_fd() is readable, or by polling) until the request's
 * status is no longer CXLSHM_REMOTE_PENDING.  A lost connection, or a
 * reply that does not come within the request timeout, completes every
 * pending request with CXLSHM_WIRE_LOST or CXLSHM_WIRE_TIMEOUT: a caller
 * never hangs on a service that died or stopped.  While joined, progress
 * sends a heartbeat whenever the connection has been idle for a quarter
 * of the service's heartbeat timeout.
 *
 * No QEMU dependency beyond qemu/osdep.h: the unit tests and the host
 * tools build it with tests/unit/shim.  Not thread-safe: one thread
 * submits and progresses.
 */

#ifndef HW_CXLPOD_CXL_SHM_REMOTE_H
#define HW_CXLPOD_CXL_SHM_REMOTE_H

#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include "cxl-shm-wire.h"

#define CXLSHM_REMOTE_PENDING   (-1)

typedef struct CXLShmRemote CXLShmRemote;

/* One request; the caller owns it and keeps it until it completes */
typedef struct CXLShmRemoteReq {
    int status;                 /* PENDING, or a CXLShmWireStatus */
    uint32_t count;             /* the reply's count */
    uint64_t value0;            /* the reply's values */
    uint64_t value1;
    void *buf;                  /* FETCH and HOSTS: where the data goes */
    size_t len;                 /* its size */
    size_t got;                 /* bytes of payload copied to buf */
    /* private */
    uint64_t id;
    uint16_t op;                /* the request's CXLShmWireOp */
    int64_t deadline_us;
} CXLShmRemoteReq;

/*
 * Start connecting to the service at @addr:@port (an IPv4 or IPv6
 * literal, or a name: getaddrinfo() may then block on the resolver, so a
 * caller that must not wait passes a literal) with the pod's @key.
 * Returns NULL and sets @errp if UCX cannot even start.  @timeout_ms
 * bounds every request (0: 5000).  UCX_TLS defaults to "tcp" and
 * UCX_NET_DEVICES to the interface packets to @addr leave by ("lo" for a
 * loopback address) unless the environment sets them.
 */
CXLShmRemote *cxl_shm_remote_new(const char *addr, uint16_t port,
                                 const uint8_t *key, size_t key_len,
                                 uint32_t timeout_ms, GError **errp);
void cxl_shm_remote_free(CXLShmRemote *r);

/*
 * The UCX context and worker of either side: active messages and a
 * wakeup fd (*@efd, -1 if none), one thread; UCX_TLS "tcp" and
 * UCX_NET_DEVICES @netdev (if not NULL) unless the environment sets them
 */
ucs_status_t cxl_shm_remote_ucx_start(const char *netdev, ucp_context_h *ctx,
                                      ucp_worker_h *worker, int *efd);
/*
 * The network interface UCX is to use for @sa, into @buf: "lo" for a
 * loopback address; for the service (@local) the interface that holds
 * @sa, for a client the one its packets to @sa leave by (a routing
 * lookup, nothing sent).  Left alone, UCX offers the peer every interface
 * of the machine, and a peer that cannot reach one of them (a second
 * network, a namespace's other link) fails the connection.  False if
 * none is found (then UCX chooses).
 */
bool cxl_shm_remote_netdev(const struct sockaddr *sa, bool local,
                           char *buf, size_t len);
/* Is @sa an IPv4 127/8 or the IPv6 loopback address? */
bool cxl_shm_remote_is_loopback(const struct sockaddr *sa);

/* Read a key file (64 hex digits and a newline): false and @errp if bad */
bool cxl_shm_remote_read_key(const char *path, uint8_t *key, GError **errp);

/* The fd to poll for readability, or -1 (then poll progress) */
int cxl_shm_remote_fd(CXLShmRemote *r);

/*
 * Drive the connection: completes requests whose replies arrived, sends
 * heartbeats, times requests out.  Returns false once the connection is
 * lost (every request then completes with an error).  A request with no
 * reply by its deadline completes TIMEOUT and the connection is given up
 * (closed by force, every other request LOST): whether the service did
 * it is unknown, so it is never retried on that connection; the service
 * fails the host and rolls back what it left unfinished, as for a host
 * that crashed, and the caller rejoins on a new connection.
 */
bool cxl_shm_remote_progress(CXLShmRemote *r);

/* Arm the fd before sleeping on it: false if there is work already */
bool cxl_shm_remote_arm(CXLShmRemote *r);

/*
 * How long a caller sleeping on the fd may sleep before it must call
 * progress again (the next heartbeat or request deadline), in ms; -1:
 * nothing is due.  While joined, a caller that does not call progress
 * for the service's heartbeat timeout is failed by the service.
 */
int cxl_shm_remote_timeout_ms(CXLShmRemote *r);

/* Why the connection is lost, or NULL while it is up */
const char *cxl_shm_remote_error(CXLShmRemote *r);

/* The geometry JOIN returned (zero before) */
const CXLShmWireJoined *cxl_shm_remote_geometry(CXLShmRemote *r);

/*
 * Submit a request.  Each returns false, with @req completed (status
 * LOST or EINVAL), if it cannot be sent; else @req is pending.
 */
bool cxl_shm_remote_join(CXLShmRemote *r, uint32_t slot,
                         CXLShmRemoteReq *req);
bool cxl_shm_remote_leave(CXLShmRemote *r, CXLShmRemoteReq *req);
bool cxl_shm_remote_heartbeat(CXLShmRemote *r, CXLShmRemoteReq *req);
bool cxl_shm_remote_writeback(CXLShmRemote *r, const CXLShmWireLine *lines,
                              uint32_t n, CXLShmRemoteReq *req);
/* @len bytes at @offset into req->buf (req->len at least @len) */
bool cxl_shm_remote_fetch(CXLShmRemote *r, uint64_t offset, uint32_t len,
                          CXLShmRemoteReq *req);
bool cxl_shm_remote_atomic(CXLShmRemote *r, CXLShmWireAtomic op,
                           uint64_t offset, uint64_t arg0, uint64_t arg1,
                           CXLShmRemoteReq *req);
/* The host table (max_hosts entries of 128 bytes) into req->buf */
bool cxl_shm_remote_hosts(CXLShmRemote *r, CXLShmRemoteReq *req);

/* A status as a word ("ok", "busy", ...) */
const char *cxl_shm_remote_status_name(int status);

#endif

/*
 * cxl-shm: the remote pool's wire protocol (UCP active messages)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * `cxlpod-pool serve` owns a pool file and serves hosts on other
 * machines; hw-cxl/cxl-shm-remote.c is the client.  docs/interfaces.md
 * ("Remote pool protocol") is the description; this header is the only
 * definition.  Every message is one UCP active message whose data is a
 * header and a payload, little endian, with no UCP header part:
 *
 *   CXLSHM_AM_HELLO  service -> client, on connect and with each new
 *                    nonce (after LEAVE, after a proven JOIN that fails)
 *   CXLSHM_AM_REQ    client -> service: CXLShmWireReq + payload
 *   CXLSHM_AM_REPLY  service -> client: CXLShmWireReply + payload
 *
 * A well-formed request is answered by exactly one reply with the
 * request's id; a message that is not one gets none and the connection
 * is dropped.  The first request of a connection must be JOIN, whose
 * payload proves the client holds the pod's key: HMAC-SHA256(key,
 * CXLSHM_WIRE_AUTH_LABEL || nonce || slot as 4 bytes little endian).  A
 * message of another size first is dropped unread, and a wrong proof is
 * refused (CXLSHM_WIRE_EACCES); either way the connection is closed.
 * Only the client authenticates: the service proves nothing to it.
 */

#ifndef HW_CXLPOD_CXL_SHM_WIRE_H
#define HW_CXLPOD_CXL_SHM_WIRE_H

#define CXLSHM_WIRE_MAGIC       0x31574d5358435843ULL  /* "CXCXSMW1" */
#define CXLSHM_WIRE_VERSION     1
#define CXLSHM_WIRE_AUTH_LABEL  "cxlpod-pool-join-v1"
#define CXLSHM_WIRE_NONCE       32
#define CXLSHM_WIRE_MAC         32      /* HMAC-SHA256 */
#define CXLSHM_WIRE_KEY         32      /* the pod's key, bytes */

/* Limits of one request (larger ones are refused with EINVAL) */
#define CXLSHM_WIRE_MAX_LINES   256     /* lines of one WRITEBACK */
#define CXLSHM_WIRE_MAX_FETCH   65536   /* bytes of one FETCH */

enum {
    CXLSHM_AM_HELLO = 1,
    CXLSHM_AM_REQ = 2,
    CXLSHM_AM_REPLY = 3,
};

typedef enum CXLShmWireOp {
    CXLSHM_REQ_JOIN = 1,         /* arg0 slot; payload mac[32] */
    CXLSHM_REQ_LEAVE = 2,
    CXLSHM_REQ_HEARTBEAT = 3,
    CXLSHM_REQ_WRITEBACK = 4,    /* count lines of CXLShmWireLine */
    CXLSHM_REQ_FETCH = 5,        /* offset, count bytes */
    CXLSHM_REQ_ATOMIC = 6,       /* flags op, offset, arg0, arg1 */
    CXLSHM_REQ_HOSTS = 7,        /* the host table */
    CXLSHM_REQ_MAX
} CXLShmWireOp;

/* CXLSHM_REQ_ATOMIC's flags: 8-byte operations on the coherent window */
typedef enum CXLShmWireAtomic {
    CXLSHM_ATOMIC_FETCH_ADD = 1,    /* old = *p; *p += arg0 */
    CXLSHM_ATOMIC_CMPXCHG = 2,      /* old = *p; if old == arg0, *p = arg1 */
    CXLSHM_ATOMIC_XCHG = 3,         /* old = *p; *p = arg0 */
    CXLSHM_ATOMIC_READ = 4,         /* old = *p */
    CXLSHM_ATOMIC_STORE = 5,        /* old = *p; bytes arg1 of *p = arg0's */
} CXLShmWireAtomic;

/* Reply status; the client library adds LOST and TIMEOUT of its own */
typedef enum CXLShmWireStatus {
    CXLSHM_WIRE_OK = 0,
    CXLSHM_WIRE_BUSY = 1,       /* a line lock stayed busy: try again */
    CXLSHM_WIRE_EINVAL = 2,     /* out of bounds, misaligned, bad count */
    CXLSHM_WIRE_EACCES = 3,     /* no key proof, or a wrong one */
    CXLSHM_WIRE_EPERM = 4,      /* not joined, or joined already */
    CXLSHM_WIRE_EBUSY = 5,      /* JOIN: the slot is in use */
    CXLSHM_WIRE_EPROTO = 6,     /* unknown op, bad length or magic */
    CXLSHM_WIRE_EIO = 7,        /* the service could not do it */
    CXLSHM_WIRE_LOST = 100,     /* client only: the connection is gone */
    CXLSHM_WIRE_TIMEOUT = 101,  /* client only: no reply in time */
} CXLShmWireStatus;

typedef struct CXLShmWireHello {
    uint64_t magic;             /* CXLSHM_WIRE_MAGIC */
    uint32_t version;           /* CXLSHM_WIRE_VERSION */
    uint32_t reserved;
    uint8_t nonce[CXLSHM_WIRE_NONCE];
} CXLShmWireHello;

typedef struct CXLShmWireReq {
    uint64_t magic;             /* CXLSHM_WIRE_MAGIC */
    uint64_t id;                /* echoed in the reply */
    uint16_t op;                /* CXLShmWireOp */
    uint16_t flags;             /* ATOMIC: CXLShmWireAtomic */
    uint32_t count;             /* WRITEBACK lines, FETCH bytes */
    uint64_t offset;            /* pool offset (DPA) */
    uint64_t arg0;
    uint64_t arg1;
} CXLShmWireReq;

/* One line of a WRITEBACK: bytes whose @mask bit is set are stored */
typedef struct CXLShmWireLine {
    uint64_t offset;            /* line aligned, in the non-coherent area */
    uint64_t mask;              /* bit i: data[i] is written */
    uint8_t data[64];
} CXLShmWireLine;

typedef struct CXLShmWireReply {
    uint64_t id;
    uint16_t op;
    uint16_t status;            /* CXLShmWireStatus */
    uint32_t count;             /* WRITEBACK: lines done (all, or a prefix) */
    /* JOIN: the generation; ATOMIC: the old value; WRITEBACK: written */
    uint64_t value0;
    uint64_t value1;            /* WRITEBACK conflicts */
} CXLShmWireReply;

/* The payload of JOIN's reply: the pool's geometry */
typedef struct CXLShmWireJoined {
    uint64_t size;
    uint64_t coherent_size;
    uint32_t max_hosts;
    uint32_t heartbeat_ms;      /* the service fails a host silent longer */
} CXLShmWireJoined;

#endif

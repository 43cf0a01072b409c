/*
 * cxlpod-remote: a remote host of a pool served by `cxlpod-pool serve`,
 * on the client library the device uses (hw-cxl/cxl-shm-remote.c); for
 * tests, benchmarks and by hand
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   cxlpod-remote [--connect ADDR:PORT] --key FILE [--host N]
 *                 [--timeout MS] [--no-join] COMMAND [ARGS] [, COMMAND ...]
 *
 * Connects, joins slot N (unless --no-join) and runs the commands in
 * order, one output line each, then leaves.  Exit status: 0 every
 * command ok, 1 one failed (its line says why), 2 usage, 3 the
 * connection was lost or a reply did not come in time.
 */

#include "qemu/osdep.h"
#include <poll.h>
#include "cxl-shm-remote.h"

static CXLShmRemote *R;
static bool lost;
static bool left;
static int timeout = 5000;      /* per request */
static int retry = -1;          /* how long a busy request is retried */
static gboolean spin;           /* poll UCX without sleeping */

/* The tool waits for each request; the library itself never does */
static int wait_req(CXLShmRemoteReq *req)
{
    while (req->status == CXLSHM_REMOTE_PENDING) {
        if (!cxl_shm_remote_progress(R)) {
            break;
        }
        if (req->status != CXLSHM_REMOTE_PENDING) {
            break;
        }
        if (!spin && cxl_shm_remote_arm(R)) {
            struct pollfd p = { .fd = cxl_shm_remote_fd(R), .events = POLLIN };

            poll(&p, 1, cxl_shm_remote_timeout_ms(R));
        }
    }
    if (req->status == CXLSHM_REMOTE_PENDING) {
        req->status = CXLSHM_WIRE_LOST;
    }
    if (req->status == CXLSHM_WIRE_LOST ||
        req->status == CXLSHM_WIRE_TIMEOUT) {
        lost = true;
    }
    return req->status;
}

static uint64_t num(const char *s)
{
    return g_ascii_strtoull(s, NULL, 0);
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Write back @n lines from @off, every byte @val; busy is retried */
static int writeback(uint64_t off, uint32_t n, uint8_t val, uint64_t mask,
                     uint64_t *written, uint64_t *conflicts)
{
    g_autofree CXLShmWireLine *l = g_new0(CXLShmWireLine, n);
    CXLShmRemoteReq req = { 0 };
    uint32_t i, done = 0;
    int64_t until = now_ns() + retry * 1000000LL;

    for (i = 0; i < n; i++) {
        l[i].offset = off + (uint64_t)i * 64;
        l[i].mask = mask;
        memset(l[i].data, val, 64);
    }
    *written = *conflicts = 0;
    while (done < n) {
        cxl_shm_remote_writeback(R, l + done, n - done, &req);
        wait_req(&req);
        *written += req.value0;
        *conflicts += req.value1;
        if (req.status == CXLSHM_WIRE_BUSY && now_ns() < until) {
            done += req.count;
            continue;
        }
        return req.status;
    }
    return CXLSHM_WIRE_OK;
}

static int fetch(uint64_t off, uint32_t len, uint8_t *buf)
{
    CXLShmRemoteReq req = { .buf = buf, .len = len };
    int64_t until = now_ns() + retry * 1000000LL;

    do {
        cxl_shm_remote_fetch(R, off, len, &req);
        wait_req(&req);
    } while (req.status == CXLSHM_WIRE_BUSY && now_ns() < until);
    if (req.status == CXLSHM_WIRE_OK && req.got != len) {
        return CXLSHM_WIRE_EPROTO;      /* fewer bytes than asked for */
    }
    return req.status;
}

static int atomic(CXLShmWireAtomic op, uint64_t off, uint64_t a, uint64_t b,
                  uint64_t *old)
{
    CXLShmRemoteReq req = { 0 };
    int64_t until = now_ns() + retry * 1000000LL;

    do {
        cxl_shm_remote_atomic(R, op, off, a, b, &req);
        wait_req(&req);
    } while (req.status == CXLSHM_WIRE_BUSY && now_ns() < until);
    *old = req.value0;
    return req.status;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t *t, int n)
{
    int64_t sum = 0;
    int i;

    qsort(t, n, sizeof(*t), cmp_i64);
    for (i = 0; i < n; i++) {
        sum += t[i];
    }
    printf("bench %s: n %d median %.1f us mean %.1f us p99 %.1f us\n", what,
           n, t[n / 2] / 1e3, sum / 1e3 / n, t[n * 99 / 100] / 1e3);
}

/* Round trips of the basic requests, one at a time */
static int bench(uint64_t nc_off, uint64_t coh_off, int n)
{
    static const char *const what[] = {
        "writeback 1 line", "writeback 64 lines (4 KiB)", "fetch 1 line",
        "fetch 64 KiB", "fetch-add",
    };
    g_autofree int64_t *t = g_new(int64_t, n);
    g_autofree uint8_t *buf = g_malloc(65536);
    uint64_t w, c;
    size_t k;
    int i, st = 0;

    for (k = 0; k < G_N_ELEMENTS(what); k++) {
        for (i = 0; i < n && !st; i++) {
            int64_t t0 = now_ns();

            switch (k) {
            case 0:
            case 1:
                st = writeback(nc_off, k ? 64 : 1, i, ~0ULL, &w, &c);
                break;
            case 2:
            case 3:
                st = fetch(nc_off, k == 2 ? 64 : 65536, buf);
                break;
            default:
                st = atomic(CXLSHM_ATOMIC_FETCH_ADD, coh_off, 1, 0, &w);
                break;
            }
            t[i] = now_ns() - t0;
        }
        if (st) {
            return st;
        }
        report(what[k], t, n);
    }
    return 0;
}

#define USAGE_COMMANDS \
"commands (each prints one line: 'ok ...' or 'error STATUS'):\n" \
"  write OFF LINES BYTE [MASK]   write back LINES lines from OFF, every\n" \
"                                byte BYTE (MASK: the bytes stored)\n" \
"  fetch OFF LEN                 the bytes, in hex\n" \
"  fadd OFF V [N]                N fetch-adds of V (8 bytes, coherent)\n" \
"  cas OFF OLD NEW | xchg OFF V | read OFF\n" \
"  store OFF V MASK              the bytes MASK of V into the word OFF\n" \
"  hosts                         the host table\n" \
"  sleep MS                      stay joined (heartbeats) for MS\n" \
"  hammer OFF LINES              write back for ever (tests kill it)\n" \
"  bench OFF COH-OFF [N]         round trips (us) of the basic requests\n" \
"  leave | join N                leave; join host N again\n" \
"The client leaves at the end (unless a command did).  Exit status: 0 all\n" \
"ok, 1 a command failed, 2 usage, 3 connection lost or no reply in time.\n" \
"UCX_TLS defaults to tcp and UCX_NET_DEVICES to the interface packets to\n" \
"the service leave by (lo for a loopback address), unless set.  See\n" \
"docs/pool-tool.md.\n"

static void usage(FILE *f)
{
    fprintf(f,
"usage: cxlpod-remote [--connect ADDR:PORT] --key FILE [--host N]\n"
"                     [--timeout MS] [--retry MS] [--spin] [--no-join]\n"
"                     COMMAND [ARGS] [, ...]\n"
USAGE_COMMANDS);
}

static int run(char **a, int n)
{
    uint64_t w, c, old;
    int st = CXLSHM_WIRE_EPROTO;

    if (!strcmp(a[0], "write") && (n == 4 || n == 5)) {
        st = writeback(num(a[1]), num(a[2]), num(a[3]),
                       n == 5 ? num(a[4]) : ~0ULL, &w, &c);
        if (!st) {
            printf("ok written %" PRIu64 " conflicts %" PRIu64 "\n", w, c);
        }
    } else if (!strcmp(a[0], "fetch") && n == 3) {
        uint32_t len = num(a[2]), i;
        g_autofree uint8_t *buf = g_malloc0(MAX(len, 1));

        st = fetch(num(a[1]), len, buf);
        if (!st) {
            printf("ok ");
            for (i = 0; i < len; i++) {
                printf("%02x", buf[i]);
            }
            printf("\n");
        }
    } else if (!strcmp(a[0], "fadd") && (n == 3 || n == 4)) {
        uint64_t k, times = n == 4 ? num(a[3]) : 1;

        for (k = 0, st = 0; k < times && !st; k++) {
            st = atomic(CXLSHM_ATOMIC_FETCH_ADD, num(a[1]), num(a[2]), 0,
                        &old);
        }
        if (!st) {
            printf("ok old %" PRIu64 "\n", old);
        }
    } else if (!strcmp(a[0], "cas") && n == 4) {
        st = atomic(CXLSHM_ATOMIC_CMPXCHG, num(a[1]), num(a[2]), num(a[3]),
                    &old);
        if (!st) {
            printf("ok old %" PRIu64 "\n", old);
        }
    } else if (!strcmp(a[0], "xchg") && n == 3) {
        st = atomic(CXLSHM_ATOMIC_XCHG, num(a[1]), num(a[2]), 0, &old);
        if (!st) {
            printf("ok old %" PRIu64 "\n", old);
        }
    } else if (!strcmp(a[0], "store") && n == 4) {
        st = atomic(CXLSHM_ATOMIC_STORE, num(a[1]), num(a[2]), num(a[3]),
                    &old);
        if (!st) {
            printf("ok old %" PRIu64 "\n", old);
        }
    } else if (!strcmp(a[0], "read") && n == 2) {
        st = atomic(CXLSHM_ATOMIC_READ, num(a[1]), 0, 0, &old);
        if (!st) {
            printf("ok %" PRIu64 "\n", old);
        }
    } else if (!strcmp(a[0], "hosts") && n == 1) {
        CXLShmRemoteReq req = { 0 };
        uint8_t buf[256 * 128];
        uint32_t i;

        req.buf = buf;
        req.len = sizeof(buf);
        cxl_shm_remote_hosts(R, &req);
        st = wait_req(&req);
        if (!st) {
            printf("ok");
            for (i = 0; i < req.count && (i + 1) * 128 <= req.got; i++) {
                uint32_t state;
                uint64_t gen;

                memcpy(&state, buf + i * 128, 4);
                memcpy(&gen, buf + i * 128 + 8, 8);
                printf(" %u:%u:%" PRIu64, i, state, gen);
            }
            printf("\n");
        }
    } else if (!strcmp(a[0], "sleep") && n == 2) {
        int64_t until = now_ns() + (int64_t)num(a[1]) * 1000000;

        while (now_ns() < until && cxl_shm_remote_progress(R)) {
            g_usleep(1000);
        }
        st = cxl_shm_remote_error(R) ? CXLSHM_WIRE_LOST : 0;
        lost |= st != 0;
        if (!st) {
            printf("ok\n");
        }
    } else if (!strcmp(a[0], "hammer") && n == 3) {
        uint64_t rounds = 0;

        for (;;) {
            st = writeback(num(a[1]), num(a[2]), rounds & 0xff, ~0ULL, &w,
                           &c);
            if (st) {
                break;
            }
            if (++rounds == 1) {
                printf("hammering\n");
                fflush(stdout);
            }
        }
    } else if (!strcmp(a[0], "bench") && (n == 3 || n == 4)) {
        st = bench(num(a[1]), num(a[2]), n == 4 ? num(a[3]) : 1000);
    } else if (!strcmp(a[0], "join") && n == 2) {
        CXLShmRemoteReq req = { 0 };

        cxl_shm_remote_join(R, num(a[1]), &req);
        st = wait_req(&req);
        if (!st) {
            left = false;
            printf("ok generation %" PRIu64 "\n", req.value0);
        }
    } else if (!strcmp(a[0], "leave") && n == 1) {
        CXLShmRemoteReq req = { 0 };

        cxl_shm_remote_leave(R, &req);
        st = wait_req(&req);
        left = true;
        if (!st) {
            printf("ok\n");
        }
    } else {
        usage(stderr);
        exit(2);
    }
    if (st) {
        printf("error %s\n", cxl_shm_remote_status_name(st));
    }
    fflush(stdout);
    return st;
}

int main(int argc, char **argv)
{
    g_autofree char *connect = NULL;
    g_autofree char *key_path = NULL;
    int host = 0;
    gboolean no_join = FALSE;
    GOptionEntry entries[] = {
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &connect,
          "the service (default 127.0.0.1:17600)", "ADDR:PORT" },
        { "key", 'k', 0, G_OPTION_ARG_FILENAME, &key_path,
          "the pod's key file (POOL.key)", "FILE" },
        { "host", 'n', 0, G_OPTION_ARG_INT, &host, "host slot to join", "N" },
        { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout,
          "per request (default 5000)", "MS" },
        { "retry", 'r', 0, G_OPTION_ARG_INT, &retry,
          "how long a busy request is tried again (default: --timeout)",
          "MS" },
        { "spin", 's', 0, G_OPTION_ARG_NONE, &spin,
          "wait for replies by polling UCX without sleeping (lower latency, "
          "a core busy)", NULL },
        { "no-join", 0, 0, G_OPTION_ARG_NONE, &no_join,
          "send requests without joining (tests the refusal)", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "COMMAND [ARGS] [, COMMAND ...] - a remote host of a served pool");
    g_autoptr(GError) err = NULL;
    uint8_t key[CXLSHM_WIRE_KEY];
    CXLShmRemoteReq req = { 0 };
    g_autofree char *addr = NULL;
    const char *colon;
    int i, start, ret = 0;

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_description(ctx, USAGE_COMMANDS);
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc < 2 ||
        !key_path) {
        if (err) {
            fprintf(stderr, "cxlpod-remote: %s\n", err->message);
        }
        usage(stderr);
        return 2;
    }
    if (retry < 0) {
        retry = timeout;
    }
    if (!cxl_shm_remote_read_key(key_path, key, &err)) {
        fprintf(stderr, "cxlpod-remote: %s\n", err->message);
        return 2;
    }
    if (!connect) {
        connect = g_strdup("127.0.0.1:17600");
    }
    colon = strrchr(connect, ':');
    if (!colon) {
        fprintf(stderr, "cxlpod-remote: --connect '%s': not ADDR:PORT\n",
                connect);
        return 2;
    }
    addr = g_strndup(connect, colon - connect);
    if (addr[0] == '[') {
        memmove(addr, addr + 1, strlen(addr));
        addr[strlen(addr) - 1] = 0;
    }
    R = cxl_shm_remote_new(addr, num(colon + 1), key, sizeof(key), timeout,
                           &err);
    if (!R) {
        fprintf(stderr, "cxlpod-remote: %s\n", err->message);
        return 3;
    }
    if (!no_join) {
        int64_t until = now_ns() + retry * 1000000LL;
        gulong pause_us = 1000;

        for (;;) {
            cxl_shm_remote_join(R, host, &req);
            wait_req(&req);
            if (req.status != CXLSHM_WIRE_BUSY || now_ns() >= until) {
                break;
            }
            /* the pool's flock is held (a QEMU making a pool): back off */
            g_usleep(pause_us);
            pause_us = MIN(pause_us * 2, 50000);
        }
        if (req.status) {
            printf("error join: %s%s%s\n",
                   cxl_shm_remote_status_name(req.status),
                   cxl_shm_remote_error(R) ? ": " : "",
                   cxl_shm_remote_error(R) ? cxl_shm_remote_error(R) : "");
            cxl_shm_remote_free(R);
            return lost ? 3 : 1;
        }
        printf("joined host %d generation %" PRIu64 "\n", host, req.value0);
        fflush(stdout);
    }
    for (start = 1, i = 1; i <= argc; i++) {
        if (i == argc || !strcmp(argv[i], ",")) {
            if (i > start && run(argv + start, i - start)) {
                ret = 1;
                if (lost) {
                    break;
                }
            }
            start = i + 1;
        }
    }
    if (!no_join && !lost && !left) {
        /* a clean exit leaves, as a QEMU that quits does */
        CXLShmRemoteReq bye = { 0 };

        cxl_shm_remote_leave(R, &bye);
        wait_req(&bye);
    }
    if (lost && cxl_shm_remote_error(R)) {
        fprintf(stderr, "cxlpod-remote: %s\n", cxl_shm_remote_error(R));
    }
    cxl_shm_remote_free(R);
    return lost ? 3 : ret;
}

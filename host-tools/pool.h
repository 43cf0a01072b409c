/*
 * cxlpod-pool's private header: the opened pool and the functions its
 * files share.
 *
 *   cxlpod-pool.c   the command table, usage and main()
 *   pool-file.c     open, lock, validate and map a pool; shared helpers
 *   pool-inspect.c  inspect (text and --json)
 *   pool-check.c    check
 *   pool-write.c    create, reset-host, wipe
 *   pool-upgrade.c  upgrade (format version 3 to 4)
 *   pool-serve.c    serve (the pool over UCX) and key
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef CXLPOD_POOL_H
#define CXLPOD_POOL_H

#include "qemu/osdep.h"
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <json-glib/json-glib.h>
#include "qemu/atomic.h"
#include "cxl-shm-format.h"

/*
 * An opened pool: its head (CXLPOOL_META_SIZE bytes at offset 0: header,
 * line locks, page versions, liveness bytes) and its tail (at
 * lo.tail: host table, extended statistics, undo slots, lock turns,
 * snoop filter) mapped; pool_tail() turns a file offset of the tail into
 * an address.
 */
struct Pool {
    const char *path;
    int fd;
    struct stat st;
    uint8_t *meta;
    uint8_t *tail;
    CXLPoolLayout lo;
    CXLPoolHeader *hdr;
    CXLPoolHost *hosts;
    CXLPoolError err;
    bool empty;                 /* 0 bytes: a create stopped before sizing */
    uint32_t nr_hosts;          /* max_hosts, at most CXLPOOL_MAX_HOSTS */
};
typedef struct Pool Pool;

static inline void *pool_tail(const Pool *p, uint64_t off)
{
    return p->tail + (off - p->lo.tail);
}

/* The undo slots of the tail: [max_hosts][bank 2][CXLSHM_UNDO_SLOTS] */
static inline uint32_t pool_undo_slots(const Pool *p)
{
    return p->nr_hosts * 2 * CXLSHM_UNDO_SLOTS;
}

/*
 * Format version 3 (docs/pool-format.md, "Upgrading from version 3"): a
 * 0x50-byte header (crc32c of [0, 0x48) at 0x48) and everything in the
 * head; version 4 moved the areas sized by the hosts to the tail and
 * keeps these ranges of the head zero.
 */
#define POOL_V3_VERSION         3
#define POOL_V3_HEADER_CRC      0x48
#define POOL_V3_MAX_HOSTS       32
#define POOL_V3_HOSTS           0x1000      /* [32] x 128 bytes */
#define POOL_V3_HOSTS_END       0x2000
#define POOL_V3_UNDO            0x20000     /* [32][bank 2][64] x 128 */
#define POOL_V3_UNDO_END        0xa0000
#define POOL_V3_TURNS           0xb0000     /* 8192 x 8 bytes */
#define POOL_V3_XSTATS          0xc0000     /* [32][32] x 8 bytes */
#define POOL_V3_XSTATS_END      0xc2000
#define POOL_V3_SF              0x110000    /* header; entries at 0x111000 */
#define POOL_V3_SF_END          0x1f1000    /* 14 ways x 8192 x 8 bytes */

/* Statistic names, in the order of the host table and extended area */
extern const char *const stat_names[CXLSHM_STAT_NR];

/* pool-file.c */
G_GNUC_PRINTF(1, 2) void fail(const char *fmt, ...);
bool parse_size(const char *s, uint64_t *out);
char *fmt_time(uint64_t ns);
uint64_t pool_stat(const Pool *p, uint32_t host, int k);
/* 0 opened; 1 not a usable pool; 2 cannot open/read (messages printed) */
int pool_open(Pool *p, const char *path, bool write);
/*
 * Open @path (O_NONBLOCK) and take its flock (exclusive: blocking; shared:
 * 5 s at most), opening it again if it was replaced meanwhile: fd or -1
 */
int pool_open_locked(const char *path, int flags, bool exclusive,
                     struct stat *st);
/* msync the head and the tail: 0 or -1 (errno) */
int pool_sync(Pool *p);
void pool_close(Pool *p);
const char *host_status(Pool *p, uint32_t i, bool *locked);
bool owner_alive(Pool *p, uint64_t tag);
void count_locks(Pool *p, unsigned *held, unsigned *armed);

/* the commands: argv[0] is the command's name; return the exit status */
int cmd_create(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_reset_host(int argc, char **argv);
int cmd_wipe(int argc, char **argv);
int cmd_upgrade(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_key(int argc, char **argv);

/* pool-serve.c: the pod's key, POOL.key (g_free), made mode 0600 */
char *pool_key_path(const char *pool);
/* 0, or -errno (-EEXIST: there is one) */
int pool_key_make(const char *path, uid_t uid, gid_t gid);

/*
 * pool-upgrade.c: may the pool in @fd be upgraded now?  -1 it is not of
 * format version 3; 0 yes; 1 no, and *@why (g_free) says why
 */
int pool_v3_upgradable(const char *path, int fd, const struct stat *st,
                       char **why);

#endif

/*
 * cxlpod-pool's private header: the opened pool and the functions its
 * files share.
 *
 *   cxlpod-pool.c   the command table, usage and main()
 *   pool-file.c     open, lock, validate and map a pool; shared helpers
 *   pool-inspect.c  inspect (text and --json)
 *   pool-check.c    check
 *   pool-write.c    create, reset-host, wipe
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

struct Pool {
    const char *path;
    int fd;
    struct stat st;
    uint8_t *meta;
    CXLPoolHeader *hdr;
    CXLPoolHost *hosts;
    CXLPoolError err;
    bool empty;                 /* 0 bytes: a create stopped before sizing */
    uint32_t nr_hosts;          /* max_hosts, at most CXLPOOL_MAX_HOSTS */
};
typedef struct Pool Pool;

/* Statistic names, in the order of the host table and extended area */
extern const char *const stat_names[CXLSHM_STAT_NR];

/* pool-file.c */
G_GNUC_PRINTF(1, 2) void fail(const char *fmt, ...);
bool parse_size(const char *s, uint64_t *out);
char *fmt_time(uint64_t ns);
uint64_t pool_stat(const Pool *p, uint32_t host, int k);
/* 0 opened; 1 not a usable pool; 2 cannot open/read (messages printed) */
int pool_open(Pool *p, const char *path, bool write);
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

#endif

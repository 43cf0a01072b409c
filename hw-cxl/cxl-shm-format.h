/*
 * cxl-shm: the pool file format, shared by the device and cxlpod-pool
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Layout of the pool's metadata (docs/pool-format.md), validation of a
 * header against a geometry, the liveness probe of a host slot (its OFD
 * lock byte), the pool's flock, and creating a pool in an empty file.
 * It uses only libc and GLib besides qemu/osdep.h and qemu/atomic.h, so
 * the device builds it inside QEMU and host-tools build it with the
 * stand-ins of tests/unit/shim.
 */

#ifndef HW_CXLPOD_CXL_SHM_FORMAT_H
#define HW_CXLPOD_CXL_SHM_FORMAT_H

#include <sys/stat.h>
#include "cxl-shm-line.h"
#include "cxl-shm-regs.h"

#define CXLPOOL_MAGIC           "CXLPOOL\0"
#define CXLPOOL_VERSION         4
/*
 * A pool file is a head of CXLPOOL_META_SIZE bytes (the header, the line
 * locks and their versions, the liveness bytes: the same whatever the
 * pod's size), the data, then a tail whose layout is computed from the
 * header's max_hosts (cxlpool_layout()): the host table, the extended
 * statistics, the undo slots, the lock turns and the snoop filter.  The
 * data starts at the same offset in every pool.
 */
#define CXLPOOL_META_SIZE       ((uint64_t)0x200000) /* data starts here */
#define CXLPOOL_HEADER_SIZE     4096
#define CXLPOOL_LINELOCK_OFFSET 0x10000     /* CXLSHM_NR_LOCKS x 8 bytes */
#define CXLPOOL_VERSIONS_OFFSET 0xa0000     /* CXLSHM_NR_LOCKS x 8 bytes */
#define CXLPOOL_LOCK_OFFSET     0x100000    /* liveness byte of each host */
/* A host holds its byte with an exclusive qemu_lock_fd() (an OFD lock) */
#define CXLPOOL_HOST_LOCK(host) (CXLPOOL_LOCK_OFFSET + (host))
#define CXLPOOL_LINE            CXLSHM_LINE
#define CXLPOOL_MAX_HOSTS       CXLSHM_MAX_HOSTS
#define CXLPOOL_TAIL_ALIGN      ((uint64_t)0x200000)    /* a huge page */

/* Geometry limits (the device's property rules, docs/device.md) */
#define CXLPOOL_SIZE_ALIGN      ((uint64_t)256 << 20)
#define CXLPOOL_SIZE_MAX        ((uint64_t)1 << 40)
#define CXLPOOL_COHERENT_ALIGN  ((uint64_t)2 << 20)

/*
 * Line lock words and armed undo slots hold a tag naming their holder:
 * bit 63 held, host 55..62, undo slot 48..54, low 48 bits of the
 * generation 0..47 (docs/pool-format.md).  The only definition: the line
 * engine, cxlpod-pool and the tests use these.
 */
#define CXLPOOL_TAG_HELD        (1ULL << 63)
#define CXLPOOL_TAG_GEN_MASK    ((1ULL << 48) - 1)
#define CXLPOOL_TAG_HOST(t)     ((uint32_t)(((t) >> 55) & 0xff))
#define CXLPOOL_TAG_SLOT(t)     ((uint32_t)(((t) >> 48) & 0x7f))
#define CXLPOOL_TAG_GEN(t)      ((t) & CXLPOOL_TAG_GEN_MASK)
#define CXLPOOL_TAG(host, slot, gen) \
    (CXLPOOL_TAG_HELD | ((uint64_t)((host) & 0xff) << 55) | \
     ((uint64_t)((slot) & 0x7f) << 48) | CXLPOOL_TAG_GEN(gen))

enum {
    CXLPOOL_HOST_FREE = 0,
    CXLPOOL_HOST_LIVE = 1,
    CXLPOOL_HOST_FAILED = 2,
    CXLPOOL_HOST_LEFT = 3,
};

/* Per-host statistics: CXLSHM_STAT_* (cxl-shm-regs.h), in that order */
/* The first statistics are in the host table, the rest in the xstats area */
#define CXLSHM_STAT_TABLE_NR    12
#define CXLPOOL_XSTATS_PER_HOST 32

/*
 * Snoop filter of the coherent window (mode=timed): a header, then
 * [CXLSHM_NR_LOCKS sets][ways] entries of two words; set i holds coherent
 * lines L with L % 8192 == i and is guarded by line lock i.  Word 0 of an
 * entry: bit 63 valid, 42..62 tag (L / 8192), 38..41 age, 9..37 epoch
 * (the header's count of epochs handed out, taken by a new entry and by
 * every store, so that no copy made before either matches),
 * 0..8 the host holding it modified + 1 (0: none).  Word 1: the hosts
 * holding a copy, bit h % 64 for host h (exact up to 64 hosts; beyond, a
 * bit stands for every host of its class, as a coarse snoop filter's
 * does).
 */
#define CXLPOOL_SF_MAGIC        0x504f4f4e53465333ULL  /* "3SFSNOOP" */
#define CXLPOOL_SF_MAX_WAYS     14

typedef struct CXLPoolSnoopHeader {
    uint64_t magic;             /* CXLPOOL_SF_MAGIC once set up */
    uint64_t ways;              /* entries = ways * CXLSHM_NR_LOCKS */
    uint64_t inserts;           /* epochs handed out: entries and stores */
} CXLPoolSnoopHeader;

typedef struct CXLPoolSnoopEntry {
    uint64_t tag;               /* valid, tag, age, owner + 1 */
    uint64_t holders;           /* bit h % 64: host h holds a copy */
} CXLPoolSnoopEntry;

typedef struct CXLPoolHeader {
    char magic[8];              /* 0x00 "CXLPOOL\0" */
    uint32_t version;           /* 0x08 */
    uint32_t header_size;       /* 0x0c */
    uint64_t meta_size;         /* 0x10 data starts here in the file */
    uint64_t data_size;         /* 0x18 */
    uint64_t coherent_size;     /* 0x20 */
    uint32_t line_size;         /* 0x28 */
    uint32_t max_hosts;         /* 0x2c */
    uint64_t tail_offset;       /* 0x30 meta_size + data_size */
    uint64_t lock_offset;       /* 0x38 */
    uint64_t create_time_ns;    /* 0x40 wall clock */
    uint64_t tail_size;         /* 0x48 cxlpool_layout() of max_hosts */
    uint64_t hosts_offset;      /* 0x50 file offset of the host table */
    uint32_t host_entry_size;   /* 0x58 */
    uint32_t crc;               /* 0x5c crc32c of bytes [0, 0x5c) */
} CXLPoolHeader;

typedef struct CXLPoolHost {
    uint32_t state;             /* 0x00 CXLPOOL_HOST_* */
    uint32_t pid;               /* 0x04 */
    uint64_t generation;        /* 0x08 */
    uint64_t join_time_ns;      /* 0x10 */
    uint64_t leave_time_ns;     /* 0x18 */
    uint64_t stats[12];         /* 0x20 CXLSHM_STAT_* */
} CXLPoolHost;

typedef struct CXLPoolGeometry {
    uint64_t size;              /* data bytes */
    uint64_t coherent_size;
    uint32_t max_hosts;
} CXLPoolGeometry;

/*
 * Where the tail's areas are, for a pool of @data_size bytes and
 * @max_hosts hosts: offsets from the start of the file
 */
typedef struct CXLPoolLayout {
    uint64_t tail;              /* CXLPOOL_META_SIZE + data_size */
    uint64_t tail_size;         /* a multiple of CXLPOOL_TAIL_ALIGN */
    uint64_t hosts;             /* [max_hosts] CXLPoolHost */
    uint64_t xstats;            /* [max_hosts][32] x 8 bytes */
    uint64_t undo;              /* [max_hosts][bank 2][slot] CXLShmUndo */
    uint64_t turns;             /* [CXLSHM_NR_LOCKS][turn_words] x 8 */
    uint64_t sf_header;         /* CXLPoolSnoopHeader */
    uint64_t sf_entries;        /* [set][ways] CXLPoolSnoopEntry */
    uint32_t turn_words;        /* waiting bitmap words + the last holder */
} CXLPoolLayout;

static inline void cxlpool_layout(CXLPoolLayout *lo, uint64_t data_size,
                                  uint32_t max_hosts)
{
    uint64_t at;

    lo->tail = CXLPOOL_META_SIZE + data_size;
    lo->turn_words = DIV_ROUND_UP(max_hosts, 64) + 1;
    at = lo->tail;
    lo->hosts = at;
    at = QEMU_ALIGN_UP(at + (uint64_t)max_hosts * sizeof(CXLPoolHost), 4096);
    lo->xstats = at;
    at = QEMU_ALIGN_UP(at + (uint64_t)max_hosts * CXLPOOL_XSTATS_PER_HOST * 8,
                  4096);
    lo->undo = at;
    at += (uint64_t)max_hosts * 2 * CXLSHM_UNDO_SLOTS * sizeof(CXLShmUndo);
    lo->turns = at;
    at += (uint64_t)CXLSHM_NR_LOCKS * lo->turn_words * 8;
    lo->sf_header = at;
    lo->sf_entries = at + 4096;
    at = lo->sf_entries + (uint64_t)CXLPOOL_SF_MAX_WAYS * CXLSHM_NR_LOCKS *
         sizeof(CXLPoolSnoopEntry);
    lo->tail_size = QEMU_ALIGN_UP(at - lo->tail, CXLPOOL_TAIL_ALIGN);
}

/* The size of the file of a pool of @data_size bytes and @max_hosts */
static inline uint64_t cxlpool_file_size(uint64_t data_size,
                                         uint32_t max_hosts)
{
    CXLPoolLayout lo;

    cxlpool_layout(&lo, data_size, max_hosts);
    return lo.tail + lo.tail_size;
}

/* Why a pool file is refused, in the order they are checked */
typedef enum CXLPoolError {
    CXLPOOL_OK,
    CXLPOOL_ERR_TOO_SMALL,      /* smaller than the metadata area */
    CXLPOOL_ERR_NO_HEADER,      /* all-zero header: a torn create */
    CXLPOOL_ERR_MAGIC,
    CXLPOOL_ERR_VERSION,
    CXLPOOL_ERR_CRC,
    CXLPOOL_ERR_LAYOUT,
    CXLPOOL_ERR_GEOMETRY,       /* only when a geometry is asked for */
    CXLPOOL_ERR_FILE_SIZE,
} CXLPoolError;

const char *cxlpool_host_state_name(uint32_t state);

/* QEMU's crc32c(0xffffffff, ...) of the header's bytes before its crc */
uint32_t cxlpool_header_crc(const CXLPoolHeader *h);

/* A header for @g, its checksum set */
void cxlpool_header_init(CXLPoolHeader *h, const CXLPoolGeometry *g,
                         uint64_t create_time_ns);

/*
 * Why the pool file of @file_size bytes whose header is @h is refused,
 * or CXLPOOL_OK.  @h may be NULL when the file is smaller than the
 * metadata area; @want is the geometry asked for, or NULL to accept the
 * header's.  Nothing is written.
 */
CXLPoolError cxlpool_check(const CXLPoolHeader *h, uint64_t file_size,
                           const CXLPoolGeometry *want);

/*
 * The refusal as one sentence naming @path ("pool '<path>' ..."), the
 * text the device prints after "cxl-shm: ".  Free with g_free.
 */
char *cxlpool_error_message(CXLPoolError e, const char *path,
                            const CXLPoolHeader *h, uint64_t file_size,
                            const CXLPoolGeometry *want);

/* How to recover from @e (one sentence), for cxlpod-pool check */
const char *cxlpool_recovery(CXLPoolError e);

/* What is wrong with a geometry, or NULL when the device accepts it */
const char *cxlpool_geometry_problem(const CXLPoolGeometry *g);

/* flock() that retries on EINTR */
int cxlpool_flock(int fd, int op);

/*
 * 1 when @fd is the file that @path names now, 0 when that file was
 * removed or replaced (open the path again), -errno when @fd cannot be
 * stat'ed.  *st is @fd's stat.
 */
int cxlpool_fd_is_path(int fd, const char *path, struct stat *st);

/* true if some process holds the liveness byte of @host (or cannot tell) */
bool cxlpool_host_locked(int fd, uint32_t host);

/*
 * With the pool's flock held: mark failed every host other than @self
 * (-1: none) that is live in @hosts but whose liveness byte is free.
 * Sets bit i of @reaped (DIV_ROUND_UP(max_hosts, 64) words, which the
 * caller zeroed) for each host it marked; returns how many.
 */
uint32_t cxlpool_reap(int fd, CXLPoolHost *hosts, uint32_t max_hosts,
                      int self, uint64_t *reaped);

/*
 * Allocate the @len bytes of an empty pool file (fallocate; ftruncate
 * where the file system cannot).  0, -1 if the allocation failed (no
 * space), -2 if the file could not be sized; errno says why.
 */
int cxlpool_allocate(int fd, uint64_t len);

/*
 * Write the header for @g (in a file whose head and tail are zero):
 * 0 or -errno
 */
int cxlpool_write_header(int fd, const CXLPoolGeometry *g,
                         uint64_t create_time_ns);
/*
 * Write @len bytes at file offset @off, a multiple of CXLPOOL_TAIL_ALIGN
 * (pwrite, or a mapping on hugetlbfs, which has no write(2))
 */
int cxlpool_write_at(int fd, uint64_t off, const void *buf, size_t len);

#endif

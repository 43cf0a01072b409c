/*
 * cxl-shm: line engine, the per-64-byte-line coherence operations
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Everything that moves a line between a host's image of the
 * non-coherent area and the shared pool goes through here.  The rules
 * (docs/device.md, "Line operations"):
 *
 * - A line is copied to or from the pool whole and atomically: every pool
 *   line is the 64 bytes of one writeback, every fetched line the 64
 *   bytes of one pool state.  Writers and fetchers of a pool page are
 *   serialised by a lock word in the pool's metadata, shared by all
 *   hosts; a pool write is logged (old bytes) first, so a host that dies
 *   in the middle of one leaves the line as it was, and the next host
 *   that needs the lock rolls it back.
 * - A host never loses its own store: the guest's vCPUs keep storing
 *   into the image while a line is written back or re-fetched, so the
 *   image is read as a consistent snapshot and replaced word by word with
 *   compare-and-swap against that snapshot; a word stored in between is
 *   kept (it happened after the fetch) and leaves the line dirty.
 * - Dirtiness is "image differs from twin", the twin being the pool's
 *   line as this host last fetched or wrote it.
 * - Each lock word has a version word beside it, bumped by every pool
 *   write made under that lock (odd while the writer is at work, as a
 *   seqlock).  A host remembers, per page, the version at which it last
 *   knew its twin of the whole page equal to the pool; while the version
 *   has not moved, no host wrote the page since, so a writeback need not
 *   read the pool (no conflict is possible, the old line is the twin) and
 *   an invalidate need not compare it.
 *
 * - No call waits for another host.  A lock another host holds makes the
 *   call return "busy" (nothing done on that page or line), and the
 *   caller decides: a vCPU re-executes its instruction, the doorbell's
 *   thread tries again, a thread under the BQL gives up.  A contended
 *   lock goes round the hosts that want it (the turn words), so each
 *   wins it in turn.  The only wait left is within this process: a
 *   short spin on a lock another of its threads holds.
 *
 * The engine has no QEMU dependencies beyond qemu/atomic.h, so the unit
 * tests build it for the host and run it from several processes.
 */

#ifndef HW_CXLPOD_CXL_SHM_LINE_H
#define HW_CXLPOD_CXL_SHM_LINE_H

#define CXLSHM_LINE             64
#define CXLSHM_LINE_WORDS       (CXLSHM_LINE / 8)
#define CXLSHM_LOCK_PAGE        4096    /* pool bytes covered by one lock */
#define CXLSHM_NR_LOCKS         8192    /* lock words in the metadata */
#define CXLSHM_UNDO_SLOTS       64      /* per host and bank */
#define CXLSHM_MAX_HOSTS        256
/* a lock turn entry: a bitmap of the hosts waiting, then the last holder */
#define CXLSHM_TURN_WORDS_MAX   (CXLSHM_MAX_HOSTS / 64 + 1)

/* One pool write in progress (docs/pool-format.md, "Undo slots") */
typedef struct CXLShmUndo {
    uint64_t armed;             /* lock tag of the writer, 0 when idle */
    uint64_t offset;            /* pool offset of the line */
    uint8_t old[CXLSHM_LINE];   /* the line before the write */
    uint8_t reserved[48];
} CXLShmUndo;

/*
 * Versions of one lock word that only this host's own writes moved: every
 * bump from @from to @to (the version its last write left) was a write of
 * this host's that kept its in-sync pages in sync
 */
typedef struct CXLShmRun {
    uint64_t from;
    uint64_t to;
} CXLShmRun;

/* A page lock held by one thread (cxl_shm_lines_trylock) */
typedef struct CXLShmLineLock {
    uint64_t *word;             /* NULL when not held */
    uint64_t tag;
    int slot;
    bool writing;               /* this hold's own pool writes began */
} CXLShmLineLock;

typedef enum CXLShmLineOp {
    CXLSHM_LINE_WRITEBACK,      /* copy a dirty line to the pool, keep it */
    CXLSHM_LINE_FLUSH,          /* writeback if dirty, then fetch again */
    CXLSHM_LINE_DROP,           /* fetch again, dirty bytes are lost */
} CXLShmLineOp;

/* A writeback that overwrote another host's data */
typedef struct CXLShmConflict {
    uint64_t offset;            /* pool offset of the line */
    uint64_t mask;              /* bit i: byte i of the other data lost */
    uint8_t base[CXLSHM_LINE];  /* the line when this host fetched it */
    uint8_t theirs[CXLSHM_LINE];/* the pool line just before the write */
    uint8_t mine[CXLSHM_LINE];  /* what this host wrote */
} CXLShmConflict;

typedef struct CXLShmLineCount {
    uint64_t written;           /* lines copied to the pool */
    uint64_t fetched;           /* lines dropped and fetched again */
    uint64_t conflicts;         /* writebacks over another host's data */
    uint64_t in_sync;           /* of written: without reading the pool */
} CXLShmLineCount;

typedef struct CXLShmLines {
    uint8_t *pool;              /* pool data, offset 0 = DPA 0 */
    uint8_t *image;             /* image, offset 0 = DPA coherent_size */
    uint8_t *twin;
    uint64_t coherent_size;
    uint64_t size;
    uint64_t *locks;            /* CXLSHM_NR_LOCKS words, shared */
    CXLShmUndo *undo;           /* [host][bank][slot], shared */
    uint32_t max_hosts;         /* hosts undo holds (0: CXLSHM_MAX_HOSTS) */
    /*
     * Optional (all or none): versions[i], shared, counts the pool writes
     * made under locks[i] (odd while one is in progress); seen[p],
     * private, one word per 4 KiB page of the non-coherent area, is the
     * version + 1 at which this host's twin of page p was last known equal
     * to the pool's (0: not known), zeroed by the owner when the twin is
     * (a host reset); runs[i], private, CXLSHM_NR_LOCKS entries, zeroed
     * at start: this host's own writes under locks[i], so that a write to
     * one page does not take the host's other pages under the same lock
     * word out of sync.
     */
    uint64_t *versions;
    uint64_t *seen;
    /*
     * Optional, shared: turns[i * turn_words ...], the hosts waiting for
     * locks[i] and the last one that took it (cxl-shm-line.c, "Turns"):
     * DIV_ROUND_UP(max hosts, 64) + 1 words each; NULL: no turns
     */
    uint64_t *turns;
    uint32_t turn_words;
    CXLShmRun *runs;
    uint32_t host_id;
    uint64_t generation;
    /* is the owner (host, generation) of a held lock still running? */
    bool (*owner_alive)(void *opaque, uint32_t host, uint64_t generation);
    /* called for each conflict, with the page lock held: keep it short */
    void (*conflict)(void *opaque, const CXLShmConflict *c);
    void *opaque;
    int slot_busy[CXLSHM_UNDO_SLOTS];   /* this process's threads */
} CXLShmLines;

/*
 * [offset, offset + len): lines of the non-coherent area (the caller has
 * validated alignment and bounds; coherent lines are skipped).
 * Thread-safe, lock-free for lines that need no work.  Returns how far
 * it got: offset + len when every line is done, else the start of the
 * first page (or of the range) whose lock another host holds; the lines
 * from there on are untouched, those before it done.
 */
uint64_t cxl_shm_lines_op(CXLShmLines *l, CXLShmLineOp op, uint64_t offset,
                          uint64_t len, CXLShmLineCount *n);

/*
 * One line of the non-coherent area, as cxl_shm_lines_op(), except that
 * the caller says whether it is dirty: a dirty line is written back whole
 * even when its bytes equal the twin's (mode=timed: every store dirties
 * its line, the same value or not), a clean one is not written back.
 * @held, if not NULL, is a lock the caller holds: it is used when it
 * covers the line (a lock is never taken twice).  false, and nothing
 * done, if the line's lock is busy.
 */
bool cxl_shm_lines_one(CXLShmLines *l, CXLShmLineOp op, uint64_t offset,
                       bool dirty, CXLShmLineLock *held, CXLShmLineCount *n);

/*
 * Non-temporal stores to one line of the non-coherent area reach the
 * pool: bit i of @mask set means byte i was stored.  A line that is dirty
 * outside @mask (its image differs from its twin there, or @force: the
 * caller knows it is, mode=timed) is written back whole, as a cache
 * writes back a modified line that a non-temporal store hits.  Otherwise
 * only the bytes in @mask go to the pool, merged into its current line
 * (whatever their value: a non-temporal store always reaches memory), so
 * what other hosts wrote to the rest of the line survives; the twin takes
 * those bytes and the image keeps the rest of the line as it was (as if
 * fetched again before the other hosts' writes: a later read without an
 * invalidate may still see them stale).  @held and the result as for
 * cxl_shm_lines_one().
 */
bool cxl_shm_lines_nt(CXLShmLines *l, uint64_t offset, uint64_t mask,
                      bool force, CXLShmLineLock *held, CXLShmLineCount *n);

/*
 * The lock of @offset (any area), for a caller that makes several
 * accesses of one line atomic across hosts (mode=timed: stores and
 * atomics on the coherent window).  Word (offset / 4096) % 8192 in the
 * non-coherent area, (offset / 64) % 8192 in the coherent window, so
 * coherent line L and snoop-filter set L % 8192 share word L % 8192.
 * The lock is not recursive and covers everything that maps to the same
 * word: never take a second one while holding one.  A holder that dies
 * is detected as for the line operations; coherent lines are never
 * rolled back.
 *
 * cxl_shm_lines_trylock() takes it if that needs no wait (free and this
 * host's turn, or its holder dead); @queue: the caller will try again
 * if it is busy, so this host asks for its turn (docs/pool-format.md,
 * "Lock turns").
 */
void cxl_shm_lines_unlock(CXLShmLines *l, CXLShmLineLock *h);
bool cxl_shm_lines_trylock(CXLShmLines *l, uint64_t offset,
                           CXLShmLineLock *h, bool queue);
/* Does the held @h (word != NULL) also cover @offset? */
bool cxl_shm_lines_lock_covers(CXLShmLines *l, const CXLShmLineLock *h,
                               uint64_t offset);

/*
 * The device itself writes one whole line of its media (a mailbox
 * command's data, not a host's store) under the line's lock, so no host
 * fetches half of it; in the non-coherent area also under the undo log,
 * so a writer that dies half-way is rolled back (in the coherent window,
 * which guests store to without locks, a rollback replayed later would
 * lose their stores: none is logged there).  The host images are not
 * touched (a cached copy of a non-coherent line goes stale, as it would
 * on hardware).  offset is line aligned and inside the pool.  false, and
 * nothing written, if the lock is busy.
 */
bool cxl_shm_lines_media_write(CXLShmLines *l, uint64_t offset,
                               const uint8_t *data);

/*
 * One line of the non-coherent area, as cxl_shm_lines_op() on it, for a
 * caller that does not try again (the eviction timer): it asks for no
 * turn.  false, and nothing done, if the line's lock is busy.
 */
bool cxl_shm_lines_try_line(CXLShmLines *l, CXLShmLineOp op,
                            uint64_t offset, CXLShmLineCount *n);

/*
 * Make image and twin a copy of the pool over [offset, offset + len)
 * (page aligned), dropping whatever the image held; no thread of this
 * process may be inside a line operation.  Pages that are zero in the
 * pool and were never touched in the image stay unpopulated.  Never
 * waits for a lock another host keeps
 * (it may be stopped): such a page is copied without it, the line the
 * holder is writing as it was before (its undo record), and not taken
 * as in sync.
 */
void cxl_shm_lines_load(CXLShmLines *l, uint64_t offset, uint64_t len);

/*
 * Release every lock still held by an earlier generation of this host
 * (it died holding it), rolling back its unfinished pool writes.  Call at
 * join, before the first operation.
 */
void cxl_shm_lines_recover_own(CXLShmLines *l);

#endif

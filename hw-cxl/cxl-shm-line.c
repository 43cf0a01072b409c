/*
 * cxl-shm: line engine (see cxl-shm-line.h for the rules)
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/host-utils.h"
#include "qemu/processor.h"
#include "cxl-shm-line.h"
#include "cxl-shm-format.h"

/*
 * A lock word is 0 when free; its holder writes a tag naming itself
 * (CXLPOOL_TAG, cxl-shm-format.h).
 */
#define LOCK_SPINS              256     /* tries before a lock is busy */
#define LIVENESS_EVERY          16      /* busy locks between owner checks */

typedef CXLShmLineLock Held;

/*
 * The lock word of @offset: per 4 KiB page in the non-coherent area (the
 * line operations walk pages), per line in the coherent window, where a
 * lock also guards the snoop-filter set of the same index (mode=timed).
 */
static uint64_t *page_lock(CXLShmLines *l, uint64_t offset)
{
    uint64_t unit = offset < l->coherent_size ? CXLSHM_LINE
                                              : CXLSHM_LOCK_PAGE;

    return &l->locks[(offset / unit) % CXLSHM_NR_LOCKS];
}

/* The version word beside lock word @word, or NULL without versions */
static uint64_t *word_version(CXLShmLines *l, const uint64_t *word)
{
    return l->versions ? &l->versions[word - l->locks] : NULL;
}

/* What a version will be once the writer at work (odd) releases it */
static inline uint64_t settled(uint64_t v)
{
    return v + (v & 1);
}

/* Does this host keep page versions (versions, seen and runs: all or none)? */
static inline bool has_versions(const CXLShmLines *l)
{
    return l->versions && l->seen && l->runs;
}

static uint64_t *page_seen(CXLShmLines *l, uint64_t off)
{
    return &l->seen[(off - l->coherent_size) / CXLSHM_LOCK_PAGE];
}

/*
 * Is this host's twin of the page of @off (non-coherent) known equal to
 * the pool: has no other host written the page since this host last knew
 * it was?  @locked: the page's lock is held, and the answer is exact; the
 * version may then also have moved by this host's own writes to other
 * pages under the same word (its run).  Without the lock a hint that
 * looks only for the very version, as good as a comparison of the pool
 * without the lock (line_needs_work()).
 */
static bool page_in_sync(CXLShmLines *l, uint64_t off, bool locked)
{
    uint64_t *word, cur, seen;
    const CXLShmRun *r;

    if (!has_versions(l)) {
        return false;
    }
    word = page_lock(l, off);
    cur = settled(qatomic_load_acquire(word_version(l, word)));
    seen = qatomic_read(page_seen(l, off));
    if (!seen) {
        return false;
    }
    if (seen - 1 == cur) {
        return true;
    }
    r = &l->runs[word - l->locks];
    return locked && r->to == cur && r->from <= seen - 1 && seen - 1 <= cur;
}

/*
 * The page of @off stays in sync through this host's own pool write (the
 * pool line and the twin line took the same bytes); its lock is held.
 */
static void page_keep_in_sync(CXLShmLines *l, uint64_t off)
{
    uint64_t *ver;

    if (!has_versions(l)) {
        return;
    }
    ver = word_version(l, page_lock(l, off));
    qatomic_set(page_seen(l, off), settled(qatomic_read(ver)) + 1);
}

/*
 * A pool line under the lock @word (held) is about to change.  @own: a
 * write of this host's line operations, which give the twin the same
 * bytes and so keep every in-sync page in sync; otherwise (a media write,
 * a rollback) this host's run on the word ends.
 */
static void pool_will_change(CXLShmLines *l, uint64_t *word, bool own)
{
    uint64_t *ver = word_version(l, word);
    CXLShmRun *r = l->runs ? &l->runs[word - l->locks] : NULL;
    uint64_t v;

    if (!ver) {
        return;
    }
    v = qatomic_read(ver);
    if (!(v & 1)) {
        qatomic_set(ver, v + 1);
        smp_wmb();  /* odd before the pool changes, as a seqlock */
    }
    if (!r) {
        return;
    }
    if (!own) {
        r->from = r->to = UINT64_MAX;
    } else if (!(v & 1)) {
        if (r->to != v) {
            r->from = v;        /* another host wrote since our last write */
        }
        r->to = v + 2;
    } else if (r->to != v + 1) {
        /* odd, but not by us: a dead writer's write, rolled back */
        r->from = r->to = v + 1;
    }
}

/* Free the lock @word; a version left odd by its writes becomes even */
static void word_release(CXLShmLines *l, uint64_t *word)
{
    uint64_t *ver = word_version(l, word);
    uint64_t v;

    if (ver) {
        v = qatomic_read(ver);
        if (v & 1) {
            smp_wmb();  /* the pool lines before the version (seqlock) */
            qatomic_set(ver, v + 1);
        }
    }
    qatomic_store_release(word, 0);
}

static CXLShmUndo *undo_slot(CXLShmLines *l, uint32_t host, uint64_t gen,
                             int slot)
{
    return &l->undo[(host * 2 + (gen & 1)) * CXLSHM_UNDO_SLOTS + slot];
}

static inline void read8(const uint64_t *src, uint64_t *dst)
{
    dst[0] = qatomic_read(&src[0]);
    dst[1] = qatomic_read(&src[1]);
    dst[2] = qatomic_read(&src[2]);
    dst[3] = qatomic_read(&src[3]);
    dst[4] = qatomic_read(&src[4]);
    dst[5] = qatomic_read(&src[5]);
    dst[6] = qatomic_read(&src[6]);
    dst[7] = qatomic_read(&src[7]);
}

static inline void write8(uint64_t *dst, const uint64_t *src)
{
    int i;

    for (i = 0; i < CXLSHM_LINE_WORDS; i++) {
        qatomic_set(&dst[i], src[i]);
    }
}

/*
 * By hand, not memcmp(): an OR of the eight differences compiles to a few
 * vector instructions where memcmp() is a call (the page loop compares
 * Lines, below)
 */
static inline bool same8(const uint64_t *a, const uint64_t *b)
{
    return !((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) |
             (a[4] ^ b[4]) | (a[5] ^ b[5]) | (a[6] ^ b[6]) | (a[7] ^ b[7]));
}

/*
 * A line as the hot paths hold it: four 16-byte vectors (GCC's vector
 * extension, which clang has too), kept in registers.  A writeback's time
 * per line follows the number of stores it makes (measured: see
 * docs/benchmarks.md, "Writeback at the floor"; the pool line's misses
 * hold the stores after them in the store queue, which drains in order).
 * A line kept in a uint64_t array on the stack costs eight stores more
 * per line, and the 16-byte loads that copy it wait for them (no
 * store-to-load forwarding from two 8-byte stores); held in registers, it
 * goes to the pool, the twin and the undo log with four 16-byte stores
 * each, as a memcpy does.
 */
typedef uint64_t LineQ __attribute__((vector_size(16)));
typedef struct Line {
    LineQ q[CXLSHM_LINE / 16];
} Line;
/* 16 bytes of a line in memory: 8-byte aligned, of any type */
typedef uint64_t LineQMem __attribute__((vector_size(16), aligned(8),
                                         may_alias));

/*
 * An image line, word by word with atomic loads: vCPUs store into the
 * image concurrently, so a word must never be read torn
 */
static inline QEMU_ALWAYS_INLINE Line line_read(const uint64_t *p)
{
    Line x;

    x.q[0] = (LineQ){ qatomic_read(&p[0]), qatomic_read(&p[1]) };
    x.q[1] = (LineQ){ qatomic_read(&p[2]), qatomic_read(&p[3]) };
    x.q[2] = (LineQ){ qatomic_read(&p[4]), qatomic_read(&p[5]) };
    x.q[3] = (LineQ){ qatomic_read(&p[6]), qatomic_read(&p[7]) };
    return x;
}

/*
 * A pool, twin or undo line, copied as memcpy would: a pool line is
 * written and read only by holders of its page lock, the twin and the log
 * only by this process's device code under that lock (the lock-free
 * line_needs_work() reads are a hint, re-checked under it)
 */
static inline QEMU_ALWAYS_INLINE Line line_load(const void *p)
{
    const LineQMem *m = p;
    Line x;

    /* not memcpy() into @x: GCC would keep a copy of it on the stack */
    x.q[0] = m[0];
    x.q[1] = m[1];
    x.q[2] = m[2];
    x.q[3] = m[3];
    return x;
}

static inline QEMU_ALWAYS_INLINE void line_store(void *p, Line x)
{
    LineQMem *m = p;

    m[0] = x.q[0];
    m[1] = x.q[1];
    m[2] = x.q[2];
    m[3] = x.q[3];
}

static inline QEMU_ALWAYS_INLINE bool line_same(Line a, Line b)
{
    LineQ d = (a.q[0] ^ b.q[0]) | (a.q[1] ^ b.q[1]) |
              (a.q[2] ^ b.q[2]) | (a.q[3] ^ b.q[3]);

    return !(d[0] | d[1]);
}

/*
 * A consistent copy of an image line that vCPUs may be storing into: two
 * reads in a row that agree (a store between them shows as a difference).
 * @first is a read of it (line_read()) that the caller took, and may have
 * compared with the twin already; the line is read again until a read
 * agrees with the one before it.
 */
static inline QEMU_ALWAYS_INLINE
Line snapshot(const uint64_t *img, Line first)
{
    Line x = first, y;
    int tries;

    for (tries = 0; tries < 64; tries++) {
        smp_rmb();  /* the second read is not hoisted above the first */
        y = line_read(img);
        if (line_same(x, y)) {
            break;
        }
        x = y;
    }
    return x;
}

/* Each thread of this process takes an undo slot while it holds a lock */
static int slot_claim(CXLShmLines *l)
{
    static int next;
    static __thread int hint = -1;
    int i;

    if (hint < 0) {
        hint = qatomic_fetch_inc(&next) % CXLSHM_UNDO_SLOTS;
    }
    for (i = 0;; i++) {
        int s = (hint + i) % CXLSHM_UNDO_SLOTS;

        if (!qatomic_read(&l->slot_busy[s]) &&
            !qatomic_xchg(&l->slot_busy[s], 1)) {
            return s;
        }
        if (i && s == hint) {
            /* 64 threads of this process inside a lock: they leave soon */
            sched_yield();
        }
    }
}

/*
 * Does the undo area have @tag's slot?  It holds the pool's max-hosts
 * hosts: a tag naming another host was written by no host of this pool.
 */
static bool undo_has(const CXLShmLines *l, uint64_t tag)
{
    uint32_t hosts = l->max_hosts ? l->max_hosts : CXLSHM_MAX_HOSTS;

    return CXLPOOL_TAG_HOST(tag) < hosts &&
           CXLPOOL_TAG_SLOT(tag) < CXLSHM_UNDO_SLOTS;
}

/* A dead writer's unfinished pool write: put the old line back */
static void rollback(CXLShmLines *l, uint64_t *word, uint64_t tag)
{
    uint32_t host = CXLPOOL_TAG_HOST(tag);
    int slot = CXLPOOL_TAG_SLOT(tag);
    CXLShmUndo *u;
    uint64_t off;

    if (!undo_has(l, tag)) {
        return;
    }
    u = undo_slot(l, host, tag, slot);
    if (qatomic_read(&u->armed) != tag) {
        return;
    }
    off = qatomic_read(&u->offset);
    /*
     * Only the non-coherent area: guests store to the coherent window
     * without any lock, so an old undo record there, replayed whenever
     * the lock is next taken, would overwrite their newer stores.
     */
    if (off % CXLSHM_LINE == 0 && off >= l->coherent_size &&
        off < l->size && page_lock(l, off) == word) {
        pool_will_change(l, word, false);
        write8((uint64_t *)(l->pool + off), (const uint64_t *)u->old);
    }
    smp_wmb();  /* the line is restored before the log is disarmed */
    qatomic_set(&u->armed, 0);
}

static bool owner_alive(CXLShmLines *l, uint64_t tag)
{
    uint32_t host = CXLPOOL_TAG_HOST(tag);

    if (host == l->host_id) {
        /*
         * Our own threads, or an earlier life of this host.  A lock of an
         * earlier generation whose undo slot is busy is a live thread's
         * that took it before a reset moved the generation (an atomic's,
         * which the reset gives back): the slot stays busy until the
         * word is free.
         */
        return CXLPOOL_TAG_GEN(tag) ==
               CXLPOOL_TAG_GEN(qatomic_read(&l->generation)) ||
               (CXLPOOL_TAG_SLOT(tag) < CXLSHM_UNDO_SLOTS &&
                qatomic_read(&l->slot_busy[CXLPOOL_TAG_SLOT(tag)]));
    }
    return !l->owner_alive || l->owner_alive(l->opaque, host,
                                             CXLPOOL_TAG_GEN(tag));
}

/*
 * Turns: an optional entry of CXLShmLines::turn_words words beside each
 * lock word (CXLShmLines::turns) that makes a contended lock go round
 * the hosts that want it, so that each of them wins it in turn however
 * fast the others retry.  The first turn_words - 1 words are a bitmap
 * (bit h % 64 of word h / 64 for host h) of the hosts that have been
 * failing to take the lock for more than TURN_AFTER_US and are still
 * retrying; the last word is the host that took it last, + 1 (0: none
 * yet).  A free lock whose entry lists waiters may be taken only by the
 * first of them after the last holder, in host order, round the table.
 * Only a caller that will try again asks for a turn (not a timer or a
 * mailbox command that tries once).  Until a host has waited that long,
 * whoever comes first takes a free lock: a lock handed only in turn
 * would stay free while the host whose turn it is waits for a CPU.  A
 * waiter that stops retrying (stopped, reset, died) keeps its turn for
 * TURN_EXPIRE_US at most: a host that finds the lock free and the entry
 * unchanged for that long drops it, and it joins again when it has
 * waited long again.  Each word is changed on its own (compare-and-swap
 * of one bit, or a store of the last holder): a reader that sees a
 * waiter's bit and an older last holder at once may pick another waiter
 * than the holder will, which only delays the lock, never hands it to
 * two hosts (the lock word decides).
 */
#define TURN_AFTER_US           100
#define TURN_EXPIRE_US          5000

static uint64_t *word_turn(CXLShmLines *l, const uint64_t *word)
{
    return l->turns ? &l->turns[(word - l->locks) * l->turn_words] : NULL;
}

/* A copy of the entry at @turn, word by word */
static void turn_read(const CXLShmLines *l, const uint64_t *turn,
                      uint64_t *t)
{
    uint32_t i;

    for (i = 0; i < l->turn_words; i++) {
        t[i] = qatomic_read(&turn[i]);
    }
}

/* Whose turn is it, by the copy @t of an entry: a host, or -1 for anyone */
static int turn_holder(const CXLShmLines *l, const uint64_t *t)
{
    uint32_t nw = l->turn_words - 1;
    uint32_t start = t[nw] % (nw * 64);     /* after the last holder */
    uint32_t w = start / 64, k;
    uint64_t bits = t[w] & (~0ULL << (start % 64));

    /* round the bitmap from @start; the first word again at the end */
    for (k = 0; k <= nw; k++) {
        if (bits) {
            return w * 64 + ctz64(bits);
        }
        w = (w + 1) % nw;
        bits = t[w];
    }
    return -1;
}

/*
 * The lock this thread has been failing to take, and since when: one at a
 * time (no caller holds one lock while it tries another)
 */
static __thread uint64_t *wait_word;
static __thread int64_t wait_since;

/* Set or clear this host's waiting bit, and record a win */
static void turn_update(CXLShmLines *l, uint64_t *turn, bool won)
{
    uint64_t *mine = &turn[l->host_id / 64];
    uint64_t me = 1ULL << (l->host_id % 64), old;
    uint32_t i, nw = l->turn_words - 1;

    if (won) {
        /* nobody waits long: nothing to record (no shared write) */
        i = 0;
        while (i < nw && !qatomic_read(&turn[i])) {
            i++;
        }
        if (i == nw) {
            return;
        }
        /* the last holder first: see above */
        qatomic_set(&turn[nw], l->host_id + 1);
        if (qatomic_read(mine) & me) {
            qatomic_fetch_and(mine, ~me);
        }
        return;
    }
    old = qatomic_read(mine);
    if (!(old & me)) {
        qatomic_fetch_or(mine, me);
    }
}

/* Microseconds of CLOCK_MONOTONIC (the engine uses no QEMU clock) */
static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/*
 * May this host take the free lock of @turn now?  When another host's
 * turn has stood still for TURN_EXPIRE_US with the lock free, that host
 * is dropped from the entry (it rejoins when it next fails).
 */
static bool turn_mine(CXLShmLines *l, uint64_t *turn)
{
    static __thread uint64_t *stuck_word;
    static __thread uint64_t stuck_val[CXLSHM_TURN_WORDS_MAX];
    static __thread int64_t stuck_since;
    uint64_t t[CXLSHM_TURN_WORDS_MAX];
    int who;

    if (!turn) {
        return true;
    }
    turn_read(l, turn, t);
    who = turn_holder(l, t);
    if (who < 0 || who == (int)l->host_id) {
        return true;
    }
    if (stuck_word != turn ||
        memcmp(stuck_val, t, l->turn_words * sizeof(t[0]))) {
        stuck_word = turn;
        memcpy(stuck_val, t, l->turn_words * sizeof(t[0]));
        stuck_since = now_us();
    } else if (now_us() - stuck_since >= TURN_EXPIRE_US) {
        qatomic_cmpxchg(&turn[who / 64], t[who / 64],
                        t[who / 64] & ~(1ULL << (who % 64)));
        stuck_word = NULL;
    }
    return false;
}

/*
 * Take the lock of @offset if that needs no wait for another host: the
 * lock is free (and this host's turn, if hosts are waiting for it), or
 * its holder is dead (taken over, its write rolled back), or a thread of
 * this process holds it and lets it go within a short spin.  false, and
 * nothing held, otherwise; this host then waits its turn (see above).
 * Never sleeps, never waits for another process.
 */
bool cxl_shm_lines_trylock(CXLShmLines *l, uint64_t offset, Held *h,
                           bool queue)
{
    static __thread unsigned fails;
    uint64_t *turn, old = 0;
    unsigned spins;

    h->word = page_lock(l, offset);
    h->slot = slot_claim(l);
    h->tag = CXLPOOL_TAG(l->host_id, h->slot, qatomic_read(&l->generation));
    h->writing = false;
    turn = word_turn(l, h->word);
    for (spins = 0; spins < LOCK_SPINS; spins++) {
        old = qatomic_read(h->word);
        if (old) {
            cpu_relax();        /* most holds last a few microseconds */
            continue;
        }
        if (!turn_mine(l, turn)) {
            break;
        }
        if (qatomic_cmpxchg(h->word, 0, h->tag) == 0) {
            goto won;
        }
    }
    /*
     * Still held: by a dead host (or an earlier life of this one), taken
     * over and its write rolled back; liveness costs a system call, so
     * another host's is looked at every LIVENESS_EVERY failures only.
     */
    if (old && (CXLPOOL_TAG_HOST(old) == l->host_id ||
                ++fails % LIVENESS_EVERY == 0) &&
        !owner_alive(l, old) &&
        qatomic_cmpxchg(h->word, old, h->tag) == old) {
        rollback(l, h->word, old);
        goto won;
    }
    if (turn && queue) {
        int64_t now = now_us();

        if (wait_word != h->word) {
            wait_word = h->word;
            wait_since = now;
        } else if (now - wait_since >= TURN_AFTER_US) {
            turn_update(l, turn, false);
        }
    }
    qatomic_store_release(&l->slot_busy[h->slot], 0);
    h->word = NULL;
    return false;

won:
    if (turn) {
        if (wait_word == h->word) {
            wait_word = NULL;
        }
        turn_update(l, turn, true);
    }
    return true;
}

void cxl_shm_lines_unlock(CXLShmLines *l, Held *h)
{
    word_release(l, h->word);
    qatomic_store_release(&l->slot_busy[h->slot], 0);
    h->word = NULL;
}

/*
 * Write one pool line, logged so that a death half-way is rolled back.
 * @old is the line's current pool content (the caller has read it, or
 * knows it equal to its twin).  @own: as for pool_will_change().
 */
static inline QEMU_ALWAYS_INLINE
void pool_write(CXLShmLines *l, Held *h, uint64_t off, Line src, Line old,
                bool own)
{
    /* the bank of the lock's generation, which a reset may have moved */
    CXLShmUndo *u = undo_slot(l, l->host_id, CXLPOOL_TAG_GEN(h->tag),
                              h->slot);
    uint8_t *pool = l->pool + off;

    qatomic_set(&u->offset, off);
    line_store(u->old, old);
    smp_wmb();  /* offset and old bytes are logged before the log is armed */
    qatomic_set(&u->armed, h->tag);
    /*
     * Once per hold for its own writes: the version is odd and the run
     * ends at it from the first on, so a second call would change nothing.
     */
    if (!own || !h->writing) {
        pool_will_change(l, h->word, own);
        h->writing = own;
    }
    smp_wmb();  /* armed before the pool line changes */
    line_store(pool, src);
    smp_wmb();  /* the whole line is written before the log is disarmed */
    qatomic_set(&u->armed, 0);
}

/* Did writing @mine over @theirs lose another host's bytes?  Reported */
static bool report_conflict(CXLShmLines *l, uint64_t off, Line base,
                            Line theirs, Line mine)
{
    const uint8_t *b = (const uint8_t *)&base;
    const uint8_t *t = (const uint8_t *)&theirs;
    const uint8_t *m = (const uint8_t *)&mine;
    CXLShmConflict c;
    int i;

    c.offset = off;
    c.mask = 0;
    for (i = 0; i < CXLSHM_LINE; i++) {
        /* another host changed byte i since our fetch, and we overwrite it */
        if (t[i] != b[i] && m[i] != t[i]) {
            c.mask |= 1ULL << i;
        }
    }
    if (!c.mask) {
        return false;
    }
    if (l->conflict) {
        line_store(c.base, base);
        line_store(c.theirs, theirs);
        line_store(c.mine, mine);
        l->conflict(l->opaque, &c);
    }
    return true;
}

/*
 * The image line @img, of which @snap was a snapshot, takes the bytes of
 * @cur (the pool's line) word by word, except where a vCPU stored since
 * the snapshot: that word is newer and stays.  Not inlined into the page
 * loop (only a fetch gets here): its arrays are zeroed wherever they are
 * declared (-ftrivial-auto-var-init=zero, as QEMU builds).
 */
static void line_fetched(uint64_t *img, Line snap, Line cur)
{
    uint64_t s[CXLSHM_LINE_WORDS], c[CXLSHM_LINE_WORDS];
    int w;

    line_store(s, snap);
    line_store(c, cur);
    for (w = 0; w < CXLSHM_LINE_WORDS; w++) {
        if (s[w] != c[w]) {
            qatomic_cmpxchg(&img[w], s[w], c[w]);
        }
    }
}

/*
 * One non-coherent line, its page lock held.  @force: the line is dirty
 * whatever its bytes (written back even when they equal the twin's).
 * @sync: page_in_sync() of the line's page, with the lock held (the pool
 * line is the twin); the caller keeps the page in sync once its lines are
 * done (page_keep_in_sync()).
 */
static inline QEMU_ALWAYS_INLINE
void line_locked(CXLShmLines *l, Held *h, CXLShmLineOp op, uint64_t off,
                 bool force, bool sync, Line first, CXLShmLineCount *n)
{
    uint64_t i = off - l->coherent_size;
    uint64_t *img = (uint64_t *)(l->image + i);
    uint64_t *twin = (uint64_t *)(l->twin + i);
    uint8_t *pool = l->pool + off;
    Line snap = snapshot(img, first);
    Line tw = line_load(twin), cur;

    if (op != CXLSHM_LINE_DROP && (force || !line_same(snap, tw))) {
        if (sync) {
            /* nobody wrote the page since: no conflict, the old line is ours */
            pool_write(l, h, off, snap, tw, true);
            n->in_sync++;
        } else {
            cur = line_load(pool);
            if (!line_same(cur, tw)) {
                n->conflicts += report_conflict(l, off, tw, cur, snap);
            }
            pool_write(l, h, off, snap, cur, true);
        }
        /* the pool before the twin: a line whose twin is new is in the pool */
        smp_wmb();
        line_store(twin, snap);
        tw = snap;
        n->written++;
    }
    if (op == CXLSHM_LINE_WRITEBACK) {
        return;
    }
    if (sync) {
        /* the pool line is the twin: only the image's own bytes go back */
        cur = tw;
    } else {
        cur = line_load(pool);
        if (!line_same(cur, tw)) {
            line_store(twin, cur);
        }
    }
    line_fetched(img, snap, cur);
}

/*
 * The lock of one line: @held when the caller holds the one that covers
 * it (a lock is never taken twice), else taken into @local if that needs
 * no wait; NULL if it would
 */
static Held *lock_line(CXLShmLines *l, uint64_t offset, Held *held,
                       Held *local)
{
    if (held && held->word && held->word == page_lock(l, offset)) {
        return held;
    }
    return cxl_shm_lines_trylock(l, offset, local, true) ? local : NULL;
}

static void unlock_line(CXLShmLines *l, Held *h, Held *local)
{
    if (h == local) {
        cxl_shm_lines_unlock(l, local);
    }
}

/* Do @a and @b differ in a byte outside @mask? */
static bool differ_outside(const uint64_t *a, const uint64_t *b, uint64_t mask)
{
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    int i;

    for (i = 0; i < CXLSHM_LINE; i++) {
        if (!(mask & (1ULL << i)) && x[i] != y[i]) {
            return true;
        }
    }
    return false;
}

/* Non-temporal bytes of one line reach the pool; its page lock held */
static void line_nt_locked(CXLShmLines *l, Held *h, uint64_t off,
                           uint64_t mask, bool force, CXLShmLineCount *n)
{
    uint64_t i = off - l->coherent_size;
    uint64_t *img = (uint64_t *)(l->image + i);
    uint64_t *twin = (uint64_t *)(l->twin + i);
    uint64_t *pool = (uint64_t *)(l->pool + off);
    uint64_t snap[CXLSHM_LINE_WORDS], base[CXLSHM_LINE_WORDS];
    uint64_t cur[CXLSHM_LINE_WORDS], merged[CXLSHM_LINE_WORDS];
    uint8_t *nb = (uint8_t *)merged, *tb = (uint8_t *)twin;
    const uint8_t *sb = (const uint8_t *)snap;
    bool sync = page_in_sync(l, off, true);
    Line s = snapshot(img, line_read(img));
    int b;

    line_store(snap, s);
    memcpy(base, twin, CXLSHM_LINE);
    if (force || differ_outside(snap, base, mask)) {
        /* a modified line leaves the cache whole, the NT bytes with it */
        line_locked(l, h, CXLSHM_LINE_WRITEBACK, off, true, sync, s, n);
        if (sync) {
            page_keep_in_sync(l, off);
        }
        return;
    }
    memcpy(cur, pool, CXLSHM_LINE);
    memcpy(merged, cur, CXLSHM_LINE);
    for (b = 0; b < CXLSHM_LINE; b++) {
        if (mask & (1ULL << b)) {
            nb[b] = sb[b];
        }
    }
    if (!same8(cur, base)) {
        n->conflicts += report_conflict(l, off, line_load(base),
                                        line_load(cur), line_load(merged));
    }
    pool_write(l, h, off, line_load(merged), line_load(cur), true);
    smp_wmb();  /* the pool before the twin, as in line_locked() */
    for (b = 0; b < CXLSHM_LINE; b++) {
        if (mask & (1ULL << b)) {
            tb[b] = sb[b];
        }
    }
    n->written++;
    if (sync) {
        /* the pool was the twin; both took the same bytes */
        page_keep_in_sync(l, off);
    }
}

bool cxl_shm_lines_nt(CXLShmLines *l, uint64_t offset, uint64_t mask,
                      bool force, CXLShmLineLock *held, CXLShmLineCount *n)
{
    Held h, *hp;

    assert(offset % CXLSHM_LINE == 0 && offset >= l->coherent_size &&
           offset < l->size);
    if (!mask && !force) {
        return true;
    }
    hp = lock_line(l, offset, held, &h);
    if (!hp) {
        return false;
    }
    line_nt_locked(l, hp, offset, mask, force, n);
    unlock_line(l, hp, &h);
    return true;
}

/*
 * Does the line need the lock?  Reads only; see the header.  @sync: the
 * page is in sync (page_in_sync()), so the pool line is the twin.
 */
static inline QEMU_ALWAYS_INLINE
bool line_needs_work(CXLShmLines *l, CXLShmLineOp op, uint64_t off, bool sync,
                     Line *first)
{
    uint64_t i = off - l->coherent_size;
    Line tw;

    /* the image read here is the snapshot's first (line_locked()) */
    *first = line_read((const uint64_t *)(l->image + i));
    tw = line_load(l->twin + i);
    if (!line_same(*first, tw)) {
        return true;
    }
    return op != CXLSHM_LINE_WRITEBACK && !sync &&
           !line_same(line_load(l->pool + off), tw);
}

uint64_t cxl_shm_lines_op(CXLShmLines *l, CXLShmLineOp op, uint64_t offset,
                          uint64_t len, CXLShmLineCount *n)
{
    uint64_t start = MAX(offset, l->coherent_size);
    uint64_t end = offset + len;
    uint64_t page, off;
    /* counted here, added to @n once: no store to it per line */
    CXLShmLineCount c = { 0 };

    for (page = start; page < end;
         page = QEMU_ALIGN_DOWN(page, CXLSHM_LOCK_PAGE) + CXLSHM_LOCK_PAGE) {
        uint64_t next = QEMU_ALIGN_DOWN(page, CXLSHM_LOCK_PAGE) +
                        CXLSHM_LOCK_PAGE;
        uint64_t stop = MIN(end, next);
        uint64_t *ver = word_version(l, page_lock(l, page));
        uint64_t v0 = ver ? qatomic_load_acquire(ver) : 1;
        bool sync = page_in_sync(l, page, false);
        /*
         * A whole page fetched ends with its twin equal to the pool: every
         * line was either compared equal or fetched, all while the version
         * stayed v0 (seqlock) or under the lock.
         */
        bool whole = op != CXLSHM_LINE_WRITEBACK && has_versions(l) &&
                     page == next - CXLSHM_LOCK_PAGE && stop == next &&
                     !(v0 & 1);
        Held h = { NULL };

        for (off = page; off < stop; off += CXLSHM_LINE) {
            Line first;

            if (!line_needs_work(l, op, off, sync, &first)) {
                continue;
            }
            if (!h.word) {
                if (!cxl_shm_lines_trylock(l, off, &h, true)) {
                    /* busy: the page's lines are done again next time */
                    end = page;
                    goto out;
                }
                if (whole && qatomic_read(ver) != v0) {
                    whole = false;  /* the lines compared so far may be old */
                }
                sync = page_in_sync(l, off, true);
            }
            line_locked(l, &h, op, off, false, sync, first, &c);
        }
        if (h.word) {
            if (whole || sync) {
                page_keep_in_sync(l, page);
            }
            cxl_shm_lines_unlock(l, &h);
        } else if (whole) {
            smp_rmb();  /* the comparisons before the second read */
            if (qatomic_read(ver) == v0) {
                qatomic_set(page_seen(l, page), v0 + 1);
            }
        }
        if (op != CXLSHM_LINE_WRITEBACK) {
            c.fetched += (stop - page) / CXLSHM_LINE;
        }
    }
out:
    n->written += c.written;
    n->fetched += c.fetched;
    n->conflicts += c.conflicts;
    n->in_sync += c.in_sync;
    return end;
}

/* One line, its lock @h held; its page stays in sync if it was */
static void line_one_locked(CXLShmLines *l, Held *h, CXLShmLineOp op,
                            uint64_t off, bool dirty, CXLShmLineCount *n)
{
    bool sync = page_in_sync(l, off, true);
    Line first = line_read((const uint64_t *)(l->image + off -
                                              l->coherent_size));

    line_locked(l, h, op, off, dirty, sync, first, n);
    if (sync) {
        page_keep_in_sync(l, off);
    }
}

bool cxl_shm_lines_one(CXLShmLines *l, CXLShmLineOp op, uint64_t offset,
                       bool dirty, CXLShmLineLock *held, CXLShmLineCount *n)
{
    Held h, *hp;

    assert(offset % CXLSHM_LINE == 0 && offset >= l->coherent_size &&
           offset < l->size);
    if (op == CXLSHM_LINE_WRITEBACK && !dirty) {
        return true;
    }
    hp = lock_line(l, offset, held, &h);
    if (!hp) {
        return false;
    }
    if (op != CXLSHM_LINE_WRITEBACK) {
        n->fetched++;
    }
    line_one_locked(l, hp, op, offset, dirty, n);
    unlock_line(l, hp, &h);
    return true;
}

bool cxl_shm_lines_lock_covers(CXLShmLines *l, const CXLShmLineLock *h,
                               uint64_t offset)
{
    return h->word && h->word == page_lock(l, offset);
}

bool cxl_shm_lines_try_line(CXLShmLines *l, CXLShmLineOp op,
                            uint64_t offset, CXLShmLineCount *n)
{
    Line first;
    Held h;

    assert(offset % CXLSHM_LINE == 0 && offset >= l->coherent_size &&
           offset < l->size);
    if (line_needs_work(l, op, offset, page_in_sync(l, offset, false),
                        &first)) {
        if (!cxl_shm_lines_trylock(l, offset, &h, false)) {
            return false;
        }
        line_one_locked(l, &h, op, offset, false, n);
        cxl_shm_lines_unlock(l, &h);
    }
    if (op != CXLSHM_LINE_WRITEBACK) {
        n->fetched++;
    }
    return true;
}

bool cxl_shm_lines_media_write(CXLShmLines *l, uint64_t offset,
                               const uint8_t *data)
{
    uint64_t src[CXLSHM_LINE_WORDS];
    Held h = { NULL };

    assert(offset % CXLSHM_LINE == 0 && offset < l->size);
    if (!cxl_shm_lines_trylock(l, offset, &h, false)) {
        return false;
    }
    memcpy(src, data, CXLSHM_LINE);
    if (offset >= l->coherent_size) {
        /* the version moves: every host's twin of the page is now old */
        pool_write(l, &h, offset, line_load(src), line_load(l->pool + offset),
                   false);
    } else {
        /* no undo log: see rollback(); a death here may tear the line */
        write8((uint64_t *)(l->pool + offset), src);
    }
    cxl_shm_lines_unlock(l, &h);
    return true;
}

/*
 * Image and twin of the lines [page, stop) become the pool's, except the
 * line of @u (if not NULL), which becomes the old bytes @u logged
 */
static void load_lines(CXLShmLines *l, uint64_t page, uint64_t stop,
                       const CXLShmUndo *u)
{
    uint64_t off;

    for (off = page; off < stop; off += CXLSHM_LINE) {
        uint64_t i = off - l->coherent_size;
        uint64_t cur[CXLSHM_LINE_WORDS];

        if (u && off == u->offset) {
            memcpy(cur, u->old, CXLSHM_LINE);   /* before its write */
        } else {
            read8((const uint64_t *)(l->pool + off), cur);
        }
        if (!same8(cur, (const uint64_t *)(l->image + i))) {
            write8((uint64_t *)(l->image + i), cur);
        }
        if (!same8(cur, (const uint64_t *)(l->twin + i))) {
            write8((uint64_t *)(l->twin + i), cur);
        }
    }
}

/*
 * Load the lines [page, stop) of a page whose lock another host keeps
 * (tag @tag): it may be stopped, in the middle of a line operation, for
 * as long as it is.  Every line as the pool has it, except the one line
 * the holder may be writing (its undo record armed): that one as it was
 * before the write, which is what a rollback would restore.  The holder
 * must not have moved meanwhile (its lock and its undo record read the
 * same after the copy as before); false if it did (try again).  The page
 * is not taken as in sync.
 */
static bool load_page_busy(CXLShmLines *l, uint64_t *word, uint64_t tag,
                           uint64_t page, uint64_t stop)
{
    uint32_t host = CXLPOOL_TAG_HOST(tag);
    int slot = CXLPOOL_TAG_SLOT(tag);
    CXLShmUndo *u = NULL, snap;
    uint64_t armed = 0, uoff = 0;

    if (undo_has(l, tag)) {
        u = undo_slot(l, host, tag, slot);
        armed = qatomic_load_acquire(&u->armed);
        uoff = qatomic_read(&u->offset);
        memcpy(snap.old, u->old, CXLSHM_LINE);
        snap.offset = armed == tag ? uoff : UINT64_MAX;
    }
    smp_rmb();      /* the record before the lines */
    load_lines(l, page, stop, u ? &snap : NULL);
    smp_rmb();      /* the lines before the second look */
    return qatomic_read(word) == tag &&
           (!u || (qatomic_read(&u->armed) == armed &&
                   qatomic_read(&u->offset) == uoff));
}

/*
 * The lock if it is free now, whoever's turn it is (the load of an
 * image copies pages and takes no part in the turns)
 */
static bool lock_raw(CXLShmLines *l, uint64_t offset, Held *h)
{
    h->word = page_lock(l, offset);
    h->slot = slot_claim(l);
    h->tag = CXLPOOL_TAG(l->host_id, h->slot, qatomic_read(&l->generation));
    h->writing = false;
    if (qatomic_cmpxchg(h->word, 0, h->tag) == 0) {
        return true;
    }
    qatomic_store_release(&l->slot_busy[h->slot], 0);
    h->word = NULL;
    return false;
}

/* A reset's load of a page tries this often before it copies it as it is */
#define LOAD_TRIES              10000

void cxl_shm_lines_load(CXLShmLines *l, uint64_t offset, uint64_t len)
{
    uint64_t start = MAX(offset, l->coherent_size);
    uint64_t end = MIN(offset + len, l->size);
    uint64_t page;

    for (page = start; page < end; page += CXLSHM_LOCK_PAGE) {
        uint64_t stop = MIN(end, page + CXLSHM_LOCK_PAGE);
        uint64_t *word = page_lock(l, page);
        unsigned tries;
        Held h;

        for (tries = 0;; tries++) {
            uint64_t tag;

            if (tries == LOAD_TRIES) {
                /*
                 * Live hosts kept taking the lock word in turn all that
                 * time (8192 words serve the whole pool): the page as it
                 * is now, not taken as in sync, so that an invalidate
                 * fetches it again
                 */
                load_lines(l, page, stop, NULL);
                break;
            }
            if (lock_raw(l, page, &h)) {
                load_lines(l, page, stop, NULL);
                if (page + CXLSHM_LOCK_PAGE <= end) {
                    page_keep_in_sync(l, page);
                }
                cxl_shm_lines_unlock(l, &h);
                break;
            }
            tag = qatomic_read(word);
            if (tag && load_page_busy(l, word, tag, page, stop)) {
                break;
            }
            sched_yield();
        }
    }
}

void cxl_shm_lines_recover_own(CXLShmLines *l)
{
    int i;

    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        uint64_t *word = &l->locks[i];
        uint64_t old = qatomic_read(word);

        /*
         * Not a lock a thread of this process holds (its undo slot is
         * busy): only a dead life's are taken over.  A reset runs with no
         * thread of this process inside a line operation
         * (cxl_shm_host_reset()); an atomic's lock a vCPU left held is
         * given back by mode=timed's reset after this.
         */
        if (old && CXLPOOL_TAG_HOST(old) == l->host_id &&
            CXLPOOL_TAG_GEN(old) != CXLPOOL_TAG_GEN(l->generation) &&
            !(CXLPOOL_TAG_SLOT(old) < CXLSHM_UNDO_SLOTS &&
              qatomic_read(&l->slot_busy[CXLPOOL_TAG_SLOT(old)]))) {
            uint64_t mine = CXLPOOL_TAG(l->host_id, 0, l->generation);

            /* take it over, roll the dead writer back, then free it */
            if (qatomic_cmpxchg(word, old, mine) == old) {
                rollback(l, word, old);
                word_release(l, word);
            }
        }
    }
}

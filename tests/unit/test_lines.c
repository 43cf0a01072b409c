/*
 * Unit tests of the cxl-shm line engine (hw-cxl/cxl-shm-line.c), built
 * for the host: several threads of one host and several processes (hosts)
 * on one shared pool, as the device runs it.
 *
 *   own-stores   vCPU threads store into lines another thread flushes:
 *                no store is ever lost
 *   torn         hosts write whole-line tags into the same lines and fetch
 *                them: every line holds one tag
 *   rollback     a writer that died half-way through a pool write: the next
 *                locker restores the line
 *   conflict     a writeback over another host's newer bytes is reported
 *                with the right mask
 *   exact        only dirty lines are written back; a fetch sees others'
 *                writebacks
 *   in-sync      a page whose version has not moved since the host last
 *                knew its twin equal to the pool is written back without
 *                reading the pool; any other host's write, a media write
 *                or a rollback moves the version, and a writer at work
 *                (odd version) keeps a page from being taken as in sync
 *   in-sync-run  pages 32 MiB apart share a lock word and its version: a
 *                host's own writes to one keep the other in sync, another
 *                host's write or a media write does not
 *   stopped-peer a host whose lock another host keeps while it is stopped
 *                (SIGSTOP): every call returns at once, busy, nothing
 *                changed; the call done again after the peer goes on
 *                completes.  The old engine waited in the call forever.
 *   turns        four hosts that want one lock win it in turn: none is
 *                starved however fast the others retry
 *   reset-holder a lock a thread holds across a host reset (new
 *                generation) stays its own: the reset waits for it
 *                (bounded), and past the bound neither the recovery nor
 *                a thread of the new generation takes it over
 *
 * Every test but in-sync runs twice: without the page versions (the
 * engine reads the pool for every line) and with them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "qemu/osdep.h"
#include "cxl-shm-line.h"
#include "cxl-shm-format.h"

#define COH     (64 * 1024)
#define SIZE    (1024 * 1024)
#define NC      (SIZE - COH)

static int failures;

#define CHECK(cond, ...) do { \
        if (!(cond)) { \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__); \
            printf("\n"); \
            failures++; \
        } \
    } while (0)

static uint8_t *pool;
static uint64_t *locks, *versions, *turns;
/* the host that died: above 127, so that its tag uses all 8 host bits */
#define DEAD            200
/* the turn entries of a pool of CXLSHM_MAX_HOSTS hosts */
#define TURN_WORDS      (DIV_ROUND_UP(CXLSHM_MAX_HOSTS, 64) + 1)
static CXLShmUndo *undo;
static bool use_versions;

static void *shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert(p != MAP_FAILED);
    return p;
}

static void *private(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert(p != MAP_FAILED);
    return p;
}

static void pod_reset(void)
{
    memset(pool, 0, SIZE);
    memset(locks, 0, CXLSHM_NR_LOCKS * 8);
    memset(versions, 0, CXLSHM_NR_LOCKS * 8);
    memset(turns, 0, CXLSHM_NR_LOCKS * TURN_WORDS * 8);
    memset(undo, 0, CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS *
           sizeof(CXLShmUndo));
}

static uint64_t conflicts_seen, conflict_mask, conflict_off;

static void on_conflict(void *opaque, const CXLShmConflict *c)
{
    (void)opaque;
    conflicts_seen++;
    conflict_mask = c->mask;
    conflict_off = c->offset;
}

static bool dead_hosts_alive(void *opaque, uint32_t host, uint64_t gen)
{
    (void)opaque;
    (void)gen;
    return host != DEAD;    /* host DEAD is the one that "died" */
}

/* A host on the pool @p of @size bytes (the coherent window is COH) */
static void host_init_on(CXLShmLines *l, uint32_t id, uint8_t *p,
                         uint64_t size)
{
    memset(l, 0, sizeof(*l));
    l->pool = p;
    l->image = private(size - COH);
    l->twin = private(size - COH);
    l->coherent_size = COH;
    l->size = size;
    l->locks = locks;
    l->turns = turns;
    l->turn_words = TURN_WORDS;
    l->undo = undo;
    if (use_versions) {
        l->versions = versions;
        l->seen = private((size - COH) / CXLSHM_LOCK_PAGE * 8);
        l->runs = private(CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
    }
    l->host_id = id;
    l->generation = 1;
    l->owner_alive = dead_hosts_alive;
    l->conflict = on_conflict;
}

static void host_init(CXLShmLines *l, uint32_t id)
{
    host_init_on(l, id, pool, SIZE);
}

static void host_free(CXLShmLines *l)
{
    uint64_t nc = l->size - COH;

    munmap(l->image, nc);
    munmap(l->twin, nc);
    if (l->seen) {
        munmap(l->seen, nc / CXLSHM_LOCK_PAGE * 8);
        munmap(l->runs, CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
    }
}

static uint64_t *img_word(CXLShmLines *l, uint64_t off, int w)
{
    return (uint64_t *)(l->image + off - COH) + w;
}

/*
 * A range op done whole: the engine never waits for a busy lock (it
 * returns how far it got), so a caller tries again, as the device does
 */
static void op_all(CXLShmLines *l, CXLShmLineOp op, uint64_t off,
                   uint64_t len, CXLShmLineCount *n)
{
    uint64_t end = off + len;

    while ((off = cxl_shm_lines_op(l, op, off, end - off, n)) < end) {
        sched_yield();
    }
}

/* The lock of @off, however long another host keeps it (the tests' own) */
static void lines_lock(CXLShmLines *l, uint64_t off, CXLShmLineLock *h)
{
    while (!cxl_shm_lines_trylock(l, off, h, true)) {
        sched_yield();
    }
}

static void media_write_all(CXLShmLines *l, uint64_t off, const uint8_t *d)
{
    while (!cxl_shm_lines_media_write(l, off, d)) {
        sched_yield();
    }
}

/* --- own-stores ------------------------------------------------------- */

#define OS_LINES        8
#define OS_WRITERS      3
#define OS_ROUNDS       2000000

static CXLShmLines os_host;
static volatile int os_done;  /* stop flag the writer threads poll */
static uint64_t os_lost[OS_WRITERS];

static void *os_writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t last[OS_LINES] = { 0 };
    uint64_t r;
    int i;

    for (r = 1; r <= OS_ROUNDS; r++) {
        for (i = 0; i < OS_LINES; i++) {
            uint64_t *w = img_word(&os_host, COH + 4096 + i * 64, t);

            if (__atomic_load_n(w, __ATOMIC_RELAXED) != last[i]) {
                os_lost[t]++;
            }
            __atomic_store_n(w, r, __ATOMIC_RELAXED);
            last[i] = r;
        }
    }
    return NULL;
}

/*
 * The old device's invalidate, for the sensitivity check: copy the pool
 * line over the image while the vCPUs run.
 */
static void naive_flush(CXLShmLines *l, uint64_t off, uint64_t len)
{
    uint64_t o;

    for (o = off; o < off + len; o += 64) {
        uint8_t *img = l->image + o - COH, *twin = l->twin + o - COH;

        if (memcmp(img, twin, 64)) {
            memcpy(pool + o, img, 64);
            memcpy(twin, img, 64);
        }
        memcpy(img, pool + o, 64);
        memcpy(twin, pool + o, 64);
    }
}

static int os_naive;

static void *os_flusher(void *arg)
{
    CXLShmLineCount n = { 0 };

    (void)arg;
    while (!os_done) {
        if (os_naive) {
            naive_flush(&os_host, COH + 4096, OS_LINES * 64);
            continue;
        }
        op_all(&os_host, CXLSHM_LINE_FLUSH, COH + 4096,
                         OS_LINES * 64, &n);
        op_all(&os_host, CXLSHM_LINE_WRITEBACK, COH + 4096,
                         OS_LINES * 64, &n);
    }
    return NULL;
}

static uint64_t own_stores_run(int naive)
{
    pthread_t w[OS_WRITERS], f;
    uint64_t lost = 0;
    int i;

    pod_reset();
    host_init(&os_host, 0);
    os_naive = naive;
    os_done = 0;
    memset(os_lost, 0, sizeof(os_lost));
    pthread_create(&f, NULL, os_flusher, NULL);
    for (i = 0; i < OS_WRITERS; i++) {
        pthread_create(&w[i], NULL, os_writer, (void *)(intptr_t)i);
    }
    for (i = 0; i < OS_WRITERS; i++) {
        pthread_join(w[i], NULL);
        lost += os_lost[i];
    }
    os_done = 1;
    pthread_join(f, NULL);
    return lost;
}

static void test_own_stores(void)
{
    uint64_t naive = own_stores_run(1);
    uint64_t lost = own_stores_run(0);
    int i;

    printf("own-stores: the old device's copy-over lost %llu stores "
           "(sensitivity check)\n", (unsigned long long)naive);
    CHECK(lost == 0, "%llu of %d stores lost", (unsigned long long)lost,
          OS_WRITERS * OS_LINES * OS_ROUNDS);
    /* and the last values reach the pool */
    {
        CXLShmLineCount n = { 0 };

        op_all(&os_host, CXLSHM_LINE_WRITEBACK, COH + 4096,
                         OS_LINES * 64, &n);
        for (i = 0; i < OS_WRITERS; i++) {
            uint64_t v = *((uint64_t *)(pool + COH + 4096) + i);

            CHECK(v == OS_ROUNDS, "word %d in the pool is %llu", i,
                  (unsigned long long)v);
        }
    }
    printf("own-stores: %d writers x %d lines x %d rounds, %llu lost\n",
           OS_WRITERS, OS_LINES, OS_ROUNDS, (unsigned long long)lost);
    host_free(&os_host);
}

/* --- torn ------------------------------------------------------------- */

#define TORN_HOSTS      3
#define TORN_LINES      16
#define TORN_ROUNDS     20000

static int torn_child(uint32_t id)
{
    CXLShmLines l;
    uint64_t round, torn = 0, off;
    int i, w;

    host_init(&l, id);
    for (round = 1; round <= TORN_ROUNDS; round++) {
        CXLShmLineCount n = { 0 };
        uint64_t tag = ((uint64_t)id << 32) | round;

        for (i = 0; i < TORN_LINES; i++) {
            off = COH + 8192 + i * 64;
            for (w = 0; w < 8; w++) {
                *img_word(&l, off, w) = tag;
            }
        }
        op_all(&l, CXLSHM_LINE_WRITEBACK, COH + 8192,
                         TORN_LINES * 64, &n);
        op_all(&l, CXLSHM_LINE_DROP, COH + 8192,
                         TORN_LINES * 64, &n);
        for (i = 0; i < TORN_LINES; i++) {
            off = COH + 8192 + i * 64;
            for (w = 1; w < 8; w++) {
                if (*img_word(&l, off, w) != *img_word(&l, off, 0)) {
                    torn++;
                    break;
                }
            }
        }
    }
    if (torn) {
        printf("host %u: %llu torn lines fetched\n", id,
               (unsigned long long)torn);
    }
    return torn ? 1 : 0;
}

static void test_torn(void)
{
    pid_t pid[TORN_HOSTS];
    int i, st, bad = 0, w;

    pod_reset();
    for (i = 0; i < TORN_HOSTS; i++) {
        pid[i] = fork();
        assert(pid[i] >= 0);
        if (pid[i] == 0) {
            _exit(torn_child(i));
        }
    }
    for (i = 0; i < TORN_HOSTS; i++) {
        waitpid(pid[i], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECK(bad == 0, "%d hosts fetched torn lines", bad);
    for (i = 0; i < TORN_LINES; i++) {
        const uint64_t *p = (const uint64_t *)(pool + COH + 8192 + i * 64);

        for (w = 1; w < 8; w++) {
            CHECK(p[w] == p[0], "pool line %d torn", i);
        }
    }
    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        CHECK(locks[i] == 0, "lock %d left held", i);
    }
    printf("torn: %d hosts x %d lines x %d rounds, %d hosts saw torn lines\n",
           TORN_HOSTS, TORN_LINES, TORN_ROUNDS, bad);
}

/* --- rollback --------------------------------------------------------- */

/*
 * Host DEAD (generation @gen, undo slot @slot) locked the page of @off,
 * logged the old line (0x1111 words), wrote half of a new one and died.
 * Returns its undo slot.
 */
/*
 * The lock word of @off: per page in the non-coherent area, per line in
 * the coherent window (cxl-shm-line.h)
 */
static uint64_t *lock_word(uint64_t off)
{
    return &locks[(off / (off < COH ? CXLSHM_LINE : CXLSHM_LOCK_PAGE)) %
                  CXLSHM_NR_LOCKS];
}

static CXLShmUndo *dead_half_write(uint64_t off, uint64_t gen, uint64_t slot)
{
    uint64_t tag = CXLPOOL_TAG(DEAD, slot, gen);
    CXLShmUndo *u = &undo[(DEAD * 2 + (gen & 1)) * CXLSHM_UNDO_SLOTS + slot];
    uint64_t *p = (uint64_t *)(pool + off);
    int w;

    for (w = 0; w < 8; w++) {
        p[w] = 0x1111;
        ((uint64_t *)u->old)[w] = 0x1111;
    }
    u->offset = off;
    u->armed = tag;
    for (w = 0; w < 4; w++) {
        p[w] = 0x2222;
    }
    *lock_word(off) = tag;
    return u;
}

static void test_rollback(void)
{
    CXLShmLines l;
    CXLShmLineCount n = { 0 };
    uint64_t off = COH + 3 * 4096 + 128;
    uint64_t *p = (uint64_t *)(pool + off);
    CXLShmUndo *u;
    int w;

    pod_reset();
    u = dead_half_write(off, 5, 2);

    host_init(&l, 0);
    op_all(&l, CXLSHM_LINE_FLUSH, off, 64, &n);
    for (w = 0; w < 8; w++) {
        CHECK(p[w] == 0x1111, "pool word %d is 0x%llx after rollback", w,
              (unsigned long long)p[w]);
        CHECK(*img_word(&l, off, w) == 0x1111, "fetched word %d torn", w);
    }
    CHECK(u->armed == 0, "undo slot still armed");
    CHECK(locks[(off / 4096) % CXLSHM_NR_LOCKS] == 0, "lock not released");
    printf("rollback: a dead writer's half-written line restored\n");
    host_free(&l);
}

/* --- conflict ----------------------------------------------------------- */

static void test_conflict(void)
{
    CXLShmLines a, b;
    CXLShmLineCount n = { 0 };
    uint64_t off = COH + 5 * 4096;

    pod_reset();
    host_init(&a, 0);
    host_init(&b, 1);
    conflicts_seen = 0;
    /* b writes bytes 8..15 and publishes; a, stale, writes bytes 0..7 */
    *img_word(&b, off, 1) = 0xbbbbbbbbbbbbbbbbULL;
    op_all(&b, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    CHECK(n.conflicts == 0 && conflicts_seen == 0, "b had no conflict");
    *img_word(&a, off, 0) = 0xaaaaaaaaaaaaaaaaULL;
    op_all(&a, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    CHECK(n.conflicts == 1, "%llu conflicts", (unsigned long long)n.conflicts);
    CHECK(conflicts_seen == 1 && conflict_off == off &&
          conflict_mask == 0xff00ULL, "conflict at 0x%llx mask 0x%llx",
          (unsigned long long)conflict_off,
          (unsigned long long)conflict_mask);
    /* false sharing clobbers: b's bytes are gone from the pool */
    CHECK(*(uint64_t *)(pool + off + 8) == 0, "b's word survived");
    /* a line a fetched again and wrote is no conflict */
    op_all(&a, CXLSHM_LINE_FLUSH, off, 64, &n);
    *img_word(&a, off, 2) = 1;
    op_all(&a, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    CHECK(n.conflicts == 1, "spurious conflict");
    printf("conflict: reported with mask 0x%llx\n",
           (unsigned long long)conflict_mask);
    host_free(&a);
    host_free(&b);
}

/* --- exact ------------------------------------------------------------ */

static void test_exact(void)
{
    CXLShmLines a, b;
    CXLShmLineCount n = { 0 };
    uint64_t base = COH + 16 * 4096;

    pod_reset();
    host_init(&a, 0);
    host_init(&b, 1);
    op_all(&a, CXLSHM_LINE_WRITEBACK, base, 8 * 4096, &n);
    CHECK(n.written == 0, "clean lines written back");
    *img_word(&a, base + 64, 3) = 42;
    *img_word(&a, base + 4096 + 128, 0) = 43;
    op_all(&a, CXLSHM_LINE_WRITEBACK, base, 8 * 4096, &n);
    CHECK(n.written == 2, "%llu lines written", (unsigned long long)n.written);
    CHECK(*img_word(&b, base + 64, 3) == 0, "b saw a's store unfetched");
    n = (CXLShmLineCount){ 0 };
    op_all(&b, CXLSHM_LINE_FLUSH, base, 8 * 4096, &n);
    CHECK(n.fetched == 8 * 64, "%llu lines dropped",
          (unsigned long long)n.fetched);
    CHECK(*img_word(&b, base + 64, 3) == 42 &&
          *img_word(&b, base + 4096 + 128, 0) == 43, "b missed a's lines");
    /* drop loses a dirty line */
    *img_word(&b, base, 0) = 7;
    op_all(&b, CXLSHM_LINE_DROP, base, 64, &n);
    CHECK(*img_word(&b, base, 0) == 0 && *(uint64_t *)(pool + base) == 0,
          "drop kept or wrote the dirty line");
    /* coherent lines are skipped */
    n = (CXLShmLineCount){ 0 };
    op_all(&b, CXLSHM_LINE_FLUSH, 0, COH, &n);
    CHECK(n.fetched == 0 && n.written == 0, "coherent lines touched");
    printf("exact: dirty lines only, fetch sees the other host\n");
    host_free(&a);
    host_free(&b);
}

/* --- nt ---------------------------------------------------------------- */

/*
 * Non-temporal stores write only their bytes: a stale line around them
 * does not clobber what another host wrote back meanwhile, a same-value
 * non-temporal byte still lands, and a line that cached stores dirtied
 * goes whole (as a modified line leaves the cache).
 */
static void test_nt(void)
{
    CXLShmLines a, b;
    CXLShmLineCount n = { 0 };
    uint64_t off = COH + 9 * 4096, off2 = off + 64;

    pod_reset();
    host_init(&a, 0);
    host_init(&b, 1);
    conflicts_seen = 0;
    /* a holds the line clean (zeros); b writes word 4 and writes it back */
    *img_word(&b, off, 4) = 0xbbbbbbbbbbbbbbbbULL;
    *img_word(&b, off, 0) = 0xb0b0b0b0b0b0b0b0ULL;
    op_all(&b, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    /* a stores word 1 non-temporally, and word 0 with its old value */
    *img_word(&a, off, 1) = 0xaaaaaaaaaaaaaaaaULL;
    n = (CXLShmLineCount){ 0 };
    cxl_shm_lines_nt(&a, off, 0xffffULL, false, NULL, &n);
    CHECK(n.written == 1, "%llu lines written", (unsigned long long)n.written);
    CHECK(*(uint64_t *)(pool + off + 8) == 0xaaaaaaaaaaaaaaaaULL,
          "a's non-temporal word missing");
    CHECK(*(uint64_t *)(pool + off + 32) == 0xbbbbbbbbbbbbbbbbULL,
          "b's word clobbered by a's stale line");
    CHECK(*(uint64_t *)(pool + off) == 0,
          "a's same-value non-temporal word did not land");
    /* b's word 0 was overwritten by a's store to it: one conflict */
    CHECK(n.conflicts == 1 && conflict_mask == 0xffULL,
          "conflicts %llu mask 0x%llx", (unsigned long long)n.conflicts,
          (unsigned long long)conflict_mask);
    /* a's line is clean again: a writeback writes nothing */
    n = (CXLShmLineCount){ 0 };
    op_all(&a, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    CHECK(n.written == 0, "line still dirty after its non-temporal bytes");
    /* a cached store elsewhere in the line: the whole line goes */
    *img_word(&b, off2, 4) = 0xbbbbbbbbbbbbbbbbULL;
    op_all(&b, CXLSHM_LINE_WRITEBACK, off2, 64, &n);
    *img_word(&a, off2, 7) = 0x77;      /* cached */
    *img_word(&a, off2, 1) = 0x11;      /* non-temporal */
    cxl_shm_lines_nt(&a, off2, 0xff00ULL, false, NULL, &n);
    CHECK(*(uint64_t *)(pool + off2 + 56) == 0x77 &&
          *(uint64_t *)(pool + off2 + 8) == 0x11 &&
          *(uint64_t *)(pool + off2 + 32) == 0,
          "a dirty line was not written back whole");
    /* @force: dirty whatever the bytes (mode=timed) */
    op_all(&a, CXLSHM_LINE_FLUSH, off2, 64, &n);
    *img_word(&b, off2, 5) = 0x55;
    op_all(&b, CXLSHM_LINE_FLUSH, off2, 64, &n);
    cxl_shm_lines_nt(&a, off2, 0xffULL, true, NULL, &n);
    CHECK(*(uint64_t *)(pool + off2 + 40) == 0,
          "a forced line was not written back whole");
    printf("nt: only the stored bytes land on a clean line\n");
    host_free(&a);
    host_free(&b);
}

/* --- media-write ------------------------------------------------------ */

/*
 * The device's own whole-line write (mailbox Clear Poison): lands in the
 * pool in either area, leaves the host's cached copy alone, releases the
 * lock, and is rolled back when its writer dies half-way.
 */
static void test_media_write(void)
{
    CXLShmLines a;
    CXLShmLineCount n = { 0 };
    uint8_t data[CXLSHM_LINE];
    uint64_t nc = COH + 5 * 4096 + 192, *p;
    int w;

    pod_reset();
    host_init(&a, 0);
    memset(data, 0x5a, sizeof(data));
    media_write_all(&a, 4096 + 64, data);
    CHECK(!memcmp(pool + 4096 + 64, data, CXLSHM_LINE),
          "coherent line not written");
    media_write_all(&a, nc, data);
    CHECK(!memcmp(pool + nc, data, CXLSHM_LINE), "non-coherent line not "
          "written");
    CHECK(*img_word(&a, nc, 0) == 0, "the host's cached copy changed");
    CHECK(*lock_word(nc) == 0 && *lock_word(4096 + 64) == 0,
          "lock still held");
    op_all(&a, CXLSHM_LINE_FLUSH, nc, CXLSHM_LINE, &n);
    CHECK(*img_word(&a, nc, 7) == 0x5a5a5a5a5a5a5a5aULL, "not fetched");

    /* a coherent line has a lock word of its own, the next line another */
    {
        CXLShmLineLock h = { NULL };

        lines_lock(&a, 4096 + 64, &h);
        CHECK(h.word == lock_word(4096 + 64) && *h.word,
              "coherent line 65 not locked by word 65");
        CHECK(!cxl_shm_lines_lock_covers(&a, &h, 4096 + 128),
              "one lock covers two coherent lines");
        CHECK(cxl_shm_lines_lock_covers(&a, &h, 4096 + 64 + 32),
              "the lock does not cover its own line");
        cxl_shm_lines_unlock(&a, &h);
    }

    /*
     * Host DEAD (gen 5) died half-way through a media write of a
     * non-coherent line: the next media write on that page rolls it back
     * first.  In the coherent window the same record is not replayed
     * (guests stored there since, without locks): the line's lock is
     * taken over and the words stay as they are.
     */
    for (w = 0; w < 2; w++) {
        uint64_t off = (w ? 2 * 4096 : COH + 2 * 4096) + 64;
        CXLShmUndo *u = dead_half_write(off, 5, 3);
        int k;

        p = (uint64_t *)(pool + off);
        if (w) {
            CXLShmLineLock h = { NULL };

            lines_lock(&a, off, &h);
            cxl_shm_lines_unlock(&a, &h);
        }
        media_write_all(&a, off + 128, data);
        for (k = 0; k < CXLSHM_LINE_WORDS; k++) {
            uint64_t want = !w || k >= 4 ? 0x1111 : 0x2222;

            CHECK(p[k] == want, "%s word %d is 0x%llx, expected 0x%llx",
                  w ? "coherent" : "non-coherent", k,
                  (unsigned long long)p[k], (unsigned long long)want);
        }
        CHECK(!memcmp(pool + off + 128, data, CXLSHM_LINE), "line not "
              "written after taking over the dead writer's lock");
        CHECK(u->armed == 0, "undo slot still armed");
    }
    printf("media-write: whole line in either area, image untouched\n");
    host_free(&a);
}

/* --- in-sync ---------------------------------------------------------- */

static uint64_t *version_of(uint64_t off)
{
    return &versions[lock_word(off) - locks];
}

/* One dirty line of @l written back: was it in sync (no pool read)? */
static bool wb_in_sync(CXLShmLines *l, uint64_t off, uint64_t val)
{
    CXLShmLineCount n = { 0 };

    *img_word(l, off, 5) = val;
    op_all(l, CXLSHM_LINE_WRITEBACK, off, 64, &n);
    CHECK(n.written == 1, "line 0x%llx not written back",
          (unsigned long long)off);
    return n.in_sync == 1;
}

static void test_in_sync(void)
{
    CXLShmLines a, b;
    CXLShmLineCount n = { 0 };
    uint64_t page = COH + 40 * 4096, v;
    CXLShmUndo *u;

    pod_reset();
    host_init(&a, 0);
    host_init(&b, 1);
    conflicts_seen = 0;

    /* never fetched: not in sync, the pool is read */
    CHECK(!wb_in_sync(&a, page, 1), "a page never fetched is in sync");
    /* a whole page fetched is; it stays so through a's own writebacks */
    op_all(&a, CXLSHM_LINE_FLUSH, page, 4096, &n);
    CHECK(wb_in_sync(&a, page + 64, 2), "a fetched page is not in sync");
    CHECK(wb_in_sync(&a, page + 128, 3), "own writeback left sync");
    CHECK(*(uint64_t *)(pool + page + 128 + 40) == 3, "in-sync line lost");
    v = *version_of(page);
    CHECK(v && !(v & 1), "version %llu after writes", (unsigned long long)v);

    /* b writes a line of the page: a is out of sync and sees b's line */
    op_all(&b, CXLSHM_LINE_FLUSH, page, 4096, &n);
    CHECK(wb_in_sync(&b, page + 192, 0xb0b), "b's fetched page not in sync");
    CHECK(*version_of(page) == v + 2, "b's write did not move the version");
    op_all(&a, CXLSHM_LINE_DROP, page, 4096, &n);
    CHECK(*img_word(&a, page + 192, 5) == 0xb0b, "a's invalidate of an "
          "in-sync page missed b's writeback");
    /* that whole-page fetch made a in sync again; b now conflicts */
    CHECK(wb_in_sync(&a, page + 192, 0xa0a), "refetched page not in sync");
    *img_word(&b, page + 192, 6) = 0xbad;
    n = (CXLShmLineCount){ 0 };
    op_all(&b, CXLSHM_LINE_WRITEBACK, page + 192, 64, &n);
    CHECK(n.conflicts == 1 && n.in_sync == 0,
          "b wrote over a's newer line: %llu conflicts, %llu in sync",
          (unsigned long long)n.conflicts, (unsigned long long)n.in_sync);

    /* a write to a page under another lock word leaves a page in sync */
    op_all(&a, CXLSHM_LINE_FLUSH, page, 4096, &n);
    op_all(&b, CXLSHM_LINE_FLUSH, page + 4096, 4096, &n);
    CHECK(wb_in_sync(&a, page, 4), "not in sync after a flush");
    CHECK(wb_in_sync(&b, page + 4096, 5), "a's write to another page took "
          "b's page out of sync");

    /* a media write moves the version: the writer's own twin is old too */
    op_all(&a, CXLSHM_LINE_FLUSH, page, 4096, &n);
    {
        uint8_t data[CXLSHM_LINE];

        memset(data, 0x5e, sizeof(data));
        media_write_all(&a, page + 256, data);
    }
    CHECK(!wb_in_sync(&a, page + 320, 6), "in sync after a media write");
    op_all(&a, CXLSHM_LINE_DROP, page + 256, 64, &n);
    CHECK(*img_word(&a, page + 256, 0) == 0x5e5e5e5e5e5e5e5eULL,
          "media write not fetched");

    /* a writer at work (odd version): a fetch must not take it as in sync */
    op_all(&a, CXLSHM_LINE_FLUSH, page, 4096, &n);
    (*version_of(page))++;
    op_all(&b, CXLSHM_LINE_FLUSH, page, 4096, &n);
    (*version_of(page))++;
    CHECK(!wb_in_sync(&b, page + 384, 7), "in sync while a writer was at "
          "work");
    CHECK(!wb_in_sync(&a, page + 448, 8), "a in sync across b's write");

    /* a dead writer rolled back moves the version */
    op_all(&a, CXLSHM_LINE_FLUSH, page, 4096, &n);
    v = *version_of(page);
    u = dead_half_write(page + 512, 5, 4);
    op_all(&b, CXLSHM_LINE_FLUSH, page + 512, 64, &n);
    CHECK(u->armed == 0 && *version_of(page) == v + 2, "rollback: armed "
          "%llx, version %llu -> %llu", (unsigned long long)u->armed,
          (unsigned long long)v, (unsigned long long)*version_of(page));
    CHECK(!wb_in_sync(&a, page + 576, 9), "in sync across a rollback");
    CHECK(locks[lock_word(page) - locks] == 0, "lock left held");
    printf("in-sync: skipped pool reads only while no other write moved "
           "the version\n");
    host_free(&a);
    host_free(&b);
}

static void test_in_sync_run(void)
{
    const uint64_t size = COH + 33 * 1024 * 1024;
    const uint64_t p1 = COH + 4096 * 3;
    const uint64_t p2 = p1 + (uint64_t)CXLSHM_NR_LOCKS * 4096;
    uint8_t *big = shared(size);
    CXLShmLines a, b;
    CXLShmLineCount n = { 0 };
    uint8_t data[CXLSHM_LINE];

    memset(locks, 0, CXLSHM_NR_LOCKS * 8);
    memset(versions, 0, CXLSHM_NR_LOCKS * 8);
    host_init_on(&a, 0, big, size);
    host_init_on(&b, 1, big, size);
    CHECK(lock_word(p1) == lock_word(p2), "pages not on one lock word");

    op_all(&a, CXLSHM_LINE_FLUSH, p1, 4096, &n);
    op_all(&a, CXLSHM_LINE_FLUSH, p2, 4096, &n);
    /* a's writes to p1 move the version p2 shares: p2 stays in sync */
    CHECK(wb_in_sync(&a, p1, 1) && wb_in_sync(&a, p1 + 64, 2),
          "p1 not in sync");
    CHECK(wb_in_sync(&a, p2, 3), "a's own write to p1 took p2 out of sync");
    CHECK(wb_in_sync(&a, p1 + 128, 4), "a's own write to p2 took p1 out");
    /* b's write to p1: a's run ends, neither page is in sync for a */
    op_all(&b, CXLSHM_LINE_FLUSH, p1, 4096, &n);
    CHECK(wb_in_sync(&b, p1 + 192, 5), "b's fetched page not in sync");
    CHECK(!wb_in_sync(&a, p2 + 64, 6), "p2 in sync across b's write");
    n = (CXLShmLineCount){ 0 };
    *((uint64_t *)(a.image + p1 + 192 - COH) + 6) = 7;
    op_all(&a, CXLSHM_LINE_WRITEBACK, p1 + 192, 64, &n);
    CHECK(n.in_sync == 0 && n.conflicts == 1, "a wrote over b's line in "
          "sync (%llu) or without a conflict (%llu)",
          (unsigned long long)n.in_sync, (unsigned long long)n.conflicts);
    /* a media write of a's ends the run too */
    op_all(&a, CXLSHM_LINE_FLUSH, p1, 4096, &n);
    op_all(&a, CXLSHM_LINE_FLUSH, p2, 4096, &n);
    CHECK(wb_in_sync(&a, p1, 8), "p1 not in sync after a flush");
    memset(data, 0x77, sizeof(data));
    media_write_all(&a, p1 + 256, data);
    CHECK(!wb_in_sync(&a, p2 + 128, 9), "p2 in sync across a media write");
    printf("in-sync-run: a host's own writes keep its pages on one lock "
           "word in sync, nobody else's do\n");
    host_free(&a);
    host_free(&b);
    munmap(big, size);
}

/* --- reset-holder ------------------------------------------------------ */

/*
 * A host reset (a new generation, then the recovery of the earlier
 * lives' locks) while a thread of this process is inside a line lock (in
 * the device only an atomic's lock a vCPU left held, which mode=timed's
 * reset gives back after this): that lock stays its holder's.  Another
 * thread of the host that needs the same lock word after the reset
 * finds it busy, as before the reset; it never takes the lock over as a
 * dead life's.
 */
static CXLShmLines rh_host;
static volatile int rh_release, rh_held, rh_done;
static uint64_t rh_value;

static void *rh_holder(void *arg)
{
    CXLShmLineLock h = { NULL };

    (void)arg;
    lines_lock(&rh_host, COH + 4096, &h);
    rh_held = 1;
    while (!rh_release) {
        usleep(1000);
    }
    cxl_shm_lines_unlock(&rh_host, &h);
    return NULL;
}

static void *rh_other(void *arg)
{
    CXLShmLineCount n = { 0 };

    (void)arg;
    *img_word(&rh_host, COH + 4096 + 64, 0) = rh_value;
    op_all(&rh_host, CXLSHM_LINE_WRITEBACK, COH + 4096 + 64, 64, &n);
    rh_done = 1;
    return NULL;
}

static void test_reset_holder(void)
{
    pthread_t holder, other;
    uint64_t tag;
    int i;

    pod_reset();
    host_init(&rh_host, 0);
    rh_release = rh_held = rh_done = 0;
    rh_value = 0x77;
    pthread_create(&holder, NULL, rh_holder, NULL);
    while (!rh_held) {
        usleep(100);
    }
    tag = *lock_word(COH + 4096);

    /* the reset as the device runs it: a new generation, then recovery */
    rh_host.generation++;
    cxl_shm_lines_recover_own(&rh_host);
    CHECK(*lock_word(COH + 4096) == tag, "the reset took over a lock its "
          "live thread holds");

    pthread_create(&other, NULL, rh_other, NULL);
    for (i = 0; i < 200 && !rh_done; i++) {
        usleep(1000);
    }
    CHECK(!rh_done, "a thread of the new generation took the lock another "
          "thread of the host holds (mutual exclusion broken)");
    CHECK(*lock_word(COH + 4096) == tag || rh_done, "lock word changed");
    rh_release = 1;
    pthread_join(holder, NULL);
    pthread_join(other, NULL);
    CHECK(*(uint64_t *)(pool + COH + 4096 + 64) == 0x77,
          "the writeback after the holder left did not land");
    CHECK(*lock_word(COH + 4096) == 0, "lock still held");
    printf("reset-holder: a lock a live thread holds across a reset stays "
           "its holder's\n");
    host_free(&rh_host);
}

/* --- stopped-peer ------------------------------------------------------ */

static volatile int *sp_flag;   /* shared: 1 once the child holds the lock */

static void sp_alarm(int sig)
{
    (void)sig;
    printf("FAIL stopped-peer: a call waited for the stopped host\n");
    _exit(1);
}

static void test_stopped_peer(void)
{
    const uint64_t page = COH + 6 * 4096, line = page + 128;
    CXLShmLines a;
    CXLShmLineCount n = { 0 };
    CXLShmLineLock h = { NULL };
    uint8_t data[CXLSHM_LINE];
    uint64_t got, t;
    int64_t t0, took;
    pid_t pid;
    int st;

    pod_reset();
    sp_flag = shared(sizeof(int));
    *sp_flag = 0;
    pid = fork();
    assert(pid >= 0);
    if (pid == 0) {
        CXLShmLines b;

        host_init(&b, 1);
        lines_lock(&b, page, &h);
        *sp_flag = 1;
        raise(SIGSTOP);         /* a stopped QEMU holding the lock */
        cxl_shm_lines_unlock(&b, &h);
        _exit(0);
    }
    while (!*sp_flag) {
        usleep(100);
    }
    host_init(&a, 0);
    *img_word(&a, line, 0) = 0xabcd;
    memset(data, 0x33, sizeof(data));
    signal(SIGALRM, sp_alarm);
    alarm(10);
    t0 = g_get_monotonic_time();
    got = cxl_shm_lines_op(&a, CXLSHM_LINE_WRITEBACK, page, 4096, &n);
    took = g_get_monotonic_time() - t0;
    CHECK(got == page, "writeback got to 0x%llx, not busy at the page",
          (unsigned long long)got);
    CHECK(*(uint64_t *)(pool + line) == 0, "the pool changed");
    CHECK(n.written == 0, "%llu lines counted written",
          (unsigned long long)n.written);
    CHECK(!cxl_shm_lines_trylock(&a, page + 64, &h, true), "trylock took a "
          "stopped host's lock");
    CHECK(!cxl_shm_lines_one(&a, CXLSHM_LINE_FLUSH, line, false, NULL, &n),
          "lines_one did not report busy");
    CHECK(!cxl_shm_lines_nt(&a, line, 0xff, false, NULL, &n),
          "lines_nt did not report busy");
    CHECK(!cxl_shm_lines_media_write(&a, line, data), "media write did "
          "not report busy");
    CHECK(*(uint64_t *)(pool + line) == 0 && *img_word(&a, line, 0) == 0xabcd,
          "a busy call changed the pool or the image");
    /* a few hundred more tries, as a vCPU would make: none waits */
    for (st = 0; st < 300; st++) {
        cxl_shm_lines_op(&a, CXLSHM_LINE_WRITEBACK, page, 4096, &n);
    }
    alarm(0);
    /* it has waited long now: it asks for its turn */
    usleep(200);
    cxl_shm_lines_op(&a, CXLSHM_LINE_WRITEBACK, page, 4096, &n);
    t = turns[(page / 4096) % CXLSHM_NR_LOCKS * TURN_WORDS];
    CHECK(t & 1, "host 0 is not listed as waiting (turn word 0x%llx)",
          (unsigned long long)t);
    took = MAX(took, (g_get_monotonic_time() - t0) / 300);
    printf("stopped-peer: busy in %lld us a call (the old engine waited "
           "until the holder went on)\n", (long long)took);

    kill(pid, SIGCONT);
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "holder failed");
    got = cxl_shm_lines_op(&a, CXLSHM_LINE_WRITEBACK, page, 4096, &n);
    CHECK(got == page + 4096, "writeback after the peer went on got to "
          "0x%llx", (unsigned long long)got);
    CHECK(*(uint64_t *)(pool + line) == 0xabcd, "the line did not land");
    {
        uint64_t *e = &turns[(page / 4096) % CXLSHM_NR_LOCKS * TURN_WORDS];
        uint64_t waiting = 0;

        for (st = 0; st < TURN_WORDS - 1; st++) {
            waiting |= e[st];
        }
        CHECK(!waiting && e[TURN_WORDS - 1] == 1, "turn entry: waiting "
              "0x%llx, last %llu: host 0 should be the last holder, nobody "
              "waiting", (unsigned long long)waiting,
              (unsigned long long)e[TURN_WORDS - 1]);
    }
    munmap((void *)sp_flag, sizeof(int));
    host_free(&a);
}

/* --- foreign-tag ------------------------------------------------------------ */

/*
 * A lock word naming a host beyond the pool's max-hosts (no host of this
 * pool wrote it) is taken over as a dead holder's without touching an undo
 * slot the pool does not have: the undo area here holds 4 hosts and
 * everything after it is PROT_NONE, as the end of a format-4 tail is.
 */
static void test_foreign_tag(void)
{
    const uint64_t page = COH + 9 * 4096;
    size_t small = 4 * 2 * CXLSHM_UNDO_SLOTS * sizeof(CXLShmUndo);
    size_t span = CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS *
                  sizeof(CXLShmUndo);
    CXLShmUndo *u4 = mmap(NULL, span, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CXLShmLineCount n = { 0 };
    uint64_t *w = lock_word(page), got = 0;
    CXLShmLines a;
    int i;

    assert(u4 != MAP_FAILED && mprotect(u4, small, PROT_READ | PROT_WRITE) == 0);
    pod_reset();
    host_init(&a, 0);
    a.undo = u4;
    a.max_hosts = 4;
    *w = CXLPOOL_TAG(DEAD, 0, 1);
    *img_word(&a, page, 0) = 0x1234;
    /* the holder's liveness is looked at every few busy tries */
    for (i = 0; i < 1000 && got != page + 4096; i++) {
        got = cxl_shm_lines_op(&a, CXLSHM_LINE_WRITEBACK, page, 4096, &n);
    }
    CHECK(got == page + 4096, "the foreign holder's lock was never taken "
          "over");
    CHECK(*(uint64_t *)(pool + page) == 0x1234, "the line did not land");
    CHECK(*w == 0, "lock word 0x%llx after the writeback",
          (unsigned long long)*w);
    printf("foreign-tag: host %d's lock in a 4-host pool taken over, no "
           "undo slot beyond the pool's read\n", DEAD);
    host_free(&a);
    munmap(u4, span);
}

/* --- turns ---------------------------------------------------------------- */

#define TURN_HOSTS      4
#define TURN_HOLD_US    20
#define TURN_SECONDS    1
/* one host in each word of a 256-host pool's waiting bitmap */
static const uint32_t turn_ids[TURN_HOSTS] = { 3, 69, 137, 255 };

static uint64_t turns_run(bool with_turns, uint64_t *wins)
{
    const uint64_t page = COH + 7 * 4096;
    volatile uint64_t *count = shared(TURN_HOSTS * 8 + 8);
    volatile uint64_t *stop = &count[TURN_HOSTS];
    pid_t pid[TURN_HOSTS];
    uint64_t min = UINT64_MAX, max = 0;
    int i, st;

    pod_reset();
    for (i = 0; i < TURN_HOSTS; i++) {
        pid[i] = fork();
        assert(pid[i] >= 0);
        if (pid[i] == 0) {
            CXLShmLines b;
            CXLShmLineLock h = { NULL };

            host_init(&b, turn_ids[i]);
            if (!with_turns) {
                b.turns = NULL;
            }
            while (!*stop) {
                if (cxl_shm_lines_trylock(&b, page, &h, true)) {
                    int64_t end = g_get_monotonic_time() + TURN_HOLD_US;

                    while (g_get_monotonic_time() < end) {
                        /* a writeback's work, holding the lock */
                    }
                    cxl_shm_lines_unlock(&b, &h);
                    count[i]++;
                } else {
                    sched_yield();  /* as a vCPU that must run again */
                }
            }
            _exit(0);
        }
    }
    usleep(TURN_SECONDS * 1000000);
    *stop = 1;
    for (i = 0; i < TURN_HOSTS; i++) {
        waitpid(pid[i], &st, 0);
        wins[i] = count[i];
        min = MIN(min, wins[i]);
        max = MAX(max, wins[i]);
    }
    munmap((void *)count, TURN_HOSTS * 8 + 8);
    return min ? max / min : UINT64_MAX;
}

static void test_turns(void)
{
    uint64_t w[TURN_HOSTS], c[TURN_HOSTS], ratio, control;
    int i;

    control = turns_run(false, c);
    ratio = turns_run(true, w);
    for (i = 0; i < TURN_HOSTS; i++) {
        CHECK(w[i] > 0, "host %d never won the lock", i);
    }
    CHECK(ratio <= 3, "wins %llu/%llu/%llu/%llu: the most is %llux the "
          "least", (unsigned long long)w[0], (unsigned long long)w[1],
          (unsigned long long)w[2], (unsigned long long)w[3],
          (unsigned long long)ratio);
    printf("turns: %d hosts on one lock for %d s, wins %llu/%llu/%llu/%llu "
           "(without turns %llu/%llu/%llu/%llu)\n", TURN_HOSTS, TURN_SECONDS,
           (unsigned long long)w[0], (unsigned long long)w[1],
           (unsigned long long)w[2], (unsigned long long)w[3],
           (unsigned long long)c[0], (unsigned long long)c[1],
           (unsigned long long)c[2], (unsigned long long)c[3]);
    (void)control;
}

static void run_all(void)
{
    test_exact();
    test_conflict();
    test_rollback();
    test_own_stores();
    test_torn();
    test_media_write();
    test_nt();
    test_reset_holder();
}

int main(void)
{
    pool = shared(SIZE);
    locks = shared(CXLSHM_NR_LOCKS * 8);
    versions = shared(CXLSHM_NR_LOCKS * 8);
    turns = shared(CXLSHM_NR_LOCKS * TURN_WORDS * 8);
    undo = shared(CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS *
                  sizeof(CXLShmUndo));
    printf("-- without page versions\n");
    run_all();
    printf("-- with page versions\n");
    use_versions = true;
    run_all();
    test_in_sync();
    test_in_sync_run();
    test_stopped_peer();
    test_turns();
    test_foreign_tag();
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}

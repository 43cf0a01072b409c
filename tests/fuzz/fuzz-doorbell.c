/*
 * libFuzzer target: a hostile guest's writes to the cxl-shm doorbell
 * registers, decoded by the device's own code (hw-cxl/cxl-shm-doorbell.c)
 * and carried out by its line engine (hw-cxl/cxl-shm-line.c), beside a
 * second host's image and the guest's own stores.
 *
 * An input is a program; each step takes one byte of kind and its
 * arguments from the bytes that follow:
 *   0, 1  32-bit register write: address (2 bytes, masked to BAR5's 4 KiB,
 *         4-byte aligned), value (4 bytes)
 *   2     64-bit register write (address 8-byte aligned), value (8 bytes),
 *         as QEMU splits it: low half, then high half
 *   3     a store of host A's guest into its image: offset (3 bytes), value
 *   4     host B writes back a range of its own dirty lines (an honest
 *         neighbour whose pool lines host A's ops may clobber): line (2
 *         bytes), count (1 byte)
 *   5     a store of host A's guest into the coherent window
 * Invariants checked after every step (abort = a finding):
 *   - a refused op changes nothing: host A's image and twin and the pool
 *     are byte-identical; the status is one of the documented codes
 *   - an accepted op changes nothing outside [offset, offset + len) of the
 *     image, twin and pool, and nothing of the coherent window; inside it
 *     a writeback leaves every line clean, an invalidate or flush leaves
 *     image, twin and pool equal
 *   - host B's image never changes; no page lock is left held and no undo
 *     slot left armed, every page version is even
 *   - a page either host takes as in sync (its seen word is the page
 *     version + 1) has its twin equal to the pool
 * AddressSanitizer (allocations of the exact sizes) catches any access
 * outside the pool, the images and the metadata; UBSan any undefined
 * arithmetic.  scripts/fuzz.sh builds and runs it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "cxl-shm-doorbell.h"

#include <stdio.h>
#include <stdlib.h>

#define COH (64u << 10)
#define SIZE (256u << 10)
#define NC (SIZE - COH)

static uint8_t *pool, *pool_before, *img_a_before, *twin_a_before;
static uint8_t *img_b_expect;
static uint64_t *locks, *versions;
static CXLShmUndo *undo;
static CXLShmLines host_a, host_b;
static CXLShmDoorbellRegs regs;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz-doorbell: " __VA_ARGS__);                    \
            fprintf(stderr, "\n");                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void host_init(CXLShmLines *l, uint32_t id)
{
    memset(l, 0, sizeof(*l));
    l->pool = pool;
    l->image = malloc(NC);
    l->twin = malloc(NC);
    l->coherent_size = COH;
    l->size = SIZE;
    l->locks = locks;
    l->undo = undo;
    l->versions = versions;
    l->seen = calloc(NC / CXLSHM_LOCK_PAGE, sizeof(uint64_t));
    l->runs = calloc(CXLSHM_NR_LOCKS, sizeof(CXLShmRun));
    l->host_id = id;
    l->generation = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    pool = malloc(SIZE);
    pool_before = malloc(SIZE);
    img_a_before = malloc(NC);
    twin_a_before = malloc(NC);
    img_b_expect = malloc(NC);
    locks = calloc(CXLSHM_NR_LOCKS, sizeof(*locks));
    versions = calloc(CXLSHM_NR_LOCKS, sizeof(*versions));
    undo = calloc(CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS, sizeof(*undo));
    host_init(&host_a, 0);
    host_init(&host_b, 1);
    return 0;
}

static uint64_t take(const uint8_t **p, const uint8_t *end, int n)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < n && *p < end; i++) {
        v |= (uint64_t)*(*p)++ << (8 * i);
    }
    return v;
}

/*
 * A page the host takes as in sync (cxl-shm-line.c page_in_sync(), with
 * the lock) has its twin equal to the pool
 */
static void check_in_sync(CXLShmLines *l, const char *who)
{
    uint64_t pg;

    for (pg = 0; pg < NC / CXLSHM_LOCK_PAGE; pg++) {
        uint64_t off = COH + pg * CXLSHM_LOCK_PAGE;
        uint64_t w = (off / CXLSHM_LOCK_PAGE) % CXLSHM_NR_LOCKS;
        uint64_t v = versions[w], s = l->seen[pg];
        const CXLShmRun *r = &l->runs[w];

        if (s && (s - 1 == v ||
                  (r->to == v && r->from <= s - 1 && s - 1 <= v))) {
            CHECK(!memcmp(l->twin + pg * CXLSHM_LOCK_PAGE, pool + off,
                          CXLSHM_LOCK_PAGE), "host %s takes page 0x%llx as "
                  "in sync, but its twin differs from the pool", who,
                  (unsigned long long)off);
        }
    }
}

static void check_metadata(void)
{
    size_t i;

    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        CHECK(locks[i] == 0, "page lock %zu left held (0x%llx)", i,
              (unsigned long long)locks[i]);
    }
    for (i = 0; i < CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS; i++) {
        CHECK(undo[i].armed == 0, "undo slot %zu left armed", i);
    }
    CHECK(!memcmp(host_b.image, img_b_expect, NC),
          "host B's image changed by host A's doorbell");
    for (i = 0; i < CXLSHM_NR_LOCKS; i++) {
        CHECK(!(versions[i] & 1), "page version %zu left odd", i);
    }
    check_in_sync(&host_a, "A");
    check_in_sync(&host_b, "B");
}

/* bytes of @a and @b differ only inside [lo, hi) */
static void same_outside(const uint8_t *a, const uint8_t *b, size_t n,
                         uint64_t lo, uint64_t hi, const char *what)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if ((i < lo || i >= hi) && a[i] != b[i]) {
            CHECK(0, "%s byte 0x%zx changed outside the range [0x%llx, 0x%llx)",
                  what, i, (unsigned long long)lo, (unsigned long long)hi);
        }
    }
}

/*
 * What an accepted op must have done to the non-coherent lines
 * [lo, hi): a writeback leaves each of them clean (image = twin); an
 * invalidate or flush leaves image, twin and pool equal (no guest stores
 * run meanwhile here).
 */
static void check_done(uint32_t op, uint64_t lo, uint64_t hi)
{
    uint64_t o;

    for (o = lo; o < hi; o += CXLSHM_LINE) {
        const uint8_t *img = host_a.image + (o - COH);
        const uint8_t *twin = host_a.twin + (o - COH);

        CHECK(!memcmp(img, twin, CXLSHM_LINE),
              "op %u left line 0x%llx dirty", op, (unsigned long long)o);
        if (op != CXLSHM_OP_WRITEBACK) {
            CHECK(!memcmp(img, pool + o, CXLSHM_LINE),
                  "op %u left line 0x%llx different from the pool", op,
                  (unsigned long long)o);
        }
    }
}

static void ring(uint32_t op)
{
    uint64_t off = regs.offset, len = regs.len;
    uint32_t st = cxl_shm_db_check(op, off, len, SIZE);
    CXLShmLineCount n = { 0 };
    uint64_t lo, hi;

    CHECK(st <= CXLSHM_DB_BADOP, "status %u", st);
    memcpy(pool_before, pool, SIZE);
    memcpy(img_a_before, host_a.image, NC);
    memcpy(twin_a_before, host_a.twin, NC);
    if (st == CXLSHM_DB_OK) {
        CHECK(len && off + len <= SIZE && !((off | len) % CXLSHM_LINE),
              "accepted a bad range 0x%llx+0x%llx", (unsigned long long)off,
              (unsigned long long)len);
        cxl_shm_lines_op(&host_a, cxl_shm_db_line_op(op), off, len, &n);
        CHECK(n.written <= len / CXLSHM_LINE && n.fetched <= len / CXLSHM_LINE,
              "counted %llu written / %llu fetched for %llu lines",
              (unsigned long long)n.written, (unsigned long long)n.fetched,
              (unsigned long long)(len / CXLSHM_LINE));
        lo = MAX(off, COH);
        hi = MAX(off + len, COH);
        check_done(op, lo, hi);
    } else {
        lo = hi = 0;    /* nothing may change */
    }
    same_outside(pool, pool_before, SIZE, lo, hi, "pool");
    same_outside(host_a.image, img_a_before, NC, lo > COH ? lo - COH : 0,
                 hi > COH ? hi - COH : 0, "host A image");
    same_outside(host_a.twin, twin_a_before, NC, lo > COH ? lo - COH : 0,
                 hi > COH ? hi - COH : 0, "host A twin");
    check_metadata();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    size_t i;

    memset(pool, 0, SIZE);
    memset(locks, 0, CXLSHM_NR_LOCKS * sizeof(*locks));
    memset(versions, 0, CXLSHM_NR_LOCKS * sizeof(*versions));
    memset(host_a.seen, 0, NC / CXLSHM_LOCK_PAGE * sizeof(uint64_t));
    memset(host_b.seen, 0, NC / CXLSHM_LOCK_PAGE * sizeof(uint64_t));
    memset(host_a.runs, 0, CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
    memset(host_b.runs, 0, CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
    memset(undo, 0, CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS * sizeof(*undo));
    memset(host_a.image, 0, NC);
    memset(host_a.twin, 0, NC);
    memset(host_b.twin, 0, NC);
    for (i = 0; i < NC; i++) {  /* every line of host B dirty */
        host_b.image[i] = (uint8_t)(i * 131 + 7);
    }
    memcpy(img_b_expect, host_b.image, NC);
    memset(&regs, 0, sizeof(regs));

    while (p < end) {
        uint8_t kind = *p++ % 6;
        bool rang;
        uint32_t op;

        switch (kind) {
        case 0:
        case 1: {
            uint64_t addr = take(&p, end, 2) & 0xffc;
            uint32_t val = take(&p, end, 4);

            op = cxl_shm_db_write32(&regs, addr, val, &rang);
            if (rang) {
                ring(op);
            }
            break;
        }
        case 2: {
            uint64_t addr = take(&p, end, 2) & 0xff8;
            uint64_t val = take(&p, end, 8);

            op = cxl_shm_db_write32(&regs, addr, val, &rang);
            if (rang) {
                ring(op);
            }
            op = cxl_shm_db_write32(&regs, addr + 4, val >> 32, &rang);
            if (rang) {
                ring(op);
            }
            break;
        }
        case 3:
            host_a.image[take(&p, end, 3) % NC] = take(&p, end, 1);
            break;
        case 4: {
            uint64_t line = take(&p, end, 2) % (NC / CXLSHM_LINE);
            uint64_t count = take(&p, end, 1) % 16 + 1;
            CXLShmLineCount n = { 0 };

            count = MIN(count, NC / CXLSHM_LINE - line);
            cxl_shm_lines_op(&host_b, CXLSHM_LINE_WRITEBACK,
                             COH + line * CXLSHM_LINE, count * CXLSHM_LINE, &n);
            check_metadata();
            break;
        }
        default:
            pool[take(&p, end, 2) % COH] = take(&p, end, 1);
            break;
        }
    }
    return 0;
}

/*
 * Benchmark of the cxl-shm line engine (hw-cxl/cxl-shm-line.c) built for
 * the host, beside host memcpy in the same run (docs/benchmarks.md):
 *
 *   memcpy      1 MiB memcpy calls over 64 MiB (the baseline)
 *   writeback   cxl_shm_lines_op(WRITEBACK) of 1 MiB, every line dirty
 *   wb just dirtied  the same, each MiB dirtied right before its call (so
 *               the image is in the host's caches, as when a guest writes
 *               a buffer and writes it back: cxlpod-bench's per-MiB case)
 *   flush       cxl_shm_lines_op(FLUSH) of 1 MiB, every line dirty
 *   invalidate  cxl_shm_lines_op(DROP) of 1 MiB, every line clean
 *   clean wb    cxl_shm_lines_op(WRITEBACK) of 1 MiB, no line dirty
 *   floor       what any writeback that finds dirty lines by comparing
 *               the image with a twin must do, and nothing else: per
 *               line, compare image and twin, copy the image line to the
 *               pool and to the twin (no lock, snapshot, undo log or
 *               conflict check), every line dirty
 *
 * The pages are in sync (page versions, cxl-shm-line.h) after a first
 * flush, as in a guest after its first flush; --no-versions runs the
 * engine without them (every writeback reads the pool line).  Best of
 * --repeat N (default 5) passes; prints MB/s and the ratio to memcpy.
 * Run with `meson test -C build/meson --benchmark`, or directly:
 * bench_lines [--repeat N] [--mib M] [--no-versions] [--only NAME]
 * (--only: time memcpy, NAME and the floor only, e.g. under perf record).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "qemu/osdep.h"
#include "cxl-shm-line.h"

#define MiB     (1024 * 1024ULL)
#define COH     MiB

static uint64_t nc;             /* bytes of the non-coherent area */
static uint8_t *src, *dst;      /* memcpy baseline */
static CXLShmLines host;
static uint64_t in_sync;        /* lines written without reading the pool */

static void *area(size_t len, int shared)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS,
                   -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 0, len);          /* populated before anything is timed */
    return p;
}

/*
 * The thread's CPU time: another process on the machine then slows a
 * figure only through the caches and memory it shares, not by taking the
 * CPU away in the middle of a pass (the project's machines are shared)
 */
static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every line of the image differs from its twin (a different word 0) */
static void dirty_all(uint64_t round)
{
    uint64_t o;

    for (o = 0; o < nc; o += CXLSHM_LINE) {
        *(uint64_t *)(host.image + o) = round * 0x10001 + o;
    }
}

typedef enum {
    B_MEMCPY, B_WB, B_WB_WARM, B_FLUSH, B_DROP, B_CLEAN, B_FLOOR,
} Bench;
#define NR_BENCH 7

/* The floor: compare, then two copies per dirty line */
static void floor_wb(uint64_t off, uint64_t len, CXLShmLineCount *n)
{
    uint64_t o;

    for (o = off; o < off + len; o += CXLSHM_LINE) {
        uint8_t *img = host.image + o, *twin = host.twin + o;

        if (memcmp(img, twin, CXLSHM_LINE)) {
            memcpy(host.pool + COH + o, img, CXLSHM_LINE);
            memcpy(twin, img, CXLSHM_LINE);
            n->written++;
        }
    }
}

static double pass(Bench b, uint64_t round)
{
    CXLShmLineCount n = { 0 };
    uint64_t o, w;
    double t, t0;

    if (b == B_WB || b == B_FLUSH || b == B_FLOOR) {
        dirty_all(round);
    }
    if (b == B_WB_WARM) {
        t = 0;
        for (o = 0; o < nc; o += MiB) {
            for (w = o; w < o + MiB; w += CXLSHM_LINE) {
                *(uint64_t *)(host.image + w) = round * 0x10001 + w;
            }
            t0 = now();
            cxl_shm_lines_op(&host, CXLSHM_LINE_WRITEBACK, COH + o, MiB, &n);
            t += now() - t0;
        }
        goto check;
    }
    t = now();
    for (o = 0; o < nc; o += MiB) {
        switch (b) {
        case B_MEMCPY:
            memcpy(dst + o, src + o, MiB);
            break;
        case B_WB:
        case B_CLEAN:
            cxl_shm_lines_op(&host, CXLSHM_LINE_WRITEBACK, COH + o, MiB, &n);
            break;
        case B_FLUSH:
            cxl_shm_lines_op(&host, CXLSHM_LINE_FLUSH, COH + o, MiB, &n);
            break;
        case B_DROP:
            cxl_shm_lines_op(&host, CXLSHM_LINE_DROP, COH + o, MiB, &n);
            break;
        case B_FLOOR:
            floor_wb(o, MiB, &n);
            break;
        default:
            break;
        }
    }
    t = now() - t;
check:
    if ((b == B_WB || b == B_WB_WARM || b == B_FLUSH || b == B_FLOOR) &&
        n.written != nc / CXLSHM_LINE) {
        fprintf(stderr, "bench_lines: %s: %" PRIu64 " of %" PRIu64
                " lines written back\n", b == B_FLUSH ? "flush" : "writeback",
                n.written, nc / CXLSHM_LINE);
        exit(1);
    }
    in_sync += n.in_sync;
    if (b == B_CLEAN && n.written) {
        fprintf(stderr, "bench_lines: clean writeback wrote lines\n");
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    static const char *const name[] = {
        "memcpy", "writeback", "wb just dirtied", "flush", "invalidate",
        "clean wb", "floor",
    };
    static const Bench order[] = {
        B_MEMCPY, B_WB, B_WB_WARM, B_FLUSH, B_DROP, B_CLEAN, B_FLOOR,
    };
    CXLShmLineCount n0 = { 0 };
    double best[NR_BENCH];
    bool run[NR_BENCH];
    int repeat = 5, mib = 64, i, r;
    bool versions = true;
    const char *only = NULL;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            mib = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--no-versions")) {
            versions = false;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_lines [--repeat N] [--mib M] "
                    "[--no-versions] [--only NAME]\n");
            return 2;
        }
    }
    if (repeat < 1 || mib < 1) {
        fprintf(stderr, "bench_lines: --repeat and --mib want >= 1\n");
        return 2;
    }
    nc = mib * MiB;
    src = area(nc, 0);
    dst = area(nc, 0);
    memset(&host, 0, sizeof(host));
    host.pool = area(COH + nc, 1);
    host.image = area(nc, 0);
    host.twin = area(nc, 0);
    host.coherent_size = COH;
    host.size = COH + nc;
    host.locks = area(CXLSHM_NR_LOCKS * 8, 1);
    host.undo = area(CXLSHM_MAX_HOSTS * 2 * CXLSHM_UNDO_SLOTS *
                     sizeof(CXLShmUndo), 1);
    host.generation = 1;
    if (versions) {
        host.versions = area(CXLSHM_NR_LOCKS * 8, 1);
        host.seen = area(nc / CXLSHM_LOCK_PAGE * 8, 0);
        host.runs = area(CXLSHM_NR_LOCKS * sizeof(CXLShmRun), 0);
    }
    /* the first flush, untimed: the pages are in sync from here on */
    cxl_shm_lines_op(&host, CXLSHM_LINE_FLUSH, COH, nc, &n0);

    /*
     * Interleaved, so that a change in the machine's load hits every
     * figure alike
     */
    for (i = 0; i < NR_BENCH; i++) {
        best[i] = 1e9;
        run[i] = !only || order[i] == B_MEMCPY || order[i] == B_FLOOR ||
                 !strcmp(only, name[i]);
    }
    for (r = 0; r < repeat; r++) {
        for (i = 0; i < NR_BENCH; i++) {
            double t;

            if (!run[i]) {
                continue;
            }
            t = pass(order[i], r * NR_BENCH + i + 1);
            best[i] = MIN(best[i], t);
        }
    }
    printf("line engine on the host, %d MiB in 1 MiB calls, best of %d, "
           "page versions %s (%" PRIu64 " lines written in sync)\n", mib,
           repeat, versions ? "on" : "off", in_sync);
    printf("%-15s %9s %8s %8s\n", "operation", "MB/s", "x memcpy",
           "x floor");
    for (i = 0; i < NR_BENCH; i++) {
        if (run[i]) {
            printf("%-15s %9.0f %8.2f %8.2f\n", name[i], nc / best[i] / 1e6,
                   best[0] / best[i], best[B_FLOOR] / best[i]);
        }
    }
    return 0;
}

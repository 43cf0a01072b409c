/*
 * Benchmark of the cxl-shm line engine (hw-cxl/cxl-shm-line.c) built for
 * the host, beside host memcpy in the same run (docs/benchmarks.md):
 *
 *   memcpy      1 MiB memcpy calls over 64 MiB (the baseline)
 *   writeback   cxl_shm_lines_op(WRITEBACK) of 1 MiB, every line dirty
 *   flush       cxl_shm_lines_op(FLUSH) of 1 MiB, every line dirty
 *   invalidate  cxl_shm_lines_op(DROP) of 1 MiB, every line clean
 *   clean wb    cxl_shm_lines_op(WRITEBACK) of 1 MiB, no line dirty
 *
 * Best of --repeat N (default 5) passes; prints MB/s and the ratio to
 * memcpy.  Run with `meson test -C build/meson --benchmark`, or directly:
 * bench_lines [--repeat N] [--mib M].
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

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
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

typedef enum { B_MEMCPY, B_WB, B_FLUSH, B_DROP, B_CLEAN } Bench;

static double pass(Bench b, uint64_t round)
{
    CXLShmLineCount n = { 0 };
    uint64_t o;
    double t;

    if (b == B_WB || b == B_FLUSH) {
        dirty_all(round);
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
        }
    }
    t = now() - t;
    if ((b == B_WB || b == B_FLUSH) && n.written != nc / CXLSHM_LINE) {
        fprintf(stderr, "bench_lines: %s: %" PRIu64 " of %" PRIu64
                " lines written back\n", b == B_WB ? "writeback" : "flush",
                n.written, nc / CXLSHM_LINE);
        exit(1);
    }
    if (b == B_CLEAN && n.written) {
        fprintf(stderr, "bench_lines: clean writeback wrote lines\n");
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    static const char *const name[] = {
        "memcpy", "writeback", "flush", "invalidate", "clean wb",
    };
    static const Bench order[] = { B_MEMCPY, B_WB, B_FLUSH, B_DROP, B_CLEAN };
    double best[5];
    int repeat = 5, mib = 64, i, r;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            mib = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_lines [--repeat N] [--mib M]\n");
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

    /*
     * Interleaved, so that a change in the machine's load hits every
     * figure alike
     */
    for (i = 0; i < 5; i++) {
        best[i] = 1e9;
    }
    for (r = 0; r < repeat; r++) {
        for (i = 0; i < 5; i++) {
            double t = pass(order[i], r * 5 + i + 1);

            best[i] = MIN(best[i], t);
        }
    }
    printf("line engine on the host, %d MiB in 1 MiB calls, best of %d\n",
           mib, repeat);
    printf("%-11s %9s %8s\n", "operation", "MB/s", "x memcpy");
    for (i = 0; i < 5; i++) {
        printf("%-11s %9.0f %8.2f\n", name[i], nc / best[i] / 1e6,
               best[0] / best[i]);
    }
    return 0;
}

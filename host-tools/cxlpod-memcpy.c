/*
 * cxlpod-memcpy: the host's memcpy bandwidth, the baseline that
 * scripts/bench.sh puts next to the device's large-range writeback (which
 * is, at best, a copy of the guest's image into the pool).
 *
 *   cxlpod-memcpy [--size BYTES(64M)] [--chunk BYTES(1M)] [--repeat N(5)]
 *   cxlpod-memcpy --curve MAX [--repeat N(5)]
 *
 * Copies SIZE bytes from one buffer to another (both touched first), one
 * memcpy per CHUNK, REPEAT times; prints one JSON line with the best and
 * the median MB/s (10^6 bytes per second).
 *
 * --curve: the time of one memcpy of 64 B, 256 B, ... up to MAX bytes (x4
 * steps, the sizes of cxlpod-bench --curve), the same buffers copied again
 * and again for at least 50 ms (so in the caches where they fit), best of
 * REPEAT; one JSON line with ns per call and MB/s per size.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t parse_size(const char *s)
{
    char *e;
    unsigned long long v = strtoull(s, &e, 0);

    switch (*e) {
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; e++; break;
    case 0: break;
    default: return 0;
    }
    return *e ? 0 : (size_t)v;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* ns per memcpy of @size bytes, copied again and again for >= 50 ms */
static double one_size(char *dst, char *src, size_t size)
{
    double t0 = now(), t;
    size_t calls = 0;

    do {
        for (int k = 0; k < 16; k++) {
            memcpy(dst, src, size);
            __asm__ volatile("" ::: "memory");
        }
        calls += 16;
        t = now() - t0;
    } while (t < 0.05);
    return t * 1e9 / calls;
}

static int curve(size_t max, int repeat)
{
    char *src = malloc(max), *dst = malloc(max);

    if (!src || !dst) {
        fprintf(stderr, "cxlpod-memcpy: out of memory\n");
        return 2;
    }
    memset(src, 0x5a, max);
    memset(dst, 0xa5, max);
    printf("{\"tool\":\"cxlpod-memcpy\",\"curve\":[");
    for (size_t sz = 64; sz <= max; sz *= 4) {
        double best = 0;

        for (int r = 0; r < repeat; r++) {
            double v = one_size(dst, src, sz);

            if (!r || v < best) {
                best = v;
            }
        }
        printf("%s{\"size\":%zu,\"ns\":%.1f,\"MBps\":%.0f}", sz > 64 ? "," : "",
               sz, best, sz / best * 1e3);
    }
    printf("]}\n");
    free(src);
    free(dst);
    return 0;
}

int main(int argc, char **argv)
{
    size_t size = 64u << 20, chunk = 1u << 20, curve_max = 0;
    int repeat = 5;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size = parse_size(argv[++i]);
        } else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) {
            chunk = parse_size(argv[++i]);
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--curve") && i + 1 < argc) {
            curve_max = parse_size(argv[++i]);
            if (curve_max < 64) {
                fprintf(stderr, "cxlpod-memcpy: --curve wants a size >= 64\n");
                return 1;
            }
        } else {
            fprintf(stderr, "usage: cxlpod-memcpy [--size B] [--chunk B] [--repeat N]\n"
                    "       cxlpod-memcpy --curve MAX [--repeat N]\n");
            return 1;
        }
    }
    if (curve_max) {
        if (repeat < 1 || repeat > 1000) {
            fprintf(stderr, "cxlpod-memcpy: bad --repeat\n");
            return 1;
        }
        return curve(curve_max, repeat);
    }
    if (!size || !chunk || chunk > size || repeat < 1 || repeat > 1000) {
        fprintf(stderr, "cxlpod-memcpy: bad --size, --chunk or --repeat\n");
        return 1;
    }
    char *src = malloc(size), *dst = malloc(size);
    double *mbs = calloc(repeat, sizeof(*mbs));
    if (!src || !dst || !mbs) {
        fprintf(stderr, "cxlpod-memcpy: out of memory\n");
        return 2;
    }
    memset(src, 0x5a, size);
    memset(dst, 0xa5, size);
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        for (size_t off = 0; off < size; off += chunk) {
            memcpy(dst + off, src + off, size - off < chunk ? size - off : chunk);
        }
        double t = now() - t0;
        mbs[r] = size / 1e6 / t;
        src[r % size]++; /* the copies are not the same work twice */
    }
    if (memcmp(dst + 1000, src + 1000, 1000)) {
        fprintf(stderr, "cxlpod-memcpy: the copy is wrong\n");
        return 3;
    }
    qsort(mbs, repeat, sizeof(*mbs), cmp);
    printf("{\"tool\":\"cxlpod-memcpy\",\"size\":%zu,\"chunk\":%zu,\"repeat\":%d,"
           "\"best_MBps\":%.0f,\"median_MBps\":%.0f}\n",
           size, chunk, repeat, mbs[repeat - 1], mbs[repeat / 2]);
    free(src);
    free(dst);
    free(mbs);
    return 0;
}

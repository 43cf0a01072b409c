/*
 * cxlpod-poke: read, write and wait for bytes at an offset of a dax device.
 * A small guest tool for tests and for people poking at a pool by hand; it
 * does no coherence operations, so on cxl-shm it is only meaningful in the
 * coherent window (or on stock cxl-type3, where everything is coherent).
 *
 *   cxlpod-poke [-d /dev/daxN.M] write OFFSET STRING
 *   cxlpod-poke [-d /dev/daxN.M] read OFFSET LEN
 *   cxlpod-poke [-d /dev/daxN.M] wait OFFSET STRING [TIMEOUT_SECONDS]
 *
 * OFFSET accepts 0x prefixes and K/M/G suffixes; after "--" a STRING may
 * start with '-'.  Exit status: 0 success (and -h / --help), 1 usage or
 * device error, 2 wait timed out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define MAP_ALIGN (2UL << 20)

static void usage(void)
{
    fprintf(stderr,
            "usage: cxlpod-poke [-d DEV] write OFFSET STRING\n"
            "       cxlpod-poke [-d DEV] read OFFSET LEN\n"
            "       cxlpod-poke [-d DEV] wait OFFSET STRING [TIMEOUT_S]\n");
}

int main(int argc, char **argv)
{
    struct tool t = {.name = "cxlpod-poke", .no_common = true};
    const char *dev = "/dev/dax0.0";
    const char *w[4];
    uint64_t off, len, base;
    double timeout = 60.0;
    volatile char *p;
    void *map;
    int fd, n, pr;
    const struct topt opts[] = {
        {"-d", TOPT_STR, &dev, 0, 0},
        {NULL, TOPT_FLAG, NULL, 0, 0},
    };

    pr = tool_parse_words(&t, argc, argv, opts, usage, w, 4, &n);
    if (pr) {
        return pr == TOOL_HELP ? 0 : pr;
    }
    if (n < 3 || parse_size_full(w[1], &off) ||
        (strcmp(w[0], "write") && strcmp(w[0], "read") &&
         strcmp(w[0], "wait")) ||
        (n > 3 && strcmp(w[0], "wait"))) {
        usage();
        return EXIT_USAGE;
    }
    if (!strcmp(w[0], "read")) {
        if (parse_size_full(w[2], &len)) {
            usage();
            return EXIT_USAGE;
        }
    } else {
        len = strlen(w[2]);
    }
    if (n > 3) {
        char *end;

        timeout = strtod(w[3], &end);
        if (end == w[3] || *end || !(timeout >= 0)) {
            fprintf(stderr, "cxlpod-poke: TIMEOUT_S '%s' is not a number of "
                    "seconds\n", w[3]);
            return EXIT_USAGE;
        }
    }
    if (len == 0 || len > MAP_ALIGN) {
        fprintf(stderr, "cxlpod-poke: length must be 1..%lu\n", MAP_ALIGN);
        return 1;
    }
    fd = open(dev, O_RDWR);
    if (fd < 0) {
        fprintf(stderr, "cxlpod-poke: open %s: %s\n", dev, strerror(errno));
        return 1;
    }
    base = off & ~(MAP_ALIGN - 1);
    /* Two alignment units so a string crossing the boundary still fits. */
    map = mmap(NULL, 2 * MAP_ALIGN, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               (off_t)base);
    if (map == MAP_FAILED) {
        fprintf(stderr, "cxlpod-poke: mmap %s at 0x%llx: %s\n", dev,
                (unsigned long long)base, strerror(errno));
        return 1;
    }
    p = (volatile char *)map + (off - base);

    if (!strcmp(w[0], "write")) {
        for (uint64_t i = 0; i < len; i++) {
            p[i] = w[2][i];
        }
        __sync_synchronize();
        return 0;
    }
    if (!strcmp(w[0], "read")) {
        for (uint64_t i = 0; i < len; i++) {
            putchar(p[i]);
        }
        putchar('\n');
        return 0;
    }
    if (!strcmp(w[0], "wait")) {
        struct timespec t0, now;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            uint64_t i;

            for (i = 0; i < len && p[i] == w[2][i]; i++) {
            }
            if (i == len) {
                return 0;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - t0.tv_sec) +
                (now.tv_nsec - t0.tv_nsec) / 1e9 > timeout) {
                fprintf(stderr, "cxlpod-poke: timed out waiting at 0x%llx\n",
                        (unsigned long long)off);
                return 2;
            }
            usleep(1000);
        }
    }
    return EXIT_USAGE; /* not reached: the command was checked above */
}

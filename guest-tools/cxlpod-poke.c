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
 * OFFSET accepts 0x prefixes and K/M/G suffixes.  Exit status: 0 success,
 * 1 usage or device error, 2 wait timed out.
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

#define MAP_ALIGN (2UL << 20)

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || end == s) {
        return -1;
    }
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end) {
        return -1;
    }
    *out = v;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cxlpod-poke [-d DEV] write OFFSET STRING\n"
            "       cxlpod-poke [-d DEV] read OFFSET LEN\n"
            "       cxlpod-poke [-d DEV] wait OFFSET STRING [TIMEOUT_S]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    const char *dev = "/dev/dax0.0";
    uint64_t off, len, base;
    volatile char *p;
    void *map;
    int fd, opt;

    while ((opt = getopt(argc, argv, "d:h")) != -1) {
        if (opt == 'd') {
            dev = optarg;
        } else {
            usage();
        }
    }
    argc -= optind;
    argv += optind;
    if (argc < 3 || parse_size(argv[1], &off)) {
        usage();
    }
    if (!strcmp(argv[0], "read")) {
        if (parse_size(argv[2], &len)) {
            usage();
        }
    } else {
        len = strlen(argv[2]);
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

    if (!strcmp(argv[0], "write")) {
        for (uint64_t i = 0; i < len; i++) {
            p[i] = argv[2][i];
        }
        __sync_synchronize();
        return 0;
    }
    if (!strcmp(argv[0], "read")) {
        for (uint64_t i = 0; i < len; i++) {
            putchar(p[i]);
        }
        putchar('\n');
        return 0;
    }
    if (!strcmp(argv[0], "wait")) {
        double timeout = argc > 3 ? atof(argv[3]) : 60.0;
        struct timespec t0, t;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            uint64_t i;

            for (i = 0; i < len && p[i] == argv[2][i]; i++) {
            }
            if (i == len) {
                return 0;
            }
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > timeout) {
                fprintf(stderr, "cxlpod-poke: timed out waiting at 0x%llx\n",
                        (unsigned long long)off);
                return 2;
            }
            usleep(1000);
        }
    }
    usage();
    return 1;
}

/*
 * Host-only stand-in for QEMU's qemu/osdep.h, enough to build the cxl-shm
 * line engine (hw-cxl/cxl-shm-line.c) into the unit tests and the pool
 * format (hw-cxl/cxl-shm-format.c) into cxlpod-pool.
 */
#ifndef CXLPOD_SHIM_OSDEP_H
#define CXLPOD_SHIM_OSDEP_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <sched.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <glib.h>

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif
#define QEMU_ALWAYS_INLINE __attribute__((always_inline))
#define QEMU_ALIGN_DOWN(n, m) ((n) / (m) * (m))
#define QEMU_ALIGN_UP(n, m) QEMU_ALIGN_DOWN((n) + (m) - 1, (m))
#define ROUND_UP(n, d) QEMU_ALIGN_UP(n, d)
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define tostring(s) #s
#define stringify(s) tostring(s)

/*
 * QEMU's byte-range locks (util/osdep.c): open file description locks,
 * which Linux has (with _GNU_SOURCE, as the pool format is built); 0 or
 * -errno, and qemu_lock_fd_test() -EAGAIN when another description holds
 * a conflicting lock
 */
#ifdef F_OFD_SETLK
static inline int qemu_lock_fcntl(int fd, int64_t start, int64_t len,
                                  int cmd, short type)
{
    struct flock fl = {
        .l_whence = SEEK_SET,
        .l_start = start,
        .l_len = len,
        .l_type = type,
    };

    if (fcntl(fd, cmd, &fl) < 0) {
        return -errno;
    }
    if (cmd == F_OFD_GETLK) {
        return fl.l_type == F_UNLCK ? 0 : -EAGAIN;
    }
    return 0;
}

static inline int qemu_lock_fd(int fd, int64_t start, int64_t len,
                               bool exclusive)
{
    return qemu_lock_fcntl(fd, start, len, F_OFD_SETLK,
                           exclusive ? F_WRLCK : F_RDLCK);
}

static inline int qemu_unlock_fd(int fd, int64_t start, int64_t len)
{
    return qemu_lock_fcntl(fd, start, len, F_OFD_SETLK, F_UNLCK);
}

static inline int qemu_lock_fd_test(int fd, int64_t start, int64_t len,
                                    bool exclusive)
{
    return qemu_lock_fcntl(fd, start, len, F_OFD_GETLK,
                           exclusive ? F_WRLCK : F_RDLCK);
}
#endif
#endif

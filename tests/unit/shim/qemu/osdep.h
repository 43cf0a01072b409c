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
#endif

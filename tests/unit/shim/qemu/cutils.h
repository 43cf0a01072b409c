/* Host-only stand-in for QEMU's qemu/cutils.h: buffer_is_zero() */
#ifndef CXLPOD_SHIM_CUTILS_H
#define CXLPOD_SHIM_CUTILS_H
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool buffer_is_zero(const void *buf, size_t len)
{
    const unsigned char *p = buf;

    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}
#endif

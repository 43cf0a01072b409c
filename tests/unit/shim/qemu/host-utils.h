/* Stand-in for QEMU's qemu/host-utils.h: what the line engine uses */
#ifndef SHIM_QEMU_HOST_UTILS_H
#define SHIM_QEMU_HOST_UTILS_H

#include <stdint.h>

static inline int ctz32(uint32_t val)
{
    return val ? __builtin_ctz(val) : 32;
}

static inline int ctz64(uint64_t val)
{
    return val ? __builtin_ctzll(val) : 64;
}

#endif

/*
 * Host-only stand-in for QEMU's qemu/crc32c.h: CRC-32C (Castagnoli), the
 * same function as QEMU's util/crc32c.c (the caller passes the initial
 * value, the result is inverted), for the pool format in the host tools
 */
#ifndef CXLPOD_SHIM_CRC32C_H
#define CXLPOD_SHIM_CRC32C_H
#include <stdint.h>

static inline uint32_t crc32c(uint32_t crc, const uint8_t *data,
                              unsigned int length)
{
    int b;

    while (length--) {
        crc ^= *data++;
        for (b = 0; b < 8; b++) {
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1));
        }
    }
    return crc ^ 0xffffffff;
}
#endif

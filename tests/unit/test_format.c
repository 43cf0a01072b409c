/*
 * The pool format (hw-cxl/cxl-shm-format.c) as the host tools build it,
 * with tests/unit/shim standing in for QEMU's crc32c(), buffer_is_zero()
 * and qemu_lock_fd(): the header's CRC is the one QEMU's crc32c() gives
 * (a pool made by either is valid for both), an all-zero header is a torn
 * create, and a host's liveness byte reads locked while another open file
 * description holds it.
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/crc32c.h"
#include "cxl-shm-format.h"

static const CXLPoolGeometry geometry = {
    .size = 256ULL << 20,
    .coherent_size = 64ULL << 20,
    .max_hosts = 4,
};

/* CRC-32C's check value, and a header whose CRC the format fixes */
static void test_header_crc(void)
{
    CXLPoolHeader h;

    g_assert_cmphex(crc32c(0xffffffff, (const uint8_t *)"123456789", 9), ==,
                    0xe3069283);
    cxlpool_header_init(&h, &geometry, 1700000000123456789ULL);
    /* the value every cxlpod version wrote for this header */
    g_assert_cmphex(h.crc, ==, 0x0b12ea37);
    g_assert_cmphex(cxlpool_header_crc(&h), ==, 0x0b12ea37);
    g_assert_cmpint(cxlpool_check(&h, CXLPOOL_META_SIZE + geometry.size,
                                  &geometry), ==, CXLPOOL_OK);
    h.max_hosts = 8;
    g_assert_cmpint(cxlpool_check(&h, CXLPOOL_META_SIZE + geometry.size,
                                  NULL), ==, CXLPOOL_ERR_CRC);
}

/* All zeros: no header yet; one byte set anywhere in it: not a pool */
static void test_header_zero(void)
{
    CXLPoolHeader h;

    memset(&h, 0, sizeof(h));
    g_assert_cmpint(cxlpool_check(&h, CXLPOOL_META_SIZE, NULL), ==,
                    CXLPOOL_ERR_NO_HEADER);
    ((uint8_t *)&h)[sizeof(h) - 1] = 1;
    g_assert_cmpint(cxlpool_check(&h, CXLPOOL_META_SIZE, NULL), ==,
                    CXLPOOL_ERR_MAGIC);
}

/* A host's liveness byte: locked while another description holds it */
static void test_host_lock(void)
{
    char path[] = "/tmp/cxlpod-test-format-XXXXXX";
    int fd = mkstemp(path), other;

    g_assert_cmpint(fd, >=, 0);
    other = open(path, O_RDWR);
    g_assert_cmpint(other, >=, 0);
    unlink(path);
    g_assert_cmpint(ftruncate(fd, CXLPOOL_META_SIZE), ==, 0);
    g_assert_false(cxlpool_host_locked(other, 3));
    g_assert_cmpint(qemu_lock_fd(fd, CXLPOOL_LOCK_OFFSET + 3, 1, true), ==,
                    0);
    g_assert_true(cxlpool_host_locked(other, 3));
    g_assert_false(cxlpool_host_locked(other, 2));
    /* a second holder is refused while the first lives */
    g_assert_cmpint(qemu_lock_fd(other, CXLPOOL_LOCK_OFFSET + 3, 1, true),
                    ==, -EAGAIN);
    g_assert_cmpint(qemu_unlock_fd(fd, CXLPOOL_LOCK_OFFSET + 3, 1), ==, 0);
    g_assert_false(cxlpool_host_locked(other, 3));
    close(other);
    close(fd);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pool-format/header-crc", test_header_crc);
    g_test_add_func("/pool-format/header-zero", test_header_zero);
    g_test_add_func("/pool-format/host-lock", test_host_lock);
    return g_test_run();
}

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
    /*
     * The value for this header of format version 4 (version 3's was
     * 0x0b12ea37), computed apart from this code by tests/unit/v3pool.py's
     * crc32c() over the fields of docs/pool-format.md
     */
    g_assert_cmphex(h.crc, ==, 0xf03a35e1);
    g_assert_cmphex(cxlpool_header_crc(&h), ==, 0xf03a35e1);
    g_assert_cmpint(cxlpool_check(&h, cxlpool_file_size(geometry.size, 4),
                                  &geometry), ==, CXLPOOL_OK);
    /* the file of version 3's size: the tail is missing */
    g_assert_cmpint(cxlpool_check(&h, CXLPOOL_META_SIZE + geometry.size,
                                  &geometry), ==, CXLPOOL_ERR_FILE_SIZE);
    h.max_hosts = 8;
    g_assert_cmpint(cxlpool_check(&h, cxlpool_file_size(geometry.size, 4),
                                  NULL), ==, CXLPOOL_ERR_CRC);
}

/* The header's fields at the offsets docs/pool-format.md gives */
static void test_header_offsets(void)
{
    g_assert_cmpint(sizeof(CXLPoolHeader), ==, 0x60);
    g_assert_cmpint(offsetof(CXLPoolHeader, max_hosts), ==, 0x2c);
    g_assert_cmpint(offsetof(CXLPoolHeader, tail_offset), ==, 0x30);
    g_assert_cmpint(offsetof(CXLPoolHeader, lock_offset), ==, 0x38);
    g_assert_cmpint(offsetof(CXLPoolHeader, create_time_ns), ==, 0x40);
    g_assert_cmpint(offsetof(CXLPoolHeader, tail_size), ==, 0x48);
    g_assert_cmpint(offsetof(CXLPoolHeader, hosts_offset), ==, 0x50);
    g_assert_cmpint(offsetof(CXLPoolHeader, host_entry_size), ==, 0x58);
    g_assert_cmpint(offsetof(CXLPoolHeader, crc), ==, 0x5c);
    g_assert_cmpint(sizeof(CXLPoolSnoopEntry), ==, 16);
}

/*
 * The tail's layout (docs/pool-format.md's table), the offsets worked
 * out by hand: 4 hosts, the smallest; 65, a second bitmap word in each
 * turn entry; 256, the largest.  The tail starts after the data and its
 * size is a whole number of huge pages, so that hugetlbfs can map it.
 */
static void test_layout(void)
{
    static const struct {
        uint64_t size;
        uint32_t hosts;
        uint64_t xstats, undo, turns, sf_header, tail_size;
        uint32_t turn_words;
    } t[] = {
        /* offsets from the start of the tail */
        { 256ULL << 20, 4, 0x1000, 0x2000, 0x12000, 0x32000, 0x200000, 2 },
        { 256ULL << 20, 65, 0x3000, 0x8000, 0x10c000, 0x13c000, 0x400000, 3 },
        { 1ULL << 40, 256, 0x8000, 0x18000, 0x418000, 0x468000, 0x800000,
          5 },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(t); i++) {
        CXLPoolLayout lo;
        uint64_t tail = CXLPOOL_META_SIZE + t[i].size;

        cxlpool_layout(&lo, t[i].size, t[i].hosts);
        g_assert_cmphex(lo.tail, ==, tail);
        g_assert_cmphex(lo.hosts, ==, tail);
        g_assert_cmphex(lo.xstats - tail, ==, t[i].xstats);
        g_assert_cmphex(lo.undo - tail, ==, t[i].undo);
        g_assert_cmphex(lo.turns - tail, ==, t[i].turns);
        g_assert_cmpuint(lo.turn_words, ==, t[i].turn_words);
        g_assert_cmphex(lo.sf_header - tail, ==, t[i].sf_header);
        g_assert_cmphex(lo.sf_entries, ==, lo.sf_header + 0x1000);
        g_assert_cmphex(lo.tail_size, ==, t[i].tail_size);
        g_assert_cmphex(lo.sf_entries + CXLPOOL_SF_MAX_WAYS *
                        CXLSHM_NR_LOCKS * 16, <=, tail + lo.tail_size);
        g_assert_cmphex(lo.tail % CXLPOOL_TAIL_ALIGN, ==, 0);
        g_assert_cmphex(cxlpool_file_size(t[i].size, t[i].hosts), ==,
                        tail + t[i].tail_size);
    }
}

/* The lock tag: held 63, host 55..62, slot 48..54, generation 0..47 */
static void test_tag(void)
{
    uint64_t t = CXLPOOL_TAG(255, 127, 0x123456789abcdefULL);

    g_assert_cmphex(t, ==, 0xffff456789abcdefULL);
    g_assert_cmphex(t, ==, (1ULL << 63) | (255ULL << 55) | (127ULL << 48) |
                    0x456789abcdefULL);
    g_assert_cmpuint(CXLPOOL_TAG_HOST(t), ==, 255);
    g_assert_cmpuint(CXLPOOL_TAG_SLOT(t), ==, 127);
    g_assert_cmphex(CXLPOOL_TAG_GEN(t), ==, 0x456789abcdefULL);
    t = CXLPOOL_TAG(1, 0, 3);
    g_assert_cmphex(t, ==, 0x8080000000000003ULL);
    g_assert_cmpuint(CXLPOOL_TAG_HOST(t), ==, 1);
    g_assert_cmpuint(CXLPOOL_TAG_SLOT(t), ==, 0);
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
    g_test_add_func("/pool-format/header-offsets", test_header_offsets);
    g_test_add_func("/pool-format/layout", test_layout);
    g_test_add_func("/pool-format/tag", test_tag);
    g_test_add_func("/pool-format/header-zero", test_header_zero);
    g_test_add_func("/pool-format/host-lock", test_host_lock);
    return g_test_run();
}

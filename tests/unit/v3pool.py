#!/usr/bin/env python3
"""Write a pool file of format version 3 (docs/pool-format.md, "Upgrading
from version 3"), for the tests of 'cxlpod-pool upgrade': a sparse file of
0x200000 + SIZE bytes with a version-3 header.  With --populated it looks
like a pool a pod used: host 0 left (generation 3), host 1 died while live
(generation 2, its liveness byte free), host 2 failed (generation 5), its
statistics and extended statistics set, data written, a page version,
a lock turn word and a set-up version-3 snoop filter (which the upgrade
drops).  The values are those tests/unit/pool-tool.sh and
tests/qtest/pool-tool.sh expect.

    v3pool.py PATH SIZE COHERENT-SIZE MAX-HOSTS [--populated]
"""
import struct
import sys

META = 0x200000
HOSTS, UNDO, VERSIONS, TURNS, XSTATS = 0x1000, 0x20000, 0xa0000, 0xb0000, 0xc0000
SF, SF_ENTRIES = 0x110000, 0x111000
CREATE_NS = 1700000000123456789


def crc32c(data):
    c = 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    return c ^ 0xffffffff


def header(size, coherent, max_hosts):
    h = b"CXLPOOL\0" + struct.pack("<IIQQQIIIIQQ", 3, 4096, META, size,
                                   coherent, 64, max_hosts, HOSTS, 128,
                                   0x100000, CREATE_NS)
    assert len(h) == 0x48
    return h + struct.pack("<II", crc32c(h), 0)


# (state, pid, generation, join ns, leave ns) of hosts 0, 1, 2
HOST_ROWS = [(3, 111, 3, 1700000001000000000, 1700000002000000000),
             (1, 222, 2, 1700000003000000000, 0),
             (2, 333, 5, 1700000004000000000, 0)]
DATA = [(0, b"cxlpod v3 data"), (0x1234567, b"\xde\xad\xbe\xef"),
        (0xfffffc0, b"last line")]


def main():
    path, size, coherent, max_hosts = sys.argv[1], int(sys.argv[2], 0), \
        int(sys.argv[3], 0), int(sys.argv[4])
    populated = "--populated" in sys.argv[5:]
    with open(path, "wb") as f:
        f.truncate(META + size)
        f.write(header(size, coherent, max_hosts))
        if not populated:
            return
        for i, (state, pid, gen, join, leave) in enumerate(HOST_ROWS):
            stats = [1000 * (i + 1) + k for k in range(12)]
            f.seek(HOSTS + 128 * i)
            f.write(struct.pack("<IIQQQ12Q", state, pid, gen, join, leave,
                                *stats))
            f.seek(XSTATS + 32 * 8 * i)
            f.write(struct.pack("<9Q", *[500 * (i + 1) + k for k in range(9)]))
        for off, data in DATA:
            f.seek(META + off)
            f.write(data)
        f.seek(VERSIONS + 8 * 77)              # page version of lock 77
        f.write(struct.pack("<Q", 6))
        f.seek(TURNS + 8 * 5)                  # host 0 waiting, 1 last
        f.write(struct.pack("<Q", 1 | 2 << 32))
        f.seek(SF)                             # "2SFSNOOP", 2 ways
        f.write(struct.pack("<QQ", 0x504f4f4e53465332, 2))
        f.seek(SF_ENTRIES + 8 * 11)
        f.write(struct.pack("<Q", 0x8000000200000002))


if __name__ == "__main__":
    main()

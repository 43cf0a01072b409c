#!/usr/bin/env python3
"""The BAR5 register table of docs/interfaces.md against the register map
that the device, libcxlpod and the qtest compile (hw-cxl/cxl-shm-regs.h):
every register, host-table entry and statistic at the same offset, with the
same size and name, in both, so that the document cannot drift from the
code."""
import os
import re
import sys

top = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
hdr = open(os.path.join(top, "hw-cxl", "cxl-shm-regs.h")).read()
doc = open(os.path.join(top, "docs", "interfaces.md")).read()

want = set()
regs = {}
for bits, name, off in re.findall(r"^REG(32|64)\(CXLSHM_(\w+), *(0x[0-9a-f]+)\)",
                                  hdr, re.M):
    regs[name] = (int(off, 16), int(bits) // 8)
table, _ = regs.pop("HOST_TABLE")
want.add(("0x%03x+16*i" % table, 4, "HOST_STATE(i)"))
want.add(("0x%03x+16*i" % (table + 8), 8, "HOST_GEN(i)"))
stats, _ = regs.pop("STATS")
for name, (off, size) in regs.items():
    want.add(("0x%03x" % off, size, name))
enum = re.search(r"enum \{\s*(CXLSHM_STAT_WB_OPS,.*?)\};", hdr, re.S).group(1)
names = [n for n in re.findall(r"^\s*CXLSHM_(STAT_\w+),", enum, re.M)
         if n != "STAT_NR"]
for i, name in enumerate(names):
    want.add(("0x%03x" % (stats + 8 * i), 8, name))

have = set()
for off, size, name in re.findall(
        r"^\| *(0x[0-9a-f]+(?: \+ 16\*i)?) *\| *([48]) *\| *([A-Z_]+(?:\(i\))?) *\|",
        doc, re.M):
    have.add((off.replace(" ", ""), int(size), name))

if len(want) < 40:
    sys.exit("parsed only %d registers from hw-cxl/cxl-shm-regs.h" % len(want))
if want != have:
    print("docs/interfaces.md and hw-cxl/cxl-shm-regs.h disagree:")
    for r in sorted(want - have):
        print("  only in the header:   %s %d %s" % r)
    for r in sorted(have - want):
        print("  only in the document: %s %d %s" % r)
    sys.exit(1)
print("docs/interfaces.md: %d registers with the offsets, sizes and names "
      "of hw-cxl/cxl-shm-regs.h" % len(have))

#!/usr/bin/env bash
# The patched QEMU starts a CXL machine and lists its CXL devices.
. "$(dirname "$0")/lib.sh"

"$CXLPOD_QEMU" -device help > "$WORK/devices"
for d in cxl-type3 cxl-shm cxl-rp pxb-cxl; do
    grep -q "name \"$d\"" "$WORK/devices" || fail "QEMU lacks device $d"
done
truncate -s 256M "$WORK/pool.img"
printf 'info qtree\nquit\n' | timeout 60 "$CXLPOD_QEMU" -S -display none -monitor stdio \
    -M q35,cxl=on -m 256M -L /usr/share/seabios -L /usr/share/qemu \
    -object memory-backend-file,id=cxl-mem0,share=on,mem-path="$WORK/pool.img",size=256M \
    -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 \
    -device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2 \
    -device cxl-type3,bus=rp0,volatile-memdev=cxl-mem0,id=cxl-vmem0 \
    -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G > "$WORK/qtree" 2>&1 \
    || { cat "$WORK/qtree"; fail "QEMU did not start the CXL machine"; }
for d in pxb-cxl cxl-rp cxl-type3; do
    grep -q "dev: $d" "$WORK/qtree" || { cat "$WORK/qtree"; fail "qtree lacks $d"; }
done
pass "$("$CXLPOD_QEMU" --version | head -n1) lists pxb-cxl, cxl-rp, cxl-type3, cxl-shm"

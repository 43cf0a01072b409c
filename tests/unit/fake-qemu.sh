#!/bin/sh
# A stand-in for qemu-system-x86_64 that boots no guest, for exercising
# cxlpod-launch itself with many hosts (tests/unit/launch-many.sh,
# scripts/bench-scale.sh --launcher): it answers the launcher's probes
# (-netdev help, -device help), then writes what a guest's serial console
# would to the serial chardev's logfile=: console lines, the ready marker,
# the up marker (with a -netdev), the job's BEGIN, lines of output and
# END rc=0 (docs/interfaces.md section 2), and exits 0.  It never reads the
# job, the pool or QMP.
#
# Environment: FAKE_BOOT_S (seconds of console lines before the ready
# marker, default 2), FAKE_JOB_S (seconds of job output, default 2),
# FAKE_LINES (lines a second, default 20), FAKE_RC (the job's rc, 0).
set -u
case " $* " in
*" -netdev help "*) echo "Available netdev backend types:"; echo vde; exit 0 ;;
*" -device help "*) echo 'name "virtio-9p-pci", bus PCI, desc "virtio 9p"'; exit 0 ;;
esac
log="" name=guest net=0
for a in "$@"; do
    case $a in
    socket,id=ser0,*logfile=*) log=${a#*logfile=}; log=${log%%,*} ;;
    cxlpod-host*) name=${a#cxlpod-} ;;
    vde,*) net=1 ;;
    esac
done
[ -n "$log" ] || { echo "fake-qemu: no serial chardev with logfile= in: $*" >&2; exit 1; }
boot=${FAKE_BOOT_S:-2} job=${FAKE_JOB_S:-2} lines=${FAKE_LINES:-20}

# burst SECONDS WHAT: LINES lines a second for SECONDS seconds
burst() {
    s=0
    while [ "$s" -lt "$1" ]; do
        i=0
        while [ "$i" -lt "$lines" ]; do
            printf '[%5d.%06d] %s: %s line %d of second %d\r\n' "$s" "$i" "$name" "$2" "$i" "$s"
            i=$((i + 1))
        done >>"$log"
        sleep 1
        s=$((s + 1))
    done
}
: >>"$log"
burst "$boot" "fake boot"
printf '@@CXLPOD-READY dax=/dev/dax0.0@@\r\n' >>"$log"
[ "$net" = 0 ] || printf '@@CXLPOD-UP %s userland=initramfs@@\r\n' "$name" >>"$log"
printf '@@CXLPOD-BEGIN@@\r\n' >>"$log"
burst "$job" "fake job output"
printf '%s: done\r\n@@CXLPOD-END rc=%d@@\r\n' "$name" "${FAKE_RC:-0}" >>"$log"
exit 0

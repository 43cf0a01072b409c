#!/usr/bin/env bash
# A vCPU's TLB against a memory map that changes under it (the QEMU abort
# "iotlb_to_section: Assertion `section_index < d->map.sections_nb'" that
# int-16 hit in a guest's early boot; patch 0002).  One guest thread reads
# the q35 AHCI's CAP register (00:1f.2 BAR5) in a loop while another
# toggles the memory enable of a spare virtio-serial device at 00:09.0,
# whose BARs lie below it: every toggle builds a map in which the AHCI's
# section has another index.  Every read must return CAP, and QEMU must
# not abort.  On Debian's 10.0.13 without patch 0002 this read a wrong
# value 26 times in 20 s (21000 map changes).
. "$(dirname "$0")/lib.sh"

# 10 s, and longer if that was not enough for 2000 map changes and 100000
# reads beside them (a busy machine makes the run longer, not smaller)
rc=0
pod -n 1 "${SHM[@]}" --smp 2 --timeout 200 \
    --qemu-arg -device --qemu-arg virtio-serial-pci,bus=pcie.0,addr=0x9 \
    -- 'cxlpod-maprace --seconds 10 --min-changes 2000 --min-reads 100000 --read 0000:00:1f.2:5 --toggle 0000:00:09.0' \
    >"$WORK/launch.out" 2>&1 || rc=$?
j=$(json_of 0 cxlpod-maprace)
[ -n "$j" ] || { cat "$WORK/launch.out"; fail "no cxlpod-maprace result (QEMU aborted or the guest failed; launcher exit $rc)"; }
read -r changes reads wrong last secs < <(jq -r '"\(.map_changes) \(.reads) \(.wrong) \(.last_wrong) \(.seconds)"' <<<"$j")
echo "map changes $changes, reads $reads, wrong $wrong, ${secs}s"
[ "$changes" -ge 2000 ] || fail "only $changes map changes: the tool stopped before its --min-changes"
[ "$reads" -ge 100000 ] || fail "only $reads reads: the tool stopped before its --min-reads"
[ "$wrong" = 0 ] || fail "$wrong of $reads reads returned another region's value (last $last): a TLB entry was looked up in a newer memory map"
grep -q 'Assertion' "$WORK/launch.out" && { cat "$WORK/launch.out"; fail "QEMU aborted"; }
[ "$rc" = 0 ] || { cat "$WORK/launch.out"; fail "the launcher exited $rc (the job or QEMU failed)"; }
pass "$reads MMIO reads across $changes memory-map changes, none misdirected"

#!/usr/bin/env bash
# The cxlpod demo: builds what it needs (scripts/build-all.sh), boots two
# guests on one cxl-shm pool, runs the guest tools in them and prints a
# table of what happened.  A second pod kills a writer's QEMU mid-stream; a
# third runs one guest in mode=timed under -icount and measures the load
# latency the device charges, as the guest sees it.
#
#   bash scripts/demo.sh        (as root on Debian 12; installs what it needs)
#   bash scripts/demo.sh --dry-run   build and boot nothing: check the three
#                               pods' launcher options (cxlpod-launch --dry-run)
set -euo pipefail
. "$(dirname "$0")/common.sh"

DRY=0
case ${1:-} in
    "") ;;
    --dry-run) DRY=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (--dry-run or nothing)" ;;
esac

[ $DRY = 1 ] || bash "$TOP/scripts/build-all.sh"

L=$BUILD/meson/host-tools/cxlpod-launch
W=$BUILD/demo
if [ $DRY = 1 ]; then
    [ -x "$L" ] || die "no $L: run scripts/build-all.sh"
    W=$(mktemp -d /tmp/cxlpod-demo-dry.XXXXXX)
    trap 'rm -rf "$W"' EXIT
    # the launcher checks the options and paths and prints the QEMU command
    # lines of each pod; "$L" below is this function
    dry_launch() { "$L_REAL" --dry-run "$@" || die "the launcher refuses: $*"; }
    L_REAL=$L L=dry_launch
fi
rm -rf "$W"; mkdir -p "$W"
POOL=(--device cxl-shm --size 256M --coherent-size 64M --latency-ns 100)

log "demo 1/3: two guests on one pool run info, litmus, mq and allreduce (TCG, about a minute)"
"$L" -q -n 2 -w "$W/pod" "${POOL[@]}" --timeout 900 -- \
    'cxlpod-info --json; cxlpod-litmus --method both --json;' \
    'cxlpod-mq --messages 2000 --json; cxlpod-mq --messages 200 --no-flush --json;' \
    'cxlpod-allreduce --sizes 64K,1M,4M --json; cxlpod-allreduce --sizes 1M --no-flush --json; true' \
    > "$W/pod.out" || { cat "$W/pod.out"; die "the demo pod failed; logs in $W/pod"; }
log "demo 2/3: host 0 writes records and is killed mid-stream; host 1 checks them"
"$L" -q -n 2 -w "$W/crash" "${POOL[@]}" --timeout 600 --kill '0@CRASH-POINT' -- \
    'cxlpod-crash --delay-us 100 --json' > "$W/crash.out" \
    || { cat "$W/crash.out"; die "the crash pod failed; logs in $W/crash"; }
log "demo 3/3: one guest in mode=timed under -icount: dependent-load latency on the pool"
# a 64 KiB cache and 1 MiB chases: nearly every load misses
"$L" -q -n 1 -w "$W/timed" --device cxl-shm --size 256M --coherent-size 64M \
    --device-opt mode=timed --device-opt cache-size=64K \
    --qemu-arg -icount --qemu-arg shift=0,sleep=off --timeout 600 -- \
    'cxlpod-bench --size 1M --latency-only --min-time 0.001 --json' > "$W/timed.out" \
    || { cat "$W/timed.out"; die "the timed-mode pod failed; logs in $W/timed"; }
if [ $DRY = 1 ]; then
    n=$(cat "$W"/pod.out "$W"/crash.out "$W"/timed.out | grep -c -- '-device cxl-shm')
    [ "$n" = 5 ] || die "dry run: $n QEMU command lines, expected 5 (2 + 2 + 1)"
    log "dry run: the three pods' options are fine (5 QEMU command lines); nothing booted"
    exit 0
fi

# j DIR HOST TOOL FILTER [N]: jq FILTER on the Nth (default last) --json line
# tool TOOL printed on guest HOST
j() {
    grep -F "{\"tool\":\"$3\"" "$W/$1/host$2.out" | sed -n "${5:-\$}p" | jq -r "$4"
}
verdict() { [ "$1" = true ] && echo ok || echo MISMATCH; }

info=$(grep -F '{"tool":"cxlpod-info"' "$W/pod/host0.out")
echo
echo "cxlpod demo: 2 guests (TCG) on one cxl-shm pool"
jq -r '"  pool \(.size / 1048576) MiB, coherent window \(.coherent_size / 1048576) MiB, line \(.line_size) B, mode \(.mode), latency \(.latency_ns) ns, caps \(.caps)"' <<<"$info"
echo
echo "1. Litmus across the two hosts (doorbell method; the native clwb/clflushopt runs are counted below)"
printf '   %-27s %-12s %-9s %-20s %-9s %s\n' test area protocol outcome expected verdict
row() {  # row LABEL TEST AREA PROTO
    local r
    r=$(j pod 0 cxlpod-litmus ".results[] | select(.method==\"doorbell\" and .test==\"$2\" and .area==\"$3\" and .proto==\"$4\") | [.outcome, .expected, .ok] | @tsv")
    IFS=$'\t' read -r o e k <<<"$r"
    printf '   %-27s %-12s %-9s %-20s %-9s %s\n' "$1" "$3" "$4" "$o" "$e" "$(verdict "$k")"
}
row "message passing"            mp coherent none
row "message passing"            mp noncoherent none
row "message passing"            mp noncoherent wb
row "message passing"            mp noncoherent wbinv
row "stale read (reader polls)"  stale noncoherent none
row "stale read (reader polls)"  stale noncoherent wbinv
row "atomic counter, 2 hosts"    atomic coherent none
row "atomic counter, 2 hosts"    atomic noncoherent wbinv
row "false sharing, one line"    fs noncoherent wbinv
for h in 0 1; do
    printf '   host %d: %s combinations (both methods), %s mismatches\n' $h \
        "$(j pod $h cxlpod-litmus .combinations)" "$(j pod $h cxlpod-litmus .mismatches)"
done
echo "   (protocol: none; wb = writer writes back; wbinv = writer writes back and reader invalidates)"
echo
echo "2. Message queue (descriptors in the coherent window, 1 KiB payloads in the non-coherent area)"
printf '   %-24s %10s %10s %10s  %s\n' run messages msg/s MB/s result
for n in 1 2; do
    label=$([ $n = 1 ] && echo "with writeback+inv" || echo "--no-flush")
    printf '   %-24s %10s %10.0f %10.2f  %s\n' "$label" \
        "$(j pod 1 cxlpod-mq .messages $n)" "$(j pod 1 cxlpod-mq .msgs_per_s $n)" \
        "$(j pod 1 cxlpod-mq .MBps $n)" \
        "$(j pod 1 cxlpod-mq 'if .ok then "all payloads verified" else "corruption detected (\(.checksum_errors) bad payloads)" end' $n)"
done
echo
echo "3. Allreduce of int64 vectors across 2 hosts (reduce-scatter + all-gather through the pool)"
printf '   %-24s %10s %10s %10s  %s\n' run bytes us MB/s result
while read -r b us mb; do
    printf '   %-24s %10s %10.0f %10.2f  %s\n' "with writeback+inv" "$b" "$us" "$mb" \
        "$(j pod 0 cxlpod-allreduce 'if .ok then "exact sums" else "WRONG" end' 1)"
done < <(j pod 0 cxlpod-allreduce '.sizes[] | "\(.bytes) \(.us) \(.MBps)"' 1)
printf '   %-24s %10s %10s %10s  %s\n' "--no-flush" "$(j pod 0 cxlpod-allreduce '.sizes[0].bytes' 2)" - - \
    "$(j pod 0 cxlpod-allreduce 'if .ok then "NOT detected" else "corruption detected (\(.wrong_elements) wrong elements)" end' 2)"
echo
echo "4. Host failure: host 0 appends records and is killed mid-stream"
printf '   %s\n' "$(grep -E '^host [01]:' "$W/crash.out" | tr '\n' ';' | sed 's/;$//; s/;/, /')"
j crash 1 cxlpod-crash '"   host 1 sees writer \(.writer): \(.published) records published, \(.verified) intact, \(.torn) torn, \(.missing) missing -> \(if .ok then "ok" else "CORRUPT" end)"'
echo
echo "5. Timed mode: every access through this host's cache model, latency charged in guest time (-icount shift=0)"
printf '   %-12s %16s %22s\n' area "configured miss" "measured load (guest)"
for a in ram coherent noncoherent; do
    printf '   %-12s %16s %19.1f ns\n' $a \
        "$([ $a = ram ] && echo - || echo "$(j timed 0 cxlpod-bench .latency_ns) ns")" \
        "$(j timed 0 cxlpod-bench ".areas.$a.lat_ns")"
done
j timed 0 cxlpod-bench '"   device: \(.timed.misses) misses, \(.timed.hits) hits, \(.timed.charged_ns / 1e6) ms charged; a load also runs its own instructions (the ram row)"'
echo
echo "logs: $W"

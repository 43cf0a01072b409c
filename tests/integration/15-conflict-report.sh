#!/usr/bin/env bash
# The conflict report (issue 7): two guests false-share one non-coherent line
# (cxlpod-litmus fs, doorbell and native).  litmus checks that the device
# counts exactly one conflict per clobbering writeback; here the JSON-lines
# log (--conflict-log: the launcher writes one file for both QEMUs from the
# device's CXL_SHM_CONFLICT events) must name that line and the writing
# host, hold as many entries as the hosts' counters, mark as lost only
# bytes of the other host's word, and name the guest instruction (a clwb /
# clflushopt or the doorbell's MMIO write: the device knows its PC), with
# no event lost to the device's rate limit.
. "$(dirname "$0")/lib.sh"

log=$WORK/conflicts.jsonl
pod -n 2 "${SHM[@]}" --conflict-log "$log" --timeout 300 -- \
    'cxlpod-litmus --test fs --method both --json' >"$WORK/launch.out" 2>&1 \
    || { cat "$WORK/launch.out"; out 0; out 1; fail "litmus fs reported a mismatch or the pod failed"; }
j0=$(json_of 0 cxlpod-litmus)
[ "$(jq -r .mismatches <<<"$j0")" = 0 ] || fail "host0: litmus mismatches"
line=$(jq -r '[.results[] | select(.area=="noncoherent") | .line_offset] | unique | .[]' <<<"$j0")
[ "$(wc -w <<<"$line")" = 1 ] || fail "litmus reported fs lines '$line', expected one"
counted=0
for h in 0 1; do
    c=$(json_of $h cxlpod-litmus | jq -r .conflicts_total)
    echo "host$h: STAT_CONFLICTS $c"
    counted=$((counted + c))
done
[ -s "$log" ] || fail "no conflict log written"
# every entry: the PC of the guest instruction that wrote back (a non-zero
# hex number), and no "missed" (the device's rate limit dropped nothing, so
# the count below is the whole story)
while read -r host pc missed; do
    [[ $pc =~ ^0x0*[1-9a-f][0-9a-f]*$ ]] \
        || fail "conflict of host $host logged with pc '$pc', expected the guest PC (non-zero hex)"
    [ "$missed" = none ] || fail "conflict of host $host logged with missed=$missed: the device's rate limit dropped events"
done < <(jq -r '"\(.host) \(.pc // "none") \(.missed // "none")"' "$log")
n=$(wc -l <"$log")
echo "conflict log: $n entries, false-shared line at pool offset $line"
[ "$n" = "$counted" ] || fail "conflict log has $n entries, the hosts counted $counted"
[ "$n" -ge 4 ] || fail "only $n conflicts logged, expected at least 4 (wb and wbinv, 2 methods)"
# every entry: the fs line, a host of the pod, generation 1, a non-empty lost
# mask (bit i = byte i of the line) inside the other host's word (word h of
# the line is host h's)
while read -r off host gen mask; do
    [ "$off" = "$line" ] || fail "conflict logged at pool offset $off, not the false-shared line $line"
    case $host in 0|1) ;; *) fail "conflict logged for host $host, not a host of the pod" ;; esac
    [ "$gen" = 1 ] || fail "conflict of host $host logged with generation $gen, expected 1"
    other=$((8 * (1 - host)))
    (( mask != 0 && (mask & ~(0xff << other)) == 0 )) \
        || fail "host $host: lost mask $mask names bytes outside host $((1 - host))'s word (bytes $other..$((other + 7)))"
done < <(jq -r '"\(.offset) \(.host) \(.generation) \(.lost_mask)"' "$log")
# which host's writeback comes second (and conflicts) is a race: per host,
# its log entries must be exactly the conflicts it counted
for h in 0 1; do
    c=$(json_of $h cxlpod-litmus | jq -r .conflicts_total)
    e=$(jq -r --argjson h $h 'select(.host == $h) | .host' "$log" | wc -l)
    [ "$e" = "$c" ] || fail "host $h: $e conflicts logged, $c counted"
done
pass "conflict report: $n entries, all on line $line, each naming the writer, its PC and only the other host's bytes"

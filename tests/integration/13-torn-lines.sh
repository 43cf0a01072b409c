#!/usr/bin/env bash
# Issue 7 item 2: no torn lines between hosts.  Two guests fill the same 16
# non-coherent lines with whole-line tags (host, round), write them back and
# fetch them again, as fast as they can for 3 s per method: every line
# either host fetches, and every line of the pool at the end, holds one tag.
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 300 -- 'cxlpod-fidelity torn --method both --json' \
    >"$WORK/launch.out" 2>&1 || { cat "$WORK/launch.out"; out 0; out 1; fail "cxlpod-fidelity torn failed"; }
for h in 0 1; do
    j=$(json_of $h cxlpod-fidelity)
    [ -n "$j" ] || { out $h; fail "host$h: no cxlpod-fidelity result"; }
    [ "$(jq '.results | length' <<<"$j")" = 2 ] || fail "host$h: expected a doorbell and a native result"
    while read -r m rounds fetched others torn foreign pool ok; do
        echo "host$h $m: $rounds rounds, $fetched lines fetched ($others written by the other host): $torn torn, $foreign foreign, $pool torn in the pool"
        [ "$others" -gt 0 ] || fail "host$h $m: never fetched a line of the other host (the hosts did not overlap)"
        [ "$ok" = true ] || fail "host$h $m: $torn torn, $foreign foreign, $pool torn in the pool"
    done < <(jq -r '.results[] | "\(.method) \(.rounds) \(.fetched) \(.from_others) \(.torn) \(.foreign) \(.pool_torn) \(.ok)"' <<<"$j")
done
pass "torn lines: every fetched and pool line is one whole writeback (doorbell and native)"

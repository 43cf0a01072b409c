#!/usr/bin/env bash
# Every host progresses on a contended line (issue 35's fairness): four
# hosts write back their own lines of ONE page of the non-coherent area
# at once (cxlpod-contend --bytes 4K: 16 lines each, one lock word for
# all four), natively and then by doorbell.  Each host must finish with
# its lines intact and with at least a quarter of the rounds of the
# fastest host (a host that waited its turn forever would have made
# next to none).
. "$(dirname "$0")/lib.sh"

pod -n 4 "${SHM[@]}" --timeout 600 -- \
    "cxlpod-contend --method native --bytes 4K --seconds 8 --json --timeout 120 &&
     cxlpod-contend --method doorbell --bytes 4K --seconds 8 --json --timeout 120" \
    || { for h in 0 1 2 3; do out $h; done; fail "the pod failed"; }
for h in 0 1 2 3; do
    n=$(out $h | grep -cF '{"tool":"cxlpod-contend"')
    [ "$n" = 2 ] || { out $h; fail "host $h: $n result lines, not 2"; }
done
for m in native doorbell; do
    j=$(out 0 | grep -F '{"tool":"cxlpod-contend"' | grep -F "\"method\":\"$m\"")
    jq -e '.ok and .wrong_own == 0 and .wrong_final == 0' <<<"$j" >/dev/null ||
        fail "$m: lines lost or wrong: $j"
    min=$(jq -r .min_rounds <<<"$j"); max=$(jq -r .max_rounds <<<"$j")
    [ "$min" -gt 1 ] && [ $(( min * 4 )) -ge "$max" ] ||
        fail "$m: a host was starved: slowest $min rounds, fastest $max"
    echo "$m: rounds per host from $min to $max"
done
pass "4 hosts on one page: every host progressed, native and doorbell"

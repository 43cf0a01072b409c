#!/usr/bin/env bash
# Litmus across four guests on one pool.
. "$(dirname "$0")/lib.sh"

pod -n 4 "${SHM[@]}" --mem 384M --timeout 850 -- 'cxlpod-litmus --json' \
    || fail "litmus reported a mismatch or the pod failed"
for h in 0 1 2 3; do
    j=$(json_of $h cxlpod-litmus)
    [ "$(jq -r .nhosts <<<"$j")" = 4 ] || fail "host$h: not a 4-host run"
    [ "$(jq -r .mismatches <<<"$j")" = 0 ] || fail "host$h: mismatches"
done
expect_litmus 0 doorbell atomic coherent none '^exact$'
expect_litmus 0 doorbell mp noncoherent wb '^old$'
expect_litmus 0 doorbell mp noncoherent wbinv '^new$'
pass "litmus: 4 hosts, 0 mismatches"

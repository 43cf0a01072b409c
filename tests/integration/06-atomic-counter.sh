#!/usr/bin/env bash
# Cross-host atomics in the coherent window: 2 guests x 100000 lock xadd on
# one counter end exact; the device reports cross-host atomics (CAPS bit1).
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 600 -- \
    'cxlpod-info --json && cxlpod-litmus --test atomic --atomic-ops 100000 --json' \
    || fail "pod failed"
caps=$(json_of 0 cxlpod-info | jq -r .caps)
(( caps & 2 )) || fail "device does not report cross-host atomics (caps=$caps)"
for h in 0 1; do
    expect_litmus $h doorbell atomic coherent none '^exact$'
    # in the non-coherent area the same increments are lost: the counter
    # lives in each host's private image
    expect_litmus $h doorbell atomic noncoherent none '^lost'
done
pass "coherent counter exact after 2 x 100000 increments"

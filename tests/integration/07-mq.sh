#!/usr/bin/env bash
# Message queue across hosts: every payload verified; without coherence
# operations the consumers must detect corruption (exit 3).  One pod runs
# both, on fresh queue state each time.
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 600 -- \
    'cxlpod-mq --messages 2000 || exit 1; cxlpod-mq --no-flush --messages 200; echo "noflush-rc=$?"' \
    || fail "mq failed"
for h in 0 1; do
    expect_line $h '^mq: OK all payloads verified'
done
both=$(out 0; out 1)
grep -q 'mq: FAIL corruption detected' <<<"$both" || fail "--no-flush corruption went unnoticed"
grep -q '^noflush-rc=3$' <<<"$both" || fail "--no-flush did not exit 3"
pass "mq verified with flushes, corruption detected without"

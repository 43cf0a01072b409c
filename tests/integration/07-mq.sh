#!/usr/bin/env bash
# Message queue across hosts: every payload verified; without coherence
# operations the consumers must detect corruption (exit 3).
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 600 -- 'cxlpod-mq --messages 2000' || fail "mq failed"
expect_line 0 '^mq: OK all payloads verified'
expect_line 1 '^mq: OK all payloads verified'
pod -n 2 "${SHM[@]}" --timeout 600 -- 'cxlpod-mq --no-flush --messages 200; echo "rc=$?"' \
    || fail "pod failed"
both=$(out 0; out 1)
grep -q 'mq: FAIL corruption detected' <<<"$both" || fail "--no-flush corruption went unnoticed"
grep -q '^rc=3$' <<<"$both" || fail "--no-flush did not exit 3"
pass "mq verified with flushes, corruption detected without"

#!/usr/bin/env bash
# A writer's QEMU is killed mid-stream: the survivor reads every published
# record intact, never a torn one, and sees the writer as failed.
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 600 --kill '0@CRASH-POINT' -- 'cxlpod-crash --delay-us 100' \
    > "$WORK/launch.out" || { cat "$WORK/launch.out"; fail "pod failed"; }
grep -q '^host 0: killed' "$WORK/launch.out" || { cat "$WORK/launch.out"; fail "host 0 was not killed"; }
re='writer failed; published ([0-9]+) records, verified ([0-9]+) intact, 0 torn, 0 missing'
line=$(out 1 | grep -E "$re") || { out 1; fail "survivor did not verify the records"; }
[[ $line =~ $re ]]
[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] || fail "published ${BASH_REMATCH[1]} but verified ${BASH_REMATCH[2]}"
[ "${BASH_REMATCH[1]}" -ge 100 ] || fail "writer published only ${BASH_REMATCH[1]} records before the kill"
expect_line 1 'crash: OK every published record intact'
pass "survivor verified ${BASH_REMATCH[1]} published records after the writer's host died"

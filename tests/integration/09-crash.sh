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
# the pool file after the kill: host 1 marked host 0 failed and then left;
# check finds nothing wrong and notes that host 0 rejoins at generation 2
[ "$(pool_states | cut -d, -f1-2)" = "failed,left" ] || fail "pool host table after the kill: $(pool_states)"
pool_check 'host 0 \(generation 1\) failed; it rejoins with generation 2'
pass "survivor verified ${BASH_REMATCH[1]} published records after the writer's host died"

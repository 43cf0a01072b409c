#!/usr/bin/env bash
# A guest that never reaches its ready marker is noticed at the boot
# deadline, reported with the tail of its console and stopped: the launcher
# does not wait out --timeout for it.  The stall is made real by a kernel
# command line whose init does not exist: the kernel panics and the guest
# sits there forever, as the guest that stalled in early boot did.
. "$(dirname "$0")/lib.sh"

t0=$(date +%s)
rc=0
pod -n 2 "${SHM[@]}" --boot-timeout 25 --timeout 600 --json \
    --append 'rdinit=/cxlpod-no-such-init panic=0' -- 'echo never' \
    >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
took=$(( $(date +%s) - t0 ))
cat "$WORK/stderr"

[ "$rc" = 1 ] || fail "launcher exit status $rc, expected 1 (a guest failed)"
# the deadline, not the 600 s timeout, ended the run: each host's end is
# the boot stall (a host the timeout ended would say "timed out"), and the
# run is shorter than the timeout it did not wait out
[ "$(tail -n1 "$WORK/stdout" | jq -r '.wall_s < 600')" = true ] \
    || fail "took $(tail -n1 "$WORK/stdout" | jq -r .wall_s)s: the run waited out its --timeout 600"
for i in 0 1; do
    grep -q "host $i: no ready marker .* (boot stalled, --boot-timeout 25)" "$WORK/stderr" \
        || fail "no boot-stall report for host $i"
    st=$(tail -n1 "$WORK/stdout" | jq -r ".results[$i].status")
    [ "$st" = boot-stalled ] || fail "host $i: JSON status '$st', expected boot-stalled"
    grep -q "^host $i: boot stalled: no ready marker within 25 s" "$WORK/stdout" \
        || fail "host $i: no boot-stalled result line"
done
# the report carries the console's last lines, which show why
grep -q '  console| .*\(Kernel panic\|No working init\|Unable to mount root\)' "$WORK/stderr" \
    || fail "the report does not show the console's last lines"
pass "both stalled guests reported with their console and stopped after ${took}s"

#!/usr/bin/env bash
# Two guests on one pool pass a fresh random token to each other, in both
# directions, through the pool.
. "$(dirname "$0")/lib.sh"

t0=$(token); t1=$(token)
cat > "$WORK/job.sh" <<JOB
me=\$CXLPOD_HOST_ID; other=\$((1 - me))
if [ \$me = 0 ]; then mine=$t0; theirs=$t1; else mine=$t1; theirs=$t0; fi
cxlpod-poke write \$((0x100000 + me * 4096)) "\$mine"
cxlpod-poke wait \$((0x100000 + other * 4096)) "\$theirs" 240 || exit 3
echo "host \$me got \$(cxlpod-poke read \$((0x100000 + other * 4096)) 16)"
JOB
pod -n 2 --timeout 400 --job "$WORK/job.sh" || fail "launcher reported a failure"
expect_line 0 "^host 0 got $t1\$"
expect_line 1 "^host 1 got $t0\$"
pass "tokens $t0 and $t1 crossed the pool in both directions"

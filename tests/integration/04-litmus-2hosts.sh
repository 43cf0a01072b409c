#!/usr/bin/env bash
# The visibility matrix from user space on two booted guests, with the
# doorbell and with native clwb/clflushopt: every litmus test in each area
# with each protocol must give the documented outcome (docs/guest-guide.md).
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --timeout 800 -- 'cxlpod-litmus --method both --json' \
    || { out 0; out 1; fail "litmus reported a mismatch or the pod failed"; }
for h in 0 1; do
    j=$(json_of $h cxlpod-litmus)
    [ "$(jq -r .mismatches <<<"$j")" = 0 ] || fail "host$h: mismatches"
    [ "$(jq -r .combinations <<<"$j")" = 68 ] || fail "host$h: expected 68 combinations"
done
for m in doorbell native; do
    # coherent window: seen at once, no protocol needed
    expect_litmus 0 $m mp coherent none '^new$'
    expect_litmus 0 $m stale coherent none '^seen$'
    # non-coherent: not seen without writeback, nor with writeback alone
    # (the reader's stale copy), only with writeback + invalidate
    expect_litmus 0 $m mp noncoherent none '^old$'
    expect_litmus 0 $m mp noncoherent wb '^old$'
    expect_litmus 0 $m mp noncoherent wbinv '^new$'
    expect_litmus 0 $m stale noncoherent none '^unseen$'
    expect_litmus 0 $m stale noncoherent wbinv '^seen$'
    # false sharing clobbers even with the full protocol
    expect_litmus 0 $m fs noncoherent wbinv '^lost'
    expect_litmus 0 $m fs coherent none '^all'
    # a writeback needs no fence when it is the doorbell (synchronous); with
    # the fence the payload is new either way
    expect_litmus 0 $m mp noncoherent wb-fence '^new$'
    expect_litmus 0 $m fs noncoherent wb '^lost\(kept 0x., 1 conflict\)$'
done
# the missing fence (writeback=deferred, the default): after native clwb
# without sfence the reader sees the flag and then the stale payload
expect_litmus 0 doorbell mp noncoherent wb-nofence '^new$'
expect_litmus 0 native mp noncoherent wb-nofence '^(old|mixed)'

pass "litmus: 68 combinations x 2 hosts as expected (doorbell and native)"

#!/usr/bin/env bash
# mode=timed on two booted guests: every access goes through the device's
# cache model and snoop filter (docs/device.md, "Timed mode").  The whole
# litmus matrix, doorbell and native clwb/clflushopt, gives the outcomes
# the guest guide documents; the coherent counter is exact across hosts
# (atomics through the I/O path); the device reports the mode, the miss
# latency and its cache statistics.
. "$(dirname "$0")/lib.sh"

pod -n 2 "${SHM[@]}" --device-opt mode=timed --timeout 800 -- \
    'cxlpod-info --json && cxlpod-litmus --test atomic --atomic-ops 20000 --json && cxlpod-litmus --method both --json && cxlpod-info --json' \
    || { out 0; out 1; fail "litmus reported a mismatch or the pod failed"; }
for h in 0 1; do
    first=$(grep -m1 -F '{"tool":"cxlpod-info"' "$WORK/pod/host$h.out")
    [ "$(jq -r .mode <<<"$first")" = timed ] || fail "host$h: mode is not timed"
    [ "$(jq -r .latency_ns <<<"$first")" = 250 ] || fail "host$h: miss latency is not the default 250 ns"
    (( $(jq -r .caps <<<"$first") & 2 )) || fail "host$h: no cross-host atomics in timed mode"
    (( ($(jq -r .caps <<<"$first") & 4) == 0 )) || fail "host$h: timed mode claims a direct mapping"
    j=$(json_of $h cxlpod-litmus)
    [ "$(jq -r .mismatches <<<"$j")" = 0 ] || fail "host$h: mismatches"
    [ "$(jq -r .combinations <<<"$j")" = 68 ] || fail "host$h: expected 68 combinations"
    last=$(json_of $h cxlpod-info)
    misses=$(jq -r .stats.misses <<<"$last")
    charged=$(jq -r .stats.charged_ns <<<"$last")
    (( misses > 0 )) || fail "host$h: no misses counted"
    (( charged >= misses * 250 )) || fail "host$h: charged $charged ns for $misses misses"
done
for m in doorbell native; do
    expect_litmus 0 $m mp coherent none '^new$'
    expect_litmus 0 $m mp noncoherent none '^old$'
    expect_litmus 0 $m mp noncoherent wbinv '^new$'
    expect_litmus 0 $m stale noncoherent none '^unseen$'
    expect_litmus 0 $m fs noncoherent wbinv '^lost'
done
expect_litmus 0 native mp noncoherent wb-nofence '^(old|mixed)'
for h in 0 1; do
    a=$(grep -m1 -F '{"tool":"cxlpod-litmus"' "$WORK/pod/host$h.out")
    got=$(jq -r '.results[] | select(.area=="coherent" and .proto=="none") | .outcome' <<<"$a")
    [ "$got" = exact ] || fail "host$h: coherent counter '$got' after 2 x 20000 increments"
done
pass "timed mode: 68 litmus combinations as documented, counter exact, misses charged"

# Under -icount (guest time, deterministic) an atomic on the pool runs as
# TCG's exclusive one-instruction step.  The step must get an instruction
# budget of its own: without one it exited at its icount check every time
# and the first `xchg` of the tools' join never completed.  The coherent
# counter is exact across two hosts under -icount.  A stuck vCPU runs no
# guest timer: the launcher's --timeout (180 s; the pod needs about 35 s)
# stops it and names the hosts.
pod -n 2 "${SHM[@]}" --smp 1 --device-opt mode=timed --qemu-arg -icount \
    --qemu-arg shift=0,sleep=on --append nowatchdog --timeout 180 -- \
    'cxlpod-litmus --test atomic --atomic-ops 2000 --timeout 60 --json' \
    || { out 0; out 1; fail "timed mode under -icount: the atomic counter pod failed (a stuck atomic?)"; }
for h in 0 1; do
    a=$(json_of $h cxlpod-litmus)
    got=$(jq -r '.results[] | select(.area=="coherent" and .proto=="none") | .outcome' <<<"$a")
    [ "$got" = exact ] || fail "host$h: coherent counter '$got' under -icount after 2 x 2000 increments"
done
pass "timed mode under -icount: atomics on the pool complete, the counter is exact"

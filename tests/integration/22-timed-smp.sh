#!/usr/bin/env bash
# mode=timed, 2 hosts of 4 vCPUs each (MTTCG: one host thread per vCPU):
# 4 threads per host make fetch_adds on one counter at once, so the
# vCPUs of one QEMU race each other and the other QEMU's.  In the
# coherent window the count is exact, with the doorbell and the native
# instructions; in the non-coherent area it is "lost" as documented.
# Then the message-passing litmus cases on the same 4-vCPU guests.
. "$(dirname "$0")/lib.sh"

ops=1500
pod -n 2 --smp 4 "${SHM[@]}" --device-opt mode=timed --timeout 900 -- \
    "grep -c ^processor /proc/cpuinfo && cxlpod-litmus --test atomic --threads 4 --atomic-ops $ops --method both --json && cxlpod-litmus --test mp --method both --json" \
    || { out 0; out 1; fail "litmus reported a mismatch or the pod failed"; }
want=$((2 * 4 * ops))
for h in 0 1; do
    [ "$(sed -n 1p "$WORK/pod/host$h.out")" = 4 ] || fail "host$h: the guest does not have 4 vCPUs"
    a=$(grep -m1 -F '{"tool":"cxlpod-litmus"' "$WORK/pod/host$h.out" || true)
    [ "$(jq -r .threads <<<"$a")" = 4 ] || fail "host$h: the atomic run did not use 4 threads"
    for m in doorbell native; do
        got=$(jq -r --arg m "$m" '.results[] | select(.method==$m and .test=="atomic" and .area=="coherent") | .outcome' <<<"$a" | sort -u)
        [ "$got" = exact ] || fail "host$h $m: coherent counter '$got' after 2 hosts x 4 threads x $ops adds (want $want)"
        got=$(jq -r --arg m "$m" '.results[] | select(.method==$m and .test=="atomic" and .area=="noncoherent" and .proto=="none") | .outcome' <<<"$a")
        [[ $got == lost* ]] || fail "host$h $m: non-coherent counter '$got', expected lost"
    done
    [ "$(jq -r .mismatches <<<"$(json_of $h cxlpod-litmus)")" = 0 ] || fail "host$h: mp mismatches"
done
pass "timed mode, 2 hosts x 4 vCPUs x 4 threads: the coherent counter is exact ($want adds), litmus as documented"

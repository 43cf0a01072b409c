#!/usr/bin/env bash
# Allreduce through the pool on 2 and 4 hosts: exact sums with the
# protocol (doorbell, and native clwb/clflushopt on pages the process has
# never touched, which must fault in as on hardware); without it the wrong
# result is detected.
. "$(dirname "$0")/lib.sh"

for n in 2 4; do
    pod -n $n "${SHM[@]}" --mem 384M --timeout 800 -- \
        'cxlpod-allreduce --sizes 4K,64K,1M; cxlpod-allreduce --method native --sizes 1M || exit 1;' \
        'cxlpod-allreduce --no-flush --sizes 64K; echo "noflush-rc=$?"' \
        || fail "$n hosts: allreduce failed"
    for ((h = 0; h < n; h++)); do
        [ "$(out $h | grep -c "^allreduce: OK exact sums on all $n hosts")" = 2 ] \
            || fail "host$h: doorbell and native runs did not both give exact sums"
        expect_line $h 'allreduce: FAIL corruption detected'
        expect_line $h '^noflush-rc=3$'
    done
done
pass "allreduce exact on 2 and 4 hosts; --no-flush detected"

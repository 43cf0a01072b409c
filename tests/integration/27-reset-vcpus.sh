#!/usr/bin/env bash
# A guest resets its own device from one vCPU while its other vCPUs store
# and flush through it (issue 24, item 1): on host 0 (4 vCPUs), thread 0
# resets the device through the kernel (/sys/bus/pci/devices/BDF/reset: a
# secondary bus reset of the root port) and commits decoder 0 again through
# BAR0, again and again, while threads 1-3 store new versions of their
# lines and make them durable with clwb, clflushopt and non-temporal stores
# (cxlpod-resetrace, docs/guest-guide.md).  A line acked with no reset near
# it must read back exactly from the pool; a line a reset overlapped must
# hold a version between the last acked and the last stored; none may be
# torn across lines or go back.  Host 1 meanwhile writes back and reads its
# own lines (its slowest op reported) and watches host 0's; at the end it
# finds every final version and host 0's generation grown by the resets.  The pool
# then has no line lock or unfinished line write of any host.
. "$(dirname "$0")/lib.sh"

resets=${RESETRACE_RESETS:-16}
pod -n 2 --smp 4 "${SHM[@]}" --timeout 600 -- \
    "cxlpod-resetrace --threads 4 --resets $resets --lines 32 --timeout 400 --json" \
    || { out 0; out 1; fail "cxlpod-resetrace reported a lost or wrong line, or the pod failed"; }
r=$(json_of 0 cxlpod-resetrace)
o=$(json_of 1 cxlpod-resetrace)
[ -n "$r" ] && [ -n "$o" ] || { out 0; out 1; fail "no JSON line from cxlpod-resetrace"; }
echo "host0: $r"
echo "host1: $o"
jq -e --argjson n "$resets" '.role == "resetter" and .ok and .resets == $n and .dev_resets == $n
       and .lost == 0 and .wrong == 0' <<<"$r" >/dev/null \
    || fail "host0: $(jq -r '"\(.resets) resets (device: \(.dev_resets)), \(.lost) lost, \(.wrong) wrong: \(.first_wrong)"' <<<"$r")"
[ "$(jq -r '[.per_thread[].cpu] | unique | length' <<<"$r")" = 4 ] \
    || fail "host0: the threads did not run on 4 different vCPUs: $(jq -c '[.per_thread[].cpu]' <<<"$r")"
# the resets really overlapped stores of every kind, and lines were checked after them
jq -e '.overlapped > 0 and .checked_after_reset > 0 and .verified > 0 and
       .by_method.clwb > 0 and .by_method.clflushopt > 0 and .by_method.nt > 0' <<<"$r" >/dev/null \
    || fail "host0: the stores did not overlap the resets: $(jq -c '{overlapped, checked_after_reset, verified, by_method}' <<<"$r")"
jq -e --argjson n "$resets" '.role == "observer" and .ok and .own_ops > 0 and .own_ops_wrong == 0
       and .word_wrong == 0 and .backwards == 0 and .final_wrong == 0
       and .rank0_generation == .rank0_generation_before + $n' <<<"$o" >/dev/null \
    || fail "host1: $(jq -c '{own_ops, own_ops_wrong, word_wrong, backwards, final_wrong, rank0_generation, rank0_generation_before}' <<<"$o")"
# no lock word and no unfinished line write left behind, by any host
pool_check
if "$POOLTOOL" check "$WORK/pod/pool.img" 2>&1 | grep -E 'line locks and' >/dev/null; then
    fail "locks or line writes left behind: $("$POOLTOOL" check "$WORK/pod/pool.img" 2>&1)"
fi
pass "$(jq -r '"\(.resets) resets by \(.reset_method) (\(.reset_ms_avg|floor) ms avg) beside \(.stores) stores (\(.overlapped) overlapped a reset, \(.verified) read back exactly, \(.checked_after_reset) checked after a reset), 0 lost"' <<<"$r"); host1: $(jq -r '"\(.own_ops) own ops (slowest \(.own_op_ms_max|floor) ms), \(.watch_rounds) rounds over host 0 lines, generation \(.rank0_generation)"' <<<"$o")"

#!/usr/bin/env bash
# The doorbell's long operation against the other vCPUs of its guest: on
# host 0 (4 vCPUs), one thread pinned to vCPU 0 rings whole-area flushes of
# the non-coherent area (each runs outside QEMU's global lock, on that
# vCPU's thread) while three threads pinned to vCPUs 1-3 read every
# identify register and statistic and ring small writebacks of their own
# lines, which queue behind the flush (cxlpod-dbrace, docs/guest-guide.md).
# Every read must be right, every statistic monotonic, every small op's
# DB_STATUS / DB_LINES its own, the op counters exact; host 1 then
# invalidates and finds every small op's bytes in the pool.  The reads and
# rings must really have overlapped the flushes: reads of DB_STATUS busy,
# small ops rung while busy.
# Each big op dirties 16384 lines first (--big-dirty), so that its flush,
# now run by the device's doorbell thread and done in about a millisecond,
# still lasts long enough for the others to ring behind it also with a CPU
# hog beside the test (with 1024 they never did, in one such run).
. "$(dirname "$0")/lib.sh"

ops=${DBRACE_OPS:-24}
pod -n 2 --smp 4 "${SHM[@]}" --timeout 900 -- \
    "grep -c ^processor /proc/cpuinfo && cxlpod-dbrace --threads 4 --ops $ops --big-dirty 16384 --expect-size 256M --expect-coherent 64M --expect-hosts 2 --timeout 600 --json" \
    || { out 0; out 1; fail "cxlpod-dbrace reported a wrong access or the pod failed"; }
for h in 0 1; do
    [ "$(sed -n 1p "$WORK/pod/host$h.out")" = 4 ] || fail "host$h: the guest does not have 4 vCPUs"
done
r=$(json_of 0 cxlpod-dbrace)
c=$(json_of 1 cxlpod-dbrace)
[ -n "$r" ] && [ -n "$c" ] || { out 0; out 1; fail "no JSON line from cxlpod-dbrace"; }
echo "host0: $r"
echo "host1: $c"
jq -e '.role == "ringer" and .ok and .wrong == 0 and .stat_backwards == 0 and
       .small_ops_wrong == 0 and .stats_exact' <<<"$r" >/dev/null \
    || fail "host0: wrong reads or results: $(jq -r .first_wrong <<<"$r")"
jq -e --argjson ops "$ops" '.big_ops == $ops and .threads == 4' <<<"$r" >/dev/null \
    || fail "host0: not $ops big ops on 4 threads"
# four threads on four different vCPUs
[ "$(jq -r '[.per_thread[].cpu] | unique | length' <<<"$r")" = 4 ] \
    || fail "host0: the threads did not run on 4 different vCPUs: $(jq -c '[.per_thread[].cpu]' <<<"$r")"
# the accesses overlapped the big ops
jq -e '.busy_reads > 0 and .rounds_in_busy > 0 and .small_ops > 0 and
       .small_ops_queued > 0 and .big_handed_over > 0' <<<"$r" >/dev/null \
    || fail "host0: the other vCPUs' accesses did not overlap the big ops"
# every small op's bytes reached the pool, as host 1 read them
jq -e '.role == "checker" and .ok and .small_ops_missing == 0' <<<"$c" >/dev/null \
    || fail "host1: small ops' bytes missing in the pool"
[ "$(jq -r .small_ops_checked <<<"$c")" = "$(jq -r .small_ops <<<"$r")" ] \
    || fail "host1 checked $(jq -r .small_ops_checked <<<"$c") small ops, host0 rang $(jq -r .small_ops <<<"$r")"
[ "$(jq -r .pool_checked <<<"$r")" = "$(jq -r .small_ops <<<"$r")" ] \
    || fail "host0 did not get host1's count"
pass "$(jq -r '"\(.big_ops) flushes of \(.big_lines) lines (\(.big_op_ms_avg|floor) ms avg), \(.small_ops) small ops (\(.small_ops_queued) queued behind one), \(.reads) reads (\(.busy_reads) busy), 0 wrong; host1 found every small op in the pool"' <<<"$r")"

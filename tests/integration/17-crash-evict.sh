#!/usr/bin/env bash
# A writer publishes 200 records properly (writeback, fence, count in the
# coherent window), then stores 64 more with plain stores only (no
# writeback, not published), holds 100 ms, prints CRASH-POINT and is
# killed there.  The survivor verifies every published record and sorts
# the 64 unpublished slots into intact / partial / absent.
#   - without eviction (direct mode's deterministic worst case): every
#     published record intact, every unpublished one absent;
#   - with evict-rate=10: every published record intact, never a torn one,
#     and some (not necessarily all) lines of the unpublished records
#     reached the pool by themselves.
# Both arms in one pod of three guests (three boots): host 0 writes
# without eviction, host 1 (evict-rate set for it alone) writes once host
# 0 has failed, in its own quarter of the pool (--slot 1); host 2 reads
# both, one after the other.
. "$(dirname "$0")/lib.sh"

C='--json --nhosts 2 --crash-at 200 --unpublished 64 --hold-ms 100 --idle 60'
printf '%s\n' "cxlpod-crash --host 0 $C" >"$WORK/w0.sh"
# host 1 starts its run (whose join resets the shared sync block) only
# after host 0 has failed: the first run is then past its join
cat >"$WORK/w1.sh" <<EOS
i=0
until cxlpod-info | grep -Eq '^  host 0 +failed'; do
    i=\$((i + 1)); [ \$i -lt 600 ] || { echo 'host 0 never failed'; exit 4; }
    sleep 0.1
done
cxlpod-crash --slot 1 --host 0 $C
EOS
printf '%s\n' "cxlpod-crash --host 1 $C; cxlpod-crash --slot 1 --host 1 $C" >"$WORK/r.sh"

pod -n 3 "${SHM[@]}" --timeout 300 --boot-timeout 120 --stall-timeout 90 \
    --device-opt 1:evict-rate=10 --device-opt "1:evict-seed=$RANDOM" \
    --kill '0@CRASH-POINT' --kill '1@CRASH-POINT' \
    --job-host 0:"$WORK/w0.sh" --job-host 1:"$WORK/w1.sh" --job-host 2:"$WORK/r.sh" \
    >"$WORK/launch.out" 2>&1 || { cat "$WORK/launch.out"; fail "pod failed"; }
for h in 0 1; do
    grep -q "^host $h: killed" "$WORK/launch.out" || { cat "$WORK/launch.out"; fail "host $h was not killed"; }
done
out 2 | grep -F '{"tool":"cxlpod-crash"' >"$WORK/r.json"
[ "$(wc -l <"$WORK/r.json")" = 2 ] || { out 2; fail "the survivor did not report on both writers"; }

check() {  # check NAME LINE: the common part of an arm's verdict
    local j
    j=$(sed -n "$2p" "$WORK/r.json")
    echo "$1: $(jq -c '{writer,published,verified,torn,missing,unpublished_intact,unpublished_partial,unpublished_absent,unpublished_lines_present}' <<<"$j")" >&2
    [ "$(jq -r .writer <<<"$j")" = failed ] || fail "$1: survivor did not see the writer fail: $j"
    [ "$(jq -r .published <<<"$j")" = 200 ] || fail "$1: published $(jq -r .published <<<"$j"), expected 200"
    [ "$(jq -r '.verified == .published and .torn == 0 and .missing == 0 and .ok' <<<"$j")" = true ] \
        || fail "$1: a published record is torn or missing: $j"
    [ "$(jq -r .unpublished <<<"$j")" = 64 ] || fail "$1: survivor did not find the 64 unpublished slots: $j"
    echo "$j"
}

j=$(check no-evict 1)
[ "$(jq -r '.unpublished_absent == 64 and .unpublished_lines_present == 0' <<<"$j")" = true ] \
    || fail "no-evict: unpublished records reached the pool without eviction: $j"
j=$(check evict 2)
present=$(jq -r '.unpublished_intact + .unpublished_partial' <<<"$j")
[ "$present" -ge 1 ] || fail "evict: no unpublished record reached the pool with eviction on: $j"
pass "no eviction: 64/64 unpublished absent; eviction: $present/64 unpublished present" \
     "($(jq -r .unpublished_lines_present <<<"$j") of 256 lines), all 200 published intact in both"

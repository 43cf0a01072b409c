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
# Two pods of two guests (the device's evict-rate is set per pod).
. "$(dirname "$0")/lib.sh"

JOB='cxlpod-crash --json --crash-at 200 --unpublished 64 --hold-ms 100 --idle 60'

arm() {  # arm NAME [LAUNCHER ARGS...]: one pod, reader's JSON in $WORK/NAME.json
    local name=$1
    shift
    pod -n 2 "${SHM[@]}" --timeout 300 --boot-timeout 120 --kill '0@CRASH-POINT' "$@" \
        -- "$JOB" >"$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "$name: pod failed"; }
    grep -q '^host 0: killed' "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: host 0 was not killed"; }
    json_of 1 cxlpod-crash >"$WORK/$name.json"
    [ -s "$WORK/$name.json" ] || { out 1; fail "$name: no result from the survivor"; }
    local j
    j=$(cat "$WORK/$name.json")
    echo "$name: $(jq -c '{writer,published,verified,torn,missing,unpublished_intact,unpublished_partial,unpublished_absent,unpublished_lines_present}' <<<"$j")"
    [ "$(jq -r .writer <<<"$j")" = failed ] || fail "$name: survivor did not see the writer fail: $j"
    [ "$(jq -r .published <<<"$j")" = 200 ] || fail "$name: published $(jq -r .published <<<"$j"), expected 200"
    [ "$(jq -r '.verified == .published and .torn == 0 and .missing == 0 and .ok' <<<"$j")" = true ] \
        || fail "$name: a published record is torn or missing: $j"
    [ "$(jq -r .unpublished <<<"$j")" = 64 ] || fail "$name: survivor did not find the 64 unpublished slots: $j"
}

arm no-evict
j=$(cat "$WORK/no-evict.json")
[ "$(jq -r '.unpublished_absent == 64 and .unpublished_lines_present == 0' <<<"$j")" = true ] \
    || fail "no-evict: unpublished records reached the pool without eviction: $j"

arm evict --device-opt evict-rate=10 --device-opt evict-seed=$RANDOM
j=$(cat "$WORK/evict.json")
present=$(jq -r '.unpublished_intact + .unpublished_partial' <<<"$j")
[ "$present" -ge 1 ] || fail "evict: no unpublished record reached the pool with eviction on: $j"
pass "no eviction: 64/64 unpublished absent; eviction: $present/64 unpublished present" \
     "($(jq -r .unpublished_lines_present <<<"$j") of 256 lines), all 200 published intact in both"

#!/usr/bin/env bash
# Issue 7 item 1: a host never loses its own store.  One guest with 4 vCPUs:
# three store threads count into their own words of 64 non-coherent lines
# (and `lock add` a shared word of each line) while the fourth vCPU writes
# back, invalidates and flushes those lines in a loop, with the doorbell and
# with native clwb/clflushopt.  Every store and every increment must
# survive, in the guest's view and in the pool.
. "$(dirname "$0")/lib.sh"

pod -n 1 --smp 4 "${SHM[@]}" --timeout 300 -- 'cxlpod-fidelity own-stores --method both --json' \
    >"$WORK/launch.out" 2>&1 || { cat "$WORK/launch.out"; out 0; fail "cxlpod-fidelity own-stores failed"; }
j=$(json_of 0 cxlpod-fidelity)
[ -n "$j" ] || { out 0; fail "no cxlpod-fidelity result"; }
[ "$(jq '.results | length' <<<"$j")" = 2 ] || { out 0; fail "expected a doorbell and a native result"; }
while read -r m th stores ops lost words ctrs pool ok; do
    echo "$m: $th store threads, $stores stores, $ops coherence ops: $lost lost, $words words / $ctrs counters / $pool pool words wrong"
    [ "$th" = 3 ] || fail "$m: $th store threads, expected 3 (-smp 4)"
    [ "$ops" -gt 1000 ] || fail "$m: only $ops coherence operations ran beside the stores"
    [ "$ok" = true ] || fail "$m: stores lost ($lost lost, $words words, $ctrs counters, $pool pool words wrong)"
done < <(jq -r '.results[] | "\(.method) \(.store_threads) \(.stores) \(.coherence_ops) \(.lost) \(.words_wrong) \(.counters_wrong) \(.pool_wrong) \(.ok)"' <<<"$j")
pass "own stores: none lost to concurrent writeback/invalidate/flush (doorbell and native)"

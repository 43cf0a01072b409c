#!/usr/bin/env bash
# Issue 7 item 3: non-temporal stores reach the pool by the next sfence.
# Host 0 copies 8 KiB into the non-coherent area with each non-temporal
# instruction, runs sfence and publishes with a plain store in the coherent
# window; host 1 invalidates and compares every byte.  A control copied
# with plain stores + sfence (no writeback) must stay old for host 1: it
# shows the comparison can fail.  Then nt-merge, in direct and in timed
# mode: host 1 changes half of every line that host 0 holds clean and
# writes it back, host 0 stores the other half non-temporally; both hosts
# must see both halves (the stale half must not clobber host 1's).
. "$(dirname "$0")/lib.sh"

insns="movnti32 movnti64 movntq movntdq movntps movntpd vmovntdq vmovntps vmovntpd maskmovq maskmovdqu vmaskmovdqu vmaskmovdqu-half"
pod -n 2 "${SHM[@]}" --timeout 300 -- 'cxlpod-fidelity nt --json' \
    >"$WORK/launch.out" 2>&1 || { cat "$WORK/launch.out"; out 0; out 1; fail "cxlpod-fidelity nt failed"; }
for h in 0 1; do
    j=$(json_of $h cxlpod-fidelity)
    [ -n "$j" ] || { out $h; fail "host$h: no cxlpod-fidelity result"; }
    for i in $insns plain-control; do
        r=$(jq -r --arg i "$i" '.results[] | select(.insn==$i) | "\(.check) \(.expect) \(.new) \(.old) \(.other) \(.ok)"' <<<"$j")
        [ -n "$r" ] || fail "host$h: no result for $i"
        read -r check expect new old other ok <<<"$r"
        echo "host$h $i $check: $new new, $old old, $other other bytes (expected all $expect)"
        [ "$ok" = true ] || fail "host$h $i ($check): $new new, $old old, $other other bytes, expected all $expect"
    done
done
[ "$(json_of 1 cxlpod-fidelity | jq -r '.results[] | select(.insn=="plain-control") | .expect')" = old ] \
    || fail "host1: the plain-store control was not expected old"

merge() {  # merge LABEL [launcher options]: nt-merge in one pod run
    local label=$1; shift
    pod -n 2 "${SHM[@]}" "$@" --timeout 400 -- 'cxlpod-fidelity nt-merge --json' \
        >"$WORK/launch.out" 2>&1 || { cat "$WORK/launch.out"; out 0; out 1; fail "$label: cxlpod-fidelity nt-merge failed"; }
    for h in 0 1; do
        j=$(json_of $h cxlpod-fidelity)
        [ "$(jq -r .test <<<"$j")" = nt-merge ] || { out $h; fail "$label host$h: no nt-merge result"; }
        for i in $insns; do
            r=$(jq -r --arg i "$i" '.results[] | select(.insn==$i) | "\(.new) \(.old) \(.other) \(.ok)"' <<<"$j")
            [ -n "$r" ] || fail "$label host$h: no nt-merge result for $i"
            read -r new old other ok <<<"$r"
            echo "$label host$h nt-merge $i: $new new, $old old, $other other bytes"
            [ "$ok" = true ] || fail "$label host$h $i: $old of $((new + old + other)) bytes old: the non-temporal store wrote its stale line back"
        done
    done
}
merge direct
merge timed --device-opt mode=timed
pass "non-temporal stores: all 13 forms visible to the other host after sfence, plain stores are not; only their bytes land (direct and timed)"

#!/usr/bin/env bash
# A pod of N initramfs guests on the pod network, N = 8 here (the suite
# runs it so); CXLPOD_MANY_HOSTS=64 makes it the 64-host pod of issue 36
# (guests --mem 256M; the device must take max-hosts 64):
#   - every host ready and up, every job rc=0, every host left in the
#     pool's table;
#   - host I at 10.211.(I / 254).(I % 254 + 1)/16 with hostname hostI, and
#     it reaches host I+1 by name (ping);
#   - an atomic counter in the coherent window exact across all N hosts
#     (cxlpod-litmus --test atomic: every host's lock xadds counted once);
#   - the litmus matrix (--method both) on a sample of pairs, one pair at
#     a time: hosts 0 and 1, 0 and N-1, N/2 and N-1 (the others wait for
#     each pair's end marker in the coherent window, out of the tools'
#     sync block);
#   - the message queue across all N (cxlpod-mq), which is also the last
#     barrier: no host powers off before every ping is done.
. "$(dirname "$0")/lib.sh"

N=${CXLPOD_MANY_HOSTS:-8}
[[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 256 ] || fail "CXLPOD_MANY_HOSTS wants 2..256"
# the tools wait for their peers while the launcher boots a few at a time
TO=$((120 + 30 * N))
TOK=$(token)
cat >"$WORK/job.sh" <<EOF
#!/bin/sh
me=\$CXLPOD_HOST_ID n=\$CXLPOD_NHOSTS
cxlpod-litmus --test atomic --method doorbell --atomic-ops 2000 --timeout $TO --json
# waitmark OFFSET TOKEN: the token at OFFSET of the pool (a read every 3 s:
# dozens of idle guests polling faster would slow the pair that runs)
waitmark() {
    i=0
    while [ "\$(cxlpod-poke read \$1 \${#2})" != "\$2" ]; do
        i=\$((i + 1)); [ \$i -lt $((TO / 3)) ] || return 1
        sleep 3
    done
}
k=0 seen=" "
for p in 0:1 0:\$((n - 1)) \$((n / 2)):\$((n - 1)); do
    a=\${p%:*} b=\${p#*:}
    case "\$seen" in *" \$p "*) continue ;; esac
    [ \$a != \$b ] || continue
    seen="\$seen\$p "
    off=\$((0x2000000 + k * 4096)) mark=$TOK-pair\$k
    # a tool's join clears the sync block's lines of its ranks: the pair's
    # rank 0 lets the hosts still leaving the last tool's final barrier
    # see it first, and says the pair is done a little after its end
    if [ \$me = \$a ] || [ \$me = \$b ]; then
        r=0; [ \$me = \$b ] && r=1
        [ \$r = 1 ] || sleep 3
        cxlpod-litmus --host \$r --nhosts 2 --method both --timeout $TO --json | grep '^{' | sed "s/^/pair \$a-\$b: /"
    fi
    [ \$me != \$a ] || { sleep 2; cxlpod-poke write \$off \$mark; }
    waitmark \$off \$mark || echo "pair \$a-\$b: its end never came"
    k=\$((k + 1))
done
echo "addr=\$(ip -4 -o addr show | awk '/ 10\.211\./ {print \$4}') name=\$(hostname)"
next=host\$(( (me + 1) % n ))
if ping -c 1 -W 20 \$next >/dev/null 2>&1; then echo "ping \$next ok"; else echo "ping \$next FAILED"; fi
cxlpod-mq --messages 100 --timeout $TO
EOF
# the launcher's default limit (300 s + 10 s a host) is the boot alone of
# a large pod on 2 cores: the jobs' own limit (TO) comes on top
LIMIT=(); [ "$N" -le 8 ] || LIMIT=(--timeout $((300 + 20 * N + TO)))
pod -n "$N" "${SHM[@]}" --net --mem 256M --json "${LIMIT[@]}" --job "$WORK/job.sh" >"$WORK/pod.out" \
    || { tail -n 40 "$WORK/pod.out"; fail "the $N-host pod failed"; }
j=$(tail -n 1 "$WORK/pod.out")
[ "$(jq -r '[.results[] | select(.status == "ok")] | length' <<<"$j")" = "$N" ] \
    || fail "not every host ok: $(jq -c '[.results[] | .status]' <<<"$j")"
[ "$(jq -r '.all_ready_s != null and .net' <<<"$j")" = true ] || fail "no all_ready_s, or no network"
for ((h = 0; h < N; h++)); do
    expect_line $h "^addr=10\.211\.$((h / 254))\.$((h % 254 + 1))/16 name=host$h\$"
    expect_line $h "^ping host$(((h + 1) % N)) ok\$"
    # the pod-wide litmus: its line is the one without a "pair" in front
    got=$(out $h | grep '^{"tool":"cxlpod-litmus"' | tail -n 1 | jq -r \
          '.results[] | select(.test == "atomic" and .area == "coherent" and .proto == "none") | .outcome')
    [ "$got" = exact ] || fail "host$h: the counter across all $N hosts: '$got', not exact"
    expect_line $h '^mq: OK'
    ! out $h | grep -q 'its end never came' || fail "host$h: a pair's end marker never came"
done
npairs=0
for p in 0:1 0:$((N - 1)) $((N / 2)):$((N - 1)); do
    a=${p%:*} b=${p#*:}
    [ "$a" != "$b" ] || continue
    for h in $a $b; do
        mm=$(out $h | grep "^pair $a-$b: {" | tail -n 1 | sed "s/^pair $a-$b: //" | jq -r .mismatches)
        [ "$mm" = 0 ] || { out $h | grep "^pair $a-$b" | head -c 2000; fail "host$h: pair $a-$b's litmus matrix: mismatches '$mm'"; }
    done
    npairs=$((npairs + 1))
done
pool_check
[ "$(pool_states)" = "$(printf 'left%.0s,' $(seq "$N") | sed 's/,$//')" ] \
    || fail "the pool's host table after the run: $(pool_states)"
pass "$N hosts: every region ready in $(jq -r .all_ready_s <<<"$j") s, addresses, names and pings, the counter exact across all, the litmus matrix on $npairs pairs, mq OK; the launcher's CPU time $(jq -r .launcher_cpu_s <<<"$j") s"

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
#   - the message queue across all N (cxlpod-mq), which is also the last
#     barrier: no host powers off before every ping is done.
. "$(dirname "$0")/lib.sh"

N=${CXLPOD_MANY_HOSTS:-8}
[[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 256 ] || fail "CXLPOD_MANY_HOSTS wants 2..256"
# the tools wait for their peers while the launcher boots a few at a time
TO=$((120 + 30 * N))
cat >"$WORK/job.sh" <<EOF
#!/bin/sh
me=\$CXLPOD_HOST_ID n=\$CXLPOD_NHOSTS
cxlpod-litmus --test atomic --method doorbell --atomic-ops 2000 --timeout $TO --json
echo "addr=\$(ip -4 -o addr show | awk '/ 10\.211\./ {print \$4}') name=\$(hostname)"
next=host\$(( (me + 1) % n ))
if ping -c 1 -W 20 \$next >/dev/null 2>&1; then echo "ping \$next ok"; else echo "ping \$next FAILED"; fi
cxlpod-mq --messages 100 --timeout $TO
EOF
pod -n "$N" "${SHM[@]}" --net --mem 256M --json --job "$WORK/job.sh" >"$WORK/pod.out" \
    || { tail -n 40 "$WORK/pod.out"; fail "the $N-host pod failed"; }
j=$(tail -n 1 "$WORK/pod.out")
[ "$(jq -r '[.results[] | select(.status == "ok")] | length' <<<"$j")" = "$N" ] \
    || fail "not every host ok: $(jq -c '[.results[] | .status]' <<<"$j")"
[ "$(jq -r '.all_ready_s != null and .net' <<<"$j")" = true ] || fail "no all_ready_s, or no network"
for ((h = 0; h < N; h++)); do
    expect_line $h "^addr=10\.211\.$((h / 254))\.$((h % 254 + 1))/16 name=host$h\$"
    expect_line $h "^ping host$(((h + 1) % N)) ok\$"
    expect_litmus $h doorbell atomic coherent none '^exact$'
    expect_line $h '^mq: OK'
done
pool_check
[ "$(pool_states)" = "$(printf 'left%.0s,' $(seq "$N") | sed 's/,$//')" ] \
    || fail "the pool's host table after the run: $(pool_states)"
pass "$N hosts: every region ready in $(jq -r .all_ready_s <<<"$j") s, addresses, names and pings, the counter exact across all, mq OK; the launcher's CPU time $(jq -r .launcher_cpu_s <<<"$j") s"

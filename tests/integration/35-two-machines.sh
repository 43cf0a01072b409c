#!/usr/bin/env bash
# One pod across two "machines" (docs/multi-machine.md): two network
# namespaces this test makes, joined by a veth pair it makes inside them
# (10.250.0.1 and 10.250.0.2 on the veth only; the host's own network is
# never touched), each running one launcher with one host of a 2-host
# host-userland pod:
#   - machine a (host 0): --net-listen 10.250.0.1:PORT, --serve (the pool
#     service on the veth address, for hosts of other machines);
#   - machine b (host 1): --net-join 10.250.0.1:PORT, the pod's ssh keys
#     from a's work directory (--pod-keys), and the pool from a's service
#     (--pool ucx://10.250.0.1:SPORT --pool-key: its device is a remote
#     host, docs/device.md "A remote host").
# The guests ping and ssh each other by name across the two switches,
# pass a token each way through the pool (b's through the service), and
# host 0 runs the MPI allreduce on both with mpirun; then b's launcher
# SIGKILLs host 1 and the service must fail it within its heartbeat
# timeout (1000 ms) of the kill.  The later scenarios
# give every machine the pool file itself (the namespaces share the file
# system): what they test is the launchers and the pod network.
# Then, in order: the same pod in one command (a's launcher starts b's
# with --machine, "ip netns exec" in ssh's place); a --machine whose
# command fails; joins refused for a wrong key either way; three machines
# (a third namespace on its own veth to a, the hub): pings between all,
# then a failure on b relayed through a to c; host 1's QEMU killed on b
# (both launchers report it); a's pool service killed (reported) and b's
# launcher SIGKILLed once it joined: a names machine b, stops its own
# host and exits 1.  docs/multi-machine.md, "Tested on one box".
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (it makes network namespaces)"
command -v ip >/dev/null || fail "no ip (iproute2)"

NSA=cxlpod-a-$$ NSB=cxlpod-b-$$ NSC=cxlpod-c-$$
VA=cxa$$ VB=cxb$$ VCA=cxca$$ VC=cxc$$
PORT=17611 SPORT=17612
PIDS=()
BDIR=
cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    ip netns pids "$NSA" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns pids "$NSB" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
    ip netns pids "$NSC" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$NSC" 2>/dev/null || true
    [ -z "$BDIR" ] || rm -rf "$BDIR"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# bgwait CMD...: CMD in the background, waited for: a signal to this test
# (scripts/test.sh's timeout) runs its cleanup at once, not after CMD
bgwait() { "$@" & local p=$!; PIDS+=($p); wait $p; }

ip netns add "$NSA"
ip netns add "$NSB"
# the veth is made inside machine a, its peer put in machine b
ip -n "$NSA" link add "$VA" type veth peer name "$VB" netns "$NSB"
ip -n "$NSA" addr add 10.250.0.1/24 dev "$VA"
ip -n "$NSB" addr add 10.250.0.2/24 dev "$VB"
for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set "$VB" up
ip netns exec "$NSB" ping -c 1 -W 5 10.250.0.1 >/dev/null || fail "the veth between the namespaces does not carry"
# a veth carries before it reads "up" (the kernel's link watch, up to a
# second): UCX uses only interfaces that do, so wait for it as a machine
# whose network is up would have
upped() { ip -n "$1" link show "$2" 2>/dev/null | grep -q "state UP"; }
for t in $(seq 1 50); do upped "$NSA" "$VA" && upped "$NSB" "$VB" && break; sleep 0.1; done
upped "$NSB" "$VB" || fail "the veth of machine b never came up"
# a third machine for the three-machine pod, on a veth of its own to a
ip netns add "$NSC"
ip -n "$NSA" link add "$VCA" type veth peer name "$VC" netns "$NSC"
ip -n "$NSA" addr add 10.250.1.1/24 dev "$VCA"
ip -n "$NSC" addr add 10.250.1.2/24 dev "$VC"
ip -n "$NSC" link set lo up
ip -n "$NSA" link set "$VCA" up
ip -n "$NSC" link set "$VC" up

PROJ=$WORK/proj
mkdir -p "$PROJ"
t0=$(token); t1=$(token); t2=$(token)
MPIPROG=$CXLPOD_TOP/build/meson/guest-tools/mpi/cxlpod-mpi-allreduce
[ -x "$MPIPROG" ] || fail "no $MPIPROG (Open MPI missing when the tools were built? scripts/deps.sh installs it)"
command -v mpirun >/dev/null || fail "mpirun is not installed on the host (scripts/deps.sh installs openmpi-bin)"
cat >"$PROJ/job.sh" <<EOF
me=\$CXLPOD_HOST_ID; other=\$((1 - me))
if [ \$me = 0 ]; then mine=$t0; theirs=$t1; else mine=$t1; theirs=$t0; fi
for t in \$(seq 1 60); do ping -c 1 -W 2 host\$other >/dev/null 2>&1 && break; sleep 1; done
echo "ping host\$other: \$(ping -c 1 -W 5 host\$other >/dev/null 2>&1 && echo ok || echo FAILED)"
for t in \$(seq 1 90); do r=\$(ssh host\$other 'echo "\$(hostname) \$CXLPOD_HOST_ID"' 2>/tmp/ssh.err) && break; sleep 1; done
echo "ssh host\$other -> \$r"
[ -n "\$r" ] || echo "ssh error: \$(cat /tmp/ssh.err)"
cxlpod-poke write \$((0x100000 + me * 4096)) "\$mine"
cxlpod-poke wait \$((0x100000 + other * 4096)) "\$theirs" 240 || exit 3
echo "host \$me got \$(cxlpod-poke read \$((0x100000 + other * 4096)) 16)"
# mpirun across both machines from host 0; host 1 serves its rank until
# host 0 says it is done (a third token, through the pool)
if [ \$me = 0 ]; then
    mpirun -np 2 --host host0,host1 --timeout 240 $MPIPROG --protocol writeback --elems 8192 --rounds 2
    echo "mpi-rc=\$?"
    cxlpod-poke write \$((0x100000 + 2 * 4096)) $t2
else
    cxlpod-poke wait \$((0x100000 + 2 * 4096)) $t2 400 || exit 4
    # the first pod: b's launcher kills this QEMU here (--kill)
    if [ -e kill-host1 ]; then echo HOST1-KILL-POINT; sleep 120; exit 5; fi
fi
EOF

POOL=$WORK/pool.img
COMMON=(-n 2 "${SHM[@]}" --userland host --mem 768M --timeout 500 --job "$PROJ/job.sh")
cd "$PROJ"
ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" --local-hosts 0 \
    --machine-name a --pool "$POOL" --serve 10.250.0.1:$SPORT \
    --net-listen 10.250.0.1:$PORT >"$WORK/a.out" 2>"$WORK/a.err" &
PA=$!; PIDS+=($PA)
touch "$PROJ/kill-host1"
for t in $(seq 1 300); do
    grep -q "listens on 10.250.0.1:$PORT" "$WORK/a.err" && break
    kill -0 $PA 2>/dev/null || { cat "$WORK/a.err"; fail "machine a's launcher ended before it listened"; }
    sleep 0.2
done
grep -q "listens on" "$WORK/a.err" || fail "machine a's launcher never listened"
grep -q "pool service: cxlpod-pool serve (pid [0-9]*) listening on 10.250.0.1:$SPORT" "$WORK/a.err" \
    || { cat "$WORK/a.err"; fail "machine a started no pool service"; }
[ -e "$POOL.key" ] || fail "--serve made no pod key $POOL.key"
# a client that connects and says nothing holds nobody up (dropped after
# 10 s while b joins and the pod runs)
ip netns exec "$NSB" bash -c "exec 3<>/dev/tcp/10.250.0.1/$PORT; sleep 15" &
PIDS+=($!)
ip netns exec "$NSB" "$CXLPOD_LAUNCH" -w "$WORK/b" "${COMMON[@]}" --local-hosts 1 \
    --machine-name b --pool "ucx://10.250.0.1:$SPORT" --pool-key "$POOL.key" \
    --pod-keys "$WORK/a/ssh" \
    --net-join 10.250.0.1:$PORT --kill 1@HOST1-KILL-POINT >"$WORK/b.out" 2>"$WORK/b.err" &
PB=$!; PIDS+=($PB)
# once host 1's job is done, b's launcher SIGKILLs its QEMU (--kill): the
# moment, its message right after the kill() seen every 10 ms, against
# the service's log below (the dying QEMU's sockets close before it is a
# zombie: its pid is no measure)
(
    for t in $(seq 1 1500); do
        grep -q HOST1-KILL-POINT "$WORK/b/host1.log" 2>/dev/null && break
        kill -0 $PB 2>/dev/null || exit 0
        sleep 0.2
    done
    for t in $(seq 1 3000); do
        grep -q "host 1: killed (SIGKILL)" "$WORK/b.err" && break
        sleep 0.01
    done
    date +%s.%N >"$WORK/t_kill"
) &
PK=$!; PIDS+=($PK)
ra=0; rb=0
wait $PA || ra=$?
wait $PB || rb=$?
wait $PK || true
PIDS=()
rm -f "$PROJ/kill-host1"
show() { echo "--- a:"; cat "$WORK/a.err" "$WORK/a.out"; echo "--- b:"; cat "$WORK/b.err" "$WORK/b.out"; }
[ $ra = 0 ] && [ $rb = 0 ] || { show; fail "launchers exited $ra (a) and $rb (b)"; }
grep -q "pod network: machine b (hosts 1-1, from 10.250.0.2:[0-9]*) joined" "$WORK/a.err" || { show; fail "a did not report b joining"; }
grep -q "pod network: a connection from 10.250.0.2:[0-9]* sent no hello in 10 s; closed" "$WORK/a.err" || { show; fail "a did not drop the silent connection"; }
grep -q "pod network: joined machine a (hosts 0-0) at 10.250.0.1:$PORT" "$WORK/b.err" || { show; fail "b did not report joining a"; }
# each launcher ran and reported only its own host
grep -q "^host 0: rc=0" "$WORK/a.out" || { show; fail "no host 0 result on a"; }
! grep -q "^host 1:" "$WORK/a.out" || { show; fail "a reported b's host"; }
grep -q "^host 1: killed" "$WORK/b.out" || { show; fail "host 1 not reported killed on b"; }
! grep -q "^host 0:" "$WORK/b.out" || { show; fail "b reported a's host"; }
grep -qx "\[host0\] ping host1: ok" "$WORK/a.out" || { show; fail "host 0 could not ping host1"; }
grep -qx "\[host1\] ping host0: ok" "$WORK/b.out" || { show; fail "host 1 could not ping host0"; }
grep -qx "\[host0\] ssh host1 -> host1 1" "$WORK/a.out" || { show; fail "host 0's ssh to host1"; }
grep -qx "\[host1\] ssh host0 -> host0 0" "$WORK/b.out" || { show; fail "host 1's ssh to host0"; }
grep -qx "\[host0\] host 0 got $t1" "$WORK/a.out" || { show; fail "host 0 did not get host 1's token"; }
grep -qx "\[host1\] host 1 got $t0" "$WORK/b.out" || { show; fail "host 1 did not get host 0's token"; }
grep -qx "\[host0\] mpi-rc=0" "$WORK/a.out" || { show; fail "mpirun across the two machines failed"; }
# the service ran until the pod ended, and was stopped then
SPID=$(sed -n 's/.*pool service: cxlpod-pool serve (pid \([0-9]*\)).*/\1/p' "$WORK/a.err" | head -n1)
[ -n "$SPID" ] || { show; fail "a named no pool service pid"; }
! kill -0 "$SPID" 2>/dev/null || fail "the pool service (pid $SPID) outlived the pod"
# host 1 (remote) killed once its job was done: the service failed it
# within its heartbeat timeout (1000 ms, the launcher's default; a killed
# QEMU's connection drops at once), and the pool's host table says so.
# (down to -500 ms: the kill's message is polled every 10 ms, which a
# loaded machine stretches: -35 ms was seen; a host failed before its
# kill, by a missed heartbeat, would be seconds early)
[ -s "$WORK/t_kill" ] || { show; fail "host 1's QEMU was not seen killed"; }
fl=$(grep " host 1 (generation 1, 10.250.0.2:[0-9]*) failed: " "$WORK/a/pool-serve.log" | head -n1)
[ -n "$fl" ] || { show; cat "$WORK/a/pool-serve.log"; fail "the pool service never failed the killed host 1"; }
tf=$(date -u -d "$(date -u +%F) ${fl%% *}" +%s.%N)
dms=$(awk -v a="$(cat "$WORK/t_kill")" -v b="$tf" 'BEGIN { d = (b - a) * 1000; if (d < -43200000) d += 86400000; printf "%d", d }')
[ "$dms" -ge -500 ] && [ "$dms" -le 1000 ] \
    || { cat "$WORK/a/pool-serve.log"; fail "the service failed host 1 ${dms} ms after its QEMU died (heartbeat timeout 1000 ms)"; }
st=$("$POOLTOOL" inspect --json "$POOL" | jq -r '.hosts[1].status')
[ "$st" = failed ] || fail "the pool's host table shows the killed host 1 $st, not failed"
pass "a 1+1 pod across two namespaces, b's host on a's pool service over UCX: ping, ssh by name and tokens through the pool both ways, mpirun across both; host 1 killed, failed by the service ${dms} ms later (${fl#* cxlpod-pool serve: })"

# the common case in one command: machine a's launcher starts machine
# b's (--machine NAME:1, with "ip netns exec" in ssh's place), sends it the
# pod's keys and job, and prints its results after its own
rm -rf "$WORK/a" "$WORK"/a.*
# a fresh pool (the tokens of the first pod are in the old one), made
# before either host starts
POOL=$WORK/pool2.img
"$CXLPOD_TOP/build/meson/host-tools/cxlpod-pool" create --size 256M --coherent-size 64M --max-hosts 2 "$POOL" \
    || fail "cxlpod-pool create $POOL"
# (b's directory, with the pod's keys, under $WORK: TMPDIR is passed on
# through "ip netns exec" to the script a sends; in the background and
# waited for, so that a signal to this test runs its cleanup at once)
ra=0
ip netns exec "$NSA" env TMPDIR="$WORK" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" \
    --machine-name a --pool "$POOL" --net-listen 10.250.0.1:$PORT \
    --machine "$NSB:1" --ssh-command "ip netns exec" \
    >"$WORK/a.out" 2>"$WORK/a.err" &
PA=$!; PIDS+=($PA)
wait $PA || ra=$?
PIDS=()
showa() { echo "--- a:"; cat "$WORK/a.err" "$WORK/a.out"; echo "--- b (started by a):"; cat "$WORK/a/machine-$NSB.err" 2>/dev/null; }
# b's work directory, made by the script a sent
BDIR=$(sed -n 's|^cxlpod-launch: work dir: \(/.*/cxlpod-machine\.[^/]*\)/w$|\1|p' "$WORK/a/machine-$NSB.err" 2>/dev/null || true)
[ $ra = 0 ] || { showa; fail "the one-command pod exited $ra"; }
[ -n "$BDIR" ] && [ -d "$BDIR/w" ] || { showa; fail "no work directory of b's launcher"; }
[ "${BDIR#"$WORK"/}" != "$BDIR" ] || { showa; fail "b's directory $BDIR is not under TMPDIR=$WORK"; }
[ "$(stat -c %a "$BDIR")" = 700 ] || fail "b's directory with the pod's keys is not private"
# the script removed the pod's secrets once b's launcher ended (its logs stay)
[ -n "$(ls -A "$BDIR/w")" ] || { showa; fail "b's logs went with its keys"; }
left=$(find "$BDIR" \( -name 'id_*' -o -name 'ssh_host_*' -o -name pool.key -o -name ssh \) -print)
[ -z "$left" ] || { showa; echo "$left"; fail "the pod's secrets were left on machine b: $left"; }
grep -q "machine $NSB (hosts 1-1): started its launcher with 'ip netns exec $NSB sh -s'" "$WORK/a.err" || { showa; fail "a did not start b's launcher"; }
grep -q "pod network: machine $NSB (hosts 1-1, from 10.250.0.2:[0-9]*) joined" "$WORK/a.err" || { showa; fail "b's launcher did not join"; }
for want in "^host 0: rc=0" "^host 1: rc=0" "^\[host1\] ssh host0 -> host0 0\$" "^\[host0\] mpi-rc=0\$" "^\[host1\] host 1 got $t0\$"; do
    grep -q "$want" "$WORK/a.out" || { showa; fail "the one-command pod's output has no line '$want'"; }
done
pass "one command: a started b's launcher through 'ip netns exec', the pod ran across both and a printed both hosts' results"

# --machine whose command fails: the pod stops before any host starts,
# naming the machine and what its command said
rm -rf "$WORK/a" "$WORK"/a.*
printf '#!/bin/sh\necho "no route to $1" >&2\nexit 255\n' >"$WORK/bad-ssh"
chmod +x "$WORK/bad-ssh"
ra=0
bgwait ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" \
    --machine-name a --pool "$POOL" --net-listen 10.250.0.1:$PORT \
    --machine far:1 --ssh-command "$WORK/bad-ssh" >"$WORK/a.out" 2>"$WORK/a.err" || ra=$?
PIDS=()
[ $ra = 1 ] || { showa; fail "a pod whose --machine could not be reached exited $ra (expected 1)"; }
grep -q "^pod across machines: machine far (hosts 1-1): its launcher exited (status 255) before it joined: no route to far" "$WORK/a.out" \
    || { showa; fail "a did not name the unreachable machine"; }
! grep -q "started QEMU" "$WORK/a.err" || { showa; fail "a host started although machine far never joined"; }
pass "--machine that cannot be reached: the pod stopped before any host, naming it"

# a machine whose pod key is not the pod's is refused at the join, with
# the reason on both sides, before any host starts
rm -rf "$WORK/a" "$WORK/b" "$WORK"/a.* "$WORK"/b.*
"$CXLPOD_TOP/build/meson/host-tools/cxlpod-pool" create --size 256M --coherent-size 64M --max-hosts 2 "$WORK/other.img" >/dev/null \
    || fail "cxlpod-pool create other.img"
ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" --local-hosts 0 \
    --machine-name a --pool "$POOL" --net-listen 10.250.0.1:$PORT \
    >"$WORK/a.out" 2>"$WORK/a.err" &
PA=$!; PIDS+=($PA)
for t in $(seq 1 300); do
    grep -q "listens on" "$WORK/a.err" && break
    sleep 0.2
done
rb=0
bgwait ip netns exec "$NSB" "$CXLPOD_LAUNCH" -w "$WORK/b" "${COMMON[@]}" --local-hosts 1 \
    --machine-name b --pool "$WORK/other.img" --pod-keys "$WORK/a/ssh" \
    --net-join 10.250.0.1:$PORT >"$WORK/b.out" 2>"$WORK/b.err" || rb=$?
kill -TERM $PA
wait $PA || true
PIDS=()
[ $rb = 2 ] || { show; fail "machine b with another pod's key exited $rb (expected 2)"; }
grep -q "the launcher there refused this machine (b): wrong pod key" "$WORK/b.err" || { show; fail "b does not say its key was refused"; }
grep -q "pod network: refused machine b (hosts 1-1, from 10.250.0.2:[0-9]*): wrong pod key" "$WORK/a.err" || { show; fail "a did not log the refusal"; }
! grep -q "started QEMU" "$WORK/a.err" "$WORK/b.err" || { show; fail "a host started although the join was refused"; }
pass "a launcher with another pod's key refused at the join, on both sides"

# a listener without the pod's key (its pool has none) is refused beyond
# the loopback, before it listens
rm -rf "$WORK/a" "$WORK/b" "$WORK"/a.* "$WORK"/b.*
ra=0
bgwait ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" --local-hosts 0 \
    --machine-name a --pool "$WORK/nokey.img" --net-listen 10.250.0.1:$PORT \
    >"$WORK/a.out" 2>"$WORK/a.err" || ra=$?
PIDS=()
[ $ra = 2 ] || { show; fail "a listener on 10.250.0.1 without a pod key exited $ra (expected 2)"; }
grep -q "error: --net-listen 10.250.0.1:$PORT: no pod key ($WORK/nokey.img.key): listening beyond the loopback needs one" "$WORK/a.err" \
    || { show; fail "a listener without a pod key beyond the loopback was not refused"; }
! grep -q "listens on\|started QEMU" "$WORK/a.err" || { show; fail "a listened or started a host without a pod key"; }
pass "a listener without the pod's key refused on a non-loopback address"

# on the loopback it listens (with a warning), and a joiner that has the
# key refuses it (both launchers in machine a)
rm -rf "$WORK/a" "$WORK/b" "$WORK"/a.* "$WORK"/b.*
ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" --local-hosts 0 \
    --machine-name a --pool "$WORK/nokey.img" --net-listen 127.0.0.1:$PORT \
    >"$WORK/a.out" 2>"$WORK/a.err" &
PA=$!; PIDS+=($PA)
for t in $(seq 1 300); do
    grep -q "listens on" "$WORK/a.err" && break
    sleep 0.2
done
grep -q "warning: pod network: no pod key ($WORK/nokey.img.key)" "$WORK/a.err" || { show; fail "a without a pod key did not warn"; }
rb=0
bgwait ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/b" "${COMMON[@]}" --local-hosts 1 \
    --machine-name b --pool "$POOL" --pod-keys "$WORK/a/ssh" \
    --net-join 127.0.0.1:$PORT >"$WORK/b.out" 2>"$WORK/b.err" || rb=$?
kill -TERM $PA
wait $PA || true
PIDS=()
[ $rb = 2 ] || { show; fail "machine b joining a listener without the key exited $rb (expected 2)"; }
grep -q "the launcher there (a) did not prove it holds the pod's key" "$WORK/b.err" || { show; fail "b did not refuse a listener without the key"; }
! grep -q "started QEMU" "$WORK/a.err" "$WORK/b.err" || { show; fail "a host started although the join failed"; }
pass "a listener without the pod's key refused by the joiner"

# three machines, one host each, initramfs guests on the pod network:
# machine a the hub (it listens on both its veths); every host pings
# every other by name (b's and c's frames go through a's switch), then
# a barrier through the pool.  Then host 1's QEMU killed on b: c learns it
# through a (relayed) and stops host 2.
POOL3=$WORK/pool3.img
"$CXLPOD_TOP/build/meson/host-tools/cxlpod-pool" create --size 256M --coherent-size 64M --max-hosts 3 "$POOL3" >/dev/null \
    || fail "cxlpod-pool create $POOL3"
t3=$(token)
cat >"$WORK/job3.sh" <<JOB
me=\$CXLPOD_HOST_ID
for h in 0 1 2; do
    [ \$h = \$me ] && continue
    ok=FAILED
    for t in \$(seq 1 30); do ping -c 1 -W 2 host\$h >/dev/null 2>&1 && { ok=ok; break; }; done
    echo "ping host\$h \$ok"
done
cxlpod-poke write \$((0x100000 + me * 4096)) "$t3"
for h in 0 1 2; do cxlpod-poke wait \$((0x100000 + h * 4096)) "$t3" 240 || exit 3; done
JOB
C3=(-n 3 "${SHM[@]}" --net --mem 256M --timeout 400 --pool "$POOL3" --job "$WORK/job3.sh")
start_three() {  # a, b and c, each with one host
    rm -rf "$WORK"/m3-*
    ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/m3-a" "${C3[@]}" --local-hosts 0 \
        --machine-name a --net-listen 0.0.0.0:$PORT >"$WORK/m3-a.out" 2>"$WORK/m3-a.err" &
    PA=$!; PIDS+=($PA)
    for t in $(seq 1 300); do grep -q "listens on" "$WORK/m3-a.err" && break; sleep 0.2; done
    ip netns exec "$NSB" "$CXLPOD_LAUNCH" -w "$WORK/m3-b" "${C3[@]}" --local-hosts 1 \
        --machine-name b --net-join 10.250.0.1:$PORT >"$WORK/m3-b.out" 2>"$WORK/m3-b.err" &
    PB=$!; PIDS+=($PB)
    ip netns exec "$NSC" "$CXLPOD_LAUNCH" -w "$WORK/m3-c" "${C3[@]}" --local-hosts 2 \
        --machine-name c --net-join 10.250.1.1:$PORT >"$WORK/m3-c.out" 2>"$WORK/m3-c.err" &
    PC=$!; PIDS+=($PC)
}
show3() { for m in a b c; do echo "--- $m:"; cat "$WORK/m3-$m.err" "$WORK/m3-$m.out"; done; }
start_three
ra=0; rb=0; rc=0
wait $PA || ra=$?; wait $PB || rb=$?; wait $PC || rc=$?
PIDS=()
[ $ra = 0 ] && [ $rb = 0 ] && [ $rc = 0 ] || { show3; fail "three machines: the launchers exited $ra, $rb, $rc"; }
for h in 0 1 2; do
    m=$(printf 'abc' | cut -c$((h + 1)))
    for o in 0 1 2; do
        [ $o = $h ] && continue
        grep -qx "\[host$h\] ping host$o ok" "$WORK/m3-$m.out" || { show3; fail "three machines: host $h could not ping host $o"; }
    done
done
pass "three machines (a the hub): every host pinged every other by name, b and c through a's switch"

# host 1's QEMU killed on b: a stops host 0 and tells c, which stops host 2
start_three
for t in $(seq 1 300); do
    grep -q "host 1: started QEMU" "$WORK/m3-b.err" && grep -q "host 2: started QEMU" "$WORK/m3-c.err" && break
    sleep 0.2
done
qpid=$(sed -n 's/.*host 1: started QEMU pid \([0-9]*\).*/\1/p' "$WORK/m3-b.err")
[ -n "$qpid" ] || { show3; fail "three machines: no QEMU pid of host 1"; }
kill -KILL "$qpid"
ra=0; rb=0; rc=0
wait $PA || ra=$?; wait $PB || rb=$?; wait $PC || rc=$?
PIDS=()
[ $ra = 1 ] && [ $rb = 1 ] && [ $rc = 1 ] || { show3; fail "three machines, host 1 killed: the launchers exited $ra, $rb, $rc (expected 1, 1, 1)"; }
grep -q "machine a: host 1 failed (relayed: its machine's launcher stops the pod)" "$WORK/m3-c.err" \
    || { show3; fail "c did not learn of host 1's failure through a"; }
grep -q "^host 2: stopped: host 1 failed" "$WORK/m3-c.out" || { show3; fail "c did not stop host 2"; }
pass "three machines, host 1 killed on b: a relayed it to c, every launcher stopped its host and exited 1"

# start_pair: both launchers again, until each has started its host; on
# ports of their own each time (PPORT, PSPORT): the previous pair's may
# still have connections in TIME_WAIT, which a listener cannot bind
PAIRN=0
start_pair() {
    rm -rf "$WORK/a" "$WORK/b" "$WORK"/a.* "$WORK"/b.*
    PAIRN=$((PAIRN + 1)); PPORT=$((17700 + 2 * PAIRN)); PSPORT=$((PPORT + 1))
    ip netns exec "$NSA" "$CXLPOD_LAUNCH" -w "$WORK/a" "${COMMON[@]}" --local-hosts 0 \
        --machine-name a --pool "$POOL" --net-listen 10.250.0.1:$PPORT \
        --serve 10.250.0.1:$PSPORT >"$WORK/a.out" 2>"$WORK/a.err" &
    PA=$!; PIDS+=($PA)
    for t in $(seq 1 300); do
        grep -q "listens on" "$WORK/a.err" && break
        sleep 0.2
    done
    ip netns exec "$NSB" "$CXLPOD_LAUNCH" -w "$WORK/b" "${COMMON[@]}" --local-hosts 1 \
        --machine-name b --pool "$POOL" --pod-keys "$WORK/a/ssh" \
        --net-join 10.250.0.1:$PPORT >"$WORK/b.out" 2>"$WORK/b.err" &
    PB=$!; PIDS+=($PB)
    for t in $(seq 1 300); do
        grep -q "host 1: started QEMU" "$WORK/b.err" && grep -q "host 0: started QEMU" "$WORK/a.err" && break
        sleep 0.2
    done
    grep -q "host 0: started QEMU" "$WORK/a.err" || { show; fail "the pair of launchers did not start"; }
}

# host 1's QEMU killed on machine b: b stops its pod and tells a, which
# names machine b and host 1 and stops host 0
start_pair
qpid=$(sed -n 's/.*host 1: started QEMU pid \([0-9]*\).*/\1/p' "$WORK/b.err")
[ -n "$qpid" ] || { show; fail "no QEMU pid of host 1"; }
kill -KILL "$qpid"
ra=0; rb=0
wait $PA || ra=$?
wait $PB || rb=$?
PIDS=()
[ $ra = 1 ] && [ $rb = 1 ] || { show; fail "after host 1's QEMU was killed the launchers exited $ra (a) and $rb (b), expected 1 and 1"; }
grep -q "machine b: host 1 failed" "$WORK/a.err" || { show; fail "a did not report machine b's host 1 failed"; }
grep -q "^host 0: stopped: host 1 failed" "$WORK/a.out" || { show; fail "a did not stop host 0 for host 1"; }
grep -q "^host 1: no result" "$WORK/b.out" || { show; fail "b did not report host 1 without a result"; }
pass "host 1's QEMU killed on machine b: both launchers report it and exit 1"

# machine a's pool service dies, then machine b's launcher is killed
# once it joined: a reports both, names machine b and stops
start_pair
spid=$(sed -n 's/.*pool service: cxlpod-pool serve (pid \([0-9]*\)).*/\1/p' "$WORK/a.err")
[ -n "$spid" ] || { show; fail "no pool service pid on a"; }
kill -0 "$spid" 2>/dev/null || { show; cat "$WORK/a/pool-serve.log" >&2; fail "a's pool service (pid $spid) had already ended before the test killed it"; }
kill -KILL "$spid"
for t in $(seq 1 50); do
    grep -q "the pool service (cxlpod-pool serve on 10.250.0.1:$PSPORT) exited (status signal 9" "$WORK/a.err" && break
    sleep 0.2
done
grep -q "the pool service (cxlpod-pool serve on 10.250.0.1:$PSPORT) exited (status signal 9" "$WORK/a.err" \
    || { show; fail "a did not report its pool service's death"; }
if ! kill -0 $PB 2>/dev/null; then
    rb=0; wait $PB || rb=$?
    show; fail "machine b's launcher had already ended (status $rb) when the test was to kill it"
fi
disown $PB     # no "Killed" notice from bash
kill -KILL $PB
ra=0
wait $PA || ra=$?
PIDS=()
[ $ra = 1 ] || { show; fail "machine a's launcher exited $ra after machine b's was killed (expected 1)"; }
grep -q "machine b (hosts 1-1, 10.250.0.2:[0-9]*): its launcher is gone without ending" "$WORK/a.err" \
    || { show; fail "a did not name machine b as gone"; }
grep -q "^host 0: stopped: host 1 failed" "$WORK/a.out" || { show; fail "a did not stop host 0 for machine b"; }
grep -q "^pod across machines: machine b (hosts 1-1" "$WORK/a.out" || { show; fail "a's summary does not name machine b"; }
grep -q "^pod across machines: the pool service .* exited" "$WORK/a.out" || { show; fail "a's summary does not have the pool service's death"; }
pass "machine a's pool service and machine b's launcher killed: machine a reported both, stopped its host and exited 1"

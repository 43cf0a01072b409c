#!/usr/bin/env bash
# scripts/xmach-trial.sh: issue 37's "Tested on one box" trial at 2+2 hosts
# (docs/multi-machine.md, "The 2+2 trial").  Needs root: it makes two
# network namespaces, "machines" a and b, joined by a veth pair made inside
# them (10.250.0.1 and 10.250.0.2; the host's own network is never
# touched, nothing leaves the loopback and the namespaces).  Machine a
# serves the pool (cxlpod-pool serve, started by its launcher's --serve)
# and runs hosts 0-1, which map the pool file; machine b runs hosts 2-3,
# remote hosts (--pool ucx://10.250.0.1:PORT).  One launcher per machine.
#
# Pod 1, host userland (ssh and mpirun between the guests; the script
# logs into them with `cxlpod-launch ssh`):
#   1. a remote host with a wrong key refused (a QEMU on b, error naming
#      the service; the service logs the refusal);
#   2. host 2 (remote) SIGKILLed at random, twice, by b's launcher
#      (--kill 2@random:0-1.5:KILL-WINDOW --restart 2 --restarts 2):
#      first 0-1.5 s after it stored 64 records without writing them back
#      (cxlpod-crash --unpublished), then 0-1.5 s into appending records
#      it writes back one by one (a writer stuck before its marker is
#      killed 30 s after it started).  Each time: the service logs it
#      failed (the time from the kill is printed, and must be within the
#      heartbeat timeout), host 0 (local) finds every published record
#      intact, none of the unflushed lines in the pool; the host is
#      restarted, rejoins with the next generation, verifies the records
#      through its fresh image and passes a token each way with host 0;
#   3. mpirun's allreduce (cxlpod-mpi-allreduce) across all four;
#   4. a locked xchg in the coherent window of each host (every cxlpod
#      guest tool's join makes one): the checks that need the tools on a
#      host where it does not complete fail at once, naming it;
#   5. the litmus matrix on the pairs local-local (0,1), local-remote
#      (0,2), remote-remote (2,3): every combination as cxlpod-litmus
#      itself expects (it reads CAPS: without ATOMICS an atomic row
#      expects "any");
#   6. cxlpod-mq and cxlpod-allreduce across all four guests;
#   7. a remote host still joined SIGSTOPped past the heartbeat timeout:
#      failed by the service (time printed); then SIGCONT: what it sees
#      is printed.
# Pod 2, initramfs guests on the pod network: the pool service SIGKILLed
# with the four guests booted: each remote QEMU says it lost the service
# (stderr), answers query-status within 1 s, its guest goes on (its loop
# keeps printing, a coherent load reads all ones), and a's launcher names
# the service's death; b's launcher's report is printed.
#
# Every check prints PASS or FAIL with its reason; the last line is
# "N passed, N failed"; exit 1 if any failed.  Every wait is bounded.  A
# trap removes the namespaces, veths, QEMUs, launchers, services and the
# work directory (XTRIAL_KEEP=1 keeps the work directory; XTRIAL_PODS="2"
# runs pod 2 only, "1" pod 1 only).  Takes about
# 15-20 minutes on 2 cores.  XTRIAL_SEED=S replays the kill delays.
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
QEMU=${CXLPOD_QEMU:-$TOP/build/qemu/qemu-system-x86_64}
LAUNCH=${CXLPOD_LAUNCH:-$TOP/build/meson/host-tools/cxlpod-launch}
POOLTOOL=$TOP/build/meson/host-tools/cxlpod-pool
GT=$TOP/build/meson/guest-tools
MPIPROG=$GT/mpi/cxlpod-mpi-allreduce
SEED=${XTRIAL_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) ))}
HB_MS=1000      # the service's --heartbeat-timeout (the launcher's default)
# machine b's extra launcher options, XTRIAL_B_OPTS (words; default: its
# QEMUs wait up to 5 s for a reply of the service: with the default 1 s,
# two remote hosts filling their images at once on a busy 2-core box had
# a fetch time out at realize)
# and --boot-parallel 1: one remote host at a time fills its image at
# realize (two at once under load 20: the service failed one for "no
# heartbeat" in the middle of its fill, its QEMU failed to start)
read -r -a BOPTS <<<"${XTRIAL_B_OPTS---device-opt remote-timeout-ms=5000 --boot-parallel 1}"

die() { echo "xmach-trial: $*" >&2; exit 2; }
DRY=0
case ${1:-} in
"") ;;
--dry-run) DRY=1 ;;     # the launchers' --dry-run on the four command lines; no root
-h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) echo "usage: xmach-trial.sh [--dry-run]" >&2; exit 2 ;;
esac
[ $DRY = 1 ] || [ "$(id -u)" = 0 ] || die "needs root (it makes network namespaces)"
for t in ip jq timeout mpirun; do command -v $t >/dev/null || die "no $t"; done
for f in "$QEMU" "$LAUNCH" "$POOLTOOL" "$GT/cxlpod-litmus" "$MPIPROG"; do
    [ -x "$f" ] || die "no $f (scripts/build-all.sh)"
done

NSA=xtrial-a-$$ NSB=xtrial-b-$$ VA=xta$$ VB=xtb$$
PORT=17631 SPORT=17632
# pod 2's own ports: the service cannot listen again on pod 1's port while
# that port's connections are in TIME_WAIT ("Address already in use")
PORT2=17641 SPORT2=17642
A=10.250.0.1 B=10.250.0.2
WORK=$(mktemp -d /tmp/cxlpod-xtrial.XXXXXX)
chmod 755 "$WORK"
[ $DRY = 0 ] || trap 'rm -rf "$WORK"' EXIT
PIDS=()
T_START=$(date +%s)

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    for ns in "$NSA" "$NSB"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -CONT 2>/dev/null || true
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    done
    sleep 0.2
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
    if [ "${XTRIAL_KEEP:-0}" = 1 ]; then
        echo "xmach-trial: work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
[ $DRY = 1 ] || trap cleanup EXIT
trap 'exit 130' INT TERM

NP=0 NF=0
pass() { NP=$((NP + 1)); echo "PASS: $*"; }
failc() { NF=$((NF + 1)); echo "FAIL: $*"; }
info() { echo "  $*"; }
now() { date +%s.%N; }
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
# the epoch time of a service log line's HH:MM:SS.ffffff (today, UTC)
log_epoch() { date -u -d "$(date -u +%F) $1" +%s.%N; }


PROJ=$WORK/proj CT=$WORK/proj/ctl
mkdir -p "$CT"
POOL=$WORK/pool.img
# tokens at 48 MiB into the 64 MiB coherent window, past every tool's lines
tok_off() { echo $((0x3000000 + $1 * 4096)); }   # 48 MiB into the 64 MiB coherent window

# gssh H SECONDS CMD: a command in guest H (from its machine), bounded
wd_of() { [ "$1" -ge 2 ] && echo "$WORK/$2b" || echo "$WORK/$2a"; }
ns_of() { [ "$1" -ge 2 ] && echo "$NSB" || echo "$NSA"; }
gssh() {
    local h=$1 t=$2; shift 2
    timeout -k 5 "$t" ip netns exec "$(ns_of "$h")" "$LAUNCH" ssh "$(wd_of "$h" "$WD")" "$h" "$@" </dev/null
}
qmp() {  # qmp H CMD: one QMP command to host H
    local h=$1; shift
    timeout -k 2 10 "$LAUNCH" qmp "$(wd_of "$h" "$WD")" "$h" "$@" </dev/null
}
qpid_of() {  # the pid of host H's current QEMU (its launcher's last "started" or "restarted")
    sed -n "s/.*host $1: \(started\|restarted,\) QEMU pid \([0-9]*\).*/\2/p" "$(wd_of "$1" "$WD").err" | tail -n1
}
slog() { cat "$WORK/${WD}a/pool-serve.log" 2>/dev/null; }

# ======================================================================
# Pod 1: 2+2 host-userland guests
# ======================================================================
WD=p1-
cat >"$PROJ/idle.sh" <<EOF
echo "host \$CXLPOD_HOST_ID: up, waiting for the trial"
for i in \$(seq 1 7200); do [ -e $CT/end ] && exit 0; sleep 0.5; done
echo "host \$CXLPOD_HOST_ID: no end in an hour"; exit 5
EOF
# host 2: its runs 0 and 1 are writers killed at random by b's launcher
# (KILL-WINDOW anchors the kill), run 2 rejoined
cat >"$PROJ/host2.sh" <<EOF
run=\${CXLPOD_RESTARTED:-0}
waitfor() { for i in \$(seq 1 \$2); do [ -e $CT/\$1 ] && return 0; sleep 0.5; done; echo "no \$1"; return 1; }
# a writer that never reaches its marker (stuck) is killed all the same
stuck() { sleep \$1; [ -e /tmp/marked ] || echo "KILL-WINDOW: the writer is stuck after \$1 s"; }
echo "host 2 run \$run: job began"
case \$run in
0)  waitfor crash0 7200 || exit 5
    stuck 30 &
    $GT/cxlpod-crash --role writer --host 0 --nhosts 2 --crash-at 300 --unpublished 64 \
        --idle 60 --timeout 90 2>&1 |
        while IFS= read -r l; do echo "\$l"; case \$l in CRASH-POINT*) touch /tmp/marked; echo KILL-WINDOW ;; esac; done
    echo "host 2 run 0: the writer was not killed"; exit 6 ;;
1)  waitfor crash1 1200 || exit 5
    stuck 30 &
    $GT/cxlpod-crash --role writer --host 0 --nhosts 2 --records 20000 --crash-at 20000 --delay-us 200 \
        --idle 60 --timeout 90 2>&1 |
        while IFS= read -r l; do echo "\$l"; case \$l in "crash: writer host"*) touch /tmp/marked; echo KILL-WINDOW ;; esac; done
    echo "host 2 run 1: the writer was not killed"; exit 6 ;;
*)  echo "host 2 run \$run: REJOINED"
    waitfor end 7200 || exit 5 ;;
esac
EOF
COMMON=(-n 4 --device cxl-shm --size 256M --coherent-size 64M --userland host --mem 768M
        --timeout 3600 --boot-timeout 600 --job "$PROJ/idle.sh" --job-host "2:$PROJ/host2.sh")
# pod 2 (below): the pool service killed with the four guests booted
# initramfs guests (quicker to boot); each prints a line a second with a
# coherent load (a token host 0's job wrote), bounded
cat >"$WORK/loop2.sh" <<EOF
me=\$CXLPOD_HOST_ID
[ \$me = 0 ] && cxlpod-poke write $(tok_off 9) alive0
for i in \$(seq 1 600); do
    echo "tick \$i host \$me read \$(cxlpod-poke read $(tok_off 9) 6 2>&1)"
    [ -e /tmp/stop ] && break
    sleep 1
done
EOF
POOL2=$WORK/pool2.img
C2=(-n 4 --device cxl-shm --size 256M --coherent-size 64M --net --mem 256M --timeout 1200 --boot-timeout 600
    --job "$WORK/loop2.sh")
# the four launchers: machine a's and b's of pod 1 and of pod 2
L1A=("${COMMON[@]}" --local-hosts 0-1 --machine-name a --pool "$POOL" --serve $A:$SPORT --net-listen $A:$PORT)
L1B=("${COMMON[@]}" --local-hosts 2-3 --machine-name b --pool "ucx://$A:$SPORT" --pool-key "$POOL.key"
     --pod-keys "$WORK/p1-a/ssh" --net-join $A:$PORT "${BOPTS[@]}"
     --kill '2@random:0-1.5:KILL-WINDOW' --restart 2 --restarts 2 --seed "$SEED")
L2A=("${C2[@]}" --local-hosts 0-1 --machine-name a --pool "$POOL2" --serve $A:$SPORT2 --net-listen $A:$PORT2)
L2B=("${C2[@]}" --local-hosts 2-3 --machine-name b --pool "ucx://$A:$SPORT2" --pool-key "$POOL2.key"
     --net-join $A:$PORT2 "${BOPTS[@]}")
cd "$PROJ" || die "cd $PROJ"
if [ $DRY = 1 ]; then
    # the keys b's launchers would take from a
    mkdir -p "$WORK/p1-a/ssh"
    for k in "$POOL.key" "$POOL2.key"; do od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$k"; echo >>"$k"; chmod 600 "$k"; done
    bad=0
    for l in 1A 1B 2A 2B; do
        declare -n arr=L$l
        out=$("$LAUNCH" -w "$WORK/dry-$l" "${arr[@]}" --dry-run 2>&1) || { echo "$out" | tail -n 5; echo "xmach-trial: launcher $l refuses its options"; bad=1; continue; }
        n=$(grep -c -- '-device cxl-shm' <<<"$out"); r=$(grep -c -- 'pool=ucx://' <<<"$out")
        case $l in *B) want=2 ;; *) want=0 ;; esac
        if [ "$n" = 2 ] && [ "$r" = $want ]; then
            echo "xmach-trial: dry run: launcher $l: 2 QEMU command lines, $r with the remote pool"
        else
            echo "xmach-trial: dry run: launcher $l: $n QEMU command lines, $r remote (expected 2, $want)"; bad=1
        fi
    done
    [ $bad = 0 ] && echo "xmach-trial: dry run: the trial's launcher options are fine (seed $SEED)"
    exit $bad
fi
# --- the two machines
ip netns add "$NSA" || die "ip netns add"
ip netns add "$NSB" || die "ip netns add"
ip -n "$NSA" link add "$VA" type veth peer name "$VB" netns "$NSB"
ip -n "$NSA" addr add $A/24 dev "$VA"
ip -n "$NSB" addr add $B/24 dev "$VB"
for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set "$VB" up
upped() { ip -n "$1" link show "$2" 2>/dev/null | grep -q "state UP"; }
for _ in $(seq 1 50); do upped "$NSA" "$VA" && upped "$NSB" "$VB" && break; sleep 0.1; done
ip netns exec "$NSB" ping -c 1 -W 5 $A >/dev/null || die "the veth between the namespaces does not carry"
echo "xmach-trial: machines a ($NSA, $A) and b ($NSB, $B); work directory $WORK; seed $SEED"
t_boot=0
if [[ " ${XTRIAL_PODS:-1 2} " == *" 1 "* ]]; then
t_boot0=$(now)
ip netns exec "$NSA" "$LAUNCH" -w "$WORK/${WD}a" "${L1A[@]}" \
    >"$WORK/${WD}a.out" 2>"$WORK/${WD}a.err" &
PA=$!; PIDS+=($PA)
for _ in $(seq 1 300); do
    grep -q "listens on $A:$PORT" "$WORK/${WD}a.err" && break
    kill -0 $PA 2>/dev/null || break
    sleep 0.2
done
grep -q "listens on" "$WORK/${WD}a.err" || { cat "$WORK/${WD}a.err"; die "machine a's launcher never listened"; }
ip netns exec "$NSB" "$LAUNCH" -w "$WORK/${WD}b" "${L1B[@]}" \
    >"$WORK/${WD}b.out" 2>"$WORK/${WD}b.err" &
PB=$!; PIDS+=($PB)
show1() {
    echo "--- a:"; cat "$WORK/${WD}a.err"; echo "--- b:"; cat "$WORK/${WD}b.err"
    echo "--- service:"; slog | tail -n 30
}
# every guest's job began (its marker in its console log), bounded
up=0
for _ in $(seq 1 1200); do
    n=0
    for h in 0 1 2 3; do
        grep -q "host $h: up\|host 2 run 0: job began" "$(wd_of $h "$WD")/host$h.log" 2>/dev/null && n=$((n + 1))
    done
    [ $n = 4 ] && { up=1; break; }
    kill -0 $PA 2>/dev/null && kill -0 $PB 2>/dev/null || break
    sleep 0.5
done
t_boot=$(ms_between "$t_boot0" "$(now)")
[ $up = 1 ] || { show1; die "pod 1 did not boot (jobs of $n of 4 hosts began in $((t_boot / 1000)) s)"; }
# and each answers ssh from its machine
for h in 0 1 2 3; do
    r=$(gssh $h 120 'echo "$(hostname) $CXLPOD_HOST_ID"') || true
    [ "$r" = "host$h $h" ] || { show1; die "ssh to host $h answered '$r'"; }
done
echo "xmach-trial: pod 1 up in $((t_boot / 1000)) s (4 host-userland guests, b's through a's service)"
for h in 0 1 2 3; do
    caps[$h]=$(gssh $h 60 "$GT/cxlpod-info --json" | jq -r .caps 2>/dev/null)
done
atom() { [ $(( ${caps[$1]:-0} & 2 )) != 0 ] && echo yes || echo no; }
info "CAPS: host 0 ${caps[0]}, host 1 ${caps[1]}, host 2 ${caps[2]}, host 3 ${caps[3]} (ATOMICS: $(atom 0) $(atom 1) $(atom 2) $(atom 3))"

# --- 1. a remote host with a wrong key
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$WORK/wrong.key"; echo >>"$WORK/wrong.key"
chmod 600 "$WORK/wrong.key"
rc=0
timeout -k 5 60 ip netns exec "$NSB" "$QEMU" -M q35,cxl=on -accel tcg -nographic -nodefaults -monitor none \
    -L /usr/share/seabios -L /usr/share/qemu -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 \
    -device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2,hotplug=off \
    -device cxl-shm,bus=rp0,id=cxl-shm0,size=256M,coherent-size=64M,host-id=3,max-hosts=4,pool=ucx://$A:$SPORT,pool-key=$WORK/wrong.key \
    -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G >"$WORK/wrongkey.out" 2>"$WORK/wrongkey.err" || rc=$?
werr=$(tr '\n' ' ' <"$WORK/wrongkey.err")
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "$A:$SPORT" "$WORK/wrongkey.err" && grep -qi "key" "$WORK/wrongkey.err" &&
   slog | grep -q "refused $B:[0-9]*: no proof of the pod's key"; then
    pass "wrong key refused: QEMU exited $rc: $werr; the service logged '$(slog | grep "no proof of the pod's key" | tail -n1 | cut -c14-)'"
else
    failc "wrong key: QEMU exited $rc ($werr); service: $(slog | grep -i refused | tail -n1)"
fi

# --- 2. host 2 killed at random twice, restarted, rejoining
# kill_round N: touch ctl/crashN (host 2's run N writes), host 0 reads;
# b's launcher kills host 2 at random; measures and checks
READER="$GT/cxlpod-crash --role reader --host 1 --nhosts 2 --json --idle 60 --timeout 120"
kill_round() {
    local n=$1 what=$2 qp gen t_kill= t_fail= t_join= line rc=0 j
    for _ in $(seq 1 1200); do
        grep -q "host 2 run $n: job began" "$WORK/${WD}b/host2.log" 2>/dev/null && break
        kill -0 $PB 2>/dev/null || break
        sleep 0.5
    done
    qp=$(qpid_of 2)
    if ! grep -q "host 2 run $n: job began" "$WORK/${WD}b/host2.log" 2>/dev/null || [ -z "$qp" ]; then
        failc "kill $n: host 2's run $n never began"; return 1
    fi
    gen=$(slog | sed -n 's/.* host 2 joined from .*, generation \([0-9]*\)$/\1/p' | tail -n1)
    local k0 e0; k0=$(grep -c "host 2: killed (SIGKILL)" "$WORK/${WD}b.err")
    e0=$(grep -c "host 2: job finished" "$WORK/${WD}b.err")
    gssh 0 300 "$READER" >"$WORK/crash$n.reader" 2>&1 & local rp=$!
    sleep 2
    touch "$CT/crash$n"
    # the kill: b's launcher's message right after its kill(), seen every
    # ~10 ms (the dying QEMU's sockets close before it is a zombie, so
    # its pid is no measure); bounded: 5 minutes
    for _ in $(seq 1 30000); do
        [ "$(grep -c "host 2: killed (SIGKILL)" "$WORK/${WD}b.err")" -gt "$k0" ] && { t_kill=$(now); break; }
        [ "$(grep -c "host 2: job finished" "$WORK/${WD}b.err")" -gt "$e0" ] && break
        sleep 0.01
    done
    [ -n "$t_kill" ] || { failc "kill $n: host 2 (pid $qp) was not killed: its job ended first ($(grep -a "host 2 run $n\|cxlpod-crash" "$WORK/${WD}b/host2.log" | tail -n 2 | tr -d '\r' | tr '\n' ' ')), or 5 minutes passed"; wait $rp; return 1; }
    # the service's failure of host 2 (its log line's time), bounded
    for _ in $(seq 1 100); do
        line=$(slog | grep " host 2 (generation $gen, .*) failed: " | tail -n1)
        [ -n "$line" ] && break
        sleep 0.1
    done
    if [ -n "$line" ]; then
        t_fail=$(log_epoch "${line%% *}")
        d=$(ms_between "$t_kill" "$t_fail")
        st=$("$POOLTOOL" inspect --json "$POOL" | jq -r '.hosts[2] | "\(.status) generation \(.generation)"')
        if [ "$d" -ge -50 ] && [ "$d" -le "$HB_MS" ]; then
            pass "kill $n ($what): the service failed host 2 ${d} ms after its QEMU was killed (heartbeat timeout $HB_MS ms): '${line#* cxlpod-pool serve: }'; cxlpod-pool inspect then: $st"
        else
            failc "kill $n ($what): the service failed host 2 ${d} ms after its QEMU was killed (heartbeat timeout $HB_MS ms): '${line#* cxlpod-pool serve: }'"
        fi
    else
        failc "kill $n ($what): the service never logged host 2 failed (10 s)"
    fi
    wait $rp || rc=$?
    j=$(grep -F '{"tool":"cxlpod-crash"' "$WORK/crash$n.reader" | tail -n1)
    if [ -n "$j" ] && [ "$(jq -r '.ok and .writer == "failed" and .published > 0 and .torn == 0 and .missing == 0' <<<"$j")" = true ]; then
        if [ "$n" = 0 ]; then
            if [ "$(jq -r '.unpublished == 64 and .unpublished_lines_present == 0 and .unpublished_absent == 64' <<<"$j")" = true ]; then
                pass "kill $n: host 0 (local) verified all $(jq -r .published <<<"$j") records host 2 wrote back (intact), and none of the $(jq -r .unpublished_lines <<<"$j") lines of its 64 unflushed records reached the pool"
            else
                failc "kill $n: unflushed lines in the pool: $(jq -c '{unpublished,unpublished_intact,unpublished_partial,unpublished_absent,unpublished_lines_present}' <<<"$j")"
            fi
        else
            pass "kill $n: host 0 (local) verified all $(jq -r .published <<<"$j") records host 2 had written back when it was killed mid-append: none torn or missing"
        fi
    else
        local why=""
        [ "$(grep -ac "the writer is stuck" "$WORK/${WD}b/host2.log")" -gt "$n" ] &&
            why=" (host 2's writer never reached its marker, killed stuck after 30 s: see check 4)"
        failc "kill $n: host 0's reader exit $rc: ${j:-$(tail -n 3 "$WORK/crash$n.reader" | tr '\n' ' ')}$why"
    fi
    # the restart rejoins with the next generation
    line=
    for _ in $(seq 1 600); do
        line=$(slog | grep " host 2 joined from .*, generation $((gen + 1))$" | tail -n1)
        [ -n "$line" ] && break
        sleep 0.1
    done
    if [ -n "$line" ]; then
        t_join=$(log_epoch "${line%% *}")
        pass "kill $n: host 2 restarted by b's launcher and rejoined the service $(ms_between "$t_kill" "$t_join") ms after the kill, generation $((gen + 1))"
    else
        failc "kill $n: host 2 did not rejoin the service with generation $((gen + 1)) within 60 s"
    fi
    T_KILL=$t_kill
}
kill_round 0 "0-1.5 s after 64 records stored without writeback"
kill_round 1 "0-1.5 s into appending records, each written back"
# the last life: the pool through its fresh image, tokens both ways
for _ in $(seq 1 1200); do
    grep -q "host 2 run 2: REJOINED" "$WORK/${WD}b/host2.log" 2>/dev/null && break
    kill -0 $PB 2>/dev/null || break
    sleep 0.5
done
if grep -q "host 2 run 2: REJOINED" "$WORK/${WD}b/host2.log" 2>/dev/null; then
    t_up=$(now)
    vo=$(gssh 2 300 "$GT/cxlpod-crash --role verify --json" 2>&1)
    v=$(grep -F '{"tool":"cxlpod-crash"' <<<"$vo" | tail -n1)
    t2=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n'); t0=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
    r1=0 r2=0
    gssh 2 120 "$GT/cxlpod-poke write $(tok_off 2) $t2" >/dev/null 2>&1 || r1=$?
    gssh 0 120 "$GT/cxlpod-poke wait $(tok_off 2) $t2 60" >/dev/null 2>&1 || r1=$?
    gssh 0 120 "$GT/cxlpod-poke write $(tok_off 0) $t0" >/dev/null 2>&1 || r2=$?
    gssh 2 120 "$GT/cxlpod-poke wait $(tok_off 0) $t0 60" >/dev/null 2>&1 || r2=$?
    t_tok=$(now)
    if [ -n "$v" ] && [ "$(jq -r '.ok and .torn == 0 and .missing == 0 and .published > 0' <<<"$v")" = true ] && [ $r1 = 0 ] && [ $r2 = 0 ]; then
        pass "host 2's third life: it verified the $(jq -r .published <<<"$v") records of its last life through its fresh image; a token passed through the pool each way with host 0 ($(ms_between "$T_KILL" "$t_tok") ms after the last kill)"
    else
        failc "host 2's third life: verify: ${v:-$(tail -n1 <<<"$vo")}; token 2->0 exit $r1, 0->2 exit $r2"
    fi
else
    failc "host 2's third life never began"
fi
kills=$(grep -c "host 2: killed (SIGKILL)" "$WORK/${WD}b.err")
info "b's launcher: $(grep "host 2: killed (SIGKILL)" "$WORK/${WD}b.err" | sed 's/^cxlpod-launch: //' | tr '\n' ';')"

# --- 3. mpirun across the four guests
t0=$(now)
rc=0
gssh 0 600 "mpirun -np 4 --host host0,host1,host2,host3 --timeout 400 $MPIPROG --protocol writeback --elems 32768 --rounds 3" \
    >"$WORK/mpi.out" 2>&1 || rc=$?
s=$(( $(ms_between "$t0" "$(now)") / 1000 ))
if [ $rc = 0 ]; then
    pass "mpirun -np 4 across both machines: cxlpod-mpi-allreduce exact (${s} s)"
else
    failc "mpirun -np 4 across both machines: exit $rc (${s} s)"
    tail -n 8 "$WORK/mpi.out" | sed 's/^/    /'
fi

# --- 4. a locked read-modify-write in the coherent window of each host
# (every cxlpod guest tool's join uses one: a seq_cst store is an xchg):
# cxlpod-litmus alone as rank 0 of 2 gets past its xchg and gives up
# waiting for its peer after 3 s (exit 4); a host whose locked
# instruction never completes is killed by the bound (124).  The checks
# that run those tools on such a host fail at once, naming this.
declare -A STUCK=()
for h in 0 1 2 3; do
    t0=$(now); rc=0
    gssh $h 60 "timeout 20 $GT/cxlpod-litmus --host 0 --nhosts 2 --timeout 3 --test mp" >"$WORK/probe.$h" 2>&1 || rc=$?
    ms=$(ms_between "$t0" "$(now)")
    lost=$(grep -h "lost the pool service" "$(wd_of $h "$WD")/host$h.qemu-err" 2>/dev/null | tail -n1)
    if [ -n "$lost" ]; then
        STUCK[$h]=1
        failc "host $h: lost the pool service during a locked xchg in its coherent window (exit $rc after ${ms} ms): '$lost'; the service: '$(slog | grep " host $h (generation" | tail -n1 | cut -c14-)'"
    elif [ $rc = 4 ] && grep -q "not all 2 hosts joined" "$WORK/probe.$h"; then
        pass "host $h: a locked xchg in the coherent window completes (cxlpod-litmus's join got past it, ${ms} ms)"
    else
        STUCK[$h]=1
        failc "host $h: a locked xchg in the coherent window did not complete in 20 s (exit $rc: $(tail -n1 "$WORK/probe.$h")); every cxlpod guest tool's join uses one"
    fi
done
stuck_of() { local h x=""; for h in "$@"; do [ -n "${STUCK[$h]:-}" ] && x="$x $h"; done; echo "${x# }"; }

# --- 5. the litmus matrix on three pairs, one after the other (the tool's
# lines are at fixed places)
LIT="$GT/cxlpod-litmus --method both --json --timeout 120"
litmus_pair() {  # litmus_pair X Y NAME
    local x=$1 y=$2 name=$3 rx=0 ry=0 t0 jx jy
    if [ -n "$(stuck_of $x $y)" ]; then
        failc "litmus $name (hosts $x,$y): not run: host(s) $(stuck_of $x $y) never complete a locked instruction (check 4)"
        return
    fi
    t0=$(now)
    gssh $x 1200 "$LIT --host 0 --nhosts 2" >"$WORK/lit-$x$y.$x" 2>&1 & local px=$!
    gssh $y 1200 "$LIT --host 1 --nhosts 2" >"$WORK/lit-$x$y.$y" 2>&1 & local py=$!
    wait $px || rx=$?; wait $py || ry=$?
    local s=$(ms_between "$t0" "$(now)"); s=$(awk -v m=$s 'BEGIN { printf "%.1f", m / 1000 }')
    jx=$(grep -F '{"tool":"cxlpod-litmus"' "$WORK/lit-$x$y.$x" | tail -n1)
    jy=$(grep -F '{"tool":"cxlpod-litmus"' "$WORK/lit-$x$y.$y" | tail -n1)
    local cx mx cy my
    cx=$(jq -r .combinations <<<"$jx" 2>/dev/null); mx=$(jq -r .mismatches <<<"$jx" 2>/dev/null)
    cy=$(jq -r .combinations <<<"$jy" 2>/dev/null); my=$(jq -r .mismatches <<<"$jy" 2>/dev/null)
    local atom_row
    atom_row=$(jq -r '[.results[] | select(.test=="atomic" and .area=="coherent" and .proto=="none")
                       | "\(.method): \(.outcome) (expected \(.expected))"] | join(", ")' <<<"$jx" 2>/dev/null)
    if [ $rx = 0 ] && [ $ry = 0 ] && [ "$mx" = 0 ] && [ "$my" = 0 ] && [ "${cx:-0}" -ge 34 ] 2>/dev/null; then
        pass "litmus $name (hosts $x,$y): $cx combinations, 0 mismatches on both, ${s} s; atomic/coherent/none: $atom_row"
    else
        failc "litmus $name (hosts $x,$y): exit $rx/$ry, combinations $cx/$cy, mismatches $mx/$my, ${s} s"
        for f in "$WORK/lit-$x$y.$x" "$WORK/lit-$x$y.$y"; do
            grep -v '^{' "$f" | tail -n 5 | sed 's/^/    /'
            grep -F '{"tool":"cxlpod-litmus"' "$f" | tail -n1 |
                jq -r '.results[]? | select(.ok==false) | "    mismatch: \(.method) \(.test)/\(.area)/\(.proto): \(.outcome), expected \(.expected)"' 2>/dev/null
        done
    fi
}
litmus_pair 0 1 local-local
litmus_pair 0 2 local-remote
litmus_pair 2 3 remote-remote

# --- 6. mq and allreduce across the four guests
all4() {  # all4 NAME SECONDS CMD: CMD on the four guests at once; outputs in $WORK/NAME.H
    local name=$1 t=$2 cmd=$3 p=() h
    for h in 0 1 2 3; do
        gssh $h "$t" "$cmd; echo \"rc=\$?\"" >"$WORK/$name.$h" 2>&1 & p+=($!)
    done
    for h in 0 1 2 3; do wait ${p[$h]}; done
}
if [ -n "$(stuck_of 0 1 2 3)" ]; then
    failc "cxlpod-mq and cxlpod-allreduce across the four guests: not run: host(s) $(stuck_of 0 1 2 3) never complete a locked instruction (check 4)"
else
t0=$(now)
all4 mq 900 "$GT/cxlpod-mq --messages 500 --timeout 600"
s=$(( $(ms_between "$t0" "$(now)") / 1000 ))
ok=0 det=0 hung=0
for h in 0 1 2 3; do
    grep -q '^mq: OK all payloads verified' "$WORK/mq.$h" && ok=$((ok + 1))
    grep -q '^rc=3$' "$WORK/mq.$h" && det=$((det + 1))
    grep -q '^rc=' "$WORK/mq.$h" || hung=$((hung + 1))
done
noatom=""
for h in 0 1 2 3; do [ "$(atom $h)" = no ] && noatom="$noatom $h"; done
if [ $ok = 4 ]; then
    pass "cxlpod-mq across the four guests: every payload verified on all four (${s} s)"
elif [ -n "$noatom" ] && [ $hung = 0 ] && [ $((ok + det)) = 4 ]; then
    pass "cxlpod-mq across the four guests: hosts$noatom have no ATOMICS in CAPS (cxlpod-mq warns: the queue may break); it broke and the tool detected it ($ok verified, $det exit 3, ${s} s): no hang, no silent corruption"
else
    failc "cxlpod-mq across the four guests: $ok verified, $det detected corruption, $hung gave no exit status (${s} s)"
    for h in 0 1 2 3; do tail -n 3 "$WORK/mq.$h" | sed "s/^/    host $h: /"; done
fi
t0=$(now)
all4 allreduce 900 "$GT/cxlpod-allreduce --sizes 4K,64K,1M --timeout 600"
s=$(( $(ms_between "$t0" "$(now)") / 1000 ))
ok=0
for h in 0 1 2 3; do grep -q '^allreduce: OK exact sums on all 4 hosts' "$WORK/allreduce.$h" && ok=$((ok + 1)); done
if [ $ok = 4 ]; then
    pass "cxlpod-allreduce across the four guests: exact sums on all four (${s} s)"
else
    failc "cxlpod-allreduce across the four guests: exact on $ok of 4 (${s} s)"
    for h in 0 1 2 3; do tail -n 3 "$WORK/allreduce.$h" | sed "s/^/    host $h: /"; done
fi
fi
# --- 7. a remote host SIGSTOPped past the heartbeat timeout: one still
# joined (the service's last word on it "joined"), host 3 if it is
SH=
for h in 3 2; do
    slog | grep -E " host $h (joined|\(generation)" | tail -n1 | grep -q " joined from " && { SH=$h; break; }
done
if [ -z "$SH" ]; then
    failc "SIGSTOP: not run: both remote hosts have lost the service already (see above)"
else
qp=$(qpid_of $SH)
gen=$(slog | sed -n "s/.* host $SH joined from .*, generation \([0-9]*\)\$/\1/p" | tail -n1)
t_stop=$(now)
kill -STOP "$qp"
line=
for _ in $(seq 1 100); do
    line=$(slog | grep " host $SH (generation $gen, .*) failed: " | tail -n1)
    [ -n "$line" ] && break
    sleep 0.1
done
sleep 1
st=$("$POOLTOOL" inspect --json "$POOL" | jq -r --argjson h $SH '.hosts[$h].status')
kill -CONT "$qp"
t_cont=$(now)
if [ -n "$line" ]; then
    d=$(ms_between "$t_stop" "$(log_epoch "${line%% *}")")
    # its last heartbeat went up to a quarter of the timeout before the stop
    if [ "$d" -ge $((HB_MS * 3 / 4 - 100)) ] && [ "$d" -le $((HB_MS + 500)) ] && [ "$st" = failed ]; then
        pass "host $SH SIGSTOPped: the service failed it after ${d} ms (heartbeat timeout $HB_MS ms): '${line#* cxlpod-pool serve: }'; inspect: $st"
    else
        failc "host $SH SIGSTOPped: failed after ${d} ms (heartbeat timeout $HB_MS ms), inspect: $st"
    fi
else
    failc "host $SH SIGSTOPped: the service did not fail it within 10 s"
fi
# after SIGCONT: what the host sees (documented, not a condition, except
# that it answers and does not hang)
sleep 3
lost=$(grep "lost the pool service" "$WORK/${WD}b/host$SH.qemu-err" | tail -n1)
t0=$(now); qs=$(qmp $SH query-status 2>&1 | tr -d '\n'); qms=$(ms_between "$t0" "$(now)")
rd=$(gssh $SH 60 "$GT/cxlpod-poke read $(tok_off 0) 8 | od -An -tx1; echo \"(exit \${PIPESTATUS[0]})\"" 2>&1 | tr -s ' \n' ' ')
info "after SIGCONT, host $SH's QEMU: stderr '${lost:-(nothing)}'; query-status in ${qms} ms: $qs; a coherent load in its guest: $rd"
info "the service: $(slog | grep -E "host $SH |$B" | tail -n 3 | cut -c14- | tr '\n' ';')"
if [ -n "$lost" ] && [ -n "$qs" ] && [ "$qms" -le 1000 ] && grep -q "(exit" <<<"$rd"; then
    pass "host $SH after SIGCONT: its QEMU says it lost the service and answers QMP in ${qms} ms; its guest answers ssh"
else
    failc "host $SH after SIGCONT: stderr '${lost}', query-status '$qs' in ${qms} ms"
fi
fi

# --- end of pod 1
touch "$CT/end"
ra=0 rb=0
timeout 300 tail --pid=$PA -f /dev/null; timeout 300 tail --pid=$PB -f /dev/null
wait $PA || ra=$?; wait $PB || rb=$?
PIDS=()
info "pod 1 ended: launchers exited $ra (a) and $rb (b); b's summary: $(grep -E '^host [0-9]+:' "$WORK/${WD}b.out" | tr '\n' ';')"

fi   # pod 1

# ======================================================================
# Pod 2: the pool service killed with the four guests booted
# ======================================================================
WD=p2-
if [[ " ${XTRIAL_PODS:-1 2} " == *" 2 "* ]]; then
rm -f "$CT/end"
ip netns exec "$NSA" "$LAUNCH" -w "$WORK/${WD}a" "${L2A[@]}" \
    >"$WORK/${WD}a.out" 2>"$WORK/${WD}a.err" &
PA=$!; PIDS+=($PA)
for _ in $(seq 1 300); do
    grep -q "listens on $A:$PORT2" "$WORK/${WD}a.err" && break
    kill -0 $PA 2>/dev/null || break
    sleep 0.2
done
ip netns exec "$NSB" "$LAUNCH" -w "$WORK/${WD}b" "${L2B[@]}" >"$WORK/${WD}b.out" 2>"$WORK/${WD}b.err" &
PB=$!; PIDS+=($PB)
up=0
for _ in $(seq 1 1200); do
    n=0
    for h in 0 1 2 3; do
        grep -q "tick [0-9]* host $h read alive0" "$(wd_of $h "$WD")/host$h.log" 2>/dev/null && n=$((n + 1))
    done
    [ $n = 4 ] && { up=1; break; }
    kill -0 $PA 2>/dev/null && kill -0 $PB 2>/dev/null || break
    sleep 0.5
done
if [ $up = 1 ]; then
    spid=$(sed -n 's/.*pool service: cxlpod-pool serve (pid \([0-9]*\)).*/\1/p' "$WORK/${WD}a.err" | head -n1)
    t_sk=$(now)
    kill -KILL "$spid"
    sleep 4
    for h in 2 3; do
        lost=$(grep "lost the pool service" "$WORK/${WD}b/host$h.qemu-err" | tail -n1)
        t0=$(now); qs=$(qmp $h query-status 2>&1 | tr -d '\n'); qms=$(ms_between "$t0" "$(now)")
        # the guest goes on: new tick lines after the kill
        before=$(grep -ac "^tick" "$WORK/${WD}b/host$h.log" || true)
        sleep 3
        after=$(grep -ac "^tick" "$WORK/${WD}b/host$h.log" || true)
        last=$(grep -a "^tick" "$WORK/${WD}b/host$h.log" | tail -n1 | tr -d "\r\n" | tr -c "[:print:]" "?")
        if [ -n "$lost" ] && [ -n "$qs" ] && [ "$qms" -le 1000 ] && grep -q running <<<"$qs" && [ "$after" -gt "$before" ]; then
            pass "service killed: host $h's QEMU said '$lost', answered query-status in ${qms} ms ($qs), its guest goes on ('$last')"
        else
            failc "service killed: host $h: stderr '${lost}', query-status '$qs' in ${qms} ms, ticks $before -> $after"
        fi
    done
    if grep -q "the pool service (cxlpod-pool serve on $A:$SPORT2) exited (status signal 9" "$WORK/${WD}a.err"; then
        pass "service killed: machine a's launcher reported it: '$(grep "the pool service (cxlpod-pool serve" "$WORK/${WD}a.err" | tail -n1 | sed 's/^cxlpod-launch: //')'"
    else
        failc "service killed: machine a's launcher did not report it"
    fi
    # the local hosts are not affected
    for h in 0 1; do
        last=$(grep -a "^tick" "$WORK/${WD}a/host$h.log" | tail -n1 | tr -d '\r')
        info "host $h (local) after the kill: '$last'"
    done
    info "b's launcher after the service's death: $(grep -v 'started QEMU\|waiting\|work dir\|accelerator\|pod network' "$WORK/${WD}b.err" | tail -n 4 | tr '\n' ';')"
else
    failc "pod 2 did not boot: $(grep -h "qemu-err|" "$WORK/${WD}b.err" "$WORK/${WD}a.err" | head -n 1 | sed 's/.*qemu-err| //')"
    info "the service: $(slog | tail -n 3 | cut -c14- | tr '\n' ';')"
fi
kill -TERM $PB $PA 2>/dev/null
ra=0 rb=0
timeout 60 tail --pid=$PA -f /dev/null; timeout 60 tail --pid=$PB -f /dev/null
wait $PA || ra=$?; wait $PB || rb=$?
PIDS=()
info "pod 2 stopped (SIGTERM): launchers exited $ra (a) and $rb (b)"
info "a's summary: $(grep -E '^(host|pod across)' "$WORK/${WD}a.out" | tr '\n' ';')"
info "b's summary: $(grep -E '^(host|pod across)' "$WORK/${WD}b.out" | tr '\n' ';')"
fi   # pod 2

echo "xmach-trial: pod 1 booted in $((t_boot / 1000)) s; whole trial $(( $(date +%s) - T_START )) s; seed $SEED"
echo "$NP passed, $NF failed"
[ $NF = 0 ]

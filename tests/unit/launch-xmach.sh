#!/bin/bash
# cxlpod-launch across "machines" on loopback (launch-xmach.c,
# docs/multi-machine.md), on stand-in QEMUs that boot nothing
# (fake-qemu.sh beside this script), one launcher per "machine" on this
# one, each in its own work directory; the pod network needs vde2
# (scripts/deps.sh), the test is skipped (exit 77) without it.  What the
# review of 078bfd8 found and int-35 cannot provoke cheaply:
#   - the script --machine sends removes the pod's secrets it wrote once
#     that machine's launcher ended, here one that fails at once;
#   - a listener flooded with connections that never say anything (from
#     another loopback address, its fd limit 128) still takes the real
#     joiner, and both pods end well;
#   - a joiner whose listener's address drops its SYNs (a listener whose
#     accept queue is full) gives up at --join-timeout, and at once on
#     SIGINT, not after the kernel's connect timeout (about 2 minutes);
#   - a --machine whose command never reads its script (over 64 KiB, a
#     job file of 200 KiB) holds neither the launcher nor the other
#     machines: the next one joins meanwhile;
#   - a listener without a pod key is refused beyond the loopback;
#   - a pod that runs longer than --join-timeout, the joiner ending first:
#     the listener finishes its hosts (it died "never joined", exit 124).
#
#   launch-xmach.sh CXLPOD-LAUNCH
set -u
L=${1:?usage: $0 cxlpod-launch}
HERE=$(cd "$(dirname "$0")" && pwd)
FAKE=$HERE/fake-qemu.sh
POOLTOOL=$(dirname "$L")/cxlpod-pool
command -v vde_switch >/dev/null && command -v vde_plug >/dev/null \
    || { echo "no vde_switch/vde_plug (vde2): skipped"; exit 77; }
W=$(mktemp -d /tmp/cxlpod-launch-xmach-XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# the launchers' own directories (and the --machine script's) under $W
export TMPDIR=$W FAKE_BOOT_S=1 FAKE_JOB_S=1 FAKE_LINES=2
fails=0
ok()  { printf 'ok   %s\n' "$*"; }
bad() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
show() { local f; for f in "$@"; do echo "--- $f"; tail -n 15 "$f"; done; }
touch "$W/kernel" "$W/initrd"
"$POOLTOOL" create --size 256M --coherent-size 64M --max-hosts 2 "$W/pool.img" >/dev/null \
    || { echo "cxlpod-pool create failed"; exit 1; }
C=(-n 2 --qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" --pool-backend file
   --pool "$W/pool.img" --net)
# a pool the launcher makes (the stand-in QEMUs keep no host table), with
# a pod key beside it
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/pool2.img.key"
C2=(-n 2 --qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" --pool-backend file
    --pool "$W/pool2.img" --net)
# a free port of the loopback (the kernel's pick)
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
printf '#!/bin/sh\nshift\nexec "$@"\n' >"$W/fake-ssh"     # ssh NAME CMD... -> CMD...
chmod +x "$W/fake-ssh"

# 1. --machine with --serve: the script writes the pool's key into its
# directory; that machine's launcher fails (the stand-in QEMU takes no
# remote pool); the key must not stay behind
P=$(port); S=$(port)
timeout 60 "$L" -w "$W/a1" "${C[@]}" --machine-name a --net-listen 127.0.0.1:$P \
    --serve 127.0.0.1:$S --serve-heartbeat-timeout 2500 --machine m1:1 \
    --ssh-command "$W/fake-ssh" -- true >"$W/a1.out" 2>"$W/a1.err"
rc=$?
d=$(sed -n 's|.*logs in \(.*/cxlpod-machine\.[^/]*\)/w$|\1|p' "$W/a1/machine-m1.err" | head -n 1)
[ -z "$d" ] && d=$(ls -d "$W"/cxlpod-machine.* 2>/dev/null | head -n 1)
if [ $rc = 1 ] && [ -n "$d" ] && [ -d "$d/w" ] && grep -q "its launcher exited (status 2) before it joined" "$W/a1.err" \
   && [ ! -e "$d/pool.key" ] && [ -z "$(find "$d" -name '*key*')" ]; then
    ok "--machine: the machine's launcher failed, the pool key the script wrote there is gone, its logs stay"
else
    show "$W/a1.err" "$W/a1/machine-m1.err"; find "$W" -name 'cxlpod-machine.*' -exec find {} \; 
    bad "--machine: exit $rc (expected 1), directory '$d', keys left: $(find "$d" -name '*key*' 2>/dev/null)"
fi
rm -rf "$W"/cxlpod-machine.*
# ... and its pool service took --serve-heartbeat-timeout
if grep -q "heartbeat timeout 2500 ms" "$W/a1/pool-serve.log"; then
    ok "--serve-heartbeat-timeout 2500: the pool service fails a silent host after 2500 ms"
else
    show "$W/a1/pool-serve.log"; bad "--serve-heartbeat-timeout did not reach the pool service"
fi
out=$(timeout 30 "$L" -w "$W/a1b" "${C[@]}" --serve-heartbeat-timeout 3000 -- true 2>&1)
rc=$?
if [ $rc = 2 ] && printf '%s' "$out" | grep -q "goes with --serve"; then
    ok "--serve-heartbeat-timeout without --serve: a usage error"
else
    bad "--serve-heartbeat-timeout without --serve: exit $rc, '$out'"
fi
out=$(timeout 30 "$L" -w "$W/a1c" "${C[@]}" --serve 127.0.0.1:0 --serve-heartbeat-timeout 5 -- true 2>&1)
rc=$?
if [ $rc = 2 ] && printf '%s' "$out" | grep -q "10..600000"; then
    ok "--serve-heartbeat-timeout 5: refused, with the range"
else
    bad "--serve-heartbeat-timeout 5: exit $rc, '$out'"
fi

# 2. a flood of silent connections from 127.0.0.2 (32 threads, up to
# 4000 connections, far more than the listener's 128 fds, held 30 s)
# while machine b joins from 127.0.0.1
cat >"$W/flood.py" <<'PY'
import socket, sys, threading, time
port, secs, n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
held, t0 = [], time.time()
def flood():
    while time.time() - t0 < secs and len(held) < n:
        s = socket.socket()
        s.settimeout(1)
        try:
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", port))
            held.append(s)
        except OSError:
            s.close()
            time.sleep(0.01)
ts = [threading.Thread(target=flood) for _ in range(32)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(len(held), "connections made", file=sys.stderr)
time.sleep(max(0, secs - (time.time() - t0)))
PY
P=$(port)
bash -c 'ulimit -n 128; exec "$@"' _ timeout 90 "$L" -w "$W/a2" "${C2[@]}" --local-hosts 0 \
    --machine-name a --net-listen 127.0.0.1:$P -- true >"$W/a2.out" 2>"$W/a2.err" &
PA=$!; PIDS+=($PA)
for t in $(seq 1 100); do grep -q "listens on" "$W/a2.err" && break; sleep 0.1; done
python3 "$W/flood.py" $P 30 4000 2>"$W/flood.err" &
PF=$!; PIDS+=($PF)
# the listener's open files while the flood goes on, 10 s (its first
# silent connections are dropped after 10 s): at most the cap of 32
# pending connections over its own (the launcher is timeout's child)
LA=$(pgrep -P $PA | head -n 1)
base=$(ls /proc/$LA/fd 2>/dev/null | wc -l)
maxfd=0
for t in $(seq 1 40); do
    n=$(ls /proc/$LA/fd 2>/dev/null | wc -l)
    [ "$n" -le "$maxfd" ] || maxfd=$n
    sleep 0.25
done
timeout 60 "$L" -w "$W/b2" "${C2[@]}" --local-hosts 1 --machine-name b \
    --net-join 127.0.0.1:$P -- true >"$W/b2.out" 2>"$W/b2.err"
rb=$?
ra=0; wait $PA || ra=$?
kill $PF 2>/dev/null; wait $PF 2>/dev/null
PIDS=()
if [ $ra = 0 ] && [ $rb = 0 ] && grep -q "^host 0: rc=0" "$W/a2.out" && grep -q "^host 1: rc=0" "$W/b2.out" \
   && grep -q "pod network: machine b (hosts 1-1, from 127.0.0.1:[0-9]*) joined" "$W/a2.err" \
   && grep -q "connection(s) without a hello closed early (more than 32 waiting, or 8 from one address)" "$W/a2.err" \
   && [ $maxfd -gt 0 ] && [ $maxfd -le $((base + 40)) ]; then
    ok "a listener flooded with silent connections (fd limit 128): at most $((maxfd - base)) more open files, the oldest closed, the real joiner taken"
else
    show "$W/a2.err" "$W/b2.err" "$W/flood.err"
    bad "flooded listener: a exited $ra, b $rb (expected 0 and 0, b joined, the flood's connections closed early); its open files $base before the flood, up to $maxfd during it (at most $((base + 40)) expected)"
fi

# 3. --net-join to an address that drops the SYNs: a socket listening
# with a backlog of 0 whose one queued connection is never accepted
cat >"$W/blackhole.py" <<'PY'
import socket, sys, time
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(0)
c = socket.create_connection(l.getsockname())   # fills the accept queue
print(l.getsockname()[1], flush=True)
time.sleep(float(sys.argv[1]))
PY
python3 "$W/blackhole.py" 60 >"$W/bh.port" &
PH=$!; PIDS+=($PH)
for t in $(seq 1 50); do [ -s "$W/bh.port" ] && break; sleep 0.1; done
H=$(cat "$W/bh.port")
t0=$(date +%s.%N)
timeout 30 "$L" -w "$W/b3" "${C2[@]}" --local-hosts 1 --machine-name b \
    --net-join 127.0.0.1:$H --join-timeout 3 -- true >"$W/b3.out" 2>"$W/b3.err"
rb=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
if [ $rb = 124 ] && grep -q "net-join 127.0.0.1:$H: no launcher listens there after [0-9]* s (Connection timed out; --join-timeout)" "$W/b3.err" \
   && [ "$(echo "$el < 10" | bc)" = 1 ]; then
    ok "--net-join to an address that drops the SYNs: gave up at --join-timeout 3 after $el s"
else
    show "$W/b3.err"; bad "--net-join to an address that drops the SYNs: exit $rb after $el s (expected 124 within 10 s)"
fi
# and a SIGINT while it waits there ends it at once (exit 130)
timeout 30 "$L" -w "$W/b4" "${C2[@]}" --local-hosts 1 --machine-name b \
    --net-join 127.0.0.1:$H --join-timeout 60 -- true >"$W/b4.out" 2>"$W/b4.err" &
PB=$!; PIDS+=($PB)
sleep 2
LB=$(pgrep -P $PB | head -n 1)
t0=$(date +%s.%N)
kill -INT "$LB"
rb=0; wait $PB || rb=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
kill $PH 2>/dev/null; wait $PH 2>/dev/null
PIDS=()
if [ $rb = 130 ] && grep -q "interrupted while joining the pod network" "$W/b4.err" && [ "$(echo "$el < 3" | bc)" = 1 ]; then
    ok "--net-join waiting on an address that drops the SYNs: SIGINT ended it after $el s"
else
    show "$W/b4.err"; bad "--net-join waiting on an address that drops the SYNs: SIGINT: exit $rb after $el s (expected 130 within 3 s)"
fi

# 4. two --machine: "stuck" reads nothing for 6 s, then fails; m2 joins
# meanwhile (its script is sent while stuck's waits)
cat >"$W/fake-ssh2" <<'SH'
#!/bin/sh
case $1 in stuck) sleep 6; echo "stuck: no answer" >&2; exit 255 ;; esac
shift
exec "$@"
SH
chmod +x "$W/fake-ssh2"
{ echo 'echo done'; for i in $(seq 1 4000); do echo "# a job file of 200 KiB, line $i ................"; done; } >"$W/big.job"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/pool3.img.key"
P=$(port)
t0=$(date +%s.%N)
timeout 60 "$L" -w "$W/a5" -n 3 --qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" \
    --pool-backend file --pool "$W/pool3.img" --net --job "$W/big.job" \
    --machine-name a --net-listen 127.0.0.1:$P --machine stuck:1 --machine m2:2 \
    --ssh-command "$W/fake-ssh2" >"$W/a5.out" 2>"$W/a5.err"
ra=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
joined=$(grep -n "pod network: machine m2 (hosts 2-2, from 127.0.0.1:[0-9]*) joined" "$W/a5.err" | cut -d: -f1)
exited=$(grep -n "machine stuck (hosts 1-1): its launcher exited (status 255) before it joined: stuck: no answer" "$W/a5.err" | cut -d: -f1)
if [ $ra = 1 ] && [ -n "$joined" ] && [ -n "$exited" ] && [ "$joined" -lt "$exited" ] && [ "$(echo "$el < 30" | bc)" = 1 ]; then
    ok "a --machine that reads none of its 200 KiB script: the other machine joined meanwhile, the pod stopped for it after $el s"
else
    show "$W/a5.err"; bad "a --machine that reads nothing: exit $ra after $el s (expected 1), m2 joined at line '$joined', stuck's end at line '$exited'"
fi

# 5. no pod key: refused on 0.0.0.0, before it listens
P=$(port)
timeout 30 "$L" -w "$W/a6" -n 2 --qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" \
    --pool-backend file --pool "$W/nokey.img" --net --local-hosts 0 \
    --net-listen 0.0.0.0:$P -- true >"$W/a6.out" 2>"$W/a6.err"
ra=$?
if [ $ra = 2 ] && grep -q "error: --net-listen 0.0.0.0:$P: no pod key ($W/nokey.img.key): listening beyond the loopback needs one" "$W/a6.err" \
   && ! grep -q "listens on" "$W/a6.err"; then
    ok "a listener without a pod key refused on 0.0.0.0"
else
    show "$W/a6.err"; bad "a listener without a pod key on 0.0.0.0: exit $ra (expected 2, refused before listening)"
fi

# 6. a pod that runs longer than --join-timeout: machine b's launcher
# ends (its host's job is short) while a's host still runs; a must not
# take b's end for a join that never came (it died "hosts 1 of the pod
# never joined", exit 124, once --join-timeout had passed)
P=$(port)
FAKE_JOB_S=7 timeout 60 "$L" -w "$W/a7" "${C2[@]}" --local-hosts 0 --machine-name a \
    --net-listen 127.0.0.1:$P --join-timeout 3 -- true >"$W/a7.out" 2>"$W/a7.err" &
PA=$!; PIDS+=($PA)
for t in $(seq 1 100); do grep -q "listens on" "$W/a7.err" && break; sleep 0.1; done
FAKE_JOB_S=1 timeout 60 "$L" -w "$W/b7" "${C2[@]}" --local-hosts 1 --machine-name b \
    --net-join 127.0.0.1:$P -- true >"$W/b7.out" 2>"$W/b7.err"
rb=$?
wait $PA; ra=$?
if [ $ra = 0 ] && [ $rb = 0 ] && grep -q "^host 0: rc=0" "$W/a7.out" && ! grep -q "never joined" "$W/a7.err"; then
    ok "a pod longer than --join-timeout: machine b ended first, a finished its host (exit 0)"
else
    show "$W/a7.err" "$W/b7.err"; bad "a pod longer than --join-timeout, b ending first: a exited $ra, b $rb (expected 0, 0)"
fi

echo "$fails failed"
[ $fails = 0 ]

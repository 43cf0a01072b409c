#!/usr/bin/env bash
# mpirun across a 4-host host-userland pod: only host 0 has a job
# (--job-host 0:FILE alone); hosts 1-3 serve (sshd, MPI ranks, the pool)
# until it ends and are then stopped by the launcher.  Host 0 runs
# Debian's Open MPI with one rank per guest on cxlpod-mpi-allreduce, whose
# vectors and sums move through the pool:
#   - with writeback + invalidate the sums are exact (exit 0);
#   - without them the corruption is detected (exit 3), on every rank
#     that read another host's vector.
# While host 0's job waits, this script logs into host 2 from the host
# with `cxlpod-launch ssh` and checks who answers, also after a client
# that left in the middle of the port's handshake.
. "$(dirname "$0")/lib.sh"

N=4
PROJ=$WORK/proj
mkdir -p "$PROJ"
MPIPROG=$CXLPOD_TOP/build/meson/guest-tools/mpi/cxlpod-mpi-allreduce
[ -x "$MPIPROG" ] || fail "no $MPIPROG (Open MPI missing when the tools were built? scripts/deps.sh installs it)"
command -v mpirun >/dev/null || fail "mpirun is not installed on the host (scripts/deps.sh installs openmpi-bin)"
command -v ss >/dev/null || fail "ss is not installed on the host (scripts/deps.sh installs iproute2)"

cat >"$PROJ/mpi.sh" <<EOF
hosts=host0,host1,host2,host3
# every peer's sshd answers before mpirun starts ranks there
for h in host1 host2 host3; do
    for t in \$(seq 1 90); do ssh \$h true 2>/dev/null && break; sleep 1; done
done
echo "ready" >ready
for t in \$(seq 1 300); do [ -e go ] && break; sleep 0.5; done
mpirun -np $N --host \$hosts --timeout 240 $MPIPROG --protocol writeback --elems 32768 --rounds 3
echo "wb-rc=\$?"
mpirun -np $N --host \$hosts --timeout 240 $MPIPROG --protocol none --elems 32768 --rounds 2
echo "none-rc=\$?"
EOF

cd "$PROJ"
t0=$(date +%s)
"$CXLPOD_LAUNCH" -w "$WORK/pod" -n $N "${SHM[@]}" --userland host --mem 768M --timeout 800 --json \
    --job-host "0:$PROJ/mpi.sh" >"$WORK/run.out" 2>"$WORK/run.err" &
LP=$!
# host 0 says when every peer's sshd answers; then log in from here
for t in $(seq 1 600); do
    [ -e "$PROJ/ready" ] && break
    kill -0 $LP 2>/dev/null || { cat "$WORK/run.err"; fail "the pod ended before host 0 was ready"; }
    sleep 0.5
done
[ -e "$PROJ/ready" ] || { kill $LP; fail "host 0 never got ssh to every peer"; }
got=$(timeout 120 "$CXLPOD_LAUNCH" ssh "$WORK/pod" 2 'echo "$(hostname) $CXLPOD_HOST_ID $(id -u)"' </dev/null) \
    || { touch "$PROJ/go"; fail "cxlpod-launch ssh to host 2 failed: $got"; }
[ "$got" = "host2 2 0" ] || { touch "$PROJ/go"; fail "cxlpod-launch ssh host 2 answered '$got'"; }
# a second session reuses the first one's connection (ControlMaster)
timeout 20 ssh -F "$WORK/pod/ssh/config" -O check host2 2>&1 | grep -q 'Master running' \
    || { touch "$PROJ/go"; fail "no ssh master connection to host 2 after the first session"; }
got=$(timeout 60 "$CXLPOD_LAUNCH" ssh "$WORK/pod" host2 hostname </dev/null) || true
[ "$got" = host2 ] || { touch "$PROJ/go"; fail "a second ssh session to host 2 answered '$got'"; }
# two clients at once that do not share a connection (ssh -S none, the
# master closed first): the second connects while the first's session is
# open (host 2's ssh port serves one connection after the other, so the
# second waits in the port's listen queue: seen there), then the first
# ends and both get their answer
timeout 20 ssh -F "$WORK/pod/ssh/config" -O exit host2 2>/dev/null || true
rm -f "$PROJ/first-open" "$PROJ/first-end"
timeout 120 ssh -F "$WORK/pod/ssh/config" -S none host2 \
    "touch '$PROJ/first-open'; for i in \$(seq 1 1000); do [ -e '$PROJ/first-end' ] && break; sleep 0.1; done; echo first" \
    </dev/null >"$WORK/first.out" 2>&1 &
pa=$!
for t in $(seq 1 600); do
    [ -e "$PROJ/first-open" ] && break
    kill -0 $pa 2>/dev/null || break
    sleep 0.1
done
[ -e "$PROJ/first-open" ] || { touch "$PROJ/go"; fail "the first unshared ssh session to host 2 never ran: $(cat "$WORK/first.out")"; }
timeout 120 ssh -F "$WORK/pod/ssh/config" -S none host2 'echo second' </dev/null >"$WORK/second.out" 2>&1 &
pb=$!
# queued: host 2's ssh socket has a connection waiting to be accepted
queued=
for t in $(seq 1 600); do
    ss -xlnH | awk -v p="$WORK/pod/host2.ssh" '$5 == p && $3 >= 1 { f = 1 } END { exit !f }' && { queued=1; break; }
    kill -0 $pb 2>/dev/null || break
    sleep 0.1
done
touch "$PROJ/first-end"
rca=0; wait $pa || rca=$?
rcb=0; wait $pb || rcb=$?
[ -n "$queued" ] || { touch "$PROJ/go"; fail "the second ssh client never waited behind the first's open session (second: rc $rcb, '$(cat "$WORK/second.out")')"; }
[ $rca = 0 ] && [ $rcb = 0 ] && [ "$(cat "$WORK/first.out")" = first ] && [ "$(cat "$WORK/second.out")" = second ] \
    || { touch "$PROJ/go"; fail "two unshared ssh connections to host 2 answered '$(cat "$WORK/first.out")' (rc $rca) and '$(cat "$WORK/second.out")' (rc $rcb)"; }
# a client that goes after the guest's ready, without its go (a proxy
# killed by a timeout): the next client is still served
timeout 150 python3 - "$WORK/pod/host2.ssh" <<'PY' || { touch "$PROJ/go"; fail "the stale client got no ready from host 2"; }
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(0.5)
buf = b""
while b"cxlpod-vport-ready-2 00000000deadbeef\n" not in buf:
    s.sendall(b"cxlpod-vport-hello-2 00000000deadbeef\n")
    try:
        d = s.recv(256)
    except socket.timeout:
        continue
    if not d:
        sys.exit("host 2's ssh port closed before its ready")
    buf += d
s.close()
PY
got=$(timeout 100 ssh -F "$WORK/pod/ssh/config" -S none host2 hostname </dev/null 2>&1) || true
[ "$got" = host2 ] || { touch "$PROJ/go"; fail "after a client left without its go, ssh to host 2 answered '$got'"; }
touch "$PROJ/go"
wait $LP || { cat "$WORK/run.err"; out 0; fail "the MPI pod failed"; }
cat "$WORK/run.err"     # the launcher's progress: boot and job times

out 0 | grep -E '^rank [0-9] of 4 on host[0-9]: pod host [0-9]' >"$WORK/ranks" || true
[ "$(wc -l <"$WORK/ranks")" = 8 ] || { out 0; fail "not every rank reported (two runs of 4)"; }
for h in 0 1 2 3; do
    grep -q "on host$h: pod host $h," "$WORK/ranks" || { out 0; fail "no rank ran on host$h"; }
done
expect_line 0 '^writeback: 4 ranks on 4 pod hosts, 32768 elements x 3 rounds, 0 wrong sums: exact$'
expect_line 0 '^wb-rc=0$'
expect_line 0 '^no flush: 4 ranks on 4 pod hosts, 32768 elements x 2 rounds, [1-9][0-9]* wrong sums: corruption detected$'
expect_line 0 '^none-rc=3$'
for h in 1 2 3; do
    grep -q "^host $h: served (no job of its own); stopped after every job ended" "$WORK/run.out" \
        || { cat "$WORK/run.out"; fail "host $h was not reported as served"; }
done
jq -e '[.results[] | .status] == ["ok","served","served","served"]' < <(grep '^{' "$WORK/run.out" | tail -n1) >/dev/null \
    || { tail -n1 "$WORK/run.out"; fail "--json statuses are not ok,served,served,served"; }
pass "mpirun across 4 guests: allreduce through the pool exact with writeback, corruption detected without; ssh from the host; serving hosts stopped after the job"

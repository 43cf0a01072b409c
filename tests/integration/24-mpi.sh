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
# with `cxlpod-launch ssh` and checks who answers.
. "$(dirname "$0")/lib.sh"

N=4
PROJ=$WORK/proj
mkdir -p "$PROJ"
MPIPROG=$CXLPOD_TOP/build/meson/guest-tools/mpi/cxlpod-mpi-allreduce
[ -x "$MPIPROG" ] || fail "no $MPIPROG (Open MPI missing when the tools were built? scripts/deps.sh installs it)"
command -v mpirun >/dev/null || fail "mpirun is not installed on the host (scripts/deps.sh installs openmpi-bin)"

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
# master closed first): one waits for the other and both get their answer
timeout 20 ssh -F "$WORK/pod/ssh/config" -O exit host2 2>/dev/null || true
timeout 120 ssh -F "$WORK/pod/ssh/config" -S none host2 'sleep 2; echo first' </dev/null >"$WORK/first.out" 2>&1 &
pa=$!
b=$(timeout 120 ssh -F "$WORK/pod/ssh/config" -S none host2 'echo second' </dev/null 2>&1) || true
wait $pa || true
[ "$b" = second ] && [ "$(cat "$WORK/first.out")" = first ] \
    || { touch "$PROJ/go"; fail "two unshared ssh connections to host 2 answered '$(cat "$WORK/first.out")' and '$b'"; }
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

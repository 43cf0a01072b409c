#!/usr/bin/env bash
# Host-userland pods when something is wrong, and failures inside them:
#   1. a directory that cannot be shared (/) is refused before any QEMU
#      starts, with the reason;
#   2. an ssh key clash in the work directory (a private key whose public
#      half is another key's) is refused with both file names;
#   3. a guest whose network does not come up (an image whose /init finds
#      no pod NIC: the net modules left out, as in an image older than the
#      launcher) reports the host and the cause, and the launcher stops the
#      pod at once instead of letting host 1 wait for it (issue 24 item 8);
#   4. a host killed in the middle of its job and restarted comes back
#      with the same name, address and ssh host key, on a memdev pool: its
#      peer logs into it by name after the restart.
. "$(dirname "$0")/lib.sh"

# 1. the current directory is /
rc=0; (cd / && "$CXLPOD_LAUNCH" -w "$WORK/p1" -n 1 --userland host -- true) \
    >"$WORK/1.out" 2>&1 || rc=$?
[ $rc = 2 ] || { cat "$WORK/1.out"; fail "sharing / was not refused with exit 2 (rc=$rc)"; }
grep -q 'it cannot be / ' "$WORK/1.out" || { cat "$WORK/1.out"; fail "no reason given for refusing /"; }
[ ! -e "$WORK/p1/host0.cmdline" ] || fail "a QEMU was started although / was refused"
pass "a launch directory of / is refused before any QEMU starts"

# 2. a key clash
mkdir -p "$WORK/p2/ssh" "$WORK/proj"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/p2/ssh/id_ed25519" -C a
ssh-keygen -q -t ed25519 -N '' -f "$WORK/other" -C b
cp "$WORK/other.pub" "$WORK/p2/ssh/id_ed25519.pub"
rc=0; (cd "$WORK/proj" && "$CXLPOD_LAUNCH" -w "$WORK/p2" -n 1 --userland host -- true) \
    >"$WORK/2.out" 2>&1 || rc=$?
[ $rc = 2 ] || { cat "$WORK/2.out"; fail "a key clash was not refused with exit 2 (rc=$rc)"; }
grep -q "ssh key clash: $WORK/p2/ssh/id_ed25519 and $WORK/p2/ssh/id_ed25519.pub are not one key pair" "$WORK/2.out" \
    || { cat "$WORK/2.out"; fail "the key clash message does not name both files"; }
pass "an ssh key clash is refused with both file names"

# cut_link PID WORKDIR I: as soon as host I's QEMU (of the launcher PID)
# has its QMP socket, take its NIC's link down, before its /init looks;
# then wait for the launcher and return its exit status
cut_link() {
    for t in $(seq 1 200); do [ -S "$2/host$3.qmp" ] && break; sleep 0.05; done
    "$CXLPOD_LAUNCH" qmp "$2" "$3" set_link '{"name":"podnet","up":false}' >/dev/null \
        || { kill "$1"; fail "QMP set_link on host $3 failed"; }
    wait "$1"
}

# 3. a guest whose network does not come up: host 1's NIC loses its link
#    (QMP set_link, before its /init looks) while host 0 runs a long job;
#    host 1 says which host and why, and the pod is stopped at once (host
#    0's job never gets to its end: it is stopped for host 1, not ended)
t0=$(date +%s)
(cd "$WORK/proj" && exec "$CXLPOD_LAUNCH" -w "$WORK/p3" -n 2 "${SHM[@]}" --net --timeout 500 \
    --append cxlpod.timeout=10 -- 'sleep 400; echo job-ended') >"$WORK/3.out" 2>&1 &
rc=0; cut_link $! "$WORK/p3" 1 || rc=$?
took=$(( $(date +%s) - t0 ))
[ $rc = 1 ] || { cat "$WORK/3.out"; fail "a pod whose host 1 had no network exited $rc, not 1"; }
grep -qE 'host 1: guest error: (@@CXLPOD-ERROR )?host 1: network: eth0 has no carrier after 10s' "$WORK/3.out" \
    || { cat "$WORK/3.out"; fail "no error naming host 1 and its missing carrier"; }
grep -q '^host 0: stopped: host 1 failed' "$WORK/3.out" || { cat "$WORK/3.out"; fail "host 0 was not stopped for host 1"; }
! grep -q 'job-ended' "$WORK/3.out" || { cat "$WORK/3.out"; fail "host 1's failure did not stop host 0's 400 s job: it ended"; }
pass "a guest without network: host 1 and the cause reported, host 0 stopped, after ${took}s"

# 3b. the same before the guest gives up (its own wait is long): the boot
#     deadline says the region is ready but the network is not up
(cd "$WORK/proj" && exec "$CXLPOD_LAUNCH" -w "$WORK/p3b" -n 1 "${SHM[@]}" --net --timeout 300 \
    --boot-timeout 40 --append cxlpod.timeout=600 -- true) >"$WORK/3b.out" 2>&1 &
rc=0; cut_link $! "$WORK/p3b" 0 || rc=$?
[ $rc = 1 ] && grep -q 'host 0: region ready but the network / userland not up .* (boot stalled, --boot-timeout 40)' "$WORK/3b.out" \
    || { cat "$WORK/3b.out"; fail "the boot deadline did not report a ready host whose network never came up"; }
pass "--boot-timeout reports a host whose region is ready but whose network is not up"

# 4. a QEMU that exits before its region is ready stops the pod at once
#    (issue 24 item 8: host 0 refused by its device, host 1 sleeping)
t0=$(date +%s)
rc=0; "$CXLPOD_LAUNCH" -w "$WORK/p4" -n 2 "${SHM[@]}" --timeout 300 \
    --device-opt 0:no-such-property=1 -- 'sleep 200; echo job-ended' >"$WORK/4.out" 2>&1 || rc=$?
took=$(( $(date +%s) - t0 ))
[ $rc = 1 ] || { cat "$WORK/4.out"; fail "a pod with a refused host exited $rc, not 1"; }
grep -q 'host 0: QEMU exited (status 1) after .* without a result, before its CXL region was ready' "$WORK/4.out" \
    || { cat "$WORK/4.out"; fail "host 0's refusal not reported"; }
grep -q '^host 1: stopped: host 0 failed' "$WORK/4.out" || { cat "$WORK/4.out"; fail "host 1 not reported as stopped"; }
! grep -q 'job-ended' "$WORK/4.out" || { cat "$WORK/4.out"; fail "host 1's 200 s job ran to its end after host 0 was refused"; }
rc=0; "$CXLPOD_LAUNCH" -w "$WORK/p4k" -n 2 "${SHM[@]}" --timeout 300 --keep-going \
    --device-opt 0:no-such-property=1 -- 'echo went-on' >"$WORK/4k.out" 2>&1 || rc=$?
grep -q '^\[host1\] went-on' "$WORK/4k.out" || { cat "$WORK/4k.out"; fail "--keep-going did not let host 1 run"; }
pass "a host refused at start stops the pod in ${took}s; --keep-going lets the others run"

# 5. kill and restart in a host-userland pod on a memdev pool: host 1 comes
#    back with the same name, address and host key; host 0 logs into it
cat >"$WORK/proj/h0.sh" <<'EOF'
for t in $(seq 1 600); do [ -e back ] && break; sleep 0.5; done
[ -e back ] || { echo "host1 never came back"; exit 1; }
echo "peer boot now=$(ssh host1 cat /proc/sys/kernel/random/boot_id) file=$(cat back)"
echo "peer addr=$(getent hosts host1 | awk '{print $1}')"
touch done
EOF
cat >"$WORK/proj/h1.sh" <<'EOF'
if [ -z "$CXLPOD_RESTARTED" ]; then echo KILL-ME; sleep 300; fi
echo "restarted=$CXLPOD_RESTARTED addr=$(ip -4 -o addr show | awk '/10\.211/ {print $4}') name=$(hostname)"
cat /proc/sys/kernel/random/boot_id >back.tmp && mv back.tmp back
for t in $(seq 1 600); do [ -e done ] && break; sleep 0.5; done
EOF
rc=0; (cd "$WORK/proj" && "$CXLPOD_LAUNCH" -w "$WORK/p5" -n 2 "${SHM[@]}" --userland host --pool-backend memdev \
    --timeout 600 --job-host 0:h0.sh --job-host 1:h1.sh --kill 1@KILL-ME --restart 1) >"$WORK/5.out" 2>&1 || rc=$?
[ $rc = 0 ] || { cat "$WORK/5.out"; fail "the kill/restart pod failed (rc=$rc)"; }
grep -qE '^\[host1\] restarted=1 addr=10\.211\.0\.2/16 name=host1$' "$WORK/5.out" || { cat "$WORK/5.out"; fail "host 1 did not come back as host1 at 10.211.0.2"; }
line=$(grep '^\[host0\] peer boot now=' "$WORK/5.out") || { cat "$WORK/5.out"; fail "host 0 did not log into the restarted host1"; }
now=${line#*now=}; now=${now%% *}; file=${line##*file=}
[ -n "$now" ] && [ "$now" = "$file" ] || fail "host 0 reached another boot of host1 than the restarted one ($line)"
grep -q '^\[host0\] peer addr=10\.211\.0\.2$' "$WORK/5.out" || fail "host1's address changed"
pass "a killed host-userland guest restarts with its name, address and host key (memdev pool)"

# 6. timed mode and the boot deadline in host-userland guests
rc=0; (cd "$WORK/proj" && "$CXLPOD_LAUNCH" -w "$WORK/p6" -n 1 "${SHM[@]}" --userland host --timeout 300 \
    --device-opt mode=timed -- 'cxlpod-info --json | grep -o "\"mode\":\"[a-z]*\""') >"$WORK/6.out" 2>&1 || rc=$?
[ $rc = 0 ] && grep -q '^\[host0\] "mode":"timed"' "$WORK/6.out" || { cat "$WORK/6.out"; fail "timed mode in a host-userland guest"; }
rc=0; (cd "$WORK/proj" && "$CXLPOD_LAUNCH" -w "$WORK/p7" -n 1 "${SHM[@]}" --userland host --timeout 300 \
    --boot-timeout 2 -- true) >"$WORK/7.out" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q '^host 0: boot stalled' "$WORK/7.out" || { cat "$WORK/7.out"; fail "--boot-timeout in a host-userland guest"; }
pass "timed mode and --boot-timeout work in host-userland guests"

#!/usr/bin/env bash
# A QEMU killed at each step of joining, leaving and resetting:
# the device's test-only property x-test-kill-at=<step> (refused outside
# the qtest accelerator) makes it raise SIGKILL on itself there.  After each death: cxlpod-pool check says
# whether the pool opens; the next normal start joins with the right
# generation, or is refused saying what is wrong and how to recover; after
# that recovery (the tool) the start succeeds.  Every step runs on a
# missing pool (the QEMU creates it) and, where the step is reached, on an
# existing pool whose host 0 left at generation 1.  Run by scripts/test.sh.
set -uo pipefail
TOP=${CXLPOD_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
QEMU=${CXLPOD_QEMU:-$TOP/build/qemu/qemu-system-x86_64}
TOOL=${CXLPOD_POOL_TOOL:-$TOP/build/meson/host-tools/cxlpod-pool}
. "$TOP/tests/qtest/pool-lib.bash"

qmp() {  # qmp SOCKET COMMAND: one QMP command, its reply
    python3 - "$1" "$2" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
for cmd in ("qmp_capabilities", sys.argv[2]):
    f.write(json.dumps({"execute": cmd}) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            break
print(json.dumps(r))
PY
}

# wait_exit PID SECONDS: its exit status (137 = SIGKILL), 255 on timeout
wait_exit() {
    local i
    for i in $(seq $(($2 * 10))); do
        kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
        sleep 0.1
    done
    return 255
}

# step MODE:GEN...: the next start's generation on a missing and on an
# existing pool ("-": the step is not reached there; "refused": refused)
STEPS=(
    "after-open           1        2"
    "after-flock          1        2"
    "after-allocate       refused  -"
    "after-header         1        -"
    "after-host-lock      1        2"
    "after-generation     2        3"
    "after-slot-claim     2        3"
    "after-join           2        3"
    "leave-after-flock    2        3"
    "leave-after-state    2        3"
    "reset-after-flock    2        3"
    "reset-after-generation 3      4"
)

BASE=$D/base.pool
start_host "$BASE" 0; h=$PID
wait_joined "$BASE" 0 "$h" 1 || { bad "base pool" "$(cat "$D/qemu-0.log")"; finish; }
stop_host "$h"; wait "$h" 2>/dev/null
[ "$(json "$BASE" '.hosts[0] | "\(.status) \(.generation)"')" = "left 1" ] || { bad "base pool: host 0 left at generation 1"; finish; }

for row in "${STEPS[@]}"; do
    read -r step want_missing want_existing <<<"$row"
    for mode in missing existing; do
        want=$want_missing; [ $mode = existing ] && want=$want_existing
        [ "$want" = - ] && continue
        P=$D/$step-$mode.pool
        [ $mode = existing ] && cp --sparse=always "$BASE" "$P"
        name="$step ($mode pool)"
        QMPS=$D/qmp-$step-$mode.sock

        # 1. the QEMU that dies at $step
        # shellcheck disable=SC2046
        "$QEMU" $(qemu_args "$P" 0 | sed "s|max-hosts=4|&,x-test-kill-at=$step|") \
            -qmp "unix:$QMPS,server=on,wait=off" >"$D/killed.log" 2>&1 &
        k=$!; PIDS+=("$k")
        case $step in
        leave-*|reset-*)
            gen0=1; [ $mode = existing ] && gen0=2
            if ! wait_joined "$P" 0 "$k" $gen0; then
                bad "$name: the QEMU to kill joins" "$(cat "$D/killed.log")"; continue
            fi
            if [ "${step%%-*}" = leave ]; then
                stop_host "$k"
            else
                qmp "$QMPS" system_reset >/dev/null
            fi
            ;;
        esac
        wait_exit "$k" 30; rc=$?
        if [ $rc != 137 ]; then
            bad "$name: QEMU killed itself with SIGKILL" "exit $rc: $(cat "$D/killed.log")"
            kill -9 "$k" 2>/dev/null; continue
        fi

        # 2. check agrees with what the next start does
        out=$("$TOOL" check "$P" 2>&1); crc=$?
        if [ "$want" = refused ]; then
            [ $crc = 1 ] && grep -q "has no header" <<<"$out" && grep -q "recovery: " <<<"$out" \
                && ok "$name: check reports the problem and a recovery" || bad "$name: check reports the problem" "exit $crc: $out"
            expect "$name: the next start is refused, saying what and how to recover" 1 \
                "has no header: if it is a cxlpod pool, the QEMU that created it was stopped before writing one, so no host ever joined it; remove the file \(or make it a pool again with 'cxlpod-pool create $P'\)" \
                run_host "$P" 0
            expect "$name: recovery with cxlpod-pool create" 0 "had no header" \
                "$TOOL" create --size 256M --coherent-size 64M --max-hosts 4 "$P"
            want=1
        else
            [ $crc = 0 ] && ok "$name: check says the pool opens" || bad "$name: check says the pool opens" "exit $crc: $out"
        fi

        # 3. a normal start joins with the expected generation
        start_host "$P" 0; h=$PID
        if wait_joined "$P" 0 "$h" "$want"; then
            ok "$name: the next start joins with generation $want"
        else
            bad "$name: the next start joins with generation $want" "$(cat "$D/qemu-0.log"; "$TOOL" inspect "$P")"
        fi
        expect "$name: check while it runs" 0 ": ok \(" "$TOOL" check "$P"
        stop_host "$h"; wait "$h" 2>/dev/null
        [ "$(json "$P" '.hosts[0].status')" = left ] && ok "$name: it leaves cleanly" || bad "$name: it leaves cleanly"
        rm -f "$P"
    done
done

# the same death on a pool the device gets from a memory-backend-file
# (memdev=): the backend makes the file, the device sizes it and dies
# before its header; the next memdev start is refused the same way
P=$D/memdev.pool
name="after-allocate (memdev, missing pool)"
qemu_args "$P" 0 | grep -q "pool=$P,size=256M" || bad "$name: qemu_args still has the text the memdev rewrite replaces"
# shellcheck disable=SC2046
"$QEMU" $(qemu_args "$P" 0 | sed "s|pool=$P,size=256M|memdev=pm|;s|max-hosts=4|&,x-test-kill-at=after-allocate|") \
    -object memory-backend-file,id=pm,mem-path="$P",size=256M,offset=2M,share=on \
    >"$D/killed.log" 2>&1 &
k=$!; PIDS+=("$k")
wait_exit "$k" 30; rc=$?
[ $rc = 137 ] && ok "$name: QEMU killed itself with SIGKILL" || { bad "$name: QEMU killed itself with SIGKILL" "exit $rc: $(cat "$D/killed.log")"; kill -9 "$k" 2>/dev/null; }
expect "$name: check reports the problem" 1 "has no header" "$TOOL" check "$P"
# shellcheck disable=SC2046
expect "$name: the next memdev start is refused, saying how to recover" 1 \
    "has no header: .*cxlpod-pool create $P" \
    timeout 30 "$QEMU" $(qemu_args "$P" 0 | sed "s|pool=$P,size=256M|memdev=pm|") \
    -object memory-backend-file,id=pm,mem-path="$P",size=256M,offset=2M,share=on
expect "$name: recovery with cxlpod-pool create" 0 "had no header" \
    "$TOOL" create --size 256M --coherent-size 64M --max-hosts 4 "$P"
start_memdev_host "$P" 0; h=$PID
wait_joined "$P" 0 "$h" 1 && ok "$name: the next memdev start joins with generation 1" \
    || bad "$name: the next memdev start joins with generation 1" "$(cat "$D/qemu-0.log")"
stop_host "$h"; wait "$h" 2>/dev/null
rm -f "$P"

# a step name the device does not know is refused, before the pool is
# touched (it used to be a warning, and the QEMU ran)
# shellcheck disable=SC2046
expect "an unknown step is refused, naming the steps" 1 \
    "property 'x-test-kill-at' is 'no-such-step' \(allowed: one of after-open, .*reset-after-generation" \
    timeout 30 "$QEMU" $(qemu_args "$D/u.pool" 0 | sed "s|max-hosts=4|&,x-test-kill-at=no-such-step|")
[ ! -e "$D/u.pool" ] && ok "... and makes no pool" || bad "... and makes no pool"
finish

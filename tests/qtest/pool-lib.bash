# Helpers of tests/qtest/pool-tool.sh and kill-steps.sh (sourced; not a
# test itself): QEMU hosts on a pool under the qtest accelerator, TAP-style
# results.  Needs TOP, QEMU and TOOL set.
[ -x "$QEMU" ] || { echo "no QEMU at $QEMU (run scripts/build-qemu.sh)"; exit 1; }
[ -x "$TOOL" ] || { echo "no cxlpod-pool at $TOOL (run scripts/build-tools.sh)"; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/cxlpod-qtest-pool.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$D"
}
trap cleanup EXIT
. "$TOP/tests/unit/tap.bash"
finish() { echo "1..$n"; [ "$fails" = 0 ]; exit; }
META=$((0x200000)); MIB=$((1 << 20))
json() { "$TOOL" inspect --json "$1" 2>/dev/null | jq -r "$2"; }
# the metadata: the head and (format 4) the tail after the data
table_sum() {
    local t
    t=$(json "$1" .tail_offset)
    { head -c $META "$1"; [ -z "$t" ] || tail -c +$((t + 1)) "$1"; } | sha256sum
}

qemu_args() {  # qemu_args POOL HOST-ID: one host of the qtest's geometry
    local fw=
    [ -e /usr/share/seabios/bios-256k.bin ] && fw="-L /usr/share/seabios -L /usr/share/qemu"
    echo "$fw -accel qtest -display none -S -qtest null -machine q35,cxl=on -m 128M -nodefaults" \
         "-device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1" \
         "-device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2" \
         "-device cxl-shm,bus=rp0,id=shm0,pool=$1,size=256M,coherent-size=64M,host-id=$2,max-hosts=4" \
         "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"
}
# start_memdev_host POOL HOST-ID: a QEMU in the background whose pool is a
# memory-backend-file on POOL (memdev=), pid in PID
start_memdev_host() {
    # shellcheck disable=SC2046
    "$QEMU" $(qemu_args "$1" "$2" | sed "s|pool=$1,size=256M|memdev=pm|") \
        -object memory-backend-file,id=pm,mem-path="$1",size=256M,offset=2M,share=on \
        >"$D/qemu-$2.log" 2>&1 &
    PID=$!; PIDS+=("$PID")
}
# start_host POOL HOST-ID [VAR=VALUE...]: a QEMU in the background, pid in PID
start_host() {
    local pool=$1 id=$2; shift 2
    # shellcheck disable=SC2046
    env "$@" "$QEMU" $(qemu_args "$pool" "$id") >"$D/qemu-$id.log" 2>&1 &
    PID=$!; PIDS+=("$PID")
}
# stop_host PID...: a clean stop (SIGTERM), sent once each QEMU catches it.
# QEMU installs its SIGTERM handler only after the board is built, i.e.
# after the device has joined; a SIGTERM in between kills it outright (the
# host then shows as failed, not left).  On a loaded machine that window
# is wide enough to be hit: a clean-clone run with a CPU hog beside it saw
# kill-steps' QEMU die of SIGTERM (exit 143) instead of leaving.
stop_host() {
    local p i cgt
    for p; do
        for i in $(seq 100); do
            cgt=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
            [ -n "$cgt" ] || break                     # gone already
            (( (0x$cgt >> 14) & 1 )) && break          # SIGTERM (15) caught
            sleep 0.1
        done
        kill -TERM "$p" 2>/dev/null
    done
}
# run_host POOL HOST-ID: a QEMU that is expected to exit (refused); its output
run_host() {
    # shellcheck disable=SC2046
    timeout 30 "$QEMU" $(qemu_args "$1" "$2") 2>&1
}
# wait_joined POOL HOST-ID PID GENERATION: the host table shows PID live
# in that slot with that generation (30 s), else 1
wait_joined() {
    local i
    for i in $(seq 300); do
        [ "$(json "$1" ".hosts[$2] | \"\(.status) \(.pid) \(.generation)\"")" = "live $3 $4" ] && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

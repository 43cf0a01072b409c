#!/usr/bin/env bash
# Soak of a stopped peer, outside the suite: a stopped host never freezes
# the other one (docs/failure-model.md, "A host is stopped but alive").
#
#   bash scripts/soak-stop.sh [--dry-run] [STOPS [SECONDS [SEED]]]
#                                   default 20 stops of 20 s, a random seed
#
# --dry-run boots nothing: it checks the arguments, the tools and the pod's
# launcher options (cxlpod-launch --dry-run).
#
# One two-host pod (evict-rate=1000 on both) whose guests write, back and
# forth, lines of one shared non-coherent page (so that their doorbells
# and evictions contend for its lock word) and of a page of their own,
# until the test tells them to end.  STOPS times, at a random moment
# 0-3 s after the last, host 0's QEMU is stopped with SIGSTOP for
# SECONDS, whatever it holds then (a line lock, the pool's file lock);
# meanwhile host 1's QMP (query-cxl-shm through the launcher's qmp
# subcommand) is asked every 0.2 s and must answer within 1 s each time.
# After SIGCONT the next round.  Then both jobs must end normally.  The
# answer times (max, median) and how far host 1's own work went during
# each stop are printed; a failing run prints its seed (SEED replays the
# moments).  Uses the built launcher and guest image (scripts/build-tools.sh,
# scripts/build-guest.sh).
set -euo pipefail
. "$(dirname "$0")/../tests/integration/lib.sh"

DRY=0
[ "${1:-}" != --dry-run ] || { DRY=1; shift; }
STOPS=${1:-20}
SECS=${2:-20}
SEED=${3:-$(( $(od -An -N2 -tu2 /dev/urandom) ))}
case "$STOPS$SECS$SEED" in *[!0-9]*|'')
    echo "usage: $0 [--dry-run] [STOPS [SECONDS [SEED]]]" >&2; exit 2 ;;
esac
[ $# -le 3 ] || { echo "usage: $0 [--dry-run] [STOPS [SECONDS [SEED]]]" >&2; exit 2; }
RANDOM=$SEED
META=$((0x200000))
END=$(token)
# offsets in the device: shared page 0x4100000 (non-coherent, coherent
# window 64M), own pages 0x4200000 + id * 4096; end token and host 1's
# counter in the coherent window
cat > "$WORK/job.sh" <<JOB
me=\$CXLPOD_HOST_ID; n=0
while [ "\$(cxlpod-poke read $((0x180000)) 16)" != "$END" ]; do
    cxlpod-poke write \$((0x4100000 + me * 64)) "h\$me-\$n" >/dev/null
    cxlpod-poke write \$((0x4200000 + me * 4096)) "h\$me-\$n" >/dev/null
    n=\$((n + 1))
    [ \$me = 1 ] &&
        cxlpod-poke write $((0x1c0000)) "\$(printf '%016d' \$n)" >/dev/null
done
echo "host \$me wrote \$n rounds"
JOB
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
qemu_pid() {  # qemu_pid I: host I's QEMU, from the launcher's progress
    sed -n "s/^cxlpod-launch: host $1: started QEMU pid \([0-9]*\)\$/\1/p" \
        "$WORK/stderr"
}
die_with() {  # die_with MESSAGE: the launcher's output, then fail
    cat "$WORK/stderr" "$WORK/stdout" 2>/dev/null
    fail "$1 (seed $SEED)"
}
ask_host1() {  # host 1 answers query-cxl-shm within 5 s
    timeout 5 "$CXLPOD_LAUNCH" qmp "$WORK/pod" 1 query-cxl-shm \
        >/dev/null 2>&1
}
counter() {  # host 1's rounds so far (coherent window, pool file)
    local v
    v=$(dd if="$WORK/pod/pool.img" bs=1 skip=$((META + 0x1c0000)) count=16 \
           status=none 2>/dev/null | tr -d '\0')
    echo "$((10#${v:-0}))"
}

# no --stall-timeout: the jobs print only at their end (and host 0's is
# stopped for SECONDS at a time); the overall timeout bounds the run
ARGS=(-n 2 "${SHM[@]}" --device-opt evict-rate=1000 --json
      --timeout $(( 300 + STOPS * (SECS + 5) )) --job "$WORK/job.sh")
if [ $DRY = 1 ]; then
    pod --dry-run "${ARGS[@]}" >"$WORK/dry" 2>&1 || { cat "$WORK/dry"; fail "the launcher refuses the pod's options"; }
    [ "$(grep -c -- '-device cxl-shm' "$WORK/dry")" = 2 ] || { cat "$WORK/dry"; fail "not 2 QEMU command lines"; }
    pass "dry run: $STOPS stops of $SECS s (seed $SEED): the pod's options are fine; nothing booted"
    exit 0
fi
pod "${ARGS[@]}" >"$WORK/stdout" 2>"$WORK/stderr" &
launcher=$!
pid0=
for _ in $(seq 600); do
    pid0=$(qemu_pid 0)
    [ -n "$pid0" ] && [ "$(counter)" -gt 0 ] && break
    kill -0 $launcher 2>/dev/null ||
        die_with "the pod ended before the jobs ran"
    sleep 0.5
done
[ -n "$pid0" ] && [ "$(counter)" -gt 0 ] || die_with "the jobs never started"

times=()
for k in $(seq "$STOPS"); do
    sleep "$((RANDOM % 3)).$((RANDOM % 10))"
    c0=$(counter)
    kill -STOP "$pid0"
    t_end=$(( $(now_ms) + SECS * 1000 ))
    while [ "$(now_ms)" -lt "$t_end" ]; do
        t0=$(now_ms)
        if ! ask_host1; then
            kill -0 $launcher 2>/dev/null || die_with "stop $k: the pod ended"
            pid1=$(qemu_pid 1)
            for t in /proc/"$pid1"/task/*; do
                echo "host 1 thread ${t##*/}: $(cut -d' ' -f2-3 "$t/stat")" \
                     "$(cat "$t/wchan" 2>/dev/null)"
            done >&2
            command -v gdb >/dev/null &&
                timeout 30 gdb -p "$pid1" -batch -ex 'thread apply all bt' \
                    >&2 2>&1
            kill -CONT "$pid0"
            die_with "stop $k: host 1's QMP did not answer within 5 s"
        fi
        dt=$(( $(now_ms) - t0 ))
        times+=("$dt")
        if [ "$dt" -ge 1000 ]; then
            kill -CONT "$pid0"
            die_with "stop $k: host 1's QMP took $dt ms (limit 1000)"
        fi
        sleep 0.2
    done
    c1=$(counter)
    kill -CONT "$pid0"
    echo "stop $k: ${SECS} s, host 1 went from round $c0 to $c1"
done
printf '%s' "$END" | dd of="$WORK/pod/pool.img" bs=1 seek=$((META + 0x180000)) \
    conv=notrunc status=none
rc=0; wait $launcher || rc=$?
[ "$rc" = 0 ] || die_with "launcher exit status $rc"
expect_line 0 "^host 0 wrote [0-9]+ rounds\$"
expect_line 1 "^host 1 wrote [0-9]+ rounds\$"
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
n=${#times[@]}
max=$(tail -n1 <<<"$sorted")
median=$(sed -n "$(( (n + 1) / 2 ))p" <<<"$sorted")
pass "$STOPS stops of $SECS s (seed $SEED): host 1's QMP answered $n times," \
     "max $max ms, median $median ms"

#!/usr/bin/env bash
# A stopped peer never freezes a healthy host (docs/failure-model.md, "A
# host is stopped but alive"), with Linux guests: two hosts write back
# their own lines of the same 4 MiB of the non-coherent area, at once
# (cxlpod-contend --bulk: every page holds lines of both, so both contend
# for every page's lock word).  Host 1's QEMU is stopped with SIGSTOP
# again and again; a stop that finds it holding a line lock (read from the
# pool file's lock words) is kept, the others are undone at once, until
# NEED (3) stops held one (at most TRIES (400) stops).  During each kept
# stop host 0 is paused and resumed over QMP (stop, cont) and asked
# query-status and query-cxl-shm, and each command must answer within
# 3 s (a host waiting for host 1 never answers while it is stopped; an
# idle machine answers in tens of ms, one at load 8 took 1.4 s once).  With the device before the series, host 0's stop did not answer
# within 5 s in 2 of the 3 stops where host 1 held a lock (its vCPU
# waited for that lock).  Then both jobs must end with every line as its
# owner last wrote it back and with progress on both hosts; host 0's
# retries (query-cxl-shm) are printed.
# Then a second pod of the same two jobs: with host 1 stopped holding a
# line lock, host 0 is reset over QMP (set-action reboot=reset, then
# system_reset) and must boot its guest again to @@CXLPOD-READY while
# host 1 stays stopped, then `quit` must end its QEMU within 5 s; the
# pool is checked after the pod (no lock left held, host 0 left).
. "$(dirname "$0")/lib.sh"

NEED=${STOPPED_PEER_NEED:-3}     # stops with host 1 holding a line lock
TRIES=${STOPPED_PEER_TRIES:-600}  # stops at most to get them (1 in 7 to
                                  # 1 in 25 finds host 1 holding one, by
                                  # load; a miss costs about 0.1 s)
SEED=${STOPPED_PEER_SEED:-$(( $(od -An -N2 -tu2 /dev/urandom) ))}
RANDOM=$SEED
JOB="cxlpod-contend --method native --bulk --bytes 4M --seconds 60 --json --timeout 300"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
qemu_pid() {  # qemu_pid I: host I's QEMU, from the launcher's progress
    sed -n "s/^cxlpod-launch: host $1: started QEMU pid \([0-9]*\)\$/\1/p" \
        "$WORK/stderr"
}
qmp0() {  # qmp0 CMD [ARGS]: host 0 answers within 3 s (5 s hard limit)
    local t0 dt
    t0=$(now_ms)
    timeout 5 "$CXLPOD_LAUNCH" qmp "$WORK/pod" 0 "$@" >"$WORK/qmp.out" 2>&1 ||
        { kill -CONT "$pid1" 2>/dev/null; cat "$WORK/qmp.out" >&2
          fail "$what: host 0's QMP $1 did not answer within 5 s (seed $SEED)"; }
    dt=$(( $(now_ms) - t0 ))
    times+=("$dt")
    [ "$dt" -lt 3000 ] ||
        { kill -CONT "$pid1"; fail "$what: host 0's QMP $1 took $dt ms (seed $SEED)"; }
}
stat0() {  # stat0 NAME: host 0's query-cxl-shm statistic NAME (0 if none)
    local j
    j=$(timeout 5 "$CXLPOD_LAUNCH" qmp "$WORK/pod" 0 query-cxl-shm 2>/dev/null) || j='{}'
    jq -r --arg k "$1" '[.. | objects | select(has($k)) | .[$k]][0] // 0' <<<"$j" 2>/dev/null || echo 0
}
held1() {  # line lock words host 1 holds now (the pool file's metadata)
    # a tag: bit 63 held, host in bits 55..62, slot 48..54 (pool format 4):
    # host 1's tags begin 0x80 then a byte of 0x80..0xff
    od -An -v -tx8 -j $((0x10000)) -N $((8192 * 8)) "$WORK/pod/pool.img" |
        tr -s ' ' '\n' | grep -c '^80[89a-f]' || true
}
start_pod() {  # both jobs run and host 0 has written lines back
    pod -n 2 "${SHM[@]}" --json --timeout 600 -- "$JOB" \
        >"$WORK/stdout" 2>"$WORK/stderr" &
    launcher=$!
    pid1=
    for _ in $(seq 600); do
        pid1=$(qemu_pid 1)
        [ -n "$pid1" ] && [ "$(grep -c 'CXL region ready' "$WORK/stderr")" = 2 ] && break
        kill -0 $launcher 2>/dev/null || { cat "$WORK/stderr"; fail "the pod ended before the jobs ran"; }
        sleep 0.5
    done
    [ -n "$pid1" ] || { cat "$WORK/stderr"; fail "host 1 never started"; }
    for _ in $(seq 600); do
        [ "$(stat0 lines-written-back)" -gt 0 ] && break
        kill -0 $launcher 2>/dev/null || { cat "$WORK/stderr"; fail "the pod ended before the jobs wrote back"; }
        sleep 0.5
    done
    [ "$(stat0 lines-written-back)" -gt 0 ] || fail "host 0 never wrote a line back"
}
stop_holding() {  # stop host 1 until a stop finds it holding a line lock
    h=0
    while [ "$k" -lt "$TRIES" ]; do
        k=$((k + 1))
        sleep "0.$((RANDOM % 15 + 5))"
        kill -0 $launcher 2>/dev/null || return 1  # the jobs ended
        kill -STOP "$pid1"
        sleep 0.02         # every thread of it has stopped
        h=$(held1)
        [ "$h" -gt 0 ] && { sleep 0.2; return 0; }  # host 0 reaches that page
        kill -CONT "$pid1"
    done
    return 1
}

# Phase 1: stop, query-status, cont and query-cxl-shm while host 1 holds a lock
start_pod
times=()
k=0; locked=0
while [ "$locked" -lt "$NEED" ] && stop_holding; do
    locked=$((locked + 1))
    what="stop $k"
    qmp0 stop
    qmp0 query-status
    grep -q '"paused"' "$WORK/qmp.out" || { kill -CONT "$pid1"; fail "stop $k: host 0 not paused"; }
    qmp0 cont
    qmp0 query-cxl-shm
    kill -CONT "$pid1"
    echo "stop $k: host 1 stopped holding $h line lock(s); host 0 answered stop, query-status, cont, query-cxl-shm"
done
[ "$locked" -ge "$NEED" ] ||
    fail "host 1 was stopped holding a line lock only $locked times in $k stops (seed $SEED)"
retries=$(stat0 retries)
rc=0; wait $launcher || rc=$?
[ "$rc" = 0 ] || { cat "$WORK/stderr" "$WORK/stdout"; out 0; out 1; fail "launcher exit status $rc (seed $SEED)"; }
for h in 0 1; do
    j=$(json_of $h cxlpod-contend)
    [ -n "$j" ] || { out $h; fail "host $h: no result line"; }
    echo "host $h: $j"
    jq -e '.ok and .wrong_own == 0 and .wrong_final == 0 and .min_rounds > 1' <<<"$j" >/dev/null ||
        fail "host $h: lost or torn lines, or a host made no progress"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
echo "phase 1: $k stops of host 1, $locked of them holding a line lock (seed $SEED):" \
     "host 0 answered ${#times[@]} QMP commands, max $(tail -n1 <<<"$sorted") ms;" \
     "host 0 retried ${retries:-?} times; every line intact"

# Phase 2: system_reset and quit of host 0 while host 1 is stopped holding one
start_pod
pid0=$(qemu_pid 0)
k=0
stop_holding || fail "phase 2: host 1 was never stopped holding a line lock in $k stops (seed $SEED)"
what="reset"
qmp0 set-action '{"reboot": "reset"}'   # the launcher runs QEMU with -no-reboot
qmp0 system_reset
t0=$(now_ms)
for _ in $(seq 240); do
    [ "$(grep -c '@@CXLPOD-READY' "$WORK/pod/host0.log")" -ge 2 ] && break
    kill -0 "$pid0" 2>/dev/null || { kill -CONT "$pid1"; fail "host 0's QEMU ended after system_reset"; }
    sleep 0.5
done
[ "$(grep -c '@@CXLPOD-READY' "$WORK/pod/host0.log")" -ge 2 ] ||
    { kill -CONT "$pid1"; tail -n 20 "$WORK/pod/host0.log"
      fail "host 0's guest did not boot again within 120 s of system_reset with host 1 stopped (seed $SEED)"; }
boot_ms=$(( $(now_ms) - t0 ))
[ "$(held1)" -gt 0 ] || { kill -CONT "$pid1"; fail "host 1's line lock vanished while it was stopped"; }
qmp0 query-status
grep -q '"running"' "$WORK/qmp.out" || { kill -CONT "$pid1"; fail "host 0 not running after its reset"; }
what="quit"
qmp0 quit
for _ in $(seq 50); do kill -0 "$pid0" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid0" 2>/dev/null &&
    { kill -CONT "$pid1"; fail "host 0's QEMU did not end within 5 s of quit with host 1 stopped"; }
kill -CONT "$pid1"
pkill -TERM -P "$launcher" 2>/dev/null || true  # the launcher (pod's subshell
wait "$launcher" || true                        # is $launcher) stops host 1
for _ in $(seq 100); do kill -0 "$pid1" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid1" 2>/dev/null && fail "host 1's QEMU outlived the launcher by 10 s"
pool_check
pass "phase 1 as above; phase 2: with host 1 stopped holding $h line lock(s), host 0" \
     "answered set-action and system_reset, booted its guest again in $boot_ms ms and" \
     "quit; the pool checks clean (seed $SEED)"

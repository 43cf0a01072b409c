#!/usr/bin/env bash
# cxlpod-pool serve and its client library (through cxlpod-remote) over
# loopback UCX, no QEMU: join with the pod's key, writebacks that land in
# the pool file, fetch, conflicts, atomics exact across concurrent
# clients, refusals (wrong key, no join, out of bounds), a client killed
# mid-writeback or stopped (failed within the heartbeat timeout, rejoins),
# a local host holding a lock (busy, never a hang), the service killed
# or stopped (the client gets an error, never a hang).  TAP output.
#
#   pool-serve.sh BUILD/host-tools/cxlpod-pool BUILD/host-tools/cxlpod-remote
set -u
POOL_TOOL=${1:?usage: pool-serve.sh CXLPOD-POOL CXLPOD-REMOTE}
REMOTE=${2:?usage: pool-serve.sh CXLPOD-POOL CXLPOD-REMOTE}
D=$(mktemp -d /tmp/cxlpod-serve.XXXXXX)
P=$D/p.pool
HB=2000                 # the service's heartbeat timeout, ms
JT=6000                 # the service's join timeout, ms (16 clients start well inside it)
# A failure must be logged within HB + 1 s: the service notices within HB
# plus its tick (at most 50 ms); the rest is slack for a loaded machine.
# HB is twice the default: at a load average of 100 on 2 cores (a 64-guest
# benchmark beside a test run under nice 19) a client was once starved
# for more than 1 s between two requests, and failed for it.
. "$(dirname "$0")/tap.bash"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
# bytes of the pool file at data offset $1, $2 bytes, as hex
pool_hex() { od -An -tx1 -v -j $((0x200000 + $1)) -N "$2" "$P" | tr -d ' \n'; }
rep() { local s= i; for ((i = 0; i < $2; i++)); do s+=$1; done; printf '%s' "$s"; }
# host table state of host $1 (0 free, 1 live, 2 failed, 3 left)
state_of() { "$POOL_TOOL" inspect --json "$P" | jq -r ".hosts[$1].state"; }
gen_of() { "$POOL_TOOL" inspect --json "$P" | jq -r ".hosts[$1].generation"; }
held_locks() { od -An -tx8 -v -j $((0x10000)) -N 65536 "$P" | tr ' ' '\n' | grep -cv '^0*$' ; }

SERVE_PID=
start_service() {
    # not the last service's port: the shell truncates the file only
    # once the background job runs
    rm -f "$D/serve.out"
    "$POOL_TOOL" serve --listen 127.0.0.1:0 --heartbeat-timeout $HB --join-timeout $JT "$P" \
        >"$D/serve.out" 2>>"$D/serve.log" &
    SERVE_PID=$!
    PIDS+=("$SERVE_PID")
    local i
    for i in $(seq 400); do
        PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$D/serve.out" 2>/dev/null)
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    echo "# the service did not start:"; cat "$D/serve.log"
    return 1
}
# R runs the client (a function: never put it in the background, whose
# $! would be a subshell's; use "$REMOTE" itself there)
R() { "$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" "$@"; }

NC=0x200000             # the first non-coherent line (coherent-size 2M)
# wait (HB + 2 s at most) for the service to log /$1/; t1: when it did
failed_within() {
    while ! grep -qE -- "$1" "$D/serve.log" && [ $(($(now_ms) - t0)) -lt $((HB + 2000)) ]; do
        sleep 0.01
    done
    t1=$(now_ms)
}

# --- setup
expect "create makes the pod's key" 0 "made the pod's key" "$POOL_TOOL" create --size 256M --coherent-size 2M --max-hosts 4 "$P"
[ "$(stat -c %a "$P.key")" = 600 ] && ok "key mode 0600" || bad "key mode 0600" "$(stat -c %a "$P.key")"
grep -qE '^[0-9a-f]{64}$' "$P.key" && ok "key: 64 hex digits" || bad "key: 64 hex digits"
expect "serve refuses a wildcard address" 1 "not a loopback address" "$POOL_TOOL" serve --listen 0.0.0.0:0 "$P"
mkfifo -m 600 "$D/fifo.key"
expect "serve refuses a FIFO as its key, at once (not waiting for a writer)" 1 "is not a regular file" \
    timeout 10 "$POOL_TOOL" serve --listen 127.0.0.1:0 --key "$D/fifo.key" "$P"
chmod 644 "$P.key"
expect "serve refuses a key others can read" 1 "readable by its owner only" "$POOL_TOOL" serve --listen 127.0.0.1:0 "$P"
chmod 600 "$P.key"
if [ "$(id -u)" = 0 ]; then
    chown 65534 "$P.key"
    expect "serve refuses a key file another user owns" 1 "owned by uid 65534, not by the service's user" "$POOL_TOOL" serve --listen 127.0.0.1:0 "$P"
    chown 0 "$P.key"
fi
start_service || exit 1
ok "service listens on 127.0.0.1:$PORT"

# --- join, writeback, fetch
expect "join and write back 2 lines" 0 "written 2 conflicts 0" R --host 1 write $NC 2 0xab
[ "$(pool_hex $NC 128)" = "$(rep ab 128)" ] && ok "the lines are in the pool file (what a local host maps)" || bad "lines in the pool file" "$(pool_hex $NC 128)"
expect "fetch returns them" 0 "ok $(rep ab 128)\$" R --host 1 fetch $NC 128
expect "a byte mask writes only its bytes (of the line as fetched)" 0 "written 1" R --host 1 fetch $((NC + 64)) 64 , write $((NC + 64)) 1 0x11 0xff
[ "$(pool_hex $((NC + 64)) 64)" = "$(rep 11 8)$(rep ab 56)" ] && ok "masked line merged with the twin" || bad "masked line" "$(pool_hex $((NC + 64)) 64)"
expect "another host's write over lines it never fetched is a conflict" 0 "written 1 conflicts 1" R --host 2 write $NC 1 0xcd
expect "... and is seen by a fetch of host 1 (page version moved)" 0 "ok $(rep cd 64)$(rep 11 8)$(rep ab 56)\$" R --host 1 fetch $NC 128
expect "fetch of the coherent window" 0 "ok $(rep 00 64)\$" R --host 1 fetch 0x1000 64
expect "host table: hosts 1 and 2 left (their clients left)" 0 " 1:3:[0-9]+ 2:3:[0-9]+ 3:1:" R --host 3 hosts , leave
[ "$(state_of 1)" = left ] && ok "a client that leaves is 'left' in the pool" || bad "left state" "$(state_of 1)"

# --- atomics, exact across concurrent clients
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 1 fadd 0x100 1 1500 >"$D/a1" 2>&1 & A1=$!
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 2 fadd 0x100 1 1500 >"$D/a2" 2>&1 & A2=$!
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 3 fadd 0x100 2 1500 >"$D/a3" 2>&1 & A3=$!
wait $A1; r1=$?; wait $A2; r2=$?; wait $A3; r3=$?
[ $r1$r2$r3 = 000 ] && ok "three concurrent clients' fetch-adds" || bad "concurrent fetch-adds" "$(cat "$D"/a?)"
expect "... sum exactly (1500 + 1500 + 3000)" 0 "^ok 6000\$" R --host 1 read 0x100
[ "$(od -An -tu8 -j $((0x200000 + 0x100)) -N 8 "$P" | tr -d ' ')" = 6000 ] && ok "... in the pool file" || bad "atomic in file"
expect "cmpxchg that fails" 0 "ok old 6000" R --host 1 cas 0x100 5 7
expect "cmpxchg that succeeds, xchg" 0 "^ok 99\$" R --host 1 cas 0x100 6000 42 , xchg 0x100 99 , read 0x100
expect "a masked store writes only its bytes" 0 "^ok $((0x22330063))\$" R --host 1 store 0x100 0x1122334455 0xffff0000 , read 0x100 , xchg 0x100 99

# --- refusals and bounds
head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >"$D/wrong.key"; echo >>"$D/wrong.key"
expect "a wrong key is refused" 1 "error join: refused: wrong key" "$REMOTE" --connect 127.0.0.1:$PORT --key "$D/wrong.key" --host 1 fetch $NC 64
grep -qE "refused 127\.0\.0\.1:[0-9]+: no proof of the pod's key" "$D/serve.log" && ok "... and logged with the peer's address" || bad "refusal logged" "$(tail -3 "$D/serve.log")"
expect "a request before a join is dropped, unread (not a JOIN's size)" 3 "error connection lost" R --no-join fetch $NC 64
grep -q "dropped 127\.0\.0\.1:[0-9]*: a message of [0-9]* bytes before a join" "$D/serve.log" && ok "... and logged" || bad "unjoined request logged" "$(tail -3 "$D/serve.log")"
expect "join of a slot past max-hosts" 1 "error join: invalid request" R --host 4 fetch $NC 64
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 2 sleep 3000 >/dev/null 2>&1 & S2=$!; PIDS+=($S2); sleep 0.5
expect "join of a slot in use" 1 "error join: slot in use" R --host 2 fetch $NC 64
kill $S2; wait $S2 2>/dev/null
expect "fetch past the end" 1 "error invalid" R --host 1 fetch $((0x10000000 - 64)) 128
expect "fetch misaligned" 1 "error invalid" R --host 1 fetch $((NC + 8)) 64
expect "fetch too long" 1 "error invalid" R --host 1 fetch $NC 131072
expect "writeback into the coherent window" 1 "error invalid" R --host 1 write 0x1000 1 1
expect "writeback past the end" 1 "error invalid" R --host 1 write 0x10000000 1 1
expect "atomic outside the coherent window" 1 "error invalid" R --host 1 read $NC
expect "atomic misaligned" 1 "error invalid" R --host 1 fadd 0x104 1
expect "the service still serves after all that" 0 "^ok 99\$" R --host 1 read 0x100
expect "leave and rejoin on the same connection (a fresh nonce)" 0 "^ok generation [0-9]+\$" R --host 1 leave , join 1 , read 0x100
expect "... and it is served" 0 "^ok 99\$" R --host 1 leave , join 1 , read 0x100

# --- a local process holding the pool's flock: a join is busy, retried
# (it holds the flock until $D/unflock exists: no timing assumed)
python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); print("locked", flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.02)' "$P" "$D/unflock" >"$D/flock.out" 2>&1 & FL=$!; PIDS+=($FL)
for i in $(seq 400); do grep -qs locked "$D/flock.out" && break; sleep 0.05; done
expect "the pool's flock held: a join is answered busy" 1 "error join: busy" R --host 1 --retry 0 read 0x100
R --host 1 --retry 20000 read 0x100 >"$D/retry.out" 2>&1 & RJ=$!
sleep 0.5; touch "$D/unflock"; wait $FL
wait $RJ; rc=$?
[ $rc = 0 ] && grep -q "^ok 99\$" "$D/retry.out" && ok "... and joins once it is free (the client retries)" \
    || bad "... and joins once it is free (the client retries)" "exit $rc: $(cat "$D/retry.out")"

# --- unjoined connections: the join timeout (JT ms here), 16 at most
t0=$(now_ms)
expect "a connection that never joins is dropped after the join timeout" 3 "" R --no-join sleep $((3 * JT))
t1=$(now_ms)
[ $((t1 - t0)) -lt $((3 * JT)) ] && ok "... in $((t1 - t0)) ms" || bad "unjoined dropped" "$((t1 - t0)) ms"
UJ=()
for i in $(seq 16); do "$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --no-join sleep $((3 * JT)) >/dev/null 2>&1 & UJ+=($!); PIDS+=($!); done
# their UCX start-up, in parallel on a loaded machine: well inside JT
sleep $((JT / 2000))
expect "a 17th connection yet to join is refused" 3 "" R --host 1 --timeout 1000 read 0x100
grep -q "refused a connection from .* 16 of them yet to join" "$D/serve.log" && ok "... and logged" || bad "unjoined cap logged" "$(tail -3 "$D/serve.log")"
for p in "${UJ[@]}"; do wait $p; done
expect "... and served once they were dropped" 0 "^ok 99\$" R --host 1 read 0x100

# --- a local host holding a line lock (stopped): busy, never a hang
# host 0 "runs locally": its liveness byte held, live in the table, and it
# holds the lock of the page at $NC (word NC/4096 % 8192), as a QEMU
# stopped inside a writeback would
python3 - "$P" $((NC / 4096 % 8192)) >"$D/local.out" 2>&1 <<'EOF' & LOC=$!
import fcntl, os, struct, sys, time, json, subprocess
p, word = sys.argv[1], int(sys.argv[2])
fd = os.open(p, os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0x100000, 1, 0))
hdr = os.pread(fd, 0x60, 0)
tail = struct.unpack_from('<Q', hdr, 0x30)[0]
gen = struct.unpack_from('<Q', os.pread(fd, 8, tail + 8), 0)[0] + 1
os.pwrite(fd, struct.pack('<Q', gen), tail + 8)
os.pwrite(fd, struct.pack('<I', 1), tail)
tag = (1 << 63) | (0 << 55) | (5 << 48) | (gen & ((1 << 48) - 1))
os.pwrite(fd, struct.pack('<Q', tag), 0x10000 + 8 * word)
print("holding", flush=True)
time.sleep(3)
os.pwrite(fd, struct.pack('<Q', 0), 0x10000 + 8 * word)
os.pwrite(fd, struct.pack('<Q', time.time_ns()), tail + 0x18)
os.pwrite(fd, struct.pack('<I', 3), tail)
print("released", flush=True)
time.sleep(0.3)
EOF
PIDS+=($LOC)
for i in $(seq 100); do grep -qs holding "$D/local.out" && break; sleep 0.05; done
t0=$(now_ms)
expect "writeback to a page a live local host keeps locked: busy" 1 "error busy" R --host 1 --retry 300 write $NC 1 0x77
t1=$(now_ms)
[ $((t1 - t0)) -lt 2500 ] && ok "... within the client's bound ($((t1 - t0)) ms)" || bad "busy bound" "$((t1 - t0)) ms"
expect "... the service serves other pages meanwhile" 0 "written 1" R --host 1 --retry 300 write $((NC + 4096)) 1 0x78
wait $LOC
expect "... and the page once the local host let go" 0 "written 1" R --host 1 write $NC 1 0x77
[ "$(pool_hex $NC 64)" = "$(rep 77 64)" ] && ok "... its line is in the pool" || bad "line after release"

# --- a client killed mid-writeback: failed within the heartbeat timeout
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 3 hammer $((NC + 0x10000)) 64 >"$D/hammer.out" 2>&1 & H=$!; PIDS+=($H)
for i in $(seq 100); do grep -q hammering "$D/hammer.out" && break; sleep 0.05; done
g3=$(gen_of 3)
[ "$(state_of 3)" = live ] && ok "hammering host 3 is live (generation $g3)" || bad "host 3 live" "$(state_of 3)"
sleep 0.2
kill -9 $H; t0=$(now_ms)
failed_within "host 3 \\(generation $g3, [^)]*\\) failed"
[ "$(state_of 3)" = failed ] && [ $((t1 - t0)) -le $((HB + 1000)) ] && ok "SIGKILLed client: host 3 failed in $((t1 - t0)) ms" || bad "killed client failed" "$(state_of 3) after $((t1 - t0)) ms"
[ "$(held_locks)" = 0 ] && ok "... no line lock left held" || bad "locks held" "$(held_locks)"
expect "... cxlpod-pool check: no lock held, no undo armed" 0 "ok \(size" "$POOL_TOOL" check "$P"
# every line of the hammered range is one whole writeback (never torn)
torn=0
for i in $(seq 0 63); do
    h=$(pool_hex $((NC + 0x10000 + i * 64)) 64)
    [ "$h" = "$(rep "${h:0:2}" 64)" ] || torn=$((torn + 1))
done
[ $torn = 0 ] && ok "... every line it wrote back is whole" || bad "torn lines" "$torn"
expect "... and it rejoins with the next generation" 0 "joined host 3 generation $((g3 + 1))" R --host 3 hosts

# --- a stopped client: its heartbeat stops, failed within the timeout
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 2 sleep 20000 >"$D/stopped.out" 2>&1 & ST=$!; PIDS+=($ST)
for i in $(seq 100); do [ "$(state_of 2)" = live ] && break; sleep 0.05; done
sleep 0.3
g2=$(gen_of 2)
kill -STOP $ST; t0=$(now_ms)
failed_within "host 2 \\(generation $g2, [^)]*\\) failed: no heartbeat"
[ "$(state_of 2)" = failed ] && [ $((t1 - t0)) -ge $((HB / 2)) ] && [ $((t1 - t0)) -le $((HB + 1000)) ] && ok "stopped client: host 2 failed after $((t1 - t0)) ms (timeout $HB)" || bad "stopped client failed" "$(state_of 2) after $((t1 - t0)) ms"
kill -CONT $ST
t0=$(now_ms); wait $ST; rc=$?; t1=$(now_ms)
[ $rc = 3 ] && ok "... resumed, it finds its connection lost (exit 3, $((t1 - t0)) ms)" || bad "resumed client" "exit $rc: $(cat "$D/stopped.out")"

# --- the service stopped, then killed: the client errors, never hangs
"$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --host 1 sleep 20000 >"$D/svc.out" 2>&1 & C=$!; PIDS+=($C)
sleep 0.5
kill -STOP $SERVE_PID
t0=$(now_ms)
expect "service stopped: a request times out" 3 "timed out" R --host 1 --timeout 400 read 0x100
expect "... and the client gives the connection up (its outcome unknown)" 3 "did not answer a join in time" R --host 1 --timeout 400 fadd 0x100 1
kill -9 $SERVE_PID; kill -CONT $SERVE_PID 2>/dev/null
wait $C; rc=$?; t1=$(now_ms)
[ $rc = 3 ] && [ $((t1 - t0)) -lt 8000 ] && ok "service killed: the joined client exits 3 in $((t1 - t0)) ms" || bad "client after service death" "exit $rc after $((t1 - t0)) ms: $(cat "$D/svc.out")"
grep -q "connection to the pool service lost\|did not answer" "$D/svc.out" && ok "... and says why" || bad "client says why" "$(cat "$D/svc.out")"
expect "no service: connecting fails, no hang" 3 "" "$REMOTE" --connect 127.0.0.1:$PORT --key "$P.key" --timeout 1000 read 0x100
# What a service killed in the middle of a line write leaves: host 2
# live at a generation of the service's, its liveness byte free, the lock
# word of a page tagged with it, its undo slot armed with the line's old
# bytes (0x5a) and the line half written (0xee)
UNDO=$("$POOL_TOOL" inspect --json "$P" | jq .layout.undo)
WORD=$(((NC + 0x20000) / 4096 % 8192))
python3 - "$P" "$UNDO" "$WORD" $((NC + 0x20000)) <<'EOF'
import os, struct, sys
p, undo, word, off = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fd = os.open(p, os.O_RDWR)
tail = struct.unpack_from('<Q', os.pread(fd, 0x60, 0), 0x30)[0]
e = tail + 2 * 128
gen = struct.unpack_from('<Q', os.pread(fd, 8, e + 8), 0)[0] + 1
os.pwrite(fd, struct.pack('<Q', gen), e + 8)
os.pwrite(fd, struct.pack('<I', 1), e)
slot = 3
tag = (1 << 63) | (2 << 55) | (slot << 48) | (gen & ((1 << 48) - 1))
u = undo + ((2 * 2 + (gen & 1)) * 64 + slot) * 128
os.pwrite(fd, struct.pack('<Q', off) + b'\x5a' * 64, u + 8)
os.pwrite(fd, struct.pack('<Q', tag), u)
os.pwrite(fd, struct.pack('<Q', tag), 0x10000 + 8 * word)
os.pwrite(fd, b'\xee' * 32, 0x200000 + off)
EOF
[ "$(held_locks)" = 1 ] && ok "a killed service's half-done write set up (lock held, undo armed)" || bad "half-done write set up" "$(held_locks)"
start_service || exit 1
[ "$(pool_hex $((NC + 0x20000)) 64)" = "$(rep 5a 64)" ] && ok "the restarted service rolled the half-done line back" || bad "rollback" "$(pool_hex $((NC + 0x20000)) 64)"
[ "$(held_locks)" = 0 ] && ok "... and freed its lock" || bad "lock after restart" "$(held_locks)"
grep -q "host 2 (generation [0-9]*) found dead: failed" "$D/serve.log" && ok "... and failed host 2" || bad "host 2 reaped"
expect "... cxlpod-pool check: clean" 0 "ok \(size" "$POOL_TOOL" check "$P"
expect "a restarted service: host 1 it served before is failed" 0 " 1:2:" R --host 3 hosts
expect "... and host 1 rejoins" 0 "^ok 99\$" R --host 1 read 0x100
kill $SERVE_PID; wait $SERVE_PID
grep -q "stopping" "$D/serve.log" && ok "SIGTERM stops the service" || bad "service stop"

echo "1..$n"
[ $fails = 0 ] || { echo "# service log:"; sed 's/^/# /' "$D/serve.log" | tail -40; }
exit $((fails > 0))

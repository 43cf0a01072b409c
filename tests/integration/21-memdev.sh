#!/usr/bin/env bash
# One pool, two ways in: host 0's cxl-shm takes the pool from a
# memory-backend-file on the pool file (memdev=, with prealloc=on), host 1
# from the device's own backend (pool=).  The pod comes from a key file
# ([device] pool-backend = memdev, prealloc = true) and the command line
# puts host 1 back on pool= (--pool-backend 1:file).  The pool file is on
# tmpfs (/dev/shm), where a NUMA binding takes effect (mbind has none on a
# disk file's page cache): host 0's backend is bound to host NUMA node 0
# (host-nodes = 0: QEMU is built with libnuma; these machines have one
# node, so the binding is accepted and shown in the QEMU's numa_maps, its
# effect not measured); a token crosses the pool in both directions, and
# cxlpod-pool inspect shows both hosts left.
. "$(dirname "$0")/lib.sh"

# the pool on /dev/shm, removed with the work dir
[ -d /dev/shm ] && [ -w /dev/shm ] || fail "no writable /dev/shm"
[ "$(stat -f -c %T /dev/shm)" = tmpfs ] || fail "/dev/shm is not tmpfs: $(stat -f -c %T /dev/shm)"
SHMDIR=$(mktemp -d /dev/shm/cxlpod-21-memdev.XXXXXX)
trap 'rm -rf "$WORK" "$SHMDIR"' EXIT
POOL=$SHMDIR/pool.img

t0=$(token); t1=$(token); seen=$(token)
cat > "$WORK/job.sh" <<JOB
me=\$CXLPOD_HOST_ID; other=\$((1 - me))
if [ \$me = 0 ]; then mine=$t0; theirs=$t1; else mine=$t1; theirs=$t0; fi
cxlpod-poke write \$((0x100000 + me * 4096)) "\$mine"
cxlpod-poke wait \$((0x100000 + other * 4096)) "\$theirs" 240 || exit 3
echo "host \$me got \$(cxlpod-poke read \$((0x100000 + other * 4096)) 16)"
# host 0 runs until the test has read its numa_maps (the test writes
# $seen into the coherent window then)
if [ \$me = 0 ]; then cxlpod-poke wait \$((0x180000)) "$seen" 240 || exit 4; fi
JOB
cat > "$WORK/pod.conf" <<CONF
[pod]
hosts = 2

[device]
device = cxl-shm
pool = $POOL
size = 256M
pool-backend = memdev
prealloc = true
host-nodes = 0

[job]
job = job.sh
timeout = 400
json = true
CONF

# while host 0 runs: its mapping of the pool on /dev/shm is bound to
# node 0 (numa_maps: "ADDR bind:0 file=/dev/shm/.../pool.img ...");
# then (or when giving up) host 0's job is told to end: $seen in the
# coherent window at 0x180000 (pool file offset 2 MiB + 0x180000)
( for _ in $(seq 1 600); do
      pid=$(sed -n 's/^cxlpod-launch: host 0: started QEMU pid \([0-9]*\)$/\1/p' "$WORK/stderr" 2>/dev/null)
      if [ -n "$pid" ] && grep -F "file=$POOL" "/proc/$pid/numa_maps" 2>/dev/null | grep -q ' bind:0 '; then
          grep -F "file=$POOL" "/proc/$pid/numa_maps" | grep ' bind:0 ' > "$WORK/numa"
          break
      fi
      sleep 0.2
  done
  printf '%s' "$seen" |
      dd of="$POOL" bs=1 seek=$((0x200000 + 0x180000)) conv=notrunc status=none
) &
watcher=$!
pod --config "$WORK/pod.conf" --pool-backend 1:file > "$WORK/stdout" 2> "$WORK/stderr" \
    || { cat "$WORK/stderr" "$WORK/stdout"; fail "launcher reported a failure"; }
kill $watcher 2>/dev/null || true; wait $watcher 2>/dev/null || true
[ -s "$WORK/numa" ] \
    || fail "host 0's mapping of $POOL was never seen bound to node 0 in /proc/PID/numa_maps"
echo "host 0 numa_maps: $(head -n1 "$WORK/numa")"
cat "$WORK/stderr" >&2
grep -qE "^cxlpod-launch: host 0: started QEMU pid [0-9]+\$" "$WORK/stderr" \
    || fail "no 'host 0: started QEMU pid N' progress message"
grep -qF "(cxl-shm, memory backend on hosts 0, 256 MiB)" "$WORK/stderr" \
    || fail "the start message does not say host 0 is on a memory backend"

c0=$(cat "$WORK/pod/host0.cmdline"); c1=$(cat "$WORK/pod/host1.cmdline")
grep -qF -- "-object memory-backend-file,id=cxl-pool0,mem-path=$POOL,size=256M,offset=2M,share=on,prealloc=on,host-nodes=0,policy=bind" <<<"$c0" \
    || fail "host 0 has no memory backend on the pool: $c0"
grep -qF "cxl-shm,bus=root_port13,id=cxl-shm0,memdev=cxl-pool0,size=256M,host-id=0," <<<"$c0" \
    || fail "host 0's device does not take memdev=: $c0"
grep -qF "pool=$POOL,size=256M,host-id=1," <<<"$c1" \
    || fail "host 1's device does not take pool=: $c1"
grep -q "memory-backend-file" <<<"$c1" && fail "host 1 got a memory backend: $c1"

expect_line 0 "^host 0 got $t1\$"
expect_line 1 "^host 1 got $t0\$"
json=$(tail -n1 "$WORK/stdout")
[ "$(jq -r '[.results[].rc] | join(",")' <<<"$json")" = "0,0" ] \
    || fail "JSON line: $json"

# one pool file on tmpfs: the tool reads it, and both hosts left it cleanly
[ "$(stat -f -c %T "$POOL")" = tmpfs ] || fail "$POOL is not on tmpfs"
[ ! -e "$WORK/pod/pool.img" ] || fail "a pool was made in the work dir too"
[ -x "$POOLTOOL" ] || fail "no cxlpod-pool at $POOLTOOL (scripts/build-tools.sh)"
states=$("$POOLTOOL" inspect --json "$POOL" | jq -r '[.hosts[].status] | join(",")')
[ "$(cut -d, -f1-2 <<<"$states")" = "left,left" ] || fail "pool host table after the run: $states"
report=$("$POOLTOOL" check "$POOL" 2>&1) || fail "cxlpod-pool check found problems in the pool after the run: $report"
pass "tokens $t0 and $t1 crossed one pool on /dev/shm between a memdev host (bound to node 0) and a pool= host"

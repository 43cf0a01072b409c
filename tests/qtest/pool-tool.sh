#!/usr/bin/env bash
# cxlpod-pool against the built QEMU (qtest accelerator, no guest): pools
# made by QEMU are inspected and checked; reset-host and wipe refuse while
# a QEMU holds the host; after kill -9 the host shows failed and
# reset-host works; a pool made by the tool is joined by QEMU (the same
# format code), or refused with the device's message when its geometry
# differs; the no-header refusal points at the tool, whose create repairs
# it; a pool of format version 3 is refused naming 'cxlpod-pool upgrade',
# and joined once upgraded (with CXLPOD_V3_QEMU, a version-3 QEMU's own
# pool too, and a version-3 QEMU refused by a version-4 pod).  Run by scripts/test.sh (CXLPOD_TOP, CXLPOD_QEMU), or by hand.
set -uo pipefail
TOP=${CXLPOD_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
QEMU=${CXLPOD_QEMU:-$TOP/build/qemu/qemu-system-x86_64}
TOOL=${CXLPOD_POOL_TOOL:-$TOP/build/meson/host-tools/cxlpod-pool}
. "$TOP/tests/qtest/pool-lib.bash"

P=$D/q.pool
# 1. QEMU creates the pool; the tool sees host 0 live, refuses to touch it
start_host "$P" 0; h0=$PID
wait_joined "$P" 0 "$h0" 1 || bad "host 0 joins a pool it creates" "$(cat "$D/qemu-0.log")"
[ "$(json "$P" '"\(.size) \(.coherent_size) \(.max_hosts) \(.hosts[0].status) \(.hosts[0].locked) \(.hosts[0].pid) \(.hosts[0].generation)"')" \
    = "268435456 67108864 4 live true $h0 1" ] && ok "inspect: QEMU's pool, host 0 live with its pid, generation 1" \
    || bad "inspect: QEMU's pool" "$("$TOOL" inspect "$P")"
expect "check: QEMU's pool is ok" 0 ": ok \(size 268435456, coherent-size 67108864, max-hosts 4\), 0 notes" "$TOOL" check "$P"
[ "$(json "$P" '.hosts[0].stats | "\(keys | length) \(.resets) \(.stale_reads) \(.charged_ns) \(.retries)"')" = "21 0 0 0 0" ] \
    && ok "inspect: 21 statistics per host, the extended ones (retries too) included" \
    || bad "inspect: statistics" "$("$TOOL" inspect --json "$P")"
table=$(table_sum "$P")
expect "reset-host refuses while host 0 lives" 1 "host 0 of pool .* is live \(pid $h0 holds" "$TOOL" reset-host 0 "$P"
expect "wipe refuses while host 0 lives" 1 "has live hosts: 0 \(pid $h0\)" "$TOOL" wipe "$P"
[ "$table" = "$(table_sum "$P")" ] && ok "refusals leave the metadata unchanged" || bad "refusals leave the metadata unchanged"
kill -0 "$h0" && ok "host 0 still runs" || bad "host 0 still runs"

# 2. host 1 joins, is killed with SIGKILL: failed; reset-host clears it
start_host "$P" 1; h1=$PID
wait_joined "$P" 1 "$h1" 1 || bad "host 1 joins" "$(cat "$D/qemu-1.log")"
kill -9 "$h1"; wait "$h1" 2>/dev/null
[ "$(json "$P" '.hosts[1] | "\(.status) \(.state) \(.locked)"')" = "failed live false" ] \
    && ok "after kill -9: host 1 failed (table live, lock free)" || bad "after kill -9: host 1 failed" "$("$TOOL" inspect "$P")"
expect "check: the dead host is a note" 0 "host 1 \(pid $h1, generation 1\) died without leaving" "$TOOL" check "$P"
expect "wipe still refuses (host 0 lives)" 1 "live hosts: 0 " "$TOOL" wipe "$P"
expect "reset-host 1 after kill -9" 0 "host 1 of pool .*: was live, now free \(generation 1 kept" "$TOOL" reset-host 1 "$P"
[ "$(json "$P" '.hosts[1] | "\(.status) \(.generation) \(.pid)"')" = "free 1 0" ] \
    && ok "host 1 free, generation kept" || bad "host 1 free, generation kept" "$(json "$P" '.hosts[1]')"
start_host "$P" 1; h1=$PID
wait_joined "$P" 1 "$h1" 2 && ok "host 1 rejoins after reset-host with generation 2" || bad "host 1 rejoins with generation 2" "$("$TOOL" inspect "$P")"

# 3. clean leave (SIGTERM) = left; with no host live, wipe zeroes the data
stop_host "$h1"; wait "$h1" 2>/dev/null
[ "$(json "$P" '.hosts[1].status')" = left ] && ok "SIGTERM: host 1 left" || bad "SIGTERM: host 1 left" "$(json "$P" '.hosts[1]')"
kill -9 "$h0"; wait "$h0" 2>/dev/null
printf 'cxlpod' | dd of="$P" bs=1 seek=$((META + 4096)) conv=notrunc status=none
expect "wipe with every host dead or gone" 0 "268435456 bytes of data zeroed" "$TOOL" wipe "$P"
[ "$(dd if="$P" bs=1 skip=$((META + 4096)) count=6 status=none | tr -d '\0')" = "" ] && ok "wipe: data zero" || bad "wipe: data zero"
start_host "$P" 0; h0=$PID
wait_joined "$P" 0 "$h0" 2 && ok "a wiped pool is joined again (generation 2)" || bad "a wiped pool is joined again" "$(cat "$D/qemu-0.log")"
stop_host "$h0"; wait "$h0" 2>/dev/null

# 4. a pool made by the tool: QEMU joins it, or refuses another geometry
T=$D/t.pool
"$TOOL" create --size 256M --coherent-size 64M --max-hosts 4 "$T" >/dev/null
start_host "$T" 2; h2=$PID
wait_joined "$T" 2 "$h2" 1 && ok "QEMU joins a pool made by cxlpod-pool" || bad "QEMU joins a pool made by cxlpod-pool" "$(cat "$D/qemu-2.log")"
stop_host "$h2"; wait "$h2" 2>/dev/null
"$TOOL" create --size 256M --coherent-size 64M --max-hosts 2 "$D/t2.pool" >/dev/null
expect "QEMU refuses a tool pool of another geometry" 1 "has another geometry: pool size=268435456 coherent-size=67108864 max-hosts=2" run_host "$D/t2.pool" 0

# 5. no header: QEMU points at the tool; the tool agrees and repairs it
N=$D/nh.pool
truncate -s $((META + 256 * MIB)) "$N"
touch -d '1 minute ago' "$N"   # a create stopped long ago, not one under way
expect "QEMU refuses a pool with no header, naming the tool" 1 "has no header: .*cxlpod-pool create $N" run_host "$N" 0
expect "check agrees: no header" 1 "has no header" "$TOOL" check "$N"
expect "cxlpod-pool create repairs it" 0 "had no header" "$TOOL" create --size 256M --coherent-size 64M --max-hosts 4 "$N"
start_host "$N" 0; h0=$PID
wait_joined "$N" 0 "$h0" 1 && ok "QEMU joins the repaired pool" || bad "QEMU joins the repaired pool" "$(cat "$D/qemu-0.log")"
stop_host "$h0"; wait "$h0" 2>/dev/null

# 6. a pool= host that opens the file a memdev host's backend has just made
#    (sized, no header yet: QEMU makes backends before devices) waits for
#    that host's device to write the header instead of refusing the pool
M=$D/race.pool
truncate -s $((META + 256 * MIB)) "$M"   # what the backend does first
# shellcheck disable=SC2046
"$QEMU" $(qemu_args "$M" 0) -trace cxl_shm_pool_wait_header \
    >"$D/qemu-0.log" 2>&1 &
h0=$!; PIDS+=("$h0")
# the memdev host once the pool= host waits for the header (its trace)
for _ in $(seq 300); do
    grep -q cxl_shm_pool_wait_header "$D/qemu-0.log" && break
    kill -0 "$h0" 2>/dev/null || break
    sleep 0.05
done
if grep -q cxl_shm_pool_wait_header "$D/qemu-0.log"; then
    ok "the pool= host waits for the header of a new file"
else
    bad "the pool= host waits for the header of a new file" \
        "$(cat "$D/qemu-0.log")"
fi
start_memdev_host "$M" 1; h1=$PID
wait_joined "$M" 1 "$h1" 1 && ok "the memdev host writes the header and joins" \
    || bad "the memdev host joins" "$(cat "$D/qemu-1.log")"
wait_joined "$M" 0 "$h0" 1 && ok "the pool= host waited for the header and joins" \
    || bad "the pool= host joins the memdev host's new pool" "$(cat "$D/qemu-0.log")"
stop_host "$h0" "$h1"; wait "$h0" "$h1" 2>/dev/null
F=$D/fresh.pool
truncate -s $((META + 256 * MIB)) "$F"
# the wait is bounded: run_host's 30 s timeout would end an endless one
# with 124, not the refusal's 1
expect "a headerless file nobody writes a header to is refused once it is 5 s old" 1 \
    "has no header: .*cxlpod-pool create $F" run_host "$F" 0

# 7. a pool of format version 3 (tests/unit/v3pool.py: host 0 left at
#    generation 3, host 1 died live at 2, host 2 failed at 5, data
#    written): QEMU refuses it naming the upgrade and leaves it as it was;
#    after 'cxlpod-pool upgrade' QEMU joins it with the next generation
#    of its slot, marks the dead host failed, and check passes
V=$D/v3.pool
python3 "$TOP/tests/unit/v3pool.py" "$V" $((256 * MIB)) $((64 * MIB)) 4 --populated
before=$(sha256sum <"$V")
expect "QEMU refuses a version-3 pool, naming the upgrade" 1 \
    "has format version 3, this QEMU supports version 4 only: upgrade it in place with 'cxlpod-pool upgrade $V'" \
    run_host "$V" 0
[ "$before" = "$(sha256sum <"$V")" ] && ok "the refusal leaves the version-3 pool unchanged" \
    || bad "the refusal leaves the version-3 pool unchanged"
expect "cxlpod-pool upgrade" 0 "is now format version 4" "$TOOL" upgrade "$V"
start_host "$V" 0; h0=$PID
wait_joined "$V" 0 "$h0" 4 && ok "QEMU joins the upgraded pool: host 0 at generation 3 + 1" \
    || bad "QEMU joins the upgraded pool" "$(cat "$D/qemu-0.log"; "$TOOL" inspect "$V")"
[ "$(json "$V" '[.hosts[1, 2] | "\(.status) \(.state) \(.pid) \(.generation)"] | join(",")')" = "failed failed 222 2,failed failed 333 5" ] \
    && ok "the upgraded table: host 1 (live, dead) marked failed by the join, host 2 kept" \
    || bad "the upgraded table" "$("$TOOL" inspect "$V")"
expect "check: the upgraded pool with host 0 live is ok" 0 ": ok \(size 268435456, coherent-size 67108864, max-hosts 4\)" "$TOOL" check "$V"
table=$(table_sum "$V")
expect "upgrade while a QEMU runs on the version-4 pool: already version 4" 0 "already format version 4: nothing to upgrade" "$TOOL" upgrade "$V"
[ "$table" = "$(table_sum "$V")" ] && ok "... and the metadata unchanged" || bad "... and the metadata unchanged"
[ "$(dd if="$V" bs=1 skip=$META count=14 status=none)" = "cxlpod v3 data" ] && ok "the data of version 3 is in the joined pool" \
    || bad "the data of version 3 is in the joined pool"
stop_host "$h0"; wait "$h0" 2>/dev/null
[ "$(json "$V" '.hosts[0] | "\(.status) \(.generation)"')" = "left 4" ] && ok "host 0 leaves the upgraded pool cleanly" \
    || bad "host 0 leaves the upgraded pool cleanly" "$(json "$V" '.hosts[0]')"
# a mode=timed host sets up a snoop filter of its own layout in the
# upgraded pool (the upgrade drops version 3's), and check accepts it
# shellcheck disable=SC2046
"$QEMU" $(qemu_args "$V" 3 | sed 's/max-hosts=4/max-hosts=4,mode=timed/') >"$D/qemu-3.log" 2>&1 &
h3=$!; PIDS+=("$h3")
wait_joined "$V" 3 "$h3" 1 || bad "a mode=timed host joins the upgraded pool" "$(cat "$D/qemu-3.log")"
sfh=$(json "$V" .layout.sf_header)
[ "$(dd if="$V" bs=8 skip=$((sfh / 8)) count=2 status=none | od -An -tx8 | tr -s ' ')" = " 504f4f4e53465333 0000000000000004" ] \
    && ok "the timed host set the snoop filter up in the tail: \"3SFSNOOP\", 4 ways" \
    || bad "the timed host set the snoop filter up" "$(dd if="$V" bs=8 skip=$((sfh / 8)) count=2 status=none | od -An -tx8)"
expect "check: the upgraded pool with a timed host live is ok" 0 ": ok \(size 268435456" "$TOOL" check "$V"
stop_host "$h3"; wait "$h3" 2>/dev/null

# 8. with a QEMU of format version 3 (CXLPOD_V3_QEMU: main's build before
#    format 4, say), the real thing: a pool made and left by version-3
#    hosts, upgrade refused while they live (their own liveness locks),
#    upgraded once they are gone, joined by this QEMU with the next
#    generation; a version-3 QEMU is refused by the version-4 pool while
#    a version-4 host runs on it: one pod never mixes versions
if [ -x "${CXLPOD_V3_QEMU:-}" ]; then
    R=$D/real-v3.pool
    # shellcheck disable=SC2046
    v3_host() { "$CXLPOD_V3_QEMU" $(qemu_args "$R" "$1") >"$D/qemu-v3-$1.log" 2>&1 & PID=$!; PIDS+=("$PID"); }
    v3_live() {  # v3_live HOST: the version-3 QEMU holds its liveness byte
        local i
        for i in $(seq 300); do
            python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
l = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0x100000 + int(sys.argv[2]), 1, 0))
sys.exit(0 if struct.unpack("hhqqi", l)[0] != fcntl.F_UNLCK else 1)' "$R" "$1" 2>/dev/null && return 0
            sleep 0.1
        done
        return 1
    }
    v3_host 0; v0=$PID; v3_host 1; v1=$PID
    v3_live 0 && v3_live 1 || bad "two version-3 QEMUs join" "$(cat "$D"/qemu-v3-*.log)"
    expect "upgrade refuses while version-3 QEMUs run" 1 "has live hosts: 0 \(pid $v0\) 1 \(pid $v1\)" "$TOOL" upgrade "$R"
    stop_host "$v1"; wait "$v1" 2>/dev/null
    kill -9 "$v0"; wait "$v0" 2>/dev/null
    printf 'written by version 3' | dd of="$R" bs=1 seek=$((META + 8192)) conv=notrunc status=none
    expect "upgrade of a pool version-3 QEMUs made and left" 0 "is now format version 4" "$TOOL" upgrade "$R"
    start_host "$R" 1; h1=$PID
    wait_joined "$R" 1 "$h1" 2 && ok "a version-4 QEMU joins host 1 with generation 1 + 1" \
        || bad "a version-4 QEMU joins the upgraded pool" "$(cat "$D/qemu-1.log")"
    out=$(timeout 30 "$CXLPOD_V3_QEMU" $(qemu_args "$R" 0) 2>&1); rc=$?
    [ $rc = 1 ] && grep -q "has format version 4, this QEMU supports version 3 only" <<<"$out" \
        && ok "a version-3 QEMU is refused by the pod of version 4" || bad "a version-3 QEMU is refused" "exit $rc: $out"
    stop_host "$h1"; wait "$h1" 2>/dev/null
    [ "$(dd if="$R" bs=1 skip=$((META + 8192)) count=20 status=none)" = "written by version 3" ] \
        && ok "the data version 3 wrote is kept" || bad "the data version 3 wrote is kept"
    expect "check: the upgraded pool (host 0 marked failed by the join)" 0 "note: host 0 \(generation 1\) failed" "$TOOL" check "$R"
else
    n=$((n + 1)); echo "ok $n - # SKIP pools of real version-3 QEMUs: set CXLPOD_V3_QEMU to a QEMU of format version 3"
fi

finish

#!/usr/bin/env bash
# Unit tests of cxlpod-pool on pool files it makes itself (no QEMU; the
# qtest tests/qtest/pool-tool.sh does the same against QEMU's pools).
# A live host is faked by a process holding the host's OFD liveness lock
# (python3 fcntl), a starting QEMU by a process holding the pool's flock.
#
#   pool-tool.sh BUILD/host-tools/cxlpod-pool
set -uo pipefail
TOOL=${1:?usage: pool-tool.sh CXLPOD-POOL}
D=$(mktemp -d "${TMPDIR:-/tmp}/cxlpod-pool-unit.XXXXXX")
HOLDERS=()
cleanup() {
    local p
    for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$D"
}
trap cleanup EXIT
fails=0; n=0
ok()   { n=$((n + 1)); echo "ok $n - $1"; }
bad()  { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -z "${2:-}" ] || echo "# $2"; }
# expect NAME RC PATTERN CMD...: CMD exits RC and its output matches PATTERN
expect() {
    local name=$1 want=$2 pat=$3 out rc; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" != "$want" ]; then bad "$name" "exit $rc, wanted $want: $out"
    elif [ -n "$pat" ] && ! grep -qE -- "$pat" <<<"$out"; then bad "$name" "no /$pat/ in: $out"
    else ok "$name"; fi
}
META=$((0x200000)); MIB=$((1 << 20))
# format 4's tail of a 256 MiB pool of 4 hosts (cxlpool_layout(); pinned
# by the unit test pool-format): host table, extended statistics, undo
# slots, lock turns (2 words each), snoop filter header and entries
HT=$((META + 256 * MIB)); XS=$((HT + 0x1000)); UNDO=$((HT + 0x2000))
TURNS=$((HT + 0x12000)); SFH=$((HT + 0x32000)); SFE=$((HT + 0x33000))
TAIL=$((2 * MIB)); SIZE4=$((HT + TAIL))
hex() { printf '0x%x' "$1"; }
V3POOL=$(dirname "$0")/v3pool.py
poke() {  # poke FILE OFFSET HEXBYTES: write raw bytes
    printf "$(sed 's/../\\x&/g' <<<"$3")" | dd of="$1" bs=1 seek=$(($2)) conv=notrunc status=none
}
json() { "$TOOL" inspect --json "$1" | jq -r "$2"; }
hold_host() {  # hold_host POOL HOST: a fake live QEMU (OFD lock on its byte)
    python3 - "$1" "$2" <<'PY' &
import fcntl, os, struct, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
            struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0x100000 + int(sys.argv[2]), 1, 0))
open(sys.argv[1] + ".held", "w").close()
time.sleep(300)
PY
    HOLDERS+=($!)
    for _ in $(seq 100); do [ -e "$1.held" ] && break; sleep 0.05; done
    rm -f "$1.held"
}
release_all() {
    local p
    for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    HOLDERS=()
}

P=$D/a.pool
# create
expect "create" 0 "created pool" "$TOOL" create --size 256M --coherent-size 64M --max-hosts 4 --mode 0640 "$P"
[ "$(stat -c %s "$P")" = $SIZE4 ] && ok "create: file size (head, data, tail)" || bad "create: file size" "$(stat -c %s "$P")"
[ "$(stat -c %a "$P")" = 640 ] && ok "create: mode" || bad "create: mode" "$(stat -c %a "$P")"
[ "$(head -c 8 "$P" | tr -d '\0')" = CXLPOOL ] && ok "create: magic" || bad "create: magic"
expect "create: refuses an existing pool" 1 "refusing to overwrite" "$TOOL" create --size 256M "$P"
expect "create: size not a multiple of 256M" 2 "256 MiB" "$TOOL" create --size 100M "$D/b.pool"
expect "create: coherent larger than size" 2 "larger than size" "$TOOL" create --size 256M --coherent-size 512M "$D/b.pool"
expect "create: max-hosts 257" 2 "max-hosts is not in \[1, 256\]" "$TOOL" create --size 256M --max-hosts 257 "$D/b.pool"
expect "create: mode without owner write" 2 "mode" "$TOOL" create --size 256M --mode 0400 "$D/b.pool"
[ ! -e "$D/b.pool" ] && ok "create: a refused create leaves no file" || bad "create: a refused create leaves no file"
if [ "$(id -u)" = 0 ]; then
    expect "create: owner" 0 "created" "$TOOL" create --size 256M --owner 65534:65534 "$D/o.pool"
    [ "$(stat -c %u:%g "$D/o.pool")" = 65534:65534 ] && ok "create: owner set" || bad "create: owner set"
fi

# inspect
[ "$(json "$P" '.size, .coherent_size, .max_hosts, .line_size, .version' | tr '\n' ' ')" = "268435456 67108864 4 64 4 " ] \
    && ok "inspect --json: geometry" || bad "inspect --json: geometry" "$("$TOOL" inspect --json "$P")"
[ "$(json "$P" '[.hosts[] | .status] | join(",")')" = "free,free,free,free" ] \
    && ok "inspect --json: four free hosts" || bad "inspect --json: four free hosts"
[ "$(json "$P" '[.tail_offset, .tail_size, .layout.hosts, .layout.xstats, .layout.undo, .layout.turns, .layout.turn_words, .layout.sf_header, .layout.sf_entries] | map(tostring) | join(" ")')" \
    = "$HT $TAIL $HT $XS $UNDO $TURNS 2 $SFH $SFE" ] \
    && ok "inspect --json: the tail's layout" || bad "inspect --json: the tail's layout" "$(json "$P" '.layout')"
expect "inspect: text" 0 "max-hosts 4" "$TOOL" inspect "$P"
expect "check: a new pool is ok" 0 ": ok \(size 268435456" "$TOOL" check "$P"

# a host that died while live (state live, generation 3, lock free)
cp --sparse=always "$P" "$D/dead.pool"
poke "$D/dead.pool" $((HT + 128)) 01000000d2040000""0300000000000000
[ "$(json "$D/dead.pool" '.hosts[1] | "\(.state) \(.status) \(.locked) \(.generation) \(.pid)"')" = "live failed false 3 1234" ] \
    && ok "inspect: a dead live host shows failed" || bad "inspect: a dead live host shows failed" "$(json "$D/dead.pool" '.hosts[1]')"
expect "check: a dead live host is a note, not a problem" 0 "host 1 \(pid 1234, generation 3\) died without leaving" "$TOOL" check "$D/dead.pool"
# ... while its QEMU still lives (lock held): reset-host and wipe refuse
hold_host "$D/dead.pool" 1
[ "$(json "$D/dead.pool" '.hosts[1].status')" = live ] && ok "inspect: held lock = live" || bad "inspect: held lock = live"
before=$(sha256sum <"$D/dead.pool")
expect "reset-host: refuses a live host" 1 "host 1 .* is live \(pid 1234" "$TOOL" reset-host 1 "$D/dead.pool"
expect "wipe: refuses while a host is live" 1 "live hosts: 1 \(pid 1234\)" "$TOOL" wipe "$D/dead.pool"
[ "$before" = "$(sha256sum <"$D/dead.pool")" ] && ok "refusals leave the file unchanged" || bad "refusals leave the file unchanged"
release_all
expect "reset-host: a dead host" 0 "was live, now free \(generation 3 kept: its next join is generation 4\)" "$TOOL" reset-host 1 "$D/dead.pool"
[ "$(json "$D/dead.pool" '.hosts[1] | "\(.state) \(.generation) \(.pid)"')" = "free 3 0" ] \
    && ok "reset-host: slot free, generation kept" || bad "reset-host: slot free, generation kept" "$(json "$D/dead.pool" '.hosts[1]')"
expect "reset-host: out of range" 2 "max-hosts-1=3" "$TOOL" reset-host 4 "$D/dead.pool"

# reset-host and wipe take the pool's flock: they wait for a starting QEMU.
# A holder takes it and says so; reset-host started then must be seen
# blocked on it in /proc/locks (a "->" request on the pool's inode) with
# the file unchanged, and end once the holder lets go.
blocked_on() {  # blocked_on PID FILE: PID waits for a lock on FILE
    local ino
    ino=$(stat -c %i "$2")
    grep -qE "^[0-9]+: -> FLOCK +ADVISORY +WRITE +$1 [0-9a-f:]+:$ino " \
        /proc/locks
}
rm -f "$D/flock.held" "$D/flock.go"
flock "$D/dead.pool" sh -c \
    'touch "$1.held"; while [ ! -e "$1.go" ]; do sleep 0.05; done' \
    sh "$D/flock" & fl=$!
for _ in $(seq 200); do [ -e "$D/flock.held" ] && break; sleep 0.05; done
before=$(sha256sum <"$D/dead.pool")
"$TOOL" reset-host 1 "$D/dead.pool" >/dev/null 2>&1 & rh=$!
for _ in $(seq 200); do
    blocked_on "$rh" "$D/dead.pool" && break
    kill -0 "$rh" 2>/dev/null || break
    sleep 0.05
done
if blocked_on "$rh" "$D/dead.pool" &&
   [ "$before" = "$(sha256sum <"$D/dead.pool")" ]; then
    ok "reset-host waits for the pool's flock"
else
    bad "reset-host waits for the pool's flock" \
        "not seen blocked on it in /proc/locks: $(cat /proc/locks)"
fi
touch "$D/flock.go"
wait $fl
if wait $rh; then
    ok "reset-host goes on once the flock is free"
else
    bad "reset-host goes on once the flock is free" "it exited $? after the flock was released"
fi

# wipe: data zeroed, line locks and undo slots cleared, host table kept
poke "$D/dead.pool" $((META + 12345)) deadbeef
poke "$D/dead.pool" $((0x10000 + 8 * 7)) 0300000000008080     # lock word 7: host 1 (bits 55..62), gen 3
expect "check: a dead host's line lock is a note" 0 "1 line locks and 0 unfinished line writes belong to dead hosts" "$TOOL" check "$D/dead.pool"
hold_host "$D/dead.pool" 3
expect "wipe: refuses while host 3 is live" 1 "live hosts: 3" "$TOOL" wipe "$D/dead.pool"
release_all
expect "wipe: no live host" 0 "268435456 bytes of data zeroed" "$TOOL" wipe "$D/dead.pool"
[ "$(dd if="$D/dead.pool" bs=1 skip=$((META + 12345)) count=4 status=none | od -An -tx1 | tr -d ' ')" = 00000000 ] \
    && ok "wipe: data is zero" || bad "wipe: data is zero"
[ "$(json "$D/dead.pool" '.line_locks_held, .hosts[1].generation' | tr '\n' ' ')" = "0 3 " ] \
    && ok "wipe: locks cleared, generations kept" || bad "wipe: locks cleared, generations kept"
[ "$(stat -c %s "$D/dead.pool")" = $SIZE4 ] && ok "wipe: size kept" || bad "wipe: size kept"

# check: every broken invariant is reported with a recovery
corrupt() {  # [BASE=POOL] corrupt NAME PATTERN OFFSET HEX (a copy of $P or BASE)
    cp --sparse=always "${BASE:-$P}" "$D/c.pool"; poke "$D/c.pool" "$3" "$4"
    local out rc
    out=$("$TOOL" check "$D/c.pool" 2>&1); rc=$?
    if [ $rc = 1 ] && grep -qE -- "$2" <<<"$out" && grep -q "recovery: " <<<"$out"; then ok "check: $1"
    else bad "check: $1" "exit $rc: $out"; fi
}
corrupt "bad magic" "bad magic" 0 58585858
corrupt "future version" "format version 5, this QEMU supports version 4 only" 8 05000000
corrupt "version 3 names the upgrade" "format version 3, .*upgrade it in place with 'cxlpod-pool upgrade" 8 03000000
corrupt "checksum" "corrupt header \(checksum mismatch\)" $((0x20)) 00000008
corrupt "state 7" "host 2 has state 7" $((HT + 256)) 07000000
corrupt "live with generation 0" "host 0 is live but has generation 0" $((HT)) 01000000
corrupt "left without leave time" "host 3 has left but has no leave time" $((HT + 384)) 030000000100000001
corrupt "a byte after the host table" "is not zero: the space after the host table \(byte $(hex $((HT + 9 * 128 + 8))) is 0x01\)" $((HT + 9 * 128 + 8)) 01
corrupt "lock word without held bit" "line lock word 5 is 0x0000000000000001" $((0x10000 + 40)) 01
corrupt "lock word of host 20" "line lock word 6 is 0x8a00000000000001" $((0x10000 + 48)) 010000000000008a
corrupt "undo slot of another host" "undo slot 0 is armed with 0x8080000000000001" $UNDO 0100000000008080
corrupt "undo slot of its host, offset beyond the data" "undo slot 129 is armed with 0x8000000000000001 \(offset 0x10000000\)" $((UNDO + 129 * 128)) 0100000000000080""00000010
corrupt "reserved header bytes" "is not zero: the rest of the header page \(byte 0x100 is 0x2a\)" $((0x100)) 2a
corrupt "liveness lock bytes written" "is not zero: the liveness lock bytes .*\(byte 0x100003 is 0x01\)" $((0x100003)) 01
# a pool a timed-mode host used: the device writes the page versions, the
# extended statistics and the snoop filter (header: magic "3SFSNOOP", ways
# 2; entry w of set s at SFE + (s * ways + w) * 16: word 0 valid, tag,
# age, owner + 1 in bits 0..8; word 1 the holders); check takes them
# as data, and still reports a byte in the gaps between them
T=$D/timed.pool
cp --sparse=always "$P" "$T"
poke "$T" $((0xa0000 + 8 * 77)) 0500000000000000                  # page version of lock 77
poke "$T" $((XS + (32 * 1 + 1) * 8)) 0500000000000000              # host 1: misses
poke "$T" $((XS + (32 * 3 + 7) * 8)) 00e1f50500000000              # host 3: charged ns
poke "$T" $SFH 335346534e4f4f500200000000000000                    # filter header
poke "$T" $((SFE + (5 * 2 + 1) * 16)) 0200000000000080""0200000000000000  # set 5 way 1: host 1 owns
poke "$T" $((SFE + (8191 * 2 + 1) * 16)) 00000000000000c0""0300000000000000  # the last entry
expect "check: a pool used in timed mode is ok" 0 ": ok \(size 268435456" "$TOOL" check "$T"
# the lock turns may be set in a live pod: entry 77 (2 words), hosts 0
# and 2 waiting, host 1 the last holder
cp --sparse=always "$P" "$D/c.pool"; poke "$D/c.pool" $((TURNS + 16 * 77)) 0500000000000000""0200000000000000
expect "check: a lock turn entry (hosts waiting) is ok" 0 ": ok \(size 268435456" "$TOOL" check "$D/c.pool"
corrupt "a byte after the extended statistics" "is not zero: the space after the extended statistics \(byte $(hex $((XS + 0x400))) is 0x01\)" $((XS + 0x400)) 01
corrupt "a byte after the page versions" "is not zero: the space after the page versions \(byte 0xc2000 is 0x01\)" $((0xc2000)) 01
corrupt "a byte after the liveness lock bytes" "is not zero: the liveness lock bytes .*\(byte 0x10fff8 is 0x01\)" $((0x10fff8)) 01
corrupt "a byte at the end of the head" "is not zero: the end of the head \(byte 0x1ffff0 is 0x01\)" $((0x1ffff0)) 01
corrupt "a byte after the snoop filter header" "is not zero: the rest of the snoop filter header page \(byte $(hex $((SFH + 16))) is 0x01\)" $((SFH + 16)) 01
corrupt "a byte after the largest snoop filter" "is not zero: the space after the snoop filter \(byte $(hex $((SFE + 0x1c0000))) is 0x01\)" $((SFE + 0x1c0000)) 01
corrupt "snoop filter entries but no magic" "snoop filter is not set up .* but entry 3 is 0x0000000000000001 0x0000000000000000" $((SFE + 48)) 01
corrupt "snoop filter magic" "snoop filter header has magic 0x0000000000000001" $SFH 01
BASE=$T corrupt "an entry beyond the filter's ways" "snoop filter has 2 ways \(16384 entries\) but entry 16384 \(byte $(hex $((SFE + 0x40000)))\) is 0x0000000000000000 0x0000000000000001" $((SFE + 0x40000 + 8)) 01
BASE=$T corrupt "snoop filter ways 15" "snoop filter has 15 ways \(allowed: 1\.\.14\)" $((SFH + 8)) 0f
BASE=$T corrupt "a filter entry owned by host 8 of 4" "snoop filter entry 12 .* is 0x8000000000000009 0x0000000000000000: not an entry of a host" $((SFE + 12 * 16)) 0900000000000080
BASE=$T corrupt "a filter entry held by host 5 of 4" "snoop filter entry 12 .* is 0x8000000000000000 0x0000000000000020" $((SFE + 12 * 16)) 0000000000000080""2000000000000000
BASE=$T corrupt "a filter entry not valid but not zero" "snoop filter entry 12 .* is 0x0000000000000000 0x0000000000000001" $((SFE + 12 * 16 + 8)) 01
BASE=$T corrupt "the magic of version 3's filter in the tail" "snoop filter header has magic 0x504f4f4e53465332" $SFH 32
# an area format version 3 used, left by an upgrade stopped before its
# last step: a note (no host reads it), which upgrade clears
cp --sparse=always "$P" "$D/c.pool"; poke "$D/c.pool" $((0x20000 + 128 * 5)) 0100000000000081
expect "check: a version-3 area not zero is a note" 0 "note: the undo slots of format version 3 \(0x20000\.\.0xa0000\) is not zero \(byte 0x20280 is 0x01\).*'cxlpod-pool upgrade" "$TOOL" check "$D/c.pool"
# headers with a valid checksum (crc32c of [0, 0x5c) at 0x5c)
rehead() {  # rehead POOL OFFSET STRUCT VALUE: set a header field, fix the crc
    python3 - "$@" <<'PY'
import struct, sys
f = open(sys.argv[1], "r+b")
h = bytearray(f.read(0x5c))
off, fmt = int(sys.argv[2], 0), sys.argv[3]
h[off:off + struct.calcsize(fmt)] = struct.pack(fmt, int(sys.argv[4], 0))
c = 0xffffffff
for b in h:
    c ^= b
    for _ in range(8):
        c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
f.seek(0)
f.write(h + struct.pack("<I", c ^ 0xffffffff))
PY
}
# coherent-size 512M in a 256M pool (no device makes that)
cp --sparse=always "$P" "$D/g.pool"; rehead "$D/g.pool" 0x20 "<Q" $((512 * MIB))
expect "check: an impossible geometry under a valid checksum" 1 "geometry is invalid: coherent-size is larger than size" "$TOOL" check "$D/g.pool"
expect "inspect: an impossible geometry is shown" 0 "coherent-size 536870912" "$TOOL" inspect "$D/g.pool"
expect "wipe: refuses an impossible geometry" 1 "impossible geometry" "$TOOL" wipe "$D/g.pool"
cp --sparse=always "$P" "$D/g.pool"; rehead "$D/g.pool" 0x2c "<I" 300
expect "check: max-hosts 300 is another layout" 1 "unsupported layout .*max-hosts 300" "$TOOL" check "$D/g.pool"
cp --sparse=always "$P" "$D/g.pool"; rehead "$D/g.pool" 0x48 "<Q" $((4 * MIB))
expect "check: a tail size the layout does not give" 1 "unsupported layout .*tail 0x10200000\+0x400000" "$TOOL" check "$D/g.pool"
cp --sparse=always "$P" "$D/c.pool"; truncate -s $((META + 128 * MIB)) "$D/c.pool"
expect "check: truncated" 1 "bytes long, its header says $SIZE4" "$TOOL" check "$D/c.pool"
cp --sparse=always "$P" "$D/c.pool"; truncate -s $HT "$D/c.pool"
expect "check: the tail cut off" 1 "is $HT bytes long, its header says $SIZE4" "$TOOL" check "$D/c.pool"
printf 'hello\n' >"$D/t.pool"
expect "check: not a pool" 1 "is not a cxlpod pool .* smaller than its metadata" "$TOOL" check "$D/t.pool"
truncate -s $((META + 256 * MIB)) "$D/nh.pool"
expect "check: no header (torn create)" 1 "recovery: no host ever joined" "$TOOL" check "$D/nh.pool"
expect "create: rewrites a headerless pool in place" 0 "had no header" "$TOOL" create --size 256M --max-hosts 4 "$D/nh.pool"
expect "check: the remade pool is ok" 0 ": ok" "$TOOL" check "$D/nh.pool"
: >"$D/empty.pool"
expect "check: an empty file is ok (the next start creates the pool)" 0 "is empty: the next host start creates" "$TOOL" check "$D/empty.pool"
expect "inspect: an empty file is not a pool yet" 1 "is empty: not a pool yet" "$TOOL" inspect "$D/empty.pool"
expect "inspect: missing file" 2 "cannot open pool" "$TOOL" inspect "$D/missing.pool"
expect "unknown command" 2 "unknown command" "$TOOL" frobnicate
[ -d "$D" ] && expect "check: a directory" 1 "not a regular file" "$TOOL" check "$D"

echo "1..$n"
[ "$fails" = 0 ]

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
. "$(dirname "$0")/tap.bash"
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
# expectj: expect on the output joined into one line (a pattern across lines)
expectj() {
    local name=$1 want=$2 pat=$3 out rc; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" != "$want" ]; then bad "$name" "exit $rc, wanted $want: $out"
    elif ! tr '\n' ' ' <<<"$out" | grep -qE -- "$pat"; then bad "$name" "no /$pat/ in: $out"
    else ok "$name"; fi
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
# create allocated every block: a sparse copy from here on, so that the
# many copies below read holes, not 260 MiB of zeros each
cp --sparse=always "$P" "$P.sparse" && mv "$P.sparse" "$P"

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
# 2, entries made 7; entry w of set s at SFE + (s * ways + w) * 16: word 0
# valid, tag, age, epoch in bits 9..32, owner + 1 in bits 0..8; word 1 the
# holders); check takes them as data, and still reports a byte in the
# gaps between them
T=$D/timed.pool
cp --sparse=always "$P" "$T"
poke "$T" $((0xa0000 + 8 * 77)) 0500000000000000                  # page version of lock 77
poke "$T" $((XS + (32 * 1 + 1) * 8)) 0500000000000000              # host 1: misses
poke "$T" $((XS + (32 * 3 + 7) * 8)) 00e1f50500000000              # host 3: charged ns
poke "$T" $SFH 335346534e4f4f50""0200000000000000""0700000000000000  # filter header
poke "$T" $((SFE + (5 * 2 + 1) * 16)) 02fcffff01000080""0200000000000000  # set 5 way 1: host 1 owns, epoch 0xfffffe
poke "$T" $((SFE + (8191 * 2 + 1) * 16)) 00000000000000c0""0300000000000000  # the last entry
expect "check: a pool used in timed mode is ok" 0 ": ok \(size 268435456" "$TOOL" check "$T"
# the lock turns may be set in a live pod: entry 77 (2 words), hosts 0
# and 2 waiting, host 1 the last holder
cp --sparse=always "$P" "$D/c.pool"; poke "$D/c.pool" $((TURNS + 16 * 77)) 0500000000000000""0200000000000000
expect "check: a lock turn entry (hosts waiting) is ok" 0 ": ok \(size 268435456" "$TOOL" check "$D/c.pool"
corrupt "a lock turn naming host 4 of 4 waiting" "lock turn entry 77 \(byte $(hex $((TURNS + 16 * 77)))\) names a host beyond max-hosts 4" $((TURNS + 16 * 77)) 10
corrupt "a lock turn naming host 4 of 4 the last holder" "lock turn entry 9 .* names a host beyond max-hosts 4" $((TURNS + 16 * 9 + 8)) 05
corrupt "a byte after the extended statistics" "is not zero: the space after the extended statistics \(byte $(hex $((XS + 0x400))) is 0x01\)" $((XS + 0x400)) 01
corrupt "a byte after the page versions" "is not zero: the space after the page versions \(byte 0xc2000 is 0x01\)" $((0xc2000)) 01
corrupt "a byte after the liveness lock bytes" "is not zero: the liveness lock bytes .*\(byte 0x10fff8 is 0x01\)" $((0x10fff8)) 01
corrupt "a byte at the end of the head" "is not zero: the end of the head \(byte 0x1ffff0 is 0x01\)" $((0x1ffff0)) 01
corrupt "a byte after the snoop filter header" "is not zero: the rest of the snoop filter header page \(byte $(hex $((SFH + 24))) is 0x01\)" $((SFH + 24)) 01
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
expect "upgrade clears a version-3 area of a version-4 pool" 0 "cleared the areas version 3 used" "$TOOL" upgrade "$D/c.pool"
expect "check: then no note" 0 ": ok \(.*\), 0 notes" "$TOOL" check "$D/c.pool"
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

# upgrade: a pool of format version 3 (tests/unit/v3pool.py: hosts 0
# left, 1 died live, 2 failed, with statistics, data, a page version, a
# lock turn and a version-3 snoop filter) converted in place
V3SIZE=$((META + 256 * MIB))
v3pool() { python3 "$V3POOL" "$1" $((256 * MIB)) $((64 * MIB)) 4 ${2:-}; }
# the generator's header is version 3's: for the geometry of the unit
# test pool-format, the crc version 3's code gave (0x0b12ea37)
[ "$(PYTHONDONTWRITEBYTECODE=1 python3 -c 'import sys, struct; sys.path.insert(0, sys.argv[1]); import v3pool
print(hex(struct.unpack("<I", v3pool.header(256 << 20, 64 << 20, 4)[0x48:0x4c])[0]))' "$(dirname "$V3POOL")")" = 0xb12ea37 ] \
    && ok "v3pool.py: the header version 3 wrote" || bad "v3pool.py: the header version 3 wrote"
U=$D/v3.pool
v3pool "$U" --populated
cp --sparse=always "$U" "$D/v3-orig.pool"
bytes() { dd if="$1" bs=1 skip=$(($2)) count="$3" status=none | od -An -tx1 | tr -d ' \n'; }
zeros() { [ -z "$(dd if="$1" bs=4096 skip=$(($2 / 4096)) count=$((($3 - $2) / 4096)) status=none | tr -d '\0' | head -c 1)" ]; }
expectj "check: a version-3 pool names the upgrade, which can run now" 1 \
    "format version 3, .*'cxlpod-pool upgrade $U'.*note: no host is live and no host left a write unfinished: 'cxlpod-pool upgrade $U' can upgrade it now" \
    "$TOOL" check "$U"
expect "inspect: a version-3 pool names the upgrade" 1 "format version 3, .*'cxlpod-pool upgrade $U'" "$TOOL" inspect "$U"
before=$(sha256sum <"$U")
expectj "upgrade --dry-run: what it would do" 0 "would extend the file from $V3SIZE to $SIZE4 .*would write the version-4 header" \
    "$TOOL" upgrade --dry-run "$U"
[ "$before" = "$(sha256sum <"$U")" ] && ok "upgrade --dry-run writes nothing" || bad "upgrade --dry-run writes nothing"
# refusals, each leaving the file as it was: a live host (its liveness
# byte held), a held line lock, an armed undo slot (version-3 tags: host
# in bits 56..62), a version-3 header no cxlpod wrote, another size
hold_host "$U" 2
expect "upgrade: refuses while a host is live" 1 "has live hosts: 2 \(pid 333\); stop every QEMU of the pod" "$TOOL" upgrade "$U"
release_all
hold_host "$U" 200
expect "upgrade: refuses while a host of any id is live" 1 "has live hosts: 200; stop every QEMU" "$TOOL" upgrade "$U"
release_all
[ "$before" = "$(sha256sum <"$U")" ] && ok "upgrade: refused while live, file unchanged" || bad "upgrade: refused while live, file unchanged"
refused() {  # refused NAME PATTERN OFFSET HEX [SIZE]: a patched copy of $U
    cp --sparse=always "$U" "$D/r.pool"; poke "$D/r.pool" "$3" "$4"
    [ -z "${5:-}" ] || truncate -s "$5" "$D/r.pool"
    local sum out rc
    sum=$(sha256sum <"$D/r.pool")
    out=$("$TOOL" upgrade "$D/r.pool" 2>&1); rc=$?
    if [ $rc = 1 ] && grep -qE -- "$2" <<<"$out" && [ "$sum" = "$(sha256sum <"$D/r.pool")" ]; then ok "upgrade: refuses $1, file unchanged"
    else bad "upgrade: refuses $1, file unchanged" "exit $rc: $out"; fi
}
refused "a held line lock" "1 line locks held and 0 undo slots armed, of hosts 1: .*'cxlpod-pool check .*' of the cxlpod that made the pool" \
    $((0x10000 + 8 * 9)) 0200000000000081
expect "check: a version-3 pool with a held lock notes the upgrade's refusal" 1 \
    "note: 'cxlpod-pool upgrade' refuses it now: .* has 1 line locks held" "$TOOL" check "$D/r.pool"
refused "an armed undo slot" "0 line locks held and 1 undo slots armed, of hosts 2:" \
    $((0x20000 + ((2 * 2 + 1) * 64 + 3) * 128)) 0500000000000082
refused "a corrupt version-3 header" "format version 3 but its header is corrupt \(checksum mismatch\)" $((0x20)) 00000008
refused "another file size" "format version 3 but its file size is neither" $((META)) 00 $((V3SIZE + MIB))
refused "version 2" "format version 2, .*upgrade converts pools of format version 3 only" 8 02000000
refused "a file that is not a pool" "bad magic.*upgrade converts pools of format version 3 only" 0 58
expect "upgrade: a missing file" 2 "cannot open pool" "$TOOL" upgrade "$D/missing.pool"

expectj "upgrade: a version-3 pool" 0 "extended the file from $V3SIZE to $SIZE4 .*wrote the tail and synced it.*wrote the version-4 header.*cleared the areas version 3 used.*is now format version 4" \
    "$TOOL" upgrade "$U"
# what v3pool.py wrote, read back in version 4
upgraded() {  # upgraded NAME POOL: the checks of an upgraded copy of v3-orig.pool
    local name=$1 u=$2 want got
    [ "$(stat -c %s "$u")" = $SIZE4 ] && ok "$name: file size of version 4" || bad "$name: file size" "$(stat -c %s "$u")"
    # (the creation time at 0x40 in both versions; jq cannot hold 64 bits)
    got="$(json "$u" '"\(.version) \(.size) \(.coherent_size) \(.max_hosts)"') $(bytes "$u" 0x40 8)"
    [ "$got" = "4 268435456 67108864 4 $(bytes "$D/v3-orig.pool" 0x40 8)" ] && ok "$name: version 4, geometry and creation time kept" || bad "$name: header" "$got"
    want="left 3 111 3 1700000001000000000 1700000002000000000
live 1 222 2 1700000003000000000 0
failed 2 333 5 1700000004000000000 0
free 0 0 0 0 0"
    got=$(json "$u" '.hosts[] | "\(.state) \(.state as $s | ["free","live","failed","left"] | index($s)) \(.pid) \(.generation) \(.join_time_ns) \(.leave_time_ns)"')
    [ "$got" = "$want" ] && ok "$name: host table kept (states, pids, generations, times)" || bad "$name: host table kept" "$got"
    got=$(json "$u" '[.hosts[] | .stats | .writeback_ops, .resets, .hits, .retries] | map(tostring) | join(" ")')
    [ "$got" = "1000 1011 500 508 2000 2011 1000 1008 3000 3011 1500 1508 0 0 0 0" ] \
        && ok "$name: statistics and extended statistics kept" || bad "$name: statistics kept" "$got"
    [ "$(bytes "$u" $META 14)$(bytes "$u" $((META + 0x1234567)) 4)$(bytes "$u" $((META + 0xfffffc0)) 9)" \
      = "$(printf 'cxlpod v3 data' | od -An -tx1 | tr -d ' \n')deadbeef$(printf 'last line' | od -An -tx1 | tr -d ' \n')" ] \
        && ok "$name: data kept" || bad "$name: data kept"
    [ "$(bytes "$u" $((0xa0000 + 8 * 77)) 8)" = 0600000000000000 ] && ok "$name: page versions kept" || bad "$name: page versions kept"
    zeros "$u" 0x1000 0x2000 && zeros "$u" 0x20000 0xa0000 && zeros "$u" 0xb0000 0xc2000 && zeros "$u" 0x110000 0x1f1000 \
        && ok "$name: the version-3 areas of the head are zero" || bad "$name: the version-3 areas of the head are zero"
    [ "$(bytes "$u" $SFH 16)$(bytes "$u" $TURNS 16)" = "$(printf '0%.0s' $(seq 64))" ] \
        && ok "$name: snoop filter and turns start empty" || bad "$name: snoop filter and turns start empty"
    expect "$name: check passes" 0 ": ok \(size 268435456, coherent-size 67108864, max-hosts 4\), 2 notes" "$TOOL" check "$u"
}
upgraded "upgrade" "$U"
before=$(sha256sum <"$U")
expect "upgrade: again, already version 4" 0 "is already format version 4: nothing to upgrade" "$TOOL" upgrade "$U"
[ "$before" = "$(sha256sum <"$U")" ] && ok "upgrade: again, file unchanged" || bad "upgrade: again, file unchanged"
v3pool "$D/e.pool"
expect "upgrade: an empty version-3 pool" 0 "is now format version 4" "$TOOL" upgrade "$D/e.pool"
expect "check: the upgraded empty pool is ok, 0 notes" 0 ": ok .*, 0 notes" "$TOOL" check "$D/e.pool"
[ "$(json "$D/e.pool" '[.hosts[] | .generation] | add')" = 0 ] && ok "upgrade: an empty pool's table stays empty" || bad "upgrade: an empty pool's table stays empty"

# an upgrade killed (SIGKILL, injected by strace at a system call) leaves
# a pool of version 3 or of version 4, and upgrade run again finishes it
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
    killed() {  # killed POOL SYSCALL N: SIGKILL at the Nth SYSCALL
        # (under a shell of its own, whose "Killed" goes with the output)
        bash -c 'strace "$@"; exit $?' strace -f -o /dev/null -e trace="$2" \
            -e inject="$2:signal=SIGKILL:when=$3" "$TOOL" upgrade "$1" >/dev/null 2>&1
    }
    K=$D/k.pool
    # before the file is extended: unchanged
    cp --sparse=always "$D/v3-orig.pool" "$K"; before=$(sha256sum <"$K")
    killed "$K" fallocate 1; rc=$?
    [ $rc = 137 ] && [ "$before" = "$(sha256sum <"$K")" ] && ok "upgrade killed before extending: the version-3 pool unchanged" \
        || bad "upgrade killed before extending" "exit $rc"
    # after the tail is written (at its fsync): a version-3 pool, longer
    # by the tail, its head unchanged; check names the upgrade
    head=$(head -c $META "$K" | sha256sum)
    killed "$K" fsync 1; rc=$?
    [ $rc = 137 ] && [ "$head" = "$(head -c $META "$K" | sha256sum)" ] && [ "$(stat -c %s "$K")" = $SIZE4 ] \
        && ok "upgrade killed after the tail: head unchanged (version 3), file of version 4's size" \
        || bad "upgrade killed after the tail" "exit $rc, size $(stat -c %s "$K")"
    expect "check: a version-3 pool left by a killed upgrade names the upgrade" 1 "format version 3, .*'cxlpod-pool upgrade" "$TOOL" check "$K"
    expect "upgrade --dry-run after it was killed after the tail" 0 "the file is $SIZE4 bytes already .*would write its tail again" \
        "$TOOL" upgrade --dry-run "$K"
    expectj "upgrade again after it was killed after the tail" 0 "the file is $SIZE4 bytes already .*is now format version 4" "$TOOL" upgrade "$K"
    upgraded "upgrade killed after the tail, run again" "$K"
    # after the header (at the fsync that follows it): version 4, the
    # version-3 areas not cleared yet: check passes with notes
    cp --sparse=always "$D/v3-orig.pool" "$K"
    killed "$K" fsync 2; rc=$?
    [ $rc = 137 ] && [ "$(json "$K" .version)" = 4 ] && ok "upgrade killed after the header: a version-4 pool" \
        || bad "upgrade killed after the header" "exit $rc: $("$TOOL" inspect "$K" 2>&1)"
    expectj "check: it passes, noting the version-3 areas" 0 "note: the host table of format version 3 .*: ok \(size 268435456, coherent-size 67108864, max-hosts 4\), 5 notes" "$TOOL" check "$K"
    expectj "upgrade again clears them" 0 "already format version 4.*cleared the areas version 3 used" "$TOOL" upgrade "$K"
    upgraded "upgrade killed after the header, run again" "$K"
else
    n=$((n + 1)); echo "ok $n - # SKIP upgrade killed at a system call: no usable strace"
fi

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

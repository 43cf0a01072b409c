#!/bin/sh
# Runs the guest tools as several processes on one host against a loopback
# file (all coherent) and a model file (software model of the non-coherent
# area), and checks their exit codes and verdict lines.
# usage: tools-loopback.sh BUILD_GUEST_TOOLS_DIR
set -u
B=${1:?usage: $0 guest-tools-build-dir}
W=$(mktemp -d /tmp/cxlpod-tools-XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
ok()   { printf 'ok   %s\n' "$*"; }
bad()  { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }

# run N TOOL ARGS...: N processes (hosts 0..N-1); output in $W/out.<h>,
# exit codes in $W/rc.<h>
run() {
	n=$1; shift
	h=1
	while [ $h -lt $n ]; do
		( CXLPOD_HOST_ID=$h CXLPOD_NHOSTS=$n timeout 120 "$B/$@" >"$W/out.$h" 2>&1; echo $? >"$W/rc.$h" ) &
		h=$((h + 1))
	done
	CXLPOD_HOST_ID=0 CXLPOD_NHOSTS=$n timeout 120 "$B/$@" >"$W/out.0" 2>&1; echo $? >"$W/rc.0"
	wait
}
# expect N RC PATTERN NAME: every host exited RC and printed PATTERN
expect() {
	n=$1 rc=$2 pat=$3 name=$4
	h=0 good=1
	while [ $h -lt $n ]; do
		r=$(cat "$W/rc.$h")
		if [ "$r" != "$rc" ] || ! grep -q -- "$pat" "$W/out.$h"; then
			good=0
			echo "--- host $h rc=$r (want $rc), want /$pat/:"; tail -5 "$W/out.$h"
		fi
		h=$((h + 1))
	done
	[ $good = 1 ] && ok "$name" || bad "$name"
}

for backend in loopback model; do
	if [ $backend = model ]; then
		export CXLPOD_LOOPBACK="$W/pool-$backend:1M:32M:nc"
	else
		export CXLPOD_LOOPBACK="$W/pool-$backend:1M:32M"
	fi
	run 1 cxlpod-info --json
	expect 1 0 "\"backend\":\"$backend\"" "$backend info --json"
	run 1 cxlpod-bench --quick --json
	expect 1 0 '"noncoherent":{' "$backend bench --quick"
	# chases only: a latency per area, no bandwidth keys
	run 1 cxlpod-bench --size 1M --latency-only --min-time 0.01 --json
	expect 1 0 '"latency_only":true,.*"noncoherent":{"size":1048576,"lat_size":1048576,"lat_ns":[0-9.e+-]*,"lat_ratio":[0-9.e+-]*}' \
		"$backend bench --latency-only"
	for n in 2 4; do
		run $n cxlpod-litmus --method both
		expect $n 0 'mismatches: PASS' "$backend litmus $n hosts"
		run $n cxlpod-mq --messages 500
		expect $n 0 'mq: OK' "$backend mq $n hosts"
		run $n cxlpod-allreduce --sizes 4K,64K --rounds 2
		expect $n 0 'allreduce: OK exact sums' "$backend allreduce $n hosts"
	done
	# the experiment's allreduce (turns through the non-coherent area);
	# its slices need a one-CPU guest's tick: not here (--no-slices).  On
	# the model backend its hosts hung while a new handle's image and twin
	# were two unlocked copies of the pool (test_libcxlpod's
	# model-open-race)
	run 4 cxlpod-allreduce-exp --hosts-list 2,4 --sizes 4K,64K --no-slices --json
	expect 4 0 'host [0-3]/4: 8 experiments, exact sums, 0 disturbed' "$backend allreduce-exp 4 hosts"
	grep -q '"area":"noncoherent","n":4,"bytes":65536,"participant":true,"skipped":false,"wrong":0' "$W/out.3" \
		&& ok "$backend allreduce-exp JSON" || bad "$backend allreduce-exp JSON"
	run 3 cxlpod-contend --bytes 256K --seconds 1
	expect 3 0 'contend: host [0-2] .* 0 own lines wrong .* 0 lines wrong at the end: OK' "$backend contend 3 hosts"
	run 2 cxlpod-litmus --test atomic --threads 4 --atomic-ops 5000
	expect 2 0 'mismatches: PASS' "$backend litmus atomic, 4 threads per host"
	run 2 cxlpod-litmus --json --test mp
	expect 2 0 '"mismatches":0' "$backend litmus --json"
	run 2 cxlpod-crash --records 5000 --idle 5
	expect 2 0 'crash: ' "$backend crash (writer finishes)"
	grep -q 'verified 5000 intact, 0 torn, 0 missing' "$W/out.1" && ok "$backend crash reader counts" || bad "$backend crash reader counts"
done

# More hosts than the tools once allowed (32): the join and barriers of
# tool.c, litmus's lines (its sb ring ran into the atomic test's line past
# 39 hosts), the experiment's control lines (host 32's line was host 0's
# welcome, and its welcomes a 32-entry array)
export CXLPOD_LOOPBACK="$W/pool-many:1M:32M:nc"
run 40 cxlpod-litmus --iters 5 --atomic-ops 100
expect 40 0 'mismatches: PASS' "model litmus 40 hosts"
run 40 cxlpod-mq --messages 200
expect 40 0 'mq: OK' "model mq 40 hosts"
run 34 cxlpod-allreduce-exp --hosts-list 34 --sizes 4K --no-slices
expect 34 0 'exact sums, 0 disturbed' "model allreduce-exp 34 hosts"

# cxlpod-allreduce-exp --help states its real defaults: a run without
# --areas, --hosts-list and --sizes runs exactly the lists it names
"$B/cxlpod-allreduce-exp" --help >"$W/are-help" 2>&1
dflt() { sed -n "s/.*$1 LIST .*(default \([^)]*\)).*/\1/p" "$W/are-help"; }
uniq_of() { grep '^{' "$W/out.0" | jq -r "$1" | awk '!seen[$0]++' | paste -sd, -; }
export CXLPOD_LOOPBACK="$W/pool-loopback:1M:32M"
run 2 cxlpod-allreduce-exp --no-slices --json
expect 2 0 'exact sums, 0 disturbed' "allreduce-exp with its defaults"
want="$(dflt --areas) / $(dflt --hosts-list) / $(dflt --sizes)"
got="$(uniq_of .area) / $(uniq_of .n) / $(uniq_of '(.bytes / 1024 | tostring) + "K"')"
[ "$want" = "$got" ] && ok "allreduce-exp --help shows its defaults ($got)" \
	|| { bad "allreduce-exp --help shows its defaults: it says '$want', a run without options ran '$got'"; cat "$W/are-help"; }

# model only: missing coherence operations must be detected
export CXLPOD_LOOPBACK="$W/pool-model:1M:32M:nc"
run 2 cxlpod-allreduce --sizes 4K,64K --rounds 2 --no-flush
expect 2 3 'corruption detected' "model allreduce --no-flush detects corruption"
run 2 cxlpod-mq --messages 500 --no-flush
expect 2 3 'corruption detected' "model mq --no-flush detects corruption"
run 2 cxlpod-crash --records 2000 --no-flush --idle 3
[ "$(cat $W/rc.1)" = 3 ] && grep -q 'corruption detected' "$W/out.1" && ok "model crash --no-flush detected" || bad "model crash --no-flush detected"

# writer killed at CRASH-POINT: the survivor verifies every published record
CXLPOD_HOST_ID=1 CXLPOD_NHOSTS=2 timeout 60 "$B/cxlpod-crash" --idle 3 >"$W/r.out" 2>&1 &
rp=$!
CXLPOD_HOST_ID=0 CXLPOD_NHOSTS=2 "$B/cxlpod-crash" --delay-us 50 >"$W/w.out" 2>&1 &
wp=$!
i=0
while ! grep -q '^CRASH-POINT' "$W/w.out" && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $wp; wait $wp 2>/dev/null
wait $rp; rrc=$?
[ $rrc = 0 ] && grep -q 'OK every published record intact' "$W/r.out" && ok "model crash: writer killed, survivor OK" || { bad "model crash kill"; cat "$W/r.out"; }
CXLPOD_HOST_ID=1 CXLPOD_NHOSTS=2 "$B/cxlpod-crash" --role verify >"$W/v.out" 2>&1 && ok "model crash --role verify" || { bad "crash verify"; cat "$W/v.out"; }

# a single host is refused (usage error), not hung
export CXLPOD_LOOPBACK="$W/pool-loopback:1M:32M"
run 1 cxlpod-litmus
expect 1 1 'at least 2 hosts' "litmus refuses 1 host"

# cxlpod-poke and cxlpod-maprace: their own options through tool_parse
# (no common options), on plain files.  chk NAME RC PATTERN CMD...: CMD
# exits RC and its output matches PATTERN
chk() {
	name=$1 want=$2 pat=$3; shift 3
	out=$("$@" 2>&1); r=$?
	if [ "$r" = "$want" ] && printf '%s\n' "$out" | grep -qE -- "$pat"; then
		ok "$name"
	else
		bad "$name"; echo "--- rc=$r (want $want), want /$pat/:"; printf '%s\n' "$out" | tail -5
	fi
}
unset CXLPOD_LOOPBACK
D=$W/poke.dev
truncate -s 8M "$D"
chk "poke write" 0 '' "$B/cxlpod-poke" -d "$D" write 0x100010 hello
chk "poke read (options after the words)" 0 '^hello$' "$B/cxlpod-poke" read 0x100010 5 -d "$D"
chk "poke K suffix" 0 '' "$B/cxlpod-poke" -d "$D" write 4K hi
chk "poke read at 4K" 0 '^hi$' "$B/cxlpod-poke" -d "$D" read 4096 2
chk "poke wait (there)" 0 '' "$B/cxlpod-poke" -d "$D" wait 0x100010 hello 1
chk "poke wait times out" 2 'timed out waiting at 0x100010' "$B/cxlpod-poke" -d "$D" wait 0x100010 other 0.2
chk "poke -- then a string starting with -" 0 '' "$B/cxlpod-poke" -d "$D" -- write 2M -x-
chk "poke read it back" 0 '^-x-$' "$B/cxlpod-poke" -d "$D" read 2M 3
chk "poke --help" 0 'usage: cxlpod-poke' "$B/cxlpod-poke" --help
chk "poke missing STRING" 1 'usage: cxlpod-poke' "$B/cxlpod-poke" -d "$D" write 1M
chk "poke unknown command" 1 'usage: cxlpod-poke' "$B/cxlpod-poke" -d "$D" frob 0 x
chk "poke bad LEN" 1 'usage: cxlpod-poke' "$B/cxlpod-poke" -d "$D" read 0 zz
chk "poke extra word" 1 'usage: cxlpod-poke' "$B/cxlpod-poke" -d "$D" write 0 x y
chk "poke bad TIMEOUT_S" 1 "TIMEOUT_S 'soon' is not a number" "$B/cxlpod-poke" -d "$D" wait 0 x soon
chk "poke takes no common option" 1 'unknown option --json' "$B/cxlpod-poke" -d "$D" write 0 x --json
chk "poke -d needs an argument" 1 '-d needs an argument' "$B/cxlpod-poke" write 0 x -d
chk "poke missing device" 1 "open $W/missing" "$B/cxlpod-poke" -d "$W/missing" write 0 x

# a fake /sys/bus/pci/devices: the cxl-shm device (class 0x050210, BAR5
# magic "CXLP"), a register to read, and devices to toggle (one whose name
# needs JSON escaping)
S=$W/pci
mkdir -p "$S/0000:00:05.0" "$S/0000:00:1f.2" "$S/0000:00:09.0" "$S/a\"b"
echo 0x050210 >"$S/0000:00:05.0/class"
echo 0x010601 >"$S/0000:00:1f.2/class"
printf 'CXLP' >"$S/0000:00:05.0/resource5"
printf '\170\126\064\022' >"$S/0000:00:1f.2/resource5"        # 0x12345678
for d in 0000:00:09.0 'a"b'; do
	printf '\000\000\000\000\007\000' >"$S/$d/config"      # command register 7
done
chk "maprace on its own device" 0 '"ok":true' env CXLPOD_PCI_SYSFS="$S" \
	"$B/cxlpod-maprace" --seconds 0.3 --readers 2 --toggle 0000:00:09.0
printf '%s\n' "$out" | jq -e '.tool == "cxlpod-maprace" and .read == "0000:00:05.0:5" and
	.value == "0x504c5843" and .toggle == "0000:00:09.0" and .readers == 2 and
	.map_changes > 0 and .reads > 0 and .wrong == 0 and .last_wrong == "0x00000000" and
	.seconds >= 0.3' >/dev/null && ok "maprace JSON keys" || { bad "maprace JSON keys"; echo "$out"; }
[ "$(od -An -tx1 -j4 -N2 "$S/0000:00:09.0/config" | tr -d ' ')" = 0700 ] \
	&& ok "maprace leaves the command register as it was" || bad "maprace leaves the command register as it was"
chk "maprace --read, a toggled name with a quote" 0 '"ok":true' env CXLPOD_PCI_SYSFS="$S" \
	"$B/cxlpod-maprace" --seconds 0.1 --read 0000:00:1f.2:5 --toggle 'a"b'
printf '%s\n' "$out" | jq -e '.read == "0000:00:1f.2:5" and .value == "0x12345678" and
	.toggle == "a\"b" and .readers == 1' >/dev/null \
	&& ok "maprace JSON escapes the names" || { bad "maprace JSON escapes the names"; echo "$out"; }
# --min-changes / --min-reads: past --seconds until both are reached
chk "maprace --min-changes --min-reads" 0 '"ok":true' env CXLPOD_PCI_SYSFS="$S" \
	"$B/cxlpod-maprace" --seconds 0.01 --min-changes 3000 --min-reads 200000 --toggle 0000:00:09.0
printf '%s\n' "$out" | jq -e '.map_changes >= 3000 and .reads >= 200000' >/dev/null \
	&& ok "maprace runs until its minimum counts" || { bad "maprace runs until its minimum counts"; echo "$out"; }
chk "maprace --help" 0 'usage: cxlpod-maprace' "$B/cxlpod-maprace" --help
chk "maprace needs --toggle" 1 '--toggle BDF is required' "$B/cxlpod-maprace" --seconds 1
chk "maprace --readers 9" 1 '--readers must be 1..8' "$B/cxlpod-maprace" --readers 9 --toggle x
chk "maprace --readers x" 1 "--readers: 'x' is not a number" "$B/cxlpod-maprace" --readers x --toggle x
chk "maprace --seconds 0" 1 '--seconds > 0' "$B/cxlpod-maprace" --seconds 0 --toggle x
chk "maprace --read without BAR" 1 '--read BDF:BAR' "$B/cxlpod-maprace" --read 0000:00:1f.2 --toggle x
chk "maprace --read BAR 9" 1 '--read BDF:BAR' "$B/cxlpod-maprace" --read 0000:00:1f.2:9 --toggle x
chk "maprace takes no common option" 1 'unknown option --json' "$B/cxlpod-maprace" --json --toggle x
chk "maprace --toggle needs an argument" 1 '--toggle needs an argument' "$B/cxlpod-maprace" --toggle
mkdir -p "$W/nopci"
chk "maprace without a cxl-shm device" 2 'no cxl-shm device' env CXLPOD_PCI_SYSFS="$W/nopci" \
	"$B/cxlpod-maprace" --seconds 0.1 --toggle 0000:00:09.0

# cxlpod-dbrace needs the device (tests/integration/26-doorbell-vcpus.sh):
# here only its options and its refusal of a loopback pool
chk "dbrace --help" 0 'usage: cxlpod-dbrace' "$B/cxlpod-dbrace" --help
chk "dbrace --threads 1" 1 '--threads must be 2..16' "$B/cxlpod-dbrace" --threads 1
chk "dbrace --big-op" 1 '--big-op flush\|writeback' "$B/cxlpod-dbrace" --big-op invalidate
chk "dbrace --slots 0" 1 "--slots: '0' is not a size" "$B/cxlpod-dbrace" --slots 0
chk "dbrace on a loopback pool" 2 'needs the cxl-shm device \(backend is loopback\)' \
	env CXLPOD_LOOPBACK="$W/pool-dbrace:1M:32M" "$B/cxlpod-dbrace"

echo "$fails failures"
[ $fails = 0 ]

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
	run 2 cxlpod-litmus --test atomic --threads 4 --atomic-ops 5000
	expect 2 0 'mismatches: PASS' "$backend litmus atomic, 4 threads per host"
	run 2 cxlpod-litmus --json --test mp
	expect 2 0 '"mismatches":0' "$backend litmus --json"
	run 2 cxlpod-crash --records 5000 --idle 5
	expect 2 0 'crash: ' "$backend crash (writer finishes)"
	grep -q 'verified 5000 intact, 0 torn, 0 missing' "$W/out.1" && ok "$backend crash reader counts" || bad "$backend crash reader counts"
done

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

echo "$fails failures"
[ $fails = 0 ]

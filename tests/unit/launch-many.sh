#!/bin/bash
# cxlpod-launch with more hosts than it once allowed (32), on stand-in
# QEMUs that boot nothing (fake-qemu.sh beside this script): the launcher's
# own work for a 64-host pod (spawning, the logs, the markers, the report),
# its pod network files (with vde_switch installed: the switch started
# for 64 hosts), and the command lines of 256 hosts (--dry-run); -n 257 is
# refused.  Fails on a launcher whose limit is 32 ('need a number 1..32').
#
#   launch-many.sh CXLPOD-LAUNCH
set -u
L=${1:?usage: $0 cxlpod-launch}
FAKE=$(cd "$(dirname "$0")" && pwd)/fake-qemu.sh
W=$(mktemp -d /tmp/cxlpod-launch-many-XXXXXX)
trap 'rm -rf "$W"' EXIT
# the launcher's own work dirs (no -w) go under $W too
export TMPDIR=$W
fails=0
ok()  { printf 'ok   %s\n' "$*"; }
bad() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
touch "$W/kernel" "$W/initrd"
COMMON=(--qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" --pool-backend file)

# 257: refused, with the limit
"$L" -n 257 "${COMMON[@]}" --dry-run -- true >"$W/257.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "bad --hosts '257': need a number 1..256" "$W/257.out" \
    && ok "-n 257 refused with the limit" || { cat "$W/257.out"; bad "-n 257 (exit $rc)"; }

# 256 command lines: a name, a device slot, a MAC each, all distinct
"$L" -n 256 "${COMMON[@]}" --net --dry-run -- true >"$W/256.out" 2>"$W/256.err"
rc=$?
n_names=$(grep -o -- '-name cxlpod-host[0-9]*' "$W/256.out" | sort -u | wc -l)
n_ids=$(grep -o 'host-id=[0-9]*,max-hosts=256' "$W/256.out" | sort -u | wc -l)
n_macs=$(grep -o 'mac=52:54:00:c1:[0-9a-f:]*' "$W/256.out" | sort -u | wc -l)
[ $rc = 0 ] && [ "$n_names" = 256 ] && [ "$n_ids" = 256 ] && [ "$n_macs" = 256 ] \
    && ok "--dry-run -n 256: 256 distinct names, host ids and MACs" \
    || { tail -n 3 "$W/256.err"; bad "--dry-run -n 256 (exit $rc): $n_names names, $n_ids host ids, $n_macs MACs"; }

# 64 hosts run to their end
NET=()
if command -v vde_switch >/dev/null || [ -x /usr/bin/vde_switch ] || [ -x /usr/sbin/vde_switch ]; then
    NET=(--net)
else
    echo "(no vde_switch: the 64-host pod runs without --net)"
fi
FAKE_BOOT_S=1 FAKE_JOB_S=1 FAKE_LINES=10 \
    "$L" -n 64 "${COMMON[@]}" "${NET[@]}" -w "$W/pod" --boot-parallel 0 --json \
    -- true >"$W/64.out" 2>"$W/64.err"
rc=$?
j=$(tail -n 1 "$W/64.out")
n_ok=$(jq '[.results[] | select(.status == "ok")] | length' <<<"$j" 2>/dev/null)
all=$(jq -r '.all_ready_s != null and .launcher_cpu_s >= 0 and .hosts == 64' <<<"$j" 2>/dev/null)
[ $rc = 0 ] && [ "$n_ok" = 64 ] && [ "$all" = true ] \
    && ok "64 hosts: every one ready and rc=0 in the report, the launcher's CPU time reported" \
    || { tail -n 5 "$W/64.err"; bad "64 hosts (exit $rc): $n_ok ok"; }
n_out=$(grep -c '^\[host[0-9]*\] host[0-9]*: done$' "$W/64.out")
[ "$n_out" = 64 ] && ok "64 hosts: every job's output" || bad "64 hosts: $n_out jobs' output"
if [ ${#NET[@]} = 1 ]; then
    n_addr=$(awk '$2 ~ /^host[0-9]+$/ { print $1 }' "$W/pod/net-hosts" | sort -u | wc -l)
    grep -qx '10.211.0.64	host63' "$W/pod/net-hosts" && [ "$n_addr" = 64 ] \
        && ok "64 hosts: 64 addresses in the guests' /etc/hosts" \
        || bad "64 hosts: net-hosts has $n_addr addresses"
    n_cfg=$(cat "$W"/pod/host*.config | grep -c '^CXLPOD_NET_ADDR=10\.211\.0\.[0-9]*/16$')
    n_mac=$(cat "$W"/pod/host*.config | grep '^CXLPOD_NET_MAC=' | sort -u | wc -l)
    [ "$n_cfg" = 64 ] && [ "$n_mac" = 64 ] \
        && ok "64 hosts: each host's config has its /16 address and its own MAC" \
        || bad "64 hosts: $n_cfg addresses, $n_mac MACs in the configs"
    grep -q 'pod network: switch .* hosts host0..host63 at 10.211.0.1..10.211.0.64/16' "$W/64.err" \
        && ok "64 hosts: the switch started for them" || bad "64 hosts: no switch message"
fi
[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
exit $((fails > 0))

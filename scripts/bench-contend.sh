#!/usr/bin/env bash
# The contended-line benchmark (docs/benchmarks.md, issue 35): N hosts
# (default 4) write back their own lines of ONE page of the non-coherent
# area at once (cxlpod-contend --bytes 256: one line a host, one lock word
# for all of them), natively (clwb + sfence) and then by doorbell, each
# method in a pod of its own on a fresh pool.  For each host it prints the
# rounds it made (a round: store into its line, write it back, publish the
# round), its share of all the rounds, and the times the device found the
# line's lock held by another host and had the operation tried again
# (STAT_RETRIES, read from the pool's host table after the pod: a vCPU
# re-running its fence or clwb, or the doorbell's thread trying again),
# also per round.  Numbers only: a benchmark, not a test
# (tests/integration/33-contended-line.sh checks that every host
# progresses).
#
#   bash scripts/bench-contend.sh [--no-build] [--hosts N] [--bytes B]
#                                 [--seconds S] [--rounds R]
#                                 [--workdir DIR] [--dry-run]
#
#   --hosts N     hosts on the page (default 4)
#   --bytes B     the contended range (default 256: one line a host; 4K:
#                 16 lines each, one lock word as well)
#   --seconds S   how long each pod writes back (default 8)
#   --rounds R    pods per method, alternated (default 1)
#   --workdir DIR default build/bench-contend (emptied first)
#   --dry-run     build and boot nothing: check the arguments, the tools and
#                 each pod's launcher options (cxlpod-launch --dry-run)
#
# CXLPOD_QEMU=PATH benchmarks another QEMU build.  Prints one table; keeps
# the pods' output and WORKDIR/results.jsonl (a line per host and pod).
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_ALL=1 HOSTS=4 BYTES=256 SECONDS_=8 ROUNDS=1 DRY=0
W=$BUILD/bench-contend
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_ALL=0; shift ;;
        --dry-run) DRY=1; BUILD_ALL=0; shift ;;
        --hosts) [ $# -ge 2 ] || die "--hosts needs a number"; HOSTS=$2; shift 2 ;;
        --bytes) [ $# -ge 2 ] || die "--bytes needs a size"; BYTES=$2; shift 2 ;;
        --seconds) [ $# -ge 2 ] || die "--seconds needs a number"; SECONDS_=$2; shift 2 ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
        --workdir) [ $# -ge 2 ] || die "--workdir needs a directory"; W=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ $HOSTS =~ ^[0-9]+$ ]] && [ "$HOSTS" -ge 2 ] && [ "$HOSTS" -le 256 ] || die "--hosts wants 2..256"
[[ $SECONDS_ =~ ^[1-9][0-9]*$ ]] || die "--seconds wants a positive number"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
command -v python3 >/dev/null || die "python3 not found (scripts/deps.sh)"
[ $BUILD_ALL = 0 ] || bash "$TOP/scripts/build-all.sh"
L=$BUILD/meson/host-tools/cxlpod-launch
P=$BUILD/meson/host-tools/cxlpod-pool
[ -x "$L" ] && [ -x "$P" ] || die "no $L or $P: run scripts/build-all.sh"

if [ $DRY = 1 ]; then
    D=$(mktemp -d /tmp/cxlpod-bench-contend-dry.XXXXXX)
    trap 'rm -rf "$D"' EXIT
    for m in native doorbell; do
        "$L" --dry-run -n "$HOSTS" --device cxl-shm --size 256M -w "$D/$m" \
            --coherent-size 64M --timeout 900 -- \
            "cxlpod-contend --method $m --bytes $BYTES --seconds $SECONDS_ --json --timeout 300" \
            >/dev/null || die "the launcher refuses the $m pod"
    done
    echo "dry run: $HOSTS hosts on $BYTES bytes, native and doorbell pods; nothing booted"
    exit 0
fi
rm -rf "$W"; mkdir -p "$W"
R=$W/results.jsonl; : >"$R"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
    for m in native doorbell; do
        d=$W/$m-$r
        log "pod $r, $m: $HOSTS hosts on $BYTES bytes for $SECONDS_ s"
        "$L" -n "$HOSTS" --device cxl-shm --size 256M --coherent-size 64M \
            --workdir "$d" --timeout 900 -- \
            "cxlpod-contend --method $m --bytes $BYTES --seconds $SECONDS_ --json --timeout 300" \
            >"$d.log" 2>&1 || die "the $m pod failed: see $d.log and $d/host*.out"
        "$P" inspect --json "$d/pool.img" >"$d.pool.json" ||
            die "cxlpod-pool inspect $d/pool.img failed"
        rm -f "$d/pool.img"
        python3 - "$d" "$m" "$r" "$HOSTS" >>"$R" <<'EOF'
import json, sys
d, m, r, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pool = json.load(open(d + ".pool.json"))
retries = {h["id"]: h["stats"]["retries"] for h in pool["hosts"]}
for h in range(n):
    res = None
    for l in open("%s/host%d.out" % (d, h), errors="replace"):
        l = l.strip()
        if l.startswith('{"tool":"cxlpod-contend"'):
            res = json.loads(l)
    if res is None:
        sys.exit("host %d of the %s pod printed no result" % (h, m))
    print(json.dumps({"method": m, "pod": r, "host": h,
                      "rounds": res["rounds"], "ok": res["ok"],
                      "seconds": res["seconds"],
                      "retries": retries.get(h, 0)}))
EOF
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$R" "$HOSTS" "$BYTES" "$SECONDS_" "$load0" "$load1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, nbytes, secs = int(sys.argv[2]), sys.argv[3], sys.argv[4]
print("contended line: %d hosts, %s bytes (one lock word), %s s a pod; "
      "load %s -> %s" % (n, nbytes, secs, sys.argv[5], sys.argv[6]))
print("%-9s %4s %4s %10s %7s %10s %14s" %
      ("method", "pod", "host", "rounds", "share", "retries",
       "retries/round"))
for m in ("native", "doorbell"):
    for pod in sorted({x["pod"] for x in rows if x["method"] == m}):
        rs = [x for x in rows if x["method"] == m and x["pod"] == pod]
        total = sum(x["rounds"] for x in rs) or 1
        for x in sorted(rs, key=lambda x: x["host"]):
            print("%-9s %4d %4d %10d %6.1f%% %10d %14.3f%s" %
                  (m, pod, x["host"], x["rounds"],
                   100.0 * x["rounds"] / total, x["retries"],
                   x["retries"] / max(x["rounds"], 1),
                   "" if x["ok"] else "  (lines wrong)"))
        lo = min(x["rounds"] for x in rs)
        hi = max(x["rounds"] for x in rs)
        print("%-9s %4d  all %10d  min/max %.2f, %d retries, %.0f rounds/s"
              % (m, pod, total, lo / max(hi, 1),
                 sum(x["retries"] for x in rs), total / float(secs)))
EOF

#!/usr/bin/env bash
# A remote host against a local one (issue 37's performance section,
# docs/benchmarks.md "A remote host against a local one"): one pool served
# on the loopback (cxlpod-pool serve --listen 127.0.0.1:0, started by this
# script, --heartbeat-timeout 10000; UCX over TCP on "lo", nothing on any
# other address; the remote hosts with remote-timeout-ms=10000),
# hosts that map the pool file ("local") and hosts that take it from the
# service with pool=ucx://127.0.0.1:PORT ("remote", docs/device.md "A remote
# host"), initramfs guests, two launchers (docs/multi-machine.md: the second
# one is the other "machine"):
#
#   pair   a 2-host pod, host 0 local, host 1 remote, -smp 2 -m 512M, pool
#          256 MiB (coherent window 64 MiB), direct mode: in turns (host 0,
#          then host 1, ROUNDS times), cxlpod-bench --far --method both:
#          writeback / invalidate / flush of one line a call and of 1 MiB a
#          call (doorbell and native clwb / clflushopt), then a dependent
#          load, an 8-byte store and a lock xadd in the coherent window, and
#          whether CAPS has ATOMICS; the host memory of both QEMUs
#   ar     the allreduce of docs/experiment.md's set-up (4 hosts, 1 vCPU and
#          256 MiB each, pool 256 MiB with a 128 MiB coherent window,
#          cxlpod-allreduce-exp, vectors 64K and 256K, N = 2 and 4, both
#          areas), in direct mode and without -icount (a remote host refuses
#          mode=timed): 4 local hosts in one launcher, then 2 remote hosts
#          (0-1) + 2 local ones (2-3): N = 4 is 2+2, N = 2 is two remote
#          hosts against two local ones; guest time is wall time (rdtsc)
#   pod    the largest pod here as two "machines": K local + K remote
#          initramfs hosts (-smp 1 -m 256M, pool 256 MiB), time to ready
#          (the launchers' boot_s) and RSS / PSS of every QEMU once all run
#
# Prints one table per part (each figure local, remote, remote/local) and the
# load average at start and end; keeps everything in the work dir
# (results.json, table.txt, logs).  Runs as root, like scripts/bench.sh.
#
#   bash scripts/bench-remote.sh [--no-build] [--quick] [--rounds R]
#                                [--repeat N] [--pod-hosts K] [--skip LIST]
#                                [--heartbeat-timeout MS] [--remote-timeout MS]
#                                [--workdir DIR]
#                                [--report DIR] [--dry-run]
#
#   --no-build     skip scripts/build-all.sh (use what is built)
#   --quick        1 round, 1 repetition, short timings, N = 4 and 64K only,
#                  a 2+2 pod: a smoke run (not the benchmark)
#   --rounds R     turns of each host in the pair (default 3; best of all)
#   --repeat N     repetitions of each figure per turn (default 2)
#   --pod-hosts K  hosts per "machine" in the pod part (default 8: 8+8)
#   --skip LIST    parts not to run: pair, ar, pod (comma-separated)
#   --heartbeat-timeout MS  the service's (default 10000; the service's own
#                  default, 1000, failed two remote hosts filling their
#                  images at once on this loaded 2-core machine)
#   --remote-timeout MS  the remote hosts' remote-timeout-ms (default 10000;
#                  the device's default, 1000, lost two remote hosts of the
#                  2+2 pod here: a request not answered within 1 s at a
#                  load average of 10)
#   --workdir DIR  default build/bench-remote (emptied first)
#   --report DIR   boot nothing: print the tables again from an earlier run
#   --dry-run      build and boot nothing: check the arguments, the tools and
#                  every launcher's options (cxlpod-launch --dry-run), in a
#                  temporary work dir unless --workdir is given
#
# CXLPOD_QEMU=PATH benchmarks another QEMU build.  The figures are wall-clock
# times under TCG on whatever else the machine runs (the load is printed).
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_ALL=1 QUICK=0 ROUNDS=3 REPEAT=2 PODK=8 SKIP="" REPORT="" DRY=0 WGIVEN= HB=10000 RTO=10000
W=$BUILD/bench-remote
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_ALL=0; shift ;;
        --dry-run) DRY=1; BUILD_ALL=0; shift ;;
        --quick) QUICK=1; ROUNDS=1; REPEAT=1; PODK=2; shift ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
        --repeat) [ $# -ge 2 ] || die "--repeat needs a number"; REPEAT=$2; shift 2 ;;
        --pod-hosts) [ $# -ge 2 ] || die "--pod-hosts needs a number"; PODK=$2; shift 2 ;;
        --skip) [ $# -ge 2 ] || die "--skip needs a list"; SKIP=$2; shift 2 ;;
        --heartbeat-timeout) [ $# -ge 2 ] || die "--heartbeat-timeout needs a number"; HB=$2; shift 2 ;;
        --remote-timeout) [ $# -ge 2 ] || die "--remote-timeout needs a number"; RTO=$2; shift 2 ;;
        --workdir) [ $# -ge 2 ] || die "--workdir needs a directory"; W=$2; WGIVEN=1; shift 2 ;;
        --report) [ $# -ge 2 ] || die "--report needs a work dir"; REPORT=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "--repeat wants a positive number"
[[ $PODK =~ ^[1-9][0-9]*$ ]] && [ "$PODK" -le 64 ] || die "--pod-hosts wants 1..64"
[[ $HB =~ ^[1-9][0-9]*$ ]] && [ "$HB" -ge 10 ] && [ "$HB" -le 600000 ] || die "--heartbeat-timeout wants 10..600000"
[[ $RTO =~ ^[1-9][0-9]*$ ]] && [ "$RTO" -le 60000 ] || die "--remote-timeout wants 1..60000"
REMOTE=(--device-opt "remote-timeout-ms=$RTO")
for s in ${SKIP//,/ }; do
    case $s in pair|ar|pod) ;; *) die "--skip: '$s' is not pair, ar or pod" ;; esac
done
skipped() { [[ ,$SKIP, == *,$1,* ]]; }
[ $DRY = 0 ] || [ -z "$REPORT" ] || die "--dry-run and --report: give one"
command -v python3 >/dev/null || die "python3 not found (scripts/deps.sh)"

report() {
    python3 - "$1" <<'EOF'
import json, os, sys, platform

W = sys.argv[1]
info = json.load(open(os.path.join(W, "run.json")))
MiB = 1 << 20
res = {"date": info["date"], "host": info["host"], "options": info["options"]}

def jl(path, tool):
    out = []
    try:
        for l in open(path, errors="replace"):
            l = l.strip().replace("\r", "")
            if l.startswith('{"tool":"%s"' % tool):
                out.append(json.loads(l))
    except OSError:
        pass
    return out

def launch(path):
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

def mem(path):
    r = {}
    try:
        for l in open(path):
            f = l.split()
            if len(f) >= 3 and f[2] == "kB":
                r[f[0].rstrip(":")] = int(f[1]) * 1024
    except OSError:
        return None
    return r

def ratio(a, b):
    return a / b if a and b else float("nan")

h = info["host"]
print()
print("cxlpod: a remote host against a local one, %s" % info["date"])
print("host: %d CPUs (%s), TCG, shared; load average %s at start, %s at end; %d s wall"
      % (h["cpus"], h["cpu"], h["load_start"], h["load_end"], h["wall_s"]))
print("pool service on 127.0.0.1 (UCX over TCP, interface lo; --heartbeat-timeout %s ms, the remote"
      % info["options"].get("heartbeat_timeout_ms", "?"))
print("hosts' remote-timeout-ms %s); local = the pool file mapped, remote = pool=ucx://127.0.0.1:PORT"
      % info["options"].get("remote_timeout_ms", "?"))
print("(docs/device.md \"A remote host\")")

# ---- pair ----------------------------------------------------------------
d = os.path.join(W, "pair")
if os.path.isdir(d):
    def best(lines):
        if not lines:
            return None
        b = json.loads(json.dumps(lines[0]))
        for x in lines[1:]:
            for m, o in x["ops"].items():
                for k, v in o.items():
                    b["ops"][m][k] = min(b["ops"][m][k], v)
            for a in ("coherent", "ram"):
                for k, v in x[a].items():
                    if k.endswith("_ns"):
                        b[a][k] = min(b[a][k], v)
        return b
    far = [jl(os.path.join(d, "a", "host0.out"), "cxlpod-bench"),
           jl(os.path.join(d, "b", "host1.out"), "cxlpod-bench")]
    far = [[x for x in f if x.get("action") == "far"] for f in far]
    L, R = best(far[0]), best(far[1])
    res["pair"] = {"local": L, "remote": R, "runs": {"local": far[0], "remote": far[1]}}
    print()
    print("== 1. one local and one remote host (pair: 2-host pod, -smp 2 -m 512M, pool 256 MiB,")
    print("      coherent window 64 MiB, direct mode), cxlpod-bench --far, best of %d turns x %d"
          % (len(far[0]), L["repeat"] if L else 0))
    if not L or not R:
        print("   (no result: see %s)" % d)
    else:
        rows = []
        for m in ("doorbell", "native"):
            if m not in L["ops"] or m not in R["ops"]:
                continue
            lo, ro = L["ops"][m], R["ops"][m]
            for op, key, what in (("writeback", "wb", "dirty"), ("invalidate", "inv", "clean"),
                                  ("flush", "flush", "dirty")):
                rows.append(("%s %s, one line a call" % (m, op), "ns", lo[key + "_line_ns"],
                             ro[key + "_line_ns"]))
            for op, key in (("writeback", "wb"), ("invalidate", "inv"), ("flush", "flush")):
                rows.append(("%s %s, 1 MiB a call" % (m, op), "us/MiB", lo[key + "_MiB_us"],
                             ro[key + "_MiB_us"]))
        rows.append(("coherent window: dependent load", "ns", L["coherent"]["load_ns"],
                     R["coherent"]["load_ns"]))
        rows.append(("coherent window: 8-byte store", "ns", L["coherent"]["store_ns"],
                     R["coherent"]["store_ns"]))
        rows.append(("coherent window: lock xadd", "ns", L["coherent"]["xadd_ns"],
                     R["coherent"]["xadd_ns"]))
        rows.append(("guest RAM: dependent load", "ns", L["ram"]["load_ns"], R["ram"]["load_ns"]))
        rows.append(("guest RAM: lock xadd", "ns", L["ram"]["xadd_ns"], R["ram"]["xadd_ns"]))
        hdr = "%-44s %7s %12s %12s %9s" % ("figure", "unit", "local", "remote", "rem/loc")
        print(hdr)
        print("-" * len(hdr))
        def cell(v):
            return "%12.1f" % v if v is not None and v >= 0 else "%12s" % "never"
        for name, unit, a, b in rows:
            ok = a is not None and a >= 0 and b is not None and b >= 0
            print("%-44s %7s %s %s %9s" % (name, unit, cell(a), cell(b),
                                           "%.2f" % ratio(b, a) if ok else "-"))
        print("%-44s %7s %12s %12s" % ("CAPS: ATOMICS (xadd atomic across hosts)", "",
                                       "yes" if L["caps_atomics"] else "no",
                                       "yes" if R["caps_atomics"] else "no"))
        for tag, x in (("local", L), ("remote", R)):
            if x["coherent"].get("xadd_cut") and not x["coherent"]["xadds"]:
                print("%-44s %7s   the %s host's lock xadd never retired: cut off by a timer after %d s"
                      % ("", "", tag, x["coherent"]["xadd_limit_s"]))
        print("%-44s %7s %12s %12s" % ("CAPS: DIRECT (window mapped as RAM)", "",
                                       "yes" if L["caps_direct"] else "no",
                                       "yes" if R["caps_direct"] else "no"))
        for m in ("doorbell", "native"):
            if m in L["ops"] and m in R["ops"]:
                print("%s writeback 1 MiB a call: local %.0f MB/s, remote %.0f MB/s; per line "
                      "inside it: %.0f ns, %.0f ns"
                      % (m, MiB / L["ops"][m]["wb_MiB_us"], MiB / R["ops"][m]["wb_MiB_us"],
                         L["ops"][m]["wb_MiB_us"] * 1e3 / (MiB / 64),
                         R["ops"][m]["wb_MiB_us"] * 1e3 / (MiB / 64)))
        print("(one line a call: %d lines, each a call of its own, dirtied first for writeback and"
              % L["op_lines"])
        print(" flush; 1 MiB a call: %d MiB, every line dirty, clean for invalidate, which on the"
              % (L["size"] >> 20))
        print(" remote host is a fetch from the service; coherent window: %d lines, each figure"
              % L["coh_lines"])
        print(" timed for %.2f s at least; on the remote host every access there is a request)"
              % L["min_time"])
    pm = {}
    for tag, sub, hid in (("local", "a", 0), ("remote", "b", 1)):
        r = mem(os.path.join(d, sub, "mem-host%d-bench.rollup" % hid))
        if r:
            pm[tag] = {"rss": r.get("Rss", 0), "pss": r.get("Pss", 0),
                       "anon": r.get("Anonymous", 0)}
    if len(pm) == 2:
        res["pair"]["memory"] = pm
        print("host memory of each QEMU after its turns (smaps_rollup): local RSS %.0f MiB, PSS "
              "%.0f MiB, anonymous %.0f MiB; remote RSS %.0f MiB, PSS %.0f MiB, anonymous %.0f MiB"
              % tuple(pm[t][k] / MiB for t in ("local", "remote") for k in ("rss", "pss", "anon")))

# ---- allreduce -----------------------------------------------------------
def ar_pod(dirs):
    lines = []
    for dd in dirs:
        for f in sorted(os.listdir(dd)) if os.path.isdir(dd) else []:
            if f.startswith("host") and f.endswith(".out"):
                lines += jl(os.path.join(dd, f), "cxlpod-allreduce-exp")
    exps = {}
    for l in lines:
        if not l.get("participant") or l.get("skipped"):
            continue
        k = (l["area"], l["n"], l["bytes"])
        e = exps.setdefault(k, {"hosts": {}, "wrong": 0})
        e["wrong"] += l["wrong"]
        last = l["rounds"][-1]
        e["hosts"][l["host"]] = {p["phase"]: p["ns"] for p in last}
    out = {}
    for k, e in exps.items():
        phases = ["publish", "reduce_scatter", "all_gather"]
        slow = sum(max(hh[p] for hh in e["hosts"].values()) for p in phases)
        mean = sum(sum(hh[p] for p in phases) for hh in e["hosts"].values()) / len(e["hosts"])
        out[k] = {"ms": slow / 1e6, "mean_host_ms": mean / 1e6, "hosts": len(e["hosts"]),
                  "wrong": e["wrong"], "remote_hosts": None}
    return out

d = os.path.join(W, "ar")
if os.path.isdir(d):
    A = ar_pod([os.path.join(d, "local4")])
    B = ar_pod([os.path.join(d, "split", "a"), os.path.join(d, "split", "b")])
    print()
    print("== 2. the allreduce of docs/experiment.md's set-up (cxlpod-allreduce-exp, 1 vCPU and 256 MiB")
    print("      a host, pool 256 MiB, coherent window 128 MiB), direct mode, no -icount: wall time")
    print("      4 local hosts (one launcher) against hosts 0-1 remote + 2-3 local (two launchers)")
    hdr = "%-12s %3s %7s  %-14s %10s %10s %9s %12s %12s" % (
        "area", "N", "vector", "split hosts", "4 local ms", "split ms", "split/loc",
        "local mean", "split mean")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for k in sorted(set(A) | set(B), key=lambda k: (k[0], k[1], k[2])):
        a, b = A.get(k), B.get(k)
        who = "2 remote" if k[1] == 2 else "2 rem + 2 loc"
        rows.append({"area": k[0], "n": k[1], "bytes": k[2], "split": who,
                     "local_ms": a and a["ms"], "split_ms": b and b["ms"],
                     "local_mean_host_ms": a and a["mean_host_ms"],
                     "split_mean_host_ms": b and b["mean_host_ms"],
                     "wrong": (a["wrong"] if a else 0) + (b["wrong"] if b else 0)})
        f = lambda v, fmt: fmt % v if v is not None else "-"
        print("%-12s %3d %6dK  %-14s %10s %10s %9s %12s %12s%s"
              % (k[0], k[1], k[2] >> 10, who, f(a and a["ms"], "%.1f"), f(b and b["ms"], "%.1f"),
                 f(ratio(b["ms"], a["ms"]) if a and b else None, "%.2f"),
                 f(a and a["mean_host_ms"], "%.1f"), f(b and b["mean_host_ms"], "%.1f"),
                 "  WRONG SUMS" if rows[-1]["wrong"] else ""))
    res["allreduce"] = rows
    print("(ms: the reported (second) round, the sum over its three phases of the slowest host's")
    print(" time; mean: a host's own work; every sum checked exact unless WRONG SUMS; the hosts take")
    print(" turns, so only one works at a time and the 2 cores' sharing weighs little)")
    for name in ("local4", "split/a", "split/b"):
        lj = launch(os.path.join(d, name.replace("/", "-") + ".json"))
        if lj:
            res.setdefault("allreduce_launch", {})[name] = lj

# ---- pod -----------------------------------------------------------------
d = os.path.join(W, "pod")
if os.path.isdir(d):
    K = info["options"]["pod_hosts"]
    out = {}
    for tag, sub in (("local", "a"), ("remote", "b")):
        lj = launch(os.path.join(d, sub + ".json"))
        boots = [r["boot_s"] for r in (lj or {}).get("results", []) if r.get("boot_s") is not None]
        mems = []
        for f in sorted(os.listdir(os.path.join(d, sub))) if os.path.isdir(os.path.join(d, sub)) else []:
            if f.startswith("mem-host") and f.endswith(".rollup"):
                r = mem(os.path.join(d, sub, f))
                if r:
                    mems.append(r)
        out[tag] = {"launch": lj, "boot_s": boots, "mem": mems}
    print()
    print("== 3. the pod as two \"machines\": %d local + %d remote initramfs hosts (-smp 1 -m 256M,"
          % (K, K))
    print("      pool 256 MiB, coherent window 64 MiB), every QEMU sampled once all hosts ran")
    hdr = "%-8s %5s %9s %9s %9s %11s %10s %10s %10s" % (
        "hosts", "ready", "boot med", "boot max", "all rdy", "RSS min-max", "PSS med", "anon med",
        "sum PSS")
    print(hdr)
    print("-" * len(hdr))
    pod = {}
    for tag in ("local", "remote"):
        o = out[tag]
        b = sorted(o["boot_s"])
        med = lambda v: sorted(v)[len(v) // 2] if v else None
        rss = [m.get("Rss", 0) / MiB for m in o["mem"]]
        pss = [m.get("Pss", 0) / MiB for m in o["mem"]]
        anon = [m.get("Anonymous", 0) / MiB for m in o["mem"]]
        lj = o["launch"] or {}
        row = {"hosts": K, "ready": len(b), "boot_s_median": med(b), "boot_s_max": max(b) if b else None,
               "all_ready_s": lj.get("all_ready_s"), "rss_mib_median": med(rss),
               "pss_mib_median": med(pss), "anon_mib_median": med(anon),
               "pss_mib_sum": sum(pss), "sampled": len(o["mem"]),
               "rss_mib_min": min(rss) if rss else None, "rss_mib_max": max(rss) if rss else None}
        pod[tag] = row
        f = lambda v, fmt="%.1f": fmt % v if v is not None else "-"
        rr = ("%.0f-%.0f" % (row["rss_mib_min"], row["rss_mib_max"])) if rss else "-"
        print("%-8s %5d %9s %9s %9s %11s %10s %10s %10s"
              % (tag, len(b), f(row["boot_s_median"]), f(row["boot_s_max"]), f(row["all_ready_s"]),
                 rr, f(row["pss_mib_median"], "%.0f"),
                 f(row["anon_mib_median"], "%.0f"), f(row["pss_mib_sum"], "%.0f")))
    res["pod"] = pod
    print("(boot: one guest's QEMU start to its region ready, median and slowest of the machine;")
    print(" all rdy: that launcher's first QEMU start to its last region ready; the remote launcher")
    print(" starts once the service is up; RSS: the smallest and largest QEMU of the machine (shared")
    print(" pages count whole), PSS and anonymous: the median QEMU (MiB), sum PSS: the machine's;")
    print(" a local host maps the pool file (shared pages, PSS divides them); a remote host")
    print(" holds a private image and twin of the non-coherent area)")
    sv = mem(os.path.join(d, "serve.rollup"))
    if sv:
        print("the pool service (cxlpod-pool serve) at the same moment: RSS %.0f MiB, PSS %.0f MiB"
              % (sv.get("Rss", 0) / MiB, sv.get("Pss", 0) / MiB))
        pod["service"] = {"rss_mib": sv.get("Rss", 0) / MiB, "pss_mib": sv.get("Pss", 0) / MiB}

json.dump(res, open(os.path.join(W, "results.json"), "w"), indent=1)
print()
print("raw results: %s/results.json; guest outputs and logs: %s/{pair,ar,pod}" % (W, W))
EOF
}

if [ -n "$REPORT" ]; then
    [ -f "$REPORT/run.json" ] || die "$REPORT is not a work dir of scripts/bench-remote.sh (no run.json)"
    report "$REPORT"
    exit 0
fi

[ $BUILD_ALL = 1 ] && build_all_after_others
L=$BUILD/meson/host-tools/cxlpod-launch
QEMU=${CXLPOD_QEMU:-$BUILD/qemu/qemu-system-x86_64}
[ -x "$L" ] || die "$L missing: run scripts/build-all.sh"
POOLTOOL=$BUILD/meson/host-tools/cxlpod-pool
[ -x "$POOLTOOL" ] || die "cxlpod-pool missing: run scripts/build-all.sh"
[ -x "$QEMU" ] || die "$QEMU missing: run scripts/build-all.sh"
if [ $DRY = 0 ]; then
    [ "$(id -u)" = 0 ] || die "run it as root (as scripts/bench.sh)"
fi
if [ $DRY = 1 ] && [ -z "$WGIVEN" ]; then
    W=$(mktemp -d /tmp/cxlpod-bench-remote-dry.XXXXXX)
fi
case $W in /|"$TOP"|"$HOME") die "refusing to use $W as the work dir" ;; esac
rm -rf "$W"; mkdir -p "$W"
W=$(cd "$W" && pwd)
# the service and the remote hosts use UCX over TCP on the loopback only
export UCX_TLS=tcp UCX_NET_DEVICES=lo

if [ $QUICK = 1 ]; then
    FAR="--size 2M --min-time 0.05" AR_LIST=4 AR_SIZES=64K
else
    FAR="--size 8M --min-time 0.3" AR_LIST=2,4 AR_SIZES=64K,256K
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD0=$(load)
DATE=$(date -Iseconds)
T0=$(date +%s)
log "load average at start: $LOAD0"

# every launcher this script started; the launchers stop their QEMUs and
# the pool service on SIGTERM
LPIDS=() SPIDS=()
cleanup() {
    local p
    for p in "${LPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${LPIDS[@]}"; do
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    for p in "${SPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${SPIDS[@]}"; do
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    [ $DRY = 0 ] || [ -n "$WGIVEN" ] || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME DIR LAUNCHER-OPTIONS...: one launcher in the background (its
# pid in LPID); with --dry-run only its options are checked
start() {
    local name=$1 dir=$2; shift 2
    mkdir -p "$(dirname "$dir")"
    if [ $DRY = 1 ]; then
        "$L" --dry-run -w "$dir" "$@" >"$dir.dry-run" 2>&1 ||
            { cat "$dir.dry-run" >&2; die "$name: the launcher refuses its options"; }
        grep -q -- '-device cxl-shm' "$dir.dry-run" || die "$name: no QEMU command line"
        LPID=
        return
    fi
    log "$name: cxlpod-launch $*"
    "$L" -w "$dir" --json "$@" >"$dir.out" 2>"$dir.err" &
    LPID=$!
    LPIDS+=("$LPID")
}

# serve POOL SIZE COHERENT HOSTS: make the pool and its key (POOL.key) and
# run the pool service on 127.0.0.1, a port it picks (SERVE_PORT,
# SERVE_PID; its log POOL.serve.log)
serve() {
    local pool=$1 size=$2 coh=$3 n=$4
    SERVE_PORT=17999 SERVE_PID=   # the dry run's stand-ins: nothing listens
    [ $DRY = 0 ] || return 0
    "$POOLTOOL" create --size "$size" --coherent-size "$coh" --max-hosts "$n" "$pool" >/dev/null ||
        die "cxlpod-pool create $pool failed"
    "$POOLTOOL" key "$pool" >/dev/null || die "cxlpod-pool key $pool failed"
    "$POOLTOOL" serve --listen 127.0.0.1:0 --key "$pool.key" --heartbeat-timeout "$HB" "$pool" \
        >"$pool.serve.log" 2>&1 &
    SERVE_PID=$!
    SPIDS+=("$SERVE_PID")
    SERVE_PORT=
    for _ in $(seq 1 300); do
        SERVE_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$pool.serve.log" | head -n1)
        [ -n "$SERVE_PORT" ] && break
        kill -0 "$SERVE_PID" 2>/dev/null || { cat "$pool.serve.log" >&2; die "the pool service for $pool ended"; }
        sleep 0.2
    done
    [ -n "$SERVE_PORT" ] || die "the pool service for $pool never listened"
    log "pool service (pid $SERVE_PID) on 127.0.0.1:$SERVE_PORT, heartbeat timeout $HB ms"
}

# unserve: stop the service (once the pod's launchers have ended)
unserve() {
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SPIDS=()
    SERVE_PID=
}

# sample DIR HOST TAG: host memory of that host's QEMU (from the launcher's
# "started QEMU pid" line)
sample() {
    local dir=$1 h=$2 tag=$3 pid
    pid=$(sed -n "s/.*host $h: started QEMU pid \([0-9]*\).*/\1/p" "$dir.err" | tail -n1)
    [ -n "$pid" ] || return 0
    cp "/proc/$pid/smaps_rollup" "$dir/mem-host$h-$tag.rollup" 2>/dev/null || true
    grep -E '^(VmRSS|VmHWM)' "/proc/$pid/status" >"$dir/mem-host$h-$tag.status" 2>/dev/null || true
}

# watch DIR:FIRST-LAST...: until every launcher started has ended, take a
# memory sample of a host's QEMU when its guest prints BENCH-MEM:TAG (the
# job sleeps after the marker)
watch() {
    local spec dir r h t seen=" " alive p
    while :; do
        alive=0
        for p in "${LPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        for spec in "$@"; do
            dir=${spec%:*}; r=${spec##*:}
            for ((h = ${r%-*}; h <= ${r#*-}; h++)); do
                [ -f "$dir/host$h.log" ] || continue
                for t in $(tr -d '\r' <"$dir/host$h.log" | sed -n 's/^BENCH-MEM:\([a-z]*\)$/\1/p'); do
                    case $seen in *" $dir/$h/$t "*) continue ;; esac
                    sample "$dir" "$h" "$t"
                    seen="$seen$dir/$h/$t "
                done
            done
        done
        [ $alive = 1 ] || break
        sleep 0.3
    done
}

# finish NAME DIR PID: wait for one launcher, keep its JSON line
finish() {
    local name=$1 dir=$2 pid=$3 rc=0
    [ -n "$pid" ] || return 0
    wait "$pid" || rc=$?
    tail -n 1 "$dir.out" >"$dir.json" 2>/dev/null || true
    if [ $rc != 0 ]; then
        tail -n 20 "$dir.err" >&2
        die "$name: the launcher exited $rc; logs in $dir"
    fi
}

# ---- 1. the pair ----------------------------------------------------------
if ! skipped pair; then
    D=$W/pair
    mkdir -p "$D"
    # host 0 (local) and host 1 (remote) take turns through tokens in the
    # coherent window: host 0 measures, then host 1, ROUNDS times
    cat >"$D/job.sh" <<EOF
me=\$CXLPOD_HOST_ID
cxlpod-info --json
for r in \$(seq 1 $ROUNDS); do
    a=\$((0x100000 + r * 128)); b=\$((a + 64))
    if [ \$me = 1 ]; then cxlpod-poke wait \$a turn\$r 3600 || exit 3; fi
    if [ \$me = 0 ] && [ \$r -gt 1 ]; then cxlpod-poke wait \$((a - 64)) done\$((r - 1)) 3600 || exit 3; fi
    cxlpod-bench --far --json --method both --repeat $REPEAT $FAR; echo BENCH-RC:\$?
    if [ \$me = 0 ]; then cxlpod-poke write \$a turn\$r; else cxlpod-poke write \$b done\$r; fi
done
echo BENCH-MEM:bench; sleep 4
if [ \$me = 0 ]; then cxlpod-poke wait \$((0x100000 + $ROUNDS * 128 + 64)) done$ROUNDS 3600 || exit 3; fi
EOF
    PAIR=(-n 2 --size 256M --coherent-size 64M --timeout 5400 --job "$D/job.sh")
    serve "$D/pool.img" 256M 64M 2
    start "pair, machine a (host 0, local)" "$D/a" "${PAIR[@]}" --local-hosts 0 \
        --machine-name a --pool "$D/pool.img"
    PA=$LPID
    start "pair, machine b (host 1, remote)" "$D/b" "${PAIR[@]}" --local-hosts 1 \
        --machine-name b --pool "ucx://127.0.0.1:$SERVE_PORT" --pool-key "$D/pool.img.key" "${REMOTE[@]}"
    PB=$LPID
    if [ $DRY = 0 ]; then
        watch "$D/a:0-0" "$D/b:1-1"
        finish "pair b" "$D/b" "$PB"
        finish "pair a" "$D/a" "$PA"
        LPIDS=()
        unserve
        for f in "$D/a/host0.out" "$D/b/host1.out"; do
            grep '^BENCH-RC:' "$f" | grep -qv ':0$' && { cat "$f" >&2; die "pair: cxlpod-bench failed ($f)"; }
        done
        rm -f "$D/pool.img"
    else
        grep -q 'pool=ucx://127.0.0.1' "$D/b.dry-run" || die "pair: machine b's host is not remote"
    fi
    log "pair: done"
fi

# ---- 2. the allreduce -----------------------------------------------------
if ! skipped ar; then
    D=$W/ar
    mkdir -p "$D"
    AR=(-n 4 --smp 1 --mem 256M --size 256M --coherent-size 128M --append nowatchdog
        --timeout 5400 --boot-timeout 1200 --
        "cxlpod-allreduce-exp --areas coherent,noncoherent --hosts-list $AR_LIST --sizes $AR_SIZES --rounds 2 --no-slices --no-irq-check --timeout 3600 --json")
    start "allreduce, 4 local hosts" "$D/local4" --pool "$D/local4.img" "${AR[@]}"
    if [ $DRY = 0 ]; then
        finish "allreduce local4" "$D/local4" "$LPID"
        LPIDS=()
        rm -f "$D/local4.img" "$D/local4.img.key"
    fi
    mkdir -p "$D/split"
    # hosts 2-3 on the pool's machine, 0-1 remote: N = 2 is two remote hosts
    serve "$D/split.img" 256M 128M 4
    start "allreduce, machine a (hosts 2-3, local)" "$D/split/a" \
        --local-hosts 2-3 --machine-name a --pool "$D/split.img" "${AR[@]}"
    PA=$LPID
    start "allreduce, machine b (hosts 0-1, remote)" "$D/split/b" --local-hosts 0-1 \
        --machine-name b --pool "ucx://127.0.0.1:$SERVE_PORT" --pool-key "$D/split.img.key" "${REMOTE[@]}" "${AR[@]}"
    PB=$LPID
    if [ $DRY = 0 ]; then
        finish "allreduce split b" "$D/split/b" "$PB"
        finish "allreduce split a" "$D/split/a" "$PA"
        LPIDS=()
        unserve
        cp "$D/split/a.json" "$D/split-a.json"; cp "$D/split/b.json" "$D/split-b.json"
        rm -f "$D/split.img"
    else
        [ "$(grep -c 'pool=ucx://' "$D/split/b.dry-run")" = 2 ] || die "allreduce: machine b's two hosts are not remote"
    fi
    log "allreduce: done"
fi

# ---- 3. the pod as two machines --------------------------------------------
if ! skipped pod; then
    D=$W/pod
    mkdir -p "$D"
    N=$((2 * PODK))
    # every host says it runs (one 8-byte word each in the coherent window),
    # waits until all did, then holds still while the script samples
    all=$(printf 'x%.0s' $(seq 1 $((8 * N))))
    cat >"$D/job.sh" <<EOF
cxlpod-poke write \$((0x100000 + CXLPOD_HOST_ID * 8)) xxxxxxxx
until cxlpod-poke wait 0x100000 $all 0 2>/dev/null; do sleep 2; done
echo BENCH-MEM:all; sleep 8
EOF
    POD=(-n "$N" --smp 1 --mem 256M --size 256M --coherent-size 64M --timeout 3600
         --boot-timeout 1800 --job "$D/job.sh")
    serve "$D/pool.img" 256M 64M "$N"
    start "pod, machine a (hosts 0-$((PODK - 1)), local)" "$D/a" \
        --local-hosts 0-$((PODK - 1)) --machine-name a --pool "$D/pool.img" "${POD[@]}"
    PA=$LPID
    start "pod, machine b (hosts $PODK-$((N - 1)), remote)" "$D/b" --local-hosts $PODK-$((N - 1)) \
        --machine-name b --pool "ucx://127.0.0.1:$SERVE_PORT" --pool-key "$D/pool.img.key" "${REMOTE[@]}" "${POD[@]}"
    PB=$LPID
    if [ $DRY = 0 ]; then
        # the service's memory once the first host says all run
        ( for _ in $(seq 1 7200); do
              if grep -qs '^BENCH-MEM:all' "$D"/a/host*.log "$D"/b/host*.log; then
                  cp "/proc/$SERVE_PID/smaps_rollup" "$D/serve.rollup" 2>/dev/null || true
                  break
              fi
              kill -0 "$PA" 2>/dev/null || break
              sleep 0.5
          done ) &
        SW=$!
        watch "$D/a:0-$((PODK - 1))" "$D/b:$PODK-$((N - 1))"
        wait $SW || true
        finish "pod b" "$D/b" "$PB"
        finish "pod a" "$D/a" "$PA"
        LPIDS=()
        unserve
        rm -f "$D/pool.img"
    else
        [ "$(grep -c 'pool=ucx://' "$D/b.dry-run")" = "$PODK" ] || die "pod: not $PODK remote hosts on machine b"
    fi
    log "pod: done"
fi

if [ $DRY = 1 ]; then
    log "dry run: arguments, tools and every launcher's options are fine; nothing booted"
    exit 0
fi
LOAD1=$(load)
T1=$(date +%s)
log "load average at end: $LOAD1"
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
python3 - "$W/run.json" <<EOF
import json, os, sys
json.dump({"date": "$DATE", "command": "bash scripts/bench-remote.sh",
           "host": {"cpus": os.cpu_count(), "cpu": """$CPU""", "load_start": "$LOAD0",
                    "load_end": "$LOAD1", "wall_s": $((T1 - T0))},
           "options": {"quick": $QUICK == 1, "rounds": $ROUNDS, "repeat": $REPEAT,
                       "pod_hosts": $PODK, "skip": "$SKIP", "far": "$FAR",
                       "heartbeat_timeout_ms": $HB, "remote_timeout_ms": $RTO,
                       "ar_hosts_list": "$AR_LIST", "ar_sizes": "$AR_SIZES"}},
          open(sys.argv[1], "w"), indent=1)
EOF
report "$W" | tee "$W/table.txt"

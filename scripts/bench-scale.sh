#!/usr/bin/env bash
# Scaling benchmark (docs/benchmarks.md section 8): the same pool shared by
# 1, 2, 4, 8, 16, 32 and 64 guests on this machine, each running the atomic
# counter (cxlpod-litmus --test atomic --atomic-seconds: every host adds
# for the same seconds at once, from 2 hosts), the message queue
# (cxlpod-mq) and the allreduce (cxlpod-allreduce); per pod size: the time
# from start to every region ready, throughput per host and in all, and the
# host memory per guest (the QEMUs' summed PSS, sampled while the jobs run:
# the pool's page cache counts once).  Then a 2-host pod on pools of
# 256 MiB .. 16 GiB (sparse files): boot, and the cost of the same
# coherence operations on the same 4 MiB range, to show what grows with the
# pool and what with the range operated on.  Prints tables, writes
# results.json and draws scaling.png (gnuplot) in the work dir.  Each pod's
# row also has the launcher's own CPU time per guest.
#
# With --launcher it boots nothing and measures the launcher alone: pods of
# 1..256 stand-in QEMUs (tests/unit/fake-qemu.sh: console lines, the
# markers, a job's output, no guest), all started at once, with the pod
# network when vde_switch is installed; per pod size the launcher's CPU
# time (its --json launcher_cpu_s) per host and per host and second of the
# pod's wall time, which stay flat when nothing it does per host grows
# with the hosts.  Tables and launcher.json in the work dir.
#
#   bash scripts/bench-scale.sh [--no-build] [--quick] [--hosts LIST]
#                               [--pool-sizes LIST] [--workdir DIR] [--report DIR]
#                               [--dry-run] [--launcher]
#
#   --hosts LIST       pod sizes (default 1,2,4,8,16,32,64; --quick 1,2,4;
#                      --launcher 1,8,32,64,128,256)
#   --pool-sizes LIST  pool sizes of the sweep (default 256M,1G,4G,16G;
#                      --quick 256M,1G)
#   --quick            smaller pods and workloads: a smoke test of the script
#   --workdir DIR      default build/bench-scale (emptied first)
#   --report DIR       boot nothing: print the tables again from DIR
#   --dry-run          build and boot nothing: check the arguments, the tools
#                      and every pod's launcher options (cxlpod-launch
#                      --dry-run), in a temporary work dir unless --workdir
#   --launcher         the launcher's own CPU time with stand-in QEMUs (above)
#
# Guests run under TCG on however many cores the machine has (2 here): the
# pods' throughput is what those cores give N emulated hosts, wall-clock,
# and moves with the machine's load (printed).
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_ALL=1 QUICK=0 HOSTS="" SIZES="" REPORT="" DRY=0 WGIVEN= LAUNCHER=0
W=$BUILD/bench-scale
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_ALL=0; shift ;;
        --dry-run) DRY=1; BUILD_ALL=0; shift ;;
        --quick) QUICK=1; shift ;;
        --launcher) LAUNCHER=1; shift ;;
        --hosts) [ $# -ge 2 ] || die "--hosts needs a list"; HOSTS=$2; shift 2 ;;
        --pool-sizes) [ $# -ge 2 ] || die "--pool-sizes needs a list"; SIZES=$2; shift 2 ;;
        --workdir) [ $# -ge 2 ] || die "--workdir needs a directory"; W=$2; WGIVEN=1; shift 2 ;;
        --report) [ $# -ge 2 ] || die "--report needs a work dir"; REPORT=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
if [ $LAUNCHER = 1 ]; then
    HOSTS=${HOSTS:-1,8,32,64,128,256} SIZES=${SIZES:-256M}
elif [ $QUICK = 1 ]; then
    HOSTS=${HOSTS:-1,2,4} SIZES=${SIZES:-256M,1G}
    MSGS=100 AR=64K ATOM_S=0.5
else
    HOSTS=${HOSTS:-1,2,4,8,16,32,64} SIZES=${SIZES:-256M,1G,4G,16G}
    MSGS=400 AR=64K,1M ATOM_S=2
fi
[[ $HOSTS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--hosts wants numbers separated by commas"
[[ $SIZES =~ ^[0-9]+[MG](,[0-9]+[MG])*$ ]] || die "--pool-sizes wants sizes like 256M,4G"
[ $DRY = 0 ] || [ -z "$REPORT" ] || die "--dry-run and --report: give one"
if [ $LAUNCHER = 1 ] && { [ $DRY = 1 ] || [ -n "$REPORT" ]; }; then
    die "--launcher boots nothing and keeps no report: drop --dry-run / --report"
fi
[ $DRY = 0 ] || [ -n "$WGIVEN" ] || W=$(mktemp -d /tmp/cxlpod-bench-scale-dry.XXXXXX)

report() {
    python3 - "$1" <<'EOF'
import json, os, subprocess, sys

W = sys.argv[1]
info = json.load(open(os.path.join(W, "run.json")))

def tool_lines(path, tool):
    out = []
    try:
        for l in open(path):
            l = l.strip().replace("\r", "")
            if l.startswith('{"tool":"%s"' % tool):
                out.append(json.loads(l))
    except OSError:
        pass
    return out

def launch(d):
    try:
        return json.loads(open(os.path.join(d, "launch.json")).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

def each_pod(keys, fmt, label):
    """(key, dir, launcher report, ready times, peak summed PSS in MiB) of each
    pod that reported; a line for each that did not"""
    for k in keys:
        d = os.path.join(W, fmt % k)
        lj = launch(d)
        if not lj:
            print(label % k + "  (pod failed: see %s)" % d)
            continue
        boots = [r["boot_s"] for r in lj["results"] if r.get("boot_s") is not None]
        try:
            pss = max(int(x) for x in open(os.path.join(d, "pss.txt")).read().split()) / 1024
        except (OSError, ValueError):
            pss = None
        yield k, d, lj, boots, pss

res = {"date": info["date"], "host": info["host"], "pods": [], "pool_sizes": []}
print()
print("cxlpod scaling benchmark, %s; %s" % (info["date"], info["host"]["cpu"]))
print("%d CPUs, TCG, load average %s before, %s after; guests -smp 2 -m 256M, pool 256 MiB"
      % (info["host"]["cpus"], info["host"]["load_before"], info["host"]["load_after"]))
print()
hdr = ("%5s %8s %8s %9s %9s %9s %12s %12s %11s %11s %10s %10s"
       % ("hosts", "boot s", "max boot", "all ready", "MiB/guest", "launch ms", "atomic op/s",
          "(all hosts)", "mq msg/s", "(all)", "allred MB/s", "(all)"))
print(hdr)
print("-" * len(hdr))
for n, d, lj, boots, pss in each_pod(info["hosts"], "pod%d", "%5d"):
    atom, mq, ar = [], [], []
    for i in range(n):
        out = os.path.join(d, "host%d.out" % i)
        for l in tool_lines(out, "cxlpod-litmus"):
            for r in l.get("results", []):
                if r.get("test") == "atomic" and r.get("area") == "coherent" and \
                        r.get("proto") == "none" and "ops_per_s" in r:
                    atom.append(r["ops_per_s"])
        for l in tool_lines(out, "cxlpod-mq"):
            if l.get("msgs_per_s"):
                mq.append(l["msgs_per_s"])
        for l in tool_lines(out, "cxlpod-allreduce"):
            s = [x for x in l.get("sizes", []) if "MBps" in x]
            if s:
                ar.append(s[-1]["MBps"])
    mem = pss / n if pss else None
    lcpu = lj.get("launcher_cpu_s")
    lms = lcpu * 1e3 / n if lcpu is not None else None
    avg = lambda v: sum(v) / len(v) if v else 0
    row = {"hosts": n, "ready_s_median": sorted(boots)[len(boots) // 2] if boots else None,
           "ready_s_max": max(boots) if boots else None, "wall_s": lj.get("wall_s"),
           "all_ready_s": lj.get("all_ready_s"),
           "mib_per_guest": mem, "launcher_cpu_ms_per_guest": lms,
           "atomic_ops_per_s_host": avg(atom),
           "atomic_ops_per_s_all": sum(atom), "mq_msgs_per_s_host": avg(mq),
           "mq_msgs_per_s_all": sum(mq), "allreduce_MBps_host": avg(ar),
           "allreduce_MBps_all": sum(ar), "allreduce_bytes": info["allreduce_last"]}
    res["pods"].append(row)
    print("%5d %8.1f %8.1f %9.1f %9s %9s %12s %12s %11.0f %11.0f %10.1f %10.1f"
          % (n, row["ready_s_median"] or 0, row["ready_s_max"] or 0, row["all_ready_s"] or 0,
             "%.0f" % mem if mem else "-", "%.1f" % lms if lms is not None else "-",
             "%.0f" % avg(atom) if atom else "-", "%.0f" % sum(atom) if atom else "-",
             avg(mq), sum(mq), avg(ar), sum(ar)))
print("(boot s: one guest's QEMU start to its CXL region ready, median and slowest guest;")
print(" all ready: the pod's first QEMU start to the last region ready; MiB/guest: peak of the")
print(" QEMUs' summed PSS / hosts; launch ms: the launcher's own CPU time / hosts;")
print(" atomic: lock xadd on one coherent counter, every host adding")
print(" for the same %s s at once (contended), from 2 hosts; mq: messages received per second;"
      % info.get("atomic_seconds", "?"))
print(" allreduce: %s per host)" % info["allreduce_last"])

print()
print("pool size sweep: 2 hosts, the same 4 MiB range operated on (non-coherent area)")
hdr = ("%9s %8s %9s %12s %12s %12s" % ("pool", "ready s", "MiB/guest", "wb ns/line",
                                       "wb us/MiB", "inv us/MiB"))
print(hdr)
print("-" * len(hdr))
for sz, d, lj, boots, pss in each_pod(info["pool_sizes"], "size%s", "%9s"):
    b = tool_lines(os.path.join(d, "host0.out"), "cxlpod-bench")
    nc = b[-1]["areas"].get("noncoherent", {}) if b else {}
    mem = pss / 2 if pss else None
    row = {"pool": sz, "ready_s_max": max(boots) if boots else None, "mib_per_guest": mem,
           "wb_line_ns": nc.get("wb_line_ns"), "wb_MiB_us": nc.get("wb_MiB_us"),
           "inv_MiB_us": nc.get("inv_MiB_us")}
    res["pool_sizes"].append(row)
    f = lambda v, fmt: fmt % v if v is not None else "-"
    print("%9s %8s %9s %12s %12s %12s"
          % (sz, f(row["ready_s_max"], "%.1f"), f(mem, "%.0f"), f(row["wb_line_ns"], "%.0f"),
             f(row["wb_MiB_us"], "%.0f"), f(row["inv_MiB_us"], "%.0f")))
print("(guests -m 1G here: a 16 GiB region's page structures need 256 MiB of guest RAM)")
json.dump(res, open(os.path.join(W, "results.json"), "w"), indent=1)

pods = [p for p in res["pods"] if p["ready_s_max"] is not None]
if pods:
    dat = os.path.join(W, "scaling.dat")
    with open(dat, "w") as f:
        f.write("# hosts ready_median ready_max mib_per_guest atomic_host atomic_all "
                "mq_host mq_all ar_host ar_all all_ready\n")
        for p in pods:
            f.write("%d %g %g %g %g %g %g %g %g %g %g\n" % (
                p["hosts"], p["ready_s_median"], p["ready_s_max"], p["mib_per_guest"] or 0,
                p["atomic_ops_per_s_host"], p["atomic_ops_per_s_all"], p["mq_msgs_per_s_host"],
                p["mq_msgs_per_s_all"], p["allreduce_MBps_host"], p["allreduce_MBps_all"],
                p["all_ready_s"] or 0))
    png = os.path.join(W, "scaling.png")
    g = ['set terminal png size 1000,720', 'set output "%s"' % png,
         'set multiplot layout 2,2 title "cxlpod: one pool shared by N guests, TCG on %d cores (%s)"'
         % (info["host"]["cpus"], info["date"][:10]),
         'set logscale x 2', 'set xlabel "hosts"', 'set grid', 'set key top left',
         'set ylabel "seconds"',
         'plot "%s" u 1:2 w lp t "one guest: start to region ready (median)", '
         '"" u 1:3 w lp t "(slowest guest)", "" u 1:11 w lp t "the pod: every region ready"' % dat,
         'set ylabel "MiB"',
         'plot "%s" u 1:4 w lp t "host memory per guest (PSS)"' % dat,
         'set ylabel "messages/s"', 'set key top right',
         'plot "%s" u 1:7 w lp t "mq per host", "" u 1:8 w lp t "mq all hosts"' % dat,
         'set ylabel "MB/s"',
         'plot "%s" u 1:9 w lp t "allreduce per host", "" u 1:10 w lp t "allreduce all hosts"'
         % dat,
         'unset multiplot']
    try:
        subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, check=True,
                       capture_output=True)
        print("figure: %s" % png)
    except (OSError, subprocess.CalledProcessError) as e:
        print("(no figure: gnuplot failed or is missing: %s; scripts/deps.sh installs gnuplot-nox)"
              % e)
print("raw results: %s/results.json; each pod's work dir under %s" % (W, W))
EOF
}
if [ -n "$REPORT" ]; then
    [ -f "$REPORT/run.json" ] || die "$REPORT is not a work dir of scripts/bench-scale.sh"
    report "$REPORT"
    exit 0
fi

[ $BUILD_ALL = 0 ] || bash "$TOP/scripts/build-all.sh"
L=$BUILD/meson/host-tools/cxlpod-launch
[ -x "$L" ] || die "$L missing: run scripts/build-all.sh"
case $W in /|"$TOP"|"$HOME") die "refusing to use $W as the work dir" ;; esac
rm -rf "$W"; mkdir -p "$W"
W=$(cd "$W" && pwd)

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD0=$(load) DATE=$(date -Iseconds)

# --launcher: the launcher alone, its QEMUs stand-ins (see the top)
if [ $LAUNCHER = 1 ]; then
    FAKE=$TOP/tests/unit/fake-qemu.sh
    [ -x "$FAKE" ] || die "$FAKE missing"
    NET=()
    if command -v vde_switch >/dev/null || [ -x /usr/sbin/vde_switch ]; then NET=(--net); fi
    if [ $QUICK = 1 ]; then FB=2 FJ=2; else FB=5 FJ=5; fi
    touch "$W/kernel" "$W/initrd"
    IFS=, read -r -a HL <<<"$HOSTS"
    for n in "${HL[@]}"; do
        log "fake$n: $n stand-in QEMUs (${FB} s of boot, ${FJ} s of job, 20 lines a second) ${NET[*]}"
        FAKE_BOOT_S=$FB FAKE_JOB_S=$FJ FAKE_LINES=20 \
            "$L" -q -n "$n" -w "$W/fake$n" --qemu "$FAKE" --kernel "$W/kernel" \
            --initrd "$W/initrd" --pool-backend file --boot-parallel 0 --timeout 600 \
            "${NET[@]}" --json -- true >"$W/fake$n.out" 2>"$W/fake$n.err" \
            || warn "fake$n: the launcher failed; see $W/fake$n.err"
        tail -n 1 "$W/fake$n.out" >"$W/fake$n.json"
        echo "$(load)" >"$W/fake$n.load"
    done
    python3 - "$W" "$DATE" "$LOAD0" "$(nproc)" "$HOSTS" "${NET[*]}" "$FB" "$FJ" <<'EOF2' | tee "$W/table.txt"
import json, os, sys
W, date, l0, cpus, hosts, net, fb, fj = sys.argv[1:]
rows = []
print("cxlpod-launch's own CPU time with N stand-in QEMUs (tests/unit/fake-qemu.sh), %s" % date)
print("%s CPUs, load average %s before; each host %s s of console lines (20 a second), the "
      "ready%s marker, %s s of job output; all started at once (--boot-parallel 0)%s"
      % (cpus, l0, fb, " and up" if net else "", fj, ", --net" if net else ""))
print()
hdr = "%6s %8s %10s %12s %14s %15s %7s %16s" % ("hosts", "wall s", "CPU s", "CPU ms/host",
                                                "(past first)", "CPU us/host/s", "ok",
                                                "load after")
print(hdr)
print("-" * len(hdr))
for n in [int(x) for x in hosts.split(",")]:
    try:
        j = json.loads(open(os.path.join(W, "fake%d.json" % n)).read())
        load = open(os.path.join(W, "fake%d.load" % n)).read().strip()
    except (OSError, ValueError):
        print("%6d  (the launcher failed: see %s/fake%d.err)" % (n, W, n))
        continue
    cpu, wall = j["launcher_cpu_s"], j["wall_s"]
    ok = sum(r["status"] == "ok" for r in j["results"])
    row = {"hosts": n, "wall_s": wall, "launcher_cpu_s": cpu, "cpu_ms_per_host": cpu * 1e3 / n,
           "cpu_us_per_host_second": cpu * 1e6 / n / wall, "ok": ok, "load_after": load}
    # what each host past the smallest pod's added: the fixed start-up
    # cost (paths, the TSC measurement, the switch) taken out
    first = rows[0] if rows else None
    row["marginal_ms_per_host"] = ((cpu - first["launcher_cpu_s"]) * 1e3 / (n - first["hosts"])
                                   if first and n > first["hosts"] else None)
    rows.append(row)
    print("%6d %8.2f %10.3f %12.2f %14s %15.1f %7s %16s"
          % (n, wall, cpu, row["cpu_ms_per_host"],
             "%.2f" % row["marginal_ms_per_host"] if row["marginal_ms_per_host"] else "-",
             row["cpu_us_per_host_second"], "%d/%d" % (ok, n), load))
print("(CPU: the launcher's user + system time, all its threads, not its QEMUs; (past first):")
print(" its CPU time beyond the first row's, per host beyond the first row's; us/host/s: divided")
print(" by the hosts and the pod's wall time, the cost of watching one host for a second)")
json.dump({"date": date, "cpus": int(cpus), "load_before": l0, "net": bool(net), "rows": rows},
          open(os.path.join(W, "launcher.json"), "w"), indent=1)
EOF2
    exit 0
fi
LPID=""
trap '[ -z "$LPID" ] || { kill -TERM "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; }' EXIT
trap 'exit 130' INT TERM

# pod NAME N TIMEOUT JOB LAUNCHER-OPTIONS...: run one pod, sample the summed
# PSS of its QEMUs every 2 s into NAME/pss.txt (KiB), keep its JSON report
pod() {
    local name=$1 n=$2 tmo=$3 job=$4; shift 4
    local dir=$W/$name t0=$SECONDS
    log "$name: $n host(s): $*"
    if [ $DRY = 1 ]; then
        "$L" --dry-run -q -n "$n" -w "$dir" --timeout "$tmo" --json "$@" -- "$job" \
            >"$W/$name.dry-run" 2>&1 || { cat "$W/$name.dry-run" >&2; die "$name: the launcher refuses its options"; }
        [ "$(grep -c -- '-device cxl-shm' "$W/$name.dry-run")" = "$n" ] || die "$name: not $n QEMU command lines"
        return
    fi
    "$L" -q -n "$n" -w "$dir" --timeout "$tmo" --json "$@" -- "$job" \
        >"$W/$name.out" 2>"$W/$name.err" &
    LPID=$!
    while kill -0 $LPID 2>/dev/null; do
        local sum=0 p
        for p in $(pgrep -P $LPID -f qemu-system || true); do
            sum=$((sum + $(awk '/^Pss:/ { print $2; exit }' /proc/$p/smaps_rollup 2>/dev/null || echo 0)))
        done
        [ $sum = 0 ] || echo $sum >>"$dir.pss"
        sleep 2
        printf '\r[cxlpod] %s: %d s' "$name" $((SECONDS - t0)) >&2
    done
    printf '\n' >&2
    local rc=0
    wait $LPID || rc=$?
    LPID=""
    mkdir -p "$dir"
    [ -f "$dir.pss" ] && mv "$dir.pss" "$dir/pss.txt"
    tail -n 1 "$W/$name.out" >"$dir/launch.json"
    [ $rc = 0 ] || warn "$name: the pod failed (launcher exit $rc); see $W/$name.err and $dir"
}

IFS=, read -r -a HL <<<"$HOSTS"
IFS=, read -r -a SL <<<"$SIZES"
for n in "${HL[@]}"; do
    # the tools wait for their peers longer in larger pods (the launcher
    # boots a few guests at a time; 16 hosts missed the default 120 s)
    to="--timeout $((120 + 30 * n))"
    job="cxlpod-mq $to --messages $MSGS --json; cxlpod-allreduce $to --sizes $AR --json"
    [ "$n" -lt 2 ] || job="cxlpod-litmus $to --test atomic --method doorbell --atomic-seconds $ATOM_S --json; $job"
    pod "pod$n" "$n" $((600 + 40 * n)) "$job; true" \
        --mem 256M --size 256M --coherent-size 64M
done
for sz in "${SL[@]}"; do
    pod "size$sz" 2 900 \
        "cxlpod-bench --json --method doorbell --size 4M --lat-size 4M --min-time 0.05; true" \
        --mem 1G --size "$sz" --coherent-size 64M
done
LOAD1=$(load)
if [ $DRY = 1 ]; then
    [ -n "$WGIVEN" ] || rm -rf "$W"
    log "dry run: arguments, tools and every pod's launcher options are fine; nothing booted"
    exit 0
fi

CPU=$(sed -n 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n1)
python3 - "$W/run.json" "$DATE" "$LOAD0" "$LOAD1" "$(nproc)" "$CPU" "$HOSTS" "$SIZES" "${AR##*,}" "$ATOM_S" <<'EOF'
import json, sys
f, date, l0, l1, cpus, cpu, hosts, sizes, ar, atom_s = sys.argv[1:]
json.dump({"date": date, "host": {"cpus": int(cpus), "cpu": cpu, "load_before": l0,
                                  "load_after": l1},
           "hosts": [int(x) for x in hosts.split(",")], "pool_sizes": sizes.split(","),
           "allreduce_last": ar, "atomic_seconds": float(atom_s)}, open(f, "w"))
EOF
report "$W" | tee "$W/table.txt"

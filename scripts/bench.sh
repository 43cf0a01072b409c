#!/usr/bin/env bash
# The cxlpod benchmark (docs/benchmarks.md): builds what it needs
# (scripts/build-all.sh, incremental), then boots one guest at a time:
#
#   A  cxl-shm pool (512 MiB, coherent window 64 MiB, direct mode): cxlpod-bench
#      on guest RAM, the coherent window and the non-coherent area, with the
#      coherence operations by doorbell and native instructions; then it
#      touches the whole pool (host memory worst case)
#   B  stock cxl-type3 (512 MiB): cxlpod-bench --raw on guest RAM and
#      /dev/dax0.0 (every access MMIO: smaller bandwidth buffer)
#   C  cxl-shm pool with a 448 MiB coherent window (64 MiB non-coherent):
#      touches the whole pool, to show what scales with which area
#   D  cxl-shm in mode=timed (every access through the cache model), the
#      small buffers of B
#
# Guest A also measures the cost of one writeback / invalidate / flush call
# from 64 B to 64 MiB (--quick: 4 MiB), doorbell and native, beside a guest
# memcpy; the host's memcpy of the same sizes and the line engine's floor
# (tests/unit/bench_lines: compare image and twin, copy to pool and twin)
# run right before and after guest A.  Guest B also maps guest A's pool file
# as a plain ivshmem-plain BAR (the same bytes, no coherence model) and runs
# cxlpod-bench --raw on it.  gnuplot draws the cost curves from results.json
# (cost-curves.png in the work dir).
#
# and samples the host memory of each QEMU (/proc/PID/smaps_rollup, smaps,
# and the RAM block addresses from QMP) while its guest runs.  Prints one
# table; keeps everything in the work dir (results.json, table.txt, logs).
#
#   bash scripts/bench.sh [--no-build] [--quick] [--rounds R] [--repeat N]
#                         [--no-probe] [--latency-ns NS] [--workdir DIR]
#                         [--keep-pools] [--report DIR] [--dry-run]
#
#   --no-build     skip scripts/build-all.sh (use what is built)
#   --quick        small working sets, one run, one repetition (a smoke test,
#                  ~2 min; its numbers sit in the host caches: not the benchmark)
#   --rounds R     run cxlpod-bench R times in each guest (default 3)
#   --repeat N     and each measurement N times per run (default 3); the
#                  table shows the best of the R x N, results.json also the
#                  median of the R runs
#   --no-probe     skip guest C (the coherent-window memory probe)
#   --latency-ns   cxl-shm injected latency per coherence-operation line (0)
#   --workdir DIR  default build/bench (emptied first)
#   --keep-pools   keep the pool files (deleted at the end by default)
#   --report DIR   boot nothing: print the table again from an earlier work dir
#   --dry-run      build and boot nothing: check the arguments, the tools and
#                  every guest's launcher options (cxlpod-launch --dry-run),
#                  in a temporary work dir unless --workdir is given
#
# CXLPOD_QEMU=PATH benchmarks another QEMU build (e.g. an older one, for a
# before/after comparison on one machine).
#
# Runs one guest at a time (-smp 2 each) and one benchmark at a time; the
# figures are wall-clock times under TCG, so the load of the machine shows
# (the load average is printed with the results).
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_ALL=1 QUICK=0 ROUNDS=3 REPEAT=3 PROBE=1 LAT_NS=0 KEEP=0 REPORT="" DRY=0 WGIVEN=
W=$BUILD/bench
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_ALL=0; shift ;;
        --dry-run) DRY=1; BUILD_ALL=0; shift ;;
        --quick) QUICK=1; ROUNDS=1; REPEAT=1; shift ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
        --repeat) [ $# -ge 2 ] || die "--repeat needs a number"; REPEAT=$2; shift 2 ;;
        --no-probe) PROBE=0; shift ;;
        --latency-ns) [ $# -ge 2 ] || die "--latency-ns needs a number"; LAT_NS=$2; shift 2 ;;
        --workdir) [ $# -ge 2 ] || die "--workdir needs a directory"; W=$2; WGIVEN=1; shift 2 ;;
        --keep-pools) KEEP=1; shift ;;
        --report) [ $# -ge 2 ] || die "--report needs a work dir"; REPORT=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "--repeat wants a positive number"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
[[ $LAT_NS =~ ^[0-9]+$ ]] || die "--latency-ns wants a number"
[ $DRY = 0 ] || [ -z "$REPORT" ] || die "--dry-run and --report: give one"
if [ $DRY = 1 ] && [ -z "$WGIVEN" ]; then
    W=$(mktemp -d /tmp/cxlpod-bench-dry.XXXXXX)
fi
command -v python3 >/dev/null || die "python3 not found (scripts/deps.sh)"

report() {
    python3 - "$1" <<'EOF'
import json, os, re, sys, platform

W = sys.argv[1]
info_ = open(os.path.join(W, "run.info")).read().splitlines()
load0, load1, wall, repeat, quick, small, date, rounds = \
    (info_ + ["?", "?", "0", "1", "0", "256K", "?", "1"][len(info_):])[:8]
MiB = 1 << 20

def jlines(name, tool, pred=lambda d: True):
    out = []
    for l in open(os.path.join(W, name + ".out")):
        l = l.strip()
        if l.startswith('{"tool":"%s"' % tool):
            d = json.loads(l)
            if pred(d):
                out.append(d)
    return out

def jline(name, tool, pred=lambda d: True):
    l = jlines(name, tool, pred)
    return l[-1] if l else None

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

def combine(runs, pick):
    """Per figure across runs: pick(values) (best), and the median."""
    out, med = {}, {}
    for k, v in runs[0].items():
        if isinstance(v, dict):
            out[k], med[k] = combine([r[k] for r in runs], pick)
        elif isinstance(v, (int, float)) and not k.endswith("_ratio"):
            vals = [r[k] for r in runs]
            lower_better = k.endswith("_ns") or k.endswith("_us")
            out[k] = (min if lower_better else max)(vals) if pick == "best" else median(vals)
    return out, med

def merge(runs):
    best = combine(runs, "best")[0]
    med = combine(runs, "median")[0]
    return best, med

def ramblocks(path):
    blocks = []
    try:
        txt = json.loads(open(path).read())["return"]
    except Exception:
        return blocks
    for l in txt.replace("\r", "").split("\n"):
        m = re.match(r"^\s*(.*?)\s*(\d+ [KMG]?i?B)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+"
                     r"(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(r[ow])\s*$", l)
        if m:
            blocks.append({"name": m[1], "total": int(m[5], 16), "hva": int(m[6], 16)})
    return blocks

def smaps(path):
    vmas, cur = [], None
    for l in open(path):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", l)
        if m:
            cur = {"start": int(m[1], 16), "end": int(m[2], 16), "name": m[4], "rss": 0, "anon": 0}
            vmas.append(cur)
            continue
        f = l.split()
        if cur and len(f) >= 2 and f[0] in ("Rss:", "Anonymous:"):
            cur["rss" if f[0] == "Rss:" else "anon"] = int(f[1]) * 1024
    return vmas

def rollup(path):
    r = {}
    for l in open(path):
        f = l.split()
        if len(f) >= 3 and f[2] == "kB":
            r[f[0].rstrip(":")] = int(f[1]) * 1024
    return r

def memory(name, tag, pool_size, nc_size):
    base = os.path.join(W, name, "mem-" + tag)
    if not os.path.exists(base + ".rollup"):
        return None
    r = rollup(base + ".rollup")
    vmas = smaps(base + ".smaps")
    blocks = ramblocks(base + ".ramblock")

    def inblock(pred):
        rss = anon = 0
        for b in blocks:
            if pred(b):
                for v in vmas:
                    if v["start"] < b["hva"] + b["total"] and v["end"] > b["hva"]:
                        rss += v["rss"]; anon += v["anon"]
        return rss, anon

    pcram = inblock(lambda b: b["name"] == "pc.ram")
    image = inblock(lambda b: b["name"].endswith("cxl-shm-image"))
    pool = inblock(lambda b: b["name"] not in ("pc.ram",) and b["total"] == pool_size)
    # the twin: the device's anonymous mapping of exactly the non-coherent
    # area's size that is no RAM block
    twin = [v for v in vmas if nc_size and v["end"] - v["start"] == nc_size and not v["name"]
            and not any(v["start"] < b["hva"] + b["total"] and v["end"] > b["hva"]
                        for b in blocks)]
    twin_rss = sum(v["rss"] for v in twin) if len(twin) == 1 else None
    anon = r.get("Anonymous", 0)
    return {"rss": r.get("Rss", 0), "pss": r.get("Pss", 0),
            "private": r.get("Private_Clean", 0) + r.get("Private_Dirty", 0),
            "anon": anon, "guest_ram_rss": pcram[0], "image_rss": image[0],
            "twin_rss": twin_rss, "pool_map_rss": pool[0],
            "other_anon": anon - pcram[1] - image[1] - pool[1] - (twin_rss or 0),
            "nc_size": nc_size}

shm_runs = jlines("shm", "cxlpod-bench", lambda d: "areas" in d and "curve" not in d)
curve = jline("shm", "cxlpod-bench", lambda d: "curve" in d)
t3_runs = jlines("type3", "cxlpod-bench",
                 lambda d: "areas" in d and "resource" not in d.get("dax", ""))
ivs_runs = jlines("type3", "cxlpod-bench",
                  lambda d: "areas" in d and "resource" in d.get("dax", ""))
timed_runs = (jlines("timed", "cxlpod-bench", lambda d: "areas" in d)
              if os.path.exists(os.path.join(W, "timed.out")) else [])
info = jline("shm", "cxlpod-info")
shm, shm_med = merge([d["areas"] for d in shm_runs])
t3, t3_med = merge([d["areas"] for d in t3_runs])
ram, coh, nc, dax, ram3 = shm["ram"], shm["coherent"], shm["noncoherent"], t3["dax"], t3["ram"]
mram, mcoh, mnc, mdax = shm_med["ram"], shm_med["coherent"], shm_med["noncoherent"], t3_med["dax"]
ivs = merge([d["areas"] for d in ivs_runs])[0]["dax"] if ivs_runs else None
tim = merge([d["areas"] for d in timed_runs])[0] if timed_runs else None

try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    cpu = platform.processor()
res = {"date": date,
       "host": {"cpus": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
                "load_before": load0, "load_after": load1, "wall_s": int(wall)},
       "accel": "tcg", "rounds": int(rounds), "repeat": int(repeat), "quick": quick == "1",
       "best": {"cxl_shm": shm, "cxl_type3": t3},
       "median_of_rounds": {"cxl_shm": shm_med, "cxl_type3": t3_med},
       "runs": {"cxl_shm": shm_runs, "cxl_type3": t3_runs, "ivshmem": ivs_runs,
                "cxl_shm_timed": timed_runs}, "cxl_shm_info": info}
if ivs:
    res["best"]["ivshmem"] = ivs
if tim:
    res["best"]["cxl_shm_timed"] = tim

def spd_bw(a, b): return a["read_MBps"] / b["read_MBps"] if b["read_MBps"] else 0
def spd_lat(a, b, k="lat_ns"): return b[k] / a[k] if a[k] else 0
def mib(x): return x / MiB

print()
print("cxlpod benchmark, %s" % res["date"])
print("host: %d CPUs (%s), TCG, load average %s before, %s after; %d s wall"
      % (os.cpu_count(), cpu, load0, load1, int(wall)))
print("guests: -smp 2 -m 512M, one at a time; pool 512 MiB; cxl-shm direct mode, coherent "
      "window %d MiB, latency %s ns" % (info["coherent_size"] >> 20, info["latency_ns"]))
print("best of %s runs of cxlpod-bench x %s repetitions per figure%s"
      % (rounds, repeat, "  (--quick: small sets, NOT the benchmark)" if quick == "1" else ""))
print()
print("speed ratios: bandwidth / reference bandwidth, reference latency / latency "
      "(higher = faster;")
print("targets: direct mode >= 0.8 vs guest RAM, >= 50 vs stock cxl-type3)")
print()
hdr = ("%-24s %5s %9s %7s %8s  %5s %8s %7s %8s  %9s %7s %8s"
       % ("area", "MiB", "read MB/s", "vs RAM", "vs type3", "chase", "lat ns", "vs RAM",
          "vs type3", "lat 256K", "vs RAM", "vs type3"))
print(hdr)
print("-" * len(hdr))
rows = [("coherent window", coh, ram), ("non-coherent area", nc, ram),
        ("guest RAM", ram, ram), ("stock cxl-type3 *", dax, ram3)]
if ivs:
    rows.append(("ivshmem-plain BAR +", ivs, ram3))
rows.append(("guest RAM (type3 guest)", ram3, ram3))
if tim:
    rows += [("timed: coherent window #", tim["coherent"], tim["ram"]),
             ("timed: non-coherent #", tim["noncoherent"], tim["ram"]),
             ("guest RAM (timed guest)", tim["ram"], tim["ram"])]
for label, a, ref in rows:
    print("%-24s %5d %9.0f %7.2f %8.1f  %5d %8.1f %7.2f %8.2f  %9.1f %7.2f %8.1f"
          % (label, a["size"] >> 20, a["read_MBps"], spd_bw(a, ref), spd_bw(a, dax),
             a["lat_size"] >> 20, a["lat_ns"], spd_lat(a, ref), spd_lat(a, dax),
             a.get("lat_small_ns", 0), spd_lat(a, ref, "lat_small_ns"),
             spd_lat(a, dax, "lat_small_ns")))
print("* stock cxl-type3: every access is MMIO, so the bandwidth buffer is %d MiB (not %d);"
      % (dax["size"] >> 20, ram["size"] >> 20))
print("  its ratios \"vs RAM\" are against the RAM of its own guest.")
if ivs:
    print("+ ivshmem-plain: guest A's pool file (its data area) as a plain shared-memory BAR in the")
    print("  type3 guest: the same bytes with no coherence model and no device in the path")
    print("  (what Tigon and most multi-VM shared-memory work use); ratios against that guest's RAM.")
if tim:
    print("# cxl-shm mode=timed: every access goes through the device's cache model (%d MiB buffers);"
          % (tim["coherent"]["size"] >> 20))
    print("  ratios against the RAM of its own guest.")
print("  lat 256K: chase over 256 KiB (64 pages, fit the emulated TLB): the cost of one load")
print("  without guest page walks; the large chase pays TCG's page walk on most loads.")
print()
print("coherence operations, cxl-shm non-coherent area (%d MiB buffer; coherent-window calls are"
      % (nc["size"] >> 20))
print("no-ops in the library: %.0f-%.0f ns per call)"
      % (min(coh["ops"][m]["wb_line_ns"] for m in coh["ops"]),
         max(coh["ops"][m]["wb_line_ns"] for m in coh["ops"])))
print("%-10s %-9s %12s %12s %12s" % ("operation", "method", "ns per line", "us per MiB", "MB/s"))
for op, key in (("writeback", "wb"), ("invalidate", "inv"), ("flush", "flush")):
    for meth, o in nc["ops"].items():
        us = o[key + "_MiB_us"]
        print("%-10s %-9s %12.0f %12.0f %12.0f"
              % (op, meth, o[key + "_line_ns"], us, MiB / 1e6 / (us / 1e6) if us else 0))
print("(per line: one call per 64-byte line over %d lines, each dirtied first for writeback/"
      % min(4096, nc["size"] // 64))
print(" flush; per MiB: one call per MiB, every line dirty for writeback/flush, clean for invalidate;")
print(" native = clwb / clflushopt per line, routed by TCG to the device)")

mem = {}
mem["shm_idle"] = memory("shm", "idle", 512 * MiB, 448 * MiB)
mem["shm_bench"] = memory("shm", "bench", 512 * MiB, 448 * MiB)
mem["shm_touched"] = memory("shm", "touched", 512 * MiB, 448 * MiB)
mem["type3_idle"] = memory("type3", "idle", 512 * MiB, 0)
mem["type3_bench"] = memory("type3", "bench", 512 * MiB, 0)
mem["probe_idle"] = memory("probe", "idle", 512 * MiB, 64 * MiB)
mem["probe_touched"] = memory("probe", "touched", 512 * MiB, 64 * MiB)
res["memory"] = mem
print()
print("host memory of one QEMU (MiB; from /proc/PID/smaps_rollup and smaps, RAM blocks from QMP)")
print("%-38s %6s %6s %7s %6s %6s %6s %6s %6s"
      % ("QEMU, when", "RSS", "anon", "private", "g.RAM", "image", "twin", "other", "pool"))
labels = [("shm_idle", "cxl-shm coh 64M, booted"),
          ("shm_bench", "cxl-shm coh 64M, after bench"),
          ("shm_touched", "cxl-shm coh 64M, whole pool touched"),
          ("type3_idle", "cxl-type3, booted"),
          ("type3_bench", "cxl-type3, after bench"),
          ("probe_idle", "cxl-shm coh 448M, booted"),
          ("probe_touched", "cxl-shm coh 448M, whole pool touched")]
for k, label in labels:
    m = mem.get(k)
    if not m:
        continue
    twin = m["twin_rss"]
    print("%-38s %6.0f %6.0f %7.0f %6.0f %6.0f %6s %6.0f %6.0f"
          % (label, mib(m["rss"]), mib(m["anon"]), mib(m["private"]), mib(m["guest_ram_rss"]),
             mib(m["image_rss"]), "-" if twin is None else "%.0f" % mib(twin),
             mib(m["other_anon"]), mib(m["pool_map_rss"])))
print("(RSS, anon(ymous), private: smaps_rollup; private counts the pool file's pages too, as")
print(" only one QEMU maps each pool here.  g.RAM = resident guest RAM; image = the device's")
print(" non-coherent image (a RAM block); twin = its copy of the area as last synced;")
print(" other = the rest of anon (QEMU itself); pool = resident pages of the pool file mapping:")
print(" page cache, one copy per machine shared by every host's QEMU, not private to a host)")

def extra(shm_key, base_key):
    s, b = mem.get(shm_key), mem.get(base_key)
    if not s or not b:
        return None
    # memory a cxl-shm QEMU needs beyond a stock one, guest RAM excluded:
    # image + twin when the twin was found, else the difference in anon
    if s["twin_rss"] is not None:
        return s["image_rss"] + s["twin_rss"]
    return s["image_rss"] + s["other_anon"] - b["other_anon"]

for k, base, nc_mib, coh_mib in (("shm_touched", "type3_bench", 448, 64),
                                 ("probe_touched", "type3_bench", 64, 448)):
    e = extra(k, base)
    if e is None:
        continue
    res.setdefault("memory_extra", {})[k] = e
    print("per-host memory for the non-coherent area (image + twin), coherent window %3d MiB: "
          "%4.0f MiB for a %3d MiB area = %.2fx its size (target <= 2x)"
          % (coh_mib, mib(e), nc_mib, e / (nc_mib * MiB)))
    s, b = mem[k], mem[base]
    print("    QEMU itself (other anon) %.0f MiB vs %.0f MiB for cxl-type3"
          % (mib(s["other_anon"]), mib(b["other_anon"])))

print()
print("targets, measured (speed ratios as above; ! = below the target)")
print("%-18s %-7s | %-28s | %s" % ("", "", "vs guest RAM (target >= 0.8)",
                                    "vs stock cxl-type3 (target >= 50)"))
print("%-18s %-7s | %8s %9s %9s | %8s %9s %9s"
      % ("area", "", "read", "lat %dM" % (ram["lat_size"] >> 20), "lat 256K",
         "read", "lat %dM" % (ram["lat_size"] >> 20), "lat 256K"))
targets = {}
for label, key, b, bram, m, mram_ in (("coherent window", "coherent", coh, ram, mcoh, mram),
                                      ("non-coherent area", "noncoherent", nc, ram, mnc, mram)):
    for kind, a, r, d in (("best", b, bram, dax), ("median", m, mram_, mdax)):
        v = [spd_bw(a, r), spd_lat(a, r), spd_lat(a, r, "lat_small_ns"),
             spd_bw(a, d), spd_lat(a, d), spd_lat(a, d, "lat_small_ns")]
        targets.setdefault(key, {})[kind] = dict(zip(
            ["read_vs_ram", "lat_vs_ram", "lat_small_vs_ram",
             "read_vs_type3", "lat_vs_type3", "lat_small_vs_type3"], v))
        cells = ["%7.2f%s" % (x, "!" if x < 0.8 else " ") for x in v[:3]] + \
                ["%7.1fx%s" % (x, "!" if x < 50 else " ") for x in v[3:]]
        print("%-18s %-7s | %s %s %s | %s %s %s"
              % (label if kind == "best" else "", kind, cells[0], " " + cells[1],
                 " " + cells[2], cells[3], cells[4], cells[5]))
res["targets"] = targets
# issue 7's coherence-operation targets: large-range writeback >= 80 % of the
# host's memcpy (measured beside the guests in this run), native clwb /
# clflushopt per line (goal < 100 ns; 203 ns before the BQL-free dispatch)
hm = []
for f in ("hostmemcpy-before.json", "hostmemcpy-after.json"):
    try:
        hm.append(json.loads(open(os.path.join(W, f)).read()))
    except (OSError, ValueError):
        pass
if hm:
    host_mbs = max(h["best_MBps"] for h in hm)
    print()
    print("coherence-operation targets (writeback %d MiB, 1 MiB per call; host memcpy of the same"
          % (nc["size"] >> 20))
    print("size in 1 MiB chunks, best of %d, before and after guest A: %s MB/s)"
          % (hm[0]["repeat"], " / ".join("%.0f" % h["best_MBps"] for h in hm)))
    ops = {}
    for meth, o in nc["ops"].items():
        us = o["wb_MiB_us"]
        wb_mbs = MiB / 1e6 / (us / 1e6) if us else 0
        # per line inside a 1 MiB call: the instruction (native) or the
        # engine's share (doorbell), without one library call per line
        ops[meth] = {"wb_MBps": wb_mbs, "wb_vs_memcpy": wb_mbs / host_mbs,
                     "wb_line_ns": o["wb_line_ns"], "inv_line_ns": o["inv_line_ns"],
                     "flush_line_ns": o["flush_line_ns"],
                     "wb_line_in_mib_ns": us * 1e3 / (MiB / 64) if us else 0}
    for meth, o in ops.items():
        print("%-9s writeback %6.0f MB/s = %4.2fx host memcpy%s   one call a line: wb %4.0f ns"
              " inv %4.0f ns  flush %4.0f ns   in 1 MiB calls: wb %4.0f ns a line%s"
              % (meth, o["wb_MBps"], o["wb_vs_memcpy"],
                 "!" if meth == "doorbell" and o["wb_vs_memcpy"] < 0.8 else " ",
                 o["wb_line_ns"], o["inv_line_ns"], o["flush_line_ns"], o["wb_line_in_mib_ns"],
                 "!" if meth == "native" and o["wb_line_in_mib_ns"] >= 100 else ""))
    print("(targets: doorbell writeback >= 0.80x host memcpy; native clwb per line, in 1 MiB"
          " calls: goal < 100 ns)")
    coh_ops = coh.get("ops", {})
    if coh_ops:
        print("(one call a line adds the library's call: the same calls on the coherent window,"
              " which need no operation, take %s)"
              % " / ".join("%s %.0f ns" % (m, co["wb_line_ns"]) for m, co in coh_ops.items()))
    res["coherence_targets"] = {"host_memcpy_MBps": host_mbs, "ops": ops}
# the line engine's floor on the host, before and after guest A
floors = []
for f in ("floor-before.txt", "floor-after.txt"):
    try:
        for l in open(os.path.join(W, f)):
            fl = l.split()
            if len(fl) >= 3 and fl[0] in ("floor", "writeback", "memcpy"):
                floors.append((f, fl[0], float(fl[1])))
    except OSError:
        pass
floor_mbs = max([v for _, k, v in floors if k == "floor"] or [0])
if floor_mbs and hm:
    eng = max([v for _, k, v in floors if k == "writeback"] or [0])
    wb = ops.get("doorbell", {}).get("wb_MBps", 0)
    print("line-engine floor on the host (compare image and twin, copy to pool and twin, %d MiB):"
          % (nc["size"] >> 20))
    print("  %.0f MB/s; the engine itself there %.0f MB/s = %.2fx the floor; doorbell writeback"
          % (floor_mbs, eng, eng / floor_mbs))
    print("  in guest A %.0f MB/s = %.2fx the floor%s (target >= 0.80x the floor)"
          % (wb, wb / floor_mbs, "!" if wb / floor_mbs < 0.8 else ""))
    res["coherence_targets"]["floor_MBps"] = floor_mbs
    res["coherence_targets"]["engine_host_MBps"] = eng
    res["coherence_targets"]["doorbell_wb_vs_floor"] = wb / floor_mbs

# cost curves: one call of each operation per size, against memcpy
hc = []
for f in ("hostmemcpy-curve-before.json", "hostmemcpy-curve-after.json"):
    try:
        hc.append({p["size"]: p["ns"] for p in json.loads(open(os.path.join(W, f)).read())["curve"]})
    except (OSError, ValueError, KeyError):
        pass
if curve:
    pts = curve["curve"]
    meths = [m for m in ("doorbell", "native") if m in pts[0]]
    print()
    print("cost of one call (ns), non-coherent area; writeback and flush of dirty lines,")
    print("invalidate of clean ones; host memcpy of the same size, best of before/after guest A")
    hdr = "%9s %10s %10s" % ("bytes", "host cpy", "guest cpy")
    for m in meths:
        hdr += " %11s %11s %11s" % (m[:4] + " wb", m[:4] + " inv", m[:4] + " flush")
    hdr += " %9s" % "db wb/cpy"
    print(hdr)
    print("-" * len(hdr))
    rows_c = []
    for p_ in pts:
        sz = p_["size"]
        host = min([h[sz] for h in hc if sz in h] or [0])
        line = "%9d %10.0f %10.0f" % (sz, host, p_["guest_memcpy_ns"])
        row = {"size": sz, "host_memcpy_ns": host, "guest_memcpy_ns": p_["guest_memcpy_ns"]}
        for m in meths:
            line += " %11.0f %11.0f %11.0f" % (p_[m]["wb_ns"], p_[m]["inv_ns"], p_[m]["flush_ns"])
            row[m] = p_[m]
        dbw = p_.get("doorbell", {}).get("wb_ns", 0)
        line += " %9.1f" % (dbw / host if host else 0)
        print(line)
        rows_c.append(row)
    print("(db wb/cpy: a doorbell writeback call over a host memcpy of the same size; the memcpy")
    print(" copies the same buffers again and again, so it runs from the host's caches where they fit)")
    res["cost_curves"] = rows_c
    # the figure: gnuplot from the table, when gnuplot is installed
    dat = os.path.join(W, "cost-curves.dat")
    with open(dat, "w") as f:
        f.write("# bytes host_memcpy guest_memcpy " +
                " ".join("%s_wb %s_inv %s_flush" % (m, m, m) for m in meths) + "\n")
        for r in rows_c:
            f.write("%d %g %g %s\n" % (r["size"], r["host_memcpy_ns"] or float("nan"),
                                       r["guest_memcpy_ns"],
                                       " ".join("%g %g %g" % (r[m]["wb_ns"], r[m]["inv_ns"],
                                                             r[m]["flush_ns"]) for m in meths)))
    plot = ['set terminal png size 900,560',
            'set output "%s"' % os.path.join(W, "cost-curves.png"),
            'set title "cxlpod: one coherence-operation call vs memcpy of the same size (%s)"'
            % date[:10],
            'set logscale xy', 'set xlabel "bytes per call"', 'set ylabel "ns per call"',
            'set key top left', 'set grid']
    series = ['"%s" using 1:2 with linespoints title "host memcpy"' % dat,
              '"%s" using 1:3 with linespoints title "guest memcpy (TCG)"' % dat]
    col = 4
    for m in meths:
        for k in ("writeback", "invalidate", "flush"):
            series.append('"%s" using 1:%d with linespoints title "%s %s"' % (dat, col, m, k))
            col += 1
    plot.append("plot " + ", ".join(series))
    try:
        import subprocess
        subprocess.run(["gnuplot"], input="\n".join(plot) + "\n", text=True, check=True,
                       capture_output=True)
        print("figure: %s" % os.path.join(W, "cost-curves.png"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("(no figure: gnuplot failed or is missing: %s; scripts/deps.sh installs gnuplot-nox)" % e)
print("(median: of the %s runs' own best-of-%s figures, each against the median of its reference)"
      % (rounds, repeat))
json.dump(res, open(os.path.join(W, "results.json"), "w"), indent=1)
print()
print("raw results: %s/results.json; guest outputs and logs: %s/{shm,type3,probe,timed}" % (W, W))
EOF
}
if [ -n "$REPORT" ]; then
    [ -f "$REPORT/run.info" ] || die "$REPORT is not a work dir of scripts/bench.sh (no run.info)"
    report "$REPORT"
    exit 0
fi

[ $BUILD_ALL = 1 ] && build_all_after_others

L=$BUILD/meson/host-tools/cxlpod-launch
QEMU=${CXLPOD_QEMU:-$BUILD/qemu/qemu-system-x86_64}  # the launcher takes CXLPOD_QEMU too
[ -x "$L" ] || die "$L missing: run scripts/build-all.sh"
for _ in $(seq 120); do [ -x "$QEMU" ] && break; sleep 1; done  # being relinked?
[ -x "$QEMU" ] || die "$QEMU missing: run scripts/build-all.sh"

case $W in /|"$TOP"|"$HOME") die "refusing to use $W as the work dir" ;; esac
rm -rf "$W"; mkdir -p "$W"
W=$(cd "$W" && pwd)

POOL_SIZE=512M
if [ $QUICK = 1 ]; then
    BW=8M LAT=4M T3_BW=2M T3_LAT=2M CURVE_MAX=4M CURVE_MIN=0.02
else
    BW=64M LAT=32M T3_BW=8M T3_LAT=32M CURVE_MAX=64M CURVE_MIN=0.1
fi
SMALL=256K
COMMON="--json --repeat $REPEAT --lat-small $SMALL"
[ $QUICK = 1 ] && COMMON="$COMMON --min-time 0.1"

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD0=$(load)
DATE=$(date -Iseconds)
T0=$(date +%s)

# sample NAME TAG PID: host memory of QEMU PID while its guest runs
sample() {
    local dir=$W/$1 tag=$2 pid=$3
    "$L" qmp "$dir" 0 human-monitor-command '{"command-line":"info ramblock"}' \
        >"$dir/mem-$tag.ramblock" 2>&1 || true
    cp "/proc/$pid/smaps" "$dir/mem-$tag.smaps" 2>/dev/null || true
    cp "/proc/$pid/smaps_rollup" "$dir/mem-$tag.rollup" 2>/dev/null || true
}

# run NAME TIMEOUT JOB LAUNCHER-OPTIONS...: boot one guest, run JOB; when the
# guest prints "BENCH-MEM:TAG" take a memory sample TAG (the job sleeps after
# each marker so that the guest is still there)
run() {
    local name=$1 tmo=$2 job=$3; shift 3
    local dir=$W/$name
    log "guest $name: $*"
    printf '%s\n' "$job" >"$W/$name.job"
    if [ $DRY = 1 ]; then
        "$L" --dry-run -q -n 1 -w "$dir" --timeout "$tmo" --job "$W/$name.job" "$@" \
            >"$W/$name.dry-run" 2>&1 || { cat "$W/$name.dry-run" >&2; die "guest $name: the launcher refuses its options"; }
        grep -q -- '-device cxl-' "$W/$name.dry-run" || die "guest $name: no QEMU command line"
        return
    fi
    "$L" -q -n 1 -w "$dir" --timeout "$tmo" --job "$W/$name.job" "$@" \
        >"$W/$name.launch.out" 2>"$W/$name.launch.err" &
    local lpid=$! pid="" seen="" t
    LPID=$lpid
    while kill -0 $lpid 2>/dev/null; do
        [ -n "$pid" ] || pid=$(pgrep -P $lpid -f qemu-system | head -n1 || true)
        if [ -n "$pid" ] && [ -f "$dir/host0.log" ]; then
            for t in $(tr -d '\r' <"$dir/host0.log" | sed -n 's/^BENCH-MEM:\([a-z]*\)$/\1/p'); do
                case " $seen " in *" $t "*) continue ;; esac
                sample "$name" "$t" "$pid"
                seen="$seen $t"
                log "guest $name: memory sample '$t' (QEMU pid $pid)"
            done
        fi
        sleep 0.3
    done
    local rc=0
    wait $lpid || rc=$?
    LPID=""
    [ -f "$dir/host0.out" ] && tr -d '\r' <"$dir/host0.out" >"$W/$name.out" || : >"$W/$name.out"
    if [ $rc != 0 ]; then
        cat "$W/$name.launch.out" "$W/$name.launch.err" >&2
        die "guest $name failed (launcher exit $rc); logs in $dir"
    fi
    if ! grep -q '^BENCH-RC:' "$W/$name.out" || grep '^BENCH-RC:' "$W/$name.out" | grep -qv ':0$'; then
        cat "$W/$name.out" >&2
        die "guest $name: the benchmark failed; logs in $dir"
    fi
}

# the launcher shuts its QEMU down on SIGTERM; never leave one behind
LPID=""
trap '[ -z "$LPID" ] || { kill -TERM "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; }' EXIT
trap 'exit 130' INT TERM

MARK='echo BENCH-MEM:%s; sleep 4'
m() { printf "$MARK" "$1"; }

# the host's memcpy, the baseline of the device's writeback, right before and
# after guest A
MEMCPY=$BUILD/meson/host-tools/cxlpod-memcpy
FLOOR=$BUILD/meson/tests/unit/bench_lines
hostmemcpy() {
    if [ $DRY = 1 ]; then
        [ -x "$MEMCPY" ] && [ -x "$FLOOR" ] || die "$MEMCPY or $FLOOR missing (scripts/build-tools.sh)"
        return
    fi
    if [ -x "$MEMCPY" ]; then
        "$MEMCPY" --size "$BW" --repeat 5 >"$W/hostmemcpy-$1.json" || warn "cxlpod-memcpy failed"
        "$MEMCPY" --curve "$CURVE_MAX" --repeat 5 >"$W/hostmemcpy-curve-$1.json" \
            || warn "cxlpod-memcpy --curve failed"
    else
        warn "$MEMCPY missing: no host memcpy baseline (scripts/build-tools.sh)"
    fi
    # the line engine on the host, and the floor of any twin-comparing
    # writeback, over the same number of MiB as guest A's writeback
    if [ -x "$FLOOR" ]; then
        "$FLOOR" --repeat 5 --mib "${BW%M}" >"$W/floor-$1.txt" 2>&1 || warn "bench_lines failed"
    else
        warn "$FLOOR missing: no floor baseline (scripts/build-tools.sh)"
    fi
}
hostmemcpy before

# A: cxl-shm, coherent window 64 MiB
run shm 1800 "$(m idle)
cxlpod-info --json
for r in $(seq -s " " $ROUNDS); do
    cxlpod-bench $COMMON --method both --size $BW --lat-size $LAT; echo BENCH-RC:\$?
done
cxlpod-bench --json --method both --size 1M --lat-size 1M --repeat $REPEAT --min-time $CURVE_MIN --curve $CURVE_MAX; echo BENCH-RC:\$?
$(m bench)
cxlpod-bench --touch-all --json
$(m touched)" \
    --device cxl-shm --size $POOL_SIZE --coherent-size 64M --latency-ns "$LAT_NS"
hostmemcpy after

# B: stock cxl-type3, and guest A's pool file as an ivshmem-plain BAR
# (its data area: after the first 2 MiB of metadata, before the tail of
# metadata that format 4 puts after the data; docs/pool-format.md)
IVSHMEM_SIZE=$(( ${POOL_SIZE%M} * 1024 * 1024 ))
run type3 1800 "$(m idle)
IVS=
for d in /sys/bus/pci/devices/*; do
    [ \"\$(cat \$d/vendor)\" = 0x1af4 ] && [ \"\$(cat \$d/device)\" = 0x1110 ] && IVS=\$d/resource2
done
[ -n \"\$IVS\" ] || { echo 'no ivshmem-plain device in the guest'; echo BENCH-RC:1; }
for r in $(seq -s " " $ROUNDS); do
    cxlpod-bench $COMMON --raw --size $BW --lat-size $LAT --pool-size $T3_BW --pool-lat-size $T3_LAT; echo BENCH-RC:\$?
    CXLPOD_DAX=\$IVS cxlpod-bench $COMMON --raw --size $BW --lat-size $LAT; echo BENCH-RC:\$?
done
$(m bench)" \
    --device cxl-type3 --size $POOL_SIZE \
    --qemu-arg -object \
    --qemu-arg "memory-backend-file,id=ivshmem0,share=on,mem-path=$W/shm/pool.img,offset=2097152,size=$IVSHMEM_SIZE" \
    --qemu-arg -device --qemu-arg "ivshmem-plain,memdev=ivshmem0,bus=pcie.0"

# C: cxl-shm, coherent window 448 MiB (non-coherent 64 MiB)
if [ $PROBE = 1 ]; then
    run probe 600 "$(m idle)
cxlpod-bench --touch-all --json; echo BENCH-RC:\$?
$(m touched)" \
        --device cxl-shm --size $POOL_SIZE --coherent-size 448M --latency-ns "$LAT_NS"
fi

# D: cxl-shm, mode=timed (every access through the device: small buffers)
run timed 1800 "for r in $(seq -s " " $ROUNDS); do
    cxlpod-bench $COMMON --method doorbell --size $T3_BW --lat-size $T3_LAT --pool-size $T3_BW --pool-lat-size $T3_LAT; echo BENCH-RC:\$?
done" \
    --device cxl-shm --size $POOL_SIZE --coherent-size 64M --device-opt mode=timed

if [ $DRY = 1 ]; then
    [ -n "$WGIVEN" ] || rm -rf "$W"
    log "dry run: arguments, tools and every guest's launcher options are fine; nothing booted"
    exit 0
fi
LOAD1=$(load)
T1=$(date +%s)
[ $KEEP = 1 ] || rm -f "$W"/*/pool.img

printf '%s\n' "$LOAD0" "$LOAD1" "$((T1 - T0))" "$REPEAT" "$QUICK" "$SMALL" "$DATE" "$ROUNDS" >"$W/run.info"
report "$W" | tee "$W/table.txt"


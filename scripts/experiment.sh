#!/usr/bin/env bash
# The seeds' question as an experiment (issue 25, docs/experiment.md): an
# allreduce across 2, 4, 8 and 16 hosts of a mode=timed pod under -icount,
# with its buffers (a) in the coherent window (hardware coherence: snoop
# filter, back-invalidates, snoops) and (b) in the non-coherent area with
# libcxlpod's writeback / invalidate protocol, the snoop filter's capacity
# swept over its range.  Every figure is guest time or a device counter,
# the same on every run (guest-tools/allreduce-exp.c says how).
#
#   bash scripts/experiment.sh [--quick] [--twice] [--filters LIST|all]
#                              [--workdir DIR] [--report DIR] [--no-plot]
#                              [--dry-run]
#
#   (default)  pod A: 16 hosts, snoop-filter-entries 32768, both areas,
#              N = 2,4,8,16, vectors 64K,256K; then one 4-host pod per
#              filter size of the sweep (32768, 8192, 16384, 114688: the
#              first also runs the non-coherent area), coherent window,
#              N = 2,4, vectors 256K,1M
#   --quick    pod A with 4 hosts (N = 2,4; 64K,256K) and one sweep pod at
#              8192 (256K): a smoke test
#   --twice    run everything twice and compare the figures (identity check)
#   --filters  the sweep's filter sizes (entries, multiples of 8192 in
#              8192..114688; the first also runs the non-coherent area),
#              or "all"
#   --workdir  default build/experiment (emptied first)
#   --report   boot nothing: aggregate, tabulate and plot an earlier work dir
#   --no-plot  no PNG
#   --dry-run  boot nothing: check the arguments, the tools, the guest image
#              and every pod's launcher options (cxlpod-launch --dry-run),
#              in a temporary work dir unless --workdir is given
#
# Writes WORKDIR/results.json, WORKDIR/table.md and WORKDIR/experiment.png
# (docs/experiment.md carries the published ones).  Needs the tools
# (scripts/build-tools.sh), a guest image with cxlpod-allreduce-exp
# (scripts/build-guest.sh), jq and gnuplot (gnuplot-nox, scripts/deps.sh).
# CXLPOD_QEMU=PATH runs another QEMU build.
set -euo pipefail
. "$(dirname "$0")/common.sh"

QUICK=0 TWICE=0 PLOT=1 REPORT= FILTERS= DRY=0 WGIVEN=
W=$BUILD/experiment
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --dry-run) DRY=1 ;;
        --twice) TWICE=1 ;;
        --no-plot) PLOT=0 ;;
        --filters) FILTERS=${2:?--filters LIST}; shift ;;
        --workdir) W=${2:?--workdir DIR}; WGIVEN=1; shift ;;
        --report) REPORT=${2:?--report DIR}; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
[ -n "$REPORT" ] && W=$REPORT
[ $DRY = 0 ] || [ -z "$REPORT" ] || die "--dry-run boots nothing already; --report boots nothing either: give one"
if [ $DRY = 1 ] && [ -z "$WGIVEN" ]; then
    W=$(mktemp -d /tmp/cxlpod-experiment-dry.XXXXXX)
    trap 'rm -rf "$W"' EXIT
fi

L=$BUILD/meson/host-tools/cxlpod-launch
command -v jq >/dev/null || die "jq is missing (scripts/deps.sh)"
if [ $PLOT = 1 ] && ! command -v gnuplot >/dev/null; then
    die "gnuplot is missing: apt-get install gnuplot-nox (scripts/deps.sh), or --no-plot"
fi

# The set-up (the device's latencies are its defaults, docs/device.md)
ICOUNT="shift=0,sleep=on"
POOL_SIZE=256M COH_SIZE=128M MEM=256M
DEFAULT_F=32768
ROUNDS=2
if [ $QUICK = 1 ]; then
    PODA_HOSTS=4 PODA_LIST=2,4 PODA_SIZES=64K,256K
    SWEEP_SIZES=256K
    SWEEP=${FILTERS:-8192}
else
    PODA_HOSTS=16 PODA_LIST=2,4,8,16 PODA_SIZES=64K,256K
    SWEEP_SIZES=256K,1M
    SWEEP=${FILTERS:-32768,8192,16384,114688}
fi
[ "$SWEEP" = all ] && SWEEP=$(seq -s, 8192 8192 114688)
for f in ${SWEEP//,/ }; do
    [[ $f =~ ^[0-9]+$ ]] && (( f >= 8192 && f <= 114688 && f % 8192 == 0 )) ||
        die "--filters: $f is not a multiple of 8192 in 8192..114688"
done

# run_pod NAME HOSTS FILTER AREAS HOSTS_LIST SIZES: one pod, the tool on
# every host; its JSON lines (tagged with pod and filter) in NAME/lines.jsonl
run_pod() {
    local d=$1 n=$2 f=$3 areas=$4 list=$5 sizes=$6 t0 rc=0 pool
    t0=$(date +%s)
    pool=/dev/shm/cxlpod-exp-$$-$(basename "$d").pool
    log "pod $(basename "$d"): $n hosts, snoop-filter-entries=$f, areas $areas, N=$list, vectors $sizes"
    mkdir -p "$d"
    if [ $DRY = 1 ]; then
        # the same options, checked by the launcher, no QEMU started
        "$L" --dry-run -q -n "$n" --smp 1 --mem $MEM -w "$d" --pool "$pool" \
            --size $POOL_SIZE --coherent-size $COH_SIZE \
            --device-opt mode=timed --device-opt snoop-filter-entries="$f" \
            --qemu-arg -icount --qemu-arg "$ICOUNT" --append nowatchdog \
            --timeout 3000 --boot-timeout 1200 -- \
            "cxlpod-allreduce-exp --areas $areas --hosts-list $list --sizes $sizes --rounds $ROUNDS --timeout 2400 --json" \
            >"$d/dry-run.out" 2>&1 || { cat "$d/dry-run.out" >&2; die "pod $d: the launcher refuses its options"; }
        [ "$(grep -c -- '-icount' "$d/dry-run.out")" = "$n" ] || die "pod $d: not $n QEMU command lines"
        log "pod $(basename "$d"): $n QEMU command lines (dry run)"
        return
    fi
    "$L" -q -n "$n" --smp 1 --mem $MEM -w "$d" --pool "$pool" \
        --size $POOL_SIZE --coherent-size $COH_SIZE \
        --device-opt mode=timed --device-opt snoop-filter-entries="$f" \
        --qemu-arg -icount --qemu-arg "$ICOUNT" --append nowatchdog \
        --timeout 3000 --boot-timeout 1200 -- \
        "cxlpod-allreduce-exp --areas $areas --hosts-list $list --sizes $sizes --rounds $ROUNDS --timeout 2400 --json" \
        >"$d/launch.out" 2>"$d/launch.err" || rc=$?
    rm -f "$pool"
    if [ $rc != 0 ]; then
        tail -n 20 "$d/launch.out" "$d/launch.err" >&2
        die "pod $d failed (rc $rc); logs in $d"
    fi
    for ((h = 0; h < n; h++)); do
        grep -F '{"tool":"cxlpod-allreduce-exp"' "$d/host$h.out" |
            jq -c --argjson f "$f" --arg pod "$(basename "$d")" '. + {pod: $pod, filter: $f}'
    done >"$d/lines.jsonl"
    echo $(($(date +%s) - t0)) >"$d/seconds"
    log "pod $(basename "$d"): done in $(cat "$d/seconds") s"
}

# measure RUNDIR: every pod of one run
measure() {
    local r=$1 first=1 f
    mkdir -p "$r"
    run_pod "$r/podA" $PODA_HOSTS $DEFAULT_F coherent,noncoherent $PODA_LIST $PODA_SIZES
    for f in ${SWEEP//,/ }; do
        if [ $first = 1 ]; then
            run_pod "$r/sweep-$f" 4 "$f" coherent,noncoherent 2,4 $SWEEP_SIZES
        else
            run_pod "$r/sweep-$f" 4 "$f" coherent 2,4 $SWEEP_SIZES
        fi
        first=0
    done
    [ $DRY = 1 ] || cat "$r"/*/lines.jsonl >"$r/lines.jsonl"
}

# rows RUNDIR: the pod-wide figures of each experiment and round: a phase
# lasts as long as its slowest host (the hosts would run it side by side,
# then meet at a barrier); counters are summed over the participating hosts
rows() {
    jq -s -c '
      map(select(.participant and (.skipped | not)))
      | group_by([.pod, .area, .n, .bytes])
      | map(. as $g | $g[0] as $x
          | range(0; $x.rounds | length) as $r
          | [range(0; 3) as $ph
             | {phase: $x.rounds[$r][$ph].phase,
                max_ns: ($g | map(.rounds[$r][$ph].ns) | max),
                sum_ns: ($g | map(.rounds[$r][$ph].ns) | add)}] as $phases
          | def tot(f): $g | map(.rounds[$r] | map(f) | add) | add;
          {pod: $x.pod, filter: $x.filter, area: $x.area, n: $x.n, bytes: $x.bytes,
           round: $r, warmup: ($r < ($x.rounds | length) - 1),
           allreduce_ns: ($phases | map(.max_ns) | add),
           host_mean_ns: (($phases | map(.sum_ns) | add) / $x.n),
           charged_ns: tot(.charged_ns),
           bytes_moved: (64 * tot(.misses + .lines_written_back)),
           back_invalidates: tot(.back_invalidates),
           snoop_filter_evictions: tot(.sf_evictions),
           snoops: tot(.snoops), misses: tot(.misses), hits: tot(.hits),
           lines_written_back: tot(.lines_written_back),
           cache_evictions: tot(.cache_evictions),
           coherence_ops: tot(.writeback_ops + .invalidate_ops),
           slices: tot(.slices), disturbed_slices: tot(.disturbed),
           wrong_elements: ($g | map(.wrong) | add),
           phases: $phases})
      | sort_by(.pod != "podA", .filter, .pod, .area, .n, .bytes, .round)' "$1/lines.jsonl"
}

if [ -z "$REPORT" ]; then
    [ -x "$L" ] || die "no $L: run scripts/build-tools.sh"
    # the launcher's image (uncompressed, as scripts/build-guest.sh writes it)
    INITRD=${CXLPOD_INITRD:-$BUILD/guest/initramfs.cpio}
    [ -f "$INITRD" ] || die "no guest image $INITRD: run scripts/build-guest.sh"
    files=$(cpio -it <"$INITRD" 2>/dev/null) || die "$INITRD is not a cpio archive (scripts/build-guest.sh)"
    grep -q 'cxlpod-allreduce-exp$' <<<"$files" ||
        die "the guest image $INITRD has no cxlpod-allreduce-exp: run scripts/build-guest.sh"
    rm -rf "$W"
    mkdir -p "$W"
    T0=$(date +%s)
    measure "$W/run1"
    [ $TWICE = 0 ] || measure "$W/run2"
    if [ $DRY = 1 ]; then
        log "dry run: arguments, tools, guest image and every pod's options are fine; nothing booted"
        exit 0
    fi
    echo $(($(date +%s) - T0)) >"$W/seconds"
fi

rows "$W/run1" >"$W/rows1.json"
IDENT=null
if [ -d "$W/run2" ]; then
    rows "$W/run2" >"$W/rows2.json"
    if cmp -s "$W/rows1.json" "$W/rows2.json"; then
        IDENT=true
        log "identity check: the two runs' figures are identical ($(jq length "$W/rows1.json") rows; every host's JSON lines: $(cmp -s "$W/run1/lines.jsonl" "$W/run2/lines.jsonl" && echo identical || echo DIFFERENT))"
    else
        IDENT=false
        warn "identity check: the two runs DIFFER:"
        diff <(jq -c '.[]' "$W/rows1.json") <(jq -c '.[]' "$W/rows2.json") | head -n 20 >&2 || true
    fi
fi

# results.json: what ran where, and the rows of run 1 (--report keeps
# what the run itself recorded: its date, command, machine and set-up)
PREV=
if [ -n "$REPORT" ] && [ -f "$W/results.json" ]; then
    PREV=$W/results.run.json
    [ -f "$PREV" ] || cp "$W/results.json" "$PREV"
fi
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
jq -n --slurpfile rows "$W/rows1.json" \
    --arg date "$(date -u +%Y-%m-%dT%H:%MZ)" --arg host "$(uname -n)" \
    --arg cpu "$CPU" --arg cores "$(nproc)" --arg mem "$(free -g | awk '/^Mem:/ {print $2}')" \
    --arg kernel "$(uname -r)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --arg qemu "${CXLPOD_QEMU:-$BUILD/qemu/qemu-system-x86_64}" --arg icount "$ICOUNT" \
    --arg cmd "bash scripts/experiment.sh$([ $QUICK = 1 ] && echo ' --quick')$([ $TWICE = 1 ] && echo ' --twice')${FILTERS:+ --filters $FILTERS}" \
    --arg poda "$PODA_HOSTS hosts, snoop-filter-entries $DEFAULT_F, both areas, N $PODA_LIST, vectors $PODA_SIZES" \
    --arg sweep "4 hosts per pod, snoop-filter-entries $SWEEP (the first pod also the non-coherent area), coherent window, N 2,4, vectors $SWEEP_SIZES" \
    --argjson rounds $ROUNDS \
    --arg seconds "$(cat "$W/seconds" 2>/dev/null || echo 0)" --argjson ident "$IDENT" '
    {experiment: "issue 25: allreduce, coherent window (hardware coherence) vs non-coherent area (software coherence)",
     date: $date, command: $cmd,
     machine: {host: $host, cpu: $cpu, cores: ($cores | tonumber), mem_gib: ($mem | tonumber),
               kernel: $kernel, load_at_end: $load},
     qemu: $qemu, icount: $icount, wall_seconds: ($seconds | tonumber),
     setup: {pod_a: $poda, sweep: $sweep, rounds: $rounds, measured_round: ($rounds - 1),
             guest: "1 vCPU, 256 MiB, TCG, -icount shift=0,sleep=on (1 instruction = 1 ns)",
             pool: "256 MiB, coherent window 128 MiB",
             device: "mode=timed, device defaults: cache 32 MiB 16-way LRU, hit 20 ns, miss 250 ns, writeback 250 ns, back-invalidate 200 ns, snoop 450 ns, link 16000 MB/s",
             protocol: "non-coherent area: libcxlpod doorbell writeback+fence after writing, invalidate before reading, one call per 4 KiB"},
     identical_runs: $ident,
     rows: $rows[0]}' >"$W/results.json"
if [ -n "$PREV" ]; then
    jq -s '.[1] + (.[0] | {date, command, machine, qemu, icount, wall_seconds, setup})
           + {tabulated: (now | strftime("%Y-%m-%dT%H:%MZ"))}' "$PREV" "$W/results.json" \
        >"$W/results.tmp" && mv "$W/results.tmp" "$W/results.json"
fi

# table.md: the measured (last) round of each experiment
{
    echo "| pod | area | filter entries | N | vector | guest time / allreduce (us) | mean busy per host (us) | bytes moved | back-invalidates | filter evictions | snoops | lines written back | wrong | disturbed slices |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    jq -r '.rows[] | select(.warmup | not)
        | "| \(.pod) | \(.area) | \(if .area == "coherent" then .filter else "-" end) | \(.n) | \(.bytes / 1024)K | \(.allreduce_ns / 100 | round / 10) | \(.host_mean_ns / 100 | round / 10) | \(.bytes_moved) | \(.back_invalidates) | \(.snoop_filter_evictions) | \(.snoops) | \(.lines_written_back) | \(.wrong_elements) | \(.disturbed_slices) |"' \
        "$W/results.json"
} >"$W/table.md"
cat "$W/table.md"

bad=$(jq '[.rows[] | .wrong_elements + .disturbed_slices] | add' "$W/results.json")
[ "$bad" = 0 ] || warn "wrong elements or disturbed slices: $bad (see $W/table.md)"

if [ $PLOT = 1 ]; then
    P=$W/plot
    mkdir -p "$P"
    # one file per series: x, guest us per allreduce (measured round)
    for a in coherent noncoherent; do
        for b in 65536 262144; do
            jq -r --arg a $a --argjson b $b '.rows[]
                | select((.warmup | not) and .pod == "podA" and .area == $a and .bytes == $b)
                | "\(.n) \(.allreduce_ns / 1000)"' "$W/results.json" >"$P/hosts-$a-$b.dat"
        done
    done
    for n in 2 4; do
        for b in 262144 1048576; do
            jq -r --argjson n $n --argjson b $b '.rows[]
                | select((.warmup | not) and .pod != "podA" and .area == "coherent" and .n == $n and .bytes == $b)
                | "\(.filter) \(.allreduce_ns / 1000) \(.snoop_filter_evictions) \(.back_invalidates)"' \
                "$W/results.json" | sort -n >"$P/filter-$n-$b.dat"
            jq -r --argjson n $n --argjson b $b '.rows[]
                | select((.warmup | not) and .pod != "podA" and .area == "noncoherent" and .n == $n and .bytes == $b)
                | "0 \(.allreduce_ns / 1000)\n122880 \(.allreduce_ns / 1000)"' \
                "$W/results.json" >"$P/nc-$n-$b.dat"
        done
    done
    gnuplot -e "dir='$P'; out='$W/experiment.png'" "$TOP/scripts/experiment.gp" 2>"$P/gnuplot.err" ||
        { cat "$P/gnuplot.err" >&2; die "gnuplot failed"; }
    log "plot: $W/experiment.png"
fi
log "results: $W/results.json, table: $W/table.md"

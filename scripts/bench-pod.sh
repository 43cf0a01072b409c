#!/usr/bin/env bash
# The pod benchmark of host-userland guests (docs/benchmarks.md section 6):
# every figure beside its baseline, measured in the same run.
#
#   boot   one guest, booted ROUNDS times each way, alternated: the time from
#          QEMU's start to its CXL region ready (the READY marker) of an
#          initramfs guest, against a host-userland guest's time to ready
#          and to up (network, the host's root over 9p, sshd: the UP marker)
#   net    two host-userland guests on the pod network: TCP round trip
#          (a 1-byte ping-pong, python3 on both ends) and iperf3
#          throughput, host 0 -> host 1
#   pod    N host-userland guests (default 32) booted at once: the time
#          until every one is up, and the host memory of the QEMUs (the sum
#          of their RSS, sampled every second; its peak, and per guest)
#   ipod   N initramfs guests (default 32, --mem 256M) started by the
#          launcher's defaults (--boot-parallel): the time from its first
#          QEMU's start to every CXL region ready (all_ready_s of --json),
#          the CPU time the QEMUs used until then, and their peak memory
#          (sum of RSS, and of PSS, which counts the kernel and initramfs
#          files the QEMUs share once); every guest's job waits (sleep)
#          until the last one is ready, then the pod is interrupted.
#          --ipod-arg ARG (repeatable) passes ARG to that launcher run,
#          e.g. --ipod-arg --boot-parallel=0 for all at once
#   ssh    for each N of --ssh-hosts (default 4): an N-host host-userland
#          pod (--mem 512M) with the guests' ssh settings of before
#          (CXLPOD_SSH_LEGACY=1, the baseline), then one with today's; in
#          each, host 0's job (the others serve) times, once every peer
#          answers: a fresh ssh connection host0 -> host1 running `true`
#          (--ssh-reps times, median; in today's pod also with the key
#          exchange and keys of before, then with ~/.bashrc read, each
#          alone), `mpirun -np N hostname` across the N guests (to its
#          first line and to its end), then ssh again (a later
#          connection: today's rides the connection mpirun's ssh left
#          open) and mpirun again; and the pod's time to every host up
#          (all_up_s) and to every region ready (all_ready_s)
#
#   bash scripts/bench-pod.sh [--no-build] [--rounds R] [--hosts N]
#                             [--mem SIZE] [--skip boot,net,pod,ipod,ssh]
#                             [--ipod-arg ARG]... [--ssh-hosts N[,N...]]
#                             [--ssh-reps R] [--workdir DIR] [--dry-run]
#
# --dry-run builds and boots nothing: it checks the arguments, the tools and
# every pod's launcher options (cxlpod-launch --dry-run), in a temporary
# work dir unless --workdir is given.
#
# Prints a table and writes WORKDIR/results.json (default build/bench-pod).
# Wall-clock times under TCG on this machine: its load shows (printed).
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_ALL=1 ROUNDS=3 NPOD=32 PODMEM=384M SKIP="" DRY=0 WGIVEN=
SSH_HOSTS=4 SSH_REPS=5
IPOD_ARGS=()
W=$BUILD/bench-pod
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_ALL=0; shift ;;
        --dry-run) DRY=1; BUILD_ALL=0; shift ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
        --hosts) [ $# -ge 2 ] || die "--hosts needs a number"; NPOD=$2; shift 2 ;;
        --mem) [ $# -ge 2 ] || die "--mem needs a size"; PODMEM=$2; shift 2 ;;
        --skip) [ $# -ge 2 ] || die "--skip needs a list"; SKIP=$2; shift 2 ;;
        --workdir) [ $# -ge 2 ] || die "--workdir needs a directory"; W=$2; WGIVEN=1; shift 2 ;;
        --ipod-arg) [ $# -ge 2 ] || die "--ipod-arg needs an argument"; IPOD_ARGS+=("$2"); shift 2 ;;
        --ssh-hosts) [ $# -ge 2 ] || die "--ssh-hosts needs a list"; SSH_HOSTS=$2; shift 2 ;;
        --ssh-reps) [ $# -ge 2 ] || die "--ssh-reps needs a number"; SSH_REPS=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
[[ $NPOD =~ ^[0-9]+$ ]] && [ "$NPOD" -ge 1 ] && [ "$NPOD" -le 256 ] || die "--hosts wants 1..256"
for k in ${SKIP//,/ }; do
    case $k in boot|net|pod|ipod|ssh) ;; *) die "--skip: '$k' is not boot, net, pod, ipod or ssh" ;; esac
done
[[ $SSH_REPS =~ ^[1-9][0-9]*$ ]] || die "--ssh-reps wants a positive number"
for n in ${SSH_HOSTS//,/ }; do
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 256 ] || die "--ssh-hosts wants numbers 2..256"
done
[ $BUILD_ALL = 0 ] || bash "$TOP/scripts/build-all.sh"
L=$BUILD/meson/host-tools/cxlpod-launch
[ -x "$L" ] || die "no $L: run scripts/build-all.sh"
if [ $DRY = 1 ]; then
    [ -n "$WGIVEN" ] || { W=$(mktemp -d /tmp/cxlpod-bench-pod-dry.XXXXXX); trap 'rm -rf "$W"' EXIT; }
    command -v iperf3 >/dev/null || die "iperf3 is missing (scripts/deps.sh)"
fi
# launch ARGS...: the launcher, or with --dry-run its check of the same options
launch() {
    if [ $DRY = 1 ]; then
        "$L" --dry-run "$@" || die "the launcher refuses: $*"
        return
    fi
    "$L" "$@"
}
rm -rf "$W"; mkdir -p "$W/proj"
cd "$W/proj"
skip() { [[ ,$SKIP, == *,$1,* ]]; }
R=$W/results.jsonl; : >"$R"
rec() { printf '%s\n' "$1" >>"$R"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# ---------------------------------------------------------------- boot
if ! skip boot; then
    log "boot: $ROUNDS x (initramfs, host userland), one guest each"
    for r in $(seq 1 "$ROUNDS"); do
        for u in initramfs host; do
            launch -q -w "$W/boot-$u-$r" -n 1 --userland $u --timeout 300 --json -- true \
                >"$W/boot-$u-$r.out" 2>"$W/boot-$u-$r.err" || die "boot $u round $r failed; see $W/boot-$u-$r.err"
            [ $DRY = 0 ] || continue
            j=$(grep '^{' "$W/boot-$u-$r.out" | tail -n1)
            rec "$(jq -c --arg u "$u" --argjson r "$r" --arg load "$(load)" \
                '{bench:"boot", userland:$u, round:$r, ready_s:.results[0].boot_s, up_s:.results[0].up_s, load:$load}' <<<"$j")"
        done
    done
fi

# ---------------------------------------------------------------- net
if ! skip net; then
    log "net: TCP round trip and iperf3 between two host-userland guests"
    cat >"$W/proj/server.sh" <<'EOF'
python3 - <<'PY' &
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5001)); s.listen(1)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    d = c.recv(1)
    if not d: break
    c.sendall(d)
PY
iperf3 -s -1 -p 5201 >/dev/null 2>&1
wait
EOF
    cat >"$W/proj/client.sh" <<'EOF'
for t in $(seq 1 120); do ssh host1 true 2>/dev/null && break; sleep 1; done
sleep 1
python3 - <<'PY'
import socket, time
for t in range(100):
    try:
        s = socket.create_connection(("host1", 5001), timeout=5); break
    except OSError:
        time.sleep(0.5)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(200): s.sendall(b"x"); s.recv(1)
n = 2000; t0 = time.perf_counter()
for i in range(n): s.sendall(b"x"); s.recv(1)
dt = time.perf_counter() - t0
print("RTT_US %.1f" % (dt / n * 1e6))
s.close()
PY
iperf3 -c host1 -p 5201 -t 8 -J >iperf.json && echo "IPERF_OK"
EOF
    launch -q -w "$W/net" -n 2 --userland host --timeout 400 --json \
        --job-host 0:client.sh --job-host 1:server.sh >"$W/net.out" 2>"$W/net.err" \
        || die "the network benchmark pod failed; see $W/net.err"
fi
if ! skip net && [ $DRY = 0 ]; then
    rtt=$(sed -n 's/^\[host0\] RTT_US //p' "$W/net.out")
    gbps=$(jq '.end.sum_received.bits_per_second / 1e9' "$W/proj/iperf.json")
    rec "$(jq -nc --argjson rtt "${rtt:-null}" --argjson g "${gbps:-null}" --arg load "$(load)" \
        '{bench:"net", rtt_us:$rtt, iperf3_gbps:$g, load:$load}')"
fi

# ---------------------------------------------------------------- pod
if ! skip pod; then
    log "pod: $NPOD host-userland guests at once, --mem $PODMEM"
    launch -q -w "$W/pod" -n "$NPOD" --userland host --mem "$PODMEM" --size 256M \
        --timeout 1200 --boot-timeout 900 --json -- 'cat /proc/meminfo | head -n 3 >/dev/null' \
        >"$W/pod.out" 2>"$W/pod.err" &
    lp=$!
    peak=0
    while kill -0 $lp 2>/dev/null; do
        # this pod's QEMUs only (their command lines name its work dir)
        # (none yet: ps or grep finds nothing, which must not end the script)
        kb=$(ps -C qemu-system-x86_64 -o rss=,args= 2>/dev/null | grep -F -- "$W/pod/" |
             awk '{s += $1} END {print s + 0}') || kb=0
        [ "$kb" -gt "$peak" ] && peak=$kb
        sleep 1
    done
    wait $lp || die "the $NPOD-host pod failed; see $W/pod.err"
fi
if ! skip pod && [ $DRY = 0 ]; then
    j=$(grep '^{' "$W/pod.out" | tail -n1)
    rec "$(jq -c --argjson peak "$peak" --argjson n "$NPOD" --arg mem "$PODMEM" --arg load "$(load)" \
        '{bench:"pod", hosts:$n, mem:$mem, wall_s:.wall_s, all_up_s:([.results[].up_s] | max),
          ready_s_max:([.results[].boot_s] | max), peak_rss_mib:($peak / 1024),
          rss_per_guest_mib:($peak / 1024 / $n), ok:([.results[] | select(.status == "ok")] | length),
          load:$load}' <<<"$j")"
fi

# ---------------------------------------------------------------- ipod
# the PIDs of the QEMUs of the launcher run in work dir $1
pod_qemus() { pgrep -f -- "qemu-system-x86_64 .*$1/" || true; }
if ! skip ipod; then
    log "ipod: $NPOD initramfs guests, --mem 256M, until every region is ready"
    launch -w "$W/ipod" -n "$NPOD" --mem 256M --timeout 1200 --boot-timeout 900 --json \
        ${IPOD_ARGS[@]+"${IPOD_ARGS[@]}"} -- 'sleep 100000' >"$W/ipod.out" 2>"$W/ipod.err" &
    lp=$!
    rss=0 pss=0 cpu="" load0=$(load)
    while kill -0 $lp 2>/dev/null; do
        pids=$(pod_qemus "$W/ipod")
        kb=0 pk=0
        for p in $pids; do
            kb=$((kb + $(awk '/^VmRSS:/ {print $2}' /proc/$p/status 2>/dev/null || echo 0)))
            pk=$((pk + $(awk '/^Pss:/ {print $2}' /proc/$p/smaps_rollup 2>/dev/null || echo 0)))
        done
        [ $kb -gt $rss ] && rss=$kb
        [ $pk -gt $pss ] && pss=$pk
        if [ -z "$cpu" ] && [ "$(grep -l '@@CXLPOD-READY' "$W"/ipod/host*.log 2>/dev/null | wc -l)" -ge "$NPOD" ]; then
            # CPU time (user + system) of the pod's QEMUs so far, in seconds
            cpu=$(for p in $pids; do awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null; done |
                  awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.1f", s / hz}')
            # $lp is the subshell of `launch ... &`: the launcher is its child
            pkill -INT -P $lp 2>/dev/null || kill -INT $lp
        fi
        sleep 0.5
    done
    if [ $DRY = 1 ]; then
        wait $lp || die "the $NPOD-host initramfs pod: the launcher refuses its options; see $W/ipod.err"
    else
        wait $lp || true    # interrupted: exit 130
    fi
fi
if ! skip ipod && [ $DRY = 0 ]; then
    j=$(grep '^{' "$W/ipod.out" | tail -n1)
    [ -n "$j" ] && [ "$(jq -r .all_ready_s <<<"$j")" != null ] || die "the $NPOD-host initramfs pod did not get ready; see $W/ipod.err"
    rec "$(jq -c --argjson rss "$rss" --argjson pss "$pss" --argjson n "$NPOD" --argjson cpu "${cpu:-null}" \
        --arg load0 "$load0" --arg load "$(load)" --arg args "${IPOD_ARGS[*]+${IPOD_ARGS[*]}}" \
        '{bench:"ipod", hosts:$n, args:$args, all_ready_s:.all_ready_s,
          boot_s_max:([.results[].boot_s] | max), cpu_s:$cpu, cpu_s_per_guest:($cpu / $n),
          peak_rss_mib:($rss / 1024), rss_per_guest_mib:($rss / 1024 / $n),
          peak_pss_mib:($pss / 1024), pss_per_guest_mib:($pss / 1024 / $n),
          load_before:$load0, load:$load}' <<<"$j")"
fi

# ---------------------------------------------------------------- ssh
if ! skip ssh; then
    # host 0's job, in bash (EPOCHREALTIME: no process per timestamp)
    cat >"$W/proj/ssh-bench.sh" <<'EOF'
N=$1 R=$2
us() { echo "${EPOCHREALTIME/./}"; }
fresh=(-o ControlMaster=no -o ControlPath=none)
H=host0; for j in $(seq 1 $((N - 1))); do H=$H,host$j; done
# every peer answers (fresh connections, none kept)
for j in $(seq 1 $((N - 1))); do
    for t in $(seq 1 600); do ssh "${fresh[@]}" host$j true 2>/dev/null && break; sleep 0.5; done
done
for i in $(seq 1 "$R"); do
    a=$(us); ssh "${fresh[@]}" host1 true; rc=$?; b=$(us)
    echo "SSH_FIRST $(( (b - a) / 1000 )) $rc"
done
# today's settings step by step, new connections each (a pod with them
# only): the key exchange and keys of before (curve25519, ed25519), and
# ~/.bashrc read, as bash read it for every ssh command before
if grep -q '^ *ControlMaster auto' ~/.ssh/config; then
    old=(-o KexAlgorithms=curve25519-sha256 -o HostKeyAlgorithms=ssh-ed25519
         -o PubkeyAcceptedAlgorithms=ssh-ed25519)
    for i in $(seq 1 "$R"); do
        a=$(us); ssh "${fresh[@]}" "${old[@]}" host1 true; rc=$?; b=$(us)
        echo "STEP_X25519 $(( (b - a) / 1000 )) $rc"
        a=$(us); ssh "${fresh[@]}" host1 '. ~/.bashrc; true'; rc=$?; b=$(us)
        echo "STEP_BASHRC $(( (b - a) / 1000 )) $rc"
    done
fi
# mpirun_t TAG: mpirun -np N hostname: ms to its first line, to its end,
# and how many lines name a host
# (a pipe: the guest's /dev has no /dev/fd for bash's <(...))
mpirun_t() {
    local a
    a=$(us)
    mpirun -np "$N" --host "$H" hostname 2>&1 | {
        first="" n=0
        while IFS= read -r l; do
            [ -n "$first" ] || first=$(us)
            case $l in host[0-9]*) n=$((n + 1)) ;; *) echo "mpirun: $l" ;; esac
        done
        b=$(us)
        echo "$1 $(( (${first:-$b} - a) / 1000 )) $(( (b - a) / 1000 )) $n"
    }
}
mpirun_t MPI_FIRST
for i in $(seq 1 "$R"); do
    a=$(us); ssh host1 true; rc=$?; b=$(us)
    echo "SSH_NEXT $(( (b - a) / 1000 )) $rc"
done
mpirun_t MPI_NEXT
EOF
    for n in ${SSH_HOSTS//,/ }; do
        echo "bash ssh-bench.sh $n $SSH_REPS" >"$W/proj/ssh-job-$n.sh"
        for cfg in legacy fast; do
            log "ssh: $n host-userland guests, the guests' ssh $cfg"
            leg=0; [ $cfg = fast ] || leg=1
            CXLPOD_SSH_LEGACY=$leg launch -q -w "$W/ssh-$cfg-$n" -n "$n" --userland host --mem 512M \
                --timeout 1500 --boot-timeout 900 --json --job-host "0:$W/proj/ssh-job-$n.sh" \
                >"$W/ssh-$cfg-$n.out" 2>"$W/ssh-$cfg-$n.err" \
                || die "the $n-host ssh benchmark pod ($cfg) failed; see $W/ssh-$cfg-$n.err"
            [ $DRY = 0 ] || continue
            o=$W/ssh-$cfg-$n.out
            j=$(grep '^{' "$o" | tail -n1)
            # med TAG: the median of TAG's times that succeeded (rc 0)
            med() { sed -n "s/^\[host0\] $1 \([0-9]*\) 0\$/\1/p" "$o" | sort -n |
                    awk '{a[NR] = $1} END {print NR ? a[int((NR + 1) / 2)] : "null"}'; }
            mf() { sed -n "s/^\[host0\] $1 \([0-9]*\) \([0-9]*\) \([0-9]*\)\$/{\"first_ms\":\1,\"end_ms\":\2,\"lines\":\3}/p" "$o" |
                   head -n1 | grep . || echo null; }
            rec "$(jq -c --arg cfg "$cfg" --argjson n "$n" --argjson sf "$(med SSH_FIRST)" \
                --argjson sn "$(med SSH_NEXT)" --argjson sx "$(med STEP_X25519)" \
                --argjson sb "$(med STEP_BASHRC)" --argjson m1 "$(mf MPI_FIRST)" \
                --argjson m2 "$(mf MPI_NEXT)" --arg load "$(load)" \
                '{bench:"ssh", cfg:$cfg, hosts:$n, ssh_first_ms:$sf, ssh_next_ms:$sn,
                  step_x25519_ms:$sx, step_bashrc_ms:$sb,
                  mpi_first:$m1, mpi_next:$m2, all_ready_s:.all_ready_s, all_up_s:.all_up_s,
                  up_s_max:([.results[].up_s] | max), boot_s_max:([.results[].boot_s] | max),
                  load:$load}' <<<"$j")"
        done
    done
fi

# ---------------------------------------------------------------- table
if [ $DRY = 1 ]; then
    log "dry run: arguments, tools and every pod's launcher options are fine; nothing booted"
    exit 0
fi
jq -s '.' "$R" >"$W/results.json"
echo
echo "cxlpod pod benchmark ($(date -u +%F), $(nproc) cores, load now $(load))"
if jq -e 'map(select(.bench == "boot")) | length > 0' "$W/results.json" >/dev/null; then
    jq -r '
      def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
      (map(select(.bench == "boot" and .userland == "initramfs") | .ready_s) | med) as $ir
      | (map(select(.bench == "boot" and .userland == "host") | .ready_s) | med) as $hr
      | (map(select(.bench == "boot" and .userland == "host") | .up_s) | med) as $hu
      | "boot, median of \(map(select(.bench == "boot" and .userland == "host")) | length) alternated runs:",
        "  initramfs guest, start -> region ready     \($ir) s   (baseline)",
        "  host-userland guest, start -> region ready \($hr) s   \($hr / $ir * 100 | round / 100)x",
        "  host-userland guest, start -> up (net, 9p root, sshd) \($hu) s   \($hu / $ir * 100 | round / 100)x"' \
        "$W/results.json"
fi
jq -r '.[] | select(.bench == "net") |
  "network, host0 -> host1 (virtio-net, VDE switch):",
  "  TCP round trip (1-byte ping-pong)  \(.rtt_us) us",
  "  iperf3 throughput                  \(.iperf3_gbps * 1000 | round / 1000) Gbit/s"' "$W/results.json"
jq -r '.[] | select(.bench == "pod") |
  "\(.hosts)-host host-userland pod, --mem \(.mem):",
  "  all up after \(.all_up_s) s (wall \(.wall_s) s), \(.ok) of \(.hosts) ok",
  "  QEMU memory: peak \(.peak_rss_mib | round) MiB in all, \(.rss_per_guest_mib | round) MiB per guest"' "$W/results.json"
jq -r '.[] | select(.bench == "ipod") |
  "\(.hosts)-host initramfs pod, --mem 256M\(if .args != "" then ", " + .args else "" end):",
  "  every region ready after \(.all_ready_s) s (the slowest guest booted in \(.boot_s_max) s)",
  "  QEMU CPU time until then \(.cpu_s) s, \(.cpu_s_per_guest * 100 | round / 100) s per guest",
  "  QEMU memory, peak: RSS \(.peak_rss_mib | round) MiB (\(.rss_per_guest_mib | round) per guest), PSS \(.peak_pss_mib | round) MiB (\(.pss_per_guest_mib | round) per guest)",
  "  load average before / after: \(.load_before) / \(.load)"' "$W/results.json"
jq -r '
  def x(a; b): if (a | type) == "number" and (b | type) == "number" and b > 0
               then "\(a / b * 100 | round / 100)x" else "-" end;
  def pad(n): tostring | if length < n then . + " " * (n - length) else . end;
  def row(name; a; b; r): "  \(name | pad(50)) \(a // "-" | pad(8)) \(b // "-" | pad(8)) \(r)";
  map(select(.bench == "ssh")) | group_by(.hosts)[]
  | (map(select(.cfg == "legacy"))[0] // {}) as $o | (map(select(.cfg == "fast"))[0] // {}) as $f
  | ($f.hosts // $o.hosts) as $n
  | "ssh and mpirun, \($n) host-userland guests (legacy: CXLPOD_SSH_LEGACY=1, the baseline):",
    row("figure"; "legacy"; "fast"; "legacy/fast"),
    row("ssh host0 -> host1 true, new connection, ms"; $o.ssh_first_ms; $f.ssh_first_ms; x($o.ssh_first_ms; $f.ssh_first_ms)),
    row("  the same, key exchange and keys of before, ms"; null; $f.step_x25519_ms; ""),
    row("  the same, ~/.bashrc read, ms"; null; $f.step_bashrc_ms; ""),
    row("ssh host0 -> host1 true, later, ms"; $o.ssh_next_ms; $f.ssh_next_ms; x($o.ssh_next_ms; $f.ssh_next_ms)),
    row("mpirun -np \($n) hostname, first line, ms"; $o.mpi_first.first_ms; $f.mpi_first.first_ms; x($o.mpi_first.first_ms; $f.mpi_first.first_ms)),
    row("mpirun -np \($n) hostname, end, ms"; $o.mpi_first.end_ms; $f.mpi_first.end_ms; x($o.mpi_first.end_ms; $f.mpi_first.end_ms)),
    row("mpirun again, first line, ms"; $o.mpi_next.first_ms; $f.mpi_next.first_ms; x($o.mpi_next.first_ms; $f.mpi_next.first_ms)),
    row("mpirun again, end, ms"; $o.mpi_next.end_ms; $f.mpi_next.end_ms; x($o.mpi_next.end_ms; $f.mpi_next.end_ms)),
    row("every region ready (all_ready_s), s"; $o.all_ready_s; $f.all_ready_s; ""),
    row("every host up (all_up_s), s"; $o.all_up_s; $f.all_up_s; ""),
    row("  up / ready (target at most 1.3x)"; x($o.all_up_s; $o.all_ready_s); x($f.all_up_s; $f.all_ready_s); ""),
    "  load average after each pod: \($o.load // "-") / \($f.load // "-")"' "$W/results.json"
echo "results: $W/results.json"

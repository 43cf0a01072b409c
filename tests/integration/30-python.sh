#!/usr/bin/env bash
# The cxlpod Python module on a 2-host pod, from an installation (so the
# module finds libcxlpod and cxlpod-launch relative to itself):
#   - on this machine, cxlpod.launch() starts the pod (--userland host:
#     the guests run this machine's python3 and see the installed module)
#     and returns the launcher's JSON result;
#   - in each guest, cxlpod.Pod() opens the device: host id and count,
#     NumPy arrays over both areas without a copy; host 1 reads the
#     non-coherent area once (caching it), host 0 writes it, writes back
#     and fences, then publishes with an atomic; host 1 still reads the old
#     value until it invalidates, then the new one; both hosts add to a
#     counter in the coherent window (exact total); a closed pod and an
#     offset out of range raise cxlpod.Error.
# With CXLPOD_INSTALLED=PREFIX that installation is used.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || fail "python3-numpy is not installed (scripts/deps.sh installs it)"
if [ -n "${CXLPOD_INSTALLED:-}" ]; then
    P=$CXLPOD_INSTALLED
else
    P=$WORK/prefix
    bash "$CXLPOD_TOP/scripts/install.sh" --no-build "$P" >"$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log"; fail "scripts/install.sh --no-build failed"; }
fi
PYDIR=$P/lib/python3/dist-packages
mkdir -p "$WORK/proj"
cat >"$WORK/proj/job.py" <<'EOF2'
import errno, json, time
import numpy as np
import cxlpod

ADDS = 5000
out = {}
with cxlpod.Pod() as pod:
    me, n = pod.host_id, pod.host_count
    out.update(host=me, count=n, backend=pod.backend, size=pod.size,
               coherent=pod.coherent_size)
    nc = np.frombuffer(pod.noncoherent, dtype=np.uint64)
    co = np.frombuffer(pod.coherent, dtype=np.uint64)
    out["zero_copy"] = (not nc.flags.owndata and
                        pod.offset_of(nc[8:]) == pod.coherent_size + 64)
    FLAG, CTR, DATA = 64, 128, pod.coherent_size + 4096   # pool offsets
    data = np.frombuffer(pod.view(DATA, 4096), dtype=np.uint64)
    if me == 1:
        pod.invalidate(data)
        out["before"] = int(data.sum())         # now cached in host 1's image
        pod.atomic_store(FLAG + 8, 1)           # tell host 0 to go on
    else:
        while pod.atomic_load(FLAG + 8) != 1:
            time.sleep(0.02)
        data[:] = np.arange(512, dtype=np.uint64) + 1
        pod.writeback(data)
        pod.fence()
        pod.atomic_store(FLAG, 1)
    if me == 1:
        while pod.atomic_load(FLAG) != 1:
            time.sleep(0.02)
        out["stale"] = int(data.sum())          # the old copy, not invalidated
        pod.invalidate(DATA, 4096)
        out["fresh"] = int(data.sum())          # sum(1..512) = 131328
    for _ in range(ADDS):
        pod.fetch_add(CTR, 1)
    deadline = time.time() + 120
    while pod.atomic_load(CTR) < ADDS * n and time.time() < deadline:
        time.sleep(0.02)
    out["counter"] = pod.atomic_load(CTR)
    try:
        pod.writeback(pod.size - 64, 128)
    except cxlpod.Error as e:
        out["range_error"] = e.errno == errno.EINVAL
    del nc, co, data
pod_closed = pod
try:
    pod_closed.fence()
except cxlpod.Error as e:
    out["closed_error"] = e.errno == errno.EBADF
print("PYJOB " + json.dumps(out), flush=True)
EOF2
cat >"$WORK/launch.py" <<EOF2
import json, sys
import cxlpod
r = cxlpod.launch("PYTHONPATH=$PYDIR $PY job.py", hosts=2, userland="host",
                  workdir="$WORK/pod", cwd="$WORK/proj")
print("launcher:", r.args[0])
print("exit", r.returncode, "ok", r.ok)
sys.stderr.write(r.stderr[-3000:])
for h in range(2):
    print("host%d:" % h, r.output(h).strip())
print("RESULTS " + json.dumps([(x["host"], x["status"], x["rc"]) for x in r.results]))
sys.exit(0 if r.ok else 1)
EOF2
rc=0
(cd "$WORK" && env -u CXLPOD_TOP -u CXLPOD_QEMU -u CXLPOD_KERNEL -u CXLPOD_INITRD -u CXLPOD_LAUNCH \
    PYTHONPATH="$PYDIR" $PY launch.py) >"$WORK/launch.out" 2>&1 || rc=$?
cat "$WORK/launch.out"
[ "$rc" = 0 ] || fail "the pod started by cxlpod.launch() failed (exit $rc)"
grep -qx "launcher: $P/bin/cxlpod-launch" "$WORK/launch.out" \
    || fail "cxlpod.launch() did not use the installation's launcher"
grep -qF 'RESULTS [[0, "ok", 0], [1, "ok", 0]]' "$WORK/launch.out" || fail "cxlpod.launch()'s results are not both ok"
for i in 0 1; do
    j=$(sed -n 's/^PYJOB //p' "$WORK/pod/host$i.out")
    [ -n "$j" ] || fail "host $i printed no PYJOB line: $(cat "$WORK/pod/host$i.out")"
    jq -e --argjson i $i '.host == $i and .count == 2 and .backend == "device" and
        .zero_copy and .counter == 10000 and .range_error and .closed_error' <<<"$j" >/dev/null \
        || fail "host $i: $j"
done
j=$(sed -n 's/^PYJOB //p' "$WORK/pod/host1.out")
jq -e '.before == 0 and .stale == 0 and .fresh == 131328' <<<"$j" >/dev/null \
    || fail "host 1 did not see stale-then-fresh data through the module: $j"
pass "Python on a 2-host pod: device opened, NumPy views without copies, stale until invalidate, exact atomics, clear errors"

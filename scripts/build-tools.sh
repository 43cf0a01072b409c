#!/usr/bin/env bash
# Build libcxlpod, the guest tools (static), the host tools and the unit
# tests with meson into build/meson.
set -euo pipefail
. "$(dirname "$0")/common.sh"

MB=$BUILD/meson
if [ ! -f "$MB/build.ninja" ]; then
    log "configuring tools in $MB"
    meson setup "$MB" "$TOP" >"$LOGDIR/tools-setup.log" 2>&1 \
        || { tail -n 20 "$LOGDIR/tools-setup.log" >&2; die "meson setup of the tools failed; see $LOGDIR/tools-setup.log"; }
fi
ninja -C "$MB" >"$LOGDIR/tools-build.log" 2>&1 \
    || { grep -E 'error|FAILED' "$LOGDIR/tools-build.log" | head -n 30 >&2; die "tools build failed; see $LOGDIR/tools-build.log"; }
log "tools built in $MB"

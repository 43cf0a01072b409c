#!/usr/bin/env bash
# Build libcxlpod, the guest tools (static), the host tools and the unit
# tests with meson into build/meson.
set -euo pipefail
. "$(dirname "$0")/common.sh"

MB=$BUILD/meson
# -Dcxlpod_build: the QEMU and guest image `meson install` copies
# (scripts/install-parts.sh); a relocatable pkg-config file, so that an
# installation (scripts/install.sh) does not depend on its prefix.
OPTS=(-Dcxlpod_build="$BUILD" -Dpkgconfig.relocatable=true)
if [ ! -f "$MB/build.ninja" ]; then
    log "configuring tools in $MB"
    meson setup "$MB" "$TOP" "${OPTS[@]}" >"$LOGDIR/tools-setup.log" 2>&1 \
        || { tail -n 20 "$LOGDIR/tools-setup.log" >&2; die "meson setup of the tools failed; see $LOGDIR/tools-setup.log"; }
elif [ "$(meson introspect --buildoptions "$MB" 2>/dev/null |
          jq -r '.[] | select(.name == "cxlpod_build" or .name == "pkgconfig.relocatable") | "\(.name)=\(.value)"' |
          sort | paste -sd' ')" != "cxlpod_build=$BUILD pkgconfig.relocatable=true" ]; then
    # a build folder configured before these options existed
    meson setup --reconfigure "$MB" "$TOP" "${OPTS[@]}" >"$LOGDIR/tools-setup.log" 2>&1 \
        || { tail -n 20 "$LOGDIR/tools-setup.log" >&2; die "meson setup --reconfigure of the tools failed; see $LOGDIR/tools-setup.log"; }
fi
ninja -C "$MB" >"$LOGDIR/tools-build.log" 2>&1 \
    || { grep -E 'error|FAILED' "$LOGDIR/tools-build.log" | head -n 30 >&2; die "tools build failed; see $LOGDIR/tools-build.log"; }
log "tools built in $MB"

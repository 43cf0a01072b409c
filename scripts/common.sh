# Shared helpers for cxlpod's scripts.  Sourced, never run.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CXLPOD_BUILD:-$TOP/build}
LOGDIR=$BUILD/logs
mkdir -p "$LOGDIR"
log()  { printf '[cxlpod] %s\n' "$*" >&2; }
warn() { printf '[cxlpod] warning: %s\n' "$*" >&2; }
die()  { printf '[cxlpod] error: %s\n' "$*" >&2; exit 1; }

# QEMU's configure flags, one a line (scripts/build-qemu.sh, and
# scripts/check-series.sh for the exported series, so that both compile
# alike and share ccache's entries)
# QEMU's configure writes "werror = true" into the build folder's
# config-meson.cross for a source tree under git; --disable-werror wins at
# configure, but when ninja re-runs meson (a patch changed a meson.build)
# the cross file's value came back, so build/qemu and the series' build
# compiled with -Werror or without depending on their history, and could
# share no ccache entries.  qemu_configured DIR takes the line out after
# configure; QEMU_CONF_REV is in both scripts' configure checksum, so
# folders configured before this are configured again once.
QEMU_CONF_REV=no-werror-default
qemu_configured() {
    sed -i '/^werror = true$/d' "$1/config-meson.cross"
}

qemu_configure_flags() {
    printf '%s\n' --python=/usr/bin/python3 --target-list=x86_64-softmmu \
        --without-default-features --without-default-devices \
        --with-devices-x86_64=cxlpod \
        --enable-tcg --enable-kvm --enable-numa --disable-docs --disable-install-blobs \
        --enable-vde --enable-attr --enable-virtfs \
        --disable-werror
    if [ -x /usr/lib/ccache/gcc ]; then
        printf '%s\n' --cc=/usr/lib/ccache/gcc --host-cc=/usr/lib/ccache/gcc
    fi
}

# Build what a benchmark boots (scripts/build-all.sh), after any QEMU
# rebuild someone else runs in the same tree (at most 10 minutes' wait)
build_all_after_others() {
    local _
    for _ in $(seq 600); do
        pgrep -f "ninja -C $BUILD/qemu( |$)" >/dev/null || break
        sleep 1
    done
    bash "$TOP/scripts/build-all.sh"
}

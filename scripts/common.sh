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

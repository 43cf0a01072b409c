#!/usr/bin/env bash
# Install every Debian package cxlpod needs to build QEMU, the guest image,
# the tools and the tests.  Idempotent: a second run with everything present
# only checks.  Needs root and Debian 12 (bookworm) with its package archive.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/apt-archive.sh"

PKGS=(build-essential ccache ninja-build pkg-config flex bison dpkg-dev
      libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev libjson-glib-dev
      seabios qemu-system-data busybox-static cpio xz-utils zstd kmod
      libelf1 libnuma-dev
      python3-venv python3-setuptools python3-wheel python3-yaml
      ca-certificates git file jq clang libclang-rt-14-dev
      libattr1-dev libvdeplug-dev vde2
      openssh-client openssh-server openmpi-bin libopenmpi-dev
      python3 socat iperf3 iproute2 iputils-ping gnuplot-nox
      python3-numpy debhelper dh-python lintian libucx-dev)
# libattr1-dev: QEMU's virtio-9p (host-userland guests' root file system);
# libvdeplug-dev + vde2: -netdev vde and vde_switch (the pod network);
# openssh-server, openmpi-bin, python3, socat, iperf3: run inside
# host-userland guests, whose root file system is this machine's own
# (docs/your-software.md); their services are never started on the host.
# python3-numpy: the Python module's tests (its buffers as NumPy arrays);
# debhelper, dh-python, lintian: the Debian package (scripts/build-deb.sh).
# libucx-dev (UCX 1.13): cxlpod-pool serve and its client library, the
# pool served to hosts on other machines (docs/pool-tool.md).
# iputils-ping: ping between host-userland guests (the pod network across
# machines, tests/integration/35-two-machines.sh).
# gnuplot-nox: the figures of scripts/bench.sh, scripts/bench-scale.sh and
# scripts/experiment.sh (docs/benchmarks.md, docs/experiment.md).
BPO_PKGS=(meson python3-pycotap)

missing=()
for p in "${PKGS[@]}" "${BPO_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done

# deb bookworm-backports (meson >= 1.5, python3-pycotap) and deb-src trixie
# (QEMU 10.0 source), from the machine's archive, in cxlpod.sources unless
# the machine's sources already give them (scripts/apt-archive.sh).  Binary
# trixie packages are never installed: we only add the source entry, and
# pin nothing from it.  The machine's other sources are not touched.
read -r ARCHIVE KEYRING < <(debian_archive || true) || true
NO_BOOKWORM=
if [ -z "${ARCHIVE:-}" ]; then
    ARCHIVE=http://deb.debian.org/debian
    NO_BOOKWORM=1
fi
[ -n "${KEYRING:-}" ] || KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
SOURCES=/etc/apt/sources.list.d/cxlpod.sources
WANT_SOURCES=$(cxlpod_sources "$ARCHIVE" "$KEYRING" 2>"$LOGDIR/apt-sources.log")

if [ "${#missing[@]}" -eq 0 ] && [ -x /usr/bin/meson ] &&
   dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson)" ge 1.5 &&
   [ "$WANT_SOURCES" = "$(cat "$SOURCES" 2>/dev/null)" ]; then
    log "dependencies: all present"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "dependencies missing (${missing[*]}) or $SOURCES out of date; run as root so apt-get can install them"
grep -qs 'bookworm' /etc/os-release || warn "this is not Debian 12 (bookworm); continuing anyway"

[ -z "$NO_BOOKWORM" ] || warn "no bookworm entry in the apt sources; using $ARCHIVE"
log "Debian archive: $ARCHIVE (keyring $KEYRING)"
while read -r line; do log "  $line"; done <"$LOGDIR/apt-sources.log"
if [ -n "$WANT_SOURCES" ]; then
    printf '%s\n' "$WANT_SOURCES" >"$SOURCES"
else
    rm -f "$SOURCES"   # both suites come from the machine's own sources
fi

log "apt-get update"
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get -o Acquire::Retries=2 -o Acquire::http::Timeout=30 update -q >"$LOGDIR/apt-update.log" 2>&1 \
    || die "apt-get update failed (no network to the Debian archive?); see $LOGDIR/apt-update.log"
if grep -qE '^(Err|W: Failed)' "$LOGDIR/apt-update.log"; then
    grep -E '^(Err|W: Failed)' "$LOGDIR/apt-update.log" >&2
    die "apt-get update could not reach part of the Debian archive; see $LOGDIR/apt-update.log"
fi
# Packages with a service (openssh-server) must not start it on this
# machine: they are installed for the guests.  Debian's policy-rc.d
# convention tells their maintainer scripts not to start anything; ours is
# removed again afterwards (one the machine already has is left alone).
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# cxlpod deps.sh: no service starts during the install\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
log "apt-get install ${PKGS[*]}"
timeout 1200 apt-get install -y -q --no-install-recommends "${PKGS[@]}" >"$LOGDIR/apt-install.log" 2>&1 \
    || die "apt-get install failed; see $LOGDIR/apt-install.log"
log "apt-get install -t bookworm-backports ${BPO_PKGS[*]}"
timeout 600 apt-get install -y -q --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}" \
    >>"$LOGDIR/apt-install.log" 2>&1 \
    || die "apt-get install from bookworm-backports failed; see $LOGDIR/apt-install.log"
# openssh-server is for the guests: when this script installed it, its
# service stays off on this machine after a reboot too (Debian's ssh unit
# and init script honour /etc/ssh/sshd_not_to_be_run; the guests start
# /usr/sbin/sshd themselves).  A server the machine had before is left alone.
if printf '%s\n' "${missing[@]}" | grep -qx openssh-server; then
    touch /etc/ssh/sshd_not_to_be_run
    log "openssh-server installed for the guests; its service on this machine is disabled (/etc/ssh/sshd_not_to_be_run)"
fi
dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson)" ge 1.5 \
    || die "meson >= 1.5 is needed to build QEMU 10.0; bookworm-backports did not provide it"
log "dependencies: installed"

#!/usr/bin/env bash
# Build the cxlpod guest image: a Debian 6.12 kernel (downloaded, never
# installed on the host) and a busybox initramfs that brings up the CXL RAM
# region as /dev/daxN.M and runs the job passed through fw_cfg.
#
#   scripts/build-guest.sh [--extra DIR] [--output FILE] [--kernel-pkg PKG] [--force]
#
#   --extra DIR       copy DIR into the image as /cxlpod/extra (also: CXLPOD_EXTRA)
#   --output FILE     write the initramfs to FILE instead of the default
#                     (also: CXLPOD_INITRAMFS); FILE.inputs records its inputs
#   --kernel-pkg PKG  pin the kernel package (also: CXLPOD_KERNEL_PKG), e.g.
#                     linux-image-6.12.118+deb12-amd64-unsigned
#   --force           rebuild the initramfs even if no input changed
#
# Output: $BUILD/guest/vmlinuz (a symlink into kernel-<release>/boot/, with
# vmlinux-<release> beside it for PVH boot) and $BUILD/guest/initramfs.cpio
# (not compressed); the two paths are printed on stdout, one
# per line, at the end (all messages go to stderr).  Runs of this script are
# serialised with a lock, so parallel callers are safe.
set -euo pipefail
. "$(dirname "$0")/common.sh"

EXTRA=${CXLPOD_EXTRA:-}
KPKG=${CXLPOD_KERNEL_PKG:-}
OUTPUT=${CXLPOD_INITRAMFS:-}
FORCE=0
while [ $# -gt 0 ]; do
    case $1 in
        --extra) [ $# -ge 2 ] || die "--extra needs a directory"; EXTRA=$2; shift 2 ;;
        --extra=*) EXTRA=${1#--extra=}; shift ;;
        --output) [ $# -ge 2 ] || die "--output needs a file name"; OUTPUT=$2; shift 2 ;;
        --output=*) OUTPUT=${1#--output=}; shift ;;
        --kernel-pkg) [ $# -ge 2 ] || die "--kernel-pkg needs a package name"; KPKG=$2; shift 2 ;;
        --kernel-pkg=*) KPKG=${1#--kernel-pkg=}; shift ;;
        --force) FORCE=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
if [ -n "$EXTRA" ]; then
    [ -d "$EXTRA" ] || die "extra folder '$EXTRA' is not a directory"
    EXTRA=$(cd "$EXTRA" && pwd)
fi

GUEST=$BUILD/guest
DL=$GUEST/dl
TOOLS_DIR=$BUILD/meson/guest-tools
INIT_SRC=$TOP/guest-tools/init
mkdir -p "$GUEST" "$DL"
exec 9>"$GUEST/.lock"
flock 9 || die "cannot lock $GUEST/.lock"
[ -f "$INIT_SRC" ] || die "missing $INIT_SRC"
for t in cpio gzip xz sha256sum truncate od; do
    command -v "$t" >/dev/null || die "'$t' not found; run scripts/deps.sh"
done
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x insmod >/dev/null \
    || die "/bin/busybox (package busybox-static) not found; run scripts/deps.sh"
# applets the init cannot do without
for a in mkfifo mdev setsid cttyhack poweroff dmesg; do
    /bin/busybox --list | grep -x "$a" >/dev/null || die "/bin/busybox has no '$a' applet (the init needs it)"
done
file -L /bin/busybox 2>/dev/null | grep "statically linked" >/dev/null \
    || warn "/bin/busybox does not look statically linked; install busybox-static"

# ---------------------------------------------------------------- kernel
# Newest stamped kernel already on disk (used when apt sees no package).
newest_local_kernel() {
    local d best=""
    for d in "$GUEST"/kernel-*/; do
        [ -f "$d.stamp" ] || continue
        best=$(printf '%s\n%s\n' "$best" "$(basename "$d")" | sed '/^$/d' | sort -V | tail -n1)
    done
    printf '%s' "${best#kernel-}"
}

if [ -z "$KPKG" ]; then
    KPKG=$(apt-cache pkgnames linux-image-6.12. 2>/dev/null \
           | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | sort -V | tail -n1 || true)
fi
if [ -z "$KPKG" ]; then
    KREL=$(newest_local_kernel)
    [ -n "$KREL" ] || die "apt-cache knows no linux-image-6.12.*+deb12-amd64-unsigned package: run scripts/deps.sh (or apt-get update) first; the package comes from bookworm-security / bookworm-backports"
    warn "apt-cache knows no 6.12 kernel package; using the kernel already built: $KREL"
else
    case $KPKG in
        linux-image-*-unsigned) ;;
        *) die "kernel package '$KPKG' is not of the form linux-image-<release>-unsigned" ;;
    esac
    KREL=${KPKG#linux-image-}; KREL=${KREL%-unsigned}
fi
KDIR=$GUEST/kernel-$KREL
if [ -f "$KDIR/.stamp" ]; then
    log "kernel $KREL: present ($KDIR)"
else
    apt-cache show "$KPKG" >/dev/null 2>&1 \
        || die "kernel package $KPKG not found by apt-cache; run scripts/deps.sh (or apt-get update) first"
    log "kernel $KREL: apt-get download $KPKG"
    rm -f "$DL"/linux-image-*.deb
    # apt's _apt sandbox user may not write to $DL; download as the caller.
    if ! (cd "$DL" && timeout 900 apt-get -o Acquire::Retries=2 -o Acquire::http::Timeout=30 \
            -o APT::Sandbox::User=root download "$KPKG") >"$LOGDIR/guest-kernel-download.log" 2>&1; then
        if grep -qiE 'Could not resolve|Failed to fetch|Temporary failure|Connection (failed|timed out)|Unable to connect' \
                "$LOGDIR/guest-kernel-download.log"; then
            die "downloading $KPKG failed: no network to the Debian archive? see $LOGDIR/guest-kernel-download.log"
        elif grep -qiE 'Unable to locate|has no installation candidate|Can.t select' "$LOGDIR/guest-kernel-download.log"; then
            die "kernel package $KPKG not found in the archive; run apt-get update; see $LOGDIR/guest-kernel-download.log"
        fi
        die "apt-get download $KPKG failed; see $LOGDIR/guest-kernel-download.log"
    fi
    deb=$(ls "$DL"/linux-image-*.deb 2>/dev/null | head -n1)
    [ -n "$deb" ] || die "apt-get download $KPKG produced no .deb; see $LOGDIR/guest-kernel-download.log"
    tmp=$(mktemp -d "$GUEST/.kernel-tmp.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    log "kernel $KREL: dpkg -x $(basename "$deb")"
    dpkg -x "$deb" "$tmp" || die "dpkg -x $deb failed (corrupt download? delete $DL and retry)"
    [ -f "$tmp/boot/vmlinuz-$KREL" ] || die "$deb has no boot/vmlinuz-$KREL"
    [ -d "$tmp/lib/modules/$KREL" ] || die "$deb has no lib/modules/$KREL"
    # modules.dep is made by depmod at install time; the .deb does not ship it
    DEPMOD=$(command -v depmod || echo /sbin/depmod)
    [ -x "$DEPMOD" ] || die "depmod not found (package kmod); run scripts/deps.sh"
    "$DEPMOD" -b "$tmp" "$KREL" >"$LOGDIR/guest-depmod.log" 2>&1 \
        || die "depmod for $KREL failed; see $LOGDIR/guest-depmod.log"
    [ -s "$tmp/lib/modules/$KREL/modules.dep" ] || die "depmod produced no modules.dep for $KREL"
    printf 'package=%s\nrelease=%s\ndeb=%s\nsha256=%s\n' "$KPKG" "$KREL" "$(basename "$deb")" \
        "$(sha256sum "$deb" | cut -d' ' -f1)" >"$tmp/.stamp"
    rm -rf "$KDIR"
    mv "$tmp" "$KDIR"
    trap - EXIT
    rm -f "$deb"
    log "kernel $KREL: extracted to $KDIR"
fi
VMLINUZ_SRC=$KDIR/boot/vmlinuz-$KREL
MODDIR=$KDIR/lib/modules/$KREL
KCONFIG=$KDIR/boot/config-$KREL
ln -sfn "kernel-$KREL/boot/vmlinuz-$KREL" "$GUEST/vmlinuz.tmp" && mv -Tf "$GUEST/vmlinuz.tmp" "$GUEST/vmlinuz"

# ---------------------------------------------------------------- vmlinux (PVH)
# The uncompressed kernel (the ELF the bzImage carries), which QEMU boots
# directly through its PVH entry point: no decompression and no real-mode
# setup under TCG, about 1 s of a guest's boot (docs/benchmarks.md,
# "Where a guest's boot goes").  The launcher takes vmlinux-<release> beside
# vmlinuz-<release> when it is there.  Kernels without CONFIG_PVH keep
# booting from the bzImage.
VMLINUX=$KDIR/boot/vmlinux-$KREL
extract_vmlinux() {  # extract_vmlinux BZIMAGE OUT
    local bz=$1 out=$2 ss po pl off magic dec cut=4
    ss=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
    [ "$ss" != 0 ] || ss=4
    po=$(od -An -tu4 -j $((0x248)) -N4 "$bz" | tr -d ' ')
    pl=$(od -An -tu4 -j $((0x24c)) -N4 "$bz" | tr -d ' ')
    off=$(( (ss + 1) * 512 + po ))
    magic=$(od -An -tx1 -j "$off" -N4 "$bz" | tr -d ' ')
    # the payload ends with its 4-byte uncompressed size (gzip has it
    # in its own trailer)
    case $magic in
        28b52ffd) dec="zstd -qdc" ;;
        fd377a58) dec="xz -dc" ;;
        1f8b*) dec="gzip -dc"; cut=0 ;;
        *) warn "$bz: payload of unknown compression (magic $magic)"; return 1 ;;
    esac
    command -v "${dec%% *}" >/dev/null || { warn "${dec%% *} not found"; return 1; }
    dd if="$bz" iflag=skip_bytes,count_bytes skip="$off" count=$((pl - cut)) bs=1M status=none |
        $dec >"$out.tmp" 2>"$LOGDIR/guest-vmlinux.log" ||
        { rm -f "$out.tmp"; warn "decompressing the kernel in $bz failed; see $LOGDIR/guest-vmlinux.log"; return 1; }
    [ "$(od -An -tx1 -N4 "$out.tmp" | tr -d ' ')" = 7f454c46 ] ||
        { rm -f "$out.tmp"; warn "$bz does not carry an ELF kernel"; return 1; }
    mv -f "$out.tmp" "$out"
}
if [ -f "$VMLINUX" ]; then
    :
elif grep -qx 'CONFIG_PVH=y' "$KCONFIG" 2>/dev/null; then
    if extract_vmlinux "$VMLINUZ_SRC" "$VMLINUX"; then
        log "kernel $KREL: vmlinux-$KREL extracted (PVH boot)"
    else
        warn "no vmlinux for PVH boot; guests boot the bzImage (about 1 s slower each)"
    fi
else
    log "kernel $KREL has no CONFIG_PVH; guests boot the bzImage"
fi

# ---------------------------------------------------------------- modules
# Wanted modules; those built in (=y) are skipped, those absent are fatal
# only for the ones the region cannot work without.
WANT=(qemu_fw_cfg cxl_acpi cxl_port cxl_pci cxl_mem dax device_dax dax_cxl)
REQUIRED=(cxl_acpi cxl_pci cxl_mem device_dax dax_cxl)
declare -A DEP=() PATHOF=() SEEN=()
while IFS= read -r line; do
    mod=${line%%:*}
    name=${mod##*/}; name=${name%%.ko*}; name=${name//-/_}
    PATHOF[$name]=$mod
    DEP[$mod]=${line#*:}
done <"$MODDIR/modules.dep"
builtin() { grep -qE "/${1//_/[-_]}\.ko\$" "$MODDIR/modules.builtin" 2>/dev/null; }
ORDER=()
visit() {   # depth-first: dependencies before the module
    local m=$1 d
    [ -n "${SEEN[$m]:-}" ] && return 0
    SEEN[$m]=1
    for d in ${DEP[$m]}; do visit "$d"; done
    ORDER+=("$m")
}
for w in "${WANT[@]}"; do
    if [ -n "${PATHOF[$w]:-}" ]; then
        visit "${PATHOF[$w]}"
    elif builtin "$w"; then
        :
    elif printf '%s\n' "${REQUIRED[@]}" | grep -x "$w" >/dev/null; then
        die "kernel $KREL has module $w neither as module nor built in"
    else
        warn "kernel $KREL has no module $w (skipped)"
    fi
done
for m in "${ORDER[@]}"; do
    case $(basename "$m") in kmem.ko*) die "module list would contain kmem ($m); refusing" ;; esac
done
# Modules of the pod network and of host-userland guests (the host's root
# file system over virtio-9p under an overlay), loaded only by guests that
# use them (cxlpod-launch --net / --userland host): a list of their own.
WANT_NET=(virtio_net 9pnet_virtio 9p overlay)
NET_FIRST=${#ORDER[@]}
for w in "${WANT_NET[@]}"; do
    if [ -n "${PATHOF[$w]:-}" ]; then
        visit "${PATHOF[$w]}"
    elif ! builtin "$w"; then
        warn "kernel $KREL has no module $w: host-userland guests and the pod network will not work"
    fi
done

# ---------------------------------------------------------------- cache module
# guest-tools/kmod/ (cxlpod_cache.ko: /proc/cxlpod-cache runs wbinvd, wbnoinvd
# or invd) is built out of tree against Debian's headers for $KREL, taken like
# the kernel (apt-get download + dpkg -x into headers-$KREL/, never installed):
# linux-headers-$KREL, the -common package and linux-kbuild it depends on.
# It is rebuilt only when its source or the headers change.  If it cannot be
# built the image is still built without it, and says why in
# /cxlpod/kmod.status and in the "kmod" line of <initramfs>.inputs ("kmod
# <sha256>" or "kmod none: <reason>"); tests that need it fail on that.
KMOD_SRC=$TOP/guest-tools/kmod
KMOD_DIR=$GUEST/kmod-$KREL
HDIR=$GUEST/headers-$KREL
KMOD=""         # the built .ko, or empty
KMOD_WHY=""     # why it is not built
KVER=$(sed -n 's/^deb=[^_]*_\([^_]*\)_.*/\1/p' "$KDIR/.stamp" 2>/dev/null || true)

kmod_fail() { KMOD_WHY=$*; warn "cache module not built: $*"; return 1; }

fetch_headers() {
    local hpkg=linux-headers-$KREL deps pkgs log=$LOGDIR/guest-headers-download.log tmp d l t
    [ -f "$HDIR/.stamp" ] && return 0
    [ -n "$KVER" ] || { kmod_fail "no package version in $KDIR/.stamp"; return 1; }
    deps=$(apt-cache show "$hpkg=$KVER" 2>/dev/null | sed -n 's/^Depends: //p' | head -n1)
    [ -n "$deps" ] || { kmod_fail "apt-cache knows no $hpkg=$KVER (the guest kernel's headers); run apt-get update"; return 1; }
    pkgs=("$hpkg=$KVER")
    for d in $(printf '%s\n' "$deps" | tr ',|' '\n\n' | sed 's/(.*//; s/ //g'); do
        case $d in
            linux-headers-*-common) pkgs+=("$d=$KVER") ;;
            linux-kbuild-*) pkgs+=("$d=$KVER") ;;
        esac
    done
    [ ${#pkgs[@]} = 3 ] || { kmod_fail "$hpkg=$KVER: expected a -common and a linux-kbuild dependency, got: $deps"; return 1; }
    log "headers $KREL: apt-get download ${pkgs[*]}"
    tmp=$(mktemp -d "$GUEST/.headers-tmp.XXXXXX")
    if ! (cd "$tmp" && timeout 900 apt-get -o Acquire::Retries=2 -o Acquire::http::Timeout=30 \
            -o APT::Sandbox::User=root download "${pkgs[@]}") >"$log" 2>&1; then
        rm -rf "$tmp"; kmod_fail "apt-get download ${pkgs[*]} failed; see $log"; return 1
    fi
    mkdir "$tmp/root"
    for d in "$tmp"/*.deb; do
        dpkg -x "$d" "$tmp/root" || { rm -rf "$tmp"; kmod_fail "dpkg -x $(basename "$d") failed"; return 1; }
    done
    # The packages' absolute symlinks (lib/modules/*/build, source) and the
    # flavour Makefile's "include /usr/src/...-common/Makefile" point into
    # the host's /usr/src: make them relative to the extracted tree.
    while IFS= read -r l; do
        t=$(readlink "$l")
        ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$tmp/root$t")" "$l"
    done < <(find "$tmp/root" -type l -lname '/*')
    sed -i 's|^include /usr/src/|include ../|' "$tmp/root/usr/src/$hpkg/Makefile"
    [ -f "$tmp/root/usr/src/$hpkg/scripts/Makefile.build" ] && [ -f "$tmp/root/usr/src/$hpkg/.config" ] \
        || { rm -rf "$tmp"; kmod_fail "the extracted headers have no usable usr/src/$hpkg (scripts/, .config)"; return 1; }
    printf 'packages=%s\n' "${pkgs[*]}" >"$tmp/root/.stamp"
    rm -rf "$HDIR"; mv "$tmp/root" "$HDIR"; rm -rf "$tmp"
    log "headers $KREL: extracted to $HDIR"
}

build_kmod() {
    local want log=$LOGDIR/guest-kmod.log
    [ -f "$KMOD_SRC/Kbuild" ] || { kmod_fail "missing $KMOD_SRC/Kbuild"; return 1; }
    want=$( { echo "$KREL"; (cd "$KMOD_SRC" && sha256sum Kbuild *.c); } | sha256sum | cut -d' ' -f1)
    if [ -f "$KMOD_DIR/cxlpod_cache.ko" ] && [ "$(cat "$KMOD_DIR/.stamp" 2>/dev/null)" = "$want" ]; then
        KMOD=$KMOD_DIR/cxlpod_cache.ko; log "cache module: up to date"; return 0
    fi
    fetch_headers || return 1
    command -v make >/dev/null || { kmod_fail "make not found; run scripts/deps.sh"; return 1; }
    rm -rf "$KMOD_DIR"; mkdir -p "$KMOD_DIR"
    cp "$KMOD_SRC"/Kbuild "$KMOD_SRC"/*.c "$KMOD_DIR/"
    # No BTF for this module (it would need pahole; nothing uses it).
    if ! make -C "$HDIR/usr/src/linux-headers-$KREL" M="$KMOD_DIR" CONFIG_DEBUG_INFO_BTF_MODULES= \
            modules >"$log" 2>&1 || [ ! -f "$KMOD_DIR/cxlpod_cache.ko" ]; then
        grep -E 'error|Error' "$log" | head -n 10 >&2
        kmod_fail "make of $KMOD_SRC against headers-$KREL failed; see $log"; return 1
    fi
    echo "$want" >"$KMOD_DIR/.stamp"
    KMOD=$KMOD_DIR/cxlpod_cache.ko
    log "cache module: built ($KMOD)"
}
build_kmod || true
if [ -n "$KMOD" ]; then KMOD_STATUS="built $KREL"; else KMOD_STATUS="not built: $KMOD_WHY"; fi

# strip_sig KO: drop the signature Debian appended to a module.  Loading a
# signed module makes the kernel check an RSA signature under TCG: 0.2 s of
# the guest's boot for the seven modules it loads.  An unsigned module
# taints the kernel (E), as cxlpod_cache.ko (built here, unsigned) already
# does; sig_enforce is off in Debian's kernel, so it loads.
MODSIG_MAGIC='~Module signature appended~'
strip_sig() {
    local ko=$1 size len
    [ "$(tail -c 28 "$ko" | head -c 27)" = "$MODSIG_MAGIC" ] || return 0
    size=$(stat -c %s "$ko")
    # struct module_signature (12 bytes, sig_len big-endian last) before the magic
    len=$(od -An -tu1 -j $((size - 32)) -N4 "$ko" | awk '{print (($1 * 256 + $2) * 256 + $3) * 256 + $4}')
    [ "$len" -gt 0 ] && [ "$len" -lt "$size" ] || die "$ko: unreadable module signature trailer"
    truncate -s $((size - 28 - 12 - len)) "$ko"
}

# ---------------------------------------------------------------- inputs hash
TOOLS=()
if [ -d "$TOOLS_DIR" ]; then
    while IFS= read -r f; do TOOLS+=("$f"); done < <(find "$TOOLS_DIR" -maxdepth 1 -type f -name 'cxlpod-*' -perm -u+x | sort)
fi
[ ${#TOOLS[@]} -gt 0 ] || warn "no guest tools in $TOOLS_DIR yet; the image will have an empty /cxlpod/bin"
inputs_hash() {
    {
        echo "kernel $KREL"
        sha256sum "$INIT_SRC" "$0" /bin/busybox | sed 's|  .*/|  |'
        for m in "${ORDER[@]}"; do echo "module $m"; done
        if [ -n "$KMOD" ]; then echo "kmod $(sha256sum <"$KMOD" | cut -d' ' -f1)"; else echo "kmod none: $KMOD_WHY"; fi
        for f in ${TOOLS[@]+"${TOOLS[@]}"}; do echo "tool $(basename "$f") $(sha256sum <"$f" | cut -d' ' -f1)"; done
        if [ -n "$EXTRA" ]; then
            (cd "$EXTRA" && find . \( -type f -o -type l -o -type d \) -printf '%p %y %m %s %l\n' | LC_ALL=C sort
             find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
        fi
    }
}
INITRD=${OUTPUT:-$GUEST/initramfs.cpio}
case $INITRD in /*) ;; *) INITRD=$PWD/$INITRD ;; esac
mkdir -p "$(dirname "$INITRD")"
inputs_hash >"$INITRD.inputs.new"
HASH=$(sha256sum <"$INITRD.inputs.new" | cut -d' ' -f1)
if [ $FORCE = 0 ] && [ -f "$INITRD" ] && [ "$(sed -n 1p "$INITRD.inputs" 2>/dev/null)" = "$HASH" ]; then
    rm -f "$INITRD.inputs.new"
    log "initramfs: up to date"
else
    # ------------------------------------------------------------ initramfs
    stage=$(mktemp -d "$GUEST/.initramfs-stage.XXXXXX")
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage"/{bin,dev,proc,sys,tmp,run,root,etc,cxlpod/bin,lib/modules/"$KREL"}
    ln -s bin "$stage/sbin"; mkdir -p "$stage/usr"; ln -s ../bin "$stage/usr/bin"; ln -s ../bin "$stage/usr/sbin"
    chmod 1777 "$stage/tmp"
    cp /bin/busybox "$stage/bin/busybox"
    for a in $(/bin/busybox --list); do
        [ "$a" = busybox ] || ln -s busybox "$stage/bin/$a"
    done
    install -m 0755 "$INIT_SRC" "$stage/init"
    # the kernel opens /dev/console before /init runs
    mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || warn "cannot mknod dev/console (not root?); init redirects itself"
    : >"$stage/cxlpod/modules"
    : >"$stage/cxlpod/modules-net"
    list=$stage/cxlpod/modules
    n=0
    for m in "${ORDER[@]}"; do
        [ $n -lt "$NET_FIRST" ] || list=$stage/cxlpod/modules-net
        n=$((n + 1))
        mkdir -p "$stage/lib/modules/$KREL/$(dirname "$m")"
        # decompressed here: busybox insmod would first hand the .ko.xz to
        # finit_module (which refuses it) before decompressing it itself
        case $m in
            *.ko.xz)  xz -dc "$MODDIR/$m" >"$stage/lib/modules/$KREL/${m%.xz}"; m=${m%.xz} ;;
            *.ko.zst) zstd -qdc "$MODDIR/$m" >"$stage/lib/modules/$KREL/${m%.zst}"; m=${m%.zst} ;;
            *.ko.gz)  gzip -dc "$MODDIR/$m" >"$stage/lib/modules/$KREL/${m%.gz}"; m=${m%.gz} ;;
            *)        cp "$MODDIR/$m" "$stage/lib/modules/$KREL/$m" ;;
        esac
        strip_sig "$stage/lib/modules/$KREL/$m"
        echo "/lib/modules/$KREL/$m" >>"$list"
    done
    if [ -n "$KMOD" ]; then
        mkdir -p "$stage/lib/modules/$KREL/extra"
        cp "$KMOD" "$stage/lib/modules/$KREL/extra/cxlpod_cache.ko"
    fi
    echo "$KMOD_STATUS" >"$stage/cxlpod/kmod.status"
    for f in ${TOOLS[@]+"${TOOLS[@]}"}; do
        file -L "$f" 2>/dev/null | grep "dynamically linked" >/dev/null && warn "guest tool $(basename "$f") is dynamically linked; it will not run in the guest"
        install -m 0755 "$f" "$stage/cxlpod/bin/"
    done
    if [ -n "$EXTRA" ]; then
        cp -a "$EXTRA" "$stage/cxlpod/extra"
    else
        mkdir -p "$stage/cxlpod/extra"
    fi
    echo "$KREL" >"$stage/cxlpod/kernel-release"
    echo "$HASH" >"$stage/cxlpod/inputs"
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
    printf 'root:x:0:\n' >"$stage/etc/group"
    find "$stage" -exec touch -h -d @0 {} +     # same inputs, same bytes
    # not compressed: the kernel's inflate of a gzip image cost 0.25 s of
    # every guest's boot under TCG (docs/benchmarks.md, "Where a guest's
    # boot goes"); QEMU maps the file, so its pages are shared
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) \
        >"$INITRD.tmp"
    mv -f "$INITRD.tmp" "$INITRD"
    # first line: the hash compared on the next run; then what was hashed
    { echo "$HASH"; cat "$INITRD.inputs.new"; } >"$INITRD.inputs"
    rm -f "$INITRD.inputs.new"
    rm -rf "$stage"; trap - EXIT
    log "initramfs: built ($(du -k "$INITRD" | cut -f1) KiB, ${#ORDER[@]} modules, ${#TOOLS[@]} tools, $([ -n "$KMOD" ] && echo cache module || echo NO cache module)${EXTRA:+, extra $EXTRA})"
fi

echo "$GUEST/vmlinuz"
echo "$INITRD"

/*
 * Preloaded by scripts/test-sanitize.sh --integration: dlopen() without
 * RTLD_DEEPBIND.  libvdeplug, which QEMU's -netdev vde (the pod network
 * of the host-userland tests) uses, opens its plugins with RTLD_DEEPBIND,
 * and AddressSanitizer's runtime refuses such a dlopen and aborts the
 * process (google/sanitizers#611).  Dropping the flag only changes which
 * definition a plugin's own calls bind to when a symbol is defined twice;
 * the plugins QEMU loads define no symbol of the process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

void *dlopen(const char *file, int flags)
{
    static void *(*next)(const char *, int);

    if (!next) {
        next = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    }
    return next(file, flags & ~RTLD_DEEPBIND);
}

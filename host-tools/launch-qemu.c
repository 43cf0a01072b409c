/*
 * What a guest's QEMU is started with: the repository root and default
 * paths, the accelerator probe, the pool device arguments and the whole
 * QEMU command line of one host.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* repository root and default paths                                   */

static bool looks_like_top(const char *dir)
{
    char *a = g_strdup_printf("%s/docs/interfaces.md", dir);
    char *b = g_strdup_printf("%s/host-tools", dir);
    bool ok = is_file(a) && is_dir(b);
    g_free(a);
    g_free(b);
    return ok;
}

/* $CXLPOD_TOP, else the first ancestor of the executable that looks like
 * the cxlpod repository.  NULL if neither works. */
char *find_top(void)
{
    const char *env = getenv("CXLPOD_TOP");
    if (env && *env) {
        if (!is_dir(env)) {
            die(EXIT_USAGE, "CXLPOD_TOP=%s is not a directory", env);
        }
        return g_strdup(env);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return NULL;
    }
    exe[n] = '\0';
    for (int depth = 0; depth < 8; depth++) {
        char *slash = strrchr(exe, '/');
        if (!slash || slash == exe) {
            break;
        }
        *slash = '\0';
        if (looks_like_top(exe)) {
            return g_strdup(exe);
        }
    }
    return NULL;
}

static int cmp_version_path(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Newest GUEST/kernel-X/boot/vmlinuz-Y, by version order, GUEST being
 * $TOP/build/guest or an installation's guest folder; the vmlinux-Y beside
 * it when there is one (scripts/build-guest.sh extracts it: QEMU boots that
 * ELF through its PVH entry, without the bzImage's decompression and
 * real-mode setup, about 1 s less per guest under TCG).
 */
char *find_default_kernel(const char *guest_dir)
{
    char *pat = g_strdup_printf("%s/kernel-*/boot/vmlinuz-*", guest_dir);
    glob_t g;
    char *res = NULL;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
        qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_version_path);
        const char *z = g.gl_pathv[g.gl_pathc - 1];
        const char *base = strrchr(z, '/') + 1;
        char *x = g_strdup_printf("%.*svmlinux-%s", (int)(base - z), z,
                                  base + strlen("vmlinuz-"));
        if (is_file(x)) {
            res = x;
        } else {
            g_free(x);
            res = g_strdup(z);
        }
    }
    globfree(&g);
    g_free(pat);
    return res;
}

/* ------------------------------------------------------------------ */
/* accelerator                                                         */

/*
 * Run a 16-bit real-mode guest of three instructions (out to port 0x10,
 * hlt) on /dev/kvm.  Success shows the hypervisor can run *something*; it
 * does not prove it can boot Linux (the nested kvm_pvm hypervisor on the
 * project's machines cannot), so this is only consulted when the user asks
 * for it with CXLPOD_TRY_KVM=1.
 */
static bool kvm_probe(char *why, size_t whylen)
{
    int kvm = -1, vm = -1, vcpu = -1;
    void *mem = MAP_FAILED, *run = MAP_FAILED;
    size_t runsz = 0;
    bool ok = false;

    kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0) {
        snprintf(why, whylen, "cannot open /dev/kvm: %s", strerror(errno));
        goto out;
    }
    int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
    if (api != KVM_API_VERSION) {
        snprintf(why, whylen, "KVM_GET_API_VERSION returned %d", api);
        goto out;
    }
    vm = ioctl(kvm, KVM_CREATE_VM, 0);
    if (vm < 0) {
        snprintf(why, whylen, "KVM_CREATE_VM: %s", strerror(errno));
        goto out;
    }
    mem = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        snprintf(why, whylen, "mmap: %s", strerror(errno));
        goto out;
    }
    /* mov $0x10,%dx; mov $0x42,%al; out %al,(%dx); hlt */
    static const unsigned char code[] = { 0xba, 0x10, 0x00, 0xb0, 0x42,
                                          0xee, 0xf4 };
    memcpy(mem, code, sizeof(code));
    struct kvm_userspace_memory_region region = {
        .slot = 0, .guest_phys_addr = 0x1000, .memory_size = 0x1000,
        .userspace_addr = (uint64_t)(uintptr_t)mem,
    };
    if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0) {
        snprintf(why, whylen, "KVM_SET_USER_MEMORY_REGION: %s", strerror(errno));
        goto out;
    }
    vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
    if (vcpu < 0) {
        snprintf(why, whylen, "KVM_CREATE_VCPU: %s", strerror(errno));
        goto out;
    }
    int sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
    if (sz <= 0) {
        snprintf(why, whylen, "KVM_GET_VCPU_MMAP_SIZE failed");
        goto out;
    }
    runsz = (size_t)sz;
    run = mmap(NULL, runsz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
    if (run == MAP_FAILED) {
        snprintf(why, whylen, "mmap vcpu: %s", strerror(errno));
        goto out;
    }
    struct kvm_sregs sregs;
    if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0) {
        snprintf(why, whylen, "KVM_GET_SREGS: %s", strerror(errno));
        goto out;
    }
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0) {
        snprintf(why, whylen, "KVM_SET_SREGS: %s", strerror(errno));
        goto out;
    }
    struct kvm_regs regs = { .rip = 0x1000, .rflags = 0x2 };
    if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0) {
        snprintf(why, whylen, "KVM_SET_REGS: %s", strerror(errno));
        goto out;
    }
    struct kvm_run *kr = run;
    bool saw_io = false;
    for (int i = 0; i < 4; i++) {
        alarm(2);   /* a broken hypervisor must not hang the launcher */
        int r = ioctl(vcpu, KVM_RUN, 0);
        alarm(0);
        if (r < 0) {
            snprintf(why, whylen, "KVM_RUN: %s", strerror(errno));
            goto out;
        }
        if (kr->exit_reason == KVM_EXIT_IO && kr->io.port == 0x10 &&
            kr->io.direction == KVM_EXIT_IO_OUT &&
            *((unsigned char *)kr + kr->io.data_offset) == 0x42) {
            saw_io = true;
            continue;
        }
        if (kr->exit_reason == KVM_EXIT_HLT) {
            ok = saw_io;
            if (!ok) {
                snprintf(why, whylen, "test guest halted without its port write");
            }
            goto out;
        }
        snprintf(why, whylen, "unexpected KVM exit reason %u", kr->exit_reason);
        goto out;
    }
    snprintf(why, whylen, "test guest did not halt");
out:
    if (run != MAP_FAILED) {
        munmap(run, runsz);
    }
    if (mem != MAP_FAILED) {
        munmap(mem, 0x1000);
    }
    if (vcpu >= 0) {
        close(vcpu);
    }
    if (vm >= 0) {
        close(vm);
    }
    if (kvm >= 0) {
        close(kvm);
    }
    return ok;
}

static void on_alarm(int sig)
{
    (void)sig;  /* only interrupts a stuck KVM_RUN */
}

enum accel resolve_accel(enum accel want, char *note, size_t notelen)
{
    char why[256] = "";
    if (want == ACCEL_TCG) {
        snprintf(note, notelen, "tcg (requested)");
        return ACCEL_TCG;
    }
    if (want == ACCEL_KVM) {
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            die(EXIT_USAGE, "--accel kvm: cannot open /dev/kvm: %s",
                strerror(errno));
        }
        int api = ioctl(fd, KVM_GET_API_VERSION, 0);
        close(fd);
        if (api != KVM_API_VERSION) {
            die(EXIT_USAGE, "--accel kvm: KVM_GET_API_VERSION returned %d", api);
        }
        snprintf(note, notelen,
                 "kvm (requested; not verified to boot Linux on this host)");
        return ACCEL_KVM;
    }
    const char *t = getenv("CXLPOD_TRY_KVM");
    if (!t || strcmp(t, "1") != 0) {
        snprintf(note, notelen,
                 "tcg (auto: KVM is only tried with CXLPOD_TRY_KVM=1)");
        return ACCEL_TCG;
    }
    struct sigaction sa = { .sa_handler = on_alarm }, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    bool ok = kvm_probe(why, sizeof(why));
    sigaction(SIGALRM, &old, NULL);
    if (ok) {
        snprintf(note, notelen,
                 "kvm (auto, CXLPOD_TRY_KVM=1: a test guest ran; "
                 "booting Linux is not verified)");
        return ACCEL_KVM;
    }
    snprintf(note, notelen, "tcg (auto: KVM probe failed: %s)", why);
    return ACCEL_TCG;
}

/* ------------------------------------------------------------------ */
/* QEMU command line                                                   */

/* An argv: a NULL-terminated GPtrArray that owns its strings. */
GPtrArray *argv_new(void)
{
    return g_ptr_array_new_null_terminated(64, g_free, TRUE);
}

void argv_add(GPtrArray *a, const char *s)
{
    g_ptr_array_add(a, g_strdup(s));
}

void argv_addf(GPtrArray *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_ptr_array_add(a, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}


void host_paths_init(struct host_paths *hp, const char *wd, int i)
{
    hp->log = g_strdup_printf("%s/host%d.log", wd, i);
    hp->console = g_strdup_printf("%s/host%d.console", wd, i);
    hp->qmp = g_strdup_printf("%s/host%d.qmp", wd, i);
    hp->err = g_strdup_printf("%s/host%d.qemu-err", wd, i);
    hp->out = g_strdup_printf("%s/host%d.out", wd, i);
    hp->job = g_strdup_printf("%s/host%d.job", wd, i);
    hp->cmdline = g_strdup_printf("%s/host%d.cmdline", wd, i);
    hp->config = g_strdup_printf("%s/host%d.config", wd, i);
    hp->ssh = g_strdup_printf("%s/host%d.ssh", wd, i);
    hp->events = g_strdup_printf("%s/host%d.events", wd, i);
}

/*
 * --device-opt I:K=V applies to host I only: returns I and sets *kv to
 * "K=V"; -1 (and *kv = opt) for a K=V of every host.
 */
int device_opt_host(const char *opt, const char **kv)
{
    const char *p = opt;
    *kv = opt;
    while (isdigit((unsigned char)*p)) {
        p++;
    }
    if (p == opt || *p != ':' || p - opt > 3) {     /* ids up to 255 */
        return -1;
    }
    *kv = p + 1;
    return atoi(opt);
}

/*
 * Whether host `host`'s cxl-shm takes its pool from a memory backend: the
 * default, as QEMU devices take their memory (-object + memdev=); pool=PATH
 * only when asked for (--pool-backend file).
 */
bool host_on_memdev(const struct opts *o, int host)
{
    enum pool_backend b = o->host_backend[host] != BACKEND_UNSET ?
                          o->host_backend[host] : o->backend;
    return o->device == DEV_CXL_SHM && b != BACKEND_FILE &&
           !pool_is_remote(o);
}

/*
 * -object memory-backend-file,... on the pool file (its options after
 * "size=SIZE": what the device needs, then --prealloc and --host-nodes).
 */
static void add_backend(GPtrArray *a, const struct opts *o, const char *id,
                        const char *pool, const char *size, const char *opts)
{
    GString *b = g_string_new(NULL);
    g_string_printf(b, "memory-backend-file,id=%s,%smem-path=%s,size=%s%s",
                    id, o->device == DEV_CXL_TYPE3 ? "share=on," : "",
                    pool, size, opts);
    if (o->prealloc) {
        g_string_append(b, ",prealloc=on");
    }
    if (o->host_nodes) {
        g_string_append_printf(b, ",host-nodes=%s,policy=bind", o->host_nodes);
    }
    argv_add(a, "-object");
    argv_add(a, b->str);
    g_string_free(b, TRUE);
}

/*
 * The one function that knows how the pool device is attached.  Everything
 * device-specific on the QEMU command line comes from here.
 */
void add_pool_device_args(GPtrArray *a, const struct opts *o, int host)
{
    char *pool = qemu_opt_escape(o->pool);
    char *size = fmt_size(o->size);
    uint64_t win = o->size > 4 * GIB ? o->size : 4 * GIB;
    char *winsz = fmt_size(win);
    GString *dev = g_string_new(NULL);

    /* CXL topology shared by both devices: one host bridge, one root port. */
    argv_add(a, "-device");
    argv_add(a, "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1");
    argv_add(a, "-device");
    /*
     * hotplug=off: a guest that powered the slot off would unplug the
     * device, which cxl-shm refuses to be (it joins and leaves the pod
     * with its QEMU)
     */
    argv_add(a, "cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2,"
        "hotplug=off");

    switch (o->device) {
    case DEV_CXL_TYPE3:
        add_backend(a, o, "cxl-mem0", pool, size, "");
        g_string_append(dev, "cxl-type3,bus=root_port13,volatile-memdev=cxl-mem0,"
                 "id=cxl-vmem0");
        break;
    case DEV_CXL_SHM: {
        char *s;
        if (host_on_memdev(o, host)) {
            /* the pool file itself; its data after the 2 MiB of metadata
             * (docs/device.md, "The pool as a memory backend") */
            add_backend(a, o, "cxl-pool0", pool, size, ",offset=2M,share=on");
            s = g_strdup_printf("cxl-shm,bus=root_port13,id=cxl-shm0,"
                          "memdev=cxl-pool0,size=%s,host-id=%d,max-hosts=%d",
                          size, host, o->max_hosts ? o->max_hosts : o->nhosts);
        } else if (pool_is_remote(o)) {
            /* another machine's pool (launch-xmach.c) */
            s = g_strdup_printf("cxl-shm,bus=root_port13,id=cxl-shm0,"
                          "size=%s,host-id=%d,max-hosts=%d", size, host,
                          o->max_hosts ? o->max_hosts : o->nhosts);
        } else {
            s = g_strdup_printf("cxl-shm,bus=root_port13,id=cxl-shm0,pool=%s,"
                          "size=%s,host-id=%d,max-hosts=%d",
                          pool, size, host,
                          o->max_hosts ? o->max_hosts : o->nhosts);
        }
        g_string_append(dev, s);
        g_free(s);
        if (pool_is_remote(o)) {
            add_remote_pool_args(dev, o);
        }
        {
            char *cs = fmt_size(o->coherent_size);
            s = g_strdup_printf(",coherent-size=%s", cs);
            g_string_append(dev, s);
            g_free(s);
            g_free(cs);
        }
        if (o->latency_ns >= 0) {
            s = g_strdup_printf(",latency-ns=%ld", o->latency_ns);
            g_string_append(dev, s);
            g_free(s);
        }
        break;
    }
    }
    for (guint i = 0; i < o->device_opts->len; i++) {
        const char *kv = (const char *)g_ptr_array_index(o->device_opts, i);
        int only = device_opt_host(kv, &kv);
        if (only >= 0 && only != host) {
            continue;
        }
        g_string_append(dev, ",");
        g_string_append(dev, kv);
    }
    argv_add(a, "-device");
    argv_add(a, dev->str);
    argv_add(a, "-M");
    argv_addf(a, "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=%s", winsz);
    g_string_free(dev, TRUE);
    g_free(pool);
    g_free(size);
    g_free(winsz);
}

/* the guest's TSC frequency                                           */

#if defined(__x86_64__) || defined(__i386__)
/*
 * One (TSC, CLOCK_MONOTONIC) pair: of 64 tries, the one whose clock read
 * the two TSC reads bracket closest, so a preemption in the middle of a
 * try does not count.
 */
static void tsc_clock_pair(uint64_t *tsc, int64_t *ns, uint64_t *err)
{
    *err = UINT64_MAX;
    for (int i = 0; i < 64; i++) {
        struct timespec ts;
        uint64_t t0 = __rdtsc();
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t1 = __rdtsc();
        if (t1 > t0 && t1 - t0 < *err) {
            *err = t1 - t0;
            *tsc = t0 + (t1 - t0) / 2;
            *ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        }
    }
}

/* The host's TSC rate against CLOCK_MONOTONIC over 50 ms, in kHz; 0 if
 * three tries gave nothing sane. */
static unsigned long host_tsc_khz(void)
{
    for (int i = 0; i < 3; i++) {
        uint64_t c0, c1, e0, e1;
        int64_t n0, n1;

        tsc_clock_pair(&c0, &n0, &e0);
        g_usleep(50 * 1000);
        tsc_clock_pair(&c1, &n1, &e1);
        if (e0 == UINT64_MAX || e1 == UINT64_MAX || c1 <= c0 || n1 <= n0) {
            continue;
        }
        /* the brackets must be well under 0.1% of the span */
        if ((e0 + e1) * 1000 > c1 - c0) {
            continue;
        }
        double khz = (double)(c1 - c0) * 1e6 / (double)(n1 - n0);
        if (khz >= 100e3 && khz <= 20e6) {
            return (unsigned long)(khz + 0.5);
        }
    }
    return 0;
}
#else
static unsigned long host_tsc_khz(void)
{
    return 0;
}
#endif

static bool has_icount(const struct opts *o)
{
    for (guint i = 0; i < o->qemu_args->len; i++) {
        const char *w = g_ptr_array_index(o->qemu_args, i);
        if (!strcmp(w, "-icount") || !strcmp(w, "--icount")) {
            return true;
        }
    }
    return false;
}

/*
 * The frequency of the guest's TSC, in kHz, for tsc_early_khz=: under
 * icount QEMU counts it in nanoseconds of virtual time (1 GHz); otherwise
 * TCG reads the host's TSC and KVM passes it through, so it runs at the
 * host's rate, measured once.  0: unknown (the guest calibrates).
 */
static unsigned long guest_tsc_khz(const struct opts *o)
{
    static unsigned long khz;
    static bool measured;

    if (has_icount(o)) {
        return 1000000;
    }
    if (!measured) {
        khz = host_tsc_khz();
        measured = true;
    }
    return khz;
}

void build_qemu_argv(GPtrArray *a, const struct opts *o,
                            enum accel accel, int host,
                            const struct host_paths *hp, bool has_job,
                            bool append_log)
{
    char *log = qemu_opt_escape(hp->log);
    char *con = qemu_opt_escape(hp->console);
    char *qmp = qemu_opt_escape(hp->qmp);
    char *job = qemu_opt_escape(hp->job);

    argv_add(a, o->qemu);
    argv_add(a, "-name");
    argv_addf(a, "cxlpod-host%d", host);
    argv_add(a, "-M");
    argv_add(a, "q35,cxl=on");
    argv_add(a, "-accel");
    argv_add(a, accel == ACCEL_KVM ? "kvm" : "tcg");
    argv_add(a, "-cpu");
    argv_add(a, "max,-hypervisor");
    argv_add(a, "-smp");
    argv_addf(a, "%d", o->smp);
    argv_add(a, "-m");
    argv_add(a, o->mem);
    argv_add(a, "-nographic");
    argv_add(a, "-nodefaults");     /* no NIC, VGA, CD-ROM, default serial */
    argv_add(a, "-monitor");
    argv_add(a, "none");
    argv_add(a, "-no-reboot");
    argv_add(a, "-L");
    argv_add(a, "/usr/share/seabios");
    argv_add(a, "-L");
    argv_add(a, "/usr/share/qemu");
    argv_add(a, "-kernel");
    argv_add(a, o->kernel);
    argv_add(a, "-initrd");
    argv_add(a, o->initrd);
    /*
     * tsc=reliable: the guest's TSC is the host's constant TSC (TCG reads
     * the host's; KVM passes it through, and a pod host is never
     * migrated).  Without it, on a busy host the guest's timer ticks fall
     * behind, the clocksource watchdog marks the TSC unstable in the middle
     * of early boot and the guest falls back to jiffies timekeeping, where
     * boots were seen to stall (issue 9; docs/launcher.md).
     *
     * no_timer_check: the kernel's boot-time test of the timer interrupt
     * (timer_irq_works() in arch/x86/kernel/apic/io_apic.c) wants five
     * PIT ticks within a busy-wait of 160 M TSC cycles (59 ms here).  A
     * TCG vCPU descheduled for part of that window takes fewer (the ticks
     * coalesce), and the kernel then reroutes IRQ0 through the 8259A,
     * a virtual wire, and finally ExtINT, which rarely passes under QEMU:
     * "IO-APIC + timer doesn't work!" and a panic.  Under KVM, VMware and
     * Hyper-V the kernel skips the test by itself; with -hypervisor it
     * cannot tell it runs in a virtual machine (docs/launcher.md).
     *
     * tsc_early_khz: the TSC's frequency, so the guest does not measure
     * it.  Its measurement prefers the PIT's value to the PM timer's when
     * the two disagree, and a vCPU descheduled between starting the PIT
     * count and its first TSC read sees only the end of the count: the
     * guest took 72 MHz for 2.7 GHz, its clock ran ~37 times too fast,
     * and RCU stalls and soft lockups followed (issue 9).  The kernel
     * still refines the value against the PM timer.
     *
     * cryptomgr.notests, initcall_blacklist=...: boot-time work a pod
     * guest has no use for, 0.6 s of guest time per boot under TCG
     * (docs/benchmarks.md, "Where a guest's boot goes").  The crypto
     * self-tests; the KDF's self-test (it waits for the initramfs to be
     * unpacked: it asks modprobe for hmac(sha256)); the jitter entropy
     * source's start-up test (timing loops; the kernel's random pool does
     * not use it); the "encrypted" key type (its hash allocation waits for
     * modprobe too).  Nothing else of the kernel changes.
     */
    unsigned long tsc_khz = guest_tsc_khz(o);
    char *tsc_arg = tsc_khz ? g_strdup_printf(" tsc_early_khz=%lu", tsc_khz)
                            : g_strdup("");
    argv_add(a, "-append");
    argv_addf(a, "console=ttyS0 quiet tsc=reliable no_timer_check%s "
              "cxlpod.host=%d cxlpod.nhosts=%d cryptomgr.notests "
              "initcall_blacklist=crypto_kdf108_init,jent_mod_init,"
              "init_encrypted%s%s",
              tsc_arg, host, o->nhosts, o->append ? " " : "",
              o->append ? o->append : "");
    g_free(tsc_arg);
    add_pool_device_args(a, o, host);
    argv_add(a, "-chardev");
    argv_addf(a, "socket,id=ser0,path=%s,server=on,wait=off,logfile=%s%s",
              con, log, append_log ? ",logappend=on" : "");
    argv_add(a, "-serial");
    argv_add(a, "chardev:ser0");
    argv_add(a, "-qmp");
    argv_addf(a, "unix:%s,server=on,wait=off", qmp);
    if (events_wanted(o)) {
        /* the device's events, for the logs (launch-events.c); wait=on:
         * QEMU goes on once the launcher listens */
        char *ev = qemu_opt_escape(hp->events);
        argv_add(a, "-chardev");
        argv_addf(a, "socket,id=cxlpod-events,path=%s,server=on,wait=on", ev);
        argv_add(a, "-mon");
        argv_add(a, "chardev=cxlpod-events,mode=control");
        g_free(ev);
    }
    if (has_job) {
        argv_add(a, "-fw_cfg");
        argv_addf(a, "name=opt/cxlpod/job,file=%s", job);
    }
    add_pod_args(a, o, host, hp);
    for (guint i = 0; i < o->qemu_args->len; i++) {
        argv_add(a, (const char *)g_ptr_array_index(o->qemu_args, i));
    }
    g_free(log);
    g_free(con);
    g_free(qmp);
    g_free(job);
}

char *argv_to_shell(GPtrArray *a)
{
    GString *b = g_string_new(NULL);
    for (guint i = 0; i < a->len; i++) {
        if (i) {
            g_string_append(b, " ");
        }
        shell_quote(b, g_ptr_array_index(a, i));
    }
    g_string_append(b, "\n");
    return g_string_free(b, FALSE);
}

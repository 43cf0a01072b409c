/*
 * The command line of a pod run: usage, option parsing (GOptionContext, in
 * two passes: --config first, then the other options over it) and the
 * cross-checks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* usage                                                               */

void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [OPTIONS] -- COMMAND...     run COMMAND in every guest\n"
"       " PROG " [OPTIONS] --job FILE        run a script in every guest\n"
"       " PROG " [OPTIONS] --interactive     boot guests, keep them up\n"
"       " PROG " --config FILE [OPTIONS]     a pod described in FILE\n"
"       " PROG " console WORKDIR I           attach to host I's console\n"
"       " PROG " qmp WORKDIR I CMD [ARGS]     one QMP command to host I\n"
"       " PROG " ssh WORKDIR I [COMMAND]      log into host I (--userland host)\n"
"\n"
"Guests and paths:\n"
"      --config FILE       read the pod from a key file first (groups [pod],\n"
"                          [device], [job], [host.I]; docs/launcher.md);\n"
"                          the other options override it\n"
"  -n, --hosts N           number of guests (default 2, max %d)\n"
"  -w, --workdir DIR       work directory (default: new /tmp/cxlpod-XXXXXX)\n"
"      --qemu PATH         QEMU binary ($CXLPOD_QEMU, else\n"
"                          $TOP/build/qemu/qemu-system-x86_64)\n"
"      --kernel PATH       guest kernel ($CXLPOD_KERNEL, else newest\n"
"                          $TOP/build/guest/kernel-*/boot/vmlinuz-*, or\n"
"                          the vmlinux-* beside it: PVH boot)\n"
"      --initrd PATH       guest initramfs ($CXLPOD_INITRD, else\n"
"                          $TOP/build/guest/initramfs.cpio)\n"
"      --accel auto|tcg|kvm  (default auto: TCG unless CXLPOD_TRY_KVM=1 and\n"
"                          a KVM probe passes)\n"
"      --mem SIZE          guest RAM (default 512M)\n"
"      --smp N             guest vCPUs (default 2)\n"
"      --append ARGS       extra kernel command line\n"
"      --qemu-arg ARG      extra QEMU argument (repeatable)\n"
"      --stagger MS        delay between guest starts (default 0)\n"
"      --boot-parallel N   at most N guests booting at once; the next starts\n"
"                          when one is ready (default: the host's CPUs + 1;\n"
"                          0 = all at once)\n"
"      --userland initramfs|host  what the guests run (default initramfs):\n"
"                          host = this machine's root file system,\n"
"                          read-only, the current directory read-write at\n"
"                          its own path, ssh between guests, the pod network\n"
"      --net               the pod network for initramfs guests too\n"
"                          (hosts host0.. at " POD_NET_PREFIX ".1.., no route off it)\n"
"\n"
"Pool:\n"
"      --pool PATH         pool file (default WORKDIR/pool.img)\n"
"      --size SIZE         pool size, multiple of 256M (default 256M)\n"
"      --device cxl-type3|cxl-shm  pool device (default %s)\n"
"      --coherent-size SIZE  cxl-shm coherent window (default 64M)\n"
"      --latency-ns NS     cxl-shm injected latency\n"
"      --max-hosts N       cxl-shm host slots (default: number of guests)\n"
"      --device-opt K=V    extra device property (repeatable);\n"
"                          I:K=V for host I only\n"
"      --conflict-log PATH  cxl-shm: append a JSON line to PATH for every\n"
"                          writeback that overwrote another host's newer\n"
"                          data (any host of the pod; from the device's QMP\n"
"                          events, read on a second monitor, hostI.events)\n"
"      --stale-log PATH    cxl-shm mode=timed: the same for every stale read\n"
"      --pool-backend memdev|file  cxl-shm: the pool from a\n"
"                          memory-backend-file on it (memdev=ID, default)\n"
"                          or from the device's own backend (pool=PATH);\n"
"                          I:file|memdev for host I only (repeatable)\n"
"      --prealloc          memory backend: allocate the pool's pages at start\n"
"      --host-nodes N[-M]  memory backend: bind the pool to host NUMA node(s)\n"
"                          N[-M] (policy=bind)\n"
"\n"
"Jobs and checks:\n"
"      --job FILE          shell script to run in every guest\n"
"      --job-host I:FILE   script for host I only (overrides the common job)\n"
"      --timeout SECONDS   kill everything after this (default 300, +10 s a\n"
"                          host past the first, +20 s with --userland host;\n"
"                          none in --interactive unless given; 0 = none)\n"
"      --boot-timeout SECONDS  stop a guest that has not reached its ready\n"
"                          marker (and with a pod network its up marker) this\n"
"                          long after its QEMU started (default %d, more\n"
"                          per host as --timeout; none in --interactive\n"
"                          unless given; 0 = none)\n"
"      --kill I@STRING     SIGKILL host I when STRING shows in its console\n"
"      --kill I@+SECONDS   SIGKILL host I SECONDS after its QEMU started\n"
"      --kill I@random:MIN-MAX[:STRING]  SIGKILL host I a random MIN..MAX\n"
"                          seconds after STRING shows in its console (default:\n"
"                          after its job began); drawn anew for every run\n"
"      --restart I         boot host I again after it was killed\n"
"      --restarts N        kill and restart each --restart host up to N times\n"
"                          (its kills fire on its first N runs; default 1)\n"
"      --seed S            seed of the random kill delays (default: from the\n"
"                          clock; printed, so a run can be replayed)\n"
"      --stall-timeout SECONDS  stop a guest whose job has printed nothing\n"
"                          this long (default 0 = off)\n"
"      --keep-going        a host whose QEMU exits without a result does\n"
"                          not stop the others (default: it stops the pod)\n"
"  -f, --follow            stream job output while it runs\n"
"      --json              print a JSON result line last on stdout\n"
"      --dry-run           print the QEMU command lines and exit\n"
"  -q, --quiet             fewer progress messages\n"
"  -h, --help\n"
"\n"
"Exit status: 0 all guests rc=0 (killed hosts excepted), 1 a guest failed\n"
"or gave no result, 2 usage/setup error, 124 timeout, 130 interrupted.\n",
            MAX_HOSTS, device_name(DEFAULT_DEVICE), DEFAULT_BOOT_TIMEOUT_S);
}

enum {
    OPT_QEMU = 256, OPT_KERNEL, OPT_INITRD, OPT_ACCEL, OPT_POOL, OPT_SIZE,
    OPT_COHERENT, OPT_DEVICE, OPT_DEVICE_OPT, OPT_QEMU_ARG, OPT_MEM, OPT_SMP,
    OPT_JOB, OPT_JOB_HOST, OPT_INTERACTIVE, OPT_TIMEOUT, OPT_BOOT_TIMEOUT, OPT_KILL, OPT_RESTART,
    OPT_STAGGER, OPT_JSON, OPT_DRY_RUN, OPT_LATENCY, OPT_MAX_HOSTS, OPT_APPEND,
    OPT_RESTARTS, OPT_SEED, OPT_STALL_TIMEOUT, OPT_CONFIG, OPT_POOL_BACKEND,
    OPT_PREALLOC, OPT_HOST_NODES, OPT_USERLAND, OPT_NET, OPT_KEEP_GOING,
    OPT_BOOT_PARALLEL, OPT_CONFLICT_LOG, OPT_STALE_LOG,
};

/* The long options: name, short name or OPT_ id, takes a value. */
struct opt_def {
    const char *name;
    int id;
    bool arg;
};

static const struct opt_def long_opts[] = {
    { "hosts", 'n', true },
    { "workdir", 'w', true },
    { "qemu", OPT_QEMU, true },
    { "kernel", OPT_KERNEL, true },
    { "initrd", OPT_INITRD, true },
    { "accel", OPT_ACCEL, true },
    { "pool", OPT_POOL, true },
    { "size", OPT_SIZE, true },
    { "coherent-size", OPT_COHERENT, true },
    { "latency-ns", OPT_LATENCY, true },
    { "max-hosts", OPT_MAX_HOSTS, true },
    { "device", OPT_DEVICE, true },
    { "device-opt", OPT_DEVICE_OPT, true },
    { "conflict-log", OPT_CONFLICT_LOG, true },
    { "stale-log", OPT_STALE_LOG, true },
    { "pool-backend", OPT_POOL_BACKEND, true },
    { "prealloc", OPT_PREALLOC, false },
    { "host-nodes", OPT_HOST_NODES, true },
    { "qemu-arg", OPT_QEMU_ARG, true },
    { "mem", OPT_MEM, true },
    { "smp", OPT_SMP, true },
    { "append", OPT_APPEND, true },
    { "job", OPT_JOB, true },
    { "job-host", OPT_JOB_HOST, true },
    { "interactive", OPT_INTERACTIVE, false },
    { "timeout", OPT_TIMEOUT, true },
    { "boot-timeout", OPT_BOOT_TIMEOUT, true },
    { "kill", OPT_KILL, true },
    { "restart", OPT_RESTART, true },
    { "restarts", OPT_RESTARTS, true },
    { "seed", OPT_SEED, true },
    { "stall-timeout", OPT_STALL_TIMEOUT, true },
    { "stagger", OPT_STAGGER, true },
    { "boot-parallel", OPT_BOOT_PARALLEL, true },
    { "follow", 'f', false },
    { "json", OPT_JSON, false },
    { "dry-run", OPT_DRY_RUN, false },
    { "quiet", 'q', false },
    { "config", OPT_CONFIG, true },
    { "userland", OPT_USERLAND, true },
    { "net", OPT_NET, false },
    { "keep-going", OPT_KEEP_GOING, false },
    { "help", 'h', false },
    { NULL, 0, false },
};

static void bad(const char *opt, const char *val, const char *why)
    __attribute__((noreturn));
static void bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, PROG ": error: bad %s '%s': %s\n", opt, val, why);
    fprintf(stderr, "try '" PROG " --help'\n");
    exit(EXIT_USAGE);
}

static void apply_opt(struct opts *o, int c, const char *optarg,
                      const char *label);

/* The defaults of every option. */
void opts_init(struct opts *o)
{
    memset(o, 0, sizeof(*o));
    o->nhosts = 2;
    o->accel = ACCEL_AUTO;
    o->size = 256 * MIB;
    o->coherent_size = DEFAULT_COHERENT_SIZE;
    o->latency_ns = -1;
    o->device = DEFAULT_DEVICE;
    o->mem = g_strdup("512M");
    o->device_opts = g_ptr_array_new_with_free_func(g_free);
    o->qemu_args = g_ptr_array_new_with_free_func(g_free);
    o->job_cmd = g_ptr_array_new_with_free_func(g_free);
    o->smp = 2;
    o->boot_parallel = -1;      /* auto: the host's CPUs + 1 */
    o->timeout_s = 300;
    o->boot_timeout_s = DEFAULT_BOOT_TIMEOUT_S;
    o->restarts = 1;
}

/*
 * The long option `name` with argument `arg` (NULL for a flag) as if it
 * had been given on the command line; `label` names its source in error
 * messages (a --config key).  False if there is no such option or it does
 * not take an argument as given.
 */
bool opts_apply_named(struct opts *o, const char *name, const char *arg,
                      const char *label)
{
    for (const struct opt_def *lo = long_opts; lo->name; lo++) {
        if (!strcmp(lo->name, name) && lo->id != OPT_CONFIG &&
            lo->id != 'h' && lo->arg == !!arg) {
            apply_opt(o, lo->id, arg, label);
            return true;
        }
    }
    return false;
}

/* One option into *o: `label` replaces "--NAME" in messages if given. */
static void apply_opt(struct opts *o, int c, const char *optarg,
                      const char *label)
{
/* a bad value: named by its --config key if it came from the file */
#define BAD(opt, why) bad(label ? label : (opt), optarg, (why))
    long v;

    switch (c) {
    case 'n':
        if (!parse_int(optarg, 1, MAX_HOSTS, &v)) {
            BAD("--hosts", "need a number 1..32");
        }
        o->nhosts = (int)v;
        break;
    case 'w':
        o->workdir = g_strdup(optarg);
        o->workdir_given = true;
        break;
    case OPT_QEMU:
        o->qemu = g_strdup(optarg);
        break;
    case OPT_KERNEL:
        o->kernel = g_strdup(optarg);
        break;
    case OPT_INITRD:
        o->initrd = g_strdup(optarg);
        break;
    case OPT_ACCEL:
        if (!strcmp(optarg, "auto")) {
            o->accel = ACCEL_AUTO;
        } else if (!strcmp(optarg, "tcg")) {
            o->accel = ACCEL_TCG;
        } else if (!strcmp(optarg, "kvm")) {
            o->accel = ACCEL_KVM;
        } else {
            BAD("--accel", "expected auto, tcg or kvm");
        }
        break;
    case OPT_POOL:
        o->pool = g_strdup(optarg);
        break;
    case OPT_SIZE:
        if (!parse_size(optarg, &o->size) || o->size == 0) {
            BAD("--size", "expected a size such as 256M or 1G");
        }
        if (o->size % POOL_ALIGN) {
            BAD("--size", "must be a multiple of 256 MiB");
        }
        break;
    case OPT_COHERENT:
        if (!parse_size(optarg, &o->coherent_size)) {
            BAD("--coherent-size", "expected a size such as 64M");
        }
        o->coherent_size_given = true;
        break;
    case OPT_LATENCY:
        if (!parse_int(optarg, 0, 1000000000L, &v)) {
            BAD("--latency-ns", "need a number of nanoseconds");
        }
        o->latency_ns = v;
        break;
    case OPT_MAX_HOSTS:
        if (!parse_int(optarg, 1, MAX_HOSTS, &v)) {
            BAD("--max-hosts", "need a number 1..32");
        }
        o->max_hosts = (int)v;
        break;
    case OPT_DEVICE:
        if (!strcmp(optarg, "cxl-type3")) {
            o->device = DEV_CXL_TYPE3;
        } else if (!strcmp(optarg, "cxl-shm")) {
            o->device = DEV_CXL_SHM;
        } else {
            BAD("--device", "expected cxl-type3 or cxl-shm");
        }
        break;
    case OPT_DEVICE_OPT: {
        const char *kv;
        int dh = device_opt_host(optarg, &kv);
        if (!strchr(kv, '=') || kv[0] == '=') {
            BAD("--device-opt", "expected KEY=VALUE or I:KEY=VALUE");
        }
        if (dh >= MAX_HOSTS) {
            BAD("--device-opt", "host id before ':' must be 0..31");
        }
        if (g_str_has_prefix(kv, "conflict-log=") ||
            g_str_has_prefix(kv, "stale-log=")) {
            BAD("--device-opt", "the device writes no log files: give "
                "--conflict-log PATH or --stale-log PATH (one file for the "
                "whole pod, written by the launcher from the device's QMP "
                "events)");
        }
        g_ptr_array_add(o->device_opts, g_strdup(optarg));
        break;
    }
    case OPT_CONFLICT_LOG:
    case OPT_STALE_LOG: {
        char **dst = c == OPT_CONFLICT_LOG ? &o->conflict_log : &o->stale_log;
        if (!*optarg) {
            BAD(c == OPT_CONFLICT_LOG ? "--conflict-log" : "--stale-log",
                "need a file name");
        }
        g_free(*dst);
        *dst = g_strdup(optarg);
        break;
    }
    case OPT_POOL_BACKEND: {
        const char *name;
        int bh = device_opt_host(optarg, &name);
        enum pool_backend b;
        if (!strcmp(name, "file")) {
            b = BACKEND_FILE;
        } else if (!strcmp(name, "memdev")) {
            b = BACKEND_MEMDEV;
        } else {
            BAD("--pool-backend", "expected file, memdev, I:file or I:memdev");
        }
        if (bh >= MAX_HOSTS) {
            BAD("--pool-backend", "host id before ':' must be 0..31");
        }
        if (bh >= 0) {
            o->host_backend[bh] = b;
        } else {
            o->backend = b;
        }
        break;
    }
    case OPT_PREALLOC:
        o->prealloc = true;
        break;
    case OPT_HOST_NODES: {
        g_auto(GStrv) r = g_strsplit(optarg, "-", 2);
        long lo, hi = -1;
        if (!parse_int(r[0], 0, 127, &lo) ||
            (r[1] && (!parse_int(r[1], lo, 127, &hi)))) {
            BAD("--host-nodes", "expected a NUMA node N or a range N-M "
                "(0..127)");
        }
        g_free(o->host_nodes);
        o->host_nodes = g_strdup(optarg);
        break;
    }
    case OPT_QEMU_ARG:
        g_ptr_array_add(o->qemu_args, g_strdup(optarg));
        break;
    case OPT_MEM: {
        uint64_t m;
        if (!parse_size(optarg, &m) || m < 64 * MIB) {
            BAD("--mem", "expected a size of at least 64M");
        }
        g_free(o->mem);
        o->mem = fmt_size(m);
        break;
    }
    case OPT_SMP:
        if (!parse_int(optarg, 1, 64, &v)) {
            BAD("--smp", "need a number 1..64");
        }
        o->smp = (int)v;
        break;
    case OPT_APPEND:
        o->append = g_strdup(optarg);
        break;
    case OPT_JOB:
        o->job_file = g_strdup(optarg);
        break;
    case OPT_JOB_HOST: {
        const char *colon = strchr(optarg, ':');
        char *hs = colon ? g_strndup(optarg, (size_t)(colon - optarg)) : NULL;
        bool ok = hs && parse_int(hs, 0, MAX_HOSTS - 1, &v) && colon[1];
        g_free(hs);
        if (!ok) {
            BAD("--job-host", "expected I:FILE");
        }
        o->host_jobs = g_realloc(o->host_jobs,
                                (o->n_host_jobs + 1) * sizeof(*o->host_jobs));
        o->host_jobs[o->n_host_jobs].host = (int)v;
        o->host_jobs[o->n_host_jobs].file = g_strdup(colon + 1);
        o->n_host_jobs++;
        break;
    }
    case OPT_INTERACTIVE:
        o->interactive = true;
        break;
    case OPT_USERLAND:
        if (!strcmp(optarg, "initramfs")) {
            o->userland = USERLAND_INITRAMFS;
        } else if (!strcmp(optarg, "host")) {
            o->userland = USERLAND_HOST;
        } else {
            BAD("--userland", "expected initramfs or host");
        }
        break;
    case OPT_NET:
        o->net = true;
        break;
    case OPT_KEEP_GOING:
        o->keep_going = true;
        break;
    case OPT_TIMEOUT:
        if (!parse_seconds(optarg, &o->timeout_s)) {
            BAD("--timeout", "need a number of seconds");
        }
        o->timeout_given = true;
        break;
    case OPT_BOOT_TIMEOUT:
        if (!parse_seconds(optarg, &o->boot_timeout_s)) {
            BAD("--boot-timeout", "need a number of seconds");
        }
        o->boot_timeout_given = true;
        break;
    case OPT_KILL: {
        struct kill_spec k;
        const char *why;
        if (!parse_kill(optarg, &k, &why)) {
            BAD("--kill", why);
        }
        if (o->n_kills >= 16) {
            BAD("--kill", "at most 16 --kill options");
        }
        o->kills = g_realloc(o->kills, (o->n_kills + 1) * sizeof(*o->kills));
        o->kills[o->n_kills++] = k;
        break;
    }
    case OPT_RESTART:
        if (!parse_int(optarg, 0, MAX_HOSTS - 1, &v)) {
            BAD("--restart", "need a host id");
        }
        o->restart[v] = true;
        break;
    case OPT_RESTARTS:
        if (!parse_int(optarg, 1, 100000, &v)) {
            BAD("--restarts", "need a number 1..100000");
        }
        o->restarts = (int)v;
        o->restarts_given = true;
        break;
    case OPT_SEED: {
        char *end;
        errno = 0;
        unsigned long long sv = strtoull(optarg, &end, 0);
        if (errno || !*optarg || *end || *optarg == '-') {
            BAD("--seed", "need an unsigned number");
        }
        o->seed = sv;
        o->seed_given = true;
        break;
    }
    case OPT_STALL_TIMEOUT:
        if (!parse_seconds(optarg, &o->stall_timeout_s)) {
            BAD("--stall-timeout", "need a number of seconds");
        }
        break;
    case OPT_STAGGER:
        if (!parse_int(optarg, 0, 3600000, &v)) {
            BAD("--stagger", "need milliseconds");
        }
        o->stagger_ms = v;
        break;
    case OPT_BOOT_PARALLEL:
        if (!parse_int(optarg, 0, MAX_HOSTS, &v)) {
            BAD("--boot-parallel", "need a number of hosts, 0 for all");
        }
        o->boot_parallel = (int)v;
        break;
    case 'f':
        o->follow = true;
        break;
    case OPT_JSON:
        o->json = true;
        break;
    case OPT_DRY_RUN:
        o->dry_run = true;
        break;
    case 'q':
        o->quiet = true;
        break;
    case 'h':
        usage(stdout);
        exit(EXIT_OK);
    default:
        fprintf(stderr, "try '" PROG " --help'\n");
        exit(EXIT_USAGE);
    }
#undef BAD
}

/* Forget the common job (--job / -- COMMAND) given so far. */
void opts_drop_common_job(struct opts *o)
{
    g_free(o->job_file);
    o->job_file = NULL;
    g_ptr_array_set_size(o->job_cmd, 0);
}

/* Forget the first n --job-host entries. */
void opts_drop_host_jobs(struct opts *o, int n)
{
    for (int i = 0; i < n; i++) {
        g_free(o->host_jobs[i].file);
    }
    memmove(o->host_jobs, o->host_jobs + n,
            (o->n_host_jobs - n) * sizeof(*o->host_jobs));
    o->n_host_jobs -= n;
}

/* What the option callbacks of the two GOptionContext passes share. */
struct parse_state {
    struct opts *o;
    int pass;               /* 1: only --config and --help; 2: the rest */
    char *config;           /* --config FILE */
    bool cfg_job;           /* the file gave a common job */
    int cfg_host_jobs;      /* ... and this many --job-host entries */
    bool cfg_interactive;
};

static const struct opt_def *find_long(const char *name)
{
    for (const struct opt_def *lo = long_opts; lo->name; lo++) {
        if (name[0] == '-' && name[1] == '-' ? !strcmp(lo->name, name + 2)
                                             : lo->id == name[1]) {
            return lo;
        }
    }
    return NULL;
}

/* GOptionContext calls this for every option, in command-line order. */
static gboolean on_option(const gchar *name, const gchar *value,
                          gpointer data, GError **error)
{
    struct parse_state *ps = data;
    struct opts *o = ps->o;
    const struct opt_def *lo = find_long(name);
    int c = lo ? lo->id : 0;

    (void)error;
    if (ps->pass == 1) {
        if (c == OPT_CONFIG) {
            if (ps->config) {
                die(EXIT_USAGE, "give --config once");
            }
            ps->config = g_strdup(value);
        } else if (c == 'h') {
            usage(stdout);
            exit(EXIT_OK);
        }
        return TRUE;
    }
    if (c == OPT_CONFIG) {
        return TRUE;
    }
    /* a job on the command line replaces the file's job; --interactive
     * drops the file's jobs, and a job drops the file's interactive */
    if ((c == OPT_JOB || c == OPT_INTERACTIVE) && ps->cfg_job) {
        opts_drop_common_job(o);
        ps->cfg_job = false;
    }
    if (c == OPT_INTERACTIVE && ps->cfg_host_jobs) {
        opts_drop_host_jobs(o, ps->cfg_host_jobs);
        ps->cfg_host_jobs = 0;
    }
    if ((c == OPT_JOB || c == OPT_JOB_HOST) && ps->cfg_interactive) {
        o->interactive = false;
        ps->cfg_interactive = false;
    }
    apply_opt(o, c, value, NULL);
    return TRUE;
}

/*
 * One GOptionContext pass over a copy of argv; returns the words after
 * the options (the job command, "--" removed).  Attached short
 * values (-n2, -w/tmp/x) are split first so that they keep working.
 */
static GStrv parse_pass(int argc, char **argv, struct parse_state *ps)
{
    static GOptionEntry entries[G_N_ELEMENTS(long_opts)];
    GPtrArray *words = g_ptr_array_new();
    bool options = true;

    for (size_t i = 0; long_opts[i].name; i++) {
        const struct opt_def *lo = &long_opts[i];
        entries[i] = (GOptionEntry) {
            .long_name = lo->name,
            .short_name = lo->id < 256 ? (gchar)lo->id : 0,
            .flags = !lo->arg ? G_OPTION_FLAG_NO_ARG : 0,
            .arg = G_OPTION_ARG_CALLBACK,
            .arg_data = (gpointer)on_option,
            .description = "",
        };
    }
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (i > 0 && options && w[0] == '-' && strchr("nw", w[1]) && w[1] &&
            w[2]) {
            g_ptr_array_add(words, g_strndup(w, 2));
            g_ptr_array_add(words, g_strdup(w + 2));
            continue;
        }
        if (i > 0 && (w[0] != '-' || !strcmp(w, "--"))) {
            options = false;
        } else if (i > 0 && options && (!strcmp(w, "-n") ||
                   !strcmp(w, "-w") || (find_long(w) && w[1] == '-' &&
                   find_long(w)->arg)) &&
                   i + 1 < argc) {
            /* an option's value is never split */
            g_ptr_array_add(words, g_strdup(w));
            g_ptr_array_add(words, g_strdup(argv[++i]));
            continue;
        }
        g_ptr_array_add(words, g_strdup(w));
    }
    g_ptr_array_add(words, NULL);
    gchar **av = (gchar **)g_ptr_array_free(words, FALSE);


    g_autoptr(GOptionContext) ctx = g_option_context_new(NULL);
    GOptionGroup *group = g_option_group_new(PROG, "", "", ps, NULL);
    g_option_group_add_entries(group, entries);
    g_option_context_set_main_group(ctx, group);
    g_option_context_set_help_enabled(ctx, FALSE);
    g_option_context_set_strict_posix(ctx, TRUE);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse_strv(ctx, &av, &err)) {
        fprintf(stderr, PROG ": error: %s\n", err->message);
        fprintf(stderr, "try '" PROG " --help'\n");
        exit(EXIT_USAGE);
    }
    /* what is left: argv[0], then "--" if it was given, then the job */
    int skip = av[0] ? 1 : 0;
    if (av[skip] && !strcmp(av[skip], "--")) {
        skip++;
    }
    GStrv rest = g_strdupv(av + skip);
    g_strfreev(av);
    return rest;
}

/* Parse the command line (after the --config file, if any) into *o.
 * Returns normally or exits. */
void parse_args(int argc, char **argv, struct opts *o)
{
    struct parse_state ps = { .o = o, .pass = 1 };

    opts_init(o);
    /* first pass: only --config, which the other options override */
    g_auto(GStrv) rest1 = parse_pass(argc, argv, &ps);
    if (ps.config) {
        config_load(o, ps.config);
    }
    ps.pass = 2;
    ps.cfg_job = o->job_file || o->job_cmd->len;
    ps.cfg_host_jobs = o->n_host_jobs;
    ps.cfg_interactive = o->interactive;
    g_auto(GStrv) rest = parse_pass(argc, argv, &ps);
    if (rest[0] && ps.cfg_job) {
        opts_drop_common_job(o);
    }
    if (rest[0] && ps.cfg_interactive) {
        o->interactive = false;
    }
    for (int i = 0; rest[i]; i++) {
        g_ptr_array_add(o->job_cmd, g_strdup(rest[i]));
    }

    /* cross-checks */
    bool has_job = o->job_cmd->len > 0 || o->job_file || o->n_host_jobs > 0;
    if (o->job_cmd->len && o->job_file) {
        die(EXIT_USAGE, "give either --job FILE or -- COMMAND, not both");
    }
    if (o->interactive && has_job) {
        die(EXIT_USAGE, "--interactive runs no job; drop the job or --interactive");
    }
    if (!o->interactive && !has_job && !o->dry_run) {
        die(EXIT_USAGE, "nothing to run: give -- COMMAND..., --job FILE, or "
            "--interactive (see --help)");
    }
    for (int i = 0; i < o->n_host_jobs; i++) {
        if (o->host_jobs[i].host >= o->nhosts) {
            die(EXIT_USAGE, "--job-host %d: there are only %d hosts (0..%d)",
                o->host_jobs[i].host, o->nhosts, o->nhosts - 1);
        }
    }
    /* hosts without a job of their own (--job-host alone) serve until
     * every job has ended */
    if (o->userland == USERLAND_HOST) {
        o->jobdir = g_get_current_dir();
    }
    for (int i = 0; i < o->n_kills; i++) {
        if (o->kills[i].host >= o->nhosts) {
            die(EXIT_USAGE, "--kill %d@...: there are only %d hosts (0..%d)",
                o->kills[i].host, o->nhosts, o->nhosts - 1);
        }
    }
    for (int h = 0; h < MAX_HOSTS; h++) {
        if (o->restart[h]) {
            bool killed = false;
            for (int i = 0; i < o->n_kills; i++) {
                killed |= o->kills[i].host == h;
            }
            if (h >= o->nhosts) {
                die(EXIT_USAGE, "--restart %d: there are only %d hosts", h,
                    o->nhosts);
            }
            if (!killed) {
                die(EXIT_USAGE, "--restart %d needs a --kill %d@... "
                    "(a host is only restarted after an injected kill)", h, h);
            }
        }
    }
    if (o->restarts_given) {
        bool any = false;
        for (int h = 0; h < MAX_HOSTS; h++) {
            any |= o->restart[h];
        }
        if (!any) {
            die(EXIT_USAGE, "--restarts %d needs a --restart I (it says how "
                "often that host is killed and restarted)", o->restarts);
        }
    }
    if (!o->seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o->seed = mix64((uint64_t)ts.tv_sec * 1000000000ULL +
                        (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid();
        o->seed %= 1000000000000ULL;    /* short enough to retype */
    }
    for (guint i = 0; i < o->device_opts->len; i++) {
        const char *kv;
        int dh = device_opt_host((const char *)g_ptr_array_index(o->device_opts, i), &kv);
        if (dh >= o->nhosts) {
            die(EXIT_USAGE, "--device-opt %s: there are only %d hosts (0..%d)",
                (const char *)g_ptr_array_index(o->device_opts, i), o->nhosts, o->nhosts - 1);
        }
    }
    if (o->device == DEV_CXL_TYPE3 && events_wanted(o)) {
        die(EXIT_USAGE, "--conflict-log/--stale-log: only --device cxl-shm "
            "reports conflicts and stale reads");
    }
    if (o->stale_log) {
        bool timed = false;
        for (guint i = 0; i < o->device_opts->len; i++) {
            const char *kv;
            device_opt_host(g_ptr_array_index(o->device_opts, i), &kv);
            timed |= !strcmp(kv, "mode=timed");
        }
        if (!timed) {
            msg("warning: --stale-log: only mode=timed reports stale reads "
                "(--device-opt mode=timed); the log will stay empty");
        }
    }
    if (o->coherent_size_given && o->coherent_size > o->size) {
        die(EXIT_USAGE, "--coherent-size is larger than --size");
    }
    if (o->device == DEV_CXL_TYPE3 &&
        (o->coherent_size_given || o->latency_ns >= 0 || o->max_hosts)) {
        msg("warning: --coherent-size/--latency-ns/--max-hosts only apply "
            "to --device cxl-shm; ignored");
    }
    bool any_memdev = false, any_backend = o->backend != BACKEND_UNSET;
    for (int h = 0; h < MAX_HOSTS; h++) {
        if (o->host_backend[h] != BACKEND_UNSET && h >= o->nhosts) {
            die(EXIT_USAGE, "--pool-backend %d:...: there are only %d hosts "
                "(0..%d)", h, o->nhosts, o->nhosts - 1);
        }
        any_backend |= o->host_backend[h] != BACKEND_UNSET;
        any_memdev |= h < o->nhosts && host_on_memdev(o, h);
    }
    if (o->device == DEV_CXL_TYPE3 && any_backend) {
        msg("warning: --pool-backend only applies to --device cxl-shm "
            "(cxl-type3 always takes a memory backend); ignored");
    }
    if (o->device == DEV_CXL_SHM && !any_memdev &&
        (o->prealloc || o->host_nodes)) {
        die(EXIT_USAGE, "--prealloc/--host-nodes set options of a memory "
            "backend, and every host is on --pool-backend file (cxl-shm's "
            "pool=PATH has none)");
    }
    if (o->max_hosts && o->max_hosts < o->nhosts) {
        die(EXIT_USAGE, "--max-hosts %d is less than the %d hosts", o->max_hosts,
            o->nhosts);
    }
    /*
     * Defaults grow with the pod: N guests share the machine's cores (a
     * 32-host initramfs pod needed 166 s to every region ready, a 32-host
     * host-userland pod 449 s to every guest up, on 2 cores): 10 s more
     * per extra host, 20 s for host-userland guests.
     */
    double extra = (o->nhosts - 1) * (o->userland == USERLAND_HOST ? 20.0 : 10.0);
    if (!o->timeout_given) {
        o->timeout_s += extra;
    }
    if (!o->boot_timeout_given) {
        o->boot_timeout_s += extra;
    }
    if (o->interactive && !o->timeout_given) {
        o->timeout_s = 0;
    }
    if (o->interactive && !o->boot_timeout_given) {
        o->boot_timeout_s = 0;
    }
}

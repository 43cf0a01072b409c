/*
 * The options of a pod run: usage, the table of long options, their
 * defaults and what each one sets.  launch-args.c parses the command line
 * with them.
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
"                          (hosts host0.. at " POD_NET_PREFIX ".0.1.. on a /"
POD_NET_LEN ",\n"
"                          no route off it)\n"
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
"\n"
"A pod across machines (a launcher on each machine; docs/multi-machine.md):\n"
"      --local-hosts FIRST-LAST  run only these hosts of the -n N pod here\n"
"                          (ids, addresses and names stay the pod's)\n"
"      --serve ADDR:PORT   the pool's machine: serve the pool to the other\n"
"                          machines (cxlpod-pool serve) while the pod runs\n"
"      --serve-heartbeat-timeout MS  the service fails a remote host silent\n"
"                          this long (10..600000; default the service's, 1000)\n"
"      --pool ucx://ADDR:PORT --pool-key PATH  another machine: the hosts\n"
"                          here take the pool from that service\n"
"      --net-listen ADDR:PORT  the pod network: wait for the other machines\n"
"                          here (one launcher of the pod)\n"
"      --net-join ADDR:PORT  the pod network: join that launcher's\n"
"      --join-timeout SECONDS  how long to wait for them (default 300)\n"
"      --machine-name NAME  this machine in the other launchers' messages\n"
"                          (default: the host name)\n"
"      --pod-keys DIR      the pod's ssh keys from DIR (the first machine's\n"
"                          WORKDIR/ssh, copied)\n"
"      --machine NAME:FIRST-LAST  hosts FIRST..LAST run on machine NAME: this\n"
"                          launcher starts its launcher there with\n"
"                          --ssh-command (repeatable; needs --net-listen)\n"
"      --ssh-command CMD   how to run a command on NAME (default \"ssh\":\n"
"                          CMD NAME sh -s, the script on its stdin)\n"
"      --remote-launcher PATH  cxlpod-launch there (default: this one's path)\n"
"\n"
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

const struct opt_def long_opts[] = {
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
    { "local-hosts", OPT_LOCAL_HOSTS, true },
    { "serve", OPT_SERVE, true },
    { "serve-heartbeat-timeout", OPT_SERVE_HEARTBEAT, true },
    { "pool-key", OPT_POOL_KEY, true },
    { "net-listen", OPT_NET_LISTEN, true },
    { "net-join", OPT_NET_JOIN, true },
    { "machine-name", OPT_MACHINE_NAME, true },
    { "pod-keys", OPT_POD_KEYS, true },
    { "join-timeout", OPT_JOIN_TIMEOUT, true },
    { "machine", OPT_MACHINE, true },
    { "ssh-command", OPT_SSH_COMMAND, true },
    { "remote-launcher", OPT_REMOTE_LAUNCHER, true },
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
    o->last_local = -1;         /* --local-hosts not given: every host */
    o->join_timeout_s = 300;
    o->given = g_ptr_array_new_with_free_func(g_free);
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
void apply_opt(struct opts *o, int c, const char *optarg,
                      const char *label)
{
/* a bad value: named by its --config key if it came from the file */
#define BAD(opt, why) bad(label ? label : (opt), optarg, (why))
    long v;

    switch (c) {
    case 'n':
        if (!parse_int(optarg, 1, MAX_HOSTS, &v)) {
            BAD("--hosts", "need a number 1.." MAX_HOSTS_STR);
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
            BAD("--max-hosts", "need a number 1.." MAX_HOSTS_STR);
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
            BAD("--device-opt", "host id before ':' must be 0.."
                MAX_HOST_ID_STR);
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
            BAD("--pool-backend", "host id before ':' must be 0.."
                MAX_HOST_ID_STR);
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
    case OPT_LOCAL_HOSTS:
        if (!parse_host_range(optarg, &o->first_local, &o->last_local)) {
            BAD("--local-hosts", "expected FIRST-LAST (or I), host ids 0.."
                MAX_HOST_ID_STR);
        }
        o->local_given = true;
        break;
    case OPT_SERVE:
    case OPT_NET_LISTEN:
    case OPT_NET_JOIN: {
        char *addr;
        int port;
        if (!parse_addr_port(optarg, &addr, &port) ||
            (port == 0 && c != OPT_SERVE)) {
            BAD(c == OPT_SERVE ? "--serve" : c == OPT_NET_LISTEN ?
                "--net-listen" : "--net-join",
                "expected ADDR:PORT (an IP address and a port 1..65535)");
        }
        g_free(addr);
        char **dst = c == OPT_SERVE ? &o->serve :
                     c == OPT_NET_LISTEN ? &o->net_listen : &o->net_join;
        g_free(*dst);
        *dst = g_strdup(optarg);
        break;
    }
    case OPT_SERVE_HEARTBEAT: {
        char *end;
        long v = strtol(optarg, &end, 10);

        if (end == optarg || *end || v < 10 || v > 600000) {
            BAD("--serve-heartbeat-timeout", "need milliseconds 10..600000");
        }
        o->serve_hb_ms = v;
        break;
    }
    case OPT_POOL_KEY:
    case OPT_MACHINE_NAME:
    case OPT_POD_KEYS: {
        char **dst = c == OPT_POOL_KEY ? &o->pool_key :
                     c == OPT_MACHINE_NAME ? &o->machine : &o->pod_keys;
        if (c == OPT_MACHINE_NAME ? !xmach_name_ok(optarg) :
            !*optarg || strchr(optarg, '\n')) {
            BAD(c == OPT_POOL_KEY ? "--pool-key" : c == OPT_MACHINE_NAME ?
                "--machine-name" : "--pod-keys",
                c == OPT_MACHINE_NAME ? "need a name of up to "
                G_STRINGIFY(XMACH_NAME_MAX) " of A-Z a-z 0-9 . _ -, not "
                "starting with - or ." : "need a path");
        }
        g_free(*dst);
        *dst = g_strdup(optarg);
        break;
    }
    case OPT_MACHINE: {
        const char *c = strrchr(optarg, ':');
        struct machine_spec m = { 0 };
        if (!c || c == optarg || !parse_host_range(c + 1, &m.first, &m.last)) {
            BAD("--machine", "expected NAME:FIRST-LAST (NAME as --ssh-command "
                "reaches it, host ids 0.." MAX_HOST_ID_STR ")");
        }
        m.name = g_strndup(optarg, c - optarg);
        if (!xmach_name_ok(m.name)) {
            BAD("--machine", "the name is not up to "
                G_STRINGIFY(XMACH_NAME_MAX) " of A-Z a-z 0-9 . _ -, not "
                "starting with - or . (an ssh_config Host alias, or "
                "--ssh-command 'ssh -l USER', for another user)");
        }
        o->machines = g_renew(struct machine_spec, o->machines,
                              o->n_machines + 1);
        o->machines[o->n_machines++] = m;
        break;
    }
    case OPT_SSH_COMMAND:
    case OPT_REMOTE_LAUNCHER: {
        char **dst = c == OPT_SSH_COMMAND ? &o->ssh_command :
                     &o->remote_launcher;
        if (!*optarg) {
            BAD(c == OPT_SSH_COMMAND ? "--ssh-command" : "--remote-launcher",
                "empty");
        }
        g_free(*dst);
        *dst = g_strdup(optarg);
        break;
    }
    case OPT_JOIN_TIMEOUT:
        if (!parse_seconds(optarg, &o->join_timeout_s) ||
            o->join_timeout_s <= 0) {
            BAD("--join-timeout", "need a number of seconds above 0");
        }
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

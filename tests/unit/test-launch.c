/*
 * Unit tests of cxlpod-launch's parsers (host-tools/launch-parse.c and
 * friends), called directly: sizes, --kill specs and their random delays,
 * query-cxl-shm replies, serial-log markers, option parsing, the pool
 * device arguments, the pool file's host table, restarted jobs, quoting.
 * No QEMU or guest image needed.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include "launch.h"

/* parse_args() on a command line split at spaces */
static void parse_line(const char *line, struct opts *o)
{
    gchar **words = g_strsplit(line, " ", -1);
    GPtrArray *argv = g_ptr_array_new();

    g_ptr_array_add(argv, (gpointer)PROG);
    for (int i = 0; words[i]; i++) {
        if (*words[i]) {
            g_ptr_array_add(argv, words[i]);
        }
    }
    g_ptr_array_add(argv, NULL);
    parse_args((int)argv->len - 1, (char **)argv->pdata, o);
    /* o keeps pointers only to its own copies */
    g_ptr_array_free(argv, TRUE);
    g_strfreev(words);
}

/* sizes, their QEMU form and QEMU option escaping */
static void test_size(void)
{
    uint64_t v;
    g_assert_true(parse_size("256M", &v) && v == 256 * MIB);
    g_assert_true(parse_size("1G", &v) && v == GIB);
    g_assert_true(parse_size("1GiB", &v) && v == GIB);
    g_assert_true(parse_size("512", &v) && v == 512);
    g_assert_true(parse_size("4k", &v) && v == 4096);
    g_assert_true(!parse_size("", &v));
    g_assert_true(!parse_size("M", &v));
    g_assert_true(!parse_size("12Q", &v));
    g_assert_true(!parse_size("-1", &v));
    g_assert_true(!parse_size("99999999999999999999G", &v));
    g_assert_true(!parse_size("20000000000T", &v));

    char *s = fmt_size(256 * MIB);
    g_assert_true(!strcmp(s, "256M"));
    g_free(s);
    s = fmt_size(4 * GIB);
    g_assert_true(!strcmp(s, "4G"));
    g_free(s);

    s = qemu_opt_escape("/a,b/c");
    g_assert_true(!strcmp(s, "/a,,b/c"));
    g_free(s);
}

/* the --kill specs and the random kill delays */
static void test_kill(void)
{
    struct kill_spec k;
    const char *why;
    g_assert_true(parse_kill("1@hello world", &k, &why) && k.host == 1 &&
          !strcmp(k.pattern, "hello world"));
    g_free(k.pattern);
    g_assert_true(parse_kill("0@+2.5", &k, &why) && k.host == 0 && !k.pattern &&
          k.after_s == 2.5);
    g_assert_true(parse_kill("1@a@b", &k, &why) && !strcmp(k.pattern, "a@b"));
    g_free(k.pattern);
    g_assert_true(!parse_kill("x@foo", &k, &why));
    g_assert_true(!parse_kill("1", &k, &why));
    g_assert_true(!parse_kill("1@", &k, &why));
    g_assert_true(!parse_kill("1@+abc", &k, &why));
    g_assert_true(parse_kill("255@foo", &k, &why) && k.host == 255);
    g_free(k.pattern);
    g_assert_true(!parse_kill("256@foo", &k, &why));
    g_assert_cmpstr(why, ==, "host id before '@' must be a number 0..255");
    /* random kills */
    g_assert_true(parse_kill("0@random:0.2-1.5", &k, &why) && k.host == 0 && k.random &&
          !k.pattern && k.min_s == 0.2 && k.max_s == 1.5);
    g_assert_true(parse_kill("3@random:1-1:CRASH-POINT life=", &k, &why) && k.host == 3 &&
          k.random && k.min_s == 1 && k.max_s == 1 &&
          !strcmp(k.pattern, "CRASH-POINT life="));
    g_free(k.pattern);
    g_assert_true(parse_kill("1@random:0-2:a:b-c", &k, &why) && k.max_s == 2 &&
          !strcmp(k.pattern, "a:b-c"));
    g_free(k.pattern);
    g_assert_true(!parse_kill("0@random:", &k, &why));
    g_assert_true(!parse_kill("0@random:1", &k, &why));
    g_assert_true(!parse_kill("0@random:2-1", &k, &why));
    g_assert_true(!parse_kill("0@random:a-1", &k, &why));
    g_assert_true(!parse_kill("0@random:1-", &k, &why));
    g_assert_true(!parse_kill("0@random:-1-2", &k, &why));
    g_assert_true(!parse_kill("0@random:0-1:", &k, &why));
    g_assert_true(!parse_kill("0@random:0:x-1", &k, &why));
    {
        /* delays: inside [MIN, MAX], a function of (seed, host, run, spec) */
        struct kill_spec r = { .host = 0, .random = true, .min_s = 0.5, .max_s = 2 };
        bool differ = false;
        for (int run = 1; run <= 200; run++) {
            double d = kill_delay(&r, 42, run, 0);
            g_assert_true(d >= 0.5 && d < 2);
            g_assert_true(d == kill_delay(&r, 42, run, 0));
            differ |= d != kill_delay(&r, 43, run, 0);
        }
        g_assert_true(differ);
        g_assert_true(kill_delay(&r, 42, 1, 0) != kill_delay(&r, 42, 2, 0));
        g_assert_true(kill_delay(&r, 42, 1, 0) != kill_delay(&r, 42, 1, 1));
        r.max_s = 0.5;
        g_assert_true(kill_delay(&r, 7, 3, 0) == 0.5);
    }
}

/* one host's entry of a query-cxl-shm reply */
static void test_qmp_reply(void)
{
    /* a query-cxl-shm reply (members in QEMU's hash order) */
    {
        const char *rep =
            "{\"return\": [{\"host-id\": 1, \"stats\": {\"errors\": 0}, "
            "\"hosts\": [{\"host-id\": 0, \"stats\": {\"a\": 1, \"b\": [1, {\"c\": \"}\"}]}, "
            "\"state\": \"failed\", \"generation\": 3, \"pid\": 99}, "
            "{\"state\": \"live\", \"host-id\": 1, \"generation\": 12, "
            "\"stats\": {}}], \"mode\": \"direct\", \"generation\": 1}]}";
        char st[16];
        uint64_t g = 0;
        g_assert_true(qmp_host_state(rep, 0, st, sizeof(st), &g) && !strcmp(st, "failed") &&
              g == 3);
        g_assert_true(qmp_host_state(rep, 1, st, sizeof(st), &g) && !strcmp(st, "live") &&
              g == 12);
        g_assert_true(!qmp_host_state(rep, 2, st, sizeof(st), &g));
        g_assert_true(!qmp_host_state("{\"error\": {\"class\": \"CommandNotFound\"}}", 0,
                              st, sizeof(st), &g));
        g_assert_true(!qmp_host_state("{\"return\": [{\"hosts\": [{\"host-id\": 0, "
                              "\"state\": \"fa", 0, st, sizeof(st), &g));
        g_assert_true(!qmp_host_state("", 0, st, sizeof(st), &g));
    }
}

/* the job protocol markers of a serial log */
static void test_log(void)
{
    /* log parsing */
    struct guest_report r;
    const char *log1 =
        "SeaBIOS\r\n[    1.0] cxl: something\r\n"
        "@@CXLPOD-READY dax=dax0.0@@\r\n"
        "@@CXLPOD-BEGIN@@\r\n"
        "hello from 1\r\n"
        "/dev/dax0.0\r\n"
        "@@CXLPOD-END rc=0@@\r\n"
        "reboot: Power down\r\n";
    parse_log(log1, strlen(log1), &r);
    g_assert_true(r.ready && !strcmp(r.dax, "dax0.0"));
    g_assert_true(r.begun && r.ended && r.rc == 0);
    size_t n;
    char *out = extract_output(log1, &r, &n);
    g_assert_true(!strcmp(out, "hello from 1\n/dev/dax0.0\n"));
    g_free(out);

    /* every prefix parses without crashing, and END only once complete */
    for (size_t i = 0; i <= strlen(log1); i++) {
        parse_log(log1, i, &r);
        const char *endm = strstr(log1, "@@CXLPOD-END rc=0@@");
        g_assert_true(r.ended == (i >= (size_t)(endm - log1) + 19));
    }

    const char *log2 = "@@CXLPOD-BEGIN@@\nno newline at end@@CXLPOD-END rc=-3@@\n";
    parse_log(log2, strlen(log2), &r);
    g_assert_true(r.ended && r.rc == -3 && !r.ready);
    out = extract_output(log2, &r, &n);
    g_assert_true(!strcmp(out, "no newline at end\n"));
    g_free(out);

    const char *log3 = "@@CXLPOD-BEGIN@@\n@@CXLPOD-END rc=1@@";
    parse_log(log3, strlen(log3), &r);
    g_assert_true(r.ended && r.rc == 1);
    out = extract_output(log3, &r, &n);
    g_assert_true(n == 0);
    g_free(out);

    /* an END before BEGIN (or a bogus one) does not count */
    const char *log4 = "@@CXLPOD-END rc=0@@\n@@CXLPOD-BEGIN@@\nx @@CXLPOD-END rc=zz@@\n"
                       "@@CXLPOD-END rc=42@@\n";
    parse_log(log4, strlen(log4), &r);
    g_assert_true(r.ended && r.rc == 42);
    out = extract_output(log4, &r, &n);
    g_assert_true(!strcmp(out, "x @@CXLPOD-END rc=zz@@\n"));
    g_free(out);

    const char *log5 = "boot\n@@CXLPOD-ERROR region: commit failed@@\r\nmore\n"
                       "@@CXLPOD-ERROR second";
    int ne;
    char *errs = collect_errors(log5, strlen(log5), &ne);
    g_assert_true(ne == 2);
    g_assert_true(!strcmp(errs, "@@CXLPOD-ERROR region: commit failed@@\n"
                        "@@CXLPOD-ERROR second\n"));
    g_free(errs);
    parse_log(log5, strlen(log5), &r);
    g_assert_true(!r.begun && !r.ended && !r.ready);
}

/* the command line into struct opts */
static void test_options(void)
{
    /* option parsing */
    struct opts o;
    parse_line("-n 3 --size 512M --kill 1@+3 --kill 2@foo "
                        "--restart 1 --device cxl-shm --coherent-size 64M "
                        "--latency-ns 200 --device-opt mode=timed "
                        "--qemu-arg -icount --qemu-arg shift=0 -- echo hi", &o);
    g_assert_true(o.nhosts == 3 && o.size == 512 * MIB && o.n_kills == 2);
    g_assert_true(o.kills[0].host == 1 && o.kills[0].after_s == 3);
    g_assert_true(o.kills[1].host == 2 && !strcmp(o.kills[1].pattern, "foo"));
    g_assert_true(o.restart[1] && !o.restart[0]);
    g_assert_true(o.device == DEV_CXL_SHM && o.coherent_size == 64 * MIB);
    g_assert_true(o.latency_ns == 200 && o.device_opts->len == 1);
    g_assert_true(o.qemu_args->len == 2 && !strcmp((const char *)g_ptr_array_index(o.qemu_args, 1), "shift=0"));
    g_assert_true(o.job_cmd->len == 2 && !strcmp((const char *)g_ptr_array_index(o.job_cmd, 0), "echo"));
    g_assert_true(o.timeout_s == 300 + 2 * 10);  /* 10 s per extra host */
    g_assert_true(o.boot_timeout_s == DEFAULT_BOOT_TIMEOUT_S + 2 * 10);
    g_assert_true(o.restarts == 1 && !o.kills[0].random);
    {
        struct opts o2;

        parse_line("-n 2 --kill 0@random:0.1-2:CRASH-POINT --restart 0 "
                            "--restarts 20 --seed 1234 --stall-timeout 30 -- x", &o2);
        g_assert_true(o2.n_kills == 1 && o2.kills[0].random && o2.restart[0]);
        g_assert_true(o2.restarts == 20 && o2.seed == 1234 && o2.seed_given);
        g_assert_true(o2.stall_timeout_s == 30);
        g_assert_true(kill_runs(&o2, 0) == 20 && kill_runs(&o2, 1) == 1);
        parse_line("--kill 0@+1 -- x", &o2);
        g_assert_true(!o2.seed_given && o2.restarts == 1 && o2.stall_timeout_s == 0);
        g_assert_true(kill_runs(&o2, 0) == 1);
        parse_line("--interactive", &o2);
        g_assert_true(o2.timeout_s == 0 && o2.boot_timeout_s == 0);
        parse_line("--interactive --boot-timeout 40", &o2);
        g_assert_true(o2.timeout_s == 0 && o2.boot_timeout_s == 40);
        parse_line("--boot-timeout 0 --timeout 9 -- true", &o2);
        g_assert_true(o2.timeout_s == 9 && o2.boot_timeout_s == 0);
    }
}

/* -append of host @host's QEMU command line */
static char *kernel_cmdline(const struct opts *o, int host)
{
    struct host_paths hp;
    g_autoptr(GPtrArray) a = argv_new();
    char *append = NULL;

    host_paths_init(&hp, "/tmp/cxlpod-test-wd", host);
    g_assert_nonnull(o->pool);     /* main() fills these in */
    build_qemu_argv(a, o, ACCEL_TCG, host, &hp, false, false);
    for (guint i = 0; i + 1 < a->len; i++) {
        if (!g_strcmp0(g_ptr_array_index(a, i), "-append")) {
            append = g_strdup(g_ptr_array_index(a, i + 1));
        }
    }
    g_assert_nonnull(append);
    return append;
}

/*
 * The guest kernel's command line carries the boot-stall fixes (issue 9,
 * docs/launcher.md): the TSC trusted and its frequency given, the
 * boot-time timer check skipped.
 */
static void test_kernel_cmdline(void)
{
    struct opts o, oi;
    g_autofree char *c = NULL, *ci = NULL;
    const char *k;

    parse_line("-n 2 -- true", &o);
    o.pool = g_strdup("/tmp/p.pool");
    c = kernel_cmdline(&o, 1);
    g_assert_nonnull(strstr(c, "console=ttyS0 quiet tsc=reliable "
                               "no_timer_check"));
    g_assert_nonnull(strstr(c, " cxlpod.host=1 cxlpod.nhosts=2"));
    /* boot-time work a pod guest does not need (docs/launcher.md) */
    g_assert_nonnull(strstr(c, " cryptomgr.notests initcall_blacklist="
                               "crypto_kdf108_init,jent_mod_init,"
                               "init_encrypted"));
    /* the host's TSC rate, measured; absent only if it cannot be */
    k = strstr(c, " tsc_early_khz=");
    if (k) {
        unsigned long khz = strtoul(k + strlen(" tsc_early_khz="), NULL, 10);

        g_assert_cmpuint(khz, >=, 100000);
        g_assert_cmpuint(khz, <=, 20000000);
    } else {
        g_test_message("the host's TSC rate could not be measured: the "
                       "guest calibrates it");
    }
    /* under icount the guest's TSC counts virtual ns: 1 GHz, exactly */
    parse_line("-n 2 --qemu-arg -icount --qemu-arg shift=0 -- true", &oi);
    oi.pool = g_strdup("/tmp/p.pool");
    ci = kernel_cmdline(&oi, 0);
    g_assert_nonnull(strstr(ci, "tsc=reliable no_timer_check "
                                "tsc_early_khz=1000000 cxlpod.host=0"));
}

/* --boot-parallel: the host's CPUs + 1 unless given; 0 = all at once */
static void test_boot_parallel(void)
{
    struct opts o, o0, o4;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    parse_line("-n 8 -- true", &o);
    g_assert_cmpint(boot_parallel(&o), ==, ncpu > 0 ? ncpu + 1 : 0);
    parse_line("-n 8 --boot-parallel 0 -- true", &o0);
    g_assert_cmpint(boot_parallel(&o0), ==, 0);
    parse_line("-n 8 --boot-parallel 4 -- true", &o4);
    g_assert_cmpint(boot_parallel(&o4), ==, 4);
}

/* the pool device arguments of both devices */
static void test_device_args(void)
{
    struct opts o;

    parse_line("-n 3 --size 512M --kill 1@+3 --kill 2@foo "
               "--restart 1 --device cxl-shm --coherent-size 64M "
               "--latency-ns 200 --device-opt mode=timed "
               "--qemu-arg -icount --qemu-arg shift=0 -- echo hi", &o);
    /* device arguments: one place, both devices */
    o.pool = g_strdup("/tmp/p,ool");
    g_autoptr(GPtrArray) a = argv_new();
    add_pool_device_args(a, &o, 2);
    char *cmd = argv_to_shell(a);
    /* by default the launcher builds the pool's memory backend */
    g_assert_true(strstr(cmd, "-object memory-backend-file,id=cxl-pool0,"
                      "mem-path=/tmp/p,,ool,size=512M,offset=2M,share=on "
                      "-device cxl-shm,bus=root_port13,id=cxl-shm0,"
                      "memdev=cxl-pool0,size=512M,host-id=2,max-hosts=3,"
                      "coherent-size=64M,latency-ns=200,mode=timed"));
    g_assert_null(strstr(cmd, "pool=/"));
    g_assert_true(strstr(cmd, "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"));
    /* the guest cannot power the slot off (that would unplug the device) */
    g_assert_true(strstr(cmd, "cxl-rp,port=0,bus=cxl.1,id=root_port13,"
                      "chassis=0,slot=2,hotplug=off"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);
    {
        /* a property for one host only */
        const char *kv;
        g_assert_true(device_opt_host("1:evict-rate=10", &kv) == 1 && !strcmp(kv, "evict-rate=10"));
        g_assert_true(device_opt_host("evict-rate=10", &kv) == -1 && !strcmp(kv, "evict-rate=10"));
        g_assert_true(device_opt_host("pool=/a:b", &kv) == -1);
        g_ptr_array_add(o.device_opts, g_strdup("2:evict-rate=7"));
        add_pool_device_args(a, &o, 2);
        cmd = argv_to_shell(a);
        g_assert_true(strstr(cmd, "mode=timed,evict-rate=7"));
        g_free(cmd);
        g_ptr_array_set_size(a, 0);
        add_pool_device_args(a, &o, 1);
        cmd = argv_to_shell(a);
        g_assert_true(strstr(cmd, "mode=timed") && !strstr(cmd, "evict-rate"));
        g_free(cmd);
        g_ptr_array_set_size(a, 0);
    }
    o.device = DEV_CXL_TYPE3;
    g_ptr_array_set_size(o.device_opts, 0);
    add_pool_device_args(a, &o, 0);
    cmd = argv_to_shell(a);
    g_assert_true(strstr(cmd, "memory-backend-file,id=cxl-mem0,share=on,"
                      "mem-path=/tmp/p,,ool,size=512M"));
    g_assert_true(strstr(cmd, "cxl-type3,bus=root_port13,volatile-memdev=cxl-mem0,"
                      "id=cxl-vmem0"));
    g_assert_true(strstr(cmd, "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);
}

static char *write_conf(const char *text);
static void remove_conf(char *path);

/* cxl-shm on a memory backend: --pool-backend [I:]memdev, --prealloc,
 * --host-nodes, from the command line and from a pod file */
/* --userland host / --net: options, the UP marker, the pod's QEMU args */
static void test_pod_args(void)
{
    struct opts o;
    struct host_paths hp;
    struct guest_report r;
    g_autoptr(GPtrArray) a = argv_new();
    char *cmd;
    const char *up = "@@CXLPOD-READY dax=/dev/dax0.0@@\r\n"
                     "@@CXLPOD-UP host2 userland=host@@\r\n";

    parse_line("-n 3 --userland host --keep-going --job-host 0:/dev/null", &o);
    g_assert_true(o.userland == USERLAND_HOST && pod_has_net(&o));
    g_assert_true(o.keep_going && o.jobdir && o.jobdir[0] == '/');
    parse_line("-n 2 --net -- true", &o);
    g_assert_true(o.userland == USERLAND_INITRAMFS && pod_has_net(&o));
    parse_line("-n 2 -- true", &o);
    g_assert_false(pod_has_net(&o));

    parse_log(up, strlen(up), &r);
    g_assert_true(r.ready && r.up);
    parse_log(up, strlen(up) - 3, &r);     /* UP line not complete yet */
    g_assert_true(r.ready && !r.up);

    g_assert_cmpstr(pod_addr(2, true), ==, "10.211.0.3/16");
    g_assert_cmpstr(pod_mac(17), ==, "52:54:00:c1:00:11");

    parse_line("-n 3 --userland host -- true", &o);
    g_free(o.workdir);
    o.workdir = g_strdup("/w");
    g_free(o.jobdir);
    o.jobdir = g_strdup("/home/u/my,proj");
    host_paths_init(&hp, o.workdir, 2);
    add_pod_args(a, &o, 2, &hp);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "-fw_cfg name=opt/cxlpod/config,file=/w/host2.config"));
    g_assert_nonnull(strstr(cmd, "-netdev vde,id=podnet,sock=/w/net -device "
                            "virtio-net-pci,bus=pcie.0,netdev=podnet,"
                            "mac=52:54:00:c1:00:02,romfile="));
    g_assert_nonnull(strstr(cmd, "local,id=hostroot,path=/,security_model=none,"
                            "readonly=on,multidevs=remap"));
    /* the launch directory, a comma doubled for QEMU's option parser */
    g_assert_nonnull(strstr(cmd, "local,id=work,path=/home/u/my,,proj,"));
    g_assert_nonnull(strstr(cmd, "socket,id=podssh,path=/w/host2.ssh,server=on,wait=off"));
    g_assert_nonnull(strstr(cmd, "name=opt/cxlpod/ssh-hostkey,file=/w/ssh/ssh_host_ed25519_key"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);

    /* initramfs guests with --net: the NIC, no 9p, no ssh port */
    parse_line("-n 2 --net -- true", &o);
    g_free(o.workdir);
    o.workdir = g_strdup("/w");
    add_pod_args(a, &o, 1, &hp);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "mac=52:54:00:c1:00:01"));
    g_assert_null(strstr(cmd, "virtio-9p"));
    g_assert_null(strstr(cmd, "podssh"));
    g_free(cmd);
}

static void test_memdev_args(void)
{
    struct opts o;
    g_autoptr(GPtrArray) a = argv_new();
    char *cmd;

    parse_line("-n 2 --size 512M --pool-backend file --pool-backend 1:memdev --prealloc "
               "--host-nodes 0-1 -- true", &o);
    o.pool = g_strdup("/dev/shm/p,1");
    g_assert_false(host_on_memdev(&o, 0));
    g_assert_true(host_on_memdev(&o, 1));
    add_pool_device_args(a, &o, 1);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "-object memory-backend-file,id=cxl-pool0,"
                            "mem-path=/dev/shm/p,,1,size=512M,offset=2M,"
                            "share=on,prealloc=on,host-nodes=0-1,policy=bind "
                            "-device cxl-shm,bus=root_port13,id=cxl-shm0,"
                            "memdev=cxl-pool0,size=512M,host-id=1,"
                            "max-hosts=2,coherent-size=64M"));
    g_assert_null(strstr(cmd, "pool=/"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);
    /* host 0 keeps the device's own backend */
    add_pool_device_args(a, &o, 0);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "cxl-shm,bus=root_port13,id=cxl-shm0,"
                            "pool=/dev/shm/p,,1,size=512M,host-id=0,"));
    g_assert_null(strstr(cmd, "memory-backend-file"));
    g_assert_null(strstr(cmd, "memdev="));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);

    /* every host, then one host back on pool= */
    parse_line("--pool-backend memdev --pool-backend 0:file -- true", &o);
    g_assert_false(host_on_memdev(&o, 0));
    g_assert_true(host_on_memdev(&o, 1));
    o.pool = g_strdup("/p");
    add_pool_device_args(a, &o, 1);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "memory-backend-file,id=cxl-pool0,"
                            "mem-path=/p,size=256M,offset=2M,share=on "));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);

    /* cxl-type3's backend takes --prealloc and --host-nodes too */
    parse_line("--device cxl-type3 --prealloc --host-nodes 1 -- true", &o);
    o.pool = g_strdup("/p");
    add_pool_device_args(a, &o, 0);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "memory-backend-file,id=cxl-mem0,share=on,"
                            "mem-path=/p,size=256M,prealloc=on,host-nodes=1,"
                            "policy=bind "));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);

    /* the pod file: [device] for every host, [host.I] for one */
    char *conf = write_conf("[device]\npool-backend = memdev\n"
                            "prealloc = true\nhost-nodes = 0\n"
                            "[host.0]\npool-backend = file\n"
                            "[job]\ncommand = true\n");
    g_autofree char *arg = g_strdup_printf("--config %s", conf);
    parse_line(arg, &o);
    g_assert_true(o.prealloc && !strcmp(o.host_nodes, "0"));
    g_assert_false(host_on_memdev(&o, 0));
    g_assert_true(host_on_memdev(&o, 1));
    remove_conf(conf);
}

/* the host table of a pool file */
static void test_pool_hosts(void)
{
    /* the host table of a pool file */
    {
        char tmpl[] = "/tmp/cxlpod-test-launch-XXXXXX";
        int fd = mkstemp(tmpl);
        g_assert_true(fd >= 0);
        if (fd >= 0) {
            unsigned char meta[0x1000 + 3 * 128] = { 0 };
            uint32_t u32;
            uint64_t u64;
            memcpy(meta, "CXLPOOL", 8);
            u32 = 4;                            /* the format's version */
            memcpy(meta + 0x08, &u32, 4);
            u32 = 3;
            memcpy(meta + 0x2c, &u32, 4);
            u64 = 0x1000;                       /* the host table */
            memcpy(meta + 0x50, &u64, 8);
            u32 = 128;
            memcpy(meta + 0x58, &u32, 4);
            for (int i = 0; i < 3; i++) {
                u32 = (uint32_t)(i + 1);        /* live, failed, left */
                memcpy(meta + 0x1000 + 128 * i, &u32, 4);
                u64 = 10 + i;
                memcpy(meta + 0x1000 + 128 * i + 8, &u64, 8);
            }
            g_assert_true(write(fd, meta, sizeof(meta)) == (ssize_t)sizeof(meta));
            close(fd);
            unsigned pst[4];
            uint64_t pg[4];
            g_assert_true(read_pool_hosts(tmpl, 4, pst, pg) == 3);
            g_assert_true(pst[0] == 1 && pst[1] == 2 && pst[2] == 3 && pg[2] == 12);
            g_assert_true(!strcmp(pool_state_name(pst[2]), "left"));
            g_assert_true(read_pool_hosts(tmpl, 2, pst, pg) == 2);
            meta[8] = 3;                        /* version 3: not read */
            g_assert_true(g_file_set_contents(tmpl, (char *)meta,
                                              sizeof(meta), NULL));
            g_assert_true(read_pool_hosts(tmpl, 4, pst, pg) == 0);
            unlink(tmpl);
            g_assert_true(read_pool_hosts(tmpl, 4, pst, pg) == 0);
        }
    }
}

/* a restarted job learns how often it was restarted */
static void test_restarted(void)
{
    /* a restarted job learns how often it was restarted */
    {
        char tmpl[] = "/tmp/cxlpod-test-launch-XXXXXX";
        int fd = mkstemp(tmpl);
        g_assert_true(fd >= 0);
        if (fd >= 0) {
            close(fd);
            struct host hh = { .id = 0 };
            hh.hp.job = tmpl;
            const char *cases[][2] = {
                { "#!/bin/sh\necho hi\n",
                  "#!/bin/sh\nexport CXLPOD_RESTARTED=%d\necho hi\n" },
                { "echo hi\n", "export CXLPOD_RESTARTED=%d\necho hi\n" },
            };
            for (int c = 0; c < 2; c++) {
                g_assert_true(g_file_set_contents(tmpl, cases[c][0], -1,
                                                  NULL));
                for (int n = 1; n <= 12; n += 11) {
                    mark_job_restarted(&hh, n);
                    char want[128];
                    snprintf(want, sizeof(want), cases[c][1], n);
                    g_autofree char *got = NULL;
                    g_assert_true(g_file_get_contents(tmpl, &got, NULL, NULL));
                    g_assert_cmpstr(got, ==, want);
                }
            }
            unlink(tmpl);
        }
    }
}

/* shell quoting and JSON strings */
static void test_quote(void)
{
    GString *b = g_string_new(NULL);
    shell_quote(b, "it's");
    g_assert_cmpstr(b->str, ==, "'it'\\''s'");
    g_string_free(b, TRUE);
}

/* a pod file in a new temporary folder; returns its path */
static char *write_conf(const char *text)
{
    g_autofree char *dir = g_dir_make_tmp("cxlpod-test-launch-XXXXXX", NULL);
    g_assert_nonnull(dir);
    char *path = g_build_filename(dir, "pod.conf", NULL);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

static void remove_conf(char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    unlink(path);
    rmdir(dir);
    g_free(path);
}

static const char full_conf[] =
    "# every group\n"
    "[pod]\n"
    "hosts = 3\n"
    "mem = 1G\n"
    "qemu-arg = -icount;shift=0\n"
    "append = cxlpod.debug=1\n"
    "[device]\n"
    "device = cxl-shm\n"
    "size = 512M\n"
    "coherent-size = 128M\n"
    "latency-ns = 250\n"
    "max-hosts = 4\n"
    "device-opt = mode=timed\n"
    "pool = pool.img\n"
    "[job]\n"
    "command = echo hi $CXLPOD_HOST_ID\n"
    "timeout = 60\n"
    "boot-timeout = 90\n"
    "seed = 77\n"
    "json = true\n"
    "follow = false\n"
    "[host.1]\n"
    "device-opt = evict-rate=10;latency-ns=300\n"
    "kill = random:0-1.5:CRASH-POINT\n"
    "restart = true\n"
    "[host.2]\n"
    "job = two.sh\n";

/* every group and kind of key of a pod file */
static void test_config_load(void)
{
    char *conf = write_conf(full_conf);
    g_autofree char *dir = g_path_get_dirname(conf);
    g_autofree char *line = g_strdup_printf("--config %s", conf);
    struct opts o;

    parse_line(line, &o);
    g_assert_cmpint(o.nhosts, ==, 3);
    g_assert_cmpstr(o.mem, ==, "1G");
    g_assert_cmpint(o.qemu_args->len, ==, 2);
    g_assert_cmpstr((const char *)g_ptr_array_index(o.qemu_args, 0), ==, "-icount");
    g_assert_cmpstr((const char *)g_ptr_array_index(o.qemu_args, 1), ==, "shift=0");
    g_assert_cmpstr(o.append, ==, "cxlpod.debug=1");
    g_assert_true(o.device == DEV_CXL_SHM);
    g_assert_cmpuint(o.size, ==, 512 * MIB);
    g_assert_cmpuint(o.coherent_size, ==, 128 * MIB);
    g_assert_cmpint(o.latency_ns, ==, 250);
    g_assert_cmpint(o.max_hosts, ==, 4);
    /* relative paths are the file's folder's */
    g_autofree char *pool = g_build_filename(dir, "pool.img", NULL);
    g_assert_cmpstr(o.pool, ==, pool);
    g_assert_cmpint(o.device_opts->len, ==, 3);
    g_assert_cmpstr((const char *)g_ptr_array_index(o.device_opts, 0), ==, "mode=timed");
    g_assert_cmpstr((const char *)g_ptr_array_index(o.device_opts, 1), ==, "1:evict-rate=10");
    g_assert_cmpstr((const char *)g_ptr_array_index(o.device_opts, 2), ==, "1:latency-ns=300");
    g_assert_cmpint(o.job_cmd->len, ==, 1);
    g_assert_cmpstr((const char *)g_ptr_array_index(o.job_cmd, 0), ==, "echo hi $CXLPOD_HOST_ID");
    g_assert_null(o.job_file);
    g_assert_true(o.timeout_s == 60 && o.timeout_given);
    g_assert_true(o.boot_timeout_s == 90);
    g_assert_true(o.seed == 77 && o.seed_given);
    g_assert_true(o.json && !o.follow);
    g_assert_cmpint(o.n_kills, ==, 1);
    g_assert_cmpint(o.kills[0].host, ==, 1);
    g_assert_true(o.kills[0].random && o.kills[0].max_s == 1.5);
    g_assert_cmpstr(o.kills[0].pattern, ==, "CRASH-POINT");
    g_assert_true(o.restart[1] && !o.restart[0] && !o.restart[2]);
    g_assert_cmpint(o.n_host_jobs, ==, 1);
    g_assert_cmpint(o.host_jobs[0].host, ==, 2);
    g_autofree char *two = g_build_filename(dir, "two.sh", NULL);
    g_assert_cmpstr(o.host_jobs[0].file, ==, two);

    /* host 1's device gets its own properties after the common ones */
    g_autoptr(GPtrArray) a = argv_new();
    add_pool_device_args(a, &o, 1);
    char *cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "max-hosts=4,coherent-size=128M,"
                                 "latency-ns=250,mode=timed,evict-rate=10,"
                                 "latency-ns=300"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);
    add_pool_device_args(a, &o, 0);
    cmd = argv_to_shell(a);
    g_assert_nonnull(strstr(cmd, "mode=timed "));
    g_assert_null(strstr(cmd, "evict-rate"));
    g_free(cmd);
    g_ptr_array_set_size(a, 0);
    remove_conf(conf);
}

/* command-line options override the file, wherever they stand */
static void test_config_override(void)
{
    char *conf = write_conf(full_conf);
    struct opts o;

    g_autofree char *l1 = g_strdup_printf(
        "-n 4 --config %s --size 1G --timeout 9 "
        "--device-opt 3:evict-rate=1 --kill 0@+2 -- true", conf);
    parse_line(l1, &o);
    g_assert_cmpint(o.nhosts, ==, 4);          /* before --config too */
    g_assert_cmpuint(o.size, ==, GIB);
    g_assert_true(o.timeout_s == 9);
    g_assert_true(o.boot_timeout_s == 90);     /* from the file */
    g_assert_cmpint(o.device_opts->len, ==, 4);   /* lists add up */
    g_assert_cmpstr((const char *)g_ptr_array_index(o.device_opts, 3), ==, "3:evict-rate=1");
    g_assert_cmpint(o.n_kills, ==, 2);
    g_assert_cmpint(o.job_cmd->len, ==, 1);       /* the job is replaced */
    g_assert_cmpstr((const char *)g_ptr_array_index(o.job_cmd, 0), ==, "true");
    g_assert_cmpint(o.n_host_jobs, ==, 1);     /* host 2's stays */

    /* --job replaces the file's command; --interactive every file job */
    g_autofree char *l2 = g_strdup_printf("--config %s --job %s", conf, conf);
    parse_line(l2, &o);
    g_assert_cmpint(o.job_cmd->len, ==, 0);
    g_assert_cmpstr(o.job_file, ==, conf);
    g_autofree char *l3 = g_strdup_printf("--config %s --interactive", conf);
    parse_line(l3, &o);
    g_assert_true(o.interactive);
    g_assert_true(o.job_cmd->len == 0 && !o.job_file && o.n_host_jobs == 0);
    g_assert_true(o.timeout_s == 60);          /* the file gave one */
    remove_conf(conf);

    /* a file's interactive gives way to a job on the command line */
    conf = write_conf("[job]\ninteractive = true\n");
    g_autofree char *l4 = g_strdup_printf("--config %s -- echo", conf);
    parse_line(l4, &o);
    g_assert_true(!o.interactive && o.job_cmd->len == 1);
    g_autofree char *l5 = g_strdup_printf("--config %s", conf);
    parse_line(l5, &o);
    g_assert_true(o.interactive && o.timeout_s == 0);
    remove_conf(conf);
}

/* bad pod files and what the launcher says (exit status 2) */
static const struct {
    const char *text, *pattern;
} bad_confs[] = {
    { "[pod]\nhosts = 2\nfoo = 1\n", "*pod.conf: [pod]: unknown key 'foo'*" },
    { "[pods]\nhosts = 2\n", "*unknown group [pods]*" },
    { "[host.256]\njob = x\n", "*unknown group [host.256]*" },
    { "[host.x]\njob = x\n", "*unknown group [host.x]*" },
    { "[pod]\nhosts = 257\n[job]\ncommand = x\n",
      "*bad [pod] hosts in *pod.conf '257': need a number 1..256*" },
    { "[device]\nsize = 100M\n[job]\ncommand = x\n",
      "*bad [device] size in *'100M': must be a multiple of 256 MiB*" },
    { "[job]\ncommand = x\njson = maybe\n",
      "*[job] json: expected true or false*" },
    { "[host.1]\npool-backend = ram\n[job]\ncommand = x\n",
      "*bad [host.1] pool-backend in *'1:ram': expected file, memdev*" },
    { "[device]\nprealloc = true\npool-backend = file\n[job]\ncommand = x\n",
      "*--prealloc/--host-nodes set options of a memory backend, and every "
      "host is on --pool-backend file*" },
    { "[device]\nhost-nodes = 0,1\npool-backend = memdev\n"
      "[job]\ncommand = x\n",
      "*bad [device] host-nodes in *'0,1': expected a NUMA node N or a "
      "range N-M*" },
    { "[host.1]\nkill = +abc\n[job]\ncommand = x\n",
      "*bad [host.1] kill in *'1@+abc': time after*" },
    { "[pod]\nhosts = 2\n\nnot a key\n", "*pod.conf:4: *not a key*" },
    { "[pod]\nhosts = 2\n[job]\n", "*nothing to run*" },
    { "[pod]\nhosts = 2\n[host.3]\njob = x\n[job]\ncommand = x\n",
      "*--job-host 3: there are only 2 hosts*" },
    { "[host.1]\ndevice-opt = conflict-log=/tmp/c.jsonl\n[job]\ncommand = x\n",
      "*bad [host.1] device-opt in *'1:conflict-log=/tmp/c.jsonl': the device "
      "writes no log files: give --conflict-log PATH*" },
};

static void test_config_errors(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_confs); i++) {
        char *conf = write_conf(bad_confs[i].text);
        g_setenv("CXLPOD_TEST_CONF", conf, TRUE);
        g_autofree char *child = g_strdup_printf("/launch/config/errors/%zu",
                                                 i);
        g_test_trap_subprocess(child, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_failed();
        g_test_trap_assert_stderr(bad_confs[i].pattern);
        remove_conf(conf);
    }
}

/* the child of test_config_errors: parse --config $CXLPOD_TEST_CONF */
static void test_config_errors_child(gconstpointer data)
{
    (void)data;
    if (!g_test_subprocess()) {
        g_test_skip("a child of /launch/config/errors");
        return;
    }
    g_autofree char *line = g_strdup_printf("--config %s",
                                            getenv("CXLPOD_TEST_CONF"));
    struct opts o;
    parse_line(line, &o);
    exit(0);
}

/* ------------------------------------------------------------------ */
/* --conflict-log, --stale-log: the device's QMP events as log records */

#define HEX(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
    c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define TS "\"timestamp\": {\"seconds\": 1700000000, \"microseconds\": 123456}"
#define TIME_NS "1700000000123456000"

/* a CXL_SHM_CONFLICT event as QEMU sends it, with @extra members in data */
static char *conflict_event(const char *extra)
{
    return g_strdup_printf("{\"event\": \"CXL_SHM_CONFLICT\", \"data\": "
        "{\"qom-path\": \"/machine/peripheral/cxl-shm0\", \"host-id\": 1, "
        "\"generation\": 2, \"dpa\": 67111488, \"lost-mask\": 115, "
        "\"lost-bytes\": 5, \"base\": \"" HEX("0") "\", \"theirs\": \""
        HEX("1") "\", \"mine\": \"" HEX("2") "\"%s}, " TS "}", extra);
}

static char *stale_event(const char *extra)
{
    return g_strdup_printf("{\"timestamp\": {\"seconds\": 1700000000, "
        "\"microseconds\": 123456}, \"event\": \"CXL_SHM_STALE_READ\", "
        "\"data\": {\"qom-path\": \"/machine/peripheral/cxl-shm0\", "
        "\"host-id\": 0, \"generation\": 1, \"dpa\": 67111496, "
        "\"line\": 67111488, \"size\": 8, \"value\": 18446744073709551615, "
        "\"stale\": \"" HEX("ab") "\", \"current\": \"" HEX("cd") "\"%s}}",
        extra);
}

/* the record line of an event text, and which log it goes to */
static void assert_record(const char *event, enum event_log want,
                          const char *record)
{
    enum event_log k = EVENT_LOG_N;
    g_autofree char *r = event_record(event, &k);
    g_assert_cmpstr(r, ==, record);
    g_assert_cmpint(k, ==, want);
}

static void assert_no_record(const char *event)
{
    enum event_log k = EVENT_LOG_N;
    g_autofree char *r = event_record(event, &k);
    g_assert_null(r);
}

/* the records keep the format of the device's former log files */
static void test_event_records(void)
{
    static const char conflict[] = "{\"host\":1,\"generation\":2,"
        "\"offset\":67111488,\"line\":\"0x4000a40\"%s,\"time_ns\":" TIME_NS
        ",\"lost_mask\":\"0x0000000000000073\",\"lost_bytes\":5,"
        "\"base\":\"" HEX("0") "\",\"theirs\":\"" HEX("1") "\",\"mine\":\""
        HEX("2") "\"%s}";
    static const char stale[] = "{\"host\":0,\"generation\":1,"
        "\"offset\":67111496,\"line\":\"0x4000a40\"%s,\"time_ns\":" TIME_NS
        ",\"size\":8,\"value\":\"0xffffffffffffffff\",\"stale\":\""
        HEX("ab") "\",\"current\":\"" HEX("cd") "\"%s}";
    /* pc and missed: in the record when the event has them (missed > 0) */
    static const struct {
        bool stale;
        const char *extra, *pc, *missed;
    } cases[] = {
        { false, ", \"missed\": 0", "", "" },
        { false, "", "", "" },
        /* a kernel address: above INT64_MAX */
        { false, ", \"pc\": 18446744071578845184, \"missed\": 3",
          ",\"pc\":\"0xffffffff81000000\"", ",\"missed\":3" },
        { true, ", \"missed\": 0", "", "" },
        { true, ", \"pc\": 4198400, \"missed\": 17", ",\"pc\":\"0x401000\"",
          ",\"missed\":17" },
        { true, ", \"pc\": 4198400", ",\"pc\":\"0x401000\"", "" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *ev = cases[i].stale ? stale_event(cases[i].extra)
                                             : conflict_event(cases[i].extra);
        g_autofree char *want = g_strdup_printf(cases[i].stale ? stale
                                                : conflict, cases[i].pc,
                                                cases[i].missed);
        assert_record(ev, cases[i].stale ? EVENT_LOG_STALE
                      : EVENT_LOG_CONFLICT, want);
    }
    char *e;

    /* every record is one JSON object that json-glib reads back */
    {
        g_autofree char *ev = conflict_event(", \"pc\": 1, \"missed\": 2");
        enum event_log k;
        g_autofree char *r = event_record(ev, &k);
        g_autoptr(JsonParser) p = json_parser_new();
        g_assert_true(json_parser_load_from_data(p, r, -1, NULL));
        JsonObject *obj = json_node_get_object(json_parser_get_root(p));
        g_assert_cmpint(json_object_get_int_member(obj, "missed"), ==, 2);
        g_assert_cmpstr(json_object_get_string_member(obj, "pc"), ==, "0x1");
        g_assert_null(strchr(r, '\n'));
    }

    /* other messages and events, and events the record cannot be made of */
    assert_no_record("{\"return\": {}}");
    assert_no_record("{\"QMP\": {\"version\": {}, \"capabilities\": []}}");
    assert_no_record("{\"event\": \"RESUME\", " TS "}");
    assert_no_record("{\"event\": \"STOP\", \"data\": {}, " TS "}");
    assert_no_record("not json");
    assert_no_record("[1, 2]");
    assert_no_record("{\"event\": \"CXL_SHM_CONFLICT\", \"data\": "
                     "{\"host-id\": 1}, " TS "}");
    assert_no_record("{\"event\": \"CXL_SHM_CONFLICT\", \"data\": 3, "
                     TS "}");
    /* a hex member that is not hex would break the record's JSON */
    assert_no_record("{\"event\": \"CXL_SHM_STALE_READ\", \"data\": "
        "{\"host-id\": 0, \"generation\": 1, \"dpa\": 64, \"line\": 64, "
        "\"size\": 8, \"value\": 1, \"stale\": \"ab\\\"cd\", "
        "\"current\": \"00\"}, " TS "}");
    /* no timestamp, a pc that is not a number */
    e = conflict_event("");
    *strstr(e, ", \"timestamp\"") = '\0';
    strcat(e, "}");
    assert_no_record(e);
    g_free(e);
    e = conflict_event(", \"pc\": \"0x1\"");
    assert_no_record(e);
}

/* the events monitor is on the command line only when a log is asked for */
static bool has_events_monitor(const char *line)
{
    struct opts o;
    struct host_paths hp;
    g_autoptr(GPtrArray) a = argv_new();

    parse_line(line, &o);
    o.qemu = g_strdup("qemu");
    o.kernel = g_strdup("vmlinux");
    o.initrd = g_strdup("initrd");
    o.pool = g_strdup("/tmp/p.pool");
    host_paths_init(&hp, "/tmp/cxlpod,wd", 1);
    build_qemu_argv(a, &o, ACCEL_TCG, 1, &hp, false, false);
    g_autofree char *cmd = argv_to_shell(a);
    bool chardev = strstr(cmd, " -chardev socket,id=cxlpod-events,"
                          "path=/tmp/cxlpod,,wd/host1.events,server=on,"
                          "wait=on -mon chardev=cxlpod-events,mode=control ");
    g_assert_true(chardev == (strstr(cmd, "cxlpod-events") != NULL));
    g_assert_true(chardev == events_wanted(&o));
    return chardev;
}

static void test_event_logs_argv(void)
{
    struct opts o;

    g_assert_false(has_events_monitor("-n 2 -- true"));
    g_assert_false(has_events_monitor("-n 2 --device-opt mode=timed -- true"));
    g_assert_true(has_events_monitor("-n 2 --conflict-log /tmp/c.jsonl -- "
                                      "true"));
    g_assert_true(has_events_monitor("-n 2 --device-opt mode=timed "
                                      "--stale-log /tmp/s.jsonl -- true"));
    parse_line("--conflict-log c.jsonl --stale-log /tmp/s.jsonl "
               "--device-opt mode=timed -- true", &o);
    g_assert_cmpstr(o.conflict_log, ==, "c.jsonl");
    g_assert_cmpstr(o.stale_log, ==, "/tmp/s.jsonl");
    /* a pod file's [device] keys, relative to its folder */
    char *conf = write_conf("[device]\ndevice-opt = mode=timed\n"
                            "conflict-log = c.jsonl\n"
                            "stale-log = /tmp/s.jsonl\n[job]\ncommand = x\n");
    g_autofree char *line = g_strdup_printf("--config %s", conf);
    g_autofree char *dir = g_path_get_dirname(conf);
    g_autofree char *want = g_build_filename(dir, "c.jsonl", NULL);
    parse_line(line, &o);
    g_assert_cmpstr(o.conflict_log, ==, want);
    g_assert_cmpstr(o.stale_log, ==, "/tmp/s.jsonl");
    remove_conf(conf);
}

/* refused: the device's former log properties, logs of cxl-type3 */
static const struct {
    const char *line, *pattern;
} bad_log_lines[] = {
    { "--device-opt conflict-log=/tmp/c.jsonl -- true",
      "*bad --device-opt 'conflict-log=/tmp/c.jsonl': the device writes no "
      "log files: give --conflict-log PATH or --stale-log PATH*" },
    { "-n 2 --device-opt 1:stale-log=/tmp/s.jsonl -- true",
      "*bad --device-opt '1:stale-log=/tmp/s.jsonl': the device writes no "
      "log files: give --conflict-log PATH or --stale-log PATH*" },
    { "--device cxl-type3 --conflict-log /tmp/c.jsonl -- true",
      "*--conflict-log/--stale-log: only --device cxl-shm reports*" },
    { "--conflict-log= -- true", "*bad --conflict-log '': need a file name*" },
};

static void test_event_logs_refused(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_log_lines); i++) {
        g_setenv("CXLPOD_TEST_LINE", bad_log_lines[i].line, TRUE);
        g_test_trap_subprocess("/launch/event-logs/refused/child", 0,
                               G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_failed();
        g_test_trap_assert_stderr(bad_log_lines[i].pattern);
    }
    /* --stale-log without mode=timed: said, not refused */
    g_setenv("CXLPOD_TEST_LINE", "--stale-log /tmp/s.jsonl -- true", TRUE);
    g_test_trap_subprocess("/launch/event-logs/refused/child", 0,
                           G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("*warning: --stale-log: only mode=timed "
                              "reports stale reads*");
}

/* the child of test_event_logs_refused: parse $CXLPOD_TEST_LINE */
static void test_event_logs_refused_child(void)
{
    if (!g_test_subprocess()) {
        g_test_skip("a child of /launch/event-logs/refused");
        return;
    }
    struct opts o;
    parse_line(getenv("CXLPOD_TEST_LINE"), &o);
    exit(0);
}

/* A pod across machines (launch-xmach.c): the host range, addresses,
 * the remote pool's device arguments and the refused combinations. */
static char *write_conf(const char *text);
static void remove_conf(char *path);

static void test_xmach(void)
{
    struct opts o;
    int f, l;
    char *addr;
    int port;

    g_assert_true(parse_host_range("2-3", &f, &l) && f == 2 && l == 3);
    g_assert_true(parse_host_range("5", &f, &l) && f == 5 && l == 5);
    g_assert_true(parse_host_range("0-255", &f, &l) && l == 255);
    g_assert_false(parse_host_range("3-2", &f, &l));
    g_assert_false(parse_host_range("0-256", &f, &l));
    g_assert_false(parse_host_range("1-2-3", &f, &l));
    g_assert_false(parse_host_range("a-b", &f, &l));
    g_assert_true(parse_addr_port("10.250.0.1:17600", &addr, &port));
    g_assert_cmpstr(addr, ==, "10.250.0.1");
    g_assert_cmpint(port, ==, 17600);
    g_free(addr);
    g_assert_false(parse_addr_port("10.250.0.1", &addr, &port));
    g_assert_false(parse_addr_port("host:1", &addr, &port));
    g_assert_false(parse_addr_port("1.2.3.4:65536", &addr, &port));

    /* hosts 2-3 of a 4-host pod, on another machine's pool */
    parse_line("-n 4 --local-hosts 2-3 --pool ucx://10.250.0.1:17600 "
               "--pool-key /k/pod.key --net-join 10.250.0.1:17601 "
               "-- true", &o);
    g_assert_false(host_local(&o, 1));
    g_assert_true(host_local(&o, 2) && host_local(&o, 3));
    g_assert_true(o.net);       /* --net-join: the pod network */
    g_assert_true(pool_is_remote(&o));
    g_assert_false(host_on_memdev(&o, 2));
    g_autoptr(GPtrArray) a = argv_new();
    add_pool_device_args(a, &o, 3);
    g_autofree char *cmd = argv_to_shell(a);
    g_assert_true(strstr(cmd, "-device cxl-shm,bus=root_port13,id=cxl-shm0,"
                         "size=256M,host-id=3,max-hosts=4,"
                         "pool=ucx://10.250.0.1:17600,pool-key=/k/pod.key,"
                         "coherent-size=64M"));
    g_assert_null(strstr(cmd, "memory-backend"));
    /* --machine: this machine runs the hosts left */
    parse_line("-n 5 --net-listen 10.0.0.1:7 --machine b:3-4 "
               "--machine c:0 -- true", &o);
    g_assert_true(o.local_given && o.first_local == 1 && o.last_local == 2);
    g_assert_cmpint(o.n_machines, ==, 2);
    g_assert_cmpstr(o.machines[1].name, ==, "c");
    /* the same from a pod file: ucx:// is an address, keys are paths */
    {
        char *conf = write_conf("[pod]\nhosts = 4\nlocal-hosts = 2-3\n"
                                "net-join = 10.0.0.1:7\nmachine-name = b\n"
                                "join-timeout = 20\npod-keys = keys\n"
                                "userland = host\n"
                                "[device]\npool = ucx://10.0.0.1:6\n"
                                "pool-key = pod.key\n[job]\ncommand = true\n");
        g_autofree char *dir = g_path_get_dirname(conf);
        g_autofree char *line = g_strdup_printf("--config %s", conf);
        g_autofree char *keys = g_build_filename(dir, "keys", NULL);
        g_autofree char *key = g_build_filename(dir, "pod.key", NULL);
        parse_line(line, &o);
        g_assert_true(o.local_given && o.first_local == 2 && o.last_local == 3);
        g_assert_cmpstr(o.net_join, ==, "10.0.0.1:7");
        g_assert_cmpstr(o.machine, ==, "b");
        g_assert_true(o.join_timeout_s == 20);
        g_assert_cmpstr(o.pool, ==, "ucx://10.0.0.1:6");
        g_assert_cmpstr(o.pool_key, ==, key);
        g_assert_cmpstr(o.pod_keys, ==, keys);
        remove_conf(conf);
    }
    /* without --local-hosts every host is this launcher's */
    parse_line("-n 2 -- true", &o);
    g_assert_true(host_local(&o, 0) && host_local(&o, 1));
    g_assert_false(pool_is_remote(&o));
}

static const struct {
    const char *line, *pattern;
} bad_xmach_lines[] = {
    { "-n 2 --local-hosts 1-2 -- true", "*--local-hosts 1-2: the pod has 2 hosts*" },
    { "--local-hosts 2-1 -- true", "*bad --local-hosts '2-1'*" },
    { "--pool ucx://10.0.0.1:1 -- true", "*needs --pool-key PATH*" },
    { "--pool ucx://nowhere -- true", "*expected ucx://ADDR:PORT*" },
    { "--pool-key /k -- true", "*--pool-key goes with --pool ucx://*" },
    { "--pool ucx://10.0.0.1:1 --pool-key /k --serve 10.0.0.1:2 -- true",
      "*--serve serves a pool file of this machine*" },
    { "--pool ucx://10.0.0.1:1 --pool-key /k --pool-backend memdev -- true",
      "*a remote pool has no file here*" },
    { "--net-listen 10.0.0.1:1 --net-join 10.0.0.1:2 -- true",
      "*one launcher of the pod listens*" },
    { "--net-join 10.0.0.1:0 -- true", "*bad --net-join*" },
    { "--serve localhost:1 -- true", "*bad --serve*" },
    { "--device cxl-type3 --serve 127.0.0.1:1 -- true",
      "*only cxl-shm pools are served*" },
    { "-n 4 --machine b:2-3 -- true", "*--machine needs --net-listen*" },
    { "-n 4 --net-listen 0.0.0.0:7 --machine b:2-3 -- true",
      "*--net-listen 0.0.0.0:7*not 0.0.0.0*" },
    { "-n 4 --net-listen 10.0.0.1:1 --machine b:2-4 -- true",
      "*--machine b:2-4: the pod has 4 hosts*" },
    { "-n 4 --net-listen 10.0.0.1:1 --machine b:2-3 --machine c:3 -- true",
      "*host 3 is another --machine's too*" },
    { "-n 4 --net-listen 10.0.0.1:1 --machine b:1-2 -- true",
      "*the hosts left to this machine (0..0 and 3) are not one range*" },
    { "-n 2 --net-listen 10.0.0.1:1 --machine b:0-1 -- true",
      "*every host is another machine's*" },
    { "-n 4 --net-listen 10.0.0.1:1 --machine b:2-3 --machine b:1 -- true",
      "*--machine b given twice*" },
    { "-n 4 --net-listen 10.0.0.1:1 --local-hosts 0-1 --machine b:2-3 -- true",
      "*leave --local-hosts out*" },
    { "--machine b'c:1 -- true", "*--machine*the name is not up to 64 of*" },
    /* names that would split a hello line or a proof's fields */
    { "--machine b|ctl:1 -- true", "*--machine*the name is not up to 64 of*" },
    { "--machine -oProxyCommand=x:1 -- true", "*the name is not up to 64*" },
    { "--machine-name a|ok -- true", "*--machine-name*need a name of up to 64*" },
    { "--machine-name ../x -- true", "*--machine-name*need a name of up to*" },
    { "--machine-name "
      "a0123456789012345678901234567890123456789012345678901234567890123"
      " -- true", "*--machine-name*need a name of up to 64*" },
    { "--machine b -- true", "*expected NAME:FIRST-LAST*" },
};

/*
 * The handshake's proofs (launch-xmach.c): only 32-hex-digit nonces and
 * [A-Za-z0-9._-] names are taken, and a proof names its direction, kind,
 * fields and both nonces, each length-prefixed.  The review's forgery
 * (/tmp/review-xmach/forge.py, on 078bfd8): a fake listener M hands
 * joiner J2 the "nonce" NJ1|ok|4|0-0|X, where NJ1 is joiner J1's nonce;
 * J2's ctl proof was then exactly the listener proof J1 checks, for
 * hosts 0-0 and the name X|ctl|4|2-3|b2.  Each part of it is refused now,
 * and a joiner's proof is never a listener's answer.
 */
static void test_xmach_proof(void)
{
    const char *key = "0123456789abcdef0123456789abcdef"
                      "0123456789abcdef0123456789abcdef";
    const char *nj1 = "00112233445566778899aabbccddeeff";
    const char *nj2 = "ffeeddccbbaa99887766554433221100";
    g_autofree char *att = g_strdup_printf("%s|ok|4|0-0|X", nj1);

    g_assert_true(xmach_nonce_ok(nj1));
    g_assert_false(xmach_nonce_ok(att));
    g_assert_false(xmach_nonce_ok("00112233445566778899aabbccddeef"));
    g_assert_false(xmach_nonce_ok("00112233445566778899aabbccddeeff0"));
    g_assert_false(xmach_nonce_ok("00112233445566778899AABBCCDDEEFF"));
    g_assert_false(xmach_nonce_ok("00112233445566778899aabbccddee f"));
    g_assert_false(xmach_nonce_ok(""));
    g_assert_true(xmach_name_ok("b2"));
    g_assert_true(xmach_name_ok("node-1.example_x"));
    g_assert_false(xmach_name_ok("X|ctl|4|2-3|b2"));
    g_assert_false(xmach_name_ok("a b"));
    g_assert_false(xmach_name_ok("a/b"));
    g_assert_false(xmach_name_ok("\x1b[2J"));
    g_assert_false(xmach_name_ok("-x"));
    g_assert_false(xmach_name_ok(".."));
    g_assert_false(xmach_name_ok(""));

    /* the forgery with nonces and names of the right form: J2 signs what
     * M chose (M as J2's listener gives it J1's nonce), J1 checks an
     * answer over its own nonce; M may pick any fields for its answer */
    g_autofree char *p_j2 = xmach_net_proof(key, "join", "ctl", 4, 2, 3,
                                            "b2", nj1, nj2);
    const char *names[] = { "b2", "X", NULL };
    const char *kinds[] = { "ok", "ctl", NULL };
    for (int i = 0; names[i]; i++) {
        for (int k = 0; kinds[k]; k++) {
            g_autofree char *a1 = xmach_net_proof(key, "answer", kinds[k], 4,
                                                  2, 3, names[i], nj1, nj2);
            g_autofree char *a2 = xmach_net_proof(key, "answer", kinds[k], 4,
                                                  2, 3, names[i], nj2, nj1);
            g_assert_cmpstr(p_j2, !=, a1);
            g_assert_cmpstr(p_j2, !=, a2);
        }
    }
    /* the same proof for the same message, another for any other field */
    g_autofree char *again = xmach_net_proof(key, "join", "ctl", 4, 2, 3,
                                             "b2", nj1, nj2);
    g_assert_cmpstr(p_j2, ==, again);
    g_assert_cmpuint(strlen(p_j2), ==, 64);
    g_autofree char *o1 = xmach_net_proof(key, "join", "ctl", 4, 2, 3, "b2",
                                          nj2, nj1);
    g_autofree char *o2 = xmach_net_proof(key, "join", "link", 4, 2, 3, "b2",
                                          nj1, nj2);
    g_autofree char *o3 = xmach_net_proof(key, "join", "ctl", 4, 2, 3, "b3",
                                          nj1, nj2);
    g_autofree char *o4 = xmach_net_proof(key, "join", "ctl", 4, 23, 3, "b2",
                                          nj1, nj2);
    g_autofree char *o5 = xmach_net_proof(key, "join", "ctl", 42, 3, 3, "b2",
                                          nj1, nj2);
    g_autofree char *o6 = xmach_net_proof("another key", "join", "ctl", 4, 2,
                                          3, "b2", nj1, nj2);
    const char *others[] = { o1, o2, o3, o4, o5, o6 };
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++) {
        g_assert_cmpstr(p_j2, !=, others[i]);
    }
}

static void test_xmach_refused(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(bad_xmach_lines); i++) {
        g_setenv("CXLPOD_TEST_LINE", bad_xmach_lines[i].line, TRUE);
        g_test_trap_subprocess("/launch/event-logs/refused/child", 0,
                               G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_failed();
        g_test_trap_assert_stderr(bad_xmach_lines[i].pattern);
    }
}

/* The argument of host @host's QEMU that starts with @prefix */
static char *qemu_arg(const struct opts *o, int host, const char *prefix)
{
    struct host_paths hp;
    g_autoptr(GPtrArray) a = argv_new();

    host_paths_init(&hp, "/w", host);
    build_qemu_argv(a, o, ACCEL_TCG, host, &hp, false, false);
    for (guint i = 0; i < a->len; i++) {
        if (g_str_has_prefix(g_ptr_array_index(a, i), prefix)) {
            return g_strdup(g_ptr_array_index(a, i));
        }
    }
    return NULL;
}

/*
 * A pod of 256 hosts, the most there may be: every per-host option takes
 * host 255, every host gets its own address, MAC and name, and host 257
 * is refused.  (Failed with the limit of 32: -n 64 was "need a number
 * 1..32", and host 254 would have been 10.211.0.255/24, the broadcast.)
 */
static void test_many_hosts(void)
{
    struct opts o;
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash,
                                                       g_str_equal, g_free,
                                                       NULL);

    g_assert_cmpint(atoi(MAX_HOSTS_STR), ==, MAX_HOSTS);
    g_assert_cmpint(atoi(MAX_HOST_ID_STR), ==, MAX_HOSTS - 1);
    parse_line("-n 256 --max-hosts 256 --net --kill 255@+1 --restart 255 "
               "--job-host 200:/dev/null --device-opt 255:mode=timed "
               "--pool-backend 254:file --boot-parallel 256 -- true", &o);
    g_assert_cmpint(o.nhosts, ==, 256);
    g_assert_cmpint(o.max_hosts, ==, 256);
    g_assert_true(o.kills[0].host == 255 && o.restart[255]);
    g_assert_true(o.n_host_jobs == 1 && o.host_jobs[0].host == 200);
    o.pool = g_strdup("/p");      /* main() fills these in */
    o.qemu = g_strdup("/q");
    o.kernel = g_strdup("/k");
    o.initrd = g_strdup("/i");
    o.workdir = g_strdup("/w");
    g_assert_true(host_on_memdev(&o, 253) && !host_on_memdev(&o, 254));

    /* addresses: hosts 0..253 where they always were, then 10.211.1.x;
     * none is a .0 or .255 */
    g_assert_cmpstr(pod_addr(0, true), ==, "10.211.0.1/16");
    g_assert_cmpstr(pod_addr(253, false), ==, "10.211.0.254");
    g_assert_cmpstr(pod_addr(254, false), ==, "10.211.1.1");
    g_assert_cmpstr(pod_addr(255, true), ==, "10.211.1.2/16");
    g_assert_cmpstr(pod_mac(255), ==, "52:54:00:c1:00:ff");
    g_assert_cmpstr(pod_mac(256), ==, "52:54:00:c1:01:00");
    for (int i = 0; i < o.nhosts; i++) {
        char *a = pod_addr(i, false), *m = pod_mac(i);
        unsigned b1, b2, b3, b4;
        g_assert_cmpint(sscanf(a, "%u.%u.%u.%u", &b1, &b2, &b3, &b4), ==, 4);
        g_assert_true(b1 == 10 && b2 == 211 && b4 >= 1 && b4 <= 254);
        g_assert_true(g_hash_table_add(seen, a));
        g_assert_true(g_hash_table_add(seen, m));
        g_assert_true(g_hash_table_add(seen, qemu_arg(&o, i, "cxlpod-host")));
    }
    g_assert_cmpuint(g_hash_table_size(seen), ==, 3 * 256);

    /* the device, the kernel and the NIC of the last host */
    g_autofree char *dev = qemu_arg(&o, 255, "cxl-shm,");
    g_assert_nonnull(strstr(dev, ",host-id=255,max-hosts=256,"));
    g_assert_nonnull(strstr(dev, ",mode=timed"));
    g_autofree char *dev0 = qemu_arg(&o, 0, "cxl-shm,");
    g_assert_null(strstr(dev0, "mode=timed"));
    g_autofree char *dev254 = qemu_arg(&o, 254, "cxl-shm,");
    g_assert_nonnull(strstr(dev254, ",pool=/p,"));
    g_autofree char *k = qemu_arg(&o, 255, "console=ttyS0");
    g_assert_nonnull(strstr(k, " cxlpod.host=255 cxlpod.nhosts=256 "));
    g_autofree char *nic = qemu_arg(&o, 255, "virtio-net-pci,");
    g_assert_nonnull(strstr(nic, ",mac=52:54:00:c1:00:ff,"));

    /* one more is refused, with the limit */
    static const struct {
        const char *line, *pattern;
    } refused[] = {
        { "-n 257 -- true", "*bad --hosts '257': need a number 1..256*" },
        { "-n 2 --max-hosts 257 -- true",
          "*bad --max-hosts '257': need a number 1..256*" },
        { "-n 256 --kill 256@+1 -- true",
          "*bad --kill '256@+1': host id before '@' must be a number "
          "0..255*" },
        { "--device-opt 256:mode=timed -- true",
          "*bad --device-opt '256:mode=timed': host id before ':' must be "
          "0..255*" },
        { "-n 200 --restart 200 --kill 200@+1 -- true",
          "*--kill 200@...: there are only 200 hosts (0..199)*" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_setenv("CXLPOD_TEST_LINE", refused[i].line, TRUE);
        g_test_trap_subprocess("/launch/event-logs/refused/child", 0,
                               G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_failed();
        g_test_trap_assert_stderr(refused[i].pattern);
    }
}

/* qmp's usage and argument checks, before any socket is touched */
static void test_qmp_args(void)
{
    if (g_test_subprocess()) {
        char *bad[] = { PROG, "qmp", "/nonexistent", "0", "qom-get",
                        "{\"path\":", NULL };
        exit(qmp_main(6, bad));
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*error: arguments '{\"path\":': not a JSON "
                              "object*");
    char *usage[] = { PROG, "qmp", "/tmp", "x", "query-status", NULL };
    g_assert_cmpint(qmp_main(5, usage), ==, EXIT_USAGE);
    char *few[] = { PROG, "qmp", "/tmp", "0", NULL };
    g_assert_cmpint(qmp_main(4, few), ==, EXIT_USAGE);
    char *opt[] = { PROG, "qmp", "--bogus", "/tmp", "0", "query-status",
                    NULL };
    g_assert_cmpint(qmp_main(6, opt), ==, EXIT_USAGE);
}

/* console's argument checks (GOptionContext), before any socket */
static void test_console_args(void)
{
    char *few[] = { PROG, "console", "/tmp", NULL };
    g_assert_cmpint(console_main(3, few), ==, EXIT_USAGE);
    char *many[] = { PROG, "console", "/tmp", "0", "1", NULL };
    g_assert_cmpint(console_main(5, many), ==, EXIT_USAGE);
    char *opt[] = { PROG, "console", "--bogus", "/tmp", "0", NULL };
    g_assert_cmpint(console_main(5, opt), ==, EXIT_USAGE);
    char *host[] = { PROG, "console", "/tmp", "256", NULL };
    g_assert_cmpint(console_main(4, host), ==, EXIT_USAGE);
}

/* An installed launcher's folders, from its own path (launch-paths.c):
 * PREFIX is the executable's folder without "/bin". */
static void test_install_dir(void)
{
    struct { const char *exe, *which, *want; } c[] = {
        { "/opt/cxlpod/bin/cxlpod-launch", "libexec", "/opt/cxlpod/libexec" },
        { "/opt/cxlpod/bin/cxlpod-launch", "share/cxlpod", "/opt/cxlpod/share/cxlpod" },
        { "/usr/bin/cxlpod-launch", "lib/cxlpod", "/usr/lib/cxlpod" },
        { "/bin/cxlpod-launch", "libexec", "/libexec" },
        { "/opt/x/bin/cxlpod-launch", "/etc/cxlpod", "/etc/cxlpod" },
        /* not PREFIX/bin: no installation */
        { "/work/cxlpod/build/meson/host-tools/cxlpod-launch", "libexec", NULL },
        { "/opt/sbin/cxlpod-launch", "libexec", NULL },
        { "/opt/xbin/cxlpod-launch", "libexec", NULL },
        { "cxlpod-launch", "libexec", NULL },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(c); i++) {
        g_autofree char *got = install_dir(c[i].exe, c[i].which);
        g_assert_cmpstr(got, ==, c[i].want);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/launch/install-dir", test_install_dir);
    g_test_add_func("/launch/size", test_size);
    g_test_add_func("/launch/boot-parallel", test_boot_parallel);
    g_test_add_func("/launch/kill", test_kill);
    g_test_add_func("/launch/qmp-reply", test_qmp_reply);
    g_test_add_func("/launch/qmp-args", test_qmp_args);
    g_test_add_func("/launch/console-args", test_console_args);
    g_test_add_func("/launch/log", test_log);
    g_test_add_func("/launch/options", test_options);
    g_test_add_func("/launch/device-args", test_device_args);
    g_test_add_func("/launch/kernel-cmdline", test_kernel_cmdline);
    g_test_add_func("/launch/memdev-args", test_memdev_args);
    g_test_add_func("/launch/pod-args", test_pod_args);
    g_test_add_func("/launch/many-hosts", test_many_hosts);
    g_test_add_func("/launch/pool-hosts", test_pool_hosts);
    g_test_add_func("/launch/xmach", test_xmach);
    g_test_add_func("/launch/xmach/refused", test_xmach_refused);
    g_test_add_func("/launch/xmach/proof", test_xmach_proof);
    g_test_add_func("/launch/restarted", test_restarted);
    g_test_add_func("/launch/quote", test_quote);
    g_test_add_func("/launch/config/load", test_config_load);
    g_test_add_func("/launch/config/override", test_config_override);
    g_test_add_func("/launch/config/errors", test_config_errors);
    g_test_add_func("/launch/event-logs/records", test_event_records);
    g_test_add_func("/launch/event-logs/argv", test_event_logs_argv);
    g_test_add_func("/launch/event-logs/refused", test_event_logs_refused);
    g_test_add_func("/launch/event-logs/refused/child",
                    test_event_logs_refused_child);
    for (size_t i = 0; i < G_N_ELEMENTS(bad_confs); i++) {
        g_autofree char *name = g_strdup_printf("/launch/config/errors/%zu",
                                                i);
        g_test_add_data_func(name, NULL, test_config_errors_child);
    }
    return g_test_run();
}

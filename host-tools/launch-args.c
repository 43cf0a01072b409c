/*
 * The command line of a pod run: parsed with GOptionContext in two passes
 * (--config first, then the other options over it; launch-options.c
 * applies each one), and the cross-checks between options.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

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
    /* as given, for the launchers --machine starts (launch-xmach.c) */
    g_ptr_array_add(o->given, g_strdup(lo ? lo->name : name));
    g_ptr_array_add(o->given, g_strdup(value));
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
    size_t nopts = 0;
    GPtrArray *words = g_ptr_array_new();
    bool options = true;

    while (long_opts[nopts].name) {
        nopts++;
    }
    /* g_option_group_add_entries() copies them (the names are static) */
    g_autofree GOptionEntry *entries = g_new0(GOptionEntry, nopts + 1);
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
    xmach_check(o);
    if (o->interactive && !o->timeout_given) {
        o->timeout_s = 0;
    }
    if (o->interactive && !o->boot_timeout_given) {
        o->boot_timeout_s = 0;
    }
}

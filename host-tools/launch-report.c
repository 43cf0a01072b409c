/*
 * The results of a pod run: every job's output, one summary line per host,
 * the pool's host table, the injected kills and how fast the survivors saw
 * them, and the --json result line (json-glib), and the exit status.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <math.h>
#include <sys/resource.h>
#include <json-glib/json-glib.h>
#include "launch.h"

/* A member with a number rounded to `decimals` places (as printed). */
static void add_num(JsonBuilder *b, const char *name, double v, int decimals)
{
    double scale = pow(10, decimals);
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, round(v * scale) / scale);
}

static void add_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void add_str(JsonBuilder *b, const char *name, const char *s)
{
    json_builder_set_member_name(b, name);
    if (s) {
        json_builder_add_string_value(b, s);
    } else {
        json_builder_add_null_value(b);
    }
}

static void add_bool(JsonBuilder *b, const char *name, bool v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, v);
}

static void add_null(JsonBuilder *b, const char *name)
{
    json_builder_set_member_name(b, name);
    json_builder_add_null_value(b);
}

/* Print every finished (or cut-off) job's output and keep it in hostI.out */
static void print_outputs(const struct opts *o)
{
    for (int i = 0; i < o->nhosts; i++) {
        struct host *h = &g_hosts[i];
        if (!h->rep.begun) {
            continue;
        }
        /* a job that did not finish (killed, timed out, QEMU died):
         * its output up to the end of the log */
        struct guest_report r = h->rep;
        size_t loglen = (h->frozen_len ? h->frozen_len : h->log->len) -
                        h->run_base;
        bool partial = !r.ended;
        if (partial) {
            r.ended = true;
            r.out_end = loglen;
        }
        size_t n;
        char *out = extract_output(h->log->str + h->run_base, &r, &n);
        g_autoptr(GError) err = NULL;
        if (!g_file_set_contents_full(h->hp.out, out, n,
                                      G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                      &err)) {
            msg("cannot write %s: %s", h->hp.out, err->message);
        }
        if (!o->follow) {
            print_prefixed(stdout, i, out, n);
        }
        if (partial) {
            printf("[host%d] (job output cut off here)\n", i);
        }
        g_free(out);
    }
}

/* Host i's summary line (and its JSON object); false if it failed. */
static bool report_host(const struct opts *o, int i, JsonBuilder *b)
{
    struct host *h = &g_hosts[i];
    const char *state;
    char line[256];
    char qs[96] = "";
    bool ok = false;
    if (h->runs > 0) {
        describe_status(h->wstatus, qs, sizeof(qs));
    }
    if (h->rep.ended) {
        snprintf(line, sizeof(line), "rc=%d%s", h->rep.rc,
                 h->end == END_LATE ? " (QEMU stopped: no power-off)" : "");
        state = h->rep.rc == 0 ? "ok" : "failed";
        ok = h->rep.rc == 0;
    } else if (h->end == END_KILLED) {
        snprintf(line, sizeof(line), "killed");
        state = "killed";
        ok = true;
    } else if (h->end == END_TIMEOUT) {
        snprintf(line, sizeof(line), "timed out");
        state = "timeout";
    } else if (h->end == END_INTERRUPTED) {
        snprintf(line, sizeof(line), "interrupted");
        state = "interrupted";
        ok = o->interactive;
    } else if (h->end == END_SPAWN_FAILED) {
        snprintf(line, sizeof(line), "could not start QEMU");
        state = "no-result";
    } else if (h->end == END_EVENTS_FAILED) {
        snprintf(line, sizeof(line), "stopped: its events monitor could not "
                 "be read (see above)");
        state = "no-result";
    } else if (h->end == END_BOOT_STALLED) {
        snprintf(line, sizeof(line), "boot stalled: no ready marker "
                 "within %.0f s", o->boot_timeout_s);
        state = "boot-stalled";
    } else if (h->end == END_SERVED) {
        snprintf(line, sizeof(line), "served (no job of its own); stopped "
                 "after every job ended");
        state = "served";
        ok = true;
    } else if (h->end == END_STOPPED) {
        snprintf(line, sizeof(line), "stopped: host %d failed (see above)",
                 h->stopped_by);
        state = "stopped";
    } else if (h->runs == 0 && h->end == END_NONE) {
        snprintf(line, sizeof(line), "not started (the pod was stopped "
                 "first)");
        state = "not-started";
    } else if (h->end == END_STALLED) {
        snprintf(line, sizeof(line), "job stalled: no console output "
                 "for %.0f s", o->stall_timeout_s);
        state = "stalled";
    } else if (o->interactive) {
        snprintf(line, sizeof(line), "QEMU exited (status %s)", qs);
        state = "exited";
        ok = true;
    } else {
        snprintf(line, sizeof(line), "no result (qemu exit status %s)", qs);
        state = "no-result";
    }
    int nerr;
    char *errs = collect_errors(h->log->str + h->run_base,
                                h->log->len - h->run_base, &nerr);
    if (nerr && h->end != END_KILLED) {
        ok = false;
    }
    if (h->exit_state[0] && strcmp(h->exit_state, "left")) {
        ok = false;     /* a clean exit must show as left */
    }
    if (h->killed_once && h->runs > 1 && h->kills > 1) {
        printf("host %d: killed and restarted %d times: %s", i, h->kills,
               line);
    } else {
        printf("host %d: %s%s", i, h->killed_once && h->runs > 1 ?
               "killed, restarted: " : "", line);
    }
    if (nerr) {
        printf(" (%d guest error%s)", nerr, nerr > 1 ? "s" : "");
    }
    printf("\n");
    if (nerr) {
        print_prefixed(stdout, i, errs, strlen(errs));
    }

    json_builder_begin_object(b);
    add_int(b, "host", i);
    add_str(b, "status", state);
    if (h->rep.ended) {
        add_int(b, "rc", h->rep.rc);
    } else {
        add_null(b, "rc");
    }
    add_bool(b, "killed", h->killed_once);
    add_bool(b, "restarted", h->killed_once && h->runs > 1);
    if (h->t_ready > 0) {
        add_num(b, "boot_s", h->t_ready - h->t_start, 2);
        add_num(b, "ready_at_s", h->t_ready - g_pod_t0, 2);
    } else {
        add_null(b, "boot_s");
        add_null(b, "ready_at_s");
    }
    if (h->t_up > 0) {
        add_num(b, "up_s", h->t_up - h->t_start, 2);
    } else {
        add_null(b, "up_s");
    }
    add_str(b, "qemu_exit", qs);
    add_int(b, "kills", h->kills);
    add_int(b, "runs", h->runs);
    add_str(b, "exit_table_state", h->exit_state[0] ? h->exit_state : NULL);
    json_builder_set_member_name(b, "errors");
    json_builder_begin_array(b);
    g_auto(GStrv) lines = g_strsplit(errs, "\n", -1);
    for (int k = 0; lines[k]; k++) {
        if (lines[k][0] || lines[k + 1]) {
            json_builder_add_string_value(b, lines[k]);
        }
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_free(errs);
    return ok;
}

/* The pool file's host table after the run (cxl-shm) */
static void report_pool(const struct opts *o, JsonBuilder *b)
{
    unsigned pst[MAX_HOSTS];
    uint64_t pgen[MAX_HOSTS];
    int np = read_pool_hosts(o->pool, o->nhosts, pst, pgen);
    if (np <= 0) {
        return;
    }
    printf("pool host table after the run:");
    json_builder_set_member_name(b, "pool_hosts");
    json_builder_begin_array(b);
    bool first = true;
    for (int i = 0; i < np; i++) {
        /* a pod across machines: the others' hosts may still run */
        if (!host_local(o, i)) {
            continue;
        }
        /* every QEMU is gone now: "live" means it died unnoticed */
        printf("%s host %d %s gen %llu", first ? "" : ",", i,
               pool_state_name(pst[i]), (unsigned long long)pgen[i]);
        first = false;
        json_builder_begin_object(b);
        add_int(b, "host", i);
        add_str(b, "state", pool_state_name(pst[i]));
        add_int(b, "generation", (gint64)pgen[i]);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    printf("\n");
}

/* Injected kills: how fast the survivors' host table showed them; false
 * if a survivor was asked and did not see one. */
static bool report_kills(const struct opts *o, JsonBuilder *b)
{
    g_autofree double *lat = g_new(double, g_n_kill_recs);
    int nlat = 0, asked = 0;
    for (int k = 0; k < g_n_kill_recs; k++) {
        asked += g_kill_recs[k].seen_by >= 0;
        if (g_kill_recs[k].detect_s >= 0) {
            lat[nlat++] = g_kill_recs[k].detect_s;
        }
    }
    qsort(lat, (size_t)nlat, sizeof(double), cmp_double);
    double mx = nlat ? lat[nlat - 1] : -1;
    double med = nlat ? (nlat % 2 ? lat[nlat / 2] :
                         (lat[nlat / 2 - 1] + lat[nlat / 2]) / 2) : -1;
    bool any_random = false;
    for (int k = 0; k < o->n_kills; k++) {
        any_random |= o->kills[k].random;
    }
    printf("kills: %d", g_n_kill_recs);
    if (any_random) {
        printf(" (seed %llu)", (unsigned long long)o->seed);
    }
    if (nlat) {
        printf("; a survivor's host table showed the host failed after "
               "max %.1f ms, median %.1f ms (%d of %d seen)", mx * 1e3,
               med * 1e3, nlat, g_n_kill_recs);
    }
    if (asked > nlat) {
        printf("; %d kill(s) NOT seen as failed within %.0f s",
               asked - nlat, DETECT_LIMIT_S);
    }
    printf("\n");

    if (any_random) {
        add_int(b, "kill_seed", (gint64)o->seed);
    } else {
        add_null(b, "kill_seed");
    }
    if (nlat) {
        add_num(b, "detect_ms_max", mx * 1e3, 3);
        add_num(b, "detect_ms_median", med * 1e3, 3);
    } else {
        add_null(b, "detect_ms_max");
        add_null(b, "detect_ms_median");
    }
    add_int(b, "kills_seen", nlat);
    json_builder_set_member_name(b, "kills");
    json_builder_begin_array(b);
    for (int k = 0; k < g_n_kill_recs; k++) {
        const struct kill_rec *kr = &g_kill_recs[k];
        json_builder_begin_object(b);
        add_int(b, "host", kr->host);
        add_int(b, "run", kr->run);
        add_num(b, "t_s", kr->t, 3);
        add_num(b, "after_start_s", kr->after_s, 3);
        if (kr->delay_s >= 0) {
            add_num(b, "delay_s", kr->delay_s, 3);
        } else {
            add_null(b, "delay_s");
        }
        add_int(b, "seen_by", kr->seen_by);
        add_int(b, "generation", (gint64)kr->gen);
        if (kr->detect_s >= 0) {
            add_num(b, "detect_ms", kr->detect_s * 1e3, 3);
        } else {
            add_null(b, "detect_ms");
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    return asked <= nlat;
}

/*
 * Member @name: the time from the pod's start until every host had its
 * ready marker (@up: its up marker), or null unless every host had it
 */
static void add_pod_time(const struct opts *o, JsonBuilder *b,
                         const char *name, bool up)
{
    double last = 0;

    for (int i = 0; i < o->nhosts && last >= 0; i++) {
        if (!host_local(o, i)) {
            continue;
        }
        double t = up ? g_hosts[i].t_up : g_hosts[i].t_ready;
        last = t <= 0 ? -1 : MAX(last, t - g_pod_t0);
    }
    if (last >= 0) {
        add_num(b, name, last, 2);
    } else {
        add_null(b, name);
    }
}

int report(const struct opts *o, enum accel accel, double wall,
           bool timed_out, bool interrupted)
{
    int status = EXIT_OK;
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    add_str(b, "workdir", o->workdir);
    add_str(b, "accel", accel_name(accel));
    add_int(b, "hosts", o->nhosts);
    add_str(b, "userland", userland_name(o->userland));
    add_bool(b, "net", pod_has_net(o));
    add_num(b, "wall_s", wall, 2);
    /* the launcher's own CPU time (all its threads, not its QEMUs): what
     * scripts/bench-scale.sh --launcher divides by the hosts */
    struct rusage ru;
    double cpu = -1;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
              ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        add_num(b, "launcher_cpu_s", cpu, 3);
    } else {
        add_null(b, "launcher_cpu_s");
    }

    if (!o->interactive) {
        print_outputs(o);
    }
    fflush(stdout);

    json_builder_set_member_name(b, "results");
    json_builder_begin_array(b);
    for (int i = 0; i < o->nhosts; i++) {
        /* a pod across machines: the others' hosts are theirs to report */
        if (host_local(o, i) && !report_host(o, i, b) && status == EXIT_OK) {
            status = EXIT_JOBFAIL;
        }
    }
    json_builder_end_array(b);
    /* the pod's boot: from its first QEMU's start to its last ready marker */
    add_pod_time(o, b, "all_ready_s", false);
    /* the same to the last up marker (pod network, host userland) */
    if (pod_has_net(o)) {
        add_pod_time(o, b, "all_up_s", true);
    } else {
        add_null(b, "all_up_s");
    }

    for (int i = 0; i < o->nhosts; i++) {
        struct host *h = &g_hosts[i];
        if (h->exit_state[0]) {
            if (h->exit_seen_by < 0) {
                printf("host %d: clean exit: the pool file's table shows "
                       "it %s\n", i, h->exit_state);
            } else {
                printf("host %d: clean exit: host %d's table shows it %s\n",
                       i, h->exit_seen_by, h->exit_state);
            }
        }
    }
    if (o->device == DEV_CXL_SHM && !o->interactive && !pool_is_remote(o)) {
        report_pool(o, b);
    }
    if (xmach_report(o) != EXIT_OK && status == EXIT_OK) {
        status = EXIT_JOBFAIL;
    }
    if (g_n_kill_recs > 0 && !report_kills(o, b) && status == EXIT_OK) {
        status = EXIT_JOBFAIL;
    }
    if (timed_out) {
        status = EXIT_TIMEOUT;
    }
    if (interrupted && !o->interactive) {
        status = EXIT_INTR;
    }
    add_bool(b, "ok", status == EXIT_OK);
    add_int(b, "exit", status);
    json_builder_end_object(b);

    fflush(stdout);
    if (!o->quiet) {
        msg("wall time %.1f s, the launcher's CPU time %.2f s; logs in %s",
            wall, cpu, o->workdir);
    }
    if (o->json) {
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autoptr(JsonNode) root = json_builder_get_root(b);
        json_generator_set_root(gen, root);
        g_autofree char *text = json_generator_to_data(gen, NULL);
        printf("%s\n", text);
    }
    fflush(stdout);
    return status;
}

/*
 * The pod lifecycle: start every host, watch logs, kills, timeouts and
 * restarts until every QEMU is gone, then print the results (text and
 * --json) and return the exit status.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

int run(struct opts *o)
{
    char accel_note[512];
    enum accel accel = resolve_accel(o->accel, accel_note, sizeof(accel_note));

    g_nhosts = o->nhosts;
    g_hosts = calloc((size_t)o->nhosts, sizeof(*g_hosts));
    if (!g_hosts) {
        die(EXIT_USAGE, "out of memory");
    }
    for (int i = 0; i < o->nhosts; i++) {
        g_hosts[i].id = i;
        g_hosts[i].logfd = -1;
        g_hosts[i].log = g_string_new(NULL);
        host_paths_init(&g_hosts[i].hp, o->workdir, i);
    }

    bool has_job = prepare_jobs(o, g_hosts);

    if (o->dry_run) {
        msg("accelerator: %s", accel_note);
        for (int i = 0; i < o->nhosts; i++) {
            struct strv a = { 0 };
            build_qemu_argv(&a, o, accel, i, &g_hosts[i].hp, has_job, true);
            char *cmd = argv_to_shell(&a);
            fputs(cmd, stdout);
            free(cmd);
            strv_free(&a);
        }
        return EXIT_OK;
    }

    prepare_pool(o);
    for (int i = 0; i < o->nhosts; i++) {
        struct host_paths *hp = &g_hosts[i].hp;
        unlink(hp->log);
        unlink(hp->err);
        unlink(hp->out);
    }

    msg("work dir: %s", o->workdir);
    msg("accelerator: %s", accel_note);
    for (int k = 0; k < o->n_kills; k++) {
        if (o->kills[k].random) {
            msg("random kills: seed %llu (replay with --seed %llu)",
                (unsigned long long)o->seed, (unsigned long long)o->seed);
            break;
        }
    }
    if (!o->quiet) {
        GString *md = g_string_new(NULL);
        for (int i = 0; i < o->nhosts; i++) {
            if (host_on_memdev(o, i)) {
                g_string_append_printf(md, "%s%d", md->len ? "," : "", i);
            }
        }
        msg("%d host%s, pool %s (%s%s%s, %llu MiB), QEMU %s", o->nhosts,
            o->nhosts > 1 ? "s" : "", o->pool, device_name(o->device),
            md->len ? ", memory backend on hosts " : "", md->str,
            (unsigned long long)(o->size / MIB), o->qemu);
        g_string_free(md, TRUE);
    }

    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    atexit(atexit_cleanup);

    double t0 = now_s();
    int started = 0;
    bool timed_out = false;
    bool interrupted = false;
    /*
     * A memory backend creates and sizes a missing pool file before its
     * device takes the pool's lock and writes the header; a pool= host
     * that looks in between finds a sized pool without a header and is
     * refused.  So with a host on memdev and no pool yet, the first host
     * makes the pool alone and the others start once it has a header.
     */
    bool wait_header = false;
    if (o->device == DEV_CXL_SHM) {
        struct stat pst;
        for (int i = 0; i < o->nhosts; i++) {
            wait_header |= host_on_memdev(o, i);
        }
        wait_header &= o->nhosts > 1 &&
                       (stat(o->pool, &pst) < 0 || pst.st_size == 0);
    }

    for (;;) {
        double t = now_s();

        /* start hosts (all at once, or --stagger apart) */
        if (wait_header && started == 1) {
            unsigned st1;
            uint64_t gen1;
            wait_header = g_hosts[0].pid > 0 && !g_hosts[0].term_sent &&
                          read_pool_hosts(o->pool, 1, &st1, &gen1) == 0;
        }
        while (started < o->nhosts && !interrupted && !timed_out &&
               !(wait_header && started == 1) &&
               t - t0 >= started * (o->stagger_ms / 1000.0)) {
            struct host *h = &g_hosts[started];
            if (!spawn_qemu(h, o, accel, has_job)) {
                h->end = END_SPAWN_FAILED;
            } else if (!o->quiet) {
                msg("host %d: started QEMU pid %d", h->id, (int)h->pid);
            }
            started++;
        }

        /* a signal: shut everything down */
        if (g_signal && !interrupted) {
            interrupted = true;
            msg("got signal %d: shutting the guests down", (int)g_signal);
            for (int i = 0; i < o->nhosts; i++) {
                if (g_hosts[i].pid > 0) {
                    g_hosts[i].end = END_INTERRUPTED;
                    send_term(&g_hosts[i], t);
                }
            }
        }

        /* timeout */
        if (o->timeout_s > 0 && !timed_out && !interrupted &&
            t - t0 > o->timeout_s) {
            timed_out = true;
            msg("timeout after %.0f s: killing the guests", o->timeout_s);
            for (int i = 0; i < o->nhosts; i++) {
                if (g_hosts[i].pid > 0) {
                    if (!g_hosts[i].rep.ended) {
                        g_hosts[i].end = END_TIMEOUT;
                    }
                    send_term(&g_hosts[i], t);
                }
            }
        }

        bool alive = false;
        for (int i = 0; i < o->nhosts; i++) {
            struct host *h = &g_hosts[i];
            if (h->runs == 0) {
                continue;
            }
            read_log(h);
            if (h->pid > 0 && h->rep.ready && !h->ready_announced) {
                h->ready_announced = true;
                h->t_ready = t;
                if (!o->quiet) {
                    msg("host %d: CXL region ready (%s) after %.1f s", h->id,
                        h->rep.dax[0] ? h->rep.dax : "?", t - h->t_start);
                }
            }
            if (h->rep.ended && !h->end_announced) {
                h->end_announced = true;
                h->t_end = t;
                if (!o->quiet) {
                    msg("host %d: job finished rc=%d after %.1f s", h->id,
                        h->rep.rc, t - h->t_start);
                }
            }
            announce_errors(h, o->quiet);
            if (o->follow) {
                follow_output(h, false);
            }

            /* failure injection (first run only; with --restart and
             * --restarts N, the first N runs) */
            if (h->pid > 0 && h->runs <= kill_runs(o, h->id) && !h->term_sent) {
                for (int k = 0; k < o->n_kills; k++) {
                    const struct kill_spec *ks = &o->kills[k];
                    if (ks->host != h->id || h->kill_fired[k]) {
                        continue;
                    }
                    bool fire = false;
                    double delay = 0;
                    if (ks->pattern && (!ks->random || h->kill_anchor[k] == 0)) {
                        /* search only what is new, plus an overlap */
                        size_t plen = strlen(ks->pattern);
                        size_t from = h->kill_scan[k] > plen ?
                                      h->kill_scan[k] - plen : 0;
                        if (from < h->run_base) {
                            from = h->run_base;
                        }
                        fire = h->log->len > from &&
                               memmem(h->log->str + from, h->log->len - from,
                                      ks->pattern, plen) != NULL;
                        h->kill_scan[k] = h->log->len;
                        if (fire && ks->random) {
                            h->kill_anchor[k] = t;
                            fire = false;
                        }
                    } else if (!ks->random) {
                        fire = t - h->t_start >= ks->after_s;
                    }
                    if (ks->random) {
                        if (!ks->pattern && h->kill_anchor[k] == 0 && h->rep.begun) {
                            h->kill_anchor[k] = t;
                        }
                        delay = kill_delay(ks, o->seed, h->runs, k);
                        if (h->kill_anchor[k] > 0 && h->rep.ended) {
                            msg("host %d: job ended before its random kill "
                                "(%.2f s after %s); not killed", h->id, delay,
                                ks->pattern ? ks->pattern : "its job began");
                            h->kill_fired[k] = true;
                            continue;
                        }
                        fire = h->kill_anchor[k] > 0 &&
                               t - h->kill_anchor[k] >= delay;
                    }
                    if (fire) {
                        double tk = now_s();
                        h->kill_fired[k] = true;
                        kill_qemu(h->pid, SIGKILL);
                        h->end = END_KILLED;
                        h->frozen_len = h->log->len;
                        h->killed_once = true;
                        h->t_killed = t;
                        h->term_sent = true;    /* no further SIGTERM */
                        h->t_term = t;
                        h->kills++;
                        if (ks->random) {
                            msg("host %d: killed (SIGKILL) %.2f s after %s "
                                "(random %g-%g s; run %d), %.2f s after start",
                                h->id, tk - h->kill_anchor[k],
                                ks->pattern ? ks->pattern : "its job began",
                                ks->min_s, ks->max_s, h->runs, tk - h->t_start);
                        } else if (ks->pattern) {
                            msg("host %d: killed (SIGKILL) on '%s' after %.2f s",
                                h->id, ks->pattern, t - h->t_start);
                        } else {
                            msg("host %d: killed (SIGKILL) after %.2f s", h->id,
                                t - h->t_start);
                        }
                        g_kill_recs = xrealloc(g_kill_recs, (g_n_kill_recs + 1) *
                                               sizeof(*g_kill_recs));
                        struct kill_rec *kr = &g_kill_recs[g_n_kill_recs++];
                        *kr = (struct kill_rec){
                            .host = h->id, .run = h->runs, .t = tk - t0,
                            .after_s = tk - h->t_start,
                            .delay_s = ks->random ? delay : -1,
                            .seen_by = -1, .detect_s = -1,
                        };
                        if (o->device == DEV_CXL_SHM) {
                            detect_kill(h, kr, tk, o->quiet);
                        }
                        break;
                    }
                }
            }

            /* a job that prints nothing for --stall-timeout is stuck (a
             * hung guest, or a job waiting for something that never
             * comes): report it with its console and stop it */
            if (o->stall_timeout_s > 0 && h->pid > 0 && !h->term_sent &&
                h->rep.begun && !h->rep.ended &&
                t - h->t_output > o->stall_timeout_s) {
                msg("host %d: job printed nothing for %.0f s (stalled, "
                    "--stall-timeout %.0f): stopping it", h->id, t - h->t_output,
                    o->stall_timeout_s);
                show_qemu_tails(h, 25);
                h->end = END_STALLED;
                send_term(h, t);
            }

            /* boot deadline: a guest that never reaches its ready marker
             * (stalled in early boot, or a region that never comes up)
             * is reported with its console and stopped, so that nobody
             * waits the whole --timeout for it */
            if (o->boot_timeout_s > 0 && h->pid > 0 && !h->term_sent &&
                !h->rep.ready && !h->rep.ended &&
                t - h->t_start > o->boot_timeout_s) {
                msg("host %d: no ready marker %.0f s after QEMU started "
                    "(boot stalled, --boot-timeout %.0f): stopping it",
                    h->id, t - h->t_start, o->boot_timeout_s);
                show_qemu_tails(h, 25);
                h->end = END_BOOT_STALLED;
                send_term(h, t);
            }

            /* guest reported END but did not power off */
            if (h->pid > 0 && h->rep.ended && !h->term_sent &&
                t - h->t_end > POWEROFF_GRACE_S) {
                msg("host %d: reported its result but did not power off; "
                    "stopping QEMU", h->id);
                h->end = END_LATE;
                send_term(h, t);
            }
            /* SIGTERM not obeyed */
            if (h->pid > 0 && h->term_sent && t - h->t_term > TERM_GRACE_S) {
                kill_qemu(h->pid, SIGKILL);
                h->t_term = t + 3600;   /* once */
            }

            if (h->pid > 0) {
                int st;
                pid_t r = waitpid(h->pid, &st, WNOHANG);
                if (r == h->pid) {
                    h->pid = 0;
                    h->wstatus = st;
                    read_log(h);
                    if (o->follow) {
                        follow_output(h, true);
                    }
                    if (h->end == END_NONE) {
                        h->end = END_EXITED;
                    }
                    if ((h->end == END_EXITED || h->end == END_LATE) &&
                        o->device == DEV_CXL_SHM && WIFEXITED(st) &&
                        WEXITSTATUS(st) == 0) {
                        check_clean_exit(h, o->quiet);
                    }
                    if (h->end == END_KILLED && o->restart[h->id] &&
                        h->runs <= o->restarts && !interrupted && !timed_out) {
                        if (spawn_qemu(h, o, accel, has_job)) {
                            msg("host %d: restarted, QEMU pid %d", h->id,
                                (int)h->pid);
                        } else {
                            h->end = END_SPAWN_FAILED;
                        }
                    } else if (h->end == END_EXITED && !h->rep.ended) {
                        char s[96];
                        describe_status(st, s, sizeof(s));
                        msg("host %d: QEMU exited (status %s) after %.1f s "
                            "without a result", h->id, s, t - h->t_start);
                        show_qemu_tails(h, 8);
                    }
                }
            }
            if (h->pid > 0) {
                alive = true;
            }
        }
        if (!alive && (started == o->nhosts || interrupted || timed_out)) {
            break;
        }
        if (o->interactive) {
            static bool shown;
            if (!shown && started == o->nhosts) {
                shown = true;
                msg("guests are up; attach to a console with:");
                for (int i = 0; i < o->nhosts; i++) {
                    if (g_hosts[i].pid > 0) {
                        char exe[PATH_MAX];
                        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                        exe[n > 0 ? n : 0] = '\0';
                        fprintf(stderr, "  host %d: %s console %s %d\n", i,
                                n > 0 ? exe : PROG, o->workdir, i);
                    }
                }
                fprintf(stderr, "  (Ctrl-] detaches; QMP: %s qmp %s I "
                        "query-status; Ctrl-C here shuts the guests down)\n",
                        PROG, o->workdir);
            }
        }
        poll(NULL, 0, POLL_MS);
    }
    double wall = now_s() - t0;

    /* results */
    int status = EXIT_OK;
    GString *json = g_string_new(NULL);
    g_string_append(json, "{\"workdir\":");
    json_string(json, o->workdir, strlen(o->workdir));
    {
        char tmp[128];
        snprintf(tmp, sizeof(tmp), ",\"accel\":\"%s\",\"hosts\":%d,"
                 "\"wall_s\":%.2f,\"results\":[", accel_name(accel), o->nhosts,
                 wall);
        g_string_append(json, tmp);
    }

    if (!o->interactive) {
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
            if (!write_file(h->hp.out, out, n, 0644)) {
                msg("cannot write %s: %s", h->hp.out, strerror(errno));
            }
            if (!o->follow) {
                print_prefixed(stdout, i, out, n);
            }
            if (partial) {
                printf("[host%d] (job output cut off here)\n", i);
            }
            free(out);
        }
    }
    fflush(stdout);

    for (int i = 0; i < o->nhosts; i++) {
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
        } else if (h->end == END_BOOT_STALLED) {
            snprintf(line, sizeof(line), "boot stalled: no ready marker "
                     "within %.0f s", o->boot_timeout_s);
            state = "boot-stalled";
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
        if (!ok && status == EXIT_OK) {
            status = EXIT_JOBFAIL;
        }

        char tmp[256];
        snprintf(tmp, sizeof(tmp), "%s{\"host\":%d,\"status\":\"%s\",\"rc\":",
                 i ? "," : "", i, state);
        g_string_append(json, tmp);
        if (h->rep.ended) {
            snprintf(tmp, sizeof(tmp), "%d", h->rep.rc);
        } else {
            snprintf(tmp, sizeof(tmp), "null");
        }
        g_string_append(json, tmp);
        snprintf(tmp, sizeof(tmp), ",\"killed\":%s,\"restarted\":%s,"
                 "\"boot_s\":", h->killed_once ? "true" : "false",
                 h->killed_once && h->runs > 1 ? "true" : "false");
        g_string_append(json, tmp);
        if (h->t_ready > 0) {
            snprintf(tmp, sizeof(tmp), "%.2f", h->t_ready - h->t_start);
        } else {
            snprintf(tmp, sizeof(tmp), "null");
        }
        g_string_append(json, tmp);
        g_string_append(json, ",\"qemu_exit\":");
        json_string(json, qs, strlen(qs));
        snprintf(tmp, sizeof(tmp), ",\"kills\":%d,\"runs\":%d,"
                 "\"exit_table_state\":", h->kills, h->runs);
        g_string_append(json, tmp);
        if (h->exit_state[0]) {
            json_string(json, h->exit_state, strlen(h->exit_state));
        } else {
            g_string_append(json, "null");
        }
        g_string_append(json, ",\"errors\":[");
        const char *p = errs;
        bool first = true;
        while (*p) {
            const char *eol = strchr(p, '\n');
            size_t n = eol ? (size_t)(eol - p) : strlen(p);
            if (!first) {
                g_string_append(json, ",");
            }
            first = false;
            json_string(json, p, n);
            p += n + (eol ? 1 : 0);
        }
        g_string_append(json, "]}");
        free(errs);
    }
    g_string_append(json, "]");

    /* injected kills: how fast the survivors' host table showed them */
    for (int i = 0; i < o->nhosts; i++) {
        struct host *h = &g_hosts[i];
        if (h->exit_state[0]) {
            printf("host %d: clean exit: host %d's table shows it %s\n", i,
                   h->exit_seen_by, h->exit_state);
        }
    }
    if (o->device == DEV_CXL_SHM && !o->interactive) {
        unsigned pst[MAX_HOSTS];
        uint64_t pgen[MAX_HOSTS];
        int np = read_pool_hosts(o->pool, o->nhosts, pst, pgen);
        if (np > 0) {
            printf("pool host table after the run:");
            g_string_append(json, ",\"pool_hosts\":[");
            for (int i = 0; i < np; i++) {
                /* every QEMU is gone now: "live" means it died unnoticed */
                printf(" host %d %s gen %llu%s", i, pool_state_name(pst[i]),
                       (unsigned long long)pgen[i], i + 1 < np ? "," : "\n");
                char tmp[128];
                snprintf(tmp, sizeof(tmp), "%s{\"host\":%d,\"state\":\"%s\","
                         "\"generation\":%llu}", i ? "," : "", i,
                         pool_state_name(pst[i]), (unsigned long long)pgen[i]);
                g_string_append(json, tmp);
            }
            g_string_append(json, "]");
        }
    }
    if (g_n_kill_recs > 0) {
        double *lat = xmalloc(sizeof(double) * (size_t)g_n_kill_recs);
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
            if (status == EXIT_OK) {
                status = EXIT_JOBFAIL;
            }
        }
        printf("\n");
        char tmp[256];
        if (any_random) {
            snprintf(tmp, sizeof(tmp), ",\"kill_seed\":%llu",
                     (unsigned long long)o->seed);
        } else {
            snprintf(tmp, sizeof(tmp), ",\"kill_seed\":null");
        }
        g_string_append(json, tmp);
        g_string_append(json, ",\"detect_ms_max\":");
        if (nlat) {
            snprintf(tmp, sizeof(tmp), "%.3f,\"detect_ms_median\":%.3f",
                     mx * 1e3, med * 1e3);
        } else {
            snprintf(tmp, sizeof(tmp), "null,\"detect_ms_median\":null");
        }
        g_string_append(json, tmp);
        snprintf(tmp, sizeof(tmp), ",\"kills_seen\":%d,\"kills\":[", nlat);
        g_string_append(json, tmp);
        for (int k = 0; k < g_n_kill_recs; k++) {
            const struct kill_rec *kr = &g_kill_recs[k];
            snprintf(tmp, sizeof(tmp), "%s{\"host\":%d,\"run\":%d,\"t_s\":%.3f,"
                     "\"after_start_s\":%.3f,\"delay_s\":", k ? "," : "",
                     kr->host, kr->run, kr->t, kr->after_s);
            g_string_append(json, tmp);
            if (kr->delay_s >= 0) {
                snprintf(tmp, sizeof(tmp), "%.3f", kr->delay_s);
            } else {
                snprintf(tmp, sizeof(tmp), "null");
            }
            g_string_append(json, tmp);
            snprintf(tmp, sizeof(tmp), ",\"seen_by\":%d,\"generation\":%llu,"
                     "\"detect_ms\":", kr->seen_by, (unsigned long long)kr->gen);
            g_string_append(json, tmp);
            if (kr->detect_s >= 0) {
                snprintf(tmp, sizeof(tmp), "%.3f}", kr->detect_s * 1e3);
            } else {
                snprintf(tmp, sizeof(tmp), "null}");
            }
            g_string_append(json, tmp);
        }
        g_string_append(json, "]");
        free(lat);
    }
    if (timed_out) {
        status = EXIT_TIMEOUT;
    }
    if (interrupted && !o->interactive) {
        status = EXIT_INTR;
    }
    {
        char tmp[96];
        snprintf(tmp, sizeof(tmp), ",\"ok\":%s,\"exit\":%d}",
                 status == EXIT_OK ? "true" : "false", status);
        g_string_append(json, tmp);
    }
    fflush(stdout);
    if (!o->quiet) {
        msg("wall time %.1f s; logs in %s", wall, o->workdir);
    }
    if (o->json) {
        printf("%s\n", json->str);
    }
    fflush(stdout);
    g_string_free(json, TRUE);
    return status;
}

/*
 * The pod lifecycle: start every host, watch logs, kills, timeouts and
 * restarts until every QEMU is gone, then report the results
 * (launch-report.c) and return the exit status.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* What the main loop's callbacks share during a run. */
struct pod_run {
    struct opts *o;
    enum accel accel;
    bool has_job;
    double t0;
    int started;                /* hosts started so far */
    bool timed_out, interrupted;
    bool wait_header;           /* host 0 alone until the pool has a header */
    bool stopping;              /* a host failed: the others are stopped */
    GMainLoop *loop;
};

/*
 * Host h failed to start or gave no result: the others would wait for it
 * (a peer that never comes), so the pod is stopped at once, unless
 * --keep-going or --interactive.  With @only_ready (h stalled at boot),
 * hosts still booting keep their own boot deadline and are reported for
 * themselves.
 */
static void stop_pod_for(struct pod_run *r, struct host *h, double t,
                         bool only_ready)
{
    struct opts *o = r->o;
    bool any = false;

    if (o->keep_going || o->interactive || r->stopping) {
        return;
    }
    r->stopping = true;
    for (int i = 0; i < o->nhosts; i++) {
        struct host *x = &g_hosts[i];
        if (x != h && x->pid > 0 && !x->term_sent &&
            (x->rep.ready || !only_ready)) {
            x->end = END_STOPPED;
            x->stopped_by = h->id;
            send_term(x, t);
            any = true;
        }
    }
    if (only_ready) {
        r->stopping = false;    /* hosts still booting go on */
    }
    if (any || r->started < o->nhosts) {
        msg("host %d failed: stopping the pod (--keep-going lets the other "
            "hosts go on)", h->id);
    }
    /* a pod across machines: the others stop theirs (the listener
     * relays another machine's failure to the rest) */
    xmach_host_failed(h->id, host_local(o, h->id) ?
                      "its launcher stops the pod" :
                      "relayed: its machine's launcher stops the pod");
}

/*
 * Hosts that serve without a job of their own are stopped once every
 * host with a job has ended (and will not be restarted).
 */
static void stop_servers(struct pod_run *r, double t)
{
    struct opts *o = r->o;
    bool jobs = false;

    if (r->started < o->nhosts) {
        return;
    }
    for (int i = 0; i < o->nhosts; i++) {
        const struct host *h = &g_hosts[i];
        if (h->has_job && host_local(o, h->id)) {
            if (h->pid > 0 || (h->runs == 0 && h->end != END_SPAWN_FAILED)) {
                return;     /* a job still runs (or has not started) */
            }
        }
        jobs |= h->has_job;     /* a job in the pod (on any machine) */
    }
    /* a pod across machines: the jobs of the other machines too */
    if (jobs) {
        xmach_jobs_done();
    }
    if (!xmach_peers_jobs_done()) {
        return;
    }
    for (int i = 0; jobs && i < o->nhosts; i++) {
        struct host *h = &g_hosts[i];
        if (h->serve && h->pid > 0 && !h->term_sent) {
            if (!o->quiet) {
                msg("host %d: every job has ended; stopping it (it served "
                    "without a job)", h->id);
            }
            h->end = END_SERVED;
            send_term(h, t);
        }
    }
}

/*
 * Whether host h is still booting: its QEMU runs and has shown neither its
 * ready marker (with a pod network: its up marker) nor an error.
 */
static bool host_booting(const struct opts *o, const struct host *h)
{
    if (h->runs == 0 || h->pid <= 0 || h->term_sent || h->errs_reported > 0 ||
        h->rep.ended) {
        return false;
    }
    return pod_has_net(o) ? !h->rep.up : !h->rep.ready;
}

/*
 * How many hosts may boot at once (0: all).  TCG guests that boot side by
 * side on a few cores spend much of their CPU time spinning on one another
 * (a vCPU waiting for its sibling's IPI while the host runs someone else):
 * 32 guests started at once on 2 cores used 9.5 s of CPU time per guest to
 * get ready, 3 at a time 4.6 s (docs/benchmarks.md, "Where a guest's boot
 * goes").  The default, the host's CPUs + 1, keeps every core busy.
 */
int boot_parallel(const struct opts *o)
{
    if (o->boot_parallel >= 0) {
        return o->boot_parallel;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n + 1 : 0;
}

/* --boot-parallel N: how many more hosts may start now (INT_MAX: any
 * number).  One pass over the hosts started so far, once a tick. */
static int boot_slots_free(const struct pod_run *r)
{
    const struct opts *o = r->o;
    int max = boot_parallel(o), booting = 0;

    if (max <= 0) {
        return INT_MAX;
    }
    for (int i = 0; i < r->started; i++) {
        booting += host_booting(o, &g_hosts[i]);
    }
    return booting < max ? max - booting : 0;
}

/* SIGINT, SIGTERM, SIGHUP: the next tick shuts the guests down. */
static gboolean on_unix_signal(gpointer data)
{
    g_signal = GPOINTER_TO_INT(data);
    return G_SOURCE_CONTINUE;
}

/*
 * Every POLL_MS: start hosts, read their logs, fire kills, enforce the
 * deadlines, handle the QEMUs that exited (their child watches reaped
 * them) and restarts; quits the main loop when every QEMU is gone.
 */
static gboolean tick(gpointer data)
{
    struct pod_run *r = data;
    struct opts *o = r->o;
    enum accel accel = r->accel;
    bool has_job = r->has_job;
    double t0 = r->t0;
    double t = now_s();

    /* start hosts (all at once, --stagger apart, or --boot-parallel N
     * booting at a time) */
    if (r->wait_header && r->started == 1) {
        unsigned st1;
        uint64_t gen1;
        r->wait_header = g_hosts[0].pid > 0 && !g_hosts[0].term_sent &&
                      read_pool_hosts(o->pool, 1, &st1, &gen1) == 0;
    }
    /* a pod across machines: another machine's failure, its messages */
    char xwhy[256];
    int xfailed = xmach_tick(o, xwhy, sizeof(xwhy));
    if (xfailed >= 0) {
        stop_pod_for(r, &g_hosts[xfailed], t, false);
    }
    /* (only until every host started: a machine whose launcher ended
     * since is not one that never joined) */
    bool xready = r->started >= o->nhosts || xmach_ready(o);
    /* the hosts of the other machines are theirs to start */
    while (r->started < o->nhosts && !host_local(o, r->started) && xready) {
        r->started++;
    }
    int slots = r->started < o->nhosts ? boot_slots_free(r) : 0;
    while (r->started < o->nhosts && !r->interrupted && !r->timed_out &&
           !r->stopping && xready &&
           !(r->wait_header && r->started == 1) &&
           t - t0 >= r->started * (o->stagger_ms / 1000.0) &&
           slots > 0) {
        struct host *h = &g_hosts[r->started];
        if (!spawn_qemu(h, o, accel, has_job)) {
            h->end = END_SPAWN_FAILED;
            stop_pod_for(r, h, t, false);
        } else {
            slots -= slots != INT_MAX;  /* it boots now */
            if (!o->quiet) {
                msg("host %d: started QEMU pid %d", h->id, (int)h->pid);
            }
        }
        r->started++;
        while (r->started < o->nhosts && !host_local(o, r->started)) {
            r->started++;
        }
    }

    /* a signal: shut everything down */
    if (g_signal && !r->interrupted) {
        r->interrupted = true;
        msg("got signal %d: shutting the guests down", (int)g_signal);
        xmach_host_failed(o->local_given ? o->first_local : 0,
                          "its launcher was interrupted");
        for (int i = 0; i < o->nhosts; i++) {
            if (g_hosts[i].pid > 0) {
                g_hosts[i].end = END_INTERRUPTED;
                send_term(&g_hosts[i], t);
            }
        }
    }

    /* timeout */
    if (o->timeout_s > 0 && !r->timed_out && !r->interrupted &&
        t - t0 > o->timeout_s) {
        r->timed_out = true;
        msg("timeout after %.0f s: killing the guests", o->timeout_s);
        xmach_host_failed(o->local_given ? o->first_local : 0,
                          "its launcher timed out");
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
        if (h->pid > 0 && h->rep.up && !h->up_announced) {
            h->up_announced = true;
            h->t_up = t;
            if (!o->quiet) {
                msg("host %d: up (%suserland %s) after %.1f s", h->id,
                    pod_has_net(o) ? "network, " : "",
                    userland_name(o->userland), t - h->t_start);
            }
        }
        if (h->rep.ended && !h->end_announced) {
            h->end_announced = true;
            h->t_end = t;
            if (!o->quiet) {
                msg("host %d: job finished rc=%d after %.1f s", h->id,
                    h->rep.rc, t - h->t_start);
            }
            if (h->rep.rc == 127) {
                msg("host %d: rc=127: a command of the job was not found in "
                    "the guest%s", h->id, o->userland == USERLAND_HOST ?
                    " (a host-userland guest runs this machine's programs: "
                    "install it here, e.g. with apt-get, or give its path)" :
                    " (an initramfs guest has busybox and /cxlpod/bin only: "
                    "--userland host runs this machine's programs)");
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
                    g_kill_recs = g_realloc(g_kill_recs, (g_n_kill_recs + 1) *
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
            (!h->rep.ready || (pod_has_net(o) && !h->rep.up &&
                               !h->rep.begun)) && !h->rep.ended &&
            t - h->t_start > o->boot_timeout_s) {
            msg("host %d: %s %.0f s after QEMU started "
                "(boot stalled, --boot-timeout %.0f): stopping it",
                h->id, h->rep.ready ? "region ready but the network / "
                "userland not up" : "no ready marker", t - h->t_start,
                o->boot_timeout_s);
            show_qemu_tails(h, 25);
            h->end = END_BOOT_STALLED;
            send_term(h, t);
            stop_pod_for(r, h, t, true);
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

        /* --conflict-log / --stale-log: a QEMU whose events nobody can
         * read would leave holes in the logs (and, with wait=on, waits for
         * a listener that never comes) */
        const char *events_why = h->pid > 0 && !h->exited &&
                                 h->end == END_NONE ? events_failed(h) : NULL;
        if (events_why) {
            msg("host %d: %s; stopping it", h->id, events_why);
            show_qemu_tails(h, 8);
            kill_qemu(h->pid, SIGKILL);
            h->end = END_EVENTS_FAILED;
            h->term_sent = true;
            h->t_term = t;
            stop_pod_for(r, h, t, false);
        }

        if (h->exited) {
            /* on_child_exit() reaped it (pid 0, wstatus set) */
            int st = h->wstatus;
            h->exited = false;
            events_stop(h);     /* its last events, to its EOF */
            read_log(h);
            if (o->follow) {
                follow_output(h, true);
            }
            if (h->end == END_NONE) {
                h->end = END_EXITED;
            }
            if ((h->end == END_EXITED || h->end == END_LATE ||
                 h->end == END_SERVED) &&
                o->device == DEV_CXL_SHM && WIFEXITED(st) &&
                WEXITSTATUS(st) == 0) {
                check_clean_exit(h, o->pool, o->quiet);
            }
            if (h->end == END_KILLED && o->restart[h->id] &&
                h->runs <= o->restarts && !r->interrupted && !r->timed_out &&
                !r->stopping) {
                if (spawn_qemu(h, o, accel, has_job)) {
                    msg("host %d: restarted, QEMU pid %d", h->id,
                        (int)h->pid);
                } else {
                    h->end = END_SPAWN_FAILED;
                    stop_pod_for(r, h, t, false);
                }
            } else if (h->end == END_EXITED && !h->rep.ended) {
                char s[96];
                describe_status(st, s, sizeof(s));
                msg("host %d: QEMU exited (status %s) after %.1f s "
                    "without a result%s", h->id, s, t - h->t_start,
                    h->rep.ready ? "" : ", before its CXL region was ready");
                show_qemu_tails(h, 8);
                stop_pod_for(r, h, t, false);
            }
        }
        if (h->pid > 0) {
            alive = true;
        }
    }
    stop_servers(r, t);
    if (!alive && (r->started == o->nhosts || r->interrupted || r->timed_out ||
                   r->stopping) &&
        (r->interrupted || r->timed_out || r->stopping || xmach_may_end(o))) {
        g_main_loop_quit(r->loop);
        return G_SOURCE_REMOVE;
    }
    if (o->interactive) {
        static bool shown;
        if (!shown && r->started == o->nhosts) {
            shown = true;
            msg("guests are up; attach to a console with:");
            for (int i = 0; i < o->nhosts; i++) {
                if (g_hosts[i].pid > 0 && host_local(o, i)) {
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
            if (o->userland == USERLAND_HOST) {
                fprintf(stderr, "  ssh into host I once it is ready: %s ssh "
                        "%s I (or ssh -F %s/ssh/config hostI)\n", PROG,
                        o->workdir, o->workdir);
            }
        }
    }
    return G_SOURCE_CONTINUE;
}

int run(struct opts *o)
{
    char accel_note[512];
    enum accel accel = resolve_accel(o->accel, accel_note, sizeof(accel_note));

    g_nhosts = o->nhosts;
    g_hosts = g_new0(struct host, o->nhosts);
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
            if (!host_local(o, i)) {
                continue;
            }
            g_autoptr(GPtrArray) a = argv_new();
            build_qemu_argv(a, o, accel, i, &g_hosts[i].hp,
                            has_job && g_hosts[i].has_job, true);
            g_autofree char *cmd = argv_to_shell(a);
            fputs(cmd, stdout);
        }
        return EXIT_OK;
    }

    xmach_prepare(o);
    pod_prepare(o, g_hosts);
    prepare_pool(o);
    for (int i = 0; i < o->nhosts; i++) {
        struct host_paths *hp = &g_hosts[i].hp;
        unlink(hp->log);
        unlink(hp->err);
        unlink(hp->out);
    }

    msg("work dir: %s", o->workdir);
    msg("accelerator: %s", accel_note);
    if (o->userland == USERLAND_HOST) {
        msg("userland: this machine's root file system (read-only), %s "
            "read-write in every guest", o->jobdir);
    }
    for (int k = 0; k < o->n_kills; k++) {
        if (o->kills[k].random) {
            msg("random kills: seed %llu (replay with --seed %llu)",
                (unsigned long long)o->seed, (unsigned long long)o->seed);
            break;
        }
    }
    if (!o->quiet) {
        GString *md = g_string_new(NULL);
        g_autofree char *which = o->local_given ?
            g_strdup_printf("hosts %d-%d of a %d-host pod", o->first_local,
                            o->last_local, o->nhosts) :
            g_strdup_printf("%d host%s", o->nhosts, o->nhosts > 1 ? "s" : "");
        for (int i = 0; i < o->nhosts; i++) {
            if (host_on_memdev(o, i) && host_local(o, i)) {
                g_string_append_printf(md, "%s%d", md->len ? "," : "", i);
            }
        }
        msg("%s, pool %s (%s%s%s, %llu MiB), QEMU %s", which,
            o->pool, device_name(o->device),
            md->len ? ", memory backend on hosts " : "", md->str,
            (unsigned long long)(o->size / MIB), o->qemu);
        g_string_free(md, TRUE);
    }

    g_unix_signal_add(SIGINT, on_unix_signal, GINT_TO_POINTER(SIGINT));
    g_unix_signal_add(SIGTERM, on_unix_signal, GINT_TO_POINTER(SIGTERM));
    g_unix_signal_add(SIGHUP, on_unix_signal, GINT_TO_POINTER(SIGHUP));
    signal(SIGPIPE, SIG_IGN);
    atexit(atexit_cleanup);

    events_open_logs(o);
    pod_switch_start(o);
    xmach_start(o);
    double t0 = now_s();
    g_pod_t0 = t0;
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
        wait_header &= o->nhosts > 1 && host_local(o, 0) &&
                       host_local(o, 1) && !pool_is_remote(o) &&
                       (stat(o->pool, &pst) < 0 || pst.st_size == 0);
    }

    struct pod_run r = {
        .o = o, .accel = accel, .has_job = has_job, .t0 = t0,
        .wait_header = wait_header, .loop = g_main_loop_new(NULL, FALSE),
    };
    if (tick(&r) == G_SOURCE_CONTINUE) {
        g_timeout_add(POLL_MS, tick, &r);
        g_main_loop_run(r.loop);
    }
    g_main_loop_unref(r.loop);
    events_stop_all();
    events_close_logs(o->quiet);
    xmach_stop();
    pod_switch_stop();
    double wall = now_s() - t0;
    bool timed_out = r.timed_out, interrupted = r.interrupted;

    return report(o, accel, wall, timed_out, interrupted);
}

/*
 * One host at run time: the pool file and job scripts before the start,
 * spawning its QEMU, reading its serial log, marking a restarted job,
 * stopping and reaping QEMUs, and printing its output and problems.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* hosts at run time                                                   */



struct kill_rec *g_kill_recs;
int g_n_kill_recs;


struct host *g_hosts;
int g_nhosts;
double g_pod_t0;            /* when the pod's first host was started */
volatile sig_atomic_t g_signal;

/*
 * Kill and reap every QEMU still running, on every way out (die(), exit,
 * the end of a run).  The child watches are dropped first and the QEMUs
 * reaped here, synchronously: the main loop may not run again.  Safe to
 * call more than once.
 */
void cleanup_children(void)
{
    bool any = false;
    for (int i = 0; i < g_nhosts; i++) {
        if (g_hosts[i].watch) {
            g_source_remove(g_hosts[i].watch);
            g_hosts[i].watch = 0;
        }
        if (g_hosts[i].pid > 0) {
            kill_qemu(g_hosts[i].pid, SIGTERM);
            any = true;
        }
    }
    if (!any) {
        return;
    }
    double deadline = now_s() + TERM_GRACE_S;
    for (;;) {
        bool alive = false;
        for (int i = 0; i < g_nhosts; i++) {
            struct host *h = &g_hosts[i];
            if (h->pid > 0) {
                int st;
                pid_t r = waitpid(h->pid, &st, WNOHANG);
                if (r == h->pid || (r < 0 && errno == ECHILD)) {
                    h->pid = 0;
                    h->wstatus = st;
                } else {
                    alive = true;
                }
            }
        }
        if (!alive) {
            return;
        }
        if (now_s() > deadline) {
            break;
        }
        g_usleep(POLL_MS * 1000);
    }
    for (int i = 0; i < g_nhosts; i++) {
        struct host *h = &g_hosts[i];
        if (h->pid > 0) {
            kill_qemu(h->pid, SIGKILL);
            waitpid(h->pid, &h->wstatus, 0);
            h->pid = 0;
        }
    }
}

void atexit_cleanup(void)
{
    cleanup_children();
    events_stop_all();      /* their QEMUs have gone: EOF */
    pod_switch_stop();
}

void describe_status(int st, char *out, size_t n)
{
    if (WIFEXITED(st)) {
        snprintf(out, n, "%d", WEXITSTATUS(st));
    } else if (WIFSIGNALED(st)) {
        snprintf(out, n, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else {
        snprintf(out, n, "status 0x%x", st);
    }
}

/* Print the last `lines` lines of a file, prefixed. */
static void show_tail(const char *path, int lines, const char *prefix)
{
    gsize len;
    char *data;
    if (!g_file_get_contents(path, &data, &len, NULL)) {
        return;
    }
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r')) {
        len--;
    }
    size_t start = len;
    int seen = 0;
    while (start > 0) {
        if (data[start - 1] == '\n' && ++seen == lines) {
            break;
        }
        start--;
    }
    if (len > start) {
        char *p = data + start, *lim = data + len;
        while (p < lim) {
            char *eol = memchr(p, '\n', (size_t)(lim - p));
            char *e = eol ? eol : lim;
            fprintf(stderr, "%s", prefix);
            for (char *c = p; c < e; c++) {
                if (*c != '\r') {
                    fputc(*c, stderr);
                }
            }
            fputc('\n', stderr);
            p = e + 1;
        }
    }
    g_free(data);
}

/*
 * Before a restart: tell the job it is running again by adding
 * "export CXLPOD_RESTARTED=<n>" (n: restarts so far) after the script's
 * first line if that is a #! line, else before it; a later restart
 * rewrites n.
 */
void mark_job_restarted(const struct host *h, int n)
{
    gsize len;
    char *job;
    if (!g_file_get_contents(h->hp.job, &job, &len, NULL)) {
        return;
    }
    static const char key[] = "export CXLPOD_RESTARTED=";
    char line[64];
    snprintf(line, sizeof(line), "%s%d\n", key, n);
    GString *b = g_string_new(NULL);
    char *old = NULL;
    if (strncmp(job, key, strlen(key)) == 0) {
        old = job;
    } else if ((old = strstr(job, "\nexport CXLPOD_RESTARTED=")) != NULL) {
        old++;
    }
    if (old) {
        /* marked by an earlier restart: replace that line */
        char *nl = memchr(old, '\n', len - (size_t)(old - job));
        size_t rest = nl ? (size_t)(nl + 1 - job) : len;
        g_string_append_len(b, job, (size_t)(old - job));
        g_string_append(b, line);
        g_string_append_len(b, job + rest, len - rest);
    } else {
        size_t split = 0;
        if (len >= 2 && job[0] == '#' && job[1] == '!') {
            char *nl = memchr(job, '\n', len);
            split = nl ? (size_t)(nl + 1 - job) : len;
        }
        g_string_append_len(b, job, split);
        if (split && job[split - 1] != '\n') {
            g_string_append(b, "\n");
        }
        g_string_append(b, line);
        g_string_append_len(b, job + split, len - split);
    }
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents_full(h->hp.job, b->str, b->len,
                                  G_FILE_SET_CONTENTS_CONSISTENT, 0755, &err)) {
        msg("host %d: cannot update %s: %s", h->id, h->hp.job, err->message);
    }
    g_string_free(b, TRUE);
    g_free(job);
}

/* GLib's child watch: host h's QEMU exited and is reaped. */
static void on_child_exit(GPid pid, gint status, gpointer data)
{
    struct host *h = data;
    if (h->pid == pid) {
        h->pid = 0;
        h->wstatus = status;
        h->exited = true;
    }
    h->watch = 0;
    g_spawn_close_pid(pid);
}

/*
 * In the child, before exec: its own process group (the launcher handles
 * Ctrl-C and signals the group), killed with the launcher, the default
 * signal dispositions and no blocked signals.
 */
static void qemu_child_setup(gpointer data)
{
    pid_t parent = GPOINTER_TO_INT(data);
    sigset_t none;

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127);
    }
    pod_child_mask();   /* host userland: this machine's secrets hidden */
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

bool spawn_qemu(struct host *h, const struct opts *o, enum accel accel,
                       bool has_job)
{
    has_job = has_job && h->has_job;
    if (h->runs > 0 && has_job) {
        mark_job_restarted(h, h->runs);
    }
    g_autoptr(GPtrArray) a = argv_new();
    build_qemu_argv(a, o, accel, h->id, &h->hp, has_job, true);
    char *cmd = argv_to_shell(a);
    g_file_set_contents_full(h->hp.cmdline, cmd, -1,
                             G_FILE_SET_CONTENTS_CONSISTENT, 0644, NULL);
    g_free(cmd);

    int errfd = open(h->hp.err, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (errfd < 0) {
        msg("host %d: cannot create %s: %s", h->id, h->hp.err, strerror(errno));
        return false;
    }
    if (h->runs > 0) {
        dprintf(errfd, "==== cxlpod-launch: restart %d ====\n", h->runs);
    }
    /* the previous run's events reader, and its socket */
    events_stop(h);
    unlink(h->hp.events);
    /* stdin from /dev/null, stdout and stderr to the err file */
    g_autoptr(GError) err = NULL;
    GPid pid;
    fflush(NULL);
    if (!g_spawn_async_with_pipes_and_fds(NULL, (const gchar *const *)a->pdata,
            NULL, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL,
            qemu_child_setup, GINT_TO_POINTER(getpid()), -1, errfd, errfd,
            NULL, NULL, 0, &pid, NULL, NULL, NULL, &err)) {
        msg("host %d: cannot start %s: %s", h->id, (char *)g_ptr_array_index(a, 0), err->message);
        dprintf(errfd, PROG ": cannot execute %s: %s\n", (char *)g_ptr_array_index(a, 0),
                err->message);
        close(errfd);
        return false;
    }
    close(errfd);
    h->pid = pid;
    h->exited = false;
    h->watch = g_child_watch_add(pid, on_child_exit, h);
    events_start(h, o);
    h->runs++;
    h->t_start = now_s();
    h->run_base = h->log->len;
    h->frozen_len = 0;
    h->parsed = false;
    h->t_output = h->t_start;
    memset(h->kill_fired, 0, sizeof(h->kill_fired));
    memset(h->kill_scan, 0, sizeof(h->kill_scan));
    memset(h->kill_anchor, 0, sizeof(h->kill_anchor));
    h->exit_state[0] = '\0';
    h->exit_seen_by = -1;
    h->t_ready = h->t_end = h->t_up = 0;
    h->ready_announced = h->end_announced = h->up_announced = false;
    h->term_sent = false;
    h->end = END_NONE;
    h->errs_reported = 0;
    h->errs_scan = 0;
    h->follow_pos = 0;
    memset(&h->rep, 0, sizeof(h->rep));
    return true;
}

/* Read whatever QEMU appended to the serial log. */
void read_log(struct host *h)
{
    if (h->logfd < 0) {
        h->logfd = open(h->hp.log, O_RDONLY | O_CLOEXEC);
        if (h->logfd < 0) {
            return;     /* QEMU has not created it yet */
        }
    }
    char tmp[65536];
    size_t before = h->log->len;
    for (;;) {
        ssize_t r = read(h->logfd, tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        g_string_append_len(h->log, tmp, (size_t)r);
    }
    if (h->log->len == before && h->parsed) {
        return;
    }
    if (h->log->len != before) {
        h->t_output = now_s();
    }
    h->parsed = true;
    /* after an injected SIGKILL nothing later belongs to that run */
    size_t len = h->frozen_len ? h->frozen_len : h->log->len;
    parse_log(h->log->str + h->run_base, len - h->run_base, &h->rep);
}

/* ------------------------------------------------------------------ */
/* the run                                                             */

void print_prefixed(FILE *f, int host, const char *data, size_t len)
{
    const char *p = data, *lim = data + len;
    while (p < lim) {
        const char *eol = memchr(p, '\n', (size_t)(lim - p));
        const char *e = eol ? eol : lim;
        fprintf(f, "[host%d] ", host);
        fwrite(p, 1, (size_t)(e - p), f);
        fputc('\n', f);
        p = e + 1;
    }
}

/* --follow: print complete job-output lines seen so far. */
void follow_output(struct host *h, bool final)
{
    const struct guest_report *r = &h->rep;
    if (!r->begun) {
        return;
    }
    const char *base = h->log->str + h->run_base;
    size_t avail = h->log->len - h->run_base;
    size_t pos = h->follow_pos > r->out_start ? h->follow_pos : r->out_start;
    size_t lim = r->ended ? r->out_end : avail;
    while (pos < lim) {
        const char *eol = memchr(base + pos, '\n', lim - pos);
        size_t e;
        if (eol) {
            e = (size_t)(eol - base);
        } else if (r->ended || final) {
            e = lim;
        } else {
            break;
        }
        /* (read_log parsed the log first, so a complete line carrying
         * the END marker is already excluded by out_end) */
        fprintf(stdout, "[host%d] ", h->id);
        for (size_t i = pos; i < e; i++) {
            if (base[i] != '\r') {
                fputc(base[i], stdout);
            }
        }
        fputc('\n', stdout);
        pos = e + 1;
    }
    h->follow_pos = pos;
    fflush(stdout);
}

/*
 * The error markers of lines completed since the last call: only what is
 * new is searched (every tick, for every host: a whole-log search would
 * grow with the log).
 */
void announce_errors(struct host *h, bool quiet)
{
    const char *base = h->log->str + h->run_base;
    size_t len = h->log->len - h->run_base;
    /* only complete lines: the last one may still be arriving */
    while (len > h->errs_scan && base[len - 1] != '\n') {
        len--;
    }
    if (len <= h->errs_scan) {
        return;
    }
    int n;
    char *errs = collect_errors(base + h->errs_scan, len - h->errs_scan, &n);
    const char *p = errs;
    while (*p) {
        const char *eol = strchr(p, '\n');
        if (!quiet) {
            msg("host %d: guest error: %.*s", h->id, (int)(eol - p), p);
        }
        p = eol + 1;
    }
    h->errs_reported += (size_t)n;
    h->errs_scan = len;
    g_free(errs);
}

void send_term(struct host *h, double t)
{
    if (h->pid > 0 && !h->term_sent) {
        kill_qemu(h->pid, SIGTERM);
        h->term_sent = true;
        h->t_term = t;
    }
}

/* On stderr: the tail of host h's qemu-err and of its console */
void show_qemu_tails(const struct host *h, int console_lines)
{
    show_tail(h->hp.err, 12, "  qemu-err| ");
    if (h->log->len > h->run_base) {
        fprintf(stderr, "  last console lines:\n");
        show_tail(h->hp.log, console_lines, "  console| ");
    }
}

/* cxl-type3 maps the file as is: make sure it exists with the right size
 * before N QEMUs race to create it. */
void prepare_pool(const struct opts *o)
{
    if (o->device != DEV_CXL_TYPE3) {
        return;     /* cxl-shm creates/joins its pool itself */
    }
    int fd = open(o->pool, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        die(EXIT_USAGE, "pool %s: %s", o->pool, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        die(EXIT_USAGE, "pool %s: %s", o->pool, strerror(errno));
    }
    if (S_ISREG(st.st_mode)) {
        if (st.st_size == 0) {
            if (ftruncate(fd, (off_t)o->size) < 0) {
                die(EXIT_USAGE, "pool %s: cannot size it to %llu bytes: %s",
                    o->pool, (unsigned long long)o->size, strerror(errno));
            }
        } else if ((uint64_t)st.st_size != o->size) {
            die(EXIT_USAGE, "pool %s has %llu bytes but --size is %llu; "
                "remove it or give the matching --size", o->pool,
                (unsigned long long)st.st_size, (unsigned long long)o->size);
        }
    }
    close(fd);
}

/* Write host%d.job for every host; returns whether a job exists. */
bool prepare_jobs(const struct opts *o, struct host *hosts)
{
    char *common = NULL;
    gsize common_len = 0;
    g_autoptr(GError) err = NULL;
    if (o->job_file) {
        if (!g_file_get_contents(o->job_file, &common, &common_len, &err)) {
            die(EXIT_USAGE, "cannot read job file %s: %s", o->job_file,
                err->message);
        }
    } else if (o->job_cmd->len) {
        GString *b = g_string_new(NULL);
        g_string_append(b, "#!/bin/sh\n");
        for (guint i = 0; i < o->job_cmd->len; i++) {
            if (i) {
                g_string_append(b, " ");
            }
            g_string_append(b, (const char *)g_ptr_array_index(o->job_cmd, i));
        }
        g_string_append(b, "\n");
        common_len = b->len;
        common = g_string_free(b, FALSE);
    }
    bool any = false;
    /* each host's own job: the last --job-host I:FILE of host I */
    g_autofree const char **own_file = g_new0(const char *, o->nhosts);
    for (int i = 0; i < o->n_host_jobs; i++) {
        if (o->host_jobs[i].host < o->nhosts) {
            own_file[o->host_jobs[i].host] = o->host_jobs[i].file;
        }
    }
    for (int h = 0; h < o->nhosts; h++) {
        const char *data = common;
        gsize len = common_len;
        char *own = NULL;
        if (own_file[h]) {
            if (!g_file_get_contents(own_file[h], &own, &len, &err)) {
                die(EXIT_USAGE, "cannot read job file %s: %s", own_file[h],
                    err->message);
            }
            data = own;
        }
        unlink(hosts[h].hp.job);
        if (data) {
            if (!g_file_set_contents_full(hosts[h].hp.job, data, len,
                                          G_FILE_SET_CONTENTS_CONSISTENT,
                                          0755, &err)) {
                die(EXIT_USAGE, "cannot write %s: %s", hosts[h].hp.job,
                    err->message);
            }
            any = true;
        }
        hosts[h].has_job = data != NULL;
        g_free(own);
    }
    g_free(common);
    /* a host without a job of its own serves (ssh, MPI ranks, the pool)
     * until every job has ended */
    for (int h = 0; h < o->nhosts; h++) {
        hosts[h].serve = any && !hosts[h].has_job;
    }
    return any;
}

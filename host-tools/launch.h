/*
 * cxlpod-launch's private header: constants, the structs the files share
 * and their functions, grouped by the file that defines them:
 *
 *   launch-util.c      Small utilities of cxlpod-launch
 *   launch-parse.c     The parsers of cxlpod-launch
 *   launch-qemu.c      What a guest's QEMU is started with
 *   launch-host.c      One host at run time
 *   launch-options.c   The options of a pod run: usage, table, defaults
 *   launch-args.c      The command line of a pod run: parsing, cross-checks
 *   launch-paths.c     Default paths and the work directory
 *   launch-qmp.c       QMP
 *   launch-pod.c       The pod lifecycle
 *   launch-report.c    The results: summary lines and the --json line
 *   launch-console.c   The `console` subcommand
 *   launch-config.c    `--config FILE`: a pod described in a key file
 *   launch-net.c       The pod network and host userland
 *   launch-ssh.c       The pod's ssh keys and config, `ssh` and `proxy`
 *   launch-events.c    The conflict and stale-read logs from QMP events
 *   launch-xmach.c     A pod across machines: this machine's hosts, the
 *                      pool service, the remote pool, the network link
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef CXLPOD_LAUNCH_H
#define CXLPOD_LAUNCH_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <linux/kvm.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <glib.h>
#include <glib-unix.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

#define PROG "cxlpod-launch"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define POOL_ALIGN (256ULL * MIB)   /* CXL device/window/region granule */
/* Hosts of a pod: host ids are 0..MAX_HOSTS-1.  Everything the launcher
 * keeps per host is sized by the pod's -n, not by this; what grows with it
 * is checked to stay flat per host (scripts/bench-scale.sh --launcher). */
#define MAX_HOSTS 256
#define MAX_HOSTS_STR "256"        /* for messages */
#define MAX_HOST_ID_STR "255"
#define POLL_MS 20                  /* log polling period */
#define POWEROFF_GRACE_S 20.0       /* after END, wait this long for exit */
#define TERM_GRACE_S 3.0            /* SIGTERM -> SIGKILL */
/* A guest boots to its ready marker in 5-15 s under TCG on an idle
 * machine and in about a minute with 8 guests on 2 busy cores. */
#define DEFAULT_BOOT_TIMEOUT_S 180
#define CONSOLE_LINGER_MS 2000      /* console: output wait after input EOF */

/* Guest protocol markers (docs/interfaces.md section 2). */
#define MARK_READY "@@CXLPOD-READY"
#define MARK_BEGIN "@@CXLPOD-BEGIN@@"
#define MARK_END "@@CXLPOD-END rc="
#define MARK_ERROR "@@CXLPOD-ERROR"
#define MARK_SERVING "@@CXLPOD-SERVING@@"
#define MARK_UP "@@CXLPOD-UP "     /* network / host userland set up */

/*
 * The pod network: a /16 that only the pod's QEMUs share (launch-net.c).
 * Host i is POD_NET_PREFIX.(i / 254).(i % 254 + 1): hosts 0..253 are
 * 10.211.0.1..254, host 254 is 10.211.1.1, and so on; no address ends in
 * .0 or .255.
 */
#define POD_NET_PREFIX "10.211"
#define POD_NET_LEN "16"
#define POD_NET_PER_OCTET 254

/* What the guests run: the initramfs's busybox, or this machine's own root
 * file system (--userland host). */
enum userland { USERLAND_INITRAMFS, USERLAND_HOST };

/* Exit statuses. */
#define EXIT_OK 0
#define EXIT_JOBFAIL 1
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_INTR 130

enum pool_device { DEV_CXL_TYPE3, DEV_CXL_SHM };
/* The pool device used when --device is not given: a one-line switch. */
#define DEFAULT_DEVICE DEV_CXL_SHM
/* cxl-shm coherent window unless --coherent-size says otherwise */
#define DEFAULT_COHERENT_SIZE (64 * MIB)

enum accel { ACCEL_AUTO, ACCEL_TCG, ACCEL_KVM };

/*
 * How cxl-shm takes its pool: the device's own backend (pool=PATH), or a
 * memory-backend-file on the pool file the launcher writes (memdev=ID).
 * BACKEND_UNSET: a host without its own --pool-backend I:... setting.
 */
enum pool_backend { BACKEND_UNSET, BACKEND_FILE, BACKEND_MEMDEV };

#define DETECT_LIMIT_S 5.0  /* a kill not in a survivor's table by then */

/*
 * A --kill spec: I@STRING, I@+SECONDS, or I@random:MIN-MAX[:STRING] (a
 * random delay of MIN..MAX seconds after STRING appears in the run's
 * console, or after its job began when STRING is not given).
 */
struct kill_spec {
    int host;
    char *pattern;      /* NULL for a time trigger (random: the anchor) */
    double after_s;     /* seconds after the host's QEMU started */
    bool random;        /* I@random:MIN-MAX[:STRING] */
    double min_s, max_s;
};

/* What the guest told us in its serial log. */
struct guest_report {
    bool ready;
    bool up;            /* MARK_UP seen (pods with a network) */
    char dax[64];
    bool begun;
    size_t out_start;   /* offset of job output (line after BEGIN) */
    bool ended;
    size_t out_end;     /* offset of the END marker */
    int rc;
};

struct host_job {
    int host;
    char *file;
};

/* --machine NAME:FIRST-LAST: hosts another machine's launcher runs */
struct machine_spec {
    char *name;
    int first, last;
};

struct opts {
    int nhosts;
    char *workdir;
    bool workdir_given;
    char *qemu, *kernel, *initrd;
    enum accel accel;
    char *pool;
    uint64_t size;
    uint64_t coherent_size;
    bool coherent_size_given;
    long latency_ns;            /* -1: not given */
    int max_hosts;              /* 0: = nhosts */
    enum pool_device device;
    GPtrArray *device_opts;     /* --device-opt values (g_free) */
    enum pool_backend backend;  /* --pool-backend (every host) */
    enum pool_backend host_backend[MAX_HOSTS];  /* --pool-backend I:... */
    bool prealloc;              /* --prealloc: on the memory backend */
    char *host_nodes;           /* --host-nodes N[-M] (NULL: none) */
    GPtrArray *qemu_args;       /* --qemu-arg words */
    char *mem;
    int smp;
    char *append;               /* extra kernel command line */
    /* job */
    char *job_file;
    GPtrArray *job_cmd;         /* the words after -- */
    struct host_job *host_jobs;
    int n_host_jobs;
    bool interactive;
    double timeout_s;
    bool timeout_given;
    double boot_timeout_s;  /* a host not READY by then is stalled (0: none) */
    bool boot_timeout_given;
    struct kill_spec *kills;
    int n_kills;
    bool restart[MAX_HOSTS];
    int restarts;               /* --restarts N: kill + restart N times */
    uint64_t seed;              /* --seed: random kill delays */
    bool seed_given;
    double stall_timeout_s;     /* job silent this long: stalled (0: off) */
    long stagger_ms;
    int boot_parallel;          /* hosts booting at once (0: all, -1: auto) */
    bool json;
    bool follow;
    bool dry_run;
    bool quiet;
    bool restarts_given;
    char *config;               /* --config FILE (NULL: none) */
    enum userland userland;     /* --userland */
    bool net;                   /* --net (always on with --userland host) */
    char *jobdir;               /* the launch directory (host userland) */
    char *vde_switch;           /* the switch program found */
    bool keep_going;            /* --keep-going: a failed host stops nobody */
    char *conflict_log;         /* --conflict-log PATH (NULL: none) */
    char *stale_log;            /* --stale-log PATH (NULL: none) */
    /* a pod across machines (launch-xmach.c, docs/multi-machine.md) */
    int first_local, last_local;    /* --local-hosts FIRST-LAST */
    bool local_given;
    char *serve;                /* --serve ADDR:PORT (NULL: none) */
    int serve_hb_ms;            /* --serve-heartbeat-timeout (0: its own) */
    char *pool_key;             /* --pool-key PATH (remote pool) */
    char *net_listen;           /* --net-listen ADDR:PORT */
    char *net_join;             /* --net-join ADDR:PORT */
    char *machine;              /* --machine-name NAME */
    char *pod_keys;             /* --pod-keys DIR */
    double join_timeout_s;      /* --join-timeout */
    struct machine_spec *machines;  /* --machine NAME:FIRST-LAST */
    int n_machines;
    char *ssh_command;          /* --ssh-command CMD (default "ssh") */
    char *remote_launcher;      /* --remote-launcher PATH */
    GPtrArray *given;           /* the command line's options, name and
                                 * value (NULL for a flag) in pairs */
};

/* Files of one host in the work directory. */
struct host_paths {
    char *log, *console, *qmp, *err, *out, *job, *cmdline, *config, *ssh;
    char *events;       /* the events monitor (--conflict-log, --stale-log) */
};

enum host_end {
    END_NONE,           /* still running or never started */
    END_EXITED,         /* QEMU exited by itself */
    END_KILLED,         /* killed on purpose (--kill) */
    END_TIMEOUT,        /* killed by --timeout */
    END_INTERRUPTED,    /* killed because the launcher got a signal */
    END_LATE,           /* reported END but did not power off in time */
    END_SPAWN_FAILED,
    END_BOOT_STALLED,   /* no ready marker within --boot-timeout */
    END_STALLED,        /* job silent for --stall-timeout */
    END_SERVED,         /* no job of its own: stopped once every job ended */
    END_STOPPED,        /* stopped because another host failed to start */
    END_EVENTS_FAILED,  /* its events monitor could not be listened to */
};

/* One injected kill and what the survivors saw of it. */
struct kill_rec {
    int host, run;
    double t;           /* host time of the SIGKILL, seconds since start */
    double after_s;     /* since the run's QEMU started */
    double delay_s;     /* random kills: the drawn delay after the anchor */
    int seen_by;        /* survivor whose query-cxl-shm was read (-1: none) */
    double detect_s;    /* SIGKILL -> survivor's table says failed (-1) */
    uint64_t gen;       /* generation that failed */
};

struct host {
    int id;
    struct host_paths hp;
    pid_t pid;              /* 0 when not running */
    int runs;               /* QEMU processes started for this host */
    double t_start;         /* start time of the current run */
    double t_ready, t_end;  /* when READY / END were first seen (0: not) */
    double t_up;            /* when UP was first seen (0: not) */
    bool up_announced;
    int logfd;
    GString *log;           /* everything read from host%d.log */
    size_t run_base;        /* offset in log where the current run starts */
    size_t frozen_len;      /* killed run: log length at the kill (0: none) */
    bool parsed;            /* rep is up to date with log */
    size_t kill_scan[16];   /* --kill STRING: log searched up to here */
    size_t errs_reported;   /* error markers already announced */
    size_t errs_scan;       /* run's log searched for them up to here */
    size_t follow_pos;      /* --follow: job output printed up to here */
    struct guest_report rep;
    enum host_end end;
    int wstatus;            /* last wait status (from the child watch) */
    guint watch;            /* GLib child watch of the running QEMU (0: none) */
    bool exited;            /* reaped by the watch, not yet handled by tick */
    bool killed_once;       /* injected kill happened (maybe restarted) */
    double t_killed;
    bool kill_fired[16];
    double kill_anchor[16]; /* random kills: when the anchor was seen */
    int kills;              /* injected kills of this host */
    double t_output;        /* last time its log grew */
    char exit_state[16];    /* clean exit: state in a survivor's table */
    int exit_seen_by;       /* that survivor (-1: none asked) */
    bool started_announced;
    bool ready_announced;
    bool end_announced;
    bool term_sent;
    double t_term;
    bool has_job;           /* a job of its own (else it serves, or is interactive) */
    bool serve;             /* no job in a pod with jobs: up until they end */
    int stopped_by;         /* END_STOPPED: the host that failed */
    struct events_reader *events;   /* this run's events (NULL: none) */
};


/* launch-util.c */
void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cleanup_children(void);
void kill_qemu(pid_t pid, int sig);
void die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
double now_s(void);
bool path_exists(const char *p);
bool is_dir(const char *p);
bool is_file(const char *p);
char *qemu_opt_escape(const char *s);
void shell_quote(GString *b, const char *s);
const char *accel_name(enum accel a);
const char *device_name(enum pool_device d);

/* launch-parse.c */
bool parse_size(const char *s, uint64_t *out);
bool parse_int(const char *s, long min, long max, long *out);
bool parse_seconds(const char *s, double *out);
char **subcommand_words(int argc, char **argv, const char *params,
                        const char *summary, int min, int max, int *n);
char *fmt_size(uint64_t v);
bool parse_kill(const char *arg, struct kill_spec *k, const char **why);
uint64_t mix64(uint64_t z);
double kill_delay(const struct kill_spec *ks, uint64_t seed, int run, int k);
bool qmp_host_state(const char *reply, int host, char *state, size_t n,
                           uint64_t *gen);
void parse_log(const char *log, size_t len, struct guest_report *r);
char *extract_output(const char *log, const struct guest_report *r,
                            size_t *lenp);
char *collect_errors(const char *log, size_t len, int *count);

/* launch-qemu.c */
char *find_top(void);
char *find_default_kernel(const char *guest_dir);
enum accel resolve_accel(enum accel want, char *note, size_t notelen);
void host_paths_init(struct host_paths *hp, const char *wd, int i);
int device_opt_host(const char *opt, const char **kv);
bool host_on_memdev(const struct opts *o, int host);
void add_pool_device_args(GPtrArray *a, const struct opts *o, int host);
GPtrArray *argv_new(void);
void argv_add(GPtrArray *a, const char *s);
void argv_addf(GPtrArray *a, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void build_qemu_argv(GPtrArray *a, const struct opts *o,
                            enum accel accel, int host,
                            const struct host_paths *hp, bool has_job,
                            bool append_log);
char *argv_to_shell(GPtrArray *a);

/* launch-host.c */
extern struct kill_rec *g_kill_recs;
extern int g_n_kill_recs;
extern struct host *g_hosts;
extern int g_nhosts;
extern double g_pod_t0;
extern volatile sig_atomic_t g_signal;
void atexit_cleanup(void);
void describe_status(int st, char *out, size_t n);
void mark_job_restarted(const struct host *h, int n);
bool spawn_qemu(struct host *h, const struct opts *o, enum accel accel,
                       bool has_job);
void read_log(struct host *h);
void print_prefixed(FILE *f, int host, const char *data, size_t len);
void follow_output(struct host *h, bool final);
void announce_errors(struct host *h, bool quiet);
void send_term(struct host *h, double t);
void show_qemu_tails(const struct host *h, int console_lines);
void prepare_pool(const struct opts *o);
bool prepare_jobs(const struct opts *o, struct host *hosts);

/* launch-options.c */
enum {
    OPT_QEMU = 256, OPT_KERNEL, OPT_INITRD, OPT_ACCEL, OPT_POOL, OPT_SIZE,
    OPT_COHERENT, OPT_DEVICE, OPT_DEVICE_OPT, OPT_QEMU_ARG, OPT_MEM, OPT_SMP,
    OPT_JOB, OPT_JOB_HOST, OPT_INTERACTIVE, OPT_TIMEOUT, OPT_BOOT_TIMEOUT, OPT_KILL, OPT_RESTART,
    OPT_STAGGER, OPT_JSON, OPT_DRY_RUN, OPT_LATENCY, OPT_MAX_HOSTS, OPT_APPEND,
    OPT_RESTARTS, OPT_SEED, OPT_STALL_TIMEOUT, OPT_CONFIG, OPT_POOL_BACKEND,
    OPT_PREALLOC, OPT_HOST_NODES, OPT_USERLAND, OPT_NET, OPT_KEEP_GOING,
    OPT_BOOT_PARALLEL, OPT_CONFLICT_LOG, OPT_STALE_LOG,
    OPT_LOCAL_HOSTS, OPT_SERVE, OPT_POOL_KEY, OPT_NET_LISTEN, OPT_NET_JOIN,
    OPT_MACHINE_NAME, OPT_POD_KEYS, OPT_JOIN_TIMEOUT, OPT_MACHINE,
    OPT_SSH_COMMAND, OPT_REMOTE_LAUNCHER, OPT_SERVE_HEARTBEAT,
};

/* The long options: name, short name or OPT_ id, takes a value. */
struct opt_def {
    const char *name;
    int id;
    bool arg;
};
extern const struct opt_def long_opts[];   /* ends with a NULL name */
void usage(FILE *f);
void opts_init(struct opts *o);
void apply_opt(struct opts *o, int c, const char *optarg, const char *label);
bool opts_apply_named(struct opts *o, const char *name, const char *arg,
                      const char *label);

/* launch-args.c */
void opts_drop_common_job(struct opts *o);
void opts_drop_host_jobs(struct opts *o, int n);
void parse_args(int argc, char **argv, struct opts *o);

/* launch-paths.c */
char *install_dir(const char *exe, const char *which);
void resolve_paths(struct opts *o);
void make_workdir(struct opts *o);

/* launch-qmp.c: the QMP client (GIO, json-glib) */
#define QMP_REPLY_S 10      /* a command's reply, unless q->reply_s says */
struct qmp {
    GSocketConnection *conn;
    GDataInputStream *in;
    guint reply_s;          /* qmp_exchange's wait for a reply (0: none) */
};
int unix_connect(const char *path);
bool qmp_attach(struct qmp *q, int fd, guint timeout_s);
void qmp_close(struct qmp *q);
char *qmp_read_line(struct qmp *q, guint timeout_s);
bool reply_has(const char *line, const char *member);
char *qmp_exchange(struct qmp *q, const char *cmd, JsonNode *args);
int qmp_handshake(struct qmp *q, guint greeting_s, char **why);

/* launch-qmp.c: what the survivors see, the pool's host table, `qmp` */
int kill_runs(const struct opts *o, int host);
void detect_kill(struct host *h, struct kill_rec *kr, double tk, bool quiet);
void check_clean_exit(struct host *h, const char *pool, bool quiet);
int read_pool_hosts(const char *pool, int n, unsigned *state, uint64_t *gen);
const char *pool_state_name(unsigned st);
int cmp_double(const void *a, const void *b);
int qmp_main(int argc, char **argv);

/* launch-pod.c */
int boot_parallel(const struct opts *o);
int run(struct opts *o);

/* launch-report.c */
int report(const struct opts *o, enum accel accel, double wall,
           bool timed_out, bool interrupted);

/* launch-console.c */
bool write_all(int fd, const char *p, size_t n);
int console_main(int argc, char **argv);

/* launch-config.c */
void config_load(struct opts *o, const char *path);

/* launch-net.c */
bool pod_has_net(const struct opts *o);
const char *userland_name(enum userland u);
char *pod_addr(int i, bool with_len);
char *pod_mac(int i);
void pod_prepare(struct opts *o, struct host *hosts);
void pod_child_mask(void);
void pod_switch_start(const struct opts *o);
void pod_switch_stop(void);
void add_pod_args(GPtrArray *a, const struct opts *o, int host,
                  const struct host_paths *hp);
char *wd_path(const struct opts *o, const char *name);
char *find_program(const char *name, const char *const *extra_dirs);
void write_file(const char *path, const char *data, int mode);

/* launch-ssh.c */
void pod_prepare_ssh(const struct opts *o);
int proxy_main(int argc, char **argv);
int ssh_main(int argc, char **argv);

/* launch-events.c */
enum event_log { EVENT_LOG_CONFLICT, EVENT_LOG_STALE, EVENT_LOG_N };
char *event_record(const char *text, enum event_log *log);
bool events_wanted(const struct opts *o);
void events_open_logs(const struct opts *o);
void events_close_logs(bool quiet);
void events_start(struct host *h, const struct opts *o);
const char *events_failed(const struct host *h);
void events_stop(struct host *h);
void events_stop_all(void);

/* launch-xmach.c */
#define REMOTE_POOL_SCHEME "ucx://"
bool host_local(const struct opts *o, int host);
bool pool_is_remote(const struct opts *o);
void add_remote_pool_args(GString *dev, const struct opts *o);
bool parse_host_range(const char *s, int *first, int *last);
bool parse_addr_port(const char *s, char **addr, int *port);
void xmach_check(struct opts *o);
#define XMACH_NAME_MAX 64
bool xmach_name_ok(const char *s);
bool xmach_nonce_ok(const char *s);
char *xmach_net_proof(const char *key, const char *dir, const char *kind,
                      int n, int first, int last, const char *name,
                      const char *lnonce, const char *jnonce);
void xmach_prepare(struct opts *o);
void xmach_start(const struct opts *o);
bool xmach_ready(const struct opts *o);
int xmach_tick(const struct opts *o, char *why, size_t n);
void xmach_host_failed(int host, const char *why);
void xmach_jobs_done(void);
bool xmach_peers_jobs_done(void);
bool xmach_may_end(const struct opts *o);
void xmach_stop(void);
int xmach_report(const struct opts *o);

#endif

/*
 * cxlpod-launch: boot N QEMU guests on one CXL memory pool and run a job in
 * each of them (or keep them up for interactive use).
 *
 * Host tool, plain C11 + POSIX/Linux libc, no other dependencies.
 * See docs/launcher.md for the user documentation and docs/interfaces.md
 * section 2 for the guest job protocol spoken here.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#define PROG "cxlpod-launch"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define POOL_ALIGN (256ULL * MIB)   /* CXL device/window/region granule */
#define MAX_HOSTS 32                /* register block allows 1..32 */
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

/* ------------------------------------------------------------------ */
/* small utilities                                                     */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void cleanup_children(void);

/* Signal a QEMU: its whole process group (it runs in its own), else it. */
static void kill_qemu(pid_t pid, int sig)
{
    if (pid <= 0) {
        return;
    }
    if (kill(-pid, sig) < 0) {
        kill(pid, sig);
    }
}

static void die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cleanup_children();
    exit(status);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        die(EXIT_USAGE, "out of memory");
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        die(EXIT_USAGE, "out of memory");
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) {
        die(EXIT_USAGE, "out of memory");
    }
    return p;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        die(EXIT_USAGE, "out of memory");
    }
    va_end(ap);
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Growable argv. */
struct strv {
    char **v;
    int n, cap;
};

static void strv_add(struct strv *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = xstrdup(s);
    a->v[a->n] = NULL;
}

static void strv_addf(struct strv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void strv_addf(struct strv *a, const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        die(EXIT_USAGE, "out of memory");
    }
    va_end(ap);
    strv_add(a, s);
    free(s);
}

static void strv_free(struct strv *a)
{
    for (int i = 0; i < a->n; i++) {
        free(a->v[i]);
    }
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* Growable byte buffer. */
struct buf {
    char *p;
    size_t len, cap;
};

static void buf_append(struct buf *b, const char *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

/*
 * QEMU option values (key=value,key=value): a comma inside a value must be
 * doubled.  Returns a new string.
 */
static char *qemu_opt_escape(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        n += (*p == ',') ? 2 : 1;
    }
    char *r = xmalloc(n + 1), *q = r;
    for (const char *p = s; *p; p++) {
        *q++ = *p;
        if (*p == ',') {
            *q++ = ',';
        }
    }
    *q = '\0';
    return r;
}

/* Quote for a POSIX shell (for the .cmdline files and --dry-run). */
static void shell_quote(struct buf *b, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++) {
        if (!(isalnum((unsigned char)*p) || strchr("@%+=:,./_-", *p))) {
            plain = false;
            break;
        }
    }
    if (plain) {
        buf_puts(b, s);
        return;
    }
    buf_puts(b, "'");
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            buf_puts(b, "'\\''");
        } else {
            buf_append(b, p, 1);
        }
    }
    buf_puts(b, "'");
}

static void json_string(struct buf *b, const char *s, size_t n)
{
    buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            buf_append(b, tmp, 2);
        } else if (c == '\n') {
            buf_puts(b, "\\n");
        } else if (c == '\t') {
            buf_puts(b, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            buf_puts(b, tmp);
        } else {
            buf_append(b, (const char *)&c, 1);
        }
    }
    buf_puts(b, "\"");
}

static bool write_file(const char *path, const char *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        return false;
    }
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            int e = errno;
            close(fd);
            errno = e;
            return false;
        }
        data += w;
        n -= (size_t)w;
    }
    return close(fd) == 0;
}

/* Read a whole file; NULL on error (errno set). */
static char *read_file(const char *path, size_t *lenp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    struct buf b = { 0 };
    char tmp[65536];
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof(tmp));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            int e = errno;
            close(fd);
            free(b.p);
            errno = e;
            return NULL;
        }
        if (r == 0) {
            break;
        }
        buf_append(&b, tmp, (size_t)r);
    }
    close(fd);
    if (!b.p) {
        buf_append(&b, "", 0);
    }
    if (lenp) {
        *lenp = b.len;
    }
    return b.p;
}

/* ------------------------------------------------------------------ */
/* parsing helpers (unit-checked by the `selftest` subcommand)         */

/*
 * Parse a size: a decimal number with an optional suffix K, M, G, T
 * (powers of 1024, optionally followed by "iB" or "B").  Returns false on
 * syntax error or overflow.
 */
static bool parse_size(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s)) {
        return false;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) {
        return false;
    }
    uint64_t mul = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        mul = 1024ULL;
        end++;
        break;
    case 'M':
        mul = MIB;
        end++;
        break;
    case 'G':
        mul = GIB;
        end++;
        break;
    case 'T':
        mul = 1024ULL * GIB;
        end++;
        break;
    case 'B':
        break;
    default:
        return false;
    }
    if (mul > 1 && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0)) {
        end += strlen(end);
    } else if (mul == 1 && strcasecmp(end, "B") == 0) {
        end++;
    }
    if (*end) {
        return false;
    }
    if (v > UINT64_MAX / mul) {
        return false;
    }
    *out = v * mul;
    return true;
}

static bool parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    if (!s || !*s) {
        return false;
    }
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    if (!s || !*s) {
        return false;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0) || v > 1e9) {
        return false;
    }
    *out = v;
    return true;
}

/* Format a byte count the way QEMU accepts it, exactly. */
static char *fmt_size(uint64_t v)
{
    if (v && v % GIB == 0) {
        return xasprintf("%lluG", (unsigned long long)(v / GIB));
    }
    if (v && v % MIB == 0) {
        return xasprintf("%lluM", (unsigned long long)(v / MIB));
    }
    return xasprintf("%llu", (unsigned long long)v);
}

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

static bool parse_kill(const char *arg, struct kill_spec *k, const char **why)
{
    const char *at = strchr(arg, '@');
    long host;
    if (!at) {
        *why = "expected I@STRING, I@+SECONDS or I@random:MIN-MAX[:STRING]";
        return false;
    }
    char *hs = strndup(arg, (size_t)(at - arg));
    bool ok = hs && parse_int(hs, 0, MAX_HOSTS - 1, &host);
    free(hs);
    if (!ok) {
        *why = "host id before '@' must be a number 0..31";
        return false;
    }
    k->host = (int)host;
    k->random = false;
    k->min_s = k->max_s = 0;
    if (!strncmp(at + 1, "random:", 7)) {
        const char *r = at + 8;
        const char *dash = strchr(r, '-');
        const char *colon = strchr(r, ':');
        const char *end = colon ? colon : r + strlen(r);
        if (!dash || dash > end) {
            *why = "expected random:MIN-MAX[:STRING] (seconds, e.g. random:0.2-1.5)";
            return false;
        }
        char *lo = strndup(r, (size_t)(dash - r));
        char *hi = strndup(dash + 1, (size_t)(end - dash - 1));
        ok = lo && hi && parse_seconds(lo, &k->min_s) &&
             parse_seconds(hi, &k->max_s);
        free(lo);
        free(hi);
        if (!ok) {
            *why = "MIN and MAX of random:MIN-MAX must be numbers of seconds";
            return false;
        }
        if (k->max_s < k->min_s) {
            *why = "random:MIN-MAX needs MIN <= MAX";
            return false;
        }
        if (colon && !colon[1]) {
            *why = "empty STRING after random:MIN-MAX:";
            return false;
        }
        k->random = true;
        k->pattern = colon ? xstrdup(colon + 1) : NULL;
        k->after_s = 0;
    } else if (at[1] == '+') {
        k->pattern = NULL;
        if (!parse_seconds(at + 2, &k->after_s)) {
            *why = "time after '@+' must be a number of seconds";
            return false;
        }
    } else {
        if (!at[1]) {
            *why = "empty string after '@'";
            return false;
        }
        k->pattern = xstrdup(at + 1);
        k->after_s = 0;
    }
    return true;
}

/*
 * The random delay of kill spec k for run `run` of its host: a function of
 * (seed, host, run, k) only, so a run is replayed exactly with --seed.
 */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double kill_delay(const struct kill_spec *ks, uint64_t seed, int run, int k)
{
    uint64_t z = mix64(seed ^ mix64(((uint64_t)ks->host << 40) ^
                                    ((uint64_t)run << 8) ^ (uint64_t)k));
    double u = (double)(z >> 11) / (double)(1ULL << 53);  /* [0, 1) */
    return ks->min_s + (ks->max_s - ks->min_s) * u;
}

/*
 * A few lines of JSON scanning, enough to read one host's entry of a
 * query-cxl-shm reply (QEMU prints an object's members in hash order).
 */
static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    return p;
}

/* Skip one JSON string starting at its opening quote; NULL if broken. */
static const char *json_skip_string(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* Skip one JSON value: returns the ',' '}' or ']' that ends it, NULL if
 * the text ends first. */
static const char *json_skip_value(const char *p)
{
    int depth = 0;
    for (;;) {
        if (!*p) {
            return NULL;
        }
        if (*p == '"') {
            p = json_skip_string(p);
            if (!p) {
                return NULL;
            }
        } else if (*p == '{' || *p == '[') {
            depth++;
            p++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0) {
                return p;
            }
            depth--;
            p++;
        } else if (*p == ',' && depth == 0) {
            return p;
        } else {
            p++;
        }
    }
}

/* In the object starting at obj ('{'), the value of member key, or NULL. */
static const char *json_member(const char *obj, const char *key)
{
    const char *p = json_ws(obj);
    if (*p != '{') {
        return NULL;
    }
    p = json_ws(p + 1);
    size_t kl = strlen(key);
    while (*p == '"') {
        const char *ks = p + 1;
        const char *ke = json_skip_string(p);
        if (!ke) {
            return NULL;
        }
        p = json_ws(ke);
        if (*p != ':') {
            return NULL;
        }
        const char *v = json_ws(p + 1);
        if ((size_t)(ke - 1 - ks) == kl && !memcmp(ks, key, kl)) {
            return v;
        }
        p = json_skip_value(v);
        if (!p) {
            return NULL;
        }
        p = json_ws(p);
        if (*p != ',') {
            return NULL;
        }
        p = json_ws(p + 1);
    }
    return NULL;
}

/*
 * From a query-cxl-shm reply, host `host`'s entry of the (first) device's
 * host table: its state ("live", "failed", "left", "free") and generation.
 */
static bool qmp_host_state(const char *reply, int host, char *state, size_t n,
                           uint64_t *gen)
{
    const char *ret = json_member(reply, "return");
    if (!ret || *ret != '[') {
        return false;
    }
    const char *dev = json_ws(ret + 1);
    const char *hosts = json_member(dev, "hosts");
    if (!hosts || *hosts != '[') {
        return false;
    }
    const char *p = json_ws(hosts + 1);
    while (*p == '{') {
        const char *id = json_member(p, "host-id");
        if (id && isdigit((unsigned char)*id) && atoi(id) == host) {
            const char *st = json_member(p, "state");
            const char *g = json_member(p, "generation");
            if (!st || *st != '"') {
                return false;
            }
            const char *se = strchr(st + 1, '"');
            size_t l = se ? (size_t)(se - st - 1) : 0;
            if (!se || l >= n) {
                return false;
            }
            memcpy(state, st + 1, l);
            state[l] = '\0';
            *gen = g ? strtoull(g, NULL, 10) : 0;
            return true;
        }
        p = json_skip_value(p);
        if (!p) {
            return false;
        }
        p = json_ws(p);
        if (*p != ',') {
            return false;
        }
        p = json_ws(p + 1);
    }
    return false;
}

/* What the guest told us in its serial log. */
struct guest_report {
    bool ready;
    char dax[64];
    bool begun;
    size_t out_start;   /* offset of job output (line after BEGIN) */
    bool ended;
    size_t out_end;     /* offset of the END marker */
    int rc;
};

static const char *memmem_str(const char *hay, size_t n, const char *needle)
{
    if (!hay || !n) {
        return NULL;
    }
    return memmem(hay, n, needle, strlen(needle));
}

/*
 * Parse a (partial) serial log.  Idempotent: call again on a longer prefix
 * of the same log.  Only protocol markers are interpreted.
 */
static void parse_log(const char *log, size_t len, struct guest_report *r)
{
    memset(r, 0, sizeof(*r));
    r->rc = -1;
    const char *p = memmem_str(log, len, MARK_READY);
    if (p) {
        const char *q = p + strlen(MARK_READY);
        const char *lim = log + len;
        const char *eol = memchr(q, '\n', (size_t)(lim - q));
        const char *close = memmem_str(q, (size_t)(lim - q), "@@");
        if (close && (!eol || close < eol)) {
            r->ready = true;
            if (*q == ' ') {
                q++;
            }
            if ((size_t)(lim - q) > 4 && strncmp(q, "dax=", 4) == 0) {
                q += 4;
            }
            size_t n = (size_t)(close - q);
            if (n >= sizeof(r->dax)) {
                n = sizeof(r->dax) - 1;
            }
            memcpy(r->dax, q, n);
            r->dax[n] = '\0';
        }
    }
    p = memmem_str(log, len, MARK_BEGIN);
    if (!p) {
        return;
    }
    const char *lim = log + len;
    const char *q = p + strlen(MARK_BEGIN);
    const char *eol = memchr(q, '\n', (size_t)(lim - q));
    if (!eol) {
        return;     /* BEGIN line not complete yet */
    }
    r->begun = true;
    r->out_start = (size_t)(eol + 1 - log);
    const char *e = memmem_str(eol + 1, (size_t)(lim - eol - 1), MARK_END);
    while (e) {
        const char *d = e + strlen(MARK_END);
        const char *x = d;
        if (x < lim && *x == '-') {
            x++;
        }
        const char *digits = x;
        while (x < lim && isdigit((unsigned char)*x)) {
            x++;
        }
        if (x > digits && x + 2 <= lim && x[0] == '@' && x[1] == '@') {
            char num[32];
            size_t n = (size_t)(x - d);
            if (n < sizeof(num)) {
                memcpy(num, d, n);
                num[n] = '\0';
                r->ended = true;
                r->rc = atoi(num);
                r->out_end = (size_t)(e - log);
                return;
            }
        }
        if (x >= lim) {
            return;  /* marker not complete yet */
        }
        e = memmem_str(e + 1, (size_t)(lim - e - 1), MARK_END);
    }
}

/*
 * Job output between BEGIN and END with serial-console CRs removed; a final
 * newline is added if the job's output did not end with one.
 */
static char *extract_output(const char *log, const struct guest_report *r,
                            size_t *lenp)
{
    struct buf b = { 0 };
    buf_append(&b, "", 0);
    if (r->begun && r->ended && r->out_end >= r->out_start) {
        for (size_t i = r->out_start; i < r->out_end; i++) {
            if (log[i] != '\r') {
                buf_append(&b, &log[i], 1);
            }
        }
        if (b.len && b.p[b.len - 1] != '\n') {
            buf_append(&b, "\n", 1);
        }
    }
    *lenp = b.len;
    return b.p;
}

/* Collect @@CXLPOD-ERROR lines (without CRs), one per line. */
static char *collect_errors(const char *log, size_t len, int *count)
{
    struct buf b = { 0 };
    buf_append(&b, "", 0);
    *count = 0;
    const char *p = log, *lim = log + len;
    while ((p = memmem_str(p, (size_t)(lim - p), MARK_ERROR)) != NULL) {
        const char *eol = memchr(p, '\n', (size_t)(lim - p));
        const char *e = eol ? eol : lim;
        for (const char *c = p; c < e; c++) {
            if (*c != '\r') {
                buf_append(&b, c, 1);
            }
        }
        buf_append(&b, "\n", 1);
        (*count)++;
        p = e;
    }
    return b.p;
}

/* ------------------------------------------------------------------ */
/* configuration                                                       */

struct host_job {
    int host;
    char *file;
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
    struct strv device_opts;
    struct strv qemu_args;
    char *mem;
    int smp;
    char *append;               /* extra kernel command line */
    /* job */
    char *job_file;
    struct strv job_cmd;
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
    bool json;
    bool follow;
    bool dry_run;
    bool quiet;
};

static const char *accel_name(enum accel a)
{
    return a == ACCEL_KVM ? "kvm" : a == ACCEL_TCG ? "tcg" : "auto";
}

static const char *device_name(enum pool_device d)
{
    return d == DEV_CXL_SHM ? "cxl-shm" : "cxl-type3";
}

/* ------------------------------------------------------------------ */
/* repository root and default paths                                   */

static bool looks_like_top(const char *dir)
{
    char *a = xasprintf("%s/docs/interfaces.md", dir);
    char *b = xasprintf("%s/host-tools", dir);
    bool ok = is_file(a) && is_dir(b);
    free(a);
    free(b);
    return ok;
}

/* $CXLPOD_TOP, else the first ancestor of the executable that looks like
 * the cxlpod repository.  NULL if neither works. */
static char *find_top(void)
{
    const char *env = getenv("CXLPOD_TOP");
    if (env && *env) {
        if (!is_dir(env)) {
            die(EXIT_USAGE, "CXLPOD_TOP=%s is not a directory", env);
        }
        return xstrdup(env);
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
            return xstrdup(exe);
        }
    }
    return NULL;
}

static int cmp_version_path(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* Newest $TOP/build/guest/kernel-X/boot/vmlinuz-Y, by version order. */
static char *find_default_kernel(const char *top)
{
    char *pat = xasprintf("%s/build/guest/kernel-*/boot/vmlinuz-*", top);
    glob_t g;
    char *res = NULL;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
        qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_version_path);
        res = xstrdup(g.gl_pathv[g.gl_pathc - 1]);
    }
    globfree(&g);
    free(pat);
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

static enum accel resolve_accel(enum accel want, char *note, size_t notelen)
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

/* Files of one host in the work directory. */
struct host_paths {
    char *log, *console, *qmp, *err, *out, *job, *cmdline;
};

static void host_paths_init(struct host_paths *hp, const char *wd, int i)
{
    hp->log = xasprintf("%s/host%d.log", wd, i);
    hp->console = xasprintf("%s/host%d.console", wd, i);
    hp->qmp = xasprintf("%s/host%d.qmp", wd, i);
    hp->err = xasprintf("%s/host%d.qemu-err", wd, i);
    hp->out = xasprintf("%s/host%d.out", wd, i);
    hp->job = xasprintf("%s/host%d.job", wd, i);
    hp->cmdline = xasprintf("%s/host%d.cmdline", wd, i);
}

/*
 * --device-opt I:K=V applies to host I only: returns I and sets *kv to
 * "K=V"; -1 (and *kv = opt) for a K=V of every host.
 */
static int device_opt_host(const char *opt, const char **kv)
{
    const char *p = opt;
    *kv = opt;
    while (isdigit((unsigned char)*p)) {
        p++;
    }
    if (p == opt || *p != ':' || p - opt > 2) {
        return -1;
    }
    *kv = p + 1;
    return atoi(opt);
}

/*
 * The one function that knows how the pool device is attached.  Everything
 * device-specific on the QEMU command line comes from here.
 */
static void add_pool_device_args(struct strv *a, const struct opts *o, int host)
{
    char *pool = qemu_opt_escape(o->pool);
    char *size = fmt_size(o->size);
    uint64_t win = o->size > 4 * GIB ? o->size : 4 * GIB;
    char *winsz = fmt_size(win);
    struct buf dev = { 0 };

    /* CXL topology shared by both devices: one host bridge, one root port. */
    strv_add(a, "-device");
    strv_add(a, "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1");
    strv_add(a, "-device");
    strv_add(a, "cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2");

    switch (o->device) {
    case DEV_CXL_TYPE3:
        strv_add(a, "-object");
        strv_addf(a, "memory-backend-file,id=cxl-mem0,share=on,mem-path=%s,"
                  "size=%s", pool, size);
        buf_puts(&dev, "cxl-type3,bus=root_port13,volatile-memdev=cxl-mem0,"
                 "id=cxl-vmem0");
        break;
    case DEV_CXL_SHM: {
        char *s = xasprintf("cxl-shm,bus=root_port13,id=cxl-shm0,pool=%s,"
                            "size=%s,host-id=%d,max-hosts=%d",
                            pool, size, host,
                            o->max_hosts ? o->max_hosts : o->nhosts);
        buf_puts(&dev, s);
        free(s);
        {
            char *cs = fmt_size(o->coherent_size);
            s = xasprintf(",coherent-size=%s", cs);
            buf_puts(&dev, s);
            free(s);
            free(cs);
        }
        if (o->latency_ns >= 0) {
            s = xasprintf(",latency-ns=%ld", o->latency_ns);
            buf_puts(&dev, s);
            free(s);
        }
        break;
    }
    }
    for (int i = 0; i < o->device_opts.n; i++) {
        const char *kv = o->device_opts.v[i];
        int only = device_opt_host(kv, &kv);
        if (only >= 0 && only != host) {
            continue;
        }
        buf_puts(&dev, ",");
        buf_puts(&dev, kv);
    }
    strv_add(a, "-device");
    strv_add(a, dev.p);
    strv_add(a, "-M");
    strv_addf(a, "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=%s", winsz);
    free(dev.p);
    free(pool);
    free(size);
    free(winsz);
}

static void build_qemu_argv(struct strv *a, const struct opts *o,
                            enum accel accel, int host,
                            const struct host_paths *hp, bool has_job,
                            bool append_log)
{
    char *log = qemu_opt_escape(hp->log);
    char *con = qemu_opt_escape(hp->console);
    char *qmp = qemu_opt_escape(hp->qmp);
    char *job = qemu_opt_escape(hp->job);

    strv_add(a, o->qemu);
    strv_add(a, "-name");
    strv_addf(a, "cxlpod-host%d", host);
    strv_add(a, "-M");
    strv_add(a, "q35,cxl=on");
    strv_add(a, "-accel");
    strv_add(a, accel == ACCEL_KVM ? "kvm" : "tcg");
    strv_add(a, "-cpu");
    strv_add(a, "max,-hypervisor");
    strv_add(a, "-smp");
    strv_addf(a, "%d", o->smp);
    strv_add(a, "-m");
    strv_add(a, o->mem);
    strv_add(a, "-nographic");
    strv_add(a, "-nodefaults");     /* no NIC, VGA, CD-ROM, default serial */
    strv_add(a, "-monitor");
    strv_add(a, "none");
    strv_add(a, "-no-reboot");
    strv_add(a, "-L");
    strv_add(a, "/usr/share/seabios");
    strv_add(a, "-L");
    strv_add(a, "/usr/share/qemu");
    strv_add(a, "-kernel");
    strv_add(a, o->kernel);
    strv_add(a, "-initrd");
    strv_add(a, o->initrd);
    /*
     * tsc=reliable: the guest's TSC is the host's constant TSC (TCG reads
     * the host's; KVM passes it through, and a pod host is never
     * migrated).  Without it, on a busy host the guest's timer ticks fall
     * behind, the clocksource watchdog marks the TSC unstable in the middle
     * of early boot and the guest falls back to jiffies timekeeping, where
     * boots were seen to stall (issue 9; docs/launcher.md).
     */
    strv_add(a, "-append");
    strv_addf(a, "console=ttyS0 quiet tsc=reliable cxlpod.host=%d "
              "cxlpod.nhosts=%d%s%s",
              host, o->nhosts, o->append ? " " : "", o->append ? o->append : "");
    add_pool_device_args(a, o, host);
    strv_add(a, "-chardev");
    strv_addf(a, "socket,id=ser0,path=%s,server=on,wait=off,logfile=%s%s",
              con, log, append_log ? ",logappend=on" : "");
    strv_add(a, "-serial");
    strv_add(a, "chardev:ser0");
    strv_add(a, "-qmp");
    strv_addf(a, "unix:%s,server=on,wait=off", qmp);
    if (has_job) {
        strv_add(a, "-fw_cfg");
        strv_addf(a, "name=opt/cxlpod/job,file=%s", job);
    }
    for (int i = 0; i < o->qemu_args.n; i++) {
        strv_add(a, o->qemu_args.v[i]);
    }
    free(log);
    free(con);
    free(qmp);
    free(job);
}

static char *argv_to_shell(const struct strv *a)
{
    struct buf b = { 0 };
    for (int i = 0; i < a->n; i++) {
        if (i) {
            buf_puts(&b, " ");
        }
        shell_quote(&b, a->v[i]);
    }
    buf_puts(&b, "\n");
    return b.p;
}

/* ------------------------------------------------------------------ */
/* hosts at run time                                                   */

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

static struct kill_rec *g_kill_recs;
static int g_n_kill_recs;

struct host {
    int id;
    struct host_paths hp;
    pid_t pid;              /* 0 when not running */
    int runs;               /* QEMU processes started for this host */
    double t_start;         /* start time of the current run */
    double t_ready, t_end;  /* when READY / END were first seen (0: not) */
    int logfd;
    struct buf log;         /* everything read from host%d.log */
    size_t run_base;        /* offset in log where the current run starts */
    size_t frozen_len;      /* killed run: log length at the kill (0: none) */
    bool parsed;            /* rep is up to date with log */
    size_t kill_scan[16];   /* --kill STRING: log searched up to here */
    size_t errs_reported;   /* error markers already announced */
    size_t follow_pos;      /* --follow: job output printed up to here */
    struct guest_report rep;
    enum host_end end;
    int wstatus;            /* last waitpid status */
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
};

static struct host *g_hosts;
static int g_nhosts;
static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

/* Kill and reap every QEMU still running.  Safe to call more than once. */
static void cleanup_children(void)
{
    bool any = false;
    for (int i = 0; i < g_nhosts; i++) {
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
        poll(NULL, 0, POLL_MS);
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

static void atexit_cleanup(void)
{
    cleanup_children();
}

static void describe_status(int st, char *out, size_t n)
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
    size_t len;
    char *data = read_file(path, &len);
    if (!data) {
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
    free(data);
}

/*
 * Before a restart: tell the job it is running again by adding
 * "export CXLPOD_RESTARTED=<n>" (n: restarts so far) after the script's
 * first line if that is a #! line, else before it; a later restart
 * rewrites n.
 */
static void mark_job_restarted(const struct host *h, int n)
{
    size_t len;
    char *job = read_file(h->hp.job, &len);
    if (!job) {
        return;
    }
    static const char key[] = "export CXLPOD_RESTARTED=";
    char line[64];
    snprintf(line, sizeof(line), "%s%d\n", key, n);
    struct buf b = { 0 };
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
        buf_append(&b, job, (size_t)(old - job));
        buf_puts(&b, line);
        buf_append(&b, job + rest, len - rest);
    } else {
        size_t split = 0;
        if (len >= 2 && job[0] == '#' && job[1] == '!') {
            char *nl = memchr(job, '\n', len);
            split = nl ? (size_t)(nl + 1 - job) : len;
        }
        buf_append(&b, job, split);
        if (split && job[split - 1] != '\n') {
            buf_puts(&b, "\n");
        }
        buf_puts(&b, line);
        buf_append(&b, job + split, len - split);
    }
    if (!write_file(h->hp.job, b.p, b.len, 0755)) {
        msg("host %d: cannot update %s: %s", h->id, h->hp.job, strerror(errno));
    }
    free(b.p);
    free(job);
}

static bool spawn_qemu(struct host *h, const struct opts *o, enum accel accel,
                       bool has_job)
{
    if (h->runs > 0 && has_job) {
        mark_job_restarted(h, h->runs);
    }
    struct strv a = { 0 };
    build_qemu_argv(&a, o, accel, h->id, &h->hp, has_job, true);
    char *cmd = argv_to_shell(&a);
    write_file(h->hp.cmdline, cmd, strlen(cmd), 0644);
    free(cmd);

    int errfd = open(h->hp.err, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (errfd < 0) {
        msg("host %d: cannot create %s: %s", h->id, h->hp.err, strerror(errno));
        strv_free(&a);
        return false;
    }
    if (h->runs > 0) {
        dprintf(errfd, "==== cxlpod-launch: restart %d ====\n", h->runs);
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        msg("host %d: fork: %s", h->id, strerror(errno));
        close(errfd);
        strv_free(&a);
        return false;
    }
    if (pid == 0) {
        /* child: own process group (the launcher handles Ctrl-C), die with
         * the launcher, stdin from /dev/null, stdout+stderr to the err file */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127);
        }
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
        }
        dup2(errfd, 1);
        dup2(errfd, 2);
        execv(a.v[0], a.v);
        dprintf(2, PROG ": cannot execute %s: %s\n", a.v[0], strerror(errno));
        _exit(127);
    }
    close(errfd);
    strv_free(&a);
    h->pid = pid;
    h->runs++;
    h->t_start = now_s();
    h->run_base = h->log.len;
    h->frozen_len = 0;
    h->parsed = false;
    h->t_output = h->t_start;
    memset(h->kill_fired, 0, sizeof(h->kill_fired));
    memset(h->kill_scan, 0, sizeof(h->kill_scan));
    memset(h->kill_anchor, 0, sizeof(h->kill_anchor));
    h->exit_state[0] = '\0';
    h->exit_seen_by = -1;
    h->t_ready = h->t_end = 0;
    h->ready_announced = h->end_announced = false;
    h->term_sent = false;
    h->end = END_NONE;
    h->errs_reported = 0;
    h->follow_pos = 0;
    memset(&h->rep, 0, sizeof(h->rep));
    return true;
}

/* Read whatever QEMU appended to the serial log. */
static void read_log(struct host *h)
{
    if (h->logfd < 0) {
        h->logfd = open(h->hp.log, O_RDONLY | O_CLOEXEC);
        if (h->logfd < 0) {
            return;     /* QEMU has not created it yet */
        }
    }
    char tmp[65536];
    size_t before = h->log.len;
    for (;;) {
        ssize_t r = read(h->logfd, tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        buf_append(&h->log, tmp, (size_t)r);
    }
    if (h->log.len == before && h->parsed) {
        return;
    }
    if (h->log.len != before) {
        h->t_output = now_s();
    }
    h->parsed = true;
    /* after an injected SIGKILL nothing later belongs to that run */
    size_t len = h->frozen_len ? h->frozen_len : h->log.len;
    parse_log(h->log.p + h->run_base, len - h->run_base, &h->rep);
}

/* ------------------------------------------------------------------ */
/* usage                                                               */

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [OPTIONS] -- COMMAND...     run COMMAND in every guest\n"
"       " PROG " [OPTIONS] --job FILE        run a script in every guest\n"
"       " PROG " [OPTIONS] --interactive     boot guests, keep them up\n"
"       " PROG " console WORKDIR I           attach to host I's console\n"
"       " PROG " qmp WORKDIR I CMD [ARGS]     one QMP command to host I\n"
"       " PROG " selftest                    check the built-in parsers\n"
"\n"
"Guests and paths:\n"
"  -n, --hosts N           number of guests (default 2, max %d)\n"
"  -w, --workdir DIR       work directory (default: new /tmp/cxlpod-XXXXXX)\n"
"      --qemu PATH         QEMU binary ($CXLPOD_QEMU, else\n"
"                          $TOP/build/qemu/qemu-system-x86_64)\n"
"      --kernel PATH       guest kernel ($CXLPOD_KERNEL, else newest\n"
"                          $TOP/build/guest/kernel-*/boot/vmlinuz-*)\n"
"      --initrd PATH       guest initramfs ($CXLPOD_INITRD, else\n"
"                          $TOP/build/guest/initramfs.cpio.gz)\n"
"      --accel auto|tcg|kvm  (default auto: TCG unless CXLPOD_TRY_KVM=1 and\n"
"                          a KVM probe passes)\n"
"      --mem SIZE          guest RAM (default 512M)\n"
"      --smp N             guest vCPUs (default 2)\n"
"      --append ARGS       extra kernel command line\n"
"      --qemu-arg ARG      extra QEMU argument (repeatable)\n"
"      --stagger MS        delay between guest starts (default 0)\n"
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
"\n"
"Jobs and checks:\n"
"      --job FILE          shell script to run in every guest\n"
"      --job-host I:FILE   script for host I only (overrides the common job)\n"
"      --timeout SECONDS   kill everything after this (default 300;\n"
"                          none in --interactive unless given; 0 = none)\n"
"      --boot-timeout SECONDS  stop a guest that has not reached its ready\n"
"                          marker this long after its QEMU started (default\n"
"                          %d; none in --interactive unless given; 0 = none)\n"
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
    OPT_RESTARTS, OPT_SEED, OPT_STALL_TIMEOUT,
};

static const struct option long_opts[] = {
    { "hosts", required_argument, NULL, 'n' },
    { "workdir", required_argument, NULL, 'w' },
    { "qemu", required_argument, NULL, OPT_QEMU },
    { "kernel", required_argument, NULL, OPT_KERNEL },
    { "initrd", required_argument, NULL, OPT_INITRD },
    { "accel", required_argument, NULL, OPT_ACCEL },
    { "pool", required_argument, NULL, OPT_POOL },
    { "size", required_argument, NULL, OPT_SIZE },
    { "coherent-size", required_argument, NULL, OPT_COHERENT },
    { "latency-ns", required_argument, NULL, OPT_LATENCY },
    { "max-hosts", required_argument, NULL, OPT_MAX_HOSTS },
    { "device", required_argument, NULL, OPT_DEVICE },
    { "device-opt", required_argument, NULL, OPT_DEVICE_OPT },
    { "qemu-arg", required_argument, NULL, OPT_QEMU_ARG },
    { "mem", required_argument, NULL, OPT_MEM },
    { "smp", required_argument, NULL, OPT_SMP },
    { "append", required_argument, NULL, OPT_APPEND },
    { "job", required_argument, NULL, OPT_JOB },
    { "job-host", required_argument, NULL, OPT_JOB_HOST },
    { "interactive", no_argument, NULL, OPT_INTERACTIVE },
    { "timeout", required_argument, NULL, OPT_TIMEOUT },
    { "boot-timeout", required_argument, NULL, OPT_BOOT_TIMEOUT },
    { "kill", required_argument, NULL, OPT_KILL },
    { "restart", required_argument, NULL, OPT_RESTART },
    { "restarts", required_argument, NULL, OPT_RESTARTS },
    { "seed", required_argument, NULL, OPT_SEED },
    { "stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT },
    { "stagger", required_argument, NULL, OPT_STAGGER },
    { "follow", no_argument, NULL, 'f' },
    { "json", no_argument, NULL, OPT_JSON },
    { "dry-run", no_argument, NULL, OPT_DRY_RUN },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static void bad(const char *opt, const char *val, const char *why)
    __attribute__((noreturn));
static void bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, PROG ": error: bad %s '%s': %s\n", opt, val, why);
    fprintf(stderr, "try '" PROG " --help'\n");
    exit(EXIT_USAGE);
}

/* Parse the command line into *o.  Returns normally or exits. */
static void parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    o->nhosts = 2;
    o->accel = ACCEL_AUTO;
    o->size = 256 * MIB;
    o->coherent_size = DEFAULT_COHERENT_SIZE;
    o->latency_ns = -1;
    o->device = DEFAULT_DEVICE;
    o->mem = xstrdup("512M");
    o->smp = 2;
    o->timeout_s = 300;
    o->boot_timeout_s = DEFAULT_BOOT_TIMEOUT_S;
    o->restarts = 1;
    bool restarts_given = false;

    long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+n:w:fqh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!parse_int(optarg, 1, MAX_HOSTS, &v)) {
                bad("--hosts", optarg, "need a number 1..32");
            }
            o->nhosts = (int)v;
            break;
        case 'w':
            o->workdir = xstrdup(optarg);
            o->workdir_given = true;
            break;
        case OPT_QEMU:
            o->qemu = xstrdup(optarg);
            break;
        case OPT_KERNEL:
            o->kernel = xstrdup(optarg);
            break;
        case OPT_INITRD:
            o->initrd = xstrdup(optarg);
            break;
        case OPT_ACCEL:
            if (!strcmp(optarg, "auto")) {
                o->accel = ACCEL_AUTO;
            } else if (!strcmp(optarg, "tcg")) {
                o->accel = ACCEL_TCG;
            } else if (!strcmp(optarg, "kvm")) {
                o->accel = ACCEL_KVM;
            } else {
                bad("--accel", optarg, "expected auto, tcg or kvm");
            }
            break;
        case OPT_POOL:
            o->pool = xstrdup(optarg);
            break;
        case OPT_SIZE:
            if (!parse_size(optarg, &o->size) || o->size == 0) {
                bad("--size", optarg, "expected a size such as 256M or 1G");
            }
            if (o->size % POOL_ALIGN) {
                bad("--size", optarg, "must be a multiple of 256 MiB");
            }
            break;
        case OPT_COHERENT:
            if (!parse_size(optarg, &o->coherent_size)) {
                bad("--coherent-size", optarg, "expected a size such as 64M");
            }
            o->coherent_size_given = true;
            break;
        case OPT_LATENCY:
            if (!parse_int(optarg, 0, 1000000000L, &v)) {
                bad("--latency-ns", optarg, "need a number of nanoseconds");
            }
            o->latency_ns = v;
            break;
        case OPT_MAX_HOSTS:
            if (!parse_int(optarg, 1, MAX_HOSTS, &v)) {
                bad("--max-hosts", optarg, "need a number 1..32");
            }
            o->max_hosts = (int)v;
            break;
        case OPT_DEVICE:
            if (!strcmp(optarg, "cxl-type3")) {
                o->device = DEV_CXL_TYPE3;
            } else if (!strcmp(optarg, "cxl-shm")) {
                o->device = DEV_CXL_SHM;
            } else {
                bad("--device", optarg, "expected cxl-type3 or cxl-shm");
            }
            break;
        case OPT_DEVICE_OPT: {
            const char *kv;
            int dh = device_opt_host(optarg, &kv);
            if (!strchr(kv, '=') || kv[0] == '=') {
                bad("--device-opt", optarg, "expected KEY=VALUE or I:KEY=VALUE");
            }
            if (dh >= MAX_HOSTS) {
                bad("--device-opt", optarg, "host id before ':' must be 0..31");
            }
            strv_add(&o->device_opts, optarg);
            break;
        }
        case OPT_QEMU_ARG:
            strv_add(&o->qemu_args, optarg);
            break;
        case OPT_MEM: {
            uint64_t m;
            if (!parse_size(optarg, &m) || m < 64 * MIB) {
                bad("--mem", optarg, "expected a size of at least 64M");
            }
            free(o->mem);
            o->mem = fmt_size(m);
            break;
        }
        case OPT_SMP:
            if (!parse_int(optarg, 1, 64, &v)) {
                bad("--smp", optarg, "need a number 1..64");
            }
            o->smp = (int)v;
            break;
        case OPT_APPEND:
            o->append = xstrdup(optarg);
            break;
        case OPT_JOB:
            o->job_file = xstrdup(optarg);
            break;
        case OPT_JOB_HOST: {
            const char *colon = strchr(optarg, ':');
            char *hs = colon ? strndup(optarg, (size_t)(colon - optarg)) : NULL;
            bool ok = hs && parse_int(hs, 0, MAX_HOSTS - 1, &v) && colon[1];
            free(hs);
            if (!ok) {
                bad("--job-host", optarg, "expected I:FILE");
            }
            o->host_jobs = xrealloc(o->host_jobs,
                                    (o->n_host_jobs + 1) * sizeof(*o->host_jobs));
            o->host_jobs[o->n_host_jobs].host = (int)v;
            o->host_jobs[o->n_host_jobs].file = xstrdup(colon + 1);
            o->n_host_jobs++;
            break;
        }
        case OPT_INTERACTIVE:
            o->interactive = true;
            break;
        case OPT_TIMEOUT:
            if (!parse_seconds(optarg, &o->timeout_s)) {
                bad("--timeout", optarg, "need a number of seconds");
            }
            o->timeout_given = true;
            break;
        case OPT_BOOT_TIMEOUT:
            if (!parse_seconds(optarg, &o->boot_timeout_s)) {
                bad("--boot-timeout", optarg, "need a number of seconds");
            }
            o->boot_timeout_given = true;
            break;
        case OPT_KILL: {
            struct kill_spec k;
            const char *why;
            if (!parse_kill(optarg, &k, &why)) {
                bad("--kill", optarg, why);
            }
            if (o->n_kills >= 16) {
                bad("--kill", optarg, "at most 16 --kill options");
            }
            o->kills = xrealloc(o->kills, (o->n_kills + 1) * sizeof(*o->kills));
            o->kills[o->n_kills++] = k;
            break;
        }
        case OPT_RESTART:
            if (!parse_int(optarg, 0, MAX_HOSTS - 1, &v)) {
                bad("--restart", optarg, "need a host id");
            }
            o->restart[v] = true;
            break;
        case OPT_RESTARTS:
            if (!parse_int(optarg, 1, 100000, &v)) {
                bad("--restarts", optarg, "need a number 1..100000");
            }
            o->restarts = (int)v;
            restarts_given = true;
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long sv = strtoull(optarg, &end, 0);
            if (errno || !*optarg || *end || *optarg == '-') {
                bad("--seed", optarg, "need an unsigned number");
            }
            o->seed = sv;
            o->seed_given = true;
            break;
        }
        case OPT_STALL_TIMEOUT:
            if (!parse_seconds(optarg, &o->stall_timeout_s)) {
                bad("--stall-timeout", optarg, "need a number of seconds");
            }
            break;
        case OPT_STAGGER:
            if (!parse_int(optarg, 0, 3600000, &v)) {
                bad("--stagger", optarg, "need milliseconds");
            }
            o->stagger_ms = v;
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
    }
    for (int i = optind; i < argc; i++) {
        strv_add(&o->job_cmd, argv[i]);
    }

    /* cross-checks */
    bool has_job = o->job_cmd.n > 0 || o->job_file || o->n_host_jobs > 0;
    if (o->job_cmd.n && o->job_file) {
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
    if (o->n_host_jobs > 0 && !o->job_file && !o->job_cmd.n) {
        /* every host needs a job */
        for (int h = 0; h < o->nhosts; h++) {
            bool found = false;
            for (int i = 0; i < o->n_host_jobs; i++) {
                found |= o->host_jobs[i].host == h;
            }
            if (!found) {
                die(EXIT_USAGE, "host %d has no job: give --job-host %d:FILE "
                    "or a common --job / -- COMMAND", h, h);
            }
        }
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
    if (restarts_given) {
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
    for (int i = 0; i < o->device_opts.n; i++) {
        const char *kv;
        int dh = device_opt_host(o->device_opts.v[i], &kv);
        if (dh >= o->nhosts) {
            die(EXIT_USAGE, "--device-opt %s: there are only %d hosts (0..%d)",
                o->device_opts.v[i], o->nhosts, o->nhosts - 1);
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
    if (o->max_hosts && o->max_hosts < o->nhosts) {
        die(EXIT_USAGE, "--max-hosts %d is less than the %d hosts", o->max_hosts,
            o->nhosts);
    }
    if (o->interactive && !o->timeout_given) {
        o->timeout_s = 0;
    }
    if (o->interactive && !o->boot_timeout_given) {
        o->boot_timeout_s = 0;
    }
}

/* Fill in default paths and check that everything exists. */
static void resolve_paths(struct opts *o)
{
    char *top = find_top();
    const char *e;
    if (!o->qemu && (e = getenv("CXLPOD_QEMU")) && *e) {
        o->qemu = xstrdup(e);
    }
    if (!o->qemu && top) {
        o->qemu = xasprintf("%s/build/qemu/qemu-system-x86_64", top);
    }
    if (!o->kernel && (e = getenv("CXLPOD_KERNEL")) && *e) {
        o->kernel = xstrdup(e);
    }
    if (!o->kernel && top) {
        o->kernel = find_default_kernel(top);
        if (!o->kernel) {
            die(EXIT_USAGE, "no guest kernel: nothing matches "
                "%s/build/guest/kernel-*/boot/vmlinuz-* (build the guest image "
                "with scripts/build-guest.sh, or give --kernel / CXLPOD_KERNEL)",
                top);
        }
    }
    if (!o->initrd && (e = getenv("CXLPOD_INITRD")) && *e) {
        o->initrd = xstrdup(e);
    }
    if (!o->initrd && top) {
        o->initrd = xasprintf("%s/build/guest/initramfs.cpio.gz", top);
    }
    if (!o->qemu || !o->kernel || !o->initrd) {
        die(EXIT_USAGE, "cannot find the cxlpod repository from the executable's "
            "location; set CXLPOD_TOP or give --qemu, --kernel and --initrd");
    }
    if (access(o->qemu, X_OK) != 0) {
        die(EXIT_USAGE, "QEMU binary %s: %s (build it with scripts/build-qemu.sh, "
            "or give --qemu / CXLPOD_QEMU)", o->qemu, strerror(errno));
    }
    if (!is_file(o->kernel)) {
        die(EXIT_USAGE, "guest kernel %s: %s (give --kernel / CXLPOD_KERNEL)",
            o->kernel, path_exists(o->kernel) ? "not a regular file"
                                              : strerror(errno));
    }
    if (!is_file(o->initrd)) {
        die(EXIT_USAGE, "guest initramfs %s: %s (build the guest image with "
            "scripts/build-guest.sh, or give --initrd / CXLPOD_INITRD)",
            o->initrd, path_exists(o->initrd) ? "not a regular file"
                                              : strerror(errno));
    }
    if (o->job_file && !is_file(o->job_file)) {
        die(EXIT_USAGE, "job file %s: %s", o->job_file,
            path_exists(o->job_file) ? "not a regular file" : strerror(errno));
    }
    for (int i = 0; i < o->n_host_jobs; i++) {
        if (!is_file(o->host_jobs[i].file)) {
            die(EXIT_USAGE, "job file %s (host %d): %s", o->host_jobs[i].file,
                o->host_jobs[i].host, strerror(errno ? errno : EINVAL));
        }
    }
    free(top);
}

static void make_workdir(struct opts *o)
{
    if (o->workdir_given) {
        if (mkdir(o->workdir, 0755) < 0 && errno != EEXIST) {
            die(EXIT_USAGE, "cannot create work dir %s: %s", o->workdir,
                strerror(errno));
        }
        if (!is_dir(o->workdir)) {
            die(EXIT_USAGE, "work dir %s is not a directory", o->workdir);
        }
        char *abs = realpath(o->workdir, NULL);
        if (abs) {
            free(o->workdir);
            o->workdir = abs;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) {
            tmp = "/tmp";
        }
        char *t = xasprintf("%s/cxlpod-XXXXXX", tmp);
        if (!mkdtemp(t)) {
            die(EXIT_USAGE, "cannot create a work dir %s: %s", t, strerror(errno));
        }
        o->workdir = t;
    }
    /* unix socket paths are limited to sizeof(sun_path) */
    char *probe = xasprintf("%s/host%d.console", o->workdir, o->nhosts - 1);
    if (strlen(probe) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        die(EXIT_USAGE, "work dir path %s is too long for unix sockets "
            "(%zu bytes max); use a shorter -w", o->workdir,
            sizeof(((struct sockaddr_un *)0)->sun_path) - 20);
    }
    free(probe);
    if (!o->pool) {
        o->pool = xasprintf("%s/pool.img", o->workdir);
    }
}

/* cxl-type3 maps the file as is: make sure it exists with the right size
 * before N QEMUs race to create it. */
static void prepare_pool(const struct opts *o)
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
static bool prepare_jobs(const struct opts *o, struct host *hosts)
{
    char *common = NULL;
    size_t common_len = 0;
    if (o->job_file) {
        common = read_file(o->job_file, &common_len);
        if (!common) {
            die(EXIT_USAGE, "cannot read job file %s: %s", o->job_file,
                strerror(errno));
        }
    } else if (o->job_cmd.n) {
        struct buf b = { 0 };
        buf_puts(&b, "#!/bin/sh\n");
        for (int i = 0; i < o->job_cmd.n; i++) {
            if (i) {
                buf_puts(&b, " ");
            }
            buf_puts(&b, o->job_cmd.v[i]);
        }
        buf_puts(&b, "\n");
        common = b.p;
        common_len = b.len;
    }
    bool any = false;
    for (int h = 0; h < o->nhosts; h++) {
        const char *data = common;
        size_t len = common_len;
        char *own = NULL;
        for (int i = 0; i < o->n_host_jobs; i++) {
            if (o->host_jobs[i].host == h) {
                free(own);
                own = read_file(o->host_jobs[i].file, &len);
                if (!own) {
                    die(EXIT_USAGE, "cannot read job file %s: %s",
                        o->host_jobs[i].file, strerror(errno));
                }
                data = own;
            }
        }
        unlink(hosts[h].hp.job);
        if (data) {
            if (!write_file(hosts[h].hp.job, data, len, 0755)) {
                die(EXIT_USAGE, "cannot write %s: %s", hosts[h].hp.job,
                    strerror(errno));
            }
            any = true;
        }
        free(own);
    }
    free(common);
    return any;
}

/* ------------------------------------------------------------------ */
/* the run                                                             */

static void print_prefixed(FILE *f, int host, const char *data, size_t len)
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
static void follow_output(struct host *h, bool final)
{
    const struct guest_report *r = &h->rep;
    if (!r->begun) {
        return;
    }
    const char *base = h->log.p + h->run_base;
    size_t avail = h->log.len - h->run_base;
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

static void announce_errors(struct host *h, bool quiet)
{
    const char *base = h->log.p + h->run_base;
    size_t len = h->log.len - h->run_base;
    /* only complete lines: the last one may still be arriving */
    while (len > 0 && base[len - 1] != '\n') {
        len--;
    }
    int n;
    char *errs = collect_errors(base, len, &n);
    const char *p = errs;
    for (int idx = 0; *p; idx++) {
        const char *eol = strchr(p, '\n');
        if ((size_t)idx >= h->errs_reported && !quiet) {
            msg("host %d: guest error: %.*s", h->id, (int)(eol - p), p);
        }
        p = eol + 1;
    }
    if ((size_t)n > h->errs_reported) {
        h->errs_reported = (size_t)n;
    }
    free(errs);
}

static void send_term(struct host *h, double t)
{
    if (h->pid > 0 && !h->term_sent) {
        kill_qemu(h->pid, SIGTERM);
        h->term_sent = true;
        h->t_term = t;
    }
}

/* On stderr: the tail of host h's qemu-err and of its console */
static void show_qemu_tails(const struct host *h, int console_lines)
{
    show_tail(h->hp.err, 12, "  qemu-err| ");
    if (h->log.len > h->run_base) {
        fprintf(stderr, "  last console lines:\n");
        show_tail(h->hp.log, console_lines, "  console| ");
    }
}

/* ------------------------------------------------------------------ */
/* what the survivors see: their host table over QMP                   */

static int unix_connect(const char *path);
static char *read_line_fd(int fd, struct buf *pending, int timeout_ms);
static char *qmp_exchange(int s, struct buf *pending, const char *cmd);

#define DETECT_LIMIT_S 5.0  /* a kill not in a survivor's table by then */
#define DETECT_POLL_MS 2
#define LEFT_LIMIT_S 2.0    /* a clean exit not in the table by then */

/* Kill specs of a host fire on its runs 1..this. */
static int kill_runs(const struct opts *o, int host)
{
    return o->restart[host] ? o->restarts : 1;
}

/* A running host other than `not` whose QMP can be asked (-1: none). */
static int pick_survivor(int not, int skip)
{
    for (int i = 0; i < g_nhosts; i++) {
        if (i != not && i != skip && g_hosts[i].pid > 0 &&
            !g_hosts[i].term_sent && !g_hosts[i].rep.ended) {
            return i;
        }
    }
    return -1;
}

/* A QMP session with host i (greeting and capabilities done); -1 if not. */
static int qmp_open(int i, struct buf *pending)
{
    int s = unix_connect(g_hosts[i].hp.qmp);
    if (s < 0) {
        return -1;
    }
    char *g = read_line_fd(s, pending, 2000);
    bool ok = g && strstr(g, "\"QMP\"");
    free(g);
    if (ok) {
        char *r = qmp_exchange(s, pending, "{\"execute\":\"qmp_capabilities\"}");
        ok = r && strstr(r, "\"return\"");
        free(r);
    }
    if (!ok) {
        close(s);
        return -1;
    }
    return s;
}

/*
 * Ask survivor `sv` for host `host`'s state (query-cxl-shm) until it is
 * not `from`, or until `deadline`.  Returns 1 and the state, generation
 * and time of the reply that showed the change, 0 on the deadline (the
 * last state seen), -1 if QMP failed.
 */
static int watch_host_state(int sv, int host, const char *from, double deadline,
                            char *state, size_t n, uint64_t *gen, double *t_seen)
{
    struct buf pending = { 0 };
    int s = qmp_open(sv, &pending);
    int ret = -1;
    snprintf(state, n, "?");
    if (s < 0) {
        free(pending.p);
        return -1;
    }
    for (;;) {
        char *r = qmp_exchange(s, &pending, "{\"execute\":\"query-cxl-shm\"}");
        double t = now_s();
        if (!r || !qmp_host_state(r, host, state, n, gen)) {
            free(r);
            break;
        }
        free(r);
        if (strcmp(state, from)) {
            *t_seen = t;
            ret = 1;
            break;
        }
        if (t > deadline) {
            ret = 0;
            break;
        }
        poll(NULL, 0, DETECT_POLL_MS);
    }
    close(s);
    free(pending.p);
    return ret;
}

/* Right after the SIGKILL of host h at tk: how long until a survivor's
 * host table says it failed. */
static void detect_kill(struct host *h, struct kill_rec *kr, double tk, bool quiet)
{
    char state[16];
    uint64_t gen = 0;
    double ts = 0;
    int sv = pick_survivor(h->id, -1);
    int r = sv < 0 ? -1 : watch_host_state(sv, h->id, "live", tk + DETECT_LIMIT_S,
                                           state, sizeof(state), &gen, &ts);
    if (r < 0 && sv >= 0) {
        int sv2 = pick_survivor(h->id, sv);     /* that one did not answer */
        if (sv2 >= 0) {
            sv = sv2;
            r = watch_host_state(sv, h->id, "live", tk + DETECT_LIMIT_S,
                                 state, sizeof(state), &gen, &ts);
        }
    }
    if (r < 0) {
        if (sv >= 0 || !quiet) {
            msg("host %d: no survivor's QMP answered: failure detection not "
                "measured", h->id);
        }
        return;
    }
    kr->seen_by = sv;
    kr->gen = gen;
    if (r == 1 && !strcmp(state, "failed")) {
        kr->detect_s = ts - tk;
        if (!quiet) {
            msg("host %d: host %d's table shows it failed (generation %llu) "
                "%.1f ms after the SIGKILL", h->id, sv, (unsigned long long)gen,
                kr->detect_s * 1e3);
        }
    } else {
        msg("host %d: host %d's table shows it %s, not failed, %.1f s after "
            "the SIGKILL", h->id, sv, state, now_s() - tk);
    }
}

/* Host h's QEMU exited by itself: what a survivor's table says (left). */
static void check_clean_exit(struct host *h, bool quiet)
{
    char state[16];
    uint64_t gen = 0;
    double ts;
    int sv = pick_survivor(h->id, -1);
    if (sv < 0) {
        return;     /* nobody left to ask */
    }
    int r = watch_host_state(sv, h->id, "live", now_s() + LEFT_LIMIT_S, state,
                             sizeof(state), &gen, &ts);
    if (r < 0) {
        return;
    }
    snprintf(h->exit_state, sizeof(h->exit_state), "%s", state);
    h->exit_seen_by = sv;
    if (strcmp(state, "left")) {
        msg("host %d: exited cleanly but host %d's table shows it %s, not left",
            h->id, sv, state);
    } else if (!quiet) {
        msg("host %d: exited; host %d's table shows it left (generation %llu)",
            h->id, sv, (unsigned long long)gen);
    }
}

/*
 * After the run: the host table as the pool file holds it
 * (docs/pool-format.md), which also covers the host that exited last,
 * when no survivor's QMP was left to ask.  Returns the number of entries
 * read into state[] / gen[] (0 if the file is not a pool of version 2).
 */
#define POOL_MAGIC "CXLPOOL"
static int read_pool_hosts(const char *pool, int n, unsigned *state, uint64_t *gen)
{
    int fd = open(pool, O_RDONLY | O_CLOEXEC);
    unsigned char hdr[0x50];
    if (fd < 0) {
        return 0;
    }
    uint32_t version = 0, max_hosts = 0, hoff = 0, hsize = 0;
    if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        memcmp(hdr, POOL_MAGIC, 8)) {
        close(fd);
        return 0;
    }
    memcpy(&version, hdr + 0x08, 4);
    memcpy(&max_hosts, hdr + 0x2c, 4);
    memcpy(&hoff, hdr + 0x30, 4);
    memcpy(&hsize, hdr + 0x34, 4);
    if (version != 2 || hsize < 16 || max_hosts > MAX_HOSTS) {
        close(fd);
        return 0;
    }
    int got = 0;
    for (int i = 0; i < n && i < (int)max_hosts; i++) {
        unsigned char e[16];
        if (pread(fd, e, sizeof(e), (off_t)hoff + (off_t)hsize * i) != 16) {
            break;
        }
        uint32_t st;
        memcpy(&st, e, 4);
        memcpy(&gen[i], e + 8, 8);
        state[i] = st;
        got++;
    }
    close(fd);
    return got;
}

static const char *pool_state_name(unsigned st)
{
    static const char *const names[] = { "free", "live", "failed", "left" };
    return st < 4 ? names[st] : "?";
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run(struct opts *o)
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
        buf_append(&g_hosts[i].log, "", 0);     /* never a NULL buffer */
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
        msg("%d host%s, pool %s (%s, %llu MiB), QEMU %s", o->nhosts,
            o->nhosts > 1 ? "s" : "", o->pool, device_name(o->device),
            (unsigned long long)(o->size / MIB), o->qemu);
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

    for (;;) {
        double t = now_s();

        /* start hosts (all at once, or --stagger apart) */
        while (started < o->nhosts && !interrupted && !timed_out &&
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
                        fire = h->log.len > from &&
                               memmem(h->log.p + from, h->log.len - from,
                                      ks->pattern, plen) != NULL;
                        h->kill_scan[k] = h->log.len;
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
                        h->frozen_len = h->log.len;
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
    struct buf json = { 0 };
    buf_puts(&json, "{\"workdir\":");
    json_string(&json, o->workdir, strlen(o->workdir));
    {
        char tmp[128];
        snprintf(tmp, sizeof(tmp), ",\"accel\":\"%s\",\"hosts\":%d,"
                 "\"wall_s\":%.2f,\"results\":[", accel_name(accel), o->nhosts,
                 wall);
        buf_puts(&json, tmp);
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
            size_t loglen = (h->frozen_len ? h->frozen_len : h->log.len) -
                            h->run_base;
            bool partial = !r.ended;
            if (partial) {
                r.ended = true;
                r.out_end = loglen;
            }
            size_t n;
            char *out = extract_output(h->log.p + h->run_base, &r, &n);
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
        char *errs = collect_errors(h->log.p + h->run_base,
                                    h->log.len - h->run_base, &nerr);
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
        buf_puts(&json, tmp);
        if (h->rep.ended) {
            snprintf(tmp, sizeof(tmp), "%d", h->rep.rc);
        } else {
            snprintf(tmp, sizeof(tmp), "null");
        }
        buf_puts(&json, tmp);
        snprintf(tmp, sizeof(tmp), ",\"killed\":%s,\"restarted\":%s,"
                 "\"boot_s\":", h->killed_once ? "true" : "false",
                 h->killed_once && h->runs > 1 ? "true" : "false");
        buf_puts(&json, tmp);
        if (h->t_ready > 0) {
            snprintf(tmp, sizeof(tmp), "%.2f", h->t_ready - h->t_start);
        } else {
            snprintf(tmp, sizeof(tmp), "null");
        }
        buf_puts(&json, tmp);
        buf_puts(&json, ",\"qemu_exit\":");
        json_string(&json, qs, strlen(qs));
        snprintf(tmp, sizeof(tmp), ",\"kills\":%d,\"runs\":%d,"
                 "\"exit_table_state\":", h->kills, h->runs);
        buf_puts(&json, tmp);
        if (h->exit_state[0]) {
            json_string(&json, h->exit_state, strlen(h->exit_state));
        } else {
            buf_puts(&json, "null");
        }
        buf_puts(&json, ",\"errors\":[");
        const char *p = errs;
        bool first = true;
        while (*p) {
            const char *eol = strchr(p, '\n');
            size_t n = eol ? (size_t)(eol - p) : strlen(p);
            if (!first) {
                buf_puts(&json, ",");
            }
            first = false;
            json_string(&json, p, n);
            p += n + (eol ? 1 : 0);
        }
        buf_puts(&json, "]}");
        free(errs);
    }
    buf_puts(&json, "]");

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
            buf_puts(&json, ",\"pool_hosts\":[");
            for (int i = 0; i < np; i++) {
                /* every QEMU is gone now: "live" means it died unnoticed */
                printf(" host %d %s gen %llu%s", i, pool_state_name(pst[i]),
                       (unsigned long long)pgen[i], i + 1 < np ? "," : "\n");
                char tmp[128];
                snprintf(tmp, sizeof(tmp), "%s{\"host\":%d,\"state\":\"%s\","
                         "\"generation\":%llu}", i ? "," : "", i,
                         pool_state_name(pst[i]), (unsigned long long)pgen[i]);
                buf_puts(&json, tmp);
            }
            buf_puts(&json, "]");
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
        buf_puts(&json, tmp);
        buf_puts(&json, ",\"detect_ms_max\":");
        if (nlat) {
            snprintf(tmp, sizeof(tmp), "%.3f,\"detect_ms_median\":%.3f",
                     mx * 1e3, med * 1e3);
        } else {
            snprintf(tmp, sizeof(tmp), "null,\"detect_ms_median\":null");
        }
        buf_puts(&json, tmp);
        snprintf(tmp, sizeof(tmp), ",\"kills_seen\":%d,\"kills\":[", nlat);
        buf_puts(&json, tmp);
        for (int k = 0; k < g_n_kill_recs; k++) {
            const struct kill_rec *kr = &g_kill_recs[k];
            snprintf(tmp, sizeof(tmp), "%s{\"host\":%d,\"run\":%d,\"t_s\":%.3f,"
                     "\"after_start_s\":%.3f,\"delay_s\":", k ? "," : "",
                     kr->host, kr->run, kr->t, kr->after_s);
            buf_puts(&json, tmp);
            if (kr->delay_s >= 0) {
                snprintf(tmp, sizeof(tmp), "%.3f", kr->delay_s);
            } else {
                snprintf(tmp, sizeof(tmp), "null");
            }
            buf_puts(&json, tmp);
            snprintf(tmp, sizeof(tmp), ",\"seen_by\":%d,\"generation\":%llu,"
                     "\"detect_ms\":", kr->seen_by, (unsigned long long)kr->gen);
            buf_puts(&json, tmp);
            if (kr->detect_s >= 0) {
                snprintf(tmp, sizeof(tmp), "%.3f}", kr->detect_s * 1e3);
            } else {
                snprintf(tmp, sizeof(tmp), "null}");
            }
            buf_puts(&json, tmp);
        }
        buf_puts(&json, "]");
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
        buf_puts(&json, tmp);
    }
    fflush(stdout);
    if (!o->quiet) {
        msg("wall time %.1f s; logs in %s", wall, o->workdir);
    }
    if (o->json) {
        printf("%s\n", json.p);
    }
    fflush(stdout);
    free(json.p);
    return status;
}

/* ------------------------------------------------------------------ */
/* console subcommand                                                  */

static struct termios g_saved_tio;
static bool g_tio_saved;

static void restore_tty(void)
{
    if (g_tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_tio);
        g_tio_saved = false;
    }
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN) {
                struct pollfd pf = { .fd = fd, .events = POLLOUT };
                poll(&pf, 1, 1000);
                continue;
            }
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static int console_main(int argc, char **argv)
{
    long host;
    if (argc != 4 || !parse_int(argv[3], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, "usage: " PROG " console WORKDIR I\n");
        return EXIT_USAGE;
    }
    char *path = xasprintf("%s/host%ld.console", argv[2], host);
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sun.sun_path)) {
        die(EXIT_USAGE, "socket path %s is too long", path);
    }
    strcpy(sun.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        die(EXIT_USAGE, "socket: %s", strerror(errno));
    }
    if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        die(EXIT_USAGE, "cannot connect to %s: %s (is host %ld running? "
            "start it with " PROG " --interactive)", path, strerror(errno), host);
    }
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, PROG ": connected to host %ld console (%s); "
            "Ctrl-] detaches, press Enter for a prompt\n", host, path);
    fprintf(stderr, PROG ": (the console takes one client at a time; a second "
            "client waits until the first detaches)\n");
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_saved_tio) == 0) {
        struct termios raw = g_saved_tio;
        cfmakeraw(&raw);
        g_tio_saved = true;
        atexit(restore_tty);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
    }
    struct pollfd pf[2] = {
        { .fd = STDIN_FILENO, .events = POLLIN },
        { .fd = s, .events = POLLIN },
    };
    char b[4096];
    const char *why = "detached";
    bool stdin_open = true;
    for (;;) {
        pf[0].fd = stdin_open ? STDIN_FILENO : -1;
        /* after stdin ended (piped input), relay guest output until it has
         * been quiet for CONSOLE_LINGER_MS, then leave */
        int r = poll(pf, 2, stdin_open ? -1 : CONSOLE_LINGER_MS);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            why = "poll failed";
            break;
        }
        if (r == 0) {
            why = "input ended";
            break;
        }
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(s, b, sizeof(b));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n <= 0) {
                why = "the guest's console closed (QEMU exited?)";
                break;
            }
            if (!write_all(STDOUT_FILENO, b, (size_t)n)) {
                why = "cannot write to the terminal";
                break;
            }
        }
        if (stdin_open && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(STDIN_FILENO, b, sizeof(b));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n <= 0) {
                stdin_open = false;
                continue;
            }
            char *esc = g_tio_saved ? memchr(b, 0x1d, (size_t)n) : NULL;
            size_t send = esc ? (size_t)(esc - b) : (size_t)n;
            if (send && !write_all(s, b, send)) {
                why = "the guest's console closed";
                break;
            }
            if (esc) {
                break;
            }
        }
    }
    restore_tty();
    fprintf(stderr, "\r\n" PROG ": %s\n", why);
    close(s);
    free(path);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* qmp subcommand                                                      */

static int unix_connect(const char *path)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sun.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return -1;
    }
    if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Read one line (QMP messages are one JSON object per line). */
static char *read_line_fd(int fd, struct buf *pending, int timeout_ms)
{
    for (;;) {
        char *nl = pending->len ? memchr(pending->p, '\n', pending->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - pending->p);
            char *line = xmalloc(n + 1);
            memcpy(line, pending->p, n);
            line[n] = '\0';
            if (n && line[n - 1] == '\r') {
                line[n - 1] = '\0';
            }
            memmove(pending->p, nl + 1, pending->len - n - 1);
            pending->len -= n + 1;
            return line;
        }
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int r = poll(&pf, 1, timeout_ms);
        if (r <= 0) {
            return NULL;
        }
        char tmp[4096];
        ssize_t got = read(fd, tmp, sizeof(tmp));
        if (got <= 0) {
            return NULL;
        }
        buf_append(pending, tmp, (size_t)got);
    }
}

/* Send a command; return the first non-event reply line (or NULL). */
static char *qmp_exchange(int s, struct buf *pending, const char *cmd)
{
    if (!write_all(s, cmd, strlen(cmd)) || !write_all(s, "\n", 1)) {
        return NULL;
    }
    for (;;) {
        char *line = read_line_fd(s, pending, 10000);
        if (!line || !strstr(line, "\"event\"")) {
            return line;
        }
        free(line);
    }
}

static int qmp_main(int argc, char **argv)
{
    long host;
    if (argc < 5 || argc > 6 || !parse_int(argv[3], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, "usage: " PROG " qmp WORKDIR I COMMAND ['{ARGUMENTS}']\n"
                "  e.g. " PROG " qmp /tmp/cxlpod-abc 0 query-status\n");
        return EXIT_USAGE;
    }
    char *path = xasprintf("%s/host%ld.qmp", argv[2], host);
    int s = unix_connect(path);
    if (s < 0) {
        die(EXIT_USAGE, "cannot connect to %s: %s (is host %ld running?)", path,
            strerror(errno), host);
    }
    signal(SIGPIPE, SIG_IGN);
    struct buf pending = { 0 };
    char *greeting = read_line_fd(s, &pending, 10000);
    if (!greeting || !strstr(greeting, "\"QMP\"")) {
        die(EXIT_JOBFAIL, "%s: no QMP greeting", path);
    }
    free(greeting);
    char *r = qmp_exchange(s, &pending, "{\"execute\":\"qmp_capabilities\"}");
    if (!r || !strstr(r, "\"return\"")) {
        die(EXIT_JOBFAIL, "%s: qmp_capabilities failed: %s", path, r ? r : "EOF");
    }
    free(r);
    char *cmd;
    if (argc == 6) {
        cmd = xasprintf("{\"execute\":\"%s\",\"arguments\":%s}", argv[4],
                        argv[5]);
    } else {
        cmd = xasprintf("{\"execute\":\"%s\"}", argv[4]);
    }
    r = qmp_exchange(s, &pending, cmd);
    if (!r) {
        die(EXIT_JOBFAIL, "%s: no reply to %s", path, argv[4]);
    }
    printf("%s\n", r);
    int status = strstr(r, "\"return\"") ? EXIT_OK : EXIT_JOBFAIL;
    free(r);
    free(cmd);
    free(pending.p);
    free(path);
    close(s);
    return status;
}

/* ------------------------------------------------------------------ */
/* selftest subcommand: checks of the parsers, no QEMU needed          */

static int st_fail;
#define CHECK(cond) do { \
        if (!(cond)) { \
            fprintf(stderr, "selftest: %s:%d: check failed: %s\n", __FILE__, \
                    __LINE__, #cond); \
            st_fail++; \
        } \
    } while (0)

static void selftest_parse_args(const char *line, struct opts *o)
{
    char *copy = xstrdup(line);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)PROG;
    for (char *t = strtok(copy, " "); t && argc < 63; t = strtok(NULL, " ")) {
        argv[argc++] = t;
    }
    argv[argc] = NULL;
    parse_args(argc, argv, o);
    /* o keeps pointers only to its own copies */
    free(copy);
}

static int selftest(void)
{
    uint64_t v;
    CHECK(parse_size("256M", &v) && v == 256 * MIB);
    CHECK(parse_size("1G", &v) && v == GIB);
    CHECK(parse_size("1GiB", &v) && v == GIB);
    CHECK(parse_size("512", &v) && v == 512);
    CHECK(parse_size("4k", &v) && v == 4096);
    CHECK(!parse_size("", &v));
    CHECK(!parse_size("M", &v));
    CHECK(!parse_size("12Q", &v));
    CHECK(!parse_size("-1", &v));
    CHECK(!parse_size("99999999999999999999G", &v));
    CHECK(!parse_size("20000000000T", &v));

    char *s = fmt_size(256 * MIB);
    CHECK(!strcmp(s, "256M"));
    free(s);
    s = fmt_size(4 * GIB);
    CHECK(!strcmp(s, "4G"));
    free(s);

    s = qemu_opt_escape("/a,b/c");
    CHECK(!strcmp(s, "/a,,b/c"));
    free(s);

    struct kill_spec k;
    const char *why;
    CHECK(parse_kill("1@hello world", &k, &why) && k.host == 1 &&
          !strcmp(k.pattern, "hello world"));
    free(k.pattern);
    CHECK(parse_kill("0@+2.5", &k, &why) && k.host == 0 && !k.pattern &&
          k.after_s == 2.5);
    CHECK(parse_kill("1@a@b", &k, &why) && !strcmp(k.pattern, "a@b"));
    free(k.pattern);
    CHECK(!parse_kill("x@foo", &k, &why));
    CHECK(!parse_kill("1", &k, &why));
    CHECK(!parse_kill("1@", &k, &why));
    CHECK(!parse_kill("1@+abc", &k, &why));
    CHECK(!parse_kill("99@foo", &k, &why));
    /* random kills */
    CHECK(parse_kill("0@random:0.2-1.5", &k, &why) && k.host == 0 && k.random &&
          !k.pattern && k.min_s == 0.2 && k.max_s == 1.5);
    CHECK(parse_kill("3@random:1-1:CRASH-POINT life=", &k, &why) && k.host == 3 &&
          k.random && k.min_s == 1 && k.max_s == 1 &&
          !strcmp(k.pattern, "CRASH-POINT life="));
    free(k.pattern);
    CHECK(parse_kill("1@random:0-2:a:b-c", &k, &why) && k.max_s == 2 &&
          !strcmp(k.pattern, "a:b-c"));
    free(k.pattern);
    CHECK(!parse_kill("0@random:", &k, &why));
    CHECK(!parse_kill("0@random:1", &k, &why));
    CHECK(!parse_kill("0@random:2-1", &k, &why));
    CHECK(!parse_kill("0@random:a-1", &k, &why));
    CHECK(!parse_kill("0@random:1-", &k, &why));
    CHECK(!parse_kill("0@random:-1-2", &k, &why));
    CHECK(!parse_kill("0@random:0-1:", &k, &why));
    CHECK(!parse_kill("0@random:0:x-1", &k, &why));
    {
        /* delays: inside [MIN, MAX], a function of (seed, host, run, spec) */
        struct kill_spec r = { .host = 0, .random = true, .min_s = 0.5, .max_s = 2 };
        bool differ = false;
        for (int run = 1; run <= 200; run++) {
            double d = kill_delay(&r, 42, run, 0);
            CHECK(d >= 0.5 && d < 2);
            CHECK(d == kill_delay(&r, 42, run, 0));
            differ |= d != kill_delay(&r, 43, run, 0);
        }
        CHECK(differ);
        CHECK(kill_delay(&r, 42, 1, 0) != kill_delay(&r, 42, 2, 0));
        CHECK(kill_delay(&r, 42, 1, 0) != kill_delay(&r, 42, 1, 1));
        r.max_s = 0.5;
        CHECK(kill_delay(&r, 7, 3, 0) == 0.5);
    }

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
        CHECK(qmp_host_state(rep, 0, st, sizeof(st), &g) && !strcmp(st, "failed") &&
              g == 3);
        CHECK(qmp_host_state(rep, 1, st, sizeof(st), &g) && !strcmp(st, "live") &&
              g == 12);
        CHECK(!qmp_host_state(rep, 2, st, sizeof(st), &g));
        CHECK(!qmp_host_state("{\"error\": {\"class\": \"CommandNotFound\"}}", 0,
                              st, sizeof(st), &g));
        CHECK(!qmp_host_state("{\"return\": [{\"hosts\": [{\"host-id\": 0, "
                              "\"state\": \"fa", 0, st, sizeof(st), &g));
        CHECK(!qmp_host_state("", 0, st, sizeof(st), &g));
    }

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
    CHECK(r.ready && !strcmp(r.dax, "dax0.0"));
    CHECK(r.begun && r.ended && r.rc == 0);
    size_t n;
    char *out = extract_output(log1, &r, &n);
    CHECK(!strcmp(out, "hello from 1\n/dev/dax0.0\n"));
    free(out);

    /* every prefix parses without crashing, and END only once complete */
    for (size_t i = 0; i <= strlen(log1); i++) {
        parse_log(log1, i, &r);
        const char *endm = strstr(log1, "@@CXLPOD-END rc=0@@");
        CHECK(r.ended == (i >= (size_t)(endm - log1) + 19));
    }

    const char *log2 = "@@CXLPOD-BEGIN@@\nno newline at end@@CXLPOD-END rc=-3@@\n";
    parse_log(log2, strlen(log2), &r);
    CHECK(r.ended && r.rc == -3 && !r.ready);
    out = extract_output(log2, &r, &n);
    CHECK(!strcmp(out, "no newline at end\n"));
    free(out);

    const char *log3 = "@@CXLPOD-BEGIN@@\n@@CXLPOD-END rc=1@@";
    parse_log(log3, strlen(log3), &r);
    CHECK(r.ended && r.rc == 1);
    out = extract_output(log3, &r, &n);
    CHECK(n == 0);
    free(out);

    /* an END before BEGIN (or a bogus one) does not count */
    const char *log4 = "@@CXLPOD-END rc=0@@\n@@CXLPOD-BEGIN@@\nx @@CXLPOD-END rc=zz@@\n"
                       "@@CXLPOD-END rc=42@@\n";
    parse_log(log4, strlen(log4), &r);
    CHECK(r.ended && r.rc == 42);
    out = extract_output(log4, &r, &n);
    CHECK(!strcmp(out, "x @@CXLPOD-END rc=zz@@\n"));
    free(out);

    const char *log5 = "boot\n@@CXLPOD-ERROR region: commit failed@@\r\nmore\n"
                       "@@CXLPOD-ERROR second";
    int ne;
    char *errs = collect_errors(log5, strlen(log5), &ne);
    CHECK(ne == 2);
    CHECK(!strcmp(errs, "@@CXLPOD-ERROR region: commit failed@@\n"
                        "@@CXLPOD-ERROR second\n"));
    free(errs);
    parse_log(log5, strlen(log5), &r);
    CHECK(!r.begun && !r.ended && !r.ready);

    /* option parsing */
    struct opts o;
    selftest_parse_args("-n 3 --size 512M --kill 1@+3 --kill 2@foo "
                        "--restart 1 --device cxl-shm --coherent-size 64M "
                        "--latency-ns 200 --device-opt mode=timed "
                        "--qemu-arg -icount --qemu-arg shift=0 -- echo hi", &o);
    CHECK(o.nhosts == 3 && o.size == 512 * MIB && o.n_kills == 2);
    CHECK(o.kills[0].host == 1 && o.kills[0].after_s == 3);
    CHECK(o.kills[1].host == 2 && !strcmp(o.kills[1].pattern, "foo"));
    CHECK(o.restart[1] && !o.restart[0]);
    CHECK(o.device == DEV_CXL_SHM && o.coherent_size == 64 * MIB);
    CHECK(o.latency_ns == 200 && o.device_opts.n == 1);
    CHECK(o.qemu_args.n == 2 && !strcmp(o.qemu_args.v[1], "shift=0"));
    CHECK(o.job_cmd.n == 2 && !strcmp(o.job_cmd.v[0], "echo"));
    CHECK(o.timeout_s == 300);
    CHECK(o.boot_timeout_s == DEFAULT_BOOT_TIMEOUT_S);
    CHECK(o.restarts == 1 && !o.kills[0].random);
    {
        struct opts o2;

        selftest_parse_args("-n 2 --kill 0@random:0.1-2:CRASH-POINT --restart 0 "
                            "--restarts 20 --seed 1234 --stall-timeout 30 -- x", &o2);
        CHECK(o2.n_kills == 1 && o2.kills[0].random && o2.restart[0]);
        CHECK(o2.restarts == 20 && o2.seed == 1234 && o2.seed_given);
        CHECK(o2.stall_timeout_s == 30);
        CHECK(kill_runs(&o2, 0) == 20 && kill_runs(&o2, 1) == 1);
        selftest_parse_args("--kill 0@+1 -- x", &o2);
        CHECK(!o2.seed_given && o2.restarts == 1 && o2.stall_timeout_s == 0);
        CHECK(kill_runs(&o2, 0) == 1);
        selftest_parse_args("--interactive", &o2);
        CHECK(o2.timeout_s == 0 && o2.boot_timeout_s == 0);
        selftest_parse_args("--interactive --boot-timeout 40", &o2);
        CHECK(o2.timeout_s == 0 && o2.boot_timeout_s == 40);
        selftest_parse_args("--boot-timeout 0 --timeout 9 -- true", &o2);
        CHECK(o2.timeout_s == 9 && o2.boot_timeout_s == 0);
    }

    /* device arguments: one place, both devices */
    o.pool = xstrdup("/tmp/p,ool");
    struct strv a = { 0 };
    add_pool_device_args(&a, &o, 2);
    char *cmd = argv_to_shell(&a);
    CHECK(strstr(cmd, "cxl-shm,bus=root_port13,id=cxl-shm0,pool=/tmp/p,,ool,"
                      "size=512M,host-id=2,max-hosts=3,coherent-size=64M,"
                      "latency-ns=200,mode=timed"));
    CHECK(strstr(cmd, "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"));
    CHECK(!strstr(cmd, "memory-backend-file"));
    free(cmd);
    strv_free(&a);
    {
        /* a property for one host only */
        const char *kv;
        CHECK(device_opt_host("1:evict-rate=10", &kv) == 1 && !strcmp(kv, "evict-rate=10"));
        CHECK(device_opt_host("evict-rate=10", &kv) == -1 && !strcmp(kv, "evict-rate=10"));
        CHECK(device_opt_host("conflict-log=/a:b", &kv) == -1);
        strv_add(&o.device_opts, "2:evict-rate=7");
        add_pool_device_args(&a, &o, 2);
        cmd = argv_to_shell(&a);
        CHECK(strstr(cmd, "mode=timed,evict-rate=7"));
        free(cmd);
        strv_free(&a);
        add_pool_device_args(&a, &o, 1);
        cmd = argv_to_shell(&a);
        CHECK(strstr(cmd, "mode=timed") && !strstr(cmd, "evict-rate"));
        free(cmd);
        strv_free(&a);
    }
    o.device = DEV_CXL_TYPE3;
    o.device_opts.n = 0;
    add_pool_device_args(&a, &o, 0);
    cmd = argv_to_shell(&a);
    CHECK(strstr(cmd, "memory-backend-file,id=cxl-mem0,share=on,"
                      "mem-path=/tmp/p,,ool,size=512M"));
    CHECK(strstr(cmd, "cxl-type3,bus=root_port13,volatile-memdev=cxl-mem0,"
                      "id=cxl-vmem0"));
    CHECK(strstr(cmd, "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"));
    free(cmd);
    strv_free(&a);

    /* the host table of a pool file */
    {
        char tmpl[] = "/tmp/cxlpod-selftest-XXXXXX";
        int fd = mkstemp(tmpl);
        CHECK(fd >= 0);
        if (fd >= 0) {
            unsigned char meta[0x1000 + 3 * 128] = { 0 };
            uint32_t u32;
            uint64_t u64;
            memcpy(meta, "CXLPOOL", 8);
            u32 = 2;
            memcpy(meta + 0x08, &u32, 4);
            u32 = 3;
            memcpy(meta + 0x2c, &u32, 4);
            u32 = 0x1000;
            memcpy(meta + 0x30, &u32, 4);
            u32 = 128;
            memcpy(meta + 0x34, &u32, 4);
            for (int i = 0; i < 3; i++) {
                u32 = (uint32_t)(i + 1);        /* live, failed, left */
                memcpy(meta + 0x1000 + 128 * i, &u32, 4);
                u64 = 10 + i;
                memcpy(meta + 0x1000 + 128 * i + 8, &u64, 8);
            }
            CHECK(write(fd, meta, sizeof(meta)) == (ssize_t)sizeof(meta));
            close(fd);
            unsigned pst[4];
            uint64_t pg[4];
            CHECK(read_pool_hosts(tmpl, 4, pst, pg) == 3);
            CHECK(pst[0] == 1 && pst[1] == 2 && pst[2] == 3 && pg[2] == 12);
            CHECK(!strcmp(pool_state_name(pst[2]), "left"));
            CHECK(read_pool_hosts(tmpl, 2, pst, pg) == 2);
            meta[8] = 1;                        /* version 1: not read */
            write_file(tmpl, (char *)meta, sizeof(meta), 0600);
            CHECK(read_pool_hosts(tmpl, 4, pst, pg) == 0);
            unlink(tmpl);
            CHECK(read_pool_hosts(tmpl, 4, pst, pg) == 0);
        }
    }

    /* a restarted job learns how often it was restarted */
    {
        char tmpl[] = "/tmp/cxlpod-selftest-XXXXXX";
        int fd = mkstemp(tmpl);
        CHECK(fd >= 0);
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
                write_file(tmpl, cases[c][0], strlen(cases[c][0]), 0644);
                for (int n = 1; n <= 12; n += 11) {
                    mark_job_restarted(&hh, n);
                    char want[128];
                    snprintf(want, sizeof(want), cases[c][1], n);
                    char *got = read_file(tmpl, NULL);
                    CHECK(got && !strcmp(got, want));
                    free(got);
                }
            }
            unlink(tmpl);
        }
    }

    struct buf b = { 0 };
    shell_quote(&b, "it's");
    CHECK(!strcmp(b.p, "'it'\\''s'"));
    free(b.p);
    b = (struct buf){ 0 };
    json_string(&b, "a\"b\n\x01", 5);
    CHECK(!strcmp(b.p, "\"a\\\"b\\n\\u0001\""));
    free(b.p);

    if (st_fail) {
        fprintf(stderr, "selftest: %d check(s) failed\n", st_fail);
        return 1;
    }
    printf("selftest: all checks passed\n");
    return 0;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "console")) {
        return console_main(argc, argv);
    }
    if (argc >= 2 && !strcmp(argv[1], "qmp")) {
        return qmp_main(argc, argv);
    }
    if (argc >= 2 && !strcmp(argv[1], "selftest")) {
        return selftest();
    }
    struct opts o;
    parse_args(argc, argv, &o);
    resolve_paths(&o);
    make_workdir(&o);
    return run(&o);
}

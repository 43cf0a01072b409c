/*
 * Small utilities of cxlpod-launch: messages and fatal errors, time and
 * file tests, shell and QEMU option quoting (memory, strings
 * and file contents are GLib's).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* small utilities                                                     */

void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}


/* Signal a QEMU: its whole process group (it runs in its own), else it. */
void kill_qemu(pid_t pid, int sig)
{
    if (pid <= 0) {
        return;
    }
    if (kill(-pid, sig) < 0) {
        kill(pid, sig);
    }
}

void die(int status, const char *fmt, ...)
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

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

bool path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}


/*
 * QEMU option values (key=value,key=value): a comma inside a value must be
 * doubled.  Returns a new string.
 */
char *qemu_opt_escape(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        n += (*p == ',') ? 2 : 1;
    }
    char *r = g_malloc(n + 1), *q = r;
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
void shell_quote(GString *b, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++) {
        if (!(isalnum((unsigned char)*p) || strchr("@%+=:,./_-", *p))) {
            plain = false;
            break;
        }
    }
    if (plain) {
        g_string_append(b, s);
        return;
    }
    g_string_append(b, "'");
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            g_string_append(b, "'\\''");
        } else {
            g_string_append_len(b, p, 1);
        }
    }
    g_string_append(b, "'");
}

/* ------------------------------------------------------------------ */
/* configuration                                                       */



const char *accel_name(enum accel a)
{
    return a == ACCEL_KVM ? "kvm" : a == ACCEL_TCG ? "tcg" : "auto";
}

const char *device_name(enum pool_device d)
{
    return d == DEV_CXL_SHM ? "cxl-shm" : "cxl-type3";
}

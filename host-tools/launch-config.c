/*
 * `cxlpod-launch --config FILE`: a pod described in a GKeyFile.
 *
 * Every key is the long option of the same name and takes the value that
 * option takes, so the file is checked by the same code as the command
 * line (launch-options.c) and says the same things; the options given on
 * the command line are applied after the file and override it.  Groups:
 *
 *   [pod]      hosts, workdir, qemu, kernel, initrd, accel, mem, smp,
 *              append, stagger, boot-parallel, qemu-arg (a list),
 *              userland, net, local-hosts, net-listen, net-join,
 *              join-timeout, machine-name, pod-keys
 *   [device]   device, pool, size, coherent-size, latency-ns, max-hosts,
 *              device-opt (a list), pool-backend, prealloc, host-nodes,
 *              conflict-log, stale-log, serve, pool-key
 *   [job]      job, command, interactive, timeout, boot-timeout,
 *              stall-timeout, kill (a list), restart (a list), restarts,
 *              seed, follow, json, dry-run, quiet
 *   [host.I]   job, device-opt (a list), kill (a list of specs without
 *              the "I@"), restart (true/false), pool-backend
 *
 * Lists are separated by ';'.  Relative paths are taken from the file's
 * folder.  See docs/launcher.md, "Pod files".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <glib.h>
#include "launch.h"

enum key_kind { K_VALUE, K_PATH, K_LIST, K_BOOL };

struct key_def {
    const char *name;
    enum key_kind kind;
};

static const struct key_def pod_keys[] = {
    { "hosts", K_VALUE }, { "workdir", K_PATH }, { "qemu", K_PATH },
    { "kernel", K_PATH }, { "initrd", K_PATH }, { "accel", K_VALUE },
    { "mem", K_VALUE }, { "smp", K_VALUE }, { "append", K_VALUE },
    { "stagger", K_VALUE }, { "boot-parallel", K_VALUE },
    { "qemu-arg", K_LIST }, { "userland", K_VALUE },
    { "net", K_BOOL }, { "local-hosts", K_VALUE },
    { "net-listen", K_VALUE }, { "net-join", K_VALUE },
    { "join-timeout", K_VALUE }, { "machine-name", K_VALUE },
    { "pod-keys", K_PATH }, { NULL, 0 },
};

static const struct key_def device_keys[] = {
    { "device", K_VALUE }, { "pool", K_PATH }, { "size", K_VALUE },
    { "coherent-size", K_VALUE }, { "latency-ns", K_VALUE },
    { "max-hosts", K_VALUE }, { "device-opt", K_LIST },
    { "pool-backend", K_VALUE }, { "prealloc", K_BOOL },
    { "host-nodes", K_VALUE }, { "conflict-log", K_PATH },
    { "stale-log", K_PATH }, { "serve", K_VALUE },
    { "serve-heartbeat-timeout", K_VALUE }, { "pool-key", K_PATH },
    { NULL, 0 },
};

static const struct key_def job_keys[] = {
    { "job", K_PATH }, { "command", K_VALUE }, { "interactive", K_BOOL },
    { "timeout", K_VALUE }, { "boot-timeout", K_VALUE },
    { "stall-timeout", K_VALUE }, { "kill", K_LIST }, { "restart", K_LIST },
    { "restarts", K_VALUE }, { "seed", K_VALUE }, { "follow", K_BOOL },
    { "json", K_BOOL }, { "dry-run", K_BOOL }, { "quiet", K_BOOL },
    { "keep-going", K_BOOL },
    { NULL, 0 },
};

static const struct key_def host_keys[] = {
    { "job", K_PATH }, { "device-opt", K_LIST }, { "kill", K_LIST },
    { "restart", K_BOOL }, { "pool-backend", K_VALUE }, { NULL, 0 },
};

static void config_die(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void config_die(const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    die(EXIT_USAGE, "%s: %s", path, m);
}

static const struct key_def *find_key(const struct key_def *defs,
                                      const char *name)
{
    for (; defs->name; defs++) {
        if (!strcmp(defs->name, name)) {
            return defs;
        }
    }
    return NULL;
}

/* Apply option `opt` = `val` read from [group] key. */
static void apply(struct opts *o, const char *path, const char *group,
                  const char *key, const char *opt, const char *val)
{
    g_autofree char *label = g_strdup_printf("[%s] %s in %s", group, key,
                                             path);
    if (!opts_apply_named(o, opt, val, label)) {
        config_die(path, "[%s] %s: no option --%s", group, key, opt);
    }
}

static char *resolve(const char *dir, const char *p)
{
    if (g_path_is_absolute(p) || !*p) {
        return g_strdup(p);
    }
    return g_build_filename(dir, p, NULL);
}

/*
 * One group: its keys checked against defs, each applied as its option;
 * host >= 0 for a [host.I] group (its values become I:..., I@... specs).
 */
static void load_group(struct opts *o, GKeyFile *kf, const char *path,
                       const char *dir, const char *group,
                       const struct key_def *defs, int host)
{
    g_auto(GStrv) keys = g_key_file_get_keys(kf, group, NULL, NULL);
    for (int i = 0; keys && keys[i]; i++) {
        const char *key = keys[i];
        const struct key_def *d = find_key(defs, key);
        g_autoptr(GError) err = NULL;
        if (!d) {
            config_die(path, "[%s]: unknown key '%s'", group, key);
        }
        if (d->kind == K_BOOL) {
            gboolean b = g_key_file_get_boolean(kf, group, key, &err);
            if (err) {
                config_die(path, "[%s] %s: expected true or false", group,
                           key);
            }
            if (b && host >= 0) {
                g_autofree char *h = g_strdup_printf("%d", host);
                apply(o, path, group, key, key, h);
            } else if (b) {
                apply(o, path, group, key, key, NULL);
            }
            continue;
        }
        if (d->kind == K_LIST) {
            gsize n;
            g_auto(GStrv) items = g_key_file_get_string_list(kf, group, key,
                                                             &n, &err);
            if (err) {
                config_die(path, "[%s] %s: %s", group, key, err->message);
            }
            for (gsize j = 0; j < n; j++) {
                g_autofree char *v = NULL;
                if (host >= 0 && !strcmp(key, "kill")) {
                    v = g_strdup_printf("%d@%s", host, items[j]);
                } else if (host >= 0) {
                    v = g_strdup_printf("%d:%s", host, items[j]);
                } else {
                    v = g_strdup(items[j]);
                }
                apply(o, path, group, key, key, v);
            }
            continue;
        }
        g_autofree char *val = g_key_file_get_string(kf, group, key, &err);
        if (err) {
            config_die(path, "[%s] %s: %s", group, key, err->message);
        }
        /* a remote pool is an address, not a path */
        if (d->kind == K_PATH && !g_str_has_prefix(val, REMOTE_POOL_SCHEME)) {
            char *r = resolve(dir, val);
            g_free(val);
            val = r;
        }
        if (!strcmp(key, "command")) {
            if (!*val) {
                config_die(path, "[%s] command: empty", group);
            }
            g_ptr_array_add(o->job_cmd, g_strdup(val));
        } else if (host >= 0 && !strcmp(key, "job")) {
            g_autofree char *v = g_strdup_printf("%d:%s", host, val);
            apply(o, path, group, key, "job-host", v);
        } else if (host >= 0) {
            /* pool-backend: I:VALUE, as on the command line */
            g_autofree char *v = g_strdup_printf("%d:%s", host, val);
            apply(o, path, group, key, key, v);
        } else {
            apply(o, path, group, key, key, val);
        }
    }
}

/*
 * GKeyFile's syntax errors quote the line but do not number it: find the
 * first line with that text, 0 if none.
 */
static int error_line(const char *path, const char *message)
{
    g_autofree char *text = NULL;
    const char *q = strstr(message, "\u201c");
    const char *e = q ? strstr(q, "\u201d") : NULL;
    if (!e || !g_file_get_contents(path, &text, NULL, NULL)) {
        return 0;
    }
    g_autofree char *quoted = g_strndup(q + 3, e - q - 3);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i]; i++) {
        if (strstr(lines[i], quoted)) {
            return i + 1;
        }
    }
    return 0;
}

/* Read the pod file `path` into *o (already at its defaults), or exit. */
void config_load(struct opts *o, const char *path)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) err = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &err)) {
        int line = err->domain == G_KEY_FILE_ERROR ?
                   error_line(path, err->message) : 0;
        if (line) {
            die(EXIT_USAGE, "config %s:%d: %s", path, line, err->message);
        }
        die(EXIT_USAGE, "config %s: %s", path, err->message);
    }
    g_autofree char *dir = g_path_get_dirname(path);
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
    /* [pod] first: the host count bounds the [host.I] groups */
    static const char *const order[] = { "pod", "device", "job" };
    static const struct key_def *const defs[] = {
        pod_keys, device_keys, job_keys,
    };
    for (int g = 0; g < 3; g++) {
        if (g_key_file_has_group(kf, order[g])) {
            load_group(o, kf, path, dir, order[g], defs[g], -1);
        }
    }
    for (int i = 0; groups[i]; i++) {
        const char *gr = groups[i];
        if (!strcmp(gr, "pod") || !strcmp(gr, "device") ||
            !strcmp(gr, "job")) {
            continue;
        }
        long host;
        if (!g_str_has_prefix(gr, "host.") ||
            !parse_int(gr + 5, 0, MAX_HOSTS - 1, &host)) {
            config_die(path, "unknown group [%s] (expected [pod], [device], "
                       "[job] or [host.I] with I in 0..%d)", gr,
                       MAX_HOSTS - 1);
        }
        load_group(o, kf, path, dir, gr, host_keys, (int)host);
    }
    o->config = g_strdup(path);
}

/*
 * The parsers of cxlpod-launch: sizes, numbers, --kill specs and their
 * random delays, query-cxl-shm replies (json-glib), and the job protocol
 * markers of a guest's serial log (docs/interfaces.md section 2).  No side
 * effects: tests/unit/test-launch.c checks them directly.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <json-glib/json-glib.h>
#include "launch.h"

/* parsing helpers (unit-checked by tests/unit/test-launch.c)         */

/*
 * Parse a size: a decimal number with an optional suffix K, M, G, T
 * (powers of 1024, optionally followed by "iB" or "B").  Returns false on
 * syntax error or overflow.
 */
bool parse_size(const char *s, uint64_t *out)
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

bool parse_int(const char *s, long min, long max, long *out)
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

bool parse_seconds(const char *s, double *out)
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
char *fmt_size(uint64_t v)
{
    if (v && v % GIB == 0) {
        return g_strdup_printf("%lluG", (unsigned long long)(v / GIB));
    }
    if (v && v % MIB == 0) {
        return g_strdup_printf("%lluM", (unsigned long long)(v / MIB));
    }
    return g_strdup_printf("%llu", (unsigned long long)v);
}


bool parse_kill(const char *arg, struct kill_spec *k, const char **why)
{
    const char *at = strchr(arg, '@');
    long host;
    if (!at) {
        *why = "expected I@STRING, I@+SECONDS or I@random:MIN-MAX[:STRING]";
        return false;
    }
    char *hs = g_strndup(arg, (size_t)(at - arg));
    bool ok = hs && parse_int(hs, 0, MAX_HOSTS - 1, &host);
    g_free(hs);
    if (!ok) {
        *why = "host id before '@' must be a number 0.." MAX_HOST_ID_STR;
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
        char *lo = g_strndup(r, (size_t)(dash - r));
        char *hi = g_strndup(dash + 1, (size_t)(end - dash - 1));
        ok = lo && hi && parse_seconds(lo, &k->min_s) &&
             parse_seconds(hi, &k->max_s);
        g_free(lo);
        g_free(hi);
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
        k->pattern = colon ? g_strdup(colon + 1) : NULL;
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
        k->pattern = g_strdup(at + 1);
        k->after_s = 0;
    }
    return true;
}

/*
 * The random delay of kill spec k for run `run` of its host: a function of
 * (seed, host, run, k) only, so a run is replayed exactly with --seed.
 */
uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double kill_delay(const struct kill_spec *ks, uint64_t seed, int run, int k)
{
    uint64_t z = mix64(seed ^ mix64(((uint64_t)ks->host << 40) ^
                                    ((uint64_t)run << 8) ^ (uint64_t)k));
    double u = (double)(z >> 11) / (double)(1ULL << 53);  /* [0, 1) */
    return ks->min_s + (ks->max_s - ks->min_s) * u;
}

/*
 * From a query-cxl-shm reply, host `host`'s entry of the (first) device's
 * host table: its state ("live", "failed", "left", "free") and generation.
 */
bool qmp_host_state(const char *reply, int host, char *state, size_t n,
                    uint64_t *gen)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!reply || !json_parser_load_from_data(parser, reply, -1, NULL)) {
        return false;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        return false;
    }
    JsonNode *ret = json_object_get_member(json_node_get_object(root),
                                           "return");
    if (!ret || !JSON_NODE_HOLDS_ARRAY(ret) ||
        json_array_get_length(json_node_get_array(ret)) == 0) {
        return false;
    }
    JsonNode *dev = json_array_get_element(json_node_get_array(ret), 0);
    if (!JSON_NODE_HOLDS_OBJECT(dev)) {
        return false;
    }
    JsonNode *hosts = json_object_get_member(json_node_get_object(dev),
                                             "hosts");
    if (!hosts || !JSON_NODE_HOLDS_ARRAY(hosts)) {
        return false;
    }
    JsonArray *ha = json_node_get_array(hosts);
    for (guint i = 0; i < json_array_get_length(ha); i++) {
        JsonNode *en = json_array_get_element(ha, i);
        if (!JSON_NODE_HOLDS_OBJECT(en)) {
            continue;
        }
        JsonObject *e = json_node_get_object(en);
        JsonNode *id = json_object_get_member(e, "host-id");
        if (!id || json_node_get_value_type(id) != G_TYPE_INT64 ||
            json_node_get_int(id) != host) {
            continue;
        }
        JsonNode *st = json_object_get_member(e, "state");
        JsonNode *g = json_object_get_member(e, "generation");
        if (!st || json_node_get_value_type(st) != G_TYPE_STRING ||
            strlen(json_node_get_string(st)) >= n) {
            return false;
        }
        g_strlcpy(state, json_node_get_string(st), n);
        *gen = g && json_node_get_value_type(g) == G_TYPE_INT64 ?
               (uint64_t)json_node_get_int(g) : 0;
        return true;
    }
    return false;
}


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
void parse_log(const char *log, size_t len, struct guest_report *r)
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
    p = memmem_str(log, len, MARK_UP);
    if (p) {
        /* the pod network / host userland are set up: a complete line */
        const char *q = p + strlen(MARK_UP), *lim = log + len;
        const char *eol = memchr(q, '\n', (size_t)(lim - q));
        const char *close = memmem_str(q, (size_t)(lim - q), "@@");
        r->up = close && eol && close < eol;
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
char *extract_output(const char *log, const struct guest_report *r,
                            size_t *lenp)
{
    GString *b = g_string_new(NULL);
    g_string_append_len(b, "", 0);
    if (r->begun && r->ended && r->out_end >= r->out_start) {
        for (size_t i = r->out_start; i < r->out_end; i++) {
            if (log[i] != '\r') {
                g_string_append_len(b, &log[i], 1);
            }
        }
        if (b->len && b->str[b->len - 1] != '\n') {
            g_string_append_len(b, "\n", 1);
        }
    }
    *lenp = b->len;
    return g_string_free(b, FALSE);
}

/* Collect @@CXLPOD-ERROR lines (without CRs), one per line. */
char *collect_errors(const char *log, size_t len, int *count)
{
    GString *b = g_string_new(NULL);
    g_string_append_len(b, "", 0);
    *count = 0;
    const char *p = log, *lim = log + len;
    while ((p = memmem_str(p, (size_t)(lim - p), MARK_ERROR)) != NULL) {
        const char *eol = memchr(p, '\n', (size_t)(lim - p));
        const char *e = eol ? eol : lim;
        for (const char *c = p; c < e; c++) {
            if (*c != '\r') {
                g_string_append_len(b, c, 1);
            }
        }
        g_string_append_len(b, "\n", 1);
        (*count)++;
        p = e;
    }
    return g_string_free(b, FALSE);
}

/*
 * The words of a subcommand (console, qmp) after its name: parsed by a
 * GOptionContext, so --help works and an unknown option is refused like
 * everywhere else in the launcher.  argv[1] is the subcommand's name;
 * returns its words (argv[2] ...) in *words, NULL-terminated, or NULL
 * after printing the usage when their number is not in [min, max].
 */
char **subcommand_words(int argc, char **argv, const char *params,
                        const char *summary, int min, int max, int *n)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_autoptr(GError) err = NULL;
    int sub_argc = argc - 1;
    char **sub_argv = g_new0(char *, argc + 1);
    g_autofree char *usage = NULL;
    /* "Usage: cxlpod-launch qmp ..." (GLib names the program after it) */
    g_autofree char *name = g_strdup_printf(PROG " %s", argv[1]);

    memcpy(sub_argv, argv + 1, sizeof(char *) * (size_t)(argc - 1));
    sub_argv[0] = name;
    g_option_context_set_summary(ctx, summary);
    g_option_context_set_help_enabled(ctx, TRUE);
    if (!g_option_context_parse(ctx, &sub_argc, &sub_argv, &err) ||
        sub_argc - 1 < min || sub_argc - 1 > max) {
        usage = g_option_context_get_help(ctx, TRUE, NULL);
        fprintf(stderr, PROG " %s: %s\n%s", argv[1],
                err ? err->message : "wrong number of arguments", usage);
        g_free(sub_argv);
        return NULL;
    }
    *n = sub_argc - 1;
    memmove(sub_argv, sub_argv + 1, sizeof(char *) * (size_t)sub_argc);
    return sub_argv;
}

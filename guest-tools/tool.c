/*
 * Shared code of the cxlpod guest tools (see tool.h).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t rand64(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
		uint64_t s = (uint64_t)getpid() << 32 ^ (uint64_t)(now_s() * 1e9);
		v = splitmix64(&s);
	}
	return v ? v : 1;
}

uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int parse_size_full(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;
	errno = 0;
	if (*s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

uint64_t parse_size_arg(const char *s)
{
	uint64_t v;
	return parse_size_full(s, &v) ? 0 : v;
}

/* Busy-poll for a while, then sleep a little so a waiting guest gives its
 * host CPU to the guests that make progress (TCG on few cores). */
void poll_pause(unsigned *spins)
{
	if (++*spins < 2000) {
		__builtin_ia32_pause();
		return;
	}
	/*
	 * Then sleeps, longer the longer the wait, counted in wake-ups: 100 of
	 * 20 us, 100 of 200 us, 500 of 2 ms (about a second in all), then
	 * 100 ms.  Under TCG a wake-up costs the host far more than on
	 * hardware: in a 32-host pod on 2 cores, the guests already up and
	 * waiting for the others with 20-200 us sleeps (some 30,000 wake-ups
	 * before the old last step) took the cores the later guests needed to
	 * boot.
	 */
	unsigned n = *spins - 2000;
	long ns = n < 100 ? 20000 : n < 200 ? 200000 : n < 700 ? 2000000 : 100000000;
	struct timespec ts = {0, ns};
	if (*spins > 1000000)
		*spins = 2700; /* stay at the last step, without wrapping */
	nanosleep(&ts, NULL);
}

int tool_pin_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

const char *tool_common_usage(void)
{
	return "common options:\n"
	       "  --host N        this host's rank (default CXLPOD_HOST_ID, else device host id)\n"
	       "  --nhosts N      number of hosts taking part (default CXLPOD_NHOSTS, else 1)\n"
	       "  --method M      doorbell | native (default CXLPOD_METHOD, else doorbell)\n"
	       "  --loopback SPEC use a plain file: path[:coherent[:size]] (no QEMU)\n"
	       "  --raw           without a cxl-shm device, use a plain /dev/daxN.M (e.g. stock\n"
	       "                  cxl-type3; CXLPOD_DAX picks one) as one coherent area,\n"
	       "                  backend raw-dax (also CXLPOD_RAW_DAX=1)\n"
	       "  --timeout S     give up waiting for peers after S seconds (default 120)\n"
	       "  --json          print one machine-readable JSON line at the end\n"
	       "exit codes: 0 ok, 1 usage, 2 setup, 3 wrong result / corruption detected,\n"
	       "            4 peer timeout / peer failed\n";
}

int tool_common_opt(struct tool *t, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
#define NEEDARG()                                                                              \
	do {                                                                                   \
		if (*i + 1 >= argc) {                                                          \
			fprintf(stderr, "%s: %s needs an argument\n", t->name, a);            \
			return -1;                                                             \
		}                                                                              \
	} while (0)
	if (!strcmp(a, "--json")) {
		t->json = true;
		return 1;
	}
	if (!strcmp(a, "--host")) {
		NEEDARG();
		t->rank = atoi(argv[++*i]);
		return 1;
	}
	if (!strcmp(a, "--nhosts")) {
		NEEDARG();
		t->nhosts = atoi(argv[++*i]);
		return 1;
	}
	if (!strcmp(a, "--timeout")) {
		NEEDARG();
		t->timeout_s = atof(argv[++*i]);
		return 1;
	}
	if (!strcmp(a, "--raw")) {
		setenv("CXLPOD_RAW_DAX", "1", 1);
		return 1;
	}
	if (!strcmp(a, "--loopback")) {
		NEEDARG();
		setenv("CXLPOD_LOOPBACK", argv[++*i], 1);
		return 1;
	}
	if (!strcmp(a, "--method")) {
		NEEDARG();
		const char *m = argv[++*i];
		if (!strcmp(m, "doorbell"))
			t->method = CXLPOD_METHOD_DOORBELL;
		else if (!strcmp(m, "native"))
			t->method = CXLPOD_METHOD_NATIVE;
		else if (!strcmp(m, "both"))
			t->method_both = true;
		else {
			fprintf(stderr, "%s: --method doorbell|native%s\n", t->name,
				(!strcmp(t->name, "cxlpod-litmus") || !strcmp(t->name, "cxlpod-bench") ||
				 !strcmp(t->name, "cxlpod-fidelity"))
					? "|both"
					: "");
			return -1;
		}
		return 1;
	}
	return 0;
#undef NEEDARG
}

static int topt_value(struct tool *t, const struct topt *o, const char *v)
{
	char *end = NULL;
	double x = 0;
	errno = 0;
	switch (o->kind) {
	case TOPT_INT: {
		long n = strtol(v, &end, 0);
		x = (double)n;
		if (n < INT_MIN || n > INT_MAX)
			errno = ERANGE;
		*(int *)o->dst = (int)n;
		break;
	}
	case TOPT_U64: {
		if (*v == '-')
			errno = ERANGE;
		unsigned long long n = strtoull(v, &end, 0);
		x = (double)n;
		*(uint64_t *)o->dst = n;
		break;
	}
	case TOPT_SIZE: {
		uint64_t n = parse_size_arg(v);
		if (!n) {
			fprintf(stderr, "%s: %s: '%s' is not a size (N, NK, NM or NG)\n", t->name,
				o->name, v);
			return EXIT_USAGE;
		}
		x = (double)n;
		*(size_t *)o->dst = n;
		goto range;
	}
	case TOPT_DBL:
		x = strtod(v, &end);
		*(double *)o->dst = x;
		break;
	case TOPT_STR:
		*(const char **)o->dst = v;
		return 0;
	case TOPT_FLAG:
		return 0;
	}
	if (errno || !end || end == v || *end) {
		fprintf(stderr, "%s: %s: '%s' is not a number\n", t->name, o->name, v);
		return EXIT_USAGE;
	}
range:
	if (o->max > o->min && !(x >= o->min && x <= o->max)) {
		fprintf(stderr, "%s: %s must be %.15g..%.15g\n", t->name, o->name, o->min, o->max);
		return EXIT_USAGE;
	}
	return 0;
}

int tool_parse(struct tool *t, int argc, char **argv, const struct topt *opts,
	       void (*usage)(void), const char **positional)
{
	int n = 0;
	return tool_parse_words(t, argc, argv, opts, usage, positional,
				positional && !*positional ? 1 : 0, &n);
}

int tool_parse_words(struct tool *t, int argc, char **argv, const struct topt *opts,
		     void (*usage)(void), const char **words, int max, int *n)
{
	bool dashdash = false;
	*n = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!dashdash && !strcmp(a, "--")) {
			dashdash = true;
			continue;
		}
		if (dashdash) {
			if (*n >= max) {
				fprintf(stderr, "%s: unknown argument %s (--help lists them)\n",
					t->name, a);
				return EXIT_USAGE;
			}
			words[(*n)++] = a;
			continue;
		}
		int r = t->no_common ? 0 : tool_common_opt(t, argc, argv, &i);
		if (r < 0)
			return EXIT_USAGE;
		if (r)
			continue;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return TOOL_HELP;
		}
		const struct topt *o = opts;
		while (o && o->name && strcmp(o->name, a))
			o++;
		if (o && o->name) {
			if (o->kind == TOPT_FLAG) {
				*(bool *)o->dst = true;
				continue;
			}
			if (i + 1 >= argc) {
				fprintf(stderr, "%s: %s needs an argument\n", t->name, a);
				return EXIT_USAGE;
			}
			if (topt_value(t, o, argv[++i]))
				return EXIT_USAGE;
			continue;
		}
		if (a[0] != '-' && *n < max) {
			words[(*n)++] = a;
			continue;
		}
		fprintf(stderr, "%s: unknown %s %s (--help lists them)\n", t->name,
			a[0] == '-' ? "option" : "argument", a);
		return EXIT_USAGE;
	}
	return 0;
}

static int env_int(const char *n, int dflt)
{
	const char *s = getenv(n);
	return (s && *s) ? atoi(s) : dflt;
}

int tool_open(struct tool *t)
{
	if (t->timeout_s <= 0)
		t->timeout_s = 120;
	struct cxlpod_opts o = {.method = t->method};
	int e = cxlpod_open(&t->p, &o);
	if (e) {
		fprintf(stderr, "%s: cannot open the pool: %s\n", t->name, cxlpod_errmsg());
		return EXIT_SETUP;
	}
	cxlpod_get_info(t->p, &t->info);
	if (t->rank < 0)
		t->rank = env_int("CXLPOD_HOST_ID", (int)t->info.host_id);
	if (t->nhosts <= 0)
		t->nhosts = env_int("CXLPOD_NHOSTS", 1);
	if (t->nhosts < 1 || t->nhosts > (int)CXLPOD_MAX_HOSTS || t->rank < 0 ||
	    t->rank >= t->nhosts) {
		fprintf(stderr, "%s: bad rank %d / nhosts %d\n", t->name, t->rank, t->nhosts);
		return EXIT_USAGE;
	}
	void *b;
	size_t l;
	cxlpod_area(t->p, CXLPOD_AREA_COHERENT, &b, &l);
	if (l < TOOL_COH_OFF + (128u << 10)) {
		fprintf(stderr, "%s: coherent window of %zu bytes is too small (need 256 KiB)\n",
			t->name, l);
		return EXIT_SETUP;
	}
	t->sync = b;
	t->coh = (uint8_t *)b + TOOL_COH_OFF;
	t->coh_len = l - TOOL_COH_OFF;
	cxlpod_area(t->p, CXLPOD_AREA_NONCOHERENT, &b, &l);
	t->nc = b;
	t->nc_len = l;
	return 0;
}

void tool_close(struct tool *t)
{
	cxlpod_close(t->p);
	t->p = NULL;
}

int tool_peers_alive(struct tool *t)
{
	/* ranks are device host ids only when our rank is our device host id */
	if (t->info.backend != CXLPOD_BACKEND_DEVICE || (unsigned)t->rank != t->info.host_id)
		return 0;
	int n = t->nhosts < (int)t->info.max_hosts ? t->nhosts : (int)t->info.max_hosts;
	if (n < 2 || t->rank >= n)
		return 0;
	/* the peers after this rank, round and round: ranks start at
	 * different peers, so the pod as a whole looks at every one */
	int k = n - 1 < TOOL_PEERS_PER_CHECK ? n - 1 : TOOL_PEERS_PER_CHECK;
	for (int i = 0; i < k; i++) {
		int r = (t->rank + 1 + (int)(t->alive_next++ % (unsigned)(n - 1))) % n;
		enum cxlpod_host_state s;
		if (cxlpod_host_state(t->p, r, &s, NULL))
			continue;
		if (s == CXLPOD_HOST_FAILED) {
			fprintf(stderr, "%s: host %d failed\n", t->name, r);
			tool_abort(t);
			return EXIT_PEER;
		}
	}
	return 0;
}

static int wait_cond(struct tool *t, volatile uint64_t *addr, uint64_t want, int ge)
{
	unsigned spins = 0;
	double t0 = 0, last = 0;
	for (;;) {
		uint64_t v = __atomic_load_n(addr, __ATOMIC_ACQUIRE);
		if (ge ? v >= want : v == want)
			return 0;
		poll_pause(&spins);
		if ((spins & 255) == 0 || spins > 2000) { /* every step once it sleeps */
			double n = now_s();
			if (t0 == 0)
				t0 = last = n;
			if (t->epoch && t->sync->abort.v == t->epoch) {
				fprintf(stderr, "%s: aborted by a peer\n", t->name);
				return t->peer_err = EXIT_PEER;
			}
			if (n - last > 0.5) {
				last = n;
				if (tool_peers_alive(t))
					return t->peer_err = EXIT_PEER;
			}
			if (n - t0 > t->timeout_s) {
				fprintf(stderr, "%s: timeout after %.0f s waiting for peers\n", t->name,
					t->timeout_s);
				return t->peer_err = EXIT_PEER;
			}
		}
	}
}

int tool_wait_ge(struct tool *t, volatile uint64_t *addr, uint64_t want)
{
	return wait_cond(t, addr, want, 1);
}
int tool_wait_eq(struct tool *t, volatile uint64_t *addr, uint64_t want)
{
	return wait_cond(t, addr, want, 0);
}

void tool_abort(struct tool *t)
{
	if (t->epoch)
		__atomic_store_n(&t->sync->abort.v, t->epoch, __ATOMIC_SEQ_CST);
}

/*
 * Join (works with stale values from earlier runs, any start order):
 *   rank r>0: hello[r] = nonce_r; wait welcome[r] == nonce_r; E = epoch;
 *             ready[r] = E; wait go == E.
 *   rank 0:   E = random; reset (tool state, arrive[], abort); epoch = E;
 *             copy hello[r] -> welcome[r] for all r until every ready[r] == E;
 *             go = E.
 * Random 64-bit nonces make stale matches impossible in practice.
 */
int tool_join(struct tool *t, unsigned tool_id, void (*reset)(struct tool *, void *), void *arg)
{
	struct sync_block *s = t->sync;
	t->bar_gen = 0;
	if (t->rank == 0) {
		uint64_t E = rand64();
		/* the pod's ranks only: nobody else reads them this run */
		for (int r = 0; r < t->nhosts; r++) {
			s->arrive[r].v = 0;
			s->value[r].v = 0;
			s->ready[r].v = 0;
		}
		s->abort.v = 0;
		s->nhosts.v = t->nhosts;
		s->tool.v = tool_id;
		s->magic.v = SYNC_MAGIC;
		if (reset)
			reset(t, arg);
		__atomic_store_n(&s->epoch.v, E, __ATOMIC_SEQ_CST);
		unsigned spins = 0;
		double t0 = now_s();
		for (;;) {
			int all = 1;
			for (int r = 1; r < t->nhosts; r++) {
				uint64_t h = __atomic_load_n(&s->hello[r].v, __ATOMIC_ACQUIRE);
				if (s->welcome[r].v != h)
					__atomic_store_n(&s->welcome[r].v, h, __ATOMIC_RELEASE);
				if (__atomic_load_n(&s->ready[r].v, __ATOMIC_ACQUIRE) != E)
					all = 0;
			}
			if (all)
				break;
			poll_pause(&spins);
			if (((spins & 255) == 0 || spins > 2000) && now_s() - t0 > t->timeout_s) {
				fprintf(stderr, "%s: timeout: not all %d hosts joined\n", t->name,
					t->nhosts);
				return EXIT_PEER;
			}
		}
		t->epoch = E;
		__atomic_store_n(&s->go.v, E, __ATOMIC_SEQ_CST);
	} else {
		uint64_t nonce = rand64();
		__atomic_store_n(&s->hello[t->rank].v, nonce, __ATOMIC_SEQ_CST);
		if (tool_wait_eq(t, &s->welcome[t->rank].v, nonce))
			return EXIT_PEER;
		uint64_t E = __atomic_load_n(&s->epoch.v, __ATOMIC_ACQUIRE);
		__atomic_store_n(&s->ready[t->rank].v, E, __ATOMIC_SEQ_CST);
		if (tool_wait_eq(t, &s->go.v, E))
			return EXIT_PEER;
		t->epoch = E;
		if (s->nhosts.v != (uint64_t)t->nhosts || s->tool.v != tool_id) {
			fprintf(stderr,
				"%s: host 0 runs tool %llu with %llu hosts, we run tool %u with %d\n",
				t->name, (unsigned long long)s->tool.v,
				(unsigned long long)s->nhosts.v, tool_id, t->nhosts);
			tool_abort(t);
			return EXIT_USAGE;
		}
	}
	return 0;
}

int tool_barrier(struct tool *t)
{
	if (t->peer_err)
		return t->peer_err;
	uint64_t g = ++t->bar_gen;
	__atomic_store_n(&t->sync->arrive[t->rank].v, g, __ATOMIC_SEQ_CST);
	for (int r = 0; r < t->nhosts; r++)
		if (r != t->rank && tool_wait_ge(t, &t->sync->arrive[r].v, g))
			return EXIT_PEER;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/* ---- JSON ---------------------------------------------------------------------------- */
static void j_grow(struct jbuf *j, size_t add)
{
	if (j->len + add + 1 > j->cap) {
		j->cap = (j->len + add + 1) * 2;
		j->s = realloc(j->s, j->cap);
	}
}

void j_raw(struct jbuf *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	j_grow(j, n);
	va_start(ap, fmt);
	vsnprintf(j->s + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	j->len += n;
}

void j_begin(struct jbuf *j)
{
	memset(j, 0, sizeof(*j));
	j_raw(j, "{");
	j->first = 1;
}

static void j_sep(struct jbuf *j)
{
	if (!j->first)
		j_raw(j, ",");
	j->first = 0;
}

void j_key(struct jbuf *j, const char *k)
{
	j_sep(j);
	if (k)
		j_raw(j, "\"%s\":", k);
}

void j_str(struct jbuf *j, const char *k, const char *v)
{
	j_key(j, k);
	j_raw(j, "\"");
	for (const char *c = v; *c; c++) {
		if (*c == '"' || *c == '\\')
			j_raw(j, "\\%c", *c);
		else if ((unsigned char)*c < 0x20)
			j_raw(j, "\\u%04x", *c);
		else
			j_raw(j, "%c", *c);
	}
	j_raw(j, "\"");
}
void j_int(struct jbuf *j, const char *k, long long v)
{
	j_key(j, k);
	j_raw(j, "%lld", v);
}
void j_uint(struct jbuf *j, const char *k, unsigned long long v)
{
	j_key(j, k);
	j_raw(j, "%llu", v);
}
void j_dbl(struct jbuf *j, const char *k, double v)
{
	j_key(j, k);
	if (v != v || v > 1e300 || v < -1e300)
		j_raw(j, "null");
	else
		j_raw(j, "%.6g", v);
}
void j_bool(struct jbuf *j, const char *k, bool v)
{
	j_key(j, k);
	j_raw(j, v ? "true" : "false");
}
void j_obj_begin(struct jbuf *j, const char *k)
{
	j_key(j, k);
	j_raw(j, "{");
	j->first = 1;
}
void j_obj_end(struct jbuf *j)
{
	j_raw(j, "}");
	j->first = 0;
}
void j_arr_begin(struct jbuf *j, const char *k)
{
	j_key(j, k);
	j_raw(j, "[");
	j->first = 1;
}
void j_arr_end(struct jbuf *j)
{
	j_raw(j, "]");
	j->first = 0;
}
void j_end_print(struct jbuf *j)
{
	j_raw(j, "}");
	printf("%s\n", j->s);
	fflush(stdout);
	free(j->s);
	j->s = NULL;
}
void j_common(struct jbuf *j, struct tool *t)
{
	j_str(j, "tool", t->name);
	j_int(j, "host", t->rank);
	j_int(j, "nhosts", t->nhosts);
	j_str(j, "backend", cxlpod_backend_name(t->info.backend));
	j_str(j, "method", cxlpod_method_name(t->info.method));
}

void j_timed_stats(struct jbuf *j, const struct cxlpod_stats *st)
{
	j_uint(j, "charged_ns", st->dev_charged_ns);
	j_uint(j, "hits", st->dev_hits);
	j_uint(j, "misses", st->dev_misses);
	j_uint(j, "cache_evictions", st->dev_cache_evictions);
	j_uint(j, "back_invalidates", st->dev_back_invalidates);
	j_uint(j, "snoops", st->dev_snoops);
	j_uint(j, "snoop_filter_evictions", st->dev_sf_evictions);
	j_uint(j, "stale_reads", st->dev_stale_reads);
}

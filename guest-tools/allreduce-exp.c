/*
 * cxlpod-allreduce-exp: the allreduce of issue 25's experiment
 * (docs/experiment.md), measured so that every figure it reports is the
 * same on every run, whatever the host's load and scheduling.
 *
 * Run it on every host of a pod in mode=timed under -icount (one vCPU a
 * guest).  It runs a list of experiments, each an allreduce of vectors of
 * 64-bit integers (reduce-scatter + all-gather, as cxlpod-allreduce):
 *
 *   for each area (coherent, noncoherent), participant count N, size V:
 *     in[0..N-1] (one vector per host) and out (the sum), page-aligned
 *     slots in the chosen area;
 *     per round:  P1 host h writes its vector to in[h]
 *                 P2 host h sums chunk h of every in[k] into out[chunk h]
 *                 P3 host h reads out
 *   In the coherent window these are plain loads and stores (hardware
 *   coherence: the device's snoop filter, back-invalidates and snoops do
 *   the work).  In the non-coherent area they follow libcxlpod's protocol:
 *   writeback + fence after writing, invalidate before reading.
 *
 * Determinism (why every reported figure is a function of the
 * configuration only):
 *   - Turns.  The phases are serialised: in each phase the hosts take
 *     turns in rank order, one global step at a time, so only one host
 *     touches the pool's data at any moment and the cache and snoop-filter
 *     state at the start of every turn is fixed.  The next host learns
 *     that the step before its own is done from that host's control line
 *     in the NON-coherent area (a plain store + writeback; it polls with
 *     invalidate + load; a random epoch, agreed at the start as tool.c's
 *     join does, tells this run's lines from stale ones).  Waiting never
 *     touches the coherent window, so it never changes the snoop filter;
 *     the poll line is one line of the waiter's cache, whose state after
 *     the first poll does not depend on how many polls there were.  No
 *     atomics are used on the pool (under -icount a timed-mode xchg on
 *     the pool never completes: tool_join/tool_barrier cannot be used).
 *   - Own work only.  A turn's guest time is the sum of rdtsc deltas over
 *     its own work (under -icount shift=N the TSC counts virtual
 *     nanoseconds: instructions x 2^N plus the latency the device charged),
 *     never a wait.  Its counters are the device's statistics registers
 *     (cxlpod_stats) read before and after the turn; polls happen only
 *     between turns.
 *   - No interrupt inside a measured interval.  The guest's timer tick
 *     (HZ=250) would land at a different point of the work on every run.
 *     The work is cut into slices of at most --slice-us of guest time,
 *     each started just after a tick (CLOCK_MONOTONIC_COARSE changes at
 *     every tick), so no tick falls inside one; a slice during which the
 *     coarse clock or the interrupt count (/proc/stat "intr") changed is
 *     counted as disturbed (reported; 0 expected).  Coherence operations
 *     are issued per 4 KiB so that no single instruction is charged more
 *     than a slice can hold.  Output is printed only at the end (the
 *     serial port interrupts).
 *   - Fixed data: values depend on --seed, the experiment, round, host
 *     and index, never on the clock.
 *
 * Output: one JSON line per experiment (per host) with every round's
 * phases: guest ns, charged ns, slices, disturbed slices and the device
 * counters' deltas; and whether the sums were exact.  The pod-wide
 * figures (time of the slowest host per phase, totals) are computed from
 * every host's lines by scripts/experiment.sh.
 *
 * Exit codes: 0 exact sums and no disturbed slice; 3 a wrong sum;
 * 5 disturbed slices (figures may differ between runs); 1 usage;
 * 2 setup; 4 peer timeout.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define EXIT_DISTURBED 5
#define UNIT_WORDS 512u /* 4 KiB: the unit of work and of a coherence call */
#define MAXL 16
#define NPHASE 3
#define NC_CTRL 0            /* control lines at the start of the nc area */
#define NC_DATA (2u << 20)   /* data after the control lines */
_Static_assert(NC_CTRL + 2 * CXLPOD_MAX_HOSTS * 64 <= NC_DATA, "the control lines fit");
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum area { AREA_COH = 0, AREA_NC = 1 };
static const char *area_name[] = {"coherent", "noncoherent"};
static const char *phase_name[NPHASE] = {"publish", "reduce_scatter", "all_gather"};

struct pstat { /* one phase of one round on this host */
	uint64_t ns, charged, slices, disturbed;
	uint64_t hits, misses, snoops, bi, sf_ev, wb_lines, cache_ev, stale, wb_ops, inv_ops;
};

/* ---- time: ticks and slices ---------------------------------------------------------- */
static int64_t tick_ns = 4000000; /* CLOCK_MONOTONIC_COARSE resolution = the tick */
static int64_t slice_ns = 2500000;
static int irq_fd = -1;
static bool sliced = true;

static inline uint64_t tsc(void)
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static inline int64_t coarse(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Interrupts taken so far (first number of /proc/stat's "intr" line) */
static uint64_t irq_count(void)
{
	static char buf[65536];
	if (irq_fd < 0)
		return 0;
	ssize_t n = pread(irq_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *s = strstr(buf, "\nintr ");
	return s ? strtoull(s + 6, NULL, 10) : 0;
}

/* Return just after a timer tick: sleep until shortly before the next one
 * is due, then spin until the coarse clock moves. */
static void wait_tick(void)
{
	int64_t c = coarse();
	int64_t wake = c + tick_ns - 700000;
	struct timespec ts = {wake / 1000000000, wake % 1000000000};
	if (wake > c)
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	c = coarse();
	while (coarse() == c)
		__builtin_ia32_pause();
}

struct slicer {
	struct pstat *ps;
	uint64_t t0, irq0;
	int64_t c0;
};

static void slice_start(struct slicer *s)
{
	if (sliced) {
		wait_tick();
		s->irq0 = irq_count();
		s->c0 = coarse();
	}
	s->t0 = tsc();
}

static void slice_stop(struct slicer *s)
{
	uint64_t t1 = tsc();
	s->ps->ns += t1 - s->t0;
	s->ps->slices++;
	if (sliced && (coarse() != s->c0 || irq_count() != s->irq0))
		s->ps->disturbed++;
}

/* After each unit of work: a new slice once this one has used its budget */
static inline void slice_check(struct slicer *s)
{
	if ((int64_t)(tsc() - s->t0) >= slice_ns) {
		slice_stop(s);
		slice_start(s);
	}
}

/* ---- data -------------------------------------------------------------------------------- */
/* the defaults, shown by usage() */
#define DEF_AREAS "coherent,noncoherent"
#define DEF_HOSTS "2"
#define DEF_SIZES "64K"
#define DEF_ROUNDS 2
#define DEF_SEED 1
#define DEF_SLICE_US 2500
#define DEF_WAIT_MS 50

static uint64_t seed = DEF_SEED;

static inline uint64_t gen(uint64_t exp, uint64_t round, uint64_t host, uint64_t i)
{
	uint64_t s = seed ^ (exp * 0x9e3779b97f4a7c15ull) ^ (round * 0xd1b54a32d192ed03ull) ^
		     (host * 0xabc98388fb8fac03ull) ^ (i * 0x8cb92ba72f3d8dd7ull);
	return splitmix64(&s) >> 24; /* < 2^40: sums of <= 2^24 hosts never wrap */
}

static int parse_list(const char *s, uint64_t *out, int max, bool size)
{
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		if (n >= max)
			return -1;
		uint64_t v = size ? parse_size_arg(tok) : strtoull(tok, NULL, 10);
		if (!v)
			return -1;
		out[n++] = v;
	}
	return n;
}

/* ---- turns ------------------------------------------------------------------------------- */
/*
 * Control lines, all in the non-coherent area, each written by one host only:
 *   line h (h < CXLPOD_MAX_HOSTS):  host h's: w0 = last step done, w1 = the
 *                          run's epoch once it has joined, w2 = its hello nonce
 *   line CXLPOD_MAX_HOSTS + r:  host 0's welcome of host r: w0 = r's nonce,
 *                          w1 = epoch
 * The epoch is random, so lines left in the pool by an earlier run (or
 * another tool) never pass for this run's (the join of tool.c, without
 * atomics and without the coherent window).
 */
struct ctx {
	struct tool t;
	uint64_t step;      /* global step counter (same sequence on every host) */
	int prev_owner;     /* host of the step before */
	uint64_t epoch;
	volatile uint64_t *ctl; /* control lines */
	unsigned wait_ms_max;
	int err;
};

static volatile uint64_t *host_line(struct ctx *c, int h)
{
	return &c->ctl[h * 8];
}

static volatile uint64_t *welcome_line(struct ctx *c, int r)
{
	return &c->ctl[(CXLPOD_MAX_HOSTS + r) * 8];
}

static int chk(struct ctx *c, int e)
{
	if (e && !c->err) {
		fprintf(stderr, "%s: %s\n", c->t.name, cxlpod_errmsg());
		c->err = EXIT_SETUP;
	}
	return e;
}

/* Fetch a control line afresh: invalidate, then load (by the caller) */
static int refetch(struct ctx *c, volatile uint64_t *l)
{
	return chk(c, cxlpod_invalidate(c->t.p, (const void *)l, 64)) ? c->err : 0;
}

/* Make this host's stores to a control line visible */
static int publish(struct ctx *c, volatile uint64_t *l)
{
	if (chk(c, cxlpod_writeback(c->t.p, (const void *)l, 64)) || chk(c, cxlpod_fence(c->t.p)))
		return c->err;
	return 0;
}

/* Between polls: sleep a little longer each time (up to --wait-ms-max);
 * the waiter's own guest time is never measured.  Returns EXIT_PEER on
 * timeout or a failed peer. */
struct backoff {
	double t0;
	unsigned polls;
	long ns;
};

static int backoff(struct ctx *c, struct backoff *b, const char *what)
{
	if (!b->ns)
		b->ns = 20000;
	struct timespec ts = {b->ns / 1000000000, b->ns % 1000000000};
	nanosleep(&ts, NULL);
	if (b->ns < (long)c->wait_ms_max * 1000000)
		b->ns += b->ns / 4 + 1000;
	if ((++b->polls & 15) == 0) {
		double n = now_s();
		if (b->t0 == 0)
			b->t0 = n;
		else if (n - b->t0 > c->t.timeout_s) {
			fprintf(stderr, "%s: timeout after %.0f s waiting for %s\n", c->t.name,
				c->t.timeout_s, what);
			return EXIT_PEER;
		}
		if (tool_peers_alive(&c->t))
			return EXIT_PEER;
	}
	return 0;
}

/* Wait until host @h has done step @want of this run */
static int wait_step(struct ctx *c, int h, uint64_t want)
{
	volatile uint64_t *l = host_line(c, h);
	struct backoff b = {0};
	for (;;) {
		if (refetch(c, l))
			return c->err;
		if (l[1] == c->epoch && l[0] >= want)
			return 0;
		if (backoff(c, &b, "the host before this one"))
			return EXIT_PEER;
	}
}

static int publish_done(struct ctx *c)
{
	volatile uint64_t *l = host_line(c, c->t.rank);
	l[0] = c->step;
	return publish(c, l);
}

/* Every host learns the run's epoch; host 0 takes its first step only once
 * every host has joined. */
static int join(struct ctx *c)
{
	struct tool *t = &c->t;
	volatile uint64_t *mine = host_line(c, t->rank);
	struct backoff b = {0};
	int rc;
	if (t->rank == 0) {
		uint64_t welcomed[CXLPOD_MAX_HOSTS] = {0};
		c->epoch = rand64();
		mine[0] = 0;
		mine[1] = c->epoch;
		mine[2] = 0;
		if ((rc = publish(c, mine)))
			return rc;
		for (;;) {
			bool all = true;
			for (int r = 1; r < t->nhosts; r++) {
				volatile uint64_t *l = host_line(c, r);
				if ((rc = refetch(c, l)))
					return rc;
				uint64_t hello = l[2], ready = l[1];
				if (ready == c->epoch)
					continue;
				all = false;
				if (hello && hello != welcomed[r]) {
					volatile uint64_t *w = welcome_line(c, r);
					w[0] = hello;
					w[1] = c->epoch;
					if ((rc = publish(c, w)))
						return rc;
					welcomed[r] = hello;
				}
			}
			if (all)
				return 0;
			if (backoff(c, &b, "every host to join"))
				return EXIT_PEER;
		}
	}
	uint64_t nonce = rand64();
	mine[0] = 0;
	mine[1] = 0;
	mine[2] = nonce;
	if ((rc = publish(c, mine)))
		return rc;
	volatile uint64_t *w = welcome_line(c, t->rank);
	for (;;) {
		if ((rc = refetch(c, w)))
			return rc;
		if (w[0] == nonce)
			break;
		if (backoff(c, &b, "host 0's welcome"))
			return EXIT_PEER;
	}
	c->epoch = w[1];
	mine[1] = c->epoch;
	return publish(c, mine);
}

/* One step of the schedule: returns true (after waiting for the step
 * before) when it is this host's. */
static int next_step(struct ctx *c, int owner, bool *mine)
{
	c->step++;
	*mine = owner == c->t.rank;
	int rc = 0;
	if (*mine && c->prev_owner >= 0 && c->prev_owner != c->t.rank)
		rc = wait_step(c, c->prev_owner, c->step - 1);
	c->prev_owner = owner;
	return rc;
}

static void stats_delta(struct pstat *ps, const struct cxlpod_stats *a, const struct cxlpod_stats *b)
{
	ps->charged += b->dev_charged_ns - a->dev_charged_ns;
	ps->hits += b->dev_hits - a->dev_hits;
	ps->misses += b->dev_misses - a->dev_misses;
	ps->snoops += b->dev_snoops - a->dev_snoops;
	ps->bi += b->dev_back_invalidates - a->dev_back_invalidates;
	ps->sf_ev += b->dev_sf_evictions - a->dev_sf_evictions;
	ps->wb_lines += b->dev_wb_lines - a->dev_wb_lines;
	ps->cache_ev += b->dev_cache_evictions - a->dev_cache_evictions;
	ps->stale += b->dev_stale_reads - a->dev_stale_reads;
	ps->wb_ops += b->dev_wb_ops - a->dev_wb_ops;
	ps->inv_ops += b->dev_inv_ops - a->dev_inv_ops;
}

/* ---- one experiment ---------------------------------------------------------------------- */
struct exp {
	int area, n;
	uint64_t bytes;
	bool skipped;
	uint64_t wrong;
	struct pstat ph[8][NPHASE]; /* [round][phase] */
};

static int run_exp(struct ctx *c, struct exp *x, int idx, int rounds, uint64_t *local,
		   uint64_t *result)
{
	struct tool *t = &c->t;
	int N = x->n, me = t->rank;
	bool part = me < N, nc = x->area == AREA_NC;
	uint64_t E = x->bytes / 8;
	size_t vb = (x->bytes + 4095) & ~(size_t)4095;
	uint8_t *base = nc ? t->nc + NC_DATA : t->coh;
	size_t room = nc ? (t->nc_len > NC_DATA ? t->nc_len - NC_DATA : 0) : t->coh_len;
	if ((size_t)(N + 1) * vb > room || N > t->nhosts) {
		x->skipped = true;
		return 0;
	}
	/* chunks are whole lines: two hosts never write one line */
	uint64_t chunk = (((E + N - 1) / N) + 7) & ~7ull;
	uint64_t lo = (uint64_t)me * chunk < E ? (uint64_t)me * chunk : E;
	uint64_t hi = lo + chunk < E ? lo + chunk : E;
	volatile uint64_t *mine = (volatile uint64_t *)(base + (size_t)me * vb);
	volatile uint64_t *out = (volatile uint64_t *)(base + (size_t)N * vb);
	cxlpod *p = t->p;

	for (int r = 0; r < rounds; r++) {
		if (part)
			for (uint64_t i = 0; i < E; i++)
				local[i] = gen(idx, r, me, i);
		for (int ph = 0; ph < NPHASE; ph++) {
			for (int h = 0; h < N; h++) {
				bool my;
				int rc = next_step(c, h, &my);
				if (rc)
					return rc;
				if (!my)
					continue;
				struct pstat *ps = &x->ph[r][ph];
				struct slicer sl = {.ps = ps};
				struct cxlpod_stats s0, s1;
				cxlpod_stats(p, &s0);
				slice_start(&sl);
				if (ph == 0) { /* P1: publish my vector */
					for (uint64_t u = 0; u < E; u += UNIT_WORDS) {
						uint64_t e = u + UNIT_WORDS < E ? u + UNIT_WORDS : E;
						for (uint64_t i = u; i < e; i++)
							mine[i] = local[i];
						if (nc)
							chk(c, cxlpod_writeback(p, (const void *)(mine + u),
									       (e - u) * 8));
						slice_check(&sl);
					}
					if (nc)
						chk(c, cxlpod_fence(p));
				} else if (ph == 1) { /* P2: reduce-scatter, my chunk */
					for (uint64_t u = lo; u < hi; u += UNIT_WORDS) {
						uint64_t e = u + UNIT_WORDS < hi ? u + UNIT_WORDS : hi;
						for (uint64_t i = u; i < e; i++)
							result[i] = local[i];
						for (int k = 0; k < N; k++) {
							if (k == me)
								continue;
							volatile uint64_t *in =
								(volatile uint64_t *)(base + (size_t)k * vb);
							if (nc)
								chk(c, cxlpod_invalidate(
									       p, (const void *)(in + u),
									       (e - u) * 8));
							for (uint64_t i = u; i < e; i++)
								result[i] += in[i];
							slice_check(&sl);
						}
						for (uint64_t i = u; i < e; i++)
							out[i] = result[i];
						if (nc)
							chk(c, cxlpod_writeback(p, (const void *)(out + u),
									       (e - u) * 8));
						slice_check(&sl);
					}
					if (nc)
						chk(c, cxlpod_fence(p));
				} else { /* P3: all-gather */
					for (uint64_t u = 0; u < E; u += UNIT_WORDS) {
						uint64_t e = u + UNIT_WORDS < E ? u + UNIT_WORDS : E;
						if (nc)
							chk(c, cxlpod_invalidate(p, (const void *)(out + u),
										 (e - u) * 8));
						for (uint64_t i = u; i < e; i++)
							result[i] = out[i];
						slice_check(&sl);
					}
				}
				slice_stop(&sl);
				cxlpod_stats(p, &s1);
				stats_delta(ps, &s0, &s1);
				if (c->err)
					return c->err;
				if (ph == 2) { /* verify (not measured) */
					for (uint64_t i = 0; i < E; i++) {
						uint64_t want = 0;
						for (int k = 0; k < N; k++)
							want += gen(idx, r, k, i);
						x->wrong += result[i] != want;
					}
				}
				int rc2 = publish_done(c);
				if (rc2)
					return rc2;
			}
		}
	}
	return 0;
}

static void print_exp(struct ctx *c, struct exp *x, int rounds, int pod_idx)
{
	struct jbuf j;
	j_begin(&j);
	j_common(&j, &c->t);
	j_int(&j, "exp", pod_idx);
	j_str(&j, "area", area_name[x->area]);
	j_int(&j, "n", x->n);
	j_uint(&j, "bytes", x->bytes);
	j_bool(&j, "participant", c->t.rank < x->n);
	j_bool(&j, "skipped", x->skipped);
	j_uint(&j, "wrong", x->wrong);
	j_bool(&j, "sliced", sliced);
	j_arr_begin(&j, "rounds");
	for (int r = 0; r < rounds && !x->skipped && c->t.rank < x->n; r++) {
		j_arr_begin(&j, NULL);
		for (int ph = 0; ph < NPHASE; ph++) {
			struct pstat *s = &x->ph[r][ph];
			j_obj_begin(&j, NULL);
			j_str(&j, "phase", phase_name[ph]);
			j_uint(&j, "ns", s->ns);
			j_uint(&j, "charged_ns", s->charged);
			j_uint(&j, "slices", s->slices);
			j_uint(&j, "disturbed", s->disturbed);
			j_uint(&j, "hits", s->hits);
			j_uint(&j, "misses", s->misses);
			j_uint(&j, "snoops", s->snoops);
			j_uint(&j, "back_invalidates", s->bi);
			j_uint(&j, "sf_evictions", s->sf_ev);
			j_uint(&j, "lines_written_back", s->wb_lines);
			j_uint(&j, "cache_evictions", s->cache_ev);
			j_uint(&j, "stale_reads", s->stale);
			j_uint(&j, "writeback_ops", s->wb_ops);
			j_uint(&j, "invalidate_ops", s->inv_ops);
			j_obj_end(&j);
		}
		j_arr_end(&j);
	}
	j_arr_end(&j);
	j_end_print(&j);
}

static void usage(void)
{
	printf("usage: cxlpod-allreduce-exp [OPTIONS]\n"
	       "Run on every host of a mode=timed pod under -icount (docs/experiment.md).\n"
	       "--nhosts is the pod's size; every host runs the same list of experiments.\n"
	       "  --areas LIST       coherent and/or noncoherent (default " DEF_AREAS ")\n"
	       "  --hosts-list LIST  participants per experiment, each 1..--nhosts (default "
	       DEF_HOSTS ")\n"
	       "  --sizes LIST       bytes per vector, whole lines, K/M suffixes (default "
	       DEF_SIZES ")\n"
	       "  --rounds N         1..8, the first a warm-up (default %d)\n"
	       "  --seed S           the vectors' seed (default %d)\n"
	       "  --slice-us US      100..3500 of guest time per slice (default %d)\n"
	       "  --no-slices        measure whole turns (not deterministic)\n"
	       "  --no-irq-check     do not count a slice with an interrupt as disturbed\n"
	       "  --wait-ms-max MS   1..1000, the longest sleep between polls (default %d)\n%s",
	       DEF_ROUNDS, DEF_SEED, DEF_SLICE_US, DEF_WAIT_MS, tool_common_usage());
}

int main(int argc, char **argv)
{
	struct ctx c = {.t = {.name = "cxlpod-allreduce-exp", .rank = -1}, .prev_owner = -1,
			.wait_ms_max = DEF_WAIT_MS};
	struct tool *t = &c.t;
	const char *areas_arg = DEF_AREAS, *hosts_arg = DEF_HOSTS, *sizes_arg = DEF_SIZES;
	int rounds = DEF_ROUNDS, slice_us = DEF_SLICE_US, wait_ms = DEF_WAIT_MS;
	bool noslices = false, noirq = false;
	const struct topt opts[] = {
		{"--areas", TOPT_STR, &areas_arg, 0, 0},
		{"--hosts-list", TOPT_STR, &hosts_arg, 0, 0},
		{"--sizes", TOPT_STR, &sizes_arg, 0, 0},
		{"--rounds", TOPT_INT, &rounds, 1, 8},
		{"--seed", TOPT_U64, &seed, 0, 0},
		{"--slice-us", TOPT_INT, &slice_us, 100, 3500},
		{"--no-slices", TOPT_FLAG, &noslices, 0, 0},
		{"--no-irq-check", TOPT_FLAG, &noirq, 0, 0},
		{"--wait-ms-max", TOPT_INT, &wait_ms, 1, 1000},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	sliced = !noslices;
	slice_ns = (int64_t)slice_us * 1000;
	c.wait_ms_max = wait_ms;

	int areas[2], nareas = 0;
	{
		char buf[64];
		snprintf(buf, sizeof(buf), "%s", areas_arg);
		for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
			if (nareas >= 2 || (strcmp(tok, "coherent") && strcmp(tok, "noncoherent"))) {
				fprintf(stderr, "%s: --areas: coherent and/or noncoherent\n", t->name);
				return EXIT_USAGE;
			}
			areas[nareas++] = strcmp(tok, "coherent") ? AREA_NC : AREA_COH;
		}
	}
	uint64_t hosts[MAXL], sizes[MAXL];
	int nh = parse_list(hosts_arg, hosts, MAXL, false);
	int ns = parse_list(sizes_arg, sizes, MAXL, true);
	if (nh <= 0 || ns <= 0 || nareas == 0) {
		fprintf(stderr, "%s: bad --hosts-list, --sizes or --areas\n", t->name);
		return EXIT_USAGE;
	}
	for (int i = 0; i < ns; i++)
		if (sizes[i] % 64) {
			fprintf(stderr, "%s: sizes must be whole lines (64 B)\n", t->name);
			return EXIT_USAGE;
		}
	int rc = tool_open(t);
	if (rc)
		return rc;
	for (int i = 0; i < nh; i++)
		if (hosts[i] < 1 || (int)hosts[i] > t->nhosts) {
			fprintf(stderr, "%s: --hosts-list %llu: the pod has %d hosts\n", t->name,
				(unsigned long long)hosts[i], t->nhosts);
			return EXIT_USAGE;
		}
	if (t->nc_len < NC_DATA + 4096) {
		fprintf(stderr, "%s: the non-coherent area is too small\n", t->name);
		return EXIT_SETUP;
	}
	c.ctl = (volatile uint64_t *)(t->nc + NC_CTRL);

	/* the tick, the interrupt count, no page faults and no preemption inside
	 * the measured work */
	struct timespec res;
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 && res.tv_nsec > 0)
		tick_ns = res.tv_nsec;
	if (sliced && slice_ns > tick_ns - 1000000) {
		fprintf(stderr, "%s: --slice-us %d does not fit the %lld us tick with room to spare\n",
			t->name, slice_us, (long long)tick_ns / 1000);
		return EXIT_USAGE;
	}
	if (!noirq)
		irq_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	uint64_t maxb = 0;
	for (int i = 0; i < ns; i++)
		maxb = sizes[i] > maxb ? sizes[i] : maxb;
	uint64_t *local = aligned_alloc(4096, (maxb + 4095) & ~4095ull);
	uint64_t *result = aligned_alloc(4096, (maxb + 4095) & ~4095ull);
	if (!local || !result)
		return EXIT_SETUP;
	memset(local, 0, maxb);
	memset(result, 0, maxb);
	/* a guest's measures only: on a loopback file the processes share the
	 * machine with everything else, and must never take it over */
	bool in_guest = t->info.backend == CXLPOD_BACKEND_DEVICE;
	if (in_guest && mlockall(MCL_CURRENT | MCL_FUTURE))
		fprintf(stderr, "%s: mlockall: %s (page faults may disturb slices)\n", t->name,
			strerror(errno));
	/* map the pool's pages without touching their data (a load or store
	 * would go through the cache model) */
	{
		uint64_t hmax = 0;
		for (int i = 0; i < nh; i++)
			hmax = hosts[i] > hmax ? hosts[i] : hmax;
		size_t vb = (maxb + 4095) & ~(size_t)4095, want = (hmax + 1) * vb;
		size_t cl = want < t->coh_len ? want : t->coh_len;
		size_t nl = NC_DATA + want < t->nc_len ? NC_DATA + want : t->nc_len;
		if (madvise(t->coh, (cl + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1),
			    MADV_POPULATE_WRITE) ||
		    madvise(t->nc, (nl + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1),
			    MADV_POPULATE_WRITE))
			fprintf(stderr, "%s: madvise(MADV_POPULATE_WRITE): %s (the first touch of "
				"each page faults inside a measured slice)\n", t->name, strerror(errno));
	}
	struct sched_param sp = {.sched_priority = 1};
	if (in_guest && sched_setscheduler(0, SCHED_FIFO, &sp))
		fprintf(stderr, "%s: SCHED_FIFO: %s\n", t->name, strerror(errno));

	/* start: every host joins this run (its epoch); host 0 takes the first
	 * step once all have */
	if ((rc = join(&c)))
		return rc;

	int nexp = nareas * nh * ns;
	struct exp *xs = calloc(nexp, sizeof(*xs));
	if (!xs)
		return EXIT_SETUP;
	int k = 0;
	for (int a = 0; a < nareas; a++)
		for (int i = 0; i < nh; i++)
			for (int s = 0; s < ns; s++, k++) {
				xs[k].area = areas[a];
				xs[k].n = (int)hosts[i];
				xs[k].bytes = sizes[s];
			}
	for (k = 0; k < nexp && !rc; k++)
		rc = run_exp(&c, &xs[k], k, rounds, local, result);
	if (rc) {
		fprintf(stderr, "%s: stopped at experiment %d (rc %d)\n", t->name, k - 1, rc);
		return rc;
	}
	/* nobody leaves before the last turn is done: a host that left holds
	 * nothing in the snoop filter any more, which would change the
	 * back-invalidates of the turns still running */
	if (c.prev_owner >= 0 && c.prev_owner != t->rank &&
	    (rc = wait_step(&c, c.prev_owner, c.step)))
		return rc;
	sp.sched_priority = 0;
	if (in_guest)
		sched_setscheduler(0, SCHED_OTHER, &sp);

	uint64_t wrong = 0, disturbed = 0;
	for (k = 0; k < nexp; k++) {
		wrong += xs[k].wrong;
		for (int r = 0; r < rounds; r++)
			for (int ph = 0; ph < NPHASE; ph++)
				disturbed += xs[k].ph[r][ph].disturbed;
		if (t->json)
			print_exp(&c, &xs[k], rounds, k);
	}
	printf("cxlpod-allreduce-exp: host %d/%d: %d experiments, %s, %llu disturbed slices\n",
	       t->rank, t->nhosts, nexp, wrong ? "WRONG SUMS" : "exact sums",
	       (unsigned long long)disturbed);
	tool_close(t);
	return wrong ? EXIT_WRONG : disturbed ? EXIT_DISTURBED : 0;
}

/*
 * cxlpod-litmus: cross-host litmus tests, run in lock step by all hosts.
 *
 * Tests x areas x protocols; each combination has an expected outcome
 * (table below, also in docs/guest-guide.md); any mismatch exits 3.
 *
 * Protocols:
 *   none   plain stores and loads, no coherence operation, no fence
 *   wb     writer: store, writeback, fence;  reader: plain loads
 *   wbinv  writer: store, writeback, fence;  reader: invalidate, then load
 *   wb-nofence, wb-fence (mp only): writer: store, writeback, NO fence /
 *          fence, then the flag, then it waits for the readers' acks with
 *          plain loads (no fence point: no locked instruction, no sfence);
 *          reader: invalidate, then load.  Without the fence a native
 *          clwb/clflushopt is still queued (writeback=deferred) when the
 *          reader loads: the payload is stale, unless an interrupt of the
 *          writer's vCPU (a fence point) drained it first.  The doorbell is
 *          synchronous, so it needs no fence.
 *
 * Tests (N >= 2 hosts; rank 0 is the writer / observer):
 *   mp      message passing: rank 0 stores data (in the area), applies the
 *           writer protocol and raises a flag in the COHERENT window; the
 *           others wait for the flag, apply the reader protocol, load data.
 *           outcome: new | old | mixed
 *           (wb-nofence, wb-fence: 10 trials, 1 otherwise 3)
 *   sb      store buffering ring: rank r stores x[r]=1, protocol, loads
 *           x[r+1 mod N]; "00" = every rank read 0 in one trial.
 *           outcome: never-00 | always-00 | sometimes-00
 *   atomic  every rank does K __atomic fetch_adds on one counter (in the
 *           area; with wbinv each add is invalidate + add + writeback),
 *           from T threads (--threads, each K adds: the vCPUs of one host
 *           and the hosts race); rank 0 invalidates and reads it.
 *           With --atomic-seconds S, every thread adds until rank 0's
 *           S seconds are up (a flag in the coherent window, read every
 *           64 adds), so all hosts add at once for the whole trial (a
 *           contended rate); the counter must then equal the sum of the
 *           adds every host counted.
 *           outcome: exact | lost
 *   fs      false sharing: rank r stores word r of ONE line, protocol;
 *           rank 0 invalidates and reads the line.  outcome: all | lost
 *           The device's conflict counter (STAT_CONFLICTS, summed over
 *           the hosts) must grow by exactly min(N,8)-1 with wb and wbinv
 *           in the non-coherent area (every writeback after the first
 *           overwrites another host's word) and by 0 in the coherent
 *           window: outcome "lost(kept 0x.., 1 conflict)".
 *   stale   rank 0 sets a flag IN THE AREA with the writer protocol; the
 *           others poll it (reader protocol on every poll) for a while.
 *           outcome: seen | unseen | mixed
 *
 * Before each trial the lines are reset: every host flushes them, rank 0
 * writes the initial values and flushes, every host invalidates and loads
 * them (so its image holds the old value).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { T_MP, T_SB, T_ATOMIC, T_FS, T_STALE, NTESTS };
enum { P_NONE, P_WB, P_WBINV, P_WBNF, P_WBF, NPROTO };
enum { A_COH, A_NC, NAREAS };

static const char *test_name[NTESTS] = {"mp", "sb", "atomic", "fs", "stale"};
static const char *proto_name[NPROTO] = {"none", "wb", "wbinv", "wb-nofence", "wb-fence"};
static const char *area_name[NAREAS] = {"coherent", "noncoherent"};

/* Expected outcome on the cxl-shm device.  "any" = not determined (a race);
 * "a|b" = either; NULL = combination not run.  mp noncoherent wb-nofence
 * depends on the method and WB_MODE (expect_of).  On the loopback backend
 * every area behaves like the coherent window. */
static const char *expect_tab[NTESTS][NAREAS][NPROTO] = {
	[T_MP] = {{"new", "new", "new", "new", "new"}, {"old", "old", "new", "new", "new"}},
	[T_SB] = {{"any", "never-00", "never-00"}, {"always-00", "always-00", "never-00"}},
	[T_ATOMIC] = {{"exact", "exact", "exact"}, {"lost", "lost", "any"}},
	[T_FS] = {{"all", "all", "all"}, {"lost", "lost", "lost"}},
	[T_STALE] = {{"seen", "seen", "seen"}, {"unseen", "unseen", "seen"}},
};

struct ctl {
	struct pline flag;
	struct pline ack[CXLPOD_MAX_HOSTS];
	struct pline obs[CXLPOD_MAX_HOSTS];
	struct pline sbv[CXLPOD_MAX_HOSTS];
	struct pline astop; /* --atomic-seconds: the trial's token once rank 0's time is up */
};

struct lit {
	struct tool *t;
	struct ctl *ctl;
	uint8_t *base[NAREAS];
	int iters_mp, iters_sb, atomic_ops, threads, poll_ms;
	double atomic_s;	/* this host's time in its adds, last atomic test */
	double atomic_secs;	/* --atomic-seconds: add for this long, not --atomic-ops times */
	double atomic_t0;	/* when this host's adds began */
	uint64_t atomic_done;	/* this host's adds (all its threads), last atomic test */
	uint64_t atomic_tok;	/* the atomic trial's token (the stop flag's value) */
	uint64_t token;
	int mismatches, combos;
	struct jbuf *j;
};

#define LINE(l, a, k) ((volatile uint64_t *)((l)->base[a] + 64 * (k)))
#define L_MP 0
#define L_ATOMIC 40
#define MAX_THREADS 64
#define L_FS 41
#define L_STALE 42
#define L_SB 64 /* 64..64+N-1: after the others, whatever N */
#define L_END (L_SB + CXLPOD_MAX_HOSTS)
#define CTL_ROOM (64u << 10) /* struct ctl, before the coherent area's lines */
_Static_assert(sizeof(struct ctl) <= CTL_ROOM, "litmus's control lines fit before its lines");

/* One thread's adds of the atomic test (0, or the first error) */
struct adder {
	struct lit *l;
	uint64_t *ctr;
	int proto;
	bool extra;	/* not the calling thread: reports its own error */
	int err;
	uint64_t adds;
};

/*
 * --atomic-seconds: is the trial over?  Rank 0's time ends it for every
 * host (the stop flag); another host also gives up when a peer aborted
 * or rank 0 never set the flag within the trial and --timeout.
 */
static bool adds_over(struct lit *l)
{
	struct tool *t = l->t;
	volatile uint64_t *stop = &l->ctl->astop.v;
	double el = now_s() - l->atomic_t0;

	if (__atomic_load_n(stop, __ATOMIC_ACQUIRE) == l->atomic_tok)
		return true;
	if (t->rank == 0 && el >= l->atomic_secs) {
		__atomic_store_n(stop, l->atomic_tok, __ATOMIC_RELEASE);
		return true;
	}
	return t->rank != 0 && ((t->epoch && t->sync->abort.v == t->epoch) ||
				el > l->atomic_secs + t->timeout_s);
}

static void *adder_run(void *arg)
{
	struct adder *d = arg;
	struct tool *t = d->l->t;

	for (uint64_t i = 0; !d->err; i++) {
		/* at least 64 adds each: a host that starts late still races */
		if (d->l->atomic_secs > 0 ? (i && i % 64 == 0 && adds_over(d->l))
					  : i >= (uint64_t)d->l->atomic_ops)
			break;
		if (d->proto == P_WBINV)
			d->err = cxlpod_invalidate(t->p, d->ctr, 8);
		__atomic_fetch_add(d->ctr, 1, __ATOMIC_SEQ_CST);
		d->adds++;
		if (d->proto == P_WBINV && !d->err)
			d->err = cxlpod_writeback(t->p, d->ctr, 8);
	}
	if (d->err && d->extra)
		fprintf(stderr, "%s: %s\n", t->name, cxlpod_errmsg());
	return NULL;
}

/* --threads adders at once; 0, or the first error */
static int adders(struct lit *l, uint64_t *ctr, int proto)
{
	pthread_t th[MAX_THREADS];
	struct adder d[MAX_THREADS];
	int n = 0, err = 0;

	for (int k = 0; k < l->threads; k++) {
		d[k] = (struct adder){.l = l, .ctr = ctr, .proto = proto, .extra = k > 0};
		if (k && pthread_create(&th[k], NULL, adder_run, &d[k]))
			break;
		n = k + 1;
	}
	adder_run(&d[0]);
	for (int k = 1; k < n; k++)
		pthread_join(th[k], NULL);
	if (l->atomic_secs > 0 && l->t->rank == 0) /* even if its adds failed */
		__atomic_store_n(&l->ctl->astop.v, l->atomic_tok, __ATOMIC_RELEASE);
	l->atomic_done = 0;
	for (int k = 0; k < n; k++)
		l->atomic_done += d[k].adds;
	for (int k = 0; k < n && !err; k++)
		err = d[k].err;
	if (!err && n < l->threads) {
		fprintf(stderr, "%s: pthread_create failed\n", l->t->name);
		err = -1;
	}
	return err;
}

static int wb_fence(struct lit *l, volatile uint64_t *a)
{
	int e = cxlpod_writeback(l->t->p, (const void *)a, 8);
	if (!e)
		e = cxlpod_fence(l->t->p);
	return e;
}

static int writer_side(struct lit *l, int proto, volatile uint64_t *a)
{
	return proto == P_NONE ? 0 : wb_fence(l, a);
}

static int reader_side(struct lit *l, int proto, volatile uint64_t *a)
{
	return proto == P_WBINV || proto == P_WBNF || proto == P_WBF
		       ? cxlpod_invalidate(l->t->p, (const void *)a, 8)
		       : 0;
}

/* The mp writer after the flag with wb-nofence / wb-fence: wait until every
 * reader acked TOK with plain loads and pause only, so that this vCPU
 * reaches no fence point of its own; a few seconds at most (then the
 * barriers that follow wait properly). */
static void wait_acks_plain(struct lit *l, uint64_t tok)
{
	struct tool *t = l->t;
	double t0 = now_s();
	for (unsigned spins = 0;; spins++) {
		int all = 1;
		for (int r = 1; r < t->nhosts; r++)
			all &= l->ctl->ack[r].v == tok;
		if (all)
			return;
		__builtin_ia32_pause();
		if ((spins & 4095) == 0 && now_s() - t0 > 5)
			return;
	}
}

/* Reset lines [k0, k0+n) of area a to value v (word 0; rest zero). */
static int prime(struct lit *l, int a, int k0, int n, uint64_t v)
{
	struct tool *t = l->t;
	uint8_t *p = l->base[a] + 64 * k0;
	size_t len = 64 * (size_t)n;
	if (cxlpod_flush(t->p, p, len))
		return -1;
	if (tool_barrier(t))
		return -2;
	if (t->rank == 0) {
		/* refresh first: a store of the value the stale image already
		 * holds would not make the line dirty */
		if (cxlpod_invalidate(t->p, p, len))
			return -1;
		for (int k = 0; k < n; k++) {
			memset(p + 64 * k, 0, 64);
			*(volatile uint64_t *)(p + 64 * k) = v;
		}
		if (cxlpod_flush(t->p, p, len) || cxlpod_fence(t->p))
			return -1;
	}
	if (tool_barrier(t))
		return -2;
	if (cxlpod_invalidate(t->p, p, len))
		return -1;
	for (int k = 0; k < n; k++)
		if (*(volatile uint64_t *)(p + 64 * k) != v) {
			fprintf(stderr, "%s: reset of line %d failed: read 0x%llx want 0x%llx\n",
				t->name, k0 + k,
				(unsigned long long)*(volatile uint64_t *)(p + 64 * k),
				(unsigned long long)v);
			return -3;
		}
	return tool_barrier(t) ? -2 : 0;
}

#define PRIME(l, a, k0, n, v)                                                                  \
	do {                                                                                   \
		int _r = prime(l, a, k0, n, v);                                                \
		if (_r == -2 || _r == -3) {                                                    \
			tool_abort(l->t);                                                      \
			return _r;                                                             \
		}                                                                              \
		if (_r)                                                                        \
			goto lib_err;                                                          \
	} while (0)
#define OP(x)                                                                                  \
	do {                                                                                   \
		if (x)                                                                         \
			goto lib_err;                                                          \
	} while (0)

/* Runs one combination; writes the outcome string.  Returns 0, or -2 on
 * peer failure (fatal). */
static int run_combo(struct lit *l, int test, int a, int proto, char *out, size_t outn,
		     uint64_t *conflicts_out)
{
	struct tool *t = l->t;
	struct ctl *c = l->ctl;
	int N = t->nhosts, me = t->rank;
	uint64_t obs = 0;

	switch (test) {
	case T_MP: {
		uint64_t nnew = 0, nold = 0;
		int iters = proto >= P_WBNF ? 10 : l->iters_mp;
		for (int i = 0; i < iters; i++) {
			uint64_t tok = ++l->token;
			uint64_t oldv = tok << 8 | 1, newv = tok << 8 | 2;
			volatile uint64_t *d = LINE(l, a, L_MP);
			PRIME(l, a, L_MP, 1, oldv);
			if (me == 0) {
				*d = newv;
				if (proto == P_WBNF)
					OP(cxlpod_writeback(t->p, (const void *)d, 8));
				else
					OP(writer_side(l, proto, d));
				__atomic_store_n(&c->flag.v, tok, __ATOMIC_RELEASE);
				if (proto >= P_WBNF)
					wait_acks_plain(l, tok);
			} else {
				if (tool_wait_eq(t, &c->flag.v, tok))
					return -2;
				OP(reader_side(l, proto, d));
				uint64_t v = *d;
				nnew += v == newv;
				nold += v == oldv;
				__atomic_store_n(&c->ack[me].v, tok, __ATOMIC_RELEASE);
			}
		}
		obs = nnew << 32 | nold;
		break;
	}
	case T_SB: {
		uint64_t zeros = 0;
		for (int i = 0; i < l->iters_sb; i++) {
			PRIME(l, a, L_SB, N, 0);
			volatile uint64_t *mine = LINE(l, a, L_SB + me);
			volatile uint64_t *other = LINE(l, a, L_SB + (me + 1) % N);
			*mine = 1;
			OP(writer_side(l, proto, mine));
			OP(reader_side(l, proto, other));
			uint64_t v = *other;
			__atomic_store_n(&c->sbv[me].v, v, __ATOMIC_RELEASE);
			if (tool_barrier(t))
				return -2;
			int allzero = 1;
			for (int r = 0; r < N; r++)
				if (__atomic_load_n(&c->sbv[r].v, __ATOMIC_ACQUIRE) != 0)
					allzero = 0;
			zeros += allzero;
		}
		obs = zeros;
		break;
	}
	case T_ATOMIC: {
		PRIME(l, a, L_ATOMIC, 1, 0);
		uint64_t *ctr = (uint64_t *)LINE(l, a, L_ATOMIC);
		l->atomic_tok = ++l->token;
		l->atomic_t0 = now_s();
		OP(adders(l, ctr, proto));
		l->atomic_s = now_s() - l->atomic_t0;
		if (proto == P_WB)
			OP(wb_fence(l, ctr));
		/* this host's count: the sum is what the counter must hold */
		__atomic_store_n(&c->sbv[me].v, l->atomic_done, __ATOMIC_RELEASE);
		if (tool_barrier(t))
			return -2;
		if (me == 0) {
			OP(cxlpod_invalidate(t->p, ctr, 8));
			obs = __atomic_load_n(ctr, __ATOMIC_SEQ_CST);
		}
		break;
	}
	case T_FS: {
		uint64_t tok = ++l->token;
		struct cxlpod_stats st0, st1;
		PRIME(l, a, L_FS, 1, 0);
		volatile uint64_t *line = LINE(l, a, L_FS);
		OP(cxlpod_stats(t->p, &st0));
		if (me < 8) {
			line[me] = tok << 8 | (uint64_t)(me + 1);
			OP(writer_side(l, proto, &line[me]));
		}
		if (tool_barrier(t))
			return -2;
		OP(cxlpod_stats(t->p, &st1));
		__atomic_store_n(&c->sbv[me].v, st1.dev_conflicts - st0.dev_conflicts,
				 __ATOMIC_RELEASE);
		if (me == 0) {
			OP(cxlpod_invalidate(t->p, (const void *)line, 64));
			for (int r = 0; r < N && r < 8; r++)
				if (line[r] == (tok << 8 | (uint64_t)(r + 1)))
					obs |= 1ull << r;
		}
		break;
	}
	case T_STALE: {
		uint64_t seen = 0, unseen = 0;
		for (int i = 0; i < l->iters_mp; i++) {
			uint64_t tok = ++l->token;
			volatile uint64_t *f = LINE(l, a, L_STALE);
			PRIME(l, a, L_STALE, 1, 0);
			if (me == 0) {
				*f = tok;
				OP(writer_side(l, proto, f));
			}
			if (tool_barrier(t))
				return -2;
			if (me != 0) {
				double t0 = now_s();
				int ok = 0;
				for (int polls = 0;; polls++) {
					OP(reader_side(l, proto, f));
					if (*f == tok) {
						ok = 1;
						break;
					}
					if (polls >= 50 && now_s() - t0 > l->poll_ms / 1e3)
						break;
				}
				seen += ok;
				unseen += !ok;
			}
		}
		obs = seen << 32 | unseen;
		break;
	}
	}

	/* publish observations, combine identically on every host */
	__atomic_store_n(&c->obs[me].v, obs, __ATOMIC_RELEASE);
	if (tool_barrier(t))
		return -2;
	uint64_t o[CXLPOD_MAX_HOSTS], conflicts = 0, adds_all = 0;
	for (int r = 0; r < N; r++) {
		o[r] = __atomic_load_n(&c->obs[r].v, __ATOMIC_ACQUIRE);
		if (test == T_FS)
			conflicts += __atomic_load_n(&c->sbv[r].v, __ATOMIC_ACQUIRE);
		if (test == T_ATOMIC)
			adds_all += __atomic_load_n(&c->sbv[r].v, __ATOMIC_ACQUIRE);
	}
	switch (test) {
	case T_MP:
	case T_STALE: {
		int iters = test == T_MP && proto >= P_WBNF ? 10 : l->iters_mp;
		uint64_t x = 0, y = 0, tot = (uint64_t)(N - 1) * iters;
		for (int r = 1; r < N; r++) {
			x += o[r] >> 32;
			y += o[r] & 0xffffffffu;
		}
		const char *yes = test == T_MP ? "new" : "seen", *no = test == T_MP ? "old" : "unseen";
		if (x == tot)
			snprintf(out, outn, "%s", yes);
		else if (y == tot)
			snprintf(out, outn, "%s", no);
		else
			snprintf(out, outn, "mixed(%llu %s,%llu %s,%llu other)", (unsigned long long)x,
				 yes, (unsigned long long)y, no, (unsigned long long)(tot - x - y));
		break;
	}
	case T_SB:
		if (o[0] == 0)
			snprintf(out, outn, "never-00");
		else if (o[0] == (uint64_t)l->iters_sb)
			snprintf(out, outn, "always-00");
		else
			snprintf(out, outn, "sometimes-00(%llu/%d)", (unsigned long long)o[0],
				 l->iters_sb);
		break;
	case T_ATOMIC: {
		uint64_t want = l->atomic_secs > 0 ? adds_all
						   : (uint64_t)N * l->threads * l->atomic_ops;
		if (o[0] == want)
			snprintf(out, outn, "exact");
		else
			snprintf(out, outn, "lost(%llu/%llu)", (unsigned long long)o[0],
				 (unsigned long long)want);
		break;
	}
	case T_FS: {
		int n = N < 8 ? N : 8;
		const char *cs = conflicts == 1 ? "" : "s";
		if (o[0] == (1ull << n) - 1)
			snprintf(out, outn, "all(%llu conflict%s)", (unsigned long long)conflicts, cs);
		else
			snprintf(out, outn, "lost(kept 0x%llx, %llu conflict%s)",
				 (unsigned long long)o[0], (unsigned long long)conflicts, cs);
		*conflicts_out = conflicts;
		break;
	}
	}
	return 0;
lib_err:
	fprintf(stderr, "%s: %s\n", t->name, cxlpod_errmsg());
	tool_abort(t);
	return -2;
}

/* EXPECTED: "any", or alternatives "a|b"; GOT matches one if it is that
 * word, optionally followed by "(details)". */
static bool matches(const char *expected, const char *got)
{
	if (!strcmp(expected, "any"))
		return true;
	for (const char *e = expected; *e;) {
		size_t n = strcspn(e, "|");
		if (!strncmp(got, e, n) && (got[n] == 0 || got[n] == '('))
			return true;
		e += n + (e[n] == '|');
	}
	return false;
}

/* mp noncoherent wb-nofence: stale (at least once) only where a writeback
 * without a fence can still be pending: native instructions queued by a
 * device in writeback=deferred */
static const char *expect_of(struct lit *l, int test, int a, int proto, bool loop)
{
	const char *exp = expect_tab[test][loop ? A_COH : a][proto];
	if (test == T_MP && a == A_NC && proto == P_WBNF && !loop &&
	    l->t->info.method == CXLPOD_METHOD_NATIVE && l->t->info.wb_deferred)
		exp = "old|mixed";
	return exp;
}

/* fs: conflicts the device must count (summed over the hosts) */
static uint64_t fs_conflicts_expected(struct lit *l, int a, int proto, bool loop)
{
	int n = l->t->nhosts < 8 ? l->t->nhosts : 8;
	return !loop && a == A_NC && (proto == P_WB || proto == P_WBINV) ? (uint64_t)n - 1 : 0;
}

static int run_all(struct lit *l, const char *only)
{
	struct tool *t = l->t;
	bool loop = t->info.backend == CXLPOD_BACKEND_LOOPBACK;
	const char *method = cxlpod_method_name(t->info.method);
	if (!t->json)
		printf("%-7s %-12s %-10s %-24s %-10s %s\n", "test", "area", "proto", "outcome",
		       "expected", "result");
	for (int test = 0; test < NTESTS; test++) {
		if (only && strcmp(only, test_name[test]))
			continue;
		for (int a = 0; a < NAREAS; a++) {
			if (!l->base[a])
				continue;
			for (int p = 0; p < NPROTO; p++) {
				char got[96];
				uint64_t conflicts = 0;
				if (p >= P_WBNF && test != T_MP)
					continue;
				int r = run_combo(l, test, a, p, got, sizeof(got), &conflicts);
				if (r == -3) {
					printf("%-7s %-12s %-10s setup error: line reset not visible\n",
					       test_name[test], area_name[a], proto_name[p]);
					return EXIT_WRONG;
				}
				if (r)
					return EXIT_PEER;
				const char *exp = expect_of(l, test, a, p, loop);
				if (test == T_ATOMIC && !strcmp(exp, "exact") && !loop &&
				    !(t->info.caps & CXLPOD_CAP_ATOMICS))
					exp = "any"; /* device says atomics are not cross-host */
				bool ok = matches(exp, got);
				/* the conflict report: none in the coherent window, and
				 * exactly one per clobbering writeback (not counted for
				 * "none": its writebacks come later, at the next reset) */
				if (test == T_FS && p != P_NONE &&
				    conflicts != fs_conflicts_expected(l, a, p, loop) &&
				    t->info.backend == CXLPOD_BACKEND_DEVICE) {
					ok = false;
					snprintf(got + strlen(got), sizeof(got) - strlen(got),
						 " want %llu conflicts",
						 (unsigned long long)fs_conflicts_expected(l, a, p,
											loop));
				}
				l->combos++;
				l->mismatches += !ok;
				if (!t->json)
					printf("%-7s %-12s %-10s %-24s %-10s %s\n", test_name[test],
					       area_name[a], proto_name[p], got, exp,
					       ok ? "ok" : "MISMATCH");
				fflush(stdout);
				j_obj_begin(l->j, NULL);
				j_str(l->j, "method", method);
				j_str(l->j, "test", test_name[test]);
				j_str(l->j, "area", area_name[a]);
				j_str(l->j, "proto", proto_name[p]);
				j_str(l->j, "outcome", got);
				if (test == T_ATOMIC) {
					/* this host's adds (all its threads), for throughput */
					j_dbl(l->j, "seconds", l->atomic_s);
					j_uint(l->j, "adds", l->atomic_done);
					j_dbl(l->j, "ops_per_s", l->atomic_s > 0 ?
					      (double)l->atomic_done / l->atomic_s : 0);
				}
				if (test == T_FS) {
					j_uint(l->j, "conflicts", conflicts);
					uint64_t off = 0;
					cxlpod_offset(t->p, l->base[a] + 64 * L_FS, &off);
					j_uint(l->j, "line_offset", off);
				}
				j_str(l->j, "expected", exp);
				j_bool(l->j, "ok", ok);
				j_obj_end(l->j);
			}
		}
	}
	return 0;
}

static void reset_ctl(struct tool *t, void *arg)
{
	(void)t;
	struct lit *l = arg;
	memset(l->ctl, 0, sizeof(*l->ctl));
}

static void usage(void)
{
	printf("usage: cxlpod-litmus [--iters N(100)] [--atomic-ops K(1000)] [--threads T(1)]\n"
	       "                     [--atomic-seconds S] [--test NAME]\n"
	       "                     [--method doorbell|native|both] [options]\n"
	       "Runs mp, sb, atomic, fs, stale in both areas with protocols none, wb,\n"
	       "wbinv (mp also wb-nofence, wb-fence) on all hosts in lock step; exit 3\n"
	       "if an outcome differs from the expected one.  Needs >= 2 hosts.\n%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-litmus", .rank = -1};
	struct lit l = {.t = &t, .iters_mp = 3, .iters_sb = 100, .atomic_ops = 1000, .threads = 1,
		      .poll_ms = 20};
	const char *only = NULL;
	const struct topt opts[] = {
		{"--iters", TOPT_INT, &l.iters_sb, 1, 1e7},
		{"--atomic-ops", TOPT_INT, &l.atomic_ops, 1, 1e9},
		{"--atomic-seconds", TOPT_DBL, &l.atomic_secs, 0, 3600},
		{"--threads", TOPT_INT, &l.threads, 1, MAX_THREADS},
		{"--test", TOPT_STR, &only, 0, 0},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (only) {
		int k;
		for (k = 0; k < NTESTS && strcmp(only, test_name[k]); k++)
			;
		if (k == NTESTS) {
			fprintf(stderr, "cxlpod-litmus: unknown test %s\n", only);
			return EXIT_USAGE;
		}
	}
	bool both = t.method_both;
	if (both)
		t.method = CXLPOD_METHOD_DOORBELL;
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (t.nhosts < 2) {
		fprintf(stderr, "cxlpod-litmus: needs at least 2 hosts (--nhosts / CXLPOD_NHOSTS)\n");
		return EXIT_USAGE;
	}
	l.ctl = (struct ctl *)t.coh;
	if (t.coh_len < CTL_ROOM + 64 * L_END) {
		fprintf(stderr, "cxlpod-litmus: the coherent window is too small\n");
		return EXIT_SETUP;
	}
	l.base[A_COH] = t.coh + CTL_ROOM;
	l.base[A_NC] = t.nc_len >= 64 * L_END ? t.nc : NULL;
	if (tool_join(&t, 3, reset_ctl, &l))
		return EXIT_PEER;
	/* tokens unique per run: 24 bits of the run's epoch + a counter */
	l.token = (t.epoch >> 40) << 24;

	struct jbuf j;
	j_begin(&j);
	l.j = &j;
	j_common(&j, &t);
	j_arr_begin(&j, "results");
	if (!t.json && t.rank == 0)
		printf("cxlpod-litmus: %d hosts, %s backend, caps 0x%x\n", t.nhosts,
		       cxlpod_backend_name(t.info.backend),
		       t.info.caps);
	enum cxlpod_method methods[2] = {t.info.method, CXLPOD_METHOD_NATIVE};
	int nm = both ? 2 : 1;
	char skipped[160] = "";
	for (int m = 0; m < nm && !rc; m++) {
		if (m > 0) {
			if (!t.info.native_usable) {
				snprintf(skipped, sizeof(skipped),
					 "native method skipped: not usable on this host/device");
				if (!t.json && t.rank == 0)
					printf("%s\n", skipped);
				break;
			}
			if (cxlpod_set_method(t.p, methods[m])) {
				fprintf(stderr, "cxlpod-litmus: %s\n", cxlpod_errmsg());
				rc = EXIT_SETUP;
				break;
			}
			cxlpod_get_info(t.p, &t.info);
		}
		if (!t.json && t.rank == 0)
			printf("== method %s ==\n", cxlpod_method_name(t.info.method));
		rc = run_all(&l, only);
	}
	j_arr_end(&j);
	if (!rc && l.mismatches)
		rc = EXIT_WRONG;
	j_bool(&j, "ok", rc == 0);
	j_int(&j, "combinations", l.combos);
	j_int(&j, "threads", l.threads);
	j_int(&j, "mismatches", l.mismatches);
	struct cxlpod_stats st;
	if (!cxlpod_stats(t.p, &st))
		j_uint(&j, "conflicts_total", st.dev_conflicts); /* this host, whole run */
	if (*skipped)
		j_str(&j, "note", skipped);
	if (t.json)
		j_end_print(&j);
	else {
		free(j.s);
		if (1)
			printf("litmus: host %d: %d combinations, %d mismatches: %s\n", t.rank,
			       l.combos, l.mismatches, rc == 0 ? "PASS" : "FAIL");
	}
	tool_close(&t);
	return rc;
}

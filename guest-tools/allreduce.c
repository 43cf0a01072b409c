/*
 * cxlpod-allreduce: N hosts each own a vector of 64-bit integers (think
 * gradients); reduce-scatter + all-gather through the pool gives every host
 * the exact element-wise sum.
 *
 *   non-coherent area:  in[0..N-1] (one vector per host), out (the sum)
 *   round:  1. host h writes its vector to in[h]; writeback; fence; barrier
 *           2. host h owns chunk h: invalidate chunk h of every in[k],
 *              sum, write out[chunk h]; writeback; fence; barrier
 *           3. invalidate out; read it; barrier
 *   then every host compares out with the sum it computes locally.
 * Barriers are in the coherent window.  Values depend on the run's epoch and
 * the round, so stale data from earlier rounds or runs is always wrong.
 *
 * --no-flush skips every writeback / invalidate: on the device the result
 * is wrong, and the tool must say "corruption detected" and exit 3.
 * Exit codes: 0 exact sums everywhere; 3 corruption detected (some host got
 * a wrong sum); 1 usage; 2 setup; 4 peer timeout / failure.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t gen(uint64_t epoch, uint64_t round, uint64_t host, uint64_t i)
{
	uint64_t s = epoch ^ (round * 0xd1b54a32d192ed03ull) ^ (host * 0xabc98388fb8fac03ull) ^
		     (i * 0x8cb92ba72f3d8dd7ull);
	return splitmix64(&s) >> 24; /* < 2^40: sums of <= 2^24 hosts never wrap */
}

struct size_res {
	uint64_t elems;
	int rounds;
	double us;
	double mbps;
	uint64_t wrong;
	bool skipped;
};

static int parse_sizes(const char *s, uint64_t *out, int max)
{
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
		uint64_t v = parse_size_arg(tok);
		if (!v)
			return -1;
		out[n++] = v;
	}
	return n;
}

static void usage(void)
{
	printf("usage: cxlpod-allreduce [--sizes 4K,64K,1M (bytes per vector)] "
	       "[--rounds 3] [--no-flush] [options]\n%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-allreduce", .rank = -1};
	uint64_t sizes[16] = {4096, 65536, 1u << 20}; /* bytes per vector */
	int nsizes = 3, rounds = 3;
	bool noflush = false;
	const char *sizes_arg = NULL;
	const struct topt opts[] = {
		{"--sizes", TOPT_STR, &sizes_arg, 0, 0},
		{"--rounds", TOPT_INT, &rounds, 1, 1e6},
		{"--no-flush", TOPT_FLAG, &noflush, 0, 0},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (sizes_arg && (nsizes = parse_sizes(sizes_arg, sizes, 16)) <= 0) {
		fprintf(stderr, "cxlpod-allreduce: bad --sizes\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	int N = t.nhosts, me = t.rank;
	uint64_t maxb = 0;
	for (int s = 0; s < nsizes; s++)
		if (sizes[s] > maxb)
			maxb = sizes[s];
	size_t span = t.nc_len; /* what we flush before joining */
	if (span > (N + 1) * ((maxb + 4095) & ~4095ull))
		span = (N + 1) * ((maxb + 4095) & ~4095ull);
	if (cxlpod_flush(t.p, t.nc, span)) {
		fprintf(stderr, "cxlpod-allreduce: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	if (tool_join(&t, 5, NULL, NULL) || tool_barrier(&t))
		return EXIT_PEER;

	struct size_res res[16] = {{0}};
	uint64_t *local = malloc(maxb + 64), *result = malloc(maxb + 64);
	if (!local || !result)
		return EXIT_SETUP;
#define OPCHK(x)                                                                               \
	do {                                                                                   \
		if (!noflush && (x)) {                                                         \
			fprintf(stderr, "cxlpod-allreduce: %s\n", cxlpod_errmsg());            \
			tool_abort(&t);                                                        \
			return EXIT_SETUP;                                                     \
		}                                                                              \
	} while (0)
#define BARRIER()                                                                              \
	do {                                                                                   \
		if (tool_barrier(&t))                                                          \
			return EXIT_PEER;                                                      \
	} while (0)

	uint64_t wrong_total = 0;
	for (int s = 0; s < nsizes; s++) {
		struct size_res *R = &res[s];
		uint64_t V = sizes[s] / 8;
		R->elems = V;
		R->rounds = rounds;
		size_t vb = (V * 8 + 4095) & ~(size_t)4095; /* page-aligned slots */
		if (V == 0 || (size_t)(N + 1) * vb > t.nc_len) {
			R->skipped = true;
			continue;
		}
		uint64_t *out = (uint64_t *)(t.nc + (size_t)N * vb);
		/* chunks are whole lines: two hosts never write one line */
		uint64_t chunk = (((V + N - 1) / N) + 7) & ~7ull;
		uint64_t lo = me * chunk < V ? me * chunk : V;
		uint64_t hi = lo + chunk < V ? lo + chunk : V;
		double tsum = 0;
		for (int r = 0; r < rounds; r++) {
			uint64_t round = (uint64_t)s << 32 | r;
			for (uint64_t i = 0; i < V; i++)
				local[i] = gen(t.epoch, round, me, i);
			BARRIER();
			double t0 = now_s();
			/* 1. publish my vector */
			uint64_t *mine = (uint64_t *)(t.nc + (size_t)me * vb);
			memcpy(mine, local, V * 8);
			OPCHK(cxlpod_writeback(t.p, mine, V * 8) || cxlpod_fence(t.p));
			BARRIER();
			/* 2. reduce-scatter: my chunk */
			if (hi > lo) {
				memcpy(result + lo, local + lo, (hi - lo) * 8);
				for (int k = 0; k < N; k++) {
					if (k == me)
						continue;
					uint64_t *in = (uint64_t *)(t.nc + (size_t)k * vb);
					OPCHK(cxlpod_invalidate(t.p, in + lo, (hi - lo) * 8));
					for (uint64_t i = lo; i < hi; i++)
						result[i] += in[i];
				}
				memcpy(out + lo, result + lo, (hi - lo) * 8);
				OPCHK(cxlpod_writeback(t.p, out + lo, (hi - lo) * 8) ||
				      cxlpod_fence(t.p));
			}
			BARRIER();
			/* 3. all-gather */
			OPCHK(cxlpod_invalidate(t.p, out, V * 8));
			memcpy(result, out, V * 8);
			tsum += now_s() - t0;
			/* verify (not timed) */
			uint64_t wrong = 0;
			for (uint64_t i = 0; i < V; i++) {
				uint64_t want = 0;
				for (int k = 0; k < N; k++)
					want += gen(t.epoch, round, k, i);
				wrong += result[i] != want;
			}
			R->wrong += wrong;
			BARRIER(); /* nobody rewrites in[]/out before all have read */
		}
		R->us = tsum / rounds * 1e6;
		R->mbps = V * 8 / (tsum / rounds) / 1e6;
		wrong_total += R->wrong;
	}
	/* every host learns whether any host saw a wrong sum */
	__atomic_store_n(&t.sync->value[me].v, wrong_total, __ATOMIC_SEQ_CST);
	BARRIER();
	uint64_t wrong_all = 0;
	for (int k = 0; k < N; k++)
		wrong_all += __atomic_load_n(&t.sync->value[k].v, __ATOMIC_SEQ_CST);
	BARRIER();
	bool ok = wrong_all == 0;
	rc = ok ? 0 : EXIT_WRONG;

	if (!t.json) {
		printf("cxlpod-allreduce: host %d/%d, method %s%s, %d rounds per size\n", me, N,
		       cxlpod_method_name(t.info.method), noflush ? ", NO FLUSH" : "", rounds);
		printf("%12s %12s %12s %12s %s\n", "bytes", "elements", "us/allreduce", "MB/s",
		       "wrong elements (this host)");
		for (int s = 0; s < nsizes; s++) {
			if (res[s].skipped) {
				printf("%12llu  (does not fit the non-coherent area, skipped)\n",
				       (unsigned long long)sizes[s]);
				continue;
			}
			printf("%12llu %12llu %12.1f %12.2f %llu\n", (unsigned long long)sizes[s],
			       (unsigned long long)res[s].elems, res[s].us, res[s].mbps,
			       (unsigned long long)res[s].wrong);
		}
		if (ok)
			printf("allreduce: OK exact sums on all %d hosts\n", N);
		else
			printf("allreduce: FAIL corruption detected (%llu wrong elements over all "
			       "hosts)\n",
			       (unsigned long long)wrong_all);
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_bool(&j, "ok", ok);
		j_bool(&j, "no_flush", noflush);
		j_bool(&j, "corruption_detected", !ok);
		j_uint(&j, "wrong_elements", wrong_all);
		j_int(&j, "rounds", rounds);
		j_arr_begin(&j, "sizes");
		for (int s = 0; s < nsizes; s++) {
			j_obj_begin(&j, NULL);
			j_uint(&j, "bytes", sizes[s]);
			j_bool(&j, "skipped", res[s].skipped);
			if (!res[s].skipped) {
				j_dbl(&j, "us", res[s].us);
				j_dbl(&j, "MBps", res[s].mbps);
				j_uint(&j, "wrong", res[s].wrong);
			}
			j_obj_end(&j);
		}
		j_arr_end(&j);
		j_end_print(&j);
	}
	free(local);
	free(result);
	tool_close(&t);
	return rc;
}

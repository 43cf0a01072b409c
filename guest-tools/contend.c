/*
 * cxlpod-contend: every host writes back lines of the same pages of the
 * non-coherent area, at once, for a while: the lock words of those pages
 * are contended by all hosts, and the tool checks that no host's data is
 * lost and that every host progresses.
 *
 * The range (--bytes, default 4 MiB, from the start of the non-coherent
 * area) is cut into lines; host h owns the lines i with i % nhosts == h,
 * so every page holds lines of every host (the hosts contend for its
 * lock) but no line is shared (a whole-line writeback of one host never
 * clobbers another's).  Each round, a host stores the round number and
 * its id into every word of its lines, writes them back (--method, as
 * every tool: native clwb + sfence, or the doorbell) and publishes the
 * round in the coherent window.  Every --check rounds it invalidates its
 * lines and checks they read the round it wrote back.  After --seconds,
 * a barrier; then every host invalidates the whole range and checks that
 * each line holds its owner's last published round: nothing written back
 * was lost, nothing torn.
 *
 * With --bulk a host writes back the whole range in one call a round
 * (only its own lines are dirty, so only they reach the pool): each
 * page's lock is then held for all its lines at once.
 *
 * One result line per host: its rounds, the rounds of the slowest and the
 * fastest host (every host progressed: a host with no round after its
 * first is a starved one), wrong lines.  Exit codes: 0 every check
 * passed; 3 a wrong line or a starved host; 2 setup; 4 peer timeout.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

#define TOOL_ID 11

static void usage(void)
{
	printf("usage: cxlpod-contend [--bytes N (4M)] [--seconds S (5)] [--check K (16)]\n"
	       "                      [--bulk] [common options]\n"
	       "Every host writes back its own lines of the same pages, at once, for S\n"
	       "seconds; then every host checks every line holds its owner's last round.\n"
	       "--bulk: one writeback of the whole range a round (only this host's lines are\n"
	       "dirty), so each page's lock is held for all its lines, not one at a time.\n%s",
	       tool_common_usage());
}

static uint64_t value(uint64_t round, int host, unsigned word)
{
	return round << 16 | (uint64_t)host << 8 | word;
}

/* Store @round into the lines of @host; returns nothing */
static void fill(uint8_t *nc, size_t lines, int host, int nhosts, uint64_t round)
{
	for (size_t i = host; i < lines; i += nhosts)
		for (unsigned w = 0; w < CXLPOD_LINE / 8; w++)
			((volatile uint64_t *)(nc + i * CXLPOD_LINE))[w] = value(round, host, w);
}

/* Lines of @host in [0, lines) that do not hold @round whole */
static uint64_t wrong_lines(const uint8_t *nc, size_t lines, int host, int nhosts,
			    uint64_t round)
{
	uint64_t bad = 0;

	for (size_t i = host; i < lines; i += nhosts)
		for (unsigned w = 0; w < CXLPOD_LINE / 8; w++)
			if (((const volatile uint64_t *)(nc + i * CXLPOD_LINE))[w] !=
			    value(round, host, w)) {
				bad++;
				break;
			}
	return bad;
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-contend", .rank = -1};
	size_t bytes = 4u << 20;
	double seconds = 5;
	int check = 16;
	bool bulk = false;
	const struct topt opts[] = {
		{"--bulk", TOPT_FLAG, &bulk, 0, 0},
		{"--bytes", TOPT_SIZE, &bytes, CXLPOD_LINE, 1ull << 32},
		{"--seconds", TOPT_DBL, &seconds, 0.01, 86400},
		{"--check", TOPT_INT, &check, 1, 1 << 30},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (bytes % CXLPOD_LINE) {
		fprintf(stderr, "cxlpod-contend: --bytes %zu is not a multiple of %u\n", bytes,
			CXLPOD_LINE);
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (bytes > t.nc_len || t.coh_len < (size_t)CXLPOD_MAX_HOSTS * CXLPOD_LINE) {
		fprintf(stderr, "cxlpod-contend: %zu bytes do not fit the non-coherent area "
				"(%zu bytes)\n", bytes, t.nc_len);
		return EXIT_SETUP;
	}
	if (tool_join(&t, TOOL_ID, NULL, NULL))
		return EXIT_PEER;

	size_t lines = bytes / CXLPOD_LINE;
	int me = t.rank, n = t.nhosts;
	/* each host's last round written back, one line each */
	struct pline *published = (struct pline *)t.coh;
	uint64_t round = 0, wrong = 0, checks = 0;
	double end = now_s() + seconds;

	published[me].v = 0;
	if (tool_barrier(&t))
		return EXIT_PEER;
	do {
		round++;
		fill(t.nc, lines, me, n, round);
		for (size_t i = me; i < lines; i += n) {
			size_t at = bulk ? 0 : i * CXLPOD_LINE;
			size_t len = bulk ? lines * CXLPOD_LINE : CXLPOD_LINE;

			if (cxlpod_writeback(t.p, t.nc + at, len)) {
				fprintf(stderr, "cxlpod-contend: %s\n", cxlpod_errmsg());
				tool_abort(&t);
				return EXIT_SETUP;
			}
			if (bulk)
				break;
		}
		cxlpod_fence(t.p);
		__atomic_store_n(&published[me].v, round, __ATOMIC_RELEASE);
		if (round % check == 0) {
			for (size_t i = me; i < lines; i += n)
				cxlpod_invalidate(t.p, t.nc + i * CXLPOD_LINE, CXLPOD_LINE);
			wrong += wrong_lines(t.nc, lines, me, n, round);
			checks++;
		}
	} while (now_s() < end);
	if (tool_barrier(&t))
		return EXIT_PEER;

	/* every line holds its owner's last round */
	uint64_t min = UINT64_MAX, max = 0, lost = 0;
	cxlpod_invalidate(t.p, t.nc, lines * CXLPOD_LINE);
	for (int h = 0; h < n; h++) {
		uint64_t r = __atomic_load_n(&published[h].v, __ATOMIC_ACQUIRE);

		lost += wrong_lines(t.nc, lines, h, n, r);
		min = r < min ? r : min;
		max = r > max ? r : max;
	}
	bool ok = !wrong && !lost && min > 1;
	if (t.json) {
		struct jbuf j;

		j_begin(&j);
		j_common(&j, &t);
		j_uint(&j, "bytes", bytes);
		j_bool(&j, "bulk", bulk);
		j_dbl(&j, "seconds", seconds);
		j_uint(&j, "rounds", round);
		j_uint(&j, "min_rounds", min);
		j_uint(&j, "max_rounds", max);
		j_uint(&j, "checks", checks);
		j_uint(&j, "wrong_own", wrong);
		j_uint(&j, "wrong_final", lost);
		j_bool(&j, "ok", ok);
		j_end_print(&j);
	} else {
		printf("contend: host %d %llu rounds over %zu bytes shared by %d hosts "
		       "(slowest %llu, fastest %llu), %llu own lines wrong in %llu checks, "
		       "%llu lines wrong at the end: %s\n",
		       me, (unsigned long long)round, bytes, n, (unsigned long long)min,
		       (unsigned long long)max, (unsigned long long)wrong,
		       (unsigned long long)checks, (unsigned long long)lost,
		       ok ? "OK" : "FAIL");
	}
	tool_barrier(&t);
	return ok ? EXIT_OK : EXIT_WRONG;
}

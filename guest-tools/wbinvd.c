/*
 * cxlpod-wbinvd: whole-cache instructions (wbinvd, wbnoinvd, invd) on the
 * non-coherent area, across hosts.
 *
 * These instructions are privileged: the writer runs them through the
 * cxlpod_cache kernel module (guest-tools/kmod), by writing the name to
 * /proc/cxlpod-cache, on the CPU the tool is pinned to.
 *
 * For each op (rank --writer, default 0, is the writer; every other rank
 * reads), on --lines lines of its own in the non-coherent area:
 *   setup    the writer stores the OLD pattern, flushes and fences: the
 *            pool holds OLD.  Barrier.
 *   writer   stores the NEW pattern with plain stores, NO writeback, no
 *            fence; runs the op; re-reads its own lines; then the barrier
 *            (a store in the coherent window) publishes.
 *   readers  after the barrier: invalidate the lines, load them.
 * Expected (CXL 3.0 hardware):
 *   op        writer re-reads   readers see
 *   wbinvd    new               new     (written back, then invalidated)
 *   wbnoinvd  new               new     (written back, lines kept)
 *   invd      old               old     (dirty lines dropped, no writeback)
 * Each line is counted as new (every word NEW), old (every word OLD) or
 * other (mixed / torn / foreign).
 *
 * --emulate (a self-check of the tool on a device that ignores the
 * instructions): the writer does with libcxlpod what the instruction must
 * do to its lines: wbinvd = flush + fence, wbnoinvd = writeback + fence.
 * invd has no library equivalent (invalidate writes dirty lines back): it
 * is left out.  Every rank must be given --emulate; the module is not used,
 * and it also runs on the loopback and model backends.
 *
 * Exit codes: 0 every check as expected; 3 a wrong result; 2 setup (no
 * device, no /proc/cxlpod-cache: the module is not in the image, see
 * /cxlpod/kmod.status); 4 peer timeout / aborted.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROC_FILE "/proc/cxlpod-cache"
#define STATUS_FILE "/cxlpod/kmod.status"
#define TOOL_ID 7

enum { OP_WBINVD, OP_WBNOINVD, OP_INVD, NOPS };
static const char *op_name[NOPS] = {"wbinvd", "wbnoinvd", "invd"};
/* expected outcome: 1 = new, 0 = old */
static const int expect_writer[NOPS] = {1, 1, 0};
static const int expect_reader[NOPS] = {1, 1, 0};

static uint64_t pattern(uint64_t epoch, int op, int is_new, uint64_t line, unsigned word)
{
	uint64_t s = epoch ^ ((uint64_t)op << 56) ^ ((uint64_t)is_new << 48) ^ (line << 3) ^ word;
	return splitmix64(&s);
}

static void fill(uint64_t *base, size_t lines, uint64_t epoch, int op, int is_new)
{
	for (size_t i = 0; i < lines; i++)
		for (unsigned w = 0; w < CXLPOD_LINE / 8; w++)
			((volatile uint64_t *)base)[i * 8 + w] = pattern(epoch, op, is_new, i, w);
}

struct count {
	uint64_t new_, old, other;
};

static struct count classify(const uint64_t *base, size_t lines, uint64_t epoch, int op)
{
	struct count c = {0};
	for (size_t i = 0; i < lines; i++) {
		unsigned n = 0, o = 0;
		for (unsigned w = 0; w < CXLPOD_LINE / 8; w++) {
			uint64_t v = ((const volatile uint64_t *)base)[i * 8 + w];
			n += v == pattern(epoch, op, 1, i, w);
			o += v == pattern(epoch, op, 0, i, w);
		}
		if (n == CXLPOD_LINE / 8)
			c.new_++;
		else if (o == CXLPOD_LINE / 8)
			c.old++;
		else
			c.other++;
	}
	return c;
}

struct result {
	int op;
	const char *check; /* "writer-reread" or "reader" */
	int expect_new;
	struct count c;
	bool ok;
};

static int run_op(struct tool *t, int fd, int op, bool emulate, void *base, size_t len)
{
	const char *s = op_name[op];
	if (emulate) {
		int e = op == OP_WBINVD ? cxlpod_flush(t->p, base, len)
					: cxlpod_writeback(t->p, base, len);
		if (e || cxlpod_fence(t->p)) {
			fprintf(stderr, "cxlpod-wbinvd: %s\n", cxlpod_errmsg());
			return EXIT_SETUP;
		}
		return 0;
	}
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		fprintf(stderr, "cxlpod-wbinvd: write %s to %s: %s\n", s, PROC_FILE, strerror(errno));
		return EXIT_SETUP;
	}
	return 0;
}

static void module_missing(int err)
{
	char why[256] = "no " STATUS_FILE;
	FILE *f = fopen(STATUS_FILE, "r");
	if (f) {
		if (!fgets(why, sizeof(why), f))
			snprintf(why, sizeof(why), "empty " STATUS_FILE);
		why[strcspn(why, "\n")] = 0;
		fclose(f);
	}
	fprintf(stderr,
		"cxlpod-wbinvd: cannot open %s (%s): the cxlpod_cache kernel module is not "
		"loaded; image build step says: %s\n",
		PROC_FILE, strerror(err), why);
}

static void usage(void)
{
	printf("usage: cxlpod-wbinvd [--op wbinvd|wbnoinvd|invd|all(default)]\n"
	       "       [--lines N(256)] [--writer H(0)] [--emulate] [options]\n%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-wbinvd", .rank = -1};
	int writer = 0, only = -1;
	size_t lines = 256;
	bool emulate = false;
	const char *op_arg = NULL;
	const struct topt opts[] = {
		{"--writer", TOPT_INT, &writer, 0, CXLPOD_MAX_HOSTS - 1},
		{"--lines", TOPT_SIZE, &lines, 1, 1 << 20},
		{"--emulate", TOPT_FLAG, &emulate, 0, 0},
		{"--op", TOPT_STR, &op_arg, 0, 0},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (op_arg && strcmp(op_arg, "all")) {
		only = -2;
		for (int k = 0; k < NOPS; k++)
			if (!strcmp(op_arg, op_name[k]))
				only = k;
		if (only == -2) {
			fprintf(stderr, "cxlpod-wbinvd: --op wbinvd|wbnoinvd|invd|all\n");
			return EXIT_USAGE;
		}
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (t.info.backend != CXLPOD_BACKEND_DEVICE && !emulate) {
		fprintf(stderr, "cxlpod-wbinvd: needs the cxl-shm device (backend is %s; "
				"only --emulate runs elsewhere)\n",
			cxlpod_backend_name(t.info.backend));
		return EXIT_SETUP;
	}
	if (NOPS * lines * CXLPOD_LINE > t.nc_len) {
		fprintf(stderr, "cxlpod-wbinvd: %zu lines per op do not fit the non-coherent area\n",
			lines);
		return EXIT_SETUP;
	}
	bool is_writer = t.rank == writer;
	int fd = -1, cpuid = -1;
	if (is_writer && !emulate) {
		/* stores and the instruction on one CPU, as on hardware */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(0, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			fprintf(stderr, "cxlpod-wbinvd: cannot pin to cpu 0: %s\n", strerror(errno));
		fd = open(PROC_FILE, O_RDWR);
		if (fd < 0)
			module_missing(errno);
		else {
			char buf[128];
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = 0;
			char *p = strstr(buf, "wbnoinvd_cpuid: ");
			if (p)
				cpuid = atoi(p + 16);
			if (cpuid == 0)
				fprintf(stderr, "cxlpod-wbinvd: the CPU does not advertise WBNOINVD; "
						"running it anyway (hardware runs it as wbinvd)\n");
		}
	}
	/* join even without the module, so the readers are told (abort) */
	if (tool_join(&t, TOOL_ID, NULL, NULL))
		return EXIT_PEER;
	if (is_writer && fd < 0 && !emulate) {
		tool_abort(&t);
		return EXIT_SETUP;
	}

	struct result res[NOPS];
	int nres = 0;
	bool all_ok = true;
	for (int op = 0; op < NOPS; op++) {
		if ((only >= 0 && op != only) || (emulate && op == OP_INVD))
			continue;
		uint64_t *base = (uint64_t *)(t.nc + (size_t)op * lines * CXLPOD_LINE);
		size_t len = lines * CXLPOD_LINE;
		if (is_writer) {
			fill(base, lines, t.epoch, op, 0);
			LIBCALL(&t, cxlpod_flush(t.p, base, len));
			LIBCALL(&t, cxlpod_fence(t.p));
		}
		if (tool_barrier(&t))
			return EXIT_PEER;
		struct result *r = &res[nres++];
		r->op = op;
		if (is_writer) {
			fill(base, lines, t.epoch, op, 1); /* no writeback, no fence */
			if ((rc = run_op(&t, fd, op, emulate, base, len))) {
				tool_abort(&t);
				return rc;
			}
			r->check = "writer-reread";
			r->expect_new = expect_writer[op];
			r->c = classify(base, lines, t.epoch, op);
		}
		if (tool_barrier(&t)) /* publishes: a store in the coherent window */
			return EXIT_PEER;
		if (!is_writer) {
			LIBCALL(&t, cxlpod_invalidate(t.p, base, len));
			r->check = "reader";
			r->expect_new = expect_reader[op];
			r->c = classify(base, lines, t.epoch, op);
		}
		r->ok = (r->expect_new ? r->c.new_ : r->c.old) == lines;
		all_ok &= r->ok;
		if (!t.json)
			printf("wbinvd: %-8s host %d %-13s %llu new, %llu old, %llu other of %zu "
			       "lines: %s (expected %s)\n",
			       op_name[op], t.rank, r->check, (unsigned long long)r->c.new_,
			       (unsigned long long)r->c.old, (unsigned long long)r->c.other, lines,
			       r->ok ? "ok" : "WRONG", r->expect_new ? "new" : "old");
		if (tool_barrier(&t)) /* the readers are done before the next setup */
			return EXIT_PEER;
	}
	if (!t.json) {
		printf("wbinvd: %s\n", all_ok ? "OK every outcome as expected" : "FAIL wrong outcome");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_str(&j, "role", is_writer ? "writer" : "reader");
		j_bool(&j, "ok", all_ok);
		j_bool(&j, "emulate", emulate);
		j_uint(&j, "lines", lines);
		if (is_writer)
			j_int(&j, "wbnoinvd_cpuid", cpuid);
		j_arr_begin(&j, "results");
		for (int k = 0; k < nres; k++) {
			j_obj_begin(&j, NULL);
			j_str(&j, "op", op_name[res[k].op]);
			j_str(&j, "check", res[k].check);
			j_str(&j, "expect", res[k].expect_new ? "new" : "old");
			j_uint(&j, "new", res[k].c.new_);
			j_uint(&j, "old", res[k].c.old);
			j_uint(&j, "other", res[k].c.other);
			j_bool(&j, "ok", res[k].ok);
			j_obj_end(&j);
		}
		j_arr_end(&j);
		j_end_print(&j);
	}
	if (fd >= 0)
		close(fd);
	tool_close(&t);
	return all_ok ? 0 : EXIT_WRONG;
}

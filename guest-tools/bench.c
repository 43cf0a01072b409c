/*
 * cxlpod-bench: dependent-load latency (pointer chase), sequential read and
 * write bandwidth, and the cost of writeback / invalidate / flush per line
 * and per MiB, for guest RAM (malloc), the coherent window and the
 * non-coherent area, side by side with ratios to RAM.
 *
 * Runs on one host; with several hosts at once each uses its own slice
 * (rank / nhosts) of each area.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

struct res {
	const char *name;
	bool ok;
	size_t size;
	double lat_ns, read_mbps, write_mbps;
	bool have_ops;
	double wb_line_ns, inv_line_ns, flush_line_ns;
	double wb_mib_us, inv_mib_us, flush_mib_us;
};

static double min_time = 0.2;

/* Sattolo's algorithm: one random cycle over all lines. */
static void build_chase(uint8_t *buf, size_t size, uint64_t seed)
{
	size_t n = size / 64;
	uint32_t *perm = malloc(n * sizeof(*perm));
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = splitmix64(&seed) % i;
		uint32_t tmp = perm[i];
		perm[i] = perm[j];
		perm[j] = tmp;
	}
	for (size_t i = 0; i < n; i++)
		*(void **)(buf + (size_t)perm[i] * 64) = buf + (size_t)perm[(i + 1) % n] * 64;
	free(perm);
}

static double chase(uint8_t *buf, size_t size)
{
	size_t n = size / 64;
	size_t loads = n < 100000 ? 100000 : n;
	void *volatile sink;
	for (;;) {
		void **q = (void **)buf;
		double t0 = now_s();
		for (size_t i = 0; i < loads; i += 8) {
			q = *q; q = *q; q = *q; q = *q;
			q = *q; q = *q; q = *q; q = *q;
		}
		double dt = now_s() - t0;
		sink = q;
		(void)sink;
		if (dt >= min_time || loads > ((size_t)1 << 34))
			return dt * 1e9 / loads;
		loads *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

static double read_bw(uint8_t *buf, size_t size)
{
	volatile uint64_t sink;
	size_t reps = 1;
	for (;;) {
		double t0 = now_s();
		uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (size_t r = 0; r < reps; r++) {
			const uint64_t *p = (const uint64_t *)buf;
			for (size_t i = 0; i < size / 8; i += 4) {
				s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
			}
		}
		double dt = now_s() - t0;
		sink = s0 + s1 + s2 + s3;
		(void)sink;
		if (dt >= min_time || reps > 100000)
			return (double)size * reps / dt / 1e6;
		reps *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

static double write_bw(uint8_t *buf, size_t size)
{
	size_t reps = 1;
	for (;;) {
		double t0 = now_s();
		for (size_t r = 0; r < reps; r++)
			memset(buf, (int)r, size);
		__asm__ volatile("" ::: "memory");
		double dt = now_s() - t0;
		if (dt >= min_time || reps > 100000)
			return (double)size * reps / dt / 1e6;
		reps *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

typedef int (*opfn)(cxlpod *, const void *, size_t);

/* Per-line cost: dirty `lines` lines (or not), then one op per line. */
static int per_line(cxlpod *p, uint8_t *buf, size_t lines, opfn op, bool dirty, double *ns)
{
	if (dirty)
		for (size_t i = 0; i < lines; i++)
			buf[i * 64] ^= 1;
	double t0 = now_s();
	for (size_t i = 0; i < lines; i++) {
		int e = op(p, buf + i * 64, 64);
		if (e)
			return e;
	}
	*ns = (now_s() - t0) * 1e9 / lines;
	return 0;
}

static int per_mib(cxlpod *p, uint8_t *buf, size_t size, opfn op, bool dirty, double *us)
{
	size_t mibs = size >> 20;
	double total = 0;
	for (size_t m = 0; m < mibs; m++) {
		uint8_t *b = buf + (m << 20);
		if (dirty)
			for (size_t i = 0; i < (1u << 20); i += 64)
				b[i] ^= 1;
		double t0 = now_s();
		int e = op(p, b, 1u << 20);
		if (e)
			return e;
		total += now_s() - t0;
	}
	*us = total * 1e6 / mibs;
	return 0;
}

static int measure(struct tool *t, struct res *r, uint8_t *buf, size_t size, bool ops,
		   size_t op_lines)
{
	r->size = size;
	memset(buf, 0, size);
	r->write_mbps = write_bw(buf, size);
	r->read_mbps = read_bw(buf, size);
	build_chase(buf, size, 42);
	r->lat_ns = chase(buf, size);
	r->have_ops = ops;
	if (ops) {
		/* warm-up, untimed: the first write-back of each pool page pays
		 * for page faults / block allocation in the pool file */
		for (size_t i = 0; i < size; i += 64)
			buf[i] ^= 1;
		if (cxlpod_flush(t->p, buf, size)) {
			fprintf(stderr, "%s: flush: %s\n", t->name, cxlpod_errmsg());
			return EXIT_SETUP;
		}
		if (per_line(t->p, buf, op_lines, cxlpod_writeback, true, &r->wb_line_ns) ||
		    per_line(t->p, buf, op_lines, cxlpod_invalidate, false, &r->inv_line_ns) ||
		    per_line(t->p, buf, op_lines, cxlpod_flush, true, &r->flush_line_ns) ||
		    per_mib(t->p, buf, size, cxlpod_writeback, true, &r->wb_mib_us) ||
		    per_mib(t->p, buf, size, cxlpod_invalidate, false, &r->inv_mib_us) ||
		    per_mib(t->p, buf, size, cxlpod_flush, true, &r->flush_mib_us)) {
			fprintf(stderr, "%s: coherence op failed: %s\n", t->name, cxlpod_errmsg());
			return EXIT_SETUP;
		}
		cxlpod_fence(t->p);
	}
	r->ok = true;
	return 0;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-bench", .rank = -1};
	size_t size = 16u << 20;
	size_t op_lines = 4096;
	for (int i = 1; i < argc; i++) {
		int r = tool_common_opt(&t, argc, argv, &i);
		if (r < 0)
			return EXIT_USAGE;
		if (r)
			continue;
		if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = parse_size_arg(argv[++i]);
		} else if (!strcmp(argv[i], "--quick")) {
			size = 2u << 20;
			op_lines = 1024;
			min_time = 0.05;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: cxlpod-bench [--size BYTES(16M)] [--quick] [options]\n%s",
			       tool_common_usage());
			return 0;
		} else {
			fprintf(stderr, "cxlpod-bench: unknown option %s\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	size &= ~(size_t)((1u << 20) - 1);
	if (size == 0) {
		fprintf(stderr, "cxlpod-bench: --size must be at least 1M\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;

	struct res res[3] = {{.name = "ram"}, {.name = "coherent"}, {.name = "noncoherent"}};
	uint8_t *ram = aligned_alloc(2u << 20, size);
	if (!ram) {
		fprintf(stderr, "cxlpod-bench: out of memory\n");
		return EXIT_SETUP;
	}
	/* each host uses its own slice of each area */
	size_t coh_slice = (t.coh_len / t.nhosts) & ~(size_t)((1u << 20) - 1);
	size_t nc_slice = (t.nc_len / t.nhosts) & ~(size_t)((1u << 20) - 1);
	size_t coh_size = size < coh_slice ? size : coh_slice;
	size_t nc_size = size < nc_slice ? size : nc_slice;
	if (op_lines * 64 > size)
		op_lines = size / 64;

	if (!t.json)
		printf("cxlpod-bench: host %d/%d, method %s, buffer %zu MiB\n", t.rank, t.nhosts,
		       cxlpod_method_name(t.info.method), size >> 20);
	if ((rc = measure(&t, &res[0], ram, size, false, 0)))
		return rc;
	if (coh_size && (rc = measure(&t, &res[1], t.coh + t.rank * coh_slice, coh_size, true,
				      op_lines < coh_size / 64 ? op_lines : coh_size / 64)))
		return rc;
	if (nc_size) {
		uint8_t *b = t.nc + t.rank * nc_slice;
		if (cxlpod_flush(t.p, b, nc_size)) {
			fprintf(stderr, "cxlpod-bench: flush: %s\n", cxlpod_errmsg());
			return EXIT_SETUP;
		}
		if ((rc = measure(&t, &res[2], b, nc_size, true,
				  op_lines < nc_size / 64 ? op_lines : nc_size / 64)))
			return rc;
	}

	if (!t.json) {
		printf("%-12s %8s %10s %12s %12s\n", "area", "MiB", "lat ns", "read MB/s",
		       "write MB/s");
		for (int i = 0; i < 3; i++) {
			if (!res[i].ok) {
				printf("%-12s (area too small, skipped)\n", res[i].name);
				continue;
			}
			printf("%-12s %8zu %10.1f %12.0f %12.0f   x%.2f lat, x%.2f read, x%.2f write vs ram\n",
			       res[i].name, res[i].size >> 20, res[i].lat_ns, res[i].read_mbps,
			       res[i].write_mbps, ratio(res[i].lat_ns, res[0].lat_ns),
			       ratio(res[i].read_mbps, res[0].read_mbps),
			       ratio(res[i].write_mbps, res[0].write_mbps));
		}
		printf("coherence operations (%s):\n", cxlpod_method_name(t.info.method));
		printf("%-12s %12s %12s %12s %12s %12s %12s\n", "area", "wb ns/line", "inv ns/line",
		       "flush ns/line", "wb us/MiB", "inv us/MiB", "flush us/MiB");
		for (int i = 1; i < 3; i++)
			if (res[i].ok)
				printf("%-12s %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f\n",
				       res[i].name, res[i].wb_line_ns, res[i].inv_line_ns,
				       res[i].flush_line_ns, res[i].wb_mib_us, res[i].inv_mib_us,
				       res[i].flush_mib_us);
		if (t.info.backend == CXLPOD_BACKEND_LOOPBACK)
			printf("(loopback: coherence operations are no-ops)\n");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_bool(&j, "ok", true);
		j_uint(&j, "size", size);
		j_str(&j, "mode", t.info.mode == CXLPOD_MODE_TIMED ? "timed" : "direct");
		j_uint(&j, "latency_ns", t.info.latency_ns);
		j_obj_begin(&j, "areas");
		for (int i = 0; i < 3; i++) {
			if (!res[i].ok)
				continue;
			j_obj_begin(&j, res[i].name);
			j_uint(&j, "size", res[i].size);
			j_dbl(&j, "lat_ns", res[i].lat_ns);
			j_dbl(&j, "read_MBps", res[i].read_mbps);
			j_dbl(&j, "write_MBps", res[i].write_mbps);
			if (i > 0) {
				j_dbl(&j, "lat_ratio", ratio(res[i].lat_ns, res[0].lat_ns));
				j_dbl(&j, "read_ratio", ratio(res[i].read_mbps, res[0].read_mbps));
				j_dbl(&j, "write_ratio", ratio(res[i].write_mbps, res[0].write_mbps));
				j_dbl(&j, "wb_line_ns", res[i].wb_line_ns);
				j_dbl(&j, "inv_line_ns", res[i].inv_line_ns);
				j_dbl(&j, "flush_line_ns", res[i].flush_line_ns);
				j_dbl(&j, "wb_MiB_us", res[i].wb_mib_us);
				j_dbl(&j, "inv_MiB_us", res[i].inv_mib_us);
				j_dbl(&j, "flush_MiB_us", res[i].flush_mib_us);
			}
			j_obj_end(&j);
		}
		j_obj_end(&j);
		j_end_print(&j);
	}
	free(ram);
	tool_close(&t);
	return 0;
}

/*
 * cxlpod-mpi-allreduce: an allreduce whose data moves through the CXL pool,
 * started with mpirun across the guests of a pod (one rank per guest).
 * MPI is used for start-up (the run's seed), barriers and the final tally
 * of wrong elements only; every vector and every sum goes through the
 * pool's non-coherent area:
 *
 *   slot k (one per rank): rank k writes its vector v_k, then
 *       --protocol writeback:  writeback(slot k); fence
 *   MPI_Barrier
 *   every rank: invalidate(slot j) for every j (writeback protocol), reads
 *       all slots and sums them; the sum is compared element by element
 *       with the exact sum the rank computes itself from the seed.
 *
 * With --protocol none the writebacks and invalidates are left out, as in
 * a program that forgot them: on the pod the vectors never leave their
 * writers' caches, the sums are wrong and the tool says "corruption
 * detected" (exit 3).  With writeback it must be exact (exit 0).
 * Values depend on the seed (from the clock, broadcast by rank 0) and the
 * round, so data left by earlier rounds or runs is always wrong.
 *
 * Output: per-rank lines, then on rank 0 one JSON result line.
 * Exit: 0 exact; 3 corruption detected; 2 setup (no pool, too small);
 * 1 usage.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "libcxlpod.h"

#define SLOT_ALIGN 4096u

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* element i of rank k's vector in round r: < 2^40, so sums never wrap */
static uint64_t value(uint64_t seed, int r, int k, uint64_t i)
{
	return mix(seed ^ mix(((uint64_t)r << 48) ^ ((uint64_t)k << 40) ^ i)) >> 24;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun ... cxlpod-mpi-allreduce [--protocol writeback|none] [--elems N]\n"
		"           [--rounds R] [--offset BYTES] [--method doorbell|native]\n"
		"  --protocol  writeback (default): writeback after writing, invalidate before\n"
		"              reading; none: neither (the sums must come out wrong)\n"
		"  --elems     64-bit elements per vector (default 65536: 512 KiB)\n"
		"  --rounds    rounds (default 3)\n"
		"  --offset    where the slots start in the non-coherent area (default 0)\n"
		"  --method    coherence operations by BAR5 doorbell or native clwb/clflushopt\n");
}

int main(int argc, char **argv)
{
	int rank, size, rounds = 3, protocol_wb = 1, rc = 0;
	uint64_t elems = 65536, offset = 0, seed = 0;
	const char *method = NULL;
	static const struct option lo[] = {
		{ "protocol", required_argument, NULL, 'p' },
		{ "elems", required_argument, NULL, 'e' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "offset", required_argument, NULL, 'o' },
		{ "method", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;

		switch (c) {
		case 'p':
			if (!strcmp(optarg, "writeback")) {
				protocol_wb = 1;
			} else if (!strcmp(optarg, "none")) {
				protocol_wb = 0;
			} else {
				if (!rank)
					fprintf(stderr, "--protocol: writeback or none, not '%s'\n", optarg);
				rc = 1;
			}
			break;
		case 'e':
			elems = strtoull(optarg, &end, 0);
			if (!*optarg || *end || !elems)
				rc = 1;
			break;
		case 'r':
			rounds = atoi(optarg);
			if (rounds < 1)
				rc = 1;
			break;
		case 'o':
			offset = strtoull(optarg, &end, 0);
			if (!*optarg || *end)
				rc = 1;
			break;
		case 'm':
			method = optarg;
			break;
		case 'h':
			if (!rank)
				usage(stdout);
			MPI_Finalize();
			return 0;
		default:
			rc = 1;
		}
	}
	if (rc || optind != argc) {
		if (!rank)
			usage(stderr);
		MPI_Finalize();
		return 1;
	}

	char host[64] = "?";
	gethostname(host, sizeof(host));
	cxlpod *p = NULL;
	struct cxlpod_opts o = { 0 };
	int err = cxlpod_open(&p, &o);
	if (err) {
		fprintf(stderr, "rank %d on %s: cannot open the pool: %s\n", rank, host,
			cxlpod_errmsg());
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (method) {
		enum cxlpod_method m = !strcmp(method, "native") ? CXLPOD_METHOD_NATIVE :
							       CXLPOD_METHOD_DOORBELL;
		if (strcmp(method, "native") && strcmp(method, "doorbell")) {
			fprintf(stderr, "--method: doorbell or native, not '%s'\n", method);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		if (cxlpod_set_method(p, m)) {
			fprintf(stderr, "rank %d on %s: method %s: %s\n", rank, host, method,
				cxlpod_errmsg());
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	struct cxlpod_info info;
	void *nc_base;
	size_t nc_len;
	if (cxlpod_get_info(p, &info) || cxlpod_area(p, CXLPOD_AREA_NONCOHERENT, &nc_base, &nc_len)) {
		fprintf(stderr, "rank %d on %s: %s\n", rank, host, cxlpod_errmsg());
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	uint64_t slot = (elems * 8 + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
	if (offset % SLOT_ALIGN || offset + slot * (uint64_t)size > nc_len) {
		if (!rank)
			fprintf(stderr,
				"%d slots of %" PRIu64 " bytes at offset %" PRIu64
				" do not fit the non-coherent area (%zu bytes) or the offset is not 4 KiB aligned\n",
				size, slot, offset, nc_len);
		MPI_Finalize();
		return 2;
	}

	/* start-up: the seed, and who runs where */
	if (!rank)
		seed = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20));
	MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	unsigned my_id = info.host_id;
	unsigned *ids = calloc((size_t)size, sizeof(*ids));
	MPI_Gather(&my_id, 1, MPI_UNSIGNED, ids, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
	printf("rank %d of %d on %s: pod host %u, %s, non-coherent area %zu MiB, method %s\n",
	       rank, size, host, my_id, info.dax, nc_len >> 20,
	       cxlpod_method_name(info.method));
	fflush(stdout);

	uint8_t *base = (uint8_t *)nc_base + offset;
	uint64_t wrong = 0, first_bad = UINT64_MAX;
	double t0 = MPI_Wtime();
	for (int r = 0; r < rounds; r++) {
		uint64_t *mine = (uint64_t *)(base + slot * (uint64_t)rank);

		for (uint64_t i = 0; i < elems; i++)
			mine[i] = value(seed, r, rank, i);
		if (protocol_wb) {
			cxlpod_writeback(p, mine, elems * 8);
			cxlpod_fence(p);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (protocol_wb) {
			for (int k = 0; k < size; k++)
				if (k != rank)
					cxlpod_invalidate(p, base + slot * (uint64_t)k, elems * 8);
			cxlpod_fence(p);
		}
		for (uint64_t i = 0; i < elems; i++) {
			uint64_t sum = 0, want = 0;

			for (int k = 0; k < size; k++) {
				sum += ((volatile uint64_t *)(base + slot * (uint64_t)k))[i];
				want += value(seed, r, k, i);
			}
			if (sum != want) {
				wrong++;
				if (first_bad == UINT64_MAX)
					first_bad = i;
			}
		}
		/* nobody overwrites its slot while others still read it */
		MPI_Barrier(MPI_COMM_WORLD);
	}
	double secs = MPI_Wtime() - t0;

	uint64_t total_wrong = 0;
	MPI_Reduce(&wrong, &total_wrong, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (wrong)
		printf("rank %d on %s: %" PRIu64 " wrong sums of %" PRIu64
		       " (first at element %" PRIu64 ")\n",
		       rank, host, wrong, elems * (uint64_t)rounds, first_bad);
	fflush(stdout);
	if (!rank) {
		int distinct = 0;

		for (int i = 0; i < size; i++) {
			int seen = 0;

			for (int j = 0; j < i; j++)
				seen |= ids[j] == ids[i];
			distinct += !seen;
		}
		double mb = (double)elems * 8 * size * rounds / 1e6;
		printf("%s: %d ranks on %d pod hosts, %" PRIu64 " elements x %d rounds, "
		       "%" PRIu64 " wrong sums%s\n",
		       protocol_wb ? "writeback" : "no flush", size, distinct, elems, rounds,
		       total_wrong, total_wrong ? ": corruption detected" : ": exact");
		printf("{\"tool\":\"mpi-allreduce\",\"ranks\":%d,\"pod_hosts\":%d,"
		       "\"protocol\":\"%s\",\"method\":\"%s\",\"elems\":%" PRIu64
		       ",\"rounds\":%d,\"wrong\":%" PRIu64 ",\"seconds\":%.3f,\"mb_per_s\":%.1f,"
		       "\"result\":\"%s\"}\n",
		       size, distinct, protocol_wb ? "writeback" : "none",
		       cxlpod_method_name(info.method), elems, rounds, total_wrong, secs,
		       secs > 0 ? mb / secs : 0.0, total_wrong ? "corruption-detected" : "exact");
		fflush(stdout);
		rc = total_wrong ? 3 : 0;
	}
	MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
	free(ids);
	cxlpod_close(p);
	MPI_Finalize();
	return rc;
}

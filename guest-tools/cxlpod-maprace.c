/*
 * cxlpod-maprace: MMIO reads while the guest's physical memory map changes.
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One thread per reader reads the cxl-shm device's BAR5 magic register in a
 * loop (an MMIO access through the vCPU's TLB); another thread toggles the
 * memory-space enable bit of a second PCI device's command register, so
 * that QEMU builds a new memory map (with another number of sections) at
 * every toggle.  A vCPU must never use a TLB entry of the old map with the
 * new one: QEMU then aborts ("iotlb_to_section: Assertion ... sections_nb")
 * or, worse, sends the access to another region (a wrong magic here).
 *
 *   cxlpod-maprace [--seconds S] [--readers N] [--read BDF:BAR]
 *                  [--min-changes N] [--min-reads N] --toggle BDF
 *
 * It toggles for S seconds, and after that until the map changed at least
 * --min-changes times and the readers read at least --min-reads times
 * (both 0 by default), so that a slow machine makes the run longer, not
 * the race smaller.
 *
 * --read names the register read instead (offset 0 of that BAR, which must
 * read the same value every time, e.g. AHCI's CAP); the toggled device's
 * BARs should lie below it, so that the sections of the read region move
 * in the new map.  Prints one JSON line; exit 0 if every read returned the
 * first value, 3 if any did not, 2 on a setup error, 1 on a usage error.
 * CXLPOD_PCI_SYSFS names another directory of PCI devices than
 * /sys/bus/pci/devices (the unit test runs the tool on plain files).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cxl-shm-regs.h" /* the device's BAR5 register map */
#include "tool.h"

#define MAX_READERS 8

static volatile uint32_t *regs;
static uint32_t expect;
static atomic_bool stop;
static uint64_t reads[MAX_READERS], wrong[MAX_READERS];
static uint32_t last_wrong;

static const char *pci_dir(void)
{
	const char *d = getenv("CXLPOD_PCI_SYSFS");

	return d && *d ? d : "/sys/bus/pci/devices";
}

static void usage(void)
{
	printf("usage: cxlpod-maprace [--seconds S] [--readers N] [--read BDF:BAR]\n"
	       "         [--min-changes N] [--min-reads N] --toggle BDF\n"
	       "N threads read offset 0 of a BAR (default the cxl-shm device's BAR5\n"
	       "magic) while the main thread toggles the memory enable of BDF's PCI\n"
	       "command register for S seconds (default 5; N 1..%d, default 1), and\n"
	       "after that until the map changed --min-changes times and the readers\n"
	       "read --min-reads times (default 0 each).\n"
	       "Prints one JSON line; exit 0 if every read returned the first value,\n"
	       "3 if not, 2 on a setup error, 1 on a usage error.\n", MAX_READERS);
}

static int find_device(char *bdf, size_t len)
{
	DIR *d = opendir(pci_dir());
	struct dirent *e;
	int found = -1;

	if (!d) {
		return -1;
	}
	while (found < 0 && (e = readdir(d))) {
		char path[512], cls[32] = "";
		FILE *f;

		if (e->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/class", pci_dir(),
			 e->d_name);
		f = fopen(path, "r");
		if (!f) {
			continue;
		}
		if (fgets(cls, sizeof(cls), f) && !strncmp(cls, "0x050210", 8)) {
			snprintf(bdf, len, "%s", e->d_name);
			found = 0;
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

/* the readers' reads so far (each counter is its own thread's) */
static uint64_t reads_so_far(int n)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < n; i++) {
		sum += __atomic_load_n(&reads[i], __ATOMIC_RELAXED);
	}
	return sum;
}

static void *reader(void *arg)
{
	int i = (int)(intptr_t)arg;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint32_t v = regs[R_CXLSHM_MAGIC];

		/* a plain store that the main thread may read meanwhile */
		__atomic_store_n(&reads[i], reads[i] + 1, __ATOMIC_RELAXED);
		if (v != expect) {
			wrong[i]++;
			last_wrong = v;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct tool tl = {.name = "cxlpod-maprace", .no_common = true};
	double seconds = 5, t0, t;
	int nreaders = 1, fd, cfg, i, pr;
	const char *toggle = NULL, *readarg = NULL;
	char bdf[256] = "", path[512], buf[300];
	int bar = 5;
	pthread_t th[MAX_READERS];
	uint64_t toggles = 0, nreads = 0, nwrong = 0, min_changes = 0, min_reads = 0;
	uint16_t cmd;
	struct jbuf j;
	const struct topt opts[] = {
		{"--seconds", TOPT_DBL, &seconds, 0, 0},
		{"--readers", TOPT_INT, &nreaders, 1, MAX_READERS},
		{"--read", TOPT_STR, &readarg, 0, 0},
		{"--toggle", TOPT_STR, &toggle, 0, 0},
		{"--min-changes", TOPT_U64, &min_changes, 0, 0},
		{"--min-reads", TOPT_U64, &min_reads, 0, 0},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};

	pr = tool_parse(&tl, argc, argv, opts, usage, NULL);
	if (pr) {
		return pr == TOOL_HELP ? 0 : pr;
	}
	if (!toggle || !(seconds > 0)) {
		fprintf(stderr, "cxlpod-maprace: --toggle BDF is required, "
			"--readers 1..%d, --seconds > 0\n", MAX_READERS);
		return EXIT_USAGE;
	}
	if (readarg) {
		const char *colon = strrchr(readarg, ':');
		char *end;

		bar = colon ? (int)strtol(colon + 1, &end, 10) : -1;
		if (!colon || colon == readarg || colon[1] == '\0' || *end ||
		    bar < 0 || bar > 5) {
			fprintf(stderr, "cxlpod-maprace: --read BDF:BAR (BAR 0..5), "
				"not '%s'\n", readarg);
			return EXIT_USAGE;
		}
		snprintf(bdf, sizeof(bdf), "%.*s", (int)(colon - readarg),
			 readarg);
	}
	bool own = !bdf[0];

	if (own && find_device(bdf, sizeof(bdf)) < 0) {
		fprintf(stderr, "cxlpod-maprace: no cxl-shm device\n");
		return EXIT_SETUP;
	}
	snprintf(path, sizeof(path), "%s/%s/resource%d", pci_dir(), bdf, bar);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0) {
		fprintf(stderr, "cxlpod-maprace: %s: %s\n", path, strerror(errno));
		return EXIT_SETUP;
	}
	regs = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (regs == MAP_FAILED) {
		fprintf(stderr, "cxlpod-maprace: mmap %s: %s\n", path,
			strerror(errno));
		return EXIT_SETUP;
	}
	expect = regs[R_CXLSHM_MAGIC];
	if (own && expect != CXLSHM_MAGIC_VALUE) {
		fprintf(stderr, "cxlpod-maprace: %s: magic 0x%08x\n", bdf, expect);
		return EXIT_SETUP;
	}
	snprintf(path, sizeof(path), "%s/%s/config", pci_dir(), toggle);
	cfg = open(path, O_RDWR);
	if (cfg < 0 || pread(cfg, &cmd, 2, 4) != 2) {
		fprintf(stderr, "cxlpod-maprace: %s: %s\n", path, strerror(errno));
		return EXIT_SETUP;
	}
	for (i = 0; i < nreaders; i++) {
		pthread_create(&th[i], NULL, reader, (void *)(intptr_t)i);
	}
	t0 = now_s();
	do {
		uint16_t c = cmd ^ 2;   /* PCI_COMMAND_MEMORY */

		if (pwrite(cfg, &c, 2, 4) != 2 || pwrite(cfg, &cmd, 2, 4) != 2) {
			fprintf(stderr, "cxlpod-maprace: write %s: %s\n", path,
				strerror(errno));
			atomic_store(&stop, true);
			return EXIT_SETUP;
		}
		toggles += 2;
		t = now_s();
	} while (t - t0 < seconds || toggles < min_changes ||
		 reads_so_far(nreaders) < min_reads);
	atomic_store(&stop, true);
	for (i = 0; i < nreaders; i++) {
		pthread_join(th[i], NULL);
		nreads += reads[i];
		nwrong += wrong[i];
	}
	j_begin(&j);
	j_str(&j, "tool", "cxlpod-maprace");
	snprintf(buf, sizeof(buf), "%s:%d", bdf, bar);
	j_str(&j, "read", buf);
	snprintf(buf, sizeof(buf), "0x%08x", expect);
	j_str(&j, "value", buf);
	j_str(&j, "toggle", toggle);
	j_dbl(&j, "seconds", t - t0);
	j_int(&j, "readers", nreaders);
	j_uint(&j, "map_changes", toggles);
	j_uint(&j, "reads", nreads);
	j_uint(&j, "wrong", nwrong);
	snprintf(buf, sizeof(buf), "0x%08x", last_wrong);
	j_str(&j, "last_wrong", buf);
	j_bool(&j, "ok", !nwrong);
	j_end_print(&j);
	return nwrong ? EXIT_WRONG : EXIT_OK;
}

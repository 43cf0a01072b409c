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
 *   cxlpod-maprace [--seconds S] [--readers N] [--read BDF:BAR] --toggle BDF
 *
 * --read names the register read instead (offset 0 of that BAR, which must
 * read the same value every time, e.g. AHCI's CAP); the toggled device's
 * BARs should lie below it, so that the sections of the read region move
 * in the new map.  Prints one JSON line; exit 0 if every read returned the
 * first value, 3 if any did not, 2 on a setup error.
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

#define MAGIC 0x504c5843u /* "CXLP", BAR5 offset 0 */
#define MAX_READERS 8

static volatile uint32_t *regs;
static uint32_t expect;
static atomic_bool stop;
static uint64_t reads[MAX_READERS], wrong[MAX_READERS];
static uint32_t last_wrong;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int find_device(char *bdf, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
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
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class",
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

static void *reader(void *arg)
{
	int i = (int)(intptr_t)arg;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint32_t v = regs[0];

		reads[i]++;
		if (v != expect) {
			wrong[i]++;
			last_wrong = v;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = 5, t0, t;
	int nreaders = 1, fd, cfg, i;
	const char *toggle = NULL;
	char bdf[256] = "", path[512];
	int bar = 5;
	pthread_t th[MAX_READERS];
	uint64_t toggles = 0, nreads = 0, nwrong = 0;
	uint16_t cmd;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--readers") && i + 1 < argc) {
			nreaders = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--read") && i + 1 < argc) {
			char *colon = strrchr(argv[++i], ':');

			if (!colon || colon == argv[i]) {
				fprintf(stderr, "cxlpod-maprace: --read BDF:BAR\n");
				return 1;
			}
			snprintf(bdf, sizeof(bdf), "%.*s",
				 (int)(colon - argv[i]), argv[i]);
			bar = atoi(colon + 1);
		} else if (!strcmp(argv[i], "--toggle") && i + 1 < argc) {
			toggle = argv[++i];
		} else {
			fprintf(stderr, "usage: cxlpod-maprace [--seconds S] "
				"[--readers N] [--read BDF:BAR] --toggle BDF\n");
			return 1;
		}
	}
	if (!toggle || nreaders < 1 || nreaders > MAX_READERS || seconds <= 0) {
		fprintf(stderr, "cxlpod-maprace: --toggle BDF is required, "
			"--readers 1..%d, --seconds > 0\n", MAX_READERS);
		return 1;
	}
	bool own = !bdf[0];

	if (own && find_device(bdf, sizeof(bdf)) < 0) {
		fprintf(stderr, "cxlpod-maprace: no cxl-shm device\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource%d", bdf,
		 bar);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0) {
		fprintf(stderr, "cxlpod-maprace: %s: %s\n", path, strerror(errno));
		return 2;
	}
	regs = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (regs == MAP_FAILED) {
		fprintf(stderr, "cxlpod-maprace: mmap %s: %s\n", path,
			strerror(errno));
		return 2;
	}
	expect = regs[0];
	if (own && expect != MAGIC) {
		fprintf(stderr, "cxlpod-maprace: %s: magic 0x%08x\n", bdf, expect);
		return 2;
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", toggle);
	cfg = open(path, O_RDWR);
	if (cfg < 0 || pread(cfg, &cmd, 2, 4) != 2) {
		fprintf(stderr, "cxlpod-maprace: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (i = 0; i < nreaders; i++) {
		pthread_create(&th[i], NULL, reader, (void *)(intptr_t)i);
	}
	t0 = now();
	do {
		uint16_t c = cmd ^ 2;   /* PCI_COMMAND_MEMORY */

		if (pwrite(cfg, &c, 2, 4) != 2 || pwrite(cfg, &cmd, 2, 4) != 2) {
			fprintf(stderr, "cxlpod-maprace: write %s: %s\n", path,
				strerror(errno));
			atomic_store(&stop, true);
			return 2;
		}
		toggles += 2;
		t = now();
	} while (t - t0 < seconds);
	atomic_store(&stop, true);
	for (i = 0; i < nreaders; i++) {
		pthread_join(th[i], NULL);
		nreads += reads[i];
		nwrong += wrong[i];
	}
	printf("{\"tool\":\"cxlpod-maprace\",\"read\":\"%s:%d\","
	       "\"value\":\"0x%08x\",\"toggle\":\"%s\","
	       "\"seconds\":%.2f,\"readers\":%d,\"map_changes\":%llu,"
	       "\"reads\":%llu,\"wrong\":%llu,\"last_wrong\":\"0x%08x\","
	       "\"ok\":%s}\n", bdf, bar, expect, toggle, t - t0, nreaders,
	       (unsigned long long)toggles, (unsigned long long)nreads,
	       (unsigned long long)nwrong, last_wrong, nwrong ? "false" : "true");
	return nwrong ? 3 : 0;
}

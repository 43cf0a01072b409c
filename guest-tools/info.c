/*
 * cxlpod-info: device identity, geometry, mode, latency, caps, host table,
 * statistics.  No peers needed.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static void usage(void)
{
	printf("usage: cxlpod-info [--json] [--method doorbell|native] [--loopback SPEC]\n"
	       "Prints the cxl-shm device identity, geometry, mode, latency, capabilities,\n"
	       "the host table and the device statistics.\n");
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-info", .rank = -1};
	int pr = tool_parse(&t, argc, argv, NULL, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	struct cxlpod_opts o = {.method = t.method};
	char maperr[256] = "";
	if (cxlpod_open(&t.p, &o)) {
		/* no pool mapping: still show the registers if the device is there */
		snprintf(maperr, sizeof(maperr), "%s", cxlpod_errmsg());
		o.flags = CXLPOD_OPEN_REGS_ONLY;
		if (cxlpod_open(&t.p, &o)) {
			fprintf(stderr, "cxlpod-info: %s\n", maperr);
			if (t.json) {
				struct jbuf j;
				j_begin(&j);
				j_str(&j, "tool", "cxlpod-info");
				j_bool(&j, "ok", false);
				j_str(&j, "error", maperr);
				j_end_print(&j);
			}
			return EXIT_SETUP;
		}
		fprintf(stderr, "cxlpod-info: pool not mapped: %s\n", maperr);
	}
	struct cxlpod_info in;
	struct cxlpod_stats st;
	uint64_t live = 0, words[CXLPOD_HOST_WORDS] = { 0 };
	unsigned nlive = 0;
	cxlpod_get_info(t.p, &in);
	cxlpod_stats(t.p, &st);
	cxlpod_hosts_live_map(t.p, words, CXLPOD_HOST_WORDS);
	live = words[0];
	for (unsigned w = 0; w < CXLPOD_HOST_WORDS; w++)
		nlive += __builtin_popcountll(words[w]);
	const char *backend = cxlpod_backend_name(in.backend);
	const char *mode = in.mode == CXLPOD_MODE_TIMED ? "timed" : "direct";
	char native[64];
	snprintf(native, sizeof(native), "%s%s", in.native_usable ? "usable" : "not usable",
		 in.cpu_clwb ? " (clwb+clflushopt)" : in.cpu_clflushopt ? " (clflushopt)" : "");

	if (!t.json) {
		printf("cxlpod device\n");
		printf("  backend        %s\n", backend);
		printf("  pci            %s\n", in.pci);
		printf("  dax            %s\n", *maperr ? "(not mapped)" : in.dax);
		printf("  version        %u\n", in.version);
		printf("  host id        %u of max %u\n", in.host_id, in.max_hosts);
		printf("  size           %llu bytes (%llu MiB)\n", (unsigned long long)in.size,
		       (unsigned long long)(in.size >> 20));
		printf("  coherent       [0, 0x%llx) = %llu MiB\n",
		       (unsigned long long)in.coherent_size,
		       (unsigned long long)(in.coherent_size >> 20));
		printf("  non-coherent   [0x%llx, 0x%llx) = %llu MiB\n",
		       (unsigned long long)in.coherent_size, (unsigned long long)in.size,
		       (unsigned long long)((in.size - in.coherent_size) >> 20));
		printf("  line size      %u\n", in.line_size);
		printf("  mode           %s\n", mode);
		printf("  latency        %u ns\n", in.latency_ns);
		printf("  caps           0x%x:%s%s%s\n", in.caps,
		       in.caps & CXLPOD_CAP_NATIVE_OPS ? " native-ops" : "",
		       in.caps & CXLPOD_CAP_ATOMICS ? " cross-host-atomics" : "",
		       in.caps & CXLPOD_CAP_DIRECT ? " direct-map" : "");
		printf("  method         %s (native instructions: %s)\n",
		       cxlpod_method_name(in.method), native);
		printf("hosts (%u live; bitmap of hosts 0-63 0x%llx)\n", nlive,
		       (unsigned long long)live);
		for (unsigned h = 0; h < in.max_hosts && h < CXLPOD_MAX_HOSTS; h++) {
			enum cxlpod_host_state s;
			uint64_t g = 0;
			if (cxlpod_host_state(t.p, h, &s, &g))
				continue;
			printf("  host %-2u  %-7s gen %llu%s\n", h, cxlpod_host_state_name(s),
			       (unsigned long long)g, h == in.host_id ? "  (this host)" : "");
		}
		printf("statistics\n");
		printf("  writeback ops %llu lines %llu; invalidate ops %llu lines %llu; "
		       "flush ops %llu; native ops %llu; errors %llu\n",
		       (unsigned long long)st.dev_wb_ops, (unsigned long long)st.dev_wb_lines,
		       (unsigned long long)st.dev_inv_ops, (unsigned long long)st.dev_inv_lines,
		       (unsigned long long)st.dev_flush_ops,
		       (unsigned long long)st.dev_native_ops, (unsigned long long)st.dev_errors);
		printf("  conflicts %llu; charged %llu ns\n",
		       (unsigned long long)st.dev_conflicts,
		       (unsigned long long)st.dev_charged_ns);
		if (in.mode == CXLPOD_MODE_TIMED)
			printf("  timed: hits %llu misses %llu cache evictions %llu; "
			       "back-invalidates %llu snoops %llu snoop-filter evictions %llu; "
			       "stale reads %llu\n",
			       (unsigned long long)st.dev_hits, (unsigned long long)st.dev_misses,
			       (unsigned long long)st.dev_cache_evictions,
			       (unsigned long long)st.dev_back_invalidates,
			       (unsigned long long)st.dev_snoops,
			       (unsigned long long)st.dev_sf_evictions,
			       (unsigned long long)st.dev_stale_reads);
	} else {
		struct jbuf j;
		j_begin(&j);
		j_str(&j, "tool", "cxlpod-info");
		j_bool(&j, "ok", !*maperr);
		if (*maperr)
			j_str(&j, "error", maperr);
		j_str(&j, "backend", backend);
		j_str(&j, "pci", in.pci);
		j_str(&j, "dax", in.dax);
		j_uint(&j, "version", in.version);
		j_uint(&j, "host_id", in.host_id);
		j_uint(&j, "max_hosts", in.max_hosts);
		j_uint(&j, "size", in.size);
		j_uint(&j, "coherent_size", in.coherent_size);
		j_uint(&j, "line_size", in.line_size);
		j_str(&j, "mode", mode);
		j_uint(&j, "latency_ns", in.latency_ns);
		j_uint(&j, "caps", in.caps);
		j_str(&j, "method", cxlpod_method_name(in.method));
		j_bool(&j, "native_usable", in.native_usable);
		j_bool(&j, "cpu_clwb", in.cpu_clwb);
		j_bool(&j, "cpu_clflushopt", in.cpu_clflushopt);
		j_uint(&j, "live", live);
		j_uint(&j, "live_count", nlive);
		j_arr_begin(&j, "hosts");
		for (unsigned h = 0; h < in.max_hosts && h < CXLPOD_MAX_HOSTS; h++) {
			enum cxlpod_host_state s;
			uint64_t g = 0;
			if (cxlpod_host_state(t.p, h, &s, &g))
				continue;
			j_obj_begin(&j, NULL);
			j_uint(&j, "id", h);
			j_str(&j, "state", cxlpod_host_state_name(s));
			j_uint(&j, "gen", g);
			j_obj_end(&j);
		}
		j_arr_end(&j);
		j_obj_begin(&j, "stats");
		j_uint(&j, "wb_ops", st.dev_wb_ops);
		j_uint(&j, "inv_ops", st.dev_inv_ops);
		j_uint(&j, "flush_ops", st.dev_flush_ops);
		j_uint(&j, "wb_lines", st.dev_wb_lines);
		j_uint(&j, "inv_lines", st.dev_inv_lines);
		j_uint(&j, "native_ops", st.dev_native_ops);
		j_uint(&j, "errors", st.dev_errors);
		j_uint(&j, "conflicts", st.dev_conflicts);
		j_timed_stats(&j, &st);
		j_obj_end(&j);
		j_end_print(&j);
	}
	cxlpod_close(t.p);
	return *maperr ? EXIT_SETUP : 0;
}

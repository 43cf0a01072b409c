/*
 * cxlpod-pool: create, inspect, check and repair a cxlpod pool file
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   cxlpod-pool create --size S [--coherent-size C] [--max-hosts N]
 *                      [--mode 0600] [--owner USER[:GROUP]] POOL
 *   cxlpod-pool inspect [--json] POOL
 *   cxlpod-pool check POOL
 *   cxlpod-pool reset-host N POOL
 *   cxlpod-pool wipe POOL
 *   cxlpod-pool upgrade [--dry-run] POOL
 *   cxlpod-pool key POOL
 *   cxlpod-pool serve [--listen ADDR:PORT] [--key FILE]
 *                     [--heartbeat-timeout MS] [--join-timeout MS] [--spin] POOL
 *
 * The format code (layout, validation, liveness probe, creation) is the
 * device's own, hw-cxl/cxl-shm-format.c.  Commands that write take the
 * pool's flock exclusively, as a joining QEMU does, so they never race a
 * start; reset-host, wipe and upgrade refuse while the host (any host)
 * holds its liveness lock.  See docs/pool-tool.md.
 *
 * Exit status: 0 done (check: no problem), 1 refused or problems found,
 * 2 usage error or the file cannot be opened.
 */

#include "pool.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    { "create", cmd_create, "make a pool file" },
    { "inspect", cmd_inspect, "header, geometry, host table (--json)" },
    { "check", cmd_check, "check every invariant; what is wrong, how to "
      "recover" },
    { "reset-host", cmd_reset_host, "clear the slot of a dead host" },
    { "wipe", cmd_wipe, "zero the data (no host may be live)" },
    { "upgrade", cmd_upgrade, "convert a pool of format version 3 to "
      "version 4 in place" },
    { "key", cmd_key, "make the pod's key POOL.key if it is missing" },
    { "serve", cmd_serve, "serve the pool to hosts on other machines over "
      "UCX" },
};

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: cxlpod-pool COMMAND [OPTIONS] ...\n\ncommands:\n");
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    }
    fprintf(f, "\n'cxlpod-pool COMMAND --help' shows its options.\n");
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            g_autofree char *prg = g_strdup_printf("cxlpod-pool %s", argv[1]);

            g_set_prgname(prg);
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fail("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}

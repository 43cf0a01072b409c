/*
 * cxlpod-launch: boot N QEMU guests on one CXL memory pool and run a job in
 * each of them (or keep them up for interactive use).  This file only
 * dispatches the subcommands; launch.h says which file does what.
 * See docs/launcher.md for the user documentation and docs/interfaces.md
 * section 2 for the guest job protocol spoken here.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"


int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "console")) {
        return console_main(argc, argv);
    }
    if (argc >= 2 && !strcmp(argv[1], "qmp")) {
        return qmp_main(argc, argv);
    }
    if (argc >= 2 && !strcmp(argv[1], "ssh")) {
        return ssh_main(argc, argv);
    }
    if (argc >= 2 && !strcmp(argv[1], "proxy")) {
        return proxy_main(argc, argv);
    }
    struct opts o;
    parse_args(argc, argv, &o);
    resolve_paths(&o);
    make_workdir(&o);
    return run(&o);
}

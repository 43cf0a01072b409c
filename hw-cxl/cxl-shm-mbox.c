/*
 * cxl-shm: the mailbox commands one head of the shared device may use
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "hw/cxl/cxl.h"
#include "cxl-shm.h"
#include "trace.h"

/*
 * The mailbox commands one head of the shared device may use: an
 * allowlist, so that a command a later QEMU tree adds is refused until
 * someone has decided it is safe here.  Each was checked against the
 * QEMU 10.0 tree (hw/cxl/cxl-mailbox-utils.c):
 *
 * - reads of device state, logs and capabilities, and the poison and
 *   scan media lists (Scan Media and Inject Poison change only this
 *   host's lists, never the media);
 * - this host's own event records and interrupt policy, and the device
 *   timestamp (Linux sets it at probe);
 * - Clear Poison (4302h), whose 64-byte write reaches the pool through
 *   cxl_shm_set_cacheline(): one whole line under its lock, as a head's
 *   own store may write it.
 *
 * Left out: Sanitize (4400h; the parent memsets the whole pool, every
 * host's data, bypassing the images and the line locks), firmware
 * Transfer and Activate (0201h, 0202h; the device's firmware is every
 * head's), Set Feature (0502h; device-wide scrub settings), Set LSA
 * (4103h; a shared device's label area is every head's, and the pool
 * has none), and everything the tree does not have yet (Secure Erase
 * 4401h, Media Operations 4402h, which zeroes ranges upstream, Set
 * Partition Info, Set Shutdown State, the dynamic capacity commands).
 * A guest that sends one gets Unsupported, and the Command Effects Log
 * does not offer it.  The parent builds the command set in its reset
 * (cxl_device_register_init_t3), hence the call after every parent
 * reset.
 */
static const uint16_t cxl_shm_mbox_allowlist[] = {
    0x0100, 0x0101, 0x0102, 0x0103,     /* event records, interrupt policy */
    0x0200,                             /* Get FW Info */
    0x0300, 0x0301,                     /* Get / Set Timestamp */
    0x0400, 0x0401,                     /* Get Supported Logs, Get Log */
    0x0500, 0x0501,                     /* Get Supported Features, Feature */
    0x4000,                             /* Identify Memory Device */
    0x4100, 0x4102,                     /* Get Partition Info, Get LSA */
    0x4300, 0x4301, 0x4302,             /* poison list, inject, clear */
    0x4303, 0x4304, 0x4305,             /* scan media */
    0x4500,                             /* Get Security State */
};

static bool cxl_shm_mbox_allowed(uint16_t opcode)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cxl_shm_mbox_allowlist); i++) {
        if (cxl_shm_mbox_allowlist[i] == opcode) {
            return true;
        }
    }
    return false;
}

/*
 * Get Supported Features (0500h) as the parent answers it, with every
 * feature reported as not changeable: the parent offers its patrol scrub
 * and DDR5 ECS controls as changeable, but their settings are the
 * device's, every head's, and Set Feature is not on the allowlist.  A
 * guest is told so (Attribute Flags bit 0 clear, Set Feature Size 0, CXL
 * r3.1 Table 8-97) instead of offering a control that is then refused.
 */
typedef struct CXLShmFeatureEntry {
    uint8_t uuid[16];
    uint16_t index;
    uint16_t get_size;
    uint16_t set_size;
    uint32_t attr_flags;
    uint8_t rest[22];           /* versions, Set Feature Effects, reserved */
} QEMU_PACKED CXLShmFeatureEntry;

#define CXLSHM_FEATURE_CHANGEABLE 1     /* Attribute Flags bit 0 */
#define CXLSHM_FEATURES_HEADER 8        /* Table 8-96: before the entries */

static opcode_handler cxl_shm_parent_features;

static CXLRetCode cxl_shm_get_features(const struct cxl_cmd *cmd,
                                       uint8_t *payload_in, size_t len_in,
                                       uint8_t *payload_out, size_t *len_out,
                                       CXLCCI *cci)
{
    CXLRetCode rc = cxl_shm_parent_features(cmd, payload_in, len_in,
                                            payload_out, len_out, cci);
    CXLShmFeatureEntry *e = (void *)(payload_out + CXLSHM_FEATURES_HEADER);
    size_t i, n;

    QEMU_BUILD_BUG_ON(sizeof(CXLShmFeatureEntry) != 48);
    if (rc != CXL_MBOX_SUCCESS || *len_out < CXLSHM_FEATURES_HEADER) {
        return rc;
    }
    n = (*len_out - CXLSHM_FEATURES_HEADER) / sizeof(*e);
    for (i = 0; i < n; i++) {
        e[i].attr_flags = cpu_to_le32(le32_to_cpu(e[i].attr_flags) &
                                      ~CXLSHM_FEATURE_CHANGEABLE);
        e[i].set_size = 0;
    }
    return rc;
}

void cxl_shm_restrict_mailbox(CXLShmState *s)
{
    CXLCCI *cci = &s->parent_obj.cci;
    size_t i, j;
    int set, cmd;

    for (set = 0; set < 256; set++) {
        for (cmd = 0; cmd < 256; cmd++) {
            if (cci->cxl_cmd_set[set][cmd].handler &&
                !cxl_shm_mbox_allowed(set << 8 | cmd)) {
                cci->cxl_cmd_set[set][cmd].handler = NULL;
            }
        }
    }
    if (cci->cxl_cmd_set[0x05][0x00].handler &&
        cci->cxl_cmd_set[0x05][0x00].handler != cxl_shm_get_features) {
        cxl_shm_parent_features = cci->cxl_cmd_set[0x05][0x00].handler;
        cci->cxl_cmd_set[0x05][0x00].handler = cxl_shm_get_features;
    }
    for (i = j = 0; i < cci->cel_size; i++) {
        if (cxl_shm_mbox_allowed(cci->cel_log[i].opcode)) {
            cci->cel_log[j++] = cci->cel_log[i];
        }
    }
    /* Get Log may read past cel_size: leave no stale entry there */
    memset(&cci->cel_log[j], 0, (cci->cel_size - j) * sizeof(cci->cel_log[0]));
    cci->cel_size = j;
}

/*
 * Clear Poison (4302h) writes 64 bytes of the command's payload into the
 * media.  The parent writes them through its host address space, which
 * here is the pool with this host's image over the non-coherent area: a
 * store by this host in the non-coherent area, a plain unlocked copy in
 * the coherent window.  Write the line as the device's own media write
 * instead, whole and under the line's lock.  The caller checks only
 * dpa + 64 against the capacity (which can wrap): check again here.  An
 * unaligned DPA (the spec requires 64-byte alignment) gets Internal Error,
 * the only failure this hook can return; so does a line whose lock
 * another host holds at that moment (it may be stopped, for as long as
 * it is: the mailbox runs under the BQL, which never waits for another
 * host).  The guest may try again.
 */

bool cxl_shm_set_cacheline(CXLType3Dev *ct3d, uint64_t dpa_offset,
                           uint8_t *data)
{
    CXLShmState *s = CXL_SHM(ct3d);

    if (dpa_offset % CXLSHM_LINE || dpa_offset >= s->size ||
        s->size - dpa_offset < CXLSHM_LINE) {
        return false;
    }
    if (s->far) {
        /* a remote host's media is the service's: not written from here */
        trace_cxl_shm_media_write_busy(s->host_id, dpa_offset);
        return false;
    }
    if (!cxl_shm_lines_media_write(&s->lines, dpa_offset, data)) {
        trace_cxl_shm_media_write_busy(s->host_id, dpa_offset);
        return false;
    }
    trace_cxl_shm_media_write(s->host_id, dpa_offset);
    return true;
}

/*
 * cxl-shm: the CDAT: DSMAS, DSLBIS and DSEMTS of the pool's ranges
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "hw/cxl/cxl.h"
#include "cxl-shm.h"
#include "trace.h"

/* CDAT: the pool is shareable, only the coherent window HW coherent */

static int cxl_shm_cdat_range(CXLShmState *s, CDATSubHeader **t, int handle,
                              uint64_t base, uint64_t len, bool coherent)
{
    static const struct {
        uint8_t type;
        bool latency;
    } lb[] = {
        { HMAT_LB_DATA_READ_LATENCY, true },
        { HMAT_LB_DATA_WRITE_LATENCY, true },
        { HMAT_LB_DATA_READ_BANDWIDTH, false },
        { HMAT_LB_DATA_WRITE_BANDWIDTH, false },
    };
    CDATDsmas *dsmas = g_new0(CDATDsmas, 1);
    CDATDsemts *dsemts = g_new0(CDATDsemts, 1);
    uint32_t lat[2];
    int n = 0, i;

    s->mode_ops->latency(s, &lat[0], &lat[1]);

    *dsmas = (CDATDsmas) {
        .header = { .type = CDAT_TYPE_DSMAS, .length = sizeof(*dsmas) },
        .DSMADhandle = handle,
        .flags = CDAT_DSMAS_FLAG_SHAREABLE |
                 (coherent ? CDAT_DSMAS_FLAG_HW_COHERENT : 0),
        .DPA_base = base,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsmas;
    for (i = 0; i < ARRAY_SIZE(lb); i++) {
        CDATDslbis *d = g_new0(CDATDslbis, 1);

        *d = (CDATDslbis) {
            .header = { .type = CDAT_TYPE_DSLBIS, .length = sizeof(*d) },
            .handle = handle,
            .flags = HMAT_LB_MEM_MEMORY,
            .data_type = lb[i].type,
            /* latency in ns (base unit ps), bandwidth in MB/s */
            .entry_base_unit = lb[i].latency ? 1000 : 1,
            .entry[0] = lb[i].latency ? lat[i] : s->bandwidth_mbs,
        };
        t[n++] = (CDATSubHeader *)d;
    }
    *dsemts = (CDATDsemts) {
        .header = { .type = CDAT_TYPE_DSEMTS, .length = sizeof(*dsemts) },
        .DSMAS_handle = handle,
        .EFI_memory_type_attr = 1, /* EFI_MEMORY_SP */
        .DPA_offset = 0,
        .DPA_length = len,
    };
    t[n++] = (CDATSubHeader *)dsemts;
    return n;
}

/* The cxl-type3 class hook: @priv is the device */
int cxl_shm_build_cdat(CDATSubHeader ***cdat_table, void *priv)
{
    CXLShmState *s = CXL_SHM(priv);
    CDATSubHeader **t = g_new0(CDATSubHeader *, 12);
    int n = 0, handle = 0;

    if (s->coherent_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, 0, s->coherent_size,
                                true);
    }
    if (s->nc_size) {
        n += cxl_shm_cdat_range(s, t + n, handle++, s->coherent_size,
                                s->nc_size, false);
    }
    *cdat_table = t;
    return n;
}

void cxl_shm_free_cdat(CDATSubHeader **cdat_table, int num, void *priv)
{
    int i;

    for (i = 0; i < num; i++) {
        g_free(cdat_table[i]);
    }
    g_free(cdat_table);
}

/*
 * latency-ns can change at run time (qom-set):
 * the charge uses the new value from the next operation on, and the
 * CDAT's DSLBIS latencies follow (its sequence number grows, so software
 * that cached the table can tell).
 */
void cxl_shm_cdat_set_latency(CXLShmState *s)
{
    CDATObject *cdat = &s->parent_obj.cxl_cstate.cdat;
    CDATTableHeader *hdr;
    uint32_t rd, wr;
    uint8_t sum = 0;
    int i, b;

    s->mode_ops->latency(s, &rd, &wr);

    if (!cdat->entry || cdat->entry_len < 1) {
        return;
    }
    for (i = 1; i < cdat->entry_len; i++) {
        CDATDslbis *d = cdat->entry[i].base;

        if (d->header.type == CDAT_TYPE_DSLBIS &&
            (d->data_type == HMAT_LB_DATA_READ_LATENCY ||
             d->data_type == HMAT_LB_DATA_WRITE_LATENCY)) {
            d->entry[0] = d->data_type == HMAT_LB_DATA_READ_LATENCY ? rd
                                                                    : wr;
        }
    }
    hdr = cdat->entry[0].base;
    hdr->sequence++;
    hdr->checksum = 0;
    for (i = 0; i < cdat->entry_len; i++) {
        const uint8_t *p = cdat->entry[i].base;

        for (b = 0; b < cdat->entry[i].length; b++) {
            sum += p[b];
        }
    }
    hdr->checksum = ~sum + 1;
}

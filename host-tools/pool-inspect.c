/*
 * cxlpod-pool inspect: header, geometry and host table, as text or
 * --json
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "pool.h"

static void print_text(Pool *p)
{
    CXLPoolHeader *h = p->hdr;
    g_autofree char *created = fmt_time(h->create_time_ns);
    unsigned held, armed;
    uint32_t i;
    int k;

    count_locks(p, &held, &armed);
    printf("pool %s\n", p->path);
    printf("  format    version %u, created %s\n", h->version, created);
    printf("  geometry  size %" PRIu64 " (%" PRIu64 " MiB), coherent-size %"
           PRIu64 " (%" PRIu64 " MiB), max-hosts %u, line %u\n",
           h->data_size, h->data_size >> 20, h->coherent_size,
           h->coherent_size >> 20, h->max_hosts, h->line_size);
    printf("  file      %lld bytes, mode 0%o, uid %u\n",
           (long long)p->st.st_size, (unsigned)(p->st.st_mode & 07777),
           (unsigned)p->st.st_uid);
    printf("  tail      0x%" PRIx64 " bytes at 0x%" PRIx64 " (host table, "
           "statistics, undo slots, lock turns, snoop filter)\n",
           h->tail_size, h->tail_offset);
    printf("  locks     %u line locks held, %u undo slots armed\n",
           held, armed);
    printf("  host  status   table    lock  pid       generation  joined"
           "                leave\n");
    for (i = 0; i < p->nr_hosts; i++) {
        CXLPoolHost *e = &p->hosts[i];
        g_autofree char *jt = fmt_time(e->join_time_ns);
        g_autofree char *lt = fmt_time(e->leave_time_ns);
        bool locked;
        const char *status = host_status(p, i, &locked);

        printf("  %-4u  %-7s  %-7s  %-4s  %-8u  %-10" PRIu64 "  %-20s  %s\n",
               i, status, cxlpool_host_state_name(e->state),
               locked ? "held" : "free", e->pid, e->generation, jt, lt);
        if (e->generation) {
            printf("        stats");
            for (k = 0; k < CXLSHM_STAT_NR; k++) {
                printf(" %s=%" PRIu64, stat_names[k], pool_stat(p, i, k));
            }
            printf("\n");
        }
    }
}

/* One member of the object being built */
static void member_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void member_string(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, v);
}

static void member_boolean(JsonBuilder *b, const char *name, gboolean v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, v);
}

static void print_json(Pool *p)
{
    CXLPoolHeader *h = p->hdr;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;
    unsigned held, armed;
    uint32_t i;
    int k;

    count_locks(p, &held, &armed);
    json_builder_begin_object(b);
    member_string(b, "path", p->path);
    member_int(b, "version", h->version);
    member_int(b, "size", h->data_size);
    member_int(b, "coherent_size", h->coherent_size);
    member_int(b, "max_hosts", h->max_hosts);
    member_int(b, "line_size", h->line_size);
    member_int(b, "create_time_ns", h->create_time_ns);
    member_int(b, "file_size", p->st.st_size);
    member_int(b, "file_mode", p->st.st_mode & 07777);
    member_int(b, "tail_offset", h->tail_offset);
    member_int(b, "tail_size", h->tail_size);
    json_builder_set_member_name(b, "layout");
    json_builder_begin_object(b);
    member_int(b, "hosts", p->lo.hosts);
    member_int(b, "xstats", p->lo.xstats);
    member_int(b, "undo", p->lo.undo);
    member_int(b, "turns", p->lo.turns);
    member_int(b, "turn_words", p->lo.turn_words);
    member_int(b, "sf_header", p->lo.sf_header);
    member_int(b, "sf_entries", p->lo.sf_entries);
    json_builder_end_object(b);
    member_int(b, "line_locks_held", held);
    member_int(b, "undo_armed", armed);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (i = 0; i < p->nr_hosts; i++) {
        CXLPoolHost *e = &p->hosts[i];
        bool locked;
        const char *status = host_status(p, i, &locked);

        json_builder_begin_object(b);
        member_int(b, "id", i);
        member_string(b, "status", status);
        member_string(b, "state", cxlpool_host_state_name(e->state));
        member_boolean(b, "locked", locked);
        member_int(b, "pid", e->pid);
        member_int(b, "generation", e->generation);
        member_int(b, "join_time_ns", e->join_time_ns);
        member_int(b, "leave_time_ns", e->leave_time_ns);
        json_builder_set_member_name(b, "stats");
        json_builder_begin_object(b);
        for (k = 0; k < CXLSHM_STAT_NR; k++) {
            json_builder_set_member_name(b, stat_names[k]);
            json_builder_add_int_value(b, pool_stat(p, i, k));
        }
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

int cmd_inspect(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "json", 'j', 0, G_OPTION_ARG_NONE, &json,
          "print one JSON object", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "POOL - header, geometry and host table");
    g_autoptr(GError) err = NULL;
    Pool p;
    int ret;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 2) {
        fail("inspect: %s", err ? err->message : "usage: cxlpod-pool "
             "inspect [--json] POOL");
        return 2;
    }
    ret = pool_open(&p, argv[1], false);
    if (ret == 0) {
        if (json) {
            print_json(&p);
        } else {
            print_text(&p);
        }
    }
    pool_close(&p);
    return ret;
}

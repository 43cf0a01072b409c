/*
 * cxl-shm: the pool's memory backend and the non-coherent image
 *
 * Copyright (c) 2025 cxlpod authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "qom/object_interfaces.h"
#include "exec/memory.h"
#include "system/hostmem.h"
#include "qemu/madvise.h"
#include "cxl-shm.h"
#include "trace.h"

/*
 * memdev=ID: the pool's data is a memory-backend-file the user made, its
 * mem-path the pool file and its offset the metadata size, so that the
 * pool stays one file (docs/pool-format.md).  Checked before the pool is
 * touched; the pool's path is the backend's mem-path.
 */
bool cxl_shm_check_memdev(CXLShmState *s, Error **errp)
{
    HostMemoryBackend *b = s->parent_obj.hostmem;
    const char *id = object_get_canonical_path_component(OBJECT(b));
    g_autofree char *path = NULL;
    MemoryRegion *mr;
    struct stat st;
    uint64_t size, offset;
    int fd;

    if (s->pool_path && *s->pool_path) {
        error_setg(errp, "properties 'pool' and 'memdev' are both "
                   "set (allowed: one; 'pool=PATH' makes the memdev itself)");
        return false;
    }
    if (!object_dynamic_cast(OBJECT(b), TYPE_MEMORY_BACKEND_FILE)) {
        error_setg(errp, "memdev '%s' is a %s (allowed: a "
                   "memory-backend-file whose mem-path is the pool file)",
                   id, object_get_typename(OBJECT(b)));
        return false;
    }
    if (host_memory_backend_is_mapped(b)) {
        error_setg(errp, "memdev '%s' is already used by another "
                   "device (or as the machine's or a NUMA node's memory)",
                   id);
        return false;
    }
    if (!b->share) {
        error_setg(errp, "memdev '%s' has share=off (allowed: "
                   "share=on: the hosts share the pool's pages)", id);
        return false;
    }
    if (object_property_get_bool(OBJECT(b), "readonly", NULL)) {
        error_setg(errp, "memdev '%s' has readonly=on (a host "
                   "writes its pool)", id);
        return false;
    }
    offset = object_property_get_uint(OBJECT(b), "offset", NULL);
    if (offset != CXLPOOL_META_SIZE) {
        error_setg(errp, "memdev '%s' has offset=%" PRIu64
                   " (allowed: offset=%" PRIu64 ", the pool's data starts "
                   "after its 2 MiB of metadata)", id, offset,
                   CXLPOOL_META_SIZE);
        return false;
    }
    mr = host_memory_backend_get_memory(b);
    size = memory_region_size(mr);
    if (s->size && s->size != size) {
        error_setg(errp, "memdev '%s' is %" PRIu64 " bytes but "
                   "property 'size' is %" PRIu64 " (allowed: equal, or "
                   "'size' left out)", id, size, s->size);
        return false;
    }
    fd = memory_region_get_fd(mr);
    path = object_property_get_str(OBJECT(b), "mem-path", NULL);
    if (fd < 0 || !path || fstat(fd, &st) < 0) {
        error_setg(errp, "memdev '%s' has no file (allowed: a "
                   "memory-backend-file)", id);
        return false;
    }
    if (st.st_nlink == 0) {
        error_setg(errp, "memdev '%s' has mem-path '%s', a "
                   "directory: its file is unlinked and no other host can "
                   "open it (allowed: the pool file's path)", id, path);
        return false;
    }
    s->size = size;
    s->memdev = true;
    s->backend = b;
    g_free(s->pool_path);
    s->pool_path = g_steal_pointer(&path);
    trace_cxl_shm_memdev(s->pool_path, id, size);
    return true;
}

/* Are @a and @b open on the same file? */
static bool cxl_shm_same_file(int a, int b)
{
    struct stat sa, sb;

    return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* @o, configured, becomes the device's child @name and is completed */
static bool backend_complete(CXLShmState *s, Object *o, const char *name,
                             Error **errp)
{
    object_property_add_child(OBJECT(s), name, o);
    object_unref(o);
    if (!user_creatable_complete(USER_CREATABLE(o), errp)) {
        object_unparent(o);
        return false;
    }
    return true;
}

/*
 * The pool's data: the user's memdev, or for pool=PATH the backend the
 * user would have given (mem-path=PATH, offset=2M, share=on).
 */
bool cxl_shm_make_backend(CXLShmState *s, Error **errp)
{
    static int count;
    g_autofree char *name = NULL;
    Object *o;

    if (s->memdev) {
        s->parent_obj.hostmem = NULL;   /* the parent would take it as pmem */
        goto mapped;
    }
    name = g_strdup_printf("cxl-shm-pool%d", count++);
    if (s->far) {
        /* a remote host: RAM under its image; the window is the service's */
        o = object_new(TYPE_MEMORY_BACKEND_RAM);
        if (!object_property_set_uint(o, "size", s->size, errp) ||
            !object_property_set_bool(o, "reserve", false, errp)) {
            object_unref(o);
            return false;
        }
        if (!backend_complete(s, o, name, errp)) {
            return false;
        }
        s->backend = MEMORY_BACKEND(o);
        goto mapped;
    }
    o = object_new(TYPE_MEMORY_BACKEND_FILE);

    if (!object_property_set_str(o, "mem-path", s->pool_path, errp) ||
        !object_property_set_uint(o, "size", s->size, errp) ||
        !object_property_set_uint(o, "offset", CXLPOOL_META_SIZE, errp) ||
        !object_property_set_bool(o, "share", true, errp)) {
        object_unref(o);
        return false;
    }
    if (!backend_complete(s, o, name, errp)) {
        return false;
    }
    /*
     * The backend opened the pool by its name: it must be the file the
     * join checked and holds (s->fd), not one put at the path since
     */
    if (!cxl_shm_same_file(memory_region_get_fd(
                               host_memory_backend_get_memory(
                                   MEMORY_BACKEND(o))), s->fd)) {
        error_setg(errp, "pool '%s' was removed or replaced between its "
                   "check and its mapping", s->pool_path);
        object_unparent(o);
        return false;
    }
    s->backend = MEMORY_BACKEND(o);
mapped:
    s->pool_mr = host_memory_backend_get_memory(s->backend);
    s->pool = memory_region_get_ram_ptr(s->pool_mr);
    s->lines.pool = s->pool;    /* also without a non-coherent area */
    return true;
}

/*
 * After the device's last use of the pool's data (a failed realize, or
 * the release after an unplug's grace period): the user's memdev is free
 * for another user again (the parent's realize marked it mapped), or the
 * backend made for pool=PATH goes.  Its region is the backend's own: the
 * views that still hold it keep the backend alive until they go.
 */
void cxl_shm_drop_backend(CXLShmState *s)
{
    if (s->backend && s->memdev) {
        /* the user's: the memdev link keeps its reference */
        host_memory_backend_set_mapped(s->backend, false);
        s->parent_obj.hostmem = s->backend;
        s->backend = NULL;
        s->pool_mr = NULL;
        s->pool = NULL;
    } else if (s->backend) {
        object_unparent(OBJECT(s->backend));
        s->backend = NULL;
        s->pool_mr = NULL;
        s->pool = NULL;
    }
}

/*
 * The host starts with a clean copy of the pool.  Image and twin are fresh
 * zero pages: copy only the file's data extents, line by line under the
 * line locks, so that a host uses memory only for the parts of the area
 * that hold data or that it touches.
 */
void cxl_shm_load_image(CXLShmState *s)
{
    off_t base = CXLPOOL_META_SIZE + s->coherent_size;
    uint64_t off = 0;

    while (off < s->nc_size) {
        off_t data = lseek(s->fd, base + off, SEEK_DATA);
        off_t hole;
        uint64_t from, to;

        if (data < 0) {
            break;              /* only holes (zeros) left */
        }
        hole = lseek(s->fd, data, SEEK_HOLE);
        if (hole < 0 || hole > base + (off_t)s->nc_size) {
            hole = base + s->nc_size;
        }
        from = QEMU_ALIGN_DOWN(data - base, CXLSHM_PAGE);
        to = QEMU_ALIGN_UP(hole - base, CXLSHM_PAGE);
        if (to <= from) {
            break;
        }
        cxl_shm_lines_load(&s->lines, s->coherent_size + from, to - from);
        off = to;
    }
}

/* Bytes of the per-page "in sync" words (cxl-shm-line.h) */
size_t cxl_shm_seen_size(CXLShmState *s)
{
    return s->nc_size / CXLSHM_LOCK_PAGE * sizeof(uint64_t);
}

bool cxl_shm_make_image(CXLShmState *s, Error **errp)
{
    void *twin, *seen;

    s->nc_size = s->size - s->coherent_size;
    if (!s->nc_size) {
        return true;
    }
    if (!memory_region_init_ram(&s->image_mr, OBJECT(s), "cxl-shm-image",
                                s->nc_size, errp)) {
        return false;
    }
    twin = mmap(NULL, s->nc_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (twin == MAP_FAILED) {
        error_setg_errno(errp, errno, "cannot allocate the twin of "
                         "the non-coherent area (%" PRIu64 " bytes)",
                         s->nc_size);
        object_unparent(OBJECT(&s->image_mr));
        return false;
    }
    seen = mmap(NULL, cxl_shm_seen_size(s), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (seen == MAP_FAILED) {
        error_setg_errno(errp, errno, "cannot allocate the page "
                         "versions of the non-coherent area");
        munmap(twin, s->nc_size);
        object_unparent(OBJECT(&s->image_mr));
        return false;
    }
    s->lines.seen = seen;
    s->lines.runs = g_new0(CXLShmRun, CXLSHM_NR_LOCKS);
    s->twin = twin;
    s->image = memory_region_get_ram_ptr(&s->image_mr);
    s->lines.image = s->image;
    s->lines.twin = s->twin;
    s->lines.conflict = cxl_shm_conflict;
    if (!s->far) {
        cxl_shm_load_image(s);
    }
    /* loads and stores of the non-coherent area hit the image */
    memory_region_add_subregion_overlap(s->pool_mr, s->coherent_size,
                                        &s->image_mr, 1);
    /* a remote host's comes from the service */
    if (s->far && !cxl_shm_far_ops->fill(s, errp)) {
        cxl_shm_drop_image(s);
        return false;
    }
    return true;
}

/*
 * The image leaves the pool's region (the user's memdev, or the backend
 * made for pool=PATH, both outlive it), and the twin goes.  The image's
 * region is not unparented here: a RAM region must not be destroyed while
 * something may still hold it (docs/devel/memory.rst), and what took a
 * reference holds the device, its owner; it goes with the device.
 */
void cxl_shm_drop_image(CXLShmState *s)
{
    if (!s->nc_size) {
        return;
    }
    if (s->image) {
        memory_region_del_subregion(s->pool_mr, &s->image_mr);
        s->image = NULL;
    }
    if (s->twin) {
        munmap(s->twin, s->nc_size);
        s->twin = NULL;
    }
    if (s->lines.seen) {
        munmap(s->lines.seen, cxl_shm_seen_size(s));
        s->lines.seen = NULL;
    }
    g_free(s->lines.runs);
    s->lines.runs = NULL;
}

/*
 * A host reset: the image and twin are fresh zero pages again, fetched
 * anew from the pool (the lines not written back are lost)
 */
void cxl_shm_reload_image(CXLShmState *s)
{
    if (s->nc_size) {
        ram_block_discard_range(s->image_mr.ram_block, 0, s->nc_size);
        qemu_madvise(s->twin, s->nc_size, QEMU_MADV_DONTNEED);
        /* a twin of zeros is in sync with nothing */
        qemu_madvise(s->lines.seen, cxl_shm_seen_size(s),
                     QEMU_MADV_DONTNEED);
        memset(s->lines.runs, 0, CXLSHM_NR_LOCKS * sizeof(CXLShmRun));
        cxl_shm_load_image(s);
    }
}

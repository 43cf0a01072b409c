"""cxlpod: a CXL shared-memory pod from Python.

A thin ctypes layer over the shared libcxlpod (no compiled extension):

    import cxlpod, numpy as np
    with cxlpod.Pod() as pod:                  # in a guest: the cxl-shm device
        a = np.frombuffer(pod.noncoherent, dtype=np.uint64)   # no copy
        a[:8] = pod.host_id
        pod.writeback(a[:8]); pod.fence()      # publish 64 bytes
        pod.fetch_add(0, 1)                    # cross-host atomic (coherent window)

and a wrapper of the launcher on the machine that runs the pod:

    r = cxlpod.launch("python3 my_test.py", hosts=2, userland="host")
    r.ok, r.json["results"], r.output(0)

Offsets are pool offsets: the coherent window is [0, coherent_size), the
non-coherent area [coherent_size, size).  Every libcxlpod failure raises
cxlpod.Error (an OSError with libcxlpod's errno and message); so does a call
on a closed pod (EBADF) and an offset or length outside the pool (EINVAL).
docs/your-software.md has the walk-through, docs/guest-guide.md the rules.
"""

import ctypes
import ctypes.util
import errno as _errno
import json as _json
import os
import shutil
import subprocess
import weakref

__all__ = ["Pod", "Error", "LaunchResult", "launch", "library_path",
           "launcher_path"]

try:  # written by meson at install time (python/meson.build)
    from . import _config
except ImportError:  # the source tree: no installation to be relative to
    _config = None

_MASK64 = (1 << 64) - 1


class Error(OSError):
    """A libcxlpod call failed, or the call was not valid (closed pod,
    offset outside the pool).  .errno is the errno value."""


# ---- finding the library and the launcher --------------------------------

def _install_root():
    """PREFIX when this module is PREFIX/PYTHONDIR/cxlpod, else None."""
    if _config is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(here)
    pydir = _config.PYTHONDIR.rstrip("/")
    if os.path.isabs(pydir):
        return None
    tail = os.sep + os.path.normpath(pydir)
    if not parent.endswith(tail):
        return None
    return parent[:-len(tail)] or "/"


def _installed(configured):
    if os.path.isabs(configured):
        return configured
    root = _install_root()
    return None if root is None else os.path.join(root, configured)


def library_path():
    """The libcxlpod this module loads: $CXLPOD_LIBRARY, else the one of the
    installation the module belongs to, else the system's libcxlpod.so.0."""
    env = os.environ.get("CXLPOD_LIBRARY")
    if env:
        return env
    if _config is not None:
        d = _installed(_config.LIBDIR)
        if d and os.path.exists(os.path.join(d, "libcxlpod.so.0")):
            return os.path.join(d, "libcxlpod.so.0")
    return ctypes.util.find_library("cxlpod") or "libcxlpod.so.0"


def launcher_path():
    """cxlpod-launch: $CXLPOD_LAUNCH, else the installation's, else PATH."""
    env = os.environ.get("CXLPOD_LAUNCH")
    if env:
        return env
    if _config is not None:
        d = _installed(_config.BINDIR)
        if d and os.access(os.path.join(d, "cxlpod-launch"), os.X_OK):
            return os.path.join(d, "cxlpod-launch")
    p = shutil.which("cxlpod-launch")
    if not p:
        raise Error(_errno.ENOENT, "cxlpod-launch not found: install cxlpod, "
                    "put it on PATH or set CXLPOD_LAUNCH")
    return p


# ---- the C interface (guest-tools/libcxlpod.h) ----------------------------

class _Opts(ctypes.Structure):
    _fields_ = [("loopback", ctypes.c_char_p), ("pci", ctypes.c_char_p),
                ("dax", ctypes.c_char_p), ("method", ctypes.c_int),
                ("flags", ctypes.c_uint)]


class _Info(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("version", ctypes.c_uint),
                ("host_id", ctypes.c_uint), ("max_hosts", ctypes.c_uint),
                ("size", ctypes.c_uint64), ("coherent_size", ctypes.c_uint64),
                ("line_size", ctypes.c_uint), ("mode", ctypes.c_uint),
                ("latency_ns", ctypes.c_uint), ("caps", ctypes.c_uint),
                ("wb_deferred", ctypes.c_int), ("evict_rate", ctypes.c_uint),
                ("method", ctypes.c_int), ("cpu_clflushopt", ctypes.c_int),
                ("cpu_clwb", ctypes.c_int), ("native_usable", ctypes.c_int),
                ("pci", ctypes.c_char * 32), ("dax", ctypes.c_char * 256)]


_STAT_FIELDS = [
    "dev_wb_ops", "dev_inv_ops", "dev_flush_ops", "dev_wb_lines",
    "dev_inv_lines", "dev_native_ops", "dev_errors", "dev_conflicts",
    "dev_evicted", "dev_nt_lines", "dev_deferred", "dev_resets", "dev_hits",
    "dev_misses", "dev_cache_evictions", "dev_back_invalidates", "dev_snoops",
    "dev_sf_evictions", "dev_stale_reads", "dev_charged_ns", "lib_writeback",
    "lib_invalidate", "lib_flush", "lib_fence", "lib_bytes"]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in _STAT_FIELDS]


_METHODS = {None: 0, "doorbell": 1, "native": 2}
_METHOD_NAMES = {1: "doorbell", 2: "native"}
_BACKENDS = {1: "device", 2: "loopback", 3: "model", 4: "raw-dax"}
_HOST_STATES = {0: "free", 1: "live", 2: "failed", 3: "left"}

_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise Error(_errno.ENOENT, "cannot load libcxlpod (%s): %s; install "
                    "cxlpod or set CXLPOD_LIBRARY" % (path, e)) from None
    P, U64, PU64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
    sig = {
        "cxlpod_open": [ctypes.POINTER(P), ctypes.POINTER(_Opts)],
        "cxlpod_close": [P],
        "cxlpod_get_info": [P, ctypes.POINTER(_Info)],
        "cxlpod_area": [P, ctypes.c_int, ctypes.POINTER(P),
                        ctypes.POINTER(ctypes.c_size_t)],
        "cxlpod_ptr": [P, U64, ctypes.POINTER(P)],
        "cxlpod_set_method": [P, ctypes.c_int],
        "cxlpod_writeback": [P, P, ctypes.c_size_t],
        "cxlpod_invalidate": [P, P, ctypes.c_size_t],
        "cxlpod_flush": [P, P, ctypes.c_size_t],
        "cxlpod_fence": [P],
        "cxlpod_atomic_load": [P, P, PU64],
        "cxlpod_atomic_store": [P, P, U64],
        "cxlpod_atomic_fetch_add": [P, P, U64, PU64],
        "cxlpod_atomic_exchange": [P, P, U64, PU64],
        "cxlpod_atomic_cas": [P, P, U64, U64, PU64],
        "cxlpod_hosts_live": [P, PU64],
        "cxlpod_hosts_live_map": [P, PU64, ctypes.c_uint],
        "cxlpod_host_state": [P, ctypes.c_uint, ctypes.POINTER(ctypes.c_int), PU64],
        "cxlpod_stats": [P, ctypes.POINTER(_Stats)],
    }
    for name, args in sig.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = ctypes.c_int
    lib.cxlpod_errmsg.argtypes = []
    lib.cxlpod_errmsg.restype = ctypes.c_char_p
    _lib = lib
    return lib


def _check(rc):
    if rc:
        msg = _lib.cxlpod_errmsg().decode(errors="replace")
        raise Error(rc, msg)


def _really_close(lib, handle):
    lib.cxlpod_close(handle)


# ---- a pod ---------------------------------------------------------------

class Pod:
    """The pool of this host's cxl-shm device (or libcxlpod's loopback or
    model backend: loopback="FILE:COHERENT:SIZE[:nc]" or $CXLPOD_LOOPBACK).

    method: "doorbell" or "native" (default: $CXLPOD_METHOD, else doorbell).
    The pod is a context manager; close() ends it."""

    def __init__(self, loopback=None, pci=None, dax=None, method=None):
        if method not in _METHODS:
            raise ValueError("method must be 'doorbell', 'native' or None")
        lib = _load()
        opts = _Opts(loopback.encode() if loopback else None,
                     pci.encode() if pci else None,
                     dax.encode() if dax else None, _METHODS[method], 0)
        h = ctypes.c_void_p()
        _check(lib.cxlpod_open(ctypes.byref(h), ctypes.byref(opts)))
        self._lib, self._h = lib, h
        info = _Info()
        try:
            _check(lib.cxlpod_get_info(h, ctypes.byref(info)))
            base, ln = ctypes.c_void_p(), ctypes.c_size_t()
            _check(lib.cxlpod_area(h, 0, ctypes.byref(base), ctypes.byref(ln)))
            nbase, nln = ctypes.c_void_p(), ctypes.c_size_t()
            _check(lib.cxlpod_area(h, 1, ctypes.byref(nbase), ctypes.byref(nln)))
        except Error:
            lib.cxlpod_close(h)
            raise
        self._info = info
        self.size = info.size
        self.coherent_size = info.coherent_size
        self._base = base.value or 0
        # one array over the whole mapping (libcxlpod maps the two areas
        # back to back); the memoryviews handed out keep it alive
        if ln.value != self.coherent_size or nln.value != self.size - self.coherent_size \
                or (nln.value and nbase.value != self._base + ln.value):
            lib.cxlpod_close(h)
            raise Error(_errno.EINVAL, "libcxlpod's areas are not one mapping "
                        "(coherent %#x+%#x, non-coherent %#x+%#x)"
                        % (self._base, ln.value, nbase.value or 0, nln.value))
        self._closed = False

        class _Mapping(ctypes.c_ubyte * self.size):
            pass
        self._map = _Mapping.from_address(self._base)
        # libcxlpod unmaps at cxlpod_close(): that happens when the pod is
        # closed AND no buffer views the mapping any more
        self._finalizer = weakref.finalize(self._map, _really_close, lib, h)

    # -- state -------------------------------------------------------------
    def _live(self):
        if self._closed:
            raise Error(_errno.EBADF, "the pod is closed")
        return self._h

    @property
    def closed(self):
        return self._closed

    def close(self):
        """End the pod.  Every later call raises Error (EBADF).  libcxlpod
        unmaps the pool once no memoryview or NumPy array over it is left,
        so a buffer that outlives the pod never reads freed memory."""
        if self._closed:
            return
        self._closed = True
        self._map = None    # the finalizer runs now unless buffers remain

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._closed:
            return "<cxlpod.Pod closed>"
        return "<cxlpod.Pod host %d of %d, %s, %d MiB (%d MiB coherent)>" % (
            self.host_id, self.host_count, self.backend, self.size >> 20,
            self.coherent_size >> 20)

    # -- identity ----------------------------------------------------------
    @property
    def host_id(self):
        self._live()
        return self._info.host_id

    @property
    def host_count(self):
        """The pod's host slots (the device's MAX_HOSTS; loopback:
        $CXLPOD_NHOSTS)."""
        self._live()
        return self._info.max_hosts

    @property
    def backend(self):
        self._live()
        return _BACKENDS.get(self._info.backend, str(self._info.backend))

    @property
    def method(self):
        self._live()
        info = _Info()
        _check(self._lib.cxlpod_get_info(self._h, ctypes.byref(info)))
        return _METHOD_NAMES.get(info.method, str(info.method))

    def set_method(self, method):
        if method not in ("doorbell", "native"):
            raise ValueError("method must be 'doorbell' or 'native'")
        _check(self._lib.cxlpod_set_method(self._live(), _METHODS[method]))

    def info(self):
        """libcxlpod's cxlpod_info as a dict."""
        self._live()
        i = _Info()
        _check(self._lib.cxlpod_get_info(self._h, ctypes.byref(i)))
        d = {n: getattr(i, n) for n, _ in _Info._fields_}
        d["backend"] = _BACKENDS.get(i.backend, i.backend)
        d["method"] = _METHOD_NAMES.get(i.method, i.method)
        d["pci"] = i.pci.decode(errors="replace")
        d["dax"] = i.dax.decode(errors="replace")
        return d

    def stats(self):
        """Device and library counters (cxlpod_stats) as a dict."""
        s = _Stats()
        _check(self._lib.cxlpod_stats(self._live(), ctypes.byref(s)))
        return {n: getattr(s, n) for n in _STAT_FIELDS}

    def hosts_live(self):
        """The host ids the device's table shows live, as a list (all 256)."""
        words = (ctypes.c_uint64 * 4)()
        _check(self._lib.cxlpod_hosts_live_map(self._live(), words, 4))
        return [i for i in range(256) if words[i // 64] >> (i % 64) & 1]

    def host_state(self, host):
        """(state, generation) of a host's slot: state is 'free', 'live',
        'failed' or 'left'."""
        st, gen = ctypes.c_int(), ctypes.c_uint64()
        _check(self._lib.cxlpod_host_state(self._live(), host, ctypes.byref(st),
                                           ctypes.byref(gen)))
        return _HOST_STATES.get(st.value, str(st.value)), gen.value

    # -- buffers -----------------------------------------------------------
    def _range(self, offset, length):
        if not isinstance(offset, int) or not isinstance(length, int):
            raise TypeError("offset and length must be int")
        if offset < 0 or length < 0 or offset + length > self.size:
            raise Error(_errno.EINVAL, "offset %#x length %#x: outside the "
                        "pool [0, %#x)" % (offset, length, self.size))

    def view(self, offset=0, length=None):
        """A writable memoryview (format 'B') over [offset, offset+length)
        of the pool, no copy: np.frombuffer(view, dtype) works on it."""
        self._live()
        if length is None:
            length = self.size - offset
        self._range(offset, length)
        return memoryview(self._map).cast("B")[offset:offset + length]

    @property
    def coherent(self):
        """The coherent window, [0, coherent_size), as a memoryview."""
        return self.view(0, self.coherent_size)

    @property
    def noncoherent(self):
        """The non-coherent area, [coherent_size, size), as a memoryview."""
        return self.view(self.coherent_size, self.size - self.coherent_size)

    def offset_of(self, buf):
        """Pool offset of a buffer (memoryview, NumPy array, ...) that lies
        in the mapping."""
        return self._span(buf)[0]

    def _span(self, buf):
        self._live()
        mv = memoryview(buf)
        if not mv.c_contiguous:
            raise TypeError("the buffer must be C-contiguous")
        n = mv.nbytes
        if n == 0:
            addr = self._base
        else:
            mv = mv.cast("B")
            if mv.readonly:
                raise TypeError("the buffer is read-only: pass an offset and a length")
            addr = ctypes.addressof(ctypes.c_ubyte.from_buffer(mv))
        off = addr - self._base
        if off < 0 or off + n > self.size:
            raise Error(_errno.EINVAL, "the buffer (%d bytes at %#x) is not "
                        "inside the pod's mapping" % (n, addr))
        return off, n

    def _addr(self, where, length):
        if isinstance(where, int):
            if length is None:
                raise TypeError("an offset needs a length")
            self._live()
            self._range(where, length)
            return self._base + where, length
        if length is not None:
            raise TypeError("give a buffer alone, or an offset and a length")
        off, n = self._span(where)
        return self._base + off, n

    # -- coherence ---------------------------------------------------------
    def writeback(self, where, length=None):
        """Copy this host's dirty lines of a range to the pool (offset and
        length, or a buffer over the pool).  Fence before publishing."""
        a, n = self._addr(where, length)
        _check(self._lib.cxlpod_writeback(self._h, a, n))

    def invalidate(self, where, length=None):
        """Drop this host's copy of a range; later loads see the pool."""
        a, n = self._addr(where, length)
        _check(self._lib.cxlpod_invalidate(self._h, a, n))

    def flush(self, where, length=None):
        """writeback + invalidate."""
        a, n = self._addr(where, length)
        _check(self._lib.cxlpod_flush(self._h, a, n))

    def fence(self):
        _check(self._lib.cxlpod_fence(self._live()))

    # -- atomics (coherent window, 8-byte aligned offsets) ------------------
    def _word(self, offset):
        self._live()
        if not isinstance(offset, int):
            raise TypeError("offset must be int")
        self._range(offset, 8)
        return self._base + offset

    def atomic_load(self, offset):
        v = ctypes.c_uint64()
        _check(self._lib.cxlpod_atomic_load(self._h, self._word(offset), ctypes.byref(v)))
        return v.value

    def atomic_store(self, offset, value):
        _check(self._lib.cxlpod_atomic_store(self._h, self._word(offset),
                                             value & _MASK64))

    def fetch_add(self, offset, add):
        """Add (modulo 2**64; a negative add subtracts); returns the old value."""
        old = ctypes.c_uint64()
        _check(self._lib.cxlpod_atomic_fetch_add(self._h, self._word(offset),
                                                 add & _MASK64, ctypes.byref(old)))
        return old.value

    def exchange(self, offset, value):
        old = ctypes.c_uint64()
        _check(self._lib.cxlpod_atomic_exchange(self._h, self._word(offset),
                                                value & _MASK64, ctypes.byref(old)))
        return old.value

    def cas(self, offset, expected, desired):
        """Compare-and-swap; returns (swapped, old value)."""
        old = ctypes.c_uint64()
        _check(self._lib.cxlpod_atomic_cas(self._h, self._word(offset),
                                           expected & _MASK64, desired & _MASK64,
                                           ctypes.byref(old)))
        return old.value == expected & _MASK64, old.value


# ---- the launcher --------------------------------------------------------

class LaunchResult:
    """What one cxlpod-launch run gave: returncode, json (the --json line as
    a dict, None if there was none), stdout, stderr, workdir, ok."""

    def __init__(self, args, returncode, stdout, stderr):
        self.args, self.returncode = args, returncode
        self.stdout, self.stderr = stdout, stderr
        self.json = None
        for line in reversed(stdout.splitlines()):
            if line.startswith("{"):
                try:
                    self.json = _json.loads(line)
                except ValueError:
                    pass
                break
        self.workdir = self.json.get("workdir") if self.json else None

    @property
    def ok(self):
        return self.returncode == 0 and bool(self.json and self.json.get("ok"))

    @property
    def results(self):
        """The per-host results of the JSON line (a list of dicts)."""
        return self.json.get("results", []) if self.json else []

    def output(self, host):
        """What host HOST's job printed (WORKDIR/hostI.out)."""
        if not self.workdir:
            raise Error(_errno.ENOENT, "the launcher reported no work directory")
        with open(os.path.join(self.workdir, "host%d.out" % host),
                  errors="replace") as f:
            return f.read()

    def __repr__(self):
        return "<cxlpod.LaunchResult exit %d ok=%s>" % (self.returncode, self.ok)


def launch(command=None, hosts=2, userland=None, job=None, workdir=None,
           timeout=None, args=(), launcher=None, check=False, cwd=None):
    """Start a pod with cxlpod-launch --json, run COMMAND (a shell command
    line, run in every guest) or JOB (a script file), wait for the end and
    return a LaunchResult.  args: more launcher options, e.g.
    ["--mem", "768M", "--job-host", "0:run.sh"].  check=True raises Error
    when the run did not succeed.  With userland="host" the guests run in
    CWD (default: this process's), as the launcher's own current directory."""
    argv = [launcher or launcher_path(), "-n", str(hosts), "--json", "-q"]
    if userland:
        argv += ["--userland", userland]
    if workdir:
        argv += ["-w", str(workdir)]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    if job:
        argv += ["--job", str(job)]
    argv += [str(a) for a in args]
    if command is not None:
        argv += ["--", command]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", cwd=cwd)
    r = LaunchResult(argv, p.returncode, p.stdout, p.stderr)
    if check and not r.ok:
        tail = "\n".join(p.stderr.splitlines()[-10:])
        raise Error(_errno.EIO, "cxlpod-launch exited %d%s:\n%s" % (
            p.returncode, "" if r.json else " without a JSON result", tail))
    return r

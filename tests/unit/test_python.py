"""The cxlpod Python module on libcxlpod's loopback and model backends
(no QEMU): areas as zero-copy buffers (NumPy), coherence operations with
the model backend's non-coherent semantics, the atomics across processes,
host id and count, and the errors on a closed pod or a bad offset.

Run by meson test (tests/unit/meson.build) with PYTHONPATH=python and
CXLPOD_LIBRARY=the built libcxlpod.so.0.  NumPy (python3-numpy, installed
by scripts/deps.sh) is required: the zero-copy check is the point.
"""

import errno
import gc
import multiprocessing
import os
import tempfile
import unittest

import numpy as np

import cxlpod

MiB = 1 << 20


class Loopback(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="cxlpod-py-")
        self.file = os.path.join(self.dir.name, "pool")
        os.environ["CXLPOD_HOST_ID"] = "3"
        os.environ["CXLPOD_NHOSTS"] = "5"

    def tearDown(self):
        gc.collect()
        self.dir.cleanup()

    def spec(self, model=False):
        return "%s:1M:8M%s" % (self.file, ":nc" if model else "")

    def test_identity_and_sizes(self):
        with cxlpod.Pod(loopback=self.spec()) as pod:
            self.assertEqual(pod.backend, "loopback")
            self.assertEqual((pod.host_id, pod.host_count), (3, 5))
            self.assertEqual((pod.size, pod.coherent_size), (8 * MiB, 1 * MiB))
            self.assertEqual(len(pod.coherent), 1 * MiB)
            self.assertEqual(len(pod.noncoherent), 7 * MiB)
            self.assertEqual(pod.info()["dax"], self.file)
            self.assertIn(pod.method, ("doorbell", "native"))

    def test_numpy_views_share_the_mapping(self):
        with cxlpod.Pod(loopback=self.spec()) as pod:
            a = np.frombuffer(pod.noncoherent, dtype=np.uint64)
            self.assertFalse(a.flags.owndata)
            self.assertTrue(a.flags.writeable)
            a[:4] = [11, 22, 33, 44]
            # the same bytes through another view, and in the file itself
            b = np.frombuffer(pod.view(pod.coherent_size, 32), dtype=np.uint64)
            self.assertEqual(b.tolist(), [11, 22, 33, 44])
            self.assertEqual(pod.offset_of(a[2:]), pod.coherent_size + 16)
            del a, b
        with open(self.file, "rb") as f:
            f.seek(1 * MiB)
            self.assertEqual(np.frombuffer(f.read(32), dtype=np.uint64).tolist(),
                             [11, 22, 33, 44])

    def test_model_backend_needs_writeback_and_invalidate(self):
        # two handles: each has its own image of the non-coherent area
        w = cxlpod.Pod(loopback=self.spec(model=True))
        r = cxlpod.Pod(loopback=self.spec(model=True))
        self.assertEqual(w.backend, "model")
        off = w.coherent_size + 4096
        wa = np.frombuffer(w.view(off, 64), dtype=np.uint64)
        ra = np.frombuffer(r.view(off, 64), dtype=np.uint64)
        r.invalidate(off, 64)
        wa[:] = 7
        w.writeback(off, 64)        # not yet invalidated by the reader:
        w.fence()
        self.assertEqual(ra.tolist(), [0] * 8, "the reader saw a store "
                         "before invalidating (not a model backend?)")
        r.invalidate(ra)            # a buffer works as well as an offset
        self.assertEqual(ra.tolist(), [7] * 8)
        # without the writer's writeback, an invalidate shows nothing new
        wa[:] = 9
        r.invalidate(off, 64)
        self.assertEqual(ra.tolist(), [7] * 8)
        w.flush(wa)
        r.invalidate(off, 64)
        self.assertEqual(ra.tolist(), [9] * 8)
        # the coherent window needs nothing
        w.atomic_store(64, 5)
        self.assertEqual(r.atomic_load(64), 5)
        self.assertEqual(w.stats()["lib_writeback"], 1)
        del wa, ra
        w.close()
        r.close()

    def test_atomics(self):
        with cxlpod.Pod(loopback=self.spec()) as pod:
            pod.atomic_store(0, 40)
            self.assertEqual(pod.fetch_add(0, 2), 40)
            self.assertEqual(pod.fetch_add(0, -1), 42)     # subtracts
            self.assertEqual(pod.atomic_load(0), 41)
            self.assertEqual(pod.exchange(0, 100), 41)
            self.assertEqual(pod.cas(0, 99, 1), (False, 100))
            self.assertEqual(pod.cas(0, 100, 1), (True, 100))
            self.assertEqual(pod.atomic_load(0), 1)
            with self.assertRaises(cxlpod.Error) as e:
                pod.fetch_add(4, 1)                      # misaligned
            self.assertEqual(e.exception.errno, errno.EINVAL)
            with self.assertRaises(cxlpod.Error) as e:
                pod.fetch_add(pod.coherent_size, 1)      # not coherent
            self.assertEqual(e.exception.errno, errno.EINVAL)
            self.assertIn("coherent", str(e.exception))

    def test_atomics_across_processes(self):
        spec, n, k = self.spec(), 4, 2000
        with cxlpod.Pod(loopback=spec) as pod:
            pod.atomic_store(128, 0)
        ctx = multiprocessing.get_context("fork")
        ps = [ctx.Process(target=_adder, args=(spec, k)) for _ in range(n)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(60)
            self.assertEqual(p.exitcode, 0)
        with cxlpod.Pod(loopback=spec) as pod:
            self.assertEqual(pod.atomic_load(128), n * k)

    def test_out_of_range(self):
        with cxlpod.Pod(loopback=self.spec()) as pod:
            for call in (lambda: pod.writeback(pod.size - 64, 128),
                         lambda: pod.invalidate(-64, 64),
                         lambda: pod.view(pod.size, 1),
                         lambda: pod.atomic_load(pod.size)):
                with self.assertRaises(cxlpod.Error) as e:
                    call()
                self.assertEqual(e.exception.errno, errno.EINVAL)
                self.assertIn("outside the pool", str(e.exception))
            with self.assertRaises(cxlpod.Error):
                pod.writeback(bytearray(64))    # not in the mapping
            with self.assertRaises(TypeError):
                pod.writeback(0)                # an offset needs a length

    def test_closed_pod(self):
        pod = cxlpod.Pod(loopback=self.spec())
        pod.close()
        self.assertTrue(pod.closed)
        for call in (lambda: pod.host_id, lambda: pod.coherent,
                     lambda: pod.writeback(pod.coherent_size, 64),
                     pod.fence, lambda: pod.fetch_add(0, 1)):
            with self.assertRaises(cxlpod.Error) as e:
                call()
            self.assertEqual(e.exception.errno, errno.EBADF)
            self.assertIn("closed", str(e.exception))
        pod.close()     # twice is fine

    def test_buffers_outlive_the_pod(self):
        pod = cxlpod.Pod(loopback=self.spec())
        a = np.frombuffer(pod.coherent, dtype=np.uint64)
        pod.close()
        a[1] = 5        # still mapped: the library unmaps after the last view
        self.assertEqual(int(a[1]), 5)
        del a
        gc.collect()

    def test_bad_loopback_spec(self):
        with self.assertRaises(cxlpod.Error) as e:
            cxlpod.Pod(loopback=self.file + ":1M:8M:bogus")
        self.assertEqual(e.exception.errno, errno.EINVAL)
        self.assertIn("nc or coherent", str(e.exception))

    def test_launch_result_parsing(self):
        # the wrapper's reading of a launcher run, with a stand-in launcher
        fake = os.path.join(self.dir.name, "fake-launch")
        wd = os.path.join(self.dir.name, "wd")
        os.mkdir(wd)
        with open(os.path.join(wd, "host1.out"), "w") as f:
            f.write("hello from 1\n")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nprintf "%%s\\n" "$@" >"%s/argv"\necho "[host0] x"\n'
                    'echo \'{"workdir":"%s","hosts":2,"results":[{"host":0,'
                    '"rc":0},{"host":1,"rc":3}],"ok":false,"exit":1}\'\n'
                    'exit 1\n' % (self.dir.name, wd))
        os.chmod(fake, 0o755)
        r = cxlpod.launch("echo hi", hosts=2, userland="host", timeout=60,
                          args=["--mem", "768M"], launcher=fake)
        self.assertFalse(r.ok)
        self.assertEqual(r.returncode, 1)
        self.assertEqual([x["rc"] for x in r.results], [0, 3])
        self.assertEqual(r.output(1), "hello from 1\n")
        with open(os.path.join(self.dir.name, "argv")) as f:
            self.assertEqual(f.read().split(), ["-n", "2", "--json", "-q",
                             "--userland", "host", "--timeout", "60", "--mem",
                             "768M", "--", "echo", "hi"])
        with self.assertRaises(cxlpod.Error):
            cxlpod.launch("true", launcher=fake, check=True)


def _adder(spec, k):
    with cxlpod.Pod(loopback=spec) as pod:
        for _ in range(k):
            pod.fetch_add(128, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)

# SPDX-License-Identifier: MIT
# PyOpenCL as an application sees it: arrays, generated kernels, reductions,
# scans, random numbers, profiling, buffers, maps and images, on the
# platform named by CMX_COMPAT_PLATFORM (a substring of its name).
#
# Run natively and through clmux by tools/compat-pyopencl.sh, which compares
# the two; by hand:
#   CMX_COMPAT_PLATFORM=clmux python3 -m unittest -v tools/tests/compat_pyopencl.py
# Image tests skip when the device reports no image support: clmux does not
# forward images yet (issue 3) and says so in CL_DEVICE_IMAGE_SUPPORT.
import os
import unittest

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.clmath as clmath
import pyopencl.clrandom as clrandom
from pyopencl.elementwise import ElementwiseKernel
from pyopencl.reduction import ReductionKernel
from pyopencl.scan import GenericScanKernel, InclusiveScanKernel

N = 100_003  # not a multiple of any work-group size


def pick_device():
    want = os.environ.get("CMX_COMPAT_PLATFORM", "")
    for p in cl.get_platforms():
        if want.lower() in p.name.lower():
            return p.get_devices()[0]
    raise unittest.SkipTest(f"no platform named like {want!r}")


class Compat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dev = pick_device()
        cls.ctx = cl.Context([cls.dev])
        cls.q = cl.CommandQueue(cls.ctx)
        cls.rng = np.random.default_rng(3)

    def rand(self, n=N, dtype=np.float32):
        return self.rng.random(n).astype(dtype)

    # pyopencl.array
    def test_array_arithmetic(self):
        a, b = self.rand(), self.rand()
        da, db = cla.to_device(self.q, a), cla.to_device(self.q, b)
        np.testing.assert_allclose((2 * da + db * db - 1).get(), 2 * a + b * b - 1, rtol=1e-5)
        np.testing.assert_allclose((da / (db + 1)).get(), a / (b + 1), rtol=1e-5)

    def test_array_math_and_reductions(self):
        a = self.rand()
        da = cla.to_device(self.q, a)
        np.testing.assert_allclose(clmath.sqrt(da).get(), np.sqrt(a), rtol=1e-5)
        self.assertAlmostEqual(cla.sum(da).get() / a.sum(), 1.0, places=4)
        self.assertEqual(cla.max(da).get(), a.max())
        self.assertAlmostEqual(cla.dot(da, da).get() / np.dot(a, a), 1.0, places=4)

    def test_array_indexing_and_copy(self):
        a = np.arange(N, dtype=np.int32)
        da = cla.to_device(self.q, a)
        np.testing.assert_array_equal(da[10:2000].get(), a[10:2000])
        db = da.copy()
        db.fill(7)
        self.assertEqual(int(db.get().sum()), 7 * N)
        np.testing.assert_array_equal(da.get(), a)

    def test_array_int64_and_float64(self):
        if "cl_khr_fp64" not in self.dev.extensions:
            self.skipTest("no cl_khr_fp64")
        a = self.rand(dtype=np.float64)
        da = cla.to_device(self.q, a)
        np.testing.assert_allclose((da * da).get(), a * a)
        i = np.arange(N, dtype=np.int64) << 33
        np.testing.assert_array_equal((cla.to_device(self.q, i) + 1).get(), i + 1)

    # Generated kernels
    def test_elementwise_kernel(self):
        k = ElementwiseKernel(self.ctx, "float a, float *x, float *y, float *z",
                              "z[i] = a * x[i] + y[i]", "axpy")
        x, y = self.rand(), self.rand()
        dx, dy = cla.to_device(self.q, x), cla.to_device(self.q, y)
        dz = cla.empty_like(dx)
        k(np.float32(3), dx, dy, dz)
        np.testing.assert_allclose(dz.get(), 3 * x + y, rtol=1e-5)

    def test_reduction_kernel(self):
        k = ReductionKernel(self.ctx, np.float32, neutral="0", reduce_expr="a+b",
                            map_expr="x[i]*y[i]", arguments="__global float *x, __global float *y")
        x, y = self.rand(), self.rand()
        got = k(cla.to_device(self.q, x), cla.to_device(self.q, y)).get()
        self.assertAlmostEqual(float(got) / float(np.dot(x, y)), 1.0, places=4)

    def test_inclusive_scan(self):
        a = self.rng.integers(0, 100, N).astype(np.int32)
        da = cla.to_device(self.q, a)
        InclusiveScanKernel(self.ctx, np.int32, "a+b", neutral="0")(da)
        np.testing.assert_array_equal(da.get(), np.cumsum(a))

    def test_generic_scan_compaction(self):
        a = self.rng.integers(0, 1000, N).astype(np.int32)
        da = cla.to_device(self.q, a)
        out = cla.empty_like(da)
        count = cla.empty(self.q, 1, np.int32)
        k = GenericScanKernel(
            self.ctx, np.int32, arguments="__global int *a, __global int *out, __global int *count",
            input_expr="(a[i] % 2 == 0) ? 1 : 0", scan_expr="a+b", neutral="0",
            output_statement="""
                if (prev_item != item) out[item - 1] = a[i];
                if (i + 1 == N) *count = item;
            """)
        k(da, out, count)
        n = int(count.get()[0])
        np.testing.assert_array_equal(out.get()[:n], a[a % 2 == 0])

    # Random numbers
    def test_clrandom(self):
        gen = clrandom.PhiloxGenerator(self.ctx, seed=12)
        u = gen.uniform(self.q, N, np.float32).get()
        self.assertTrue(((u >= 0) & (u < 1)).all())
        self.assertAlmostEqual(float(u.mean()), 0.5, delta=0.01)
        g = clrandom.rand(self.q, (1000,), np.float32).get()
        self.assertTrue(((g >= 0) & (g < 1)).all())
        # Same seed, same numbers: the stream is the device's, not the transport's.
        again = clrandom.PhiloxGenerator(self.ctx, seed=12).uniform(self.q, N, np.float32).get()
        np.testing.assert_array_equal(u, again)

    # Profiling
    def test_profiling(self):
        q = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        prg = cl.Program(self.ctx, """
            __kernel void spin(__global float *x) {
                int i = get_global_id(0); float v = x[i];
                for (int k = 0; k < 200; k++) v = v * 0.999f + 0.001f;
                x[i] = v;
            }""").build()
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=self.rand())
        ev = prg.spin(q, (N,), None, buf)
        ev.wait()
        p = ev.profile
        self.assertGreater(p.start, 0)
        self.assertLessEqual(p.queued, p.submit)
        self.assertLessEqual(p.submit, p.start)
        self.assertLess(p.start, p.end)
        self.assertEqual(ev.command_execution_status, cl.command_execution_status.COMPLETE)

    # Buffers, copies, maps
    def test_enqueue_copy_round_trip(self):
        a = self.rand()
        half = N // 2
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, a.nbytes)
        buf2 = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, a.nbytes)
        cl.enqueue_copy(self.q, buf, a)
        cl.enqueue_copy(self.q, buf2, buf, byte_count=half * 4, src_offset=(N - half) * 4)
        out = np.zeros(half, np.float32)
        cl.enqueue_copy(self.q, out, buf2, is_blocking=True)
        np.testing.assert_array_equal(out, a[N - half:])

    def test_enqueue_copy_nonblocking_and_rect(self):
        a = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
        out = np.zeros_like(a)
        ev = cl.enqueue_copy(self.q, out, buf, is_blocking=False)
        ev.wait()
        np.testing.assert_array_equal(out, a)
        sub = np.zeros((8, 16), np.int32)
        cl.enqueue_copy(self.q, sub, buf, buffer_origin=(4 * 4, 2), host_origin=(0, 0),
                        region=(16 * 4, 8), buffer_pitches=(64 * 4,), host_pitches=(16 * 4,))
        np.testing.assert_array_equal(sub, a[2:10, 4:20])

    def test_fill_buffer(self):
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, 4096)
        cl.enqueue_fill_buffer(self.q, buf, np.uint32(0xdeadbeef), 0, 4096)
        out = np.zeros(1024, np.uint32)
        cl.enqueue_copy(self.q, out, buf)
        self.assertTrue((out == 0xdeadbeef).all())

    def test_map_buffer(self):
        a = self.rand(4096)
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
        m, ev = cl.enqueue_map_buffer(self.q, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                      0, a.shape, a.dtype)
        np.testing.assert_array_equal(m, a)
        m[:] = 5
        m.base.release(self.q)
        out = np.zeros_like(a)
        cl.enqueue_copy(self.q, out, buf)
        self.assertTrue((out == 5).all())

    def test_use_host_ptr(self):
        a = self.rand(4096)
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR, hostbuf=a)
        out = np.zeros_like(a)
        cl.enqueue_copy(self.q, out, buf)
        np.testing.assert_array_equal(out, a)

    # Program and kernel objects, the way PyOpenCL queries them
    def test_program_and_kernel_info(self):
        prg = cl.Program(self.ctx, "__kernel void k(__global int *x, int v) { x[get_global_id(0)] = v; }").build()
        self.assertEqual(prg.get_info(cl.program_info.NUM_DEVICES), 1)
        self.assertIn("k", prg.get_info(cl.program_info.KERNEL_NAMES))
        k = prg.k
        self.assertEqual(k.num_args, 2)
        self.assertGreater(k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.dev), 0)
        self.assertEqual(prg.get_build_info(self.dev, cl.program_build_info.STATUS),
                         0)  # CL_BUILD_SUCCESS
        binaries = prg.get_info(cl.program_info.BINARIES)
        self.assertEqual(len(binaries), 1)
        self.assertGreater(len(binaries[0]), 0)

    def test_build_error_reported(self):
        with self.assertRaises(cl.RuntimeError):
            cl.Program(self.ctx, "__kernel void k(__global int *x) { x[0] = nope; }").build()

    def test_out_of_order_queue_and_markers(self):
        if not self.dev.queue_properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
            self.skipTest("no out-of-order queues")
        q = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        a = self.rand()
        da = cla.to_device(q, a)
        ev = cl.enqueue_marker(q, wait_for=[da.events[-1]] if da.events else None)
        ev.wait()
        np.testing.assert_array_equal(da.get(queue=q), a)

    # Images: not forwarded by clmux yet (issue 3), reported as absent.
    def need_images(self):
        if not self.dev.image_support:
            self.skipTest("device reports no image support (clmux: images planned in issue 3)")

    def test_image_round_trip(self):
        self.need_images()
        a = self.rand(64 * 32).reshape(32, 64)
        fmt = cl.ImageFormat(cl.channel_order.R, cl.channel_type.FLOAT)
        img = cl.Image(self.ctx, cl.mem_flags.READ_WRITE, fmt, shape=(64, 32))
        cl.enqueue_copy(self.q, img, a, origin=(0, 0), region=(64, 32))
        out = np.zeros_like(a)
        cl.enqueue_copy(self.q, out, img, origin=(0, 0), region=(64, 32))
        np.testing.assert_array_equal(out, a)

    def test_image_sampler_kernel(self):
        self.need_images()
        a = self.rand(16 * 16).reshape(16, 16)
        fmt = cl.ImageFormat(cl.channel_order.R, cl.channel_type.FLOAT)
        img = cl.Image(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, fmt,
                       shape=(16, 16), hostbuf=a)
        prg = cl.Program(self.ctx, """
            __kernel void rd(read_only image2d_t im, sampler_t s, __global float *o) {
                int x = get_global_id(0), y = get_global_id(1);
                o[y * 16 + x] = read_imagef(im, s, (int2)(x, y)).x;
            }""").build()
        smp = cl.Sampler(self.ctx, False, cl.addressing_mode.CLAMP, cl.filter_mode.NEAREST)
        out = cla.empty(self.q, 256, np.float32)
        prg.rd(self.q, (16, 16), None, img, smp, out.data)
        np.testing.assert_array_equal(out.get().reshape(16, 16), a)


class Recorder(unittest.TextTestResult):
    """Also writes one "test status [reason]" line per test to the file named
    by CMX_COMPAT_RESULTS, for tools/compat-pyopencl.sh to compare."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.lines = []

    def _note(self, test, status, why=""):
        name = getattr(test, "_testMethodName", str(test)).replace(" ", "_")
        self.lines.append(f"{name} {status} {why}".rstrip())

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "fail")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "skip", reason)

    def stopTestRun(self):
        super().stopTestRun()
        path = os.environ.get("CMX_COMPAT_RESULTS")
        if path:
            with open(path, "w") as f:
                f.write("".join(line + "\n" for line in self.lines))


if __name__ == "__main__":
    unittest.main(verbosity=2, testRunner=unittest.TextTestRunner(resultclass=Recorder, verbosity=2))

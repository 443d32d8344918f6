"""The binding on hostile input (issue 13): Python values that a C field cannot
hold exactly, NUL characters, file errors, atomic saves and the struct-size
check at import."""
import ctypes
import os
import resource
import signal
import tempfile
import unittest

import remat
from remat import _lib


def small_chain():
    stages = [{"name": "s1", "fwd_time": 1, "bwd_time": 2, "out_bytes": 10, "saved_bytes": 40},
              {"name": "s2", "fwd_time": 2, "bwd_time": 2, "out_bytes": 20, "saved_bytes": 50},
              {"name": "loss", "fwd_time": 1, "bwd_time": 1, "out_bytes": 4, "saved_bytes": 4}]
    return remat.Chain(stages, 8, name="small")


class FileSizeLimit:
    """Writes past `limit` bytes fail (EFBIG), as on a full disk."""

    def __init__(self, limit):
        self.limit = limit

    def __enter__(self):
        self.saved = resource.getrlimit(resource.RLIMIT_FSIZE)
        self.handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit, self.saved[1]))

    def __exit__(self, *exc):
        resource.setrlimit(resource.RLIMIT_FSIZE, self.saved)
        signal.signal(signal.SIGXFSZ, self.handler)


class IntegerFields(unittest.TestCase):
    def test_out_of_the_c_range_is_an_input_error(self):
        c = small_chain()
        for kw in ({"slots": 2 ** 64}, {"slots": 2 ** 63}, {"slots": -(2 ** 63) - 1},
                   {"threads": -1}, {"threads": 2 ** 32}, {"segments": -1},
                   {"segments": 2 ** 32}):
            with self.subTest(kw=kw), self.assertRaises(remat.InputError):
                remat.solve(c, 1000, **kw)

    def test_in_range_but_not_allowed_is_libremat_s_input_error(self):
        c = small_chain()
        for kw in ({"slots": 2 ** 40}, {"slots": -2}, {"threads": 5000}):
            with self.subTest(kw=kw), self.assertRaises(remat.InputError):
                remat.solve(c, 1000, **kw)
        self.assertTrue(remat.simulate(c, remat.solve(c, 1000, slots=0, threads=2)).valid)

    def test_wrong_types_are_type_errors(self):
        c = small_chain()
        for kw in ({"slots": "3"}, {"slots": 3.0}, {"slots": True}, {"threads": 1.5},
                   {"segments": [2]}, {"algorithm": 5}, {"memory": [1000]},
                   {"memory": None, "algorithm": b"optimal"}):
            args = {"memory": 1000}
            args.update(kw)
            with self.subTest(kw=kw), self.assertRaises(TypeError):
                remat.solve(c, **args)
        with self.assertRaises(TypeError):
            remat.simulate(c, remat.solve(c, 1000), bandwidth="fast")
        with self.assertRaises(TypeError):
            remat.simulate("chain.json", remat.solve(c, 1000))
        with self.assertRaises(TypeError):
            remat.parse_size(object())
        with self.assertRaises(TypeError):
            remat.Chain(c.stages, "8")
        with self.assertRaises(remat.InputError):
            remat.parse_size(1.5)
        with self.assertRaises(remat.InputError):
            remat.simulate(c, remat.solve(c, 1000), bandwidth=float("nan"))


class Nul(unittest.TestCase):
    def test_a_nul_is_refused_not_truncated(self):
        c = small_chain()
        with self.assertRaises(remat.InputError):
            remat.Schedule.from_ops(["Fall 1\0junk"])
        with self.assertRaises(remat.InputError):
            remat.solve(c, 1000, algorithm="optimal\0x")
        with self.assertRaises(remat.InputError):
            remat.parse_size("4GiB\0x")
        with self.assertRaises(remat.InputError):
            remat.Chain(c.stages, 8, name="a\0b")
        stages = c.stages
        stages[0]["name"] = "s\0one"
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain(stages, 8)
        self.assertIn("stages[0].name", str(cm.exception))
        with self.assertRaises(remat.InputError):
            remat.Chain.load("chain\0.json")
        doc = c.to_json().replace('"small"', '"sm\\u0000all"')
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain.from_json(doc)
        self.assertIn("NUL", str(cm.exception))


class Files(unittest.TestCase):
    def test_file_errors_are_remat_io_errors(self):
        with tempfile.TemporaryDirectory() as d:
            for load in (remat.Chain.load, remat.Schedule.load):
                with self.subTest(load=load):
                    with self.assertRaises(remat.RematIOError):
                        load(os.path.join(d, "missing.json"))
                    with self.assertRaises(remat.RematIOError):
                        load(d)  # a directory
            with self.assertRaises(remat.RematIOError):
                small_chain().save(os.path.join(d, "no", "such", "dir.json"))
            with self.assertRaises(remat.RematIOError):
                small_chain().save(d)
            bad = os.path.join(d, "latin1.json")
            with open(bad, "wb") as f:
                f.write(b'{"format": "remat-chain-1", "name": "\xe9"}')
            with self.assertRaises(remat.InputError):
                remat.Chain.load(bad)

    def test_reading_a_device_stops_at_the_cap(self):
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain.load("/dev/zero")
        self.assertIn("more than the limit", str(cm.exception))

    def test_save_is_atomic(self):
        c = small_chain()
        s = remat.solve(c, 1000)
        with tempfile.TemporaryDirectory() as d:
            for obj in (c, s):
                path = os.path.join(d, "out.json")
                with open(path, "w") as f:
                    f.write("old contents\n")
                with self.subTest(obj=obj):
                    with FileSizeLimit(100), self.assertRaises(remat.RematIOError):
                        obj.save(path)
                    with open(path) as f:
                        self.assertEqual(f.read(), "old contents\n")
                    self.assertEqual(os.listdir(d), ["out.json"])
                    obj.save(path)  # without the limit
                    self.assertEqual(type(obj).load(path).to_json(), obj.to_json())


class Policy(unittest.TestCase):
    def test_the_minimum_comes_from_libremat_for_every_algorithm(self):
        c = small_chain()
        for alg in ("optimal", "revolve", "sequential", "store-all", "exact"):
            with self.subTest(alg=alg), self.assertRaises(remat.InfeasibleError) as cm:
                remat.solve(c, 1, algorithm=alg)  # below the input itself
            self.assertGreater(cm.exception.min_memory, 0)
            remat.solve(c, cm.exception.min_memory, algorithm=alg)

    def test_the_binding_has_no_min_memory_policy(self):
        src = open(remat.__file__).read()
        self.assertNotIn("_min_from_solver", src)
        self.assertNotIn("st == 2", src)


class StructSizes(unittest.TestCase):
    def test_every_struct_matches_the_library(self):
        for cls in _lib.STRUCTS:
            self.assertEqual(_lib.lib.remat_sizeof(cls._c_name.encode()), ctypes.sizeof(cls),
                             cls._c_name)

    def test_a_mismatch_is_refused(self):
        class Grown(ctypes.Structure):
            _c_name = "remat_solve_options"
            _fields_ = _lib.SolveOptions._fields_ + [("progress", ctypes.c_void_p)]

        with self.assertRaises(ImportError) as cm:
            _lib.check_struct_sizes(_lib.lib, (Grown,))
        self.assertIn("remat_solve_options", str(cm.exception))


if __name__ == "__main__":
    unittest.main()

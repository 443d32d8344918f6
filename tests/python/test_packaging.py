"""How the package finds its parts, and what `pip install` gives.

In the build tree (make test) the binding uses REMAT_LIB and build/remat. In
`make test-installed` (REMAT_EXPECT_INSTALLED=1) the same tests run against
the wheel installed in a throwaway venv, with no PYTHONPATH and no REMAT_LIB:
then the library and the C tool must come from inside the installed package.
"""
import importlib.metadata
import os
import subprocess
import sys
import unittest

import remat
import remat._lib
import remat.cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "examples", "tiny.json")
INSTALLED = os.environ.get("REMAT_EXPECT_INSTALLED") == "1"


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


class EntryPointTest(unittest.TestCase):
    def test_commands_other_than_plot_are_the_c_tool(self):
        tool = remat.cli.cli_binary()
        cases = [(["info", TINY], 0), (["curve", TINY, "--format", "json"], 0),
                 (["solve", TINY, "--memory", "1"], 1), (["frobnicate"], 2),
                 (["info"], 2), (["version"], 0)]
        for args, code in cases:
            py = run([sys.executable, "-m", "remat"] + args)
            c = run([tool] + args)
            self.assertEqual((py.returncode, py.stdout, py.stderr),
                             (c.returncode, c.stdout, c.stderr), args)
            self.assertEqual(py.returncode, code, args)
        self.assertEqual(run([sys.executable, "-m", "remat", "version"]).stdout,
                         "remat %s\n" % remat.__version__)

    def test_help_adds_plot_to_the_c_usage(self):
        r = run([sys.executable, "-m", "remat", "--help"])
        self.assertEqual(r.returncode, 0)
        lines = r.stdout.splitlines()
        names = [line.split()[0] for line in lines if line.startswith("  ")]
        self.assertEqual(names, ["solve", "simulate", "curve", "info", "join", "plot", "version"])
        r = run([sys.executable, "-m", "remat"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("  plot curve|timeline|join", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_a_missing_tool_is_one_line(self):
        env = dict(os.environ, REMAT_CLI=os.path.join(ROOT, "no", "such", "remat"))
        r = subprocess.run([sys.executable, "-m", "remat", "info", TINY], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1)
        self.assertIn("cannot find the command-line tool", r.stderr)


class LocationTest(unittest.TestCase):
    def test_library_comes_from_the_package_or_the_build_tree(self):
        loaded = os.path.realpath(remat._lib.lib._name)
        if not INSTALLED:
            self.assertEqual(loaded, os.path.realpath(os.environ["REMAT_LIB"]))
            return
        for var in ("PYTHONPATH", "REMAT_LIB", "REMAT_CLI"):
            self.assertNotIn(var, os.environ)
        pkg = os.path.dirname(os.path.realpath(remat.__file__))
        self.assertTrue(pkg.startswith(os.path.realpath(sys.prefix) + os.sep), pkg)
        self.assertEqual(loaded, os.path.join(pkg, "libremat.so"))
        self.assertEqual(os.path.realpath(remat.cli.cli_binary()),
                         os.path.join(pkg, "bin", "remat"))
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")))


@unittest.skipUnless(INSTALLED, "only for the installed wheel (make test-installed)")
class InstalledTest(unittest.TestCase):
    def test_console_script_on_the_venv_path(self):
        script = os.path.join(sys.prefix, "bin", "remat")
        r = run([script, "version"])
        self.assertEqual((r.returncode, r.stdout), (0, "remat %s\n" % remat.__version__))
        r = run([script, "info", TINY])
        self.assertEqual(r.returncode, 0)
        self.assertIn("store-all peak:      171 bytes", r.stdout)

    def test_metadata(self):
        dist = importlib.metadata.distribution("remat")
        self.assertEqual(dist.version, remat.__version__)
        wheel = dist.read_text("WHEEL") or ""
        tags = [line.split(": ", 1)[1] for line in wheel.splitlines()
                if line.startswith("Tag: ")]
        self.assertEqual(len(tags), 1)
        self.assertTrue(tags[0].startswith("py3-none-linux_"), tags)
        requires = dist.requires or []
        # nothing is required without an extra; torch only through remat[torch]
        self.assertEqual([r for r in requires if "extra ==" not in r], [])
        torch = [r for r in requires if r.startswith("torch")]
        self.assertEqual(len(torch), 1)
        self.assertIn('extra == "torch"', torch[0])
        scripts = [e for e in dist.entry_points if e.group == "console_scripts"]
        self.assertEqual([(e.name, e.value) for e in scripts], [("remat", "remat.cli:main")])


class PyprojectTest(unittest.TestCase):
    @unittest.skipIf(sys.version_info < (3, 11), "tomllib is new in 3.11")
    def test_no_torch_dependency_and_the_torch_extra_admits_2_13(self):
        import tomllib
        try:
            from packaging.requirements import Requirement
        except ImportError:  # pragma: no cover - comes with scikit-build-core
            self.skipTest("packaging is not installed")
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(project["dependencies"], [])
        extras = project["optional-dependencies"]
        (torch,) = [Requirement(r) for r in extras["torch"]]
        self.assertEqual(torch.name, "torch")
        self.assertIn("2.13.0", torch.specifier)
        self.assertNotIn("torch", " ".join(extras["plot"]))


if __name__ == "__main__":
    unittest.main()

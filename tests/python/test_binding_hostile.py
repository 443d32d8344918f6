"""The binding on the hostile inputs of issue 23 (cause 9): text that is not
valid Unicode is an InputError, never a UnicodeEncodeError; a value of the
wrong Python type is a TypeError (CHANGELOG 0.2.0), wherever it sits, stage
dicts included."""
import os
import tempfile
import unittest

import remat


def stages(**override):
    out = [{"name": "s1", "fwd_time": 1, "bwd_time": 2, "out_bytes": 10, "saved_bytes": 40},
           {"name": "loss", "fwd_time": 1, "bwd_time": 1, "out_bytes": 4, "saved_bytes": 4}]
    out[0].update(override)
    return out


class LoneSurrogates(unittest.TestCase):
    def test_parse_size(self):
        with self.assertRaises(remat.InputError) as cm:
            remat.parse_size("1\ud800")
        self.assertIn("not valid Unicode", str(cm.exception))

    def test_every_text_that_goes_to_c(self):
        c = remat.Chain(stages(), 8)
        cases = [lambda: remat.Chain(stages(), 8, name="a\udc80"),
                 lambda: remat.Chain(stages(name="s\ud800"), 8),
                 lambda: remat.Chain(stages(), 8, time_unit="\udfff"),
                 lambda: remat.Chain.from_json('{"format": "remat-chain-1", "name": "\ud800"}'),
                 lambda: remat.Schedule.from_json('{"ops": ["\ud800"]}'),
                 lambda: remat.Schedule.from_ops(["Fall 1\ud800"]),
                 lambda: remat.solve(c, 1000, algorithm="optimal\ud800"),
                 lambda: remat.Chain.load("chain\ud800.json"),
                 lambda: remat.join_curve({"format": "remat-join-1", "x": "\ud800"})]
        for k, f in enumerate(cases):
            with self.subTest(case=k), self.assertRaises(remat.InputError):
                f()


class StageTypes(unittest.TestCase):
    def test_a_string_or_bool_in_a_stage_is_a_type_error(self):
        for field in ("out_bytes", "saved_bytes", "grad_bytes", "fwd_overhead", "bwd_overhead",
                      "fwd_time", "bwd_time"):
            for value in ("10", True, None, [10], b"10"):
                with self.subTest(field=field, value=value), self.assertRaises(TypeError) as cm:
                    remat.Chain(stages(**{field: value}), 8)
                self.assertIn("stages[0].%s" % field, str(cm.exception))
        for value in (5, b"s1"):
            with self.subTest(name=value), self.assertRaises(TypeError):
                remat.Chain(stages(name=value), 8)
        with self.assertRaises(TypeError):
            remat.Chain(["not a stage"], 8)

    def test_wrong_values_are_still_input_errors(self):
        for kw in ({"out_bytes": -1}, {"out_bytes": 2.5}, {"out_bytes": 2 ** 53},
                   {"fwd_time": float("nan")}, {"fwd_time": float("inf")},
                   {"fwd_time": -1.0}):
            with self.subTest(kw=kw), self.assertRaises(remat.InputError):
                remat.Chain(stages(**kw), 8)

    def test_whole_floats_and_unknown_fields_pass(self):
        c = remat.Chain(stages(out_bytes=10.0, profile="anything"), 8)
        self.assertEqual(c.stages[0]["out_bytes"], 10)

    def test_bandwidth_type(self):
        c = remat.Chain(stages(), 8)
        for bw in (True, [1], object()):
            with self.subTest(bw=bw), self.assertRaises(TypeError):
                remat.solve(c, 1000, algorithm="pofo", bandwidth=bw)


class HostileValues(unittest.TestCase):
    """Causes 3, 7 and invalid UTF-8 as the binding sees them: the C checks
    surface as InputError naming the field."""

    def test_times_whose_sums_overflow(self):
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain([{"fwd_time": 4e307, "bwd_time": 0, "out_bytes": 1, "saved_bytes": 1}] * 4,
                        1)
        self.assertIn("stages: the times (fwd_time + bwd_time) add up to", str(cm.exception))

    def test_long_names_are_refused_not_cut(self):
        with self.assertRaises(remat.InputError):
            remat.Chain(stages(), 8, name="x" * 10000)
        with self.assertRaises(remat.InputError):
            remat.Schedule.from_ops(["Fall 1"], algorithm="a" * 40)
        self.assertEqual(remat.Chain(stages(), 8, name="x" * 255).name, "x" * 255)

    def test_a_name_that_is_not_utf8(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            with open(path, "wb") as f:
                f.write(b'{"format": "remat-chain-1", "name": "caf\xe9", "input_bytes": 1, '
                        b'"stages": [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, '
                        b'"saved_bytes": 1}]}')
            with self.assertRaises(remat.InputError):
                remat.Chain.load(path)

    def test_non_ascii_names_round_trip(self):
        c = remat.Chain(stages(name="Schicht \u00e9\u4e2d\U0001f600"), 8, name="r\u00e9seau")
        back = remat.Chain.from_json(c.to_json())
        self.assertEqual(back.name, "r\u00e9seau")
        self.assertEqual(back.stages[0]["name"], "Schicht \u00e9\u4e2d\U0001f600")

    def test_store_all_cost_past_2_53(self):
        c = remat.Chain([{"fwd_time": 1, "bwd_time": 1, "out_bytes": 10, "saved_bytes": 10}] * 3,
                        2 ** 53 - 1)
        peak, _ = remat.store_all_cost(c)
        self.assertGreater(peak, 2 ** 53)
        with self.assertRaises(remat.InfeasibleError) as cm:
            remat.min_memory(c)
        self.assertGreaterEqual(cm.exception.min_memory, 2 ** 53)


if __name__ == "__main__":
    unittest.main()

"""The ctypes binding: chains, schedules, solve, simulate, plans and errors."""
import json
import os
import tempfile
import unittest

import remat


def small_chain(n=4, meta=None):
    stages = [{"name": "s%d" % i, "fwd_time": 1.0 + i, "bwd_time": 2.0, "out_bytes": 10 * i,
               "saved_bytes": 40 * i} for i in range(1, n)]
    stages.append({"name": "loss", "fwd_time": 0.5, "bwd_time": 0.5, "out_bytes": 4,
                   "saved_bytes": 4})
    return remat.Chain(stages, 8, name="small", meta=meta)


class BindingTest(unittest.TestCase):
    def test_chain_round_trip_keeps_meta(self):
        c = small_chain(meta={"profile": {"batch_size": 2, "device": "cpu"}})
        self.assertEqual(c.n, 4)
        self.assertEqual(c.stages[1]["saved_bytes"], 80)
        self.assertEqual(c.stages[1]["grad_bytes"], 20)  # default: out_bytes
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            c.save(path)
            doc = json.load(open(path))
            self.assertEqual(doc["format"], "remat-chain-1")
            self.assertEqual(doc["profile"]["batch_size"], 2)
            c2 = remat.Chain.load(path)
        self.assertEqual(c2.stages, c.stages)
        self.assertEqual(c2.meta["profile"]["device"], "cpu")

    def test_input_errors_name_the_field(self):
        bad = [{"name": "s", "fwd_time": 1, "bwd_time": 1, "out_bytes": 10, "saved_bytes": 5}]
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain(bad, 1)
        self.assertIn("saved_bytes", str(cm.exception))
        with self.assertRaises(remat.InputError):
            remat.Chain.from_json("{not json")
        with self.assertRaises(remat.RematIOError):
            remat.Chain.load("/nonexistent/chain.json")
        with self.assertRaises(remat.InputError):
            remat.Schedule.from_ops(["Fly 3"])

    def test_parse_size(self):
        self.assertEqual(remat.parse_size("4GiB"), 4 << 30)
        self.assertEqual(remat.parse_size("300MB"), 300 * 10 ** 6)
        self.assertEqual(remat.parse_size(123), 123)
        for bad in ("-1", "lots", -5, 1 << 60):
            with self.assertRaises(remat.InputError):
                remat.parse_size(bad)

    def test_solve_simulate_and_infeasible(self):
        c = small_chain()
        peak, t = remat.store_all_cost(c)
        s = remat.solve(c, peak, algorithm="store-all")
        self.assertEqual(s.ops[0], "Fall 1")
        self.assertEqual(len(s.ops), 2 * c.n)
        r = remat.simulate(c, s)
        self.assertTrue(r.valid)
        self.assertEqual(r.peak_bytes, peak)
        self.assertAlmostEqual(r.time, t)
        with self.assertRaises(remat.InfeasibleError) as cm:
            remat.solve(c, peak - 1, algorithm="store-all")
        self.assertEqual(cm.exception.min_memory, peak)
        self.assertIn(str(peak), str(cm.exception))

    def test_algorithms_from_the_library(self):
        names = remat.algorithms()
        self.assertEqual(names[0], "optimal")
        self.assertEqual(len(set(names)), len(names))
        self.assertEqual(remat.offload_algorithms(),
                         ("pofo", "offload-only", "opportunist", "autocapper"))
        c = small_chain()
        peak, _ = remat.store_all_cost(c)
        for name in names:  # each is a name solve() takes, offload ones with a link
            bw = 1e9 if name in remat.offload_algorithms() else None
            s = remat.solve(c, peak, algorithm=name, bandwidth=bw)
            self.assertEqual(s.algorithm, name)
            self.assertTrue(remat.simulate(c, s, bandwidth=bw or 0.0).valid)

    def test_simulate_reports_invalid(self):
        c = small_chain()
        s = remat.Schedule.from_ops(["Fall 2", "B 4"])
        r = remat.simulate(c, s)
        self.assertFalse(r.valid)
        self.assertEqual(r.failed_op, 0)
        self.assertIn("a[1]", r.reason)

    def test_plan_mirrors_semantics(self):
        c = small_chain(3)
        s = remat.Schedule.from_ops(["Fck 1", "Fn 2", "Fall 3", "B 3", "Fall 1", "Fall 2",
                                     "B 2", "B 1"])
        p = remat.plan(c, s)
        self.assertEqual(p.first_backward, 3)
        self.assertEqual(p.steps[1].frees, [("a", 1)])
        self.assertEqual(p.steps[1].creates, [("a", 2)])
        self.assertEqual(p.steps[6].reads, [("d", 2), ("abar", 2), ("abar", 1)])
        self.assertEqual(p.peak_bytes, remat.simulate(c, s).peak_bytes)
        with self.assertRaises(remat.InputError):
            remat.plan(c, remat.Schedule.from_ops(["Fall 1", "B 1"]))

    def test_schedule_json_round_trip(self):
        c = small_chain()
        s = remat.solve(c, "1GiB", algorithm="store-all")
        s2 = remat.Schedule.from_json(s.to_json())
        self.assertEqual(s2.ops, s.ops)
        self.assertEqual(s2.peak_bytes, s.peak_bytes)

    def test_partial_saves(self):
        stages = [{"name": "block", "fwd_time": 1, "bwd_time": 2, "out_bytes": 10,
                   "saved_bytes": 100, "fall_overhead": 3,
                   "options": [{"name": "matmuls", "saved_bytes": 40, "bwd_time": 5,
                                "bwd_overhead": 3},
                               {"saved_bytes": 20, "bwd_time": 6}]},
                  {"name": "loss", "fwd_time": 1, "bwd_time": 2, "out_bytes": 1,
                   "saved_bytes": 30}]
        c = remat.Chain(stages, 5)
        st = c.stages
        self.assertEqual(st[0]["fall_overhead"], 3)
        self.assertEqual(st[0]["options"][0], {"name": "matmuls", "saved_bytes": 40,
                                               "fall_overhead": 0, "bwd_time": 5.0,
                                               "bwd_overhead": 3})
        self.assertEqual(st[0]["options"][1]["name"], "")
        self.assertNotIn("fall_overhead", st[1])  # only where a stage has it
        self.assertNotIn("options", st[1])
        self.assertEqual(remat.Chain.from_json(c.to_json()).stages, st)
        # the stages given back build the same chain
        self.assertEqual(remat.Chain(st, 5).to_json(), c.to_json())
        s = remat.solve(c, 60, algorithm="exact")
        self.assertIn("Fall 1/2", s.ops)
        p = remat.plan(c, s)
        fall = next(x for x in p.steps if x.kind == "Fall" and x.index == 1)
        back = next(x for x in p.steps if x.kind == "B" and x.index == 1)
        self.assertEqual((fall.op, fall.option, back.option), ("Fall 1/2", 2, 2))
        self.assertEqual(remat.Schedule.from_json(s.to_json()).ops, s.ops)
        r = remat.simulate(c, remat.Schedule.from_ops(["Fall 1/3", "Fall 2", "B 2", "B 1"]))
        self.assertFalse(r.valid)
        self.assertIn("no option 3", r.reason)
        bad = [dict(stages[0], options=[{"saved_bytes": 1, "bwd_time": 1}]), stages[1]]
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain(bad, 5)
        self.assertIn("stages[0].options[0].saved_bytes", str(cm.exception))
        with self.assertRaises(remat.InputError):
            remat.Schedule.from_ops(["B 1/1"])

    def test_stopped_fall(self):
        """The stop fields pass through to C and back; a plan step says
        whether its Fall stops, with the stopped figures."""
        stages = [{"fwd_time": 4, "bwd_time": 2, "out_bytes": 20, "saved_bytes": 50,
                   "stop_time": 1.0, "stop_saved_bytes": 8, "stop_overhead": 30},
                  {"fwd_time": 3, "bwd_time": 3, "out_bytes": 5, "saved_bytes": 15},
                  {"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 2}]
        c = remat.Chain(stages, 10)
        st = c.stages
        self.assertEqual((st[0]["stop_time"], st[0]["stop_saved_bytes"], st[0]["stop_overhead"]),
                         (1.0, 8, 30))
        self.assertIsInstance(st[0]["stop_time"], float)
        self.assertNotIn("stop_time", st[1])  # only where a stage has it
        self.assertEqual(remat.Chain.from_json(c.to_json()).stages, st)
        self.assertEqual(remat.Chain(st, 10).to_json(), c.to_json())
        s = remat.Schedule.from_ops(["Fck 1", "Fck 2", "Fall 3", "B 3", "Fall 2", "B 2",
                                     "Fall 1", "B 1"])
        r = remat.simulate(c, s)
        self.assertTrue(r.valid)
        self.assertEqual((r.time, r.peak_bytes), (18.0, 70))
        p = remat.plan(c, s)
        self.assertEqual([x.stops for x in p.steps],
                         [False, False, False, False, True, False, True, False])
        self.assertEqual(p.steps[6].mem_during, 30 + 8 + 30)
        for bad, msg in (({"stop_time": 5}, "stages[0].stop_time: 5 is more than fwd_time 4"),
                         ({"stop_saved_bytes": 51}, "stages[0].stop_saved_bytes"),
                         ({"stop_overhead": -1}, "stages[0].stop_overhead")):
            with self.assertRaises(remat.InputError) as cm:
                remat.Chain([dict(stages[0], **bad)] + stages[1:], 10)
            self.assertIn(msg, str(cm.exception))
        with self.assertRaises(remat.InputError) as cm:
            remat.Chain(stages[:2] + [dict(stages[2], stop_time=0.5)], 10)
        self.assertIn("the loss stage (the last) has no stopped Fall", str(cm.exception))
        with self.assertRaises(TypeError):
            remat.Chain([dict(stages[0], stop_time="1")] + stages[1:], 10)


if __name__ == "__main__":
    unittest.main()


def small_join():
    """Branch 1: two stages; branch 2: one (tests/test_hjoin.c's hand network)."""
    b1 = [{"fwd_time": 1, "bwd_time": 2, "out_bytes": 2, "saved_bytes": 3},
          {"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 2}]
    b2 = [{"fwd_time": 2, "bwd_time": 2, "out_bytes": 3, "saved_bytes": 4}]
    return remat.JoinProblem(
        [{"name": "text", "input_bytes": 4, "input_grad_bytes": 0, "stages": b1},
         {"name": "image", "input_bytes": 3, "stages": b2}],
        {"fwd_time": 0.5, "bwd_time": 0.5, "saved_bytes": 1, "fwd_overhead": 2},
        name="hand", meta={"model": "two towers"})


class JoinBindingTest(unittest.TestCase):
    def test_problem_round_trip(self):
        j = small_join()
        self.assertEqual(j.k, 2)
        self.assertEqual(j.branches[1]["input_grad_bytes"], 3)  # default: input_bytes
        self.assertEqual(j.branches[0]["stages"][1]["grad_bytes"], 1)
        self.assertEqual(j.turn["saved_bytes"], 1)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "j.json")
            j.save(path)
            doc = json.load(open(path))
            self.assertEqual(doc["format"], "remat-join-2")
            self.assertEqual(doc["model"], "two towers")
            j2 = remat.JoinProblem.load(path)
        self.assertEqual(j2.branches, j.branches)
        self.assertEqual(j2.meta, j.meta)
        import pickle
        self.assertEqual(pickle.loads(pickle.dumps(j)).to_json(), j.to_json())

    def test_errors_name_the_field(self):
        with self.assertRaises(remat.InputError) as cm:
            remat.JoinProblem([{"input_bytes": 1, "stages": []}], {"fwd_time": 0, "bwd_time": 0})
        self.assertIn("branches[0].stages", str(cm.exception))
        with self.assertRaises(remat.InputError) as cm:
            remat.JoinProblem([{"input_bytes": 1, "stages": [{"fwd_time": 1}]}],
                              {"fwd_time": 0, "bwd_time": 0})
        self.assertIn("branches[0].stages[0].bwd_time", str(cm.exception))
        with self.assertRaises(remat.InputError):
            remat.JoinSchedule.from_ops(["Fck 1"])
        with self.assertRaises(TypeError):
            small_join().simulate(remat.Schedule.from_ops(["Fall 1"]))

    def test_solve_simulate_plan(self):
        j = small_join()
        peak, t = j.store_all_cost()
        self.assertEqual((peak, t), (23, 10.0))
        s = j.solve(peak, slots=0)
        self.assertEqual(s.ops, ["Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2",
                                 "B 1.1"])
        mm = j.min_memory(slots=0)
        s = j.solve(mm, slots=0)
        r = j.simulate(s)
        self.assertTrue(r.valid)
        self.assertLessEqual(r.peak_bytes, mm)
        self.assertEqual((r.time, r.peak_bytes), (s.time, s.peak_bytes))
        p = j.plan(s)
        self.assertEqual(s.ops[p.turn], "T")
        turn = p.steps[p.turn]
        self.assertEqual(turn.kind, "T")
        self.assertEqual(sorted(b for _, b, _ in turn.reads), [1, 2])
        self.assertEqual(sorted(turn.creates), [("d", 1, 2), ("d", 2, 1)])
        self.assertEqual(p.peak_bytes, r.peak_bytes)
        last = p.steps[-1]
        self.assertEqual((last.kind, last.index), ("B", 1))
        self.assertIn(("d", last.branch, 0), last.creates)
        with self.assertRaises(remat.InfeasibleError) as cm:
            j.solve(mm - 1, slots=0)
        self.assertEqual(cm.exception.min_memory, mm)
        bad = remat.JoinSchedule.from_ops(["Fall 1.1", "T"])
        self.assertFalse(j.simulate(bad).valid)
        with self.assertRaises(remat.InputError) as cm:
            j.plan(bad)
        self.assertIn("op 1 (T)", str(cm.exception))
        s2 = remat.JoinSchedule.from_json(s.to_json())
        self.assertEqual(s2.ops, s.ops)

    def test_curve_and_flat_chain(self):
        j = small_join()
        cv = j.curve(slots=0)
        self.assertEqual(cv.algorithm, "join-optimal")
        self.assertEqual(cv.min_memory, j.min_memory(slots=0))
        self.assertEqual(cv.points[-1][1], j.store_all_cost()[1])
        times = [t for _, t in cv.points]
        self.assertEqual(times, sorted(times, reverse=True))
        flat = j.flatten()
        self.assertIsInstance(flat, remat.Chain)
        self.assertEqual(flat.n, 4)
        self.assertEqual(flat.stages[0]["out_bytes"], 2 + 3)  # carries a[2.0]
        self.assertEqual(j.branch_chain(2).n, 2)

    def test_partial_saves(self):
        """Stage 1.1 with its own Fall overhead and a partial save (tests/test_hjoin.c)."""
        b1 = [{"fwd_time": 1, "bwd_time": 2, "out_bytes": 2, "saved_bytes": 3,
               "fall_overhead": 2,
               "options": [{"name": "half", "saved_bytes": 2, "fall_overhead": 1,
                            "bwd_time": 5, "bwd_overhead": 4}]},
              {"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 2}]
        b2 = [{"fwd_time": 2, "bwd_time": 2, "out_bytes": 3, "saved_bytes": 4}]
        j = remat.JoinProblem(
            [{"name": "text", "input_bytes": 4, "input_grad_bytes": 0, "stages": b1},
             {"name": "image", "input_bytes": 3, "stages": b2}],
            {"fwd_time": 0.5, "bwd_time": 0.5, "saved_bytes": 1, "fwd_overhead": 2})
        st = j.branches[0]["stages"][0]
        self.assertEqual(st["fall_overhead"], 2)
        self.assertEqual(st["options"][0]["name"], "half")
        self.assertEqual(remat.JoinProblem.from_json(j.to_json()).branches, j.branches)
        s = remat.JoinSchedule.from_ops(["Fall 1.1/1", "Fall 1.2", "Fall 2.1", "T", "B 2.1",
                                         "B 1.2", "B 1.1"])
        self.assertEqual(s.ops[0], "Fall 1.1/1")
        r = j.simulate(s)
        self.assertTrue(r.valid)
        self.assertEqual((r.time, r.peak_bytes), (13.0, 22))
        p = j.plan(s)
        self.assertEqual([st.option for st in p.steps], [1, 0, 0, 0, 0, 0, 1])
        self.assertEqual(j.flatten().stages[0]["options"][0]["saved_bytes"], 2 + 3)
        self.assertFalse(j.simulate(remat.JoinSchedule.from_ops(["Fall 1.1/2"])).valid)
        sol = j.solve(j.min_memory(slots=0), slots=0)
        self.assertTrue(j.simulate(sol).valid)

    def test_stopped_fall(self):
        """Stage 1.1 with stop fields: Fall 1.1 right before B 1.1 stops, in the
        simulator, the plan (JoinStep.stops) and the flat chain; the turn refuses them."""
        j0 = small_join()
        b1 = [dict(j0.branches[0]["stages"][0], stop_time=0.25, stop_saved_bytes=1,
                   stop_overhead=0), j0.branches[0]["stages"][1]]
        j = remat.JoinProblem([dict(j0.branches[0], stages=b1), j0.branches[1]], j0.turn)
        st = j.branches[0]["stages"][0]
        self.assertEqual((st["stop_time"], st["stop_saved_bytes"], st["stop_overhead"]),
                         (0.25, 1, 0))
        self.assertNotIn("stop_time", j.branches[0]["stages"][1])
        self.assertEqual(remat.JoinProblem.from_json(j.to_json()).branches, j.branches)
        ops = ["Fck 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2", "Fall 1.1", "B 1.1"]
        s = remat.JoinSchedule.from_ops(ops)
        self.assertEqual(j0.simulate(s).time, 11.0)
        self.assertEqual(j.simulate(s).time, 10.25)  # the Fall takes stop_time
        self.assertEqual([x.stops for x in j.plan(s).steps], [False] * 6 + [True, False])
        self.assertEqual(j.flatten().stages[0]["stop_saved_bytes"], 1 + 3)  # carries a[2.0]
        with self.assertRaises(remat.InputError) as cm:
            remat.JoinProblem(j.branches, dict(j.turn, stop_time=0))
        self.assertIn("turn.stop_time", str(cm.exception))
        sol = j.solve(j.min_memory(slots=0), slots=0)
        self.assertTrue(j.simulate(sol).valid)

    def test_ordered(self):
        j = small_join()
        self.assertFalse(j.ordered)
        o = remat.JoinProblem(j.branches, j.turn, ordered=True)
        self.assertTrue(o.ordered)
        self.assertTrue(remat.JoinProblem.from_json(o.to_json()).ordered)
        bad = remat.JoinSchedule.from_ops(["Fall 2.1", "Fall 1.1", "Fall 1.2", "T", "B 2.1",
                                           "B 1.2", "B 1.1"])
        self.assertTrue(j.simulate(bad).valid)
        r = o.simulate(bad)
        self.assertFalse(r.valid)
        self.assertIn("in order", r.reason)
        s = o.solve(o.min_memory(slots=0), slots=0)
        self.assertTrue(o.simulate(s).valid)
        self.assertLessEqual(j.min_memory(slots=0), o.min_memory(slots=0))

    def test_example_two_towers_beat_the_flat_chain(self):
        root = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "join")
        j = remat.JoinProblem.load(os.path.join(root, "clip-like.json"))
        self.assertLess(j.min_memory(), remat.min_memory(j.flatten()))

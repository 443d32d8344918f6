"""Checkpointed training equals plain autograd, bitwise on CPU: outputs,
parameter and input gradients, BatchNorm statistics, dropout masks; and the
measured activation peak is within 10% of the simulator's prediction. For
resnet18, densenet121, a ViT and a GPT stack at tiny sizes, under store-all,
hand-built schedules and the solvers at several memory limits."""
import copy
import unittest

import torch

import remat
import remat.torch as rt
from helpers import checkpointed_step, densenet121, gpt, reference_step, resnet18, schedules, vit


class ModelEquality(unittest.TestCase):
    def run_model(self, seq, x, steps_per_schedule=1, min_schedules=3):
        ref = copy.deepcopy(seq)
        chain = rt.profile(seq, x, repeat=1)
        self.assertEqual(chain.n, len(seq) + 1)
        scheds = schedules(chain)
        self.assertGreaterEqual(len(scheds), min_schedules)
        model = rt.Checkpointed(seq, x, chain=chain, schedule=scheds[0][1])
        seed = 0
        for name, sched in scheds:
            model.set_schedule(sched)
            predicted = remat.simulate(chain, sched).peak_bytes
            for _ in range(steps_per_schedule):
                seed += 1
                for m in (seq, ref):
                    for p in m.parameters():
                        p.grad = None
                out_r, g_r, xg_r = reference_step(ref, x, seed)
                out_c, g_c, xg_c = checkpointed_step(model, x, seed)
                with self.subTest(schedule=name):
                    self.assertTrue(torch.equal(out_r, out_c), "output differs")
                    for k, (a, b) in enumerate(zip(g_r, g_c)):
                        self.assertTrue(a is not None and b is not None and torch.equal(a, b),
                                        "grad of parameter %d differs" % k)
                    if x.requires_grad:
                        self.assertTrue(torch.equal(xg_r, xg_c), "input grad differs")
                    else:
                        self.assertIsNone(xg_c)
                    for k, (a, b) in enumerate(zip(ref.buffers(), seq.buffers())):
                        self.assertTrue(torch.equal(a, b), "buffer %d differs" % k)
                    measured = model.last_peak_bytes
                    self.assertLessEqual(abs(measured - predicted), 0.10 * predicted,
                                         "measured peak %d vs predicted %d" % (measured, predicted))
        return scheds

    def test_resnet18(self):
        torch.manual_seed(1)
        seq = rt.sequential(resnet18())
        x = torch.randn(2, 3, 32, 32, requires_grad=True)
        self.run_model(seq, x)

    def test_densenet121(self):
        torch.manual_seed(2)
        seq = rt.sequential(densenet121())
        x = torch.randn(2, 3, 32, 32)  # input without grad
        self.run_model(seq, x)

    def test_vit_with_dropout(self):
        torch.manual_seed(3)
        seq = rt.sequential(vit(dropout=0.1))
        x = torch.randn(2, 3, 32, 32, requires_grad=True)
        self.run_model(seq, x, steps_per_schedule=2)

    def test_gpt_with_dropout(self):
        torch.manual_seed(4)
        seq = gpt(dropout=0.1)
        x = torch.randint(0, 64, (2, 16))
        self.run_model(seq, x, steps_per_schedule=2)

    def test_recomputation_really_happens(self):
        # A schedule that recomputes must run more stage forwards than stages.
        torch.manual_seed(5)
        seq = gpt(dropout=0.0)
        x = torch.randint(0, 64, (2, 16))
        calls = []
        hooks = [m.register_forward_hook(lambda *a: calls.append(1)) for m in seq]
        chain = rt.profile(seq, x, repeat=1)
        name, sched = [s for s in schedules(chain) if s[0] == "recompute-all"][0]
        model = rt.Checkpointed(seq, x, chain=chain, schedule=sched)
        calls.clear()
        model(x).sum().backward()
        for h in hooks:
            h.remove()
        L = len(seq)
        self.assertEqual(len(calls), L + L * (L + 1) // 2)


if __name__ == "__main__":
    unittest.main()

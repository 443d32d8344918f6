"""remat.torch edge cases: errors, in-place stages, inputs without grad,
conversions, profile cache and metadata, several graphs alive at once."""
import copy
import os
import tempfile
import unittest

import torch
from torch import nn

import remat
import remat.torch as rt
from helpers import (gpt, loss_fn, recompute_all_schedule, resnet18, segment_schedule,
                     zero_grads)


def mlp(inplace=True):
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=inplace), nn.Linear(16, 16),
                         nn.ReLU(inplace=inplace), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def same_grads(test, a, b):
    for k, (p, q) in enumerate(zip(a.parameters(), b.parameters())):
        test.assertTrue(torch.equal(p.grad, q.grad), "grad of parameter %d differs" % k)


class TupleStage(nn.Module):
    def forward(self, x):
        return x, x


class Features(unittest.TestCase):
    def test_memory_below_minimum_says_the_minimum(self):
        torch.manual_seed(0)
        seq = mlp()
        x = torch.randn(4, 8)
        chain = rt.profile(seq, x, repeat=1)
        for alg, limit in [(a, m) for a in ("store-all", "optimal", "sequential")
                           for m in (64, chain.input_bytes + 64)]:
            with self.subTest(algorithm=alg, limit=limit):
                try:
                    rt.Checkpointed(seq, x, memory=limit, algorithm=alg, chain=chain)
                except remat.InfeasibleError as e:
                    self.assertGreater(e.min_memory, limit)
                    self.assertIn(str(e.min_memory), str(e))
                except remat.InputError as e:  # solver not built yet
                    self.assertIn("not implemented", str(e))
                else:
                    self.fail("a 64-byte limit was accepted")

    def test_memory_text_and_schedule_attributes(self):
        torch.manual_seed(0)
        seq = mlp()
        x = torch.randn(4, 8)
        model = rt.Checkpointed(seq, x, memory="1MiB", algorithm="store-all", repeat=1)
        self.assertEqual(model.schedule.memory_limit, 1 << 20)
        self.assertEqual(model.schedule.ops[0], "Fall 1")
        self.assertLessEqual(model.schedule.peak_bytes, 1 << 20)
        self.assertGreater(model.schedule.time, 0)
        with self.assertRaises(ValueError):
            rt.Checkpointed(seq, x, repeat=1)  # neither memory nor schedule

    def test_inplace_stage_boundaries(self):
        torch.manual_seed(0)
        seq = mlp(inplace=True)
        ref = copy.deepcopy(seq)
        x = torch.randn(4, 8, requires_grad=True)
        chain = rt.profile(seq, x, repeat=1)
        self.assertEqual(chain.meta["profile"]["inplace_stages"], [2, 4])
        for sched in (recompute_all_schedule(chain.n), segment_schedule(chain.n, [2, 4])):
            zero_grads(seq)
            zero_grads(ref)
            model = rt.Checkpointed(seq, x, chain=chain, schedule=sched)
            xc = x.detach().clone().requires_grad_()
            loss_fn(model(xc)).backward()
            xr = x.detach().clone().requires_grad_()
            loss_fn(ref(xr)).backward()
            same_grads(self, seq, ref)
            self.assertTrue(torch.equal(xc.grad, xr.grad))

    def test_dropout_masks_match_on_recompute(self):
        torch.manual_seed(3)
        seq = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8), nn.Dropout(0.5),
                            nn.Linear(8, 8), nn.Linear(8, 2))
        ref = copy.deepcopy(seq)
        x = torch.randn(4, 8, requires_grad=True)
        chain = rt.profile(seq, x, repeat=1)
        model = rt.Checkpointed(seq, x, chain=chain, schedule=segment_schedule(chain.n, [1, 3]))
        for seed in (7, 8):
            zero_grads(seq)
            zero_grads(ref)
            torch.manual_seed(seed)
            loss_fn(ref(x)).backward()
            after_ref = torch.get_rng_state()
            torch.manual_seed(seed)
            loss_fn(model(x)).backward()
            same_grads(self, seq, ref)
            # Recomputations leave the global generator where plain autograd does.
            self.assertTrue(torch.equal(after_ref, torch.get_rng_state()))

    def test_autocast_is_replayed_in_recomputations(self):
        torch.manual_seed(0)
        seq = mlp(inplace=False)
        ref = copy.deepcopy(seq)
        x = torch.randn(4, 8, requires_grad=True)
        chain = rt.profile(seq, x, repeat=1)
        model = rt.Checkpointed(seq, x, chain=chain, schedule=recompute_all_schedule(chain.n))
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            out_c = model(x)
            out_r = ref(x)
        self.assertEqual(out_c.dtype, torch.bfloat16)
        loss_fn(out_c.float()).backward()
        loss_fn(out_r.float()).backward()
        same_grads(self, seq, ref)

    def test_tuple_output_is_a_clear_error(self):
        seq = nn.Sequential(nn.Linear(4, 4), TupleStage(), nn.Linear(4, 4))
        with self.assertRaises(rt.StageError) as cm:
            rt.profile(seq, torch.randn(2, 4), repeat=1)
        self.assertIn("stage 2", str(cm.exception))
        self.assertIn("tuple", str(cm.exception))

    def test_non_tensor_input_is_a_clear_error(self):
        seq = mlp()
        model = rt.Checkpointed(seq, torch.randn(2, 8), memory="1GiB", algorithm="store-all",
                                repeat=1)
        with self.assertRaises(rt.StageError):
            model([torch.randn(2, 8)])

    def test_first_stage_without_params_and_input_without_grad(self):
        torch.manual_seed(0)
        seq = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))
        ref = copy.deepcopy(seq)
        x = torch.randn(2, 3, 4)
        chain = rt.profile(seq, x, repeat=1)
        model = rt.Checkpointed(seq, x, chain=chain, schedule=recompute_all_schedule(chain.n))
        loss_fn(model(x)).backward()
        loss_fn(ref(x)).backward()
        same_grads(self, seq, ref)

    def test_unknown_model_says_how_to_pass_a_sequential(self):
        class Net(nn.Module):
            def forward(self, x):
                return x
        with self.assertRaises(TypeError) as cm:
            rt.sequential(Net())
        self.assertIn("nn.Sequential", str(cm.exception))
        self.assertIn("Net", str(cm.exception))

    def test_conversions_compute_the_same_function(self):
        import torchvision.models as tvm
        torch.manual_seed(0)
        cases = [(resnet18(), (2, 3, 32, 32)),
                 (tvm.resnet50(num_classes=10), (2, 3, 32, 32)),
                 (tvm.densenet121(num_classes=10), (2, 3, 32, 32)),
                 (tvm.mobilenet_v2(num_classes=10), (2, 3, 32, 32)),
                 (tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                        hidden_dim=16, mlp_dim=32, num_classes=10),
                  (2, 3, 32, 32)),
                 (tvm.inception_v3(aux_logits=False, init_weights=False, num_classes=10),
                  (1, 3, 75, 75))]
        for model, shape in cases:
            with self.subTest(model=type(model).__name__):
                model.eval()
                seq = rt.sequential(model)
                self.assertGreater(len(seq), 3)
                x = torch.randn(*shape)
                with torch.no_grad():
                    a, b = model(x), seq(x)
                self.assertTrue(torch.allclose(a, b, rtol=1e-4, atol=1e-5))
        with self.assertRaises(ValueError):
            rt.sequential(tvm.inception_v3(aux_logits=True, init_weights=False))

    def test_profile_metadata_and_cache(self):
        torch.manual_seed(0)
        seq = mlp()
        x = torch.randn(4, 8)
        with tempfile.TemporaryDirectory() as d:
            old = os.environ.get("REMAT_CACHE_DIR")
            os.environ["REMAT_CACHE_DIR"] = d
            try:
                rt._PROFILE_CACHE.clear()
                c1 = rt.profile(seq, x, repeat=3)
                files = os.listdir(d)
                self.assertEqual(len(files), 1)
                rt._PROFILE_CACHE.clear()
                c2 = rt.profile(seq, x, repeat=3)  # from disk
                self.assertEqual(c1.stages, c2.stages)
                c3 = rt.profile(seq, torch.randn(6, 8), repeat=3)  # other shape: new entry
                self.assertEqual(len(os.listdir(d)), 2)
            finally:
                if old is None:
                    del os.environ["REMAT_CACHE_DIR"]
                else:
                    os.environ["REMAT_CACHE_DIR"] = old
        meta = c1.meta["profile"]
        self.assertEqual(meta["batch_size"], 4)
        self.assertEqual(meta["device"], "cpu")
        self.assertEqual(c3.meta["profile"]["batch_size"], 6)
        st = c1.stages
        self.assertEqual(st[-1]["name"], "output")
        self.assertEqual(st[0]["out_bytes"], 4 * 16 * 4)
        for s in st[:-1]:
            self.assertGreaterEqual(s["saved_bytes"], s["out_bytes"])
            self.assertGreater(s["fwd_time"], 0)
        # Linear(8,16) keeps its input (a[0], not counted) and its output.
        self.assertEqual(st[0]["saved_bytes"], 4 * 16 * 4)

    def test_profile_leaves_no_trace(self):
        torch.manual_seed(0)
        seq = rt.sequential(resnet18())
        before = [b.clone() for b in seq.buffers()]
        x = torch.randn(2, 3, 32, 32)
        rng = torch.get_rng_state()
        rt.profile(seq, x, repeat=1, cache=False)
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(before, seq.buffers())))
        self.assertTrue(all(p.grad is None for p in seq.parameters()))
        self.assertTrue(torch.equal(rng, torch.get_rng_state()))

    def test_saved_chain_drives_a_model(self):
        torch.manual_seed(0)
        seq = mlp()
        x = torch.randn(4, 8)
        chain = rt.profile(seq, x, repeat=1)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            chain.save(path)
            loaded = remat.Chain.load(path)
        self.assertEqual(loaded.meta["profile"]["inplace_stages"], [2, 4])
        model = rt.Checkpointed(seq, x, chain=loaded, memory="1GiB", algorithm="store-all")
        self.assertEqual(model.inplace_stages, {2, 4})

    def test_no_grad_runs_plainly(self):
        torch.manual_seed(0)
        seq = gpt(dropout=0.0).eval()
        x = torch.randint(0, 64, (2, 16))
        chain = rt.profile(seq, x, repeat=1)
        model = rt.Checkpointed(seq, x, chain=chain, schedule=recompute_all_schedule(chain.n))
        with torch.no_grad():
            self.assertTrue(torch.equal(model(x), seq(x)))

    def test_two_graphs_alive_at_once(self):
        torch.manual_seed(0)
        seq = mlp()
        ref = copy.deepcopy(seq)
        x1, x2 = torch.randn(4, 8), torch.randn(4, 8)
        chain = rt.profile(seq, x1, repeat=1)
        model = rt.Checkpointed(seq, x1, chain=chain, schedule=segment_schedule(chain.n, [3]))
        (loss_fn(model(x1)) + 2 * loss_fn(model(x2))).backward()
        (loss_fn(ref(x1)) + 2 * loss_fn(ref(x2))).backward()
        for p, q in zip(seq.parameters(), ref.parameters()):
            self.assertTrue(torch.allclose(p.grad, q.grad, rtol=1e-6, atol=1e-7))

    def test_schedule_for_another_chain_is_rejected(self):
        seq = mlp()
        x = torch.randn(4, 8)
        chain = rt.profile(seq, x, repeat=1)
        with self.assertRaises(remat.InputError):
            rt.Checkpointed(seq, x, chain=chain, schedule=recompute_all_schedule(chain.n - 1))


if __name__ == "__main__":
    unittest.main()

"""remat.torch in the Hugging Face ecosystem, on models no other test uses
(Qwen2 and Phi causal LMs, a BERT classifier, from configs): the wrapped
model shows the model's forward signature, so Trainer with its default
arguments keeps the dataset's columns and trains with the losses and
weights of the plain model; remat.torch.enable switches remat on in place
(the model keeps its class); RematCallback does it from Trainer; PEFT's
LoRA trains under a limit, before or after wrapping; accelerate's prepare
leaves gradients bitwise those of plain autograd."""
import copy
import inspect
import io
import pickle
import warnings

import pytest
import torch

import remat.torch as rt
from torchkit import limits, measured_peak, same_step, wrap

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VOCAB, SEQ, BATCH = 96, 12, 2


def qwen2(dropout=0.1):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                      max_position_embeddings=64, attention_dropout=dropout, use_cache=False,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return Qwen2ForCausalLM(cfg).train()


def phi():
    from transformers import PhiConfig, PhiForCausalLM
    cfg = PhiConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                    num_attention_heads=4, vocab_size=VOCAB, max_position_embeddings=64,
                    resid_pdrop=0.1, embd_pdrop=0.0, attention_dropout=0.0, use_cache=False,
                    pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return PhiForCausalLM(cfg).train()


def bert_classifier():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                     num_attention_heads=4, vocab_size=VOCAB, max_position_embeddings=64,
                     num_labels=3)
    return BertForSequenceClassification(cfg).train()


def lm_rows(n=8, seed=0):
    """Causal LM rows, plus a column no model takes (Trainer must drop it)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        ids = torch.randint(3, VOCAB, (SEQ,), generator=g)
        rows.append({"input_ids": ids, "attention_mask": torch.ones(SEQ, dtype=torch.long),
                     "labels": ids.clone(), "row_number": torch.tensor(i)})
    return rows


def classifier_rows(n=8, seed=1):
    """Rows for the classifier, labels in a `label` column (the collator
    renames it). No attention mask: with one, this BERT takes the module
    path, which fails here on main too (see the report of issue 25)."""
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(3, VOCAB, (SEQ,), generator=g),
             "token_type_ids": torch.zeros(SEQ, dtype=torch.long),
             "label": torch.tensor(i % 3), "row_number": torch.tensor(i)} for i in range(n)]


def lm_batch(rows):
    return {k: torch.stack([r[k] for r in rows]) for k in ("input_ids", "attention_mask",
                                                            "labels")}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One profile cache for the module: a model profiled in one test is
    read, not measured again, by the next."""
    return str(tmp_path_factory.mktemp("remat-cache"))


def smallest(model, args, kwargs, cache):
    """The smallest limit remat accepts for this model and input, from its
    own profile (never a fixed fraction)."""
    w = wrap(copy.deepcopy(model), args, kwargs, memory=1.0, cache=cache)
    return limits(w)[0]


# -- the signature --------------------------------------------------------------------------

def test_wrapped_model_shows_the_models_signature():
    from transformers.utils.generic import can_return_loss, find_labels
    for build in (qwen2, bert_classifier):
        model = build()
        w = rt.checkpoint(model, memory=0.5, cache=False)
        own = inspect.signature(model.forward)
        assert inspect.signature(w.forward) == own
        assert inspect.signature(type(w).forward) == inspect.signature(type(model).forward)
        assert find_labels(type(w)) == find_labels(type(model)) == ["labels"]
        assert can_return_loss(type(w)) == can_return_loss(type(model))
        assert isinstance(w, rt.RematModule) and type(w).__name__ == "RematModule"
        for clone in (copy.deepcopy(w), pickle.loads(pickle.dumps(w))):
            assert type(clone) is type(w) and inspect.signature(clone.forward) == own
            assert clone._remat_model is not model
    assert type(rt.checkpoint(qwen2(), cache=False)) is not \
        type(rt.checkpoint(bert_classifier(), cache=False))


# -- Trainer ------------------------------------------------------------------------------

def train(model, rows, tmp_path, callbacks=(), **args):
    """Trainer with its default arguments but for the run's length, CPU, no
    saving and no reporting; returns the logged losses."""
    from transformers import Trainer, TrainingArguments
    targs = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True,
                              save_strategy="no", logging_steps=1, max_steps=3,
                              per_device_train_batch_size=BATCH, **args)
    trainer = Trainer(model=model, args=targs, train_dataset=rows, callbacks=list(callbacks))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def same_weights(a, b):
    bad = [n for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters())
           if not torch.equal(p, q)]
    assert not bad, "weights differ after training: %s" % bad[:5]


def test_trainer_default_arguments_trains_the_wrapped_model_as_plain(tmp_path, cache):
    """remove_unused_columns=True (the default) keeps the columns forward
    names and drops `row_number`; three AdamW steps at the smallest limit
    give the plain model's losses and weights bit for bit (dropout on: the
    first step captures the model inside the training step and leaves the
    RNG as it was)."""
    torch.manual_seed(0)
    model, rows = qwen2(), lm_rows()
    batch = lm_batch(rows[:BATCH])
    batch["num_items_in_batch"] = torch.tensor(0)  # Trainer passes it (forward takes **kwargs)
    low = smallest(model, (), batch, cache)
    ref, base = copy.deepcopy(model), copy.deepcopy(model)
    w = rt.checkpoint(base, memory=low, cache=cache, progress=False)
    seen = set()
    w.register_forward_pre_hook(lambda m, a, kw: seen.update(kw), with_kwargs=True)
    plain = train(ref, rows, tmp_path / "plain")
    ours = train(w, rows, tmp_path / "remat")
    assert seen == {"input_ids", "attention_mask", "labels", "num_items_in_batch"}
    assert len(plain) == 3 and ours == plain
    same_weights(ref, w)
    assert w.last_entry.limit == low and len(w._remat_entries) == 1


def test_callback_enables_remat_in_place_with_gradient_accumulation(tmp_path, cache):
    """RematCallback: Trainer keeps its model object and class; a BERT
    classifier (its `label` column renamed by the collator) trains with
    gradient accumulation as the plain model does."""
    from transformers import BertForSequenceClassification
    from remat.torch.hf import RematCallback
    torch.manual_seed(0)
    model, rows = bert_classifier(), classifier_rows()
    ref, base = copy.deepcopy(model), copy.deepcopy(model)
    cb = RematCallback(memory=0.9, cache=cache, progress=False)
    plain = train(ref, rows, tmp_path / "plain", gradient_accumulation_steps=2)
    ours = train(base, rows, tmp_path / "remat", callbacks=[cb], gradient_accumulation_steps=2)
    assert len(plain) == 3 and ours == plain
    same_weights(ref, base)
    assert type(base) is BertForSequenceClassification and rt.enabled(base) is cb.handle
    assert cb.handle.last_entry is not None and "stages" in cb.handle.remat_report()


def test_callback_with_bf16_autocast_from_accelerate(tmp_path, cache):
    """TrainingArguments(bf16=True): accelerate puts an autocast wrapper
    around the model's forward, around remat's (the callback enables remat
    when Trainer is made, before that). remat's own calls of the model skip
    the wrapper, so autocast is entered once per step, as without remat:
    losses and weights as plain. disable() inside the wrapper turns remat
    off."""
    from remat.torch.hf import RematCallback
    torch.manual_seed(0)
    model, rows = qwen2(), lm_rows()
    ref, base = copy.deepcopy(model), copy.deepcopy(model)
    cb = RematCallback(memory=0.9, cache=cache, progress=False)
    plain = train(ref, rows, tmp_path / "plain", bf16=True)
    ours = train(base, rows, tmp_path / "remat", callbacks=[cb], bf16=True)
    assert ours == plain
    same_weights(ref, base)
    assert base.__dict__["forward"] is not cb.handle and rt.enabled(base) is cb.handle
    entries = len(cb.handle._remat_entries)
    rt.disable(base)
    assert rt.enabled(base) is None
    ids = lm_batch(rows[:BATCH])["input_ids"]
    base(ids, labels=ids, num_items_in_batch=torch.tensor(3)).loss.backward()
    assert len(cb.handle._remat_entries) == entries  # the model's own forward ran


def test_callback_refuses_gradient_checkpointing_and_bad_settings(tmp_path):
    from remat.torch.hf import RematCallback
    with pytest.raises(TypeError, match="checkpoint\\(\\)'s keyword options"):
        RematCallback(memory=0.5, not_an_option=1)
    with pytest.raises(ValueError, match="memory"):
        RematCallback(memory=-0.5)
    with pytest.raises(ValueError, match="gradient checkpointing too"):
        train(qwen2(), lm_rows(), tmp_path, callbacks=[RematCallback(memory=0.9)],
              gradient_checkpointing=True)


# -- enable -------------------------------------------------------------------------------

def test_enable_keeps_the_class_and_signature_and_trains_bitwise(cache):
    torch.manual_seed(0)
    model = phi()
    batch = lm_batch(lm_rows(BATCH))
    args, kwargs = (batch.pop("input_ids"),), batch
    ref, base = copy.deepcopy(model), copy.deepcopy(model)
    cls, sig, keys = type(base), inspect.signature(base.forward), list(base.state_dict())
    calls = []
    hook = base.register_forward_hook(lambda m, a, o: calls.append(type(o).__name__))
    handle = rt.enable(base, memory=smallest(model, args, kwargs, cache), cache=cache,
                       progress=False)
    assert type(base) is cls and inspect.signature(base.forward) == sig
    assert list(base.state_dict()) == keys and rt.enabled(base) is handle
    same_step(ref, base, args, kwargs)
    same_step(ref, base, args, kwargs)
    assert calls == ["CausalLMOutputWithPast"] * 2  # the model's own hooks run once per call
    assert handle.last_entry.info["path"] == "graph" and "stages" in handle.remat_report()
    hook.remove()
    for clone in (copy.deepcopy(base), _save_load(base)):
        assert type(clone) is cls and rt.enabled(clone)._remat_model is clone
        same_step(copy.deepcopy(ref), clone, args, kwargs)
    with torch.no_grad():  # the model itself runs
        outs = []
        for m in (base, ref):
            torch.manual_seed(1)
            outs.append(m(*args, **kwargs).logits)
        assert torch.equal(*outs)
    rt.disable(base)
    assert rt.enabled(base) is None and "forward" not in base.__dict__
    entries = len(handle._remat_entries)
    same_step(ref, base, args, kwargs)
    assert len(handle._remat_entries) == entries  # the model's own forward ran


def test_enable_refuses_what_it_cannot_do():
    model = qwen2()
    with pytest.raises(TypeError, match="already a RematModule"):
        rt.enable(rt.checkpoint(model, cache=False))
    with pytest.raises(TypeError, match="keyword options"):
        rt.enable(model, memory=0.5, not_an_option=1)
    model.gradient_checkpointing_enable()
    with pytest.raises(ValueError, match="gradient_checkpointing_disable"):
        rt.enable(model, memory=0.5)
    assert rt.enabled(model) is None


def _save_load(m):
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


# -- PEFT LoRA ----------------------------------------------------------------------------

def lora(model):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(3)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.1)
    return get_peft_model(model, cfg)


@pytest.mark.parametrize("order", ["lora_then_wrap", "wrap_then_lora"])
def test_lora_trains_under_a_limit_from_its_profile(order, cache):
    """LoRA adapters on Phi (input embeddings made to require grad, as for
    Hugging Face's checkpointing): at the smallest limit remat accepts, the
    measured peak of a step is within it, and gradients are plain
    autograd's bit for bit."""
    torch.manual_seed(0)
    batch = lm_batch(lm_rows(BATCH))
    args, kwargs = (batch.pop("input_ids"),), batch
    ref = lora(phi())
    ref.enable_input_require_grads()
    base = copy.deepcopy(ref) if order == "lora_then_wrap" else None
    if base is not None:
        w = wrap(base, args, kwargs, memory=1.0, cache=cache)
        runner, remat_part = w, w
    else:
        torch.manual_seed(0)
        plain = phi()
        inner = wrap(plain, (), {}, memory=1.0, cache=cache)  # prepared on the first call
        runner = lora(inner)
        runner.enable_input_require_grads()
        runner.load_state_dict(ref.state_dict())
        remat_part = inner
    same_step(ref, runner, args, kwargs)  # prepares the LoRA-adapted input
    low = limits(remat_part)[0]
    remat_part.set_memory(low)
    assert measured_peak(runner, args, kwargs) <= remat_part.last_entry.limit == low
    same_step(ref, runner, args, kwargs)
    trainable = [n for n, p in runner.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


# -- accelerate ---------------------------------------------------------------------------

def test_accelerate_prepare_trains_bitwise(cache):
    from accelerate import Accelerator
    torch.manual_seed(0)
    model = qwen2()
    batch = lm_batch(lm_rows(BATCH))
    args, kwargs = (batch.pop("input_ids"),), batch
    low = smallest(model, args, kwargs, cache)
    ref, base = copy.deepcopy(model), copy.deepcopy(model)
    w = wrap(base, args, kwargs, memory=low, cache=cache)
    acc = Accelerator(cpu=True)
    models = []
    for m in (ref, w):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        pm, popt = acc.prepare(m, opt)
        assert acc.unwrap_model(pm) is m
        models.append((pm, popt))
    for _ in range(2):
        losses = []
        for pm, _ in models:
            torch.manual_seed(11)
            loss = pm(*args, **kwargs).loss
            acc.backward(loss)
            losses.append(loss.detach())
        assert torch.equal(losses[0], losses[1])
        for (n, p), (_, q) in zip(ref.named_parameters(), w.named_parameters()):
            assert torch.equal(p.grad, q.grad), n
        for _, popt in models:
            popt.step()
            popt.zero_grad(set_to_none=False)
    same_weights(ref, w)

"""Fine-tuning with Hugging Face's Trainer under a memory limit, by remat.

A complete run with nothing downloaded: a small causal LM from a config
(random weights), a word-level tokenizer made from a tiny in-memory corpus,
dynamic padding by DataCollatorForLanguageModeling, and Trainer with its
default arguments plus one callback, remat.torch.hf.RematCallback, which
switches remat on in the model when Trainer is made. For a real run, load
the model and tokenizer with from_pretrained() and keep the rest.

    python examples/finetune_trainer.py [--memory 0.6] [--steps 6]

Each distinct batch shape is captured and profiled once, the first time it
is seen (pad_to_multiple_of=8 keeps their number small); later batches of
that shape run at once. The limit given as a fraction is a fraction of
plain autograd's peak for each shape.
"""
from __future__ import annotations

import argparse
import tempfile

import torch

import remat.torch as rt
from remat.torch.hf import RematCallback

CORPUS = """the cat sat on the mat
a dog ran in the park with a red ball
the quick brown fox jumps over the lazy dog
she reads a book by the window every morning
rain fell on the old roof all night long
we walked to the market and bought fresh bread and cheese
the children laughed as the kite rose above the hill
he fixed the bike
birds sing at dawn
the train left the station before the sun came up over the fields""".splitlines()


def tokenizer():
    """A word-level tokenizer over the corpus, with the special tokens a
    causal LM's collator needs."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = sorted({w for line in CORPUS for w in line.split()})
    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", "<eos>"] + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<eos>")


def model_for(tok, layers: int = 4, width: int = 128):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(num_hidden_layers=layers, hidden_size=width, intermediate_size=4 * width,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=len(tok),
                      max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    return Qwen2ForCausalLM(cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory", type=float, default=0.6,
                    help="a fraction of plain autograd's peak, or bytes if > 1 (default 0.6)")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    import transformers
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)

    tok = tokenizer()
    model = model_for(tok)
    # Rows as a tokenizer gives them; `text` is a column the model does not
    # take, which Trainer's default remove_unused_columns=True drops.
    rows = [{"input_ids": tok(line + " <eos>")["input_ids"], "text": line} for line in CORPUS]
    collator = DataCollatorForLanguageModeling(tok, mlm=False, pad_to_multiple_of=8)
    memory = a.memory if a.memory <= 1 else int(a.memory)
    remat_cb = RematCallback(memory=memory, progress=True)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.steps, per_device_train_batch_size=4,
                                 logging_steps=1, report_to=[], save_strategy="no")
        trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator,
                          callbacks=[remat_cb])
        trainer.train()

    handle = rt.enabled(model)  # the same object as remat_cb.handle
    assert handle is not None and type(model).__name__ == "Qwen2ForCausalLM"
    print("batch shapes profiled: %d" % len(handle._remat_entries))
    print(handle.remat_report())


if __name__ == "__main__":
    main()

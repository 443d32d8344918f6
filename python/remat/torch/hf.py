"""remat with Hugging Face's Trainer: a callback that enables remat on the
model when Trainer is made (needs transformers).

    from remat.torch.hf import RematCallback
    trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"),
                      train_dataset=ds, data_collator=collator,
                      callbacks=[RematCallback(memory=0.5)])
    trainer.train()

The model is switched in place (remat.torch.enable), so it keeps its class
and its forward's signature: Trainer's default arguments, accelerate's
wrapping (DDP included), PEFT models and gradient accumulation work as
without remat. A checkpoint()-wrapped model can be given to Trainer as well,
without the callback. See examples/finetune_trainer.py.
"""
from __future__ import annotations

from typing import Any, Optional

from torch import nn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ._api import RematModule
from ._config import Config, Memory
from ._enable import EnabledRemat, enable, enabled


class RematCallback(TrainerCallback):
    """Enables remat on Trainer's model (remat.torch.enable) when Trainer is
    made (on_init_end, before accelerate's prepare() wraps the model's
    forward), or at on_train_begin for a callback added later, with these
    settings; it stays enabled afterwards, as gradient checkpointing does
    (remat.torch.disable(model) ends it).

    memory, algorithm, options: as for remat.torch.checkpoint() (checked
    here, before training). A limit given as a fraction is a fraction of
    plain autograd's peak on each batch shape profiled. TrainingArguments'
    gradient_checkpointing (activation_checkpointing) is refused: remat
    chooses what to recompute itself. `handle` is the RematModule running
    the model once training has begun (remat_report(), set_memory()).
    """

    def __init__(self, memory: Memory = "8GiB", algorithm: str = "optimal",
                 **options: Any) -> None:
        try:
            Config(memory=memory, algorithm=algorithm, **options)
        except TypeError as e:
            raise TypeError("remat.torch.hf.RematCallback: %s (the options are "
                            "remat.torch.checkpoint()'s keyword options)" % e) from None
        self.memory = memory
        self.algorithm = algorithm
        self.options = options
        self.handle: Optional[EnabledRemat] = None

    def on_init_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, model: Optional[nn.Module] = None,
                    **kwargs: Any) -> None:
        # Before accelerate's prepare(): its mixed-precision wrapper then
        # goes around remat's step, so recomputations run under its autocast.
        self._enable(args, model)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Optional[nn.Module] = None,
                       **kwargs: Any) -> None:
        # A callback added after Trainer was made (trainer.add_callback) starts here.
        self._enable(args, model)

    def _enable(self, args: TrainingArguments, model: Optional[nn.Module]) -> None:
        if model is None:
            raise ValueError("remat.torch.hf.RematCallback: Trainer passed no model")
        if any(getattr(args, name, False) is True
               for name in ("activation_checkpointing", "gradient_checkpointing")):
            raise ValueError("remat.torch.hf.RematCallback: TrainingArguments asks for "
                             "gradient checkpointing too; remat chooses what to recompute "
                             "itself: leave gradient_checkpointing (activation_checkpointing) "
                             "False")
        if isinstance(model, RematModule):
            raise ValueError("remat.torch.hf.RematCallback: the model is already a RematModule "
                             "from remat.torch.checkpoint(); give Trainer the plain model with "
                             "the callback, or the wrapped model without it")
        handle = enabled(model)
        if handle is None:
            handle = enable(model, self.memory, self.algorithm, **self.options)
        self.handle = handle

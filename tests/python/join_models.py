"""Models with several towers meeting at the loss, for the join tests and
bench/torch_join.py: a siamese and a triplet network of one shared encoder,
a two-tower retrieval model of two different towers, and CLIP from
transformers (a config, random weights). `ckpt=True` checkpoints every block
of every tower with torch.utils.checkpoint (non-reentrant): per-layer
checkpointing, what remat is compared with."""
from __future__ import annotations

import warnings
from typing import Any, Tuple

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as tuc
from torch import nn

Example = Tuple[nn.Module, tuple, dict]


def _run(blocks: nn.ModuleList, x: torch.Tensor, ckpt: bool) -> torch.Tensor:
    for b in blocks:
        x = tuc.checkpoint(b, x, use_reentrant=False) if ckpt else b(x)
    return x


class MlpBlock(nn.Module):
    def __init__(self, d: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.down(F.gelu(self.up(self.norm(x)))))


class ConvBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.GroupNorm(4, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.silu(self.norm(self.conv1(x))))


class MlpEncoder(nn.Module):
    def __init__(self, din: int, d: int, n: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.inp = nn.Linear(din, d)
        self.blocks = nn.ModuleList(MlpBlock(d, dropout) for _ in range(n))
        self.out = nn.Linear(d, d)
        self.ckpt = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_run(self.blocks, self.inp(x), self.ckpt).mean(1))


class ConvEncoder(nn.Module):
    def __init__(self, c: int, n: int, dim: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.ModuleList(ConvBlock(c) for _ in range(n))
        self.out = nn.Linear(c, dim)
        self.ckpt = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_run(self.blocks, self.stem(x), self.ckpt).mean((2, 3)))


class Siamese(nn.Module):
    """One encoder applied to two inputs; cosine embedding loss."""

    def __init__(self, d: int = 64, n: int = 6, dropout: float = 0.0) -> None:
        super().__init__()
        self.enc = MlpEncoder(32, d, n, dropout)

    def forward(self, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cosine_embedding_loss(self.enc(a), self.enc(b), y)


class Triplet(nn.Module):
    """One convolutional encoder applied to anchor, positive and negative;
    triplet margin loss."""

    def __init__(self, c: int = 16, n: int = 4, dim: int = 32) -> None:
        super().__init__()
        self.enc = ConvEncoder(c, n, dim)

    def forward(self, anchor: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor
                ) -> torch.Tensor:
        return F.triplet_margin_loss(self.enc(anchor), self.enc(pos), self.enc(neg))


class TwoTower(nn.Module):
    """A retrieval model: a query tower over token embeddings and an item
    tower over images, different in size; in-batch softmax loss."""

    def __init__(self, vocab: int = 500, d: int = 64, nq: int = 6, c: int = 16, ni: int = 3
                 ) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 32)
        self.query = MlpEncoder(32, d, nq)
        self.item = ConvEncoder(c, ni, d)
        self.scale = nn.Parameter(torch.tensor(10.0))

    def forward(self, ids: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        q = F.normalize(self.query(self.emb(ids)), dim=-1)
        v = F.normalize(self.item(images), dim=-1)
        logits = self.scale * q @ v.t()
        return F.cross_entropy(logits, torch.arange(len(q), device=q.device))


class DualEncoder(nn.Module):
    """Two MLP towers of different depth; the in-batch labels are made from
    the batch size after both towers ran (the head's arange then follows
    the towers in the graph)."""

    def __init__(self, d: int = 64, nq: int = 3, nd: int = 5) -> None:
        super().__init__()
        self.q = MlpEncoder(32, d, nq)
        self.d = MlpEncoder(32, d, nd)
        self.scale = nn.Parameter(torch.tensor(10.0))

    def forward(self, qx: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
        a, b = self.q(qx), self.d(dx)
        s = self.scale * F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).t()
        return F.cross_entropy(s, torch.arange(s.shape[0], device=s.device))


def per_layer(model: nn.Module) -> nn.Module:
    """`model` with every block of every tower checkpointed."""
    for m in model.modules():
        if hasattr(m, "ckpt"):
            m.ckpt = True
    return model


def siamese(batch: int = 32, seq: int = 16, d: int = 64, n: int = 6,
            dropout: float = 0.0) -> Example:
    m = Siamese(d, n, dropout).train()
    a, b = torch.randn(batch, seq, 32), torch.randn(batch, seq, 32)
    y = torch.where(torch.rand(batch) < 0.5, -1.0, 1.0)
    return m, (a, b, y), {}


def triplet(batch: int = 8, image: int = 24, c: int = 16, n: int = 4) -> Example:
    m = Triplet(c, n).train()
    xs = tuple(torch.randn(batch, 3, image, image) for _ in range(3))
    return m, xs, {}


def two_tower(batch: int = 16, seq: int = 12, image: int = 16) -> Example:
    m = TwoTower().train()
    ids = torch.randint(0, 500, (batch, seq))
    return m, (ids, torch.randn(batch, 3, image, image)), {}


def dual_encoder(batch: int = 16, seq: int = 12) -> Example:
    m = DualEncoder().train()
    return m, (torch.randn(batch, seq, 32), torch.randn(batch, 2 * seq, 32)), {}


def _configs(width: int, layers: int, positions: int, image: int) -> Tuple[dict, dict]:
    """A text and a vision tower's configs, of CLIP's shape."""
    text = dict(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                num_attention_heads=2, vocab_size=1000, max_position_embeddings=positions,
                eos_token_id=2, bos_token_id=1, pad_token_id=0)
    vision = dict(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                  num_attention_heads=2, image_size=image, patch_size=8)
    return text, vision


def _text_image(m: nn.Module, batch: int, seq: int, image: int) -> Example:
    """A contrastive model of text and images, with a batch for it."""
    import transformers
    transformers.logging.set_verbosity_error()
    kw: dict[str, Any] = {"input_ids": torch.randint(3, 1000, (batch, seq)),
                          "pixel_values": torch.randn(batch, 3, image, image),
                          "return_loss": True}
    return m.train(), (), kw


def clip(layers: int = 3, width: int = 64, batch: int = 8, seq: int = 16, image: int = 32
         ) -> Example:
    from transformers import CLIPConfig, CLIPModel
    text, vision = _configs(width, layers, seq, image)
    cfg = CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)
    return _text_image(CLIPModel(cfg), batch, seq, image)


def siglip(layers: int = 2, width: int = 64, batch: int = 8, seq: int = 16, image: int = 32
           ) -> Example:
    """SigLIP (sigmoid loss): its exported graph reshapes the vision tower's
    attention by the batch size read from input_ids."""
    from transformers import SiglipConfig, SiglipModel
    text, vision = _configs(width, layers, seq, image)
    cfg = SiglipConfig(text_config=text, vision_config=vision)
    return _text_image(SiglipModel(cfg), batch, seq, image)


def chinese_clip(layers: int = 3, width: int = 64, batch: int = 8, seq: int = 16,
                 image: int = 32) -> Example:
    """Chinese-CLIP (a BERT text tower, a CLIP vision tower). Only
    bench/torch_join.py uses it (a model the tests never saw)."""
    from transformers import ChineseCLIPConfig, ChineseCLIPModel
    text, vision = _configs(width, layers, seq + 2, image)
    cfg = ChineseCLIPConfig(text_config=text, vision_config=vision, projection_dim=32)
    return _text_image(ChineseCLIPModel(cfg), batch, seq, image)


def altclip(layers: int = 3, width: int = 64, batch: int = 8, seq: int = 16, image: int = 32
            ) -> Example:
    """AltCLIP (an XLM-RoBERTa text tower, a CLIP vision tower). Only
    bench/torch_join.py uses it (a model the tests never saw)."""
    from transformers import AltCLIPConfig, AltCLIPModel
    text, vision = _configs(width, layers, seq + 2, image)
    cfg = AltCLIPConfig(text_config=dict(text, project_dim=32, pad_token_id=1),
                        vision_config=vision, projection_dim=32)
    return _text_image(AltCLIPModel(cfg), batch, seq, image)


def clip_per_layer(model: nn.Module) -> nn.Module:
    """Hugging Face's per-layer checkpointing of both towers."""
    with warnings.catch_warnings():  # transformers 5 renames it activation_checkpointing_enable
        warnings.simplefilter("ignore", FutureWarning)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


class DualBert(nn.Module):
    """A retrieval dual encoder: two BERT towers of different depth (query
    and document), in-batch contrastive loss on their first tokens. Only
    bench/torch_join.py uses it (a model the tests never saw)."""

    def __init__(self, width: int = 96, nq: int = 4, nd: int = 6) -> None:
        super().__init__()
        import transformers
        transformers.logging.set_verbosity_error()

        def bert(layers: int) -> nn.Module:
            cfg = transformers.BertConfig(vocab_size=800, hidden_size=width,
                                          num_hidden_layers=layers, num_attention_heads=4,
                                          intermediate_size=4 * width)
            return transformers.BertModel(cfg, add_pooling_layer=False)

        self.q, self.d = bert(nq), bert(nd)
        self.scale = nn.Parameter(torch.tensor(10.0))

    def forward(self, qi: torch.Tensor, di: torch.Tensor) -> torch.Tensor:
        a = self.q(qi).last_hidden_state[:, 0]
        b = self.d(di).last_hidden_state[:, 0]
        s = self.scale * F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).t()
        return F.cross_entropy(s, torch.arange(s.shape[0], device=s.device))


def dual_bert(batch: int = 8, qlen: int = 32, dlen: int = 128) -> Example:
    m = DualBert().train()
    return m, (torch.randint(0, 800, (batch, qlen)), torch.randint(0, 800, (batch, dlen))), {}


def dual_bert_per_layer(model: nn.Module) -> nn.Module:
    """Hugging Face's per-layer checkpointing of both BERT towers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for tower in (model.q, model.d):
            tower.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
    return model

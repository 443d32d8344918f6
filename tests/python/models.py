"""Models for the PyTorch tests, small enough for a 2-core CPU: Hugging Face
models built from configs (random weights, nothing downloaded), and CNNs
defined here (torchvision has no CPU build on this machine)."""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import torch
from torch import nn
import torch.nn.functional as F

Example = Tuple[nn.Module, tuple, dict]


def _quiet_transformers() -> None:
    import transformers
    transformers.logging.set_verbosity_error()


def gpt2(layers: int = 3, width: int = 128, batch: int = 2, seq: int = 64,
         vocab: int = 256, dropout: float = 0.1) -> Example:
    _quiet_transformers()
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=vocab, n_positions=seq,
                     use_cache=False, bos_token_id=0, eos_token_id=0, resid_pdrop=dropout,
                     embd_pdrop=dropout, attn_pdrop=dropout)
    m = GPT2LMHeadModel(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


def llama(layers: int = 3, width: int = 128, batch: int = 2, seq: int = 64,
          vocab: int = 256) -> Example:
    _quiet_transformers()
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                      max_position_embeddings=seq, use_cache=False, bos_token_id=0,
                      eos_token_id=0, pad_token_id=0)
    m = LlamaForCausalLM(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


def bert(layers: int = 3, width: int = 128, batch: int = 2, seq: int = 64,
         vocab: int = 256) -> Example:
    _quiet_transformers()
    from transformers import BertConfig, BertModel
    cfg = BertConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                     num_attention_heads=4, vocab_size=vocab, max_position_embeddings=seq)
    m = BertModel(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq // 2:] = 0
    return m, (ids,), {"attention_mask": mask}


def t5(layers: int = 3, width: int = 128, batch: int = 2, seq: int = 64,
       vocab: int = 256) -> Example:
    """An encoder-decoder: every decoder layer's cross-attention reads the
    encoder's output, and every layer reads a position bias made from a
    parameter in the first."""
    _quiet_transformers()
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=vocab, d_model=width, d_ff=2 * width, num_layers=layers,
                   num_decoder_layers=layers, num_heads=4, d_kv=width // 4,
                   decoder_start_token_id=0, pad_token_id=0, dropout_rate=0.0, use_cache=False)
    m = T5ForConditionalGeneration(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": torch.randint(0, vocab, (batch, seq // 2))}


def whisper(layers: int = 3, width: int = 128, batch: int = 2, frames: int = 64,
            vocab: int = 256) -> Example:
    """An encoder-decoder on audio features: its encoder ends in a norm that
    makes the held output, so recomputing that stage must make it again."""
    _quiet_transformers()
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    cfg = WhisperConfig(vocab_size=vocab, d_model=width, encoder_layers=layers,
                        decoder_layers=layers, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=2 * width,
                        decoder_ffn_dim=2 * width, num_mel_bins=16,
                        max_source_positions=frames // 2, max_target_positions=frames,
                        decoder_start_token_id=0, pad_token_id=1, use_cache=False)
    m = WhisperForConditionalGeneration(cfg).train()
    feats = torch.randn(batch, 16, frames)
    return m, (feats,), {"labels": torch.randint(2, vocab, (batch, frames // 4))}


def vit(layers: int = 3, width: int = 128, batch: int = 2, image: int = 64) -> Example:
    _quiet_transformers()
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                    num_attention_heads=4, image_size=image, patch_size=8, num_labels=10)
    m = ViTForImageClassification(cfg).train()
    x = torch.randn(batch, 3, image, image)
    return m, (x,), {"labels": torch.randint(0, 10, (batch,))}


# -- CNNs ---------------------------------------------------------------------

class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += idt
        return self.relu(out)


class ResNet(nn.Module):
    """ResNet-50's layout (3, 4, 6, 3 bottlenecks); `base` scales the widths."""

    def __init__(self, layers: Tuple[int, ...] = (3, 4, 6, 3), base: int = 16,
                 classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, stages = base, []
        for i, n in enumerate(layers):
            width = base * 2 ** i
            blocks = []
            for k in range(n):
                blocks.append(Bottleneck(cin, width, 2 if k == 0 and i > 0 else 1))
                cin = width * 4
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, 1, 1, bias=False)

    def forward(self, feats: List[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseNet(nn.Module):
    """DenseNet-121's layout (6, 12, 24, 16 layers), torchvision's list form."""

    def __init__(self, blocks: Tuple[int, ...] = (6, 12, 24, 16), growth: int = 8,
                 classes: int = 10) -> None:
        super().__init__()
        c = 2 * growth
        self.stem = nn.Sequential(nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.ModuleList()
        self.trans = nn.ModuleList()
        for i, n in enumerate(blocks):
            layers = nn.ModuleList()
            for k in range(n):
                layers.append(DenseLayer(c + k * growth, growth))
            self.blocks.append(layers)
            c += n * growth
            if i + 1 < len(blocks):
                self.trans.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                                                nn.Conv2d(c, c // 2, 1, bias=False),
                                                nn.AvgPool2d(2, 2)))
                c //= 2
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for i, layers in enumerate(self.blocks):
            feats = [x]
            for layer in layers:
                feats.append(layer(feats))
            x = torch.cat(feats, 1)
            if i < len(self.trans):
                x = self.trans[i](x)
        x = F.adaptive_avg_pool2d(F.relu(self.norm(x)), 1)
        return self.fc(torch.flatten(x, 1))


class UNet(nn.Module):
    """Encoder-decoder with long skip connections (few articulation points)."""

    def __init__(self, c: int = 8, depth: int = 3) -> None:
        super().__init__()
        self.inc = self._double(3, c)
        self.downs = nn.ModuleList(self._double(c * 2 ** i, c * 2 ** (i + 1)) for i in range(depth))
        self.ups = nn.ModuleList(nn.ConvTranspose2d(c * 2 ** (i + 1), c * 2 ** i, 2, 2)
                                 for i in reversed(range(depth)))
        self.decs = nn.ModuleList(self._double(c * 2 ** (i + 1), c * 2 ** i)
                                  for i in reversed(range(depth)))
        self.out = nn.Conv2d(c, 2, 1)

    @staticmethod
    def _double(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.inc(x)]
        for d in self.downs:
            skips.append(d(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up, dec in zip(self.ups, self.decs):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.out(x)


class PairBlock(nn.Module):
    """A user block that takes and returns a pair of streams."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.f = nn.Linear(d, d)
        self.g = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x2 = x + self.drop(torch.tanh(self.f(y)))
        y2 = y * torch.sigmoid(self.g(x2))
        return x2, y2


class PairNet(nn.Module):
    def __init__(self, d: int = 64, n: int = 6) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 2 * d)
        self.blocks = nn.ModuleList(PairBlock(d) for _ in range(n))
        self.head = nn.Linear(2 * d, 4)

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        x, y = self.inp(x).chunk(2, -1)
        for b in self.blocks:
            x, y = b(x, y)
        out = self.head(torch.cat([x, y], -1))
        return {"out": out, "aux": (x.mean(), y.mean())}


class ConvNeXtBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1 = nn.Linear(c, 4 * c)
        self.pw2 = nn.Linear(4 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """Depthwise convolutions, whose CPU backward allocates large temporaries."""

    def __init__(self, c: int = 32, n: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, 4)
        self.blocks = nn.Sequential(*[ConvNeXtBlock(c) for _ in range(n)])
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Residual(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1),
                               nn.Linear(2 * d, d))

    def forward(self, h: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return h + self.f(h) * scale


class Gated(nn.Module):
    """Data-dependent control flow after the blocks: torch.export cannot
    capture it, so remat takes the module path."""

    def __init__(self, d: int = 64, n: int = 6) -> None:
        super().__init__()
        self.emb = nn.Linear(16, d)
        self.blocks = nn.ModuleList(Residual(d) for _ in range(n))
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        scale = torch.sigmoid(h.detach().mean(-1, keepdim=True))  # a side input of every block
        for b in self.blocks:
            h = b(h, scale)
        if h.mean() > 0:
            h = h * 2
        return self.head(h)


def resnet50(batch: int = 2, image: int = 64) -> Example:
    return ResNet().train(), (torch.randn(batch, 3, image, image),), {}


def densenet121(batch: int = 2, image: int = 64) -> Example:
    return DenseNet().train(), (torch.randn(batch, 3, image, image),), {}


def unet(batch: int = 2, image: int = 32) -> Example:
    return UNet().train(), (torch.randn(batch, 3, image, image),), {}


def pairnet(batch: int = 8) -> Example:
    return PairNet().train(), (torch.randn(batch, 32, 16),), {}


def convnext(batch: int = 2, image: int = 64) -> Example:
    return ConvNeXt().train(), (torch.randn(batch, 3, image, image),), {}


def gated(batch: int = 8) -> Example:
    return Gated().train(), (torch.randn(batch, 32, 16),), {}


def mlp(batch: int = 64) -> Example:
    """Linear and ReLU as separate modules."""
    layers: List[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(256, 10)).train(), (torch.randn(batch, 256),), {}


ALL: Dict[str, Callable[[], Example]] = {
    "gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "whisper": whisper, "vit": vit,
    "resnet50": resnet50,
    "densenet121": densenet121, "unet": unet, "pairnet": pairnet, "convnext": convnext,
    "gated": gated, "mlp": mlp}


# -- the shapes of issue 24: a running auxiliary loss, a parallel residual,
# mixtures of experts, two towers, a state-space model ------------------------------------

class MoEBlock(nn.Module):
    """A block that returns (hidden, aux + its load-balancing loss): the
    running auxiliary loss crosses every block boundary, and autograd
    saves it nowhere (an add saves nothing)."""

    def __init__(self, d: int, experts: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(),
                                                   nn.Linear(2 * d, d)) for _ in range(experts))

    def forward(self, h: torch.Tensor, aux: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x = self.norm(h)
        p = self.router(x).softmax(-1)
        y = sum(p[..., e:e + 1] * ex(x) for e, ex in enumerate(self.experts))
        aux = aux + (p.mean(dim=(0, 1)) ** 2).sum()
        return h + y, aux  # type: ignore[return-value]


class MoEStack(nn.Module):
    def __init__(self, d: int = 32, blocks: int = 6) -> None:
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.blocks = nn.ModuleList(MoEBlock(d) for _ in range(blocks))
        self.head = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        aux = h.new_zeros(())
        for b in self.blocks:
            h, aux = b(h, aux)
        return self.head(h).pow(2).mean() + 0.01 * aux


def moestack(batch: int = 4, seq: int = 32, d: int = 32, blocks: int = 6) -> Example:
    return MoEStack(d, blocks).train(), (torch.randn(batch, seq, d),), {}


def neox(layers: int = 3, width: int = 64, batch: int = 2, seq: int = 32,
         vocab: int = 256) -> Example:
    """GPT-NeoX's parallel residual: x + attn(ln1(x)) + mlp(ln2(x))."""
    _quiet_transformers()
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=4 * width,
                        num_attention_heads=4, vocab_size=vocab, max_position_embeddings=seq,
                        use_cache=False, bos_token_id=0, eos_token_id=0, hidden_dropout=0.0,
                        attention_dropout=0.0, use_parallel_residual=True)
    m = GPTNeoXForCausalLM(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


def mixtral(layers: int = 2, width: int = 64, batch: int = 2, seq: int = 32,
            vocab: int = 256) -> Example:
    """Mixture of experts with a load-balancing loss over every layer's router."""
    _quiet_transformers()
    from transformers import MixtralConfig, MixtralForCausalLM
    cfg = MixtralConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                        max_position_embeddings=seq, num_local_experts=4, num_experts_per_tok=2,
                        use_cache=False, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                        output_router_logits=True)
    m = MixtralForCausalLM(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


def qwen2moe(layers: int = 2, width: int = 64, batch: int = 2, seq: int = 32,
             vocab: int = 256) -> Example:
    """Mixture of experts with a shared expert."""
    _quiet_transformers()
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    cfg = Qwen2MoeConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                         moe_intermediate_size=width, shared_expert_intermediate_size=width,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                         max_position_embeddings=seq, num_experts=4, num_experts_per_tok=2,
                         use_cache=False, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                         output_router_logits=True)
    m = Qwen2MoeForCausalLM(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


def clip(layers: int = 2, width: int = 64, batch: int = 4, seq: int = 16, vocab: int = 256,
         image: int = 32) -> Example:
    """Two towers joined by a contrastive loss (return_loss)."""
    _quiet_transformers()
    from transformers import CLIPConfig, CLIPModel
    cfg = CLIPConfig(text_config=dict(num_hidden_layers=layers, hidden_size=width,
                                      intermediate_size=2 * width, num_attention_heads=4,
                                      vocab_size=vocab, max_position_embeddings=seq),
                     vision_config=dict(num_hidden_layers=layers, hidden_size=width,
                                        intermediate_size=2 * width, num_attention_heads=4,
                                        image_size=image, patch_size=8),
                     projection_dim=width)
    m = CLIPModel(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids, torch.randn(batch, 3, image, image)), {"return_loss": True}


def mamba(layers: int = 2, width: int = 32, batch: int = 2, seq: int = 16,
          vocab: int = 256) -> Example:
    """A state-space model (transformers' sequential scan on CPU)."""
    _quiet_transformers()
    from transformers import MambaConfig, MambaForCausalLM
    cfg = MambaConfig(num_hidden_layers=layers, hidden_size=width, state_size=8,
                      vocab_size=vocab, use_cache=False, bos_token_id=0, eos_token_id=0,
                      pad_token_id=0)
    m = MambaForCausalLM(cfg).train()
    ids = torch.randint(0, vocab, (batch, seq))
    return m, (ids,), {"labels": ids}


ISSUE24: Dict[str, Callable[[], Example]] = {
    "moestack": moestack, "neox": neox, "mixtral": mixtral, "qwen2moe": qwen2moe, "clip": clip,
    "mamba": mamba}

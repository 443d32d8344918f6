"""Small model builders for remat: a GPT-style transformer block stack as an
nn.Sequential of stages (embedding, blocks, head), ready for remat.torch."""
import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GPTEmbedding", "GPTBlock", "GPTHead", "gpt"]


class GPTEmbedding(nn.Module):
    """Token ids (batch, seq) -> token + position embeddings, with dropout."""

    def __init__(self, vocab, d_model, seq_len, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        nn.init.normal_(self.pos, std=0.02)
        self.drop = nn.Dropout(dropout)

    def forward(self, idx):
        t = idx.shape[1]
        return self.drop(self.tok(idx) + self.pos[:, :t])


class GPTBlock(nn.Module):
    """Pre-norm block: causal self-attention then an MLP, both residual."""

    def __init__(self, d_model, n_head, dropout=0.0):
        super().__init__()
        if d_model % n_head:
            raise ValueError("GPTBlock: d_model %d is not a multiple of n_head %d"
                             % (d_model, n_head))
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        h = self.n_head
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = self.attn_drop(att.masked_fill(mask, float("-inf")).softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPTHead(nn.Module):
    """Final layer norm and the vocabulary projection: logits (batch, seq, vocab)."""

    def __init__(self, d_model, vocab):
        super().__init__()
        self.ln = nn.LayerNorm(d_model)
        self.lm = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        return self.lm(self.ln(x))


def gpt(vocab=256, n_layer=4, n_head=4, d_model=64, seq_len=32, dropout=0.0):
    """A GPT-style stack as nn.Sequential: embedding, n_layer blocks, head.
    Input: token ids (batch, seq <= seq_len), int64; output: logits."""
    return nn.Sequential(GPTEmbedding(vocab, d_model, seq_len, dropout),
                         *[GPTBlock(d_model, n_head, dropout) for _ in range(n_layer)],
                         GPTHead(d_model, vocab))

"""A next-token language model as PyTorch 1.13 can write one: token and
position embeddings, a pre-norm block with causal self-attention
(nn.MultiheadAttention under a mask), and the output head tied to the token
embedding. Its output is a row of logits per position, [T, vocab]: trained
with a label per position (Note [Token losses] in trident's graph/op_graph.h)."""
import torch
from torch import nn


class CausalLM(nn.Module):
    def __init__(self, vocab=40, dim=16, seq=12, heads=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.1 * torch.randn(seq, dim))
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)
        self.ln_f = nn.LayerNorm(dim)
        # True where a position may not look: every later one.
        self.register_buffer("future", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.future, need_weights=False)[0]
        x = x + self.proj(torch.nn.functional.gelu(self.fc(self.ln2(x))))
        return self.ln_f(x) @ self.tok.weight.t()

"""A multi-branch encoder: each modality has its own input and its own
encoder (a small attention block over a token sequence, an MLP over a
feature vector, a convolution over an image); their summaries are fused."""
import torch
from torch import nn


class TokenBranch(nn.Module):
    def __init__(self, vocab, dim, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.scale = dim ** -0.5

    def forward(self, tokens):
        x = self.norm(self.embed(tokens))
        att = torch.softmax(torch.matmul(self.q(x), self.k(x).transpose(1, 2)) * self.scale, dim=-1)
        return torch.mean(torch.matmul(att, self.v(x)), dim=1)


class MultiModal(nn.Module):
    def __init__(self, vocab=200, dim=16, features=12, classes=5):
        super().__init__()
        self.text = TokenBranch(vocab, dim, 2)
        self.tabular = nn.Sequential(nn.Linear(features, 32), nn.GELU(), nn.Linear(32, dim), nn.LayerNorm(dim))
        self.vision = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                    nn.Linear(8, dim))
        self.fuse = nn.Sequential(nn.Linear(3 * dim, 32), nn.Sigmoid(), nn.Linear(32, classes))

    def forward(self, tokens, table, picture):
        return self.fuse(torch.cat([self.text(tokens), self.tabular(table), self.vision(picture)], dim=1))

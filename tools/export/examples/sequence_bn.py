"""A sequence classifier with self-attention (nn.MultiheadAttention), a 1-d
convolution with BatchNorm, and chunk/stack pooling."""
import torch
from torch import nn


class SequenceBN(nn.Module):
    def __init__(self, vocab=50, dim=16, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv1d(dim, dim, 3, padding=1)
        self.bn = nn.BatchNorm1d(dim)
        self.head = nn.Linear(2 * dim, classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = self.norm(x + self.attn(x, x, x)[0])  # torch.fx cannot unpack a, _ = ...
        y = torch.relu(self.bn(self.conv(x.transpose(1, 2))))
        halves = torch.chunk(y, 2, dim=2)
        z = torch.stack([halves[0].mean(dim=2), halves[1].mean(dim=2)], dim=1)
        return self.head(z.flatten(1))

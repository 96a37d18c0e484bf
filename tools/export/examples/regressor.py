"""A regression model: an MLP with a residual block that predicts three
continuous targets (trained with the mse loss)."""
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, features=10, hidden=32, targets=3):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.block = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, hidden))
        self.out = nn.Linear(hidden, targets)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return self.out(h + self.block(h))

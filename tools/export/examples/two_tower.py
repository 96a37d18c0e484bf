"""A two-tower recommender: a user tower over bags of item ids the user has
seen (EmbeddingBag, mean) and dense features, an item tower over the
candidate's tag ids (EmbeddingBag, sum); the towers meet in an MLP that
classifies the interaction (e.g. skip / click / buy)."""
import torch
from torch import nn


class TwoTower(nn.Module):
    def __init__(self, items=500, tags=100, dim=16, dense=8, classes=3):
        super().__init__()
        self.history = nn.EmbeddingBag(items, dim, mode="mean")
        self.user_fc = nn.Linear(dim + dense, 32)
        self.tags = nn.EmbeddingBag(tags, dim, mode="sum")
        self.item_fc = nn.Linear(dim, 32)
        self.top = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, classes))

    def forward(self, history, dense, tags):
        user = torch.relu(self.user_fc(torch.cat([self.history(history), dense], dim=1)))
        item = torch.tanh(self.item_fc(self.tags(tags)))
        return self.top(torch.cat([user, item], dim=1))

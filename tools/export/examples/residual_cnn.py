"""A small residual CNN for 28x28 grey images, written as a PyTorch user
would (not one of trident's zoo models)."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.act(self.conv1(x))
        return torch.relu(x + self.conv2(y))


class ResidualCNN(nn.Module):
    def __init__(self, channels=8, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, channels, 3, stride=2, padding=1)
        self.block1 = Block(channels)
        self.pool = nn.MaxPool2d(2)
        self.block2 = Block(channels)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))

    def forward(self, image):
        x = torch.relu(self.stem(image))
        x = self.pool(self.block1(x))
        return self.head(self.block2(x))

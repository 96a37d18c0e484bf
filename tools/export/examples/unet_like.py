"""An encoder-decoder with a long skip connection (U-Net-like): features of
the first level cross the whole network to meet the deepest ones."""
import torch
from torch import nn


class UNetLike(nn.Module):
    def __init__(self, width=8, classes=10):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU())
        self.down1 = nn.MaxPool2d(2)
        self.enc2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU())
        self.down2 = nn.MaxPool2d(2)
        self.bottom = nn.Sequential(nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU())
        self.skip = nn.AvgPool2d(4)  # the long skip: level 1 brought to the bottom's 7x7
        self.dec = nn.Sequential(nn.Conv2d(3 * width, width, 1), nn.ReLU())
        self.head = nn.Linear(width * 7 * 7, classes)

    def forward(self, image):
        e1 = self.enc1(image)
        b = self.bottom(self.down2(self.enc2(self.down1(e1))))
        d = self.dec(torch.cat([b, self.skip(e1)], dim=1))
        return self.head(d.view(d.size(0), -1))

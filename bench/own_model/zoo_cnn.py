"""trident's zoo `cnn` (tiny preset) written in PyTorch as a user would, to
compare an imported model's step with the zoo's own (bench/run_own_model.sh)."""
from torch import nn


class ZooCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.pool = nn.MaxPool2d(2)
        self.act = nn.ReLU()
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.head = nn.Linear(128, 10)

    def forward(self, image):
        x = self.pool(self.act(self.conv1(image)))
        x = self.pool(self.act(self.conv2(x)))
        return self.head(self.act(self.fc1(x.flatten(1))))

"""The networks of Poseidon's evaluation (USENIX ATC'17), exactly as torchvision
builds them, for `trident-export` (bench/run_poseidon.sh):
  vgg19_22k     VGG19 with a 21,841-class head (ImageNet-22K), 229 M parameters
  inception_v3  Inception-V3 without its auxiliary head, 27 M parameters
  resnet152     ResNet-152, 60.2 M parameters
"""
import torchvision


def vgg19_22k():
    return torchvision.models.vgg19(num_classes=21841)


def inception_v3():
    return torchvision.models.inception_v3(aux_logits=False, init_weights=False)


def resnet152():
    return torchvision.models.resnet152()

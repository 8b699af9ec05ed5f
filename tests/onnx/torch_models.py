"""Models exported by PyTorch (Debian's python3-torch, torch.onnx.export at opset 17) for the
import tests (tests/onnx/onnx_import_test.cpp, OnnxTorch.*): each model is written with random
weights as <name>.onnx, with its input <name>.in.<input>.npy and PyTorch's results
<name>.out.<k>.npy, into OUT_DIR. The batch dim is exported as a symbolic dim ("batch"), and a
second input (<name>.in2.*, <name>.out2.*) of another batch size checks that it stays symbolic.

    /usr/bin/python3 torch_models.py OUT_DIR [--torchvision]

With --torchvision, resnet18 and mobilenet_v2 too when python3-torchvision is installed (the
OnnxTorch tests of those two skip when their files are absent).
"""
import pathlib
import sys

import numpy as np
import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 5))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.Sigmoid(),
            nn.AvgPool2d(2), nn.Conv2d(16, 16, 3, padding=1, groups=4), nn.Tanh())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.features(x)
        h = nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.head(h)


class LoopsAndIf(nn.Module):
    """Control flow that torch.jit.script keeps: a loop over a dim (ONNX Loop with a trip count), a
    data-dependent if (If), and a while loop on a value (Loop with a condition)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = x
        for _ in range(x.size(1)):
            h = torch.tanh(self.lin(h)) + h * 0.5
        if bool(h.sum() > 0):
            h = h * 2.0
        else:
            h = h - 1.0
        while bool(h.abs().sum() > 1.0):
            h = h * 0.5
        return h


def randomize_batchnorm(model, gen):
    # Fresh BatchNorm layers hold mean 0 and variance 1: random statistics test the formula.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.randn(m.num_features, generator=gen))
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen))


def export(out, name, model, inputs, input_names, dynamic, script=False):
    model.eval()
    if script:
        # torch.jit.script keeps Python control flow as prim::Loop / prim::If (ONNX Loop / If).
        model = torch.jit.script(model)
    with torch.no_grad():
        expected = model(*inputs[0])
        expected2 = model(*inputs[1])
    path = out / f"{name}.onnx"
    torch.onnx.export(model, inputs[0], str(path), opset_version=17, input_names=input_names,
                      output_names=["output"], dynamic_axes=dynamic, do_constant_folding=True)
    for tag, args, result in (("", inputs[0], expected), ("2", inputs[1], expected2)):
        for n, a in zip(input_names, args):
            np.save(out / f"{name}.in{tag}.{n}.npy", a.numpy())
        results = result if isinstance(result, tuple) else (result,)
        for k, r in enumerate(results):
            np.save(out / f"{name}.out{tag}.{k}.npy", r.numpy())
    print(f"wrote {path}")


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)

    export(out, "torch_mlp", Mlp(), [(torch.randn(3, 12),), (torch.randn(7, 12),)], ["x"],
           {"x": {0: "batch"}, "output": {0: "batch"}})

    cnn = SmallCnn()
    randomize_batchnorm(cnn, gen)
    export(out, "torch_cnn", cnn, [(torch.randn(2, 3, 16, 16),), (torch.randn(5, 3, 16, 16),)], ["images"],
           {"images": {0: "batch"}, "output": {0: "batch"}})

    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.1,
                                       activation="gelu", batch_first=True)
    export(out, "torch_encoder", layer, [(torch.randn(2, 5, 16),), (torch.randn(3, 5, 16),)], ["tokens"],
           {"tokens": {0: "batch"}, "output": {0: "batch"}})

    export(out, "torch_control_flow", LoopsAndIf(), [(torch.randn(3, 8),), (torch.randn(5, 8) * 3,)], ["x"],
           {"x": {0: "batch"}, "output": {0: "batch"}}, script=True)

    if "--torchvision" in sys.argv[2:]:
        try:
            import torchvision
        except ImportError:
            print("python3-torchvision is not installed: no resnet18 or mobilenet_v2")
            return
        for name in ("resnet18", "mobilenet_v2"):
            model = getattr(torchvision.models, name)(weights=None)
            randomize_batchnorm(model, gen)
            export(out, f"torch_{name}", model,
                   [(torch.randn(1, 3, 64, 64),), (torch.randn(2, 3, 64, 64),)], ["images"],
                   {"images": {0: "batch"}, "output": {0: "batch"}})


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The ONNX models of the benchmark's import rows (issue 37): torchvision's resnet18 and
mobilenet_v2 with random weights (seeded), exported by PyTorch at opset 17 with a symbolic batch,
224 x 224 RGB, into OUT_DIR as <name>.onnx, with an input for each batch size the rows use
(<name>.b<N>.npy). bench/run writes them before tg_bench (onnx_bench.cpp), bench/ort_bench.mjs
(ONNX Runtime) and torch_bench.py run.

    /usr/bin/python3 onnx_models.py OUT_DIR

Exits with status 3 (a note on stderr) when torch or torchvision cannot be imported.
"""
import pathlib
import sys

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:
    print(f"onnx_models.py: cannot import torch / torchvision ({e})", file=sys.stderr)
    sys.exit(3)

MODELS = ("resnet18", "mobilenet_v2")
BATCHES = (1, 32)
SIZE = 224


def model(name):
    """The torchvision model in eval mode with seeded random weights (the same in every process
    that asks: torch_bench.py builds PyTorch's side with it)."""
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        path = out / f"{name}.onnx"
        if not path.exists():
            torch.onnx.export(model(name), (torch.zeros(1, 3, SIZE, SIZE),), str(path), opset_version=17,
                              input_names=["images"], output_names=["logits"],
                              dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
        for batch in BATCHES:
            rng = np.random.default_rng(batch)
            np.save(out / f"{name}.b{batch}.npy", rng.random((batch, 3, SIZE, SIZE), dtype=np.float32))
    print(f"wrote {', '.join(MODELS)} into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

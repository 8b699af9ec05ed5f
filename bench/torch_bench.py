#!/usr/bin/env python3
"""The workloads of bench/workloads_bench.cpp in PyTorch, for bench/run's comparison columns.

Usage: torch_bench.py [--threads N] [--repetitions N] [--clock cpu|real] [--filter REGEX]

Prints one JSON object on stdout: {"torch_version", "threads", "clock", "results": {name:
{"median_ns", "cv", "iterations"}}} where each median is the time of one call. Exits with
status 3 (and a note on stderr) when torch cannot be imported, so that bench/run can skip it.
Run it with the Python that has torch (Debian's python3-torch: /usr/bin/python3).
"""
import argparse
import json
import re
import statistics
import sys
import time

try:
    import torch
except ImportError as e:  # optional dependency: bench/run prints the note and goes on
    print(f"torch_bench.py: cannot import torch ({e})", file=sys.stderr)
    sys.exit(3)

ROUNDS = 33  # (x * 1.01, x + 0.5, act) x 33 = 99 ops, as in workloads_bench.cpp
BATCH, IN, HIDDEN, OUT = 64, 784, 256, 10
LR = 0.01


def chain_tanh(x):
    for _ in range(ROUNDS):
        x = torch.tanh(x * 1.01 + 0.5)
    return x


def chain_relu(x):
    for _ in range(ROUNDS):
        x = torch.relu(x * 1.01 + 0.5)
    return x


@torch.jit.script
def chain_tanh_script(x: torch.Tensor) -> torch.Tensor:
    for _ in range(33):
        x = torch.tanh(x * 1.01 + 0.5)
    return x


@torch.jit.script
def chain_relu_script(x: torch.Tensor) -> torch.Tensor:
    for _ in range(33):
        x = torch.relu(x * 1.01 + 0.5)
    return x


def chain_input(n):
    return (torch.arange(n, dtype=torch.float32) % 97) * 0.01 - 0.5


class Mlp:
    def __init__(self):
        g = torch.Generator().manual_seed(0)

        def uniform(shape, scale):
            return ((torch.rand(shape, generator=g) * 2 - 1) * scale).requires_grad_()

        self.params = [uniform((IN, HIDDEN), 0.05), torch.zeros(HIDDEN, requires_grad=True),
                       uniform((HIDDEN, HIDDEN), 0.08), torch.zeros(HIDDEN, requires_grad=True),
                       uniform((HIDDEN, OUT), 0.1), torch.zeros(OUT, requires_grad=True)]
        self.x = torch.rand((BATCH, IN), generator=g) * 2 - 1
        self.y = torch.nn.functional.one_hot(torch.arange(BATCH) % OUT, OUT).float()

    def step(self):
        w1, b1, w2, b2, w3, b3 = self.params
        h1 = torch.relu(self.x @ w1 + b1)
        h2 = torch.relu(h1 @ w2 + b2)
        logits = h2 @ w3 + b3
        loss = -(self.y * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            for p, g in zip(self.params, grads):
                p.sub_(g * LR)
        return loss


def model_workloads(w):
    """bench/models_bench.cpp's models (issue 36) in PyTorch: each as PyTorch users run it
    (eager) and in the variants that can be faster - TorchScript, channels_last, frozen and
    optimize_for_inference for inference, a sparse embedding gradient - under the C++ row's
    name with torch/ in front and the variant after it."""
    g = torch.Generator().manual_seed(0)
    F = torch.nn.functional

    def train_step(loss_fn, opt):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn()
            loss.backward()
            opt.step()
            return loss
        return step

    # Transformer encoder block: B16 T64 d128 h4 FFN512, GELU, post-norm, no dropout, Adam.
    block = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu", batch_first=True)
    x = torch.randn((16, 64, 128), generator=g)
    target = torch.randn((16, 64, 128), generator=g)
    block_script = torch.jit.trace(block, (x,))
    for variant, model in (("eager", block), ("jit_trace", block_script)):
        opt = torch.optim.Adam(block.parameters(), 1e-3)
        w[f"torch/models/transformer/train_step/{variant}"] = train_step(
            (lambda m: lambda: ((m(x) - target) ** 2).mean())(model), opt)

    # LSTM: B32 T32 I64 H128, the last output through Linear(128, 10), cross-entropy, Adam.
    class LstmModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(64, 128, batch_first=True)
            self.head = torch.nn.Linear(128, 10)

        def forward(self, inputs):
            out, _ = self.lstm(inputs)
            return self.head(out[:, -1])

    lstm = LstmModel()
    lx = torch.randn((32, 32, 64), generator=g)
    ly = (torch.arange(32) * 7 + 3) % 10
    lstm_script = torch.jit.trace(lstm, (lx,))
    for variant, model in (("eager", lstm), ("jit_trace", lstm_script)):
        opt = torch.optim.Adam(lstm.parameters(), 1e-3)
        w[f"torch/models/lstm/train_step/{variant}"] = train_step(
            (lambda m: lambda: F.cross_entropy(m(lx), ly))(model), opt)

    # CNN inference, batch 256: conv32 3x3 SAME relu, pool 2, conv64 3x3 SAME relu, pool 2, Linear.
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(7 * 7 * 64, 10)).eval()
    cx = torch.rand((256, 1, 28, 28), generator=g)
    cx_last = cx.to(memory_format=torch.channels_last)
    cnn_last = torch.nn.Sequential(*cnn).eval().to(memory_format=torch.channels_last)
    with torch.no_grad():
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(cnn)))
        frozen(cx)
        frozen_last = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(cnn_last)))
        frozen_last(cx_last)

    def no_grad(fn, inputs):
        def run():
            with torch.no_grad():
                return fn(inputs)
        return run
    w["torch/models/cnn/inference/b256/eager"] = no_grad(cnn, cx)
    w["torch/models/cnn/inference/b256/channels_last"] = no_grad(cnn_last, cx_last)
    w["torch/models/cnn/inference/b256/optimize_for_inference"] = no_grad(frozen, cx)
    w["torch/models/cnn/inference/b256/optimize_for_inference_channels_last"] = no_grad(frozen_last, cx_last)

    # Embedding classifier: vocab 20000 x 64, batch 64 x 50 tokens, mean, Linear(64, 2), SGD 0.1;
    # the embedding's gradient dense (PyTorch's default) or sparse.
    tokens = ((torch.arange(64 * 50) * 7919 + 13) % 20000).reshape(64, 50)
    ey = (torch.arange(64) * 7 + 3) % 2
    for variant, sparse in (("eager", False), ("sparse", True)):
        embedding = torch.nn.Embedding(20000, 64, sparse=sparse)
        head = torch.nn.Linear(64, 2)
        opt = torch.optim.SGD(list(embedding.parameters()) + list(head.parameters()), 0.1)
        w[f"torch/models/embedding/train_step/{variant}"] = train_step(
            (lambda e, h: lambda: F.cross_entropy(h(e(tokens).mean(1)), ey))(embedding, head), opt)


def onnx_model_workloads(w):
    """PyTorch's side of the ONNX import rows (bench/onnx_models.py's models): torchvision's
    resnet18 and mobilenet_v2, eval and no_grad, at batch 1 and 32 on 224 x 224 inputs, eager,
    channels_last and frozen + optimize_for_inference. Skipped without torchvision."""
    try:
        import torchvision  # pylint: disable=import-outside-toplevel
    except ImportError:
        return
    g = torch.Generator().manual_seed(0)
    for name in ("resnet18", "mobilenet_v2"):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        last = getattr(torchvision.models, name)(weights=None).eval().to(memory_format=torch.channels_last)
        last.load_state_dict(model.state_dict())
        with torch.no_grad():
            frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
        for batch in (1, 32):
            x = torch.rand((batch, 3, 224, 224), generator=g)
            x_last = x.to(memory_format=torch.channels_last)

            def run(fn, inputs):
                def call():
                    with torch.no_grad():
                        return fn(inputs)
                return call
            w[f"torch/onnx/{name}/b{batch}/eager"] = run(model, x)
            w[f"torch/onnx/{name}/b{batch}/channels_last"] = run(last, x_last)
            w[f"torch/onnx/{name}/b{batch}/optimize_for_inference"] = run(frozen, x)


def measure(fn, repetitions, clock, min_time=0.1):
    """Median and coefficient of variation of the per-call time over `repetitions` runs, each
    long enough (min_time seconds) for the clock's resolution."""
    now = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
    fn()
    fn()  # warm-up: allocator caches, jit profiling runs
    iters = 1
    while True:
        t0 = now()
        for _ in range(iters):
            fn()
        dt = now() - t0
        if dt >= min_time * 1e9 or iters >= 1 << 24:
            break
        iters = max(iters * 2, int(iters * min_time * 1e9 / max(dt, 1) * 1.2))
    samples = []
    for _ in range(repetitions):
        t0 = now()
        for _ in range(iters):
            fn()
        samples.append((now() - t0) / iters)
    med = statistics.median(samples)
    cv = statistics.pstdev(samples) / statistics.mean(samples) if len(samples) > 1 else 0.0
    return {"median_ns": med, "cv": cv, "iterations": iters}


def workloads():
    """name -> a zero-argument callable, built lazily (jit tracing happens here)."""
    w = {}
    a, b = torch.tensor([1.5]), torch.tensor([2.5])
    w["torch/add1/eager"] = lambda: a + b
    sa, sb = torch.tensor(1.0), torch.tensor(2.0)  # 0-d, as the traced scalar a + b row
    w["torch/add_scalar/eager"] = lambda: sa + sb
    for act, eager, script in (("tanh", chain_tanh, chain_tanh_script),
                               ("relu", chain_relu, chain_relu_script)):
        for n, label in ((16, "16"), (1 << 20, "1M")):
            x = chain_input(n)
            traced = torch.jit.trace(eager, (x,))
            w[f"torch/chain/{act}/{label}/eager"] = (lambda f, x: lambda: f(x))(eager, x)
            w[f"torch/chain/{act}/{label}/jit_trace"] = (lambda f, x: lambda: f(x))(traced, x)
            w[f"torch/chain/{act}/{label}/jit_script"] = (lambda f, x: lambda: f(x))(script, x)
    # conv_bench.cpp's two convolutions, NHWC in memory (channels_last) as tracegraph's.
    g = torch.Generator().manual_seed(0)

    def nhwc(n, h, w_, c, grad=False):
        t = torch.rand((n, c, h, w_), generator=g).to(memory_format=torch.channels_last)
        return t.requires_grad_() if grad else t

    cx1, cw1 = nhwc(128, 28, 28, 1), (torch.rand((32, 1, 3, 3), generator=g) * 0.6 - 0.3).requires_grad_()
    cx2, cw2 = nhwc(128, 14, 14, 32, True), (torch.rand((64, 32, 3, 3), generator=g) * 0.1).requires_grad_()
    cdy1, cdy2 = nhwc(128, 28, 28, 32), nhwc(128, 14, 14, 64)

    def conv_forward():
        with torch.no_grad():
            return (torch.nn.functional.conv2d(cx1, cw1, padding=1),
                    torch.nn.functional.conv2d(cx2, cw2, padding=1))

    def conv_forward_backward():
        y1 = torch.nn.functional.conv2d(cx1, cw1, padding=1)
        y2 = torch.nn.functional.conv2d(cx2, cw2, padding=1)
        return (y1, y2) + torch.autograd.grad((y1, y2), (cw1, cw2, cx2), (cdy1, cdy2))

    w["torch/cnn/conv2d/forward/eager"] = conv_forward
    w["torch/cnn/conv2d/forward_backward/eager"] = conv_forward_backward
    mlp = Mlp()
    w["torch/mlp/train_step/eager"] = mlp.step
    x16 = chain_input(16)
    w["torch/trace/chain/100/jit_trace"] = lambda: torch.jit.trace(chain_tanh, (x16,))
    model_workloads(w)
    onnx_model_workloads(w)
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--clock", choices=["cpu", "real"], default="cpu")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(True)
    pattern = re.compile(args.filter) if args.filter else None
    results = {}
    for name, fn in workloads().items():
        if pattern and not pattern.search(name):
            continue
        heavy = "/1M/" in name or "trace/chain" in name or "/models/" in name or "/onnx/" in name
        results[name] = measure(fn, args.repetitions, args.clock, 0.3 if heavy else 0.1)
        print(f"  {name}: {results[name]['median_ns'] / 1e3:.1f} us", file=sys.stderr)
    json.dump({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
               "clock": args.clock, "results": results}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

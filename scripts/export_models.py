#!/usr/bin/env python3
"""Exports the torchvision CNNs of issue 20 and the transformers of issue 24 to ONNX, with a
reference input/output pair each.

    /usr/bin/python3 scripts/export_models.py OUT_DIR [--models resnet18,...] [--dynamic-hw]
                     [--width small] [--size 224] [--batch 2] [--keep-batchnorm] [--import]

For each model M, OUT_DIR gets
    M.onnx        opset 13, input "x" [batch, 3, H, W], output "y"; dim 0 is dynamic ("batch"),
                  and with --dynamic-hw dims 2 and 3 too ("height", "width")
    M.x.npy       a reference input, float32 [--batch, 3, --size, --size]
    M.y.npy       torch's output for it (eval mode), float32
and with --import also M.gbx (+ its .npy constants), written by `gearbox import` (the CLI named
by --gearbox, default build/bin/gearbox).

    /usr/bin/python3 scripts/export_models.py --traces examples/
writes the bundled traces instead (no torch needed): examples/cnn_serving.trace.jsonl
(classification serving: 200 requests, batch uniform in [1, 32], 3x224x224) and
examples/cnn_detection.trace.jsonl (seed 002's detection-style input: 40 requests, batch in
[1, 4], height and width from 10 distinct sizes, multiples of 32 in [320, 1024]). Both come from
a fixed 64-bit LCG (scripts/gen_serving_trace.py's), so they regenerate byte for byte.

Models are built from torchvision's constructors with random weights under torch.manual_seed(0)
(no downloads), in eval() mode, so BatchNorm uses its running statistics. Those are randomised
too: fresh BatchNorm layers have mean 0 and variance 1, which would make the BatchNorm import
untestable (any scale/shift mix-up would still pass). Everything is seeded, so two runs write the
same arrays; the .onnx bytes also match for the same torch version.

--keep-batchnorm exports BatchNormalization nodes (inference form, running statistics) instead
of letting the exporter fold them into the convolutions, so an import sees the ops as written.

--width small shrinks what the constructors allow, to keep CI fast: ShuffleNetV2 gets stage
widths [8, 16, 32, 64, 128] (still 16 channel shuffles), MobileNetV2 width_mult=0.25, and every
model 10 classes. ResNet-18's BasicBlock has fixed widths, so only its classifier shrinks.

Sequence models (issue 24) take int64 token ids with a dynamic batch and sequence:

    /usr/bin/python3 scripts/export_models.py OUT_DIR --models transformer_encoder [--opset 17]
                     [--batch 2] [--seq 7] [--import]

For each model M, OUT_DIR gets M.onnx (input "ids" [batch, seq], output "y"), M.ids.npy (a
reference batch of ids) and M.y.npy (torch's output for it, eval mode, float32). Each model is
one function in SEQUENCE_MODELS that builds the module under torch.manual_seed(0) and says its
inputs, outputs and dynamic axes (a SequenceModel); adding a model is adding one function.
  transformer_encoder  torch.nn.TransformerEncoder, 2 layers, d_model 128, 4 heads, batch_first,
                       feed-forward 2048 (torch's default), after an nn.Embedding of 1000 tokens
                       (the acceptance model of issue 24 item 1). Opset 13 exports LayerNorm
                       decomposed (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add); opset 17 as
                       LayerNormalization.
"""
import argparse
import collections
import os
import subprocess
import sys
import warnings

MODELS = ("shufflenet_v2_x0_5", "resnet18", "mobilenet_v2")  # the CNNs (issue 20)


def build(name, width):
    import torch
    import torchvision

    torch.manual_seed(0)
    small = width == "small"
    classes = 10 if small else 1000
    if name == "shufflenet_v2_x0_5":
        if small:
            from torchvision.models.shufflenetv2 import ShuffleNetV2

            model = ShuffleNetV2([4, 8, 4], [8, 16, 32, 64, 128], num_classes=classes)
        else:
            model = torchvision.models.shufflenet_v2_x0_5(weights=None)
    elif name == "resnet18":
        model = torchvision.models.resnet18(weights=None, num_classes=classes)
    elif name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(
            weights=None, num_classes=classes, width_mult=0.25 if small else 1.0
        )
    else:
        raise SystemExit(f"export_models.py: unknown model {name} (known: "
                         f"{', '.join(MODELS + tuple(SEQUENCE_MODELS))})")
    # Non-trivial running statistics (see the module docstring); drawn after the weights, from
    # the same seeded generator, so the whole model is a function of the seed.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def export(name, out_dir, dynamic_hw, width, size, batch, keep_batchnorm=False):
    import numpy as np
    import torch

    model = build(name, width)
    torch.manual_seed(1)
    x = torch.randn(batch, 3, size, size)
    with torch.no_grad():
        y = model(x)
    axes = {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}
    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        # PRESERVE warns about constant folding for models in training mode; ours is in eval().
        warnings.filterwarnings("ignore", message="It is recommended that constant folding")
        _onnx_export(torch, model, x, path, axes, keep_batchnorm)
    np.save(os.path.join(out_dir, f"{name}.x.npy"), x.numpy())
    np.save(os.path.join(out_dir, f"{name}.y.npy"), y.numpy())
    return path


def _onnx_export(torch, model, x, path, axes, keep_batchnorm):
    torch.onnx.export(
        model, x, path, input_names=["x"], output_names=["y"], opset_version=13,
        dynamic_axes={"x": axes, "y": {0: "batch"}}, do_constant_folding=True,
        # PRESERVE keeps each module's mode: eval() BatchNorm is exported as it is, unfused.
        training=torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else
        torch.onnx.TrainingMode.EVAL,
    )


# ---- sequence models (issue 24) -----------------------------------------------------------------

# A sequence model to export: the module (eval mode), its example inputs by name (numpy
# arrays, int64 ids), its output names, and the dynamic axes of every input and output.
SequenceModel = collections.namedtuple("SequenceModel", "module inputs outputs dynamic_axes")


def transformer_encoder(batch=2, seq=7):
    """torch.nn.TransformerEncoder (2 layers, d_model 128, 4 heads, batch_first) behind an
    nn.Embedding of 1000 tokens: ids [batch, seq] -> y [batch, seq, 128]."""
    import numpy as np
    import torch

    torch.manual_seed(0)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 128)
            layer = torch.nn.TransformerEncoderLayer(128, 4, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, ids):
            return self.encoder(self.embed(ids))

    module = Encoder().eval()
    # Fresh LayerNorms are weight 1, bias 0, which would make a scale/bias mix-up untestable
    # (and torch then shares the equal initializers through Identity nodes): drawn from the same
    # seeded generator, after the weights.
    for m in module.modules():
        if isinstance(m, torch.nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    ids = np.random.default_rng(1).integers(0, 1000, size=(batch, seq)).astype(np.int64)
    axes = {0: "batch", 1: "seq"}
    return SequenceModel(module, {"ids": ids}, ["y"], {"ids": axes, "y": axes})


# name -> the function building it (keyword arguments: batch, seq).
SEQUENCE_MODELS = {"transformer_encoder": transformer_encoder}


def export_sequence(name, out_dir, opset=13, batch=2, seq=7):
    """Writes OUT_DIR/name.onnx, name.<input>.npy and name.<output>.npy; returns the .onnx path."""
    import numpy as np
    import torch

    spec = SEQUENCE_MODELS[name](batch=batch, seq=seq)
    args = tuple(torch.from_numpy(a) for a in spec.inputs.values())
    with torch.no_grad():
        outs = spec.module(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        # The encoder's fast path (nested tensors) is off; torch still warns about it.
        warnings.filterwarnings("ignore", category=UserWarning)
        torch.onnx.export(spec.module, args, path, input_names=list(spec.inputs),
                          output_names=spec.outputs, opset_version=opset,
                          dynamic_axes=spec.dynamic_axes, do_constant_folding=True)
    for k, a in spec.inputs.items():
        np.save(os.path.join(out_dir, f"{name}.{k}.npy"), a)
    for k, o in zip(spec.outputs, outs):
        np.save(os.path.join(out_dir, f"{name}.{k}.npy"), o.numpy())
    return path


class _Lcg:
    """scripts/gen_serving_trace.py's generator (Knuth's MMIX constants)."""

    def __init__(self, seed):
        self.state = seed

    def uniform(self, lo, hi):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return lo + (self.state >> 33) % (hi - lo + 1)


def write_traces(out_dir):
    rng = _Lcg(20261124)
    path = os.path.join(out_dir, "cnn_serving.trace.jsonl")
    with open(path, "w") as f:
        f.write("# 200 requests, batch uniform in [1, 32], 3x224x224 images "
                "(scripts/export_models.py --traces)\n")
        for _ in range(200):
            f.write(f'{{"x": [{rng.uniform(1, 32)}, 3, 224, 224]}}\n')
    sizes = []
    while len(sizes) < 10:  # 10 distinct (height, width) pairs
        hw = (32 * rng.uniform(10, 32), 32 * rng.uniform(10, 32))
        if hw not in sizes:
            sizes.append(hw)
    path2 = os.path.join(out_dir, "cnn_detection.trace.jsonl")
    with open(path2, "w") as f:
        f.write("# 40 requests, batch in [1, 4], 10 distinct image sizes (multiples of 32 in "
                "[320, 1024]), each size at least once (scripts/export_models.py --traces)\n")
        for k in range(40):
            h, w = sizes[k] if k < len(sizes) else sizes[rng.uniform(0, len(sizes) - 1)]
            f.write(f'{{"x": [{rng.uniform(1, 4)}, 3, {h}, {w}]}}\n')
    return [path, path2]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--traces", action="store_true",
                   help="write the bundled traces to OUT_DIR instead of exporting models")
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated: the CNNs (default all of them) and sequence models "
                        f"({', '.join(SEQUENCE_MODELS)})")
    p.add_argument("--opset", type=int, default=13, help="sequence models' ONNX opset")
    p.add_argument("--seq", type=int, default=7, help="sequence models' reference length")
    p.add_argument("--dynamic-hw", action="store_true", help="dims 2, 3 dynamic too")
    p.add_argument("--width", choices=("full", "small"), default="full")
    p.add_argument("--size", type=int, default=224, help="reference input height and width")
    p.add_argument("--batch", type=int, default=2, help="reference input batch")
    p.add_argument("--keep-batchnorm", action="store_true",
                   help="export BatchNormalization nodes instead of folding them into Conv")
    p.add_argument("--import", dest="do_import", action="store_true",
                   help="then run `gearbox import` on each export")
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                         "gearbox")
    p.add_argument("--gearbox", default=built if os.path.exists(built) else "gearbox",
                   help="the CLI for --import (default: build/bin/gearbox, else gearbox on PATH)")
    args = p.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.traces:
        for path in write_traces(args.out_dir):
            print(f"wrote {path}")
        return 0
    status = 0
    for name in args.models.split(","):
        if name in SEQUENCE_MODELS:
            path = export_sequence(name, args.out_dir, args.opset, args.batch, args.seq)
        else:
            path = export(name, args.out_dir, args.dynamic_hw, args.width, args.size, args.batch,
                          args.keep_batchnorm)
        print(f"wrote {path}")
        if args.do_import:
            gbx = os.path.join(args.out_dir, f"{name}.gbx")
            r = subprocess.run([args.gearbox, "import", path, "-o", gbx])
            status = status or r.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())

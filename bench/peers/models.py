"""The models bench/peers/peers.py runs in every runtime: one row each in MODELS.

A row is a seeded PyTorch module (so the driver, which exports it to ONNX, and the torch worker,
which runs it, build the same weights from the seed, and the agreement check before timing
proves it) and the shape of its one input for a batch. Adding a model is one row.
Nothing here imports torch at import time, so the driver's pure helpers (and their pytest) load
without it.
"""
import importlib.util
import os
from dataclasses import dataclass
from typing import Callable, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Model:
    build: Callable[[], "object"]  # () -> torch.nn.Module in eval() mode, seeded
    input_shape: Callable[[int], Tuple[int, ...]]  # batch -> the input's shape


def _export_models():
    """scripts/export_models.py, the builder the import tests use (torchvision, seeded)."""
    spec = importlib.util.spec_from_file_location(
        "export_models", os.path.join(REPO, "scripts", "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_mlp():
    """The MLP of issue 23: 1024 -> 1024 (ReLU) -> 256, seeded random weights."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
    return model.eval()


def build_torchvision(name):
    """A full-width torchvision CNN as scripts/export_models.py builds it (1000 classes)."""
    return lambda: _export_models().build(name, "full")


def build_encoder():
    """A BERT-style encoder: torch.nn.TransformerEncoder, 2 layers of d_model 256, 4 heads,
    feed-forward 1024, batch_first, on float inputs [batch, 128, 256] (the embedding left out:
    the workers pass float32 inputs). torch runs it on its fused inference path
    (_transformer_encoder_layer_fwd) under inference_mode, as a user's eval() call would; the
    ONNX export traces the unfused layers."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


# The CNNs run at 224x224, the size of the tutorial's serving trace (docs/tutorial.md,
# examples/cnn_serving.trace.jsonl).
IMAGE = 224
MODELS = {
    "mlp": Model(build_mlp, lambda b: (b, 1024)),
    "resnet18": Model(build_torchvision("resnet18"), lambda b: (b, 3, IMAGE, IMAGE)),
    "shufflenet_v2_x0_5": Model(build_torchvision("shufflenet_v2_x0_5"),
                                lambda b: (b, 3, IMAGE, IMAGE)),
    "mobilenet_v2": Model(build_torchvision("mobilenet_v2"), lambda b: (b, 3, IMAGE, IMAGE)),
    "encoder": Model(build_encoder, lambda b: (b, 128, 256)),
}


def export_onnx(name, path):
    """Exports MODELS[name] to `path` as the import tests do: opset 13, input "x", output "y",
    dim 0 dynamic ("batch"), constants folded (BatchNorm folded into the convolutions)."""
    import torch

    model = MODELS[name].build()
    example = torch.zeros(MODELS[name].input_shape(1))
    torch.onnx.export(
        model, example, path, input_names=["x"], output_names=["y"], opset_version=13,
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, do_constant_folding=True,
        training=torch.onnx.TrainingMode.EVAL)

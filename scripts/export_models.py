#!/usr/bin/env python3
"""Exports the torchvision CNNs of issue 20 to ONNX, with a reference input/output pair each.

    /usr/bin/python3 scripts/export_models.py OUT_DIR [--models resnet18,...] [--dynamic-hw]
                     [--width small] [--size 224] [--batch 2] [--keep-batchnorm] [--import]
                     [--seq 7] [--past 5] [--verify]      (the last three: transformers)

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

Transformers (issue 24), --models bert_encoder,gpt_prefill,gpt_decode,gpt_decode_masked:
explicit torch modules
(not torch.nn.Transformer*), so every attention is the five ops an attention fusion matches,
    MatMul(q, k^T) -> Mul(scale) -> Add(mask) -> Softmax(-1) -> MatMul(probs, v)
(gpt_decode has no mask: its one query may see every cached position, so it is four ops).
Opset 14 (the causal mask is a Trilu). Each writes M.onnx and M.<name>.npy for every input and
output (a reference pair from torch), and prints the ONNX node count and op-type histogram.
    bert_encoder  input_ids i64 [batch, seq], attention_mask f32 [batch, seq] (1 keep, 0 pad)
                  -> hidden f32 [batch, seq, d]. Token + position embeddings, LayerNorm, N
                  post-LN encoder layers (attention, GELU erf form), as BERT.
    gpt_prefill   input_ids i64 [batch, seq] -> logits [batch, seq, vocab], present_k and
                  present_v [layers, batch, heads, seq, head_dim]: the KV cache of the prompt.
                  Causal mask (triu of -10000 above the diagonal), N pre-LN blocks (GELU tanh
                  form, as GPT-2), final LayerNorm, LM head tied to the token embedding.
    gpt_decode    one decode step: input_ids i64 [batch, 1], past_k and past_v [layers, batch,
                  heads, past, head_dim] -> logits [batch, 1, vocab], present_k and present_v
                  [layers, batch, heads, past + 1, head_dim]. The new token's position is past,
                  so past < max_positions (beyond it the position slice is empty and the add
                  fails to broadcast, in torch as in the export).
    gpt_decode_masked  the decode step a server buckets: input_ids i64 [batch, 1], past_k and
                  past_v [layers, batch, heads, past, head_dim], past_mask f32 [batch, past]
                  (1 = a real cached position, 0 = an empty slot) -> logits [batch, 1, vocab],
                  new_k and new_v [layers, batch, heads, 1, head_dim] (the server appends them to
                  its cache). The new token's position is sum(past_mask), and the keys are
                  [new; past] masked by (1 - [1; past_mask]) * -10000, so a cache padded with
                  empty slots (past_mask 0) at its end gives the same logits: gears on `past`.
--width small (CI) is d=32, 4 heads of 8, 2 layers, FF 64, vocab 97, 1024 positions; --width
full is BERT-base (12 layers, d=768, 12 heads, FF 3072, vocab 30522, 512 positions) for
bert_encoder and GPT-2 small (the same widths, vocab 50257, 1024 positions) for the GPT pair:
benches only (~0.45-0.65 GB per .onnx). The export traces at --batch, --seq and --past (default
2, 7 and 5: none is 1, which the exporter could bake in as a broadcast), and dims stay dynamic.
--verify then runs each .onnx with scripts/onnx_numpy_eval.py (python3-onnx 1.12 has no
onnx.reference) at the traced shape and at two others (batch 1 / seq 1, batch 3 / seq 11 /
past 9) and compares with torch: the export holds at sizes it was not traced at.
"""
import argparse
import collections
import os
import subprocess
import sys
import warnings

MODELS = ("shufflenet_v2_x0_5", "resnet18", "mobilenet_v2")


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
                         f"{', '.join(MODELS + TRANSFORMERS + tuple(SEQUENCE_MODELS))})")
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


# Transformers (issue 24). Configs by --width: "small" for CI, "full" for benches (BERT-base:
# Devlin et al. 2019, Table 1 "BERT_BASE (L=12, H=768, A=12)", FF 4H, 512 positions, the 30522
# WordPiece vocab; GPT-2 small: Radford et al. 2019, 117M/124M, the same widths, 1024
# positions, the 50257 BPE vocab).
TRANSFORMERS = ("bert_encoder", "gpt_prefill", "gpt_decode", "gpt_decode_masked")
TRANSFORMER_CONFIGS = {
    ("small", "bert"): dict(vocab=97, d=32, heads=4, layers=2, ff=64, max_pos=1024),
    ("small", "gpt"): dict(vocab=97, d=32, heads=4, layers=2, ff=64, max_pos=1024),
    ("full", "bert"): dict(vocab=30522, d=768, heads=12, layers=12, ff=3072, max_pos=512),
    ("full", "gpt"): dict(vocab=50257, d=768, heads=12, layers=12, ff=3072, max_pos=1024),
}


def transformer_config(name, width):
    return TRANSFORMER_CONFIGS[(width, "bert" if name == "bert_encoder" else "gpt")]


def _transformer_classes():
    """The modules, built on first use so the CNN exports (and --traces) need no torch here."""
    import math

    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        """Multi-head attention written out: the scores are MatMul(q, k^T), Mul(scale),
        Add(mask), Softmax, MatMul(probs, v) in the export, the pattern a fusion pass matches
        (nn.MultiheadAttention would export its own decomposition)."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
            self.scale = 1.0 / math.sqrt(self.head_dim)

        def split(self, x):  # [B, S, D] -> [B, H, S, Dh]
            b, s = x.shape[0], x.shape[1]
            return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        def attend(self, q, k, v, mask):
            scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
            if mask is not None:
                scores = scores + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, H, S, Dh]
            b, s = ctx.shape[0], ctx.shape[2]
            return self.out(ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))

        def forward(self, x, mask):
            return self.attend(self.split(self.q(x)), self.split(self.k(x)),
                               self.split(self.v(x)), mask)

    class EncoderLayer(nn.Module):  # post-LN, as BERT
        def __init__(self, c):
            super().__init__()
            self.attn = SelfAttention(c["d"], c["heads"])
            self.ln1, self.ln2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
            self.ff = nn.Sequential(nn.Linear(c["d"], c["ff"]), nn.GELU(),
                                    nn.Linear(c["ff"], c["d"]))

        def forward(self, x, mask):
            x = self.ln1(x + self.attn(x, mask))
            return self.ln2(x + self.ff(x))

    class BertEncoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.tok = nn.Embedding(c["vocab"], c["d"])
            self.pos = nn.Parameter(torch.randn(c["max_pos"], c["d"]) * 0.5)
            self.ln = nn.LayerNorm(c["d"])
            self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c["layers"]))

        def forward(self, input_ids, attention_mask):
            x = self.ln(self.tok(input_ids) + self.pos[:input_ids.shape[1]])
            # BERT's extended mask: 0 where attended, -10000 on padding, broadcast over heads
            # and queries ([B, 1, 1, S]).
            mask = (1.0 - attention_mask[:, None, None, :]) * -10000.0
            for layer in self.layers:
                x = layer(x, mask)
            return x

    class DecoderBlock(nn.Module):  # pre-LN, as GPT-2
        def __init__(self, c):
            super().__init__()
            self.attn = SelfAttention(c["d"], c["heads"])
            self.ln1, self.ln2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
            self.mlp = nn.Sequential(nn.Linear(c["d"], c["ff"]), nn.GELU(approximate="tanh"),
                                     nn.Linear(c["ff"], c["d"]))

        def forward(self, x, mask, past_k=None, past_v=None):
            """Returns the block's output and this step's whole k and v ([B, H, S(+P), Dh])."""
            a = self.attn
            h = self.ln1(x)
            q, k, v = a.split(a.q(h)), a.split(a.k(h)), a.split(a.v(h))
            if past_k is not None:
                k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            x = x + a.attend(q, k, v, mask)
            return x + self.mlp(self.ln2(x)), k, v

    class Gpt(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.tok = nn.Embedding(c["vocab"], c["d"])
            self.pos = nn.Parameter(torch.randn(c["max_pos"], c["d"]) * 0.5)
            self.blocks = nn.ModuleList(DecoderBlock(c) for _ in range(c["layers"]))
            self.ln_f = nn.LayerNorm(c["d"])

        def logits(self, x):  # the LM head, tied to the token embedding
            return torch.matmul(self.ln_f(x), self.tok.weight.t())

    class GptPrefill(Gpt):
        def forward(self, input_ids):
            s = input_ids.shape[1]
            x = self.tok(input_ids) + self.pos[:s]
            # Causal: position i attends to j <= i; -10000 above the diagonal ([S, S]).
            causal = torch.triu(torch.full((s, s), -10000.0), diagonal=1)
            ks, vs = [], []
            for block in self.blocks:
                x, k, v = block(x, causal)
                ks.append(k)
                vs.append(v)
            return self.logits(x), torch.stack(ks), torch.stack(vs)

    class GptDecode(Gpt):
        def forward(self, input_ids, past_k, past_v):
            p = past_k.shape[3]
            x = self.tok(input_ids) + self.pos[p:p + 1]  # the new token sits at position past
            ks, vs = [], []
            for layer, block in enumerate(self.blocks):
                x, k, v = block(x, None, past_k[layer], past_v[layer])
                ks.append(k)
                vs.append(v)
            return self.logits(x), torch.stack(ks), torch.stack(vs)

    class GptDecodeMasked(Gpt):
        def forward(self, input_ids, past_k, past_v, past_mask):
            b = input_ids.shape[0]
            # The new token's position: how many cached positions are real.
            p = past_mask.sum(-1).long()  # [B]
            x = self.tok(input_ids) + self.pos[p].unsqueeze(1)
            # Keys [new; past]: the padding (empty slots) stays at the end, and attention does
            # not care about the keys' order (the positions are in the embeddings).
            keep = torch.cat([torch.ones(b, 1), past_mask], dim=1)
            mask = (1.0 - keep[:, None, None, :]) * -10000.0
            ks, vs = [], []
            for layer, block in enumerate(self.blocks):
                a = block.attn
                h = block.ln1(x)
                q, k, v = a.split(a.q(h)), a.split(a.k(h)), a.split(a.v(h))
                keys = torch.cat([k, past_k[layer]], dim=2)
                values = torch.cat([v, past_v[layer]], dim=2)
                x = x + a.attend(q, keys, values, mask)
                x = x + block.mlp(block.ln2(x))
                ks.append(k)
                vs.append(v)
            return self.logits(x), torch.stack(ks), torch.stack(vs)

    return {"bert_encoder": BertEncoder, "gpt_prefill": GptPrefill, "gpt_decode": GptDecode,
            "gpt_decode_masked": GptDecodeMasked}


def build_transformer(name, width="small"):
    """The torch module of `name`, seeded: torch.manual_seed(0), default initialisation, then
    LayerNorm weights and biases randomised from the same generator (fresh ones are 1 and 0,
    which would hide a scale/shift mix-up in an import, as BatchNorm's statistics would)."""
    import torch

    if name not in TRANSFORMERS:
        raise SystemExit(f"export_models.py: unknown transformer {name} "
                         f"(known: {', '.join(TRANSFORMERS)})")
    torch.manual_seed(0)
    model = _transformer_classes()[name](transformer_config(name, width))
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def transformer_io(name, width="small"):
    """(input names, output names, dynamic axes) of a transformer export."""
    if name == "bert_encoder":
        bs = {0: "batch", 1: "seq"}
        return (["input_ids", "attention_mask"], ["hidden"],
                {"input_ids": bs, "attention_mask": bs, "hidden": bs})
    cache_in = {1: "batch", 3: "past"}
    if name == "gpt_prefill":
        cache = {1: "batch", 3: "seq"}
        return (["input_ids"], ["logits", "present_k", "present_v"],
                {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"},
                 "present_k": cache, "present_v": cache})
    if name == "gpt_decode_masked":
        new = {1: "batch"}
        return (["input_ids", "past_k", "past_v", "past_mask"], ["logits", "new_k", "new_v"],
                {"input_ids": {0: "batch"}, "past_k": cache_in, "past_v": cache_in,
                 "past_mask": {0: "batch", 1: "past"}, "logits": {0: "batch"}, "new_k": new,
                 "new_v": new})
    # The present caches are one longer than the past: ONNX names that dim on its own.
    cache_out = {1: "batch", 3: "past_plus_1"}
    return (["input_ids", "past_k", "past_v"], ["logits", "present_k", "present_v"],
            {"input_ids": {0: "batch"}, "past_k": cache_in, "past_v": cache_in,
             "logits": {0: "batch"}, "present_k": cache_out, "present_v": cache_out})


def transformer_inputs(name, width="small", batch=2, seq=7, past=5, seed=1):
    """Seeded example inputs, as numpy arrays by input name: token ids uniform over the vocab;
    bert_encoder's attention mask keeps every token of the first sequence and pads the last
    third of the others (so the mask changes the output); the GPT caches are N(0, 1);
    gpt_decode_masked's past_mask marks every cached position real except the last two of the
    second sequence (a shorter request in the batch, so the mask changes the output)."""
    import numpy as np

    c = transformer_config(name, width)
    rng = np.random.default_rng(seed)
    if name in ("gpt_decode", "gpt_decode_masked"):
        cache = (c["layers"], batch, c["heads"], past, c["d"] // c["heads"])
        inputs = {"input_ids": rng.integers(0, c["vocab"], (batch, 1), dtype=np.int64),
                  "past_k": rng.standard_normal(cache).astype(np.float32),
                  "past_v": rng.standard_normal(cache).astype(np.float32)}
        if name == "gpt_decode_masked":
            mask = np.ones((batch, past), np.float32)
            if past > 2:
                mask[1:, past - 2:] = 0
            inputs["past_mask"] = mask
        return inputs
    ids = rng.integers(0, c["vocab"], (batch, seq), dtype=np.int64)
    if name == "gpt_prefill":
        return {"input_ids": ids}
    mask = np.ones((batch, seq), np.float32)
    mask[1:, seq - seq // 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def run_torch(model, inputs):
    """The module on numpy inputs (in input order): a list of numpy outputs."""
    import torch

    with torch.no_grad():
        out = model(*(torch.from_numpy(a) for a in inputs.values()))
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def onnx_stats(path):
    """(node count, {op type: count}) of an .onnx file, op types by count then name."""
    import collections

    import onnx

    ops = collections.Counter(n.op_type for n in onnx.load(path).graph.node)
    return sum(ops.values()), dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def export_transformer(name, out_dir, width="small", batch=2, seq=7, past=5):
    """Writes OUT_DIR/NAME.onnx and NAME.<input or output>.npy (torch's reference pair at the
    traced shape); returns the .onnx path."""
    import numpy as np
    import torch

    model = build_transformer(name, width)
    inputs = transformer_inputs(name, width, batch, seq, past)
    outputs = run_torch(model, inputs)
    in_names, out_names, axes = transformer_io(name, width)
    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        # Tracing warns about converting the sizes it reads to Python ints; they are exported as
        # Shape/Gather (dynamic), which --verify checks at other sizes.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(model, tuple(torch.from_numpy(a) for a in inputs.values()), path,
                          input_names=in_names, output_names=out_names, opset_version=14,
                          dynamic_axes=axes, do_constant_folding=True)
    for k, a in list(inputs.items()) + list(zip(out_names, outputs)):
        np.save(os.path.join(out_dir, f"{name}.{k}.npy"), a)
    return path


# --verify's other shapes: size 1 everywhere it can be, and sizes unlike the traced ones.
VERIFY_SHAPES = ({"batch": 1, "seq": 1, "past": 1}, {"batch": 3, "seq": 11, "past": 9})


def verify_transformer(name, path, width="small", batch=2, seq=7, past=5):
    """Runs the .onnx with scripts/onnx_numpy_eval.py at the traced shape and at VERIFY_SHAPES
    and compares with torch. Returns [(shape, max abs difference)]; raises AssertionError when an
    output differs beyond rtol=1e-4, atol=1e-4 (float32; the evaluator's softmax, erf and
    matmul round differently from torch's)."""
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_numpy_eval  # noqa: E402

    model = build_transformer(name, width)
    graph = onnx_numpy_eval.load(path)
    results = []
    for shape in ({"batch": batch, "seq": seq, "past": past},) + VERIFY_SHAPES:
        inputs = transformer_inputs(name, width, seed=7, **shape)
        expect = run_torch(model, inputs)
        got = onnx_numpy_eval.run(graph, inputs)
        assert len(got) == len(expect), f"{name}: {len(got)} outputs, torch has {len(expect)}"
        worst = 0.0
        for out_name, g, e in zip(transformer_io(name)[1], got, expect):
            assert g.shape == e.shape, f"{name} {shape} {out_name}: {g.shape} vs torch {e.shape}"
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name} {shape} output {out_name}")
            worst = max(worst, float(np.max(np.abs(g - e))) if g.size else 0.0)
        results.append((shape, worst))
    return results


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
                   help="comma-separated, of " + ", ".join(MODELS + TRANSFORMERS)
                   + ", " + ", ".join(SEQUENCE_MODELS) + " (default the CNNs)")
    p.add_argument("--opset", type=int, default=13,
                   help="sequence models' ONNX opset (the transformers export at 14)")
    p.add_argument("--dynamic-hw", action="store_true", help="dims 2, 3 dynamic too")
    p.add_argument("--width", choices=("full", "small"), default="full")
    p.add_argument("--size", type=int, default=224, help="reference input height and width")
    p.add_argument("--batch", type=int, default=2, help="reference input batch")
    p.add_argument("--keep-batchnorm", action="store_true",
                   help="export BatchNormalization nodes instead of folding them into Conv")
    p.add_argument("--seq", type=int, default=7, help="transformers and sequence models: traced sequence length")
    p.add_argument("--past", type=int, default=5, help="gpt_decode: traced past length")
    p.add_argument("--verify", action="store_true",
                   help="transformers: run each .onnx (scripts/onnx_numpy_eval.py) at three "
                        "shapes against torch")
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
        if name in TRANSFORMERS:
            if min(args.batch, args.seq, args.past) < 2:
                raise SystemExit("export_models.py: --batch, --seq and --past must be >= 2 "
                                 "(a traced size 1 can be baked into the export)")
            path = export_transformer(name, args.out_dir, args.width, args.batch, args.seq,
                                      args.past)
            nodes, ops = onnx_stats(path)
            print(f"wrote {path}: {nodes} ONNX nodes: "
                  + ", ".join(f"{op} {n}" for op, n in ops.items()))
            if args.verify:
                for shape, diff in verify_transformer(name, path, args.width, args.batch,
                                                      args.seq, args.past):
                    print(f"  verified against torch at {shape}: max abs difference {diff:.3g}")
        elif name in SEQUENCE_MODELS:
            path = export_sequence(name, args.out_dir, args.opset, args.batch, args.seq)
            print(f"wrote {path}")
        else:
            path = export(name, args.out_dir, args.dynamic_hw, args.width, args.size,
                          args.batch, args.keep_batchnorm)
            print(f"wrote {path}")
        if args.do_import:
            gbx = os.path.join(args.out_dir, f"{name}.gbx")
            r = subprocess.run([args.gearbox, "import", path, "-o", gbx])
            status = status or r.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())

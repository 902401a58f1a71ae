#!/usr/bin/env python3
"""Writes serving traces for gearbox: one JSON object per line, one call each, input name ->
shape. Two forms.

1. Uniform batch (the original form; examples/mlp_serving.trace.jsonl):

    scripts/gen_serving_trace.py CALLS LO HI > examples/mlp_serving.trace.jsonl

   one request per line, {"x": [batch, 1024]}, batch uniform in [LO, HI].

2. LLM serving (issue 24): request lengths drawn from a distribution fitted to a published
   dataset's summary statistics, requests formed into batches, one line per call.

    scripts/gen_serving_trace.py prefill --dataset sharegpt --requests 2000 --batch 1 \\
        --input input_ids=B,S --input attention_mask=B,S --max-len 512 -o bert.trace.jsonl
    scripts/gen_serving_trace.py decode --dataset alpaca --requests 4 --batch 4 --steps 64 \\
        --input input_ids=B,1 --input past_k=2,B,4,P,8 --input past_v=2,B,4,P,8

   prefill: one line per batch: every request's prompt, padded to the batch's longest (S).
   decode:  one line per decode step of each batch (static batching: a batch runs until its
            longest output is done, or --steps steps, and never past --max-len tokens, so
            --max-len must not exceed the model's positions). P, the past (KV cache) length, is
            S + step: the prompt plus the tokens generated before this step, so it grows by
            one per line (step 0 reads the prompt's cache, as after prefill).
   --input NAME=DIMS says where the sizes go, so the trace fits any model: DIMS are comma-
   separated, each a number or B (the batch size), S (the padded prompt length) or P (decode:
   the past length), optionally +N or -N ("P+1"). `--input input_ids=B,S` puts the batch in
   dim 0 and the sequence in dim 1 of input_ids; an input whose dims are all numbers need not
   be named (gearbox keeps declared static shapes). Default: input_ids=B,S for prefill; decode
   has no default (the cache layout is the model's).
   --batching pad (default): batches of --batch consecutive requests. bucket: each request
   waits in the queue of the smallest --buckets bound >= its prompt length (beyond the last
   bound: a queue of its own), and a queue that reaches --batch requests is one batch, so a
   batch's prompts are alike and padding them to the longest wastes less (the bucket_by_
   sequence_length of TF's and the length-grouped samplers of HF's data loaders). Queues left
   at the end are flushed in bound order. Either way a batch is padded only to its longest
   prompt, not to the bound: padding to fixed sizes is what gearbox's gears do, and the trace
   carries the real shapes.
   Lengths are clipped to [1, --max-len]; for decode, prompt + output <= --max-len (the output
   is cut). The header comment lines give the command, the fit, and the realized statistics.

The datasets. Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention" (vLLM), SOSP 2023, section 6.1 and Figure 11: the ShareGPT requests have mean
input 161 and mean output 338 tokens, Alpaca's 19 and 58 ("8.4x longer input prompts and 5.8x
longer outputs on average", with higher variance and long tails in ShareGPT's histogram).
These means are the only figures used. Each length is drawn from a lognormal with that mean:
    length = round(exp(mu + sigma * z)), z ~ N(0, 1), mu = ln(mean) - sigma^2 / 2
THIS IS A FIT, NOT THE DATA: the paper gives histograms and means, not percentiles, so each
sigma below is an assumption, stated with the tail it implies (p50 and p99 before clipping):
    sharegpt input   mean 161  sigma 1.0   p50  98  p99 1000   (a long tail)
    sharegpt output  mean 338  sigma 0.8   p50 245  p99 1579
    alpaca   input   mean  19  sigma 0.7   p50  15  p99   76
    alpaca   output  mean  58  sigma 0.9   p50  39  p99  314
Clipping at --max-len (default 2048, the context of the OPT models the paper serves) and at 1
moves the realized means a little; the header prints them.

Randomness: one 64-bit LCG (Knuth's MMIX constants, the same stream as form 1 and
scripts/export_models.py --traces), seeded by --seed; a uniform is (state >> 11 + 0.5) / 2^53,
a normal is Box-Muller's cos branch from two uniforms; per request the prompt length is drawn,
then the output length. The same seed and options give the same bytes (tests/python/
test_serving_trace.py checks it), with any Python 3 on IEEE-754 doubles and a libm whose exp,
log, sqrt and cos are faithfully rounded (glibc's are).

Importable: requests(), batches(), prefill_lines(), decode_lines() return the lists behind a
trace, for gearbox.compare's list-of-dicts form.
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

# name -> ((input mean, sigma), (output mean, sigma)): the means from Kwon et al. SOSP 2023,
# Figure 11; each sigma an assumption (module docstring).
DATASETS = {
    "sharegpt": ((161.0, 1.0), (338.0, 0.8)),
    "alpaca": ((19.0, 0.7), (58.0, 0.9)),
}
CITATION = "Kwon et al., SOSP 2023 (vLLM), Fig. 11"
SYMBOLS = ("B", "S", "P")


class Lcg:
    """Knuth's MMIX LCG, the generator of every bundled trace."""

    def __init__(self, seed):
        self.state = seed % (1 << 64)

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return self.state

    def uniform_int(self, lo, hi):
        return lo + (self.next() >> 33) % (hi - lo + 1)

    def uniform01(self):
        """In (0, 1): never 0, so log() is safe."""
        return ((self.next() >> 11) + 0.5) / float(1 << 53)

    def normal(self):
        u1, u2 = self.uniform01(), self.uniform01()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def lognormal_length(rng, mean, sigma, max_len):
    mu = math.log(mean) - sigma * sigma / 2.0
    return max(1, min(max_len, int(round(math.exp(mu + sigma * rng.normal())))))


def requests(dataset, count, seed, max_len, decode):
    """[(prompt length, output length)] for `count` requests. With `decode`, prompt + output
    <= max_len: the prompt is cut to max_len - 1 (one output token fits), then the output."""
    (in_mean, in_sigma), (out_mean, out_sigma) = DATASETS[dataset]
    rng = Lcg(seed)
    out = []
    for _ in range(count):
        prompt = lognormal_length(rng, in_mean, in_sigma, max_len)
        output = lognormal_length(rng, out_mean, out_sigma, max_len)
        if decode:
            prompt = min(prompt, max_len - 1)
            output = min(output, max_len - prompt)
        out.append((prompt, output))
    return out


def batches(reqs, batch, batching="pad", buckets=()):
    """Lists of requests, each one batch, in the order they are formed (module docstring)."""
    if batching == "pad":
        return [reqs[k:k + batch] for k in range(0, len(reqs), batch)]
    bounds = sorted(buckets)
    queues = [[] for _ in range(len(bounds) + 1)]
    out = []
    for r in reqs:
        q = next((k for k, b in enumerate(bounds) if r[0] <= b), len(bounds))
        queues[q].append(r)
        if len(queues[q]) == batch:
            out.append(queues[q])
            queues[q] = []
    out.extend(q for q in queues if q)
    return out


def parse_input(text):
    """NAME=DIMS -> (name, [int or (symbol, offset)]). ValueError naming the text."""
    name, eq, dims = text.partition("=")
    if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:/-]*", name) or not dims:
        raise ValueError(f"--input {text!r}: expected NAME=DIMS, e.g. input_ids=B,S")
    out = []
    for tok in dims.split(","):
        tok = tok.strip()
        m = re.fullmatch(r"([BSP])(?:([+-])(\d+))?", tok)
        if m:
            off = int(m.group(3) or 0) * (-1 if m.group(2) == "-" else 1)
            out.append((m.group(1), off))
        elif re.fullmatch(r"\d+", tok):
            out.append(int(tok))
        else:
            raise ValueError(f"--input {text!r}: dim {tok!r} is neither a size nor B, S or P "
                             "(optionally +N or -N)")
    if len(out) > 6:
        raise ValueError(f"--input {text!r}: rank {len(out)} exceeds gearbox's 6")
    return name, out


def _shape(template, values, where):
    dims = []
    for d in template:
        if isinstance(d, int):
            dims.append(d)
            continue
        sym, off = d
        if sym not in values:
            raise ValueError(f"--input: {sym} has no value in a {where} trace (B and S for "
                             "prefill; B, S and P for decode)")
        v = values[sym] + off
        if v < 0:
            raise ValueError(f"--input: {sym}{off:+d} is {v} for {sym} = {values[sym]}")
        dims.append(v)
    return dims


def _line(inputs, values, where):
    return {name: _shape(t, values, where) for name, t in inputs}


def prefill_lines(groups, inputs):
    """One {input: shape} per batch."""
    return [_line(inputs, {"B": len(g), "S": max(p for p, _ in g)}, "prefill") for g in groups]


def decode_lines(groups, inputs, steps=None, max_len=None):
    """One {input: shape} per decode step of each batch; P = S + step. With max_len, a batch
    stops when its cache would pass max_len tokens (P + 1 <= max_len: the new token's position
    P must exist in the model's position table), also under `steps`."""
    out = []
    for g in groups:
        s = max(p for p, _ in g)
        n = steps if steps is not None else max(o for _, o in g)
        if max_len is not None:
            n = min(n, max_len - s)
        for step in range(n):
            out.append(_line(inputs, {"B": len(g), "S": s, "P": s + step}, "decode"))
    return out


def _int_list(text, option):
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{option} {text!r}: expected comma-separated integers") from None
    if not v or min(v) < 1:
        raise ValueError(f"{option} {text!r}: every bound must be >= 1")
    return v


def _positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return v


def legacy(argv):
    """Form 1, byte for byte as before."""
    if len(argv) != 3:
        sys.exit("usage: gen_serving_trace.py CALLS LO HI (or: prefill|decode --help)")
    calls, lo, hi = (int(a) for a in argv)
    if calls < 1 or lo < 1 or hi < lo:
        sys.exit("need CALLS >= 1 and 1 <= LO <= HI")
    rng = Lcg(20261123)
    out = sys.stdout
    out.write(f"# {calls} requests, batch uniform in [{lo}, {hi}] "
              f"(scripts/gen_serving_trace.py {calls} {lo} {hi})\n")
    for _ in range(calls):
        out.write(f'{{"x": [{rng.uniform_int(lo, hi)}, 1024]}}\n')


def render(args, argv):
    """The trace text: header comments, then one JSON object per line."""
    decode = args.phase == "decode"
    inputs = [parse_input(t) for t in (args.input or (["input_ids=B,S"] if not decode else []))]
    if not inputs:
        raise ValueError("decode needs --input (the cache layout is the model's), e.g. "
                         "--input input_ids=B,1 --input past_k=2,B,4,P,8")
    names = [n for n, _ in inputs]
    if len(set(names)) != len(names):
        raise ValueError(f"--input: an input named twice ({', '.join(names)})")
    if not decode and any(not isinstance(d, int) and d[0] == "P" for _, t in inputs for d in t):
        raise ValueError("--input: P (the past length) is for decode traces")
    if decode and args.max_len < 2:
        raise ValueError("--max-len must be >= 2 for decode (a prompt and one output token)")
    buckets = _int_list(args.buckets, "--buckets") if args.batching == "bucket" else ()
    reqs = requests(args.dataset, args.requests, args.seed, args.max_len, decode)
    groups = batches(reqs, args.batch, args.batching, buckets)
    lines = (decode_lines(groups, inputs, args.steps, args.max_len) if decode
             else prefill_lines(groups, inputs))
    (in_mean, in_sigma), (out_mean, out_sigma) = DATASETS[args.dataset]
    n = len(reqs)
    real = sum(p for p, _ in reqs)
    padded = sum(len(g) * max(p for p, _ in g) for g in groups)
    head = [
        f"# {args.phase} trace: {len(lines)} calls from {n} {args.dataset}-like requests, "
        f"batch {args.batch} ({args.batching}"
        + (f" into buckets {','.join(map(str, buckets))}" if buckets else "") + ")",
        f"# lengths: lognormal FIT (not the data) to the means of {CITATION}: input mean "
        f"{in_mean:g} (sigma {in_sigma:g}, assumed), output mean {out_mean:g} (sigma "
        f"{out_sigma:g}, assumed); clipped to [1, {args.max_len}]",
        f"# realized: mean input {real / n:.1f} tokens, max {max(p for p, _ in reqs)}; mean "
        f"output {sum(o for _, o in reqs) / n:.1f}, max {max(o for _, o in reqs)}; prompt "
        f"padding {100.0 * (padded - real) / padded:.1f}% of the batched prompt tokens",
        "# scripts/gen_serving_trace.py " + " ".join(argv),
    ]
    body = [json.dumps(line) for line in lines]
    return "\n".join(head + body) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and re.fullmatch(r"-?\d+", argv[0]):
        legacy(argv)
        return 0
    p = argparse.ArgumentParser(prog="gen_serving_trace.py",
                                description=__doc__.split("\n")[0])
    p.add_argument("phase", choices=("prefill", "decode"))
    p.add_argument("--dataset", required=True, choices=sorted(DATASETS))
    p.add_argument("--requests", type=_positive, default=1000)
    p.add_argument("--batch", type=_positive, default=1, help="requests per batch")
    p.add_argument("--batching", choices=("pad", "bucket"), default="pad")
    p.add_argument("--buckets", default="16,32,64,128,256,512,1024,2048",
                   help="--batching bucket: the prompt-length bounds")
    p.add_argument("--max-len", type=_positive, default=2048)
    p.add_argument("--steps", type=_positive,
                   help="decode: steps per batch (default: its longest output)")
    p.add_argument("--input", action="append", metavar="NAME=DIMS",
                   help="an input's shape over B, S, P (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", help="write here (atomically) instead of stdout")
    args = p.parse_args(argv)
    if args.steps is not None and args.phase != "decode":
        p.error("--steps is for decode traces")
    try:
        text = render(args, argv)
    except ValueError as e:
        p.error(str(e))
    if not args.output:
        sys.stdout.write(text)
        return 0
    # Atomic: a temp file beside the target, renamed over it, so a failed run leaves nothing.
    d = os.path.dirname(os.path.abspath(args.output))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".gen_serving_trace.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

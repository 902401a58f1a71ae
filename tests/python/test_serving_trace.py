"""scripts/gen_serving_trace.py (issue 24 item 4): LLM-serving traces from request-length
distributions fitted to published means, batch formation, decode steps with a growing KV
length; seeded and deterministic. The statistics asserted here are exact properties of the
generator (the same seed gives the same stream), not timings."""
import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gen_serving_trace.py")


def _module():
    spec = importlib.util.spec_from_file_location("gen_serving_trace", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gst = _module()


def gen(*args, check=True):
    proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def body(text):
    return [json.loads(line) for line in text.splitlines() if line and not line.startswith("#")]


def test_uniform_form_regenerates_the_bundled_mlp_trace():
    with open(os.path.join(REPO, "examples", "mlp_serving.trace.jsonl")) as f:
        assert gen("20000", "1", "64").stdout == f.read()


@pytest.mark.parametrize("path", ["bert_sharegpt.trace.jsonl", "gpt_decode_alpaca.trace.jsonl",
                                  "gpt_decode_masked_alpaca.trace.jsonl"])
def test_bundled_traces_regenerate_from_their_header(path):
    """Each bundled trace names the command that wrote it; running it again gives the bytes."""
    with open(os.path.join(REPO, "examples", path)) as f:
        text = f.read()
    command = next(line for line in text.splitlines()
                   if line.startswith("# scripts/gen_serving_trace.py "))
    args = shlex.split(command[len("# scripts/gen_serving_trace.py "):])
    at = args.index("-o")
    assert args[at + 1] == f"examples/{path}"
    del args[at:at + 2]
    regenerated = gen(*args).stdout
    # The header repeats the command line, which named the file: the rest is the same.
    assert regenerated.replace(command.replace(f" -o examples/{path}", ""), command) == text


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    args = ["prefill", "--dataset", "sharegpt", "--requests", "300", "--batch", "4",
            "--batching", "bucket", "--input", "input_ids=B,S", "--input", "mask=B,S"]
    a, b = gen(*args, "--seed", "7").stdout, gen(*args, "--seed", "7").stdout
    assert a == b
    assert body(gen(*args, "--seed", "8").stdout) != body(a)
    # -o writes the same bytes, atomically (no temp file left beside it).
    out = tmp_path / "t.jsonl"
    gen(*args, "--seed", "7", "-o", str(out))
    assert out.read_text() == a.replace("--seed 7", f"--seed 7 -o {out}")
    assert os.listdir(tmp_path) == ["t.jsonl"]


@pytest.mark.parametrize("dataset", sorted(gst.DATASETS))
def test_lognormal_fit_has_the_cited_means(dataset):
    """Unclipped, 40,000 requests: the sample means are within 3% of the cited means (the
    lognormal's mu = ln(mean) - sigma^2 / 2), and the sample median near exp(mu)."""
    reqs = gst.requests(dataset, 40000, seed=3, max_len=10**9, decode=False)
    (in_mean, in_sigma), (out_mean, out_sigma) = gst.DATASETS[dataset]
    n = len(reqs)
    for k, (mean, sigma) in enumerate(((in_mean, in_sigma), (out_mean, out_sigma))):
        lengths = sorted(r[k] for r in reqs)
        assert abs(sum(lengths) / n - mean) / mean < 0.03, (dataset, k, sum(lengths) / n)
        median = math.exp(math.log(mean) - sigma * sigma / 2)
        assert abs(lengths[n // 2] - median) / median < 0.05, (dataset, k, lengths[n // 2])
    # ShareGPT's prompts are the longer ones (the paper: 8.4x on average).
    assert gst.DATASETS["sharegpt"][0][0] / gst.DATASETS["alpaca"][0][0] > 8


def test_prefill_pad_batches_pad_to_the_longest():
    reqs = gst.requests("sharegpt", 103, seed=1, max_len=512, decode=False)
    groups = gst.batches(reqs, 8, "pad")
    assert [len(g) for g in groups] == [8] * 12 + [7]
    lines = gst.prefill_lines(groups, [gst.parse_input("ids=B,S"), gst.parse_input("m=3,B,S+1")])
    for g, line in zip(groups, lines):
        s = max(p for p, _ in g)
        assert line == {"ids": [len(g), s], "m": [3, len(g), s + 1]}
    assert max(p for p, _ in reqs) <= 512 and min(p for p, _ in reqs) >= 1


def test_bucket_batching_groups_like_lengths_and_pads_less():
    reqs = gst.requests("sharegpt", 2000, seed=2, max_len=2048, decode=False)
    bounds = [16, 32, 64, 128, 256, 512, 1024, 2048]
    groups = gst.batches(reqs, 8, "bucket", bounds)
    assert sorted(r for g in groups for r in g) == sorted(reqs)  # every request once
    for g in groups:
        buckets = {next(k for k, b in enumerate(bounds) if p <= b) for p, _ in g}
        assert len(buckets) == 1, g
    full = [g for g in groups if len(g) == 8]
    assert len(groups) - len(full) <= len(bounds)  # only the flushed queues are short

    def padding(gs):
        return sum(len(g) * max(p for p, _ in g) for g in gs) / sum(p for p, _ in reqs) - 1

    assert padding(groups) < padding(gst.batches(reqs, 8, "pad")) / 2


def test_decode_kv_length_grows_by_one_per_step():
    inputs = [gst.parse_input("input_ids=B,1"), gst.parse_input("past_k=2,B,4,P,8")]
    reqs = gst.requests("alpaca", 10, seed=5, max_len=2048, decode=True)
    groups = gst.batches(reqs, 4, "pad")
    lines = gst.decode_lines(groups, inputs)
    assert len(lines) == sum(max(o for _, o in g) for g in groups)
    at = 0
    for g in groups:
        s, steps = max(p for p, _ in g), max(o for _, o in g)
        for step in range(steps):
            assert lines[at] == {"input_ids": [len(g), 1], "past_k": [2, len(g), 4, s + step, 8]}
            at += 1
    # --steps fixes the count; --max-len stops a batch before its cache passes it.
    assert len(gst.decode_lines(groups, inputs, steps=64)) == 64 * len(groups)
    capped = gst.decode_lines([[(30, 100)]], inputs, steps=64, max_len=40)
    assert [line["past_k"][3] for line in capped] == list(range(30, 40))


def test_decode_request_fits_max_len():
    for p, o in gst.requests("sharegpt", 500, seed=4, max_len=300, decode=True):
        assert p >= 1 and o >= 1 and p + o <= 300


@pytest.mark.parametrize("args,message", [
    (["decode", "--dataset", "alpaca"], "decode needs --input"),
    (["prefill", "--dataset", "alpaca", "--input", "x=B,P"], "P (the past length) is for decode"),
    (["prefill", "--dataset", "alpaca", "--input", "x=B,Q"], "dim 'Q' is neither a size"),
    (["prefill", "--dataset", "alpaca", "--input", "=B"], "expected NAME=DIMS"),
    (["prefill", "--dataset", "alpaca", "--input", "x=B", "--input", "x=S"], "named twice"),
    (["prefill", "--dataset", "alpaca", "--input", "x=1,1,1,1,1,1,B"], "rank 7"),
    (["prefill", "--dataset", "alpaca", "--batching", "bucket", "--buckets", "8,x"],
     "--buckets '8,x'"),
    (["prefill", "--dataset", "alpaca", "--steps", "4"], "--steps is for decode"),
    (["prefill", "--dataset", "lmsys"], "invalid choice: 'lmsys'"),
    (["prefill", "--dataset", "alpaca", "--requests", "0"], "--requests: 0 is not >= 1"),
    (["decode", "--dataset", "alpaca", "--input", "x=B,P-5", "--max-len", "5"], "P-5 is"),
])
def test_bad_options_exit_2_naming_them(args, message, tmp_path):
    out = tmp_path / "t.jsonl"
    proc = gen(*args, "-o", str(out), check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not out.exists() and os.listdir(tmp_path) == []  # nothing written half-way


def test_traces_run_in_gearbox(tmp_path, cli, env):
    """A prefill trace on examples/mlp.gbx (x [B, 1024] as a transformer FFN over one
    request's tokens: --input x=S,1024) and a decode trace on a cache-shaped toy model: every
    line is accepted, and static mode compiles once per distinct shape, exactly."""
    t = tmp_path / "ffn.jsonl"
    gen("prefill", "--dataset", "alpaca", "--requests", "40", "--input", "x=S,1024",
        "-o", str(t))
    shapes = {json.dumps(line) for line in body(t.read_text())}
    proc = subprocess.run([cli, "run", os.path.join(REPO, "examples", "mlp.gbx"), "--trace",
                           str(t), "--model-only", "-q", "--on-recompile-limit", "unlimited",
                           "--json", str(tmp_path / "r.json")], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["iterations"] == 40 and report["graph_compiles"] == len(shapes)
    model = tmp_path / "kv.gbx"
    model.write_text("graph kv(%input_ids: f32[B, 1], %past_k: f32[2, B, 4, P, 8]) {\n"
                     "  %y = mul(%past_k, %past_k)\n  return %y\n}\n")
    d = tmp_path / "decode.jsonl"
    gen("decode", "--dataset", "alpaca", "--requests", "2", "--batch", "2", "--steps", "12",
        "--input", "input_ids=B,1", "--input", "past_k=2,B,4,P,8", "-o", str(d))
    proc = subprocess.run([cli, "run", str(model), "--trace", str(d), "--model-only", "-q",
                           "--json", str(tmp_path / "d.json")], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "d.json").read_text())
    # 12 steps, 12 past lengths: static compiles 8 (the recompile limit), the rest fall back.
    assert report["graph_compiles"] == 8 and report["fallback_runs"] == 4

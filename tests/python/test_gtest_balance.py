"""scripts/gtest-balance.py, which deals CI's sanitized gtest suite to shards by recorded times:
every listed test lands in exactly one shard, the heavy ones apart, and a name the filter syntax
would misread is refused rather than dropped."""
import json
import subprocess
import sys


def listing(names):
    suites = {}
    for n in names:
        suite, test = n.split(".", 1)
        suites.setdefault(suite, []).append({"name": test, "time": "0s"})
    return {"testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]}


def deal(repo, tmp_path, n, names, times):
    (tmp_path / "list.json").write_text(json.dumps(listing(names)))
    (tmp_path / "times.json").write_text(json.dumps(times))
    r = subprocess.run([sys.executable, str(repo / "scripts" / "gtest-balance.py"), "deal", str(n),
                        str(tmp_path / "list.json"), str(tmp_path / "times.json"),
                        str(tmp_path / "f")], capture_output=True, text=True)
    shards = []
    if r.returncode == 0:
        for i in range(n):
            line = (tmp_path / f"f{i}").read_text()
            assert line.startswith("--gtest_filter=") and line.endswith("\n")
            body = line[len("--gtest_filter="):-1]
            shards.append([] if body == "-*" else body.split(":"))
    return r, shards


def test_every_test_once_and_the_heavy_ones_apart(repo, tmp_path):
    names = [f"Light.T{i}" for i in range(40)] + ["Heavy.A", "Heavy.B", "Isa/P.C/3", "New.Untimed"]
    times = {n: 0.001 for n in names if n.startswith("Light")}
    times.update({"Heavy.A": 30.0, "Heavy.B": 29.0, "Isa/P.C/3": 2.0})
    r, shards = deal(repo, tmp_path, 2, names, times)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(len(names))
    dealt = [t for s in shards for t in s]
    assert sorted(dealt) == sorted(names)
    assert ("Heavy.A" in shards[0]) != ("Heavy.A" in shards[1])
    assert ("Heavy.A" in shards[0]) != ("Heavy.B" in shards[0])


def test_more_shards_than_tests_match_nothing(repo, tmp_path):
    r, shards = deal(repo, tmp_path, 3, ["A.x"], {})
    assert r.returncode == 0, r.stderr
    assert sorted(len(s) for s in shards) == [0, 0, 1]


def test_a_name_that_reads_as_filter_syntax_is_refused(repo, tmp_path):
    r, _ = deal(repo, tmp_path, 2, ["A.x", "B.y-z"], {})
    assert r.returncode != 0
    assert "B.y-z" in r.stderr


def test_record_keeps_the_times_of_a_run(repo, tmp_path):
    result = listing(["A.x", "B.y"])
    result["testsuites"][0]["testsuite"][0]["time"] = "1.5s"
    (tmp_path / "0.json").write_text(json.dumps(result))
    out = tmp_path / "times.json"
    subprocess.run([sys.executable, str(repo / "scripts" / "gtest-balance.py"), "record", str(out),
                    str(tmp_path / "0.json")], check=True)
    assert json.loads(out.read_text()) == {"A.x": 1.5, "B.y": 0.0}

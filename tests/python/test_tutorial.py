"""docs/tutorial.md runs: scripts/tutorial.py executes every `$ ` command of its console blocks
and compares the output with the recorded one (times masked). A change to what gearbox prints
fails here until `/usr/bin/python3 scripts/tutorial.py --update` records the new output."""
import subprocess
import sys

from conftest import BUILD, REPO


def test_tutorial_commands_print_what_the_tutorial_says():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tutorial.py"), "--build-dir",
                        str(BUILD)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "commands match" in r.stdout


def test_tutorial_check_fails_on_a_changed_output(tmp_path):
    """The check can fail: a tutorial whose recorded output is wrong is reported with a diff."""
    doc = tmp_path / "t.md"
    doc.write_text("```console\n$ gearbox --version\ngearbox 0.0.0-not-this-one\n```\n")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tutorial.py"), "--build-dir",
                        str(BUILD), "--doc", str(doc)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "differs" in r.stdout and "-gearbox 0.0.0-not-this-one" in r.stdout
    # --update records the real output, after which the check passes.
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tutorial.py"), "--build-dir",
                        str(BUILD), "--doc", str(doc), "--update"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not-this-one" not in doc.read_text()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tutorial.py"), "--build-dir",
                        str(BUILD), "--doc", str(doc)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

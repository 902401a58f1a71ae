"""Every ```python block of docs/python.md and docs/import.md runs, from the repository root."""
import os
import re

import pytest

from conftest import REPO

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks(doc):
    return BLOCK.findall((REPO / "docs" / doc).read_text())


@pytest.mark.parametrize("doc", ["python.md", "import.md"])
def test_doc_examples_run(doc, monkeypatch):
    code = blocks(doc)
    assert code, f"docs/{doc} has no python example"
    monkeypatch.chdir(REPO)
    if doc == "import.md":
        pytest.importorskip("onnx")
    scope = {}
    for i, block in enumerate(code):  # blocks share one namespace, as in a notebook
        exec(compile(block, f"docs/{doc}[{i}]", "exec"), scope)

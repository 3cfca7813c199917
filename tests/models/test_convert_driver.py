"""`harness/models/convert_driver.py`, run for real on a stand-in converter (no venv, no torch).

The stand-in has the two things the driver relies on in llama.cpp's converter:
`conversion.base.TextModel.get_vocab_base_pre`, which logs `chkhsh: <hex>` on the
`hf-to-gguf` logger and returns a name or raises, and `convert_hf_to_gguf.main()`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.models import convert

HASH = "ab" * 32
BASE = f'''
import logging
logger = logging.getLogger("hf-to-gguf")

class TextModel:
    def get_vocab_base_pre(self, tokenizer):
        logger.warning("** chkhsh:  {HASH}")
        if tokenizer == "unknown":
            raise NotImplementedError("BPE pre-tokenizer was not recognized - update get_vocab_base_pre()")
        logger.debug("chkhsh: {HASH}")
        return "smaug-bpe"
'''
MAIN = '''
import sys
from pathlib import Path
from conversion.base import TextModel

def main():
    folder, out = sys.argv[1], sys.argv[sys.argv.index("--outfile") + 1]
    TextModel().get_vocab_base_pre(Path(folder).name)
    Path(out).write_bytes(b"GGUF")
'''


@pytest.fixture
def stand_in(tmp_path):
    root = tmp_path / "llama.cpp"
    (root / "conversion").mkdir(parents=True)
    (root / "conversion" / "__init__.py").write_text("")
    (root / "conversion" / "base.py").write_text(BASE)
    (root / "convert_hf_to_gguf.py").write_text(MAIN)
    return root


def drive(root: Path, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(convert.DRIVER), "convert", str(root), str(out), *args],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_the_driver_records_the_converters_fingerprint_and_choice(stand_in, tmp_path):
    result = drive(stand_in, tmp_path, str(tmp_path / "known"), "--outfile", str(tmp_path / "x.gguf"))
    assert result["error"] is None
    assert result["decisions"] == [{"chkhsh": HASH, "pre": "smaug-bpe", "raised": None}]
    assert (tmp_path / "x.gguf").read_bytes() == b"GGUF"


def test_the_driver_records_a_refusal_with_the_fingerprint_it_did_not_know(stand_in, tmp_path):
    result = drive(stand_in, tmp_path, str(tmp_path / "unknown"), "--outfile", str(tmp_path / "x.gguf"))
    assert result["error"]["type"] == "NotImplementedError"
    assert result["error"]["message"].startswith("BPE pre-tokenizer was not recognized")
    assert result["decisions"][0]["chkhsh"] == HASH and result["decisions"][0]["pre"] is None
    assert not (tmp_path / "x.gguf").exists()

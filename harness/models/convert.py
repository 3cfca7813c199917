"""llama.cpp's own converter in the loop: `convert_hf_to_gguf.py --vocab-only`, offline, recorded.

The converter is the pinned llama-cpp-python sdist's `vendor/llama.cpp/convert_hf_to_gguf.py`
with its `conversion/` package and its own `gguf-py`, extracted once into
`<cache>/converter/llama.cpp/`, every file checked against
`harness/data/converter_sources.sha256`. It runs in a venv of its own, built once (like
the `llama.cpp@VERSION` venvs of `harness.subjects.llama_release`):

    ~/.cache/gguf-parity/venvs/convert-<llama-cpp-python version>/

with `CONVERTER_DEPS`: the CPU torch the project pins for its transformers extra,
transformers 4.x (llama.cpp's requirements pin 4.57.6; 5.x changed the tokenizer
loading the converter relies on), sentencepiece and protobuf as llama.cpp's
requirements bound them, and the sdist's gguf-py. `HF_HUB_OFFLINE=1` and
`TRANSFORMERS_OFFLINE=1` are set: nothing is fetched from a hub.

`harness/models/convert_driver.py` runs the converter in that venv and records what it decided
(the vocabulary path it took, the pre-tokenizer fingerprint `chkhsh` where that path computes one,
the name it chose) or how it refused; `describe` names the path (`converter_path`), so no line says
"fingerprint" about a path that computes none. The
converter reads a work folder of copies of the input's data files, never the input folder
itself and never a file of it that is not data (`harness.models.folder_data`: no `*.py`,
`auto_map` removed, transformers' loader of a folder's code refusing in the driver), plus
what it needs and the folder lacks, each one said and recorded:

- `config.json` (the converter picks its model class from `architectures`): the
  architecture given, or guessed (a `tokenizer.model` or a BPE `tokenizer.json`: Llama;
  a WordPiece one: BERT);
- `tokenizer_config.json` for a `tokenizer.json` folder: `PreTrainedTokenizerFast`, so
  that transformers reads `tokenizer.json` as it is instead of a model class's
  slow-tokenizer defaults (which would add a BOS to the fingerprint text);
- `params.json` for a tekken folder (`tekken.json`), which the converter reads only with
  `--mistral-format` (passed then): placeholder hyper-parameters and the tekken file's
  `default_vocab_size`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from ..environment import child_memory, physical_memory, venvs_dir
from ..environment_vars import CHILD_MEMORY, FOLDER_CODE
from ..errors import SetupError
from ..files.atomic import building, check_output_path, locked, write_text_atomic
from ..files.input_limits import tokenizer_file_limit
from . import fetch, folder_data, folder_files
from .shipped import LLAMA_CPP_PYTHON_VERSION, cache_dir

DRIVER = Path(__file__).parent / "convert_driver.py"
MANIFEST = Path(__file__).parents[1] / "data" / "converter_sources.sha256"
CONVERTER_DEPS = ("torch==2.13.0", "transformers==4.57.6", "sentencepiece==0.2.2", "protobuf==4.25.9",
                  "numpy==2.2.6", "mistral-common==1.13.1")
READY = ".gguf-parity-ready"
_ROOT = "vendor/llama.cpp/"
_KEEP = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
MODEL_TYPES = {"LlamaForCausalLM": "llama", "BertModel": "bert", "MistralForCausalLM": "mistral"}
Log = Callable[[str], None]
CUSTOM_CODE = "CustomCodeRefused"  # the driver's error type when transformers was about to run a folder's code
FOLDER_CODE_ENV = FOLDER_CODE.name  # the custom tokenizer auto_map named, for the driver
SHOWN_LEFT_OUT = 20  # names of the files left out of the copy shown (a folder may hold 100,000)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def sources_dir() -> Path:
    """`<cache>/converter/llama.cpp/`: the converter's files from the pinned sdist."""
    return cache_dir() / "converter" / "llama.cpp"


def venv_dir() -> Path:
    return venvs_dir() / f"convert-{LLAMA_CPP_PYTHON_VERSION}"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def _stamp() -> str:
    return " ".join((LLAMA_CPP_PYTHON_VERSION, *CONVERTER_DEPS)) + "\n"


def _wanted(member: str) -> str | None:
    rel = PurePosixPath(*PurePosixPath(member).parts[1:]).as_posix()
    if not rel.startswith(_ROOT):
        return None
    rel = rel[len(_ROOT):]
    return rel if rel.startswith(_KEEP) and "/tests/" not in rel else None


def ensure_sources(*, sdist: Path | None = None, log: Log = _stderr) -> Path:
    """The converter's sources, extracted from the pinned sdist on first use."""
    target = sources_dir()
    if (target / ".complete").is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            log(f"downloading llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist with pip for its converter ...")
            sdist = fetch.download_sdist(Path(tmp))
        log(f"extracting convert_hf_to_gguf.py, conversion/ and gguf-py/ into {target} ...")
        shutil.rmtree(target, ignore_errors=True)
        fetch.extract(sdist, target, select=_wanted)
    bad = check_sources(target)
    if bad:
        raise SetupError(f"{len(bad)} converter file(s) failed {MANIFEST.name}: {', '.join(bad[:5])}")
    write_text_atomic(target / ".complete", f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}\n")
    return target


def check_sources(target: Path, manifest: Path = MANIFEST) -> list[str]:
    """The manifest's files missing from `target` or with another sha256 (empty when all is well)."""
    pinned = fetch.read_manifest(manifest)
    return [name for name, digest in sorted(pinned.items())
            if not (target / name).is_file() or fetch.sha256_file(target / name) != digest]


def write_manifest(target: Path, manifest: Path = MANIFEST) -> int:
    """Maintainers only, when bumping the pin: the sha256 of every extracted converter file."""
    names = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()
                   and p.name != ".complete")
    write_text_atomic(manifest, "".join(f"{fetch.sha256_file(target / n)}  {n}\n" for n in names))
    return len(names)


def is_ready() -> bool:
    ready = venv_dir() / READY
    return ready.is_file() and ready.read_text(encoding="utf-8") == _stamp() and venv_python().is_file()


def ensure_venv(*, sdist: Path | None = None, log: Log = _stderr) -> Path:
    """The converter venv's python, built on first use (a few minutes: torch is large).

    Two runs at once take turns (`locked`, on `<venvs>/convert-<version>.lock`): the
    second finds the venv the first built. It is built in a temporary folder beside its
    place and renamed there when complete, so no run ever sees half a venv (the harness
    runs `bin/python` only, which finds its packages wherever the folder is).
    """
    with locked(venv_dir().with_name(venv_dir().name + ".lock")):
        sources = ensure_sources(sdist=sdist, log=log)
        if is_ready():
            return venv_python()
        where = venv_dir()
        log(f"building the converter's venv once in {where}: {' '.join(CONVERTER_DEPS)} and gguf-py ...")
        for stale in where.parent.glob(f".{where.name}.building-*"):  # a build killed midway; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        building = where.with_name(f".{where.name}.building-{os.getpid()}")
        try:
            _build_venv(building, sources)
            shutil.rmtree(where, ignore_errors=True)
            building.rename(where)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return venv_python()


def _build_venv(where: Path, sources: Path) -> None:
    python = where / "bin" / "python"
    _run([sys.executable, "-m", "venv", str(where)], what=f"creating {where}")
    _run([str(python), "-m", "pip", "install", "-q", *CONVERTER_DEPS, str(sources / "gguf-py")],
         what=f"installing the converter's dependencies into {where}")
    (where / READY).write_text(_stamp(), encoding="utf-8")


def _run(argv: list[str], *, what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = [line for line in (done.stderr or done.stdout).splitlines()
                if line.strip() and not line.startswith("WARNING: Location")][-3:]
        raise SetupError(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def guess_architecture(folder: Path) -> str:
    """The model class for a folder without config.json: Llama, or BERT for a WordPiece tokenizer.json."""
    tj = folder / "tokenizer.json"
    wordpiece = (not folder_files.present(folder / "tokenizer.model") and folder_files.present(tj)
                 and folder_data.read_tokenizer_json(tj)["model"].get("type") == "WordPiece")
    return "BertModel" if wordpiece else "LlamaForCausalLM"


def minimal_config(architecture: str, vocab_size: int) -> dict[str, Any]:
    """`architectures` picks the converter's model class; `vocab_size`, because transformers'
    defaults for the model type (32,000 for llama) would otherwise stand in for it."""
    config: dict[str, Any] = {"architectures": [architecture]}
    if architecture in MODEL_TYPES:
        config["model_type"] = MODEL_TYPES[architecture]
    config["vocab_size"] = vocab_size
    return config


def vocab_size(folder: Path) -> int:
    """The original's vocabulary size: highest id + 1 in tokenizer.json, or the pieces of tokenizer.model."""
    tj = folder / "tokenizer.json"
    if folder_files.present(tj):
        data = folder_data.read_tokenizer_json(tj)
        vocab = data["model"].get("vocab", {})
        ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
        ids += [t["id"] for t in data.get("added_tokens", [])]
        return max(ids, default=-1) + 1
    return folder_data.sentencepiece_pieces(folder / "tokenizer.model")


def work_folder(source: Path, work: Path, *, architecture: str | None = None) -> list[dict[str, Any]]:
    """Fill `work` with copies of `source`'s data files and what the converter needs besides; what was
    supplied (a copy rewritten without `auto_map` included). No file of `source` that is not data
    reaches `work` (`harness.models.folder_data`); a tokenizer that is only custom code is a `SetupError`."""
    if not source.is_dir():
        raise SetupError(f"{source}: not a folder (convert takes a folder holding tokenizer.json "
                         "or tokenizer.model)")
    if not any(folder_files.present(source / name) for name in ("tokenizer.json", "tokenizer.model", "tekken.json")):
        raise SetupError(f"{source}: holds neither tokenizer.json nor tokenizer.model (nor tekken.json)")
    if folder_files.present(source / "tokenizer.json"):
        folder_data.read_tokenizer_json(source / "tokenizer.json")
    folder_data.copy_data(source, work)
    supplied = folder_data.without_code(source)
    if is_mistral_format(source):
        if not folder_files.present(source / "params.json"):
            supplied.append({"file": "params.json", "content": minimal_params(source),
                             "why": "a tekken folder has no params.json; the converter's --mistral-format reads it"})
        _write(work, supplied)
        return supplied
    if not folder_files.present(source / "config.json"):
        arch = architecture or guess_architecture(source)
        supplied.append({"file": "config.json", "content": minimal_config(arch, vocab_size(source)),
                         "why": "the folder has no config.json; the converter picks its model class from it"})
    if folder_files.present(source / "tokenizer.json") and not folder_files.present(source / "tokenizer_config.json"):
        supplied.append({"file": "tokenizer_config.json", "content": {"tokenizer_class": "PreTrainedTokenizerFast"},
                         "why": "the folder has no tokenizer_config.json; read tokenizer.json as it is"})
    _write(work, supplied)
    return supplied


def _write(work: Path, supplied: list[dict[str, Any]]) -> None:
    for item in supplied:
        (work / item["file"]).write_text(json.dumps(item["content"], indent=2) + "\n", encoding="utf-8")


def is_mistral_format(folder: Path) -> bool:
    """A tekken folder (tekken.json, no tokenizer.json): the converter reads it only with --mistral-format."""
    return folder_files.present(folder / "tekken.json") and not folder_files.present(folder / "tokenizer.json")


# The hyper-parameters `MistralModel` (a LlamaModel) reads from params.json even for --vocab-only;
# the values are Mistral-Nemo's, and none of them reaches the tokenizer keys of the GGUF.
_PARAMS = {"dim": 5120, "n_layers": 1, "head_dim": 128, "hidden_dim": 14336, "n_heads": 32, "n_kv_heads": 8,
           "rope_theta": 1000000.0, "norm_eps": 1e-05}


def minimal_params(folder: Path) -> dict[str, Any]:
    config = folder_data.read_tekken(folder / "tekken.json")["config"]
    return {**_PARAMS, "vocab_size": config["default_vocab_size"]}


def sidecar_path(out: Path) -> Path:
    """`X.convert.json` beside `X.gguf`: what the converter decided."""
    return out.with_name(out.name.removesuffix(".gguf") + ".convert.json")


def converter_memory() -> int:
    """The converter's address-space cap: twice a worker's (`child_memory`), as torch and transformers
    map far more than they use, and never more than the machine's RAM."""
    ram = physical_memory()
    return min(2 * child_memory(), ram) if ram else 2 * child_memory()


def run_driver(mode: str, args: list[str], *, timeout: float = 900, folder_code: str | None = None) -> dict[str, Any]:
    """Run `convert_driver.py MODE` in the converter venv; its result JSON plus the converter's output.

    `folder_code`: the custom tokenizer the original's `auto_map` named (removed from the copies);
    the driver refuses a `trust_remote_code=True` load of the tokenizer then (`FOLDER_CODE_ENV`).
    """
    python = ensure_venv()
    with tempfile.TemporaryDirectory() as tmp:
        # HF_MODULES_CACHE: an empty folder of this run, so no module a past run cached can be imported
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false", PYTHONPATH="", HF_MODULES_CACHE=str(Path(tmp) / "modules"),
                   **{CHILD_MEMORY.name: str(converter_memory())})
        env.pop(FOLDER_CODE_ENV, None)
        if folder_code:
            env[FOLDER_CODE_ENV] = folder_code
        result_file = Path(tmp) / "result.json"
        try:
            done = subprocess.run([str(python), str(DRIVER), mode, str(sources_dir()), str(result_file), *args],
                                  capture_output=True, text=True, env=env, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise SetupError(f"the converter did not finish in {timeout:.0f} s") from None
        if not result_file.is_file():
            tail = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-3:]
            raise SetupError(f"the converter driver failed (exit {done.returncode}): " + " | ".join(tail))
        result: dict[str, Any] = json.loads(result_file.read_text(encoding="utf-8"))
    kind, cap = (result.get("error") or {}).get("type"), result.get("memory_limit") or converter_memory()
    if kind == "LimitError":  # the driver could not cap itself: our set-up, not the converter's refusal
        raise SetupError(f"the converter: {result['error']['message']}")
    if kind == "MemoryError":  # the cap in force: twice --memory-limit, or an inherited lower limit
        lowered = ", lowered by an inherited limit" if cap < converter_memory() else ""
        raise SetupError(f"the converter ran out of memory: over its limit of {cap:,} bytes "
                         f"(twice --memory-limit{lowered})")
    result["output_tail"] = (done.stderr + done.stdout).splitlines()[-40:]
    return result


def _refuse_custom_code(source: Path, result: dict[str, Any]) -> None:
    """The driver's wall held (the converter asked for the folder's code): bad input, exit 2, not a refusal."""
    if (result.get("error") or {}).get("type") == CUSTOM_CODE:
        raise SetupError(f"{source}: {result['error']['message']}")


def gguf_facts(path: Path) -> dict[str, Any]:
    """What the written GGUF says about its tokenizer (our reader; the file is vocab-only)."""
    from .summary import summarize

    tok = summarize(path)["tokenizer"]
    return {key: tok[key] for key in ("model", "pre", "vocab_size", "merges", "flags", "special_ids")}


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tekken.json", "tokenizer.model")


def check_sizes(folder: Path) -> None:
    """`SetupError` for a tokenizer file of `folder` over its size limit (`tokenizer_file_limit`), or one
    that is not a regular file inside the folder (`harness.models.folder_files`), before the harness or the
    converter reads any of them."""
    for name in TOKENIZER_FILES:
        path = folder / name
        if folder_files.present(path):
            folder_files.size(path, tokenizer_file_limit(path))


def convert(source: Path, out: Path, *, architecture: str | None = None, log: Log = print) -> dict[str, Any]:
    """Convert `source` with llama.cpp's converter into `out`; the record written to the sidecar.

    A refusal by the converter is a result: `record["refusal"]` holds it and no GGUF is left.
    `out` and its sidecar are checked first (a device, a FIFO, a folder: exit 2 before any work),
    and the converter writes into a private folder beside `out`, renamed into place
    (`harness.files.atomic.building`): no link planted beside `out` is followed.
    """
    check_output_path(out, "--out")
    check_output_path(sidecar_path(out), "--out's record")
    check_sizes(source)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / (source.resolve().name or "model")
        work.mkdir()
        supplied = work_folder(source, work, architecture=architecture)
        ensure_venv()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        if skipped := folder_data.left_out(source):
            more = f" and {len(skipped) - SHOWN_LEFT_OUT:,} more" if len(skipped) > SHOWN_LEFT_OUT else ""
            log(f"left out of the converter's copy (not tokenizer data; no file of the folder runs): "
                f"{', '.join(skipped[:SHOWN_LEFT_OUT])}{more}")
        for item in supplied:
            shown = json.dumps(item["content"])
            log(f"supplied {item['file']} ({item['why']}): {shown if len(shown) <= 300 else shown[:300] + ' ...'}")
        log(f"running llama.cpp's convert_hf_to_gguf.py --vocab-only on {source} ...")
        mistral = ["--mistral-format"] if is_mistral_format(source) else []
        with building(out, "--out", optional=True) as part:
            result = run_driver("convert", [str(work), "--vocab-only", *mistral, "--outfile", str(part.absolute())],
                                folder_code=folder_data.tokenizer_code(source))
            _refuse_custom_code(source, result)
        for entry in result.get("paths") or []:  # the converter's copy named as the folder it is a copy of
            if isinstance(entry, dict) and isinstance(entry.get("raised"), str):
                entry["raised"] = entry["raised"].replace(str(work), str(source))
    record = _record(source, out, supplied, result)
    write_text_atomic(sidecar_path(out), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def _record(source: Path, out: Path, supplied: list[dict[str, Any]], result: dict[str, Any]) -> dict[str, Any]:
    decision = (result["decisions"] or [{}])[-1]
    error = result["error"]
    written = error is None and out.is_file()
    scripts = sources_dir()
    return {
        "source": str(source),
        "gguf": str(out) if written else None,
        "converter": {"llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
                      "convert_hf_to_gguf.py sha256": fetch.sha256_file(scripts / "convert_hf_to_gguf.py"),
                      "conversion/base.py sha256": fetch.sha256_file(scripts / "conversion" / "base.py"),
                      "deps": list(CONVERTER_DEPS)},
        "supplied": supplied,
        "chkhsh": decision.get("chkhsh"),
        "pre_chosen": decision.get("pre"),
        "refusal": None if written else (error or {"type": "NoOutput", "message": "no GGUF was written"}),
        "written": gguf_facts(out) if written else None,
        "paths": list(result.get("paths") or []),
        "output_tail": result["output_tail"],
    }


FINGERPRINT_STEP = "get_vocab_base"  # the step of the BPE and WordPiece paths that computes the fingerprint


def converter_path(record: dict[str, Any]) -> dict[str, Any] | None:
    """The vocabulary path the converter took (the driver's `paths`), or None when the record has none:
    {"name": "LlamaModel._set_vocab_gpt2", "fingerprint": it computes one, "raised": what stopped it (None: it
    completed), "fell_through": the paths tried before it, each with what it raised}."""
    entries = [e for e in record.get("paths") or [] if isinstance(e, dict) and isinstance(e.get("path"), str)]
    if not entries:
        return None
    top = min(int(e.get("depth", 0)) for e in entries)
    outer = [i for i, e in enumerate(entries) if int(e.get("depth", 0)) == top]
    failed = [i for i in outer if entries[i].get("raised")]
    chosen = failed[-1] if record.get("refusal") and failed else next(
        (i for i in reversed(outer) if not entries[i].get("raised")), outer[-1])
    end = next((i for i in outer if i > chosen), len(entries))
    steps = [e["path"] for e in entries[chosen:end]]
    entry = entries[chosen]
    return {"name": f"{entry.get('model', '?')}.{entry['path']}", "fingerprint": FINGERPRINT_STEP in steps,
            "raised": entry.get("raised"),
            "fell_through": [f"{entries[i]['path']}: {entries[i]['raised']}" for i in failed if i < chosen]}


def _fingerprint_words(record: dict[str, Any], path: dict[str, Any] | None) -> str:
    """What the record says of the fingerprint, true for the path that ran."""
    chkhsh = record.get("chkhsh")
    if chkhsh:
        return f"chkhsh {chkhsh}" + ("" if record.get("refusal") else f" -> {record.get('pre_chosen')!r}")
    if path is None:
        return "no fingerprint recorded"
    if path["fingerprint"]:
        return f"no fingerprint: {path['name']} stopped before computing one"
    return f"{path['name']} computes no fingerprint"


def describe(record: dict[str, Any]) -> str:
    """One line: what the converter decided, naming the path that converted or refused."""
    path = converter_path(record)
    via = f" {'by' if record['refusal'] else 'through'} {path['name']}" if path else ""
    if path and path["fell_through"]:
        via += f" (tried first: {'; '.join(path['fell_through'])})"
    fp = _fingerprint_words(record, path)
    if record["refusal"]:
        r = record["refusal"]
        return f"refused{via}: {r['type']}: {r['message']} ({fp})"
    written = record["written"]
    return (f"converted{via}: tokenizer.ggml.model={written['model']!r} tokenizer.ggml.pre={written['pre']!r} "
            f"({written['vocab_size']} tokens); {fp}")


def decide(path: Path) -> dict[str, Any]:
    """What the converter does with the tokenizer folder of `path` (a folder, or a file in it): converted into
    a private folder and dropped, its record kept (the path it took, the fingerprint if that path computes one,
    the tokenizer.ggml.pre it wrote, or its refusal). `inspect --reference` reads it."""
    folder = path if path.is_dir() else path.parent
    with tempfile.TemporaryDirectory(prefix="gguf-parity-decide-") as tmp:
        return convert(folder, Path(tmp) / "decide.gguf", log=lambda line: None)


def fingerprint(path: Path) -> dict[str, Any]:
    """The converter's fingerprint of a tokenizer folder and the name it maps it to (None if unknown)."""
    folder = path if path.is_dir() else path.parent
    check_sizes(folder)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / (folder.resolve().name or "model")
        work.mkdir()
        if (reason := folder_data.custom_code(folder)) is not None:
            raise SetupError(reason)
        work_folder(folder, work)
        result = run_driver("fingerprint", [str(work)], timeout=300, folder_code=folder_data.tokenizer_code(folder))
    _refuse_custom_code(path, result)
    decision = (result["decisions"] or [{}])[-1]
    if not decision.get("chkhsh"):
        err = result["error"] or {"type": "?", "message": "no fingerprint computed"}
        raise SetupError(f"{path}: the converter computed no fingerprint: {err['type']}: {err['message']}")
    return {"chkhsh": decision["chkhsh"], "pre": decision.get("pre")}

"""A model folder is data, never code: what llama.cpp's converter is given from a user's folder.

A tokenizer folder from anywhere may ship Python (`tokenization_x.py`) and point
transformers at it (`auto_map` in `tokenizer_config.json` or `config.json`); the
converter loads some tokenizers with `trust_remote_code=True`. gguf-parity runs no
file of a folder, by three walls:

- the converter's work folder holds *copies* of the data files it reads
  (`DATA_FILES`, each a regular file of at most `MAX_FILE_BYTES`), never a link, a `*.py` or
  anything else of the folder; what was left out is said. Every file is read as
  `harness.models.folder_files` reads a folder's files: a link that leaves the folder, a FIFO
  or a device named like a data file is refused naming it (exit 2), never copied;
- the copies of `config.json` and `tokenizer_config.json` lose `auto_map`, the one
  key through which transformers finds a folder's code (and a `tokenizer_class`
  that `auto_map` named becomes `PreTrainedTokenizerFast`, tokenizer.json as it is);
- in the converter's process, transformers' loader of a folder's code refuses
  (`harness/models/convert_driver.py`), whatever `trust_remote_code` the converter passes.

When the converter asks for a tokenizer with `trust_remote_code=True` and the folder's
`auto_map` names one (`tokenizer_code`), the driver refuses it: the tokenizer needs custom
code, exit 2, one line (a path such as SentencePiece's, which reads `tokenizer.model` itself,
goes on). `inspect --reference hf:` on such a folder without `tokenizer.json` is refused before
the converter starts (`custom_code`).
The JSON files the harness parses itself are read with a size and depth bound, and a
`tokenizer.json` whose fields are not what every reader expects is refused naming the
file and the field (`read_tokenizer_json`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files import protobuf
from ..files.input_limits import loads, tokenizer_file_limit
from . import folder_files

# The files the converter (and transformers under it) read for a tokenizer, and nothing else.
DATA_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tekken.json",
              "params.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt",
              "merges.txt", "generation_config.json", "chat_template.json", "chat_template.jinja")
CODE_KEY = "auto_map"
STRIPPED = ("config.json", "tokenizer_config.json")  # copies that lose `auto_map`
MAX_FILE_BYTES = 2 << 30   # one data file copied (the largest real tokenizer.json is about 33 MB)
MAX_JSON_BYTES = 128 << 20  # one JSON file the harness parses itself (4x the largest real tokenizer.json)
FAST = "PreTrainedTokenizerFast"


def read_json(path: Path) -> Any:
    """A JSON file of the folder `path.parent`, bounded in size and depth, inside the folder and regular
    (`harness.models.folder_files`); `SetupError` naming the file."""
    try:
        return loads(folder_files.read_file(path, MAX_JSON_BYTES), str(path))
    except ValueError as exc:
        raise SetupError(str(exc)) from None


def read_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise SetupError(f"{path}: expected a JSON object, found {_kind(data)}")
    return data


def read_tokenizer_json(path: Path) -> dict[str, Any]:
    """tokenizer.json with the fields the harness reads checked: `model` (an object with a
    string `type` and a `vocab` of integer ids or a list) and `added_tokens` (objects with an
    integer `id`). `SetupError` naming the file and the field."""
    data = read_object(path)
    model = data.get("model")
    if not isinstance(model, dict):
        raise SetupError(f"{path}: field 'model' is {_shown(model)}, expected an object")
    if not isinstance(model.get("type", ""), str):
        raise SetupError(f"{path}: field 'model.type' is {_shown(model['type'])}, expected a string")
    vocab = model.get("vocab", {})
    if isinstance(vocab, dict):
        bad = next((k for k, v in vocab.items() if not _is_id(v)), None)
        if bad is not None:
            raise SetupError(f"{path}: field 'model.vocab[{bad!r}]' is {_shown(vocab[bad])}, expected a token id "
                             "(an integer >= 0)")
    elif not isinstance(vocab, list):
        raise SetupError(f"{path}: field 'model.vocab' is {_shown(vocab)}, expected an object or a list")
    added = data.get("added_tokens", [])
    if not isinstance(added, list):
        raise SetupError(f"{path}: field 'added_tokens' is {_shown(added)}, expected a list")
    for n, token in enumerate(added):
        if not isinstance(token, dict) or not _is_id(token.get("id")):
            raise SetupError(f"{path}: field 'added_tokens[{n}]' is {_shown(token)}, expected an object with an "
                             "integer 'id'")
    return data


def read_tekken(path: Path) -> dict[str, Any]:
    """tekken.json with `config.default_vocab_size` (an integer) and `vocab` (a list) checked."""
    data = read_object(path)
    config = data.get("config")
    if not isinstance(config, dict):
        raise SetupError(f"{path}: field 'config' is {_shown(config)}, expected an object")
    if not _is_id(config.get("default_vocab_size")):
        raise SetupError(f"{path}: field 'config.default_vocab_size' is {_shown(config.get('default_vocab_size'))}, "
                         "expected an integer")
    if not isinstance(data.get("vocab"), list):
        raise SetupError(f"{path}: field 'vocab' is {_shown(data.get('vocab'))}, expected a list")
    return data


def sentencepiece_pieces(path: Path) -> int:
    """How many pieces a SentencePiece ModelProto holds, checked from the wire format: every top-level
    field 1 a message whose own field 1 is the piece's bytes, and at least one. `SetupError` otherwise."""
    pieces = 0
    try:
        for number, wire, value in protobuf.fields(read_data(path)):
            if number == 1:
                inner = protobuf.fields(value) if wire == 2 else []
                if not any(n == 1 and w == 2 for n, w, _ in inner):
                    raise protobuf.ProtobufError(f"piece {pieces} has no text (field 1)")
                pieces += 1
    except protobuf.ProtobufError as exc:
        raise SetupError(f"{path}: not a SentencePiece model ({exc})") from None
    if not pieces:
        raise SetupError(f"{path}: not a SentencePiece model (no pieces)")
    return pieces


def _is_id(value: Any) -> bool:
    return type(value) is int and value >= 0


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    if value is None:
        return "missing or null"
    text = repr(value)
    return text if len(text) <= 40 else f"{_kind(value)} ({text[:37]}...)"


def tokenizer_code(folder: Path) -> str | None:
    """The custom tokenizer class `auto_map` names in tokenizer_config.json or config.json, or None."""
    for name in STRIPPED:
        if folder_files.present(folder / name) and (code := _tokenizer_code(read_object(folder / name))):
            return code
    return None


def custom_code(folder: Path) -> str | None:
    """Why `folder`'s tokenizer exists only as code of the folder, or None.

    `auto_map` naming a tokenizer (`AutoTokenizer`, or the old list form) in
    tokenizer_config.json or config.json, and no tokenizer.json to read instead.
    """
    if folder_files.present(folder / "tokenizer.json"):
        return None
    for name in STRIPPED:
        if folder_files.present(folder / name) and (code := _tokenizer_code(read_object(folder / name))):
            return (f"{folder}: the tokenizer needs custom code ({name}'s auto_map loads {code} from the folder) "
                    "and there is no tokenizer.json; gguf-parity runs no code from a model folder")
    return None


def _tokenizer_code(data: dict[str, Any]) -> str | None:
    """What `auto_map` loads as the tokenizer (`tokenization_x.Class`), or None."""
    auto_map = data.get(CODE_KEY)
    entry = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map
    names = [entry] if isinstance(entry, str) else entry if isinstance(entry, list) else []
    found = [str(n) for n in names if n]
    return ", ".join(found) or None


def copy_data(source: Path, work: Path) -> None:
    """Copy `source`'s data files (`DATA_FILES`) into `work`: copies, never links, each a regular file inside
    the folder of at most `MAX_FILE_BYTES` (`harness.models.folder_files`); anything else is a `SetupError`."""
    for name in DATA_FILES:
        if folder_files.present(source / name):
            folder_files.copy_file(source / name, work / name, MAX_FILE_BYTES)


def left_out(source: Path) -> list[str]:
    """The names in `source` that `copy_data` leaves out: everything but the data files."""
    return sorted(p.name for p in source.iterdir() if p.name not in DATA_FILES)


def read_data(path: Path) -> bytes:
    """A binary data file (tokenizer.model) the harness reads itself, at most its limit
    (`tokenizer_file_limit`), inside the folder and regular (`harness.models.folder_files`)."""
    return folder_files.read_file(path, tokenizer_file_limit(path))


def without_code(source: Path) -> list[dict[str, Any]]:
    """The copies of config.json and tokenizer_config.json that hold `auto_map`, rewritten without it."""
    rewritten = []
    for name in STRIPPED:
        path = source / name
        if not folder_files.present(path):
            continue
        data = read_object(path)
        if CODE_KEY not in data:
            continue
        content = {k: v for k, v in data.items() if k != CODE_KEY}
        why = "the folder's own without auto_map (gguf-parity runs no code from a model folder)"
        json_beside = folder_files.present(source / "tokenizer.json")
        if name == "tokenizer_config.json" and _tokenizer_code(data) and json_beside:
            content["tokenizer_class"] = FAST
            why += f"; tokenizer_class {FAST}, tokenizer.json as it is, for the class auto_map named"
        rewritten.append({"file": name, "content": content, "why": why})
    return rewritten

"""Which GGUF tokenizer keys disagree with the original tokenizer: cheap checks, no tokenizing.

A conversion finding (llama.cpp != original) names the keys it can be
traced to. These checks read the GGUF through `tokenizer.Vocab` (llama.cpp's
load rules: what llama.cpp makes of each key, pinned against llama.cpp by the
golden vocabulary check) and the original as plain data (tokenizer.json as
JSON; a SentencePiece .model's few needed protobuf fields), so they run in
the harness's process without the reference's library:

    key                                  original
    tokenizer.ggml.add_bos_token         the post-processor adds a BOS (first template item), and which id
    tokenizer.ggml.add_eos_token         the post-processor adds an EOS (last template item)
    tokenizer.ggml.pre                   ignore_merges as llama.cpp sets it for that name, against the model's
    tokenizer.ggml.pre                   the Split regexes of the pre-tokenizer, against llama.cpp's for that name
    tokenizer.ggml.token_type            an added token's `special` (CONTROL), lstrip/rstrip (LSTRIP/RSTRIP)
    tokenizer.ggml.tokens                the count, and each token's text (BPE)
    tokenizer.ggml.merges                the count (merges dropped by a converter)
    tokenizer.ggml.model                 WordPiece's `max_input_chars_per_word`, which llama.cpp's WPM lacks
    tokenizer.ggml.normalizer.*          a BertNormalizer's lowercase / strip_accents against llama.cpp's for the GGUF
    tokenizer.ggml.model                 a BertNormalizer's strip_accents (Mn only) and clean_text, which llama.cpp's
                                         WPM does otherwise (every mark; U+000B, U+000C, U+0085 as word breaks)
    tokenizer.ggml.add_space_prefix      SentencePiece's `add_dummy_prefix`; for a tokenizer.json SentencePiece
                                         layout, the key absent (read as on) where the original prepends no U+2581
    tokenizer.ggml.scores                every score the converter's placeholder -1000.0 (tokenizer.json only)
    (converter)                          its own "Mismatch ... opting for the latter" lines (X.convert.json)
    tokenizer.ggml.remove_extra_whitespaces  SentencePiece's `remove_extra_whitespaces`
    (any float key)                      a NaN or an infinite value (a score, a float key): named by key and index
    (tekken)                             the count (`default_vocab_size`), each non-special token's bytes,
                                         `config.pattern` against llama.cpp's regex for the pre name,
                                         add_bos (mistral-common starts every request with the BOS)

    python -m harness.references.gguf_keys FILE.gguf hf:PATH     # one line per discrepancy; exit 1 if any
                                                                 # (spm:PATH, tekken:PATH the same)

A discrepancy is a lead, not a verdict: the cases decide (docs/references.md).
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizer import Tokenizer
from tokenizer.attrs import Attr
from tokenizer.pretokenize.behaviours import get as get_pretokenizer
from tokenizer.unicode import byte_to_char

from ..errors import SetupError
from ..files import protobuf
from ..files.input_limits import loads, read_tokenizer_file
from ..models.summary import non_finite, non_finite_line
from .hf import config_beside
from .specs import ReferenceSpec, parse

MAX_SHOWN = 5  # token ids named per discrepancy
PLACEHOLDER_SCORE = -1000.0  # what the converter writes for every token of a tokenizer.json-only SentencePiece folder
MAX_SIDECAR = 1 << 20  # bytes of X.convert.json read for the converter's own warnings


@dataclass(frozen=True)
class Discrepancy:
    """One GGUF key whose value does not say what the original says."""

    key: str
    gguf: str
    original: str
    note: str = ""

    def line(self) -> str:
        tail = f" ({self.note})" if self.note else ""
        return f"{self.key}: GGUF {self.gguf}; original {self.original}{tail}"


def discrepancies(gguf_path: str | Path, spec: str | ReferenceSpec) -> list[Discrepancy]:
    """Every discrepancy the cheap checks find between the GGUF and the reference."""
    ref = parse(spec) if isinstance(spec, str) else spec
    tok = Tokenizer.from_gguf(gguf_path)
    found = non_finite_discrepancies(tok.vocab.metadata)
    where = str(ref.source or ref.path)
    if ref.kind == "hf":
        return found + hf_discrepancies(tok, loads(read_tokenizer_file(ref.path), where), config_beside(ref.path))
    if ref.kind == "spm":
        return found + spm_discrepancies(tok, read_spm(read_tokenizer_file(ref.path)), config_beside(ref.path))
    if ref.kind == "tekken":
        return found + tekken_discrepancies(tok, loads(read_tokenizer_file(ref.path), where))
    return found


def non_finite_discrepancies(metadata: Mapping[str, Any]) -> list[Discrepancy]:
    """Each key holding a NaN or an infinite float (`harness.models.summary.non_finite`): a finding about the
    file whatever the original says (no score or float the original holds is NaN or infinite)."""
    return [Discrepancy(entry["key"], non_finite_line(entry).partition(": ")[2], "finite values",
                        "a NaN compares neither above nor below any score: llama.cpp's merge order is undefined")
            for entry in non_finite(metadata)]


# --- tokenizer.json --------------------------------------------------------------------------------

def _template_ends(post: Any) -> tuple[int | None, int | None]:
    """The ids the post-processor puts first and last on a single sequence (None: nothing there)."""
    if not isinstance(post, dict):
        return None, None
    kind = post.get("type")
    if kind == "Sequence":
        first = last = None
        for inner in post.get("processors") or []:
            f, la = _template_ends(inner)
            first, last = first if first is not None else f, la if la is not None else last
        return first, last
    if kind in ("BertProcessing", "RobertaProcessing"):
        return post["cls"][1], post["sep"][1]
    if kind != "TemplateProcessing":
        return None, None
    single = post.get("single") or []
    specials = post.get("special_tokens") or {}

    def special_id(item: Any) -> int | None:
        name = item.get("SpecialToken", {}).get("id") if isinstance(item, dict) else None
        ids = (specials.get(name) or {}).get("ids") if name is not None else None
        return ids[0] if ids else None
    return (special_id(single[0]) if single else None), (special_id(single[-1]) if single else None)


def _split_patterns(pre: Any) -> list[str]:
    """The regex strings of every Split in the pre-tokenizer, in order."""
    if not isinstance(pre, dict):
        return []
    if pre.get("type") == "Sequence":
        return [p for inner in pre.get("pretokenizers") or [] for p in _split_patterns(inner)]
    pattern = pre.get("pattern") if pre.get("type") == "Split" else None
    return [pattern["Regex"]] if isinstance(pattern, dict) and "Regex" in pattern else []


def _case_classes(match: re.Match[str]) -> str:
    return "(?:" + re.sub(r"[A-Za-z]", lambda m: f"[{m[0].lower()}{m[0].upper()}]", match[1]) + ")"


def llama_form(pattern: str) -> str:
    """A tokenizer.json regex as llama.cpp writes it: `(?i:'s|'t)` becomes `(?:'[sS]|'[tT])`.

    llama.cpp's regex engine has no inline flags, so its copies of these
    patterns spell the case-insensitive group out; the two are the same split.
    """
    return re.sub(r"\(\?i:([^()]*)\)", _case_classes, pattern)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def hf_discrepancies(tok: Tokenizer, data: dict, config: dict) -> list[Discrepancy]:
    vocab, model = tok.vocab, data.get("model") or {}
    out: list[Discrepancy] = []
    first, last = _template_ends(data.get("post_processor"))
    bos, eos = vocab.special.get("bos"), vocab.special.get("eos")
    adds_bos = first is not None
    if vocab.add_bos != adds_bos or (adds_bos and vocab.add_bos and first != bos):
        out.append(Discrepancy("tokenizer.ggml.add_bos_token", f"adds BOS {_yes(vocab.add_bos)} (id {bos})",
                               f"post-processor adds {'id ' + str(first) if adds_bos else 'no BOS'}",
                               _config_note(config, "add_bos_token")))
    adds_eos = last is not None
    if vocab.add_eos != adds_eos and vocab.vocab_type != "wpm":  # WPM's closing [SEP] is add_sep
        out.append(Discrepancy("tokenizer.ggml.add_eos_token", f"adds EOS {_yes(vocab.add_eos)} (id {eos})",
                               f"post-processor adds {'id ' + str(last) if adds_eos else 'no EOS'}",
                               _config_note(config, "add_eos_token")))
    if model.get("type") == "BPE" and vocab.vocab_type == "bpe":
        out += _bpe_model(vocab, model, _split_patterns(data.get("pre_tokenizer")))
    if model.get("type") == "WordPiece" and vocab.vocab_type == "wpm" and model.get("max_input_chars_per_word"):
        out.append(Discrepancy("tokenizer.ggml.model", "'bert': llama.cpp's WPM has no word-length limit",
                               f"WordPiece max_input_chars_per_word {model['max_input_chars_per_word']}",
                               "a longer word is one [UNK] in the original, word pieces in llama.cpp "
                               "(llm_tokenizer_wpm_session::tokenize); no GGUF key carries the limit"))
    if model.get("type") == "WordPiece" and vocab.vocab_type == "wpm":
        out += _bert_normalizer(vocab, data.get("normalizer"))
    if vocab.vocab_type == "spm":
        out += _spm_layout(tok, data)
    out += _added_tokens(tok, data.get("added_tokens") or [])
    out += _token_count(vocab, model, data.get("added_tokens") or [])
    return out


def prepends_space(data: dict) -> bool | None:
    """Whether the original puts U+2581 before the text (a Prepend normalizer, a Metaspace that prepends);
    None when it has neither (not a SentencePiece-style layout)."""
    def walk(part: Any, key: str) -> list[dict]:
        if not isinstance(part, dict):
            return []
        inner = part.get(key) or []
        return [p for i in inner for p in walk(i, key)] if part.get("type") == "Sequence" else [part]
    normal = walk(data.get("normalizer"), "normalizers")
    pre = walk(data.get("pre_tokenizer"), "pretokenizers")
    if any(p.get("type") == "Prepend" and p.get("prepend") == "\u2581" for p in normal):
        return True
    metaspace = [p for p in pre if p.get("type") == "Metaspace"]
    if metaspace:
        m = metaspace[0]
        return m.get("prepend_scheme", "always" if m.get("add_prefix_space", True) else "never") != "never"
    if any(p.get("type") == "Replace" for p in normal):  # Llama-2 / Gemma layout: Replace " " -> U+2581, no Prepend
        return False
    return None


def _spm_layout(tok: Tokenizer, data: dict) -> list[Discrepancy]:
    """What the converter writes for a tokenizer.json-only SentencePiece-style folder (Llama-2, Gemma layouts):
    every score the placeholder, and no add_space_prefix key (llama.cpp then reads it as on)."""
    meta, out = tok.vocab.metadata, []
    scores = meta.get("tokenizer.ggml.scores")
    if scores is not None and len(scores) and all(float(x) == PLACEHOLDER_SCORE for x in scores):
        out.append(Discrepancy("tokenizer.ggml.scores",
                               f"every score is the converter's placeholder {PLACEHOLDER_SCORE}",
                               f"{len((data.get('model') or {}).get('merges') or [])} merges in order",
                               "llama.cpp's SentencePiece session merges by score, so with all equal it merges in "
                               "another order than the original"))
    wanted = prepends_space(data)
    if "tokenizer.ggml.add_space_prefix" not in meta and wanted is False and tok.vocab.add_space_prefix:
        out.append(Discrepancy("tokenizer.ggml.add_space_prefix", "absent, so llama.cpp reads it as on "
                               "(\"Hello\" becomes \u2581Hello)", "no U+2581 put before the text"))
    return out


def converter_warnings(gguf_path: str | Path) -> list[str]:
    """The converter's own warnings about the tokenizer, from `X.convert.json` beside `X.gguf` (`convert`).

    Lines such as "Mismatch between ... opting for the latter" say the converter chose between the
    original's two settings; they are printed once at conversion and kept in the record's output.
    """
    path = Path(gguf_path)
    sidecar = path.with_name(path.name.removesuffix(".gguf") + ".convert.json")
    try:
        if not sidecar.is_file() or sidecar.stat().st_size > MAX_SIDECAR:
            return []
        record = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    lines = [line for value in (record.values() if isinstance(record, dict) else ())
             if isinstance(value, list) for line in value if isinstance(line, str)]
    return list(dict.fromkeys(line.strip() for line in lines
                              if "mismatch" in line.lower() or "opting for" in line.lower()))


def _bert_normalizer(vocab: Any, normalizer: Any) -> list[Discrepancy]:
    """A BertNormalizer against llm_tokenizer_wpm_session::preprocess (docs/conversion-findings.md).

    The two flags are GGUF keys (`tokenizer.ggml.normalizer.lowercase`, `.strip_accents`; absent,
    llama.cpp reads both as on; the converter copies them through gguf-py's SpecialVocab); how
    each side strips accents and cleans text is not: there llama.cpp differs whatever the GGUF says.
    """
    if not isinstance(normalizer, dict) or normalizer.get("type") != "BertNormalizer":
        return []
    lower = bool(normalizer.get("lowercase", True))
    strip = lower if normalizer.get("strip_accents") is None else bool(normalizer["strip_accents"])
    out = []
    for key, ours, theirs in (("lowercase", vocab.normalizer_lowercase, lower),
                              ("strip_accents", vocab.normalizer_strip_accents, strip)):
        if bool(ours) != theirs:
            out.append(Discrepancy(f"tokenizer.ggml.normalizer.{key}", f"{key} {_yes(ours)} (llama.cpp's reading)",
                                   f"BertNormalizer {key} {_yes(theirs)}"))
    if strip and vocab.normalizer_strip_accents:
        out.append(Discrepancy("tokenizer.ggml.model", "'bert': llama.cpp's WPM strips every mark (Mn, Mc, Me) "
                               "after a one-to-one NFD", "BertNormalizer strip_accents: Mn only, after a full NFD",
                               "spacing and enclosing marks (Indic vowel signs, U+20E3) stay in the original; a "
                               "Hangul syllable keeps only its first jamo in llama.cpp; no GGUF key carries it"))
    if normalizer.get("clean_text", True):
        out.append(Discrepancy("tokenizer.ggml.model", "'bert': llama.cpp's WPM takes U+000B, U+000C, U+0085 "
                               "as word breaks", "BertNormalizer clean_text deletes them (control characters)",
                               "the words on each side join in the original; no GGUF key carries it"))
    return out


def _config_note(config: dict, key: str) -> str:
    return f"tokenizer_config.json sets {key} = {config[key]!r}" if key in config else ""


def _bpe_model(vocab: Any, model: dict, patterns: list[str]) -> list[Discrepancy]:
    out = []
    original = bool(model.get("ignore_merges", False))
    if vocab.ignore_merges != original:
        out.append(Discrepancy("tokenizer.ggml.pre",
                               f"{vocab.pre!r}: llama.cpp ignore_merges {_yes(vocab.ignore_merges)}",
                               f"model.ignore_merges {_yes(original)}",
                               "a word that is one token in the original is merged piece by piece, or the reverse"))
    ours = get_pretokenizer(vocab.pre_type).patterns
    if patterns and [llama_form(p) for p in patterns] != list(ours):
        out.append(Discrepancy("tokenizer.ggml.pre", f"{vocab.pre!r} splits with {len(ours)} regex(es) of llama.cpp's",
                               f"{len(patterns)} Split regex(es), not the same text",
                               "compare the texts: llama.cpp rewrites some; a different split is a lead"))
    merges = model.get("merges") or []
    if len(merges) != len(vocab.merges):
        out.append(Discrepancy("tokenizer.ggml.merges", f"{len(vocab.merges)} merges", f"{len(merges)} merges"))
    texts = model.get("vocab") or {}
    wrong = [i for text, i in texts.items() if i < vocab.n_tokens and vocab.texts[i] != text.encode("utf-8")]
    if wrong:
        out.append(Discrepancy("tokenizer.ggml.tokens", f"{len(wrong)} token text(s) differ",
                               "the model's vocab", f"ids {sorted(wrong)[:MAX_SHOWN]}"))
    return out


def _added_tokens(tok: Tokenizer, added: list[dict]) -> list[Discrepancy]:
    """Each added token's special / lstrip / rstrip against the GGUF's token type and llama.cpp's attrs."""
    vocab = tok.vocab
    rows: dict[str, list[str]] = {"special": [], "lstrip": [], "rstrip": []}
    for token in added:
        i = token.get("id")
        if not isinstance(i, int) or not 0 <= i < vocab.n_tokens:
            continue
        attr = vocab.attrs[i]
        for name, bit in (("special", Attr.CONTROL), ("lstrip", Attr.LSTRIP), ("rstrip", Attr.RSTRIP)):
            if bool(token.get(name, False)) != bool(attr & bit):
                rows[name].append(f"{i} {token.get('content')!r}: original {name} {_yes(bool(token.get(name)))}")
    out = []
    for name, found in rows.items():
        if found:
            what = "CONTROL type" if name == "special" else f"{name.upper()} attr"
            out.append(Discrepancy("tokenizer.ggml.token_type",
                                   f"{len(found)} added token(s) with {what} the other way",
                                   f"added_tokens[].{name}", "; ".join(found[:MAX_SHOWN])))
    return out


def _token_count(vocab: Any, model: dict, added: list[dict]) -> list[Discrepancy]:
    ids = set((model.get("vocab") or {}).values()) if isinstance(model.get("vocab"), dict) else set()
    ids |= {t["id"] for t in added if isinstance(t.get("id"), int)}
    if ids and max(ids) + 1 != vocab.n_tokens:
        return [Discrepancy("tokenizer.ggml.tokens", f"{vocab.n_tokens} tokens", f"{max(ids) + 1} ids")]
    return []


# --- SentencePiece .model ---------------------------------------------------------------------------

TRAINER_IDS = {"unk": (40, 0), "bos": (41, 1), "eos": (42, 2), "pad": (43, -1)}  # TrainerSpec field, default


def read_spm(buf: bytes) -> dict:
    """The fields of a SentencePiece ModelProto the checks need: pieces, types, scores, normalizer flags, and
    the trainer's special ids (`ids`: unk, bos, eos, pad; -1 for none)."""
    pieces, types, scores = [], [], []
    normalizer: dict[str, bool] = {"add_dummy_prefix": True, "remove_extra_whitespaces": True}
    ids = {role: default for role, (_, default) in TRAINER_IDS.items()}
    for number, _, value in protobuf.fields(buf):
        if number == 1:  # SentencePiece { piece = 1; score = 2; type = 3 (NORMAL 1 default) }
            inner = {n: v for n, _, v in protobuf.fields(value)}
            pieces.append(inner.get(1, b"").decode("utf-8", "replace"))
            types.append(inner.get(3, 1))
            scores.append(inner[2] if isinstance(inner.get(2), float) else 0.0)
        elif number == 2:  # TrainerSpec { unk_id = 40; bos_id = 41; eos_id = 42; pad_id = 43 }
            inner = {n: v for n, _, v in protobuf.fields(value)}
            for role, (field, _) in TRAINER_IDS.items():
                if isinstance(inner.get(field), int):
                    raw = inner[field] & 0xFFFFFFFF  # an int32 (-1 is written as ten bytes)
                    ids[role] = raw - (1 << 32) if raw >= 1 << 31 else raw
        elif number == 3:  # NormalizerSpec { add_dummy_prefix = 3; remove_extra_whitespaces = 4 }
            inner = {n: v for n, _, v in protobuf.fields(value)}
            normalizer = {"add_dummy_prefix": bool(inner.get(3, 1)), "remove_extra_whitespaces": bool(inner.get(4, 1))}
    return {"pieces": pieces, "types": types, "scores": scores, "ids": ids, **normalizer}


TOKEN_TYPES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}
"""SentencePiece's piece types; llama.cpp's token types number them the same way."""


def spm_discrepancies(tok: Tokenizer, model: dict, config: dict) -> list[Discrepancy]:
    vocab, out = tok.vocab, []
    for key, flag in (("add_space_prefix", "add_dummy_prefix"),
                      ("remove_extra_whitespaces", "remove_extra_whitespaces")):
        if getattr(vocab, key) != model[flag]:
            out.append(Discrepancy(f"tokenizer.ggml.{key}", _yes(getattr(vocab, key)), f"{flag} {_yes(model[flag])}"))
    if "add_bos_token" in config and vocab.add_bos != bool(config["add_bos_token"]):
        out.append(Discrepancy("tokenizer.ggml.add_bos_token", _yes(vocab.add_bos),
                               f"tokenizer_config.json add_bos_token {config['add_bos_token']!r}"))
    if len(model["pieces"]) != vocab.n_tokens:
        out.append(Discrepancy("tokenizer.ggml.tokens", f"{vocab.n_tokens} tokens", f"{len(model['pieces'])} pieces"))
    n = min(len(model["pieces"]), vocab.n_tokens)
    wrong = [i for i in range(n) if vocab.texts[i] != model["pieces"][i].encode("utf-8")]
    if wrong:
        out.append(Discrepancy("tokenizer.ggml.tokens", f"{len(wrong)} token text(s) differ", "the model's pieces",
                               f"ids {wrong[:MAX_SHOWN]}"))
    types = tok.vocab.metadata.get("tokenizer.ggml.token_type")
    if types is not None:
        bad = [i for i in range(n) if int(types[i]) != model["types"][i]]
        if bad:
            shown = [f"{i}: {TOKEN_TYPES.get(int(types[i]), types[i])} vs {TOKEN_TYPES.get(model['types'][i])}"
                     for i in bad[:MAX_SHOWN]]
            out.append(Discrepancy("tokenizer.ggml.token_type", f"{len(bad)} token type(s) differ",
                                   "the model's piece types", "; ".join(shown)))
    return out


# --- tekken.json ---------------------------------------------------------------------------------

def tekken_discrepancies(tok: Tokenizer, data: dict) -> list[Discrepancy]:
    """A tekken file (plain JSON) against the GGUF: count, the non-special tokens' bytes, the split, add_bos."""
    vocab, config, out = tok.vocab, data.get("config") or {}, []
    size, n_special = int(config.get("default_vocab_size", 0)), int(config.get("default_num_special_tokens", 0))
    if size != vocab.n_tokens:
        out.append(Discrepancy("tokenizer.ggml.tokens", f"{vocab.n_tokens} tokens", f"default_vocab_size {size}"))
    table = byte_to_char()
    inner = (data.get("vocab") or [])[:max(size - n_special, 0)]
    wrong = [n_special + i for i, t in enumerate(inner) if n_special + i < vocab.n_tokens
             and vocab.texts[n_special + i] != "".join(table[b] for b in base64.b64decode(t["token_bytes"])).encode()]
    if wrong:
        out.append(Discrepancy("tokenizer.ggml.tokens", f"{len(wrong)} token text(s) differ",
                               "the file's token_bytes, byte-level", f"ids {wrong[:MAX_SHOWN]}"))
    pattern = config.get("pattern")
    ours = get_pretokenizer(vocab.pre_type).patterns
    if pattern and [llama_form(pattern)] != list(ours):
        note = ("llama.cpp spells the letter classes as (?=[\\p{L}])([^a-z]) / ([^A-Z]) and leaves out \\p{M}"
                if "\\p{M}" in pattern and not any("\\p{M}" in p for p in ours) else "compare the texts")
        out.append(Discrepancy("tokenizer.ggml.pre", f"{vocab.pre!r} splits with llama.cpp's own regex",
                               "config.pattern, not the same text", note))
    if not vocab.add_bos:
        out.append(Discrepancy("tokenizer.ggml.add_bos_token", "no", "mistral-common starts each request with <s>"))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m harness.references.gguf_keys FILE.gguf hf:PATH|spm:PATH|tekken:PATH", file=sys.stderr)
        return 2
    try:
        found = discrepancies(args[0], args[1])
    except (SetupError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for item in found:
        print(item.line())
    print(f"{len(found)} discrepanc{'y' if len(found) == 1 else 'ies'} between {args[0]} and {args[1]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

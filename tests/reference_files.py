"""Tiny original tokenizers for tests/references/test_references.py, built by their own libraries in the test.

Nothing is downloaded: a byte-level BPE `tokenizer.json` trained with
`tokenizers` on a few sentences, a SentencePiece `.model` trained with
`sentencepiece`, and a GGUF written from the tokenizer.json the way llama.cpp's
converter lays a BPE vocabulary out (tokens by id, merges "a b", special
added tokens CONTROL, other added tokens USER_DEFINED).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

TEXT = ["the cat sat on the mat", "a hat on a cat", "the theme of the thesis", "hello world",
        "Hello, World! It's a test.", "don't stop; we're here", "12345 67890"] * 20
BOS = "<|bos|>"
TOOL = "<tool>"
WORD = "Ġzebra"  # " zebra", byte-level: one token in the vocab, reached by no merge


def bpe_json(path: Path, *, ignore_merges: bool = True, bos: bool = True, words: tuple[str, ...] = (),
             nfc: bool = False) -> Path:
    """A byte-level BPE tokenizer.json: a special BOS (added by the post-processor when `bos`), <tool>, and WORD
    (and `words`, each spelled byte-level, reached by no merge either); `nfc`: an NFC normalizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=300, special_tokens=[],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    data = json.loads(tok.to_str())
    for word in (WORD, *map(byte_level, words)):  # words no merge reaches: ignore_merges decides them
        data["model"]["vocab"][word] = len(data["model"]["vocab"])
    tok = Tokenizer.from_str(json.dumps(data))  # the added tokens come after it (tokenizers wants ids contiguous)
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([AddedToken(BOS, special=True, normalized=False)])
    tok.add_tokens([AddedToken(TOOL, special=False, normalized=False)])
    if bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A",
                                                           special_tokens=[(BOS, tok.token_to_id(BOS))])
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def byte_level(text: str) -> str:
    """`text` as a byte-level BPE token spells it (GPT-2's byte-to-character table)."""
    from tokenizer import unicode as uni
    table = {b: ch for ch, b in uni.char_to_byte().items()}
    return "".join(table[b] for b in text.encode("utf-8"))


def bpe_gguf(tokenizer_json: Path, path: Path, *, pre: str = "llama-bpe", add_bos: bool = True,
             retype: dict[str, int] | None = None, extra: dict | None = None) -> Path:
    """A vocab-only GGUF of `tokenizer_json`, as the converter would lay it out, with `pre` and add_bos given
    (and `retype`: an added token's text -> the GGUF token type to write instead, a planted fault;
    `extra`: more metadata keys, e.g. a `tokenizer.chat_template`)."""
    from harness.models import gguf_writer
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab = dict(data["model"]["vocab"])
    types = {}
    for token in data["added_tokens"]:
        vocab[token["content"]] = token["id"]
        types[token["id"]] = (retype or {}).get(token["content"], 3 if token["special"] else 4)
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    bos = next(t["id"] for t in data["added_tokens"] if t["content"] == BOS)
    gguf_writer.write(path, {
        "general.architecture": "llama", "general.name": "tiny-bpe",
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [types.get(i, 1) for i in range(len(tokens))],
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": bos, "tokenizer.ggml.eos_token_id": bos,
        "tokenizer.ggml.add_bos_token": add_bos, **(extra or {}),
    })
    return path


def spm_model(path: Path, *, config: dict | None = None) -> Path:
    """A SentencePiece unigram model trained on TEXT, <tool> user-defined; `config` as tokenizer_config.json."""
    import sentencepiece
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_writer=out, vocab_size=50,
                                             hard_vocab_limit=False, user_defined_symbols=[TOOL], minloglevel=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out.getvalue())
    if config is not None:
        (path.parent / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


# --- tekken (Mistral's tiktoken-style JSON, run by mistral-common) ----------------------------------

TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # tekken_240911.json's
# the 20 a v3 file gets by default (mistral-common's instruct tokenizer asks for them by name)
TEKKEN_SPECIALS = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                   "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
                   "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                   "[TOOL_CONTENT]")
TEKKEN_NUM_SPECIAL = 24  # mistral-common fills ids 20..23 with <SPECIAL_20> ...
# multi-byte tokens by rank after the 256 bytes; each is two earlier tokens joined (the converter
# derives merges from them and refuses a token it cannot split). "कि" (KA + the vowel sign I, a
# combining mark) is one piece of tekken's regex and one token.
KI = "\u0915\u093f"
TEKKEN_WORDS = tuple(w.encode("utf-8") if isinstance(w, str) else w for w in (
    "th", "the", " t", " the", "at", " c", " cat", " s", " sat", "he", "ll", "hell", "hello",
    " w", "or", " wor", "ld", " world", "é", "ée", " é", " éc", "co", "le", "ole", " école",
    b"\xe0\xa4", "\u0915", "\u093f", KI))


def tekken_json(path: Path, *, special_tokens: bool = True, words: tuple[str, ...] = ()) -> Path:
    """A tiny tekken.json (version v3): the 256 bytes, TEKKEN_WORDS (then `words`, each two earlier tokens
    joined), and TEKKEN_SPECIALS listed (or, `special_tokens=False`, left to mistral-common's defaults)."""
    import base64
    pieces = [bytes([b]) for b in range(256)] + list(TEKKEN_WORDS) + [w.encode("utf-8") for w in words]
    vocab = [{"rank": i, "token_bytes": base64.b64encode(p).decode(), "token_str": p.decode("utf-8", "replace")}
             for i, p in enumerate(pieces)]
    data: dict = {"config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": len(vocab),
                             "default_vocab_size": len(vocab) + TEKKEN_NUM_SPECIAL,
                             "default_num_special_tokens": TEKKEN_NUM_SPECIAL, "version": "v3"},
                  "vocab": vocab}
    if special_tokens:
        data["special_tokens"] = [{"rank": i, "token_str": t, "is_control": True}
                                  for i, t in enumerate(TEKKEN_SPECIALS)]
    else:
        data["config"]["default_num_special_tokens"] = 1000  # the library's 20 defaults, then fillers
        data["config"]["default_vocab_size"] = len(vocab) + 1000
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def tekken_gguf(tekken: Path, path: Path, *, pre: str = "tekken", add_bos: bool = True) -> Path:
    """A vocab-only GGUF of a tekken.json laid out by llama.cpp's converter's own code: gguf-py's
    `MistralVocab` (the special tokens CONTROL, then each token's bytes through bytes_to_unicode; the
    merges from `extract_vocab_merges_from_model`), with `pre` and add_bos given."""
    from gguf.vocab import MistralVocab

    from harness.models import gguf_writer
    vocab = MistralVocab(tekken.parent)
    rows = list(vocab.all_tokens())
    gguf_writer.write(path, {
        "general.architecture": "llama", "general.name": "tiny-tekken",
        "tokenizer.ggml.model": vocab.gguf_tokenizer_model, "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": [text.decode("utf-8") for text, _, _ in rows],
        "tokenizer.ggml.token_type": [int(kind) for _, _, kind in rows],
        "tokenizer.ggml.merges": list(vocab.extract_vocab_merges_from_model()),
        "tokenizer.ggml.bos_token_id": vocab.bos_id, "tokenizer.ggml.eos_token_id": vocab.eos_id,
        "tokenizer.ggml.unknown_token_id": vocab.unk_id,
        "tokenizer.ggml.add_bos_token": add_bos, "tokenizer.ggml.add_eos_token": False,
    })
    return path


def spm_style_json(path: Path) -> Path:
    """A SentencePiece-style tokenizer.json (the Gemma-3 layout): spaces replaced by U+2581, none prepended, BPE."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " ")])
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def spm_style_gguf(tokenizer_json: Path, path: Path) -> Path:
    """What the converter writes for such a folder (no tokenizer.model): model llama, every score the
    placeholder -1000.0, and no tokenizer.ggml.add_space_prefix (llama.cpp then reads it as on)."""
    from harness.models import gguf_writer
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    types = [2 if t == "<unk>" else 3 if t in ("<s>", "</s>") else 1 for t in tokens]
    gguf_writer.write(path, {
        "general.architecture": "llama", "general.name": "tiny-spm-json",
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": [-1000.0] * len(tokens), "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_bos_token": False,
    })
    return path


# --- twins for the classes of difference found by experiment (harness.references.class_experiments) -------

def with_added(tokenizer_json: Path, texts: tuple[str, ...]) -> Path:
    """`tokenizer_json` with non-special added tokens `texts` (a Gemma-style `</s>`, spelled like a control token)."""
    from tokenizers import AddedToken, Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in texts])
    tok.save(str(tokenizer_json))
    return tokenizer_json


def unigram_model(path: Path, *, config: dict | None = None) -> Path:
    """A SentencePiece Unigram model (nmt_nfkc, byte fallback) trained on TEXT, with `config` as its
    tokenizer_config.json (add_bos_token/add_eos_token false by default)."""
    import sentencepiece
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_writer=out, vocab_size=300,
                                             hard_vocab_limit=False, byte_fallback=True, minloglevel=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out.getvalue())
    settings = {"add_bos_token": False, "add_eos_token": False} if config is None else config
    (path.parent / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return path


def spm_gguf(model: Path, path: Path, *, tokenizer_model: str = "llama") -> Path:
    """What the converter's `_set_vocab_sentencepiece` writes for `model`: tokenizer.ggml.model `llama` whatever
    the model's type (a Unigram model too), the pieces, scores and types (user-defined as NORMAL), no BOS/EOS."""
    from harness.models import gguf_writer
    from harness.references.gguf_keys import read_spm
    spm = read_spm(model.read_bytes())
    gguf_writer.write(path, {
        "general.architecture": "llama", "general.name": "tiny-unigram",
        "tokenizer.ggml.model": tokenizer_model, "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": spm["pieces"], "tokenizer.ggml.scores": spm["scores"],
        "tokenizer.ggml.token_type": [1 if t == 4 else t for t in spm["types"]],
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_bos_token": False, "tokenizer.ggml.add_eos_token": False,
    })
    return path


# --- a Gemma-style tokenizer.json (issue 42): whitespace runs as added tokens, typed NORMAL by the converter ----

WHITESPACE_RUNS = ("\u2581\u2581", "\u2581\u2581\u2581")  # added tokens, not special, as Gemma's 30 runs of U+2581


def gemma_style_json(path: Path) -> Path:
    """A Gemma-style tokenizer.json: spaces replaced by U+2581 and none prepended, BPE, the specials <pad> <eos>
    <bos> <unk>, a BOS from the post-processor, and WHITESPACE_RUNS as non-special added tokens that are also
    reached by merges (as Gemma's are); a tokenizer_config.json beside it naming the specials."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Fuse()])
    text = TEXT + ["a  b  c   d", "the  cat   sat", "x   y  z"] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "<eos>", "<bos>",
                                                                                       "<unk>"]))
    tok.add_tokens([AddedToken(run, normalized=False) for run in WHITESPACE_RUNS])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                       special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    config = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
              "add_bos_token": True, "clean_up_tokenization_spaces": False}
    (path.parent / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def gemma_style_gguf(tokenizer_json: Path, path: Path, *, add_space_prefix: bool | None = None) -> Path:
    """The GGUF the converter's tokenizer.json path writes for it (model llama), with each token scored by the
    rank of the merge that makes it (so llama.cpp merges as the original does), every added token that is not
    special typed NORMAL, and `tokenizer.ggml.add_space_prefix` absent (llama.cpp reads it as on) unless given."""
    from harness.models import gguf_writer
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab = {**data["model"]["vocab"], **{t["content"]: t["id"] for t in data["added_tokens"]}}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    rank: dict[str, int] = {}
    for i, merge in enumerate(data["model"]["merges"]):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        rank.setdefault(left + right, i)
    special = {t["content"]: t["id"] for t in data["added_tokens"] if t["special"]}
    extra = {} if add_space_prefix is None else {"tokenizer.ggml.add_space_prefix": add_space_prefix}
    gguf_writer.write(path, {
        "general.architecture": "llama", "general.name": "tiny-gemma-style",
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": [float(-rank.get(t, len(rank))) for t in tokens],
        "tokenizer.ggml.token_type": [2 if t == "<unk>" else 3 if t in special else 1 for t in tokens],
        "tokenizer.ggml.unknown_token_id": special["<unk>"], "tokenizer.ggml.bos_token_id": special["<bos>"],
        "tokenizer.ggml.eos_token_id": special["<eos>"], "tokenizer.ggml.padding_token_id": special["<pad>"],
        "tokenizer.ggml.add_bos_token": True, **extra,
    })
    return path

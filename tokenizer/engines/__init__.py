"""One module per llama.cpp vocabulary type, and the table that names them.

`Tokenizer.from_gguf` looks an engine up here (`engine_for`), once per file;
nothing else does.
May import: `tokenizer.vocab`, `tokenizer.vocab_rules`, `tokenizer.attrs`, `tokenizer.pieces`, `tokenizer.gguf`,
`tokenizer.normalize`, `tokenizer.pretokenize`, `tokenizer.unicode`, `tokenizer.cache`, `tokenizer.errors`.
"""

from __future__ import annotations

from ..errors import UnsupportedVocab
from .base import BosEosEngine, Engine
from .bpe import BPEEngine
from .hashing import HashingEngine
from .plamo2 import Plamo2Engine
from .rwkv import RwkvEngine
from .spm import SpmEngine
from .ugm import UgmEngine
from .wpm import WpmEngine

__all__ = ["ENGINES", "BosEosEngine", "Engine", "engine_for"]

# vocabulary type (`tokenizer.vocab.MODELS`) -> engine class
ENGINES: dict[str, type[Engine]] = {
    cls.vocab_type: cls
    for cls in (SpmEngine, BPEEngine, WpmEngine, UgmEngine, RwkvEngine, Plamo2Engine, HashingEngine)
}


def engine_for(vocab_type: str) -> type[Engine]:
    """The engine class for a vocabulary type, or `UnsupportedVocab` listing the known ones."""
    try:
        return ENGINES[vocab_type]
    except KeyError:
        known = ", ".join(sorted(ENGINES)) or "none"
        raise UnsupportedVocab(f"no engine for vocabulary type {vocab_type!r} (known: {known})") from None

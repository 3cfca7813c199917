"""Pre-tokenizer behaviours, keyed by llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*` names.

Each behaviour is the list of regular expressions llama.cpp's
`llm_tokenizer_bpe` applies one after another (each splits the pieces the
previous one produced), plus whether words are GPT-2 byte-encoded afterwards.
The expressions are llama.cpp's own strings, character for character,
because llama.cpp picks a hand-written splitter by comparing the expression
text (see `tokenizer.pretokenize.splitter`).  They are written tiktoken-style, one
alternative per line.

`tokenizer.pretokenize.names` maps a file's `tokenizer.ggml.pre` value to one of
these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import UnsupportedVocab


@dataclass(frozen=True)
class PreTokenizer:
    """One behaviour: regexes applied in order, then optional GPT-2 byte encoding."""

    name: str
    patterns: tuple[str, ...]
    byte_encode: bool = True


PRETOKENIZERS: dict[str, PreTokenizer] = {}


def register(name: str, *patterns: str, byte_encode: bool = True) -> None:
    """Add a behaviour; refuses a name registered twice."""
    if name in PRETOKENIZERS:
        raise ValueError(f"pre-tokenizer {name!r} registered twice")
    PRETOKENIZERS[name] = PreTokenizer(name, tuple(patterns), byte_encode)


def get(name: str) -> PreTokenizer:
    """The behaviour called `name`, or `UnsupportedVocab` listing the known ones."""
    try:
        return PRETOKENIZERS[name]
    except KeyError:
        known = ", ".join(sorted(PRETOKENIZERS))
        raise UnsupportedVocab(f"unknown pre-tokenizer behaviour {name!r} (known: {known})") from None


# --- building blocks --------------------------------------------------------------

CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
CONTRACTIONS_PLAIN = "'s|'t|'re|'ve|'m|'ll|'d"

GPT2 = "|".join([
    CONTRACTIONS_PLAIN,
    " ?\\p{L}+",
    " ?\\p{N}+",
    " ?[^\\s\\p{L}\\p{N}]+",
    "\\s+(?!\\S)",
])


def _llama3_like(digits: str, *, whitespace: tuple[str, ...] = ("\\s+(?!\\S)", "\\s+")) -> str:
    return "|".join([
        CONTRACTIONS,
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+",
        digits,
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
        "\\s*[\\r\\n]+",
        *whitespace,
    ])


LLAMA3 = _llama3_like("\\p{N}{1,3}")
QWEN2 = _llama3_like("\\p{N}")

QWEN35 = "|".join([
    CONTRACTIONS,
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+",
    "\\p{N}",
    " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*",
    "\\s*[\\r\\n]+",
    "\\s+(?!\\S)",
    "\\s+",
])

JAIS2 = _llama3_like("\\p{N}{1,3}", whitespace=(
    "\\s{512}(?!\\S)",
    "\\s{256}(?!\\S)",
    "\\s{128}(?!\\S)",
    "\\s{64}(?!\\S)",
    "\\s{32}(?!\\S)",
    "\\s{16}(?!\\S)",
    "\\s{8}(?!\\S)",
    "\\s{4}(?!\\S)",
    "\\s{1,2}(?!\\S)",
    "\\s{1}",
))

ASCII_PUNCT_WORD = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"

DEEPSEEK3_MAIN = "|".join([
    ASCII_PUNCT_WORD,
    "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+",
    " ?[\\p{P}\\p{S}]+[\r\n]*",
    "\\s*[\r\n]+",
    "\\s+(?!\\S)",
    "\\s+",
])

SPARK2_5_MAIN = "|".join([
    ASCII_PUNCT_WORD,
    "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+",
    " ?[\\p{P}\\p{S}]+",
    "[\r\n]",
    "\\s+(?!\\S)",
    "\\s+",
])

AFMOE_MAIN = "|".join([
    ASCII_PUNCT_WORD,
    "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+",
    " ?[\\p{P}\\p{S}]+[\\r\\n]*",
    "\\s*[\\r\\n]+",
    "\\s+(?!\\S)",
    "\\s+",
])

UPPER_LOWER = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
LOWER_ANY = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"


def _cased_words(*, digits: str, contraction: str, tail: str = "[\\r\\n/]*") -> str:
    return "|".join([
        f"[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER_LOWER}*{LOWER_ANY}+{contraction}",
        f"[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER_LOWER}+{LOWER_ANY}*{contraction}",
        digits,
        f" ?[^\\s\\p{{L}}\\p{{N}}]+{tail}",
        "\\s*[\\r\\n]+",
        "\\s+(?!\\S)",
        "\\s+",
    ])


def _lookahead_cased(*, letters: str, digits: str, contraction: str) -> str:
    upper = f"((?=[{letters}])([^a-z]))"
    lower = f"((?=[{letters}])([^A-Z]))"
    return "|".join([
        f"[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}*{lower}+{contraction}",
        f"[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}+{lower}*{contraction}",
        digits,
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
        "\\s*[\\r\\n]+",
        "\\s+(?!\\S)",
        "\\s+",
    ])


CONTRACTION_OPT = CONTRACTIONS + "?"
# Letters of the deepseek-llm pattern, escaped: several are not in NFC and an editor
# would silently normalise them (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A).
DEEPSEEK_LETTERS = "".join([
    "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-",
    "\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388",
    "-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531",
    "-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf",
    "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20",
    "-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-",
    "\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-",
    "\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115",
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f",
    "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2",
    "\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e",
    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400",
    "-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2",
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943",
])
NO_BREAK_PUNCT = " ?[^(\\s|.,!?…。，、।۔،)]+"
CJK_DEEPSEEK = "[一-龥ࠀ-一가-퟿]+"
CJK_KANA = "[一-龥぀-ゟ゠-ヿ]+"
NEWLINE_RUNS = "[^\\n]+|[\\n]+"

# --- the registry ----------------------------------------------------------------

register(
    "default",
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    GPT2,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
)
register("llama3", LLAMA3)
register("jais2", JAIS2)
register("dbrx", LLAMA3)
register("smaug", LLAMA3)
register(
    "deepseek_llm",
    "[\r\n]",
    "\\s?[" + DEEPSEEK_LETTERS + "]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    CJK_DEEPSEEK,
    "\\p{N}+",
)
for _name in ("deepseek3_llm", "hunyuan_dense", "joyai_llm", "hy_v4"):
    register(_name, "\\p{N}{1,3}", CJK_KANA, DEEPSEEK3_MAIN)
register("spark2_5", "\\p{N}{1,3}", CJK_KANA, SPARK2_5_MAIN, "\\p{N}")
register(
    "youtu",
    "|".join([
        "[가-힣ㄱ-ㆎ]+",
        "[！…“”‘’—：；，、-〿︰-﹏]+",
        "[ㄅ-ㄯ]+",
        CJK_KANA,
    ]),
    _cased_words(digits="\\p{N}", contraction=CONTRACTION_OPT),
)
register("deepseek_coder", "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_DEEPSEEK, "\\p{N}")
register("falcon", "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]")
for _name in ("starcoder", "refact", "command_r", "smollm", "codeshell", "exaone", "minerva",
              "mellum2"):
    register(_name, "\\p{N}", GPT2)
for _name in ("gpt2", "mpt", "olmo", "jais", "trillion", "granite_docling"):
    register(_name, GPT2)
for _name in ("stablelm2", "qwen2", "hunyuan", "solar_open"):
    register(_name, QWEN2)
register("qwen35", QWEN35)
for _name in ("poro", "bloom", "gpt3_finnish"):
    register(_name, NO_BREAK_PUNCT)
register("chatglm4", LLAMA3)
register("viking", NO_BREAK_PUNCT, "\\p{N}")
register("tekken", _lookahead_cased(letters="\\p{L}", digits="\\p{N}", contraction=""))
register(
    "chameleon",
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    GPT2,
)
for _name in ("gpt4o", "minimax_m2"):
    register(_name, _lookahead_cased(letters="\\p{L}", digits="\\p{N}{1,3}",
                                     contraction=CONTRACTION_OPT))
register("granite_emb_multi", _lookahead_cased(letters="\\p{L}\\p{M}", digits="\\p{N}{1,3}",
                                               contraction=CONTRACTION_OPT))
register(
    "tiny_aya",
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    _cased_words(digits="\\p{N}{1,3}", contraction=CONTRACTION_OPT),
)
register("kimi_k2", "\\p{Han}+")
register("superbpe", "\\p{N}+", "(?=(\\d{3})+(?!\\d))")
register(
    "bailingmoe",
    "|".join([
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])",
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+",
        "\\p{N}",
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
        "\\s*[\\r\\n]",
        "\\s+(?!\\S)",
        "\\s+",
    ]),
)
register(
    "seed_coder",
    "|".join([
        CONTRACTIONS,
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+",
        "\\p{N}{1}",
        " ?[^\\s\\p{L}\\p{N}\\r\\n]+",
        "\\s*[\\r\\n]+",
        "\\s+(?!\\S)",
        "\\s+",
    ]),
)
register("ufakzeka", QWEN2[len(CONTRACTIONS) + 1:])
register("grok_2", QWEN2)
register(
    "afmoe",
    "\\p{AFMoE_digits}",
    "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    AFMOE_MAIN,
)
register("laguna", NEWLINE_RUNS, QWEN2)
register(
    "exaone_moe",
    "|".join([
        CONTRACTIONS,
        "[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+",
        "\\p{N}",
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?",
        "\\s*[\\r\\n]",
        "\\s+(?!\\S)",
        "\\s+",
    ]),
)
register("gemma4", NEWLINE_RUNS, byte_encode=False)
register("sarvam_moe", NEWLINE_RUNS, byte_encode=False)
register("minicpm5", "\\p{N}{1,3}", _llama3_like("\\p{N}+"))
register("whitespace", "\\S+", byte_encode=False)

REGISTRY: Mapping[str, PreTokenizer] = MappingProxyType(PRETOKENIZERS)

"""An engine child whose replies are right but for one planted value: `python tests/malformed_replies.py`.

The child serves the engine protocol with `harness.subjects.protocol.Server` (our `Tokenizer`, or
with `--engine-arg tiny=yes` the 8-token `Tiny` below, which needs no GGUF), then plants one
malformed value in a reply, as the plan in `--engine-arg plan=FILE` says, per model (the GGUF's
file name, or "*"):

    {"ggml-vocab-llama-spm.gguf": {"op": "vocab", "path": ["score", 5], "raw": "NaN"}}

`op` is `hello`, `vocab` (the slice starting at token 0) or `tokenize` (with `"input"`: the
results of that input text only); `path` leads into the reply (into each result item for
`tokenize`) to the value replaced by `raw`, JSON text spliced in as it is (so it may be no JSON
at all: `NaN`, a lone surrogate `"\\ud800"`, `1e999`); with `"drop": true` the value is removed.

`MALFORMED` is the table tests/subjects/test_wire.py runs: one malformed reply per row,
and the words the engine error (or load error) must hold, naming the field and the token.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACE = "\u0000planted"

# name: (plan, words the error names)
MALFORMED: dict[str, tuple[dict, str]] = {
    # hello: a load error naming the field
    "n_tokens-2^40": ({"op": "hello", "path": ["info", "n_tokens"], "raw": "1099511627776"},
                      "info.n_tokens is 1099511627776: over the protocol's cap"),
    "n_tokens-negative": ({"op": "hello", "path": ["info", "n_tokens"], "raw": "-1"}, "info.n_tokens is int -1"),
    "n_tokens-float": ({"op": "hello", "path": ["info", "n_tokens"], "raw": "8.0"}, "info.n_tokens is float 8.0"),
    "n_tokens-nan": ({"op": "hello", "path": ["info", "n_tokens"], "raw": "NaN"},
                     "info.n_tokens is the bare constant NaN, not a count"),
    "capabilities-string": ({"op": "hello", "path": ["capabilities"], "raw": '"tokenize"'},
                            "capabilities must be a list of names"),
    "capabilities-unknown": ({"op": "hello", "path": ["capabilities"], "raw": '["tokenize", ["x"]]'},
                             "unknown capability ['x']"),
    "info-list": ({"op": "hello", "path": ["info"], "raw": "[1]"}, "info is not an object"),
    # hello's info, read with the vocabulary: an engine error for the vocabulary
    "vocab_type-surrogate": ({"op": "hello", "path": ["info", "vocab_type"], "raw": '"spm\\ud800"'},
                             "info.vocab_type is not valid Unicode: a lone surrogate U+D800 at index 3"),
    "pre-int": ({"op": "hello", "path": ["info", "pre"], "raw": "5"}, "info.pre is int 5, not a string"),
    "specials-list": ({"op": "hello", "path": ["info", "specials"], "raw": "[1]"},
                      "info.specials is list [1], not an object"),
    "special-negative": ({"op": "hello", "path": ["info", "specials", "bos"], "raw": "-5"},
                         "info.specials.bos is the token id -5"),
    "special-huge": ({"op": "hello", "path": ["info", "specials", "eos"], "raw": "1099511627776"},
                     "info.specials.eos is the token id 1099511627776"),
    "add_bos-string": ({"op": "hello", "path": ["info", "add_bos"], "raw": '"yes"'},
                       "info.add_bos is str 'yes', not true or false"),
    # vocab slices: an engine error for the vocabulary naming the field and the token
    "score-bare-nan": ({"op": "vocab", "path": ["score", 5], "raw": "NaN"},
                       "vocab field 'score' of token 5: the bare constant NaN is not JSON"),
    "score-1e999": ({"op": "vocab", "path": ["score", 5], "raw": "1e999"},
                    "vocab field 'score' of token 5: inf is not a float32"),
    "score-huge-int": ({"op": "vocab", "path": ["score", 6], "raw": "1" + "0" * 400},
                       "vocab field 'score' of token 6: about 2^1328 is not a float32"),
    "score-1e39": ({"op": "vocab", "path": ["score", 7], "raw": "1e39"},
                   "vocab field 'score' of token 7: 1e+39 is not a float32"),
    "score-lowercase-nan": ({"op": "vocab", "path": ["score", 2], "raw": '"nan"'},
                            "vocab field 'score' of token 2: str 'nan' is not a number"),
    "score-missing": ({"op": "vocab", "path": ["score"], "drop": True},
                      "vocab field 'score': expected 8 values (tokens 0..), got NoneType None"),
    "score-short": ({"op": "vocab", "path": ["score"], "raw": "[0.5]"},
                    "vocab field 'score': expected 8 values (tokens 0..), got 1 values"),
    "text-not-base64": ({"op": "vocab", "path": ["text", 3], "raw": '"!!"'}, "vocab field 'text' of token 3"),
    "text-int": ({"op": "vocab", "path": ["text", 4], "raw": "4"},
                 "vocab field 'text' of token 4: int 4 is not a base64 string"),
    "attr-negative": ({"op": "vocab", "path": ["attr", 1], "raw": "-1"},
                      "vocab field 'attr' of token 1: -1 is not an attribute"),
    "attr-huge": ({"op": "vocab", "path": ["attr", 1], "raw": "1099511627776"},
                  "vocab field 'attr' of token 1: 1099511627776 is not an attribute"),
    "attr-float": ({"op": "vocab", "path": ["attr", 2], "raw": "1.5"},
                   "vocab field 'attr' of token 2: float 1.5 is not an int"),
    "eog-int": ({"op": "vocab", "path": ["eog", 3], "raw": "1"},
                "vocab field 'eog' of token 3: int 1 is not true or false"),
    # tokenize results: an engine error for the case naming the field
    "ids-negative": ({"op": "tokenize", "path": ["ids", 0], "raw": "-1"},
                     "ids[0] is the token id -1: a token id is never negative"),
    "ids-huge": ({"op": "tokenize", "path": ["ids", 0], "raw": "1099511627776"},
                 "ids[0] is the token id 1099511627776: not below"),
    "ids-past-n_tokens": ({"op": "tokenize", "path": ["ids", 1], "raw": "8"},
                          "ids[1] is the token id 8: not below the engine's n_tokens 8"),
    "ids-bare-nan": ({"op": "tokenize", "path": ["ids", 0], "raw": "NaN"},
                     "ids[0] is the bare constant NaN, not an int"),
    "ids-string": ({"op": "tokenize", "path": ["ids"], "raw": '"1,2"'}, "ids is str '1,2', not a list of ints"),
    "ids-over-cap": ({"op": "tokenize", "path": ["ids"], "raw": "[" + ",".join(["1"] * 300) + "]"},
                     "300 ids for an input of 3 bytes: over the protocol's cap of 112"),
    "error-surrogate": ({"op": "tokenize", "path": [], "raw": '{"error": {"type": "ValueError\\ud800", '
                                                               '"message": "bad \\udcff", "traceback": "\\ud800"}}'},
                        "ValueError\\ud800: bad \\udcff"),
    "error-not-object": ({"op": "tokenize", "path": [], "raw": '{"error": 5}'},
                         "ProtocolError: expected an error object, got int 5"),
    "detokenize-not-base64": ({"op": "tokenize", "path": ["detokenize", 1], "raw": '"%%"'},
                              "ProtocolError: detokenize (remove_special=False, unparse_special=True)"),
    "detokenize-short": ({"op": "tokenize", "path": ["detokenize"], "raw": "[]"},
                         "ProtocolError: expected 4 detokenizations, got list []"),
}


class Tiny:
    """Eight tokens, one per byte value mod 8: every capability, no GGUF needed."""

    capabilities = ("tokenize", "bytes_input", "detokenize", "token_to_piece", "token_text", "token_score",
                    "token_attr", "vocab_info", "specials", "is_eog", "is_control")
    n_tokens, vocab_type, pre = 8, "spm", "default"
    bos, eos = 1, 2
    add_bos = add_eos = add_sep = False

    def __init__(self, path: object, **_: str) -> None:
        self.path = path

    def __getattr__(self, name: str) -> None:  # the other special ids: none
        if name in ("eot", "eom", "unk", "sep", "nl", "pad", "mask", "fim_pre", "fim_suf", "fim_mid", "fim_pad",
                    "fim_rep", "fim_sep"):
            return
        raise AttributeError(name)

    def tokenize(self, text: bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        return [b % 8 for b in text]

    def detokenize(self, ids: list[int], *, remove_special: bool, unparse_special: bool) -> bytes:
        return bytes(ids)

    def token_to_piece(self, token: int, *, special: bool) -> bytes:
        return bytes([token])

    def token_text(self, token: int) -> bytes:
        return bytes([token])

    def token_score(self, token: int) -> float:
        return -float(token)

    def token_attr(self, token: int) -> int:
        return 4

    def is_eog(self, token: int) -> bool:
        return token == 2

    def is_control(self, token: int) -> bool:
        return token in (1, 2)


def put(obj: object, step: dict, place: str) -> None:
    """Put `place` where `step["path"]` leads in `obj` (or drop the value there)."""
    *lead, last = step["path"]
    for key in lead:
        obj = obj[key]  # type: ignore[index]
    if step.get("drop"):
        del obj[last]  # type: ignore[attr-defined]
    else:
        obj[last] = place  # type: ignore[index]


def plant(reply: dict, request: dict, step: dict, place: str) -> None:
    """Put `place` into the reply, or into each result item of a tokenize reply (of the input
    `step["input"]` only, when given)."""
    if step["op"] != "tokenize":
        put(reply, step, place)
        return
    from harness.subjects.protocol import unb64
    for data, items in zip(request["inputs"], reply.get("results") or [], strict=True):
        if "input" in step and unb64(data) != step["input"].encode():
            continue
        for index in range(len(items)):
            if step["path"]:
                put(items[index], step, place)
            else:
                items[index] = place


def planted(reply: dict, request: dict, steps: list[dict]) -> str:
    """The reply line with each step's raw text where its step leads."""
    places = []
    for number, step in enumerate(steps):
        if step["op"] == request.get("op") and reply.get("ok") and request.get("start", 0) == 0:
            places.append((f"{PLACE}{number}", step.get("raw", "")))
            plant(reply, request, step, places[-1][0])
    text = json.dumps(reply)
    for place, raw in places:
        text = text.replace(json.dumps(place), raw)
    return text


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from harness.subjects.protocol import Server, reply_line

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    server: Server | None = None
    steps: list[dict] = []
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "hello":
            args = request.get("args") or {}
            model = os.path.basename(request.get("model", ""))
            plan = json.loads(Path(args["plan"]).read_text()) if args.get("plan") else {}
            step = plan.get(model, plan.get("*"))
            steps = step if isinstance(step, list) else [step] if step else []
            if args.get("tiny") == "yes":
                server = Server(Tiny, "tests.malformed_replies:Tiny")
            else:
                from tokenizer import Tokenizer
                server = Server(Tokenizer.from_gguf, "tokenizer:Tokenizer.from_gguf")
            request["args"] = {}
        assert server is not None
        reply = {"id": request.get("id"), **server.handle(request)}
        text = planted(reply, request, steps) if steps else reply_line(request.get("id"), reply).decode().rstrip()
        out.write((text + "\n").encode())
        out.flush()
        if server.done:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())

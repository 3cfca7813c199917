"""Write harness/data/corpora/edge.jsonl: inputs built to trip tokenizers (python corpora/build_edge.py).

Each group targets one trap named in issue 3, section 4.  Run it again after
editing; the output is deterministic (ids are group-index, order is fixed).
Invalid UTF-8 goes in as "bytes" (hex).
"""

from __future__ import annotations

import json
from pathlib import Path

GROUPS: dict[str, list[str | bytes]] = {
    "ws": [
        "\t", "\t\tindented\tcode", "a\tb\t\tc", "\r\n", "line one\r\nline two\r\n", "\r\r\n\n\r",
        "\n\n\n\n", "\n", " ", "  ", "   leading", "trailing   ", "a" + " " * 33 + "b", " " * 64,
        "\u00a0", "no\u00a0break\u00a0space", "ideographic\u3000space\u3000\u3000end", "line\u2028separator",
        "para\u2029graph", "zero\u200bwidth\u200bspace", "\u200b", "join\u200cnon\u200djoin", "\ufeffBOM at start",
        "thin\u2009en\u2002em\u2003hair\u200a", "vertical\x0btab\x0cform feed", "next\x85line",
        " \n \n ", "\t \n\t \r\n ", "word \n\n\n  word", "  \u00a0 \u3000 \t ",
    ],
    "contraction": [
        "I'M HERE", "You'Re right, they'LL see", "she'S", "We'VE it'D don'T", "DON'T WON'T CAN'T",
        "ain't y'all'd've", "o'clock rock 'n' roll", "'s 't 're 've 'm 'll 'd", "'' ' '' '''",
        "l'été d'Artagnan", "Straße's ÉCOLE'S naïve'd", "\u2018curly\u2019 it\u2019s", "I'm I'M i'M",
        " 'hello' ", "'S'T'RE'VE'M'LL'D",
    ],
    "digits": [
        "0123456789", "1234567890123", "3.14159 2,718 1_000_000", "\u0661\u0662\u0663\u0664\u0665\u0666",
        "\u06f1\u06f2\u06f3\u06f4", "\u0967\u0968\u0969\u096a\u096b", "\u09e7\u09e8\u09e9", "\u0e51\u0e52\u0e53",
        "\uff11\uff12\uff13\uff14", "\u2460\u2461\u2462", "\u216b \u2167", "x\u00b2 + y\u00b3",
        "\U0001d7d8\U0001d7d9\U0001d7da", "\u07c0\u07c1\u07c2", "\u1810\u1811\u1812", "12abc34def5",
        "v1.2.3-rc4", "0x1F 0b1010 1e-9", "999999999999999999999",
    ],
    "combining": [
        "e\u0301", "\u00e9", "A\u030a \u00c5", "n\u0303 \u00f1", "\u1112\u1161\u11ab \ud55c",
        "Z\u0351\u036b\u0343a\u0300\u0301\u0302\u0303", "Ti\u1ebfng Vi\u1ec7t",
        "Tie\u0302\u0301ng Vie\u0323\u0302t", "\u0915\u094d\u0937\u093f", "\u0301leading mark",
        "cafe\u0301 caf\u00e9", "\u212b \u00c5 A\u030a", "\ufb01 \ufb02 \u0132",
    ],
    "cjk": [
        "\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\u7136\u540e\u5403\u5348\u996d",
        "\u6771\u4eac\u90fd\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\u3072\u3089\u304c\u306a\u3068\u30ab\u30bf\u30ab\u30ca",
        "\uc548\ub155\ud558\uc138\uc694\uc138\uacc4", "\u4e2d\u6587English\u6df7\u5408123",
        "\uff08\u5168\u89d2\uff09\u3001\u3002\u300c\u5f15\u7528\u300d",
    ],
    "rtl": [
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
        "Hello \u0645\u0631\u062d\u0628\u0627 world", "\u202eabc\u202c \u200fx\u200e",
        "\u0633\u0644\u0627\u0645\u060c \u062d\u0627\u0644\u062a \u0686\u0637\u0648\u0631\u0647\u061f",
    ],
    "emoji": [
        "\U0001f44b", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "\U0001f44d\U0001f3fd",
        "\U0001f1fa\U0001f1f3\U0001f1ef\U0001f1f5", "\U0001f3f3\ufe0f\u200d\U0001f308", "\u2764\ufe0f",
        "1\ufe0f\u20e3", "\U0001f9d1\U0001f3ff\u200d\U0001f680", "hi\U0001f642\U0001f643there",
    ],
    "astral": [
        "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522", "\U00010348", "\U00013000",
        "\ue000\uf8ff", "\U000f0000\U0010fffd", "\ufffe\uffff", "\U0010ffff", "\u0378\u0379", "\ufffd",
    ],
    "bytefallback": [
        "\ua66e", "\U00012000", "\x00", "a\x00b", "\x01\x02\x1f\x7f", "\u0250\u0254\u0259",
        "\u2603\u2602\u2601", "\u16a0\u16a1\u16a2",
    ],
    "empty": [""],
    "long": [
        "The quick brown fox jumps over the lazy dog. " * 12,
        "a" * 600,
        "1234567890" * 60,
        "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341" * 20,
        "word " * 100 + "\n" * 20,
    ],
    "invalid": [
        b"\xff", b"\xc3\x28", b"\xe2\x82", b"abc\x80def", b"\xf0\x9f\x98", b"\xed\xa0\x80",
        b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"Hello \xfe\xfe world", b"\xf4\x90\x80\x80",
    ],
}


def items() -> list[dict]:
    out = []
    for group, inputs in GROUPS.items():
        for i, value in enumerate(inputs):
            case_id = f"{group}-{i:02d}"
            if isinstance(value, bytes):
                out.append({"id": case_id, "bytes": value.hex()})
            else:
                out.append({"id": case_id, "text": value})
    return out


def main() -> None:
    path = Path(__file__).resolve().parents[1] / "harness" / "data" / "corpora" / "edge.jsonl"
    lines = [json.dumps(item, ensure_ascii=True, sort_keys=True) for item in items()]
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    print(f"wrote {len(lines)} cases to {path}")


if __name__ == "__main__":
    main()

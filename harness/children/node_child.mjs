#!/usr/bin/env node
// The Node.js reference child of the engine protocol, version 1 (docs/engine-protocol.md).
//
//   python -m harness run --model llama-bpe --engine 'cmd:node harness/children/node_child.mjs'
//
// It proves the protocol is language-neutral: no Python, no dependencies, Node 18+.
// It reads the GGUF file itself and tokenizes with a toy: greedy longest match over
// the vocabulary's normal and user-defined token texts (in GPT-2's byte-to-unicode
// alphabet for BPE vocabularies, with SentencePiece's U+2581 for spaces in SPM ones),
// falling back to byte tokens or the unknown token. It is NOT llama.cpp-compatible:
// its report shows honestly how far a naive tokenizer is from llama.cpp, capability by
// capability. It declares tokenize (bytes input), detokenize, token_text, token_score
// and vocab_info; parse_special is ignored (the toy never parses special tokens).

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const PROTOCOL = 1;
const CAPABILITIES = ["tokenize", "bytes_input", "detokenize", "token_text", "token_score", "vocab_info"];
const VOCAB_TYPES = { llama: "spm", gpt2: "bpe", bert: "wpm", t5: "ugm", rwkv: "rwkv", "plamo2": "plamo2" };
const NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, BYTE = 6;

// --- a GGUF reader: just the metadata (header, key/values), little-endian, versions 2 and 3 ---

function readGGUF(path) {
  const buf = readFileSync(path);
  let at = 0;
  const need = (n) => { if (at + n > buf.length) throw new Error(`GGUF truncated at offset ${at}`); };
  const u32 = () => { need(4); const v = buf.readUInt32LE(at); at += 4; return v; };
  const u64 = () => { need(8); const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
  const bytes = () => { const n = u64(); need(n); const v = buf.subarray(at, at + n); at += n; return v; };
  const scalar = {
    0: () => { need(1); return buf.readUInt8(at++); }, 1: () => { need(1); return buf.readInt8(at++); },
    2: () => { need(2); const v = buf.readUInt16LE(at); at += 2; return v; },
    3: () => { need(2); const v = buf.readInt16LE(at); at += 2; return v; },
    4: u32, 5: () => { need(4); const v = buf.readInt32LE(at); at += 4; return v; },
    6: () => { need(4); const v = buf.readFloatLE(at); at += 4; return v; },
    7: () => { need(1); return buf.readUInt8(at++) !== 0; }, 8: bytes, 10: u64,
    11: () => { need(8); const v = Number(buf.readBigInt64LE(at)); at += 8; return v; },
    12: () => { need(8); const v = buf.readDoubleLE(at); at += 8; return v; },
  };
  const value = (type) => {
    if (type === 9) {
      const itemType = u32(), n = u64(), out = new Array(n);
      for (let i = 0; i < n; i++) out[i] = value(itemType);
      return out;
    }
    if (!(type in scalar)) throw new Error(`GGUF value type ${type} unknown at offset ${at}`);
    return scalar[type]();
  };
  if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${path} is not a GGUF file`);
  at = 4;
  const version = u32();
  if (version < 2) throw new Error(`GGUF version ${version} not supported by this toy`);
  u64(); // tensor count
  const nKV = u64(), meta = {};
  for (let i = 0; i < nKV; i++) {
    const key = bytes().toString("utf8");
    meta[key] = value(u32());
  }
  return meta;
}

// --- the toy tokenizer ---------------------------------------------------------------------

function gpt2Alphabet() {
  // GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 onwards.
  const keep = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const toChar = new Array(256), toByte = new Map();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const cp = keep.includes(b) ? b : 256 + extra++;
    toChar[b] = String.fromCodePoint(cp);
    toByte.set(toChar[b], b);
  }
  return { toChar, toByte };
}

class Toy {
  constructor(path) {
    const meta = readGGUF(path);
    const tokens = meta["tokenizer.ggml.tokens"];
    if (!Array.isArray(tokens) || tokens.length === 0) throw new Error("no tokenizer.ggml.tokens");
    this.texts = tokens;                                   // Buffers: the exact bytes
    this.scores = meta["tokenizer.ggml.scores"] || [];
    this.types = meta["tokenizer.ggml.token_type"] || [];
    this.model = String(meta["tokenizer.ggml.model"] || "");
    this.pre = meta["tokenizer.ggml.pre"] ? meta["tokenizer.ggml.pre"].toString("utf8") : "default";
    this.bos = meta["tokenizer.ggml.bos_token_id"];
    this.unk = meta["tokenizer.ggml.unknown_token_id"];
    this.addBos = meta["tokenizer.ggml.add_bos_token"] ?? this.model === "llama";
    this.addSpacePrefix = this.model === "llama" && (meta["tokenizer.ggml.add_space_prefix"] ?? true);
    this.alphabet = this.model === "gpt2" ? gpt2Alphabet() : null;
    this.ids = new Map();
    this.byteIds = new Map();
    this.maxLen = 1;
    tokens.forEach((text, id) => {
      const type = this.types[id] ?? NORMAL;
      const s = text.toString("utf8");
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(s);
      if (type === BYTE && m) this.byteIds.set(parseInt(m[1], 16), id);
      if ((type === NORMAL || type === USER_DEFINED || type === 0) && !this.ids.has(s)) {
        this.ids.set(s, id);
        this.maxLen = Math.max(this.maxLen, s.length);
      }
    });
  }

  // The input in the vocabulary's own spelling: GPT-2's alphabet, or U+2581 for spaces (SPM).
  spell(data) {
    if (this.alphabet) return Array.from(data, (b) => this.alphabet.toChar[b]).join("");
    const text = data.toString("utf8");
    return this.model === "llama" ? "\u2581" + text.replaceAll(" ", "\u2581") : text;
  }

  tokenize(data, addSpecial) {
    const text = this.spell(data), out = [];
    if (addSpecial && this.addBos && this.bos !== undefined) out.push(this.bos);
    if (data.length === 0) return out;
    let i = 0;
    while (i < text.length) {
      let found = -1, len = Math.min(this.maxLen, text.length - i);
      for (; len > 0; len--) {
        const id = this.ids.get(text.slice(i, i + len));
        if (id !== undefined) { found = id; break; }
      }
      if (found >= 0) { out.push(found); i += len; continue; }
      const ch = String.fromCodePoint(text.codePointAt(i));
      for (const b of Buffer.from(ch, "utf8")) {
        const id = this.byteIds.get(b);
        if (id !== undefined) out.push(id);
        else if (this.unk !== undefined) { out.push(this.unk); break; }
      }
      i += ch.length;
    }
    return out;
  }

  // As llama.cpp detokenizes: with remove_special a leading BOS is dropped (and the space
  // prefix then kept); otherwise one leading space of the first piece is the prefix and goes;
  // a control token shows as its text only with unparse_special.
  detokenize(ids, removeSpecial, unparseSpecial) {
    const parts = [];
    let strip = this.addSpacePrefix;
    if (removeSpecial && this.addBos && ids.length > 0 && ids[0] === this.bos) { ids = ids.slice(1); strip = false; }
    ids.forEach((id, n) => {
      const type = this.types[id] ?? NORMAL;
      const text = this.texts[id];
      if (text === undefined || (type === CONTROL && !unparseSpecial)) return;
      const s = text.toString("utf8");
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(s);
      let piece;
      if (type === BYTE && m) piece = Buffer.from([parseInt(m[1], 16)]);
      else if (this.alphabet) piece = Buffer.from(Array.from(s, (c) => this.alphabet.toByte.get(c) ?? 63));
      else piece = Buffer.from(s.replaceAll("\u2581", " "), "utf8");
      parts.push(n === 0 && strip && piece[0] === 0x20 ? piece.subarray(1) : piece);
    });
    return Buffer.concat(parts);
  }
}

// --- the protocol ----------------------------------------------------------------------------

let toy = null;

function errorObject(err) {
  return { type: err?.name || "Error", message: String(err?.message ?? err), traceback: String(err?.stack || "") };
}

function score(v) {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  return v;
}

const ops = {
  hello(req) {
    toy = new Toy(req.model);
    return {
      protocol: PROTOCOL, engine: "node-greedy-toy/1", capabilities: CAPABILITIES,
      info: { n_tokens: toy.texts.length, vocab_type: VOCAB_TYPES[toy.model] || toy.model, pre: toy.pre },
    };
  },
  tokenize(req) {
    const results = req.inputs.map((b64) => {
      const data = Buffer.from(b64, "base64");
      return req.flags.map(([addSpecial]) => {
        try {
          const ids = toy.tokenize(data, addSpecial);
          const out = { ids };
          if (req.detokenize) out.detokenize = req.detokenize.map(([removeSpecial, unparseSpecial]) =>
            toy.detokenize(ids, removeSpecial, unparseSpecial).toString("base64"));
          return out;
        } catch (err) {
          return { error: errorObject(err) };
        }
      });
    });
    return { results };
  },
  vocab(req) {
    const out = {}, end = Math.min(req.start + req.count, toy.texts.length);
    for (const field of req.fields) {
      const column = [];
      for (let t = req.start; t < end; t++) {
        if (field === "text") column.push(toy.texts[t].toString("base64"));
        else if (field === "score") column.push(score(toy.scores[t] ?? 0));
      }
      out[field] = column;
    }
    return out;
  },
  shutdown() { return {}; },
};

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let req, reply;
  try {
    req = JSON.parse(line);
    const op = ops[req.op];
    if (!op) reply = { ok: false, error: { type: "UnknownOp", message: `unknown op ${req.op}`, traceback: "" } };
    else if (req.op !== "hello" && req.op !== "shutdown" && !toy)
      reply = { ok: false, error: { type: "NotLoaded", message: "no hello yet", traceback: "" } };
    else reply = { ok: true, ...op(req) };
  } catch (err) {
    reply = { ok: false, error: errorObject(err) };
  }
  process.stdout.write(JSON.stringify({ id: req?.id ?? null, ...reply }) + "\n");
  if (req?.op === "shutdown") process.exit(0);
});
lines.on("close", () => process.exit(0));

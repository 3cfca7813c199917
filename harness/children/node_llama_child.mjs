#!/usr/bin/env node
// node-llama-cpp as a child of the engine protocol, version 1 (docs/engine-protocol.md, docs/peers.md).
//
//   node harness/children/node_llama_child.mjs PACKAGE_DIR            # serve the protocol
//   node harness/children/node_llama_child.mjs PACKAGE_DIR --describe OUT.json
//
// PACKAGE_DIR holds node_modules/node-llama-cpp, installed by harness/subjects/node_llama.py. The
// llama.cpp that answers is the one node-llama-cpp ships prebuilt, so a report of this child is a
// report on another llama.cpp build. Only node-llama-cpp's public API is used, and only what it
// answers exactly is offered:
//
//   tokenize      model.tokenize(text, parse_special) is llama_tokenize with add_special=false.
//                 add_special=true is composed from the model's own flags, by llama_tokenize's rule
//                 per vocabulary type (BOS when tokens.shouldPrependBosToken, EOS when
//                 tokens.shouldAppendEosToken; WPM: BOS and SEP; RWKV, PLaMo-2: nothing).
//                 Text only: a JS string, so invalid UTF-8 inputs are not applicable (no bytes_input).
//   detokenize    model.detokenize(ids, unparse_special) is llama_detokenize with remove_special=false.
//                 remove_special=true is composed by llama_detokenize's rule: a leading BOS and a
//                 trailing EOS dropped by the flags, the space prefix kept after a dropped BOS.
//                 The result is a JS string: one holding U+FFFD may stand for invalid UTF-8 bytes,
//                 so it is not exact and is answered as a NotExact error, never as bytes.
//   token_attr    getTokenAttributes(t): its ten flags put back into llama_token_attr's bits.
//   is_eog        isEogToken(t).
//   is_control    getTokenAttributes(t).control.
//
// Not offered: bytes_input, token_text, token_to_piece, token_score, vocab_info (no `pre`), specials
// (no unk, pad, mask, eom or fim_pad/rep/sep getter, no add_sep).

import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const PROTOCOL = 1;
const CAPABILITIES = ["tokenize", "detokenize", "token_attr", "is_eog", "is_control"];
// TokenAttributes' getters, by the llama_token_attr bit each one reads
const ATTR_BITS = [["unknown", 1], ["unused", 2], ["normal", 4], ["control", 8], ["userDefined", 16],
  ["byte", 32], ["normalized", 64], ["lstrip", 128], ["rstrip", 256], ["singleWord", 512]];
const REPLACEMENT = "\uFFFD";

// Nothing but replies goes to stdout: console output of the library goes to stderr.
for (const name of ["log", "info", "debug", "warn"]) console[name] = (...args) => console.error(...args);

const [packageDir, mode, out] = process.argv.slice(2);
if (!packageDir) {
  console.error("usage: node_llama_child.mjs PACKAGE_DIR [--describe OUT.json]");
  process.exit(2);
}
const entry = createRequire(join(packageDir, "package.json")).resolve("node-llama-cpp");
const nlc = await import(pathToFileURL(entry).href);
const ERROR_LINES = 8;  // llama.cpp's last error lines, kept to say why a load failed
let errorLines = [];
const llama = await nlc.getLlama({
  gpu: false, build: "never", skipDownload: true, progressLogs: false, logLevel: nlc.LlamaLogLevel.warn,
  logger: (level, message) => {
    process.stderr.write(`[${level}] ${message}\n`);
    if (level === "error" || level === "fatal") errorLines = [...errorLines, String(message).trim().slice(0, 500)]
      .slice(-ERROR_LINES);
  },
});
const engineName = `node-llama-cpp/${await nlc.getModuleVersion()} llama.cpp ${llama.llamaCppRelease.release}`;

if (mode === "--describe") {
  // what the install records: the package's version and the llama.cpp build it runs
  writeFileSync(out, JSON.stringify({
    node_llama_cpp: await nlc.getModuleVersion(), build_type: llama.buildType,
    llama_cpp: llama.llamaCppRelease, node: process.version,
  }) + "\n");
  process.exit(0);
}

let model = null;
let vocab = null;

class NotExact extends Error {
  constructor(message) { super(message); this.name = "NotExact"; }
}

// --- what llama_tokenize and llama_detokenize do with the flags, from the API's answers ---------

function vocabFacts(m) {
  const t = m.tokens, type = m.vocabularyType;
  const facts = { type, bos: t.bos, eos: t.eos, sep: t.sep, addBos: t.shouldPrependBosToken,
                  addEos: t.shouldAppendEosToken, prefix: [], suffix: [] };
  if (type === "wpm") {
    facts.prefix = t.bos == null ? [] : [t.bos];
    facts.suffix = t.sep == null ? [] : [t.sep];
  } else if (type === "spm" || type === "bpe" || type === "ugm") {
    if (facts.addBos && t.bos != null) facts.prefix = [t.bos];
    if (facts.addEos && t.eos != null) facts.suffix = [t.eos];
  }
  return facts;
}

function tokenize(text, addSpecial, parseSpecial) {
  const ids = model.tokenize(text, parseSpecial);
  return addSpecial ? [...vocab.prefix, ...ids, ...vocab.suffix] : ids;
}

function exact(text, what) {
  if (text.includes(REPLACEMENT))
    throw new NotExact(`${what}: node-llama-cpp returns a JS string, and this one holds U+FFFD, which may stand `
      + "for invalid UTF-8 bytes of llama.cpp's output: not compared");
  return Buffer.from(text, "utf8");
}

function detokenize(ids, removeSpecial, unparseSpecial) {
  const what = `detokenize (remove_special=${removeSpecial}, unparse_special=${unparseSpecial})`;
  if (!removeSpecial) return exact(model.detokenize(ids, unparseSpecial), what);
  let body = ids, lead = false;
  if (vocab.addBos && vocab.bos != null && body.length > 0 && body[0] === vocab.bos) {
    body = body.slice(1);
    lead = true;
  }
  if (vocab.addEos && vocab.eos != null && body.length > 0 && body[body.length - 1] === vocab.eos)
    body = body.slice(0, -1);
  if (!lead || body.length === 0) return exact(model.detokenize(body, unparseSpecial), what);
  // After a dropped BOS llama.cpp keeps the space prefix: the BOS is detokenized in front (it takes the
  // prefix's strip) and its own text cut off again. Exact when that text has no space or apostrophe,
  // the only characters the clean-up of spaces looks back at.
  const head = model.detokenize([vocab.bos], unparseSpecial);
  const whole = model.detokenize([vocab.bos, ...body], unparseSpecial);
  if (/[ '\uFFFD]/.test(head) || !whole.startsWith(head))
    throw new NotExact(`${what}: the BOS text ${JSON.stringify(head)} cannot be cut off exactly`);
  return exact(whole.slice(head.length), what);
}

function attr(token) {
  const flags = model.getTokenAttributes(token);
  return ATTR_BITS.reduce((bits, [name, bit]) => (flags[name] ? bits | bit : bits), 0);
}

// --- the protocol ----------------------------------------------------------------------------------

function errorObject(err) {
  const traceback = err instanceof NotExact ? "" : String(err?.stack || "");  // a limit of the API, not a fault
  return { type: err?.name || "Error", message: String(err?.message ?? err), traceback };
}

function tokenCount(m) {
  const tokens = m.fileInfo?.metadata?.tokenizer?.ggml?.tokens;
  return Array.isArray(tokens) ? tokens.length : 0;
}

const ops = {
  async hello(req) {
    if (model) await model.dispose();
    model = null;
    errorLines = [];
    try {
      model = await llama.loadModel({ modelPath: req.model, vocabOnly: true });
    } catch (err) {  // the reason is in llama.cpp's log: the last error line that is not the simulation's
      const why = errorLines.filter((line) => !/missing tensor|failed to load model$/.test(line)).at(-1);
      if (why) err.message = `${err.message}: ${why}`;
      throw err;
    }
    vocab = vocabFacts(model);
    return { protocol: PROTOCOL, engine: engineName, capabilities: CAPABILITIES,
             info: { n_tokens: tokenCount(model) } };
  },
  tokenize(req) {
    const results = req.inputs.map((b64) => {
      const text = Buffer.from(b64, "base64").toString("utf8");  // valid UTF-8: no bytes_input
      return req.flags.map(([addSpecial, parseSpecial]) => {
        try {
          const ids = tokenize(text, addSpecial, parseSpecial);
          const result = { ids };
          if (req.detokenize) result.detokenize = req.detokenize.map(([removeSpecial, unparseSpecial]) => {
            try {
              return detokenize(ids, removeSpecial, unparseSpecial).toString("base64");
            } catch (err) {
              return { error: errorObject(err) };
            }
          });
          return result;
        } catch (err) {
          return { error: errorObject(err) };
        }
      });
    });
    return { results };
  },
  vocab(req) {
    const reply = {}, end = Math.min(req.start + req.count, tokenCount(model));
    const getters = { attr, eog: (t) => model.isEogToken(t), control: (t) => model.getTokenAttributes(t).control };
    for (const field of req.fields) {
      const get = getters[field];
      if (!get) throw new Error(`field ${field} is not offered`);
      const column = [];
      for (let t = req.start; t < end; t++) column.push(get(t));
      reply[field] = column;
    }
    return reply;
  },
  shutdown() { return {}; },
};

// One request at a time, in order: a reply is written before the next line is read.
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  let req = null, reply;
  try {
    req = JSON.parse(line);
    const op = ops[req.op];
    if (!op) reply = { ok: false, error: { type: "UnknownOp", message: `unknown op ${req.op}`, traceback: "" } };
    else if (req.op !== "hello" && req.op !== "shutdown" && !model)
      reply = { ok: false, error: { type: "NotLoaded", message: "no hello yet", traceback: "" } };
    else reply = { ok: true, ...(await op(req)) };
  } catch (err) {
    reply = { ok: false, error: errorObject(err) };
  }
  process.stdout.write(JSON.stringify({ id: req?.id ?? null, ...reply }) + "\n");
  if (req?.op === "shutdown") break;
}
if (model) await model.dispose();
process.exit(0);

#!/usr/bin/env node
// A broken engine, for the example: the Node.js reference child (its path is the first argument)
// with one planted fault. Requests go to the child unchanged; in a tokenize reply, every result for
// an input holding the word "dog" gets its last token id off by one, under every flag combination.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const child = spawn(process.execPath, [process.argv[2]], { stdio: ["pipe", "pipe", "inherit"] });
const planted = new Map(); // request id -> indices of the inputs to break

createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    const req = JSON.parse(line);
    if (req.op === "tokenize") {
      planted.set(req.id, req.inputs.flatMap((b64, i) => (Buffer.from(b64, "base64").includes("dog") ? [i] : [])));
    }
    child.stdin.write(line + "\n");
  })
  .on("close", () => child.stdin.end());

createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
  const reply = JSON.parse(line);
  for (const i of planted.get(reply.id) ?? []) {
    for (const result of reply.results?.[i] ?? []) {
      if (result.ids?.length) result.ids[result.ids.length - 1] += 1;
    }
  }
  planted.delete(reply.id);
  process.stdout.write(JSON.stringify(reply) + "\n");
});

child.on("exit", (code) => process.exit(code ?? 1));

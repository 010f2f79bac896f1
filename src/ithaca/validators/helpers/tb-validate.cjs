// Verdict helper for Ithaca validator cells in CommonJS packages:
//   const { observed, pass, fail } = require("./tb-validate.cjs");
// A run has one verdict: a second call, a reason that is not a string or evidence that
// is not JSON throws, and the helper never exits the process. The verdict file appears
// whole (written aside, then linked into place) and is never overwritten.
"use strict";

const fs = require("node:fs");

let written = false;

function observed() {
  const path = process.env.ITHACA_OBSERVED_PATH || process.env.TB_OBSERVED_PATH;
  return JSON.parse(fs.readFileSync(path, "utf8"));
}

function pass(reason, evidence) {
  write("pass", reason, evidence);
}

function fail(reason, evidence) {
  write("fail", reason, evidence);
}

function strictJson(value) {
  return JSON.stringify(value, (key, item) => {
    if (typeof item === "number" && !Number.isFinite(item)) {
      throw new TypeError(`tb-validate: evidence holds ${item}, which JSON cannot`);
    }
    if (item === undefined || typeof item === "function" || typeof item === "symbol") {
      throw new TypeError(`tb-validate: evidence holds a ${typeof item}, which JSON cannot`);
    }
    return item;
  });
}

function write(verdict, reason, evidence) {
  if (written) throw new Error("tb-validate: a verdict was already written in this run");
  if (typeof reason !== "string") {
    throw new TypeError(`tb-validate: reason must be a string, not ${typeof reason}`);
  }
  const record = { verdict, reason };
  if (evidence !== undefined) record.evidence = evidence;
  const text = strictJson(record);
  const path = process.env.ITHACA_VERDICT_PATH || process.env.TB_VERDICT_PATH;
  const temp = `${path}.${process.pid}.tmp`;
  fs.writeFileSync(temp, text, { flag: "wx" });
  try {
    fs.linkSync(temp, path); // unlike a rename, never replaces a verdict already there
  } catch (error) {
    if (error.code === "EEXIST") {
      throw new Error("tb-validate: a verdict was already written in this run");
    }
    throw error;
  } finally {
    fs.unlinkSync(temp);
  }
  written = true;
}

module.exports = { observed, pass, fail };

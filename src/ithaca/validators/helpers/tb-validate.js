// Verdict helper for Ithaca validator cells (ES modules, JavaScript and TypeScript):
//   import { observed, pass, fail } from "./tb-validate.js";
// The behaviour lives in tb-validate.cjs, so both module systems share one verdict.
import helper from "./tb-validate.cjs";

export const { observed, pass, fail } = helper;

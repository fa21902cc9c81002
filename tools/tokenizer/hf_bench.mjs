// Encoding speed of Hugging Face's own tokenizers library (npm `tokenizers`, the napi bindings of
// HF's Rust crate) on a text file, for comparison with `wormchat bench tokenizer` on the same
// file. Like wormchat's bench, the text is encoded line by line (each line keeps its '\n'); the
// lines go to encodeBatch in one call, with Rayon held to one thread (RAYON_NUM_THREADS=1, set
// below before the library loads), so the figure is single-thread encoding without one JS promise
// per line. Best of REPEATS runs. Run from a directory with the package installed (never inside
// the repo):
//
//   mkdir -p /tmp/hftok && cd /tmp/hftok && npm install tokenizers@0.23.2
//   node /path/to/wormchat/tools/tokenizer/hf_bench.mjs TOKENIZER_JSON TEXT_FILE [REPEATS]
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

process.env.RAYON_NUM_THREADS = "1";
process.env.TOKENIZERS_PARALLELISM = "false";
const require = createRequire(process.cwd() + "/");
const { Tokenizer } = require("tokenizers");

const [tokenizerPath, textPath, repeatsArg] = process.argv.slice(2);
if (!tokenizerPath || !textPath) {
  console.error("usage: node hf_bench.mjs TOKENIZER_JSON TEXT_FILE [REPEATS]");
  process.exit(2);
}
const repeats = Number(repeatsArg ?? 5);
const text = readFileSync(textPath, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const lines = text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
const tok = Tokenizer.fromFile(tokenizerPath);

let best = Infinity;
let tokens = 0;
for (let r = 0; r < repeats; ++r) {
  const t0 = process.hrtime.bigint();
  const encodings = await tok.encodeBatch(lines, { addSpecialTokens: false });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  tokens = encodings.reduce((n, e) => n + e.getIds().length, 0);
  best = Math.min(best, s);
}
const mb = bytes / 1e6;
console.log(`hf tokenizers: ${tokenizerPath}`);
console.log(`text ${textPath}: ${mb.toFixed(2)} MB, ${lines.length} lines, ${tokens} tokens`);
console.log(`encode best ${best.toFixed(3)} s: ${(mb / best).toFixed(2)} MB/s, ` +
            `${(tokens / best).toFixed(0)} tokens/s, 1 thread (RAYON_NUM_THREADS=1)`);

// Reference token ids from the official Hugging Face `tokenizers` library.
//
// Encodes every entry of a corpus (tests/fixtures/tokenizer/corpus.json) with a
// tokenizer.json through the npm `tokenizers` package (napi bindings of HF's
// Rust crate) and writes the hf_expected.json the C++ tokenizer tests compare
// against. Run it from a scratch directory that has the package installed
// (never inside the repo: no node_modules in the work tree):
//
//   mkdir -p /tmp/hftok && cd /tmp/hftok && npm install tokenizers@0.23.2
//   node /work/main/tools/tokenizer/hf_reference.mjs TOKENIZER_JSON CORPUS.json [MORE.json ...] OUT.json
//   node /work/main/tools/tokenizer/hf_reference.mjs --check-llama TOKENIZER_JSON VOCAB.inp VOCAB.out
//
// TOKENIZER_JSON may be xz-compressed (name ending in .xz; needs the xz tool).
// The package is resolved from the current directory's node_modules, or from
// the directory named by $TOKENIZERS_DIR.
//
// Several corpus files are read as one corpus, in the order given (toy_falcon3
// uses corpus.json then corpus_falcon3.json).
//
// Corpus: JSON array of {"text": "..."} or {"hex": "..."} (raw bytes, usually
// invalid UTF-8), each optionally with "note". A hex entry is turned into text
// the way Rust's String::from_utf8_lossy does it: every maximal invalid subpart
// becomes one U+FFFD (WHATWG TextDecoder('utf-8') follows the same rule; this
// script checks it against its own implementation of the rule).
//
// Output: JSON array in corpus order, one object per line:
//   "text" or "hex" (+ "lossy": the decoded text for hex entries), "note",
//   "ids":                  encode(text, add_special_tokens=false)
//   "ids_with_special":     encode(text, add_special_tokens=true); only written
//                           when the tokenizer has a post_processor
//   "decoded":              decode(ids, skip_special_tokens=false)
//   "decoded_skip_special": decode(ids, skip_special_tokens=true)
// Strings are written with the same escaping as corpus.json (controls,
// separators, format chars, combining marks etc. as \u escapes), so the output
// is deterministic and byte-stable across runs.
//
// --check-llama: parse llama.cpp's ggml-vocab-*.gguf.inp/.out test vectors
// (inputs separated by "\n__ggml_vocab_test__\n", one line of ids per input)
// and report how many the tokenizer reproduces exactly (exit 1 on any miss).

import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { dumpEntry } from '../lib/stable_json.mjs'

function loadTokenizers() {
  const dirs = [process.env.TOKENIZERS_DIR, process.cwd()].filter(Boolean)
  for (const d of dirs) {
    try {
      const req = createRequire(path.join(path.resolve(d), 'noop.js'))
      const mod = req('tokenizers')
      const version = JSON.parse(fs.readFileSync(req.resolve('tokenizers/package.json'), 'utf8')).version
      return { mod, version }
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e
    }
  }
  throw new Error('npm package "tokenizers" not found: cd to a directory with it installed (npm install tokenizers@0.23.2) or set TOKENIZERS_DIR')
}

function readTokenizerJson(file) {
  if (file.endsWith('.xz')) return execFileSync('xz', ['-dc', file], { maxBuffer: 1 << 30 }).toString('utf8')
  return fs.readFileSync(file, 'utf8')
}

// Rust String::from_utf8_lossy / Unicode "maximal subpart" replacement.
function utf8Lossy(bytes) {
  let out = ''
  let i = 0
  const n = bytes.length
  while (i < n) {
    const b = bytes[i]
    if (b < 0x80) { out += String.fromCharCode(b); i++; continue }
    let need, lo = 0x80, hi = 0xbf, cp
    if (b >= 0xc2 && b <= 0xdf) { need = 1; cp = b & 0x1f }
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2; cp = b & 0x0f
      if (b === 0xe0) lo = 0xa0
      if (b === 0xed) hi = 0x9f
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3; cp = b & 0x07
      if (b === 0xf0) lo = 0x90
      if (b === 0xf4) hi = 0x8f
    } else { out += '\ufffd'; i++; continue }
    let j = i + 1
    let ok = true
    for (let k = 0; k < need; k++, j++) {
      const c = j < n ? bytes[j] : -1
      if (c < lo || c > hi) { ok = false; break }
      cp = (cp << 6) | (c & 0x3f)
      lo = 0x80; hi = 0xbf
    }
    if (!ok) { out += '\ufffd'; i = j; continue }
    out += String.fromCodePoint(cp)
    i = j
  }
  return out
}

function hexToText(hex) {
  const bytes = Buffer.from(hex, 'hex')
  if (bytes.length * 2 !== hex.length) throw new Error(`bad hex ${hex}`)
  const a = new TextDecoder('utf-8').decode(bytes)
  const b = utf8Lossy(bytes)
  if (a !== b) throw new Error(`lossy UTF-8 mismatch for ${hex}: TextDecoder ${JSON.stringify(a)} vs ${JSON.stringify(b)}`)
  return a
}

async function generate(Tokenizer, version, tokFile, corpusFiles, outFile) {
  const json = readTokenizerJson(tokFile)
  const parsed = JSON.parse(json)
  const hasPost = parsed.post_processor != null
  const tok = Tokenizer.fromString(json)
  // The library ignores the ids written in "added_tokens" (a token already in the
  // model vocabulary keeps its model id, a new one gets the next free id); make
  // sure the file says what the library does, or C++ and HF would disagree.
  for (const a of parsed.added_tokens || []) {
    const id = tok.tokenToId(a.content)
    if (id !== a.id) throw new Error(`${tokFile}: added token ${JSON.stringify(a.content)} has id ${id} in tokenizers, ${a.id} in the file`)
  }
  const corpus = corpusFiles.flatMap((f) => JSON.parse(fs.readFileSync(f, 'utf8')))
  const lines = []
  for (const c of corpus) {
    const e = {}
    let text
    if (typeof c.text === 'string') { text = c.text; e.text = text }
    else if (typeof c.hex === 'string') { text = hexToText(c.hex); e.hex = c.hex; e.lossy = text }
    else throw new Error(`corpus entry without text/hex: ${JSON.stringify(c)}`)
    if (c.note) e.note = c.note
    const enc = await tok.encode(text, null, { addSpecialTokens: false })
    e.ids = enc.getIds()
    if (hasPost) e.ids_with_special = (await tok.encode(text, null, { addSpecialTokens: true })).getIds()
    e.decoded = await tok.decode(e.ids, false)
    e.decoded_skip_special = await tok.decode(e.ids, true)
    // The output must round-trip: what we write is what a C++ reader will see.
    const line = dumpEntry(e)
    const back = JSON.parse(line)
    if (JSON.stringify(back) !== JSON.stringify(e)) throw new Error(`entry does not round-trip: ${line}`)
    lines.push(line)
  }
  fs.writeFileSync(outFile, '[\n' + lines.join(',\n') + '\n]\n')
  console.log(`tokenizers ${version}: wrote ${outFile}: ${lines.length} entries from ${corpusFiles.join(' + ')} with ${tokFile}`)
}

async function checkLlama(Tokenizer, version, tokFile, inpFile, outFile) {
  const tok = Tokenizer.fromString(readTokenizerJson(tokFile))
  const raw = fs.readFileSync(inpFile, 'utf8')
  const sep = '\n__ggml_vocab_test__\n'
  const inputs = []
  for (let pos = 0; pos < raw.length;) { // same splitting as llama.cpp tests/test-tokenizer-0.cpp
    const next = raw.indexOf(sep, pos)
    if (next < 0) { inputs.push(raw.slice(pos)); break }
    inputs.push(raw.slice(pos, next))
    pos = next + sep.length
  }
  const outs = fs.readFileSync(outFile, 'utf8').split('\n')
  if (outs.length && outs[outs.length - 1] === '') outs.pop()
  if (outs.length !== inputs.length) throw new Error(`${inputs.length} inputs but ${outs.length} output lines`)
  let ok = 0
  for (let i = 0; i < inputs.length; i++) {
    const s = outs[i].trim()
    const want = s === '' ? [] : s.split(' ').map(Number)
    const got = (await tok.encode(inputs[i], null, { addSpecialTokens: false })).getIds()
    if (JSON.stringify(got) === JSON.stringify(want)) ok++
    else console.log(`MISMATCH #${i} ${JSON.stringify(inputs[i]).slice(0, 80)}\n  got  ${got.join(' ')}\n  want ${want.join(' ')}`)
  }
  console.log(`tokenizers ${version}: ${ok}/${inputs.length} llama.cpp vectors match (${tokFile})`)
  if (ok !== inputs.length) process.exitCode = 1
}

const args = process.argv.slice(2)
const { mod, version } = loadTokenizers()
if (args[0] === '--check-llama' && args.length === 4) await checkLlama(mod.Tokenizer, version, args[1], args[2], args[3])
else if (args.length >= 3 && args[0] !== '--check-llama') await generate(mod.Tokenizer, version, args[0], args.slice(1, -1), args[args.length - 1])
else {
  console.error('usage: node hf_reference.mjs TOKENIZER_JSON CORPUS.json [MORE.json ...] OUT.json\n' +
    '       node hf_reference.mjs --check-llama TOKENIZER_JSON VOCAB.inp VOCAB.out')
  process.exit(2)
}

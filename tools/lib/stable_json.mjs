// Byte-stable JSON lines for the reference files the Node tools write (tests/fixtures/tokenizer/
// hf_expected.json, tests/fixtures/chat_templates/expected.json): strings escaped as corpus.json
// escapes them (controls, separators, format characters, combining marks, non-NFC characters and
// lone surrogates as \u escapes; printable ASCII and other text as is), keys in insertion order,
// one object per line. The same input always gives the same bytes.

function needsEscape(ch) {
  if (ch === ' ') return false
  const cp = ch.codePointAt(0)
  if (cp > 0x20 && cp < 0x7f) return false
  if (ch.length === 1 && cp >= 0xd800 && cp <= 0xdfff) return true // lone surrogate
  if (ch.normalize('NFC') !== ch || (cp >= 0x1100 && cp <= 0x11ff)) return true
  return /^[\p{C}\p{Z}\p{M}]$/u.test(ch)
}

export function dumpStr(s) {
  let out = '"'
  for (const ch of s) {
    if (ch === '"') out += '\\"'
    else if (ch === '\\') out += '\\\\'
    else if (ch === '\n') out += '\\n'
    else if (ch === '\t') out += '\\t'
    else if (ch === '\r') out += '\\r'
    else if (needsEscape(ch)) {
      for (let k = 0; k < ch.length; k++) out += '\\u' + ch.charCodeAt(k).toString(16).padStart(4, '0')
    } else out += ch
  }
  return out + '"'
}

export function dumpEntry(e) {
  const parts = []
  for (const [k, v] of Object.entries(e)) {
    if (typeof v === 'string') parts.push(`"${k}": ${dumpStr(v)}`)
    else parts.push(`"${k}": ${JSON.stringify(v)}`)
  }
  return '{' + parts.join(', ') + '}'
}

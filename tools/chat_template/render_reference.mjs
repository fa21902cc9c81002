// Reference renderings of Hugging Face chat templates from the npm package
// @huggingface/jinja (Hugging Face's JavaScript Jinja, the one transformers.js and
// the Hub use), pinned to 0.5.11.
//
// Renders every tests/fixtures/chat_templates/*.jinja with every conversation of
// tests/fixtures/chat_templates/conversations.json, once with
// add_generation_prompt=true and once with false, and writes
// tests/fixtures/chat_templates/expected.json. The C++ chat-template code is tested
// against that file byte for byte. Run it from a scratch directory that has the
// package installed (never inside the repo: no node_modules in the work tree):
//
//   mkdir -p /tmp/jinja && cd /tmp/jinja && npm install @huggingface/jinja@0.5.11
//   node /work/main/tools/chat_template/render_reference.mjs            # writes expected.json
//   node /work/main/tools/chat_template/render_reference.mjs --check    # compares, exit 1 on any difference
//   node /work/main/tools/chat_template/render_reference.mjs --incremental   # prefix-stability report
//
// The package is resolved from the current directory's node_modules, or from the
// directory named by $HF_JINJA_DIR. Any other version than 0.5.11 is refused.
//
// How it renders (what transformers' apply_chat_template does):
// - @huggingface/jinja's Template constructor always tokenizes with
//   { lstrip_blocks: true, trim_blocks: true } (src/index.ts), the two options
//   transformers sets on its ImmutableSandboxedEnvironment; like Jinja2 it also drops
//   one trailing newline of the template. It defines raise_exception (throws its
//   message), strftime_now and range as globals, as transformers does.
// - Variables: messages, add_generation_prompt, and the template's special tokens
//   from conversations.json "special_tokens" (keyed by the template name, or by the
//   part before the first "_" for variants such as falcon3_<variant>). A token the
//   tokenizer_config.json does not set is left undefined, as in transformers, whose
//   special_tokens_map leaves unset tokens out. tools and documents are left
//   undefined (transformers passes None; both are falsy in a template).
// - One correction: the template source's line breaks (\r\n, \r) become \n before
//   parsing, as Jinja2's lexer does first thing (Lexer.tokeniter: newline_re.split,
//   "\n".join), string literals included; @huggingface/jinja 0.5.11 keeps a CR inside a
//   string literal. Message contents are not touched (Jinja2 does not touch them either).
//   tools/chat_template/check_jinja2.py re-renders everything with Python Jinja2 set up as
//   transformers sets it up and must report no difference.
//
// Output: a JSON array, one object per line, in (template name, conversation index,
// add_generation_prompt true then false) order:
//   {"template": NAME, "conversation": INDEX, "add_generation_prompt": BOOL, "text": RENDERED}
// or, where the template raises (raise_exception) or fails to parse, "error": MESSAGE
// instead of "text". Strings are written with controls, separators, format
// characters and combining marks as \u escapes (\n \t \r as such), so the file is
// byte-stable and immune to editors; JSON.parse gives the exact rendered strings.
//
// --incremental: for every template and every conversation that ends with a user
// message, checks whether the prompt rendered with add_generation_prompt=true is a
// prefix of the same conversation rendered with an assistant reply appended
// (add_generation_prompt=false), whether that reply follows the prompt verbatim, and
// whether the conversation with the reply is in turn a prefix of it rendered with a
// further user message (add_generation_prompt=true). Prints what comes between.

import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { dumpEntry } from '../lib/stable_json.mjs'

const PINNED = '0.5.11'
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const FIXTURES = path.join(ROOT, 'tests', 'fixtures', 'chat_templates')

function loadJinja() {
  const dirs = [process.env.HF_JINJA_DIR, process.cwd()].filter(Boolean)
  for (const d of dirs) {
    try {
      const req = createRequire(path.join(path.resolve(d), 'noop.js'))
      const entry = req.resolve('@huggingface/jinja') // its "require" export, dist/index.cjs
      const mod = req(entry)
      // package.json is not in the package's "exports": walk up from the entry point.
      let dir = path.dirname(entry)
      while (!fs.existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir)
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
      if (pkg.name !== '@huggingface/jinja') throw new Error(`${dir}/package.json is ${pkg.name}`)
      return { mod, version: pkg.version, dir }
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e
    }
  }
  throw new Error(`npm package "@huggingface/jinja" not found: cd to a directory with it installed (npm install @huggingface/jinja@${PINNED}) or set HF_JINJA_DIR`)
}

// Same escaping as tools/tokenizer/hf_reference.mjs.
function loadInputs() {
  const conv = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'conversations.json'), 'utf8'))
  const names = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.jinja')).map((f) => f.slice(0, -'.jinja'.length)).sort()
  if (names.length === 0) throw new Error(`no *.jinja in ${FIXTURES}`)
  const templates = names.map((name) => {
    // Byte-exact: read as a Buffer, decode strictly (a CR stays a CR).
    const text = new TextDecoder('utf-8', { fatal: true }).decode(fs.readFileSync(path.join(FIXTURES, name + '.jinja')))
    const key = conv.special_tokens[name] ? name : name.split('_')[0]
    const tokens = conv.special_tokens[key]
    if (!tokens) throw new Error(`conversations.json special_tokens has no entry for ${name} (nor ${key})`)
    return { name, text, tokens }
  })
  return { templates, conversations: conv.conversations }
}

function makeRenderer(Template, tmpl) {
  let compiled = null
  let parseError = null
  try {
    // Jinja2's lexer (Lexer.tokeniter) first rewrites every \r\n and \r of the template source
    // to \n, string literals included; @huggingface/jinja 0.5.11 does not. Doing it here makes
    // the renderings those of transformers (the falcon_instruct template has a CR LF literal).
    compiled = new Template(tmpl.text.replace(/\r\n?/g, '\n'))
  } catch (e) {
    parseError = String(e && e.message !== undefined ? e.message : e)
  }
  return (messages, addGenerationPrompt) => {
    if (parseError !== null) return { error: parseError }
    const vars = { messages: structuredClone(messages), add_generation_prompt: addGenerationPrompt }
    for (const [k, v] of Object.entries(tmpl.tokens)) if (v !== null && v !== undefined) vars[k] = v
    try {
      return { text: compiled.render(vars) }
    } catch (e) {
      return { error: String(e && e.message !== undefined ? e.message : e) }
    }
  }
}

function renderAll(Template, templates, conversations) {
  const lines = []
  for (const tmpl of templates) {
    const render = makeRenderer(Template, tmpl)
    conversations.forEach((c, i) => {
      for (const agp of [true, false]) {
        const r = render(c.messages, agp)
        const entry = { template: tmpl.name, conversation: i, add_generation_prompt: agp }
        if ('text' in r) entry.text = r.text
        else entry.error = r.error
        const line = dumpEntry(entry)
        if (JSON.stringify(JSON.parse(line)) !== JSON.stringify(entry)) throw new Error(`entry does not round-trip: ${line}`)
        lines.push(line)
      }
    })
  }
  return '[\n' + lines.join(',\n') + '\n]\n'
}

const show = (s) => JSON.stringify(s)

function incremental(Template, templates, conversations) {
  const replies = ['Sure thing.', '  Padded reply.\n', 'Line 1\n\nLine 2']
  const nextUser = 'Thanks!'
  for (const tmpl of templates) {
    const render = makeRenderer(Template, tmpl)
    const findings = new Map() // description -> [examples]
    let cases = 0
    let unsafe = 0
    conversations.forEach((c, i) => {
      const msgs = c.messages
      if (msgs.length === 0 || msgs[msgs.length - 1].role !== 'user') return
      for (const reply of replies) {
        const a = render(msgs, true)
        const withReply = [...msgs, { role: 'assistant', content: reply }]
        const b = render(withReply, false)
        const cn = render([...withReply, { role: 'user', content: nextUser }], true)
        if (!('text' in a) || !('text' in b) || !('text' in cn)) continue
        cases++
        const A = a.text, B = b.text, C = cn.text
        const notes = []
        let ok = true
        if (!B.startsWith(A)) {
          ok = false
          let k = 0
          while (k < A.length && k < B.length && A[k] === B[k]) k++
          notes.push(`prompt NOT a prefix of prompt+reply: they part at ${k}: prompt has ${show(A.slice(k, k + 20))}, with reply ${show(B.slice(k, k + 20))}`)
        } else if (B.startsWith(A + reply)) {
          notes.push(`reply verbatim, then turn end ${show(B.slice(A.length + reply.length))}`)
        } else {
          ok = false
          notes.push(`reply NOT verbatim: after the prompt comes ${show(B.slice(A.length))} for reply ${show(reply)}`)
        }
        if (!C.startsWith(B)) {
          ok = false
          let k = 0
          while (k < B.length && k < C.length && B[k] === C[k]) k++
          notes.push(`history NOT a prefix once the next user turn is added: part at ${k}: ${show(B.slice(k))} vs ${show(C.slice(k, k + 30))}`)
        } else {
          const rest = C.slice(B.length)
          const at = rest.indexOf(nextUser)
          notes.push(`next turn glue ${show(at >= 0 ? rest.slice(0, at) : rest)}`)
        }
        if (!ok) unsafe++
        const key = (ok ? 'ok: ' : 'UNSAFE: ') + notes.join('; ')
        if (!findings.has(key)) findings.set(key, [])
        findings.get(key).push(`conv ${i}, reply ${show(reply)}`)
      }
    })
    console.log(`== ${tmpl.name}: ${cases} cases, ${unsafe} not prefix-stable with the reply verbatim`)
    for (const [k, ex] of findings) console.log(`  ${k}\n      (${ex.length}: ${ex.slice(0, 3).join(' | ')}${ex.length > 3 ? ' ...' : ''})`)
  }
}

function main() {
  const args = process.argv.slice(2)
  for (const a of args) if (!['--check', '--incremental'].includes(a)) throw new Error(`unknown argument ${a}`)
  const { mod, version } = loadJinja()
  if (version !== PINNED) throw new Error(`@huggingface/jinja ${version} found, ${PINNED} required (npm install @huggingface/jinja@${PINNED})`)
  const { templates, conversations } = loadInputs()
  if (args.includes('--incremental')) {
    incremental(mod.Template, templates, conversations)
    return
  }
  const out = renderAll(mod.Template, templates, conversations)
  const file = path.join(FIXTURES, 'expected.json')
  if (args.includes('--check')) {
    const have = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
    if (have !== out) {
      const a = have.split('\n'), b = out.split('\n')
      let k = 0
      while (k < a.length && k < b.length && a[k] === b[k]) k++
      console.error(`expected.json differs from a fresh rendering (first at line ${k + 1}):\n  file:  ${a[k]}\n  fresh: ${b[k]}`)
      process.exit(1)
    }
    console.log(`expected.json matches @huggingface/jinja ${version}: ${templates.length} templates x ${conversations.length} conversations x 2`)
    return
  }
  fs.writeFileSync(file, out)
  console.log(`wrote ${path.relative(ROOT, file)}: ${templates.length} templates x ${conversations.length} conversations x 2 (@huggingface/jinja ${version})`)
}

main()

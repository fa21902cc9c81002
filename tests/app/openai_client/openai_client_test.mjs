// `wormchat serve` driven by the official OpenAI client library (npm `openai`, pinned in
// package.json / package-lock.json): every endpoint, streamed and not, and the errors as the
// client raises them. Starts the real binary on the default model with an API key (from a file),
// on a free port (--port 0; the port is read from its "listening on" line).
//
//   npm ci --prefix tests/app/openai_client       (once; tools/test.sh does it)
//   node tests/app/openai_client/openai_client_test.mjs [--wormchat PATH] [--port N]
//
// PATH defaults to $WORMCHAT_BINARY, then build/wormchat. Each check prints one line; any
// failure prints what differed and the process exits 1. ctest runs it (tests/CMakeLists.txt).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../../..');

// The client at the version package.json pins (npm ci installs exactly the lock file's).
const pinned = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8')).dependencies.openai;
let installed = null;
try {
  installed = JSON.parse(fs.readFileSync(path.join(here, 'node_modules/openai/package.json'), 'utf8')).version;
} catch {}
if (installed !== pinned) {
  console.error(`openai_client_test: the openai client ${pinned} is not installed` +
                `${installed ? ` (node_modules holds ${installed})` : ''}: run ` +
                '`npm ci --prefix tests/app/openai_client` (from the repository root)');
  process.exit(1);
}
const { default: OpenAI } = await import('openai');

// ---- arguments -------------------------------------------------------------------------------
function parseArgs(argv) {
  const a = { wormchat: process.env.WORMCHAT_BINARY || path.join(repo, 'build/wormchat'),
              port: process.env.WORMCHAT_PORT || '0' };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--wormchat' && i + 1 < argv.length) a.wormchat = argv[++i];
    else if (argv[i] === '--port' && i + 1 < argv.length) a.port = argv[++i];
    else {
      console.error(`openai_client_test: unknown argument ${argv[i]} ` +
                    '(expected --wormchat PATH, --port N)');
      process.exit(2);
    }
  }
  return a;
}
const args = parseArgs(process.argv.slice(2));

// ---- checks ----------------------------------------------------------------------------------
const show = (v) => JSON.stringify(v);
class CheckFailed extends Error {}
function fail(what) { throw new CheckFailed(what); }
function expect(cond, what) { if (!cond) fail(what); }
function expectEqual(got, want, what) {
  if (show(got) !== show(want)) fail(`${what}: expected ${show(want)}, got ${show(got)}`);
}
// `fn` must throw the client's `cls` with this status (and error.param when given).
async function expectApiError(fn, cls, status, param, what) {
  let err;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  if (!err) fail(`${what}: expected ${cls.name} (${status}), the call succeeded`);
  if (!(err instanceof cls)) {
    fail(`${what}: expected ${cls.name} (${status}), got ${err.constructor?.name} ` +
         `(status ${err.status}): ${err.message}`);
  }
  expectEqual(err.status, status, `${what}: status`);
  if (param !== undefined) expectEqual(err.param, param, `${what}: error.param`);
  expect(typeof err.error?.message === 'string' && err.error.message.length > 0,
         `${what}: error.message is empty (${show(err.error)})`);
  return err;
}

let failures = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    const note = await fn();
    console.log(`ok    ${name} (${Date.now() - t0} ms)${note ? ': ' + note : ''}`);
  } catch (e) {
    ++failures;
    const msg = e instanceof CheckFailed ? e.message : (e?.stack || String(e));
    console.log(`FAIL  ${name}: ${msg}`);
  }
}

// ---- the server ------------------------------------------------------------------------------
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wormchat-openai-client-'));
const apiKey = `wc-test-${process.pid}-${Date.now()}`;
const keyFile = path.join(tmp, 'api-key');
fs.writeFileSync(keyFile, apiKey + '\n', { mode: 0o600 });

let server;
let serverLog = '';
let serverExit = null;  // a promise of { code, signal }

function cleanup() {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
}
function die(msg) {
  console.log(`FAIL  ${msg}`);
  if (serverLog) console.log(`wormchat serve's output:\n${serverLog}`);
  cleanup();
  process.exit(1);
}
// A hung server or client must not hang ctest: the whole run gets this long.
const deadlineS = Number(process.env.WORMCHAT_OPENAI_TEST_TIMEOUT_S || 300);
setTimeout(() => die(`the test did not finish within ${deadlineS} s`), deadlineS * 1000).unref();

function startServer() {
  if (!fs.existsSync(args.wormchat)) die(`no wormchat binary at ${args.wormchat} (--wormchat PATH)`);
  server = spawn(args.wormchat, ['serve', '--port', String(args.port), '--api-key-file', keyFile],
                 { stdio: ['ignore', 'pipe', 'pipe'] });
  serverExit = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const onData = (d) => {
      serverLog += d.toString();
      const m = serverLog.match(/wormchat serve: listening on http:\/\/([^:\s]+):(\d+) \(model (\S+),/);
      if (m) resolve({ host: m[1], port: Number(m[2]), model: m[3], banner: serverLog.trim() });
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('error', (e) => reject(new Error(`could not start ${args.wormchat}: ${e.message}`)));
    serverExit.then(({ code, signal }) =>
      reject(new Error(`wormchat serve exited (code ${code}, signal ${signal}) before listening`)));
    setTimeout(() => reject(new Error('wormchat serve printed no "listening on" line in 120 s')),
               120000).unref();
  });
}

let info;
try {
  info = await startServer();
} catch (e) {
  die(e.message);
}
console.log(`server: ${info.banner.split('\n').pop()}`);
await check('serve --api-key-file: the banner says a key is required', async () => {
  expect(info.banner.includes('API key required'), `banner ${show(info.banner)}`);
});

const base = `http://${info.host}:${info.port}`;
const client = new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0, timeout: 120000 });
const model = info.model;

// A chat request; the default one is short (a tiny model, 2 cores: tokens are few everywhere).
const chatReq = (over = {}) => ({
  model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 12, seed: 7, ...over,
});
async function collectChatStream(req) {
  const stream = await client.chat.completions.create({ ...req, stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}
function checkUsage(u, what) {
  expect(u && typeof u === 'object', `${what}: no usage (${show(u)})`);
  expect(Number.isInteger(u.prompt_tokens) && u.prompt_tokens > 0,
         `${what}: usage.prompt_tokens ${show(u.prompt_tokens)}`);
  expect(Number.isInteger(u.completion_tokens) && u.completion_tokens > 0,
         `${what}: usage.completion_tokens ${show(u.completion_tokens)}`);
  expectEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens, `${what}: usage.total_tokens`);
  const cached = u.prompt_tokens_details?.cached_tokens;
  expect(Number.isInteger(cached) && cached >= 0 && cached <= u.prompt_tokens,
         `${what}: usage.prompt_tokens_details.cached_tokens ${show(cached)} ` +
         `(prompt_tokens ${u.prompt_tokens})`);
}
// The text a chat choice's logprobs spell: the tokens' strings joined (the reply's text drops
// their leading space, the tokenizer's word marker).
const spelled = (content) => content.map((t) => t.token).join('');

// ---- /v1/models ------------------------------------------------------------------------------
await check('models.list: the one model, as the banner names it', async () => {
  const page = await client.models.list();
  expectEqual(page.data.map((m) => m.id), [model], 'model ids');
  const m = page.data[0];
  expectEqual(m.object, 'model', 'object');
  expect(typeof m.owned_by === 'string' && m.owned_by.length > 0, `owned_by ${show(m.owned_by)}`);
  expect(Number.isInteger(m.created) && m.created > 0, `created ${show(m.created)}`);
  const one = await client.models.retrieve(model).catch((e) => e);
  // Retrieving one model is optional in the API; if the server answers, it is this model.
  if (!(one instanceof OpenAI.NotFoundError)) {
    if (one instanceof Error) fail(`models.retrieve: ${one.message}`);
    expectEqual(one.id, model, 'models.retrieve id');
  }
  return m.id;
});

// ---- /v1/chat/completions, not streamed ------------------------------------------------------
let hello;  // the non-streamed reply to chatReq()
await check('chat.completions.create: a reply, its finish_reason and usage', async () => {
  hello = await client.chat.completions.create(chatReq());
  expectEqual(hello.object, 'chat.completion', 'object');
  expect(typeof hello.id === 'string' && hello.id.startsWith('chatcmpl-'), `id ${show(hello.id)}`);
  expectEqual(hello.model, model, 'model');
  expectEqual(hello.choices.length, 1, 'choices');
  const c = hello.choices[0];
  expectEqual(c.index, 0, 'index');
  expectEqual(c.message.role, 'assistant', 'role');
  expect(typeof c.message.content === 'string' && c.message.content.length > 0,
         `content ${show(c.message.content)}`);
  expect(['length', 'stop'].includes(c.finish_reason), `finish_reason ${show(c.finish_reason)}`);
  checkUsage(hello.usage, 'usage');
  if (c.finish_reason === 'length') expectEqual(hello.usage.completion_tokens, 12, 'completion_tokens at max_tokens');
  else expect(hello.usage.completion_tokens <= 12, `completion_tokens ${hello.usage.completion_tokens} > max_tokens 12`);
  // A 9-token prompt fills no 64-token block of the prefix cache.
  expectEqual(hello.usage.prompt_tokens_details.cached_tokens, 0, 'cached_tokens of a short prompt');
  return show(c.message.content);
});
if (!hello) die('no reply to the first chat request; the rest depends on it');
const helloText = hello.choices[0].message.content;

let seeded = {};  // seed -> text
await check('chat: the same request and seed give the same text; other seeds other texts', async () => {
  const again = await client.chat.completions.create(chatReq());
  expectEqual(again.choices[0].message.content, helloText, 'the same request again');
  expectEqual(again.usage, hello.usage, 'the same request again: usage');
  seeded[7] = helloText;
  for (const seed of [8, 9]) {
    seeded[seed] = (await client.chat.completions.create(chatReq({ seed }))).choices[0].message.content;
  }
  expect(new Set(Object.values(seeded)).size > 1,
         `seeds 7, 8 and 9 all gave ${show(helloText)}: the seed is not used`);
});

await check('chat: requests at once give what they give alone', async () => {
  const seeds = Object.keys(seeded).map(Number);
  const replies = await Promise.all(seeds.map((seed) => client.chat.completions.create(chatReq({ seed }))));
  replies.forEach((r, i) => expectEqual(r.choices[0].message.content, seeded[seeds[i]], `seed ${seeds[i]}`));
});

let two;
await check('chat: n=2 gives 2 choices, the first one the seed\'s own', async () => {
  two = await client.chat.completions.create(chatReq({ n: 2 }));
  expectEqual(two.choices.map((c) => c.index), [0, 1], 'choice indices');
  expectEqual(two.choices[0].message.content, helloText, 'choice 0 (the seed itself)');
  for (const c of two.choices) {
    expect(typeof c.message.content === 'string' && c.message.content.length > 0, `choice ${c.index} content empty`);
    expect(['length', 'stop'].includes(c.finish_reason), `choice ${c.index} finish_reason ${show(c.finish_reason)}`);
  }
  checkUsage(two.usage, 'usage');
  expectEqual(two.usage.prompt_tokens, hello.usage.prompt_tokens, 'prompt_tokens (counted once)');
  expect(two.usage.completion_tokens > hello.usage.completion_tokens,
         `completion_tokens ${two.usage.completion_tokens} do not count both choices`);
  return two.choices.map((c) => show(c.message.content)).join(' | ');
});

// ---- /v1/chat/completions, streamed ----------------------------------------------------------
await check('chat streamed with include_usage: the same text, then a usage chunk', async () => {
  const chunks = await collectChatStream(chatReq({ stream_options: { include_usage: true } }));
  expect(chunks.length >= 3, `only ${chunks.length} chunks`);
  const ids = new Set(chunks.map((c) => c.id));
  expectEqual(ids.size, 1, `one id across chunks (${show([...ids])})`);
  for (const c of chunks) expectEqual(c.object, 'chat.completion.chunk', 'chunk object');
  const last = chunks[chunks.length - 1];
  expectEqual(last.choices, [], 'the last chunk\'s choices');
  checkUsage(last.usage, 'the last chunk\'s usage');
  expectEqual(last.usage, hello.usage, 'streamed usage against the non-streamed');
  const body = chunks.slice(0, -1);
  for (const c of body) expect(c.usage == null, `a chunk before the last has usage ${show(c.usage)}`);
  expectEqual(body[0].choices[0].delta.role, 'assistant', 'the first delta\'s role');
  const text = body.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  expectEqual(text, helloText, 'concatenated deltas against the non-streamed text');
  const finishes = body.map((c) => c.choices[0]?.finish_reason).filter((f) => f != null);
  expectEqual(finishes, [hello.choices[0].finish_reason], 'finish_reason chunks');
  return `${chunks.length} chunks`;
});

await check('chat streamed, n=2, no include_usage: each choice\'s deltas, no usage', async () => {
  const chunks = await collectChatStream(chatReq({ n: 2 }));
  const texts = ['', ''];
  const finishes = [[], []];
  for (const c of chunks) {
    expect(c.usage == null, `a chunk has usage ${show(c.usage)} though include_usage was not asked`);
    for (const ch of c.choices) {
      expect(ch.index === 0 || ch.index === 1, `choice index ${ch.index}`);
      texts[ch.index] += ch.delta?.content ?? '';
      if (ch.finish_reason != null) finishes[ch.index].push(ch.finish_reason);
    }
  }
  expectEqual(texts, two.choices.map((c) => c.message.content), 'streamed choices against n=2 not streamed');
  expectEqual(finishes, two.choices.map((c) => [c.finish_reason]), 'finish_reason chunks');
});

// ---- stop strings ----------------------------------------------------------------------------
await check('chat: a stop string ends the text before it, streamed and not', async () => {
  const long = await client.chat.completions.create(chatReq({ max_tokens: 16, seed: 11 }));
  const full = long.choices[0].message.content;
  // A printable piece from the text's middle whose first occurrence is not at the start.
  let stop = null;
  for (let k = Math.floor(full.length / 2); k > 0 && !stop; --k) {
    const s = full.slice(k, k + 3);
    if (/^[\x20-\x7e]{3}$/.test(s) && /\S/.test(s) && full.indexOf(s) > 0) stop = s;
  }
  expect(stop !== null, `no stop string to pick from ${show(full)}`);
  const want = full.slice(0, full.indexOf(stop));
  const req = chatReq({ max_tokens: 16, seed: 11, stop: ['@@never@@', stop] });
  const r = await client.chat.completions.create(req);
  expectEqual(r.choices[0].message.content, want, `text with stop ${show(stop)} (full text ${show(full)})`);
  expectEqual(r.choices[0].finish_reason, 'stop', 'finish_reason');
  const chunks = await collectChatStream(req);
  expectEqual(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), want, 'streamed text with stop');
  expectEqual(chunks.map((c) => c.choices[0]?.finish_reason).filter((f) => f != null), ['stop'],
              'streamed finish_reason');
  return `stop ${show(stop)}: ${show(want)}`;
});

// ---- logprobs --------------------------------------------------------------------------------
await check('chat: logprobs + top_logprobs, streamed and not', async () => {
  const k = 3;
  const r = await client.chat.completions.create(chatReq({ logprobs: true, top_logprobs: k }));
  const c = r.choices[0];
  expectEqual(c.message.content, helloText, 'text with logprobs against without');
  const content = c.logprobs?.content;
  expect(Array.isArray(content), `logprobs.content ${show(c.logprobs)}`);
  expectEqual(content.length, r.usage.completion_tokens, 'one logprob per generated token');
  const s = spelled(content);
  expect(s === helloText || (s.startsWith(' ') && s.slice(1) === helloText),
         `the tokens spell ${show(s)}, the text is ${show(helloText)}`);
  content.forEach((t, i) => {
    const at = `token ${i} ${show(t.token)}`;
    expect(Number.isFinite(t.logprob) && t.logprob <= 0, `${at}: logprob ${t.logprob}`);
    if (!t.token.includes('\uFFFD')) expectEqual(t.bytes, [...Buffer.from(t.token, 'utf8')], `${at}: bytes`);
    expectEqual(t.top_logprobs.length, k, `${at}: top_logprobs count`);
    const lps = t.top_logprobs.map((x) => x.logprob);
    for (let j = 1; j < lps.length; ++j) expect(lps[j] <= lps[j - 1], `${at}: top_logprobs not sorted ${show(lps)}`);
    const mass = lps.reduce((a, x) => a + Math.exp(x), 0);
    expect(mass <= 1 + 1e-6, `${at}: top_logprobs hold probability ${mass} > 1`);
    const self = t.top_logprobs.find((x) => x.token === t.token);
    if (self) expect(Math.abs(self.logprob - t.logprob) < 1e-9, `${at}: ${t.logprob} but ${self.logprob} among the top`);
    else expect(t.logprob <= lps[lps.length - 1] + 1e-9, `${at}: ${t.logprob} is not among the top ${show(lps)}`);
  });
  const chunks = await collectChatStream(chatReq({ logprobs: true, top_logprobs: k }));
  const streamed = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.content ?? []);
  expectEqual(streamed, content, 'streamed logprobs against the non-streamed');
  return `${content.length} tokens, first ${show(content[0].token)} ${content[0].logprob.toFixed(4)}`;
});

// ---- /v1/completions -------------------------------------------------------------------------
const complReq = (over = {}) => ({ model, prompt: 'The capital of France is', max_tokens: 8, seed: 3, ...over });
async function collectCompletionStream(req) {
  const stream = await client.completions.create({ ...req, stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}
for (const [what, prompt] of [['a string prompt', 'The capital of France is'], ['token ids', [1, 17, 300, 42, 7]]]) {
  await check(`completions.create with ${what}, streamed and not`, async () => {
    const r = await client.completions.create(complReq({ prompt }));
    expectEqual(r.object, 'text_completion', 'object');
    expect(typeof r.id === 'string' && r.id.startsWith('cmpl-'), `id ${show(r.id)}`);
    expectEqual(r.choices.length, 1, 'choices');
    const c = r.choices[0];
    expect(typeof c.text === 'string' && c.text.length > 0, `text ${show(c.text)}`);
    expect(['length', 'stop'].includes(c.finish_reason), `finish_reason ${show(c.finish_reason)}`);
    checkUsage(r.usage, 'usage');
    if (Array.isArray(prompt)) expectEqual(r.usage.prompt_tokens, prompt.length, 'prompt_tokens of ids fed exactly');
    const again = await client.completions.create(complReq({ prompt }));
    expectEqual(again.choices[0].text, c.text, 'the same request again');
    const chunks = await collectCompletionStream(complReq({ prompt, stream_options: { include_usage: true } }));
    const last = chunks[chunks.length - 1];
    expectEqual(last.choices, [], 'the last chunk\'s choices');
    expectEqual(last.usage, r.usage, 'streamed usage against the non-streamed');
    const body = chunks.slice(0, -1);
    expectEqual(body.map((ch) => ch.choices[0]?.text ?? '').join(''), c.text, 'concatenated chunks against the non-streamed text');
    expectEqual(body.map((ch) => ch.choices[0]?.finish_reason).filter((f) => f != null), [c.finish_reason],
                'streamed finish_reason');
    return show(c.text);
  });
}

await check('completions: logprobs: 2', async () => {
  const r = await client.completions.create(complReq({ logprobs: 2 }));
  const c = r.choices[0];
  const lp = c.logprobs;
  expect(lp && Array.isArray(lp.tokens), `logprobs ${show(lp)}`);
  const n = r.usage.completion_tokens;
  expectEqual([lp.tokens.length, lp.token_logprobs.length, lp.top_logprobs.length, lp.text_offset.length],
              [n, n, n, n], 'lengths of tokens, token_logprobs, top_logprobs, text_offset');
  expectEqual(lp.tokens.join(''), c.text, 'the tokens spell the text');
  let offset = 0;
  lp.tokens.forEach((t, i) => {
    expectEqual(lp.text_offset[i], offset, `text_offset of token ${i}`);
    offset += t.length;
    expect(Number.isFinite(lp.token_logprobs[i]) && lp.token_logprobs[i] <= 0, `token_logprobs[${i}] ${lp.token_logprobs[i]}`);
    const top = Object.values(lp.top_logprobs[i]);
    expect(top.length >= 1 && top.length <= 2, `top_logprobs[${i}] ${show(lp.top_logprobs[i])}`);
    if (t in lp.top_logprobs[i]) expect(Math.abs(lp.top_logprobs[i][t] - lp.token_logprobs[i]) < 1e-9, `token ${i}'s logprob differs in its top`);
    else expect(lp.token_logprobs[i] <= Math.min(...top) + 1e-9, `token ${i} is not among its top ${show(lp.top_logprobs[i])}`);
  });
  const plain = await client.completions.create(complReq());
  expectEqual(c.text, plain.choices[0].text, 'text with logprobs against without');
});

// ---- errors through the client ---------------------------------------------------------------
await check('errors: a wrong key is an AuthenticationError (401)', async () => {
  const wrong = new OpenAI({ apiKey: apiKey + 'x', baseURL: `${base}/v1`, maxRetries: 0 });
  await expectApiError(() => wrong.models.list(), OpenAI.AuthenticationError, 401, undefined, 'models.list');
  await expectApiError(() => wrong.chat.completions.create(chatReq()), OpenAI.AuthenticationError, 401,
                       undefined, 'chat.completions.create');
  await expectApiError(() => wrong.chat.completions.create(chatReq({ stream: true })),
                       OpenAI.AuthenticationError, 401, undefined, 'chat.completions.create streamed');
});
await check('errors: temperature -1 is a BadRequestError (400) naming temperature', async () => {
  const e = await expectApiError(() => client.chat.completions.create(chatReq({ temperature: -1 })),
                                 OpenAI.BadRequestError, 400, 'temperature', 'chat');
  expectEqual(e.type, 'invalid_request_error', 'error.type');
  await expectApiError(() => client.chat.completions.create(chatReq({ temperature: -1, stream: true })),
                       OpenAI.BadRequestError, 400, 'temperature', 'chat streamed');
  await expectApiError(() => client.completions.create(complReq({ temperature: -1 })),
                       OpenAI.BadRequestError, 400, 'temperature', 'completions');
  return show(e.error.message);
});
await check('errors: max_tokens beyond the context is a BadRequestError (400)', async () => {
  const e = await expectApiError(() => client.chat.completions.create(chatReq({ max_tokens: 100000 })),
                                 OpenAI.BadRequestError, 400, 'max_tokens', 'chat');
  await expectApiError(() => client.completions.create(complReq({ max_tokens: 100000, stream: true })),
                       OpenAI.BadRequestError, 400, 'max_tokens', 'completions streamed');
  return show(e.error.message);
});
await check('errors: a token id outside the vocabulary is a BadRequestError (400) naming prompt', async () => {
  await expectApiError(() => client.completions.create(complReq({ prompt: [1, 999999999] })),
                       OpenAI.BadRequestError, 400, 'prompt', 'completions');
});
await check('errors: an unknown route is a NotFoundError (404)', async () => {
  await expectApiError(() => client.get('/no-such-route'), OpenAI.NotFoundError, 404, undefined, 'GET /v1/no-such-route');
});

// ---- a resent conversation: the prefix cache -------------------------------------------------
await check('chat: a resent conversation reports cached_tokens on its second turn', async () => {
  const first = 'Here is a long story about a small robot who lived in a lighthouse by the sea. ' +
    'Every morning the robot climbed the stairs, cleaned the great lamp, counted the ships, and ' +
    'wrote their names in a book. One day a storm came and the lamp went dark, so the robot ' +
    'carried a lantern to the top and waved it until the last ship reached the harbour safely. ' +
    'The sailors thanked it with a song. What did the robot do next?';
  const turn1 = [{ role: 'user', content: first }];
  const r1 = await client.chat.completions.create({ model, messages: turn1, max_tokens: 8, seed: 5 });
  checkUsage(r1.usage, 'turn 1 usage');
  expect(r1.usage.prompt_tokens >= 128, `turn 1's prompt is only ${r1.usage.prompt_tokens} tokens: too short for the test`);
  expectEqual(r1.usage.prompt_tokens_details.cached_tokens, 0, 'turn 1 cached_tokens (a prompt this server never saw)');
  const turn2 = [...turn1, { role: 'assistant', content: r1.choices[0].message.content },
                 { role: 'user', content: 'And then?' }];
  const r2 = await client.chat.completions.create({ model, messages: turn2, max_tokens: 8, seed: 5 });
  checkUsage(r2.usage, 'turn 2 usage');
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  expect(cached >= 64, `turn 2 cached_tokens ${cached} (prompt ${r2.usage.prompt_tokens} tokens, ` +
         `turn 1's ${r1.usage.prompt_tokens}): the earlier turn's blocks were not reused`);
  expect(cached < r2.usage.prompt_tokens, `turn 2 cached_tokens ${cached} >= its prompt_tokens ${r2.usage.prompt_tokens}`);
  const chunks = await collectChatStream({ model, messages: turn2, max_tokens: 8, seed: 5,
                                           stream_options: { include_usage: true } });
  const su = chunks[chunks.length - 1].usage;
  expect(su?.prompt_tokens_details?.cached_tokens >= cached,
         `turn 2 streamed again: cached_tokens ${show(su?.prompt_tokens_details)}, first time ${cached}`);
  expectEqual(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), r2.choices[0].message.content,
              'turn 2 streamed against not streamed');
  return `turn 2: ${cached} of ${r2.usage.prompt_tokens} prompt tokens cached`;
});

// ---- /health and /metrics (plain fetch) ------------------------------------------------------
await check('GET /health: 200 without the key', async () => {
  const r = await fetch(`${base}/health`);
  expectEqual(r.status, 200, 'status');
  expectEqual((await r.json()).status, 'ok', 'body status');
});
await check('GET /metrics: 401 without the key, Prometheus text with it', async () => {
  const anon = await fetch(`${base}/metrics`);
  expectEqual(anon.status, 401, 'status without the key');
  const body = await anon.json();
  expect(typeof body?.error?.message === 'string', `401 body ${show(body)}`);
  const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } });
  expectEqual(r.status, 200, 'status with the key');
  expect((r.headers.get('content-type') || '').startsWith('text/plain'), `content-type ${r.headers.get('content-type')}`);
  const text = await r.text();
  const metric = (re) => {
    const m = text.match(re);
    return m ? Number(m[1]) : null;
  };
  const ok = metric(/^wormchat_requests_total\{status="200"\} (\d+)$/m);
  const bad = metric(/^wormchat_requests_total\{status="400"\} (\d+)$/m);
  const unauth = metric(/^wormchat_requests_total\{status="401"\} (\d+)$/m);
  const cached = metric(/^wormchat_tokens_total\{kind="cached"\} (\d+)$/m);
  const generated = metric(/^wormchat_tokens_total\{kind="generated"\} (\d+)$/m);
  expect(ok >= 20, `requests_total{status="200"} ${ok}, after more than 20 answered requests`);
  expect(bad >= 6, `requests_total{status="400"} ${bad}, after 6 bad requests`);
  expect(unauth >= 4, `requests_total{status="401"} ${unauth}, after 4 with a wrong or no key`);
  expect(cached >= 64, `tokens_total{kind="cached"} ${cached}, after a resent conversation`);
  expect(generated > 0, `tokens_total{kind="generated"} ${generated}`);
  return `200: ${ok}, 400: ${bad}, 401: ${unauth}, cached tokens ${cached}`;
});

// ---- shutdown --------------------------------------------------------------------------------
await check('SIGTERM: the server stops with status 0', async () => {
  server.kill('SIGTERM');
  const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 30000).unref());
  const ended = await Promise.race([serverExit, timeout]);
  expect(ended !== null, 'still running 30 s after SIGTERM');
  expectEqual(ended, { code: 0, signal: null }, 'exit');
  expect(serverLog.includes('wormchat serve: stopped'), 'no "stopped" line');
});

cleanup();
if (failures) {
  console.log(`openai_client_test: ${failures} check(s) FAILED`);
  console.log(`wormchat serve's output:\n${serverLog}`);
  process.exit(1);
}
console.log('openai_client_test: all checks passed');

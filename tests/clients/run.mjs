// Starts `ollama serve` on a free loopback port with a temporary model store,
// creates the test models over the HTTP API (plain fetch: the clients under
// test are not used for setup), runs the suites with node's test runner, and
// stops the server. Usage: node run.mjs OLLAMA_BIN GGUF_GEN_BIN
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [ollamaBin, ggufGen] = process.argv.slice(2);
if (!ollamaBin || !ggufGen) {
  console.error('usage: node run.mjs OLLAMA_BIN GGUF_GEN_BIN');
  process.exit(2);
}

const freePort = () =>
  new Promise((ok, fail) => {
    const s = createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// Templates: see tests/integration/openai/test_openai.c for what each is for.
const TEMPLATES = {
  toolbox:
    '{{ if .Tools }}Tools: {{ range .Tools }}{{ .Function.Name }} {{ end }}{{ end }}' +
    '{{ range .Messages }}{{ if eq .Role "tool" }}Result: {{ .Content }}' +
    '{{ else }}{{ .Content }}{{ end }}{{ end }}',
  thinker:
    '{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}' +
    '{{ .Content }}{{ end }}{{ if .Think }}<think>{{ end }}',
};

async function upload(host, path) {
  const data = readFileSync(path);
  const digest = 'sha256:' + createHash('sha256').update(data).digest('hex');
  const r = await fetch(`${host}/api/blobs/${digest}`, { method: 'POST', body: data });
  if (r.status !== 200 && r.status !== 201) throw new Error(`upload ${path}: ${r.status}`);
  return digest;
}

async function create(host, body) {
  const r = await fetch(`${host}/api/create`, {
    method: 'POST',
    body: JSON.stringify({ stream: false, ...body }),
  });
  if (r.status !== 200) throw new Error(`create ${body.model}: ${r.status} ${await r.text()}`);
}

const tmp = mkdtempSync(join(tmpdir(), 'ollama-clients-'));
let server;
let status = 1;
try {
  const port = await freePort();
  const host = `http://127.0.0.1:${port}`;
  const log = openSync(join(tmp, 'serve.log'), 'w');
  server = spawn(ollamaBin, ['serve'], {
    env: {
      ...process.env,
      OLLAMA_HOST: `127.0.0.1:${port}`,
      OLLAMA_MODELS: join(tmp, 'models'),
      HOME: tmp,
    },
    stdio: ['ignore', log, log],
  });
  let up = false;
  for (let i = 0; i < 200 && !up; i++) {
    try {
      up = (await fetch(host)).status === 200;
    } catch {
      await sleep(50);
    }
  }
  if (!up) throw new Error('ollama serve did not start');

  // Models: the real TinyStories model under three templates, and a
  // random-weight model from gguf-gen.
  const stories = await upload(host, join(here, '..', 'fixtures', 'stories260K.gguf'));
  const files = { 'model.gguf': stories };
  await create(host, { model: 'stories', files });
  await create(host, { model: 'toolbox', files, template: TEMPLATES.toolbox });
  await create(host, { model: 'thinker', files, template: TEMPLATES.thinker });
  const tinyPath = join(tmp, 'tiny.gguf');
  const gen = spawnSync(ggufGen, ['--preset', 'tiny', '--type', 'q8_0', '--quiet', '-o', tinyPath]);
  if (gen.status !== 0) throw new Error(`gguf-gen: ${gen.stderr}`);
  await create(host, { model: 'tiny', files: { 'model.gguf': await upload(host, tinyPath) } });

  const tests = spawnSync(
    process.execPath,
    ['--test', '--test-concurrency=1', '--test-timeout=60000', 'ollama.test.mjs', 'openai.test.mjs', 'anthropic.test.mjs'],
    { cwd: here, stdio: 'inherit', env: { ...process.env, OLLAMA_TEST_HOST: host } },
  );
  status = tests.status ?? 1;
  if (status !== 0) console.error(readFileSync(join(tmp, 'serve.log'), 'utf8').slice(-8000));
} catch (err) {
  console.error(err);
  try {
    console.error(readFileSync(join(tmp, 'serve.log'), 'utf8').slice(-8000));
  } catch {}
} finally {
  if (server) {
    server.kill('SIGTERM');
    await new Promise((ok) => {
      if (server.exitCode !== null || server.signalCode !== null) return ok();
      const t = setTimeout(() => {
        server.kill('SIGKILL');
        ok();
      }, 10000);
      server.on('exit', () => {
        clearTimeout(t);
        ok();
      });
    });
    // A clean shutdown is part of the test (sanitizer builds report leaks here).
    if (status === 0 && server.exitCode !== 0) {
      console.error(`ollama serve exited with ${server.exitCode ?? server.signalCode}`);
      console.error(readFileSync(join(tmp, 'serve.log'), 'utf8').slice(-8000));
      status = 1;
    }
  }
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(status);

// ollama-js (npm `ollama`, unpatched) against ollama-c: model management,
// generate and chat streamed and not, abort mid-stream, structured outputs,
// tools, thinking, embeddings.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Ollama } from 'ollama';

import { ANSWER_SCHEMA, CALL_SCHEMA, GREEDY, HOST, WEATHER_TOOL } from './common.mjs';

const ollama = new Ollama({ host: HOST });
const greedy = { temperature: 0 };

describe('models', () => {
  test('list', async () => {
    const { models } = await ollama.list();
    const names = models.map((m) => m.name);
    for (const n of ['stories:latest', 'toolbox:latest', 'thinker:latest', 'tiny:latest'])
      assert.ok(names.includes(n), `${n} in ${names}`);
    const tiny = models.find((m) => m.name === 'tiny:latest');
    assert.equal(tiny.model, 'tiny:latest');
    assert.match(tiny.digest, /^[0-9a-f]{64}$/);
    assert.ok(tiny.size > 0);
    assert.equal(tiny.details.format, 'gguf');
    assert.equal(tiny.details.family, 'llama');
    assert.equal(tiny.details.quantization_level, 'Q8_0');
  });

  test('show', async () => {
    const info = await ollama.show({ model: 'toolbox' });
    assert.match(info.template, /\.Tools/);
    assert.ok(info.capabilities.includes('completion'));
    assert.ok(info.capabilities.includes('tools'));
    assert.equal(info.details.family, 'llama');
    assert.equal(typeof info.model_info['general.architecture'], 'string');
    await assert.rejects(ollama.show({ model: 'no-such-model' }), /not found/);
  });

  test('create, copy, delete', async () => {
    const progress = await ollama.create({
      model: 'tiny-derived',
      from: 'tiny',
      system: 'You are tiny.',
      parameters: { temperature: 0.5, stop: ['</s>'] },
    });
    assert.equal(progress.status, 'success');
    const shown = await ollama.show({ model: 'tiny-derived' });
    assert.equal(shown.system, 'You are tiny.');
    assert.match(shown.parameters, /temperature\s+0\.5/);

    // Streamed create: progress objects ending in success.
    const stream = await ollama.create({ model: 'tiny-streamed', from: 'tiny', stream: true });
    const statuses = [];
    for await (const p of stream) statuses.push(p.status);
    assert.equal(statuses.at(-1), 'success');

    await ollama.copy({ source: 'tiny-derived', destination: 'someone/tiny-copy:v2' });
    const names = (await ollama.list()).models.map((m) => m.name);
    assert.ok(names.includes('someone/tiny-copy:v2'));

    for (const m of ['tiny-derived', 'tiny-streamed', 'someone/tiny-copy:v2']) await ollama.delete({ model: m });
    const after = (await ollama.list()).models.map((m) => m.name);
    assert.ok(!after.includes('tiny-derived:latest'));
    assert.ok(!after.includes('someone/tiny-copy:v2'));
    await assert.rejects(ollama.delete({ model: 'tiny-derived' }), /not found/);
  });

  test('ps', async () => {
    await ollama.generate({ model: 'stories', prompt: 'Once', options: { num_predict: 1 } });
    const { models } = await ollama.ps();
    const m = models.find((x) => x.name === 'stories:latest');
    assert.ok(m, 'stories is loaded');
    assert.match(m.digest, /^[0-9a-f]{64}$/);
    assert.ok(new Date(m.expires_at).getTime() > Date.now());
    assert.equal(m.details.family, 'llama');
  });
});

describe('generate', () => {
  test('not streamed', async () => {
    const r = await ollama.generate({
      model: 'stories',
      prompt: 'Once upon a time',
      options: { ...greedy, num_predict: 8 },
    });
    assert.ok(r.response.length > 10 && GREEDY.startsWith(r.response), r.response);
    assert.equal(r.done, true);
    assert.equal(r.done_reason, 'length');
    assert.equal(r.eval_count, 8);
    assert.ok(r.prompt_eval_count > 0);
    assert.ok(Array.isArray(r.context) && r.context.length > 8);
  });

  test('streamed', async () => {
    const stream = await ollama.generate({
      model: 'stories',
      prompt: 'Once upon a time',
      stream: true,
      options: { ...greedy, num_predict: 8 },
    });
    let text = '';
    let last;
    for await (const part of stream) {
      text += part.response;
      last = part;
    }
    assert.ok(text.length > 10 && GREEDY.startsWith(text), text);
    assert.equal(last.done, true);
    assert.equal(last.eval_count, 8);
  });

  test('random-weight model', async () => {
    const r = await ollama.generate({ model: 'tiny', prompt: 'hello', options: { num_predict: 4, seed: 1 } });
    assert.equal(r.done, true);
    assert.equal(r.eval_count, 4);
  });

  test('structured output', async () => {
    const r = await ollama.generate({
      model: 'stories',
      prompt: 'Once',
      format: ANSWER_SCHEMA,
      options: { ...greedy, num_predict: 100 },
    });
    const v = JSON.parse(r.response);
    assert.ok(['yes', 'no'].includes(v.answer));
  });
});

describe('chat', () => {
  const messages = [{ role: 'user', content: 'Once upon a time' }];

  test('not streamed, think:false on a model without thinking', async () => {
    const r = await ollama.chat({ model: 'stories', messages, think: false, options: { ...greedy, num_predict: 8 } });
    assert.equal(r.message.role, 'assistant');
    assert.ok(GREEDY.startsWith(r.message.content) && r.message.content.length > 10);
    assert.equal(r.done_reason, 'length');
  });

  test('streamed', async () => {
    const stream = await ollama.chat({ model: 'stories', messages, stream: true, options: { ...greedy, num_predict: 8 } });
    let text = '';
    let n = 0;
    for await (const part of stream) {
      text += part.message.content;
      n++;
    }
    assert.ok(n >= 2);
    assert.ok(GREEDY.startsWith(text) && text.length > 10, text);
  });

  test('abort mid-stream', async () => {
    const stream = await ollama.chat({ model: 'stories', messages, stream: true, options: { num_predict: -1 } });
    let parts = 0;
    await assert.rejects(async () => {
      for await (const part of stream) {
        assert.equal(typeof part.message.content, 'string');
        if (++parts === 5) stream.abort();
      }
    }, /abort/i);
    assert.ok(parts >= 5);
    // The server keeps serving.
    const r = await ollama.chat({ model: 'stories', messages, options: { num_predict: 2 } });
    assert.equal(r.done, true);
  });

  test('structured output', async () => {
    const r = await ollama.chat({
      model: 'stories',
      messages: [{ role: 'user', content: 'Is the sky blue?' }],
      format: ANSWER_SCHEMA,
      options: { ...greedy, num_predict: 100 },
    });
    assert.ok(['yes', 'no'].includes(JSON.parse(r.message.content).answer));
  });

  test('tools', async () => {
    const r = await ollama.chat({
      model: 'toolbox',
      messages: [{ role: 'user', content: 'Weather in Tokyo?' }],
      tools: [WEATHER_TOOL],
      format: CALL_SCHEMA,
      options: { ...greedy, num_predict: 200 },
    });
    assert.equal(r.message.tool_calls.length, 1);
    assert.equal(r.message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(r.message.tool_calls[0].function.arguments, { city: 'Tokyo' });
    // The result goes back as a tool message.
    const next = await ollama.chat({
      model: 'toolbox',
      messages: [
        { role: 'user', content: 'Weather in Tokyo?' },
        r.message,
        { role: 'tool', content: 'sunny', tool_name: 'get_weather' },
      ],
      tools: [WEATHER_TOOL],
      options: { num_predict: 2 },
    });
    assert.equal(next.done, true);
    await assert.rejects(
      ollama.chat({ model: 'stories', messages, tools: [WEATHER_TOOL] }),
      /does not support tools/,
    );
  });

  test('thinking', async () => {
    const r = await ollama.chat({ model: 'thinker', messages, think: true, options: { ...greedy, num_predict: 5 } });
    assert.ok(r.message.thinking.length > 0);
    assert.equal(r.message.content, '');
    const plain = await ollama.chat({ model: 'thinker', messages, think: false, options: { ...greedy, num_predict: 5 } });
    assert.ok(!plain.message.thinking);
    assert.ok(plain.message.content.length > 0);
    await assert.rejects(ollama.chat({ model: 'stories', messages, think: true }), /does not support thinking/);
  });
});

describe('embed', () => {
  test('embed', async () => {
    const r = await ollama.embed({ model: 'stories', input: ['hello there', 'a cat'] });
    assert.equal(r.embeddings.length, 2);
    for (const e of r.embeddings) {
      const norm = Math.sqrt(e.reduce((s, x) => s + x * x, 0));
      assert.ok(Math.abs(norm - 1) < 1e-3);
    }
    assert.ok(r.prompt_eval_count > 0);
    const one = await ollama.embed({ model: 'stories', input: 'hello', dimensions: 8 });
    assert.equal(one.embeddings[0].length, 8);
    const legacy = await ollama.embeddings({ model: 'stories', prompt: 'hello' });
    assert.ok(legacy.embedding.length > 8);
  });
});

// What other clients send: no "stream" (native default: streaming), "stream":
// true on one-shot endpoints, "think": false everywhere.
describe('client quirks (plain HTTP)', () => {
  const post = (path, body) => fetch(`${HOST}${path}`, { method: 'POST', body: JSON.stringify(body) });

  test('stream omitted streams NDJSON', async () => {
    const r = await post('/api/chat', {
      model: 'stories', messages: [{ role: 'user', content: 'Once' }], think: false, options: { num_predict: 3 },
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /application\/x-ndjson/);
    const lines = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(lines.length >= 2);
    assert.equal(lines.at(-1).done, true);
  });

  test('stream:true on one-shot endpoints', async () => {
    const embed = await post('/api/embed', { model: 'stories', input: 'hi', stream: true });
    assert.equal(embed.status, 200);
    assert.equal((await embed.json()).embeddings.length, 1);
    const show = await post('/api/show', { model: 'stories', stream: true });
    assert.equal(show.status, 200);
    assert.ok((await show.json()).capabilities.includes('completion'));
    const v1 = await post('/v1/embeddings', { model: 'stories', input: 'hi', stream: true });
    assert.equal(v1.status, 200);
    assert.equal((await v1.json()).data.length, 1);
  });
});

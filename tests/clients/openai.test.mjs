// openai-node (npm `openai`, unpatched, baseURL = <server>/v1) against
// ollama-c: chat completions streamed and not, usage, tools, json_schema,
// reasoning, completions, embeddings (the SDK's default base64 and float),
// models, errors, abort mid-stream.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';

import { ANSWER_SCHEMA, CALL_SCHEMA, GREEDY, HOST, WEATHER_TOOL } from './common.mjs';

const client = new OpenAI({ baseURL: `${HOST}/v1`, apiKey: 'ollama', maxRetries: 0, timeout: 60000 });
const messages = [{ role: 'user', content: 'Once upon a time' }];

describe('models', () => {
  test('list', async () => {
    // A namespaced copy (made with plain HTTP) is owned by its namespace.
    const copied = await fetch(`${HOST}/api/copy`, {
      method: 'POST',
      body: JSON.stringify({ source: 'stories', destination: 'alice/story:v1' }),
    });
    assert.equal(copied.status, 200);
    const ids = [];
    for await (const m of client.models.list()) {
      assert.equal(m.object, 'model');
      assert.equal(typeof m.created, 'number');
      assert.equal(m.owned_by, m.id.startsWith('alice/') ? 'alice' : 'library');
      ids.push(m.id);
    }
    assert.ok(ids.includes('alice/story:v1'));
    await fetch(`${HOST}/api/delete`, { method: 'DELETE', body: JSON.stringify({ model: 'alice/story:v1' }) });
    for (const id of ['stories:latest', 'toolbox:latest', 'thinker:latest', 'tiny:latest'])
      assert.ok(ids.includes(id), `${id} in ${ids}`);
  });

  test('retrieve', async () => {
    const m = await client.models.retrieve('stories');
    assert.equal(m.id, 'stories');
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'library');
    assert.ok(m.created > 1700000000);
    assert.equal((await client.models.retrieve('stories:latest')).id, 'stories:latest');
    await assert.rejects(client.models.retrieve('gpt-4'), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.equal(err.status, 404);
      assert.equal(err.error.message, "model 'gpt-4:latest' not found");
      assert.equal(err.error.type, 'not_found_error');
      return true;
    });
  });
});

describe('chat completions', () => {
  test('not streamed, with usage', async () => {
    const r = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 8, temperature: 0 });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, 'stories');
    assert.equal(r.system_fingerprint, 'fp_ollama');
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.ok(GREEDY.startsWith(c.message.content) && c.message.content.length > 10, c.message.content);
    assert.equal(c.finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 8);
    assert.ok(r.usage.prompt_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  });

  test('sampling fields: stop, seed, top_p, penalties, max_completion_tokens', async () => {
    const stopped = await client.chat.completions.create({
      model: 'stories', messages, max_tokens: 30, temperature: 0, stop: ['Lily', 'dog'],
    });
    assert.equal(stopped.choices[0].message.content, ', there was a little girl named ');
    assert.equal(stopped.choices[0].finish_reason, 'stop');
    const seeded = { model: 'stories', messages, max_completion_tokens: 10, temperature: 1.5, seed: 7 };
    const a = await client.chat.completions.create(seeded);
    const b = await client.chat.completions.create(seeded);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    assert.equal(a.usage.completion_tokens, 10);
    const nucleus = await client.chat.completions.create({
      model: 'stories', messages, max_tokens: 8, temperature: 1.5, top_p: 0.000001, seed: 3,
    });
    assert.ok(GREEDY.startsWith(nucleus.choices[0].message.content));
    const penalised = await client.chat.completions.create({
      model: 'stories', messages, max_tokens: 4, temperature: 0, frequency_penalty: 0.5, presence_penalty: 0.5,
    });
    assert.equal(penalised.usage.completion_tokens, 4);
  });

  test('streamed, include_usage', async () => {
    const stream = await client.chat.completions.create({
      model: 'stories', messages, max_tokens: 6, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, 6);
    const finish = chunks.at(-2);
    assert.equal(finish.choices[0].finish_reason, 'length');
    assert.deepEqual(finish.choices[0].delta, {});
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.slice(0, -2).map((c) => c.choices[0].delta.content).join('');
    assert.ok(GREEDY.startsWith(text) && text.length > 10, text);
    for (const c of chunks) {
      assert.equal(c.id, chunks[0].id);
      assert.equal(c.object, 'chat.completion.chunk');
    }
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, undefined);
  });

  test('stream helper (runner API)', async () => {
    const runner = client.chat.completions.stream({ model: 'stories', messages, max_tokens: 6, temperature: 0 });
    const done = await runner.finalChatCompletion();
    assert.ok(GREEDY.startsWith(done.choices[0].message.content));
    assert.equal(done.choices[0].finish_reason, 'length');
  });

  test('abort mid-stream', async () => {
    const stream = await client.chat.completions.create({ model: 'stories', messages, stream: true, max_tokens: -1 });
    // The SDK ends the iteration quietly once its controller aborts.
    let n = 0;
    let finished = false;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      finished ||= chunk.choices[0]?.finish_reason != null;
      if (++n === 5) stream.controller.abort();
    }
    // Chunks the SDK had already parsed may still be yielded after abort();
    // what matters is that the endless stream ended without finishing.
    assert.ok(n >= 5, `got ${n} chunks`);
    assert.equal(finished, false);
    const after = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 2 });
    assert.equal(after.usage.completion_tokens, 2);
  });

  test('tools', async () => {
    const base = {
      model: 'toolbox', messages: [{ role: 'user', content: 'Weather in Tokyo?' }],
      tools: [WEATHER_TOOL], tool_choice: 'auto', temperature: 0, max_tokens: 200,
      response_format: { type: 'json_schema', json_schema: { name: 'call', schema: CALL_SCHEMA } },
    };
    const r = await client.chat.completions.create(base);
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Tokyo' });

    // Streamed: the call arrives in one delta.
    const stream = await client.chat.completions.create({ ...base, stream: true });
    const deltas = [];
    let finish;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (ch?.delta?.tool_calls) deltas.push(...ch.delta.tool_calls);
      if (ch?.finish_reason) finish = ch.finish_reason;
    }
    assert.equal(deltas.length, 1);
    assert.equal(deltas[0].function.name, 'get_weather');
    assert.equal(finish, 'tool_calls');

    // The conversation continues with the tool's result.
    const next = await client.chat.completions.create({
      model: 'toolbox', tools: [WEATHER_TOOL], max_tokens: 2,
      messages: [...base.messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
    });
    assert.equal(next.choices[0].finish_reason, 'length');
  });

  test('json_schema and json_object', async () => {
    const r = await client.chat.completions.create({
      model: 'stories', messages: [{ role: 'user', content: 'Is the sky blue?' }], temperature: 0, max_tokens: 100,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: ANSWER_SCHEMA } },
    });
    assert.ok(['yes', 'no'].includes(JSON.parse(r.choices[0].message.content).answer));
    const j = await client.chat.completions.create({
      model: 'stories', messages, temperature: 0, max_tokens: 4, response_format: { type: 'json_object' },
    });
    assert.ok(j.choices[0].message.content.startsWith('{'));
  });

  test('reasoning_effort', async () => {
    const thinking = await client.chat.completions.create({ model: 'thinker', messages, temperature: 0, max_tokens: 5 });
    assert.ok(thinking.choices[0].message.reasoning.length > 0);
    const none = await client.chat.completions.create({
      model: 'thinker', messages, temperature: 0, max_tokens: 5, reasoning_effort: 'none',
    });
    assert.equal(none.choices[0].message.reasoning, undefined);
    assert.ok(none.choices[0].message.content.length > 0);
  });

  test('images and errors', async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: 'stories',
        messages: [{ role: 'user', content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ] }],
      }),
      (err) => err instanceof OpenAI.BadRequestError && /does not support vision/.test(err.message),
    );
    await assert.rejects(
      client.chat.completions.create({
        model: 'stories',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
      }),
      (err) => err.status === 400 && /image URLs are not currently supported/.test(err.message),
    );
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o', messages }),
      (err) => err instanceof OpenAI.NotFoundError && err.error.type === 'not_found_error',
    );
    await assert.rejects(
      client.chat.completions.create({ model: 'stories', messages: [] }),
      (err) => err instanceof OpenAI.BadRequestError && err.error.message === "[] is too short - 'messages'",
    );
  });
});

describe('completions', () => {
  test('not streamed', async () => {
    const r = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.ok(GREEDY.startsWith(r.choices[0].text) && r.choices[0].text.length > 10);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 8);
    const stopped = await client.completions.create({
      model: 'stories', prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: 'girl',
    });
    assert.equal(stopped.choices[0].text, ', there was a little ');
    assert.equal(stopped.choices[0].finish_reason, 'stop');
  });

  test('streamed, include_usage', async () => {
    const stream = await client.completions.create({
      model: 'stories', prompt: 'Once upon a time', max_tokens: 5, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.equal(chunks.at(-1).usage.completion_tokens, 5);
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
    const text = chunks.slice(0, -1).map((c) => c.choices[0].text).join('');
    assert.ok(GREEDY.startsWith(text) && text.length > 10, text);
  });
});

describe('embeddings', () => {
  test('base64 (the SDK default) equals float', async () => {
    const input = ['hello there', 'a cat'];
    const b64 = await client.embeddings.create({ model: 'stories', input });
    const flt = await client.embeddings.create({ model: 'stories', input, encoding_format: 'float' });
    assert.equal(b64.object, 'list');
    assert.equal(b64.model, 'stories');
    assert.equal(b64.data.length, 2);
    for (let i = 0; i < 2; i++) {
      assert.equal(b64.data[i].index, i);
      assert.equal(b64.data[i].object, 'embedding');
      const a = Array.from(b64.data[i].embedding);
      const f = flt.data[i].embedding;
      assert.equal(a.length, f.length);
      for (let k = 0; k < f.length; k++) assert.equal(a[k], Math.fround(f[k]));
      const norm = Math.sqrt(f.reduce((s, x) => s + x * x, 0));
      assert.ok(Math.abs(norm - 1) < 1e-3);
    }
    assert.ok(b64.usage.prompt_tokens > 0);
    assert.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  });

  test('dimensions and single input', async () => {
    const r = await client.embeddings.create({ model: 'stories', input: 'hello', dimensions: 8, encoding_format: 'float' });
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].embedding.length, 8);
    await assert.rejects(
      client.embeddings.create({ model: 'stories', input: [] }),
      (err) => err instanceof OpenAI.BadRequestError && err.error.message === 'invalid input',
    );
  });
});

// The Responses API (client.responses, /v1/responses).
describe('responses', () => {
  test('create', async () => {
    const r = await client.responses.create({
      model: 'stories', input: 'Once upon a time', temperature: 0, max_output_tokens: 10,
    });
    assert.ok(r.id.startsWith('resp_'));
    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed');
    assert.ok(r.output_text.startsWith(GREEDY), r.output_text);
    assert.equal(r.usage.output_tokens, 10);
    assert.equal(r.store, false);
  });

  test('stream', async () => {
    const stream = client.responses.stream({
      model: 'stories', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Once upon a time' }] }],
      temperature: 0, max_output_tokens: 10,
    });
    let text = '';
    let seq = 0;
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq++);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    const final = await stream.finalResponse();
    assert.ok(text.startsWith(GREEDY), text);
    assert.equal(final.output_text, text);
  });

  test('function calls', async () => {
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather', strict: false,
      parameters: CALL_SCHEMA.properties.arguments }];
    const r = await client.responses.create({
      model: 'toolbox', input: 'Weather?', temperature: 0, max_output_tokens: 100, tools, tool_choice: 'required',
    });
    const call = r.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Tokyo' });
    const next = await client.responses.create({
      model: 'toolbox', temperature: 0, max_output_tokens: 3, tools,
      input: [{ role: 'user', content: 'Weather?' }, call,
        { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    assert.equal(next.output[0].type, 'message');
  });

  test('structured output and reasoning', async () => {
    const r = await client.responses.create({
      model: 'stories', input: 'Once', temperature: 0, max_output_tokens: 60,
      text: { format: { type: 'json_schema', name: 'answer', schema: ANSWER_SCHEMA } },
    });
    assert.ok(['yes', 'no'].includes(JSON.parse(r.output_text).answer));
    const t = await client.responses.create({
      model: 'thinker', input: 'Once upon a time', temperature: 0, max_output_tokens: 6,
      reasoning: { effort: 'high' },
    });
    assert.equal(t.output[0].type, 'reasoning');
  });

  test('errors', async () => {
    await assert.rejects(client.responses.create({ model: 'nope', input: 'x' }), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.equal(err.error.message, "model 'nope' not found");
      return true;
    });
  });
});

// @anthropic-ai/sdk (npm, unpatched, baseURL = <server>) against ollama-c's
// /v1/messages: messages streamed and not (the SDK's own event accumulator),
// stop sequences, tools with tool_choice and the tool_result round trip,
// thinking, count_tokens, and errors as the SDK's typed exceptions.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';

import { GREEDY, HOST } from './common.mjs';

const client = new Anthropic({ baseURL: HOST, apiKey: 'ollama', maxRetries: 0, timeout: 60000 });
const messages = [{ role: 'user', content: 'Once upon a time' }];
const WEATHER = {
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Tokyo'] } },
    required: ['city'],
  },
};

describe('messages', () => {
  test('create', async () => {
    const m = await client.messages.create({ model: 'stories', max_tokens: 10, temperature: 0, messages });
    assert.ok(m.id.startsWith('msg_'));
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.content[0].type, 'text');
    assert.ok(m.content[0].text.startsWith(GREEDY), m.content[0].text);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.ok(m.usage.input_tokens > 0);
    assert.equal(m.usage.output_tokens, 10);
  });

  test('stream', async () => {
    const stream = client.messages.stream({ model: 'stories', max_tokens: 10, temperature: 0, messages });
    let text = '';
    stream.on('text', (t) => (text += t));
    const final = await stream.finalMessage();
    assert.ok(text.startsWith(GREEDY), text);
    assert.equal(final.content[0].text, text);
    assert.equal(final.stop_reason, 'max_tokens');
    assert.equal(final.usage.output_tokens, 10);
  });

  test('raw stream events', async () => {
    const stream = await client.messages.create({
      model: 'stories', max_tokens: 4, temperature: 0, messages, stream: true,
    });
    const types = [];
    for await (const ev of stream) types.push(ev.type);
    assert.equal(types[0], 'message_start');
    assert.equal(types[1], 'content_block_start');
    assert.equal(types.at(-3), 'content_block_stop');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
  });

  test('system and stop sequences', async () => {
    const m = await client.messages.create({
      model: 'stories', max_tokens: 30, temperature: 0, system: [{ type: 'text', text: '' }],
      stop_sequences: ['Lily'], messages,
    });
    assert.ok(!m.content[0].text.includes('Lily'));
  });

  test('tools', async () => {
    const m = await client.messages.create({
      model: 'toolbox', max_tokens: 100, temperature: 0, tools: [WEATHER],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'Weather?' }],
    });
    assert.equal(m.stop_reason, 'tool_use');
    const call = m.content.find((b) => b.type === 'tool_use');
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(call.input, { city: 'Tokyo' });

    // Streamed: the SDK assembles the input from input_json_delta.
    const final = await client.messages
      .stream({
        model: 'toolbox', max_tokens: 100, temperature: 0, tools: [WEATHER], tool_choice: { type: 'any' },
        messages: [{ role: 'user', content: 'Weather?' }],
      })
      .finalMessage();
    assert.deepEqual(final.content.find((b) => b.type === 'tool_use').input, { city: 'Tokyo' });

    // The result goes back as a tool_result block.
    const next = await client.messages.create({
      model: 'toolbox', max_tokens: 3, temperature: 0, tools: [WEATHER], tool_choice: { type: 'none' },
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: [call] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
      ],
    });
    assert.equal(next.content[0].type, 'text');
  });

  test('thinking', async () => {
    const m = await client.messages.create({
      model: 'thinker', max_tokens: 8, temperature: 0, thinking: { type: 'enabled', budget_tokens: 1024 },
      messages,
    });
    assert.equal(m.content[0].type, 'thinking');
    assert.ok(m.content[0].thinking.length > 0);
  });

  test('count tokens', async () => {
    const short = await client.messages.countTokens({ model: 'stories', messages });
    const long = await client.messages.countTokens({
      model: 'stories', system: 'A long system prompt about stories.', messages,
    });
    assert.ok(short.input_tokens > 0);
    assert.ok(long.input_tokens > short.input_tokens);
  });

  test('errors', async () => {
    await assert.rejects(
      client.messages.create({ model: 'nope', max_tokens: 5, messages }),
      (err) => {
        assert.ok(err instanceof Anthropic.NotFoundError);
        assert.equal(err.error.type, 'error');
        assert.equal(err.error.error.type, 'not_found_error');
        assert.equal(err.error.error.message, "model 'nope' not found");
        return true;
      },
    );
    await assert.rejects(
      client.messages.create({
        model: 'stories', max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'aGVsbG8=' } }] }],
      }),
      (err) => {
        assert.ok(err instanceof Anthropic.BadRequestError);
        assert.equal(err.error.error.message, '"stories" does not support vision');
        return true;
      },
    );
  });
});

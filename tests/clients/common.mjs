// Shared by the client suites: the server run.mjs started, and the request
// pieces that make the tiny models behave predictably.
export const HOST = process.env.OLLAMA_TEST_HOST;
if (!HOST) throw new Error('OLLAMA_TEST_HOST is not set: run the suites through run.sh');

// TinyStories' greedy continuation of "Once upon a time".
export const GREEDY = ', there was a little girl named Lily';

export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
    },
  },
};

// A JSON schema that forces `{"name":"get_weather","arguments":{"city":"Tokyo"}}`;
// the "toolbox" model's template has no tool tag, so that object is a tool call.
export const CALL_SCHEMA = {
  type: 'object',
  properties: {
    name: { const: 'get_weather' },
    arguments: {
      type: 'object',
      properties: { city: { enum: ['Tokyo'] } },
      required: ['city'],
    },
  },
  required: ['name', 'arguments'],
};

export const ANSWER_SCHEMA = {
  type: 'object',
  properties: { answer: { enum: ['yes', 'no'] } },
  required: ['answer'],
};

// runner: the `ollama runner` process, one per loaded model. It loads a GGUF
// model with the engine and serves the runner protocol (src/runner/PROTOCOL.md)
// over HTTP on 127.0.0.1: completion (streamed NDJSON), embedding, tokenize,
// detokenize, health; parallel slots decoded together by continuous batching.
#pragma once

// Entry point of the hidden `ollama runner` subcommand. argv holds the flags
// only (argv[0] is the first flag): --model PATH --port N [--ctx-size N]
// [--parallel N] [--batch-size N] [--threads N] [--kv-cache-type T]
// [--embedding] [--no-context-shift]. Returns the process exit status: 1 for
// bad flags or a model that cannot be loaded (message on stderr, "error
// loading model: ..." for the latter), 0 after SIGTERM / SIGINT.
int runner_main(int argc, char **argv);

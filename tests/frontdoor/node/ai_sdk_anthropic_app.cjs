// A Vercel AI SDK application, unchanged: `generateText` and `streamText` on
// `@ai-sdk/anthropic`'s default provider, which reads ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY and posts `${baseURL}/messages` (its own default base URL ends in
// /v1, replay-actor run's has none). tests/serving/test_routes.py runs it under run.
"use strict";
const { generateText, streamText } = require("ai");
const { anthropic } = require("@ai-sdk/anthropic");

async function main() {
  const model = anthropic("claude-test");
  const prompt = process.argv[2] || "hi";
  const made = await generateText({ model, prompt, maxOutputTokens: 50, maxRetries: 0 });
  const stream = streamText({ model, prompt, maxOutputTokens: 50, maxRetries: 0 });
  let streamed = "";
  for await (const part of stream.textStream) streamed += part;
  console.log(JSON.stringify({ text: made.text, streamed }));
}

main().catch((error) => {
  console.log(JSON.stringify({ error: String(error && error.message) }));
  process.exit(1);
});

// A Vercel AI SDK application, unchanged: `streamText` on `@ai-sdk/openai`'s default
// provider, which reads OPENAI_BASE_URL and OPENAI_API_KEY. Like many applications it
// never looks at the stream's errors: on a failed call the SDK logs the error, the text
// stream ends empty, and the process exits 0. tests/frontdoor/test_node.py runs it under
// `replay-actor run`, whose summary and exit status must not let that pass.
"use strict";
const { streamText } = require("ai");
const { openai } = require("@ai-sdk/openai");

async function main() {
  const result = streamText({ model: openai("gpt-test"), prompt: process.argv[2] || "hi" });
  let text = "";
  for await (const part of result.textStream) text += part;
  console.log(JSON.stringify({ text }));
}

main();

// A Vercel AI SDK application, unchanged: `embed` and `embedMany` on `@ai-sdk/openai`'s
// default provider (OPENAI_BASE_URL, OPENAI_API_KEY), which posts `/embeddings` with
// `encoding_format: "float"`, as a RAG evaluation embeds its query and its documents.
// tests/frontdoor/test_node.py records it through a loopback fake vendor and replays it
// under `replay-actor run`.
"use strict";
const { embed, embedMany } = require("ai");
const { openai } = require("@ai-sdk/openai");

async function main() {
  const model = openai.embedding("text-embedding-3-small");
  const query = await embed({ model, value: "where is the cat?", maxRetries: 0 });
  const documents = await embedMany({
    model,
    values: ["the cat sat", "on the mat"],
    maxRetries: 0,
  });
  const short = await embed({
    model,
    value: "the cat sat",
    providerOptions: { openai: { dimensions: 4 } },
    maxRetries: 0,
  });
  console.log(
    JSON.stringify({
      query: query.embedding,
      documents: documents.embeddings,
      short: short.embedding,
      tokens: documents.usage.tokens,
    }),
  );
}

main();

// A Vercel AI SDK application on `@ai-sdk/google`, given the front door as docs/front-door.md
// ("Clients") shows: the provider reads no base-URL variable, so its `baseURL` is
// REPLAY_ACTOR_URL + "/v1beta"; its key variable, GOOGLE_GENERATIVE_AI_API_KEY, holds the
// front door's token under `replay-actor run`. tests/frontdoor/test_node.py records it
// through a loopback Gemini server, then replays it sealed.
"use strict";
const { generateText } = require("ai");
const { createGoogleGenerativeAI } = require("@ai-sdk/google");

async function main() {
  const google = createGoogleGenerativeAI({ baseURL: process.env.REPLAY_ACTOR_URL + "/v1beta" });
  const result = await generateText({ model: google("gemini-2.5-flash"), prompt: "hi" });
  console.log(JSON.stringify({ text: result.text }));
}

main().catch((error) => {
  console.error(String(error));
  process.exit(1);
});

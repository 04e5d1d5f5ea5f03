// A small Node application on the vendors' own npm packages, unchanged: it reads
// OPENAI_BASE_URL / OPENAI_API_KEY and ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY from its
// environment, as every deployment does. tests/frontdoor/test_node.py runs it under
// `replay-actor run` and checks what it prints (one JSON object).
"use strict";
const OpenAI = require("openai");
const AnthropicModule = require("@anthropic-ai/sdk");
const Anthropic = AnthropicModule.default || AnthropicModule;

const parts = new Set((process.argv[2] || "chat,messages").split(","));
const HI = [{ role: "user", content: "hi" }];
const ASK = [{ role: "user", content: "weather in Paris?" }];
const SCHEMA = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };

async function openaiPart(out) {
  const client = new OpenAI();
  const plain = await client.chat.completions.create({ model: "gpt-test", messages: HI, max_tokens: 50 });
  out.chat = plain.choices[0].message.content;
  const stream = await client.chat.completions.create({
    model: "gpt-test", messages: HI, max_tokens: 50, stream: true,
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content || "";
  out.chat_stream = text;
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: SCHEMA } }];
  const first = await client.chat.completions.create({ model: "gpt-test", messages: ASK, tools, max_tokens: 100 });
  const call = first.choices[0].message.tool_calls[0];
  out.chat_tool = [call.function.name, JSON.parse(call.function.arguments)];
  const second = await client.chat.completions.create({
    model: "gpt-test",
    max_tokens: 100,
    tools,
    messages: [
      ...ASK,
      { role: "assistant", content: null, tool_calls: first.choices[0].message.tool_calls },
      { role: "tool", tool_call_id: call.id, content: "sunny" },
    ],
  });
  out.chat_final = second.choices[0].message.content;
  try {
    await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "unknown" }], max_tokens: 50 });
    out.chat_miss = null;
  } catch (err) {
    out.chat_miss = { status: err.status, message: err.error && err.error.message };
  }
}

async function responsesPart(out) {
  const client = new OpenAI();
  const response = await client.responses.create({ model: "gpt-test", input: "hi", max_output_tokens: 50 });
  out.responses = response.output_text;
  const stream = client.responses.stream({ model: "gpt-test", input: "hi", max_output_tokens: 50 });
  const final = await stream.finalResponse();
  out.responses_stream = final.output_text;
}

async function anthropicPart(out) {
  const client = new Anthropic();
  const plain = await client.messages.create({ model: "claude-test", max_tokens: 50, messages: HI });
  out.messages = plain.content[0].text;
  const final = await client.messages.stream({ model: "claude-test", max_tokens: 50, messages: HI }).finalMessage();
  out.messages_stream = final.content[0].text;
  const tools = [{ name: "get_weather", description: "Weather for a city", input_schema: SCHEMA }];
  const first = await client.messages.create({ model: "claude-test", max_tokens: 100, tools, messages: ASK });
  const use = first.content.find((block) => block.type === "tool_use");
  out.messages_tool = [use.name, use.input];
  const second = await client.messages.create({
    model: "claude-test",
    max_tokens: 100,
    tools,
    messages: [
      ...ASK,
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] },
    ],
  });
  out.messages_final = second.content[0].text;
  try {
    await client.messages.create({ model: "claude-test", max_tokens: 50, messages: [{ role: "user", content: "unknown" }] });
    out.messages_miss = null;
  } catch (err) {
    out.messages_miss = { status: err.status, message: err.error && err.error.error && err.error.error.message };
  }
}

async function simplePart(out) {
  const chat = await new OpenAI().chat.completions.create({ model: "gpt-test", messages: HI, max_tokens: 50 });
  out.simple_chat = chat.choices[0].message.content;
  const bye = [{ role: "user", content: "bye" }];
  const message = await new Anthropic().messages.create({ model: "claude-test", max_tokens: 50, messages: bye });
  out.simple_messages = message.content[0].text;
}

async function main() {
  const out = {};
  if (parts.has("simple")) await simplePart(out);
  if (parts.has("chat")) await openaiPart(out);
  if (parts.has("responses")) await responsesPart(out);
  if (parts.has("messages")) await anthropicPart(out);
  if (parts.has("fail-on-miss")) {
    // An application that does not catch: the miss must end it with a non-zero status.
    const client = new OpenAI();
    await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "unknown" }], max_tokens: 50 });
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(String(err && err.message));
  process.exit(1);
});

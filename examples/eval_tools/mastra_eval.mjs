// A Mastra evaluation of three questions, all at once (docs/eval-tools.md).
//
// Nothing here knows about replay-actor: `@ai-sdk/openai`'s provider reads
// OPENAI_BASE_URL, which `replay-actor run` points at its front door. `--candidate` asks
// to see the working for the question that multiplies, so only that sample's prompts
// change.
import { openai } from "@ai-sdk/openai";
import { Agent } from "@mastra/core/agent";

const QUESTIONS = ["What is 2 + 3?", "What is 6 times 7?", "What is 9 - 4?"];
const CANDIDATE = process.argv.includes("--candidate");
const agent = new Agent({
  id: "arithmetic",
  name: "arithmetic",
  instructions: "Answer with the number only.",
  model: openai.chat("gpt-4.1-mini"), // chat completions (openai("…") is the Responses API)
});

// The candidate's one change.
const asked = (question) =>
  CANDIDATE && question.includes(" times ") ? `${question} Show your working.` : question;

async function sample(question) {
  const first = await agent.generate(asked(question), { modelSettings: { temperature: 0 } });
  const again = [
    { role: "user", content: asked(question) },
    { role: "assistant", content: first.text },
    { role: "user", content: "Check it once more: the number only." },
  ];
  return (await agent.generate(again, { modelSettings: { temperature: 0 } })).text;
}

const results = await Promise.allSettled(QUESTIONS.map(sample));
QUESTIONS.forEach((question, i) => {
  const { status, value, reason } = results[i];
  console.log(question, "->", status === "fulfilled" ? value : String(reason));
});

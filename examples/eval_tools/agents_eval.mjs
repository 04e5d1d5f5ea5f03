// An OpenAI Agents JS evaluation of three questions, all at once (docs/eval-tools.md).
//
// Nothing here knows about replay-actor: the Agents SDK's OpenAI client reads
// OPENAI_BASE_URL, which `replay-actor run` points at its front door. `--candidate` asks
// to see the working for the question that multiplies, so only that sample's prompts
// change.
import { Agent, run, setOpenAIAPI } from "@openai/agents";

setOpenAIAPI("chat_completions"); // the SDK's default is the Responses API

const QUESTIONS = ["What is 2 + 3?", "What is 6 times 7?", "What is 9 - 4?"];
const CANDIDATE = process.argv.includes("--candidate");
const agent = new Agent({
  name: "arithmetic",
  instructions: "Answer with the number only.",
  model: "gpt-4.1-mini",
  modelSettings: { temperature: 0 },
});

// The candidate's one change.
const asked = (question) =>
  CANDIDATE && question.includes(" times ") ? `${question} Show your working.` : question;

async function sample(question) {
  const first = await run(agent, asked(question));
  const again = [...first.history, { role: "user", content: "Check it once more: the number only." }];
  return (await run(agent, again)).finalOutput;
}

const results = await Promise.allSettled(QUESTIONS.map(sample));
QUESTIONS.forEach((question, i) => {
  const { status, value, reason } = results[i];
  console.log(question, "->", status === "fulfilled" ? value : String(reason));
});

// A TypeScript agent using memtape over HTTP through a client generated from the server's OpenAPI
// document: every route, body and answer is typed, so a misspelt field does not compile.
//
//   memtape --memory-dir .agent-memory serve --port 8765 &
//   npx openapi-typescript http://127.0.0.1:8765/openapi.json -o memtape-api.ts
//   npm install openapi-fetch typescript && npx tsc --strict ...
//   node typescript-agent.js http://127.0.0.1:8765 "$(cat .agent-memory/serve.token)"
//
// Two runs on the same shop: the first fails to click "Buy" behind a cookie banner, records what it
// did with every field a step has and a lesson, and finishes; the second recalls the lesson for the
// domain before acting, gets the first run's session, facts and selectors, and does not fail.
import createClient from "openapi-fetch";
import type { components, paths } from "./memtape-api.js";

type Lesson = components["schemas"]["Lesson"];
type Finished = components["schemas"]["Finished"];

const base = process.argv[2] ?? "http://127.0.0.1:8765";
const token = process.argv[3] ?? process.env.MEMTAPE_TOKEN ?? "";
const SHOP = "https://shop.example/";
const BLOCKED = "element <div class=cookies> intercepts pointer events";
const PAGE = ["button Buy", "button Accept cookies", "link Home"];

const memtape = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });

/** The answer of a call, or an Error naming the status and the server's one line. */
function answer<T>(reply: { data?: T; error?: { error: string }; response: Response }): T {
  if (reply.data === undefined) {
    throw new Error(`${reply.response.status} ${reply.error?.error ?? "no answer"}`);
  }
  return reply.data;
}

async function runOnce(label: string) {
  const { run_id } = answer(await memtape.POST("/runs", {
    body: { goal: "Buy wool socks", start_url: SHOP, session_id: "ts-agent", agent: "typescript-example" },
  }));
  const run = { path: { run_id } };
  const tips: Lesson[] = answer(await memtape.GET("/runs/{run_id}/recall/domain", {
    params: { ...run, query: { step: 1, domain: "shop.example" } },
  }));
  const knowsBanner = tips.some((lesson) => /cookie banner/i.test(lesson.text));
  let step = 1;
  let errors = 0;
  if (!knowsBanner) {
    await memtape.POST("/runs/{run_id}/steps", {
      params: run,
      body: {
        step: step, action: "click", target: 'button "Buy"', url: SHOP, ok: false, error: BLOCKED, selector: "#buy",
        duration_ms: 120, think: "buy the socks", page_before: { url: SHOP, title: "Shop", elements: PAGE },
      },
    });
    errors += 1;
    const fixes: Lesson[] = answer(await memtape.GET("/runs/{run_id}/recall/error", {
      params: { ...run, query: { command: "click", error: BLOCKED, step } },
    }));
    console.error(`${label}: recall on error offered ${fixes.length} lesson(s)`);
    step += 1;
    answer(await memtape.POST("/runs/{run_id}/lessons", {
      params: run,
      body: { text: "Accept the cookie banner before clicking Buy", category: "site_specific", scope_domain: "shop.example", step },
    }));
  }
  // the step is sent with an Idempotency-Key: sent twice (a lost answer), it is one step
  for (let attempt = 0; attempt < 2; attempt++) {
    answer(await memtape.POST("/runs/{run_id}/steps", {
      params: { ...run, header: { "Idempotency-Key": `${run_id}-accept` } },
      body: { step, action: "click", target: 'button "Accept cookies"', url: SHOP, selector: "#accept", duration_ms: 40 },
    }));
  }
  step += 1;
  answer(await memtape.POST("/runs/{run_id}/context", {
    params: run,
    body: {
      step, budget: 2500,
      items: tips.map((lesson) => ({ source: "domain_tips", text: lesson.text, priority: 60, event_ids: lesson.event_ids })),
    },
  }));
  answer(await memtape.POST("/runs/{run_id}/steps", {
    params: run,
    body: { step, action: "click", target: 'button "Buy"', url: SHOP, url_after: SHOP + "cart", selector: "#buy", duration_ms: 90 },
  }));
  const sessions = answer(await memtape.GET("/runs/{run_id}/sessions", { params: run }));
  const selectors = answer(await memtape.GET("/runs/{run_id}/selectors", { params: run }));
  const learned: Finished = answer(await memtape.POST("/runs/{run_id}/finish", {
    params: run, body: { success: true, outcome: "bought", result: "1 pair" },
  }));
  return {
    run: run_id,
    recalled: tips.map((lesson) => lesson.text),
    errors,
    sessions_before: sessions.map((session) => session.success),
    selectors_before: selectors.map((entry) => entry.selector),
    trajectory_steps: learned.trajectory?.steps.length ?? 0,
  };
}

const first = await runOnce("run 1");
const second = await runOnce("run 2");
const audit = answer(await memtape.GET("/audit/{run_id}", { params: { path: { run_id: second.run }, query: { step: 1 } } }));
const refused = await memtape.POST("/runs/{run_id}/finish", { params: { path: { run_id: second.run } }, body: { success: true } });
console.log(JSON.stringify({ first, second, audit_steps: audit.steps.length,
                             refused: { status: refused.response.status, error: refused.error?.error } }));

// A tiny agent in JavaScript (Node 18+, built-in fetch, no npm packages) using memtape over HTTP.
// Start the server first:  memtape --memory-dir .agent-memory serve --port 8765
// Then:                    node examples/node-agent.mjs [http://127.0.0.1:8765] [token]
// The token: the one the server printed, kept in .agent-memory/serve.token (or MEMTAPE_TOKEN).
// Two runs on the same shop: the first fails to click "Buy", learns why and records a lesson;
// the second recalls that lesson for the same domain before acting, and avoids the failure.
const base = process.argv[2] ?? process.env.MEMTAPE_URL ?? "http://127.0.0.1:8765";
const token = process.argv[3] ?? process.env.MEMTAPE_TOKEN;
const SHOP = "https://shop.example/";
const BLOCKED = "element intercepts pointer events";

async function call(method, path, body) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const answer = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await answer.json();
  if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status} ${data.error}`);
  return data;
}

async function runOnce(label) {
  const { run_id: run } = await call("POST", "/runs", { goal: "Buy wool socks", start_url: SHOP });
  const tips = await call("GET", `/runs/${run}/recall/domain?step=1`);
  const knowsBanner = tips.some((lesson) => /cookie banner/i.test(lesson.text));
  let step = 1;
  if (knowsBanner) {
    await call("POST", `/runs/${run}/steps`, { step: step++, action: "click", target: 'button "Accept cookies"', url: SHOP, ok: true });
  } else {
    await call("POST", `/runs/${run}/steps`, { step, action: "click", target: 'button "Buy"', url: SHOP, ok: false, error: BLOCKED });
    const fixes = await call("GET", `/runs/${run}/recall/error?command=click&error=${encodeURIComponent(BLOCKED)}&step=${step}`);
    step++;
    await call("POST", `/runs/${run}/steps`, { step: step++, action: "click", target: 'button "Accept cookies"', url: SHOP, ok: true });
    await call("POST", `/runs/${run}/lessons`, {
      text: "Accept the cookie banner before clicking Buy", category: "site_specific", scope_domain: "shop.example", step,
    });
    console.log(`${label}: recall on error offered ${fixes.length} lesson(s)`);
  }
  await call("POST", `/runs/${run}/context`, {
    step, budget: 2500,
    items: tips.map((lesson) => ({ source: "domain_tips", text: lesson.text, priority: 60, event_ids: lesson.event_ids })),
  });
  await call("POST", `/runs/${run}/steps`, { step, action: "click", target: 'button "Buy"', url: SHOP + "cart", ok: true });
  await call("POST", `/runs/${run}/finish`, { success: true, outcome: "bought" });
  return { run, recalled: tips.map((lesson) => lesson.text), errors: knowsBanner ? 0 : 1 };
}

const first = await runOnce("run 1");
const second = await runOnce("run 2");
const audit = await call("GET", `/audit/${second.run}?step=${1}`);
console.log(JSON.stringify({ first, second, audit_steps: audit.steps.length }));

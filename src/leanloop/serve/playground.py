"""``GET /``: one small page to try the server — pick a model, paste a goal state, see the suggested
tactics with their scores (and the steps remaining when a progress model is configured)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["Server"])

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leanloop playground</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem;
         color: #1d1d1f; }
  h1 { font-size: 1.4rem; margin-bottom: .2rem; }
  p.lead { margin-top: 0; color: #555; }
  label { display: block; font-weight: 600; margin: .8rem 0 .3rem; }
  textarea, input[type=text], input[type=password], select, input[type=number] {
    font: inherit; padding: .4rem; border: 1px solid #bbb; border-radius: 4px;
    box-sizing: border-box; }
  textarea { width: 100%; min-height: 8rem; font-family: ui-monospace, monospace; }
  .row { display: flex; gap: 1rem; flex-wrap: wrap; align-items: end; }
  .row > div { flex: 1 1 10rem; }
  .row select, .row input { width: 100%; }
  button { font: inherit; padding: .5rem 1.4rem; margin-top: 1rem; border: 0; border-radius: 4px;
           background: #2f5fd0; color: white; cursor: pointer; }
  button:disabled { background: #999; }
  #status { margin: .8rem 0; min-height: 1.2rem; color: #555; }
  #status.error { color: #b00020; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #ddd;
           vertical-align: top; }
  td.tactic { font-family: ui-monospace, monospace; white-space: pre-wrap; }
  td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
</style>
</head>
<body>
<h1>leanloop playground</h1>
<p class="lead">Pick a model, paste a goal state, and see the tactics it suggests.</p>
<div class="row">
  <div><label for="model">Model</label><select id="model"></select></div>
  <div><label for="count">Tactics</label>
    <input id="count" type="number" min="1" max="64" value="8"></div>
  <div><label for="prefix">Tactic prefix</label>
    <input id="prefix" type="text" placeholder="e.g. rw"></div>
  <div><label for="key">API key (if the server needs one)</label>
    <input id="key" type="password"></div>
</div>
<label for="goal">Goal state</label>
<textarea id="goal" spellcheck="false">n : ℕ
⊢ n + 0 = n</textarea>
<label><input id="reward" type="checkbox" disabled>
  Rank by the progress model (steps remaining)</label>
<button id="suggest">Suggest tactics</button>
<div id="status" role="status"></div>
<table id="results" hidden>
  <thead><tr><th>#</th><th>Tactic</th><th>Score</th>
    <th id="steps-head" hidden>Steps remaining</th></tr></thead>
  <tbody></tbody>
</table>
<script>
const $ = (id) => document.getElementById(id);
function headers() {
  const h = {"Content-Type": "application/json"};
  const key = $("key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}
function say(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}
async function detail(response) {
  try { const body = await response.json(); return body.detail || JSON.stringify(body); }
  catch (e) { return response.statusText; }
}
async function loadModels() {
  const response = await fetch("models", {headers: headers()});
  if (!response.ok) { say("cannot list the models: " + await detail(response), true); return; }
  const info = await response.json();
  const select = $("model");
  select.replaceChildren();
  for (const m of info.models.filter((m) => m.kind === "generator")) {
    const option = document.createElement("option");
    option.value = m.name;
    option.textContent = m.name + " (" + m.provider + ")";
    select.appendChild(option);
  }
  $("reward").disabled = !info.progress_model.configured;
  if (!select.options.length) say("no generator is configured", true);
  else say("");
}
async function suggest() {
  const button = $("suggest");
  button.disabled = true;
  say("generating…");
  const useReward = $("reward").checked;
  const body = {name: $("model").value, input: $("goal").value, prefix: $("prefix").value,
                use_reward: useReward, num_samples: Number($("count").value) || 8};
  try {
    const started = performance.now();
    const response = await fetch("generate", {method: "POST", headers: headers(),
                                              body: JSON.stringify(body)});
    if (!response.ok) {
      say("error " + response.status + ": " + await detail(response), true);
      return;
    }
    const outputs = (await response.json()).outputs;
    const rows = $("results").querySelector("tbody");
    rows.replaceChildren();
    outputs.forEach((o, i) => {
      const tr = document.createElement("tr");
      const cells = [String(i + 1), o.output, o.score.toPrecision(4)];
      if (useReward) cells.push(o.steps_remaining == null ? "?" : o.steps_remaining.toFixed(2));
      cells.forEach((text, c) => {
        const td = document.createElement("td");
        td.textContent = text;
        td.className = c === 1 ? "tactic" : "num";
        tr.appendChild(td);
      });
      rows.appendChild(tr);
    });
    $("steps-head").hidden = !useReward;
    $("results").hidden = false;
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    say(outputs.length + " tactic" + (outputs.length === 1 ? "" : "s") + " in " + seconds + " s");
  } catch (e) {
    say("request failed: " + e, true);
  } finally {
    button.disabled = false;
  }
}
$("suggest").addEventListener("click", suggest);
$("key").addEventListener("change", loadModels);
loadModels();
</script>
</body>
</html>
"""


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page() -> HTMLResponse:
    """The playground page."""
    return HTMLResponse(PAGE)

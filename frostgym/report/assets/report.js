// frostgym report: the trajectory browser. Plain JavaScript, no dependencies, no network.
//
// Why this shape: the page must open from disk and stay fast on a 100,000-episode card.
// Each card's index (one small row per episode: env, split, difficulty, tags, label,
// outcome, drop class) arrives as data/c<N>/index.js and is all that filtering reads; the
// episodes themselves stay in gzipped chunks (data/c<N>/chunk-<K>.js) that are loaded one
// at a time, only to open an episode or to search its text, and a few at most are kept.
// Every piece of card text reaches the page through textContent, never as HTML.
"use strict";

(function () {
  const DATA = JSON.parse(document.getElementById("frostgym-data").textContent);
  const PAGE_ROWS = 50;
  const CACHED_CHUNKS = 6;
  const indexes = {};
  const chunkPromises = new Map();
  const chunkWaiters = new Map();
  const state = { card: 0, page: 0, rows: [], generation: 0, searching: false };

  // ---- data loading -------------------------------------------------------------------
  async function gunzipBase64(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  window.frostgymIndex = function (card, payload) {
    gunzipBase64(payload)
      .then((text) => {
        indexes[card] = prepareIndex(JSON.parse(text));
        if (Object.keys(indexes).length === DATA.cards.length) ready();
      })
      .catch((error) => fail("could not read the index of card " + card + ": " + error));
  };

  window.frostgymChunk = function (card, chunk, payload) {
    const waiter = chunkWaiters.get(card + ":" + chunk);
    if (!waiter) return;
    chunkWaiters.delete(card + ":" + chunk);
    gunzipBase64(payload).then((text) => waiter.resolve(text.split("\n")), waiter.reject);
  };

  // Seeds are 64-bit integers, past what a JavaScript number holds exactly: where the
  // browser gives a reviver the number's source text, such a number is kept as its digits.
  function exactIntegers(key, value, context) {
    if (typeof value === "number" && !Number.isSafeInteger(value) && Number.isInteger(value) && context && context.source) {
      return context.source;
    }
    return value;
  }

  function loadChunk(card, chunk) {
    const key = card + ":" + chunk;
    if (chunkPromises.has(key)) {
      const promise = chunkPromises.get(key);
      chunkPromises.delete(key); // most recently used last
      chunkPromises.set(key, promise);
      return promise;
    }
    const promise = new Promise((resolve, reject) => {
      chunkWaiters.set(key, { resolve, reject });
      const script = document.createElement("script");
      script.src = "data/c" + card + "/chunk-" + chunk + ".js";
      script.onload = () => script.remove();
      script.onerror = () => {
        script.remove();
        chunkWaiters.delete(key);
        chunkPromises.delete(key);
        reject(new Error("could not load " + script.src + " (is the data/ folder beside index.html?)"));
      };
      document.body.appendChild(script);
    });
    chunkPromises.set(key, promise);
    while (chunkPromises.size > CACHED_CHUNKS) chunkPromises.delete(chunkPromises.keys().next().value);
    return promise;
  }

  function prepareIndex(index) {
    const ints = (values) => Int32Array.from(values);
    index.task = ints(index.task);
    index.sample = ints(index.sample);
    index.split = ints(index.split);
    index.difficulty = ints(index.difficulty);
    index.tag_set = ints(index.tag_set);
    index.label = ints(index.label);
    index.drop = ints(index.drop);
    index.passed = Uint8Array.from(index.passed);
    index.rowOf = new Map();
    for (let row = 0; row < index.plan_id.length; row++) index.rowOf.set(index.plan_id[row], row);
    index.env = new Int32Array(index.task.length);
    for (let row = 0; row < index.task.length; row++) index.env[row] = index.task_env[index.task[row]];
    return index;
  }

  async function record(card, row) {
    const index = indexes[card];
    const lines = await loadChunk(card, Math.floor(row / index.chunk_records));
    return JSON.parse(lines[row % index.chunk_records], exactIntegers);
  }

  // ---- small DOM helpers --------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  const $ = (id) => document.getElementById(id);
  const fmt = (value, digits = 3) => (value === null || value === undefined ? "–" : Number(value).toFixed(digits));
  const json = (value) => JSON.stringify(value, null, 2);

  function fail(message) {
    const box = $("browser-status");
    box.textContent = message;
    box.classList.add("error");
  }

  // ---- filters ------------------------------------------------------------------------
  const FILTERS = ["env", "split", "difficulty", "tag", "label", "outcome", "drop"];

  function options(select, values, allText) {
    select.replaceChildren(el("option", { value: "", text: allText }));
    values.forEach((value, code) => {
      if (value === null) return;
      select.append(el("option", { value: String(code), text: value }));
    });
  }

  function fillFilters() {
    const index = indexes[state.card];
    options($("f-env"), index.envs, "every env");
    options($("f-split"), index.splits, "every split");
    options($("f-difficulty"), index.difficulties, "every difficulty");
    options($("f-tag"), index.tags, "every tag");
    options($("f-label"), index.labels, "every label");
    $("f-label").append(el("option", { value: "none", text: "(no label)" }));
    options($("f-drop"), index.drops, "every drop class");
  }

  function currentFilters() {
    const value = (name) => $("f-" + name).value;
    return {
      env: value("env"),
      split: value("split"),
      difficulty: value("difficulty"),
      tag: value("tag"),
      label: value("label"),
      outcome: value("outcome"),
      drop: value("drop"),
      text: $("f-text").value.trim().toLowerCase(),
    };
  }

  function matches(index, row, f) {
    if (f.env !== "" && index.env[row] !== +f.env) return false;
    if (f.split !== "" && index.split[row] !== +f.split) return false;
    if (f.difficulty !== "" && index.difficulty[row] !== +f.difficulty) return false;
    if (f.tag !== "" && !index.tag_sets[index.tag_set[row]].includes(+f.tag)) return false;
    if (f.label === "none" && index.label[row] !== 0) return false;
    if (f.label !== "" && f.label !== "none" && index.label[row] !== +f.label) return false;
    if (f.drop !== "" && index.drop[row] !== +f.drop) return false;
    if (f.outcome === "passed" && !index.passed[row]) return false;
    if (f.outcome === "failed" && (index.passed[row] || index.drop[row] !== 0)) return false;
    if (f.outcome === "dropped" && index.drop[row] === 0) return false;
    return true;
  }

  async function applyFilters() {
    const generation = ++state.generation;
    const index = indexes[state.card];
    const f = currentFilters();
    const rows = [];
    for (let row = 0; row < index.plan_id.length; row++) if (matches(index, row, f)) rows.push(row);
    state.page = 0;
    if (!f.text) {
      state.rows = rows;
      state.searching = false;
      render();
      return;
    }
    // Free text: each candidate's whole record (its line in the card) is searched, one chunk at a time.
    state.rows = [];
    state.searching = true;
    render();
    const byChunk = new Map();
    for (const row of rows) {
      const chunk = Math.floor(row / index.chunk_records);
      if (!byChunk.has(chunk)) byChunk.set(chunk, []);
      byChunk.get(chunk).push(row);
    }
    let done = 0;
    for (const [chunk, chunkRows] of byChunk) {
      let lines;
      try {
        lines = await loadChunk(state.card, chunk);
      } catch (error) {
        fail(String(error));
        return;
      }
      if (generation !== state.generation) return;
      for (const row of chunkRows) {
        if (lines[row % index.chunk_records].toLowerCase().includes(f.text)) state.rows.push(row);
      }
      done++;
      $("browser-status").textContent = "searching episode text: " + done + " of " + byChunk.size + " chunks";
      if (done % 4 === 0) render(true);
    }
    if (generation !== state.generation) return;
    state.searching = false;
    render();
  }

  // ---- the episode table --------------------------------------------------------------
  function outcomeText(index, row) {
    if (index.drop[row] !== 0) return "drop: " + index.drops[index.drop[row]];
    return index.passed[row] ? "passed" : "failed";
  }

  function render(partial) {
    const index = indexes[state.card];
    const total = state.rows.length;
    const pages = Math.max(1, Math.ceil(total / PAGE_ROWS));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE_ROWS;
    const body = $("episodes-body");
    body.replaceChildren();
    for (const row of state.rows.slice(start, start + PAGE_ROWS)) {
      const tags = index.tag_sets[index.tag_set[row]].map((t) => index.tags[t]).join(", ");
      const tr = el(
        "tr",
        { "data-plan-id": index.plan_id[row], class: "episode-row", tabindex: "0" },
        el("td", { class: "plan-id", text: index.plan_id[row] }),
        el("td", { text: index.envs[index.env[row]] }),
        el("td", { text: index.splits[index.split[row]] || "" }),
        el("td", { text: index.difficulties[index.difficulty[row]] || "" }),
        el("td", { text: tags }),
        el("td", { class: "label", text: index.labels[index.label[row]] || "" }),
        el("td", { class: "outcome", text: outcomeText(index, row) }),
        el("td", { class: "num", text: fmt(index.reward[row]) })
      );
      tr.addEventListener("click", () => openEpisode(index.plan_id[row]));
      tr.addEventListener("keydown", (event) => event.key === "Enter" && openEpisode(index.plan_id[row]));
      body.append(tr);
    }
    const of = index.plan_id.length;
    let status = total
      ? "episodes " + (start + 1) + "–" + Math.min(total, start + PAGE_ROWS) + " of " + total + " matching"
      : "no episode matches";
    status += " (" + of + " in " + DATA.cards[state.card].label + ")";
    if (state.searching) status += partial ? ": searching…" : ": searching episode text…";
    $("browser-status").textContent = status;
    $("browser-status").classList.remove("error");
    $("match-count").textContent = String(total);
    $("page-prev").disabled = state.page === 0;
    $("page-next").disabled = state.page >= pages - 1;
  }

  // ---- one episode --------------------------------------------------------------------
  async function openEpisode(planId) {
    const panel = $("episode");
    panel.hidden = false;
    panel.replaceChildren(el("p", { class: "muted", text: "loading " + planId + "…" }));
    const columns = [];
    for (const card of DATA.cards) {
      const index = indexes[card.number];
      const row = index.rowOf.get(planId);
      if (row === undefined) {
        if (DATA.cards.length > 1) columns.push(el("div", { class: "episode-card" }, el("h3", { text: card.label }), el("p", { class: "muted", text: "not in this card" })));
        continue;
      }
      try {
        columns.push(renderRecord(card, await record(card.number, row)));
      } catch (error) {
        columns.push(el("p", { class: "error", text: String(error) }));
      }
    }
    const close = el("button", { type: "button", class: "close", text: "close", onclick: () => { panel.hidden = true; } });
    panel.replaceChildren(
      el("div", { class: "episode-head" }, el("h2", { text: planId }), close),
      el("div", { class: "episode-columns columns-" + columns.length }, ...columns)
    );
    panel.scrollIntoView({ block: "start" });
  }

  function field(dl, name, value) {
    if (value === null || value === undefined || value === "") return;
    dl.append(el("dt", { text: name }), el("dd", { text: typeof value === "object" ? JSON.stringify(value) : String(value) }));
  }

  function renderRecord(card, rec) {
    const box = el("div", { class: "episode-card" });
    if (DATA.cards.length > 1) box.append(el("h3", { text: card.label }));
    const dl = el("dl", { class: "facts" });
    const grade = rec.grade || null;
    field(dl, "plan id", rec.plan_id);
    field(dl, "env", rec.env_id);
    field(dl, "task", rec.task_id);
    field(dl, "split", rec.split);
    field(dl, "sample", rec.sample);
    field(dl, "seed", rec.seed);
    field(dl, "seed derivation", rec.seed_derivation);
    field(dl, "episode id", rec.episode_id);
    field(dl, "difficulty", rec.difficulty);
    field(dl, "tags", (rec.tags || []).join(", "));
    field(dl, "reward", rec.reward);
    if (grade) {
      field(dl, "label", grade.label === null ? "(none)" : grade.label);
      field(dl, "grader", grade.grader + " " + grade.grader_version);
    }
    field(dl, "attempts", rec.attempts);
    field(dl, "wall seconds", rec.wall_seconds === undefined ? null : fmt(rec.wall_seconds, 4));
    box.append(dl);
    if (rec.drop_class) {
      const drop = el("div", { class: "drop" }, el("h4", { text: "Dropped: " + rec.drop_class + " at " + rec.stage + " (counted as " + rec.counted_as + ")" }));
      drop.append(el("pre", { class: "error-text", text: rec.error || "" }));
      if (rec.traceback) drop.append(el("details", {}, el("summary", { text: "traceback" }), el("pre", { text: rec.traceback })));
      for (const earlier of rec.earlier_errors || []) drop.append(el("pre", { class: "muted", text: "earlier attempt: " + earlier }));
      box.append(drop);
    }
    if (grade) box.append(renderGrade("Grade", grade));
    box.append(el("h4", { text: "Conversation" }));
    const conversation = el("div", { class: "conversation" });
    for (const message of rec.observation || []) conversation.append(renderMessage(message));
    for (const step of rec.steps || []) conversation.append(renderStep(step));
    box.append(conversation);
    return box;
  }

  function renderGrade(title, grade) {
    const table = el("table", { class: "grade" }, el("thead", {}, el("tr", {}, el("th", { text: "component" }), el("th", { text: "value" }), el("th", { text: "weight" }), el("th", { text: "required" }))));
    const body = el("tbody");
    for (const [name, value] of Object.entries(grade.components || {})) {
      body.append(el("tr", {}, el("td", { text: name }), el("td", { class: "num", text: fmt(value) }), el("td", { class: "num", text: fmt((grade.weights || {})[name]) }), el("td", { text: (grade.required || []).includes(name) ? "yes" : "" })));
    }
    table.append(body);
    const box = el("div", { class: "grade-box" }, el("h4", { text: title + ": score " + fmt(grade.score) + (grade.label ? " · " + grade.label : "") }), table);
    if (grade.details && Object.keys(grade.details).length) box.append(el("details", {}, el("summary", { text: "grader details" }), el("pre", { text: json(grade.details) })));
    return box;
  }

  function renderMessage(message) {
    const role = message.role || "?";
    const box = el("div", { class: "message role-" + role }, el("div", { class: "role", text: role + (message.name ? " · " + message.name : "") }));
    const content = typeof message.content === "string" ? message.content : json(message.content);
    box.append(el("pre", { class: "content", text: content }));
    if (message.tool_calls && message.tool_calls.length) box.append(el("pre", { class: "tool-calls", text: json(message.tool_calls) }));
    return box;
  }

  function renderStep(step) {
    const box = el("div", { class: "step" });
    const reward = "turn " + step.turn + " · reward " + fmt(step.reward) + (step.terminated ? " · terminated" : "") + (step.truncated ? " · truncated" : "");
    box.append(el("div", { class: "step-head", text: reward }));
    const action = typeof step.action === "string" ? step.action : json(step.action);
    box.append(el("div", { class: "message role-assistant" }, el("div", { class: "role", text: "assistant (action)" }), el("pre", { class: "content", text: action })));
    if (step.action_stored) box.append(el("p", { class: "muted", text: "stored: " + JSON.stringify(step.action_stored) }));
    if (step.tool_calls && step.tool_calls.length) {
      const calls = el("div", { class: "tool-calls" }, el("div", { class: "role", text: "tool calls (as the env parsed them)" }));
      for (const call of step.tool_calls) {
        const name = call.name || (call.function && call.function.name) || "?";
        const args = call.arguments !== undefined ? call.arguments : call.function ? call.function.arguments : call;
        calls.append(el("pre", { text: name + "(" + JSON.stringify(args) + ")" }));
      }
      box.append(calls);
    }
    if (step.tool_results && step.tool_results.length) {
      const results = el("div", { class: "tool-results" }, el("div", { class: "role", text: "tool results" }));
      for (const result of step.tool_results) {
        const body = json(result);
        const head = (result.name || "result") + (result.status !== undefined ? " → " + result.status : "") + " (" + body.length + " characters)";
        const details = el("details", {}, el("summary", { text: head }), el("pre", { text: body }));
        if (body.length <= 600) details.open = true;
        results.append(details);
      }
      box.append(results);
    }
    for (const message of (step.observation && step.observation.new) || []) {
      if (message.role === "assistant" && message.content === step.action) continue; // the action, shown above
      box.append(renderMessage(message));
    }
    if (step.grade && !step.terminated) box.append(renderGrade("Turn grade", step.grade));
    return box;
  }

  // ---- wiring -------------------------------------------------------------------------
  function fromHash() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("episode=")) openEpisode(hash.slice("episode=".length));
    else if (hash.startsWith("drop=")) {
      const index = indexes[state.card];
      const code = index.drops.indexOf(hash.slice("drop=".length));
      if (code > 0) {
        for (const name of FILTERS) $("f-" + name).value = "";
        $("f-drop").value = String(code);
        applyFilters();
        $("browser").scrollIntoView();
      }
    }
  }

  function ready() {
    const cardSelect = $("f-card");
    DATA.cards.forEach((card) => cardSelect.append(el("option", { value: String(card.number), text: card.label })));
    cardSelect.addEventListener("change", () => {
      state.card = +cardSelect.value;
      fillFilters();
      applyFilters();
    });
    fillFilters();
    for (const name of FILTERS) $("f-" + name).addEventListener("change", applyFilters);
    let typing = null;
    $("f-text").addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(applyFilters, 250);
    });
    $("f-text").addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      clearTimeout(typing);
      applyFilters();
    });
    $("page-prev").addEventListener("click", () => { state.page--; render(); });
    $("page-next").addEventListener("click", () => { state.page++; render(); });
    window.addEventListener("hashchange", fromHash);
    applyFilters();
    fromHash();
    document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "true";
  }
})();

// The ragmatrix explorer. Every string of the data is untrusted (answers, case names, model
// ids): it is only ever set with textContent or as an attribute value through the DOM, never
// parsed as HTML.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("ragmatrix-data").textContent);
  const ROW_HEIGHT = 28;
  const DRAW_ALL_UP_TO = 1500; // rows; above this the grid draws only the rows in view
  const MARGIN_ROWS = 20;
  const STATUS_NAMES = ["ok", "invalid", "error"];
  const blocks = new Map();
  const state = { view: null, family: null, model: "", variant: "", status: "", failing: false,
                  search: "", order: "name", selected: -1, shown: [], columns: [] };

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "cls") node.className = value;
      else if (key === "on") for (const [name, handler] of Object.entries(value)) node.addEventListener(name, handler);
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function number(value, digits) {
    if (value === null || value === undefined) return "-";
    return Number(value).toFixed(digits);
  }

  // --- the frame -----------------------------------------------------------------------------

  const app = document.getElementById("app");
  app.textContent = "";
  const header = el("header", {},
    el("h1", { text: DATA.title }),
    el("p", { text: DATA.items + " items from " + DATA.results + ", written by ragmatrix view. " +
      "Click a cell to open its item." }));
  header.append(el("p", { cls: "provenance", text: "Provenance: " +
    DATA.provenance.map(([label, rows]) => label + " (" + rows + " rows)").join("; ") + "." }));
  for (const note of DATA.notes) header.append(el("p", { cls: "note", text: "note: " + note }));
  const nav = el("nav", { id: "family-tabs" });
  const filters = el("div", { cls: "filters", id: "filters" });
  const familyNote = el("div", { cls: "family-note", id: "family-note" });
  const left = el("div", { cls: "grid", id: "left" });
  const aside = el("aside", { id: "detail" }, el("p", { text: "Click a cell to see its item." }));
  app.append(header, nav, filters, familyNote, el("main", {}, left, aside));

  for (const family of DATA.families) {
    nav.append(el("button", { type: "button", "data-family": family.name, text: family.name,
      on: { click: () => showFamily(family.name) } }));
  }
  if (DATA.comparedWith !== null || DATA.families.length) {
    nav.append(el("button", { type: "button", id: "changes-tab", "data-view": "changes",
      text: DATA.comparedWith !== null ? "changes (" + DATA.changes.length + ")" : "two models side by side",
      on: { click: showChanges } }));
  }

  function activeTab(name) {
    for (const button of nav.querySelectorAll("button")) {
      const mine = button.getAttribute("data-family") || button.getAttribute("data-view");
      button.classList.toggle("active", mine === name);
    }
  }

  // --- the grid of one family ----------------------------------------------------------------

  function familyNamed(name) { return DATA.families.find(f => f.name === name); }

  function cellsByRow(family) {
    if (!family._byRow) {
      family._byRow = family.rows.map(() => new Array(family.models.length).fill(-1));
      family.cells.forEach((cell, i) => { family._byRow[cell[0]][cell[1]] = i; });
    }
    return family._byRow;
  }

  function select(id, label, options, value, onChange) {
    const node = el("select", { id: id, on: { change: e => onChange(e.target.value) } });
    for (const [optionValue, optionLabel] of options) {
      const option = el("option", { value: optionValue, text: optionLabel });
      if (optionValue === value) option.selected = true;
      node.append(option);
    }
    return el("label", {}, label + " ", node);
  }

  function showFamily(name) {
    const family = familyNamed(name);
    if (!family) return;
    if (state.family !== name) { state.model = ""; state.variant = ""; }
    state.view = "family"; state.family = name;
    activeTab(name);
    filters.textContent = "";
    filters.append(
      select("filter-model", "model", [["", "all models"], ...family.models.map(m => [m, m])], state.model,
        v => { state.model = v; drawGrid(); }),
      select("filter-variant", "variant", [["", "all variants"], ...family.variants.filter(v => v).map(v => [v, v])],
        state.variant, v => { state.variant = v; drawGrid(); }),
      select("filter-status", "status", [["", "any status"], ["ok", "ok"], ["invalid", "invalid answers"],
        ["error", "errors"]], state.status, v => { state.status = v; drawGrid(); }),
      el("label", {}, (() => {
        const box = el("input", { type: "checkbox", id: "filter-failing",
          on: { change: e => { state.failing = e.target.checked; drawGrid(); } } });
        box.checked = state.failing;
        return box;
      })(), " failing only"),
      el("label", {}, "search ", (() => {
        const box = el("input", { type: "search", id: "filter-search", placeholder: "case or variant",
          on: { input: e => { state.search = e.target.value.toLowerCase(); drawGrid(); } } });
        box.value = state.search;
        return box;
      })()),
      select("order", "order", [["name", "by name"], ["worst", "worst first"]], state.order,
        v => { state.order = v; drawGrid(); }),
      el("span", { cls: "count", id: "shown-count" }));
    familyNote.textContent = "";
    familyNote.append(el("span", { text: family.headline + (family.scale ? " (" + family.scale + ", " +
      (family.higher ? "higher" : "lower") + " is better)" : "") + ". Failing: an error, an invalid answer, or a " +
      "score below half of the best score the family gives." }));
    if (family.source) familyNote.append(el("br"), el("span", { cls: "source", text: "Source: " + family.source }));
    drawGrid();
  }

  function cellPasses(cell) {
    if (state.status && STATUS_NAMES[cell[2]] !== state.status) return false;
    if (state.failing && !cell[4]) return false;
    return true;
  }

  function colour(family, score) {
    const span = family.high - family.low;
    let t = span > 0 ? (score - family.low) / span : 1;
    t = Math.max(0, Math.min(1, family.higher ? t : 1 - t));
    return "hsl(" + Math.round(t * 120) + ", 65%, " + Math.round(78 - 8 * t) + "%)";
  }

  function drawGrid() {
    const family = familyNamed(state.family);
    const byRow = cellsByRow(family);
    const columns = family.models.map((m, i) => i).filter(i => !state.model || family.models[i] === state.model);
    const shown = [];
    family.rows.forEach((row, line) => {
      if (state.variant && row[2] !== state.variant) return;
      if (state.search && !row[0].toLowerCase().includes(state.search)) return;
      if (!columns.some(c => byRow[line][c] >= 0 && cellPasses(family.cells[byRow[line][c]]))) return;
      shown.push(line);
    });
    if (state.order === "worst") {
      const mean = line => {
        const scores = columns.map(c => byRow[line][c]).filter(i => i >= 0).map(i => family.cells[i][3])
          .filter(s => s !== null);
        const value = scores.length ? scores.reduce((a, b) => a + b, 0) / scores.length : -Infinity;
        return family.higher ? value : -value;
      };
      const means = new Map(shown.map(line => [line, mean(line)]));
      shown.sort((a, b) => means.get(a) - means.get(b));
    } else {
      shown.sort((a, b) => family.rows[a][0] < family.rows[b][0] ? -1 : family.rows[a][0] > family.rows[b][0] ? 1 : 0);
    }
    state.shown = shown; state.columns = columns;
    document.getElementById("shown-count").textContent = shown.length + " of " + family.rows.length + " rows, " +
      columns.length + " of " + family.models.length + " models";
    left.textContent = "";
    const head = el("div", { cls: "head" }, el("div", { cls: "corner", text: "case" + (family.variants.length > 1 ? ":variant" : "") }));
    for (const c of columns) head.append(el("div", { cls: "model", title: family.models[c], text: family.models[c] }));
    const body = el("div", { cls: "body", id: "grid-body" });
    body.style.height = (shown.length * ROW_HEIGHT) + "px";
    const viewport = el("div", { cls: "viewport", id: "viewport" }, head, body);
    left.append(viewport);
    viewport.addEventListener("scroll", () => {
      if (!viewport._pending) {
        viewport._pending = true;
        requestAnimationFrame(() => { viewport._pending = false; drawRows(family, viewport, body); });
      }
    });
    drawRows(family, viewport, body);
  }

  function drawRows(family, viewport, body) {
    const byRow = cellsByRow(family);
    let first = 0, last = state.shown.length;
    if (state.shown.length > DRAW_ALL_UP_TO) {
      first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - MARGIN_ROWS);
      last = Math.min(state.shown.length, first + Math.ceil(viewport.clientHeight / ROW_HEIGHT) + 2 * MARGIN_ROWS);
    }
    body.textContent = "";
    for (let position = first; position < last; position++) {
      const line = state.shown[position];
      const row = family.rows[line];
      const node = el("div", { cls: "row" }, el("div", { cls: "label row-label", title: row[0], text: row[0] }));
      node.style.top = (position * ROW_HEIGHT) + "px";
      for (const c of state.columns) {
        const index = byRow[line][c];
        if (index < 0) { node.append(el("div", { cls: "cell empty" })); continue; }
        const cell = family.cells[index];
        const classes = ["cell", STATUS_NAMES[cell[2]]];
        if (!cellPasses(cell)) classes.push("dim");
        if (cell[5] === state.selected) classes.push("selected");
        const text = cell[2] === 2 ? "error" : number(cell[3], family.scale === "0..1" ? 3 : 1) + (cell[2] === 1 ? " !" : "");
        const div = el("div", { cls: classes.join(" "), "data-item": String(cell[5]), tabindex: "0",
          title: family.models[c] + " on " + row[0] + ": " + (cell[2] === 2 ? "error" : number(cell[3], 4)) +
            (cell[2] === 1 ? " (invalid answers)" : ""),
          text: text, on: { click: () => openItem(cell[5]), keydown: e => { if (e.key === "Enter") openItem(cell[5]); } } });
        if (cell[2] !== 2) div.style.background = colour(family, cell[3] === null ? family.low : cell[3]);
        node.append(div);
      }
      body.append(node);
    }
  }

  // --- one item --------------------------------------------------------------------------------

  async function block(number) {
    if (!blocks.has(number)) {
      const packed = JSON.parse(document.getElementById("ragmatrix-details-" + number).textContent);
      const bytes = Uint8Array.from(atob(packed), ch => ch.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      blocks.set(number, JSON.parse(await new Response(stream).text()));
    }
    return blocks.get(number);
  }

  async function openItem(index) {
    if (!(index >= 0 && index < DATA.items)) return;
    state.selected = index;
    for (const node of document.querySelectorAll(".cell.selected")) node.classList.remove("selected");
    for (const node of document.querySelectorAll('.cell[data-item="' + index + '"]')) node.classList.add("selected");
    aside.textContent = "";
    aside.append(el("p", { text: "Opening..." }));
    let found;
    try {
      const packed = await block(Math.floor(index / DATA.blockItems));
      found = { texts: packed.texts, item: packed.items[index % DATA.blockItems] };
    } catch (error) {
      aside.textContent = "";
      aside.append(el("p", { cls: "note", text: "This browser cannot unpack the item (" + error + ")." }));
      return;
    }
    if (state.selected !== index) return; // another cell was clicked meanwhile
    aside.textContent = "";
    const item = found.item;
    aside.append(el("h2", { id: "detail-title", text: item.id }));
    const field = name => (item.summary.pairs.find(pair => pair[0] === name) || [name, "-"])[1];
    aside.append(el("p", { cls: "status-line", id: "detail-status", text: field("status") + " · score " +
      field("score") + " · " + field("iterations") + " iteration(s) · " + field("errors") + " error(s) · " +
      field("invalid answers") + " invalid answer(s)" }));
    for (const note of item.notes) aside.append(el("p", { cls: "note", text: note }));
    if (item.asked.length) {
      aside.append(el("h3", { text: "what was asked" }));
      for (const p of item.asked) aside.append(part(p, found.texts));
    }
    item.iterations.forEach((parts, i) => {
      aside.append(el("h3", { text: item.iterations.length > 1 ? "iteration " + (i + 1) : "what came back" }));
      for (const p of parts) aside.append(part(p, found.texts));
    });
    aside.append(el("h3", { text: "the item" }));
    aside.append(part(item.summary, found.texts));
    aside.scrollTop = 0;
    history.replaceState(null, "", "#item=" + index);
  }

  function part(p, texts) {
    const box = el("div", { cls: "part part-" + p.kind });
    if (p.kind === "fields") {
      if (!/^iteration \d+$/.test(p.title) && p.title !== "item") box.append(el("h4", { text: p.title }));
      const table = el("table", { cls: "fields" });
      for (const [name, value] of p.pairs) table.append(el("tr", {}, el("th", { text: name }), el("td", { text: value })));
      box.append(table);
    } else if (p.kind === "listing") {
      box.append(el("h4", { text: p.title }));
      if (!p.rows.length) { box.append(el("p", { text: "none" })); return box; }
      const numeric = new Set(p.numeric);
      const table = el("table", {}, el("tr", {}, ...p.header.map(h => el("th", { text: h }))));
      p.rows.forEach((cells, i) => {
        table.append(el("tr", { cls: p.marked[i] ? "marked" : "" },
          ...cells.map((c, j) => el("td", { cls: numeric.has(j) ? "num" : "", text: c }))));
      });
      box.append(table);
    } else {
      box.append(el("h4", { text: p.title }));
      box.append(el("pre", { text: "ref" in p ? texts[p.ref] : p.text }));
    }
    return box;
  }

  // --- what changed, and two models side by side -------------------------------------------------

  function showChanges() {
    state.view = "changes";
    activeTab("changes");
    filters.textContent = "";
    familyNote.textContent = "";
    left.textContent = "";
    const box = el("div", { id: "changes" });
    if (DATA.comparedWith !== null) {
      box.append(el("h3", { text: "Changes since " + DATA.comparedWith + ": " + DATA.changes.length +
        " items, regressions first" }));
      if (!DATA.changes.length) box.append(el("p", { text: "Nothing changed." }));
      else box.append(changeTable(DATA.changes.map(c => ({ kind: c[5], family: c[0], model: c[1], item: c[2],
        old: c[3], now: c[4], index: c[6] })), ["kind", "family", "model", "case", "old", "new", "change"]));
    }
    box.append(sideBySide());
    left.append(box);
  }

  function changeTable(entries, header) {
    const table = el("table", { cls: "changes" }, el("tr", {}, ...header.map(h => el("th", { text: h }))));
    for (const entry of entries) {
      const delta = entry.old !== null && entry.now !== null ? entry.now - entry.old : null;
      const tr = el("tr", { cls: "change" + (entry.index >= 0 ? " openable" : ""), "data-item": String(entry.index) },
        el("td", { cls: "kind-" + entry.kind.replace(/ /g, "-"), text: entry.kind }),
        el("td", { text: entry.family }), el("td", { text: entry.model }), el("td", { text: entry.item }),
        el("td", { cls: "num", text: entry.old === null ? "-" : number(entry.old, 3) }),
        el("td", { cls: "num", text: entry.now === null ? "-" : number(entry.now, 3) }),
        el("td", { cls: "num", text: delta === null ? "" : (delta > 0 ? "+" : "") + number(delta, 3) }));
      if (entry.index >= 0) tr.addEventListener("click", () => openItem(entry.index));
      table.append(tr);
    }
    return table;
  }

  function sideBySide() {
    const box = el("div", { id: "side-by-side" }, el("h3", { text: "Two models side by side" }),
      el("p", { text: "The cases where two models of one family score differently, the second model's worst first." }));
    const families = DATA.families.filter(f => f.models.length > 1);
    if (!families.length) { box.append(el("p", { text: "No family has two models." })); return box; }
    const choice = { family: families[0].name, a: families[0].models[0], b: families[0].models[1] };
    const controls = el("div", { cls: "filters" });
    const out = el("div", {});
    function redraw() {
      const family = familyNamed(choice.family);
      const a = family.models.indexOf(choice.a), b = family.models.indexOf(choice.b);
      const byRow = cellsByRow(family);
      const entries = [];
      family.rows.forEach((row, line) => {
        const i = byRow[line][a], j = byRow[line][b];
        if (i < 0 || j < 0) return;
        const x = family.cells[i][3], y = family.cells[j][3];
        if (x === y) return;
        const worse = (x !== null && y !== null) ? (family.higher ? y - x : x - y) : -Infinity;
        entries.push({ worse: worse, kind: y === null ? "now an error" : x === null ? "fixed" :
          (worse < 0 ? "regression" : "improvement"), family: family.name, model: choice.a + " vs " + choice.b,
          item: row[0], old: x, now: y, index: family.cells[j][5] });
      });
      entries.sort((p, q) => p.worse - q.worse);
      out.textContent = "";
      out.append(el("p", { cls: "count", text: entries.length + " cases differ" }));
      out.append(changeTable(entries, ["", "family", "models", "case", choice.a, choice.b, "change"]));
    }
    function controlsFor() {
      const family = familyNamed(choice.family);
      controls.textContent = "";
      controls.append(
        select("pair-family", "family", families.map(f => [f.name, f.name]), choice.family, v => {
          const f = familyNamed(v); choice.family = v; choice.a = f.models[0]; choice.b = f.models[1]; controlsFor(); }),
        select("pair-a", "first", family.models.map(m => [m, m]), choice.a, v => { choice.a = v; redraw(); }),
        select("pair-b", "second", family.models.map(m => [m, m]), choice.b, v => { choice.b = v; redraw(); }));
      redraw();
    }
    controlsFor();
    box.append(controls, out);
    return box;
  }

  // --- start --------------------------------------------------------------------------------------

  const hash = /^#item=(\d+)$/.exec(location.hash);
  if (DATA.comparedWith !== null) showChanges();
  else if (DATA.families.length) showFamily(DATA.families[0].name);
  else left.append(el("p", { text: "No result rows." }));
  if (hash) openItem(Number(hash[1]));
  document.body.setAttribute("data-ready", "yes");
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
})();

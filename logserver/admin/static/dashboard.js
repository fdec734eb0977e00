// The logserver dashboard: reads the server-sent samples of /dashboard/events and draws
// them. Hand-written SVG charts; no library and nothing fetched from elsewhere.
"use strict";

const WINDOW_SECONDS = 120;
const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2",
                 "#db2777", "#4b5563"];
const SVG = "http://www.w3.org/2000/svg";
let samples = [];

function el(tag, attrs, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                      : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function human(n, unit) {
  if (n === null || n === undefined) return "–";
  const units = unit === "B" ? ["B", "KiB", "MiB", "GiB", "TiB"] : ["", "k", "M", "G"];
  const step = unit === "B" ? 1024 : 1000;
  let i = 0;
  while (Math.abs(n) >= step && i < units.length - 1) { n /= step; i++; }
  const digits = i === 0 && Number.isInteger(n) ? 0 : 1;
  return n.toFixed(digits) + (unit === "B" ? " " : "") + units[i];
}

function niceMax(value) {
  if (value <= 0) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * power >= value) return m * power;
  return 10 * power;
}

// series: [{name, points: [[time, value], ...]}]
function drawChart(svg, legend, series) {
  const W = Math.max(Math.round(svg.getBoundingClientRect().width) || 800, 300);
  const H = 220, left = 56, right = 12, top = 8, bottom = 22;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  legend.replaceChildren();
  const latest = samples.length ? samples[samples.length - 1].time : Date.now() / 1000;
  const start = latest - WINDOW_SECONDS;
  let max = 0;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  max = niceMax(max);
  const x = t => left + (W - left - right) * (t - start) / WINDOW_SECONDS;
  const y = v => top + (H - top - bottom) * (1 - v / max);
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    svg.append(el("svg:line", {class: i ? "grid" : "axis", x1: left, x2: W - right,
                               y1: y(v), y2: y(v)}));
    svg.append(el("svg:text", {x: left - 4, y: y(v) + 4, "text-anchor": "end"}, human(v)));
  }
  for (const ago of [120, 90, 60, 30, 0]) {
    svg.append(el("svg:text", {x: x(latest - ago), y: H - 6, "text-anchor": "middle"},
                  ago ? `-${ago}s` : "now"));
  }
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const shown = s.points.filter(([t]) => t >= start);
    const values = shown.map(([, v]) => v);
    svg.append(el("svg:polyline", {
      stroke: colour, "data-series": s.name, "data-values": values.join(","),
      points: shown.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}));
    const last = values.length ? values[values.length - 1] : 0;
    legend.append(el("li", {style: `--colour: ${colour}`, "data-series": s.name,
                            "data-latest": last}, `${s.name}: ${human(last)}`));
  });
}

function seriesOf(key, valueKey, pick) {
  const byName = new Map();
  for (const sample of samples) {
    for (const item of pick(sample)) {
      if (!byName.has(item[key])) byName.set(item[key], []);
      byName.get(item[key]).push([sample.time, item[valueKey]]);
    }
  }
  return [...byName.entries()].sort().map(([name, points]) => ({name, points}));
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map(([attrs, cells]) => {
    const tr = el("tr", attrs);
    for (const cell of cells) tr.append(el("td", typeof cell === "number" ? {class: "num"} : {},
                                           String(cell)));
    return tr;
  }));
}

function render() {
  if (!samples.length) return;
  const now = samples[samples.length - 1];
  drawChart(document.getElementById("throughput"), document.getElementById("throughput-legend"),
            seriesOf("name", "messages_in_per_second", s => s.topics.filter(t => !t.internal)));
  drawChart(document.getElementById("lag"), document.getElementById("lag-legend"),
            seriesOf("group_id", "lag", s => s.groups));
  fillTable("topics", now.topics.filter(t => !t.internal).map(t => [
    {"data-topic": t.name, "data-rate": t.messages_in_per_second, "data-size": t.size_bytes},
    [t.name, t.partitions, human(t.size_bytes, "B"), t.messages,
     human(t.messages_in_per_second), human(t.bytes_in_per_second, "B"),
     human(t.bytes_out_per_second, "B")]]));
  fillTable("groups", now.groups.map(g => [
    {"data-group": g.group_id, "data-lag": g.lag}, [g.group_id, g.state, g.members, g.lag]]));
  fillTable("partitions", now.partitions.map(p => [
    {"data-topic": p.topic, "data-partition": p.partition, "data-leader": p.leader},
    [p.topic, p.partition, p.leader, p.replicas.join(","), p.isr.join(","),
     human(p.size_bytes, "B"), p.log_end_offset === null ? "–" : p.log_end_offset]]));
  const rates = Object.entries(now.requests_per_second || {}).filter(([, r]) => r > 0);
  fillTable("requests", rates.sort((a, b) => b[1] - a[1]).map(([api, r]) => [
    {"data-api": api, "data-rate": r}, [api, human(r)]]));
  const cluster = now.cluster;
  if (cluster) {
    document.getElementById("cluster-id").textContent =
      `${cluster.mode} · cluster ${cluster.cluster_id}`;
    // bytes per second as each broker reports its own (cluster mode; "unreachable": no answer)
    const moved = (b, key) => b.reachable === false ? "unreachable" : human(b[key], "B");
    fillTable("brokers", cluster.brokers.map(b => [
      {"data-node": b.node_id, "data-state": b.state || "alive",
       "data-reachable": b.reachable === false ? "false" : "true"},
      [b.node_id, `${b.host}:${b.port}`,
       b.state === "down" ? "down" : b.node_id === cluster.controller_id ? "controller" : "broker",
       moved(b, "bytes_in_per_second"), moved(b, "bytes_out_per_second")]]));
  }
  renderDevices(now.devices);
}

function renderDevices(devices) {
  const box = document.getElementById("devices");
  if (!devices) return;
  if (!devices.reachable) {
    box.dataset.connected = "";
    box.replaceChildren(el("p", {class: "muted"}, "the MQTT bridge does not answer (starting?)"));
    return;
  }
  box.dataset.connected = devices.connected;
  const summary = el("p", {},
    `${devices.connected} connected · ${devices.sessions} sessions · ` +
    `${devices.subscriptions} subscriptions · ${human(devices.publishes_in_per_second)} ` +
    `publishes in/s · ${human(devices.publishes_out_per_second)} out/s`);
  const table = el("table", {id: "device-list"});
  const head = el("tr");
  for (const h of ["client id", "address", "in", "out", "connected"]) head.append(el("th", {}, h));
  table.append(el("thead"));
  table.tHead.append(head);
  const body = table.createTBody();
  for (const c of devices.clients) {
    const tr = el("tr", {"data-client": c.client_id});
    for (const v of [c.client_id, c.peer, c.msgs_in, c.msgs_out, `${c.connected_s} s`]) {
      tr.append(el("td", {}, String(v)));
    }
    body.append(tr);
  }
  box.replaceChildren(summary, table);
}

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource("/dashboard/events");
  source.addEventListener("history", e => { samples = JSON.parse(e.data); render(); });
  source.onmessage = e => {
    samples.push(JSON.parse(e.data));
    const oldest = samples[samples.length - 1].time - WINDOW_SECONDS - 5;
    while (samples.length && samples[0].time < oldest) samples.shift();
    render();
  };
  source.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; };
  source.onerror = () => { status.dataset.state = "lost"; status.textContent = "reconnecting…"; };
}

connect();

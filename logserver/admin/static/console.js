// The read-only console: polls the admin API (same origin, no other host) and renders
// with textContent only, so record contents are never interpreted as HTML.
"use strict";

const POLL_MS = 3000;
const state = { cluster: null, topics: [], groups: [], browse: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, String(v));
    else node[k] = v;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function showInternal() {
  return document.getElementById("show-internal").checked;
}

function badge(kind, text) {
  return el("span", { class: "badge " + kind }, text);
}

// --- overview -----------------------------------------------------------------------

function renderBrokers(cluster) {
  document.getElementById("cluster-id").textContent = cluster.cluster_id;
  const tbody = document.querySelector("#brokers tbody");
  fill(tbody, cluster.brokers.map((b) => el("tr", {
    "data-node": b.node_id, "data-state": b.state, class: b.state === "down" ? "bad" : "",
  }, el("td", {}, b.node_id), el("td", {}, b.port >= 0 ? `${b.host}:${b.port}` : "unknown"),
  el("td", {}, badge(b.state === "alive" ? "ok" : "bad", b.state)),
  el("td", {}, b.controller ? "controller" : ""))));
}

function health(topic) {
  if (topic.offline_partitions) return "offline";
  if (topic.under_replicated_partitions) return "under-replicated";
  return "ok";
}

function renderTopics(topics) {
  const shown = topics.filter((t) => showInternal() || !t.internal);
  fill(document.querySelector("#topics tbody"), shown.map((t) => {
    const h = health(t);
    return el("tr", { "data-topic": t.name, "data-health": h,
      class: h === "offline" ? "bad" : h === "under-replicated" ? "warn" : "" },
    el("td", {}, t.name), el("td", { class: "num" }, t.partitions.length),
    el("td", { class: "num" }, t.messages), el("td", { class: "num" }, t.messages_in_per_second),
    el("td", {}, badge(h === "ok" ? "ok" : h === "offline" ? "bad" : "warn",
      h === "ok" ? "ok" : `${h} (${t.offline_partitions || t.under_replicated_partitions})`)));
  }));
  const rows = [];
  for (const t of shown) {
    for (const p of t.partitions) {
      const h = p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok";
      rows.push(el("tr", { "data-topic": p.topic, "data-partition": p.partition,
        "data-health": h, "data-leader": p.leader,
        class: h === "offline" ? "bad" : h === "ok" ? "" : "warn" },
      el("td", {}, p.topic), el("td", { class: "num" }, p.partition),
      el("td", {}, p.offline ? "none" : p.leader), el("td", {}, p.replicas.join(",")),
      el("td", {}, p.isr.join(",")), el("td", {}, p.offline_replicas.join(",")),
      el("td", { class: "num" }, p.log_start_offset),
      el("td", { class: "num" }, p.high_watermark)));
    }
  }
  fill(document.querySelector("#partitions tbody"), rows);
  const select = document.getElementById("browse-topic");
  const current = select.value;
  const names = shown.map((t) => t.name);
  if (names.join() !== [...select.options].map((o) => o.value).join()) {
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (names.includes(current)) select.value = current;
  }
}

function renderGroups(groups) {
  fill(document.querySelector("#groups tbody"), groups.map((g) => {
    const row = el("tr", { "data-group": g.group_id, "data-lag": g.lag, class: "clickable" },
      el("td", {}, g.group_id), el("td", {}, g.state), el("td", { class: "num" }, g.members),
      el("td", { class: "num" }, g.coordinator), el("td", { class: "num" }, g.lag));
    row.addEventListener("click", () => { pickGroup(g.group_id); openTab("group"); });
    return row;
  }));
  const select = document.getElementById("group-pick");
  const current = select.value;
  const ids = groups.map((g) => g.group_id);
  if (ids.join() !== [...select.options].map((o) => o.value).join()) {
    select.replaceChildren(...ids.map((id) => el("option", { value: id }, id)));
    if (ids.includes(current)) select.value = current;
  }
  renderGroupDetail();
}

function renderAlerts() {
  const alerts = [];
  for (const b of (state.cluster || { brokers: [] }).brokers) {
    if (b.state === "down") alerts.push(`broker ${b.node_id} is down`);
  }
  for (const t of state.topics) {
    if (t.offline_partitions) alerts.push(`${t.name}: ${t.offline_partitions} offline partition(s)`);
    else if (t.under_replicated_partitions) {
      alerts.push(`${t.name}: ${t.under_replicated_partitions} under-replicated partition(s)`);
    }
  }
  document.getElementById("alerts").replaceChildren(
    ...alerts.map((text) => el("div", { class: "alert" }, text)));
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [cluster, topics, groups] = await Promise.all([
      getJson("/v1/cluster"), getJson("/v1/cluster/topics"), getJson("/v1/groups")]);
    state.cluster = cluster;
    state.topics = topics.topics;
    state.groups = groups.groups;
    renderBrokers(cluster);
    renderTopics(state.topics);
    renderGroups(state.groups);
    renderAlerts();
    status.dataset.state = "live";
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    status.dataset.state = "lost";
    status.textContent = "no answer: " + error.message;
  }
  const kind = document.getElementById("config-kind").value;
  fillConfigNames(kind, false);
}

// --- group lag ----------------------------------------------------------------------

function pickGroup(id) {
  document.getElementById("group-pick").value = id;
  renderGroupDetail();
}

function renderGroupDetail() {
  const id = document.getElementById("group-pick").value;
  const group = state.groups.find((g) => g.group_id === id);
  const info = document.getElementById("group-info");
  const tbody = document.querySelector("#group-detail tbody");
  if (!group) {
    info.textContent = "no group selected";
    fill(tbody, []);
    return;
  }
  info.textContent = `${group.state}, ${group.members} member(s), coordinator broker ` +
    `${group.coordinator}, total lag ${group.lag}`;
  fill(tbody, group.partitions.map((p) => el("tr", {
    "data-topic": p.topic, "data-partition": p.partition, "data-lag": p.lag,
  }, el("td", {}, p.topic), el("td", { class: "num" }, p.partition),
  el("td", { class: "num" }, p.committed_offset), el("td", { class: "num" }, p.high_watermark),
  el("td", { class: "num" }, p.lag))));
}

// --- topic browser ------------------------------------------------------------------

function shownValue(v) {
  if (v === null) return el("span", { class: "muted" }, "null");
  const note = `${v.format}, ${v.size} B` + (v.truncated ? ", cut" : "");
  return el("div", {}, el("pre", { "data-format": v.format }, v.data),
    el("span", { class: "fmt" }, note));
}

async function browse(offset) {
  const topic = document.getElementById("browse-topic").value;
  const params = new URLSearchParams({
    partition: document.getElementById("browse-partition").value || "0",
    format: document.getElementById("browse-format").value,
    max_value_bytes: document.getElementById("browse-cap").value || "4096",
    limit: document.getElementById("browse-limit").value || "20",
  });
  if (offset !== undefined) {
    params.set("offset", String(offset));
  } else if (document.getElementById("browse-from").value === "timestamp") {
    const when = document.getElementById("browse-timestamp").value;
    if (when) params.set("timestamp", String(new Date(when).getTime()));
  } else {
    const value = document.getElementById("browse-offset").value;
    if (value !== "") params.set("offset", value);
  }
  const info = document.getElementById("browse-info");
  const tbody = document.querySelector("#records tbody");
  try {
    const page = await getJson(`/v1/topics/${encodeURIComponent(topic)}/records?${params}`);
    state.browse = page;
    info.textContent = `${page.topic}-${page.partition}: offsets ${page.log_start_offset}` +
      ` to ${page.high_watermark}; showing ${page.records.length} from ${page.start_offset}`;
    info.dataset.start = page.start_offset;
    fill(tbody, page.records.map((r) => el("tr", { "data-offset": r.offset },
      el("td", { class: "num" }, r.offset),
      el("td", {}, new Date(r.timestamp).toISOString(), el("br"),
        el("span", { class: "fmt" }, r.timestamp)),
      el("td", {}, shownValue(r.key)),
      el("td", {}, ...r.headers.map((h) => el("div", {}, h.key + ": ", shownValue(h.value)))),
      el("td", { class: "value" }, shownValue(r.value)))));
  } catch (error) {
    info.textContent = "not read: " + error.message;
    fill(tbody, []);
  }
}

// --- configs and ACLs ---------------------------------------------------------------

function fillConfigNames(kind, force) {
  const select = document.getElementById("config-name");
  const names = kind === "broker"
    ? ((state.cluster || { brokers: [] }).brokers).map((b) => String(b.node_id))
    : state.topics.filter((t) => showInternal() || !t.internal).map((t) => t.name);
  if (force || names.join() !== [...select.options].map((o) => o.value).join()) {
    const current = select.value;
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (names.includes(current)) select.value = current;
  }
}

async function showConfigs() {
  const kind = document.getElementById("config-kind").value;
  const name = document.getElementById("config-name").value;
  const info = document.getElementById("configs-info");
  const tbody = document.querySelector("#configs tbody");
  const path = kind === "broker" ? `/v1/brokers/${encodeURIComponent(name)}/configs`
    : `/v1/topics/${encodeURIComponent(name)}/configs`;
  try {
    const body = await getJson(path);
    info.textContent = `${kind} ${name}: ${body.configs.length} configs`;
    fill(tbody, body.configs.map((c) => el("tr", { "data-config": c.name },
      el("td", {}, c.name), el("td", {}, c.value === null ? "(hidden)" : c.value),
      el("td", {}, c.source))));
  } catch (error) {
    info.textContent = `${kind} ${name}: ` + error.message;
    fill(tbody, []);
  }
}

async function showAcls() {
  const info = document.getElementById("acls-info");
  try {
    const body = await getJson("/v1/acls");
    info.textContent = body.authorizer ? `${body.acls.length} ACL binding(s)`
      : "no authorizer: every principal may do everything";
    fill(document.querySelector("#acls tbody"), body.acls.map((a) => el("tr", {},
      el("td", {}, `${a.resourceType}:${a.resourceName}`), el("td", {}, a.patternType),
      el("td", {}, a.principal), el("td", {}, a.host), el("td", {}, a.operation),
      el("td", {}, a.permissionType))));
  } catch (error) {
    info.textContent = error.message;
  }
}

// --- wiring -------------------------------------------------------------------------

function openTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll("section.tab")) {
    section.hidden = section.id !== "tab-" + name;
  }
  if (name === "acls") showAcls();
}

for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => openTab(button.dataset.tab));
}
document.getElementById("show-internal").addEventListener("change", () => {
  renderTopics(state.topics);
  fillConfigNames(document.getElementById("config-kind").value, true);
});
document.getElementById("browse-from").addEventListener("change", (event) => {
  const byTime = event.target.value === "timestamp";
  document.getElementById("browse-offset").hidden = byTime;
  document.getElementById("browse-timestamp").hidden = !byTime;
});
document.getElementById("browse-form").addEventListener("submit", (event) => {
  event.preventDefault();
  browse();
});
document.getElementById("browse-next").addEventListener("click", () => {
  if (state.browse) browse(state.browse.next_offset);
});
document.getElementById("browse-prev").addEventListener("click", () => {
  if (!state.browse) return;
  const limit = Number(document.getElementById("browse-limit").value || "20");
  browse(Math.max(state.browse.start_offset - limit, state.browse.log_start_offset));
});
document.getElementById("group-pick").addEventListener("change", renderGroupDetail);
document.getElementById("config-kind").addEventListener("change", (event) => {
  fillConfigNames(event.target.value, true);
});
document.getElementById("configs-form").addEventListener("submit", (event) => {
  event.preventDefault();
  showConfigs();
});

refresh();
setInterval(refresh, POLL_MS);

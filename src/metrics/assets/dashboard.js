"use strict";
// The ringmq dashboard: polls /api/stats once a second and draws what it gets. No library,
// no request but to this broker.

const POLL_INTERVAL_MS = 1000;

function byId(id) {
  return document.getElementById(id);
}

function number(n, digits) {
  if (!isFinite(n)) return "0";
  return n.toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 1 : digits });
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return number(n, 1) + " " + units[i];
}

function text(id, value) {
  byId(id).textContent = value;
}

function cell(row, value, numeric) {
  const td = document.createElement("td");
  td.textContent = value;
  if (numeric) td.className = "num";
  row.appendChild(td);
}

function fillTable(id, rows, columns) {
  const body = byId(id).querySelector("tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = document.createElement("tr");
    columns.forEach(([value, numeric]) => cell(tr, value(r), numeric));
    body.appendChild(tr);
  }
}

function drawChart(history) {
  const canvas = byId("chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 28;
  ctx.clearRect(0, 0, w, h);
  let max = 1;
  for (const s of history) max = Math.max(max, s.send_messages_per_s, s.pull_messages_per_s);
  ctx.strokeStyle = "#e4e7ec";
  ctx.fillStyle = "#667085";
  ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = pad / 2 + ((h - pad) * i) / 4;
    ctx.beginPath();
    ctx.moveTo(pad * 2, y);
    ctx.lineTo(w, y);
    ctx.stroke();
    ctx.fillText(number((max * (4 - i)) / 4, 0), 2, y + 4);
  }
  const line = (key, color) => {
    if (history.length < 2) return;
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    history.forEach((s, i) => {
      const x = pad * 2 + ((w - pad * 2) * i) / (history.length - 1);
      const y = pad / 2 + (h - pad) * (1 - s[key] / max);
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    });
    ctx.stroke();
    ctx.lineWidth = 1;
  };
  line("send_messages_per_s", "#2f6fed");
  line("pull_messages_per_s", "#12a150");
}

function render(s) {
  text("broker-name", s.broker.name + " @ " + s.broker.addr);
  text("broker-cluster", s.broker.cluster);
  text("broker-role", s.broker.role);
  text("broker-version", s.broker.version);
  text("ha-state", s.ha.state + (s.ha.lag_bytes === null ? "" : " (" + bytes(s.ha.lag_bytes) + " behind)"));
  text("send-rate", number(s.rates.send_messages_per_s));
  text("send-bytes-rate", bytes(s.rates.send_bytes_per_s) + "/s");
  text("pull-rate", number(s.rates.pull_messages_per_s));
  text("pull-bytes-rate", bytes(s.rates.pull_bytes_per_s) + "/s");
  text("connections", number(s.connections, 0));
  text("parked-pulls", number(s.parked_pulls, 0));
  text("commitlog-size", bytes(s.store.commit_log_max_offset - s.store.commit_log_min_offset));
  text("commitlog-fsyncs", number(s.store.fsyncs, 0) + " fsyncs");
  const system = s.topics.filter((t) => t.system).map((t) => t.name);
  fillTable("topics", s.topics.filter((t) => !t.system), [
    [(t) => t.name],
    [(t) => t.read_queue_nums + "/" + t.write_queue_nums, true],
    [(t) => number(t.rates.send_messages_per_s), true],
    [(t) => number(t.rates.pull_messages_per_s), true],
    [(t) => number(t.totals.send_messages, 0), true],
    [(t) => number(t.totals.pull_messages, 0), true],
  ]);
  text("system-topics", system.length ? "Broker topics: " + system.join(", ") : "");
  fillTable("groups", s.groups, [
    [(g) => g.group],
    [(g) => g.topic],
    [(g) => g.queues, true],
    [(g) => number(g.lag, 0), true],
  ]);
  text("lag-note", s.lag_series_dropped > 0 ? s.lag_series_dropped + " queues not shown (over the bound)" : "");
  drawChart(s.history);
}

async function poll() {
  try {
    const response = await fetch("/api/stats", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
    text("status", "live");
  } catch (e) {
    text("status", "disconnected: " + e.message);
  }
}

poll();
setInterval(poll, POLL_INTERVAL_MS);

"""The lesson page's stylesheet and player, inlined into every page (it must open with no network).

The player only renders the states `steps.py` computed: slider position 0 is the moment of the change, position
i > 0 is the i-th step of the merged timeline; each design shows its state after its latest step at or before
that position. Every design of the lesson has a pane of its own (`L.panes`, in generation order) whose element ids
start with the pane's id (`zk-owners`, `original-owners`, `coord-owners`, `cooperative-owners`,
`consumer-owners`): a ZooKeeper pane draws the znode tree, a broker-side pane the group's state boxes. Diagrams
are drawn at the pane's own width, so five columns keep their text size. `#step=N` in the address opens the page
at position N.
"""

CSS = r"""
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
header { padding: 10px 18px; background: #1d2330; color: #fff; }
header h1 { font-size: 18px; margin: 0 0 2px; } header p { margin: 0; color: #b9c0cf; }
#controls { display: flex; gap: 8px; align-items: center; padding: 10px 18px; background: #fff;
  border-bottom: 1px solid #dde; position: sticky; top: 0; z-index: 2; }
#controls button { font-size: 15px; min-width: 36px; }
#slider { flex: 1; }
#position { font-variant-numeric: tabular-nums; min-width: 210px; text-align: right; }
#current { margin: 10px 18px; padding: 10px 14px; background: #fff; border-left: 6px solid #888; }
#current.zk { border-color: #2f7d4a; } #current.original { border-color: #8a5a00; }
#current.coordinator { border-color: #2b5fa8; } #current.cooperative { border-color: #7a3d9c; }
#current.consumer { border-color: #0f7c80; }
#current .title { font-weight: 600; font-size: 16px; } #current .why { color: #444; }
#current .where { font-size: 12px; color: #555; margin-top: 4px; } #current code { background: #eef; }
#current ul { margin: 4px 0 0; padding-left: 18px; font: 12px monospace; max-height: 90px; overflow: auto; }
main { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; padding: 0 18px 18px; }
section.pane { background: #fff; padding: 10px 14px; border-top: 5px solid #2f7d4a; opacity: 1; }
section.pane.coordinator { border-color: #2b5fa8; } section.pane.original { border-color: #8a5a00; }
section.pane.cooperative { border-color: #7a3d9c; } section.pane.consumer { border-color: #0f7c80; }
p.verdict { margin: 0 0 6px; font-size: 12px; color: #444; }
section.pane.idle { opacity: .8; }
section.pane h2 { font-size: 16px; margin: 0 0 6px; }
.counters { display: flex; gap: 10px; flex-wrap: wrap; margin: 6px 0; }
.counter { background: #f0f2f6; padding: 4px 8px; border-radius: 4px; }
.counter b { font-size: 18px; display: block; font-variant-numeric: tabular-nums; }
.counter.hot b { color: #b3261e; }
svg.diagram { width: 100%; height: auto; background: #fafbfc; border: 1px solid #e4e6ea; }
svg text { font: 12px system-ui, sans-serif; }
.states { display: flex; gap: 4px; margin: 6px 0; }
.states div { flex: 1; min-width: 0; text-align: center; padding: 6px 2px; border: 2px solid #ccd;
  border-radius: 6px; color: #889; font-size: 12px; overflow-wrap: anywhere; }
.states div.on { border-color: #2b5fa8; background: #2b5fa8; color: #fff; font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: 12px; margin: 6px 0; }
td, th { border-bottom: 1px solid #eee; padding: 2px 6px; text-align: left; }
tr.changed td { background: #fff4c2; } td.none { color: #b3261e; font-weight: 600; }
pre.tree { font-size: 12px; background: #f7f7f9; padding: 6px; margin: 6px 0; max-height: 420px; overflow: auto; }
.orphan { color: #b3261e; }
ol.log { font-size: 12px; max-height: 200px; overflow: auto; padding-left: 28px; margin: 6px 0; }
ol.log li { cursor: pointer; } ol.log li.done { color: #667; } ol.log li.now { font-weight: 700; color: #000;
  background: #fff4c2; } ol.log li.future { color: #aab; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
main.many .cols { grid-template-columns: 1fr; }
main.many section.pane { padding: 8px 10px; } main.many .counter b { font-size: 16px; }
"""

JS = r"""
const L = JSON.parse(document.getElementById('lesson-data').textContent);
// a broker-side member's box colour by its phase
const PHASE_FILL = {joining: '#fff4c2', syncing: '#e3ecfb', waiting: '#fff4c2', revoking: '#fde2e1',
  acknowledging: '#e3ecfb', assigned: '#e3ecfb', confirming: '#e3ecfb', fenced: '#fde2e1'};
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
let pos = 0, timer = null;

function latest(design, p) {  // index of the design's latest step at or before slider position p, or -1
  let found = -1;
  for (let i = 0; i < p; i++) if (L.timeline[i].design === design) found = L.timeline[i].index;
  return found;
}
function stateOf(design, idx) { const d = L.designs[design]; return idx < 0 ? d.initial : d.steps[idx].state; }

function counters(el, c, prev) {
  el.innerHTML = Object.entries(c).map(([k, v]) =>
    `<div class="counter${prev && prev[k] !== v ? ' hot' : ''}" data-counter="${esc(k)}"><b>${v}</b>${esc(k)}</div>`)
    .join('');
}
function ownerTable(el, rows, prevRows) {
  el.innerHTML = '<tr><th>partition</th><th>owner</th></tr>' + rows.map(([p, o]) => {
    const changed = prevRows && (prevRows.get(p) || '') !== (o || '');
    return `<tr data-partition="${esc(p)}"${changed ? ' class="changed"' : ''}><td>${esc(p)}</td>` +
      `<td class="owner${o ? '' : ' none'}">${o ? esc(o) : 'none'}</td></tr>`;
  }).join('');
}
function diagram(svg, server, members, marks, step) {
  // drawn in the pane's own pixels (text stays 12 px however many columns); 510 before layout
  const w = Math.max(300, Math.round(svg.clientWidth) || 510), sw = Math.min(120, Math.round(w * 0.22));
  const mw = Math.min(190, Math.round(w * 0.45)), mx = w - mw - 6;
  const h = Math.max(120, 34 * members.length + 20), rows = {};
  let out = `<rect x="6" y="${h / 2 - 24}" width="${sw}" height="48" rx="6" fill="#e8ecf3" stroke="#778"/>` +
    `<text x="${6 + sw / 2}" y="${h / 2 + 4}" text-anchor="middle" font-weight="600">${esc(server)}</text>`;
  members.forEach((m, i) => {
    const y = 14 + i * 34; rows[m] = y + 13;
    const mark = marks[m] || {};
    out += `<rect x="${mx}" y="${y}" width="${mw}" height="26" rx="4" fill="${mark.fill || '#fff'}" stroke="#99a"/>` +
      `<text x="${mx + 6}" y="${y + 17}">${esc(m)} ${esc(mark.text || '')}</text>` +
      (mark.dot ? `<circle cx="${mx + mw - 10}" cy="${y + 13}" r="6" fill="#d97706"><title>notified</title></circle>`
        : '');
  });
  let color = '#333';
  if (step && step.arrow && (rows[step.arrow.src] || rows[step.arrow.dst])) {
    const a = step.arrow;
    color = {notify: '#d97706', conflict: '#b3261e', write: '#2f7d4a', read: '#667', request: '#2b5fa8',
      response: '#2b5fa8'}[a.tone] || color;
    const y1 = rows[a.src] || h / 2, y2 = rows[a.dst] || h / 2;
    const x1 = rows[a.src] ? mx : 6 + sw, x2 = rows[a.dst] ? mx : 6 + sw;
    out += `<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" stroke="${color}" stroke-width="3" ` +
      `marker-end="url(#arr-${svg.id})"/>` +
      `<text x="${(x1 + x2) / 2}" y="${(y1 + y2) / 2 - 6}" text-anchor="middle" fill="${color}">${esc(a.label)}</text>`;
  }
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.innerHTML = `<defs><marker id="arr-${svg.id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" ` +
    `markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="${color}"/></marker></defs>` + out;
}
function stepLog(el, design, idx) {
  const steps = L.designs[design].steps;
  const cls = (i) => (i < idx ? 'done' : i === idx ? 'now' : 'future');
  el.innerHTML = steps.map((s, i) => `<li data-index="${i}" class="${cls(i)}">` +
    `+${s.t.toFixed(3)} s ${esc(s.title)}</li>`).join('');
  const now = el.querySelector('li.now');
  if (now) el.scrollTop = now.offsetTop - el.offsetTop - 60;
}

function renderZk(pane, idx, current) {  // a ZooKeeper design's pane (its id is the design's name)
  const design = pane.design;
  const s = stateOf(design, idx), prev = idx >= 0 ? stateOf(design, idx - 1) : null;
  $(design + '-pane').classList.toggle('idle', !current);
  counters($(design + '-counters'), s.counters, prev && prev.counters);
  const prevRows = prev && new Map(Object.entries(prev.owners).map(([p, n]) => [p, n.thread]));
  ownerTable($(design + '-owners'), s.partitions.map((p) => [p, s.owners[p] ? s.owners[p].thread : null]), prevRows);
  const members = Object.keys(s.members), marks = {};
  members.forEach((m) => {
    const st = s.members[m].status || '';
    marks[m] = {text: st, dot: s.notified.includes(m),
      fill: st.startsWith('backoff') ? '#fde2e1' : st.startsWith('rebalancing') ? '#fff4c2' : '#fff'};
  });
  diagram($(design + '-diagram'), 'ZooKeeper', members, marks, current ? L.designs[design].steps[idx] : null);
  const group = L.designs[design].group, topics = {};
  s.partitions.forEach((p) => { const t = p.slice(0, p.lastIndexOf('/')); (topics[t] = topics[t] || []).push(p); });
  let tree = `/consumers/${group}\n  ids/\n` + Object.entries(s.ids).map(([m, n]) =>
    `    ${m}${n.orphan ? ' <span class="orphan">(dead session, not expired yet)</span>' : ''}\n`).join('');
  tree += '  owners/\n' + Object.entries(topics).map(([t, ps]) => `    ${t}/\n` + ps.map((p) => {
    const n = s.owners[p];
    const dead = n && n.orphan ? ' <span class="orphan">(dead session)</span>' : '';
    return `      ${p.slice(t.length + 1)} → ${n ? esc(n.thread) + dead : '<span class="orphan">(no node)</span>'}\n`;
  }).join('')).join('');
  tree += '  offsets/\n' + Object.entries(topics).map(([t, ps]) => `    ${t}/\n` + ps.map((p) =>
    `      ${p.slice(t.length + 1)} = ${p in s.offsets ? s.offsets[p] : '—'}` +
    `${p in s.consumed ? ' (handed out up to ' + (s.consumed[p] - 1) + ')' : ''}\n`).join('')).join('');
  $(design + '-tree').innerHTML = tree;
  stepLog($(design + '-log'), design, idx);
}

function renderBroker(pane, idx, current) {  // a broker-side design's pane: group state, members, owners
  const d = pane.design, id = pane.id;
  const s = stateOf(d, idx), prev = idx >= 0 ? stateOf(d, idx - 1) : null;
  $(id + '-pane').classList.toggle('idle', !current);
  const box = $(id + '-state');
  box.dataset.state = s.group.state; box.dataset.generation = s.group.generation ?? '';
  box.innerHTML = pane.states.map((x) => `<div class="${x === s.group.state ? 'on' : ''}">` +
    `${esc(x).replace('Rebalance', '<wbr>Rebalance')}</div>`).join('');
  $(id + '-generation').textContent = s.group.generation ?? '—';
  counters($(id + '-counters'), s.counters, prev && prev.counters);
  const owner = (st) => { const m = new Map();
    Object.entries(st.members).forEach(([n, v]) => v.partitions.forEach((p) =>
      m.set(p, `${n} (${pane.unit} ${v.generation})`)));
    return m; };
  const now = owner(s);
  ownerTable($(id + '-owners'), s.partitions.map((p) => [p, now.get(p) || null]), prev && owner(prev));
  const members = Object.keys(s.members), marks = {};
  members.forEach((m) => { const v = s.members[m];
    marks[m] = {text: `${v.phase}${v.generation !== null ? ' ' + pane.short + v.generation : ''}`,
      fill: PHASE_FILL[v.phase] || '#fff'}; });
  diagram($(id + '-diagram'), 'coordinator', members, marks, current ? L.designs[d].steps[idx] : null);
  stepLog($(id + '-log'), d, idx);
}

function render() {
  const entry = pos > 0 ? L.timeline[pos - 1] : null;
  for (const pane of L.panes) {
    if (!L.designs[pane.design]) continue;
    const draw = pane.kind === 'zk' ? renderZk : renderBroker;
    draw(pane, latest(pane.design, pos), entry && entry.design === pane.design);
  }
  $('slider').value = pos;
  $('position').textContent = `step ${pos} / ${L.timeline.length}` +
    (entry ? `, +${entry.t.toFixed(3)} s` : ', the change');
  const cur = $('current');
  cur.className = entry ? entry.design : '';
  if (!entry) {
    cur.innerHTML = `<div class="title">Before the change: ${esc(L.change)}</div><div class="why">Move the slider ` +
      'or press play. Each step is one record of the run\'s traces; each design starts at its own change.</div>';
  } else {
    const s = L.designs[entry.design].steps[entry.index];
    const where = s.code ? `<a href="${esc(s.code.href)}">${esc(s.code.path)}:${s.code.line}</a> ` +
      `<code>${esc(s.code.name)}</code>` : '';
    const name = L.labels[entry.design] || entry.design;
    cur.innerHTML = `<div class="title">[${name}] ${esc(s.title)}</div>` +
      `<div class="why">${esc(s.explain)}</div><div class="where">in this repo: ${where}` +
      `${s.kafka && s.kafka !== '—' ? ' · Kafka: <code>' + esc(s.kafka) + '</code>' : ''}</div>` +
      (s.detail.length ? '<ul>' + s.detail.map((d) => `<li>${esc(d)}</li>`).join('') + '</ul>' : '');
  }
}
function go(p) { pos = Math.max(0, Math.min(L.timeline.length, p)); render(); }
function play() {
  if (timer) { clearInterval(timer); timer = null; $('play').textContent = 'play'; return; }
  if (pos >= L.timeline.length) pos = 0;
  $('play').textContent = 'pause';
  timer = setInterval(() => { if (pos >= L.timeline.length) play(); else go(pos + 1); }, Number($('speed').value));
}
$('slider').max = L.timeline.length;
$('slider').addEventListener('input', (e) => go(Number(e.target.value)));
$('first').onclick = () => go(0); $('prev').onclick = () => go(pos - 1);
$('next').onclick = () => go(pos + 1); $('last').onclick = () => go(L.timeline.length);
$('play').onclick = play;
document.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowRight') go(pos + 1);
  else if (e.key === 'ArrowLeft') go(pos - 1);
  else if (e.key === ' ') { e.preventDefault(); play(); }
});
for (const {design, id} of L.panes) {
  const log = id + '-log';
  if (!L.designs[design]) {
    $(log).closest('section').innerHTML += '<p>This design was not run for this case.</p>';
    continue;
  }
  $(log).addEventListener('click', (e) => { const li = e.target.closest('li'); if (!li) return;
    const i = L.timeline.findIndex((x) => x.design === design && x.index === Number(li.dataset.index)); go(i + 1); });
}
const m = /step=(\d+)/.exec(location.hash);
go(m ? Number(m[1]) : 0);
"""

// The dashboard in a real browser: Debian's chromium, headless, driven over the DevTools
// protocol (cdp.mjs), against a real poold running the example plugins. Each page loads
// without a console error and shows what poold holds: a submitted task found by id, a dead
// letter replayed from the page and then completed, a worker killed from the page and
// replaced, a schedule paused and resumed from its page (its buttons absent, and a post
// refused, with the read token). The admin actions fail without the admin token. While the
// admin is logged in, a page of another origin (a server of this script's on another port, reached as 127.0.0.1,
// which is the same site, and as localhost, which is not) posts forms and fetches to the
// dashboard and the API: nothing changes, nothing is read back. A page of a name that
// resolves to 127.0.0.1 (DNS rebinding, evil.example here) reads nothing from poold. A
// screenshot of each page goes to OUT_DIR/screenshots/.
//
// Usage: node dashboard_test.mjs BIN_DIR PLUGIN_DIR OUT_DIR   (exit 77: no chromium; ctest
// runs it through run_dashboard_test.sh, which skips likewise without node)
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Browser } from './cdp.mjs';

const [binDir, pluginDir, outDir] = process.argv.slice(2);
const CHROMIUM = '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`SKIPPED: no ${CHROMIUM} (scripts/deps.sh installs Debian's chromium)`);
  process.exit(77);
}
const ADMIN = 'admin-token-' + Math.random().toString(16).slice(2).padEnd(16, '0');
const READ = 'read-token-' + Math.random().toString(16).slice(2).padEnd(16, '0');
const shots = join(outDir, 'screenshots');
mkdirSync(shots, { recursive: true });

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

// --- poold on a scratch dir --------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'sandpool-browser-'));
for (const [name, token] of [['admin.token', ADMIN], ['read.token', READ]]) {
  writeFileSync(join(dir, name), token + '\n');
  chmodSync(join(dir, name), 0o600);
}
const plugin = (n) => join(pluginDir, `lib${n}.so`);
writeFileSync(join(dir, 'poold.yaml'), `service:
  socket: {path: ${dir}/poold.sock, mode: "0600"}
  state_dir: ${dir}/state
  http: {listen: 127.0.0.1:0, read_token_file: ${dir}/read.token, admin_token_file: ${dir}/admin.token}
pools:
  - name: echo
    plugin: ${plugin('echo')}
    workers: {min: 1, max: 4, initial: 2}
  - name: upper
    plugin: ${plugin('upper')}
  - name: fail
    plugin: ${plugin('fail')}
  # One worker and a queue ttl: a task queued behind a long one expires (dead-lettered
  # "expired") and completes when replayed.
  - name: sleep
    plugin: ${plugin('sleep')}
    workers: {initial: 1, max: 1}
    concurrency: 1
    queue: {ttl: 300ms}
`);
const poold = spawn(join(binDir, 'poold'), ['--config', join(dir, 'poold.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
const addr = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('poold did not start:\n' + log)), 60000);
  const take = (d) => {
    log += d;
    const m = log.match(/poold ready .*http=(127\.0\.0\.1:\d+)/);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  };
  poold.stdout.on('data', take);
  poold.stderr.on('data', take);
  poold.on('exit', (code) => reject(new Error(`poold exited ${code}:\n${log}`)));
});
const base = `http://${addr}`;
console.log(`poold at ${base}`);

async function api(method, path, body, token = ADMIN) {
  const r = await fetch(base + path, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

// The state of task `id` once `pred` holds for it, read every 20 ms (throws after 60 s).
async function stateOf(id, pred) {
  const end = Date.now() + 60000;
  for (;;) {
    const state = (await api('GET', `/api/v1/tasks/${id}`)).body.state;
    if (pred(state)) return state;
    if (Date.now() > end) throw new Error(`task ${id} stayed ${state}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The events of `pool` as they come, for waiting on one (an SSE stream read by node).
async function eventStream(pool) {
  const r = await fetch(`${base}/api/v1/events?pool=${pool}`, { headers: { Authorization: `Bearer ${READ}` } });
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  return {
    async until(pred, timeoutMs = 60000) {
      const end = Date.now() + timeoutMs;
      while (Date.now() < end) {
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.startsWith('data: ')) {
            const e = JSON.parse(line.slice(6));
            if (pred(e)) return e;
          }
        }
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
      }
      throw new Error('no such event');
    },
    close() { reader.cancel(); },
  };
}

// A schedule firing every 2 s into `upper`, its tenant markup (shown escaped on the schedules
// page); the schedule as poold shows it.
const tick = await api('POST', '/api/v1/schedule_add', { name: 'tick', every: '2s', pool: 'upper', type: 'upper', payload: 'tick', tenant: '<i>t</i>' });
if (tick.status !== 200) throw new Error(`schedule_add: ${JSON.stringify(tick.body)}`);
const schedule = async () => (await api('GET', '/api/v1/schedule_show?name=tick')).body;

// evil.example resolves to 127.0.0.1, as a DNS-rebinding page's name would (no HTTPS upgrade:
// nothing listens for TLS).
const browser = await Browser.launch(CHROMIUM, ['--host-resolver-rules=MAP evil.example 127.0.0.1',
                                                '--disable-features=HttpsUpgrades']);
try {
  const page = await browser.newPage();
  const visit = async (path, shot) => {
    page.errors.length = 0;
    await page.goto(base + path);
    if (shot) writeFileSync(join(shots, shot + '.png'), await page.screenshot());
    check(page.errors.length === 0, `${path} loads without console errors ${page.errors.join('; ')}`);
  };

  // --- Without a token: tokens are configured, so the pages send an anonymous viewer to the
  // login page, and nothing answers an anonymous request ----------------------------------------
  await visit('/', 'overview-anonymous');
  check(new URL(await page.eval(`location.href`)).pathname === '/login', 'an anonymous viewer is sent to the login page');
  check(await page.eval(`!!document.querySelector('input[name=token]')`), 'the login page asks for a token');
  const refusedForm = await page.eval(`fetch('/ui/drain', {method: 'POST', body: new URLSearchParams({pool: 'echo'})}).then(r => r.status)`);
  check(refusedForm === 401, `a drain form posted without a token is refused (${refusedForm})`);
  const refusedApi = await page.eval(`fetch('/api/v1/pools/echo/drain', {method: 'POST', body: '{}'}).then(r => r.status)`);
  check(refusedApi === 401, `the API refuses a drain without a token (${refusedApi})`);
  const refusedRead = await page.eval(`fetch('/api/v1/pools/echo/stats').then(r => r.status)`);
  check(refusedRead === 401, `the API refuses an anonymous read (${refusedRead})`);

  // With the read token: still no action.
  await visit('/login');
  await page.navigation(() => page.eval(`document.querySelector('input[name=token]').value = ${JSON.stringify(READ)}; document.querySelector('form.stack').submit()`));
  check(await page.eval(`document.getElementById('access').textContent`) === 'read', 'logged in with the read token');
  const readDrain = await page.eval(`fetch('/ui/drain', {method: 'POST', body: new URLSearchParams({pool: 'echo', csrf: document.querySelector('meta[name=csrf]').content})}).then(r => r.status)`);
  check(readDrain === 403, `a drain with the read token is refused (${readDrain})`);
  check((await api('GET', '/api/v1/pools/echo/stats')).body.pools[0].state === 'running', 'the pool still runs');
  await visit('/schedules', 'schedules-read');
  check(await page.eval(`!!document.querySelector('#schedules tr[data-schedule="tick"]')`), 'the read token sees the schedules');
  check(await page.eval(`document.querySelectorAll('#schedules [data-op]').length`) === 0, 'with no pause, resume or run-now button');
  const readPause = await page.eval(`fetch('/ui/schedule_pause', {method: 'POST', body: new URLSearchParams({name: 'tick', csrf: document.querySelector('meta[name=csrf]').content})}).then(r => r.status)`);
  check(readPause === 403, `a schedule pause with the read token is refused (${readPause})`);
  check((await schedule()).paused === false, 'the schedule still runs');
  await page.navigation(() => page.eval(`document.querySelector('form[action="/logout"]').submit()`));

  // --- The admin token, through the login form -----------------------------------------------
  await visit('/login', 'login');
  await page.navigation(() => page.eval(`document.querySelector('input[name=token]').value = ${JSON.stringify(ADMIN)}; document.querySelector('form.stack').submit()`));
  check(await page.eval(`document.getElementById('access').textContent`) === 'admin', 'logged in with the admin token');

  // --- Another origin's page, while the admin is logged in ----------------------------------
  const evil = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(`<!doctype html><title>elsewhere</title>
<form id=drain method=POST action="${base}/ui/drain"><input name=pool value=echo><input name=return value=/></form>
<form id=scale method=POST action="${base}/ui/scale"><input name=pool value=upper><input name=workers value=3></form>
<form id=api method=POST action="${base}/api/v1/pools/echo/drain" enctype=text/plain><input name='{"a":"' value='"}'></form>`);
  });
  await new Promise((r) => evil.listen(0, '127.0.0.1', r));
  const evilPort = evil.address().port;
  const upperBefore = (await api('GET', '/api/v1/pools/upper/stats')).body.pools[0].target_workers;
  const unchanged = async (what) => {
    const echo = (await api('GET', '/api/v1/pools/echo/stats')).body.pools[0];
    const upper = (await api('GET', '/api/v1/pools/upper/stats')).body.pools[0];
    check(echo.state === 'running' && upper.target_workers === upperBefore,
          `${what}: nothing changed (echo ${echo.state}, upper's target ${upper.target_workers})`);
  };
  for (const origin of [`http://127.0.0.1:${evilPort}`, `http://localhost:${evilPort}`]) {
    await page.goto(origin + '/');
    const sent = await page.eval(`Promise.all([
      fetch('${base}/api/v1/pools/echo/drain', {method: 'POST', body: '{}', credentials: 'include', mode: 'no-cors'}).then(() => 'sent', () => 'failed'),
      fetch('${base}/ui/drain', {method: 'POST', body: new URLSearchParams({pool: 'echo'}), credentials: 'include', mode: 'no-cors'}).then(() => 'sent', () => 'failed'),
      fetch('${base}/api/v1/status', {credentials: 'include'}).then((r) => r.text(), () => 'unreadable'),
    ])`);
    check(sent[2] === 'unreadable', `${origin}: a fetch of the API reads nothing back (${String(sent[2]).slice(0, 40)})`);
    await unchanged(`${origin}: its fetches to the API and a form's URL`);
    for (const form of ['drain', 'scale', 'api']) {
      await page.goto(origin + '/');
      await page.navigation(() => page.eval(`document.getElementById('${form}').submit()`));
      await unchanged(`${origin}: its ${form} form`);
    }
  }
  evil.close();
  // DNS rebinding: a page of evil.example, which now resolves to 127.0.0.1, at poold's port.
  const port = base.slice(base.lastIndexOf(':') + 1);
  await page.goto(`http://evil.example:${port}/`);
  check(!(await page.eval(`document.body.innerText`)).includes('echo'), 'a page of evil.example at poold\'s port shows none of poold\'s pools');
  // Refused (421), or not even sent: the 421 page's CSP (default-src 'none') blocks the fetch.
  const rebound = await page.eval(`fetch('/api/v1/status').then((r) => r.status, () => 'blocked')`);
  check(rebound === 421 || rebound === 'blocked', `a page of evil.example at poold's port reads no status (${rebound})`);
  await page.goto(base + '/');
  check(await page.eval(`document.getElementById('access').textContent`) === 'admin', 'the admin is still logged in');

  // A submitted task, found by id.
  const done = await api('POST', '/api/v1/pools/upper/tasks', { type: 'upper', payload: 'found <by> id', wait: true });
  check(done.body.state === 'completed', 'a task submitted over the API completed');
  await visit('/tasks', 'tasks');
  await page.navigation(() => page.eval(`document.querySelector('input[name=id]').value = '${done.body.id}'; document.querySelector('form[action="/tasks"]').submit()`));
  check(await page.eval('location.pathname') === `/tasks/${done.body.id}`, 'the find form leads to the task');
  check(await page.eval(`document.getElementById('task-state').textContent`) === 'completed', 'its page says completed');
  check(await page.eval(`document.querySelector('pre.preview').textContent`) === 'FOUND <BY> ID', 'and shows its result, escaped');
  check(await page.eval(`document.getElementById('task-payload').textContent`) === 'found <by> id', 'and the payload it was submitted with');
  writeFileSync(join(shots, 'task.png'), await page.screenshot());
  await visit('/tasks?pool=upper&state=completed', 'task-search');
  check(await page.eval(`!!document.querySelector('#tasks tr[data-task="${done.body.id}"]')`), 'the search by pool and state lists it');
  check(page.errors.length === 0, `the task page has no console errors ${page.errors.join('; ')}`);

  // A tenant's scheduled task: its tenant and due time in the tasks view, the tenant's
  // waiting count on its pool's page; then cancelled.
  const later = await api('POST', '/api/v1/pools/upper/tasks', { type: 'upper', payload: 'later', tenant: 'acme', delay_ms: 3600000 });
  check(later.status < 300, `a scheduled task with a tenant is accepted (${later.status})`);
  await visit('/tasks?tenant=acme', 'tasks-tenant');
  const row = `#tasks tr[data-task="${later.body.id}"]`;
  check(await page.eval(`document.querySelector('${row} [data-k=tenant]')?.textContent`) === 'acme', 'the tasks view shows its tenant');
  check((await page.eval(`document.querySelector('${row} [data-k=state]')?.textContent`) ?? '').startsWith('scheduled due '), 'and its state scheduled with its due time');
  check(await page.eval(`document.querySelectorAll('#tasks tr[data-task]').length`) === 1, 'the tenant filter leaves out the other tenants\' tasks');
  await visit('/pools/upper', 'pool-tenants');
  check(await page.eval(`document.querySelector('#tenants tr[data-tenant="acme"] td:last-child')?.textContent`) === '1', 'the pool page counts the tenant\'s waiting task');
  check(await page.eval(`document.getElementById('pool-scheduled')?.textContent`) === '1', 'and the pool\'s scheduled tasks');
  await api('POST', `/api/v1/tasks/${later.body.id}/cancel`);

  // A dead letter replayed from the page, then completed. A task queued behind one that sleeps
  // until the test cancels it waits past the queue's ttl however slowly this machine runs.
  // The blocker itself waits in that queue until the pool's one worker takes it: one that a
  // slow dispatch let expire there is replaced by another (its letter is not the one below).
  let blocker;
  for (let tries = 1; ; tries++) {
    blocker = await api('POST', '/api/v1/pools/sleep/tasks', { type: 'sleep', payload: '600000' });
    const state = await stateOf(blocker.body.id, (s) => s !== 'queued');
    if (state === 'dispatched' || state === 'running') break;
    if (tries === 5) throw new Error(`no blocker reached the worker: the 5th was ${state}`);
  }
  const expired = await api('POST', '/api/v1/pools/sleep/tasks', { type: 'sleep', payload: '1', wait: true });
  check(expired.body.state === 'dead_lettered' && expired.body.reason === 'expired', `a task queued past the ttl is dead-lettered expired (${expired.body.reason})`);
  const unblocked = await api('POST', `/api/v1/tasks/${blocker.body.id}/cancel`);
  check(unblocked.body.cancelled === true, `the blocker is cancelled (${JSON.stringify(unblocked.body)})`);
  await api('GET', `/api/v1/tasks/${blocker.body.id}/wait`);
  await visit('/dlq?pool=sleep', 'dead-letters');
  const letter = await page.eval(`[...document.querySelectorAll('#letters tr[data-letter]')]
    .find((r) => r.querySelector('a[href="/tasks/${expired.body.id}"]'))?.dataset.letter`);
  check(!!letter, `the expired task's letter is listed (${letter})`);
  await page.navigation(() => page.eval(`document.querySelector('#letters input[value="${letter}"]').checked = true; document.querySelector('button[value=replay_selected]').click()`));
  check((await page.eval(`document.getElementById('flash')?.textContent`)) === 'replayed 1 letter(s)', 'the page says the letter was replayed');
  const replayed = await api('GET', `/api/v1/tasks/${expired.body.id}/wait`);
  check(replayed.body.state === 'completed', `the replayed task completed (${replayed.body.state})`);
  await visit(`/tasks/${expired.body.id}`);
  check(await page.eval(`document.getElementById('task-state').textContent`) === 'completed', 'its page says completed');

  // A worker killed from the page, and replaced.
  await visit('/pools/echo', 'pool');
  const victim = await page.eval(`document.querySelector('#workers tr[data-pid]').dataset.pid`);
  const events = await eventStream('echo');
  await page.navigation(() => page.eval(`document.querySelector('#workers tr[data-pid="${victim}"] [data-op=kill_worker]').click()`));
  check((await page.eval(`document.getElementById('flash')?.textContent`)) === 'kill_worker: signal sent', 'the page says the signal was sent');
  await events.until((e) => e.event === 'worker_exited' && String(e.pid) === victim);
  const ready = await events.until((e) => e.event === 'worker_ready');
  events.close();
  await visit('/pools/echo');
  const pids = await page.eval(`[...document.querySelectorAll('#workers tr[data-pid]')].map(r => r.dataset.pid)`);
  check(!pids.includes(victim) && pids.includes(String(ready.pid)), `the killed worker ${victim} is replaced by ${ready.pid} (${pids})`);

  // The schedules page: next run, last slot's task and how it ended, counts; paused and
  // resumed from the page.
  const fired = Date.now() + 60000;
  while ((await schedule()).fired === 0 || (await schedule()).last_task === undefined) {
    if (Date.now() > fired) throw new Error('the schedule never fired');
    await new Promise((r) => setTimeout(r, 50));
  }
  const lastTask = (await schedule()).last_task;
  await api('GET', `/api/v1/tasks/${lastTask}/wait`);
  await visit('/schedules', 'schedules');
  const tickRow = '#schedules tr[data-schedule="tick"]';
  const cell = (k) => page.eval(`document.querySelector('${tickRow} [data-k=${k}]')?.textContent`);
  check(await page.eval(`!!document.querySelector('nav a[href="/schedules"]')`), 'the menu leads to the schedules page');
  check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(await cell('next')), `its next run is shown (${await cell('next')})`);
  check(Number(await cell('fired')) >= 1, `its fired count is shown (${await cell('fired')})`);
  check((await cell('task')).includes('<i>t</i>') && !(await page.eval(`!!document.querySelector('${tickRow} i')`)), 'its tenant shows as text, not markup');
  // The last slot's task, by its link (a later slot may have fired since the page asked).
  const shownTask = await page.eval(`document.querySelector('${tickRow} [data-k=last] a').getAttribute('href')`);
  check(/^\/tasks\/\d+$/.test(shownTask) && Number(shownTask.slice(7)) >= lastTask, `its last slot's task is linked (${shownTask})`);
  check(['completed', 'queued', 'dispatched', 'running'].includes(await cell('last_state')), `and how it stands (${await cell('last_state')})`);
  check(await cell('outcome') === 'fired', `its last outcome (${await cell('outcome')})`);
  await page.navigation(() => page.eval(`document.querySelector('${tickRow} [data-op=schedule_pause]').click()`));
  check((await page.eval(`document.getElementById('flash')?.textContent`)) === 'schedule_pause: done', 'the page says the schedule was paused');
  check((await schedule()).paused === true, 'poold holds it paused');
  check(await cell('paused') === 'yes' && await cell('next') === 'paused', 'the page shows it paused, with no next run');
  writeFileSync(join(shots, 'schedules-paused.png'), await page.screenshot());
  await page.navigation(() => page.eval(`document.querySelector('${tickRow} [data-op=schedule_resume]').click()`));
  check((await schedule()).paused === false, 'resumed from the page');
  check(await cell('paused') === 'no', 'the page shows it running again');
  await page.navigation(() => page.eval(`document.querySelector('${tickRow} [data-op=schedule_run_now]').click()`));
  check((await page.eval(`document.getElementById('flash')?.textContent`)) === 'schedule_run_now: done', 'run now from the page');
  check(page.errors.length === 0, `the schedules page has no console errors ${page.errors.join('; ')}`);

  // The events page: the recent events without script, live ones with it.
  await visit('/events', 'events');
  await page.until(`document.getElementById('live-note').textContent.startsWith('Live')`);
  // The task is submitted after the page loaded, so a row of its own came over the stream.
  const live = await api('POST', '/api/v1/pools/echo/tasks', { type: 'echo', payload: 'live', wait: true });
  const liveRow = await page.until(`[...document.querySelectorAll('#events tbody tr')]
    .map((r) => [...r.cells].map((c) => c.textContent))
    .find((c) => c[2] === 'task_ended' && c[4] === '${live.body.id}')?.join(' | ')`);
  check(/^[^|]+ \| echo \| task_ended \| [^|]* \| \d+ \| completed \| /.test(liveRow),
        `the task's end appeared live: ${liveRow}`);

  // The overview with its charts (the README's screenshot).
  await visit('/');
  await page.until(`!document.getElementById('charts').hidden`);
  await api('POST', '/api/v1/pools/echo/tasks', { type: 'echo', payload: 'x', wait: true });
  await page.until(`document.querySelector('tr[data-pool=echo] [data-k=completed]').textContent !== '0'`);
  writeFileSync(join(shots, 'overview.png'), await page.screenshot());
  check(page.errors.length === 0, `the overview stays free of console errors ${page.errors.join('; ')}`);
} catch (e) {
  console.log('FAIL ' + e.stack);
  failures++;
} finally {
  await browser.close();
  poold.kill('SIGTERM');
  await new Promise((r) => (poold.exitCode !== null ? r() : poold.on('exit', r)));
  rmSync(dir, { recursive: true, force: true });
}
console.log(failures === 0 ? `all checks passed; screenshots in ${shots}` : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);

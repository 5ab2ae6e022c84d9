// A small Chrome DevTools Protocol client over --remote-debugging-pipe: no npm package, no
// browser download. Debian's chromium is started headless with the pipe on fds 3 (to the
// browser) and 4 (from it); messages are JSON, each ended by a NUL byte.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class Browser {
  // `extraArgs`: more command-line switches (e.g. --host-resolver-rules).
  static async launch(executable = '/usr/bin/chromium', extraArgs = []) {
    const profile = mkdtempSync(join(tmpdir(), 'sandpool-chromium-'));
    const args = ['--headless=new', '--remote-debugging-pipe', '--disable-gpu', '--no-first-run',
                  '--no-default-browser-check', '--disable-extensions', '--mute-audio',
                  '--disable-background-networking', '--disable-component-update',
                  `--user-data-dir=${profile}`, '--window-size=1280,900', ...extraArgs, 'about:blank'];
    // As root, Chromium refuses to start without this (its sandbox needs an unprivileged user).
    if (process.getuid && process.getuid() === 0) args.unshift('--no-sandbox');
    const child = spawn(executable, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
    const b = new Browser(child, profile);
    child.stderr.on('data', (d) => { b.stderr += d; });
    await b.send('Target.setDiscoverTargets', { discover: true });
    return b;
  }

  constructor(child, profile) {
    this.child = child;
    this.profile = profile;
    this.stderr = '';
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Set();
    let buf = Buffer.alloc(0);
    child.stdio[4].on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let end;
      while ((end = buf.indexOf(0)) >= 0) {
        const msg = JSON.parse(buf.subarray(0, end).toString('utf8'));
        buf = buf.subarray(end + 1);
        this.dispatch(msg);
      }
    });
    child.on('exit', (code) => {
      for (const { reject } of this.pending.values()) reject(new Error(`chromium exited ${code}: ${this.stderr}`));
      this.pending.clear();
    });
  }

  dispatch(msg) {
    if (msg.id !== undefined) {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
      else p.resolve(msg.result);
      return;
    }
    for (const l of [...this.listeners]) l(msg);
  }

  send(method, params = {}, sessionId = undefined) {
    const id = this.nextId++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.child.stdio[3].write(JSON.stringify(msg) + '\0');
    });
  }

  // Resolves with the first event `method` of `sessionId` for which `pred` holds.
  waitFor(method, sessionId, pred = () => true, timeoutMs = 60000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.listeners.delete(l); reject(new Error(`timed out waiting for ${method}`)); }, timeoutMs);
      const l = (msg) => {
        if (msg.method === method && msg.sessionId === sessionId && pred(msg.params)) {
          clearTimeout(timer);
          this.listeners.delete(l);
          resolve(msg.params);
        }
      };
      this.listeners.add(l);
    });
  }

  async newPage() {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.init();
    return page;
  }

  async close() {
    try { await this.send('Browser.close'); } catch (e) { /* already gone */ }
    await new Promise((r) => (this.child.exitCode !== null ? r() : this.child.on('exit', r)));
    rmSync(this.profile, { recursive: true, force: true });
  }
}

export class Page {
  constructor(browser, sessionId) {
    this.b = browser;
    this.s = sessionId;
    this.errors = [];  // console errors, uncaught exceptions, failed loads, CSP reports
    browser.listeners.add((msg) => {
      if (msg.sessionId !== sessionId) return;
      if (msg.method === 'Runtime.consoleAPICalled' && msg.params.type === 'error') {
        this.errors.push('console.error: ' + msg.params.args.map((a) => a.value ?? a.description).join(' '));
      } else if (msg.method === 'Runtime.exceptionThrown') {
        this.errors.push('exception: ' + (msg.params.exceptionDetails.exception?.description ?? msg.params.exceptionDetails.text));
      } else if (msg.method === 'Log.entryAdded' && msg.params.entry.level === 'error') {
        this.errors.push('log: ' + msg.params.entry.text + ' ' + (msg.params.entry.url ?? ''));
      }
    });
  }

  send(method, params = {}) { return this.b.send(method, params, this.s); }

  async init() {
    await this.send('Page.enable');
    await this.send('Runtime.enable');
    await this.send('Log.enable');
    await this.send('Emulation.setDeviceMetricsOverride', { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
  }

  // Runs `action` (which starts a navigation) and waits for the new page's load event.
  async navigation(action) {
    const loaded = this.b.waitFor('Page.loadEventFired', this.s);
    await action();
    await loaded;
  }

  goto(url) {
    return this.navigation(async () => {
      const r = await this.send('Page.navigate', { url });
      if (r.errorText) throw new Error(`${url}: ${r.errorText}`);
    });
  }

  // The value of `expression` in the page (a promise is awaited).
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  }

  // Waits until `expression` is truthy in the page, checking every 20 ms.
  async until(expression, timeoutMs = 60000) {
    return this.eval(`new Promise((resolve, reject) => {
      const end = Date.now() + ${timeoutMs};
      const check = () => {
        let v; try { v = (${expression}); } catch (e) { v = false; }
        if (v) return resolve(v);
        if (Date.now() > end) return reject(new Error('timed out: ' + ${JSON.stringify(expression)}));
        setTimeout(check, 20);
      };
      check();
    })`);
  }

  async screenshot() {
    const { data } = await this.send('Page.captureScreenshot', { format: 'png' });
    return Buffer.from(data, 'base64');
  }
}

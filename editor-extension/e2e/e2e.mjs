// The extension end to end, in a real VS Code: code-server with the built .vsix, driven in headless Chromium.
//
// It installs the extension, opens a workspace whose .venv holds mcphost and whose settings point at a config with
// the bundled todo server upstream, while a terminal's `mcphost serve` runs for that config: the window attaches to
// that daemon, and when it ends, the extension starts its own, the real daemon. Then, as an agent would (with the
// MCP TypeScript SDK's client), it calls through the daemon's MCP endpoint: a write call, whose notification it
// finds in the page, still there after VS Code would have hidden an ordinary one, brought back from the status bar,
// and allowed, and whose record it finds in the activity view (and opens); and destructive calls, whose modal it
// finds and denies, then allows. Fewer, better questions: a prompt a [[rules]] entry asked names the rule and its
// reason; two writes made at once come as one batch notification ("Allow all"); "Always allow" asks what it covers
// (exactly these arguments: the same call passes again unasked, other arguments ask again), and a session allow with a
// pattern refuses a glob the call does not match; the grants list says what each grant covers.
// One prompt per call: once VS Code lists mcphost's tools, the extension offers (a modal) to let mcphost be the only
// one to ask; without it, a write call that goes through VS Code's tool service (a helper extension, e2e/probe, calls
// vscode.lm.invokeTool: agent mode's chat needs a language model, which this machine has not) is confirmed by VS
// Code's dialog and then by mcphost's prompt; "Let mcphost ask" opens VS Code's tool approval list, where the test
// ticks "Run any tool without approval" under mcphost, the answer lands in the user's settings.json beside every entry
// that was there, and the same call then gets mcphost's prompt alone.
// It also checks that the endpoint is registered with VS Code's MCP support, that config errors are errors in the
// daemon log, that a window attaches (on "Restart Daemon" too) to the daemon a terminal or another window runs for
// the same config, whose prompts it answers, and that another program named mcphost is refused.
// Screenshots go to the artifacts dir; with MCPHOST_E2E_DOC_IMAGES=docs/images, the ones the documentation shows go there too.
//
// Run it through e2e/run.sh, which installs the tools and sets MCPHOST_E2E_TOOLS, _VSIX and _MCPHOST.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TOOLS = need('MCPHOST_E2E_TOOLS');
const VSIX = need('MCPHOST_E2E_VSIX');
const MCPHOST = need('MCPHOST_E2E_MCPHOST');
const ARTIFACTS = path.resolve(process.env.MCPHOST_E2E_ARTIFACTS ?? path.join(HERE, 'artifacts'));
// The screenshots README files show: committed, so they always show the extension as it is.
// The documentation's pictures are refreshed only when asked (MCPHOST_E2E_DOC_IMAGES=docs/images), so that a test run
// leaves the checkout as it found it.
const DOC_IMAGES = process.env.MCPHOST_E2E_DOC_IMAGES ? path.resolve(process.env.MCPHOST_E2E_DOC_IMAGES) : null;
const VIEWPORT = { width: 1280, height: 800 };
/** VS Code hides an ordinary notification after 10 to 15 s; a prompt must outlast that. */
const PROMPT_STAYS_MS = 15_000;
/** The reason of the config's one rule (it asks about urgent tasks): a prompt it asks names it. */
const URGENT_REASON = 'urgent tasks notify the whole team';
const CHROMIUM = process.env.MCPHOST_E2E_CHROMIUM ?? '/usr/bin/chromium';
const HEADFUL = process.env.MCPHOST_E2E_HEADFUL === '1';
const CODE_SERVER = path.join(TOOLS, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const requireTool = createRequire(path.join(TOOLS, 'package.json'));
const { chromium } = requireTool('playwright-core');
const { Client } = requireTool('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = requireTool('@modelcontextprotocol/sdk/client/streamableHttp.js');

const PYTHON = path.join(path.dirname(fs.realpathSync(MCPHOST)), 'python');
const PROBE = path.join(HERE, 'probe');
const VSCE = path.join(HERE, '..', 'node_modules', '.bin', 'vsce');
const started = Date.now();
const steps = [];

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`e2e: ${name} is not set: run e2e/run.sh`);
    process.exit(2);
  }
  return value;
}

function log(message) {
  const seconds = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
  console.log(`e2e [${seconds}s] ${message}`);
}

async function step(name, fn) {
  log(`- ${name}`);
  const t0 = Date.now();
  const result = await fn();
  steps.push({ name, ms: Date.now() - t0 });
  return result;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function until(what, fn, timeoutMs = 30_000, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) {
        return value;
      }
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// ---- an agent: the MCP TypeScript SDK's client over streamable HTTP, with the URL and token the daemon publishes

/** A call that waits on a prompt takes as long as the user does (prompt_timeout = 120 s): above the SDK's 60 s. */
const CALL_TIMEOUT_MS = 180_000;

async function connectAgent(url, headers) {
  const client = new Client({ name: 'e2e-agent', version: '1.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** One of mcphost's call_tool_* variants, for the upstream tool `name`, with the agent's intent. */
function callTool(agent, variant, name, args, intent) {
  return agent.callTool({ name: variant, arguments: { name, args, intent } }, undefined, { timeout: CALL_TIMEOUT_MS });
}

/** Monaco renders spaces as no-break spaces. */
function plainText(text) {
  return text.replace(/\u00a0/g, ' ');
}

function textOf(result) {
  return (result?.content ?? []).map((c) => c.text ?? '').join('\n');
}

// ---- the workbench

async function runCommand(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input.input');
  await input.waitFor({ state: 'visible' });
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  await row.waitFor({ state: 'visible', timeout: 15_000 });
  await page.keyboard.press('Enter');
}

function toast(page, text) {
  return page.locator('.notifications-toasts .notification-toast', { hasText: text });
}

async function shot(page, name, options = {}) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file, ...options });
  log(`  screenshot ${path.relative(process.cwd(), file)}`);
  return file;
}

/** A screenshot the documentation shows: among the artifacts, and copied to DOC_IMAGES when that is set. */
async function docShot(page, name, options = {}) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file, ...options });
  if (DOC_IMAGES) {
    fs.mkdirSync(DOC_IMAGES, { recursive: true });
    fs.copyFileSync(file, path.join(DOC_IMAGES, name));
  }
  log(`  screenshot ${path.relative(process.cwd(), file)} (${Math.round(fs.statSync(file).size / 1024)} KB)`);
}

function activityRows(page) {
  return page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Activity' }) }).locator('.monaco-list-row');
}

function activityRow(page, label, status) {
  return activityRows(page).filter({ hasText: label }).filter({ hasText: status });
}

/** The codicon a tree row shows (its ThemeIcon). */
async function rowIcon(row) {
  const classes = (await row.locator('.custom-view-tree-node-item-icon, .codicon').first().getAttribute('class')) ?? '';
  return /codicon-([\w-]+)/.exec(classes.replace(/codicon-modifier-\w+/g, ''))?.[1];
}

/** Whether `text` in the row's description is shown in full (not cut off by the view's edge). */
async function shownInFull(row, text) {
  return row.evaluate((element, wanted) => {
    const description = element.querySelector('.label-description');
    const node = description?.firstChild;
    const at = node?.textContent?.indexOf(wanted) ?? -1;
    if (!description || !node || at < 0) {
      return false;
    }
    const range = element.ownerDocument.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + wanted.length);
    const shown = element.querySelector('.monaco-icon-label-container') ?? element;
    return range.getBoundingClientRect().right <= shown.getBoundingClientRect().right + 0.5;
  }, text);
}

function requireText(what, text, expected) {
  for (const part of expected) {
    if (!text.includes(part)) {
      throw new Error(`${what} lacks "${part}": ${text}`);
    }
  }
}

async function main() {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'mcphost-e2e-'));
  const dir = (...parts) => {
    const d = path.join(scratch, ...parts);
    fs.mkdirSync(d, { recursive: true });
    return d;
  };
  const env = {
    ...process.env,
    HOME: dir('home'),
    XDG_CONFIG_HOME: dir('xdg', 'config'),
    XDG_DATA_HOME: dir('xdg', 'data'),
    XDG_CACHE_HOME: dir('xdg', 'cache'),
    TMPDIR: dir('tmp'),
  };
  delete env.MCPHOST_CONFIG;
  // The probe extension's answers (the extension host inherits code-server's environment).
  const probeOut = dir('probe-out');
  env.MCPHOST_E2E_PROBE_OUT = probeOut;
  const data = dir('mcphost-data');
  // mcphost refuses a runtime dir others could write to (a planted discovery file would capture agents): 0700.
  const runtime = dir('run');
  fs.chmodSync(runtime, 0o700);

  // The workspace: mcphost in its .venv (found there by the extension), a config with the todo server upstream,
  // and settings that keep the daemon's data and runtime files in the scratch dir.
  const ws = dir('workspace');
  fs.mkdirSync(path.join(ws, '.venv', 'bin'), { recursive: true });
  fs.symlinkSync(fs.realpathSync(MCPHOST), path.join(ws, '.venv', 'bin', 'mcphost'));
  fs.mkdirSync(path.join(ws, '.mcphost'));
  fs.writeFileSync(
    path.join(ws, '.mcphost', 'config.toml'),
    [
      '[permissions]',
      'read = "allow"',
      'write = "ask"',
      'destructive = "confirm"',
      'prompt_timeout = 120',
      '',
      '[servers.todo]',
      `command = ${JSON.stringify(PYTHON)}`,
      'args = ["-m", "mcphost.demo.todo", "serve", "--as-local-user"]',
      `env = { MCPHOST_DATA_DIR = ${JSON.stringify(data)} }`,
      '',
      '[[rules]]',
      'tool = "todo:add_task"',
      'variant = "write"',
      'args = { title = { glob = "Urgent:*" } }',
      'action = "ask"',
      `reason = ${JSON.stringify(URGENT_REASON)}`,
      '',
    ].join('\n'),
  );
  fs.mkdirSync(path.join(ws, '.vscode'));
  fs.writeFileSync(
    path.join(ws, '.vscode', 'settings.json'),
    JSON.stringify(
      {
        'mcphost.configPath': '${workspaceFolder}/.mcphost/config.toml',
        'mcphost.env': { MCPHOST_DATA_DIR: data, MCPHOST_RUNTIME_DIR: runtime },
      },
      null,
      2,
    ),
  );
  fs.writeFileSync(path.join(ws, 'README.md'), '# a workspace\n');

  const userData = dir('code', 'user-data');
  const extensions = dir('code', 'extensions');
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  const userSettingsFile = path.join(userData, 'User', 'settings.json');
  const userSettings = {
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'security.workspace.trust.enabled': false,
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': 'off',
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'chat.mcp.autostart': 'never',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
  };
  fs.writeFileSync(userSettingsFile, JSON.stringify(userSettings, null, 2));
  const port = await freePort();
  const csConfig = path.join(scratch, 'code', 'config.yaml');
  fs.writeFileSync(csConfig, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const codeArgs = [
    CODE_SERVER,
    '--user-data-dir',
    userData,
    '--extensions-dir',
    extensions,
    '--config',
    csConfig,
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-workspace-trust',
  ];

  let codeServer;
  let browser;
  let agent;
  let terminalDaemon;
  const codeLog = fs.createWriteStream(path.join(ARTIFACTS, 'code-server.log'));
  const cleanup = async () => {
    // The "mcphost" output channel (the extension's and its daemon's log), for a look after the scratch dir is gone.
    try {
      for (const file of fs.readdirSync(path.join(userData, 'logs'), { recursive: true })) {
        if (String(file).endsWith('mcphost.log')) {
          fs.copyFileSync(path.join(userData, 'logs', String(file)), path.join(ARTIFACTS, 'mcphost-output.log'));
        }
      }
    } catch {
      // no logs yet
    }
    await agent?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    if (terminalDaemon && terminalDaemon.exitCode === null && terminalDaemon.signalCode === null) {
      terminalDaemon.kill('SIGTERM');
    }
    if (codeServer && codeServer.exitCode === null) {
      try {
        process.kill(-codeServer.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await new Promise((r) => setTimeout(r, 1000));
      try {
        process.kill(-codeServer.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };

  // A daemon this window did not start, for the same config: a terminal's `mcphost serve`, as a second window gets
  // the first one's. The window's own is then refused (exit status 3), and it attaches to that one's editor socket.
  const configFile = path.join(ws, '.mcphost', 'config.toml');
  const daemonEnv = { ...env, MCPHOST_DATA_DIR: data, MCPHOST_RUNTIME_DIR: runtime };
  const statusJson = () =>
    JSON.parse(execFileSync(MCPHOST, ['status', '-o', 'json'], { env: daemonEnv, encoding: 'utf8', timeout: 20_000 }));
  const startTerminalDaemon = (name, extraArgs = []) => {
    const out = fs.openSync(path.join(ARTIFACTS, `${name}.log`), 'w');
    terminalDaemon = spawn(MCPHOST, ['serve', ...extraArgs, '--config', configFile], {
      env: daemonEnv,
      stdio: ['ignore', out, out],
    });
    const file = path.join(runtime, `daemon-${terminalDaemon.pid}.json`);
    return until("the terminal daemon's discovery file", () => fs.existsSync(file) && JSON.parse(fs.readFileSync(file, 'utf8')));
  };
  const attachedToTerminalDaemon = () =>
    until('the terminal daemon to list an editor attached through its socket', () =>
      statusJson().daemons.find((d) => d.pid === terminalDaemon.pid)?.editors?.some((e) => e.transport === 'socket'),
    );

  try {
    await step('a terminal runs `mcphost serve` for the workspace\'s config before the editor starts', () =>
      startTerminalDaemon('terminal-daemon-1'),
    );

    await step('install the .vsix into code-server', () => {
      const out = execFileSync(process.execPath, [...codeArgs, '--install-extension', VSIX], { env, encoding: 'utf8' });
      if (!/successfully installed/i.test(out)) {
        throw new Error(`install-extension said: ${out}`);
      }
    });

    await step('package and install the probe extension (a test helper: vscode.lm from inside the extension host)', () => {
      const vsix = path.join(scratch, 'mcphost-e2e-probe.vsix');
      execFileSync(VSCE, ['package', '--allow-missing-repository', '--skip-license', '-o', vsix], {
        cwd: PROBE,
        env,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const out = execFileSync(process.execPath, [...codeArgs, '--install-extension', vsix], { env, encoding: 'utf8' });
      if (!/successfully installed/i.test(out)) {
        throw new Error(`install-extension said: ${out}`);
      }
    });

    await step('start code-server', async () => {
      codeServer = spawn(process.execPath, [...codeArgs, ws], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      codeServer.stdout.pipe(codeLog);
      codeServer.stderr.pipe(codeLog);
      await until('code-server /healthz', async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 60_000);
    });

    const page = await step('open the workspace in headless Chromium', async () => {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: !HEADFUL,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
        env,
      });
      const context = await browser.newContext({ viewport: VIEWPORT });
      const p = await context.newPage();
      p.on('pageerror', (error) => fs.appendFileSync(path.join(ARTIFACTS, 'browser.log'), `pageerror: ${error}\n`));
      p.on('console', (msg) => fs.appendFileSync(path.join(ARTIFACTS, 'browser.log'), `${msg.type()}: ${msg.text()}\n`));
      await p.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`);
      await p.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
      return p;
    });

    const statusItem = page.locator('.statusbar-item', { hasText: 'mcphost' });
    /** The status bar entry says 1/1 servers up, and whether the daemon is another's ($(link)) or the window's own. */
    const upAndShared = async (shared) =>
      /mcphost 1\/1/.test((await statusItem.allInnerTexts()).join(' ')) &&
      ((await statusItem.locator('.codicon-link').count()) > 0) === shared;

    await step("the window's own daemon is refused: it attaches to the terminal's (status bar: 1/1 servers up, shared)", async () => {
      await until('the status bar entry "mcphost 1/1", with the shared daemon\'s link', () => upAndShared(true), 90_000);
      await attachedToTerminalDaemon();
    });

    await step("the terminal's daemon ends: the extension starts the window's own (status bar: 1/1 servers up)", async () => {
      terminalDaemon.kill('SIGTERM');
      // The window's new daemon is refused until the old one lets go of the config, a moment after it closed.
      await until('the status bar entry "mcphost 1/1", without the link', () => upAndShared(false), 60_000);
    });

    const daemonInfo = await step("read the daemon's discovery file (as an agent setup would)", async () => {
      const file = await until('a discovery file', () => fs.readdirSync(runtime).find((f) => /^daemon-\d+\.json$/.test(f)));
      const info = JSON.parse(fs.readFileSync(path.join(runtime, file), 'utf8'));
      if (!info.mcp?.url || !info.mcp?.headers?.Authorization) {
        throw new Error(`the discovery file has no endpoint: ${JSON.stringify(info)}`);
      }
      return info;
    });

    await step("VS Code's MCP support lists the server the extension registered, and starts it", async () => {
      await runCommand(page, 'MCP: List Servers');
      const row = page.locator('.quick-input-list .monaco-list-row', { hasText: 'mcphost' }).first();
      await row.waitFor({ state: 'visible', timeout: 20_000 });
      await shot(page, '01-mcp-servers.png');
      await row.click();
      // The server's actions: start it, so VS Code's own MCP client connects with the definition's bearer token.
      const start = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Start Server' }).first();
      await start.waitFor({ state: 'visible', timeout: 10_000 });
      await start.click();
      // VS Code shows the server's output ("MCP: mcphost"): it connected, and listed mcphost's tools.
      const output = page.locator('.part.panel .view-lines');
      const connected = await until(
        "VS Code's MCP client to connect and discover the tools",
        async () => {
          const text = plainText(await output.first().innerText());
          if (/Connection state: Error/i.test(text)) {
            throw new Error(`VS Code could not connect: ${text}`);
          }
          return /Connection state: Running[\s\S]*Discovered \d+ tools/.test(text) ? text : undefined;
        },
        30_000,
      );
      log(`  ${/Discovered \d+ tools/.exec(connected)[0]}`);
      await shot(page, '01b-mcp-server-running.png');
      // (No Escape here: it would answer the offer that follows, as "Not now".)
    });

    // ---- one prompt per call
    const dialog = page.locator('.monaco-dialog-box');
    const offer = dialog.filter({ hasText: 'let mcphost be the only one to ask before its tools run' });
    const OFFER_BUTTONS = ['Keep both prompts', 'Let mcphost ask', 'Not now'];
    const probe = async (command, name, inputValue) => {
      if (inputValue !== undefined) {
        fs.writeFileSync(path.join(probeOut, `${name}.input.json`), JSON.stringify(inputValue));
      }
      const file = path.join(probeOut, `${name}.json`);
      fs.rmSync(file, { force: true });
      await runCommand(page, command);
      return file;
    };
    const probeAnswer = async (file, timeoutMs = 30_000) => {
      const answer = await until(`the probe's ${path.basename(file)}`, () => fs.existsSync(file) && JSON.parse(fs.readFileSync(file, 'utf8')), timeoutMs);
      if (!answer.ok) {
        throw new Error(`the probe failed: ${answer.error}`);
      }
      return answer.value;
    };
    const readUserSettings = () => JSON.parse(fs.readFileSync(userSettingsFile, 'utf8'));

    // The user settings before anyone answers: every entry must still be there, as it was, after the extension writes.
    let settingsBefore;
    await step("once VS Code lists mcphost's tools, the extension offers one prompt per call, in a modal that says what changes", async () => {
      await offer.waitFor({ state: 'visible', timeout: 30_000 });
      settingsBefore = readUserSettings();
      assert.deepEqual(Object.keys(settingsBefore).sort(), Object.keys(userSettings).sort());
      const text = plainText(await offer.innerText());
      requireText('the offer', text, [
        "VS Code asks before every call to mcphost's call_tool_write and call_tool_destructive, then mcphost asks again",
        'two prompts for one call',
        'Let mcphost ask: VS Code\'s tool approval list opens next. Under "mcphost", tick "Run any tool without approval" and press OK.',
        'mcphost alone asks, as its policy says: writes ask, destructive calls need a confirm, reads pass.',
        'Keep both prompts: VS Code asks too. Not asked again.',
        '"mcphost: One Prompt per Call..."',
      ]);
      const buttons = (await offer.locator('.monaco-button').allInnerTexts()).map((b) => b.trim()).sort();
      if (JSON.stringify(buttons) !== JSON.stringify(OFFER_BUTTONS)) {
        throw new Error(`the offer's buttons are ${JSON.stringify(buttons)}, not ${JSON.stringify(OFFER_BUTTONS)}`);
      }
      await docShot(page, 'vscode-single-prompt-offer.png');
    });

    await step('"Not now" changes nothing (the user settings are as they were)', async () => {
      await offer.locator('.monaco-button', { hasText: /^Not now$/ }).click();
      await offer.waitFor({ state: 'detached', timeout: 10_000 });
      await page.waitForTimeout(500);
      assert.deepEqual(readUserSettings(), settingsBefore);
    });

    const writeTool = await step("VS Code lists mcphost's four tools to extensions (vscode.lm.tools)", async () => {
      const tools = await probeAnswer(await probe('mcphost e2e: List Tools', 'tools'));
      const mine = tools.filter((tool) => /^mcphost\//.test(tool.fullReferenceName ?? '')).map((tool) => tool.fullReferenceName).sort();
      assert.deepEqual(mine, ['mcphost/call_tool_destructive', 'mcphost/call_tool_read', 'mcphost/call_tool_write', 'mcphost/retrieve_tools']);
      return tools.find((tool) => tool.fullReferenceName === 'mcphost/call_tool_write').name;
    });

    /** call_tool_write through VS Code's tool service, as agent mode calls it; resolves with the probe's answer file. */
    const writeThroughVsCode = (title) =>
      probe('mcphost e2e: Invoke Tool', 'invoke', {
        tool: writeTool,
        input: { name: 'todo:add_task', args: { title }, intent: { operation_type: 'write', reason: 'Testing who asks' } },
      });

    await step("without it, a write call through VS Code is confirmed twice: VS Code's dialog, then mcphost's prompt", async () => {
      const answer = await writeThroughVsCode('Asked twice (e2e)');
      const vscodeDialog = dialog.filter({ hasText: 'Run Call a write tool' });
      await vscodeDialog.waitFor({ state: 'visible', timeout: 20_000 });
      await shot(page, '01c-vscode-asks-first.png');
      await vscodeDialog.locator('.monaco-button', { hasText: /^Yes$/ }).click();
      const prompt = toast(page, 'Asked twice (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      requireText('the call', await probeAnswer(answer), ['"title":"Asked twice (e2e)"']);
    });

    const approvalRows = page.locator('.quick-input-widget .monaco-list-row');
    const runWithoutApproval = approvalRows.filter({ hasText: 'Run any tool without approval' }).first();
    /** VS Code's tool approval list, with mcphost's entry open. */
    const openMcphostEntry = async () => {
      await page.locator('.quick-input-widget input[aria-label="Configure global tool approvals"]').waitFor({ state: 'visible', timeout: 10_000 });
      const server = approvalRows.filter({ hasText: /^mcphost$/ }).first();
      await server.waitFor({ state: 'visible', timeout: 10_000 });
      if ((await server.getAttribute('aria-expanded')) !== 'true') {
        await server.locator('.monaco-tl-twistie').click();
      }
      await runWithoutApproval.waitFor({ state: 'visible', timeout: 10_000 });
    };
    const ticked = async (row) => (await row.locator('[role="checkbox"]').first().getAttribute('aria-checked')) === 'true';

    await step('"mcphost: One Prompt per Call..." asks again; "Let mcphost ask" opens VS Code\'s tool approval list, where mcphost\'s "Run any tool without approval" is ticked', async () => {
      await runCommand(page, 'mcphost: One Prompt per Call...');
      await offer.waitFor({ state: 'visible', timeout: 10_000 });
      await offer.locator('.monaco-button', { hasText: /^Let mcphost ask$/ }).click();
      await offer.waitFor({ state: 'detached', timeout: 10_000 });
      await openMcphostEntry();
      if (await ticked(runWithoutApproval)) {
        throw new Error('"Run any tool without approval" is ticked before anyone ticked it');
      }
      await runWithoutApproval.locator('[role="checkbox"]').first().click();
      await until('the box to be ticked', () => ticked(runWithoutApproval), 5_000);
      await shot(page, '01d-tool-approval-list.png');
      await page.locator('.quick-input-widget .monaco-button', { hasText: /^OK$/ }).click();
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
    });

    await step("the answer is in the user's settings.json, every entry that was there kept; VS Code's configuration API reads it back", async () => {
      await until('mcphost.singlePrompt in the user settings', () => readUserSettings()['mcphost.singlePrompt'] === 'mcphost', 10_000);
      assert.deepEqual(readUserSettings(), { ...settingsBefore, 'mcphost.singlePrompt': 'mcphost' });
      const inspected = await probeAnswer(await probe('mcphost e2e: Read Setting', 'setting', { key: 'mcphost.singlePrompt' }));
      assert.equal(inspected.globalValue, 'mcphost');
      assert.equal(inspected.workspaceValue, undefined);
      assert.equal(inspected.defaultValue, 'offer');
    });

    await step("with it, the same call is asked once: mcphost's prompt, and no VS Code dialog", async () => {
      const answer = await writeThroughVsCode('Asked once (e2e)');
      const prompt = toast(page, 'Asked once (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      if ((await dialog.count()) > 0) {
        throw new Error(`VS Code still asks: ${plainText(await dialog.first().innerText())}`);
      }
      await shot(page, '01e-mcphost-asks-alone.png');
      await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      requireText('the call', await probeAnswer(answer), ['"title":"Asked once (e2e)"']);
    });

    await step("VS Code's tool approval list, opened again, shows mcphost's tools approved", async () => {
      await probe('mcphost e2e: Open Tool Approval', 'approval');
      await openMcphostEntry();
      if (!(await ticked(runWithoutApproval))) {
        throw new Error('"Run any tool without approval" is not ticked under mcphost');
      }
      await page.keyboard.press('Escape');
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
    });

    await step('turned off with the same command ("Keep both prompts": the list opens to untick it), VS Code asks again', async () => {
      await runCommand(page, 'mcphost: One Prompt per Call...');
      await offer.waitFor({ state: 'visible', timeout: 10_000 });
      requireText('the offer, when mcphost alone asks', plainText(await offer.innerText()), [
        'Now: you chose "Let mcphost ask".',
        'Keep both prompts: VS Code asks too. The list opens so that you can untick "Run any tool without approval".',
      ]);
      await offer.locator('.monaco-button', { hasText: /^Keep both prompts$/ }).click();
      await offer.waitFor({ state: 'detached', timeout: 10_000 });
      await openMcphostEntry();
      await runWithoutApproval.locator('[role="checkbox"]').first().click();
      await until('the box to be unticked', async () => !(await ticked(runWithoutApproval)), 5_000);
      await page.locator('.quick-input-widget .monaco-button', { hasText: /^OK$/ }).click();
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
      await until('mcphost.singlePrompt = "both"', () => readUserSettings()['mcphost.singlePrompt'] === 'both', 10_000);
      assert.deepEqual(readUserSettings(), { ...settingsBefore, 'mcphost.singlePrompt': 'both' });
      const answer = await writeThroughVsCode('Asked twice again (e2e)');
      const vscodeDialog = dialog.filter({ hasText: 'Run Call a write tool' });
      await vscodeDialog.waitFor({ state: 'visible', timeout: 20_000 });
      await vscodeDialog.locator('.monaco-button', { hasText: /^Yes$/ }).click();
      const prompt = toast(page, 'Asked twice again (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      requireText('the call', await probeAnswer(answer), ['"title":"Asked twice again (e2e)"']);
    });

    agent = await step('an agent connects to the MCP endpoint with the bearer token', async () => {
      const client = await connectAgent(daemonInfo.mcp.url, daemonInfo.mcp.headers);
      const server = client.getServerVersion();
      log(`  server: ${server?.name} ${server?.version}`);
      return client;
    });

    await step('open the activity view, where a waiting prompt gets a row', async () => {
      await runCommand(page, 'mcphost: Show Activity');
      await activityRow(page, 'upstream connected', 'todo').first().waitFor({ state: 'visible', timeout: 20_000 });
      // Away from where notifications appear: a toast under the pointer is never hidden, which would prove nothing.
      await page.mouse.move(VIEWPORT.width / 2, VIEWPORT.height / 3);
    });

    const writeCall = callTool(
      agent,
      'call_tool_write',
      'todo:add_task',
      { title: 'Buy milk (e2e)' },
      { operation_type: 'write', data_sensitivity: 'private', reason: 'The user asked me to [add](command:workbench.action.reloadWindow) it' },
    );
    writeCall.catch(() => undefined);

    const writePrompt = toast(page, 'asks to write with tool add_task of server todo');
    const shownAt = await step('the write prompt appears as a notification that says what it asks and what each answer means', async () => {
      await writePrompt.waitFor({ state: 'visible', timeout: 30_000 });
      const at = Date.now();
      const text = plainText(await writePrompt.innerText());
      requireText('the write prompt', text, [
        'mcphost: Agent "e2e-agent 1.0" asks to write with tool add_task of server todo.',
        'Arguments: {"title":"Buy milk (e2e)"}.',
        'Data: private.',
        'Server annotations: not read-only, not destructive, closed world; mcphost recommends call_tool_write.',
        '"Allow for this session" covers write calls to add_task from this agent session, until it disconnects.',
        '"Always allow" covers write calls to add_task from any agent, until revoked or the server changes the tool.',
        'Asked by permissions.write.',
        'Remembering asks what it covers next: any arguments, these exact arguments or a pattern.',
        'Closing this denies.',
        'Allow once',
        'Allow for this session',
        'Always allow',
        'Deny',
      ]);
      // The agent's text is shown as text: its markdown link is not a link.
      if ((await writePrompt.locator('.notification-list-item-message a').count()) > 0) {
        throw new Error("the agent's reason was rendered as a link");
      }
      if (!text.includes('[add] (command:workbench.action.reloadWindow)')) {
        throw new Error(`the agent's reason is not shown as plain text: ${text}`);
      }
      return at;
    });

    await step('while it waits: a row in the activity view, and the status bar entry says so loudly', async () => {
      const waiting = activityRow(page, 'todo:add_task', 'waiting for an answer').first();
      await waiting.waitFor({ state: 'visible', timeout: 10_000 });
      const icon = await rowIcon(waiting);
      if (icon !== 'bell-dot') {
        throw new Error(`the waiting row shows the icon ${icon}, not bell-dot`);
      }
      await until(
        'the status bar entry to show 1 prompt waiting on a warning background',
        async () => /1 prompt waiting/.test((await statusItem.allInnerTexts()).join(' ')) &&
          (await page.locator('.statusbar-item.warning-kind', { hasText: 'mcphost' }).count()) === 1,
        10_000,
      );
    });

    await step(`the write prompt is still on screen ${PROMPT_STAYS_MS / 1000} s later`, async () => {
      await page.waitForTimeout(Math.max(0, shownAt + PROMPT_STAYS_MS - Date.now()));
      if (!(await writePrompt.isVisible())) {
        await shot(page, 'failure-prompt-hidden.png');
        throw new Error(`the write prompt left the screen within ${PROMPT_STAYS_MS / 1000} s while the call still waits`);
      }
      await docShot(page, 'vscode-write-prompt.png');
    });

    await step('hidden (Escape), the prompt comes back with a click on the status bar entry', async () => {
      await page.locator('.editor-group-container').first().click({ position: { x: 200, y: 200 } });
      await page.keyboard.press('Escape');
      await writePrompt.waitFor({ state: 'hidden', timeout: 10_000 });
      await statusItem.first().hover();
      await page.locator('.monaco-hover, .workbench-hover').filter({ hasText: 'oldest prompt' }).first().waitFor({
        state: 'visible',
        timeout: 10_000,
      });
      await docShot(page, 'vscode-status-item.png', {
        clip: { x: 0, y: VIEWPORT.height - 150, width: VIEWPORT.width / 2, height: 150 },
      });
      await statusItem.first().click();
      await writePrompt.waitFor({ state: 'visible', timeout: 10_000 });
      await page.mouse.move(VIEWPORT.width / 2, VIEWPORT.height / 3);
      await shot(page, '02-write-prompt-shown-again.png');
    });

    await step('click "Allow once": the waiting row goes', async () => {
      await writePrompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      await writePrompt.waitFor({ state: 'detached', timeout: 10_000 });
      await until('the waiting row to go', async () => (await activityRow(page, 'todo:add_task', 'waiting').count()) === 0, 10_000);
    });

    const added = await step('the call succeeds', async () => {
      const result = await writeCall;
      if (result.isError) {
        throw new Error(`the write call failed: ${textOf(result)}`);
      }
      const text = textOf(result);
      const id = /"id"\s*:\s*"([^"]+)"/.exec(text)?.[1];
      if (!id) {
        throw new Error(`no task id in the answer: ${text}`);
      }
      log(`  task ${id}`);
      return { id };
    });

    await step('the record appears in the activity view; clicking it shows `activity show`', async () => {
      await runCommand(page, 'mcphost: Show Activity');
      const row = activityRow(page, 'todo:add_task', 'ok');
      await row.first().waitFor({ state: 'visible', timeout: 20_000 });
      await shot(page, '03-activity-view.png');
      await row.first().click();
      const editor = page.locator('.editor-instance .view-lines');
      await until('the record document', async () => /add_task/.test(await editor.first().innerText()), 20_000);
      const shown = plainText(await editor.first().innerText());
      if (!/success/.test(shown)) {
        throw new Error(`the record document does not show the status: ${shown.slice(0, 400)}`);
      }
      await shot(page, '04-activity-record.png');
    });

    const deleteTask = (reason) =>
      callTool(agent, 'call_tool_destructive', 'todo:delete_task', { task_id: added.id }, {
        operation_type: 'destructive',
        data_sensitivity: 'internal',
        reason,
      });
    const deleteCall = deleteTask('Tidying up the list');
    deleteCall.catch(() => undefined);

    await step('the destructive call gets a modal that names the agent, with Deny as its only way out (no Cancel)', async () => {
      await dialog.waitFor({ state: 'visible', timeout: 30_000 });
      const text = plainText(await dialog.innerText());
      requireText('the destructive prompt', text, [
        'mcphost: Agent "e2e-agent 1.0" asks to make a destructive call to todo:delete_task. Allow it?',
        'Agent: e2e-agent 1.0',
        'Server: todo',
        'Tool: delete_task (called as call_tool_destructive)',
        'Server annotations: not read-only, destructive',
        'Data sensitivity: internal',
        'Tidying up the list',
        added.id,
        '"Allow for this session" covers destructive calls to delete_task from this agent session, until it disconnects.',
        'Deny, Escape or closing this dialog denies the call',
      ]);
      const buttons = (await dialog.locator('.monaco-button').allInnerTexts()).map((b) => b.trim()).sort();
      const expected = ['Allow for this session: todo:delete_task', 'Allow once: todo:delete_task', 'Deny'];
      if (JSON.stringify(buttons) !== JSON.stringify(expected)) {
        throw new Error(`the destructive prompt's buttons are ${JSON.stringify(buttons)}, not ${JSON.stringify(expected)}`);
      }
      await docShot(page, 'vscode-destructive-modal.png');
      await dialog.locator('.monaco-button', { hasText: /^Deny$/ }).click();
      await dialog.waitFor({ state: 'detached', timeout: 10_000 });
    });

    await step('the destructive call is denied, and recorded as denied', async () => {
      const result = await deleteCall;
      const code = result.structuredContent?.error?.code;
      if (!result.isError || code !== 'PERMISSION_DENIED') {
        throw new Error(`expected PERMISSION_DENIED, got ${JSON.stringify(result).slice(0, 500)}`);
      }
      await activityRow(page, 'todo:delete_task', 'denied').first().waitFor({ state: 'visible', timeout: 20_000 });
    });

    await step('asked again, "Allow once" in the modal lets the delete through', async () => {
      const again = deleteTask('The user confirmed it');
      again.catch(() => undefined);
      await dialog.waitFor({ state: 'visible', timeout: 30_000 });
      await dialog.locator('.monaco-button', { hasText: /^Allow once: todo:delete_task$/ }).click();
      await dialog.waitFor({ state: 'detached', timeout: 10_000 });
      const result = await again;
      if (result.isError) {
        throw new Error(`the allowed delete failed: ${textOf(result)}`);
      }
    });

    await step('the activity view: a denied and an allowed delete look different, with their durations in full', async () => {
      const denied = activityRow(page, 'todo:delete_task', 'denied').first();
      const allowed = activityRow(page, 'todo:delete_task', 'ok').first();
      await allowed.waitFor({ state: 'visible', timeout: 20_000 });
      const icons = { denied: await rowIcon(denied), allowed: await rowIcon(allowed), write: await rowIcon(activityRow(page, 'todo:add_task', 'ok').first()) };
      if (icons.denied !== 'circle-slash' || icons.allowed !== 'pass' || icons.write !== 'pass') {
        throw new Error(`expected circle-slash for denied and pass for allowed calls, got ${JSON.stringify(icons)}`);
      }
      for (const row of [denied, allowed]) {
        const text = plainText(await row.innerText());
        const duration = /\d+(?:\.\d+)? (?:ms|s)\b|\d+ min \d+(?:\.\d+)? s/.exec(text)?.[0];
        if (!duration || !(await shownInFull(row, duration))) {
          throw new Error(`the row "${text}" does not show its duration in full`);
        }
      }
      await shot(page, '06-denied-and-allowed-in-activity-view.png');
    });

    await step('the activity view filters by intent', async () => {
      await runCommand(page, 'mcphost: Filter by Intent');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'destructive calls' }).first().click();
      await until('only the destructive calls to be listed', async () => {
        const rows = await activityRows(page).allInnerTexts();
        return rows.length === 2 && rows.every((row) => row.includes('todo:delete_task'));
      });
      await runCommand(page, 'mcphost: Filter by Intent');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'all intents' }).first().click();
    });

    await step('remembered approvals are listed through the daemon (none yet)', async () => {
      await runCommand(page, 'mcphost: List and Revoke Remembered Approvals');
      const none = toast(page, 'no remembered approvals').first();
      await none.waitFor({ state: 'visible', timeout: 10_000 });
      // Closed, so that it is not in the pictures that follow (its close button shows on hover). VS Code may hide an
      // information toast on its own while it is still sliding in (the button is then never stable to click): gone
      // is all this step needs.
      await none.hover({ timeout: 5_000 }).catch(() => {});
      await none.locator('.codicon-notifications-clear').click({ timeout: 5_000 }).catch(() => {});
      await none.waitFor({ state: 'hidden', timeout: 10_000 });
    });

    // ---- fewer, better questions: the rule that asked, batches, scoped remembered approvals
    const activityLog = path.join(data, 'activity.jsonl');
    /** The call records of add_task in the activity log whose title is `title`. */
    const callRecords = (title) =>
      fs
        .readFileSync(activityLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
        .filter((r) => r.type === 'tool_call' && r.tool === 'add_task' && r.arguments?.title === title);
    const addTask = (title, reason = 'Testing fewer questions') =>
      callTool(agent, 'call_tool_write', 'todo:add_task', { title }, { operation_type: 'write', reason });
    const mustPass = async (what, call) => {
      const result = await call;
      if (result.isError) {
        throw new Error(`${what} failed: ${textOf(result)}`);
      }
    };

    await step('a prompt says which rule asked, and why (the [[rules]] entry\'s reason)', async () => {
      // The pictures that follow show the prompts, not this machine's paths.
      await runCommand(page, 'View: Close All Editors');
      await runCommand(page, 'View: Hide Panel');
      const call = addTask('Urgent: call the plumber (e2e)');
      call.catch(() => undefined);
      const prompt = toast(page, 'Urgent: call the plumber (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      requireText('the prompt a rule asked', plainText(await prompt.innerText()), [`Asked by rules[0]: ${URGENT_REASON}.`]);
      await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      await mustPass('the urgent call', call);
    });

    await step('two writes the agent makes at once arrive as one batch notification listing both; the status bar counts both', async () => {
      const titles = ['Batch one (e2e)', 'Batch two (e2e)'];
      const both = Promise.all(titles.map((title) => addTask(title, 'Two things the user asked for')));
      both.catch(() => undefined);
      const batch = toast(page, 'asks to make 2 calls at once');
      await batch.waitFor({ state: 'visible', timeout: 30_000 });
      requireText('the batch prompt', plainText(await batch.innerText()), [
        'mcphost: Agent "e2e-agent 1.0" asks to make 2 calls at once.',
        '. write todo:add_task {"title":"Batch one (e2e)"}.',
        '. write todo:add_task {"title":"Batch two (e2e)"}.',
        'Asked by permissions.write.',
        '"Allow all" allows each call once',
        'Closing this denies them all.',
        'Allow all',
        'Deny all',
        'One by one',
      ]);
      await until(
        'the status bar entry to count both calls',
        async () => /2 prompts waiting/.test((await statusItem.allInnerTexts()).join(' ')),
        10_000,
      );
      await until('a waiting row for each call', async () => (await activityRow(page, 'todo:add_task', 'waiting for an answer').count()) === 2, 10_000);
      await page.mouse.move(VIEWPORT.width / 2, VIEWPORT.height / 3);
      await page.waitForTimeout(600); // let the toast finish sliding in
      await docShot(page, 'vscode-batch-prompt.png');
      await batch.locator('.monaco-button', { hasText: /^Allow all$/ }).click();
      const results = await both;
      for (const result of results) {
        if (result.isError) {
          throw new Error(`a call allowed in the batch failed: ${textOf(result)}`);
        }
      }
      // Both on record as allowed by the editor, in the one batch.
      const records = await until('both records in the activity log', () => {
        const found = titles.map((title) => callRecords(title)[0]);
        return found.every(Boolean) && found;
      }, 10_000);
      for (const record of records) {
        if (record.status !== 'success' || record.decision?.outcome !== 'allow' || record.decision?.by !== 'editor' || !record.decision?.batch) {
          throw new Error(`the record does not show a call allowed in a batch: ${JSON.stringify(record.decision)} ${record.status}`);
        }
      }
      if (records[0].decision.batch !== records[1].decision.batch) {
        throw new Error('the two calls were answered in different batches');
      }
      await until('no waiting rows', async () => (await activityRow(page, 'todo:add_task', 'waiting').count()) === 0, 10_000);
    });

    const quickInput = page.locator('.quick-input-widget');
    const quickRow = (text) => quickInput.locator('.quick-input-list .monaco-list-row', { hasText: text }).first();
    await step('"Always allow" asks what it covers; Escape there brings the prompt back; "exactly these arguments" is remembered', async () => {
      const call = addTask('Water the plants (e2e)');
      call.catch(() => undefined);
      const prompt = toast(page, 'Water the plants (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      await prompt.locator('.monaco-button', { hasText: /^Always allow$/ }).click();
      await quickInput.locator('.quick-input-title', { hasText: 'what does it cover?' }).waitFor({ state: 'visible', timeout: 10_000 });
      // Escape is no answer: the prompt comes back.
      await page.keyboard.press('Escape');
      await prompt.waitFor({ state: 'visible', timeout: 10_000 });
      await prompt.locator('.monaco-button', { hasText: /^Always allow$/ }).click();
      await quickRow('This tool with exactly these arguments').waitFor({ state: 'visible', timeout: 10_000 });
      requireText('the scope question', plainText(await quickInput.innerText()), [
        'mcphost: "Always allow" for todo:add_task: what does it cover?',
        'This tool, any arguments',
        'This tool with exactly these arguments',
        '{"title":"Water the plants (e2e)"}',
        'This tool with arguments matching a pattern…',
      ]);
      await page.waitForTimeout(500); // the quick input fades in
      await docShot(page, 'vscode-scope-picker.png');
      await quickRow('This tool with exactly these arguments').click();
      await quickInput.waitFor({ state: 'hidden', timeout: 10_000 });
      await mustPass('the call allowed always, for these arguments', call);
    });

    await step('the same call again passes without a prompt; the same tool with other arguments asks again', async () => {
      await mustPass('the same call again', addTask('Water the plants (e2e)'));
      const again = await until('the second record', () => callRecords('Water the plants (e2e)')[1], 10_000);
      if (again.decision?.by !== 'remembered_grant' || again.decision?.match !== 'arguments') {
        throw new Error(`the second call was not allowed by the grant for its arguments: ${JSON.stringify(again.decision)}`);
      }
      if ((await toast(page, 'Water the plants (e2e)').count()) > 0) {
        throw new Error('the remembered call was asked about again');
      }
      const other = addTask('Feed the cat (e2e)');
      other.catch(() => undefined);
      const prompt = toast(page, 'Feed the cat (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      await prompt.locator('.monaco-button', { hasText: /^Deny$/ }).click();
      const denied = await other;
      if (!denied.isError || denied.structuredContent?.error?.code !== 'PERMISSION_DENIED') {
        throw new Error(`expected PERMISSION_DENIED, got ${JSON.stringify(denied).slice(0, 300)}`);
      }
    });

    await step('"Allow for this session" with a pattern: the person edits the glob, which must match the call, and confirms it', async () => {
      const call = addTask('Water the lawn (e2e)');
      call.catch(() => undefined);
      const prompt = toast(page, 'Water the lawn (e2e)');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      await prompt.locator('.monaco-button', { hasText: /^Allow for this session$/ }).click();
      await quickRow('This tool with arguments matching a pattern').click();
      // The pattern, argument by argument; it starts from the daemon's suggestion (this title, exactly).
      const titleRow = quickRow('must match:');
      await titleRow.waitFor({ state: 'visible', timeout: 10_000 });
      requireText('the pattern', plainText(await quickInput.innerText()), [
        'Allow calls whose arguments match this pattern',
        'title="Water the lawn (e2e)"',
        'must match: Water the lawn (e2e)',
        'this call: "Water the lawn (e2e)"',
      ]);
      await titleRow.click();
      const input = quickInput.locator('input.input');
      await until('the glob in the input box', async () => (await input.inputValue()) === 'Water the lawn (e2e)', 10_000);
      await input.fill('Feed the *');
      const message = quickInput.locator('.quick-input-message');
      await until('the message that the glob does not match this call', async () =>
        plainText(await message.innerText()).includes('"Water the lawn (e2e)" does not match "Feed the *"'),
      10_000);
      await page.waitForTimeout(500); // the quick input fades in
      await shot(page, '12-pattern-glob-refused.png');
      await page.keyboard.press('Enter'); // refused: the box stays
      await page.waitForTimeout(300);
      if ((await input.inputValue()) !== 'Feed the *') {
        throw new Error('a glob that does not match the call was accepted');
      }
      await input.fill('Water the *');
      await until('the message to clear', async () => !plainText(await message.innerText()).includes('does not match'), 10_000);
      await page.keyboard.press('Enter');
      await quickRow('must match: Water the *').waitFor({ state: 'visible', timeout: 10_000 });
      await page.waitForTimeout(500); // the quick input fades in
      await shot(page, '13-pattern-confirm.png');
      await quickRow('Allow calls whose arguments match this pattern').click();
      await quickInput.waitFor({ state: 'hidden', timeout: 10_000 });
      await mustPass('the call allowed for the session, by pattern', call);
      await mustPass('another call the pattern matches', addTask('Water the roses (e2e)'));
      const record = await until('its record', () => callRecords('Water the roses (e2e)')[0], 10_000);
      if (record.decision?.by !== 'remembered_grant' || record.decision?.match !== 'pattern') {
        throw new Error(`the call was not allowed by the pattern grant: ${JSON.stringify(record.decision)}`);
      }
    });

    await step('the remembered approvals list says what each covers', async () => {
      await runCommand(page, 'mcphost: List and Revoke Remembered Approvals');
      await quickRow('todo:add_task').waitFor({ state: 'visible', timeout: 10_000 });
      requireText('the grants list', plainText(await quickInput.innerText()), [
        'call_tool_write · always · exactly {"title": "Water the plants (e2e)"}',
        'call_tool_write · this session · arguments matching title="Water the *"',
      ]);
      await page.waitForTimeout(500); // the quick input fades in
      await shot(page, '14-grants-with-scope.png');
      await page.keyboard.press('Escape');
      await quickInput.waitFor({ state: 'hidden', timeout: 10_000 });
    });

    const goodConfig = fs.readFileSync(configFile, 'utf8');
    const problems = page.locator('#status\\.problems');
    await step('a config error shows as a diagnostic in config.toml ("mcphost: Open Config")', async () => {
      fs.writeFileSync(configFile, goodConfig.replace('[permissions]\n', '[permissions]\nbogus_key = 1\n'));
      await runCommand(page, 'mcphost: Open Config');
      await page.locator('.tab', { hasText: 'config.toml' }).first().waitFor({ state: 'visible', timeout: 10_000 });
      await until('the problems count to show an error', async () => /\b1\b/.test(await problems.innerText()), 30_000);
      await page.locator('.editor-instance .squiggly-error').first().waitFor({ state: 'visible', timeout: 10_000 });
      await shot(page, '07-config-diagnostic.png');
    });

    await step('the config error is an error in the daemon log too, its issue included', async () => {
      await runCommand(page, 'mcphost: Show Daemon Log');
      const output = page.locator('.part.panel .view-lines');
      await until(
        'the rejected config at error level in the "mcphost" output channel',
        async () => {
          const text = plainText(await output.first().innerText());
          return (
            // (a long line wraps in the view)
            /\[error\] mcphost: \S*config\.toml: invalid\s+config \(1 problem\)/.test(text) &&
            /\[error\]\s+line 2, column 1: permissions\.bogus_key/.test(text) &&
            !/\[info\][^\n]*invalid\s+config/.test(text)
          );
        },
        20_000,
      );
      await shot(page, '07b-config-error-in-log.png');
    });

    await step('a prompt the daemon withdraws (it expired) disappears', async () => {
      fs.writeFileSync(configFile, goodConfig.replace('prompt_timeout = 120', 'prompt_timeout = 5'));
      await until('the config error to clear', async () => /^\s*0\s+0\s*$/.test(await problems.innerText()), 30_000);
      // The config and the log name this machine's paths: out of the documentation's picture.
      await runCommand(page, 'View: Close All Editors');
      await runCommand(page, 'View: Hide Panel');
      const expiring = callTool(
        agent,
        'call_tool_write',
        'todo:add_task',
        { title: 'Nobody answers this one' },
        { operation_type: 'write', reason: 'Testing expiry' },
      );
      expiring.catch(() => undefined);
      const prompt = toast(page, 'Nobody answers this one');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      // Every kind of row at once, for the documentation: a waiting prompt, allowed, denied, config events.
      await activityRow(page, 'todo:add_task', 'waiting for an answer').first().waitFor({ state: 'visible', timeout: 3_000 });
      await page.mouse.move(VIEWPORT.width / 2, VIEWPORT.height / 3);
      await page.waitForTimeout(600); // let the toast finish sliding in
      await docShot(page, 'vscode-activity-view.png');
      await prompt.waitFor({ state: 'hidden', timeout: 15_000 });
      const result = await expiring;
      const code = result.structuredContent?.error?.code;
      if (!result.isError || code !== 'APPROVAL_TIMEOUT') {
        throw new Error(`expected APPROVAL_TIMEOUT, got ${JSON.stringify(result).slice(0, 500)}`);
      }
      await runCommand(page, 'mcphost: Show Activity');
      await activityRow(page, 'todo:add_task', 'expired').first().waitFor({ state: 'visible', timeout: 20_000 });
      await shot(page, '08-expired-prompt-gone.png');
    });

    await step('the daemon log is in the "mcphost" output channel', async () => {
      await runCommand(page, 'mcphost: Show Daemon Log');
      const output = page.locator('.part.panel .view-lines');
      // The newest lines: the daemon's own (its hot reload) and the extension's (the withdrawn prompt).
      await until(
        'the daemon log',
        async () => {
          const text = plainText(await output.first().innerText());
          return /mcphost: config reloaded from/.test(text) && /withdrawn by the daemon/.test(text);
        },
        20_000,
      );
      await shot(page, '09-daemon-log.png');
    });

    // Again while the window runs its own: a terminal daemon started beside it (--allow-second), and "Restart
    // Daemon", whose new daemon is refused.
    const terminal = await step('a terminal starts a daemon for the same config; "Restart Daemon" attaches the window to it', async () => {
      fs.writeFileSync(configFile, goodConfig);
      const info = await startTerminalDaemon('terminal-daemon-2', ['--allow-second']);
      await runCommand(page, 'mcphost: Restart Daemon');
      await until('the status bar entry "mcphost 1/1", with the shared daemon\'s link', () => upAndShared(true), 60_000);
      // (The window may first attach to its own old daemon, still on its way out when the new one was refused.)
      await attachedToTerminalDaemon();
      await runCommand(page, 'mcphost: Show Daemon Log');
      const output = page.locator('.part.panel .view-lines');
      await until(
        'the log to say that this window uses the terminal\'s daemon',
        async () =>
          plainText(await output.first().innerText())
            .replace(/\s+/g, ' ')
            .includes(`this window uses the daemon started by another window or terminal (pid ${terminalDaemon.pid})`),
        10_000,
      );
      await statusItem.first().hover();
      await page.locator('.monaco-hover, .workbench-hover').filter({ hasText: 'another window or terminal' }).first().waitFor({
        state: 'visible',
        timeout: 10_000,
      });
      await shot(page, '11-attached-to-terminal-daemon.png');
      await page.mouse.move(VIEWPORT.width / 2, VIEWPORT.height / 3);
      return info;
    });

    await step("an agent of the terminal's daemon gets its prompt answered in the window", async () => {
      const termAgent = await connectAgent(terminal.mcp.url, terminal.mcp.headers);
      try {
        const call = callTool(termAgent, 'call_tool_write', 'todo:add_task', { title: 'Asked through a shared daemon' }, {
          operation_type: 'write',
          reason: 'Testing a shared daemon',
        });
        call.catch(() => undefined);
        const prompt = toast(page, 'Asked through a shared daemon');
        await prompt.waitFor({ state: 'visible', timeout: 30_000 });
        await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
        const result = await call;
        if (result.isError) {
          throw new Error(`the call through the shared daemon failed: ${textOf(result)}`);
        }
      } finally {
        await termAgent.close().catch(() => undefined);
      }
    });

    await step("when the terminal's daemon ends, the window starts its own again", async () => {
      terminalDaemon.kill('SIGTERM');
      await until('the status bar entry "mcphost 1/1", without the link', () => upAndShared(false), 60_000);
      const daemons = await until('one daemon, of this window (through stdio)', () => {
        const listed = statusJson().daemons;
        return listed.length === 1 && listed[0].pid !== terminalDaemon.pid && listed[0].editors?.some((e) => e.transport === 'stdio') && listed;
      }, 20_000);
      log(`  the window's own daemon: pid ${daemons[0].pid}`);
    });

    await step('another program named mcphost is refused, saying what it is and how to fix it', async () => {
      // What `mcphost --version` of the Go MCP host of the same name prints.
      const impostor = path.join(scratch, 'other', 'mcphost');
      fs.mkdirSync(path.dirname(impostor), { recursive: true });
      fs.writeFileSync(impostor, '#!/bin/sh\necho "mcphost version v0.7.2"\n', { mode: 0o755 });
      const settingsFile = path.join(ws, '.vscode', 'settings.json');
      const settings = JSON.parse(fs.readFileSync(settingsFile, 'utf8'));
      fs.writeFileSync(settingsFile, JSON.stringify({ ...settings, 'mcphost.path': impostor }, null, 2));
      const restart = toast(page, 'the daemon settings changed');
      await restart.waitFor({ state: 'visible', timeout: 30_000 });
      await restart.locator('.monaco-button', { hasText: /^Restart Daemon$/ }).click();
      const refused = toast(page, "is not this project's mcphost");
      await refused.waitFor({ state: 'visible', timeout: 30_000 });
      requireText('the refusal', plainText(await refused.innerText()), [
        `${impostor} (found via mcphost.path)`,
        'its `--version` says "mcphost version v0.7.2"',
        "Point mcphost.path at this project's mcphost, or install this project's mcphost from its source",
        'pip install -e <checkout>',
      ]);
      await until('the status bar to show the daemon is not running', async () =>
        /mcphost/.test((await statusItem.allInnerTexts()).join(' ')) &&
        (await page.locator('.statusbar-item.error-kind', { hasText: 'mcphost' }).count()) === 1,
      );
      await page.waitForTimeout(600); // let the toast finish sliding in
      await shot(page, '10-other-mcphost-refused.png');
    });

    log(`PASS in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log('e2e: 1 passed, 0 failed');
    await cleanup();
    fs.rmSync(scratch, { recursive: true, force: true });
    return 0;
  } catch (error) {
    log(`FAIL: ${error instanceof Error ? error.stack : String(error)}`);
    try {
      const pages = browser?.contexts()[0]?.pages() ?? [];
      if (pages[0]) {
        await shot(pages[0], 'failure.png');
      }
    } catch {
      // no page to show
    }
    log(`scratch dir kept for a look: ${scratch}`);
    console.log('e2e: 0 passed, 1 failed');
    await cleanup();
    return 1;
  } finally {
    fs.writeFileSync(path.join(ARTIFACTS, 'steps.json'), JSON.stringify(steps, null, 2));
  }
}

process.exitCode = await main();

// The extension end to end, in a real VS Code: code-server with the built .vsix, driven in headless Chromium.
//
// It installs the extension, opens a workspace whose .venv holds mcphost and whose settings point at a config with
// the bundled todo server upstream, and lets the extension start the real daemon. Then, as an agent would (with the
// MCP TypeScript SDK's client), it calls through the daemon's MCP endpoint: a write call, whose notification it
// finds in the page and allows, and whose record it finds in the activity view (and opens); and a destructive call,
// whose modal it finds and denies.
// It also checks that the endpoint is registered with VS Code's MCP support. Screenshots go to the artifacts dir.
//
// Run it through e2e/run.sh, which installs the tools and sets MCPHOST_E2E_TOOLS, _VSIX and _MCPHOST.

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
const CHROMIUM = process.env.MCPHOST_E2E_CHROMIUM ?? '/usr/bin/chromium';
const HEADFUL = process.env.MCPHOST_E2E_HEADFUL === '1';
const CODE_SERVER = path.join(TOOLS, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const requireTool = createRequire(path.join(TOOLS, 'package.json'));
const { chromium } = requireTool('playwright-core');
const { Client } = requireTool('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = requireTool('@modelcontextprotocol/sdk/client/streamableHttp.js');

const PYTHON = path.join(path.dirname(fs.realpathSync(MCPHOST)), 'python');
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

async function shot(page, name) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file });
  log(`  screenshot ${path.relative(process.cwd(), file)}`);
  return file;
}

function activityRow(page, label, status) {
  return page
    .locator('.pane', { has: page.locator('.pane-header', { hasText: 'Activity' }) })
    .locator('.monaco-list-row', { hasText: label })
    .filter({ hasText: status });
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
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify({
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'security.workspace.trust.enabled': false,
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'telemetry.telemetryLevel': 'off',
      'update.mode': 'none',
      'chat.mcp.autostart': 'never',
      'workbench.secondarySideBar.defaultVisibility': 'hidden',
    }),
  );
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
  const codeLog = fs.createWriteStream(path.join(ARTIFACTS, 'code-server.log'));
  const cleanup = async () => {
    await agent?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
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

  try {
    await step('install the .vsix into code-server', () => {
      const out = execFileSync(process.execPath, [...codeArgs, '--install-extension', VSIX], { env, encoding: 'utf8' });
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
      const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
      const p = await context.newPage();
      p.on('pageerror', (error) => fs.appendFileSync(path.join(ARTIFACTS, 'browser.log'), `pageerror: ${error}\n`));
      p.on('console', (msg) => fs.appendFileSync(path.join(ARTIFACTS, 'browser.log'), `${msg.type()}: ${msg.text()}\n`));
      await p.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`);
      await p.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
      return p;
    });

    const statusItem = page.locator('.statusbar-item', { hasText: 'mcphost' });
    await step('the extension starts the daemon: status bar shows 1/1 servers up', async () => {
      await until(
        'the status bar entry "mcphost 1/1"',
        async () => /mcphost 1\/1/.test((await statusItem.allInnerTexts()).join(' ')),
        90_000,
      );
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
      await page.keyboard.press('Escape');
    });

    agent = await step('an agent connects to the MCP endpoint with the bearer token', async () => {
      const client = await connectAgent(daemonInfo.mcp.url, daemonInfo.mcp.headers);
      const server = client.getServerVersion();
      log(`  server: ${server?.name} ${server?.version}`);
      return client;
    });

    const writeCall = callTool(
      agent,
      'call_tool_write',
      'todo:add_task',
      { title: 'Buy milk (e2e)' },
      { operation_type: 'write', data_sensitivity: 'private', reason: 'The user asked me to [add](command:workbench.action.reloadWindow) it' },
    );
    writeCall.catch(() => undefined);

    await step('the write prompt appears as a notification; click "Allow once"', async () => {
      const prompt = toast(page, 'wants to write with todo:add_task');
      await prompt.waitFor({ state: 'visible', timeout: 30_000 });
      const text = await prompt.innerText();
      for (const expected of ['Allow once', 'Allow for this session', 'Always allow', 'Deny', 'Data: private']) {
        if (!text.includes(expected)) {
          throw new Error(`the write prompt lacks "${expected}": ${text}`);
        }
      }
      // The agent's text is shown as text: its markdown link is not a link.
      if ((await prompt.locator('.notification-list-item-message a').count()) > 0) {
        throw new Error("the agent's reason was rendered as a link");
      }
      if (!text.includes('[add] (command:workbench.action.reloadWindow)')) {
        throw new Error(`the agent's reason is not shown as plain text: ${text}`);
      }
      await page.waitForTimeout(600); // let the toast finish sliding in
      await shot(page, '02-write-prompt.png');
      await prompt.locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      await prompt.waitFor({ state: 'detached', timeout: 10_000 });
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

    const deleteCall = callTool(
      agent,
      'call_tool_destructive',
      'todo:delete_task',
      { task_id: added.id },
      { operation_type: 'destructive', data_sensitivity: 'internal', reason: 'Tidying up the list' },
    );
    deleteCall.catch(() => undefined);

    await step('the destructive call gets a modal warning; click "Deny"', async () => {
      const dialog = page.locator('.monaco-dialog-box');
      await dialog.waitFor({ state: 'visible', timeout: 30_000 });
      const text = await dialog.innerText();
      for (const expected of [
        'todo:delete_task',
        'Data sensitivity: internal',
        'Tidying up the list',
        added.id,
        'Deny',
        'Allow once: todo:delete_task',
      ]) {
        if (!text.includes(expected)) {
          throw new Error(`the destructive prompt lacks "${expected}": ${text}`);
        }
      }
      if (text.includes('Always allow')) {
        throw new Error('the destructive prompt offers "Always allow", which the daemon did not allow');
      }
      await shot(page, '05-destructive-modal.png');
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
      await shot(page, '06-denied-in-activity-view.png');
    });

    await step('the activity view filters by intent', async () => {
      await runCommand(page, 'mcphost: Filter by Intent');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'destructive calls' }).first().click();
      await until('only the destructive call to be listed', async () => {
        const rows = await page
          .locator('.pane', { has: page.locator('.pane-header', { hasText: 'Activity' }) })
          .locator('.monaco-list-row')
          .allInnerTexts();
        return rows.length === 1 && rows[0].includes('todo:delete_task');
      });
      await runCommand(page, 'mcphost: Filter by Intent');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'all intents' }).first().click();
    });

    await step('remembered approvals are listed through the daemon (none yet)', async () => {
      await runCommand(page, 'mcphost: List and Revoke Remembered Approvals');
      await toast(page, 'no remembered approvals').first().waitFor({ state: 'visible', timeout: 10_000 });
    });

    const configFile = path.join(ws, '.mcphost', 'config.toml');
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

    await step('a prompt the daemon withdraws (it expired) disappears', async () => {
      fs.writeFileSync(configFile, goodConfig.replace('prompt_timeout = 120', 'prompt_timeout = 3'));
      await until('the config error to clear', async () => /^\s*0\s+0\s*$/.test(await problems.innerText()), 30_000);
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

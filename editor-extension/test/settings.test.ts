import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import {
  DAEMON_SETTINGS,
  type ExtensionSettings,
  type ResolveContext,
  SETTINGS,
  SETTINGS_SECTION,
  type SettingGetter,
  commandArgs,
  expandPath,
  resolveCommand,
  serveArgs,
  settingName,
  settingsFrom,
  shellLine,
  verbosityArgs,
  writeTarget,
} from '../src/settings';

// out/test/settings.test.js -> the extension's package.json
const PACKAGE_JSON = path.resolve(__dirname, '..', '..', 'package.json');

interface Contributed {
  default?: unknown;
}

function contributedSettings(): Record<string, Contributed> {
  const manifest = JSON.parse(fs.readFileSync(PACKAGE_JSON, 'utf8')) as {
    contributes: { configuration: { properties: Record<string, Contributed> } };
  };
  return manifest.contributes.configuration.properties;
}

/** A getter over the values a user set (keys within the section), falling back to the default as VS Code does. */
function getter(values: Record<string, unknown>, asked: string[] = []): SettingGetter {
  return <T>(key: string, defaultValue: T): T => {
    asked.push(key);
    return key in values ? (values[key] as T) : defaultValue;
  };
}

const DEFAULTS: ExtensionSettings = {
  path: '',
  interpreter: '',
  configPath: '',
  env: {},
  registerMcpServer: true,
  activityMaxRecords: 500,
  singlePrompt: 'offer',
};

describe('reading the settings', () => {
  it('has the defaults when nothing is set', () => {
    assert.deepEqual(settingsFrom(getter({})), DEFAULTS);
  });

  it('reads each key of the mcphost section', () => {
    const asked: string[] = [];
    settingsFrom(getter({}, asked));
    assert.deepEqual(
      [...asked].sort(),
      ['activity.maxRecords', 'configPath', 'env', 'interpreter', 'path', 'registerMcpServer', 'singlePrompt'],
    );
  });

  const cases: { [K in keyof ExtensionSettings]: [string, ExtensionSettings[K]] } = {
    path: ['path', '/opt/mcphost'],
    interpreter: ['interpreter', '/usr/bin/python3'],
    configPath: ['configPath', '~/cfg/config.toml'],
    env: ['env', { MCPHOST_DATA_DIR: '/d' }],
    registerMcpServer: ['registerMcpServer', false],
    activityMaxRecords: ['activity.maxRecords', 42],
    singlePrompt: ['singlePrompt', 'both'],
  };
  for (const [field, [key, value]] of Object.entries(cases)) {
    it(`takes ${field} from mcphost.${key}`, () => {
      assert.deepEqual(settingsFrom(getter({ [key]: value })), { ...DEFAULTS, [field]: value });
    });
  }

  it('takes an unknown singlePrompt value as not answered', () => {
    assert.equal(settingsFrom(getter({ singlePrompt: 'yes please' })).singlePrompt, 'offer');
    assert.equal(settingsFrom(getter({ singlePrompt: 'mcphost' })).singlePrompt, 'mcphost');
  });

  it('writes a setting where its value comes from, else to the user settings', () => {
    assert.equal(writeTarget(undefined), 'user');
    assert.equal(writeTarget({}), 'user');
    assert.equal(writeTarget({ workspaceValue: 'both' }), 'workspace');
  });

  it('never hands out the shared default env', () => {
    const settings = settingsFrom(getter({}));
    settings.env.X = 'y';
    assert.deepEqual(SETTINGS.env.default, {});
    assert.deepEqual(settingsFrom(getter({})).env, {});
  });

  it('names settings in full', () => {
    assert.equal(settingName('activityMaxRecords'), 'mcphost.activity.maxRecords');
    assert.equal(settingName('registerMcpServer'), 'mcphost.registerMcpServer');
    assert.deepEqual(DAEMON_SETTINGS.map(settingName), ['mcphost.path', 'mcphost.interpreter', 'mcphost.configPath', 'mcphost.env']);
  });

  it("matches package.json's keys and defaults", () => {
    const contributed = contributedSettings();
    for (const [field, { key, default: value }] of Object.entries(SETTINGS)) {
      const name = `${SETTINGS_SECTION}.${key}`;
      assert.ok(name in contributed, `${field}: ${name} is not in package.json`);
      assert.deepEqual(value, contributed[name].default, `${name}'s default`);
    }
    // The one setting not read through SETTINGS is vscode-languageclient's own.
    const known = new Set(Object.values(SETTINGS).map(({ key }) => `${SETTINGS_SECTION}.${key}`));
    assert.deepEqual(
      Object.keys(contributed).filter((name) => !known.has(name)),
      ['mcphost.trace.server'],
    );
  });
});

function context(files: string[], overrides: Partial<ResolveContext> = {}, settings: Partial<ResolveContext['settings']> = {}): ResolveContext {
  const set = new Set(files);
  return {
    settings: { path: '', interpreter: '', configPath: '', env: {}, ...settings },
    workspaceFolders: ['/ws'],
    env: { PATH: '/usr/local/bin:/usr/bin' },
    platform: 'linux',
    home: '/home/me',
    exists: (file) => set.has(file),
    ...overrides,
  };
}

describe('finding mcphost', () => {
  it('takes mcphost.path first', () => {
    const result = resolveCommand(context(['/opt/mcphost', '/ws/.venv/bin/mcphost'], {}, { path: '/opt/mcphost' }));
    assert.deepEqual(result, {
      ok: true,
      command: { command: '/opt/mcphost', prefix: [], source: 'mcphost.path', configPath: undefined, env: {} },
    });
  });

  it('says when mcphost.path points nowhere', () => {
    const result = resolveCommand(context([], {}, { path: '~/bin/mcphost' }));
    assert.equal(result.ok, false);
    assert.match(!result.ok ? result.error : '', /mcphost\.path is set to "~\/bin\/mcphost", but no executable is there/);
  });

  it('runs an interpreter as python -m mcphost', () => {
    const result = resolveCommand(context(['/ws/.venv/bin/python'], {}, { interpreter: '${workspaceFolder}/.venv/bin/python' }));
    assert.ok(result.ok);
    assert.equal(result.command.command, '/ws/.venv/bin/python');
    assert.deepEqual(result.command.prefix, ['-m', 'mcphost']);
    assert.equal(result.command.source, 'mcphost.interpreter');
  });

  it('finds a bare interpreter name on PATH', () => {
    const result = resolveCommand(context(['/usr/bin/python3'], {}, { interpreter: 'python3' }));
    assert.ok(result.ok);
    assert.equal(result.command.command, '/usr/bin/python3');
  });

  it("prefers the workspace's venv to PATH", () => {
    const result = resolveCommand(context(['/ws/venv/bin/mcphost', '/usr/bin/mcphost']));
    assert.ok(result.ok);
    assert.equal(result.command.command, '/ws/venv/bin/mcphost');
    assert.equal(result.command.source, 'workspace venv');
  });

  it('looks in every workspace folder, and on Windows in Scripts', () => {
    const result = resolveCommand(
      context(['C:\\b\\.venv\\Scripts\\mcphost.exe'], { workspaceFolders: ['C:\\a', 'C:\\b'], platform: 'win32', env: {} }),
    );
    // path.join uses the host's separator; the lookup only has to hit the one candidate it builds.
    if (process.platform === 'win32') {
      assert.ok(result.ok);
    } else {
      assert.equal(result.ok, false);
    }
  });

  it('falls back to PATH', () => {
    const result = resolveCommand(context(['/usr/bin/mcphost']));
    assert.ok(result.ok);
    assert.equal(result.command.command, '/usr/bin/mcphost');
    assert.equal(result.command.source, 'PATH');
  });

  it("says how to install this project's mcphost, or point at it, when there is none", () => {
    const result = resolveCommand(context([]));
    assert.equal(result.ok, false);
    const error = !result.ok ? result.error : '';
    assert.match(error, /pip install -e <checkout>.*pipx install <checkout>.*mcphost\.path.*mcphost\.interpreter/);
    // Never by name from a package index: other projects are called mcphost too.
    assert.doesNotMatch(error, /pip install mcphost/);
  });
});

describe('arguments', () => {
  it('adds --config and the daemon environment from the settings', () => {
    const result = resolveCommand(
      context(['/usr/bin/mcphost'], {}, { configPath: '~/cfg/config.toml', env: { MCPHOST_DATA_DIR: '/d' } }),
    );
    assert.ok(result.ok);
    assert.deepEqual(result.command.env, { MCPHOST_DATA_DIR: '/d' });
    assert.deepEqual(serveArgs(result.command, 3), ['serve', '-v', '--config', '/home/me/cfg/config.toml']);
    assert.deepEqual(commandArgs(result.command, ['log', 'tail', '-f']), ['log', 'tail', '-f', '--config', '/home/me/cfg/config.toml']);
  });

  it('puts the interpreter prefix first', () => {
    const result = resolveCommand(context(['/usr/bin/python3'], {}, { interpreter: '/usr/bin/python3' }));
    assert.ok(result.ok);
    assert.deepEqual(serveArgs(result.command, 4), ['-m', 'mcphost', 'serve']);
  });

  it('maps the log level to verbosity', () => {
    assert.deepEqual(verbosityArgs(0), []);
    assert.deepEqual(verbosityArgs(1), ['-vv']);
    assert.deepEqual(verbosityArgs(2), ['-vv']);
    assert.deepEqual(verbosityArgs(3), ['-v']);
    assert.deepEqual(verbosityArgs(4), []);
  });

  it('expands variables and relative paths', () => {
    const ctx = { workspaceFolders: ['/ws'], env: { CFG: '/etc/m' }, home: '/home/me' };
    assert.equal(expandPath('${env:CFG}/config.toml', ctx), '/etc/m/config.toml');
    assert.equal(expandPath('cfg/config.toml', ctx), '/ws/cfg/config.toml');
    assert.equal(expandPath('~', ctx), '/home/me');
    assert.equal(expandPath('  ', ctx), '');
    assert.equal(expandPath('mcphost', ctx), 'mcphost');
  });

  it('quotes a terminal command line', () => {
    assert.equal(shellLine(['/usr/bin/mcphost', 'log', 'tail', '-f'], 'linux'), '/usr/bin/mcphost log tail -f');
    assert.equal(shellLine(['/my dir/mcphost', "it's"], 'linux'), `'/my dir/mcphost' 'it'\\''s'`);
    assert.equal(shellLine(['C:\\Program Files\\mcphost.exe', 'log'], 'win32'), '"C:\\Program Files\\mcphost.exe" log');
  });
});

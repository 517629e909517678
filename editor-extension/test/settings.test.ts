import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  type ResolveContext,
  commandArgs,
  expandPath,
  parseDaemonLogLine,
  resolveCommand,
  serveArgs,
  shellLine,
  verbosityArgs,
} from '../src/settings';

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

  it('says how to install or point at mcphost when there is none', () => {
    const result = resolveCommand(context([]));
    assert.equal(result.ok, false);
    assert.match(!result.ok ? result.error : '', /pip install mcphost.*mcphost\.path or mcphost\.interpreter/);
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

describe('daemon log lines', () => {
  it('keep their level', () => {
    assert.deepEqual(parseDaemonLogLine('mcphost: WARNING mcphost.daemon: upstream todo failed'), {
      level: 'warn',
      text: 'mcphost.daemon: upstream todo failed',
    });
    assert.deepEqual(parseDaemonLogLine('mcphost: DEBUG x: y'), { level: 'debug', text: 'x: y' });
    assert.deepEqual(parseDaemonLogLine('mcphost: CRITICAL x'), { level: 'error', text: 'x' });
    assert.deepEqual(parseDaemonLogLine('Traceback (most recent call last):'), {
      level: 'info',
      text: 'Traceback (most recent call last):',
    });
  });
});

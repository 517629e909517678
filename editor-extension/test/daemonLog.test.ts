import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { DaemonLogReader, parseDaemonLogLine } from '../src/daemonLog';

function read(lines: string[]): [string, string][] {
  const reader = new DaemonLogReader();
  return lines.map((line) => {
    const { level, text } = reader.line(line);
    return [level, text];
  });
}

describe('daemon log lines', () => {
  it('keep the level they were logged at', () => {
    assert.deepEqual(parseDaemonLogLine('mcphost: WARNING mcphost.daemon: upstream todo failed'), {
      level: 'warn',
      text: 'mcphost.daemon: upstream todo failed',
    });
    assert.deepEqual(parseDaemonLogLine('mcphost: DEBUG x: y'), { level: 'debug', text: 'x: y' });
    assert.deepEqual(parseDaemonLogLine('mcphost: CRITICAL x'), { level: 'error', text: 'x' });
    assert.deepEqual(parseDaemonLogLine('mcphost: config reloaded from /c/config.toml: no changes'), {
      level: 'info',
      text: 'mcphost: config reloaded from /c/config.toml: no changes',
    });
  });

  it('put a rejected config at error level, its issues included (as mcphost/host.py prints it)', () => {
    assert.deepEqual(
      read([
        'mcphost: /w/.mcphost/config.toml: invalid config (2 problems)',
        "  line 2, column 1: permissions.bogus_key: unknown key 'bogus_key'",
        '  line 5, column 1: servers.x.command: field required',
        'mcphost: the last good config stays in force until the file is fixed',
        'mcphost: config reloaded from /w/.mcphost/config.toml: permissions changed (errors fixed)',
      ]),
      [
        ['error', 'mcphost: /w/.mcphost/config.toml: invalid config (2 problems)'],
        ['error', "  line 2, column 1: permissions.bogus_key: unknown key 'bogus_key'"],
        ['error', '  line 5, column 1: servers.x.command: field required'],
        ['error', 'mcphost: the last good config stays in force until the file is fixed'],
        ['info', 'mcphost: config reloaded from /w/.mcphost/config.toml: permissions changed (errors fixed)'],
      ],
    );
    assert.equal(parseDaemonLogLine('mcphost: /c/config.toml: invalid config (1 problem)').level, 'error');
  });

  it('put the other plain reports at their level', () => {
    assert.equal(parseDaemonLogLine('mcphost: ERROR: activity log /d/activity.jsonl is not writable').level, 'error');
    assert.equal(
      parseDaemonLogLine('mcphost: config /c/config.toml was removed; the config in force stays until the file is back')
        .level,
      'warn',
    );
    assert.equal(parseDaemonLogLine('mcphost: agent endpoint http://127.0.0.1:1/mcp').level, 'info');
  });

  it('keep a traceback with the message that logged it, and an unlogged one at error', () => {
    assert.deepEqual(
      read([
        'mcphost: WARNING mcphost.upstream: todo: call failed',
        'Traceback (most recent call last):',
        '  File "x.py", line 1, in <module>',
        'ValueError: boom',
        'something else entirely',
        'Traceback (most recent call last):',
        '  File "y.py", line 2, in <module>',
        'KeyError: k',
      ]).map(([level]) => level),
      ['warn', 'warn', 'warn', 'warn', 'info', 'error', 'error', 'error'],
    );
  });
});

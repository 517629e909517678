import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { grantItemText, noIcons } from '../src/grantsText';
import type { StatusPayload } from '../src/protocol';
import { statusView, upstreamCounts } from '../src/statusText';

function status(overrides: Partial<StatusPayload> = {}): StatusPayload {
  return {
    version: '0.1.0',
    protocol: 1,
    pid: 42,
    mcp: { url: 'http://127.0.0.1:1234/mcp', headers: { Authorization: 'Bearer t' } },
    config_path: '/c/config.toml',
    log_path: '/d/activity.jsonl',
    servers: [
      { name: 'todo', transport: 'stdio', state: 'connected', tools: 5 },
      { name: 'remote', transport: 'http', state: 'failed', tools: 0, error: 'connection refused' },
    ],
    pending: 0,
    prompts: [],
    editors: [],
    ...overrides,
  };
}

describe('status', () => {
  it('counts upstream servers up of total', () => {
    assert.deepEqual(upstreamCounts(status()), { up: 1, total: 2 });
  });

  it('shows connected, servers and waiting prompts, loudly, and a click shows the oldest prompt', () => {
    const view = statusView('connected', status({ pending: 2 }));
    assert.equal(view.text, '$(shield) mcphost 1/2 $(bell-dot) 2 prompts waiting');
    assert.equal(view.detail, 'connected · 1/2 servers up · 2 prompts waiting');
    assert.equal(view.severity, 'warning');
    assert.equal(view.background, 'warning');
    assert.equal(view.click, 'prompts');
    assert.match(view.tooltip, /^remote: failed \(connection refused\)$/m);
    assert.match(view.tooltip, /^Click to show the oldest prompt waiting for your answer/m);
  });

  it('shows one waiting prompt in the singular, and no bell, background or prompt click without any', () => {
    assert.match(statusView('connected', status({ pending: 1 })).detail, /1 prompt waiting$/);
    const quiet = statusView('connected', status({ servers: [] }));
    assert.equal(quiet.text, '$(shield) mcphost 0/0');
    assert.equal(quiet.background, undefined);
    assert.equal(quiet.click, 'activity');
  });

  it('flags config errors, and lets waiting prompts outrank them', () => {
    const view = statusView('connected', status({ config_error: 'servers.x: unknown key' }));
    assert.equal(view.severity, 'error');
    assert.equal(view.background, 'error');
    assert.match(view.tooltip, /config not applied: servers\.x: unknown key/);
    assert.equal(statusView('connected', status({ config_error: 'x', pending: 1 })).background, 'warning');
  });

  it("says when the daemon is another window's or a terminal's, with its pid, and where its log is", () => {
    const shared = { kind: 'shared', socket: '/r/daemon-7.sock', pid: 7 } as const;
    const view = statusView('connected', status({ pid: 4242 }), undefined, shared);
    assert.equal(view.text, '$(shield) mcphost 1/2 $(link)');
    assert.match(view.detail, /^connected to the daemon started by another window or terminal \(pid 4242\) · 1\/2 servers up$/);
    assert.equal(
      view.tooltip.split('\n')[0],
      'mcphost 0.1.0: connected to the daemon started by another window or terminal (pid 4242), whose log is in that ' +
        'window or terminal. When it ends, this window starts its own.',
    );
    assert.equal(statusView('connected', status({ pending: 1 }), undefined, shared).text, '$(shield) mcphost 1/2 $(link) $(bell-dot) 1 prompt waiting');
    assert.equal(statusView('starting', undefined, undefined, shared).detail, 'attaching to the daemon started by another window or terminal (pid 7)');
    // Its own: no word of it.
    assert.doesNotMatch(statusView('connected', status()).tooltip, /another window/);
  });

  it('shows not connected, starting and failed', () => {
    assert.match(statusView('stopped', undefined).detail, /^not connected: the daemon is not running$/);
    assert.equal(statusView('starting', undefined).busy, true);
    const failed = statusView('failed', undefined, 'mcphost was not found');
    assert.equal(failed.severity, 'error');
    assert.equal(failed.background, 'error');
    assert.match(failed.tooltip, /mcphost was not found/);
  });
});

describe('grants', () => {
  it('read as server:tool, variant and scope, and when and by whom', () => {
    const text = grantItemText(
      {
        id: 'g1',
        scope: 'always',
        server: 'todo',
        tool: 'add_task',
        variant: 'call_tool_write',
        granted_at: '2030-01-01T00:00:00Z',
        approver: 'Visual Studio Code 1.139',
        match: 'tool',
      },
      () => '00:00:00',
    );
    assert.deepEqual(text, {
      label: 'todo:add_task',
      description: 'call_tool_write · always · any arguments',
      detail: 'granted 00:00:00 · by Visual Studio Code 1.139',
    });
  });

  it('say what each grant covers: any arguments, exactly some, or a pattern', () => {
    const base = { id: 'g1', scope: 'session' as const, server: 'fs', tool: 'write', variant: 'call_tool_write', granted_at: 'x' };
    const time = () => 't';
    assert.equal(
      grantItemText({ ...base, match: 'arguments', arguments_preview: '{"path": "/w/a.txt"}' }, time).description,
      'call_tool_write · this session · exactly {"path": "/w/a.txt"}',
    );
    assert.equal(
      grantItemText({ ...base, match: 'pattern', pattern: { path: '/w/src/*', mode: 'w' } }, time).description,
      'call_tool_write · this session · arguments matching path="/w/src/*", mode="w"',
    );
    // An older daemon's grant (no match): any arguments, as it was.
    assert.match(grantItemText({ ...base } as never, time).description, /· any arguments$/);
    // Names from the agent or the server are never icons.
    assert.match(grantItemText({ ...base, match: 'pattern', pattern: { p: '$(alert)*' } }, time).description, /\$\u200a\(alert\)/);
  });

  it('never render a server-chosen name as an icon', () => {
    assert.equal(noIcons('$(alert)x'), '$\u200a(alert)x');
  });
});

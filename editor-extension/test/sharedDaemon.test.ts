import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  type ConnectionEnd,
  DROP_WINDOW_MS,
  EXIT_ANOTHER_DAEMON,
  FRESH,
  MAX_FAILED_IN_A_ROW,
  MAX_RESTARTS,
  type NextStep,
  type ReconnectHistory,
  attachTarget,
  backoffMs,
  connected,
  nextStep,
  parseRefusal,
  pastOneDaemonCheck,
  targetFromStatus,
} from '../src/sharedDaemon';

// As mcphost/cli/serve.py prints them (_describe_other and _refusal).
const SERVES =
  'mcphost: another daemon already serves /w/.mcphost/config.toml: pid 4242, since 2030-01-01T12:00:00Z, ' +
  'agents at http://127.0.0.1:45757/mcp, editors attach at /run/user/1000/mcphost/daemon-4242.sock';
const NOT_STARTING =
  'mcphost: not starting a second one: `mcphost approve`, `call` and `mcp` go to the newer of two daemons, so ' +
  'agents of the other would find no approver. Use the running one (`mcphost status` describes it), stop it ' +
  '(`kill 4242`, Ctrl-C in its terminal, or close the editor window that started it), or start a second one ' +
  'anyway with `mcphost serve --allow-second`';
const STARTING = 'mcphost: another `mcphost serve` (pid 4242) is starting for /w/.mcphost/config.toml';

/** `mcphost status -o json`, as mcphost/cli/status.py prints it: the discovery fields, then the daemon's status. */
function statusJson(daemons: Record<string, unknown>[]): string {
  return JSON.stringify({
    daemons: daemons.map((d) => ({
      pid: 4242,
      discovery_file: '/run/user/1000/mcphost/daemon-4242.json',
      started_at: '2030-01-01T12:00:00Z',
      version: '0.1.0',
      protocol: 1,
      mcp: { url: 'http://127.0.0.1:45757/mcp', headers: { Authorization: 'Bearer t' } },
      config_path: '/w/.mcphost/config.toml',
      log_path: '/d/activity.jsonl',
      editor_socket: '/run/user/1000/mcphost/daemon-4242.sock',
      servers: [],
      pending: 0,
      prompts: [],
      editors: [],
      ...d,
    })),
  });
}

describe('the refusal of a second daemon', () => {
  it('is read for the config, the pid and the editor socket', () => {
    assert.equal(EXIT_ANOTHER_DAEMON, 3);
    assert.deepEqual(parseRefusal(`${SERVES}\n${NOT_STARTING}\n`), {
      message: SERVES.slice('mcphost: '.length),
      configPath: '/w/.mcphost/config.toml',
      pid: 4242,
      socket: '/run/user/1000/mcphost/daemon-4242.sock',
    });
  });

  it('keeps paths with spaces and colons whole', () => {
    const line =
      'mcphost: another daemon already serves /w/my: config.toml: pid 7, since 2030-01-01T12:00:00Z, agents at ' +
      'http://127.0.0.1:1/mcp, editors attach at /r/a dir/daemon-7.sock';
    const refusal = parseRefusal(line);
    assert.equal(refusal?.configPath, '/w/my: config.toml');
    assert.equal(refusal?.socket, '/r/a dir/daemon-7.sock');
  });

  it('names no socket when the other daemon has none, or is still starting', () => {
    const older = 'mcphost: another daemon already serves /c.toml: pid 9, since 2030-01-01T12:00:00Z, agents at http://127.0.0.1:1/mcp';
    assert.deepEqual(parseRefusal(older), { message: older.slice(9), configPath: '/c.toml', pid: 9 });
    assert.deepEqual(parseRefusal(`mcphost: INFO x: y\n${STARTING}\n${NOT_STARTING}`), {
      message: STARTING.slice(9),
      configPath: '/w/.mcphost/config.toml',
      pid: 4242,
      starting: true,
    });
    assert.deepEqual(parseRefusal('mcphost: another thing we do not know'), { message: 'another thing we do not know' });
    assert.equal(parseRefusal('Traceback (most recent call last):\n  boom'), undefined);
  });

  it('comes before the line that says which config is in force: that line means the daemon got past it', () => {
    assert.equal(pastOneDaemonCheck('mcphost: config /w/.mcphost/config.toml'), true);
    assert.equal(
      pastOneDaemonCheck('mcphost: no config file at /h/.config/mcphost/config.toml; the built-in default is in force'),
      true,
    );
    assert.equal(pastOneDaemonCheck(SERVES), false);
    assert.equal(pastOneDaemonCheck(STARTING), false);
    assert.equal(pastOneDaemonCheck('mcphost: INFO mcphost.config: config /x'), false);
  });
});

describe('where to attach', () => {
  const refusal = parseRefusal(SERVES);

  it('is the daemon the refusal named, as `mcphost status -o json` lists it', () => {
    const json = statusJson([
      { pid: 1, config_path: '/other/config.toml', editor_socket: '/r/daemon-1.sock' },
      { pid: 4242, editor_socket: '/r/from-status.sock' },
    ]);
    assert.deepEqual(attachTarget(json, refusal), { socket: '/r/from-status.sock', pid: 4242, source: 'mcphost status' });
  });

  it('else the newest daemon serving the same config', () => {
    const json = statusJson([
      { pid: 5, started_at: '2030-01-01T12:00:05Z', editor_socket: '/r/daemon-5.sock' },
      { pid: 6, started_at: '2030-01-01T12:00:09Z', editor_socket: '/r/daemon-6.sock' },
      { pid: 7, started_at: '2030-01-01T12:00:10Z', config_path: '/other.toml', editor_socket: '/r/daemon-7.sock' },
    ]);
    assert.deepEqual(targetFromStatus(json, { pid: 4242, configPaths: ['/w/.mcphost/./config.toml'] }), {
      socket: '/r/daemon-6.sock',
      pid: 6,
      source: 'mcphost status',
    });
    // Without a refusal to go by (an mcphost that words it otherwise), the config this window passes.
    assert.equal(attachTarget(json, undefined, '/w/.mcphost/config.toml')?.pid, 6);
    assert.equal(attachTarget(json, undefined, undefined), undefined);
  });

  it("falls back to the refusal's socket when `mcphost status` failed, printed no JSON, or lists no socket", () => {
    const fallback = { socket: '/run/user/1000/mcphost/daemon-4242.sock', pid: 4242, source: 'the refusal' };
    assert.deepEqual(attachTarget(undefined, refusal), fallback);
    assert.deepEqual(attachTarget('mcphost: ignoring ...', refusal), fallback);
    assert.deepEqual(attachTarget('{"daemons": "no"}', refusal), fallback);
    assert.deepEqual(attachTarget(statusJson([{ editor_socket: null, error: 'no editor socket' }]), refusal), fallback);
    assert.deepEqual(attachTarget(JSON.stringify({ daemons: [] }), refusal), fallback);
  });

  it('is nowhere while the other daemon is starting and lists nothing yet', () => {
    assert.equal(attachTarget(JSON.stringify({ daemons: [] }), parseRefusal(STARTING)), undefined);
    assert.equal(attachTarget(undefined, undefined), undefined);
  });
});

function errorOf(step: NextStep): string {
  return step.action === 'give up' ? step.error : `no error: ${step.action}`;
}

describe('after a connection ends', () => {
  const target = { socket: '/r/daemon-4242.sock', pid: 4242, source: 'mcphost status' } as const;
  const refused: ConnectionEnd = { kind: 'refused', refusal: parseRefusal(SERVES), target };
  const now = 1_000_000;

  it('a refused daemon (exit status 3) makes the window attach to the one that serves the config', () => {
    const { step, history } = nextStep(refused, FRESH, now);
    assert.deepEqual(step, { action: 'attach', target });
    assert.equal(history.failedInARow, 1);
    // Attached and up, the tries in a row start over.
    assert.deepEqual(connected(history), FRESH);
  });

  it("when the other window's daemon goes away, the window starts its own at once", () => {
    const { step, history } = nextStep({ kind: 'detached', wasUp: true, pid: 4242 }, FRESH, now);
    assert.deepEqual(step, { action: 'spawn', delayMs: 0 });
    assert.deepEqual(history, { failedInARow: 0, drops: [now] });
  });

  it('refused while the other still holds the config (starting, or finishing), it tries again later and later', () => {
    const starting: ConnectionEnd = { kind: 'refused', refusal: parseRefusal(STARTING), target: undefined };
    let history: ReconnectHistory = FRESH;
    const delays: number[] = [];
    for (let i = 0; i < MAX_FAILED_IN_A_ROW; i++) {
      const next = nextStep(starting, history, now);
      assert.equal(next.step.action, 'spawn');
      delays.push(next.step.action === 'spawn' ? next.step.delayMs : -1);
      history = next.history;
    }
    assert.deepEqual(delays, [250, 500, 1000, 2000, 4000, 4000, 4000]);
    const last = nextStep(starting, history, now);
    assert.match(errorOf(last.step), /is starting for .*; this window could not attach to it$/);
  });

  it('refused by a daemon that takes no editors (an older mcphost), it gives up at once, saying so', () => {
    const older = parseRefusal(
      'mcphost: another daemon already serves /c.toml: pid 9, since 2030-01-01T12:00:00Z, agents at http://127.0.0.1:1/mcp',
    );
    const { step } = nextStep({ kind: 'refused', refusal: older, target: undefined }, FRESH, now);
    assert.match(errorOf(step), /^another daemon already serves \/c\.toml: pid 9, .*; it takes no editors \(an older mcphost\?\)/);
  });

  it("a socket that does not answer (its daemon just went away) is followed by a try at the window's own", () => {
    const unreachable: ConnectionEnd = { kind: 'detached', wasUp: false, pid: 4242, why: 'ECONNREFUSED' };
    assert.deepEqual(nextStep(unreachable, FRESH, now).step, { action: 'spawn', delayMs: backoffMs(1) });
    const stuck = nextStep(unreachable, { failedInARow: MAX_FAILED_IN_A_ROW, drops: [] }, now);
    assert.equal(
      errorOf(stuck.step),
      'the daemon started by another window or terminal (pid 4242) could not be reached: ECONNREFUSED',
    );
  });

  it('a daemon of its own that crashes is restarted, up to three times in three minutes', () => {
    const crash: ConnectionEnd = { kind: 'exited', code: 1, signal: null, wasUp: true };
    let history: ReconnectHistory = FRESH;
    for (let i = 0; i < MAX_RESTARTS; i++) {
      const next = nextStep(crash, history, now + i * 1000);
      assert.deepEqual(next.step, { action: 'spawn', delayMs: 0 });
      history = next.history;
    }
    const fourth = nextStep(crash, history, now + 5000);
    assert.deepEqual(fourth.step, {
      action: 'give up',
      error: 'the daemon exited with code 1 (4 times in 3 minutes); not trying again',
    });
    // Drops older than three minutes are forgotten.
    const later = nextStep(crash, history, now + DROP_WINDOW_MS + 1500);
    assert.equal(later.step.action, 'spawn');
    assert.equal(later.history.drops.length, 2);
  });

  it('a daemon of its own that fails on its way up (not refused) is not started again', () => {
    const { step } = nextStep(
      { kind: 'exited', code: 1, signal: null, wasUp: false, why: 'mcphost: the runtime dir is open to others' },
      FRESH,
      now,
    );
    assert.deepEqual(step, {
      action: 'give up',
      error: 'the daemon exited with code 1 before it was up: mcphost: the runtime dir is open to others',
    });
    const killed = nextStep({ kind: 'exited', code: null, signal: 'SIGKILL', wasUp: true }, { failedInARow: 0, drops: [now, now, now] }, now);
    assert.match(errorOf(killed.step), /^the daemon was ended by SIGKILL \(4 times in 3 minutes\)/);
  });

  it('the second window: refused, attached, handed over when the first closes, then its own', () => {
    let history: ReconnectHistory = FRESH;
    const steps: string[] = [];
    const run = (end: ConnectionEnd) => {
      const next = nextStep(end, history, now);
      history = next.history;
      steps.push(next.step.action);
    };
    run(refused);
    history = connected(history);
    run({ kind: 'detached', wasUp: true, pid: 4242 });
    // The first daemon still finishes shutting down: refused once more, with nowhere to attach.
    run({ kind: 'refused', refusal: parseRefusal(STARTING), target: undefined });
    assert.deepEqual(steps, ['attach', 'spawn', 'spawn']);
    assert.deepEqual(connected(history), { failedInARow: 0, drops: [now] });
  });
});

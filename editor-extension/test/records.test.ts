import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  RecordList,
  WAITING_ICON,
  formatDuration,
  formatRecord,
  formatTime,
  formatWaiting,
  iconFor,
  matchesFilter,
  recordIntent,
  waitingMatchesFilter,
} from '../src/records';
import { record, request } from './fixtures';

const NOW = new Date('2030-01-01T13:00:00.000Z');

describe('record formatting', () => {
  it('shows server:tool, then status, the full duration, intent and time (the duration before what a narrow view cuts)', () => {
    const view = formatRecord(record(), NOW);
    assert.equal(view.label, 'todo:add_task');
    assert.equal(view.description, 'ok · 12.5 ms · write · 12:00:00');
    assert.deepEqual(view.icon, { id: 'pass', color: 'testing.iconPassed' });
    assert.equal(view.intent, 'write');
  });

  it('gives each outcome its own icon and colour, whatever the intent', () => {
    const destructive = (status: string) =>
      iconFor(record({ status, tool: 'delete_task', metadata: { tool_variant: 'call_tool_destructive' } }));
    const icons = ['success', 'denied', 'rejected', 'error', 'expired', 'cancelled', 'started'].map((status) =>
      destructive(status),
    );
    assert.deepEqual(destructive('success'), { id: 'pass', color: 'testing.iconPassed' });
    assert.deepEqual(destructive('denied'), { id: 'circle-slash', color: 'errorForeground' });
    assert.equal(new Set(icons.map((i) => i.id)).size, icons.length, 'one icon per outcome');
    assert.ok(!icons.some((i) => i.id === WAITING_ICON.id));
    assert.deepEqual(iconFor(record({ status: 'denied' })), destructive('denied'));
  });

  it("shows a hook's decision on an agent's own tool as a call, with what the hook was told", () => {
    const asked = formatRecord(
      record({ type: 'hook_decision', status: 'asked', server: 'claude-code', tool: 'Bash', metadata: { tool_variant: 'call_tool_destructive' } }),
      NOW,
    );
    assert.equal(asked.label, 'claude-code:Bash');
    assert.equal(asked.description, "asked in the agent's prompt · 12.5 ms · destructive · 12:00:00");
    assert.equal(asked.icon.id, 'comment-discussion');
    const allowed = formatRecord(record({ type: 'hook_decision', status: 'allowed' }), NOW);
    assert.ok(allowed.description.startsWith('allowed · '));
  });

  it("shows a call under way (its start) as running, under the call's name", () => {
    const view = formatRecord(record({ type: 'tool_call_started', status: 'started', duration_ms: null }), NOW);
    assert.equal(view.label, 'todo:add_task');
    assert.equal(view.description, 'running · write · 12:00:00');
    assert.equal(view.icon.id, 'sync~spin');
  });

  it("puts the decision, the agent's reason and errors in a plain tooltip", () => {
    const view = formatRecord(
      record({
        status: 'denied',
        decision: { by: 'editor', action: 'confirm', outcome: 'deny', at: '2030-01-01T12:00:00.000Z' },
        error: { code: 'PERMISSION_DENIED', message: 'Permission denied by the person' },
        metadata: { tool_variant: 'call_tool_destructive', intent: { operation_type: 'destructive', reason: '[x](http://e.vil)' } },
        tool: 'delete_task',
      }),
      NOW,
    );
    assert.equal(view.description, 'denied · 12.5 ms · destructive · 12:00:00');
    assert.match(view.tooltip, /^status: denied \(PERMISSION_DENIED\)$/m);
    assert.match(view.tooltip, /^decision: deny by editor$/m);
    const narrowed = formatRecord(
      record({ decision: { by: 'editor', action: 'ask', outcome: 'allow', at: 'x', remember: 'always', match: 'pattern', batch: 'b-1' } }),
      NOW,
    );
    assert.match(narrowed.tooltip, /^decision: allow by editor, always \(pattern\), in a batch$/m);
    assert.match(view.tooltip, /^reason \(agent's words\): \[x\] \(http:\/\/e\.vil\)$/m);
  });

  it('labels host events by their type', () => {
    const view = formatRecord(record({ type: 'upstream_connected', server: 'todo', tool: null, status: null }), NOW);
    assert.equal(view.label, 'upstream connected: todo');
    assert.equal(view.icon.id, 'plug');
  });

  it('formats times in the local zone, with the date for another day', () => {
    assert.equal(formatTime('2030-01-01T12:00:00.000Z', NOW, 0), '12:00:00');
    assert.equal(formatTime('2030-01-01T12:00:00.000Z', NOW, 120), '14:00:00');
    assert.equal(formatTime('2029-12-31T08:05:09.000Z', NOW, 0), '2029-12-31 08:05:09');
    assert.equal(formatTime('not a time', NOW, 0), 'not a time');
  });

  it('formats durations in full', () => {
    assert.equal(formatDuration(0.4), '0.4 ms');
    assert.equal(formatDuration(12.5), '12.5 ms');
    assert.equal(formatDuration(837.3), '837 ms');
    assert.equal(formatDuration(999), '999 ms');
    assert.equal(formatDuration(1234), '1.234 s');
    assert.equal(formatDuration(1200), '1.2 s');
    assert.equal(formatDuration(59_999), '59.999 s');
    assert.equal(formatDuration(65_000), '1 min 5 s');
    assert.equal(formatDuration(125_340), '2 min 5.3 s');
    assert.equal(formatDuration(undefined), '');
    assert.equal(formatDuration(-1), '');
  });
});

describe('waiting prompts', () => {
  const prompt = { id: 'p-1', variant: 'call_tool_write', server: 'todo', tool: 'add_task', expires_at: '2030-01-01T12:05:00.000Z' };

  it('have a row that says so, with their own icon', () => {
    const view = formatWaiting(prompt, request(), NOW);
    assert.equal(view.label, 'todo:add_task');
    assert.equal(view.description, 'waiting for an answer · write · until 12:05:00');
    assert.deepEqual(view.icon, WAITING_ICON);
    assert.match(view.tooltip, /^asked by: agent "test-agent"$/m);
    assert.match(view.tooltip, /^Click to show the prompt\.$/m);
    const ruled = formatWaiting(prompt, request({ rule: 'rules[2]', rule_reason: 'edits outside the workspace' }), NOW);
    assert.match(ruled.tooltip, /^Asked by rules\[2\]: edits outside the workspace\.$/m);
  });

  it('say where a prompt this editor does not hold is shown', () => {
    assert.match(formatWaiting(prompt, undefined, NOW).tooltip, /another editor or in `mcphost approve`/);
  });

  it('follow the intent filter', () => {
    assert.ok(waitingMatchesFilter(prompt, 'all'));
    assert.ok(waitingMatchesFilter(prompt, 'write'));
    assert.ok(!waitingMatchesFilter(prompt, 'destructive'));
  });
});

describe('intent filter', () => {
  it('takes the variant first, then the declared operation', () => {
    assert.equal(recordIntent(record()), 'write');
    assert.equal(recordIntent(record({ metadata: { intent: { operation_type: 'read' } } })), 'read');
    assert.equal(recordIntent(record({ metadata: {} })), undefined);
    assert.ok(matchesFilter(record(), 'all'));
    assert.ok(matchesFilter(record(), 'write'));
    assert.ok(!matchesFilter(record(), 'destructive'));
  });
});

describe('record list', () => {
  it('keeps the newest first, once each, bounded', () => {
    const list = new RecordList(3);
    const at = (n: number) => record({ id: `01J0000000000000000000000${n}`, timestamp: `2030-01-01T12:00:0${n}.000Z` });
    assert.ok(list.add(at(1)));
    assert.ok(list.add(at(3)));
    assert.ok(list.add(at(2)));
    assert.ok(!list.add(at(2)));
    assert.deepEqual(
      list.list().map((r) => r.id.slice(-1)),
      ['3', '2', '1'],
    );
    list.add(at(4));
    assert.deepEqual(
      list.list().map((r) => r.id.slice(-1)),
      ['4', '3', '2'],
    );
    assert.equal(list.get(at(1).id), undefined);
    list.setMax(1);
    assert.equal(list.size, 1);
  });

  it("shows a write's start until its outcome arrives, then only the outcome", () => {
    const list = new RecordList(10);
    const start = record({ id: '01J00000000000000000000001', type: 'tool_call_started', status: 'started' });
    const outcome = record({ id: '01J00000000000000000000002', status: 'success', started_id: start.id });
    assert.ok(list.add(start));
    assert.deepEqual(list.list().map((r) => r.id), [start.id]);
    assert.ok(list.add(outcome));
    assert.deepEqual(list.list().map((r) => r.id), [outcome.id]);
    assert.ok(!list.add(start), 'a start that arrives again after its outcome stays out');
  });

  it('filters by intent', () => {
    const list = new RecordList(10);
    list.add(record({ id: 'a' }));
    list.add(record({ id: 'b', metadata: { tool_variant: 'call_tool_read' } }));
    assert.deepEqual(
      list.list('read').map((r) => r.id),
      ['b'],
    );
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { RecordList, formatDuration, formatRecord, formatTime, iconFor, matchesFilter, recordIntent } from '../src/records';
import { record } from './fixtures';

const NOW = new Date('2030-01-01T13:00:00.000Z');

describe('record formatting', () => {
  it('shows server:tool, status, time and duration', () => {
    const view = formatRecord(record(), NOW);
    assert.equal(view.label, 'todo:add_task');
    assert.equal(view.description, 'ok · 12:00:00 · 13 ms');
    assert.deepEqual(view.icon, { id: 'edit', color: 'charts.yellow' });
    assert.equal(view.intent, 'write');
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
    assert.equal(view.description, 'denied · 12:00:00 · 13 ms');
    assert.match(view.tooltip, /^status: denied \(PERMISSION_DENIED\)$/m);
    assert.match(view.tooltip, /^decision: deny by editor$/m);
    assert.match(view.tooltip, /^reason \(agent's words\): \[x\] \(http:\/\/e\.vil\)$/m);
    assert.deepEqual(iconFor(record({ status: 'denied', metadata: { tool_variant: 'call_tool_destructive' } })), {
      id: 'trash',
      color: 'errorForeground',
    });
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

  it('formats durations', () => {
    assert.equal(formatDuration(0.4), '0 ms');
    assert.equal(formatDuration(999), '999 ms');
    assert.equal(formatDuration(1234), '1.23 s');
    assert.equal(formatDuration(65_000), '65.0 s');
    assert.equal(formatDuration(undefined), '');
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

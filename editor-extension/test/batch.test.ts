import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  allowAllAnswers,
  allowAllLabel,
  batchActionFor,
  batchAnswer,
  batchKind,
  buildBatchPrompt,
  confirmedName,
  denyAllAnswers,
} from '../src/batch';
import { NOTIFICATION_MAX } from '../src/prompts';
import type { PermissionBatch, PermissionRequest } from '../src/protocol';
import { destructive, request } from './fixtures';

const NOW = new Date('2030-01-01T00:00:00.000Z');

function batch(requests: PermissionRequest[], overrides: Partial<PermissionBatch> = {}): PermissionBatch {
  return { id: 'b-1', session_id: 's-1', client: 'test-agent', requests, expires_at: '2030-01-01T00:02:00.000Z', ...overrides };
}

const writes = batch([
  request({ id: 'w-1', arguments: { title: 'buy milk' }, rule: 'permissions.write' }),
  request({ id: 'w-2', arguments: { title: 'buy bread' }, rule: 'permissions.write' }),
]);

describe('a batch of writes', () => {
  it('is one sticky notification listing every call, with Allow all / Deny all / One by one', () => {
    const spec = buildBatchPrompt(writes, NOW);
    assert.equal(spec.kind, 'notification');
    assert.equal(spec.severity, 'error');
    assert.deepEqual(
      spec.choices.map((c) => [c.label, c.action]),
      [
        ['Allow all', 'allowAll'],
        ['Deny all', 'denyAll'],
        ['One by one', 'oneByOne'],
      ],
    );
    assert.deepEqual(spec.lines, [
      'mcphost: Agent "test-agent" asks to make 2 calls at once.',
      '1. write todo:add_task {"title":"buy milk"}.',
      '2. write todo:add_task {"title":"buy bread"}.',
      'Asked by permissions.write.',
      '"Allow all" allows each call once; "Deny all" denies each; "One by one" shows each call in full (the agent\'s reasons too) to answer on its own.',
      'Closing this denies them all. Waits 2 min for an answer.',
    ]);
    assert.equal(spec.message, spec.lines.join(' '));
    assert.equal(batchActionFor(spec, undefined), 'denyAll');
    assert.equal(batchActionFor(spec, 'One by one'), 'oneByOne');
  });

  it('names the rule of each call when they differ', () => {
    const spec = buildBatchPrompt(
      batch([
        request({ id: 'a', rule: 'rules[2]', rule_reason: 'edits outside the workspace' }),
        request({ id: 'b', rule: 'permissions.write' }),
      ]),
      NOW,
    );
    assert.equal(spec.lines[1], '1. write todo:add_task {"title":"buy milk"} (asked by rules[2]: edits outside the workspace.).');
    assert.equal(spec.lines[2], '2. write todo:add_task {"title":"buy milk"} (asked by permissions.write.).');
  });

  it("stays under VS Code's limit however many calls and however long their arguments", () => {
    const long = 'x'.repeat(3000);
    const many = batch(
      Array.from({ length: 30 }, (_, i) => request({ id: `r${i}`, arguments: { a: long }, rule: `rules[${i}]`, rule_reason: long })),
      { client: long },
    );
    const spec = buildBatchPrompt(many, NOW);
    assert.ok(spec.message.length <= NOTIFICATION_MAX, `${spec.message.length}`);
    assert.match(spec.message, /Closing this denies them all\. Waits 2 min for an answer\.$/);
    assert.match(spec.message, /And \d+ more \(One by one shows each\)\./);
  });

  it("shows the agent's text as plain, bounded text", () => {
    const spec = buildBatchPrompt(
      batch([request({ id: 'a', arguments: { t: 'see [x](command:evil)\u202e' } }), request({ id: 'b' })], { client: 'a\nb' }),
      NOW,
    );
    assert.ok(!spec.message.includes(']('));
    assert.ok(!spec.message.includes('\u202e'));
    assert.match(spec.message, /^mcphost: Agent "a b" asks/);
  });

  it('answers Allow all and Deny all once per call, without a name to confirm', () => {
    assert.deepEqual(allowAllAnswers(writes), [
      { id: 'w-1', decision: 'allow', remember: 'once' },
      { id: 'w-2', decision: 'allow', remember: 'once' },
    ]);
    assert.deepEqual(denyAllAnswers(writes), [
      { id: 'w-1', decision: 'deny', remember: 'once' },
      { id: 'w-2', decision: 'deny', remember: 'once' },
    ]);
  });
});

describe('a batch with destructive calls', () => {
  const mixed = batch([
    request({ id: 'w-1' }),
    destructive({ id: 'd-1', server: 'github', tool: 'delete_repo', arguments: { repo: 'x' } }),
    destructive({ id: 'd-2', server: 'fs', tool: 'remove' }),
  ]);

  it('is a modal whose allow button names each destructive call, with Deny all as its close button', () => {
    assert.equal(batchKind(mixed), 'modal');
    const spec = buildBatchPrompt(mixed, NOW);
    assert.equal(spec.kind, 'modal');
    assert.equal(spec.message, 'mcphost: Agent "test-agent" asks to make 3 calls at once, 2 of them destructive. Allow them?');
    assert.deepEqual(
      spec.choices.map((c) => [c.label, c.action, c.closeAffordance ?? false]),
      [
        ['Allow all 3, including destructive github:delete_repo, fs:remove', 'allowAll', false],
        ['One by one', 'oneByOne', false],
        ['Deny all', 'denyAll', true],
      ],
    );
    assert.equal(spec.dismissed, 'denyAll');
  });

  it('lists every call in the detail: name, kind, arguments, reason', () => {
    const detail = buildBatchPrompt(mixed, NOW).detail ?? '';
    assert.match(detail, /^Agent: test-agent$/m);
    assert.match(detail, /^1\. todo:add_task \(write, called as call_tool_write\)$/m);
    assert.match(detail, /^2\. DESTRUCTIVE github:delete_repo \(destructive, called as call_tool_destructive\)$/m);
    assert.match(detail, /^3\. DESTRUCTIVE fs:remove /m);
    assert.match(detail, /^ {3}Arguments: \{"repo":"x"\}$/m);
    assert.match(detail, /^ {3}Reason \(the agent's words\): Clean up$/m);
    assert.match(detail, /Deny all, Escape or closing this dialog denies every call \(the first waits 2 min for an answer\)\.$/);
  });

  it('confirms each destructive call by its exact name when all are allowed', () => {
    assert.deepEqual(allowAllAnswers(mixed), [
      { id: 'w-1', decision: 'allow', remember: 'once' },
      { id: 'd-1', decision: 'allow', remember: 'once', confirmed: 'github:delete_repo' },
      { id: 'd-2', decision: 'allow', remember: 'once', confirmed: 'fs:remove' },
    ]);
    // The name is the request's own, not the shown (cut, cleaned) one.
    const odd = destructive({ server: 's', tool: `t${'x'.repeat(200)}` });
    assert.equal(confirmedName(odd), `s:t${'x'.repeat(200)}`);
  });

  it('names a tool called twice once, and calls to confirm that are not destructive', () => {
    const twice = batch([destructive({ id: 'a' }), destructive({ id: 'b' }), request({ id: 'c', action: 'confirm' })]);
    assert.equal(allowAllLabel(twice), 'Allow all 3, including destructive todo:delete_task (2 calls); todo:add_task to confirm');
    assert.equal(allowAllAnswers(twice)[2].confirmed, 'todo:add_task');
  });

  it('answers one by one from each prompt, naming the destructive calls allowed there', () => {
    const [w, d] = mixed.requests;
    assert.deepEqual(batchAnswer(w, { decision: 'allow', remember: 'always', match: 'pattern', pattern: { title: '*' } }), {
      id: 'w-1',
      decision: 'allow',
      remember: 'always',
      match: 'pattern',
      pattern: { title: '*' },
    });
    assert.deepEqual(batchAnswer(d, { decision: 'allow', remember: 'once' }), {
      id: 'd-1',
      decision: 'allow',
      remember: 'once',
      confirmed: 'github:delete_repo',
    });
    assert.deepEqual(batchAnswer(d, { decision: 'deny', remember: 'once' }), { id: 'd-1', decision: 'deny', remember: 'once' });
  });
});

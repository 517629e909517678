import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { DENY, answerFor, buildPrompt, plain, promptKind, rememberChoices, secondsLeft } from '../src/prompts';
import { destructive, request } from './fixtures';

const NOW = new Date('2030-01-01T00:00:00.000Z');

describe('write prompts (ask)', () => {
  it('are notifications with the four choices in order', () => {
    const spec = buildPrompt(request(), NOW);
    assert.equal(spec.kind, 'notification');
    assert.equal(spec.severity, 'info');
    assert.deepEqual(
      spec.choices.map((c) => c.label),
      ['Allow once', 'Allow for this session', 'Always allow', 'Deny'],
    );
    assert.deepEqual(
      spec.choices.map((c) => c.response),
      [
        { decision: 'allow', remember: 'once' },
        { decision: 'allow', remember: 'session' },
        { decision: 'allow', remember: 'always' },
        { decision: 'deny', remember: 'once' },
      ],
    );
  });

  it('name the tool, the arguments, the reason, the data and the wait', () => {
    const spec = buildPrompt(request(), NOW);
    assert.equal(
      spec.message,
      'mcphost: The agent (test-agent) wants to write with todo:add_task. Arguments: {"title":"buy milk"}. ' +
        'Reason given: "The user asked for it". Data: private. (waits 5 min)',
    );
    assert.equal(spec.detail, undefined);
  });

  it('say when no reason or sensitivity was given', () => {
    const spec = buildPrompt(request({ intent: { operation_type: 'write' }, client: null }), NOW);
    assert.match(spec.message, /^mcphost: An agent wants to write with todo:add_task\./);
    assert.match(spec.message, /No reason given\. Data: not declared\./);
  });

  it('offer only the remember scopes the daemon accepts', () => {
    const spec = buildPrompt(request({ remember_options: ['once'] }), NOW);
    assert.deepEqual(
      spec.choices.map((c) => c.label),
      ['Allow once', 'Deny'],
    );
    assert.deepEqual(rememberChoices(request({ remember_options: ['always', 'bogus' as never] })), ['once', 'always']);
  });

  it('turn warnings into a warning notification', () => {
    const spec = buildPrompt(request({ warnings: ['write on a read-only tool'] }), NOW);
    assert.equal(spec.severity, 'warning');
    assert.match(spec.message, /Warning: write on a read-only tool\./);
  });

  it('deny when closed without a choice', () => {
    const spec = buildPrompt(request(), NOW);
    assert.deepEqual(answerFor(spec, undefined), DENY);
    assert.deepEqual(answerFor(spec, 'Always allow'), { decision: 'allow', remember: 'always' });
    assert.deepEqual(answerFor(spec, 'not a button'), DENY);
  });

  it('show a preview when the arguments were too large to send', () => {
    const spec = buildPrompt(request({ arguments: null, arguments_preview: '{"title": "aaa' }), NOW);
    assert.match(spec.message, /Arguments: \{"title": "aaa…\./);
  });
});

describe('destructive prompts (confirm)', () => {
  it('are modal warnings with Deny first and no "always" unless offered', () => {
    const spec = buildPrompt(destructive(), NOW);
    assert.equal(spec.kind, 'modal');
    assert.equal(spec.severity, 'warning');
    assert.equal(spec.message, 'mcphost: allow the destructive call todo:delete_task?');
    assert.deepEqual(
      spec.choices.map((c) => c.label),
      ['Deny', 'Allow once: todo:delete_task', 'Allow for this session: todo:delete_task'],
    );
    assert.deepEqual(spec.choices[0].response, DENY);
    assert.deepEqual(spec.dismissed, DENY);
  });

  it('offer "always" when the daemon allows it', () => {
    const spec = buildPrompt(destructive({ remember_options: ['once', 'session', 'always'] }), NOW);
    assert.ok(spec.choices.some((c) => c.label === 'Always allow: todo:delete_task'));
  });

  it('show the tool, arguments, reason and sensitivity in the detail', () => {
    const detail = buildPrompt(destructive(), NOW).detail ?? '';
    assert.match(detail, /^Tool: todo:delete_task \(call_tool_destructive\)$/m);
    assert.match(detail, /^Data sensitivity: internal$/m);
    assert.match(detail, /^Clean up$/m);
    assert.match(detail, /"task_id": "1234"/);
    assert.match(detail, /Deny is the default; closing this dialog denies the call \(it waits 5 min for an answer\)\./);
  });

  it('go by the operation and the action', () => {
    assert.equal(promptKind(destructive({ action: 'ask' })), 'modal');
    assert.equal(promptKind(request({ action: 'confirm' })), 'modal');
    assert.equal(promptKind(request({ operation: 'read', action: 'ask' })), 'notification');
    assert.equal(buildPrompt(request({ action: 'confirm' }), NOW).message, 'mcphost: confirm the write call todo:add_task?');
  });
});

describe("the agent's text", () => {
  it('cannot become a link in a notification', () => {
    const spec = buildPrompt(
      request({ intent: { operation_type: 'write', reason: 'see [here](command:workbench.action.reloadWindow)' } }),
      NOW,
    );
    assert.ok(!spec.message.includes(']('));
    assert.match(spec.message, /see \[here\] \(command:workbench\.action\.reloadWindow\)/);
  });

  it('loses control and bidi characters, and newlines in a notification', () => {
    assert.equal(plain('a\u0000b\u202ec\u200bd\ne', 100), 'abcd e');
    assert.equal(plain('line 1\r\nline 2\n\n\n\nline 3', 100, true), 'line 1\nline 2\n\nline 3');
  });

  it('is cut to a bounded length', () => {
    const reason = 'x'.repeat(5000);
    const warnings = ['w'.repeat(900), 'v'.repeat(900), 'u'.repeat(900)];
    const spec = buildPrompt(request({ intent: { operation_type: 'write', reason }, arguments: { a: reason }, warnings }), NOW);
    assert.ok(spec.message.length < 1000, `message is ${spec.message.length} characters`);
    const modal = buildPrompt(destructive({ intent: { operation_type: 'destructive', reason } }), NOW);
    assert.ok((modal.detail ?? '').length < 2500);
    assert.equal(plain('abcdef', 4), 'abc…');
  });

  it('is shown as text, whatever it holds', () => {
    const spec = buildPrompt(request({ intent: { operation_type: 'write', reason: '**bold** <b>x</b> $(alert)' } }), NOW);
    assert.match(spec.message, /"\*\*bold\*\* <b>x<\/b> \$\(alert\)"/);
  });
});

describe('expiry', () => {
  it('counts the seconds left', () => {
    assert.equal(secondsLeft('2030-01-01T00:00:30.000Z', NOW), 30);
    assert.equal(secondsLeft('2029-01-01T00:00:00.000Z', NOW), 0);
    assert.equal(secondsLeft('soon', NOW), undefined);
    assert.match(buildPrompt(request({ expires_at: '2030-01-01T00:00:45.000Z' }), NOW).message, /\(waits 45 s\)$/);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { globMatch, globValid, literalGlob } from '../src/glob';
import {
  globProblem,
  initialPattern,
  matchText,
  needsScope,
  patternProblem,
  patternText,
  scopeChoices,
  scopeTitle,
  scopedResponse,
  startingGlob,
} from '../src/scope';
import { PYTHON, VALUES } from './globCases';
import { destructive, request } from './fixtures';

describe('globs, as the daemon matches them (Python fnmatch, whole string)', () => {
  it('agree with Python on every case of the table', () => {
    for (const [glob, matched] of PYTHON) {
      const got = VALUES.filter((value) => globMatch(glob, value));
      assert.deepEqual(got, matched, `glob ${JSON.stringify(glob)}`);
    }
  });

  it('match any run with *, slashes and newlines included, one character with ?, and nothing partial', () => {
    assert.ok(globMatch('/work/*', '/work/src/deep/a.py'));
    assert.ok(globMatch('*', 'a\nb'));
    assert.ok(globMatch('?', '😀'));
    assert.ok(!globMatch('src', 'src/a'));
    assert.ok(!globMatch('a*', 'ba'));
    assert.ok(!globMatch('A*', 'abc'));
    assert.ok(globMatch('[!a-c]x', 'dx'));
    assert.ok(!globMatch('[!a-c]x', 'bx'));
  });

  it('are fast on long values', () => {
    const value = `${'a'.repeat(100_000)}b`;
    const t0 = Date.now();
    assert.ok(!globMatch('*a*a*a*a*c', value));
    assert.ok(globMatch('*a*b', value));
    assert.ok(Date.now() - t0 < 2000);
  });

  it('quote a value exactly', () => {
    for (const value of ['a*b?c[d]', '[!x]', 'plain/path.txt', '***']) {
      assert.ok(globMatch(literalGlob(value), value), value);
      assert.ok(!globMatch(literalGlob(value), `${value}x`), value);
    }
    assert.equal(literalGlob('a*b'), 'a[*]b');
    assert.ok(globValid('[a-z]'));
  });
});

describe('the scope question', () => {
  const scoped = (overrides = {}) =>
    request({
      arguments: { path: '/work/src/a.py', content: 'x = 1', mode: 'w', size: 3 },
      match_options: ['tool', 'arguments', 'pattern'],
      suggested_pattern: { path: '/work/src/*', content: 'x = 1' },
      ...overrides,
    });

  it('follows a remembered allow only when there is more than the tool to choose', () => {
    assert.ok(needsScope(scoped(), { decision: 'allow', remember: 'always' }));
    assert.ok(needsScope(scoped(), { decision: 'allow', remember: 'session' }));
    assert.ok(!needsScope(scoped(), { decision: 'allow', remember: 'once' }));
    assert.ok(!needsScope(scoped(), { decision: 'deny', remember: 'always' }));
    assert.ok(!needsScope(request({ match_options: ['tool'] }), { decision: 'allow', remember: 'always' }));
    assert.ok(!needsScope(request(), { decision: 'allow', remember: 'always' }));
  });

  it('asks what a shell command covers, and offers no tool-wide choice, when the daemon lists none', () => {
    const shell = scoped({ server: 'claude-code', tool: 'Bash', arguments: { command: 'npm test' }, match_options: ['arguments', 'pattern'], suggested_pattern: { command: 'npm test' } });
    assert.ok(needsScope(shell, { decision: 'allow', remember: 'always' }));
    assert.deepEqual(scopeChoices(shell, 'always').map((c) => c.match), ['arguments', 'pattern']);
    const argv = scoped({ arguments: { command: ['sh', '-c', 'make'] }, match_options: ['arguments'], suggested_pattern: null });
    assert.ok(needsScope(argv, { decision: 'allow', remember: 'session' }));
    assert.deepEqual(scopeChoices(argv, 'session').map((c) => c.match), ['arguments']);
  });

  it('offers the choices the daemon lists, each saying what it covers', () => {
    const choices = scopeChoices(scoped(), 'always');
    assert.deepEqual(
      choices.map((c) => [c.match, c.label]),
      [
        ['tool', 'This tool, any arguments'],
        ['arguments', 'This tool with exactly these arguments'],
        ['pattern', 'This tool with arguments matching a pattern…'],
      ],
    );
    assert.equal(choices[0].detail, 'Every one of the write calls to add_task from any agent, until revoked.');
    assert.equal(choices[1].description, '{"path":"/work/src/a.py","content":"x = 1","mode":"w","size":3}');
    assert.equal(choices[1].detail, 'Only these very values, from any agent, until revoked; other arguments ask again.');
    assert.equal(choices[2].description, 'starts from path="/work/src/*", content="x = 1"');
    assert.match(scopeChoices(scoped(), 'session')[0].detail, /from this agent session, until it disconnects/);
    assert.equal(scopeTitle(scoped(), 'session'), 'mcphost: "Allow for this session" for todo:add_task: what does it cover?');
  });

  it('answers with the scope picked', () => {
    assert.deepEqual(scopedResponse('always', 'tool'), { decision: 'allow', remember: 'always', match: 'tool' });
    assert.deepEqual(scopedResponse('session', 'arguments'), { decision: 'allow', remember: 'session', match: 'arguments' });
    assert.deepEqual(scopedResponse('always', 'pattern', { path: '/work/src/*' }), {
      decision: 'allow',
      remember: 'always',
      match: 'pattern',
      pattern: { path: '/work/src/*' },
    });
  });
});

describe('a pattern', () => {
  const call = request({
    arguments: { path: '/work/src/a.py', note: 'see [REDACTED:jwt]', n: 2 },
    match_options: ['tool', 'arguments', 'pattern'],
    suggested_pattern: { path: '/work/src/*', note: 'see*', n: '*', other: '*', bad: '/elsewhere/*' },
  });

  it("starts from the daemon's suggestion, on what the person can see and this call matches", () => {
    assert.deepEqual(initialPattern(call), { path: '/work/src/*' });
    assert.deepEqual(initialPattern(request({ suggested_pattern: null })), {});
    assert.deepEqual(initialPattern(request({ arguments: { p: 'a' }, suggested_pattern: { p: 'b*' } })), {});
  });

  it('must match this call, argument by argument, with a message that says why not', () => {
    assert.equal(globProblem('path', '/work/*', call), undefined);
    assert.equal(
      globProblem('path', '/work/lib/*', call),
      'This call\'s path "/work/src/a.py" does not match "/work/lib/*": the approval would not even cover this call.',
    );
    assert.match(globProblem('note', '*', call) ?? '', /not a string argument of this call that can be shown whole/);
    assert.match(globProblem('n', '*', call) ?? '', /not a string argument/);
    assert.match(globProblem('path', '', call) ?? '', /Give a glob/);
    assert.match(globProblem('path', '*'.repeat(1001), call) ?? '', /at most 1000/);
    assert.equal(patternProblem({ path: '/work/src/*.py' }, call), undefined);
    assert.match(patternProblem({}, call) ?? '', /looks at no argument yet/);
    assert.match(patternProblem({ path: '/work/src/*.py', missing: '*' }, call) ?? '', /missing is not a string argument/);
  });

  it('is shown exactly, and an argument added to it starts as its exact value', () => {
    assert.equal(patternText({ path: '/work/src/*', mode: 'w' }), 'path="/work/src/*", mode="w"');
    assert.equal(startingGlob('path', { path: '/w/*' }, call), '/w/*');
    const starred = request({ arguments: { q: 'what?*' }, match_options: ['tool', 'pattern'] });
    assert.equal(startingGlob('q', {}, starred), 'what[?][*]');
    assert.equal(globProblem('q', startingGlob('q', {}, starred), starred), undefined);
  });

  it('reads in the grants list', () => {
    assert.equal(matchText('pattern', { path: '/w/*' }, null), 'arguments matching path="/w/*"');
    assert.equal(matchText('arguments', null, '{"a": 1}'), 'exactly {"a": 1}');
    assert.equal(matchText('arguments', null, null), 'exactly the arguments it was given for');
    assert.equal(matchText('tool', null, null), 'any arguments');
    assert.equal(matchText(undefined, null, null), 'any arguments');
  });

  it('is offered for destructive calls too, when the daemon offers it', () => {
    const call2 = destructive({ match_options: ['tool', 'pattern'] });
    assert.deepEqual(
      scopeChoices(call2, 'session').map((c) => c.match),
      ['tool', 'pattern'],
    );
  });
});

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { VERSION_SIGNATURE, checkIdentity } from '../src/identity';
import type { McphostCommand } from '../src/settings';

// out/test/identity.test.js -> the repository's mcphost/cli/__init__.py, which prints the line
const CLI = path.resolve(__dirname, '..', '..', '..', 'mcphost', 'cli', '__init__.py');

const venv: McphostCommand = { command: '/w/.venv/bin/mcphost', prefix: [], source: 'workspace venv', env: {} };
const explicit: McphostCommand = { ...venv, command: '/opt/mcphost', source: 'mcphost.path' };
const ok = (stdout: string) => ({ stdout, stderr: '', code: 0 });

describe("this project's mcphost", () => {
  it('is the one whose --version carries the signature', () => {
    assert.deepEqual(checkIdentity(venv, ok(`mcphost 0.1.0 (${VERSION_SIGNATURE})\n`)), {
      ok: true,
      version: '0.1.0',
      line: `mcphost 0.1.0 (${VERSION_SIGNATURE})`,
    });
  });

  it('is recognised when argparse wrapped the line to a narrow terminal', () => {
    const wrapped = `mcphost 0.2.0.dev1 (${VERSION_SIGNATURE})`.replace(/ (?=agent|checks)/g, '\n');
    const result = checkIdentity(venv, ok(`${wrapped}\n`));
    assert.ok(result.ok);
    assert.equal(result.version, '0.2.0.dev1');
  });

  it('prints the signature the extension checks (mcphost/cli/__init__.py)', () => {
    const source = fs.readFileSync(CLI, 'utf8');
    assert.ok(
      source.includes(`version=f"mcphost {__version__} (${VERSION_SIGNATURE})"`),
      `mcphost/cli/__init__.py does not print "mcphost <version> (${VERSION_SIGNATURE})"`,
    );
  });
});

describe('another program named mcphost', () => {
  it('is refused, saying what it printed, where it was found and how to fix it', () => {
    const result = checkIdentity(venv, ok('mcphost version v0.7.2\n'));
    assert.equal(result.ok, false);
    const error = !result.ok ? result.error : '';
    assert.match(error, /^\/w\/\.venv\/bin\/mcphost \(found via workspace venv\) is not this project's mcphost /);
    assert.match(error, /its `--version` says "mcphost version v0\.7\.2"\./);
    assert.match(error, /Set mcphost\.path to this project's mcphost, or install this project's mcphost from its source /);
    assert.match(error, /`pip install -e <checkout>`.*`pipx install <checkout>`.* so that it is found first\.$/);
    assert.doesNotMatch(error, /pip install mcphost/);
  });

  it('is refused when the version looks right but the signature is not there', () => {
    assert.equal(checkIdentity(venv, ok('mcphost 0.1.0\n')).ok, false);
    assert.equal(checkIdentity(venv, ok(`mcphost 0.1.0 (${VERSION_SIGNATURE})`.replace('intent', 'other'))).ok, false);
    assert.equal(checkIdentity(venv, { stdout: `mcphost 0.1.0 (${VERSION_SIGNATURE})`, stderr: '', code: 2 }).ok, false);
  });

  it('names the setting that pointed at it', () => {
    const result = checkIdentity(explicit, { stdout: '', stderr: 'Error: unknown flag: --version\n', code: 1 });
    assert.equal(result.ok, false);
    const error = !result.ok ? result.error : '';
    assert.match(error, /\(found via mcphost\.path\)/);
    assert.match(error, /its `--version` says "Error: unknown flag: --version" and exits with 1\./);
    assert.match(error, /Point mcphost\.path at this project's mcphost, or install/);
  });

  it('that cannot be run at all says why', () => {
    const result = checkIdentity(
      { ...venv, command: '/usr/bin/python3', prefix: ['-m', 'mcphost'], source: 'mcphost.interpreter' },
      { stdout: '', stderr: '', code: null, error: 'spawn /usr/bin/python3 ENOENT' },
    );
    assert.equal(result.ok, false);
    assert.match(!result.ok ? result.error : '', /^\/usr\/bin\/python3 -m mcphost \(found via mcphost\.interpreter\) could not be run: spawn/);
  });
});

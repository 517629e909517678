/**
 * Is the `mcphost` the extension found this project's? Pure: from what `mcphost --version` printed to a verdict,
 * and the words for a person when it is not.
 *
 * The name mcphost is taken by other projects too (a well-known Go MCP host among them), and one of them may come
 * first on PATH or sit in a virtual environment: launching it as the daemon would fail in confusing ways, or run
 * something else entirely. This project's `--version` line (mcphost/cli/__init__.py) carries a signature after the
 * version, and the extension trusts an executable only when it prints it.
 */

import type { McphostCommand } from './settings';

/** What this project's `mcphost --version` prints after `mcphost <version> (`; tests on both sides hold it. */
export const VERSION_SIGNATURE = 'local MCP agent host with intent checks';

const VERSION_LINE = /^mcphost (\S+) \((.*)\)$/;

/** How to get this mcphost, for messages: never by its name from a package index, which may be another project. */
export const INSTALL_HINT =
  "Install this project's mcphost from its source: `pip install -e <checkout>` into the workspace's .venv, or " +
  '`pipx install <checkout>` (or a wheel built from it); or set mcphost.path to its executable (or ' +
  'mcphost.interpreter to a Python that has it).';

export interface VersionRun {
  stdout: string;
  stderr: string;
  /** The exit code, or null when the process did not exit on its own (a signal, a time-out). */
  code: number | null;
  /** Why the process could not be run at all, or was stopped. */
  error?: string;
}

export type Identity = { ok: true; version: string; line: string } | { ok: false; error: string };

/** The command as a person would type it, for messages. */
export function commandText(command: McphostCommand): string {
  return [command.command, ...command.prefix].join(' ');
}

function where(command: McphostCommand): string {
  return `${commandText(command)} (found via ${command.source})`;
}

function fix(command: McphostCommand): string {
  const install = "install this project's mcphost from its source (`pip install -e <checkout>` into the workspace's " +
    '.venv, or `pipx install <checkout>`, or a wheel built from it)';
  return command.source === 'mcphost.path' || command.source === 'mcphost.interpreter'
    ? `Point ${command.source} at this project's mcphost, or ${install}.`
    : `Set mcphost.path to this project's mcphost, or ${install} so that it is found first.`;
}

function firstLine(text: string): string {
  const line = text.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  // What another program printed: shown as plain text, and short.
  // eslint-disable-next-line no-control-regex
  const clean = line.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').trim();
  return clean.length > 160 ? `${clean.slice(0, 159)}…` : clean;
}

/** The verdict on one `--version` run of `command`. */
export function checkIdentity(command: McphostCommand, run: VersionRun): Identity {
  if (run.error !== undefined && run.code === null && !run.stdout) {
    return { ok: false, error: `${where(command)} could not be run: ${run.error}. ${INSTALL_HINT}` };
  }
  // argparse wraps the line to the terminal's width: read it with the whitespace folded.
  const folded = run.stdout.replace(/\s+/g, ' ').trim();
  const match = VERSION_LINE.exec(folded);
  if (run.code === 0 && match && match[2] === VERSION_SIGNATURE) {
    return { ok: true, version: match[1], line: folded };
  }
  const said = firstLine(run.stdout) || firstLine(run.stderr);
  const printed = said ? `its \`--version\` says "${said}"` : 'its `--version` says nothing';
  return {
    ok: false,
    error:
      `${where(command)} is not this project's mcphost (another program has that name): ${printed}` +
      `${run.code ? ` and exits with ${run.code}` : ''}. ${fix(command)}`,
  };
}

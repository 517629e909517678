/**
 * A daemon that another window or a terminal started, pure: what this window does when it cannot have its own.
 *
 * `mcphost serve` allows one daemon per config file (mcphost/cli/serve.py): the second VS Code window on a config
 * gets its spawned `serve --stdio` refused, with exit status 3 and a message naming the daemon that serves the
 * config and the socket where editors attach to it. That socket speaks the same editor channel as `--stdio`, so the
 * window attaches its LanguageClient there, and gets the same prompts, activity and status (with the agent
 * endpoint) as the window that started the daemon. When that daemon goes away (its window closed, its terminal
 * stopped it), the connection closes and the window starts its own again.
 *
 * Here: reading the refusal and `mcphost status -o json` for the socket, and after each connection that ended,
 * the next step (attach, spawn again, or give up); daemon.ts carries the steps out.
 */

import * as path from 'node:path';

/** `serve`'s exit status when another daemon serves the same config (EXIT_ANOTHER_DAEMON in mcphost/cli/serve.py). */
export const EXIT_ANOTHER_DAEMON = 3;

/** How this window reaches the daemon: one it spawned (and ends when it closes), or one it attached to. */
export type DaemonLink = { kind: 'own' } | { kind: 'shared'; socket: string; pid?: number };

export const OWN: DaemonLink = { kind: 'own' };

/** The words for the daemon another window or a terminal started, for the log and the status items. */
export function sharedDaemonText(pid: number | undefined): string {
  return `the daemon started by another window or terminal${pid === undefined ? '' : ` (pid ${pid})`}`;
}

/** What a refused `serve` said on stderr. */
export interface Refusal {
  /** Its first line, without `mcphost: `: what the person reads when this window cannot attach. */
  message: string;
  configPath?: string;
  pid?: number;
  /** Where editors attach, when the other daemon is up and said so. */
  socket?: string;
  /** The other daemon holds the config but is not up yet (or no longer): it names no socket for that reason. */
  starting?: boolean;
}

// "another daemon already serves <config>: pid N, since <time>, agents at <url>[, editors attach at <socket>]"
const SERVES = /^another daemon already serves (.+): pid (\d+), since \S+, agents at \S+?(?:, editors attach at (.+))?$/;
// "another `mcphost serve` (pid N) is starting for <config>": it holds the config but does not listen yet.
const STARTING = /^another `mcphost serve`(?: \(pid (\d+)\))? is starting for (.+)$/;

export function parseRefusal(stderr: string): Refusal | undefined {
  for (const raw of stderr.split(/\r?\n/)) {
    if (!raw.startsWith('mcphost: another ')) {
      continue;
    }
    const message = raw.slice('mcphost: '.length);
    const serves = SERVES.exec(message);
    if (serves) {
      return { message, configPath: serves[1], pid: Number(serves[2]), ...(serves[3] ? { socket: serves[3] } : {}) };
    }
    const starting = STARTING.exec(message);
    if (starting) {
      return { message, configPath: starting[2], ...(starting[1] ? { pid: Number(starting[1]) } : {}), starting: true };
    }
    return { message };
  }
  return undefined;
}

/** Whether a line the daemon printed on stderr says it got past the one-daemon check: `serve` prints which config is
 * in force right after it (config_line in mcphost/cli/serve.py), and refuses, if it does, before. */
export function pastOneDaemonCheck(line: string): boolean {
  return /^mcphost: (config |no config file at )/.test(line);
}

/** Where to attach, and who said so. */
export interface AttachTarget {
  socket: string;
  pid?: number;
  source: 'mcphost status' | 'the refusal';
}

function samePath(a: string, b: string): boolean {
  return path.normalize(a) === path.normalize(b);
}

/**
 * The daemon to attach to, from `mcphost status -o json` (every running daemon, each with the status it answered):
 * the one the refusal named by its pid, else the newest serving the same config file. Undefined when none listed
 * has an editor socket (or the output is not the JSON expected).
 */
export function targetFromStatus(stdout: string, want: { pid?: number; configPaths: string[] }): AttachTarget | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    return undefined;
  }
  const listed = (parsed as { daemons?: unknown } | null)?.daemons;
  if (!Array.isArray(listed)) {
    return undefined;
  }
  const daemons = listed.flatMap((d: unknown) => {
    const info = d as { pid?: unknown; editor_socket?: unknown; config_path?: unknown; started_at?: unknown } | null;
    if (!info || typeof info.editor_socket !== 'string' || !info.editor_socket) {
      return [];
    }
    return [
      {
        socket: info.editor_socket,
        pid: typeof info.pid === 'number' ? info.pid : undefined,
        configPath: typeof info.config_path === 'string' ? info.config_path : undefined,
        startedAt: typeof info.started_at === 'string' ? info.started_at : '',
      },
    ];
  });
  const byPid = want.pid === undefined ? undefined : daemons.find((d) => d.pid === want.pid);
  const byConfig = daemons
    .filter((d) => d.configPath !== undefined && want.configPaths.some((c) => samePath(c, d.configPath ?? '')))
    .sort((a, b) => a.startedAt.localeCompare(b.startedAt))
    .pop();
  const found = byPid ?? byConfig;
  return found ? { socket: found.socket, ...(found.pid !== undefined ? { pid: found.pid } : {}), source: 'mcphost status' } : undefined;
}

/**
 * Where to attach after a refusal: from `mcphost status -o json` when it ran (it asked the daemons themselves, so
 * what it lists is up now), else from the refusal's own words. `configPath`: the `--config` this window passes, if
 * any (the refusal names the config in force either way).
 */
export function attachTarget(
  statusStdout: string | undefined,
  refusal: Refusal | undefined,
  configPath?: string,
): AttachTarget | undefined {
  const configPaths = [refusal?.configPath, configPath].filter((c): c is string => Boolean(c));
  const fromStatus = statusStdout === undefined ? undefined : targetFromStatus(statusStdout, { pid: refusal?.pid, configPaths });
  if (fromStatus) {
    return fromStatus;
  }
  return refusal?.socket
    ? { socket: refusal.socket, ...(refusal.pid !== undefined ? { pid: refusal.pid } : {}), source: 'the refusal' }
    : undefined;
}

/** How a connection to the daemon ended (or a try at one failed). */
export type ConnectionEnd =
  /** The daemon this window spawned refused to start: another serves the config. */
  | { kind: 'refused'; refusal: Refusal | undefined; target: AttachTarget | undefined }
  /** The daemon this window spawned ended otherwise: it crashed, was stopped, or failed on its way up. */
  | { kind: 'exited'; code: number | null; signal: string | null; wasUp: boolean; why?: string }
  /** The connection to another daemon closed (it ended, or its window closed), or could not be made. */
  | { kind: 'detached'; wasUp: boolean; pid?: number; why?: string };

export type NextStep =
  | { action: 'attach'; target: AttachTarget }
  | { action: 'spawn'; delayMs: number }
  | { action: 'give up'; error: string };

export interface ReconnectHistory {
  /** Tries in a row that ended before the connection was up: refusals, sockets that did not answer. */
  failedInARow: number;
  /** When connections that were up ended without this window asking, within the last DROP_WINDOW_MS. */
  drops: number[];
}

export const FRESH: ReconnectHistory = { failedInARow: 0, drops: [] };

/** A daemon that keeps going away is not restarted for ever: the fourth drop within three minutes gives up (as
 * vscode-languageclient's default did, with maxRestartCount 3). A window's daemon ending while this one was
 * attached to it counts too: four of those in three minutes mean something else is wrong. */
export const MAX_RESTARTS = 3;
export const DROP_WINDOW_MS = 3 * 60_000;
/** Between a daemon going away and its config being free again it finishes shutting down (a few seconds at most:
 * it closes its upstreams): tries in a row back off, about 16 s of waiting in all, then give up. */
export const MAX_FAILED_IN_A_ROW = 7;
const BACKOFF_MS = [250, 500, 1000, 2000, 4000];

export function backoffMs(failedInARow: number): number {
  return BACKOFF_MS[Math.min(Math.max(failedInARow, 1), BACKOFF_MS.length) - 1];
}

/** The connection is up: the tries in a row start over. */
export function connected(history: ReconnectHistory): ReconnectHistory {
  return { ...history, failedInARow: 0 };
}

function exitText(code: number | null, signal: string | null): string {
  return signal ? `was ended by ${signal}` : `exited with code ${code ?? '?'}`;
}

/** What to do after `end`, and the history to decide the next time with. */
export function nextStep(
  end: ConnectionEnd,
  history: ReconnectHistory,
  now: number,
): { step: NextStep; history: ReconnectHistory } {
  if (end.kind !== 'refused' && end.wasUp) {
    const drops = [...history.drops.filter((at) => now - at <= DROP_WINDOW_MS), now];
    const updated = { failedInARow: 0, drops };
    if (drops.length > MAX_RESTARTS) {
      const what =
        end.kind === 'exited'
          ? `the daemon ${exitText(end.code, end.signal)}`
          : `the connection to ${sharedDaemonText(end.pid)} closed`;
      const error = `${what} (${drops.length} times in ${DROP_WINDOW_MS / 60_000} minutes); not trying again`;
      return { step: { action: 'give up', error }, history: updated };
    }
    // Its own daemon crashed, or the other window's went away: this window starts its own (a second window
    // attached to the same daemon may be quicker: then this one is refused and attaches to that one's).
    return { step: { action: 'spawn', delayMs: 0 }, history: updated };
  }

  if (end.kind === 'exited') {
    // Not the refusal: a daemon that fails on its way up fails the same way again.
    const why = end.why ? `: ${end.why}` : '';
    return {
      step: { action: 'give up', error: `the daemon ${exitText(end.code, end.signal)} before it was up${why}` },
      history,
    };
  }
  const failedInARow = history.failedInARow + 1;
  const updated = { ...history, failedInARow };
  if (failedInARow > MAX_FAILED_IN_A_ROW) {
    const error =
      end.kind === 'refused'
        ? `${end.refusal?.message ?? 'another daemon serves this config'}; this window could not attach to it`
        : `${sharedDaemonText(end.pid)} could not be reached${end.why ? `: ${end.why}` : ''}`;
    return { step: { action: 'give up', error }, history: updated };
  }
  if (end.kind === 'refused' && end.target) {
    return { step: { action: 'attach', target: end.target }, history: updated };
  }
  if (end.kind === 'refused' && end.refusal?.pid !== undefined && !end.refusal.starting && !end.refusal.socket) {
    // Up, and it said where agents go but not where editors attach: an mcphost from before editor sockets.
    const error = `${end.refusal.message}; it takes no editors (an older mcphost?): stop it, and this window starts its own`;
    return { step: { action: 'give up', error }, history: updated };
  }
  // Refused with nowhere to attach (the other daemon is starting, or is going away and still holds the config), or
  // its socket did not answer (it just went away): try to start this window's own again, a little later.
  return { step: { action: 'spawn', delayMs: backoffMs(failedInARow) }, history: updated };
}

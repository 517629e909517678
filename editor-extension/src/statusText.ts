/**
 * The daemon's state in a few words, pure: for the language status item and the status bar entry.
 */

import type { StatusPayload } from './protocol';
import { plain } from './prompts';
import { type DaemonLink, OWN, sharedDaemonText } from './sharedDaemon';

export type ConnectionState = 'starting' | 'connected' | 'stopped' | 'failed';

export interface StatusView {
  /** Short text with codicons, for the status bar (our own words only: no daemon- or agent-written text). */
  text: string;
  /** The language status item's detail. */
  detail: string;
  /** Plain-text tooltip. */
  tooltip: string;
  severity: 'info' | 'warning' | 'error';
  /** The status bar entry's background: loud while prompts wait, red when the daemon or its config failed. */
  background: 'warning' | 'error' | undefined;
  /** What a click does: show the waiting prompts, or the activity view. */
  click: 'prompts' | 'activity';
  busy: boolean;
}

export function upstreamCounts(status: StatusPayload): { up: number; total: number } {
  const servers = Array.isArray(status.servers) ? status.servers : [];
  return { up: servers.filter((s) => s.state === 'connected').length, total: servers.length };
}

/**
 * `link`: whether this window's daemon is its own or one another window or a terminal started (see
 * sharedDaemon.ts); the person should know that closing that other window takes the daemon away from this one
 * for a moment, and that the daemon's log is over there.
 */
export function statusView(
  state: ConnectionState,
  status: StatusPayload | undefined,
  error?: string,
  link: DaemonLink = OWN,
): StatusView {
  if (state === 'starting') {
    const doing = link.kind === 'shared' ? `attaching to ${sharedDaemonText(link.pid)}` : 'starting the daemon';
    return {
      text: '$(loading~spin) mcphost',
      detail: doing,
      tooltip: `mcphost: ${doing}`,
      severity: 'info',
      background: undefined,
      click: 'activity',
      busy: true,
    };
  }
  if (state !== 'connected' || !status) {
    const why = error ? plain(error, 300) : state === 'failed' ? 'the daemon failed' : 'the daemon is not running';
    return {
      text: '$(debug-disconnect) mcphost',
      detail: `not connected: ${why}`,
      tooltip: `mcphost: not connected (${why}). Click to open the activity view; run "mcphost: Restart Daemon" to try again.`,
      severity: state === 'failed' ? 'error' : 'warning',
      background: state === 'failed' ? 'error' : undefined,
      click: 'activity',
      busy: false,
    };
  }
  const { up, total } = upstreamCounts(status);
  const pending = typeof status.pending === 'number' ? status.pending : 0;
  const parts = [`${up}/${total} servers up`];
  const waiting = `${pending} prompt${pending === 1 ? '' : 's'} waiting`;
  if (pending > 0) {
    parts.push(waiting);
  }
  const problems: string[] = [];
  if (status.config_error) {
    problems.push(`config not applied: ${plain(status.config_error, 300)}`);
  }
  if (status.log_error) {
    problems.push(`activity log: ${plain(status.log_error, 300)}`);
  }
  const down = (status.servers ?? []).filter((s) => s.state !== 'connected');
  for (const server of down) {
    problems.push(
      `${plain(server.name, 80)}: ${plain(server.state, 40)}${server.error ? ` (${plain(server.error, 200)})` : ''}`,
    );
  }
  // The pid the daemon itself reports: the one the window attached to, whoever named it.
  const shared = link.kind === 'shared' ? sharedDaemonText(typeof status.pid === 'number' ? status.pid : link.pid) : '';
  const connectedTo = shared
    ? `connected to ${shared}, whose log is in that window or terminal. When it ends, this window starts its own.`
    : 'connected';
  const tooltip = [
    `mcphost ${plain(status.version, 40)}: ${connectedTo}`,
    ...parts,
    ...problems,
    pending > 0
      ? `Click to show the oldest prompt waiting for your answer (${pending === 1 ? 'the agent waits' : 'agents wait'} until it is answered or expires).`
      : 'Click to open the activity view.',
  ].join('\n');
  const failing = Boolean(status.config_error || status.log_error);
  return {
    text: `$(shield) mcphost ${up}/${total}${shared ? ' $(link)' : ''}${pending > 0 ? ` $(bell-dot) ${waiting}` : ''}`,
    detail: `${shared ? `connected to ${shared}` : 'connected'} · ${parts.join(' · ')}`,
    tooltip,
    severity: failing ? 'error' : pending > 0 || up < total ? 'warning' : 'info',
    // A waiting prompt outranks a config error: the agent is stuck until someone answers, and the error's
    // diagnostics stay in the file meanwhile.
    background: pending > 0 ? 'warning' : failing ? 'error' : undefined,
    click: pending > 0 ? 'prompts' : 'activity',
    busy: false,
  };
}

/**
 * The daemon's state in a few words, pure: for the language status item and the status bar entry.
 */

import type { StatusPayload } from './protocol';
import { plain } from './prompts';

export type ConnectionState = 'starting' | 'connected' | 'stopped' | 'failed';

export interface StatusView {
  /** Short text with codicons, for the status bar (our own words only: no daemon- or agent-written text). */
  text: string;
  /** The language status item's detail. */
  detail: string;
  /** Plain-text tooltip. */
  tooltip: string;
  severity: 'info' | 'warning' | 'error';
  busy: boolean;
}

export function upstreamCounts(status: StatusPayload): { up: number; total: number } {
  const servers = Array.isArray(status.servers) ? status.servers : [];
  return { up: servers.filter((s) => s.state === 'connected').length, total: servers.length };
}

export function statusView(state: ConnectionState, status: StatusPayload | undefined, error?: string): StatusView {
  if (state === 'starting') {
    return {
      text: '$(loading~spin) mcphost',
      detail: 'starting the daemon',
      tooltip: 'mcphost: starting the daemon',
      severity: 'info',
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
      busy: false,
    };
  }
  const { up, total } = upstreamCounts(status);
  const pending = typeof status.pending === 'number' ? status.pending : 0;
  const parts = [`${up}/${total} servers up`];
  if (pending > 0) {
    parts.push(`${pending} prompt${pending === 1 ? '' : 's'} pending`);
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
  const tooltip = [
    `mcphost ${plain(status.version, 40)}: connected`,
    ...parts,
    ...problems,
    'Click to open the activity view.',
  ].join('\n');
  return {
    text: `$(shield) mcphost ${up}/${total}${pending > 0 ? ` $(bell-dot) ${pending}` : ''}`,
    detail: `connected · ${parts.join(' · ')}`,
    tooltip,
    severity: status.config_error || status.log_error ? 'error' : up < total ? 'warning' : 'info',
    busy: false,
  };
}

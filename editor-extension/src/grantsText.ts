/**
 * Remembered approvals, pure: how each grant reads in the quick pick that lists and revokes them: server:tool, the
 * variant, its scope (this session or always) and what it covers (any arguments, exactly some, or a pattern).
 */

import type { GrantInfo } from './protocol';
import { plain } from './prompts';
import { matchText } from './scope';

export interface GrantItemText {
  label: string;
  description: string;
  detail: string;
}

/** Quick pick labels render `$(name)` as an icon: names that come from servers must not. */
export function noIcons(text: string): string {
  return text.replace(/\$\(/g, '$\u200a(');
}

export function grantItemText(grant: GrantInfo, formatTime: (iso: string) => string): GrantItemText {
  const name = noIcons(`${plain(grant.server, 80)}:${plain(grant.tool, 80)}`);
  const scope = grant.scope === 'always' ? 'always' : 'this session';
  const parts = [`granted ${formatTime(grant.granted_at)}`];
  if (grant.approver) {
    parts.push(`by ${plain(grant.approver, 80)}`);
  }
  if (grant.session_id) {
    parts.push(`session ${plain(grant.session_id, 40)}`);
  }
  // What it covers besides the tool: older daemons say nothing, and their grants are for any arguments.
  const covers = matchText(grant.match, grant.pattern, grant.arguments_preview, 160);
  return {
    label: name,
    description: noIcons(`${plain(grant.variant, 40)} · ${scope} · ${covers}`),
    detail: noIcons(parts.join(' · ')),
  };
}

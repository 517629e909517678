/**
 * What a remembered allow covers, pure: after "Allow for this session" or "Always allow", the person picks whether it
 * holds for the tool with any arguments, with exactly these arguments, or with arguments matching globs they see and
 * confirm (src/promptUi.ts asks with a QuickPick and input boxes; this builds their words and checks the pattern).
 *
 * A pattern is argument name -> glob (src/glob.ts: Python's fnmatch, whole string). The daemon refuses to remember a
 * pattern this very call does not match (it allows once and warns), so the pattern is checked against the call's
 * arguments before it is sent. Only string arguments the person can see whole are offered: the daemon matches the
 * real value, and a redacted or cut one would be checked against the placeholder instead.
 */

import { globMatch, globValid, literalGlob } from './glob';
import { LIMITS, argumentsText, matchChoices, patternArguments, plain } from './prompts';
import type { GrantMatch, PermissionRequest, PermissionResponse, Remember } from './protocol';

export { matchChoices, patternArguments };

export type Pattern = Record<string, string>;

export interface ScopeChoice {
  match: GrantMatch;
  label: string;
  description: string;
  detail: string;
}

export const SCOPE_LIMITS = {
  /** A value or glob as shown in a list. */
  value: 120,
  /** The daemon's bound on a pattern's globs. */
  glob: 1000,
} as const;

const REMEMBER_WORDS: Record<Exclude<Remember, 'once'>, string> = {
  session: 'Allow for this session',
  always: 'Always allow',
};

/** Whether an answer needs the scope question first: a remembered allow, and more than the tool on offer. */
export function needsScope(request: PermissionRequest, response: PermissionResponse): response is PermissionResponse & {
  remember: 'session' | 'always';
} {
  if (response.decision !== 'allow' || (response.remember !== 'session' && response.remember !== 'always')) {
    return false;
  }
  return matchChoices(request).some((match) => match !== 'tool');
}

/** Where the pattern starts: the daemon's suggestion, on arguments the person can see, each matching this call. */
export function initialPattern(request: PermissionRequest): Pattern {
  const suggested = request.suggested_pattern;
  const pattern: Pattern = {};
  if (suggested === null || suggested === undefined || typeof suggested !== 'object') {
    return pattern;
  }
  const values = new Map(patternArguments(request).map((a) => [a.name, a.value]));
  for (const [name, glob] of Object.entries(suggested)) {
    const value = values.get(name);
    if (typeof glob === 'string' && value !== undefined && globProblem(name, glob, request) === undefined) {
      pattern[name] = glob;
    }
  }
  return pattern;
}

/** Why `glob` cannot stand for argument `name` of this call, in a sentence, or undefined when it can. */
export function globProblem(name: string, glob: string, request: PermissionRequest): string | undefined {
  const argument = patternArguments(request).find((a) => a.name === name);
  if (!argument) {
    return `${plain(name, LIMITS.fieldInline)} is not a string argument of this call that can be shown whole.`;
  }
  if (glob.length === 0) {
    return 'Give a glob, or leave this argument out of the pattern.';
  }
  if (glob.length > SCOPE_LIMITS.glob) {
    return `A glob is at most ${SCOPE_LIMITS.glob} characters.`;
  }
  if (!globValid(glob)) {
    return 'This glob cannot be used (a character range runs backwards).';
  }
  if (!globMatch(glob, argument.value)) {
    return (
      `This call's ${plain(name, LIMITS.fieldInline)} "${plain(argument.value, SCOPE_LIMITS.value)}" does not match ` +
      `"${plain(glob, SCOPE_LIMITS.value)}": the approval would not even cover this call.`
    );
  }
  return undefined;
}

/** Why the whole pattern cannot be remembered for this call, or undefined. */
export function patternProblem(pattern: Pattern, request: PermissionRequest): string | undefined {
  const names = Object.keys(pattern);
  if (names.length === 0) {
    return 'The pattern looks at no argument yet: give at least one argument a glob.';
  }
  for (const name of names) {
    const problem = globProblem(name, pattern[name], request);
    if (problem) {
      return problem;
    }
  }
  return undefined;
}

/** The pattern in one line, exact between the quotes (a glob has no escapes to show): `path="src/*", mode="w"`. */
export function patternText(pattern: Pattern, max: number = 300): string {
  const text = Object.entries(pattern)
    .map(([name, glob]) => `${name}="${glob}"`)
    .join(', ');
  return plain(text, max);
}

/** The glob an argument starts from when the person adds it to the pattern: this call's value, exactly. */
export function startingGlob(name: string, pattern: Pattern, request: PermissionRequest): string {
  if (pattern[name] !== undefined) {
    return pattern[name];
  }
  const argument = patternArguments(request).find((a) => a.name === name);
  return argument ? literalGlob(argument.value) : '';
}

function callsWord(request: PermissionRequest): string {
  const kind = /^call_tool_(\w+)$/.exec(request.variant)?.[1];
  return kind ? `${plain(kind, 20)} calls` : 'calls';
}

/** The choices of the scope QuickPick, in the order the daemon lists them. */
export function scopeChoices(request: PermissionRequest, remember: 'session' | 'always'): ScopeChoice[] {
  const tool = plain(request.tool, LIMITS.field);
  const calls = callsWord(request);
  const holds = remember === 'session' ? 'from this agent session, until it disconnects' : 'from any agent, until revoked';
  const choices: ScopeChoice[] = [];
  for (const match of matchChoices(request)) {
    if (match === 'tool') {
      choices.push({
        match,
        label: 'This tool, any arguments',
        description: '',
        detail: `Every one of the ${calls} to ${tool} ${holds}.`,
      });
    } else if (match === 'arguments') {
      choices.push({
        match,
        label: 'This tool with exactly these arguments',
        description: argumentsText(request, LIMITS.argumentsInline),
        detail: `Only these very values, ${holds}; other arguments ask again.`,
      });
    } else {
      const start = initialPattern(request);
      choices.push({
        match,
        label: 'This tool with arguments matching a pattern…',
        description: Object.keys(start).length > 0 ? `starts from ${patternText(start, LIMITS.argumentsInline)}` : '',
        detail: `You see, edit and confirm the pattern next; matching calls pass ${holds}.`,
      });
    }
  }
  return choices;
}

/** The QuickPick's title: which answer is being narrowed, for which call. */
export function scopeTitle(request: PermissionRequest, remember: 'session' | 'always'): string {
  return `mcphost: "${REMEMBER_WORDS[remember]}" for ${plain(request.server, LIMITS.fieldInline)}:${plain(request.tool, LIMITS.fieldInline)}: what does it cover?`;
}

/** The answer for the scope picked. */
export function scopedResponse(remember: 'session' | 'always', match: GrantMatch, pattern?: Pattern): PermissionResponse {
  if (match === 'pattern') {
    return { decision: 'allow', remember, match, pattern: { ...(pattern ?? {}) } };
  }
  return { decision: 'allow', remember, match };
}

/** What a remembered allow covers, in words (grants list, logs). */
export function matchText(
  match: string | undefined | null,
  pattern: Pattern | null | undefined,
  argumentsPreview: string | null | undefined,
  max: number = 160,
): string {
  if (match === 'pattern') {
    return `arguments matching ${pattern && Object.keys(pattern).length > 0 ? patternText(pattern, max) : '(a pattern)'}`;
  }
  if (match === 'arguments') {
    const preview = plain(argumentsPreview, max);
    return preview ? `exactly ${preview}` : 'exactly the arguments it was given for';
  }
  return 'any arguments';
}

/**
 * The scope question after "Allow for this session" or "Always allow" (the words and checks are in src/scope.ts):
 * a QuickPick of what the remembered allow covers (this tool with any arguments, with exactly these arguments, or with
 * arguments matching a pattern), and for a pattern, a list of the call's string arguments with the glob each must
 * match, where picking one edits its glob in an input box that refuses a glob this call's value does not match.
 *
 * Nothing here allows anything by default: Escape (or clicking elsewhere) in the scope list or the pattern list gives
 * undefined, and the caller shows the prompt again; Escape in a glob's input box goes back to the pattern list with
 * the glob unchanged. When the daemon withdraws the prompt, whatever is open is closed.
 */

import * as vscode from 'vscode';
import type { CancellationToken } from 'vscode-languageclient/node';

import { noIcons } from './grantsText';
import { LIMITS, plain } from './prompts';
import type { GrantMatch, PermissionRequest, PermissionResponse } from './protocol';
import {
  type Pattern,
  SCOPE_LIMITS,
  globProblem,
  initialPattern,
  patternArguments,
  patternProblem,
  patternText,
  scopeChoices,
  scopeTitle,
  scopedResponse,
  startingGlob,
} from './scope';

const BACK = Symbol('back');

interface ScopeItem extends vscode.QuickPickItem {
  match: GrantMatch;
}

interface PatternItem extends vscode.QuickPickItem {
  accept?: boolean;
  argument?: string;
}

/** A QuickPick that resolves with the item picked, BACK for its back button, or undefined (Escape, withdrawn). */
function pick<T extends vscode.QuickPickItem>(
  setup: (quickPick: vscode.QuickPick<T>) => void,
  token: CancellationToken,
): Promise<T | typeof BACK | undefined> {
  return new Promise((resolve) => {
    const quickPick = vscode.window.createQuickPick<T>();
    quickPick.ignoreFocusOut = true;
    quickPick.matchOnDescription = true;
    quickPick.matchOnDetail = true;
    setup(quickPick);
    let result: T | typeof BACK | undefined;
    const disposables = [
      quickPick.onDidAccept(() => {
        result = quickPick.selectedItems[0] ?? quickPick.activeItems[0];
        quickPick.hide();
      }),
      quickPick.onDidTriggerButton((button) => {
        if (button === vscode.QuickInputButtons.Back) {
          result = BACK;
          quickPick.hide();
        }
      }),
      quickPick.onDidHide(() => {
        for (const d of disposables) {
          d.dispose();
        }
        quickPick.dispose();
        resolve(token.isCancellationRequested ? undefined : result);
      }),
      token.onCancellationRequested(() => quickPick.hide()),
    ];
    if (token.isCancellationRequested) {
      for (const d of disposables) {
        d.dispose();
      }
      quickPick.dispose();
      resolve(undefined);
      return;
    }
    quickPick.show();
  });
}

/** An input box for one argument's glob: the new glob, or undefined (Escape, withdrawn). */
function editGlob(request: PermissionRequest, name: string, value: string, pattern: Pattern, token: CancellationToken): Promise<string | undefined> {
  return new Promise((resolve) => {
    const input = vscode.window.createInputBox();
    input.ignoreFocusOut = true;
    input.title = `mcphost: the glob that argument ${plain(name, LIMITS.fieldInline)} must match`;
    input.value = startingGlob(name, pattern, request);
    input.prompt =
      `This call's ${plain(name, LIMITS.fieldInline)}: "${plain(value, SCOPE_LIMITS.value)}". ` +
      '* matches any run of characters (/ too), ? one character, [abc] one of them, [!abc] none of them; the rest ' +
      'must be equal. Empty: leave this argument out of the pattern. Escape: back to the pattern, unchanged.';
    const check = (glob: string) => (glob === '' ? undefined : globProblem(name, glob, request));
    input.validationMessage = check(input.value);
    let result: string | undefined;
    const disposables = [
      input.onDidChangeValue((glob) => {
        input.validationMessage = check(glob);
      }),
      input.onDidAccept(() => {
        if (check(input.value) !== undefined) {
          return; // the message under the box says why
        }
        result = input.value;
        input.hide();
      }),
      input.onDidHide(() => {
        for (const d of disposables) {
          d.dispose();
        }
        input.dispose();
        resolve(token.isCancellationRequested ? undefined : result);
      }),
      token.onCancellationRequested(() => input.hide()),
    ];
    if (token.isCancellationRequested) {
      for (const d of disposables) {
        d.dispose();
      }
      input.dispose();
      resolve(undefined);
      return;
    }
    input.show();
  });
}

/** The pattern the person confirms, BACK (to the scope list), or undefined (Escape, withdrawn). */
async function confirmPattern(
  request: PermissionRequest,
  remember: 'session' | 'always',
  token: CancellationToken,
): Promise<Pattern | typeof BACK | undefined> {
  const pattern: Pattern = initialPattern(request);
  const args = patternArguments(request);
  let active: string | undefined;
  for (;;) {
    const problem = patternProblem(pattern, request);
    const name = `${plain(request.server, LIMITS.fieldInline)}:${plain(request.tool, LIMITS.fieldInline)}`;
    const accept: PatternItem = problem
      ? { label: '$(circle-slash) Not yet: pick an argument below to give it a glob', detail: noIcons(problem), accept: true }
      : {
          label: '$(check) Allow calls whose arguments match this pattern',
          description: noIcons(patternText(pattern, 200)),
          detail: 'Each argument named must be a string matching its glob; others are not looked at.',
          accept: true,
        };
    const items: PatternItem[] = [
      accept,
      { label: '', kind: vscode.QuickPickItemKind.Separator },
      ...args.map(({ name: arg, value }): PatternItem => ({
        label: noIcons(plain(arg, LIMITS.fieldInline)),
        description: noIcons(pattern[arg] !== undefined ? `must match: ${plain(pattern[arg], SCOPE_LIMITS.value)}` : 'not looked at'),
        detail: noIcons(`this call: "${plain(value, SCOPE_LIMITS.value)}"`),
        argument: arg,
      })),
    ];
    const picked = await pick<PatternItem>((quickPick) => {
      quickPick.title = `mcphost: ${remember === 'always' ? '"Always allow"' : '"Allow for this session"'} ${name} with arguments matching`;
      quickPick.placeholder = 'Change a glob, or allow with this pattern (Escape: back to the prompt)';
      quickPick.items = items;
      quickPick.buttons = [vscode.QuickInputButtons.Back];
      quickPick.matchOnDescription = false;
      quickPick.matchOnDetail = false;
      const again = items.find((item) => item.argument !== undefined && item.argument === active);
      if (again) {
        quickPick.activeItems = [again];
      }
    }, token);
    if (picked === undefined || picked === BACK) {
      return picked;
    }
    if (picked.accept) {
      if (!problem) {
        return { ...pattern };
      }
      continue;
    }
    const arg = picked.argument;
    const value = args.find((a) => a.name === arg)?.value;
    if (arg === undefined || value === undefined) {
      continue;
    }
    active = arg;
    const glob = await editGlob(request, arg, value, pattern, token);
    if (token.isCancellationRequested) {
      return undefined;
    }
    if (glob === '') {
      delete pattern[arg];
    } else if (glob !== undefined) {
      pattern[arg] = glob;
    }
  }
}

/**
 * What a remembered allow covers, asked after the person picked `remember`: the scoped answer, or undefined when
 * they pressed Escape (or the prompt was withdrawn): the caller shows the prompt again, never allows by default.
 */
export async function askScope(
  request: PermissionRequest,
  remember: 'session' | 'always',
  token: CancellationToken,
): Promise<PermissionResponse | undefined> {
  for (;;) {
    const choices = scopeChoices(request, remember);
    const picked = await pick<ScopeItem>((quickPick) => {
      quickPick.title = noIcons(scopeTitle(request, remember));
      quickPick.placeholder = 'What the approval covers (Escape: back to the prompt)';
      quickPick.items = choices.map((choice) => ({
        label: choice.label,
        description: noIcons(choice.description),
        detail: noIcons(choice.detail),
        match: choice.match,
      }));
    }, token);
    if (picked === undefined || picked === BACK) {
      return undefined;
    }
    if (picked.match !== 'pattern') {
      return scopedResponse(remember, picked.match);
    }
    const pattern = await confirmPattern(request, remember, token);
    if (pattern === BACK) {
      continue;
    }
    return pattern === undefined ? undefined : scopedResponse(remember, 'pattern', pattern);
  }
}

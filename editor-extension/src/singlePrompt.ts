/**
 * One prompt per call, pure: whether to offer it, what the offer says, and what each answer does.
 *
 * In agent mode VS Code asks before every MCP tool that is not marked read-only, so a call to mcphost's
 * `call_tool_write` or `call_tool_destructive` is confirmed twice: by VS Code, then by mcphost. VS Code has no setting
 * that trusts one MCP server's tools (`chat.tools.global.autoApprove` trusts every tool of every server, and
 * `chat.tools.eligibleForAutoApproval` can only take auto-approval away). What it has is its own per-server approval:
 * "Chat: Manage Tool Approval" (`workbench.action.chat.editToolApproval`), under the server, "Run any tool without
 * approval", kept in VS Code's storage (`chat/servers/autoconfirm`, keyed by the server definition's id) for the
 * profile or the workspace. No extension API writes it, so the extension asks the person, and with their consent
 * opens that list where they tick it; the `mcphost.singlePrompt` setting remembers the answer.
 * See docs/vscode-single-prompt.md.
 */

export type SinglePromptChoice = 'offer' | 'mcphost' | 'both';

export const SINGLE_PROMPT_CHOICES: readonly SinglePromptChoice[] = ['offer', 'mcphost', 'both'];

/** VS Code's "Chat: Manage Tool Approval" (1.139: its one argument is the scope the list opens in). */
export const MANAGE_TOOL_APPROVAL_COMMAND = 'workbench.action.chat.editToolApproval';
/** "profile": every workspace of this profile (VS Code calls it global); its folder button switches to the workspace. */
export const MANAGE_TOOL_APPROVAL_SCOPE = 'profile';

/** The MCP server label the extension registers (mcpProvider.ts). */
export const SERVER_LABEL = 'mcphost';
/** mcphost's agent-facing tools (design.md, "Agent-facing MCP tools"). */
export const MCPHOST_TOOLS: readonly string[] = ['retrieve_tools', 'call_tool_read', 'call_tool_write', 'call_tool_destructive'];

/** What VS Code's list shows under the server, and what the person ticks. */
export const RUN_WITHOUT_APPROVAL = 'Run any tool without approval';
/** The entry next to it: VS Code's review of what a tool returned, a question mcphost does not ask. */
export const CONTINUE_WITHOUT_REVIEW = 'Continue without reviewing any tool results';

export function parseChoice(value: unknown): SinglePromptChoice {
  return SINGLE_PROMPT_CHOICES.includes(value as SinglePromptChoice) ? (value as SinglePromptChoice) : 'offer';
}

/** A tool as `vscode.lm.tools` lists it (`fullReferenceName` is there at run time in VS Code 1.139). */
export interface ListedTool {
  readonly name: string;
  readonly tags?: readonly string[];
  readonly fullReferenceName?: string;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * mcphost's tools among the tools VS Code lists. VS Code names an MCP tool `mcp_<server label>[n]_<tool>` (n when
 * two servers share a label) and gives it the full reference name `<server label>/<tool>`.
 */
export function mcphostToolsIn(tools: readonly ListedTool[], label: string = SERVER_LABEL): string[] {
  const prefix = label.toLowerCase().replace(/[^a-z0-9_.-]+/g, '_');
  const byName = new RegExp(`^mcp_${escapeRegExp(prefix)}\\d*_(${MCPHOST_TOOLS.join('|')})$`);
  return tools
    .filter((tool) => {
      if (tool.tags && !tool.tags.includes('mcp')) {
        return false;
      }
      if (typeof tool.fullReferenceName === 'string' && tool.fullReferenceName.includes('/')) {
        const [server, name] = tool.fullReferenceName.split('/', 2);
        return server.toLowerCase() === label.toLowerCase() && MCPHOST_TOOLS.includes(name);
      }
      return byName.test(tool.name);
    })
    .map((tool) => tool.name);
}

export interface OfferState {
  choice: SinglePromptChoice;
  /** `mcphost.registerMcpServer`: the extension hands the daemon to agent mode. */
  registerMcpServer: boolean;
  /** Asked in this window already ("Not now" waits for the next window). */
  offeredThisSession: boolean;
  /** VS Code lists mcphost's tools: before that, its approval list has no mcphost entry to tick. */
  toolsKnown: boolean;
  /** This VS Code has the "Manage Tool Approval" command. */
  approvalListAvailable: boolean;
}

/** Whether to offer one prompt per call now, unasked. */
export function shouldOffer(state: OfferState): boolean {
  return (
    state.choice === 'offer' &&
    state.registerMcpServer &&
    !state.offeredThisSession &&
    state.toolsKnown &&
    state.approvalListAvailable
  );
}

export type SinglePromptAnswer = 'mcphost' | 'both' | 'later';

export const BUTTONS: { readonly [A in SinglePromptAnswer]: string } = {
  mcphost: 'Let mcphost ask',
  both: 'Keep both prompts',
  later: 'Not now',
};

/** A button's label back to its answer; a closed dialog (Escape) is "Not now". */
export function answerFor(label: string | undefined): SinglePromptAnswer {
  const found = (Object.keys(BUTTONS) as SinglePromptAnswer[]).find((answer) => BUTTONS[answer] === label);
  return found ?? 'later';
}

export interface OfferText {
  message: string;
  detail: string;
}

/** The question, for a modal dialog (its detail keeps line breaks). */
export function offerText(current: SinglePromptChoice): OfferText {
  const now =
    current === 'mcphost'
      ? `Now: you chose "${BUTTONS.mcphost}". VS Code does not ask before mcphost's tools run if "${RUN_WITHOUT_APPROVAL}" is ticked under mcphost in its tool approval list.`
      : current === 'both'
        ? `Now: you chose "${BUTTONS.both}". VS Code asks before mcphost's write and destructive tools run, then mcphost asks.`
        : "Now: in agent mode VS Code asks before every call to mcphost's call_tool_write and call_tool_destructive, then mcphost asks again, with the agent's reason, the arguments and the server's annotations: two prompts for one call.";
  return {
    message: 'mcphost: let mcphost be the only one to ask before its tools run?',
    detail: [
      now,
      '',
      `${BUTTONS.mcphost}: VS Code's tool approval list opens next. Under "mcphost", tick "${RUN_WITHOUT_APPROVAL}" and press OK. ` +
        "VS Code then stops asking before mcphost's tools run, in every workspace of this profile (the list's folder button limits it to this one), " +
        "and mcphost alone asks, as its policy says: writes ask, destructive calls need a confirm, reads pass. " +
        `VS Code may still ask to review a tool's result before the agent sees it ("${CONTINUE_WITHOUT_REVIEW}" turns that off too).`,
      '',
      `${BUTTONS.both}: VS Code asks too.${current === 'mcphost' ? ` The list opens so that you can untick "${RUN_WITHOUT_APPROVAL}".` : ''} Not asked again.`,
      '',
      'Change it any time: "mcphost: One Prompt per Call..." or VS Code\'s "Chat: Manage Tool Approval".',
    ].join('\n'),
  };
}

export interface SinglePromptEffect {
  /** The new value of `mcphost.singlePrompt`, when it changes. */
  choice?: SinglePromptChoice;
  /** Open VS Code's tool approval list. */
  openApprovalList: boolean;
  /** What to do in that list, shown beside it. */
  instruction?: string;
}

/** What an answer does, given the choice in force. */
export function effectOf(answer: SinglePromptAnswer, current: SinglePromptChoice): SinglePromptEffect {
  if (answer === 'mcphost') {
    return {
      choice: current === 'mcphost' ? undefined : 'mcphost',
      openApprovalList: true,
      instruction: `mcphost: under "mcphost", tick "${RUN_WITHOUT_APPROVAL}", then OK.`,
    };
  }
  if (answer === 'both') {
    return current === 'mcphost'
      ? {
          choice: 'both',
          openApprovalList: true,
          instruction: `mcphost: under "mcphost", untick "${RUN_WITHOUT_APPROVAL}", then OK.`,
        }
      : { choice: current === 'both' ? undefined : 'both', openApprovalList: false };
  }
  return { openApprovalList: false };
}

/** When this VS Code has no "Manage Tool Approval" list: the same approval, from VS Code's own confirmation. */
export const NO_APPROVAL_LIST =
  'mcphost: this VS Code has no "Chat: Manage Tool Approval". When VS Code next asks before one of mcphost\'s tools ' +
  'runs, open the menu beside its Allow button and choose to always allow the tools from mcphost.';

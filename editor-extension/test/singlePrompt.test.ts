import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import {
  BUTTONS,
  MANAGE_TOOL_APPROVAL_COMMAND,
  MCPHOST_TOOLS,
  type OfferState,
  RUN_WITHOUT_APPROVAL,
  SINGLE_PROMPT_CHOICES,
  type SinglePromptAnswer,
  type SinglePromptChoice,
  answerFor,
  effectOf,
  mcphostToolsIn,
  offerText,
  parseChoice,
  shouldOffer,
} from '../src/singlePrompt';

// out/test/singlePrompt.test.js -> the extension's package.json
const PACKAGE_JSON = path.resolve(__dirname, '..', '..', 'package.json');

interface Manifest {
  contributes: {
    commands: { command: string; title: string; category?: string }[];
    configuration: { properties: Record<string, { enum?: string[]; default?: unknown; enumDescriptions?: string[] }> };
  };
}

const manifest = JSON.parse(fs.readFileSync(PACKAGE_JSON, 'utf8')) as Manifest;

/** What VS Code 1.139 lists in `vscode.lm.tools` once it has started the server the extension registers. */
const LISTED = [
  { name: 'copilot_readFile', tags: ['vscode_editing'] },
  { name: 'mcp_mcphost_call_tool_destructive', tags: ['mcp'], fullReferenceName: 'mcphost/call_tool_destructive' },
  { name: 'mcp_mcphost_call_tool_read', tags: ['mcp'], fullReferenceName: 'mcphost/call_tool_read' },
  { name: 'mcp_mcphost_call_tool_write', tags: ['mcp'], fullReferenceName: 'mcphost/call_tool_write' },
  { name: 'mcp_mcphost_retrieve_tools', tags: ['mcp'], fullReferenceName: 'mcphost/retrieve_tools' },
  { name: 'mcp_github_create_issue', tags: ['mcp'], fullReferenceName: 'github/create_issue' },
];

describe("finding mcphost's tools among VS Code's", () => {
  it('finds the four tools of the mcphost server, and no other', () => {
    assert.deepEqual(mcphostToolsIn(LISTED), [
      'mcp_mcphost_call_tool_destructive',
      'mcp_mcphost_call_tool_read',
      'mcp_mcphost_call_tool_write',
      'mcp_mcphost_retrieve_tools',
    ]);
  });

  it('goes by the tool id when VS Code gives no full reference name (older API)', () => {
    const tools = MCPHOST_TOOLS.map((tool) => ({ name: `mcp_mcphost_${tool}`, tags: ['mcp'] }));
    assert.equal(mcphostToolsIn(tools).length, 4);
    // A second server labelled mcphost gets a numbered prefix; still mcphost's tools.
    assert.deepEqual(mcphostToolsIn([{ name: 'mcp_mcphost2_call_tool_write' }]), ['mcp_mcphost2_call_tool_write']);
  });

  it('ignores look-alikes: other servers, other tools, tools that are not MCP tools', () => {
    assert.deepEqual(
      mcphostToolsIn([
        { name: 'mcp_mcphostx_call_tool_write', tags: ['mcp'] },
        { name: 'mcp_mcphost_delete_everything', tags: ['mcp'] },
        { name: 'mcp_other_call_tool_write', tags: ['mcp'], fullReferenceName: 'other/call_tool_write' },
        { name: 'mcp_mcphost_call_tool_write', tags: ['extension'] },
        { name: 'x', tags: ['mcp'], fullReferenceName: 'mcphost/retrieve_tools_v2' },
      ]),
      [],
    );
    assert.deepEqual(mcphostToolsIn([]), []);
  });
});

describe('whether to offer one prompt per call', () => {
  const ready: OfferState = {
    choice: 'offer',
    registerMcpServer: true,
    offeredThisSession: false,
    toolsKnown: true,
    approvalListAvailable: true,
  };

  it('offers once VS Code lists the tools, when the person has not answered', () => {
    assert.equal(shouldOffer(ready), true);
  });

  const not: [string, Partial<OfferState>][] = [
    ['the person let mcphost ask', { choice: 'mcphost' }],
    ['the person keeps both prompts', { choice: 'both' }],
    ['the server is not handed to agent mode', { registerMcpServer: false }],
    ['it was offered in this window already ("Not now")', { offeredThisSession: true }],
    ["VS Code does not list mcphost's tools yet (its list would have no mcphost entry)", { toolsKnown: false }],
    ['this VS Code has no tool approval list', { approvalListAvailable: false }],
  ];
  for (const [why, change] of not) {
    it(`does not offer when ${why}`, () => {
      assert.equal(shouldOffer({ ...ready, ...change }), false);
    });
  }
});

describe('the answers', () => {
  it('maps the buttons back, and a closed dialog to "Not now"', () => {
    for (const answer of Object.keys(BUTTONS) as SinglePromptAnswer[]) {
      assert.equal(answerFor(BUTTONS[answer]), answer);
    }
    assert.equal(answerFor(undefined), 'later');
    assert.equal(answerFor('Cancel'), 'later');
  });

  it('"Let mcphost ask" records the choice and opens the approval list, with what to tick', () => {
    for (const current of ['offer', 'both'] as const) {
      const effect = effectOf('mcphost', current);
      assert.equal(effect.choice, 'mcphost');
      assert.equal(effect.openApprovalList, true);
      assert.match(effect.instruction ?? '', /under "mcphost", tick "Run any tool without approval"/);
    }
    // Chosen already: the list opens again (to check it), the setting stays.
    assert.deepEqual(effectOf('mcphost', 'mcphost').choice, undefined);
    assert.equal(effectOf('mcphost', 'mcphost').openApprovalList, true);
  });

  it('"Keep both prompts" is remembered; after "Let mcphost ask" it opens the list to untick', () => {
    assert.deepEqual(effectOf('both', 'offer'), { choice: 'both', openApprovalList: false });
    assert.deepEqual(effectOf('both', 'both'), { choice: undefined, openApprovalList: false });
    const off = effectOf('both', 'mcphost');
    assert.equal(off.choice, 'both');
    assert.equal(off.openApprovalList, true);
    assert.match(off.instruction ?? '', /untick "Run any tool without approval"/);
  });

  it('"Not now" changes nothing', () => {
    for (const current of SINGLE_PROMPT_CHOICES) {
      assert.deepEqual(effectOf('later', current), { openApprovalList: false });
    }
  });
});

describe("the offer's words", () => {
  it('says what VS Code asks, what changes, what mcphost still asks, and how to undo it', () => {
    const { message, detail } = offerText('offer');
    assert.match(message, /let mcphost be the only one to ask before its tools run/);
    for (const part of [
      "VS Code asks before every call to mcphost's call_tool_write and call_tool_destructive",
      'two prompts for one call',
      `${BUTTONS.mcphost}: VS Code's tool approval list opens next. Under "mcphost", tick "${RUN_WITHOUT_APPROVAL}"`,
      'mcphost alone asks, as its policy says: writes ask, destructive calls need a confirm, reads pass',
      'review a tool\'s result',
      `${BUTTONS.both}: VS Code asks too. Not asked again.`,
      '"mcphost: One Prompt per Call..."',
      '"Chat: Manage Tool Approval"',
    ]) {
      assert.ok(detail.includes(part), `lacks "${part}": ${detail}`);
    }
  });

  it('says what is in force', () => {
    assert.match(offerText('mcphost').detail, /^Now: you chose "Let mcphost ask"/);
    assert.match(offerText('mcphost').detail, /The list opens so that you can untick/);
    assert.match(offerText('both').detail, /^Now: you chose "Keep both prompts"/);
  });
});

describe('the manifest', () => {
  it('contributes the command and the setting, with every choice described', () => {
    const command = manifest.contributes.commands.find((c) => c.command === 'mcphost.singlePrompt');
    assert.deepEqual(command, { command: 'mcphost.singlePrompt', title: 'One Prompt per Call...', category: 'mcphost' });
    const setting = manifest.contributes.configuration.properties['mcphost.singlePrompt'];
    assert.deepEqual(setting.enum, [...SINGLE_PROMPT_CHOICES]);
    assert.equal(setting.enumDescriptions?.length, SINGLE_PROMPT_CHOICES.length);
    assert.equal(setting.default, 'offer');
  });

  it('parses the setting: a known answer, else not answered', () => {
    for (const choice of SINGLE_PROMPT_CHOICES) {
      assert.equal(parseChoice(choice), choice);
    }
    for (const value of [undefined, null, '', 'Mcphost', true, 1]) {
      assert.equal(parseChoice(value), 'offer' satisfies SinglePromptChoice);
    }
  });

  it("names VS Code's own command", () => {
    assert.equal(MANAGE_TOOL_APPROVAL_COMMAND, 'workbench.action.chat.editToolApproval');
  });
});

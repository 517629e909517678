// See README.md. Plain CommonJS: the test packages this folder as it is.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const vscode = require('vscode');

const OUT = process.env.MCPHOST_E2E_PROBE_OUT;

function input(name) {
  return JSON.parse(fs.readFileSync(path.join(OUT, `${name}.input.json`), 'utf8'));
}

/** Written whole, then renamed: the test never reads half an answer. */
function answer(name, value) {
  const file = path.join(OUT, `${name}.json`);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(value, null, 2));
  fs.renameSync(`${file}.tmp`, file);
}

function activate(context) {
  const register = (id, name, run) =>
    context.subscriptions.push(
      vscode.commands.registerCommand(id, async () => {
        fs.rmSync(path.join(OUT, `${name}.json`), { force: true });
        try {
          answer(name, { ok: true, value: await run() });
        } catch (error) {
          answer(name, { ok: false, error: String(error?.message ?? error) });
        }
      }),
    );
  register('mcphostE2e.listTools', 'tools', () =>
    vscode.lm.tools.map((tool) => ({ name: tool.name, tags: tool.tags, fullReferenceName: tool.fullReferenceName })),
  );
  register('mcphostE2e.invokeTool', 'invoke', async () => {
    const { tool, input: toolInput } = input('invoke');
    const result = await vscode.lm.invokeTool(tool, { input: toolInput, toolInvocationToken: undefined });
    return result.content.map((part) => part.value ?? '').join('\n');
  });
  register('mcphostE2e.readSetting', 'setting', () => vscode.workspace.getConfiguration().inspect(input('setting').key));
  register('mcphostE2e.openToolApproval', 'approval', () =>
    vscode.commands.executeCommand('workbench.action.chat.editToolApproval', 'profile'),
  );
}

module.exports = { activate, deactivate() {} };

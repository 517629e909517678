// protocol.ts against the daemon's generated JSON Schemas (schemas/editor/*.json, schemas/activity-record.schema.json):
// every payload's fields, which of them are required, the enumerations, and the method each schema belongs to.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { ENUMS, FIELDS, SCHEMA_METHODS } from '../src/protocol';

// out/test/protocol.test.js -> the repository's schemas/
const SCHEMAS = path.resolve(__dirname, '..', '..', '..', 'schemas');
const EDITOR = path.join(SCHEMAS, 'editor');
const present = fs.existsSync(EDITOR);
const skip = present ? false : `no schemas at ${EDITOR} (the extension is built outside the mcphost repository)`;

interface Schema {
  title?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  enum?: string[];
  $defs?: Record<string, Schema>;
  $ref?: string;
  items?: Schema;
  anyOf?: Schema[];
}

function load(file: string): Schema {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Schema;
}

type FieldName = keyof typeof FIELDS;

function checkObject(schema: Schema, name: FieldName): void {
  const fields = FIELDS[name] as Record<string, 'required' | 'optional'>;
  assert.deepEqual(
    Object.keys(schema.properties ?? {}).sort(),
    Object.keys(fields).sort(),
    `${name}: the schema's fields and protocol.ts's differ`,
  );
  const required = Object.entries(fields)
    .filter(([, presence]) => presence === 'required')
    .map(([field]) => field)
    .sort();
  assert.deepEqual([...(schema.required ?? [])].sort(), required, `${name}: required fields differ`);
}

function enumOf(schema: Schema | undefined): string[] | undefined {
  if (!schema) {
    return undefined;
  }
  if (schema.enum) {
    return schema.enum;
  }
  for (const option of schema.anyOf ?? []) {
    if (option.enum) {
      return option.enum;
    }
  }
  return undefined;
}

const PAYLOAD_FILES: Record<string, FieldName> = {
  'permission-request': 'PermissionRequest',
  'permission-response': 'PermissionResponse',
  status: 'StatusPayload',
  'grants-result': 'GrantsResult',
  'revoke-grants-params': 'RevokeGrantsParams',
  'revoke-grants-result': 'RevokeGrantsResult',
};

const DEFS: Record<string, FieldName> = {
  PromptIntent: 'PromptIntent',
  UpstreamStatus: 'UpstreamStatus',
  EditorInfo: 'EditorInfo',
  PendingPrompt: 'PendingPrompt',
  McpEndpoint: 'McpEndpoint',
  ExportStatus: 'ExportStatus',
  GrantInfo: 'GrantInfo',
  Decision: 'Decision',
  ErrorInfo: 'ErrorInfo',
  RecordIntent: 'RecordIntent',
  RecordMetadata: 'RecordMetadata',
};

describe('protocol.ts against schemas/', { skip }, () => {
  const files = present ? fs.readdirSync(EDITOR).filter((f) => f.endsWith('.schema.json')) : [];

  it('knows every editor schema, and each schema names its method', () => {
    for (const file of files) {
      const stem = file.replace(/\.schema\.json$/, '');
      const method = SCHEMA_METHODS[stem];
      assert.ok(method, `schemas/editor/${file} is not described in protocol.ts`);
      const title = load(path.join(EDITOR, file)).title ?? '';
      assert.ok(title.includes(method), `${file}: title "${title}" does not name ${method}`);
    }
  });

  it('has the fields of every payload, required where the schema requires them', () => {
    for (const [stem, name] of Object.entries(PAYLOAD_FILES)) {
      checkObject(load(path.join(EDITOR, `${stem}.schema.json`)), name);
    }
  });

  it('has the fields of every nested object', () => {
    const seen = new Set<string>();
    const schemas = [...files.map((f) => path.join(EDITOR, f)), path.join(SCHEMAS, 'activity-record.schema.json')];
    for (const file of schemas) {
      for (const [def, schema] of Object.entries(load(file).$defs ?? {})) {
        if (schema.properties) {
          const name = DEFS[def];
          assert.ok(name, `${path.basename(file)}: $defs/${def} is not described in protocol.ts`);
          checkObject(schema, name);
          seen.add(def);
        }
      }
    }
    assert.deepEqual([...seen].sort(), Object.keys(DEFS).sort());
  });

  it('has the activity record: the same object as a line of activity.jsonl', () => {
    const activity = load(path.join(EDITOR, 'activity.schema.json'));
    assert.match(activity.$ref ?? '', /activity-record\.schema\.json$/);
    checkObject(load(path.join(SCHEMAS, 'activity-record.schema.json')), 'ActivityRecord');
  });

  it('has the enumerations', () => {
    const request = load(path.join(EDITOR, 'permission-request.schema.json'));
    const response = load(path.join(EDITOR, 'permission-response.schema.json'));
    const status = load(path.join(EDITOR, 'status.schema.json'));
    const grants = load(path.join(EDITOR, 'grants-result.schema.json'));
    const found: Record<string, string[] | undefined> = {
      'PermissionRequest.operation': enumOf(request.properties?.operation),
      'PermissionRequest.action': enumOf(request.properties?.action),
      Remember: enumOf(request.$defs?.Remember),
      Answer: enumOf(response.$defs?.Answer),
      'EditorInfo.transport': enumOf(status.$defs?.EditorInfo?.properties?.transport),
      'GrantInfo.scope': enumOf(grants.$defs?.GrantInfo?.properties?.scope),
    };
    for (const [key, values] of Object.entries(ENUMS)) {
      assert.deepEqual(found[key], [...values], `${key}: the enumeration differs`);
    }
  });
});

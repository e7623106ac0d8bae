// Drives a real biopb-mcp server with the TypeScript MCP SDK client, the client most hosts use
// (Claude Code, VS Code, Claude Desktop), over stdio or streamable HTTP, and checks what a host
// relies on. One line per check; the exit code is 1 when any check fails, 2 on bad usage.
//
//   node ts_client.mjs stdio|http [--sdk DIR] [--root DIR] [-- SERVER COMMAND...]
//
// --sdk: the node_modules holding @modelcontextprotocol/sdk (default: $BIOPB_NODE_CACHE or
//        ~/.cache/biopb-mcp-node, then node_modules); _tests/clients/install puts it there.
// --root: an empty dir for the server's config, state and runtime files (default: a temp dir,
//         removed at the end). The server never sees the user's own config.
// SERVER COMMAND: how to run biopb-mcp (default: biopb-mcp); e.g. -- python -m biopb_mcp.
//
// Checks marked (contract) test the tool-result contract hosts need: no structuredContent (hosts
// then show the model only that JSON), a fixed last line [job-N: STATUS(, next_offset=K)], images
// also named by a saved path, JSON-RPC errors for unknown tools and prompts and for batches,
// one resources/updated per write, the prompts capability only when prompts are served.
// Procedures are prompts: listed, got with the doc embedded, announced when a write adds one;
// completion/complete offers doc ids and, for a file argument, the server's working dir's files.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const USAGE = 'usage: node ts_client.mjs stdio|http [--sdk DIR] [--root DIR] [-- SERVER COMMAND...]';
const JOB_LINE = /^\[(job-\d+): (running|ok|error|interrupted|dead|aborted)(?:, next_offset=(\d+))?\]$/;
const INDEX_URI = 'biopb://docs/index';
const TOOLS = ['start_kernel', 'execute_code', 'poll_job', 'interrupt_kernel', 'restart_kernel', 'inspect_object',
  'server_status', 'read_doc', 'search_docs', 'write_doc'];
const PAGING_DOCS = 120; // past one resources/list page (100), so the cursor is followed
const PROBE_ID = 'ts/paging-001'; // a doc edited by hand to make the server's watcher look at the disk again
const WORK_FILE = 'cells-ts.tif'; // in the server's working dir, offered for a prompt's file argument
const COUNT_CELLS = [
  '---', 'description: count cells in a phase-contrast image', '---', '# Count cells', '',
  '## Inputs', '- `image` (required): the phase-contrast image file.', '', '## Steps', '1. Threshold and count.', '',
].join('\n');
const JOB_DEADLINE_MS = 120_000;

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const own = dash < 0 ? argv : argv.slice(0, dash);
  const command = dash < 0 ? ['biopb-mcp'] : argv.slice(dash + 1);
  const opts = { transport: own[0], sdk: null, root: null, command };
  for (let i = 1; i < own.length; i += 2) {
    if (own[i] === '--sdk') opts.sdk = own[i + 1];
    else if (own[i] === '--root') opts.root = own[i + 1];
    else opts.transport = null;
  }
  if (!['stdio', 'http'].includes(opts.transport) || command.length === 0) {
    console.error(USAGE);
    process.exit(2);
  }
  return opts;
}

/** The SDK's ESM entry points by path: the install lives outside this repo, so a bare import
 * specifier would not find it from this file. */
function sdkLoader(dir) {
  const candidates = dir ? [dir] : [join(process.env.BIOPB_NODE_CACHE || join(homedir(), '.cache', 'biopb-mcp-node'), 'node_modules')];
  const found = candidates.find((d) => existsSync(join(d, '@modelcontextprotocol', 'sdk', 'package.json')));
  if (!found) {
    console.error(`error: @modelcontextprotocol/sdk not found in ${candidates.join(', ')}; run _tests/clients/install`);
    process.exit(2);
  }
  return (sub) => import(pathToFileURL(join(found, '@modelcontextprotocol', 'sdk', 'dist', 'esm', sub)).href);
}

// ---- results -------------------------------------------------------------------------------

const outcomes = [];

function record(name, ok, why = '', contract = false) {
  const label = contract ? `${name} (contract)` : name;
  outcomes.push({ label, ok });
  console.log(ok ? `ok   ${label}` : `FAIL ${label}: ${why}`);
}

/** Run one check: ``fn`` returns '' when it holds, else why not; a throw fails the check too. */
async function check(name, fn, { contract = false } = {}) {
  try {
    const why = await fn();
    record(name, !why, why || '', contract);
  } catch (err) {
    record(name, false, `threw ${err?.name ?? 'error'}: ${err?.message ?? err}`, contract);
  }
}

const textOf = (result) => (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const lastLine = (text) => text.trimEnd().split('\n').pop();
const shown = (text, n = 300) => JSON.stringify(text.length > n ? `${text.slice(0, n)}…` : text);

/** Every tool result seen, for the checks that hold for all of them. */
const toolResults = [];

async function call(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  toolResults.push({ name, result });
  return result;
}

/** The job facts of an execute_code/poll_job result: from its last line, as the contract says;
 * else from the structured content older servers sent, so the job can still be followed. */
function jobFacts(result) {
  const match = JOB_LINE.exec(lastLine(textOf(result)));
  if (match) return { jobId: match[1], status: match[2], nextOffset: match[3] === undefined ? null : Number(match[3]) };
  const s = result.structuredContent;
  if (s && typeof s.job_id === 'string') return { jobId: s.job_id, status: s.status, nextOffset: s.next_offset ?? null };
  return null;
}

const jobLineWhy = (result, status) => {
  const text = textOf(result);
  const match = JOB_LINE.exec(lastLine(text));
  if (!match) return `last line is not [job-N: STATUS(, next_offset=K)]: ${shown(lastLine(text))}`;
  return status && match[2] !== status ? `status ${match[2]}, expected ${status}` : '';
};

/** Follow a job with poll_job from ``offset`` until it is not running and no page is left; its poll_job answers. */
async function followJob(client, facts) {
  const deadline = Date.now() + JOB_DEADLINE_MS;
  const pages = [];
  let { jobId, status, nextOffset } = facts;
  let offset = nextOffset ?? 0;
  while (status === 'running' || nextOffset !== null) {
    if (Date.now() > deadline) throw new Error(`${jobId} still ${status} after ${JOB_DEADLINE_MS / 1000} s`);
    if (status === 'running') await sleep(100);
    const result = await call(client, 'poll_job', { job_id: jobId, offset });
    pages.push(result);
    const next = jobFacts(result);
    if (!next) throw new Error(`poll_job answer without job facts: ${shown(textOf(result))}`);
    ({ status, nextOffset } = next);
    if (status !== 'running' && nextOffset === offset) throw new Error(`${jobId} ended, but next_offset stays at ${offset}`);
    if (nextOffset !== null) offset = nextOffset;
  }
  return { status, pages };
}

/** execute_code as a host runs it: an answer that is a running job is followed with poll_job to
 * its end. Every answer, in order. */
async function execute(client, code) {
  const first = await call(client, 'execute_code', { code });
  const facts = jobFacts(first);
  if (!facts || facts.status !== 'running') return [first];
  return [first, ...(await followJob(client, facts)).pages];
}

const joined = (answers) => answers.map(textOf).join('\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function mcpErrorCode(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return typeof err?.code === 'number' ? err.code : `not a JSON-RPC error (${err?.message ?? err})`;
  }
}

// ---- the server's isolated tree --------------------------------------------------------------

function prepareTree(root) {
  const config = join(root, 'config');
  const docs = join(config, 'docs');
  mkdirSync(join(docs, 'ts'), { recursive: true });
  mkdirSync(join(root, 'runtime'), { recursive: true, mode: 0o700 });
  // promote_after is small so a job happens at once; the job's code waits on a flag file, so it
  // is still running then however fast the machine is.
  writeFileSync(join(config, 'config.toml'), [
    '[kernel]', 'promote_after = 1.0', '',
    '[server]', `state_dir = ${JSON.stringify(join(root, 'state'))}`, `runtime_dir = ${JSON.stringify(join(root, 'runtime'))}`, '',
  ].join('\n'));
  // A local index with more entries than one resources/list page; the shipped docs still show
  // in its New-shipped tail.
  const lines = ['# TS client index', '', '## Paging'];
  for (let i = 1; i <= PAGING_DOCS; i++) {
    const id = `ts/paging-${String(i).padStart(3, '0')}`;
    writeFileSync(join(docs, `${id}.md`), `# Paging doc ${i}\n\nBody of paging doc ${i}.\n`);
    lines.push(`- ${id}: paging doc ${i}`);
  }
  writeFileSync(join(docs, 'index.md'), `${lines.join('\n')}\n`);
  mkdirSync(workDir(root), { recursive: true });
  writeFileSync(join(workDir(root), WORK_FILE), 'not an image');
  return { BIOPB_CONFIG_DIR: config };
}

/** The server's working directory: what it offers for a prompt's file argument. */
const workDir = (root) => join(root, 'work');

function tokenFile(runtime) {
  // The runtime dir is ours and private, so the server writes into it; were it not, into its
  // biopb-mcp-<uid> subdir.
  for (const dir of [runtime, join(runtime, `biopb-mcp-${process.getuid()}`)]) {
    if (!existsSync(dir)) continue;
    const name = readdirSync(dir).find((f) => /^http-token-\d+$/.test(f));
    if (name) return join(dir, name);
  }
  return null;
}

/** Start ``command --transport http --port 0`` and wait for the URL it prints on stderr. */
async function startHttpServer(command, env, log, cwd) {
  const child = spawn(command[0], [...command.slice(1), '--transport', 'http', '--port', '0'], {
    env, cwd, stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL on stderr within 60 s:\n${log.text}`)), 60_000);
    child.stderr.on('data', (chunk) => {
      log.text += chunk;
      const match = /serving streamable HTTP at (http:\/\/\S+)/.exec(log.text);
      if (match) { clearTimeout(timer); resolve(match[1]); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${log.text}`)); });
  });
  return { child, url };
}

async function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

/** A JSON-RPC answer read from a raw POST: plain JSON or the first SSE ``data:`` event. */
async function rpcBody(response) {
  const text = await response.text();
  if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = text.split('\n').find((line) => line.startsWith('data:') && line.length > 5);
    return data ? JSON.parse(data.slice(5)) : null;
  }
  return text ? JSON.parse(text) : null;
}

// ---- the checks ------------------------------------------------------------------------------

async function sessionChecks(client, sdk, root) {
  const { ResourceUpdatedNotificationSchema, PromptListChangedNotificationSchema } = sdk.types;
  const indexText = (await client.readResource({ uri: INDEX_URI })).contents[0].text;

  await check('initialize: instructions carry the doc index', () => {
    const instructions = client.getInstructions() ?? '';
    if (!instructions.includes('start_kernel')) return `no start_kernel in the instructions: ${shown(instructions)}`;
    const entries = indexText.split('\n').filter((l) => l.startsWith('- '));
    const missing = entries.filter((l) => !instructions.includes(l));
    if (entries.length < PAGING_DOCS) return `the index resource lists ${entries.length} entries`;
    return missing.length ? `${missing.length} index lines missing, e.g. ${shown(missing[0])}` : '';
  });

  await check('tools/list: every tool, described, no outputSchema', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    const missing = TOOLS.filter((n) => !names.includes(n));
    if (missing.length) return `missing ${missing.join(', ')}`;
    const bad = tools.filter((t) => !t.description || !t.inputSchema || t.outputSchema);
    return bad.length ? `no description/inputSchema or an outputSchema on ${bad.map((t) => t.name).join(', ')}` : '';
  });

  await check('a kernel tool before start_kernel: isError naming start_kernel', async () => {
    const result = await call(client, 'execute_code', { code: '1' });
    return result.isError && textOf(result).includes('start_kernel') ? '' : `isError=${result.isError} ${shown(textOf(result))}`;
  });

  await check('start_kernel: the kernel is ready', async () => {
    const result = await call(client, 'start_kernel');
    return !result.isError && /Kernel ready/.test(textOf(result)) ? '' : `${shown(textOf(result))}`;
  });

  // Each of these calls may outlive promote_after on a slow machine; execute() then follows its
  // job to the end, as a host does, and the checks read every answer.
  const printed = await execute(client, 'print("hello from ts")\n6 * 7');
  await check('execute_code: printed output and the result', () => {
    const text = joined(printed);
    return !printed.at(-1).isError && text.includes('hello from ts') && text.includes('42') ? '' : shown(text);
  });
  await check('execute_code: ends with [job-N: ok]', () => jobLineWhy(printed.at(-1), 'ok'), { contract: true });

  const raised = await execute(client, 'raise ValueError("boom-42")');
  await check('execute_code raising: isError with ename and evalue', () => {
    const text = joined(raised);
    const { isError } = raised.at(-1);
    return isError === true && text.includes('ValueError') && text.includes('boom-42') ? '' : `isError=${isError} ${shown(text)}`;
  });
  await check('execute_code raising: ends with [job-N: error]', () => jobLineWhy(raised.at(-1), 'error'), { contract: true });

  const figure = await execute(client, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
  await check('execute_code figure: an image/png content block', () => {
    const images = figure.flatMap((r) => (r.content ?? []).filter((c) => c.type === 'image'));
    if (figure.at(-1).isError) return `isError: ${shown(joined(figure))}`;
    if (images.length === 0) return `no image block: ${shown(joined(figure))}`;
    const png = Buffer.from(images[0].data, 'base64');
    if (images[0].mimeType !== 'image/png') return `mimeType ${images[0].mimeType}`;
    return png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) ? '' : 'data is not a PNG';
  });
  await check('execute_code figure: the text names the saved PNG file', () => {
    const match = /saved to (\/\S+?\.png)\b/.exec(joined(figure));
    if (!match) return `no "saved to /….png" in ${shown(joined(figure))}`;
    return existsSync(match[1]) ? '' : `${match[1]} does not exist`;
  }, { contract: true });

  // A job: the code cannot end before the flag file exists, and the flag is made only after
  // execute_code answered, so the call is promoted whatever the machine's speed.
  const flag = join(root, 'job-flag');
  const started = await call(client, 'execute_code', {
    code: `import os, time\nprint("job started", flush=True)\nwhile not os.path.exists(${JSON.stringify(flag)}):\n    time.sleep(0.02)\nprint("job done")`,
  });
  writeFileSync(flag, '');
  await check('execute_code promoted to a job: ends with [job-N: running, next_offset=K]', () => {
    const why = jobLineWhy(started, 'running');
    return why || (JOB_LINE.exec(lastLine(textOf(started)))[3] === undefined ? 'no next_offset while running' : '');
  }, { contract: true });
  let followed = null;
  await check('job: poll_job(job_id, offset) follows it to ok with all its output', async () => {
    const facts = jobFacts(started);
    if (!facts || facts.status !== 'running') return `not a running job: ${shown(textOf(started))}`;
    followed = await followJob(client, facts);
    const all = [started, ...followed.pages].map(textOf).join('\n');
    if (followed.status !== 'ok') return `ended ${followed.status}`;
    return all.includes('job started') && all.includes('job done') ? '' : `output incomplete: ${shown(all)}`;
  });
  await check('poll_job: every answer ends with the job line, the last one [job-N: ok]', () => {
    if (!followed?.pages.length) return 'no poll_job answer to look at';
    const bad = followed.pages.find((p) => !JOB_LINE.test(lastLine(textOf(p))));
    return bad ? `last line ${shown(lastLine(textOf(bad)))}` : jobLineWhy(followed.pages.at(-1), 'ok');
  }, { contract: true });

  await check('interrupt_kernel stops a running job: it ends interrupted', async () => {
    const running = await call(client, 'execute_code', { code: 'import time\nwhile True:\n    time.sleep(0.02)' });
    const facts = jobFacts(running);
    if (!facts || facts.status !== 'running') return `not a running job: ${shown(textOf(running))}`;
    const stopped = await call(client, 'interrupt_kernel');
    if (stopped.isError || !/Interrupted/.test(textOf(stopped))) return `interrupt_kernel: ${shown(textOf(stopped))}`;
    const end = await followJob(client, facts);
    return end.status === 'interrupted' ? '' : `ended ${end.status}`;
  });

  await check('inspect_object, server_status, read_doc, search_docs answer', async () => {
    const answers = await Promise.all([
      call(client, 'inspect_object', { path: 'len' }),
      call(client, 'server_status'),
      call(client, 'read_doc', { id: 'ts/paging-007' }),
      call(client, 'search_docs', { query: 'paging doc 7' }),
    ]);
    const bad = answers.find((r) => r.isError || !textOf(r));
    return bad ? shown(textOf(bad)) : '';
  });

  let listed = [];
  await check('resources/list: paged with a cursor, the index first, no duplicates', async () => {
    let cursor;
    let pages = 0;
    do {
      const page = await client.listResources(cursor === undefined ? {} : { cursor });
      listed.push(...page.resources.map((r) => r.uri));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== undefined && pages < 50);
    if (pages < 2) return `one page only (${listed.length} resources)`;
    if (listed[0] !== INDEX_URI) return `first is ${listed[0]}`;
    if (new Set(listed).size !== listed.length) return 'a resource listed twice';
    const want = `biopb://docs/ts/paging-${PAGING_DOCS}`;
    return listed.includes(want) && listed.includes('biopb://docs/authoring') ? '' : `${want} or a shipped doc missing`;
  });

  await check('resources/read: the index and a local and a shipped doc, as markdown', async () => {
    const read = async (uri) => (await client.readResource({ uri })).contents[0];
    const [index, local, shipped] = await Promise.all([INDEX_URI, 'biopb://docs/ts/paging-042', 'biopb://docs/authoring'].map(read));
    if (index.mimeType !== 'text/markdown' || !index.text.includes('- ts/paging-042: paging doc 42')) return `index: ${shown(index.text)}`;
    if (!local.text.includes('Body of paging doc 42.')) return `local doc: ${shown(local.text)}`;
    return shipped.text.length > 200 ? '' : `shipped doc: ${shown(shipped.text)}`;
  });

  await check('resources/read of an unknown doc: JSON-RPC error -32602', async () => {
    const code = await mcpErrorCode(client.readResource({ uri: 'biopb://docs/ts/no-such-doc' }));
    return code === -32602 ? '' : `got ${code}`;
  });

  await check('resources/templates/list: biopb://docs/{+id}', async () => {
    const { resourceTemplates } = await client.listResourceTemplates();
    return resourceTemplates.some((t) => t.uriTemplate === 'biopb://docs/{+id}') ? '' : JSON.stringify(resourceTemplates);
  });

  // Subscribe to the index, write a doc, count the index's resources/updated notifications.
  const updates = [];
  let firstUpdate;
  let probeUpdate;
  const gotFirst = new Promise((resolve) => { firstUpdate = resolve; });
  const gotProbe = new Promise((resolve) => { probeUpdate = resolve; });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    if (n.params.uri === `biopb://docs/${PROBE_ID}`) probeUpdate();
    if (n.params.uri !== INDEX_URI) return;
    updates.push(Date.now());
    firstUpdate();
  });
  await client.subscribeResource({ uri: INDEX_URI });
  await client.subscribeResource({ uri: `biopb://docs/${PROBE_ID}` });
  const written = await call(client, 'write_doc', { id: 'ts/subscribed', body: '# Subscribed\n\nWritten by the TS client.\n' });
  await check('write_doc: creates the doc, answers with the diff', () => (
    !written.isError && textOf(written).includes('+Written by the TS client.') ? '' : shown(textOf(written))));
  await check('subscribe to the index, write_doc: notifications/resources/updated arrives', async () => {
    const arrived = await Promise.race([gotFirst.then(() => true), sleep(30_000).then(() => false)]);
    return arrived ? '' : 'none within 30 s';
  });
  // Before counting, the server's watcher looks at the disk again for certain: a hand edit of a
  // subscribed doc, which only the watcher can announce, is made and waited for. One session's
  // notifications arrive in order, so a second announcement of the write would have come first.
  writeFileSync(join(root, 'config', 'docs', `${PROBE_ID}.md`), '# Paging doc 1\n\nEdited by hand after the write.\n');
  const looked = await Promise.race([gotProbe.then(() => true), sleep(30_000).then(() => false)]);
  await check('exactly one resources/updated for the index per write_doc (counted once the watcher looked again)', () => {
    if (!looked) return 'a hand edit of a subscribed doc was not announced within 30 s';
    return updates.length === 1 ? '' : `${updates.length} arrived, ${updates.map((t) => t - updates[0]).join(', ')} ms after the first`;
  }, { contract: true });

  await check('unknown tool: JSON-RPC error -32602, not a result', async () => {
    const code = await mcpErrorCode(call(client, 'no_such_tool'));
    return code === -32602 ? '' : `got ${code === null ? 'a result' : code}`;
  }, { contract: true });

  await check('bad arguments: an error naming the argument, no traceback', async () => {
    for (const args of [{}, { code: 5 }]) {
      let text;
      try {
        const result = await call(client, 'execute_code', args);
        if (!result.isError) return `${JSON.stringify(args)}: not an error: ${shown(textOf(result))}`;
        text = textOf(result);
      } catch (err) {
        if (err?.code !== -32602) throw err;
        text = err.message;
      }
      if (!text.includes('code') || text.includes('Traceback')) return `${JSON.stringify(args)}: ${shown(text)}`;
    }
    return '';
  });

  const caps = client.getServerCapabilities() ?? {};
  await check('prompts: advertised only when served; list, get, unknown name -32602', async () => {
    if (!caps.prompts) {
      // Not advertised: then there must be no prompt to find (an error or an empty list).
      const listed = await client.listPrompts().catch(() => ({ prompts: [] }));
      return listed.prompts.length ? `${listed.prompts.length} prompts served but prompts not advertised` : '';
    }
    const { prompts } = await client.listPrompts();
    if (prompts.length === 0) return 'prompts advertised, prompts/list is empty';
    const code = await mcpErrorCode(client.getPrompt({ name: 'no-such-prompt' }));
    return code === -32602 ? '' : `prompts/get of an unknown name: got ${code}`;
  }, { contract: true });

  await check('prompts: a shipped procedure is listed with its inputs; get embeds its doc', async () => {
    if (!caps.prompts?.listChanged) return `prompts capability ${JSON.stringify(caps.prompts)}: no listChanged`;
    const { prompts } = await client.listPrompts();
    const nuclei = prompts.find((p) => p.name === 'segment-nuclei');
    if (!nuclei) return `no segment-nuclei among ${prompts.map((p) => p.name).join(', ')}`;
    if (prompts.some((p) => ['kernel', 'authoring', 'outputs', 'data'].includes(p.name))) return 'a reference doc is a prompt';
    if (!nuclei.arguments?.some((a) => a.name === 'image')) return `arguments: ${JSON.stringify(nuclei.arguments)}`;
    const got = await client.getPrompt({ name: 'segment-nuclei', arguments: { image: WORK_FILE } });
    const [request, doc] = got.messages ?? [];
    if (request?.content?.type !== 'text' || !request.content.text.includes(`image: ${WORK_FILE}`)) {
      return `first message: ${shown(JSON.stringify(request))}`;
    }
    const resource = doc?.content?.type === 'resource' ? doc.content.resource : null;
    if (resource?.uri !== 'biopb://docs/segment-nuclei' || resource.mimeType !== 'text/markdown'
      || !resource.text.includes('## Inputs')) return `second message: ${shown(JSON.stringify(doc))}`;
    return '';
  });

  await check('completion/complete: doc ids for the docs template, files for a file argument', async () => {
    if (!caps.completions) return 'completions not advertised';
    const ids = await client.complete({ ref: { type: 'ref/resource', uri: 'biopb://docs/{+id}' },
      argument: { name: 'id', value: 'ts/paging-11' } });
    const want = Array.from({ length: 10 }, (_, i) => `ts/paging-11${i}`);
    if (JSON.stringify(ids.completion.values) !== JSON.stringify(want) || ids.completion.total !== 10) {
      return `ids: ${JSON.stringify(ids.completion)}`;
    }
    const files = await client.complete({ ref: { type: 'ref/prompt', name: 'segment-nuclei' },
      argument: { name: 'image', value: 'cells' } });
    return JSON.stringify(files.completion.values) === JSON.stringify([WORK_FILE]) ? '' : `files: ${JSON.stringify(files.completion)}`;
  });

  let promptsChanged;
  const gotPromptsChanged = new Promise((resolve) => { promptsChanged = resolve; });
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => promptsChanged());
  await check('write_doc of a procedure under Procedures: prompts/list_changed, then it is a prompt', async () => {
    const result = await call(client, 'write_doc', { id: 'ts/count-cells', body: COUNT_CELLS, section: 'Procedures' });
    if (result.isError) return shown(textOf(result));
    const arrived = await Promise.race([gotPromptsChanged.then(() => true), sleep(30_000).then(() => false)]);
    if (!arrived) return 'no notifications/prompts/list_changed within 30 s';
    const { prompts } = await client.listPrompts();
    const added = prompts.find((p) => p.name === 'ts.count-cells');
    if (!added) return `ts.count-cells not listed: ${prompts.map((p) => p.name).join(', ')}`;
    const code = await mcpErrorCode(client.getPrompt({ name: 'ts.count-cells' }));
    return code === -32602 ? '' : `get without its required argument: got ${code}`;
  });

  await check('no tool result carries structuredContent', () => {
    const carrying = [...new Set(toolResults.filter((r) => r.result.structuredContent !== undefined).map((r) => r.name))];
    return carrying.length ? `from ${carrying.join(', ')}` : '';
  }, { contract: true });
}

async function httpOnlyChecks(url, token) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ts-raw', version: '0' } },
  };
  await check('HTTP without the bearer token: 401', async () => {
    const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(init) });
    await response.text();
    return response.status === 401 ? '' : `HTTP ${response.status}`;
  });
  await check('HTTP batch request (JSON array): JSON-RPC error -32600', async () => {
    const auth = { ...headers, authorization: `Bearer ${token}` };
    const opened = await fetch(url, { method: 'POST', headers: auth, body: JSON.stringify(init) });
    await rpcBody(opened);
    const session = opened.headers.get('mcp-session-id');
    const inSession = { ...auth, 'mcp-protocol-version': '2025-06-18', ...(session ? { 'mcp-session-id': session } : {}) };
    await fetch(url, { method: 'POST', headers: inSession, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })
      .then((r) => r.text());
    const batch = [{ jsonrpc: '2.0', id: 2, method: 'ping' }, { jsonrpc: '2.0', id: 3, method: 'tools/list' }];
    const response = await fetch(url, { method: 'POST', headers: inSession, body: JSON.stringify(batch) });
    const body = await rpcBody(response);
    if (session) await fetch(url, { method: 'DELETE', headers: inSession }).then((r) => r.text());
    const code = body?.error?.code;
    return code === -32600 ? '' : `HTTP ${response.status}, ${shown(JSON.stringify(body))}`;
  }, { contract: true });
}

// ---- main ------------------------------------------------------------------------------------

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const load = sdkLoader(opts.sdk);
  const sdk = {
    client: await load('client/index.js'),
    stdio: await load('client/stdio.js'),
    http: await load('client/streamableHttp.js'),
    types: await load('types.js'),
  };
  const ownRoot = opts.root === null;
  const root = ownRoot ? mkdtempSync(join(tmpdir(), 'biopb-ts-client-')) : opts.root;
  const env = { ...process.env, ...prepareTree(root) };
  const log = { text: '' };
  const began = Date.now();
  const client = new sdk.client.Client({ name: 'biopb-ts-client-check', version: '1.0.0' }, { capabilities: {} });
  let server = null;
  let transport;
  try {
    if (opts.transport === 'stdio') {
      transport = new sdk.stdio.StdioClientTransport({
        command: opts.command[0], args: opts.command.slice(1), env, stderr: 'pipe', cwd: workDir(root),
      });
      transport.stderr.on('data', (chunk) => { log.text += chunk; });
      await client.connect(transport);
      await check('initialize over stdio', () => (client.getServerVersion()?.name ? '' : 'no serverInfo'));
      await sessionChecks(client, sdk, root);
    } else {
      server = await startHttpServer(opts.command, env, log, workDir(root));
      const file = tokenFile(join(root, 'runtime'));
      const token = file && readFileSync(file, 'utf8').trim();
      await check('HTTP: bearer token file in the runtime dir', () => (token ? '' : `no http-token-<pid> in ${join(root, 'runtime')}`));
      transport = new sdk.http.StreamableHTTPClientTransport(new URL(server.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      await client.connect(transport);
      await check('initialize over streamable HTTP with the bearer token', () => (client.getServerVersion()?.name ? '' : 'no serverInfo'));
      await sessionChecks(client, sdk, root);
      await httpOnlyChecks(server.url, token);
    }
  } catch (err) {
    record('the session ran to its end', false, err?.stack ?? String(err));
  } finally {
    await client.close().catch(() => {});
    if (server) await stopProcess(server.child);
  }
  const failed = outcomes.filter((o) => !o.ok);
  console.log(`ts_client over ${opts.transport}: ${outcomes.length} checks, ${outcomes.length - failed.length} ok, `
    + `${failed.length} failing (${((Date.now() - began) / 1000).toFixed(1)} s)`);
  if (failed.length) console.log(`--- server stderr (last 4000 chars) ---\n${log.text.slice(-4000)}`);
  if (ownRoot) rmSync(root, { recursive: true, force: true });
  process.exit(failed.length ? 1 : 0);
}

await main();

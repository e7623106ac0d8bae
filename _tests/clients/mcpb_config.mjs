// Resolve a bundle manifest's server command the way Claude Desktop does, with the official
// @anthropic-ai/mcpb package's own resolver (getMcpConfigForManifest: user_config defaults,
// then the user's values, substituted into command, args and env), and print it as JSON.
// node mcpb_config.mjs <node_modules> <manifest.json> <bundle dir> [user config JSON]
import { readFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, manifestPath, bundleDir, userConfig] = process.argv.slice(2);
const { getMcpConfigForManifest } = await import(
  pathToFileURL(join(modules, '@anthropic-ai', 'mcpb', 'dist', 'shared', 'config.js')).href
);
const manifest = JSON.parse(readFileSync(manifestPath, 'utf-8'));
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: bundleDir,
  systemDirs: {},
  userConfig: userConfig ? JSON.parse(userConfig) : {},
  pathSeparator: sep,
});
if (!config) {
  console.error('mcpb resolved no server config (a required user_config value is missing?)');
  process.exit(1);
}
process.stdout.write(JSON.stringify(config) + '\n');
